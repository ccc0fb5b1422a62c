"""Real traces read as they are: provider-cache segments, sub-agents known by their totals,
every ChatDev log form, duplicate sessions named, queued prompts as turns.

The fixtures under ``tests/fixtures/log_forms`` are hand-written, a few records each (their shapes are
those of the real transcripts and logs in the project's mirror).
"""

from __future__ import annotations

import json
import shutil

import pytest
from fixture_paths import FIXTURES

from lachesis import read_trace
from lachesis.analysis.segments import recover
from lachesis.traces.adapters import adapt, read
from lachesis.traces.schema import TraceError
from lachesis.traces.trace import Trace, write_trace

HERE = FIXTURES / "log_forms"
CC = HERE / "claude_code"
SID = "17a00000-0000-4000-8000-000000000001"
LEAD = f"{SID}:lead"


def cc(**kw):
    return read("claude_code", CC, **kw)


def row(res, rid):
    q = res.trace.requests
    return q[q["request_id"] == rid].iloc[0]


# ------------------------------------------------------------------------------------------------
# 1. segments as the provider's cache behaves; a worker's segments close at its return
# ------------------------------------------------------------------------------------------------

def test_claude_cache_shortfall_continues_the_segment_and_workers_close_at_return():
    res = cc()
    q = res.trace.requests
    assert (q.loc[q["benchmark"] == "claude_code", "cache_tolerance_tokens"] == 16).all()
    s = recover(res.trace).segments
    w = s[s["role"] == "worker"]
    assert set(w["boundary"]) == {"subagent_return"}
    assert w.groupby("agent_id").size().tolist() == [1, 1]  # one segment per worker: no turns inside it
    # every lead cache read falls 2-4 tokens short of the previous input: no fragment is closed
    assert set(s.loc[s["role"] == "lead", "boundary"]) == {"session_end"}
    assert s["tokens_written"].min() >= 200
    real = w[w["agent_id"] == f"{SID}:a17w001"].iloc[0]
    assert (real["first_request"], real["last_request"]) == ("req_17_W1", "req_17_W3")
    # the knob: read exactly (0), the same transcript closes a fragment at nearly every lead request
    exact = recover(cc(cache_tolerance_tokens=0).trace).segments
    frag = exact[exact["boundary"] == "turn_end"]
    assert len(frag) == 3 and frag["tokens_written"].max() < 100
    assert set(exact.loc[exact["role"] == "worker", "boundary"]) == {"subagent_return"}


@pytest.mark.parametrize("bad", [-1, 2.5, True, "16"])
def test_claude_cache_tolerance_knob_is_checked(bad):
    with pytest.raises(ValueError, match="cache_tolerance_tokens"):
        cc(cache_tolerance_tokens=bad)


# ------------------------------------------------------------------------------------------------
# 2. sub-agents known only by their totals
# ------------------------------------------------------------------------------------------------

def test_claude_spawn_known_by_totals_is_a_synthetic_worker_the_lead_waits_for():
    res = cc()
    q = res.trace.requests
    syn = q[q["synthetic"]]
    assert syn["request_id"].tolist() == ["toolu_17_T1:totals"]
    r = syn.iloc[0]
    assert (r["agent_id"], r["role"], r["parent_agent_id"]) == (f"{SID}:a17tot1", "worker", LEAD)
    assert (r["input_tokens"], r["matched_prefix_tokens"], r["output_tokens"]) == (1 + 500 + 28000, 0, 2000)
    assert r["t_end"] - r["t_start"] == pytest.approx(487.0)
    assert r["t_start"] == row(res, "req_17_L1")["t_end"]
    sp = res.trace.spawns.set_index("agent_id")
    assert sp.loc[f"{SID}:a17tot1", "spawn_request_id"] == "req_17_L1"
    assert sp.loc[f"{SID}:a17tot1", "total_duration_ms"] == 487000
    assert row(res, "req_17_L1")["role"] == "lead"
    # the reference clock runs the synthetic worker for its recorded 487 s, and the lead waits for it
    seg = recover(res.trace)
    t = seg.schedule.set_index("request_id")
    assert t.loc["toolu_17_T1:totals", "t_decode_end_s"] - t.loc["toolu_17_T1:totals",
                                                                 "t_start_s"] == pytest.approx(487)
    assert t.loc["req_17_L2", "t_start_s"] > t.loc["toolu_17_T1:totals", "t_decode_end_s"]
    w = seg.segments.set_index("agent_id").loc[f"{SID}:a17tot1"]
    assert (w["boundary"], w["tokens_written"], w["t_norm_s"]) == ("subagent_return", 30501, pytest.approx(487))
    # the lead's observation count: only the unresolved async spawn's result (its sub-agent is unknown)
    assert row(res, "req_17_L1")["n_observations"] == 1


def test_claude_spawns_left_out_are_counted_once_across_copies():
    # the prefix checkpoint repeats the async spawn (no transcript, no totals) and the spawn known by totals
    res = cc()
    assert res.skipped["spawns without per-request worker records or recorded totals"] == 1
    assert res.trace.requests["session_id"].unique().tolist() == [SID]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_synthetic_column_survives_a_round_trip(tmp_path, fmt):
    tr = cc().trace
    back = read_trace(write_trace(tr, tmp_path / fmt, fmt))
    assert back.requests["synthetic"].dtype == bool
    assert back.requests["synthetic"].tolist() == tr.requests["synthetic"].tolist()
    assert back.requests["cache_tolerance_tokens"].tolist() == tr.requests["cache_tolerance_tokens"].tolist()


def test_synthetic_request_without_its_duration_or_with_a_bad_flag_is_refused():
    q = cc().trace.requests
    bad = q.copy()
    bad.loc[bad["synthetic"], "t_end"] = float("nan")
    with pytest.raises(TraceError) as e:
        Trace.from_frames(bad)
    assert e.value.field == "t_end" and "toolu_17_T1:totals" in str(e.value.record)
    bad = q.astype({"synthetic": object})
    bad.loc[0, "synthetic"] = "yes"
    with pytest.raises(TraceError) as e:
        Trace.from_frames(bad)
    assert e.value.field == "synthetic" and "true or false" in e.value.problem


def test_bad_recorded_duration_names_file_line_and_field(tmp_path):
    d = shutil.copytree(CC, tmp_path / "cc")
    lead = d / f"{SID}.jsonl"
    lines = lead.read_text().splitlines()
    rec = json.loads(lines[5])
    rec["toolUseResult"]["totalDurationMs"] = "487s"
    lines[5] = json.dumps(rec)
    lead.write_text("\n".join(lines) + "\n")
    shutil.rmtree(d / "checkpoint")
    with pytest.raises(TraceError) as e:
        read("claude_code", lead)
    assert (e.value.source, e.value.record, e.value.field) == (str(lead), "line 6", "toolUseResult.totalDurationMs")
    assert len(str(e.value).splitlines()) == 1


# ------------------------------------------------------------------------------------------------
# 4. duplicate sessions named; queued prompts are turns
# ------------------------------------------------------------------------------------------------

def test_whole_duplicate_session_is_named(tmp_path):
    res = cc()
    assert res.duplicate_sessions == [(str(CC / "checkpoint" / "prefix.jsonl"), str(CC / f"{SID}.jsonl"))]
    rep = adapt("claude_code", CC, tmp_path / "out")
    assert rep.duplicate_sessions == res.duplicate_sessions
    line = [x for x in rep.lines() if "duplicate session" in x]
    assert line == [f"  duplicate session left out: {CC / 'checkpoint' / 'prefix.jsonl'} "
                    f"(every request repeats {CC / f'{SID}.jsonl'})"]
    saved = json.loads((tmp_path / "out" / "adapt_report.json").read_text())
    assert saved["duplicate_sessions"] == [[str(CC / "checkpoint" / "prefix.jsonl"), str(CC / f"{SID}.jsonl")]]


def test_queued_command_prompt_is_a_turn():
    res = cc()
    assert [row(res, f"req_17_L{k}")["turn"] for k in (1, 2, 3, 4)] == [0, 0, 1, 2]
    assert row(res, "req_17_W1")["turn"] == 0  # a worker takes the lead's turn at its spawn


# ------------------------------------------------------------------------------------------------
# 3. ChatDev: every log form read, or skipped with its reason
# ------------------------------------------------------------------------------------------------

CD = HERE / "chatdev"


def test_chatdev_reads_out_of_llm_api_calls_and_reports_every_other_form():
    res = read("chatdev_warehouse", CD)
    q = res.trace.requests
    real = q[~q["placeholder"].astype(bool)]
    # Send+Receive, Receive alone, the Receive after an unanswered Send, and two 'Out of LLM_api' calls:
    # every call the log records with its usage (the run's own Software Info total: 9,998 tokens)
    assert len(real) == 5 and int((real["input_tokens"] + real["output_tokens"]).sum()) == 9998
    cw = real[real["domain"] == "Coding_wait"]
    assert cw[["input_tokens", "output_tokens"]].values.tolist() == [[2737, 857], [3607, 657]]
    assert set(cw["role"]) == {"worker"} and cw["agent_id"].nunique() == 2  # one fresh call each
    assert set(cw["agent_id"]) <= set(res.trace.spawns["agent_id"])
    assert (cw["matched_prefix_tokens"] == 0).all()
    assert res.skipped == {
        "ChatDev 'OpenAI_Usage_Info Send' blocks without their Receive (no completion count: not a request)": 1,
        "ChatDev 'Out of LLM_api' calls without token counts (no usage: not a request)": 1,
        "ChatDev 'Into LLM_api' calls never logged as returned (no usage: not a request)": 1}


def test_chatdev_out_of_llm_api_with_half_its_counts_names_file_line_and_field(tmp_path):
    src = (CD / "Tetris17" / "Tetris17.log").read_text().splitlines()
    k = src.index("completion_tokens: 657")
    del src[k]
    log = tmp_path / "Tetris17" / "Tetris17.log"
    log.parent.mkdir()
    log.write_text("\n".join(src) + "\n")
    with pytest.raises(TraceError) as e:
        read("chatdev_warehouse", log)
    assert (e.value.source, e.value.field) == (str(log), "completion_tokens")
    assert e.value.record == f"line {src.index('Out of LLM_api at Coding_wait.', k - 8) + 1}"


@pytest.mark.parametrize("where", ["totals", "assistant"])
def test_a_usage_without_output_tokens_is_refused_not_read_as_zero(tmp_path, capsys, where):
    """A spawn's recorded totals (or a request's usage) without ``output_tokens`` is not a worker of 0 output tokens
    lasting its recorded 487 s: the file is refused naming its line and field, in the report when others are read."""
    d = shutil.copytree(CC, tmp_path / "cc")
    lead = d / f"{SID}.jsonl"
    lines = lead.read_text().splitlines()
    i = next(k for k, x in enumerate(lines) if (
        "toolUseResult" in json.loads(x) and "usage" in json.loads(x)["toolUseResult"] if where == "totals"
        else json.loads(x).get("type") == "assistant"))
    rec = json.loads(lines[i])
    (rec["toolUseResult"] if where == "totals" else rec["message"])["usage"].pop("output_tokens")
    lines[i] = json.dumps(rec)
    lead.write_text("\n".join(lines) + "\n")
    shutil.rmtree(d / "checkpoint")
    with pytest.raises(TraceError) as e:
        read("claude_code", lead)
    field = "output_tokens"
    assert (e.value.source, e.value.field, e.value.problem) == (str(lead), field, "missing field")
    assert e.value.record.startswith(f"line {i + 1}")
    from lachesis.cli import main

    assert main(["adapt", "claude_code", str(lead), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{lead}: record line {i + 1}" in err[0] and "'output_tokens': missing field" in err[0]
