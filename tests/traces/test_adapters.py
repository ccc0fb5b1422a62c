"""Every public trace source through its adapter, on the committed excerpts (tests/fixtures/traces):
derived fields against values read by hand, the trace-contract rules, files found by content in any
layout, bad input reported in one line, ``lachesis adapt`` and its output folder written whole."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import full_disk, siblings, snapshot
from cli_checks import one_line as _one_line
from fixture_paths import TAU2_SOURCE as SRC
from fixture_paths import TRACE_FIXTURES as FIX  # the committed excerpts, named once

from lachesis import io, read_trace
from lachesis.cli import main
from lachesis.traces import adapters, corpus
from lachesis.traces.adapters import (
    AdapterResult,
    adapt,
    azure,
    chatdev,
    claude_code,
    count_tokens,
    earlier_context,
    load,
    mooncake,
    read,
    tau2,
    unique_names,
    who_and_when,
)
from lachesis.traces.schema import TraceError
from lachesis.traces.trace import Trace

TRACE_SOURCES = ["tau2-xai-grok-blakeelias", "tau2-qwen3.5-justinchiu", "claude_code_subagents", "claude_code_more",
                 "who_and_when", "chatdev_warehouse"]
TABLE_SOURCES = ["mooncake_fast25", "azure_llm_2023"]
GROK_0626 = "2025-10-06T06:26:09.079344_airline_llm_agent_grok-3-mini_user_simulator_grok-3-mini.excerpt.json.gz"
SYN = "5e1f0000-0000-4000-8000-000000000001"  # the synthetic Agent-tool session


@lru_cache(maxsize=None)
def loaded(name: str, **kw) -> AdapterResult:
    """Parse each fixture source once per test session."""
    return read(name, FIX / name, **kw)


def req(res: AdapterResult, request_id: str):
    q = res.trace.requests
    rows = q[q["request_id"] == request_id]
    assert len(rows) == 1, request_id
    return rows.iloc[0]


def lines_of(path: Path) -> list[dict]:
    data = path.read_bytes()
    return [json.loads(x) for x in (gzip.decompress(data) if path.name.endswith(".gz") else data).decode().splitlines()]


def write_lines(path: Path, recs: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


# ------------------------------------------------------------------------------------- every source


@pytest.mark.parametrize("name", TRACE_SOURCES)
def test_every_trace_source_gives_a_valid_trace_within_the_contract(name):
    res = loaded(name)
    q = res.trace.requests
    assert isinstance(res.trace, Trace) and len(q) > 0 and res.files > 0 and not res.failed
    Trace.from_frames(q, res.trace.spawns, source=name)  # the output passes validation again
    # a matched prefix reuses at most the agent's earlier context plus the declared shared prefix
    shared = q["shared_prefix_tokens"].to_numpy() if "shared_prefix_tokens" in q else np.zeros(len(q))
    assert (q["matched_prefix_tokens"].to_numpy() <= earlier_context(q) + shared).all()
    assert (shared <= q["matched_prefix_tokens"].to_numpy()).all()
    num = q.select_dtypes("number").drop(columns=[c for c in ("t_start", "t_end") if c in q]).to_numpy(float)
    assert np.isfinite(num).all() and (num >= 0).all() and (num < 2**31).all()
    # a worker's spawn request exists, and every worker has its spawn record
    sp = res.trace.spawns
    assert set(sp["spawn_request_id"]) <= set(q["request_id"])
    assert set(q.loc[q["role"].isin(["worker", "reviewer"]), "agent_id"]) == set(sp["agent_id"])


def test_table_sources_load_from_a_folder_or_a_file():
    # a folder: the names are not hard-coded (any layout of the folder is read)
    assert len(loaded("mooncake_fast25").table) > 0
    assert "rate_per_s" in set(loaded("azure_llm_2023").table["statistic"])
    one = read("mooncake", FIX / "mooncake_fast25" / "conversation_trace.jsonl")
    assert len(one.extra["requests"]) == 300
    st = read("azure", FIX / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv").table.set_index("statistic")
    assert st.loc["requests", "value"] == 500


def test_earlier_context_and_unique_names():
    q = pd.DataFrame(dict(session_id=["s", "s", "s", "t"], agent_id=["a", "b", "a", "a"],
                          input_tokens=[10, 5, 30, 7], output_tokens=[2, 1, 3, 1]))
    assert list(earlier_context(q)) == [0, 0, 12, 0]
    files = [Path("/r/x/1.json"), Path("/r/y/1.json"), Path("/r/y/2.json.gz")]
    assert unique_names(files, Path("/nonexistent-root"), lambda p: p.name.split(".")[0])[files[2]] == "2"


# ---------------------------------------------------------------------------------------------- tau2


def test_tau2_counts_match_the_fixture_notice():
    # NOTICE.md: grok 1 + 3 + 2 simulations; qwen the first two simulations (7 + 6 agent calls, PROVENANCE table)
    g = loaded("tau2-xai-grok-blakeelias").trace.requests
    assert g["session_id"].nunique() == 6 and set(g["model"]) == {"xai/grok-3-mini", "xai/grok-4-fast-reasoning"}
    q = loaded("tau2-qwen3.5-justinchiu").trace.requests
    assert (q["session_id"].nunique(), len(q)) == (2, 13)
    assert loaded("tau2-qwen3.5-justinchiu").skipped == {"assistant message without usage (canned greeting)": 2}


@pytest.mark.parametrize("rule", ["turn_end", "every_call"])
def test_tau2_grok_reasoning_from_cost_hand_read(rule):
    # Hand-read from the 06:26:09 grok-3-mini file, messages[2] and [4]:
    #   [2] prompt 4223, completion 77, cost 0.0016384, tool transfer_to_human_agents, then 1 tool message
    #       (0.0016384 - 4223*0.30e-6)/0.50e-6 = 743 output tokens -> reasoning 666
    #   [4] prompt 4316, completion 16, cost 0.0016743 -> (0.0016743 - 4316*0.3e-6)/0.5e-6 = 759 -> reasoning 743
    #   one user message precedes both -> turn 0
    res = read("tau2-xai-grok-blakeelias", FIX / "tau2-xai-grok-blakeelias" / GROK_0626, stripping=rule)
    sid = "f3f393bf-a333-4407-bd52-67c9a221ada9"
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


def _grok_doc() -> dict:
    return json.loads(gzip.decompress((FIX / "tau2-xai-grok-blakeelias" / GROK_0626).read_bytes()))


def test_tau2_bad_cost_raises(tmp_path):
    doc = _grok_doc()
    doc["simulations"][0]["messages"][2]["cost"] = 0.0016386  # 743.4 output tokens: not an integer
    (tmp_path / "x.json").write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=r"x\.json: record simulations\[0\]\.messages\[2\]: field 'cost'"):
        tau2.load(tmp_path)


def test_tau2_same_simulation_in_two_files_is_counted_once(tmp_path):
    doc = _grok_doc()
    for n in ("a.json", "copy/b.json"):
        (tmp_path / n).parent.mkdir(exist_ok=True)
        (tmp_path / n).write_text(json.dumps(doc))
    res = read("tau2", tmp_path)
    assert len(res.trace.requests) == 2 and res.duplicates == 2 and res.files == 2


# -------------------------------------------------------------------------------------- Claude Code


def test_claude_subagent_files_hand_read():
    res = loaded("claude_code_subagents")
    s = res.trace.spawns
    # moredip session: the lead fans out 5 Task workers (agent-*.jsonl files); spotter: 1 Task worker and a
    # compaction agent (agent-acompact-*), which is not a worker
    assert len(s) == 6 and res.skipped["compaction agents (agent-acompact-*)"] == 1
    # moredip, first request req_011CXNytQ2jANXE52nmrPbZg: usage input 9, cache_creation 645, cache_read 18277,
    # output 3; three Task tool_use blocks (green, yellow, red curry poems), each answered "Async agent launched"
    sid = "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68"
    r = req(res, "req_011CXNytQ2jANXE52nmrPbZg")
    assert (r.input_tokens, r.matched_prefix_tokens, r.output_tokens) == (9 + 645 + 18277, 18277, 3)
    assert r.shared_prefix_tokens == 18277  # an agent's first cache read is a prefix it did not write
    assert list(r.tool_names) == ["Task", "Task", "Task"] and r.role == "lead" and r.turn == 0
    assert r.n_observations == 0  # its three tool results are returned sub-agents (charged from spawn records)
    sp = s[s["agent_id"] == f"{sid}:a9cad17"].iloc[0]  # toolUseResult.agentId of the green-curry Task
    assert sp.spawn_request_id == "req_011CXNytQ2jANXE52nmrPbZg"
    assert sp.instruction.startswith("Poem about Thai green curry\n\nWrite a poem about Thai green curry.")
    assert list(sp.tools) == ["general-purpose"] and sp.context == 18931
    assert sp.t_end > sp.t_start


def test_claude_embedded_workers_and_codex_hand_read():
    res = loaded("claude_code_more")
    q, s = res.trace.requests, res.trace.spawns
    # entireio_cli/0240bd7a…: agent_progress records of agent a411d5c (parentToolUseID toolu_01TRJY4M…), request
    # req_011CXxPQhkif7LdccAMY2zdh: haiku, input 3 + cache_creation 7320 + cache_read 10207; Task subagent_type
    # Explore; its tool_result toolUseResult.totalDurationMs 15703
    sid = "0240bd7a-75c0-4610-8e14-089e984d6001"
    w = req(res, "req_011CXxPQhkif7LdccAMY2zdh")
    assert (w.role, w.agent_id, w.parent_agent_id) == ("worker", f"{sid}:a411d5c", f"{sid}:lead")
    assert (w.input_tokens, w.matched_prefix_tokens) == (3 + 7320 + 10207, 10207)
    sp = s[s["agent_id"] == f"{sid}:a411d5c"].iloc[0]
    assert list(sp.tools) == ["Explore"] and sp.total_duration_ms == 15703
    # the spawning request req_011CXxPQEMCHu5zMBTRQEUak calls Task and Read: one tool result follows (Read's);
    # the Task's result (the returned sub-agent) is not an observation
    lead = req(res, "req_011CXxPQEMCHu5zMBTRQEUak")
    assert list(lead.tool_names) == ["Task", "Read"] and lead.n_observations == 1
    # Codex 019f05f8…: first token_count: input 17790, cached 2432, output 232, reasoning 66, after two
    # exec_command calls and their two outputs
    cx = q[q["benchmark"] == "codex_cli"]
    c0 = cx[cx["session_id"] == "019f05f8-7f53-7492-a941-83098e16765c"].iloc[0]
    assert (c0.input_tokens, c0.matched_prefix_tokens, c0.output_tokens, c0.reasoning_tokens) == (17790, 2432, 232, 66)
    assert list(c0.tool_names) == ["exec_command", "exec_command"] and c0.n_observations == 2
    assert c0.shared_prefix_tokens == 2432 and c0.role == "single"


def test_claude_agent_tool_spawns_become_workers():
    # the synthetic session (NOTICE.md): one request spawns two sub-agents with the newer `Agent` tool, one
    # synchronous (steps mirrored as agent_progress records), one async_launched (its own sub-agent file)
    res = loaded("claude_code_more")
    q = res.trace.requests
    mine = q[q["session_id"] == SYN]
    sp = res.trace.spawns.set_index("agent_id")
    assert set(sp.index) >= {f"{SYN}:a5y0001", f"{SYN}:a5y0002"}
    a, b = sp.loc[f"{SYN}:a5y0001"], sp.loc[f"{SYN}:a5y0002"]
    assert (a.spawn_request_id, b.spawn_request_id) == ("req_syn_lead_01", "req_syn_lead_01")
    assert a.instruction == "Review the parser\n\nRead parser.py and list every input it does not validate."
    assert (list(a.tools), list(b.tools), a.total_duration_ms) == (["Explore"], ["general-purpose"], 14000)
    assert (a.context, b.context) == (3 + 2100 + 14000, 3 + 2100 + 14000)
    workers = mine[mine["role"] == "worker"].groupby("agent_id").size()
    assert workers.to_dict() == {f"{SYN}:a5y0001": 2, f"{SYN}:a5y0002": 3}
    r = req(res, "req_syn_lead_01")
    assert (r.role, list(r.tool_names), r.n_observations, r.output_tokens) == ("lead", ["Agent", "Agent"], 0, 260)
    assert (r.input_tokens, r.matched_prefix_tokens, r.shared_prefix_tokens, r.thinking_blocks) == (16103, 14000, 14000,
                                                                                                    1)
    assert req(res, "req_syn_lead_02").n_observations == 1  # a Bash result is an observation
    assert (mine["turn"] == 0).all()  # the <task-notification> that returns the async worker is not a prompt
    last = req(res, "req_syn_lead_04")  # 16890 <= 3 + 80 + 16800 + 12: nothing to declare
    assert (last.matched_prefix_tokens, last.shared_prefix_tokens) == (16890, 0)


def _synthetic_copy(tmp_path: Path, edit) -> Path:
    src = FIX / "claude_code_more" / "synthetic_agent_tool"
    dst = tmp_path / "syn"
    shutil.copytree(src, dst)
    lead = dst / f"{SYN}.jsonl"
    write_lines(lead, [edit(r) for r in lines_of(lead)])
    return dst


def test_claude_spawn_linked_by_result_text_or_by_prompt(tmp_path):
    def no_structured_link(r):  # drop toolUseResult and parentToolUseID: the result text still names the agent
        r.pop("toolUseResult", None)
        r.pop("parentToolUseID", None)
        return r

    def no_agent_id(r):  # ...and drop the "agentId: …" text too: only the prompt links spawn and worker
        r = no_structured_link(r)
        for b in (r.get("message") or {}).get("content") or []:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                b["content"] = "done"
        return r

    for edit in (no_structured_link, no_agent_id):
        res = read("claude_code", _synthetic_copy(tmp_path / edit.__name__, edit))
        assert set(res.trace.spawns["agent_id"]) == {f"{SYN}:a5y0001", f"{SYN}:a5y0002"}, edit.__name__
        assert req(res, "req_syn_lead_01").n_observations == 0


def test_claude_unlinked_spawn_result_stays_an_observation(tmp_path):
    def drop_worker(r):  # the synchronous worker's steps AND its totals are gone: nothing to build it from
        if r.get("type") == "progress":
            return {"type": "system", "timestamp": r["timestamp"]}
        if isinstance(r.get("toolUseResult"), dict) and "totalDurationMs" in r["toolUseResult"]:
            r = dict(r, toolUseResult={"status": "completed", "agentId": "a5y0001"})
        return r

    res = read("claude_code", _synthetic_copy(tmp_path, drop_worker))
    assert list(res.trace.spawns["agent_id"]) == [f"{SYN}:a5y0002"]
    assert res.skipped["spawns without per-request worker records or recorded totals"] == 1
    assert req(res, "req_syn_lead_01").n_observations == 1  # the unlinked Task result: charged as an observation


def test_claude_spawn_known_by_totals_becomes_a_synthetic_worker(tmp_path):
    # the worker's steps are gone but its spawn's result keeps totalDurationMs and totalTokens
    def drop_worker(r):
        return {"type": "system", "timestamp": r["timestamp"]} if r.get("type") == "progress" else r

    res = read("claude_code", _synthetic_copy(tmp_path, drop_worker))
    assert set(res.trace.spawns["agent_id"]) == {f"{SYN}:a5y0001", f"{SYN}:a5y0002"}
    q = res.trace.requests
    syn = q[q["synthetic"]]
    assert syn["request_id"].tolist() == ["toolu_syn_A:totals"] and syn["agent_id"].tolist() == [f"{SYN}:a5y0001"]
    assert syn["input_tokens"].tolist() == [15813] and syn["role"].tolist() == ["worker"]
    assert (syn["t_end"] - syn["t_start"]).tolist() == pytest.approx([14.0])
    assert req(res, "req_syn_lead_01").n_observations == 0  # its result is the returned sub-agent's
    assert not any("totals" in k for k in res.skipped)
def _request_ids(path: Path) -> set[str]:
    """requestIds of a transcript's assistant records, lead and embedded sub-agent alike (read independently)."""
    out = set()
    for r in lines_of(path):
        m = r.get("data", {}).get("message") if r.get("type") == "progress" else r
        if isinstance(m, dict) and m.get("type") == "assistant" and m.get("requestId"):
            out.add(m["requestId"])
    return out


def test_repeated_requests_across_transcripts_are_counted_once():
    res = loaded("claude_code_more")
    q = res.trace.requests
    ck = FIX / "claude_code_more" / "entireio_cli_checkpoints"
    early, late = _request_ids(ck / "9f/e3cfdef74d/0/full.jsonl.gz"), _request_ids(ck / "9b/3838281539/0/full.jsonl.gz")
    resumed = _request_ids(ck / "ea/59bf8d9e0b/0/full.jsonl.gz")
    original = _request_ids(FIX / "claude_code_more" / "entireio_cli" / "b4dcf65c-8a8f-4be8-80c2-fcebbda55946.jsonl.gz")
    assert early < late and resumed <= original  # cumulative checkpoints; a resumed session's copied history
    assert res.duplicates == len(early) + len(resumed)
    # the checkpointed session is the union of its requests, each once
    assert set(q.loc[q["session_id"] == "6da7d497-00e2-460d-a6b4-d280e0314cfd", "request_id"]) == late
    assert q["request_id"].is_unique
    assert "e1bc91d1-2731-4b12-bf00-44f4dcddffd1" not in set(q["session_id"])  # nothing of its own in the excerpt


def test_a_resumed_copy_keeps_only_its_new_requests(tmp_path):
    # a second transcript of the same session: the first records copied (history), then one request of its own
    src = FIX / "claude_code_more" / "synthetic_agent_tool"
    shutil.copytree(src, tmp_path / "s")
    recs = lines_of(src / f"{SYN}.jsonl")
    new = json.loads(json.dumps(recs[1]))
    new.update(timestamp="2026-03-02T11:00:00.000Z", requestId="req_syn_resumed")
    new["message"]["usage"] = {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 16000,
                               "output_tokens": 7}
    write_lines(tmp_path / "s" / "resumed" / "copy.jsonl", recs[:4] + [new])
    res = read("claude_code", tmp_path / "s")
    q = res.trace.requests
    assert res.duplicates == 1  # req_syn_lead_01 is in both files: counted once, in the longer one
    assert list(q.loc[q["session_id"] == f"{SYN}#2", "request_id"]) == ["req_syn_resumed"]
    r = req(res, "req_syn_resumed")  # its cache read of the copied history is a prefix this chain never wrote
    assert (r.matched_prefix_tokens, r.shared_prefix_tokens, r.role) == (16000, 16000, "single")
    assert req(res, "req_syn_lead_01").session_id == SYN


def test_records_written_back_to_back_on_one_line_are_read(tmp_path):
    lines = (FIX / "claude_code_more" / "synthetic_agent_tool" / f"{SYN}.jsonl").read_text().splitlines()
    lines[1:3] = [lines[1] + lines[2]]  # a record appended without its newline
    d = shutil.copytree(FIX / "claude_code_more" / "synthetic_agent_tool", tmp_path / "s")
    (d / f"{SYN}.jsonl").write_text("\n".join(lines) + "\n")
    got, ref = read("claude_code", d).trace.requests, loaded("claude_code_more").trace.requests
    ref = ref[ref["session_id"] == SYN]
    assert got[["request_id", "input_tokens",
                "output_tokens"]].equals(ref[["request_id", "input_tokens", "output_tokens"]]
                                                                        .reset_index(drop=True))


def test_claude_bad_json_line_names_file_and_line(tmp_path):
    lines = (FIX / "claude_code_more" / "synthetic_agent_tool" / f"{SYN}.jsonl").read_text().splitlines()
    lines[4] = lines[4][:50]
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    with pytest.raises(TraceError, match=r"s\.jsonl: record line 5: field '\(json\)'"):
        claude_code.load(tmp_path)


def test_claude_missing_usage_names_field(tmp_path):
    recs = lines_of(FIX / "claude_code_more" / "synthetic_agent_tool" / f"{SYN}.jsonl")
    k = next(i for i, r in enumerate(recs) if r.get("type") == "assistant")
    del recs[k]["message"]["usage"]
    write_lines(tmp_path / "s.jsonl", recs)
    with pytest.raises(TraceError, match=rf"record line {k + 1}\.message: field 'usage'"):
        claude_code.load(tmp_path)


# ------------------------------------------------------------------------------------------ Who&When


def test_magentic_one_hand_read():
    res = loaded("who_and_when")
    # Hand-Crafted/33.json history roles: [0] human, [1] [2] Orchestrator (thought), [3] Orchestrator (-> WebSurfer),
    # [4] WebSurfer, [5] Orchestrator (thought), [6] Orchestrator (-> WebSurfer), [7] Orchestrator (thought),
    # [8] WebSurfer
    h = json.loads((FIX / "who_and_when" / "Hand-Crafted" / "33.json").read_text())["history"]
    spawn = req(res, "mw-33:3")
    assert spawn.role == "lead" and list(spawn.tool_names) == ["spawn_subagent"]
    assert spawn.n_observations == 0  # the WebSurfer's reply is a returned sub-agent, not an observation
    w = req(res, "mw-33:4")
    assert (w.agent_id, w.role, w.parent_agent_id) == ("mw-33:WebSurfer#0", "worker", "mw-33:Orchestrator")
    n_instr, n_reply = count_tokens([h[3]["content"], h[4]["content"]])
    assert (w.input_tokens, w.output_tokens) == (n_instr, n_reply)
    assert 2.0 < len(h[4]["content"]) / n_reply < 6.0  # a real BPE tokenizer, not a character count
    sp = res.trace.spawns.set_index("agent_id").loc["mw-33:WebSurfer#0"]
    assert sp.instruction == h[3]["content"] and sp.spawn_request_id == "mw-33:3"
    # lead's context is the transcript so far: request [3]'s input = tokens of history[0..2]
    assert spawn.input_tokens == sum(count_tokens([x["content"] for x in h[:3]]))
    # the second delegation ([6]) is answered at [8], after a lead thought at [7]
    assert req(res, "mw-33:8").agent_id == "mw-33:WebSurfer#1" and req(res, "mw-33:7").role == "lead"


def test_captain_agent_hand_read():
    res = loaded("who_and_when")
    # Algorithm-Generated/1.json: experts Excel_Expert, DataVerification_Expert, BusinessLogic_Expert;
    # history [1] Computer_terminal (observation of the lead's plan message), [2] BusinessLogic_Expert
    lead = req(res, "ag-1:lead")
    assert lead.role == "lead" and lead.n_observations >= 1 and "python" in list(lead.tool_names)
    s = res.trace.spawns[res.trace.spawns["session_id"] == "ag-1"]
    assert set(s["agent_id"]) <= {"ag-1:Excel_Expert", "ag-1:DataVerification_Expert", "ag-1:BusinessLogic_Expert"}
    doc = json.loads((FIX / "who_and_when" / "Algorithm-Generated" / "1.json").read_text())
    b = s.set_index("agent_id").loc["ag-1:BusinessLogic_Expert"]
    assert b.instruction == doc["system_prompt"]["BusinessLogic_Expert"]
    r2 = req(res, "ag-1:2")
    assert r2.agent_id == "ag-1:BusinessLogic_Expert" and r2.matched_prefix_tokens == 0


def test_who_and_when_benchmark_comes_from_the_task_id():
    q = loaded("who_and_when").trace.requests
    got = q.groupby("session_id")["benchmark"].first().to_dict()
    for path in sorted((FIX / "who_and_when").rglob("*.json")):
        qid = json.loads(path.read_text())["question_ID"]
        want = "gaia" if re.fullmatch(r"[0-9a-f-]{36}", qid) else "assistantbench"
        sid = ("ag-" if path.parent.name == "Algorithm-Generated" else "mw-") + path.stem
        assert got[sid] == want, path
    assert set(got.values()) == {"gaia", "assistantbench"}  # both are in the excerpt
    assert who_and_when.benchmark({"question_ID": "no-such-id"}) == "unknown"


def test_who_and_when_missing_content(tmp_path):
    (tmp_path / "Hand-Crafted").mkdir()
    (tmp_path / "Hand-Crafted" / "1.json").write_text(json.dumps({"history": [{"role": "human"}]}))
    with pytest.raises(TraceError, match=r"1\.json: record history\[0\]: field 'content'"):
        who_and_when.load(tmp_path)


# -------------------------------------------------------------------------------------------- ChatDev


def test_chatdev_hand_read():
    res = loaded("chatdev_warehouse")
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


def test_chatdev_log_mixing_two_date_formats_parses():
    # Tetris_…20240115181403: "[2024-15-01 18:14:05 INFO]" (day first) and, from line 1195,
    # "[2024-01-15 18:15:13 INFO]" (month first); both are 15 January 2024
    q = loaded("chatdev_warehouse").trace.requests
    t = q[q["session_id"] == "Tetris_zhuoyundu_20240115181403"]
    day = pd.to_datetime(pd.concat([t["t_start"], t["t_end"]]), unit="s").dt.date.unique()
    assert len(t) > 0 and list(day) == [datetime(2024, 1, 15).date()]


def test_chatdev_ambiguous_date_takes_the_reading_nearest_the_previous_line(tmp_path):
    log = ("[2023-05-06 10:00:00 INFO] System: **[RolePlaying]**\n"
           "| **assistant_role_name** | Programmer |\n| **user_role_name** | Reviewer |\n"
           "[2023-05-06 10:00:01 INFO] **[OpenAI_Usage_Info Send]**\n"
           "[2023-06-05 10:00:09 INFO] **[OpenAI_Usage_Info Receive]**\nprompt_tokens: 10\ncompletion_tokens: 2\n")
    (tmp_path / "run.log").write_text(log)
    r = read("chatdev", tmp_path / "run.log").trace.requests
    r = r[~r["placeholder"].astype(bool)].iloc[0]
    # "2023-05-06" can only be day first (5 June); "2023-06-05" day first is 6 May, a month before the line
    # above it, month first 5 June, 8 s after it: the nearer reading is taken
    assert r.t_end - r.t_start == 8.0
    assert r.t_end == datetime(2023, 6, 5, 10, 0, 9, tzinfo=timezone.utc).timestamp()
    (tmp_path / "bad.log").write_text(log.replace("2023-06-05 10:00:09", "2023-13-14 10:00:09"))
    with pytest.raises(TraceError, match=r"bad\.log: record line 5: field 'timestamp'"):
        read("chatdev", tmp_path / "bad.log")


def test_a_log_without_usage_is_counted_and_no_request_at_all_is_an_error(tmp_path):
    (tmp_path / "early.log").write_text("[2023-25-06 20:10:30 INFO] **[Preprocessing]**\n")
    with pytest.raises(TraceError, match=r"no request in any file"):
        read("chatdev", tmp_path)
    shutil.copytree(FIX / "chatdev_warehouse", tmp_path / "more")
    res = read("chatdev", tmp_path)
    assert res.skipped["ChatDev logs without any LLM usage record (no requests)"] == 1
    assert res.trace.requests["session_id"].nunique() == 2


def test_chatdev_missing_usage_line(tmp_path):
    text = gzip.decompress((FIX / "chatdev_warehouse" / "WareHouse" / "2048_THUNLP_20230822144615"
                            / "20230822144615.log.gz").read_bytes()).decode()
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
    assert len(r) == 300 and (res.table["trace"] == "conversation_trace").all()
    assert ((t["lifetime_s"] >= 0) & (t["reuses"] == t["uses"] - 1)).all()


def test_mooncake_bad_record(tmp_path):
    (tmp_path / "conversation_trace.jsonl").write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}\n'
        '{"timestamp": 5, "input_length": 10, "output_length": 1}\n')
    with pytest.raises(TraceError, match="record line 2: field 'hash_ids': missing field"):
        mooncake.load(tmp_path)


def test_azure_hand_read_and_bad_row(tmp_path):
    st = loaded("azure_llm_2023").table.set_index("statistic")["value"]
    rows = (FIX / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv").read_text().splitlines()
    ctx = [int(x.split(",")[1]) for x in rows[1:]]
    assert st["requests"] == 500 and st["ContextTokens_mean"] == pytest.approx(np.mean(ctx))
    bad = rows[:10]
    bad[5] = "2023-11-16 18:15:5x.0,12,3"
    (tmp_path / "mine.csv").write_text("\n".join(bad))
    with pytest.raises(TraceError, match="record line 6: field 'TIMESTAMP'"):
        azure.load(tmp_path)


# ------------------------------------------------------------------------------- bad input, one line


@pytest.mark.parametrize("value", ["1e30", "Infinity", str(2**63), "-5", "true"])
def test_out_of_range_numbers_are_rejected_naming_the_field(tmp_path, value):
    recs = (FIX / "claude_code_more" / "synthetic_agent_tool" / f"{SYN}.jsonl").read_text().splitlines()
    k = next(i for i, r in enumerate(recs) if '"type":"assistant"' in r)
    recs[k] = recs[k].replace('"input_tokens":3', f'"input_tokens":{value}', 1)
    (tmp_path / "s.jsonl").write_text("\n".join(recs))
    with pytest.raises(TraceError, match=rf"s\.jsonl: record line {k + 1}\.message\.usage: field 'input_tokens'"):
        read("claude_code", tmp_path / "s.jsonl")
    doc = _grok_doc()
    doc["simulations"][0]["messages"][2]["usage"]["prompt_tokens"] = json.loads(value)
    (tmp_path / "t.json").write_text(json.dumps(doc))
    with pytest.raises(TraceError,
                       match=r"t\.json: record simulations\[0\]\.messages\[2\]\.usage: field 'prompt_tokens'"):
        read("tau2", tmp_path / "t.json")
    (tmp_path / "m.jsonl").write_text(f'{{"timestamp": 0, "input_length": {value}, "output_length": 1, "hash_ids": '
                                      f'[0]}}\n')
    with pytest.raises(TraceError, match=r"m\.jsonl: record line 1: field 'input_length'"):
        read("mooncake", tmp_path / "m.jsonl")


@pytest.mark.parametrize("value", ["1e30", "inf", "nan", "-3", "2.5"])
def test_azure_out_of_range_token_counts(tmp_path, value):
    (tmp_path / "a.csv").write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,{value},4\n")
    with pytest.raises(TraceError, match=r"a\.csv: record line 2: field 'ContextTokens'"):
        read("azure", tmp_path)


def test_truncated_gzip_names_the_file(tmp_path):
    data = (FIX / "tau2-xai-grok-blakeelias" / GROK_0626).read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: record \(file\): field '\(gzip\)'"):
        tau2.load(tmp_path)
    (tmp_path / "cut.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(TraceError, match=r"cut\.jsonl\.gz: record \(file\): field '\(gzip\)'"):
        read("claude_code", tmp_path / "cut.jsonl.gz")


def test_a_bad_file_is_skipped_and_reported_without_blocking_its_siblings(tmp_path):
    shutil.copytree(FIX / "chatdev_warehouse", tmp_path / "c")
    (tmp_path / "c" / "broken.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    res = read("chatdev", tmp_path / "c")
    assert res.trace.requests["session_id"].nunique() == 2 and res.files == 2
    assert [Path(f).name for f, _ in res.failed] == ["broken.log.gz"] and "gzip" in res.failed[0][1]


def test_a_file_of_the_wrong_source_is_a_one_line_error(tmp_path):
    with pytest.raises(TraceError, match=r"conversation_trace\.jsonl: record line 1: field 'type'.*not a Claude Code"):
        read("claude_code", FIX / "mooncake_fast25")
    with pytest.raises(TraceError, match=r"field 'info': missing field"):
        read("tau2", FIX / "who_and_when" / "Hand-Crafted" / "33.json")
    with pytest.raises(TraceError, match=r"no file could be read as Who&When records \(3 failed"):
        read("who_and_when", FIX / "tau2-xai-grok-blakeelias")
    (tmp_path / "x.csv").write_text("TIMESTAMP,Other\n2023-11-16 18:15:46.6805900,1\n")
    with pytest.raises(TraceError, match=r"x\.csv: record line 1: field 'ContextTokens': column missing"):
        read("azure", tmp_path / "x.csv")


def test_no_matching_file_or_no_such_path(tmp_path):
    (tmp_path / "README.txt").write_text("nothing here")
    with pytest.raises(TraceError, match=r"no ChatDev log \(\*\.log or \*\.log\.gz\)"):
        read("chatdev", tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        read("mooncake", tmp_path / "missing")
    with pytest.raises(ValueError, match=r"unknown dataset 'nope'; choose a registered dataset .* or an adapter"):
        read("nope", tmp_path)


def test_registered_files_are_still_verified(tmp_path):
    # a user's copy laid out like the cache is not the registered bytes: load() refuses it, read() takes it
    shutil.copytree(FIX / "azure_llm_2023", tmp_path / "azure_llm_2023")
    from lachesis.traces.datasets import DatasetError

    with pytest.raises(DatasetError, match=r"azure_llm_2023/"):
        load("azure_llm_2023", local=tmp_path)
    assert read("azure_llm_2023", tmp_path / "azure_llm_2023").table is not None


# -------------------------------------------------------------------------- lachesis adapt, any layout


def _relayout(src: Path, dst: Path) -> None:
    """Every data file of ``src`` under a new name, each in its own nested folder (sub-agent files too)."""
    for i, f in enumerate(sorted(p for p in src.rglob("*") if p.is_file() and p.name != "NOTICE.md")):
        suffix = "".join(s for s in f.suffixes if s in (".json", ".jsonl", ".log", ".csv", ".gz"))
        target = dst / f"deep{i % 3}" / f"run{i}" / f"renamed_{i}{suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)


@pytest.mark.parametrize("name", TRACE_SOURCES + TABLE_SOURCES)
def test_adapt_converts_a_renamed_and_relaid_out_copy(tmp_path, name):
    _relayout(FIX / name, tmp_path / "mine")
    rep = adapt(name, tmp_path / "mine", tmp_path / "out", fmt="jsonl")
    ref = loaded(name)
    assert rep.files == ref.files and not rep.failed and rep.duplicates == ref.duplicates
    if ref.trace is None:
        table = pd.read_json(tmp_path / "out" / f"{rep.written[0].rsplit('/', 1)[-1]}", lines=True)
        assert len(table) == len(ref.table)
        return
    back = read_trace(tmp_path / "out")
    q, r = back.requests, ref.trace.requests
    assert (rep.sessions, rep.requests, rep.spawns) == (r["session_id"].nunique(), len(r), len(ref.trace.spawns))
    assert rep.workers == r.loc[r["role"].isin(["worker", "reviewer"]), "agent_id"].nunique()
    for col in ("input_tokens", "matched_prefix_tokens", "output_tokens", "reasoning_tokens", "n_observations"):
        assert q[col].sum() == r[col].sum(), col
    saved = json.loads((tmp_path / "out" / "adapt_report.json").read_text())
    assert saved["requests"] == len(r) and saved["dataset"] == name


def test_adapt_cli_prints_the_report_and_errors_in_one_line(tmp_path, capsys):
    assert main(["adapt", "claude_code", str(FIX / "claude_code_more"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    for want in ("sessions: 6", "requests: 68", "workers: 5", "duplicates (repeated requests counted once): 10",
                 "skipped 1: spawn records repeated in another copy of their session"):
        assert want in out, want
    assert len(read_trace(tmp_path / "o").requests) == 68
    # a folder with one unreadable file: the rest is converted, the file is named with its reason, exit 1
    shutil.copytree(FIX / "azure_llm_2023", tmp_path / "az")
    (tmp_path / "az" / "other.csv").write_text("a,b\n1,2\n")
    assert main(["adapt", "azure", str(tmp_path / "az"), "--out", str(tmp_path / "o2")]) == 1
    assert re.search(r"skipped file .*other\.csv: .*field 'TIMESTAMP': column missing", capsys.readouterr().out)
    for argv, want in ((["adapt", "nope", str(tmp_path), "--out", str(tmp_path / "o3")], "unknown dataset 'nope'"),
                       (["adapt", "mooncake", str(tmp_path / "none"), "--out", str(tmp_path / "o4")], "no such file"),
                       (["adapt", "mooncake", str(FIX / "mooncake_fast25"), "--out",
                         str(FIX / "README.md")], "is not a folder")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert want in err and err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------------------- the real-traces report


def test_report_lists_missing_sources_and_flags_small_samples(tmp_path):
    from lachesis.analysis import report

    for name in ("tau2-qwen3.5-justinchiu", "who_and_when"):
        shutil.copytree(FIX / name, tmp_path / "data" / name)
    out = report.build("tau2-qwen3.5-justinchiu,who_and_when,azure_llm_2023", data=tmp_path / "data")
    assert list(out["missing"]["source"]) == ["azure_llm_2023"]
    assert list(out["missing"]["how_to_get"]) == ["lachesis datasets fetch azure_llm_2023"]
    assert "azure_llm_2023: lachesis datasets fetch azure_llm_2023" in report.missing_note(out)
    path = report.write_missing(out, tmp_path / "figs")
    assert json.loads(path.read_text()) == [{"source": "azure_llm_2023",
                                             "how_to_get": "lachesis datasets fetch azure_llm_2023"}]
    cmp = out["compare"]
    assert {"n", "unit", "flag"} <= set(cmp.columns) and len(cmp)
    # 2 Qwen sessions, 2 sessions per Who&When group: every row is a small sample, flagged and not judged
    assert (cmp["n"] < report.MIN_UNITS).all() and cmp["flag"].str.startswith("fewer than 20").all()
    qwen = cmp[cmp["statistic"].str.contains("tau2-qwen")]
    assert (qwen["n"] == 2).all() and (qwen["unit"] == "sessions").all()
    assert report.summary_sentences(cmp).startswith("No statistic here has both a paper range and a large enough "
                                                    f"sample to judge. {len(cmp)} statistic(s) come from fewer than 20")


def test_summary_judges_only_large_enough_samples():
    from lachesis.analysis import report

    cmp = pd.DataFrame({"statistic": ["a [g1]", "a [g2]", "b [g1]"], "in_paper_range": ["yes", "no", "no"],
                        "n": [25, 3, 40], "flag": ["", "fewer than 20 sessions: not judged", ""]})
    text = report.summary_sentences(cmp)
    assert text.startswith("1 of 2 per-source statistics with at least 20 units fall inside the paper's range")
    assert "1 statistic(s) come from fewer than 20 units" in text


def test_report_offline_without_data_lists_every_source_and_downloads_nothing(monkeypatch, tmp_path):
    from lachesis.analysis import report

    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "empty-cache"))
    out = report.build("mooncake_fast25,azure_llm_2023")
    assert list(out["missing"]["source"]) == ["mooncake_fast25", "azure_llm_2023"]
    assert out["sources"].empty and out["compare"].empty
    assert {"source", "requests", "segments"} <= set(out["sources"].columns)  # what the notebook sums
    assert not (tmp_path / "empty-cache").exists()


def test_report_names_files_relative_to_the_source_folder(tmp_path):
    """The real-traces tables name a repeated session's files under its source's folder, so the figures do not
    depend on where the data lies."""
    from lachesis.analysis import report

    tables = []
    for where in ("a", "b/deeper"):
        shutil.copytree(FIX / "claude_code_more", tmp_path / where / "claude_code_more")
        tables.append(report.build("claude_code_more", data=tmp_path / where)["sources"])
    dup = tables[0].iloc[0]["duplicate_sessions"]
    assert " repeats " in dup and str(tmp_path) not in dup and dup.startswith("entireio_cli")
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_claude_spawn_with_empty_usage_and_no_totals_is_skipped(tmp_path):
    """A spawn's result with ``usage: {}`` and no ``totalTokens`` holds no token count: skipped and counted (it used
    to become a 0-token synthetic worker lasting its recorded duration)."""
    def empty_usage(r):
        if r.get("type") == "progress":
            return {"type": "system", "timestamp": r["timestamp"]}
        tur = r.get("toolUseResult")
        if isinstance(tur, dict) and "totalDurationMs" in tur:
            tur = {k: v for k, v in tur.items() if k != "totalTokens"}
            r = dict(r, toolUseResult=dict(tur, usage={}))
        return r

    res = read("claude_code", _synthetic_copy(tmp_path, empty_usage))
    assert not res.trace.requests["synthetic"].any()
    assert res.skipped["spawns with recorded totals that hold no token count (usage: {})"] >= 1


# -- bad input files refused by name, in one line -----------------------------------------------------


ADAPTERS = ["azure", "mooncake", "tau2", "who_and_when"]


def _adapt(capsys, tmp_path: Path, adapter: str, name: str, data: bytes) -> str:
    f = tmp_path / name
    f.write_bytes(data)
    assert main(["adapt", adapter, str(f), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"lachesis adapt: error: {f}: record "), err
    assert " field " in err, err
    assert not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("suffix", [".json", ".csv", ".jsonl"])
def test_an_empty_file_is_named_as_empty(tmp_path, capsys, adapter, suffix) -> None:
    err = _adapt(capsys, tmp_path, adapter, "empty" + suffix, b"")
    assert "empty file" in err or "no request record" in err, err


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_wrong_format_file_names_the_file_and_field(tmp_path, capsys, adapter) -> None:
    _adapt(capsys, tmp_path, adapter, "notes.json", b"hello world\n")


def test_a_csv_that_does_not_parse_names_the_file(tmp_path, capsys) -> None:
    err = _adapt(capsys, tmp_path, "azure", "t.csv",
                 b'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,"1\n')
    assert "field '(csv)': not CSV" in err


@pytest.mark.parametrize("adapter", [*ADAPTERS, "claude_code"])
def test_a_non_utf8_byte_names_the_file_line_and_byte(tmp_path, capsys, adapter) -> None:
    """Not Python's codec message naming no file: the file, the byte's line, its value and its offset."""
    err = _adapt(capsys, tmp_path, adapter, "bad.jsonl", b'{"type": "user"}\n{"a": "\xff\xfe"}\n')
    assert "record line 2: field '(encoding)': not UTF-8: byte 0xff at offset 24 of the file (column 8)" in err


def test_an_unreadable_plain_transcript_is_not_called_a_corrupt_gzip(tmp_path, monkeypatch) -> None:
    import builtins

    from lachesis.traces.adapters import claude_code

    f = tmp_path / "s.jsonl"
    f.write_text('{"type": "user"}\n')
    real = builtins.open

    def deny(path, *a, **k):
        if str(path) == str(f):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(builtins, "open", deny)
    with pytest.raises(PermissionError) as e:
        claude_code.sniff(f)
    assert e.value.filename == str(f) and "gzip" not in str(e.value)


@pytest.mark.parametrize("adapter", ["mooncake", "tau2", "who_and_when"])
def test_json_nested_too_deep_names_the_file(tmp_path, capsys, adapter) -> None:
    err = _adapt(capsys, tmp_path, adapter, "deep.json", b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert "nested deeper than Python's JSON reader allows" in err


def test_a_folder_of_bad_files_lists_each(tmp_path, capsys) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (d / "empty.json").write_bytes(b"")
    assert main(["adapt", "tau2", str(d), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys)
    assert "no file could be read as tau2-bench results (2 failed" in err and "deep.json" in err


# -- an output folder written whole: one format, the old folder kept on a failure ---------------------


def test_adapt_into_a_reused_folder_holds_one_format(tmp_path) -> None:
    out = tmp_path / "out"
    adapters.adapt("tau2", SRC, out, fmt="parquet")
    rep = adapters.adapt("tau2", SRC, out, fmt="jsonl")
    assert sorted(p.name for p in out.iterdir()) == ["adapt_report.json", "requests.jsonl", "spawns.jsonl"]
    assert rep.written == [str(out / n) for n in ("requests.jsonl", "spawns.jsonl", "adapt_report.json")]
    assert siblings(out) == []  # no temporary folder left beside it


def test_a_failed_adapt_leaves_the_old_folder_intact(tmp_path, capsys, monkeypatch) -> None:
    out = tmp_path / "out"
    adapters.adapt("tau2", SRC, out, fmt="parquet")
    before = snapshot(out)
    monkeypatch.setattr(adapters, "write_json", full_disk)  # the report, written after the tables
    assert main(["adapt", "tau2", str(SRC), "--out", str(out), "--format", "jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and str(out) in err[0]
    assert snapshot(out) == before and siblings(out) == []


def test_adapt_refuses_an_out_holding_its_source(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for f in SRC.iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ValueError, match="holds the source"):
        adapters.adapt("tau2", src, src)
    with pytest.raises(ValueError, match="holds the source"):
        adapters.adapt("tau2", src, tmp_path)


def test_empty_out_refused_by_the_functions_too(tmp_path) -> None:
    with pytest.raises(ValueError, match="empty path"):
        adapters.adapt("tau2", SRC, "")
    with pytest.raises(ValueError, match="empty path"):
        corpus.write_all("", 0.02, 0, "jsonl", ["bfcl_base"])


def _adapt_fails(tmp_path, capsys, monkeypatch, patch) -> None:
    out = tmp_path / "out"
    adapters.adapt("claude_code_subagents", FIX / "claude_code_subagents", out, fmt="jsonl")
    before = snapshot(out)
    assert {"requests.jsonl", "spawns.jsonl", "adapt_report.json"} <= set(before)
    patch(monkeypatch)
    assert main(["adapt", "claude_code_subagents", str(FIX / "claude_code_subagents"), "--out", str(out),
                 "--format", "jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and "left as it was" in err[0], err
    assert snapshot(out) == before and siblings(out) == []


def test_a_full_disk_after_the_requests_leaves_the_old_requests_spawns_and_report(tmp_path, capsys,
                                                                                   monkeypatch) -> None:
    from lachesis.traces import trace

    real = trace._write_table

    def spawns_fail(df, path):
        if path.name.startswith("spawns"):
            full_disk()
        return real(df, path)

    _adapt_fails(tmp_path, capsys, monkeypatch, lambda m: m.setattr(trace, "_write_table", spawns_fail))


def test_a_full_disk_half_way_through_a_file_leaves_the_old_folder(tmp_path, capsys, monkeypatch) -> None:
    real = io.atomic_write

    def half_then_full(path, write):
        if Path(path).name.startswith("requests"):
            def partial(tmp):
                write(tmp)
                with open(tmp, "r+b") as fh:  # the disk filled half-way through this file
                    fh.truncate(max(1, fh.seek(0, 2) // 2))
                full_disk()
            return real(path, partial)
        return real(path, write)

    from lachesis.traces import trace

    _adapt_fails(tmp_path, capsys, monkeypatch, lambda m: m.setattr(trace, "atomic_write", half_then_full))


def test_a_full_disk_at_the_swap_restores_the_old_folder(tmp_path, capsys, monkeypatch) -> None:
    real = os.replace

    def swap_fails(src, dst):
        if str(src).endswith(".new"):  # the new folder moved in over the old one
            full_disk()
        return real(src, dst)

    _adapt_fails(tmp_path, capsys, monkeypatch, lambda m: m.setattr(io.os, "replace", swap_fails))


def test_an_option_the_adapter_does_not_take_names_the_adapters_that_do(tmp_path, capsys) -> None:
    """``adapt --stripping`` on a non-tau2 source, and a Claude Code tolerance given to another adapter: one line
    naming the option and who takes it, not a TypeError."""
    f = FIX / "mooncake_fast25"
    assert main(["adapt", "mooncake", str(f), "--out", str(tmp_path / "o"), "--stripping", "every_call"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lachesis adapt: error: option 'stripping': the mooncake adapter does not take it; tau2 does"]
    with pytest.raises(ValueError, match="option 'cache_tolerance_tokens': the tau2 adapter does not take it; "
                                         "claude_code does"):
        adapters.read("tau2", f, cache_tolerance_tokens=4)
    assert adapters.options("tau2") == ("stripping",) and adapters.options("azure") == ()
    assert not (tmp_path / "o").exists()
