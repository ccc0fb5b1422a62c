"""How much the Fig. 9–12 gains move across seeds, cell by cell: the replication noise behind every interval.

The notebooks draw each lifetime and gain as the median over seeds with its min–max; this prints the
per-cell detail behind those whiskers.  It runs the notebooks' paper-scale grids (``paper`` preset,
seeds 0–2, each seed at seed 0's load) through :mod:`lachesis.evaluation.sweep`; after ``make reproduce`` every
point is read back from the cache, nothing is recomputed.  A seed changes the synthetic corpus draw,
the reference clock's delays and the simulator's session order; the load stays the first seed's N*.
Not a test: a measurement to read next to the figures.

    .venv/bin/python benchmarks/seed_spread.py [--seeds 0 1 2] [--cache build/sweep_cache_paper]
        [--which multi single] [--n-jobs 2]

Measurements: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from lachesis.cli import jobs
from lachesis.evaluation import grid, sweep, tables
from lachesis.node import capacity


def grid_points(which: str, seeds: list[int]) -> list[grid.Point]:
    return grid.multi_agent_grid(1.0, seeds) if which == "multi" else grid.single_agent_grid(1.0, seeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cache", default="build/sweep_cache_paper")
    ap.add_argument("--which", nargs="+", default=["multi", "single"], choices=["multi", "single"])
    ap.add_argument("--n-jobs", type=jobs, default=2, help="worker processes, a whole number >= 1 (default 2)")
    a = ap.parse_args()
    pd.set_option("display.width", 200)
    for which in a.which:
        t = time.perf_counter()
        df = sweep.run_grid(grid_points(which, a.seeds), capacity.PAPER, a.cache, n_jobs=a.n_jobs, progress=False,
                            load="per_cell")  # the rule its recorded results used
        print(f"[{which}] {len(df)} runs in {time.perf_counter() - t:.0f} s")
        r = tables.ratio_table(df)
        wide = r.pivot_table(index=grid.CELL, columns="seed", values="lachesis/hbm_first")
        spread = wide.max(axis=1) / wide.min(axis=1) - 1
        cv = wide.std(axis=1, ddof=1) / wide.mean(axis=1)
        print(f"\n[{which}] Lachesis/HBM-first per cell and seed (spread = max/min - 1, cv = std/mean):")
        print(wide.round(2).assign(spread=spread.round(3), cv=cv.round(3)).to_string())
        print(f"[{which}] gain spread per cell: median {spread.median():.1%}, max {spread.max():.1%}; "
              f"cv median {cv.median():.1%}")
        life = df.pivot_table(index=grid.CELL + ["policy"], columns="seed", values="lifetime_years")
        ls = life.max(axis=1) / life.min(axis=1) - 1
        print(f"[{which}] lifetime spread per run: median {ls.median():.1%}, max {ls.max():.1%} "
              f"(by policy: {ls.groupby(level='policy').median().round(3).to_dict()})")
        met = df.groupby("seed")["slo_met"].mean()
        print(f"[{which}] share of runs meeting the SLO at the first seed's load, per seed: "
              f"{met.round(3).to_dict()}; HBF write traffic settled in {df['settled'].mean():.1%} of runs\n")


if __name__ == "__main__":
    main()
