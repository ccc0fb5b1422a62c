"""Speed of segment recovery (``lachesis.segments.recover``): requests/s and segments/s at two scales.

Uses the embedded synthetic corpus (``lachesis.corpus.generate``) when it exists, else a simple
generated trace of the same shape (single-agent sessions with turns and stripping; multi-agent
sessions with a lead, workers and a reviewer).  Paper scale is ≈1,400 sessions / ≈44k requests.

    .venv/bin/python benchmarks/bench_segments.py [--scales 0.1 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from lachesis.trace import Trace


def simple_trace(n_sessions: int, seed: int = 0) -> Trace:
    """Half single-agent, half multi-agent sessions; ~31 requests per session on average."""
    rng = np.random.default_rng(seed)
    rows, spawns = [], []

    def add(sid, rid, agent, role, parent, turn, inp, mp, out, tools, obs):
        rows.append(dict(session_id=sid, request_id=rid, agent_id=agent, parent_agent_id=parent, role=role,
                         turn=turn, input_tokens=inp, matched_prefix_tokens=mp, output_tokens=out,
                         reasoning_tokens=out // 2, tool_names=tools, n_observations=obs))

    for s in range(n_sessions):
        sid = f"s{s}"
        if s % 2 == 0:  # single agent: turns of rounds, reasoning stripped at each turn end
            ctx, keep, k = 0, 0, 0
            for t in range(int(rng.integers(2, 8))):
                for r in range(int(rng.integers(1, 6))):
                    mp = keep if r == 0 else ctx
                    inp = mp + int(rng.integers(50, 800)) + (2000 if k == 0 else 0)
                    out = int(rng.integers(20, 600))
                    add(sid, f"{sid}r{k}", f"{sid}a", "single", None, t, inp, mp, out, ["api"], 1)
                    ctx, k = inp + out, k + 1
                keep = int(ctx * rng.uniform(0.3, 0.7))
        else:  # lead + workers (+ reviewer)
            lead, ctx, k = f"{sid}L", 0, 0
            for rnd in range(int(rng.integers(2, 5))):
                inp = ctx + int(rng.integers(100, 1500)) + (3000 if rnd == 0 else 0)
                out = int(rng.integers(50, 400))
                nw = int(rng.integers(1, 5))
                rid = f"{sid}l{k}"
                add(sid, rid, lead, "lead", None, 0, inp, ctx, out, ["spawn_subagent"] * nw, nw)
                ctx, k = inp + out, k + 1
                for w in range(nw):
                    role = "reviewer" if (w == nw - 1 and nw > 1) else "worker"
                    ag, wctx = f"{sid}w{rnd}_{w}", 0
                    spawns.append(dict(session_id=sid, agent_id=ag, parent_agent_id=lead, role=role,
                                       spawn_request_id=rid, instruction="task", context="ctx", tools=["bash"],
                                       model="m", spawn_index=len(spawns)))
                    for j in range(1 if role == "reviewer" else int(rng.integers(2, 9))):
                        winp = wctx + int(rng.integers(100, 2000))
                        wout = int(rng.integers(20, 500))
                        add(sid, f"{ag}r{j}", ag, role, lead, 0, winp, wctx, wout, ["bash"], 1)
                        wctx = winp + wout
            add(sid, f"{sid}l{k}", lead, "lead", None, 0, ctx + 200, ctx, 100, [], 0)
    return Trace.from_frames(pd.DataFrame(rows), pd.DataFrame(spawns), source="bench")


def load(scale: float, seed: int) -> tuple[Trace, object | None, str]:
    try:
        from lachesis import corpus  # type: ignore[attr-defined]
    except ImportError:
        return simple_trace(max(2, int(1400 * scale)), seed), None, "simple generated trace"
    parts = [corpus.generate(w, scale=scale, seed=seed) for w in ("tau3", "bfcl", "multi_agent")]
    tr = Trace(pd.concat([p.requests for p in parts], ignore_index=True),
               pd.concat([p.spawns for p in parts], ignore_index=True), "corpus")
    return tr, corpus.reference_clock(), "lachesis.corpus (tau3 + bfcl + multi_agent)"


def main() -> None:
    from lachesis.segments import recover

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for scale in a.scales:
        tr, clock, what = load(scale, a.seed)
        t0 = time.perf_counter()
        seg = recover(tr, clock=clock, seed=a.seed)
        dt = time.perf_counter() - t0
        n_req, n_seg = len(tr.requests), len(seg.segments)
        print(f"scale {scale:g} [{what}]: {tr.requests['session_id'].nunique()} sessions, {n_req} requests, "
              f"{n_seg} segments, {len(seg.reads)} read rows in {dt:.2f} s -> "
              f"{n_req / dt:,.0f} requests/s, {n_seg / dt:,.0f} segments/s")


if __name__ == "__main__":
    main()
