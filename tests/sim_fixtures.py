"""Tiny hand-made traces in the trace contract's shape, and the small node, toy step and search settings the simulator,
memory and sweep tests run them on; the random event streams the allocator tests replay."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from lachesis.config import DEFAULT, MemoryConfig, StackSpec
from lachesis.evaluation import grid
from lachesis.node import block_capacity, capacity
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


def chain(folder: Path, depth: int) -> Path:
    """A one-session trace: a lead whose request spawns a worker, which spawns the next, ``depth`` deep."""
    folder.mkdir(parents=True, exist_ok=True)
    req, sp = [], []
    for i in range(depth + 1):
        aid, parent = ("lead", None) if i == 0 else (f"w{i}", "lead" if i == 1 else f"w{i - 1}")
        req.append(dict(session_id="s", request_id=f"r{i}", agent_id=aid, parent_agent_id=parent,
                        role="lead" if i == 0 else "worker", turn=0, input_tokens=100, matched_prefix_tokens=0,
                        output_tokens=10, reasoning_tokens=0, tool_names=["Task"] if i < depth else [],
                        n_observations=0))
        if i:
            sp.append(dict(session_id="s", agent_id=aid, parent_agent_id=parent, role="worker",
                           spawn_request_id=f"r{i - 1}", instruction="x", context="", tools=[], model="m",
                           spawn_index=0))
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in req))
    (folder / "spawns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sp))
    return folder


def const_step(b, h, f, fl, hw=0.0):
    """Toy roofline: a constant 20 ms step, independent of tiers (so timelines match across policies)."""
    return 0.02


def small_cfg(hbm_bytes: float = 2e8, hbf_kv_bytes: float = 2e9):
    """A tiny per-GPU memory (HBF sized for the weights + ``hbf_kv_bytes``) so the block oracle stays small."""
    w = block_capacity.weight_storage_bytes_per_gpu(DEFAULT.model, DEFAULT.deployment)
    mem = MemoryConfig("tiny", 1, 1, hbm=StackSpec("h", hbm_bytes, 1.6e12, 1.6e12),
                       hbf=StackSpec("f", w + hbf_kv_bytes, 1.6e12, 16e9))
    return DEFAULT.with_(memory=mem)


#: search and measurement windows short enough for a test's capacity search and runs
TINY = capacity.SearchParams(search_warmup=0.2, search_measure=0.3, warmup=0.2, measure=0.5, n_max=8, n_samples=40)
#: the deployment sized over the one configuration a test evaluates (its rule covers every configuration otherwise)
ONE_CONFIG = grid.LoadRule(configs=("1/7",))


#: the classes of the random event streams, workers and reviewers weighted up
STREAM_CLASSES = ["reasoning_laden", "reasoning_stripped", "lead", "worker", "worker", "worker", "reviewer", "reviewer"]


@st.composite
def event_lists(draw, classes=tuple(STREAM_CLASSES),
                n_ops=("write",) * 5 + ("read", "read", "close", "close", "end")):
    """Small random traces: segments of random class/session/key and clairvoyant facts (NaN, or any
    value: the oracle's rule is defined for any); writes, reads, closes and session ends."""
    n_seg = draw(st.integers(1, 9))
    facts = st.sampled_from([math.nan, 0.0, 3.0, 5.0, 5.0, 9.0, 20.0, 40.0])
    segs = [(draw(st.sampled_from(classes)), draw(st.integers(0, 2)),
             draw(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0, math.nan])), draw(facts), draw(facts))
            for _ in range(n_seg)]
    gen = [0] * n_seg
    live = [False] * n_seg
    events = []
    for t, (op, i, tok) in enumerate(draw(st.lists(
            st.tuples(st.sampled_from(n_ops), st.integers(0, n_seg - 1),
                      st.integers(0, 24)), min_size=1, max_size=50))):
        cls, sess, key, close_s, final = segs[i]
        sid = f"s{i}.{gen[i]}"
        if op == "write":
            events.append((float(t), "write", sid, cls, tok, f"S{sess}", key, close_s, final))
            live[i] = True
        elif op == "read" and live[i]:
            events.append((float(t), "read", sid, tok * (i + 1)))
        elif op == "close" and live[i]:
            events.append((float(t), "close", sid))
            live[i], gen[i] = False, gen[i] + 1
        elif op == "end":
            events.append((float(t), "session_end", f"S{sess}"))
            for j, (_, s2, *_rest) in enumerate(segs):
                if s2 == sess and live[j]:
                    live[j], gen[j] = False, gen[j] + 1
    return events


def two_turn_trace() -> Trace:
    """One single-agent session of two turns: the turn end strips reasoning and turn 1 rematerializes the stripped
    output (tests/analysis/test_segments.py works its segments out by hand)."""
    def req(rid, turn, inp, mp, out, obs=0, rs=0):
        return dict(session_id="S", request_id=rid, agent_id="A", parent_agent_id=None, role="single", turn=turn,
                    input_tokens=inp, matched_prefix_tokens=mp, output_tokens=out, reasoning_tokens=rs,
                    tool_names=[], n_observations=obs)

    return Trace.from_frames(pd.DataFrame([
        # turn 0, round 1: writes [0,100) prefill (stripped) + [100,150) output (laden); one observation
        req("r0", 0, 100, 0, 50, obs=1, rs=40),
        # turn 0, round 2: reuses all 150; writes observation [150,180) + output [180,200) (laden)
        req("r1", 0, 180, 150, 20, rs=10),
        # turn 1: the harness strips reasoning; matched prefix 100 (system + user msg 0) -> [100,200) dies.
        # It rematerializes the stripped turn-0 output + user msg 1 at [100,140) (stripped) and outputs [140,170)
        req("r2", 1, 140, 100, 30, rs=20),
    ]))
