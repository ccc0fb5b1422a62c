"""Tiny hand-made traces in the trace contract's shape, for the simulator and sweep tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lachesis.traces.trace import Trace


def _req(sess, rid, agent, parent, role, turn, inp, mp, out, reas, tools, nobs):
    return dict(session_id=sess, request_id=rid, agent_id=agent, parent_agent_id=parent, role=role, turn=turn,
                input_tokens=inp, matched_prefix_tokens=mp, output_tokens=out, reasoning_tokens=reas,
                tool_names=tools, n_observations=nobs)


def single_agent_trace(n_sessions: int = 4, scale: int = 1) -> Trace:
    """Single-agent sessions: 2 turns × 2 rounds; the turn end strips reasoning."""
    rows = []
    for k in range(n_sessions):
        s = f"s{k}"
        a = f"{s}.a"
        o = 40 * scale + 10 * k
        rows += [
            _req(s, f"{s}.0", a, None, "single", 0, 300 * scale, 0, o, o // 2, ["search"], 1),
            _req(s, f"{s}.1", a, None, "single", 0, 300 * scale + o + 80, 300 * scale + o, o, o // 2, [], 0),
            # turn 1: the stripped context (300 + answer) is rematerialized, reasoning dropped
            _req(s, f"{s}.2", a, None, "single", 1, 300 * scale + 60, 300 * scale, o, o // 2, ["search"], 1),
            _req(s, f"{s}.3", a, None, "single", 1, 300 * scale + 60 + o + 50, 300 * scale + 60 + o, o, 0, [], 0),
        ]
    return Trace.from_frames(pd.DataFrame(rows))


def multi_agent_trace(n_sessions: int = 6, reviewer: bool = True, scale: int = 1) -> Trace:
    """Lead spawns two workers (different lengths), then optionally a reviewer."""
    rows, spawns = [], []
    for k in range(n_sessions):
        s = f"m{k}"
        lead = f"{s}.lead"
        rows.append(_req(s, f"{s}.l0", lead, None, "lead", 0, 500 * scale, 0, 60, 20, ["spawn_subagent"] * 2, 2))
        for j, n_rounds in enumerate((1 + k % 2, 3)):
            w = f"{s}.w{j}"
            spawns.append(dict(session_id=s, agent_id=w, parent_agent_id=lead, role="worker",
                               spawn_request_id=f"{s}.l0", instruction="x" * (10 * n_rounds + j), context="100",
                               tools=["search"], model="m", spawn_index=j))
            ctx = 200 * scale
            for r in range(n_rounds):
                rows.append(_req(s, f"{s}.w{j}.{r}", w, lead, "worker", 0, ctx, 0 if r == 0 else ctx - 30,
                                 50, 10, ["search"] if r < n_rounds - 1 else [], 1 if r < n_rounds - 1 else 0))
                ctx += 50 + 30
        rows.append(_req(s, f"{s}.l1", lead, None, "lead", 0, 500 * scale + 60 + 200, 500 * scale + 60, 40, 10,
                         ["spawn_subagent"] if reviewer else [], 1 if reviewer else 0))
        if reviewer:
            rv = f"{s}.rv"
            spawns.append(dict(session_id=s, agent_id=rv, parent_agent_id=lead, role="reviewer",
                               spawn_request_id=f"{s}.l1", instruction="review", context="50", tools=[],
                               model="m", spawn_index=2))
            rows.append(_req(s, f"{s}.rv.0", rv, lead, "reviewer", 0, 150 * scale, 0, 30, 5, [], 0))
        rows.append(_req(s, f"{s}.l2", lead, None, "lead", 0, 500 * scale + 60 + 200 + 40 + 100,
                         500 * scale + 60 + 200 + 40, 50, 10, [], 0))
    sp = pd.DataFrame(spawns)
    return Trace.from_frames(pd.DataFrame(rows), sp)


def random_worker_events(seed: int, steps: int, p_close: float = 0.3, p_new: float = 0.4, max_tokens: int = 30,
                         reviewers: bool = True, integer_keys: bool = True) -> list[tuple]:
    """A seeded allocator event stream of workers (and, with ``reviewers``, a reviewer for every id ending in 7):
    each step closes a random live segment with ``p_close``, else writes 1..max_tokens-1 tokens to a new
    segment (``p_new``) or a live one, with a rank key in 0..4 (``integer_keys``) or uniform in [0, 1)."""
    rng = np.random.default_rng(seed)
    events: list[tuple] = []
    live: list[str] = []
    for t in range(steps):
        if live and rng.random() < p_close:
            events.append((t, "close", live.pop(int(rng.integers(len(live))))))
            continue
        sid = f"w{t}" if rng.random() < p_new or not live else live[int(rng.integers(len(live)))]
        if sid not in live:
            live.append(sid)
        cls = "reviewer" if reviewers and sid.endswith("7") else "worker"
        tokens = int(rng.integers(1, max_tokens))
        key = float(rng.integers(5)) if integer_keys else float(rng.random())
        events.append((t, "write", sid, cls, tokens, "S", key))
    return events
