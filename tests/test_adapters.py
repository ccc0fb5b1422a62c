"""Every shared source loads through its adapter; derived fields match values read by hand."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import pytest

from lachesis.adapters import AdapterResult, count_tokens, load
from lachesis.adapters import azure, chatdev, claude_code, mooncake, tau2, who_and_when
from lachesis.trace import TraceError, Trace

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LACHESIS_DATA") or REPO.parent / "shared" / "data" / "traces")
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")

TRACE_SOURCES = ["tau2-xai-grok-blakeelias", "tau2-qwen3.5-justinchiu", "claude_code_subagents", "claude_code_more",
                 "who_and_when", "chatdev_warehouse"]


@lru_cache(maxsize=None)
def loaded(name: str, **kw) -> AdapterResult:
    """Parse each source once per test session."""
    return load(name, local=SHARED, **kw)


def req(res: AdapterResult, request_id: str):
    q = res.trace.requests
    rows = q[q["request_id"] == request_id]
    assert len(rows) == 1, request_id
    return rows.iloc[0]


@pytest.mark.parametrize("name", TRACE_SOURCES)
def test_every_trace_source_loads_into_a_validated_trace(name):
    res = loaded(name)
    assert isinstance(res.trace, Trace) and len(res.trace.requests) > 0
    # re-validating the frames must pass (the adapter output satisfies the contract)
    Trace.from_frames(res.trace.requests, res.trace.spawns, source=name)


def test_table_sources_load():
    assert len(loaded("mooncake_fast25").table) > 0
    assert "rate_per_s" in set(loaded("azure_llm_2023").table["statistic"])


# ---------------------------------------------------------------------------------------------- tau2


def test_tau2_counts_match_provenance():
    # tau2-xai-grok-blakeelias/PROVENANCE.md: 107 sessions, 620 agent requests; qwen: 3 sessions, 22 requests
    g = loaded("tau2-xai-grok-blakeelias").trace.requests
    assert (g["session_id"].nunique(), len(g)) == (107, 620)
    q = loaded("tau2-qwen3.5-justinchiu").trace.requests
    assert (q["session_id"].nunique(), len(q)) == (3, 22)
    assert loaded("tau2-qwen3.5-justinchiu").skipped == {"assistant message without usage (canned greeting)": 3}


GROK_SID = None


def _grok_session() -> str:
    # the single session of 2025-10-06T06:26:09.079344_airline_llm_agent_grok-3-mini_... (PROVENANCE: 1 session)
    path = next((SHARED / "tau2-xai-grok-blakeelias").glob("2025-10-06T06:26:09*.json.gz"))
    return json.loads(gzip.decompress(path.read_bytes()))["simulations"][0]["id"]


@pytest.mark.parametrize("rule", ["turn_end", "every_call"])
def test_tau2_grok_reasoning_from_cost_hand_read(rule):
    # Hand-read from the 06:26:09 grok-3-mini file, messages[2] and [4]:
    #   [2] prompt 4223, completion 77, cost 0.0016384, tool transfer_to_human_agents, then 1 tool message
    #       (0.0016384 - 4223*0.30e-6)/0.50e-6 = 743 output tokens -> reasoning 666
    #   [4] prompt 4316, completion 16, cost 0.0016743 -> (0.0016743 - 4316*0.3e-6)/0.5e-6 = 759 -> reasoning 743
    #   one user message precedes both -> turn 0
    res = loaded("tau2-xai-grok-blakeelias", stripping=rule)
    sid = _grok_session()
    a, b = req(res, f"{sid}:2"), req(res, f"{sid}:4")
    assert (a.output_tokens, a.reasoning_tokens, a.turn) == (743, 666, 0)
    assert (b.output_tokens, b.reasoning_tokens, b.turn) == (759, 743, 0)
    assert list(a.tool_names) == ["transfer_to_human_agents"] and a.n_observations == 1
    assert a.input_tokens == 4223 and a.matched_prefix_tokens == 0
    if rule == "every_call":  # the harness: recorded prompt, prefix ends where [2]'s reasoning began
        assert (b.input_tokens, b.matched_prefix_tokens) == (4316, 4223)
    else:  # the paper's: [2]'s 666 reasoning tokens stay within the turn; the whole previous context matches
        assert (b.input_tokens, b.matched_prefix_tokens) == (4316 + 666, 4223 + 743)


def test_tau2_qwen_turn_end_rebuild_hand_read():
    # Hand-read from the Qwen file, session 67886fad-…: messages[4] (turn 1: after 2 user messages) prompt 5209,
    # completion 91 (incl. reasoning; 205 reasoning characters), messages[6] prompt 5497 completion 69 (no reasoning),
    # messages[8] (turn 2) prompt 5607.
    sid = "67886fad-d072-4572-b8fa-8ff0e9e7ec09"
    te = loaded("tau2-qwen3.5-justinchiu", stripping="turn_end")
    ec = loaded("tau2-qwen3.5-justinchiu", stripping="every_call")
    r4, r6, r8 = (req(te, f"{sid}:{j}") for j in (4, 6, 8))
    assert (r4.turn, r6.turn, r8.turn) == (1, 1, 2)
    assert (r4["round"], r6["round"], r8["round"]) == (0, 1, 0)
    assert (r4.input_tokens, r4.output_tokens) == (5209, 91)  # turn start: recorded usage exactly
    assert 0 < r4.reasoning_tokens < 91
    assert r6.input_tokens == 5497 + r4.reasoning_tokens       # reasoning retained inside the turn
    assert r6.matched_prefix_tokens == 5209 + 91               # previous call's whole context
    assert (r8.input_tokens, r8.matched_prefix_tokens) == (5607, 5209)  # turn end: prefix stops at [4]'s reasoning
    e6 = req(ec, f"{sid}:6")
    assert (e6.input_tokens, e6.matched_prefix_tokens) == (5497, 5209)
    assert list(r4.tool_names) == ["get_user_details"] and r4.n_observations == 1


def test_tau2_bad_cost_raises(tmp_path):
    path = next((SHARED / "tau2-xai-grok-blakeelias").glob("2025-10-06T06:26:09*.json.gz"))
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["simulations"][0]["messages"][2]["cost"] = 0.0016386  # 743.4 output tokens: not an integer
    (tmp_path / "x.json").write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=r"x\.json: record simulations\[0\]\.messages\[2\]: field 'cost'"):
        tau2.load(tmp_path)


# -------------------------------------------------------------------------------------- Claude Code


def test_claude_subagents_hand_read():
    res = loaded("claude_code_subagents")
    q, s = res.trace.requests, res.trace.spawns
    # PROVENANCE: 445 distinct lead requests, 41 sub-agent requests of which 3 are compaction agents
    assert (q["role"] == "lead").sum() == 445 and (q["role"] == "worker").sum() == 38
    assert len(s) == 8 and res.skipped["compaction agents (agent-acompact-*)"] == 3
    # moredip session, first request req_011CXNytQ2jANXE52nmrPbZg: usage input 9, cache_creation 645,
    # cache_read 18277, output 3; three Task tool_use blocks (green, yellow, red curry poems)
    sid = "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68"
    r = req(res, f"{sid}:req_011CXNytQ2jANXE52nmrPbZg")
    assert (r.input_tokens, r.matched_prefix_tokens, r.output_tokens) == (9 + 645 + 18277, 18277, 3)
    assert list(r.tool_names) == ["Task", "Task", "Task"] and r.role == "lead" and r.turn == 0
    sp = s[s["agent_id"] == f"{sid}:a9cad17"].iloc[0]  # toolUseResult.agentId of the green-curry Task
    assert sp.spawn_request_id == f"{sid}:req_011CXNytQ2jANXE52nmrPbZg"
    assert sp.instruction.startswith("Poem about Thai green curry\n\nWrite a poem about Thai green curry.")
    assert list(sp.tools) == ["general-purpose"] and sp.context == 18931
    assert sp.t_end > sp.t_start


def test_claude_more_embedded_workers_and_codex_hand_read():
    res = loaded("claude_code_more")
    q, s = res.trace.requests, res.trace.spawns
    cc = q[q["benchmark"] == "claude_code"]
    lead = cc[cc["role"] != "worker"]
    # PROVENANCE.md counts: distinct API requests 2,047 + 835; embedded sub-agent requests 424 + 74 / sub-agents 39 + 9;
    # lead cache-read 183.7M + 59.2M; codex 619 token_count turns, 55.2M input, 107k reasoning; 8 + 2 compactions
    assert len(lead) == 2047 + 835
    assert (cc["role"] == "worker").sum() == 424 + 74 and len(s) == 39 + 9
    assert round(lead["matched_prefix_tokens"].sum() / 1e6, 1) == 242.9
    cx = q[q["benchmark"] == "codex_cli"]
    assert len(cx) == 619 and round(cx["input_tokens"].sum() / 1e6, 1) == 55.2
    assert round(cx["reasoning_tokens"].sum() / 1e3) == 107
    assert res.skipped["compaction events in lead transcripts (no boundary emitted)"] == 10
    # entireio_cli/0240bd7a…: agent_progress record of agent a411d5c (parentToolUseID toolu_01TRJY4M…), request
    # req_011CXxPQhkif7LdccAMY2zdh: haiku, input 3 + cache_creation 7320 + cache_read 10207; Task subagent_type
    # Explore; its tool_result toolUseResult.totalDurationMs 15703
    sid = "0240bd7a-75c0-4610-8e14-089e984d6001"
    w = req(res, f"{sid}:req_011CXxPQhkif7LdccAMY2zdh")
    assert (w.role, w.agent_id, w.parent_agent_id) == ("worker", f"{sid}:a411d5c", f"{sid}:lead")
    assert (w.input_tokens, w.matched_prefix_tokens) == (3 + 7320 + 10207, 10207)
    sp = s[s["agent_id"] == f"{sid}:a411d5c"].iloc[0]
    assert list(sp.tools) == ["Explore"] and sp.total_duration_ms == 15703
    # Codex 019f05f8…: first token_count: input 17790, cached 2432, output 232, reasoning 66, after two
    # exec_command calls and their two outputs
    c0 = cx[cx["session_id"] == "019f05f8-7f53-7492-a941-83098e16765c"].iloc[0]
    assert (c0.input_tokens, c0.matched_prefix_tokens, c0.output_tokens, c0.reasoning_tokens) == (17790, 2432, 232, 66)
    assert list(c0.tool_names) == ["exec_command", "exec_command"] and c0.n_observations == 2


def test_claude_bad_json_line_names_file_and_line(tmp_path):
    src = SHARED / "claude_code_subagents" / "moredip_session_share" / "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl.gz"
    lines = gzip.decompress(src.read_bytes()).decode().splitlines()
    lines[4] = lines[4][:50]
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    with pytest.raises(TraceError, match=r"s\.jsonl: record line 5: field '\(json\)'"):
        claude_code.load(tmp_path)


def test_claude_missing_usage_names_field(tmp_path):
    src = SHARED / "claude_code_subagents" / "moredip_session_share" / "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl.gz"
    lines = gzip.decompress(src.read_bytes()).decode().splitlines()
    k = next(i for i, l in enumerate(lines) if json.loads(l).get("type") == "assistant")
    rec = json.loads(lines[k])
    del rec["message"]["usage"]
    lines[k] = json.dumps(rec)
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    with pytest.raises(TraceError, match=rf"record line {k + 1}\.message: field 'usage'|record line {k + 1}: field 'usage'"):
        claude_code.load(tmp_path)


# ------------------------------------------------------------------------------------------ Who&When


def test_magentic_one_hand_read():
    res = loaded("who_and_when")
    # Hand-Crafted/11.json history roles: [0] human, [1] [2] Orchestrator (thought), [3] Orchestrator (-> WebSurfer)
    # (115 characters), [4] WebSurfer (3868 characters)
    doc = json.loads((SHARED / "who_and_when" / "Hand-Crafted" / "11.json").read_text())
    h = doc["history"]
    spawn = req(res, "mw-11:3")
    assert spawn.role == "lead" and list(spawn.tool_names) == ["spawn_subagent"]
    w = req(res, "mw-11:4")
    assert (w.agent_id, w.role, w.parent_agent_id) == ("mw-11:WebSurfer#0", "worker", "mw-11:Orchestrator")
    n_instr, n_reply = count_tokens([h[3]["content"], h[4]["content"]])
    assert (w.input_tokens, w.output_tokens) == (n_instr, n_reply)
    assert 2.0 < len(h[4]["content"]) / n_reply < 6.0  # a real BPE tokenizer, not a character count
    sp = res.trace.spawns.set_index("agent_id").loc["mw-11:WebSurfer#0"]
    assert sp.instruction == h[3]["content"] and sp.spawn_request_id == "mw-11:3"
    # lead's context is the transcript so far: request [3]'s input = tokens of history[0..2]
    assert spawn.input_tokens == sum(count_tokens([x["content"] for x in h[:3]]))
    # PROVENANCE: 341 delegations = answered (spawn records) + re-issued + never answered
    mw = res.trace.spawns[res.trace.spawns["session_id"].str.startswith("mw-")]
    assert len(mw) + res.skipped.get("Magentic-One delegations re-issued before the agent replied "
                                     "(earlier one unanswered)", 0) \
        + res.skipped.get("Magentic-One delegations never answered", 0) == 341


def test_captain_agent_hand_read():
    res = loaded("who_and_when")
    # Algorithm-Generated/1.json: experts Excel_Expert, DataVerification_Expert, BusinessLogic_Expert;
    # history [1] Computer_terminal (observation of the lead's plan message), [2] BusinessLogic_Expert
    q = res.trace.requests
    lead = req(res, "ag-1:lead")
    assert lead.role == "lead" and lead.n_observations >= 1 and "python" in list(lead.tool_names)
    s = res.trace.spawns[res.trace.spawns["session_id"] == "ag-1"]
    assert set(s["agent_id"]) <= {"ag-1:Excel_Expert", "ag-1:DataVerification_Expert", "ag-1:BusinessLogic_Expert"}
    doc = json.loads((SHARED / "who_and_when" / "Algorithm-Generated" / "1.json").read_text())
    b = s.set_index("agent_id").loc["ag-1:BusinessLogic_Expert"]
    assert b.instruction == doc["system_prompt"]["BusinessLogic_Expert"]
    r2 = req(res, "ag-1:2")
    assert r2.agent_id == "ag-1:BusinessLogic_Expert" and r2.matched_prefix_tokens == 0
    assert (q["session_id"].str.startswith("ag-")).any()


def test_who_and_when_missing_content(tmp_path):
    (tmp_path / "Hand-Crafted").mkdir()
    (tmp_path / "Hand-Crafted" / "1.json").write_text(json.dumps({"history": [{"role": "human"}]}))
    with pytest.raises(TraceError, match=r"1\.json: record history\[0\]: field 'content'"):
        who_and_when.load(tmp_path)


# -------------------------------------------------------------------------------------------- ChatDev


def test_chatdev_hand_read():
    res = loaded("chatdev_warehouse")
    q = res.trace.requests
    real = q[~q["placeholder"].astype(bool)]
    # PROVENANCE: 34 sessions, 1,041 calls, 1,793,236 prompt + 508,759 completion tokens
    assert (real["session_id"].nunique(), len(real)) == (34, 1041)
    assert (real["input_tokens"].sum(), real["output_tokens"].sum()) == (1793236, 508759)
    # 2048_THUNLP_20230822144615/20230822144615.log, line 76: "[2023-22-08 14:46:22 INFO] **[OpenAI_Usage_Info
    # Receive]**" prompt_tokens 172, completion_tokens 198 (Prompt Engineer); Send at line 64, 14:46:15.
    # Day before month: 2023-22-08 is 22 August 2023.
    sid = "2048_THUNLP_20230822144615"
    r = req(res, f"{sid}:L76")
    assert (r.input_tokens, r.output_tokens) == (172, 198)
    assert r.t_end == datetime(2023, 8, 22, 14, 46, 22, tzinfo=timezone.utc).timestamp()
    assert r.t_end - r.t_start == 7.0
    # line 1201: CodeReviewComment (assistant Code Reviewer, user Programmer): 2064 -> 238, then line 1223 2332 -> 5
    a, b = req(res, f"{sid}:L1201"), req(res, f"{sid}:L1223")
    assert (a.role, a.domain, a.input_tokens, a.output_tokens) == ("reviewer", "CodeReviewComment", 2064, 238)
    assert (b.role, b.agent_id.split(":")[-1], b.input_tokens) == ("worker", "Programmer", 2332)
    sp = res.trace.spawns.set_index("agent_id").loc[a.agent_id]
    assert sp.role == "reviewer" and sp.phase == "CodeReviewComment"


def test_chatdev_missing_usage_line(tmp_path):
    src = SHARED / "chatdev_warehouse" / "WareHouse" / "2048_THUNLP_20230822144615" / "20230822144615.log.gz"
    text = gzip.decompress(src.read_bytes()).decode()
    lines = text.splitlines()
    assert lines[77].startswith("completion_tokens: 198")  # the Receive block at line 76 (lines 77-79)
    del lines[77]
    d = tmp_path / "WareHouse" / "p"
    d.mkdir(parents=True)
    (d / "x.log").write_text("\n".join(lines))
    with pytest.raises(TraceError, match=r"x\.log: record line 76: field 'completion_tokens'"):
        chatdev.load(tmp_path)


# ------------------------------------------------------------------------------------ Mooncake, Azure


def test_mooncake_hand_read():
    res = loaded("mooncake_fast25")
    t = res.table.set_index("block_id")
    # line 1: timestamp 0, hash_ids [0..13]; line 2: timestamp 0, hash_ids [0, 14, 15, …, 27]
    assert t.loc[0, "first_ms"] == 0 and t.loc[0, "uses"] > 2 and t.loc[0, "position"] == 0
    assert t.loc[14, "position"] == 1 and t.loc[14, "first_ms"] == 0
    r = res.extra["requests"]
    assert list(r["n_blocks"][:2]) == [14, 15] and list(r["prefix_hit_blocks"][:2]) == [0, 1]
    # PROVENANCE: 12,031 requests, 182,790 distinct block ids, last timestamp 3,536,999 ms
    assert (len(r), len(t), int(t["last_ms"].max())) == (12031, 182790, 3536999)
    assert ((t["lifetime_s"] >= 0) & (t["reuses"] == t["uses"] - 1)).all()


def test_mooncake_bad_record(tmp_path):
    (tmp_path / "conversation_trace.jsonl").write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}\n'
        '{"timestamp": 5, "input_length": 10, "output_length": 1}\n')
    with pytest.raises(TraceError, match="record line 2: field 'hash_ids': missing field"):
        mooncake.load(tmp_path)


def test_azure_hand_read_and_bad_row(tmp_path):
    st = loaded("azure_llm_2023").table.set_index("statistic")["value"]
    # PROVENANCE: 19,366 requests, mean 1,155 context and 211 generated tokens, 18:15–19:14
    assert st["requests"] == 19366
    assert round(st["ContextTokens_mean"]) == 1155 and round(st["GeneratedTokens_mean"]) == 211
    assert 3400 < st["duration_s"] < 3600
    src = SHARED / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
    lines = src.read_text().splitlines()[:10]
    lines[5] = "2023-11-16 18:15:5x.0,12,3"
    (tmp_path / azure.FILE).write_text("\n".join(lines))
    with pytest.raises(TraceError, match="record line 6: field 'TIMESTAMP'"):
        azure.load(tmp_path)


# ---------------------------------------------------------------------------------- malformed gzip


def test_truncated_gzip_names_the_file(tmp_path):
    src = next((SHARED / "tau2-xai-grok-blakeelias").glob("2025-10-06T06:26:09*.json.gz"))
    data = src.read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: record \(file\): field '\(gzip\)'"):
        tau2.load(tmp_path)
