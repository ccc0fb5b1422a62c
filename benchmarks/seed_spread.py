"""How much the Fig. 9–12 gains move across seeds: the replication noise behind every per-cell ratio.

A seed changes the synthetic corpus draw, the reference clock's delays and the simulator's session
order, and so the capacity search's N* (each cell's common load) and the lifetimes read there.  This
runs the paper-scale grid (``paper`` search preset) for each seed through the same cached sweep the
notebooks use, then prints, per cell, the Lachesis/HBM-first gain per seed and its spread, and the
headline ranges the notebooks compare with the paper, per seed.  Not a test: a measurement to read next to the figures.

    .venv/bin/python benchmarks/seed_spread.py [--seeds 0 1 2] [--cache build/sweep_cache_paper]
        [--which multi single] [--n-jobs 2] [--load baseline|min|own]

Seed 0 is the committed figures' run; with the default cache it is read back, not recomputed.

Measurements: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from lachesis import sweep


def grid(which: str, seed: int) -> list[sweep.Point]:
    if which == "multi":
        return sweep.multi_agent_grid(1.0, seed)
    return sweep.single_agent_grid(1.0, seed)


def cell_gains(df: pd.DataFrame) -> pd.DataFrame:
    """Lachesis/HBM-first lifetime per (workload, model, SLO, configuration, seed)."""
    p = df.pivot_table(index=["workload", "model", "slo", "memory", "seed"], columns="policy",
                       values="lifetime_years")
    return (p["lachesis"] / p["hbm_first"]).rename("gain").reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cache", default="build/sweep_cache_paper")
    ap.add_argument("--which", nargs="+", default=["multi", "single"], choices=["multi", "single"])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--load", default="baseline", choices=sweep.LOADS, help="the load rule of lachesis.sweep")
    a = ap.parse_args()
    params = sweep.SEARCH_PRESETS["paper"]
    for which in a.which:
        frames = []
        for seed in a.seeds:
            t = time.perf_counter()
            frames.append(sweep.run_grid(grid(which, seed), params, a.cache, n_jobs=a.n_jobs, progress=False,
                                         load=a.load))
            print(f"[{which}] seed {seed}: {len(frames[-1])} points in {time.perf_counter() - t:.0f} s")
        df = pd.concat(frames, ignore_index=True)
        g = cell_gains(df)
        wide = g.pivot_table(index=["workload", "model", "slo", "memory"], columns="seed", values="gain")
        spread = wide.max(axis=1) / wide.min(axis=1) - 1
        cv = wide.std(axis=1, ddof=1) / wide.mean(axis=1) if len(a.seeds) > 1 else spread * np.nan
        out = wide.round(2).assign(mean=wide.mean(axis=1).round(2), spread=spread.round(3), cv=cv.round(3))
        print(f"\n[{which}] Lachesis/HBM-first per cell and seed (spread = max/min - 1, cv = std/mean):")
        print(out.to_string())
        print(f"[{which}] per-cell spread: median {spread.median():.1%}, max {spread.max():.1%}; "
              f"per-cell cv: median {cv.median():.1%}")
        n = df.pivot_table(index=["workload", "model", "slo", "memory", "policy"], columns="seed", values="n_star")
        n_spread = n.max(axis=1) / n.min(axis=1) - 1
        print(f"[{which}] N* spread across seeds: median {n_spread.median():.1%}, max {n_spread.max():.1%}")
        # the headline ranges per seed (1/7-4/4; what the notebooks set beside the paper's)
        co = g[g["memory"] != "8/8*"]
        keys = ["workload", "slo"] if which == "multi" else ["workload"]
        rng = co.groupby(keys + ["seed"])["gain"].agg(["min", "max"]).round(2)
        print(f"[{which}] gain range over 1/7-4/4 per seed:")
        print(rng.to_string())
        if which == "multi":
            d8 = g[g["memory"] == "8/8*"].groupby(["slo", "seed"])["gain"].agg(["min", "max"]).round(2)
            print(f"[{which}] gain on 8/8* per seed:")
            print(d8.to_string())
        print()


if __name__ == "__main__":
    main()
