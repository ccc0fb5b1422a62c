"""Who&When failure logs (GAIA and AssistantBench tasks) → Trace (structural axis, text only).

Magentic-One and CaptainAgent records, recognised by content; tokens counted from the message text, no
times.  How each harness's lead, workers and spawn records are derived, and the assumptions:
docs/design.md §7 (Who&When).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lachesis.traces.adapters import (
    AdapterResult,
    count_tokens,
    dedupe_requests,
    find_files,
    frames_to_trace,
    need,
    read_each,
    read_json,
    require_data,
    stem,
    unique_names,
)
from lachesis.traces.schema import TraceError

_DELEGATE = re.compile(r"^Orchestrator \(-> (.+)\)$")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_HEX64 = re.compile(r"[0-9a-f]{64}", re.I)
TERMINAL = "Computer_terminal"


def load(path: Path) -> AdapterResult:
    """Every Who&When record (``*.json[.gz]``) in a file or folder → one Trace."""
    path = Path(path)
    res = AdapterResult(dataset=path.name)
    files = find_files(path, (".json", ".json.gz"), "Who&When record")
    parsed = read_each(res, files, lambda p, part: _record(p))
    require_data(res, path, len(parsed), "Who&When records")
    rows: list[dict[str, Any]] = []
    spawns: list[dict[str, Any]] = []
    for kind, build in (("ag", captain_agent), ("mw", magentic_one)):
        mine = [(p, rec) for p, rec in parsed if rec[0] == kind]
        names = unique_names([p for p, _ in mine], path, stem)
        for p, (_, doc, hist, bench) in mine:
            r, s = build(p, f"{kind}-{names[p]}", doc, hist, bench, res)
            rows += r
            spawns += s
    res.trace = frames_to_trace(dedupe_requests(res, rows), spawns, source=str(path))
    res.note("token counts estimated with the Qwen2.5 tokenizer (text-only source); no timestamps")
    return res


def _record(path: Path) -> tuple[str, dict[str, Any], list[dict[str, Any]], str]:
    """One record: its harness (``ag`` CaptainAgent: a ``system_prompt`` table; ``mw`` Magentic-One:
    ``Orchestrator`` messages), the document, its history and its benchmark."""
    doc, hist = _history(path)
    if "system_prompt" in doc:
        if not isinstance(doc["system_prompt"], dict):
            raise TraceError(str(path), "(document)", "system_prompt", "expected an object expert -> prompt")
        return "ag", doc, hist, benchmark(doc)
    if any(h["role"].startswith("Orchestrator") for h in hist):
        return "mw", doc, hist, benchmark(doc)
    raise TraceError(str(path), "(document)", "history", "neither a CaptainAgent record (no system_prompt) nor a "
                     "Magentic-One record (no Orchestrator message)")


def benchmark(doc: dict[str, Any]) -> str:
    """The task's benchmark, from its ``question_ID``: GAIA task ids are UUIDs, AssistantBench ids are
    64-hex-digit digests; any other id is reported as ``unknown``."""
    qid = str(doc.get("question_ID") or "")
    if _UUID.fullmatch(qid):
        return "gaia"
    if _HEX64.fullmatch(qid):
        return "assistantbench"
    return "unknown"


def _history(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise TraceError(str(path), "(document)", "(json)", "expected a JSON object")
    hist = need(doc, "history", path, "(document)", list)
    for i, h in enumerate(hist):
        if not isinstance(h, dict):
            raise TraceError(str(path), f"history[{i}]", "(entry)", "expected an object")
        need(h, "content", path, f"history[{i}]", str)
        need(h, "role", path, f"history[{i}]", str)
    return doc, hist


@dataclass(frozen=True)
class _Session:
    """One log's session id, its lead agent, its system (``domain``) and benchmark: what every row shares."""

    sid: str
    lead: str
    kind: str
    bench: str

    def row(self, rid: str, aid: str, role: str, inp: int, mp: int, out: int, tools: list[str]) -> dict[str, Any]:
        """A request row; a worker's parent is the lead."""
        parent = None if role == "lead" else self.lead
        return dict(session_id=self.sid, request_id=rid, agent_id=aid, parent_agent_id=parent, role=role, turn=0,
                    input_tokens=inp, matched_prefix_tokens=min(mp, inp), output_tokens=out, reasoning_tokens=0,
                    tool_names=tools, n_observations=0, benchmark=self.bench, domain=self.kind, model="unknown")


def magentic_one(path: Path, sid: str, doc: dict[str, Any], hist: list[dict[str, Any]], bench: str,
                 res: AdapterResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One Magentic-One log → lead + per-delegation worker requests and spawn records."""
    lead = f"{sid}:Orchestrator"
    log = _Session(sid, lead, "magentic_one", bench)
    toks = count_tokens([h["content"] for h in hist])
    rows: list[dict[str, Any]] = []
    spawns: list[dict[str, Any]] = []
    ctx = 0              # tokens of every message so far (the lead's transcript)
    prev_lead_end = 0    # input + output of the previous lead request
    open_: dict[str, tuple[str, int, str]] = {}  # agent name -> (spawn request id, instruction tokens, text)
    k = 0
    for i, (h, n) in enumerate(zip(hist, toks)):
        role = h["role"]
        if role.startswith("Orchestrator"):
            rid = f"{sid}:{i}"
            m = _DELEGATE.match(role)
            rows.append(log.row(rid, lead, "lead", ctx, prev_lead_end, n, ["spawn_subagent"] if m else []))
            prev_lead_end = ctx + n
            if m:
                if m.group(1) in open_:
                    res.skip("Magentic-One delegations re-issued before the agent replied (earlier one unanswered)")
                open_[m.group(1)] = (rid, n, h["content"])
        elif role in open_:
            spawn_rid, n_instr, text = open_.pop(role)
            aid = f"{sid}:{role}#{k}"
            rows.append(log.row(f"{sid}:{i}", aid, "worker", n_instr, 0, n, []))
            spawns.append(dict(session_id=sid, agent_id=aid, parent_agent_id=lead, role="worker",
                               spawn_request_id=spawn_rid, instruction=text,
                               context=int(next(r["input_tokens"] for r in rows if r["request_id"] == spawn_rid)),
                               tools=[role], model="unknown", spawn_index=k, history_index=i))
            k += 1
        elif role != "human":
            res.skip("Magentic-One sub-agent messages without an open delegation (kept as lead context)")
        ctx += n
    res.skip("Magentic-One delegations never answered", len(open_))
    return rows, spawns


def captain_agent(path: Path, sid: str, doc: dict[str, Any], hist: list[dict[str, Any]], bench: str,
                  res: AdapterResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One CaptainAgent nested chat → a derived lead request, one spawn record per expert, expert requests."""
    specs = doc["system_prompt"] or {}
    lead = f"{sid}:CaptainAgent"
    log = _Session(sid, lead, "captain_agent", bench)
    question = str(doc.get("question") or "")
    names = [str(h.get("name") or h["role"]) for h in hist]
    spec_names = list(specs)
    toks = count_tokens([question] + [h["content"] for h in hist] + [str(specs[e]) for e in spec_names])
    q_tok, msg_tok, spec_tok = toks[0], toks[1:1 + len(hist)], dict(zip(spec_names, toks[1 + len(hist):]))
    if not hist:
        res.skip("CaptainAgent sessions with an empty history")
        return [], []
    lead_rid = f"{sid}:lead"
    rows = [log.row(lead_rid, lead, "lead", q_tok, 0, msg_tok[0], ["spawn_subagent"])]
    uses_terminal = TERMINAL in names
    experts = list(dict.fromkeys(spec_names + [n for n in names[1:] if n != TERMINAL]))
    agent_rows: dict[str, dict[str, Any]] = {}
    ctx = msg_tok[0]
    for i in range(1, len(hist)):
        name, n = names[i], msg_tok[i]
        if name == TERMINAL:
            prev = rows[-1]  # the expert (or the lead's plan) whose code the terminal ran
            prev["n_observations"] += 1
            if "python" not in prev["tool_names"]:
                prev["tool_names"] = prev["tool_names"] + ["python"]
        else:
            aid = f"{sid}:{name}"
            last = agent_rows.get(name)
            inp = spec_tok.get(name, 0) + ctx
            mp = last["input_tokens"] + last["output_tokens"] if last else 0
            row = log.row(f"{sid}:{i}", aid, "worker", inp, mp, n, [])
            rows.append(row)
            agent_rows[name] = row
        ctx += n
    spawns = []
    for k, name in enumerate(e for e in experts if e in agent_rows):
        if name not in specs:
            res.skip("CaptainAgent speakers without an expert spec (empty instruction)")
        spawns.append(dict(session_id=sid, agent_id=f"{sid}:{name}", parent_agent_id=lead, role="worker",
                           spawn_request_id=lead_rid, instruction=str(specs.get(name, "")), context=int(msg_tok[0]),
                           tools=["python"] if uses_terminal else [], model="unknown", spawn_index=k,
                           history_index=0))
    res.skip("CaptainAgent experts that never speak (no requests, no spawn record)",
             sum(1 for e in spec_names if e not in agent_rows))
    return rows, spawns
