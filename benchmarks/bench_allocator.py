"""Micro-benchmark: the vectorized two-tier allocator vs the per-block reference (tests/reference_blocksim.py).

Prints, per memory size, block allocations/s and block frees/s of the raw allocator (batched calls
of ``--batch`` blocks), and replayed events/s of the segment table per policy, beside the same
numbers for the one-object-per-block reference (run only at the sizes where it finishes quickly).
With the native core built (``lachesis.node._core``), the node memory's calls recorded from a simulated run
are replayed into the Python ``Memory`` and the native ``NodeMemory``: µs per write and their ratio.
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

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / d) for d in ("tests", "tests/node")]

from reference_blocksim import RefSim, reference_replay  # noqa: E402
from results import record  # noqa: E402

from lachesis.kv import Tier  # noqa: E402
from lachesis.memory.free_lists import TieredAllocator  # noqa: E402
from lachesis.memory.replay import annotate_clairvoyant, replay_events  # noqa: E402

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


class _CallLog:
    """A node memory that records the calls the simulator makes on it (rank 0 only), for replay."""

    def __init__(self, calls: list, inner) -> None:
        self._calls, self._inner = calls, inner

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name in ("session_start", "write_request", "close", "session_end", "hbm_tokens", "mark"):
            def call(*a):
                self._calls.append((name, a))
                return attr(*a)
            return call
        return attr

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)


def memory_calls(n_sessions: int = 24, scale: int = 4, hbm_bytes: float = 4e8) -> tuple:
    """(plan, cfg, calls per policy): the rank-0 memory calls of a simulated multi-agent run per policy."""
    from sim_fixtures import multi_agent_trace
    from test_simulator import small_cfg

    import lachesis.node.simulator as S
    from lachesis.analysis.ranker import rank_keys
    from lachesis.analysis.segments import recover
    from lachesis.node.node_memory import Memory
    from lachesis.node.plan import build_plan

    tr = multi_agent_trace(32, scale=scale)
    seg = recover(tr, seed=0)
    plan = build_plan(tr, seg, rank_keys(tr, seg))
    cfg = small_cfg(hbm_bytes=hbm_bytes, hbf_kv_bytes=2e10)
    out = {}
    for pol in POLICIES:
        calls: list = []
        first = []

        def make(*a, calls=calls, first=first, **k):
            m = Memory(*a, **k)
            if first:
                return m
            first.append(m)
            return _CallLog(calls, m)

        def step(b: int, *a: float) -> float:
            return 0.004 + 0.0003 * b

        saved, S.Memory = S.Memory, make
        try:
            closes = None
            if pol == "oracle":
                closes = S.simulate(plan, cfg, "hbm_first", n_sessions,
                                    settings=S.RunSettings(seed=0, record_closes=True, step_fn=step)).closes
            S.simulate(plan, cfg, pol, n_sessions, settings=S.RunSettings(seed=0, clairvoyance=closes, step_fn=step))
        finally:
            S.Memory = saved
        out[pol] = (calls, closes)
    return plan, cfg, out


def replay_memory(mem, calls: list, session_index: dict | None = None) -> float:
    """Seconds to replay recorded memory calls (native: sessions as plan indices, sequences as lists)."""
    t0 = time.perf_counter()
    if session_index is None:
        for name, a in calls:
            getattr(mem, name)(*a)
    else:
        for name, a in calls:
            if name == "session_start":
                mem.session_start(a[0], session_index[a[1]], a[2])
            elif name == "hbm_tokens":
                mem.hbm_tokens(a[0], list(a[1]), a[2].tolist(), list(a[3]))
            else:
                getattr(mem, name)(*a)
    return time.perf_counter() - t0


def call_arrays(calls: list, session_index: dict) -> tuple:
    """The recorded calls as the columns ``NodeMemory.replay_timed`` reads (hbm_tokens calls left out)."""
    op, inst, seg, tok, now = [], [], [], [], []

    def row(o, i, s, t, n):
        op.append(o), inst.append(i), seg.append(s), tok.append(t), now.append(n)

    for name, a in calls:
        if name == "session_start":
            row(0, a[0], session_index[a[1]], 0, a[2])
        elif name == "write_request":
            row(1, a[0], 0, len(a[1]), a[2])
            for s, t in a[1]:
                row(9, a[0], s, t, a[2])
        elif name == "close":
            row(3, a[0], a[1], 0, a[2])
        elif name == "session_end":
            row(4, a[0], 0, 0, a[1])
        elif name == "mark":
            row(5, 0, a[0] if a else 0, 0, 0.0)
    return (np.array(op, dtype=np.int8), np.array(inst, dtype=np.int64), np.array(seg, dtype=np.int32),
            np.array(tok, dtype=np.int64), np.array(now, dtype=np.float64))


def bench_native_memory(out, repeat: int) -> None:
    """µs per write of the recorded calls, Python reference against the native core (best of ``repeat``)."""
    from lachesis.node import native
    from lachesis.node.clairvoyance import Clock
    from lachesis.node.node_memory import Memory, memory_sizes

    if native.core() is None:
        out("node memory, native: not built or not loadable (lachesis.node.native.core()): skipped")
        return
    plan, cfg, logs = memory_calls()
    index = {s: i for i, s in enumerate(plan.sessions)}
    sizes = memory_sizes(cfg)
    out("node memory: the calls of a simulated run replayed (µs per write; writes = write_request's (segment, tokens)"
        " pairs)")
    out("  python: the reference Memory; native: NodeMemory called from Python per call (binding included);")
    out("  in C++: the same calls but hbm_tokens replayed inside the core (as the native loop calls it), against")
    out("  the reference on those calls")
    out(f"{'policy':>18} {'writes':>8} {'python µs':>10} {'native µs':>10} {'ratio':>7} {'in C++ µs':>10} {'ratio':>7}")
    for pol, (calls, closes) in logs.items():
        n_w = sum(len(a[1]) for name, a in calls if name == "write_request")
        best_py = best_nat = best_cpp = best_py_w = float("inf")
        cols = call_arrays(calls, index)
        no_reads = [c for c in calls if c[0] != "hbm_tokens"]
        for _ in range(repeat):
            clock = Clock(closes, plan.sessions, plan.fingerprint) if closes is not None else None
            best_py = min(best_py, replay_memory(Memory(plan, cfg, pol, clock), calls))
            nclock = native.clock(closes, plan) if closes is not None else None
            nat = native.memory(plan, sizes, pol, nclock)
            best_nat = min(best_nat, replay_memory(nat, calls, index))
            nclock = native.clock(closes, plan) if closes is not None else None
            nat = native.memory(plan, sizes, pol, nclock)
            best_cpp = min(best_cpp, nat.replay_timed(*cols))
            clock = Clock(closes, plan.sessions, plan.fingerprint) if closes is not None else None
            ref = Memory(plan, cfg, pol, clock)
            best_py_w = min(best_py_w, replay_memory(ref, no_reads))
            if native.write_totals(nat.totals()).as_dict() != ref.table.totals.as_dict():
                raise AssertionError(f"{pol}: the native replay's totals differ from the reference's")
        out(f"{pol:>18} {n_w:>8} {1e6 * best_py / n_w:>10.2f} {1e6 * best_nat / n_w:>10.2f} {best_py / best_nat:>7.1f}"
            f" {1e6 * best_cpp / n_w:>10.2f} {best_py_w / best_cpp:>7.0f}")


def _cols(rates: list[float]) -> str:
    return " ".join(f"{r:>{max(len(p), 9)}.3g}" for p, r in zip(POLICIES, rates))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 1_000_000])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--group", type=int, default=32, help="alloc batches per free call in the second free column")
    p.add_argument("--repeat", type=int, default=3, help="replays per policy of the fast path; the best is printed")
    p.add_argument("--no-record", action="store_true", help="do not write benchmarks/RESULTS.md")
    p.add_argument("--native-only", action="store_true", help="only the node memory's native/reference ratio")
    args = p.parse_args(argv)
    lines: list[str] = []

    def out(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    bench_native_memory(out, args.repeat)
    if args.native_only:
        return
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
