"""Segment recovery, reference clock (Eq. 1) and ρR/W (Eq. 3) on hand-built traces.

Every expected number is worked out by hand in the comments (TPOT_ref = 0.2 s, TTFT_ref = 1.0 s).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sim_fixtures import two_turn_trace

from lachesis.analysis.segments import SEGMENT_COLUMNS, recover, summarize
from lachesis.analysis.stats import laden_share
from lachesis.config import TOOL_CLASSES, ReferenceClock, ToolClass
from lachesis.traces.clock import schedule, session_rng
from lachesis.traces.schema import TraceError
from lachesis.traces.trace import Trace, tokens_written, write_trace

#: user delays are LogNormal(median 120 s, sigma); sigma = 0 makes every delay exactly 120 s.
NO_SPREAD = ReferenceClock(user_delay_sigma=0.0)
#: a test-only tool class so a tool draw is Exponential(mean 2 s), replayed below from the same seed.
TEST_CLOCK = replace(NO_SPREAD, tool_classes=TOOL_CLASSES + (ToolClass("test2s", 2.0, "test only"),),
                     tool_class_of={"probe": "test2s"})


def req(rid, turn, inp, mp, out, *, sid="S", agent="A", role="single", parent=None, tools=(), obs=0, rs=0):
    return dict(session_id=sid, request_id=rid, agent_id=agent, parent_agent_id=parent, role=role, turn=turn,
                input_tokens=inp, matched_prefix_tokens=mp, output_tokens=out, reasoning_tokens=rs,
                tool_names=list(tools), n_observations=obs)


def spawn(agent, parent, role, spawn_rid, idx, sid="S"):
    return dict(session_id=sid, agent_id=agent, parent_agent_id=parent, role=role, spawn_request_id=spawn_rid,
                instruction="do it", context="ctx", tools=["probe"], model="m", spawn_index=idx)


def by_id(seg, key="segment_id"):
    return seg.segments.set_index(key)


# ------------------------------------------------------------------------------------------------
# 1. Two turns, reasoning stripped at the turn end and the stripped part rematerialized
# ------------------------------------------------------------------------------------------------

def test_two_turns_reasoning_stripped_and_rematerialized():
    seg = recover(two_turn_trace(), clock=NO_SPREAD, seed=0)
    s = seg.segments
    assert list(s.columns) == list(SEGMENT_COLUMNS)  # the contract's columns (no benchmark in this trace)
    # segment order: (death event, write turn, phase); the death at r2 comes first, then session end
    assert list(s["segment_id"]) == ["A:s0", "A:s1", "A:s2", "A:s3"]
    assert list(s["seg_class"]) == ["reasoning_laden", "reasoning_stripped", "reasoning_stripped", "reasoning_laden"]
    assert list(s["boundary"]) == ["turn_end", "session_end", "session_end", "session_end"]
    assert list(s["write_turn"]) == [0, 0, 1, 1]
    # tokens: s0 = 50 (r0 out) + 30 (r1 obs) + 20 (r1 out) = 100; s1 = 100; s2 = 40 (rematerialized); s3 = 30
    assert list(s["tokens_written"]) == [100, 100, 40, 30]
    assert list(s["first_request"]) == ["r0", "r0", "r2", "r2"]
    assert list(s["last_request"]) == ["r1", "r2", "r2", "r2"]
    assert list(s["closing_request"]) == ["r2", None, None, None]
    # clock: r0 decodes [0, 50*0.2=10], 1 obs prefill -> 11; r1 decodes [11, 11+20*0.2=15];
    # user delay 120 (sigma 0) -> r2 decodes [135, 135+30*0.2=141]
    sch = seg.schedule.set_index("request_id")
    assert sch.loc[["r0", "r1", "r2"], "t_start_s"].tolist() == pytest.approx([0, 11, 135])
    assert sch.loc[["r0", "r1", "r2"], "t_decode_end_s"].tolist() == pytest.approx([10, 15, 141])
    assert sch.loc[["r0", "r1", "r2"], "t_user_s"].tolist() == pytest.approx([0, 0, 120])
    assert sch.loc[["r0", "r1", "r2"], "t_obs_s"].tolist() == pytest.approx([1, 0, 0])
    # T_norm: s0 = 15 - 0; s1 = 141 - 0; s2 = s3 = 141 - 135
    assert s["t_norm_s"].tolist() == pytest.approx([15, 141, 6, 6])
    # the turn-0 laden boundary is reported when r2 arrives (135, after the user delay); the rest at the end
    assert s["t_boundary_s"].tolist() == pytest.approx([135, 141, 141, 141])
    # ρ: s0: r0's 50 output tokens, own reads sum_{j<50}(49-j) = 1225, then present in r1's input: 50*20 = 1000;
    #     r1's 30 obs tokens in r1's input: 30*20 = 600; r1's 20 output tokens, own: 19*20/2 = 190 -> 3015 / 100
    #     s1: 100 tokens present in r0, r1, r2: 100*(50+20+30) = 10000 / 100
    #     s2: 40 tokens in r2's input: 40*30 = 1200 / 40;  s3: r2's own 30 outputs: 29*30/2 = 435 / 30
    assert s["read_tokens"].tolist() == pytest.approx([3015, 10000, 1200, 435])
    assert s["rho_rw"].tolist() == pytest.approx([30.15, 100, 30, 14.5])
    assert s["wait_s"].isna().all()
    reads = {(r.request_id, r.segment_id): r.tokens for r in seg.reads.itertuples()}
    assert reads == {("r0", "A:s1"): 100, ("r1", "A:s1"): 100, ("r1", "A:s0"): 80,  # 50 r0 out + 30 r1 obs
                     ("r2", "A:s1"): 100, ("r2", "A:s2"): 40}
    writes = {(w.request_id, w.segment_id): w.tokens for w in seg.writes.itertuples()}
    assert writes == {("r0", "A:s1"): 100, ("r0", "A:s0"): 50, ("r1", "A:s0"): 50,
                      ("r2", "A:s2"): 40, ("r2", "A:s3"): 30}
    # turn 0 writes 100 laden + 100 stripped, turn 1 30 laden + 40 stripped -> 130 / 270 laden overall
    assert laden_share(seg) == pytest.approx(130 / 270)
    assert laden_share(seg, per_turn=True).tolist() == pytest.approx([0.5, 30 / 70])


# ------------------------------------------------------------------------------------------------
# 2. A lead with two concurrent workers and a reviewer
# ------------------------------------------------------------------------------------------------

def multi_agent_trace() -> Trace:
    rows = [
        # lead: l0 spawns W1 and W2 (spawn tools charge no latency); their 2 returned results are charged by
        # the clock from the spawn records (n_observations excludes them)
        req("l0", 0, 100, 0, 10, agent="L", role="lead", tools=["spawn_subagent"] * 2),
        # W1: one tool call (class test2s) and one observation, then a second round
        req("w1a", 0, 50, 0, 20, agent="W1", role="worker", parent="L", tools=["probe"], obs=1),
        req("w1b", 0, 80, 70, 10, agent="W1", role="worker", parent="L"),
        req("w2a", 0, 60, 0, 100, agent="W2", role="worker", parent="L"),
        # l1 reuses all 110 tokens, appends the two results [110,150), spawns the reviewer
        req("l1", 0, 150, 110, 10, agent="L", role="lead", tools=["spawn_subagent"]),
        req("rv", 0, 30, 0, 5, agent="R", role="reviewer", parent="L"),
        req("l2", 0, 180, 160, 5, agent="L", role="lead"),
    ]
    spawns = [spawn("W1", "L", "worker", "l0", 0), spawn("W2", "L", "worker", "l0", 1),
              spawn("R", "L", "reviewer", "l1", 2)]
    return Trace.from_frames(pd.DataFrame(rows), pd.DataFrame(spawns))


def test_lead_two_workers_and_reviewer():
    seg = recover(multi_agent_trace(), clock=TEST_CLOCK, seed=0)
    # the only draw of the session: W1's tool call (depth-first order; spawn tools draw nothing)
    x = session_rng(0, "S").exponential(2.0)
    assert np.random.default_rng([0, zlib.crc32(b"S")]).exponential(2.0) == x
    assert x < 13  # so W2 (returns at 22) is the slower worker: the lead waits for the max
    sch = seg.schedule.set_index("request_id")
    # l0 [0, 2]; W1: w1a [2, 6], tool x, 1 obs -> w1b [7+x, 9+x]; W2: w2a [2, 2+100*0.2=22]
    # lead waits for max(9+x, 22) = 22, 2 obs -> l1 [24, 26]; R: [26, 27]; lead waits, 1 obs -> l2 [28, 29]
    assert sch.loc[["l0", "w1a", "w1b", "w2a", "l1", "rv", "l2"], "t_start_s"].tolist() == \
        pytest.approx([0, 2, 7 + x, 2, 24, 26, 28])
    assert sch.loc[["l0", "w1a", "w1b", "w2a", "l1", "rv", "l2"], "t_decode_end_s"].tolist() == \
        pytest.approx([2, 6, 9 + x, 22, 26, 27, 29])
    assert sch.loc["w1a", "t_tools_s"] == pytest.approx(x)
    assert sch.loc["l0", "t_tools_s"] == 0.0
    s = by_id(seg, "agent_id")
    assert s.loc[["L", "W1", "W2", "R"], "seg_class"].tolist() == ["lead", "worker", "worker", "reviewer"]
    assert s.loc[["L", "W1", "W2", "R"], "boundary"].tolist() == \
        ["session_end", "subagent_return", "subagent_return", "subagent_return"]
    # tokens: L 100+10 + 40+10 + 20+5 = 185; W1 50+20 + 10+10 = 90; W2 60+100; R 30+5
    assert s.loc[["L", "W1", "W2", "R"], "tokens_written"].tolist() == [185, 90, 160, 35]
    # T_norm: L 29-0; W1 (9+x)-2; W2 22-2; R 27-26
    assert s.loc[["L", "W1", "W2", "R"], "t_norm_s"].tolist() == pytest.approx([29, 7 + x, 20, 1])
    # wait: sub-agents out during [2,9+x] ∪ [2,22] ∪ [26,27] = 20 + 1 = 21 s of the lead's 29
    assert s.loc["L", "wait_s"] == pytest.approx(21)
    assert s.loc[["W1", "W2", "R"], "wait_s"].isna().all()
    # ρ: L: l0 100*10 + own 45; l1 150*10 + own 45; l2 180*5 + own (4+3+2+1) = 3500 / 185
    #    W1: w1a 50*20 + own 190; w1b 80*10 + own 45 = 2035 / 90;  W2: 60*100 + 99*100/2 = 10950 / 160
    #    R: 30*5 + own 10 = 160 / 35
    assert s.loc[["L", "W1", "W2", "R"], "read_tokens"].tolist() == pytest.approx([3500, 2035, 10950, 160])
    assert s.loc[["L", "W1", "W2", "R"], "rho_rw"].tolist() == \
        pytest.approx([3500 / 185, 2035 / 90, 10950 / 160, 160 / 35])
    assert s.loc[["W1", "W2", "R"], "closing_request"].isna().all()


def test_parallel_tool_calls_take_the_slowest():
    rows = [req("a", 0, 10, 0, 5, tools=["probe", "probe"], obs=2), req("b", 0, 20, 15, 5)]
    tr = Trace.from_frames(pd.DataFrame(rows))
    d1, d2 = session_rng(3, "S").exponential(2.0, size=2)  # the two draws, in list order
    seq = schedule(tr, TEST_CLOCK, seed=3).set_index("request_id")
    par = schedule(tr, replace(TEST_CLOCK, parallel_tool_calls=True), seed=3).set_index("request_id")
    # a decodes [0, 1]; sequential: tools d1+d2, then 2 obs prefills; parallel: max(d1, d2)
    assert seq.loc["b", "t_start_s"] == pytest.approx(1 + d1 + d2 + 2)
    assert par.loc["b", "t_start_s"] == pytest.approx(1 + max(d1, d2) + 2)


# ------------------------------------------------------------------------------------------------
# 3. One segment read by several requests; 4. a session that ends with segments live
# ------------------------------------------------------------------------------------------------

def one_turn_trace() -> Trace:
    return Trace.from_frames(pd.DataFrame([
        req("q0", 0, 10, 0, 2, obs=1),   # [0,10) stripped, [10,12) laden
        req("q1", 0, 15, 12, 4, obs=1),  # [12,15) obs, [15,19) out
        req("q2", 0, 20, 19, 1),         # [19,20) obs, [20,21) out
    ]))


def test_rho_sums_over_readers():
    seg = recover(one_turn_trace(), clock=NO_SPREAD)
    s = by_id(seg, "seg_class")
    # the stripped prefill (10 tokens) is in the input of q0, q1, q2: 10*2 + 10*4 + 10*1 = 70 -> ρ 7
    assert s.loc["reasoning_stripped", "read_tokens"] == 70
    assert s.loc["reasoning_stripped", "rho_rw"] == pytest.approx(7.0)
    sid = s.loc["reasoning_stripped", "segment_id"]
    r = seg.reads[seg.reads["segment_id"] == sid]
    assert r["request_id"].tolist() == ["q0", "q1", "q2"] and r["tokens"].tolist() == [10, 10, 10]
    # laden (11 tokens): q0 out own 1+0 = 1, in q1 2*4 = 8, in q2 2*1 = 2; q1 obs 3*4 + 3*1 = 15;
    #   q1 out own 3+2+1+0 = 6, in q2 4*1 = 4; q2 obs 1*1 = 1; q2 out own 0 -> 37 / 11
    assert s.loc["reasoning_laden", "read_tokens"] == 37
    assert s.loc["reasoning_laden", "rho_rw"] == pytest.approx(37 / 11)


def test_session_ends_with_segments_live():
    seg = recover(one_turn_trace(), clock=NO_SPREAD)
    s = seg.segments
    # nothing closes either segment: both die at the session end, last read by q2
    assert set(s["boundary"]) == {"session_end"}
    assert s["closing_request"].isna().all()
    assert set(s["last_request"]) == {"q2"}
    # q0 [0, 0.4], 1 obs -> q1 [1.4, 2.2], 1 obs -> q2 [3.2, 3.4]; both first written by q0 -> T_norm 3.4
    assert s["t_norm_s"].tolist() == pytest.approx([3.4, 3.4])
    assert s["tokens_written"].sum() == tokens_written(one_turn_trace().requests).sum() == 21


def test_mid_turn_truncation_and_worker_truncation():
    # a worker whose second request reuses only 30 of its 70 tokens: a worker has no turns, so [30,70)
    # (last read by w0) still dies at its return, in the one segment of the worker
    rows = [req("l0", 0, 10, 0, 2, agent="L", role="lead", tools=["spawn_subagent"]),
            req("w0", 0, 50, 0, 20, agent="W", role="worker", parent="L"),
            req("w1", 0, 40, 30, 5, agent="W", role="worker", parent="L"),
            req("l1", 0, 20, 12, 1, agent="L", role="lead")]
    tr = Trace.from_frames(pd.DataFrame(rows), pd.DataFrame([spawn("W", "L", "worker", "l0", 0)]))
    seg = recover(tr, clock=NO_SPREAD)
    w = seg.segments[seg.segments["agent_id"] == "W"].set_index("segment_id")
    assert w["boundary"].tolist() == ["subagent_return"]
    assert w["tokens_written"].tolist() == [40 + 30 + 10 + 5]
    assert w["closing_request"].tolist() == [None]
    assert w["first_request"].tolist() == ["w0"] and w["last_request"].tolist() == ["w1"]
    # reads still end where the context dropped them: [30,70) is in no input of w1
    r = seg.reads[seg.reads["segment_id"] == w.index[0]].set_index("request_id")["tokens"]
    assert r.to_dict() == {"w0": 50, "w1": 40}  # w0's input (w0's output is not in its input); w1's [0,40)


# ------------------------------------------------------------------------------------------------
# Bad input and determinism
# ------------------------------------------------------------------------------------------------

def test_subagent_without_spawn_record_names_the_field():
    t = multi_agent_trace()
    bad = Trace(t.requests, t.spawns.iloc[0:0])  # spawn records dropped (trace validation allows it)
    with pytest.raises(TraceError) as e:
        recover(bad)
    assert e.value.field == "agent_id" and "spawn record" in e.value.problem


def test_spawn_request_of_another_agent_is_rejected():
    t = multi_agent_trace()
    sp = t.spawns.copy()
    sp.loc[0, "spawn_request_id"] = "w2a"  # a request of W2, not of W1's parent L
    with pytest.raises(TraceError) as e:
        recover(Trace(t.requests, sp))
    assert e.value.field == "spawn_request_id"


def test_subagent_request_before_its_spawn_is_rejected():
    t = multi_agent_trace()
    r = t.requests
    moved = pd.concat([r[r["agent_id"] == "W1"], r[r["agent_id"] != "W1"]], ignore_index=True)
    with pytest.raises(TraceError) as e:
        recover(Trace.from_frames(moved, t.spawns))
    assert e.value.field == "spawn_request_id" and "before its spawn request" in e.value.problem


def test_matched_prefix_beyond_live_context():
    rows = pd.DataFrame([req("a", 0, 10, 0, 2), req("b", 0, 30, 20, 1)])  # b matches 20, a left only 12
    with pytest.raises(TraceError) as e:  # undeclared: trace validation rejects it
        Trace.from_frames(rows)
    assert e.value.field == "matched_prefix_tokens" and "request_id='b'" in str(e.value.record)
    # declared as a shared prefix, with start times ordering the rows: [12,20) is external (8 tokens, no
    # segment), listed
    tr = Trace.from_frames(rows.assign(shared_prefix_tokens=[0, 8], t_start=[0.0, 10.0], t_end=[5.0, 15.0]))
    seg = recover(tr)
    assert seg.external.to_dict("records") == [{"request_id": "b", "tokens": 8, "declared": True}]
    s = by_id(seg, "seg_class")
    # stripped = a's input [0,10); laden = a's output [10,12) + b's input [20,30) + b's output [30,31) = 13
    assert s.loc["reasoning_stripped", "tokens_written"] == 10 and s.loc["reasoning_laden", "tokens_written"] == 13
    assert s["tokens_written"].sum() == tokens_written(tr.requests).sum()
    # b's input (30) = 10 stripped + 12 laden present + the 8 external tokens (in no segment)
    assert seg.reads[seg.reads["request_id"] == "b"]["tokens"].sum() == 22
    # a Trace built without validation cannot slip an undeclared gap past recovery
    with pytest.raises(TraceError) as e:
        recover(Trace(tr.requests.drop(columns="shared_prefix_tokens"), tr.spawns))
    assert e.value.field == "matched_prefix_tokens" and "shared_prefix_tokens" in e.value.problem


def test_external_prefix_stays_below_the_agent_context():
    """A first request that only matches a shared prompt (writes nothing at its positions): the next
    request reuses that prompt without declaring it again, and it stays outside every segment."""
    rows = pd.DataFrame([req("a", 0, 8, 8, 0), req("b", 0, 20, 8, 2)]).assign(shared_prefix_tokens=[8, 0])
    seg = recover(Trace.from_frames(rows))
    assert seg.external.to_dict("records") == [{"request_id": "a", "tokens": 8, "declared": True}]
    assert seg.segments["tokens_written"].sum() == 14
    assert seg.reads[seg.reads["request_id"] == "b"]["tokens"].sum() == 12


def test_two_root_agents_in_a_session_are_rejected():
    rows = pd.DataFrame([req("a", 0, 10, 0, 2), req("b", 0, 10, 0, 2, agent="B")])
    with pytest.raises(TraceError) as e:  # the trace contract rejects it when the trace is built
        Trace.from_frames(rows)
    assert e.value.field == "role"
    with pytest.raises(TraceError) as e:  # and a Trace built without validation, on first use of its tree
        recover(Trace(rows, Trace.from_frames(rows.iloc[:1]).spawns))
    assert e.value.field == "role"


def random_trace(n_sessions: int, seed: int) -> Trace:
    """Single-agent sessions with random turns/rounds, stripping at each turn, one tool per round."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_sessions):
        ctx, keep, k = 0, 0, 0
        for t in range(int(rng.integers(1, 4))):
            for r in range(int(rng.integers(1, 4))):
                new = int(rng.integers(1, 50))
                mp = keep if r == 0 else ctx
                inp = mp + new
                out = int(rng.integers(1, 30))
                rows.append(req(f"s{s}r{k}", t, inp, mp, out, sid=f"s{s}", agent=f"s{s}a", tools=["api_call"], obs=1))
                ctx = inp + out
                k += 1
            keep = int(rng.integers(0, ctx + 1))
    return Trace.from_frames(pd.DataFrame(rows))


def test_determinism_and_session_independence():
    tr = random_trace(12, seed=1)
    a = recover(tr, seed=7).segments
    b = recover(tr, seed=7).segments
    pd.testing.assert_frame_equal(a, b)
    c = recover(tr, seed=8).segments
    assert not np.allclose(a["t_norm_s"], c["t_norm_s"])  # a different seed draws different latencies
    # a session's times do not depend on the other sessions of the trace
    one = recover(tr.subset(["s5"]), seed=7).segments
    pd.testing.assert_frame_equal(one.reset_index(drop=True),
                                  a[a["session_id"] == "s5"].reset_index(drop=True))


def test_conservation_on_random_traces():
    tr = random_trace(30, seed=2)
    seg = recover(tr)
    s = seg.segments
    # every written token belongs to exactly one segment, per request and in total
    per_req = seg.writes.groupby("request_id")["tokens"].sum()
    expect = tokens_written(tr.requests).set_axis(tr.requests["request_id"])
    pd.testing.assert_series_equal(per_req.reindex(expect.index).fillna(0).astype(int), expect,
                                   check_names=False)
    assert s["tokens_written"].sum() == expect.sum()
    # each request's input is fully accounted for by segments present at its prefill
    present = seg.reads.groupby("request_id")["tokens"].sum()
    inputs = tr.requests.set_index("request_id")["input_tokens"]
    pd.testing.assert_series_equal(present.reindex(inputs.index), inputs, check_names=False, check_dtype=False)
    # Eq. 3 numerator: reads × L of the reader + own-output terms L(L-1)/2 summed over requests
    L = tr.requests.set_index("request_id")["output_tokens"]
    total = (seg.reads["tokens"] * L.reindex(seg.reads["request_id"]).to_numpy()).sum() + (L * (L - 1) // 2).sum()
    assert s["read_tokens"].sum() == pytest.approx(total)
    assert (s["t_norm_s"] >= 0).all() and (s["t_last_read_s"] >= s["t_first_write_s"]).all()
    assert set(s["seg_class"]) <= {"reasoning_laden", "reasoning_stripped"}


def test_summary_per_class():
    summ = summarize(recover(two_turn_trace(), clock=NO_SPREAD).segments).set_index("seg_class")
    assert summ.loc["reasoning_stripped", "segments"] == 2
    assert summ.loc["reasoning_stripped", "tokens_written"] == 140
    assert summ.loc["reasoning_stripped", "tnorm_median_s"] == pytest.approx((141 + 6) / 2)
    assert math.isclose(summ.loc["reasoning_laden", "rho_median"], (30.15 + 14.5) / 2)


def test_invariants_on_the_synthetic_multi_agent_corpus():
    corpus = pytest.importorskip("lachesis.traces.corpus")
    tr = corpus.generate("multi_agent", scale=0.03, seed=1)
    seg = recover(tr, seed=1)  # the trace's own clock: the corpus' tool classes
    s, sch = seg.segments, seg.schedule.set_index("request_id")
    # writes conserve tokens; inputs are covered by segments plus declared external prefixes
    assert s["tokens_written"].sum() == tokens_written(tr.requests).sum()
    present = seg.reads.groupby("request_id")["tokens"].sum()
    ext = seg.external.groupby("request_id")["tokens"].sum()
    inp = tr.requests.set_index("request_id")["input_tokens"]
    cover = present.reindex(inp.index, fill_value=0) + ext.reindex(inp.index, fill_value=0)
    pd.testing.assert_series_equal(cover, inp, check_names=False, check_dtype=False)
    # a sub-agent starts when its spawn request's decode ends; the parent's next request waits for it
    first = tr.requests.groupby("agent_id", sort=False)["request_id"].first()
    last = tr.requests.groupby("agent_id", sort=False)["request_id"].last()
    nxt = tr.requests.groupby("agent_id", sort=False)["request_id"].shift(-1)
    nxt = pd.Series(nxt.to_numpy(), index=tr.requests["request_id"].to_numpy())
    for sp in tr.spawns.itertuples():
        t_spawn = sch.loc[sp.spawn_request_id, "t_decode_end_s"]
        assert sch.loc[first[sp.agent_id], "t_start_s"] == pytest.approx(t_spawn)
        after = nxt[sp.spawn_request_id]
        if isinstance(after, str):
            assert sch.loc[after, "t_start_s"] >= sch.loc[last[sp.agent_id], "t_decode_end_s"] - 1e-9
    lead = s[s["seg_class"] == "lead"]
    assert (lead["wait_s"] >= 0).all() and (lead["wait_s"] <= lead["t_norm_s"] + 1e-9).all()
    assert set(s["boundary"]) <= {"turn_end", "subagent_return", "session_end"}
    assert (s.loc[s["seg_class"] != "lead", "boundary"] == "subagent_return").all()


def test_nested_subagent_timing():
    rows = [req("l0", 0, 10, 0, 5, agent="L", role="lead", tools=["spawn_subagent"]),
            req("w0", 0, 10, 0, 10, agent="W", role="worker", parent="L", tools=["spawn_subagent"]),
            req("v0", 0, 10, 0, 5, agent="V", role="worker", parent="W"),
            req("w1", 0, 25, 20, 5, agent="W", role="worker", parent="L"),
            req("l1", 0, 20, 15, 5, agent="L", role="lead")]
    sp = [spawn("W", "L", "worker", "l0", 0), spawn("V", "W", "worker", "w0", 1)]
    seg = recover(Trace.from_frames(pd.DataFrame(rows), pd.DataFrame(sp)), clock=NO_SPREAD)
    sch = seg.schedule.set_index("request_id")
    # l0 [0,1]; W: w0 [1,3], spawns V: v0 [3,4]; W waits for V, 1 returned result (TTFT_ref) -> w1 [5,6];
    # L waits for W, 1 returned result -> l1 [7,8]
    assert sch.loc[["l0", "w0", "v0", "w1", "l1"], "t_start_s"].tolist() == pytest.approx([0, 1, 3, 5, 7])
    s = by_id(seg, "agent_id")
    assert s.loc[["L", "W", "V"], "t_norm_s"].tolist() == pytest.approx([8, 5, 1])
    assert s.loc["L", "wait_s"] == pytest.approx(5)  # W out during [1,6]; V nests inside it


def test_prepare_loads_any_source_and_chooses_its_clock_once(tmp_path):
    """A workload name, a list of them, a trace path and a Trace all come back as the same trace, clock
    and segments (the clock is the trace's own: lachesis.traces.clock.clock_for)."""
    from lachesis.analysis.segments import Prepared, load_trace, prepare
    from lachesis.traces import corpus
    from lachesis.traces.clock import clock_for

    by_name = prepare("webarena", scale=0.02, seed=3)
    assert isinstance(by_name, Prepared) and by_name.seed == 3
    assert by_name.clock == clock_for(by_name.trace) == corpus.reference_clock()
    path = write_trace(by_name.trace, tmp_path / "w")
    for source in (["webarena"], path, by_name.trace):
        p = prepare(source, scale=0.02, seed=3)
        assert p.clock == by_name.clock
        pd.testing.assert_frame_equal(p.segments.segments, by_name.segments.segments)
    two = load_trace(["webarena", "bfcl_base"], scale=0.02, seed=0)
    assert two.source == "embedded:webarena+bfcl_base" and set(two.requests["benchmark"]) == {"webarena", "bfcl_base"}
    own = prepare(by_name.trace, seed=3, clock=NO_SPREAD)  # a caller's clock wins
    assert own.clock is NO_SPREAD


# ------------------------------------------------------------------------------------------------
# Provider caches: a cache read a few tokens short of the previous input continues the segment
# ------------------------------------------------------------------------------------------------

def provider_cache_trace(tol=None, short=1) -> Trace:
    # one turn; each cache read stops `short` tokens below the previous input and never holds the previous
    # output (as Claude Code's cache reads do: input 23,869 + output 2 -> next cache read 23,867)
    rows = [req("q0", 0, 100, 0, 2), req("q1", 0, 150, 100 - short, 3), req("q2", 0, 200, 150 - short, 1)]
    df = pd.DataFrame(rows)
    if tol is not None:
        df["cache_tolerance_tokens"] = tol
    return Trace.from_frames(df)


def test_provider_cache_shortfall_within_tolerance_continues_the_segment():
    exact = recover(provider_cache_trace(), clock=NO_SPREAD).segments
    closed = exact[exact["boundary"] == "turn_end"]  # read exactly: fragments closed at q1 (stripped + laden), q2
    assert closed["closing_request"].tolist() == ["q1", "q1", "q2"] and closed["tokens_written"].max() <= 4
    for s in (recover(provider_cache_trace(tol=16), clock=NO_SPREAD).segments,
              recover(provider_cache_trace(), clock=NO_SPREAD, cache_tolerance_tokens=16).segments):
        assert s["boundary"].tolist() == ["session_end", "session_end"]  # stripped prefill + laden body
        # q0 out, q1 and q2 writes
        assert s.set_index("seg_class").loc["reasoning_laden", "tokens_written"] == 2 + (153 - 99) + (201 - 149)
        assert s["tokens_written"].sum() == tokens_written(provider_cache_trace().requests).sum()
        assert set(s["last_request"]) == {"q2"}
        assert s["t_norm_s"].tolist() == pytest.approx([(2 + 3 + 1) * 0.2] * 2)


def test_provider_cache_shortfall_beyond_tolerance_still_closes():
    s = recover(provider_cache_trace(tol=16, short=17), clock=NO_SPREAD).segments
    closed = s[s["boundary"] == "turn_end"]
    assert closed["closing_request"].tolist() == ["q1", "q1", "q2"]
    # the anchor rule: what a tolerated re-prefill carried dies with the position below the matched prefix
    s = recover(provider_cache_trace(tol=[0, 16, 0], short=1), clock=NO_SPREAD).segments
    closed = s[s["boundary"] == "turn_end"].set_index("closing_request")
    assert closed.index.tolist() == ["q2"]
    assert closed.loc["q2", "tokens_written"] == 1 + 3  # q1's top input token and its output; q0's tail
    # (carried at q1) dies with q0's input below position 99, at the session end


def test_cache_tolerance_is_checked():
    with pytest.raises(ValueError, match="cache_tolerance_tokens"):
        recover(provider_cache_trace(), cache_tolerance_tokens=-1)
    df = provider_cache_trace().requests.assign(cache_tolerance_tokens=1.5)
    with pytest.raises(TraceError) as e:
        Trace.from_frames(df)
    assert e.value.field == "cache_tolerance_tokens"


def test_zero_tolerance_is_exact_even_when_only_the_output_is_unmatched():
    # the matched prefix covers the previous input but not its output (reasoning stripped): a real close
    rows = [req("q0", 0, 100, 0, 20), req("q1", 0, 150, 110, 3)]
    for tol in (None, 0):
        df = pd.DataFrame(rows)
        if tol is not None:
            df["cache_tolerance_tokens"] = tol
        s = recover(Trace.from_frames(df), clock=NO_SPREAD).segments
        closed = s[s["boundary"] == "turn_end"]
        assert closed["closing_request"].tolist() == ["q1"] and closed["tokens_written"].tolist() == [10]
