"""The predictive path's worker size estimate (knob ``size_estimate``): Lachesis under each value beside
w/o predictive path and HBM-first, at fixed loads on the multi-agent trace (Maverick, tight SLO, seed 0).

Each row is one lifetime run (the grid's window, ``capacity.PAPER``) at ``n`` sessions per GPU: lifetime,
HBM's share of the window's KV write bytes, HBM's live fill (time-averaged live HBM ÷ HBM capacity), and
whether a search-length window there meets the SLO.  ``--group`` runs the paper's eight-GPU node
(``group_ranks=8, landing=stall, node_start=aged``) instead of the figures' one GPU.

    .venv/bin/python benchmarks/size_estimate.py [--configs 4/4,8/8*] [--loads 74,148] [--group]
                                                 [--rows FILE.jsonl ...] [--no-record]

``--rows`` summarizes rows an earlier run printed (one JSON object a line) instead of running.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from results import record  # noqa: E402

from lachesis.evaluation import grid, plancache  # noqa: E402
from lachesis.memory.policies import SIZE_ESTIMATES  # noqa: E402
from lachesis.node import capacity  # noqa: E402
from lachesis.node import simulator as sim  # noqa: E402

TITLE = "Predictive path: the worker size estimate (`size_estimate`)"
GROUP = {"group_ranks": 8, "landing": "stall", "node_start": "aged"}


def run(mem: str, n: int, group: bool, cache_dir: str) -> list[dict]:
    rows = []
    for pol in grid.PAPER_MULTI_POLICIES:
        for est in SIZE_ESTIMATES if pol == "lachesis" else (None,):
            ov = (dict(GROUP) if group else {}) | ({"size_estimate": est} if est else {})
            pt = grid.Point("multi_agent", mem, "Llama-4-Maverick", "tight", pol, overrides=ov)
            plan, cfg = plancache.point_plan(pt, cache_dir), pt.config()
            sw, lw = capacity.PAPER.windows(plan)
            t0 = time.time()
            short, r = sim.simulate_windows(plan, cfg, pt.run_policy(), n, [sw, lw], settings=sim.RunSettings(seed=0))
            tiers = r.lifetime.bytes_by_tier
            rows.append(dict(mem=mem, n=n, group=group, policy=pt.run_policy(), years=r.lifetime.lifetime_years,
                             hbm_share=tiers["hbm"] / (tiers["hbm"] + tiers["hbf"]),
                             hbm_live_fill=r.point.live_mean["hbm"] / cfg.memory.hbm_bytes,
                             slo_met=bool(short.meets(cfg.slo)), settled=bool(r.lifetime.settled),
                             secs=time.time() - t0))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    d = pd.DataFrame(rows)
    d["policy"] = d["policy"].str.replace("lachesis:size_estimate=", "lachesis/", regex=False).replace(
        {"lachesis": "lachesis/held"})
    d["node"] = d["group"].map({True: "8-GPU group", False: "1 GPU"})
    out = []
    for (node, mem, n), g in d.groupby(["node", "mem", "n"], sort=False):
        g = g.set_index("policy")
        base, det = g.loc["hbm_first", "years"], g.loc["deterministic", "years"]
        for p, r in g.iterrows():
            out.append(dict(node=node, memory=mem, n_per_gpu=n, policy=p, years=r["years"],
                             gain=r["years"] / base, over_det=r["years"] / det, hbm_share=100 * r["hbm_share"],
                             hbm_fill=100 * r["hbm_live_fill"], slo_met=r["slo_met"], settled=r["settled"]))
    with pd.option_context("display.width", 200, "display.float_format", "{:.3g}".format):
        return pd.DataFrame(out).to_string(index=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="4/4,8/8*")
    ap.add_argument("--loads", default="74,148")
    ap.add_argument("--group", action="store_true")
    ap.add_argument("--rows", nargs="*", default=None)
    ap.add_argument("--cache-dir", default=str(ROOT / "build" / "sweep_cache_size"))
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args(argv)
    if a.rows:
        rows = [json.loads(line) for f in a.rows for line in Path(f).read_text().splitlines() if line.strip()]
    else:
        rows = [r for m in grid.split_csv(a.configs) for n in grid.split_csv(a.loads)
                for r in run(m, int(n), a.group, a.cache_dir)]
    text = table(rows)
    print(text)
    if not a.no_record:
        record(TITLE, ["Maverick, multi_agent, tight SLO, seed 0; gain = ÷ HBM-first, over_det = ÷ w/o predictive "
                       "path; hbm_share = % of window KV bytes written to HBM; hbm_fill = time-averaged live HBM %",
                       text])
    return 0


if __name__ == "__main__":
    sys.exit(main())
