"""Solve the four structural-corpus assumptions that §3.4–§3.5 pin down (docs/design.md §7, *Solved from §3.4–§3.5*).

The paper publishes, across its five multi-agent benchmarks, the range of four statistics that each move with
one assumption of :class:`lachesis.traces.workloads.StructuralPreset` the paper does not give:

  waves_scale               <- lead/worker median T_norm                  §3.4 "4.0–6.1×"
  review_reasoning_tokens   <- lead/reviewer median T_norm                §3.4 "4.7–38.3×"
  lead_reasoning_tokens     <- lead waiting share                         §3.4 "71–88%"
  worker_observation_sigma  <- Kendall τ(worker T_norm, worker writes)   §3.5 "0.51–0.72"

Each takes one value for every benchmark, solved so that the statistic's median over the five benchmarks sits
at the centre of the paper's range (geometric for the ratio, arithmetic for the share).  Where the centre is out
of reach the value is the smallest that brings every benchmark inside the range: τ, which a per-worker
observation size lowers only to a median near 0.65 (writes keep the worker's prompt and reasoning, which track
its rounds).  One bracketed root (scipy's brentq) per parameter, the three swept in turn until none moves, on the
corpus at ``--scale``/``--seed``.  The statistics are the package's own (lachesis.analysis.characterize), so the
solve reads exactly what the figures report; no evaluation output (lifetime, gain) enters.  It prints the
values; they are the presets' defaults, and tests/analysis/test_corpus_statistics.py checks that they still
solve the equations.

    .venv/bin/python scripts/solve_structural.py            # a few minutes on 2 cores
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from statistics import median

from scipy import optimize

from lachesis import paper
from lachesis.analysis import characterize as C
from lachesis.analysis.ranker import worker_lifetimes
from lachesis.kv import STRUCTURAL_CLASSES
from lachesis.traces import workloads

#: parameter -> (statistic column, what of its per-benchmark values is solved, its target, the bracket searched,
#: whether the search runs on a log scale)
EQUATIONS = {
    "waves_scale": ("lead_over_worker", median, math.sqrt(math.prod(paper.LEAD_OVER_WORKER_MEDIAN_TNORM)),
                    (0.2, 2.5), True),
    "review_reasoning_tokens": ("lead_over_reviewer", median,
                                math.sqrt(math.prod(paper.LEAD_OVER_REVIEWER_MEDIAN_TNORM)), (30.0, 4_000.0), True),
    "lead_reasoning_tokens": ("lead_waiting_share", median, sum(paper.LEAD_WAITING_SHARE) / 2, (30.0, 4_000.0),
                              True),
    "worker_observation_sigma": ("kendall_tau_tnorm_vs_writes", max, paper.WORKER_TNORM_VS_TOKENS_KENDALL[1],
                                 (0.0, 1.2), False),
}


def medians(values: dict[str, float], scale: float, seed: int) -> dict[str, float]:
    """The solved summary (median or max over the benchmarks) of each statistic with the presets set to ``values``."""
    base = {k: dataclasses.replace(p, **values) for k, p in ORIGINAL.items()}
    workloads.STRUCTURAL_PRESETS.update(base)
    _, seg, sched = C.load_recovered(["multi_agent"], "", scale, seed)
    tab = C.structural_table(seg[seg["seg_class"].isin(STRUCTURAL_CLASSES)]).merge(
        C.worker_heterogeneity_table(worker_lifetimes(seg), sched), on="group")
    return {col: float(summary(tab[col])) for col, summary, _, _, _ in EQUATIONS.values()}


def solve(scale: float, seed: int, sweeps: int = 4) -> dict[str, float]:
    values = {k: float(getattr(next(iter(ORIGINAL.values())), k)) for k in EQUATIONS}
    for sweep in range(sweeps):
        before = dict(values)
        for name, (col, _, target, (lo, hi), log) in EQUATIONS.items():
            def gap(x: float, name: str = name, col: str = col, target: float = target, log: bool = log) -> float:
                got = medians(values | {name: math.exp(x) if log else x}, scale, seed)[col]
                print(f"  {name} = {math.exp(x) if log else x:.4g}: {col} {got:.4f} (target {target:.4f})",
                      file=sys.stderr)
                return (math.log(got / target) if log else got - target)
            a, b = (math.log(lo), math.log(hi)) if log else (lo, hi)
            x = optimize.brentq(gap, a, b, xtol=1e-3, rtol=1e-3)
            values[name] = float(f"{math.exp(x):.4g}") if log else round(x, 3)
        print(f"sweep {sweep}: {values}", file=sys.stderr)
        if all(abs(values[k] - before[k]) <= (0.01 if not EQUATIONS[k][4] else 0.01 * before[k]) for k in values):
            break
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    values = solve(args.scale, args.seed)
    print(values)
    print(medians(values, args.scale, args.seed))


ORIGINAL = dict(workloads.STRUCTURAL_PRESETS)

if __name__ == "__main__":
    main()
