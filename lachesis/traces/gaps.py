"""What a real trace lacks for the evaluation, filled by named assumptions (docs/design.md §7, "Evaluating a
trace"): sessions drawn with replacement to reach a load, the trace's own tool and user delays where it
records times, and reasoning where a single agent records none.  Each is a knob of kind ``trace``
(:mod:`lachesis.evaluation.knobs`); :func:`fill` applies them, and the result is a trace that meets the contract again.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pandas as pd

from lachesis.traces.clock import GAP_COLUMN
from lachesis.traces.trace import Trace

#: what a resampled copy's ids end with: ``<id>~<k>``, k the copy's draw
COPY_MARK = "~"


def has_times(trace: Trace) -> bool:
    """Whether the trace records a start and an end for at least one request."""
    r = trace.requests
    return {"t_start", "t_end"} <= set(r.columns) and bool((r["t_start"].notna() & r["t_end"].notna()).any())


def has_workers(trace: Trace) -> bool:
    """Whether any agent of the trace is a worker (what the predictive path ranks)."""
    return bool((trace.requests["role"] == "worker").any())


def _spawning(trace: Trace) -> np.ndarray:
    """Per request: whether it spawns a sub-agent."""
    sp = trace.spawns
    ids = set(sp["spawn_request_id"].astype(str)) if sp is not None and len(sp) else set()
    return trace.requests["request_id"].astype(str).isin(ids).to_numpy()


def recorded_gaps(trace: Trace) -> Trace:
    """The trace with :data:`GAP_COLUMN`: per request, the recorded time from its end to its agent's next
    request's start (≥ 0), which the reference clock charges instead of the drawn tool latency (the next
    request in the same turn) or user delay (the next turn).

    ASSUMPTION (knob ``think_time="trace"``): the wall-clock gap between a request's end and its agent's next
    start is the tool time, or the user's think time at a turn change, of the environment the trace was
    recorded in; the observation prefills are still charged at TTFT_ref.  NaN (the drawn delay) where either
    time is missing, after an agent's last request, and after a request that spawns sub-agents (its gap is
    their run, which the replay times itself).  A negative gap (clock skew) counts as 0."""
    r = trace.requests
    if not has_times(trace):
        return trace
    nxt = r.groupby("agent_id", sort=False)["t_start"].shift(-1)
    gap = (pd.to_numeric(nxt, errors="coerce") - pd.to_numeric(r["t_end"], errors="coerce")).clip(lower=0.0)
    gap[_spawning(trace)] = np.nan
    req = r.assign(**{GAP_COLUMN: gap.to_numpy(dtype=float)})
    return Trace(req, trace.spawns, trace.source, dict(trace.tool_class_of))


def reasoning_targets(trace: Trace) -> np.ndarray:
    """Per request: whether ``reasoning_per_output`` acts on it (a single-agent session that records no reasoning)."""
    r = trace.requests
    sess_single = r.groupby("session_id", sort=False)["role"].transform(lambda x: (x == "single").all())
    sess_none = r.groupby("session_id", sort=False)["reasoning_tokens"].transform("sum") == 0
    return (sess_single & sess_none).to_numpy()


def add_reasoning(trace: Trace, per_output: float) -> Trace:
    """The trace with ``per_output`` × output tokens of reasoning added to every request of a single-agent
    session that records no reasoning, kept in the context for the rest of its turn and stripped at the
    turn end, as the paper's harness does (§3.1).

    ASSUMPTION (knob ``reasoning_per_output``, default 0: nothing added): a request's reasoning R precedes
    its recorded output; later requests of the same turn read it (their input and matched prefix grow by the
    reasoning written below them); the next turn's first request re-sends the stripped context exactly as
    recorded, and its matched prefix ends where the previous turn's first reasoning was written.  Multi-agent
    sessions are left as they are: a role, not reasoning, sets their classes (§3.2)."""
    if per_output <= 0:
        return trace
    target = reasoning_targets(trace)
    if not target.any():
        return trace
    r = trace.requests.copy()
    inp = r["input_tokens"].to_numpy(dtype=np.int64).copy()
    mp = r["matched_prefix_tokens"].to_numpy(dtype=np.int64).copy()
    out = r["output_tokens"].to_numpy(dtype=np.int64).copy()
    rs = r["reasoning_tokens"].to_numpy(dtype=np.int64).copy()
    shared = r["shared_prefix_tokens"].to_numpy(dtype=np.int64).copy() if "shared_prefix_tokens" in r else None
    turn = r["turn"].to_numpy()
    rec_in, rec_mp = inp.copy(), mp.copy()
    for rows in r[target].groupby("agent_id", sort=False).indices.values():
        rows = np.flatnonzero(target)[rows]
        added = np.rint(per_output * out[rows]).astype(np.int64)
        prev_turn: list[int] = []  # rows of the previous turn
        this_turn: list[int] = []
        for k, g in enumerate(rows):
            if k and turn[g] != turn[rows[k - 1]]:
                prev_turn, this_turn = this_turn, []
                first = next((j for j in prev_turn if added[np.searchsorted(rows, j)] > 0), None)
                if first is not None:  # the stripped context is recorded as is; the prefix ends at the reasoning
                    mp[g] = min(rec_mp[g], rec_in[first])
            else:
                below = [j for j in this_turn if rec_in[j] < rec_in[g]]
                inp[g] = rec_in[g] + sum(int(added[np.searchsorted(rows, j)]) for j in below)
                mp[g] = rec_mp[g] + sum(int(added[np.searchsorted(rows, j)]) for j in this_turn
                                        if rec_in[j] < rec_mp[g])
            a = int(added[k])
            out[g] += a
            rs[g] = a
            if shared is not None:
                shared[g] = min(shared[g], mp[g])
            this_turn.append(g)
    r["input_tokens"], r["matched_prefix_tokens"], r["output_tokens"], r["reasoning_tokens"] = inp, mp, out, rs
    if shared is not None:
        r["shared_prefix_tokens"] = shared
    return Trace.from_frames(r, trace.spawns, f"{trace.source} (reasoning added)", trace.tool_class_of)


def resample(trace: Trace, n: int, seed: int = 0) -> tuple[Trace, dict[str, str]]:
    """``n`` whole sessions of the trace drawn with replacement (seeded), each copy's session, agent and
    request ids suffixed ``~<k>`` so its reference-clock draws are its own (:func:`lachesis.traces.clock.session_rng`);
    and the map from every copy's agent to the agent it copies (the ranker's key is the original's).

    ASSUMPTION (knob ``sessions``): a trace reaches a node's load as a sample of its workload: the pool is a
    bootstrap of its sessions, so each seed draws its own pool and the spread over seeds shows how much the
    result depends on which sessions the trace happens to hold."""
    if n != int(n) or n < 1:
        raise ValueError(f"knob 'sessions': expected a whole number of sessions >= 1, got {n!r}")
    r, sp = trace.requests, trace.spawns
    sessions = pd.unique(r["session_id"])
    rng = np.random.default_rng([int(seed), zlib.crc32(b"resample")])
    draws = rng.integers(0, len(sessions), size=int(n))
    req_rows = r.groupby("session_id", sort=False).indices
    sp_rows = sp.groupby("session_id", sort=False).indices if sp is not None and len(sp) else {}
    ri = np.concatenate([req_rows[sessions[d]] for d in draws])
    rk = np.concatenate([np.full(len(req_rows[sessions[d]]), k) for k, d in enumerate(draws)])
    si = [sp_rows.get(sessions[d], np.zeros(0, dtype=np.int64)) for d in draws]
    sk = np.concatenate([np.full(len(x), k) for k, x in enumerate(si)]) if si else np.zeros(0, dtype=np.int64)
    si_all = np.concatenate(si) if si else np.zeros(0, dtype=np.int64)

    def tag(col: pd.Series, k: np.ndarray) -> np.ndarray:
        suffix = np.char.add(COPY_MARK, k.astype(str))
        vals = col.to_numpy(dtype=object)
        return np.array([None if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v}{s}"
                         for v, s in zip(vals, suffix)], dtype=object)

    req = r.iloc[ri].reset_index(drop=True)
    for c in ("session_id", "agent_id", "request_id", "parent_agent_id"):
        req[c] = tag(req[c], rk)
    spawns = None
    if sp is not None:
        spawns = sp.iloc[si_all].reset_index(drop=True)
        for c in ("session_id", "agent_id", "parent_agent_id", "spawn_request_id"):
            spawns[c] = tag(spawns[c], sk)
    origin = dict(zip(req["agent_id"], r["agent_id"].to_numpy()[ri]))
    return Trace.from_frames(req, spawns, f"{trace.source} ({n} sessions drawn)", trace.tool_class_of), origin


def fill(trace: Trace, overrides: tuple, seed: int = 0) -> tuple[Trace, Trace, dict[str, str] | None]:
    """The trace knobs of ``overrides`` applied: (the trace before resampling, which the ranker is fitted on;
    the trace replayed; the copy → original agent map, None without resampling)."""
    o: dict[str, Any] = dict(overrides)
    tr = add_reasoning(trace, float(o.get("reasoning_per_output", 0.0)))
    if o.get("think_time", "reference") == "trace":
        tr = recorded_gaps(tr)
    n = o.get("sessions", 0.0)
    if not n:
        return tr, tr, None
    copied, origin = resample(tr, n, seed)
    return tr, copied, origin


def not_applicable(trace: Trace, knob: str, value: Any) -> str:
    """Why the trace knob ``knob`` at ``value`` would change nothing on ``trace`` or cannot be taken ("" when
    it applies): what a sensitivity row states instead of a number."""
    if knob == "think_time" and value == "trace" and not has_times(trace):
        return "the trace records no t_start/t_end: its own delays do not exist"
    if knob == "reasoning_per_output" and float(value) > 0 and not reasoning_targets(trace).any():
        if not (trace.requests["role"] == "single").any():
            return "multi-agent sessions only: a role, not reasoning, sets their classes; nothing is added"
        return "every single-agent session records reasoning: nothing is added"
    return ""
