"""Reference clock (Eq. 1, Appendix B): observation prefills, including returned sub-agent results, and a 500-deep
sub-agent chain replayed on an explicit stack.

Every expected number is worked out by hand in the comments (TPOT_ref = 0.2 s, TTFT_ref = 1.0 s, tool
latencies zero, no user delay).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sim_fixtures import chain

from lachesis.analysis.segments import recover
from lachesis.cli import main
from lachesis.config import TOOL_CLASSES, ReferenceClock, ToolClass
from lachesis.node.plan import build_plan
from lachesis.traces import corpus
from lachesis.traces.clock import clock_for, schedule
from lachesis.traces.trace import Trace, read_trace

#: a tool class of zero latency, so the only clock charges are decode tokens and observation prefills
ZERO_TOOLS = replace(ReferenceClock(user_delay_sigma=0.0), tool_classes=TOOL_CLASSES
                     + (ToolClass("zero", 0.0, "test"),),
                     tool_class_of={"lookup": "zero"})


def _req(rid, agent, role, parent, inp, mp, out, tools=(), obs=0):
    return dict(session_id="S", request_id=rid, agent_id=agent, parent_agent_id=parent, role=role, turn=0,
                input_tokens=inp, matched_prefix_tokens=mp, output_tokens=out, reasoning_tokens=0,
                tool_names=list(tools), n_observations=obs)


def _spawn(agent, role, spawn_rid, idx):
    return dict(session_id="S", agent_id=agent, parent_agent_id="L", role=role, spawn_request_id=spawn_rid,
                instruction="do it", context="ctx", tools=[], model="m", spawn_index=idx)


def lead_two_workers_one_reviewer() -> Trace:
    rows = [
        # l0: 10 tokens; calls one (zero-latency) tool -> 1 observation of its own, and spawns W1, W2
        _req("l0", "L", "lead", None, 100, 0, 10, ["lookup", "spawn_subagent", "spawn_subagent"], obs=1),
        _req("w1a", "W1", "worker", "L", 50, 0, 20, ["lookup"], obs=1),
        _req("w1b", "W1", "worker", "L", 80, 70, 10),
        _req("w2a", "W2", "worker", "L", 60, 0, 50),
        # l1: spawns the reviewer; no tool result of its own (n_observations excludes sub-agent results)
        _req("l1", "L", "lead", None, 160, 110, 10, ["spawn_subagent"], obs=0),
        _req("rv", "R", "reviewer", "L", 30, 0, 5),
        _req("l2", "L", "lead", None, 200, 170, 5),
    ]
    sp = [_spawn("W1", "worker", "l0", 0), _spawn("W2", "worker", "l0", 1), _spawn("R", "reviewer", "l1", 2)]
    return Trace.from_frames(pd.DataFrame(rows), pd.DataFrame(sp))


def test_returned_subagent_results_are_observation_prefills():
    sch = schedule(lead_two_workers_one_reviewer(), ZERO_TOOLS).set_index("request_id")
    # l0 [0, 2] (10 × 0.2 s).  W1 and W2 start at 2, concurrently:
    #   W1: w1a [2, 6]; lookup 0 s; 1 observation -> +1 s; w1b [7, 9]; returns at 9
    #   W2: w2a [2, 12]; returns at 12
    # L: tools 0 s; waits for both (12); then (1 own observation + 2 returned results) × 1 s = 3 s -> l1 [15, 17]
    # R: rv [17, 18].  L waits for R (18); (0 own + 1 returned) × 1 s -> l2 [19, 20]
    ids = ["l0", "w1a", "w1b", "w2a", "l1", "rv", "l2"]
    assert sch.loc[ids, "t_start_s"].tolist() == pytest.approx([0, 2, 7, 2, 15, 17, 19])
    assert sch.loc[ids, "t_decode_end_s"].tolist() == pytest.approx([2, 6, 9, 12, 17, 18, 20])
    # charged prefills: l0 3 s, w1a 1 s, l1 1 s; an agent's last request charges nothing
    assert sch.loc[ids, "t_obs_s"].tolist() == pytest.approx([3, 1, 0, 0, 1, 0, 0])


def test_simulator_replays_the_same_charges():
    """The decode-node replay reads the clock's charges: at TPOT_ref its critical path is the reference end."""
    tr = lead_two_workers_one_reviewer()
    seg = recover(tr, clock=ZERO_TOOLS)
    plan = build_plan(tr, seg)
    t_obs = dict(zip(seg.schedule["request_id"], seg.schedule["t_obs_s"]))
    assert t_obs["l0"] == 3.0 and t_obs["l1"] == 1.0
    # l0 2 + max(tools 0, W1 4+1+2=7, W2 10) + 3 = 15; l1 2 + max(0, R 1) + 1 = 4; l2 1  -> 20 s
    assert plan.session_span_s("S", 0.2) == pytest.approx(20.0)


def test_corpus_leads_count_only_their_own_tool_results():
    """In the synthetic corpus a lead's observations are its sub-agents' results: n_observations = 0, and the
    clock charges one TTFT_ref per returned sub-agent."""
    tr = corpus.generate("multi_agent", scale=0.02, seed=0)
    req = tr.requests
    lead = req[req["role"] == "lead"]
    own = lead["tool_names"].map(lambda t: sum(x != corpus.SPAWN_TOOL for x in t))
    assert (lead["n_observations"] == own).all()
    clock = clock_for(tr)
    sch = schedule(tr, clock).set_index("request_id")
    n_kids = tr.spawns.groupby("spawn_request_id").size()
    last = req.groupby("agent_id")["request_id"].last()
    inner = lead[~lead["request_id"].isin(last)]
    expect = n_kids.reindex(inner["request_id"], fill_value=0).to_numpy() * clock.ttft_ref_s
    np.testing.assert_allclose(sch.loc[inner["request_id"], "t_obs_s"].to_numpy(), expect)
    assert expect.sum() > 0


# -- a 500-deep sub-agent chain, replayed on an explicit stack ----------------------------------------


def test_a_500_deep_sub_agent_chain_is_replayed(tmp_path, capsys) -> None:
    from lachesis.analysis.segments import recover
    from lachesis.node.plan import build_plan
    from lachesis.traces.clock import schedule

    assert main(["segments", str(chain(tmp_path / "c500", 500))]) == 0
    out = capsys.readouterr().out
    assert "501 requests, 1 sessions, 501 segments" in out
    tr = read_trace(tmp_path / "c500")
    sched = schedule(tr)
    # each worker starts when its parent's request ends: decode ends 10 tokens apart, in chain order
    assert np.all(np.diff(sched["t_decode_end_s"].to_numpy()) > 0)
    plan = build_plan(tr, recover(tr))
    assert plan.session_span_s("s", 0.05) == pytest.approx(501 * 10 * 0.05)


def test_a_shallow_chain_is_scheduled_as_before(tmp_path) -> None:
    """The explicit stack keeps the depth-first draw order: the same times as a direct replay by hand."""
    from lachesis.traces.clock import clock_for, schedule

    tr = read_trace(chain(tmp_path / "c3", 3))
    s = schedule(tr)
    tpot = clock_for(tr).tpot_ref_s
    assert s["t_start_s"].tolist() == pytest.approx([0.0, 10 * tpot, 20 * tpot, 30 * tpot])
