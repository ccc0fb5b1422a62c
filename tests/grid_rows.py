"""A hand-made Figs. 9–12 grid (the rows :func:`lachesis.evaluation.sweep.run_grid` returns), small enough to check
by eye."""

from __future__ import annotations

import pandas as pd

#: (memory, seed) -> policy -> (lifetime in years, HBM bytes of 10, SLO met)
RUNS = {
    ("1/7", 0): {"hbm_first": (2.0, 2, True), "lachesis": (3.0, 4, True), "oracle": (4.0, 5, True)},
    ("1/7", 1): {"hbm_first": (2.0, 2, True), "lachesis": (2.5, 3, False), "oracle": (3.0, 4, True)},
    ("4/4", 0): {"hbm_first": (1.0, 1, True), "lachesis": (4.0, 6, False), "oracle": (5.0, 7, True)},
    ("4/4", 1): {"hbm_first": (1.5, 1, True), "lachesis": (4.5, 6, True), "oracle": (5.5, 7, True)},
}
#: memory -> (the bound's lifetime, its HBM share), solved on the run that sized the load (seed 0)
BOUND = {"1/7": (6.0, 0.5), "4/4": (8.0, 0.8)}


def grid(workload: str = "multi_agent", model: str = "m", slo: str = "tight") -> pd.DataFrame:
    rows = []
    for (mem, seed), runs in RUNS.items():
        for pol, (life, hbm, met) in runs.items():
            row = dict(workload=workload, model=model, slo=slo, memory=mem, policy=pol, seed=seed, load_seed=0,
                       n_star=8, n_sessions=8 if mem == "1/7" else 6, slo_met=met, settled=seed == 0,
                       slo_p99_tpot_s=0.03 * (1 + seed), lifetime_years=life, bytes_hbm=float(hbm),
                       bytes_hbf=float(10 - hbm), bytes_lead_hbm=float(hbm), bytes_lead_hbf=0.0,
                       bytes_worker_hbm=0.0, bytes_worker_hbf=float(10 - hbm))  # leads in HBM, workers in HBF
            if seed == 0 and pol == "hbm_first":
                row.update(bound_lifetime_years=BOUND[mem][0], bound_hbm_share=BOUND[mem][1])
            rows.append(row)
    return pd.DataFrame(rows)
