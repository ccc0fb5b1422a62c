"""Evidence for the grid's lifetime window: what reading lifetime from a shorter run changes.

``lachesis.node.capacity.PAPER`` reads HBF lifetime from ``warmup`` 0.25 + ``measure`` 1.0 mean session
durations instead of :class:`lachesis.node.capacity.SearchParams`' 0.5 + 2.0 (a named assumption there).
This runs sample cells at their N* (HBM-first's search, seed 0, read from the grid's cache when it is
there) for several seeds and policies; each run is observed through both windows at once
(:func:`lachesis.node.simulator.simulate_windows`, each window's result equals a separate run), and it
prints the gain and lifetime of each window, their relative change, and the share of runs whose HBF
write traffic settled.  Not a test: a measurement for ``benchmarks/RESULTS.md``.

    .venv/bin/python benchmarks/lifetime_window.py [--seeds 0 1 2] [--cache build/sweep_cache_paper]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from lachesis.evaluation import grid, plancache, sweep
from lachesis.node import capacity
from lachesis.node import simulator as sim
from lachesis.node.capacity import SearchParams

#: (workload, memory, model, SLO): the multi-agent corner and middle cells, H3, one cell per single-agent trace
CELLS = [("multi_agent", "1/7", "Qwen3-235B-A22B", "tight"), ("multi_agent", "4/4", "Llama-4-Maverick", "loose"),
         ("multi_agent", "8/8*", "Qwen3-235B-A22B", "tight"), ("tau3", "1/7", "Qwen3-235B-A22B", "tight"),
         ("bfcl", "4/4", "Llama-4-Maverick", "tight")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cache", default="build/sweep_cache_paper")
    a = ap.parse_args()
    short, long_ = capacity.PAPER, SearchParams()
    rows = []
    for wl, mem, model, slo in CELLS:
        n = sweep.evaluate_point(grid.Point(wl, mem, model, slo, "hbm_first"), short, a.cache)["n_star"]
        pols = ["hbm_first", "deterministic", "lachesis"] if wl.startswith("multi") else ["hbm_first", "lachesis"]
        for seed in a.seeds:
            plan = plancache.workload_plan(wl, 1.0, seed)
            wins = [short.lifetime_window(plan), long_.lifetime_window(plan)]
            for pol in pols:
                cfg = grid.Point(wl, mem, model, slo, pol).config()
                res = list(sim.simulate_windows(plan, cfg, pol, n, wins, settings=sim.RunSettings(seed=seed)))
                rows.append(dict(workload=wl, memory=mem, model=model, slo=slo, seed=seed, policy=pol, n=n,
                                 short=res[0].lifetime.lifetime_years, long=res[1].lifetime.lifetime_years,
                                 settled_short=res[0].lifetime.settled, settled_long=res[1].lifetime.settled))
                print(rows[-1], flush=True)
    d = pd.DataFrame(rows)
    g = d.pivot_table(index=["workload", "memory", "model", "slo", "seed"], columns="policy", values=["short", "long"])
    gain = pd.DataFrame({w: g[w]["lachesis"] / g[w]["hbm_first"] for w in ("short", "long")})
    rel = gain["short"] / gain["long"] - 1
    life = d["short"] / d["long"] - 1
    print(gain.assign(change=rel).round(3).to_string())
    print(f"gain, short vs long window: median |change| {rel.abs().median():.1%}, max {rel.abs().max():.1%}, "
          f"mean {rel.mean():+.2%} (n = {len(rel)})")
    print(f"lifetime: median |change| {life.abs().median():.1%}, max {life.abs().max():.1%}, mean {life.mean():+.2%}")
    spread = gain["long"].groupby(level=[0, 1, 2, 3]).agg(lambda x: x.max() / x.min() - 1)
    print(f"seed spread of the long window's gain per cell: {np.round(spread.to_numpy(), 3).tolist()}")
    print(f"settled: short {d['settled_short'].mean():.0%}, long {d['settled_long'].mean():.0%} of {len(d)} runs")


if __name__ == "__main__":
    main()
