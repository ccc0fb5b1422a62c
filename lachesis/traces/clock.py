"""The seeded reference clock of Eq. 1 (§3.2, Appendix B): which clock a trace gets (:func:`clock_for`),
and the per-session replay with fixed costs (:func:`schedule`) that gives every request a decode start
and end, from which segment lifetimes are read.  The costs, the replay order, the draws and the
assumptions: docs/design.md §3.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from typing import Any, Callable, Generator

import numpy as np
import pandas as pd

from lachesis.config import ReferenceClock
from lachesis.traces.trace import Trace

#: the optional per-request column of a recorded delay after the request (written by :mod:`lachesis.traces.gaps`)
GAP_COLUMN = "recorded_gap_s"

def clock_for(trace: Trace, **overrides: Any) -> ReferenceClock:
    """The reference clock a trace is measured on: the one place that choice is made.

    Every constant is :class:`ReferenceClock`'s (``overrides`` replace some); the tool-class map is the
    trace's own (``Trace.tool_class_of``: its ``tool_classes.json``, which the synthetic corpus writes),
    so the same trace gets the same clock through every entry point, in memory or read from disk.  A
    trace without one is charged the default class for every tool (ASSUMPTION, ``config``).
    """
    return ReferenceClock(tool_class_of=dict(trace.tool_class_of), **overrides)


def session_rng(seed: int, session_id: str) -> np.random.Generator:
    """The per-session generator: independent of the other sessions of a trace."""
    return np.random.default_rng([int(seed), zlib.crc32(str(session_id).encode())])


def schedule(trace: Trace, clock: ReferenceClock | None = None, seed: int = 0) -> pd.DataFrame:
    """Reference-clock times of every request (one row per request, in trace order); ``clock``: default
    :func:`clock_for` the trace."""
    clock = clock or clock_for(trace)
    req = trace.requests
    n = len(req)
    tree = trace.spawn_tree()
    rows_of = tree.rows
    spawn_index = trace.spawns["spawn_index"].to_numpy().tolist()
    children = {p: sorted(kids, key=lambda a: (spawn_index[tree.record[a]], rows_of[a][0]))
                for p, kids in tree.children.items()}  # the draw order: spawn_index, then first request
    sess = req["session_id"].to_numpy()
    agent = req["agent_id"].to_numpy()
    turn = req["turn"].to_numpy().tolist()
    out_tok = req["output_tokens"].to_numpy().tolist()
    n_obs = req["n_observations"].to_numpy().tolist()
    tools = req["tool_names"].tolist()
    fixed: list[float | None] = [None] * n  # the recorded duration of a synthetic request
    # a recorded delay after a request (lachesis.traces.gaps.recorded_gaps, knob think_time): charged instead of the
    # draw
    gap = req[GAP_COLUMN].to_numpy(dtype=float).tolist() if GAP_COLUMN in req.columns else None
    if "synthetic" in req.columns:
        for g in np.flatnonzero(req["synthetic"].to_numpy(dtype=bool)):
            fixed[int(g)] = float(req["t_end"].iat[g] - req["t_start"].iat[g])

    tool_mean: dict[str, float] = {}

    def mean_of(name: str) -> float:
        if name not in tool_mean:
            tool_mean[name] = 0.0 if name in clock.spawn_tools else clock.tool_mean_s(name)
        return tool_mean[name]

    t_start = np.full(n, np.nan)
    t_dec = np.full(n, np.nan)
    t_tools = np.zeros(n)
    t_obs = np.zeros(n)
    t_user = np.zeros(n)
    tpot, ttft = clock.tpot_ref_s, clock.ttft_ref_s
    mu, sigma = float(np.log(clock.user_delay_median_s)), clock.user_delay_sigma

    def run(a: str, t: float, is_root: bool, rng: np.random.Generator) -> Generator[tuple[str, float], float, float]:
        """One agent's replay; it yields (sub-agent, its start) and is sent back that sub-agent's return time,
        so nesting of any depth runs on an explicit stack (:func:`_drive`), never Python's."""
        rows = rows_of[a]
        last = len(rows) - 1
        for k, g in enumerate(rows):
            if is_root and k > 0 and turn[g] != turn[rows[k - 1]]:
                d = float(rng.lognormal(mu, sigma))
                if gap is not None and gap[rows[k - 1]] == gap[rows[k - 1]]:
                    d = gap[rows[k - 1]]
                t += d
                t_user[g] = d
            t_start[g] = t
            fixed_g = fixed[g]
            end = t + (out_tok[g] * tpot if fixed_g is None else fixed_g)
            t_dec[g] = end
            means = [mean_of(x) for x in tools[g]]
            lat = [float(rng.exponential(m)) if m > 0 else 0.0 for m in means]
            tool_s = (max(lat, default=0.0) if clock.parallel_tool_calls else float(sum(lat)))
            if gap is not None and k < last and gap[g] == gap[g]:  # the recorded gap: tools, or the user's turn
                tool_s = 0.0 if is_root and turn[rows[k + 1]] != turn[g] else gap[g]
            back = []
            for c in children.get(g, ()):
                back.append((yield c, end))
            if k < last:
                t_tools[g] = tool_s
                t_obs[g] = (n_obs[g] + len(back)) * ttft
                t = max(end + tool_s, max(back, default=end)) + t_obs[g]
        return float(t_dec[rows[last]])

    for s, root in tree.roots.items():
        rng = session_rng(seed, s)
        def child(c: str, t0: float, rng: np.random.Generator = rng) -> Replay:
            return run(c, t0, False, rng)

        _drive(run(root, 0.0, True, rng), child)
    return pd.DataFrame({
        "request_id": req["request_id"].to_numpy(), "session_id": sess, "agent_id": agent,
        "t_start_s": t_start, "t_decode_end_s": t_dec, "t_tools_s": t_tools, "t_obs_s": t_obs,
        "t_user_s": t_user})


Replay = Generator[tuple[str, float], float, float]  # yields (sub-agent, start), is sent its end, returns its own


def _drive(top: Replay, start: Callable[[str, float], Replay]) -> float:
    """Run a replay generator to its end: each (sub-agent, start time) it yields is replayed by
    ``start`` (depth first, the draw order) and its return time sent back.  The stack is a list, so a
    chain of nested sub-agents of any depth replays (no recursion limit)."""
    stack: list[Replay] = [top]
    value: Any = None  # nothing to send into a generator that has not started
    while True:
        try:
            child, t0 = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
            continue
        stack.append(start(child, t0))
        value = None


def wait_intervals(trace: Trace, sched: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per parent agent: merged [start, end) intervals during which one of its sub-agents is out.

    A sub-agent is out from its spawn request's decode end to its last request's decode end
    (``sched``: the trace's :func:`schedule`, one row per request in trace order)."""
    tree = trace.spawn_tree()
    t_dec = sched["t_decode_end_s"].to_numpy()
    agent = trace.requests["agent_id"].to_numpy()
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for a, p in tree.spawned_by.items():
        spans[agent[p]].append((float(t_dec[p]), float(t_dec[tree.rows[a][-1]])))
    out: dict[str, np.ndarray] = {}
    for parent, iv in spans.items():
        iv.sort(key=lambda x: x[0])
        merged: list[list[float]] = []
        for lo, hi in iv:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        out[parent] = np.asarray(merged, dtype=float)
    return out


def overlap_s(intervals: np.ndarray, lo: float, hi: float) -> float:
    """Length of the part of [lo, hi] covered by disjoint sorted ``intervals`` (rows [a, b])."""
    if len(intervals) == 0 or hi <= lo:
        return 0.0
    a = np.clip(intervals[:, 0], lo, hi)
    b = np.clip(intervals[:, 1], lo, hi)
    return float(np.sum(b - a))
