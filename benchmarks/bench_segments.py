"""Speed of segment recovery (``lachesis.segments.recover``): requests/s and segments/s at two scales.

On the embedded synthetic corpus (``lachesis.corpus``: τ³-bench, BFCLv4 and the multi-agent
workloads, each on its own reference clock).  Scale 1 is the paper's Table 3 session counts.

    .venv/bin/python benchmarks/bench_segments.py [--scales 0.1 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from lachesis.segments import load_trace, recover

WORKLOADS = ("tau3", "bfcl", "multi_agent")


def main() -> None:

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for scale in a.scales:
        tr, what = load_trace(WORKLOADS, scale, a.seed), "lachesis.corpus (" + " + ".join(WORKLOADS) + ")"
        t0 = time.perf_counter()
        seg = recover(tr, seed=a.seed)
        dt = time.perf_counter() - t0
        n_req, n_seg = len(tr.requests), len(seg.segments)
        print(f"scale {scale:g} [{what}]: {tr.requests['session_id'].nunique()} sessions, {n_req} requests, "
              f"{n_seg} segments, {len(seg.reads)} read rows in {dt:.2f} s -> "
              f"{n_req / dt:,.0f} requests/s, {n_seg / dt:,.0f} segments/s")


if __name__ == "__main__":
    main()
