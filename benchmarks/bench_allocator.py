"""Micro-benchmark: the vectorized two-tier allocator vs the per-block reference (tests/reference_blocksim.py).

Prints, per memory size, block allocations/s and block frees/s of the raw allocator (batched calls
of ``--batch`` blocks), and replayed events/s of the segment table per policy, beside the same
numbers for the one-object-per-block reference (run only at the sizes where it finishes quickly).
The replayed stream carries decode-stage reads (for ``rho_threshold``) and, annotated from the stream
itself, each segment's close time and final size (for ``oracle``).  Writes its section of
``benchmarks/RESULTS.md`` (``--no-record``: print only).

    .venv/bin/python benchmarks/bench_allocator.py [--sizes 1000 10000 1000000] [--batch 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lachesis.free_lists import TieredAllocator  # noqa: E402
from lachesis.kv import Tier  # noqa: E402
from lachesis.replay import annotate_clairvoyant, replay_events  # noqa: E402
from reference_blocksim import RefSim, reference_replay  # noqa: E402
from results import record  # noqa: E402

TITLE = "Two-tier allocator (`benchmarks/bench_allocator.py`)"

REF_MAX_BLOCKS = 20_000  # the reference scans its block list per block: skip it above this size
POLICIES = ("hbm_first", "hbm_first_reclaim", "deterministic", "lachesis", "rho_threshold", "oracle")


def bench_raw_fast(n_blocks: int, batch: int, seed: int = 0, group: int = 1) -> tuple[float, float]:
    """(blocks allocated per s, blocks freed per s): fill 90% of memory in batches of ``batch``
    blocks, then free it all, ``group`` batches per free call (a closing segment frees many)."""
    a = TieredAllocator(n_blocks // 8, n_blocks - n_blocks // 8)
    n_calls = int(0.9 * n_blocks) // batch
    rng = np.random.default_rng(seed)
    tiers = rng.integers(0, 2, n_calls)
    t0 = time.perf_counter()
    held = [a.alloc(Tier(int(t)), batch) for t in tiers]
    order = rng.permutation(len(held))
    groups = [np.concatenate([held[i] for i in order[j : j + group]]) for j in range(0, len(held), group)]
    t1 = time.perf_counter()
    for g in groups:
        a.free(g)
    t2 = time.perf_counter()
    return n_calls * batch / (t1 - t0), n_calls * batch / (t2 - t1)


def bench_raw_ref(n_blocks: int, batch: int, seed: int = 0) -> tuple[float, float]:
    """The same workload on the reference's per-block objects."""
    sim = RefSim(n_blocks // 8, n_blocks - n_blocks // 8, 16, "deterministic")
    n_calls = int(0.9 * n_blocks) // batch
    rng = np.random.default_rng(seed)
    tiers = rng.integers(0, 2, n_calls)
    owner = object()
    t0 = time.perf_counter()
    held = []
    for t in tiers:
        got = []
        for _ in range(batch):
            b = sim.free_block(int(t)) or sim.free_block(1 - int(t))
            b.owner = owner
            got.append(b)
        held.append(got)
    t1 = time.perf_counter()
    for i in rng.permutation(len(held)):
        for b in held[i]:
            b.owner = None
    t2 = time.perf_counter()
    return n_calls * batch / (t1 - t0), n_calls * batch / (t2 - t1)


def synthetic_events(n_blocks: int, block_tokens: int = 16, seed: int = 0, reads: bool = True) -> list[tuple]:
    """A churn of sessions (leads, workers, reviewers, turns) sized to keep memory ~busy; with
    ``reads``, each write is followed by a decode-stage read of a random live segment."""
    rng = np.random.default_rng(seed)
    events: list[tuple] = []
    live: list[tuple[str, str]] = []
    budget = n_blocks * block_tokens * 0.6  # tokens live at most, so no policy runs out
    live_tok: dict[str, int] = {}
    t = 0.0
    classes = np.array(["reasoning_laden", "reasoning_stripped", "lead", "worker", "worker", "reviewer"])
    for i in range(max(200, n_blocks // 4)):
        t += 1.0
        if live and (rng.random() < 0.25 or sum(live_tok.values()) > budget):
            sid, _ = live.pop(int(rng.integers(len(live))))
            live_tok.pop(sid)
            events.append((t, "close", sid))
            continue
        if live and rng.random() < 0.6:
            sid, cls = live[int(rng.integers(len(live)))]
        else:
            sid, cls = f"g{i}", str(classes[rng.integers(len(classes))])
            live.append((sid, cls))
            live_tok[sid] = 0
        tok = int(rng.integers(1, 4 * block_tokens))
        live_tok[sid] += tok
        events.append((t, "write", sid, cls, tok, f"S{int(rng.integers(8))}", float(rng.random())))
        if reads:
            rsid, _ = live[int(rng.integers(len(live)))]
            events.append((t, "read", rsid, live_tok[rsid] * int(rng.integers(1, 200))))
    return annotate_clairvoyant(events) if reads else events


def replay_rates(replay, events: list, n_blocks: int, repeat: int = 1) -> list[float]:
    """Events/s of one replay implementation under each policy (HBM gets an eighth of the blocks),
    best of ``repeat`` runs (the machine is shared: the best run is the least disturbed)."""
    rates = []
    for pol in POLICIES:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            replay(events, pol, n_blocks // 8, n_blocks - n_blocks // 8)
            best = min(best, time.perf_counter() - t0)
        rates.append(len(events) / best)
    return rates


def _cols(rates: list[float]) -> str:
    return " ".join(f"{r:>{max(len(p), 9)}.3g}" for p, r in zip(POLICIES, rates))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 1_000_000])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--group", type=int, default=32, help="alloc batches per free call in the second free column")
    p.add_argument("--repeat", type=int, default=3, help="replays per policy of the fast path; the best is printed")
    p.add_argument("--no-record", action="store_true", help="do not write benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    lines: list[str] = []

    def out(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    out(f"alloc: {args.batch} blocks per call; free: {args.batch} blocks per call, then "
        f"{args.batch * args.group} per call (the reference frees block by block either way)")
    out(f"{'blocks':>9} {'impl':>9} {'alloc blk/s':>12} {'free blk/s':>12} {'free(grp)/s':>12}   events/s: "
        + " ".join(f"{p:>{max(len(p), 9)}}" for p in POLICIES))
    for n in args.sizes:
        fa, ff = bench_raw_fast(n, args.batch)
        _, fg = bench_raw_fast(n, args.batch, group=args.group)
        events = synthetic_events(min(n, 100_000))
        rates = replay_rates(replay_events, events, n, args.repeat)
        out(f"{n:>9} {'fast':>9} {fa:>12.3g} {ff:>12.3g} {fg:>12.3g}   {'':>9} " + _cols(rates))
        if n <= REF_MAX_BLOCKS:
            ra, rf = bench_raw_ref(n, args.batch)
            rr = replay_rates(reference_replay, events, n)
            out(f"{n:>9} {'reference':>9} {ra:>12.3g} {rf:>12.3g} {rf:>12.3g}   {'':>9} " + _cols(rr))
        else:
            out(f"{n:>9} {'reference':>9} {'(skipped: per-block scan, > %d blocks)' % REF_MAX_BLOCKS}")
    if not args.no_record:
        print(f"wrote {record(TITLE, lines)}")


if __name__ == "__main__":
    main()
