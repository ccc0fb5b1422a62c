"""Speed of corpus generation and segment recovery (``lachesis.analysis.segments.recover``): requests/s and segments/s.

On the embedded synthetic corpus (``lachesis.traces.corpus``: τ³-bench, BFCLv4 and the multi-agent
workloads, each on its own reference clock).  Scale 1 is the paper's Table 3 session counts.
Writes its section of ``benchmarks/RESULTS.md`` (``--no-record``: print only).

    .venv/bin/python benchmarks/bench_segments.py [--scales 0.1 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from results import record

from lachesis.analysis.segments import load_trace, recover

WORKLOADS = ("tau3", "bfcl", "multi_agent")
TITLE = "Corpus generation and segment recovery (`benchmarks/bench_segments.py`)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-record", action="store_true", help="do not write benchmarks/RESULTS.md")
    a = ap.parse_args()
    lines = [f"workloads: {' + '.join(WORKLOADS)}"]
    for scale in a.scales:
        t0 = time.perf_counter()
        tr = load_trace(WORKLOADS, scale, a.seed)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        seg = recover(tr, seed=a.seed)
        dt = time.perf_counter() - t0
        n_req, n_seg = len(tr.requests), len(seg.segments)
        lines.append(f"scale {scale:g}: {tr.requests['session_id'].nunique()} sessions, {n_req} requests generated "
                     f"and validated in {t_gen:.2f} s ({n_req / t_gen:,.0f} requests/s); {n_seg} segments, "
                     f"{len(seg.reads)} read rows recovered in {dt:.2f} s ({n_req / dt:,.0f} requests/s, "
                     f"{n_seg / dt:,.0f} segments/s)")
        print(lines[-1], flush=True)
    if not a.no_record:
        print(f"wrote {record(TITLE, lines)}")


if __name__ == "__main__":
    main()
