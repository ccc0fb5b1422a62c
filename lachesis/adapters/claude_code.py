"""Claude Code transcripts (lead + sub-agents) and Codex CLI rollouts → Trace (structural axis, §3.4).

Sources: ``claude_code_subagents`` (lead ``<session>.jsonl`` + ``<session>/subagents/agent-<id>.jsonl``)
and ``claude_code_more`` (Entire checkpoints: sub-agent steps embedded in the lead file as
``progress`` records with ``data.type == "agent_progress"``; Codex CLI rollouts are single-agent).

Claude Code, field by field:

* one request per ``requestId`` (a request is logged as several ``assistant`` records, one per
  content block); ``request_id`` = ``<session>:<requestId>``.
* ``input_tokens`` = ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` (the
  whole prompt); ``matched_prefix_tokens`` = ``cache_read_input_tokens`` (the exactly matched,
  reused prefix). ``cache_creation`` tokens are counted as newly written KV (not matched): the
  provider prefilled them and stored them for later reads.
* ``shared_prefix_tokens`` (declared external prefix, see :mod:`lachesis.segments`) = the cache read of
  an agent's FIRST request: the provider's prefix cache already holds the system prompt and tool
  definitions written by other agents or sessions, so that prefix is in no segment of this agent.
  Later cache reads beyond the agent's own context (e.g. after a compaction) are left undeclared
  and are reported by segment recovery.
* ``output_tokens`` = the largest ``output_tokens`` over the request's records (streamed records
  carry partial counts); ``reasoning_tokens`` = 0: the API does not report thinking tokens
  separately (they are inside ``output_tokens``), so the temporal split is not available from
  these transcripts; ``thinking_blocks`` counts the request's thinking blocks.
* ``tool_names`` = names of the request's ``tool_use`` blocks; ``n_observations`` = ``tool_result``
  blocks that follow before the agent's next request.
* ``turn`` = number of real user prompts so far − 1 (``isMeta`` records, tool results, task
  notifications, local-command echoes and interrupts are not prompts); a worker takes the lead's
  turn at its spawn.
* ``t_start`` = timestamp of the last non-assistant record before the request's first record
  (its input was complete then); ``t_end`` = timestamp of its last record.
* lead = the session file (``isSidechain`` false), role ``lead`` (``single`` when the session spawns
  no sub-agent with requests); workers = sub-agent files or embedded ``agent_progress`` records,
  role ``worker``, parent = the lead.
* spawn record = the lead's ``Task``/``Agent`` ``tool_use``: ``instruction`` = ``description`` +
  blank line + ``prompt``; ``context`` = the lead's context tokens at the spawning request;
  ``tools`` = ``[subagent_type]``; ``model`` = ``input.model`` or the worker's first model; extras
  ``t_start``/``t_end`` = the worker's first request start and last request end (its lifetime),
  ``total_duration_ms`` from the spawn's ``toolUseResult`` when present. The tool_use id is linked
  to the worker by ``toolUseResult.agentId`` or the progress records' ``parentToolUseID``.

Skipped and counted (``AdapterResult.skipped``): context-compaction agents (``agent-acompact-*``),
compaction events in lead files, spawns whose worker has no per-request records (older Claude
Code versions log only lifetime totals), sub-agents without a spawn link, duplicate embedded
records of a worker that also has its own file, repeated Codex ``token_count`` events.

Codex CLI (``session_meta`` first): one request per ``event_msg/token_count`` with a new
``total_token_usage``; ``input`` = ``last_token_usage.input_tokens`` (includes cached),
``matched_prefix`` = ``cached_input_tokens``, ``output`` = ``output_tokens`` (includes reasoning),
``reasoning`` = ``reasoning_output_tokens``; ``t_end`` = the last generated item (reasoning, message,
tool call) before the count, ``t_start`` = the previous count or user message; tools = ``function_call``/``custom_tool_call`` names
since the previous count, observations = their outputs; turn = ``user_message`` events − 1;
role ``single``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ..config import SPAWN_TOOL_NAMES
from ..trace import TraceError
from . import AdapterResult, frames_to_trace, iso_seconds, iter_jsonl, need

NOT_PROMPT_PREFIXES = ("<local-command-", "<task-notification>", "[Request interrupted", "<system-reminder>",
                       "Caveat:", "<bash-stdout>", "<bash-stderr>")
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context"}


def load(root: Path) -> AdapterResult:
    """Every session transcript under ``root`` (any depth, outside ``subagents/``) → one Trace."""
    root = Path(root)
    res = AdapterResult(dataset=root.name)
    rows: list[dict[str, Any]] = []
    spawns: list[dict[str, Any]] = []
    files = sorted(p for p in root.rglob("*.jsonl*") if "subagents" not in p.parts
                   and p.name.endswith((".jsonl", ".jsonl.gz")))
    if not files:
        raise TraceError(str(root), "(folder)", "(files)", "no transcript (*.jsonl or *.jsonl.gz)")
    for path in files:
        recs = list(iter_jsonl(path))
        if recs and recs[0][1].get("type") in CODEX_TYPES:
            rows += codex_session(path, recs, res)
        else:
            r, s = claude_session(path, recs, res)
            rows += r
            spawns += s
    res.trace = frames_to_trace(rows, spawns, source=str(root))
    res.notes.append("reasoning_tokens = 0 for Claude Code (thinking tokens are not reported separately)")
    return res


def _session_id(path: Path) -> str:
    return path.name.split(".jsonl")[0]


def _content(msg: dict[str, Any]) -> list[Any] | str:
    c = msg.get("content")
    return c if isinstance(c, (list, str)) else []


def _is_prompt(rec: dict[str, Any]) -> bool:
    if rec.get("isMeta") or rec.get("isCompactSummary"):
        return False
    c = _content(rec.get("message") or {})
    if isinstance(c, str):
        return not c.lstrip().startswith(NOT_PROMPT_PREFIXES)
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
        return False
    texts = [b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text"]
    return bool(texts) and not texts[0].lstrip().startswith(NOT_PROMPT_PREFIXES)


class _Agent:
    """Requests of one context chain, built record by record."""

    def __init__(self, path: Path, sid: str, agent_id: str):
        self.path, self.sid, self.agent_id = path, sid, agent_id
        self.reqs: dict[str, dict[str, Any]] = {}
        self.last: dict[str, Any] | None = None
        self.last_other_ts: float | None = None

    def assistant(self, rec: dict[str, Any], where: str) -> dict[str, Any]:
        msg = need(rec, "message", self.path, where, dict)
        usage = need(msg, "usage", self.path, where + ".message", dict)
        key = rec.get("requestId") or msg.get("id")
        if not key:
            raise TraceError(str(self.path), where, "requestId", "missing field (and no message.id)")
        ts = iso_seconds(need(rec, "timestamp", self.path, where, str), self.path, where)
        r = self.reqs.get(key)
        if r is None:
            for f in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"):
                if not isinstance(usage.get(f, 0), int):
                    raise TraceError(str(self.path), where, f"message.usage.{f}", f"expected an integer, got {usage.get(f)!r}")
            start = self.last_other_ts if self.last_other_ts is not None and self.last_other_ts <= ts else ts
            r = dict(key=key, where=where, usage=usage, out=0, tools=[], thinking=0, obs=0, t_start=start, t_end=ts,
                     model=str(msg.get("model", "")), spawn_ids=[])
            self.reqs[key] = r
        r["out"] = max(r["out"], int(usage.get("output_tokens", 0)))
        r["t_end"] = max(r["t_end"], ts)
        for b in _content(msg):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                r["tools"].append(str(b.get("name", "")))
                if b.get("name") in SPAWN_TOOL_NAMES:
                    r["spawn_ids"].append((b.get("id"), b.get("input") or {}))
            elif b.get("type") in ("thinking", "redacted_thinking"):
                r["thinking"] += 1
        self.last = r
        return r

    def other(self, rec: dict[str, Any], where: str) -> int:
        """A non-assistant record: remember its time; count tool results onto the last request."""
        ts = rec.get("timestamp")
        if isinstance(ts, str):
            self.last_other_ts = iso_seconds(ts, self.path, where)
        n = sum(1 for b in _content(rec.get("message") or {}) if isinstance(b, dict) and b.get("type") == "tool_result")
        if n and self.last is not None:
            self.last["obs"] += n
        return n

    def rows(self, role: str, parent: str | None, turn_of: dict[str, int]) -> list[dict[str, Any]]:
        out = []
        for i, r in enumerate(self.reqs.values()):
            u = r["usage"]
            cr, cc, inp = (int(u.get(k, 0) or 0) for k in ("cache_read_input_tokens", "cache_creation_input_tokens",
                                                           "input_tokens"))
            out.append(dict(session_id=self.sid, request_id=f"{self.sid}:{r['key']}", agent_id=self.agent_id,
                            parent_agent_id=parent, role=role, turn=turn_of.get(r["key"], 0),
                            input_tokens=inp + cr + cc, matched_prefix_tokens=cr, output_tokens=r["out"],
                            reasoning_tokens=0, tool_names=r["tools"], n_observations=r["obs"],
                            t_start=r["t_start"], t_end=r["t_end"], model=r["model"], benchmark="claude_code",
                            cache_creation_tokens=cc, thinking_blocks=r["thinking"],
                            shared_prefix_tokens=cr if i == 0 else 0))
        return out


def claude_session(path: Path, recs: list[tuple[int, dict[str, Any]]], res: AdapterResult
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One Claude Code lead transcript (+ its sub-agent files) → request rows and spawn records."""
    sid = _session_id(path)
    lead = _Agent(path, sid, f"{sid}:lead")
    turn = -1
    lead_turn: dict[str, int] = {}
    tool_agent: dict[str, str] = {}        # spawn tool_use id -> agentId
    tool_result: dict[str, dict[str, Any]] = {}
    embedded: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for lineno, rec in recs:
        where = f"line {lineno}"
        t = rec.get("type")
        if t is None:
            raise TraceError(str(path), where, "type", "missing field")
        if rec.get("isSidechain") and t in ("assistant", "user"):
            res.skip("sidechain records inside a lead file")
            continue
        if t == "assistant":
            r = lead.assistant(rec, where)
            lead_turn.setdefault(r["key"], max(turn, 0))
        elif t == "user":
            if rec.get("isCompactSummary"):
                res.skip("compaction events in lead transcripts (no boundary emitted)")
            elif _is_prompt(rec):
                turn += 1
            lead.other(rec, where)
            tur = rec.get("toolUseResult")
            for b in _content(rec.get("message") or {}):
                if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(tur, dict):
                    tool_result[b.get("tool_use_id")] = tur
                    if tur.get("agentId"):
                        tool_agent[b.get("tool_use_id")] = str(tur["agentId"])
        elif t == "progress":
            data = rec.get("data") or {}
            if data.get("type") == "agent_progress":
                aid = data.get("agentId")
                if not aid:
                    raise TraceError(str(path), where, "data.agentId", "missing field")
                if rec.get("parentToolUseID"):
                    tool_agent.setdefault(rec["parentToolUseID"], str(aid))
                if isinstance(data.get("message"), dict):
                    embedded[str(aid)].append((lineno, data["message"]))
        elif t == "system" and rec.get("subtype") == "compact_boundary":
            pass  # counted through the isCompactSummary user record that follows it
    # workers: sub-agent files first, then embedded progress records
    workers: dict[str, _Agent] = {}
    sub_dir = path.parent / sid / "subagents"
    if sub_dir.is_dir():
        for wpath in sorted(sub_dir.glob("agent-*.jsonl*")):
            aid = wpath.name.split(".jsonl")[0][len("agent-"):]
            if aid.startswith("acompact"):
                res.skip("compaction agents (agent-acompact-*)")
                continue
            w = _Agent(wpath, sid, f"{sid}:{aid}")
            for lineno, rec in iter_jsonl(wpath):
                if rec.get("type") == "assistant":
                    w.assistant(rec, f"line {lineno}")
                elif rec.get("type") == "user":
                    w.other(rec, f"line {lineno}")
            workers[aid] = w
    for aid, items in embedded.items():
        if aid in workers:
            res.skip("embedded sub-agent records superseded by the sub-agent's own file", len(items))
            continue
        if aid.startswith("acompact"):
            res.skip("compaction agents (agent-acompact-*)")
            continue
        w = _Agent(path, sid, f"{sid}:{aid}")
        for lineno, m in items:
            if m.get("type") == "assistant":
                w.assistant(m, f"line {lineno} (data.message)")
            elif m.get("type") == "user":
                w.other(m, f"line {lineno} (data.message)")
        workers[aid] = w
    # spawn records
    spawn_rows: list[dict[str, Any]] = []
    linked: set[str] = set()
    idx = 0
    lead_rows = {r["key"]: r for r in lead.reqs.values()}
    for key, r in lead_rows.items():
        for tid, inp in r["spawn_ids"]:
            aid = tool_agent.get(tid)
            w = workers.get(aid) if aid else None
            if w is None or not w.reqs:
                res.skip("spawns without per-request worker records (lifetime totals only)")
                continue
            if aid in linked:
                res.skip("second spawn link to an already linked sub-agent")
                continue
            linked.add(aid)
            u = r["usage"]
            ctx = sum(int(u.get(k, 0) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                       "cache_creation_input_tokens"))
            wreq = list(w.reqs.values())
            tur = tool_result.get(tid, {})
            spawn_rows.append(dict(
                session_id=sid, agent_id=w.agent_id, parent_agent_id=lead.agent_id, role="worker",
                spawn_request_id=f"{sid}:{key}",
                instruction=f"{inp.get('description', '')}\n\n{inp.get('prompt', '')}".strip(),
                context=int(ctx), tools=[str(inp.get("subagent_type") or "general-purpose")],
                model=str(inp.get("model") or wreq[0]["model"]), spawn_index=idx,
                subagent_type=str(inp.get("subagent_type") or ""),
                t_start=min(x["t_start"] for x in wreq), t_end=max(x["t_end"] for x in wreq),
                total_duration_ms=float(tur["totalDurationMs"]) if isinstance(tur.get("totalDurationMs"), (int, float))
                else float("nan")))
            idx += 1
    rows: list[dict[str, Any]] = []
    spawned_turn = {s["agent_id"]: lead_turn.get(s["spawn_request_id"].split(":", 1)[1], 0) for s in spawn_rows}
    for aid, w in workers.items():
        if w.agent_id not in spawned_turn:
            if w.reqs:
                res.skip("sub-agents without a spawn link (their requests left out)")
                res.skip("requests of sub-agents without a spawn link", len(w.reqs))
            continue
        t = spawned_turn[w.agent_id]
        rows += w.rows("worker", lead.agent_id, {k: t for k in w.reqs})
    role = "lead" if spawn_rows else "single"
    rows = lead.rows(role, None, lead_turn) + rows
    rows.sort(key=lambda x: (x["t_start"], x["t_end"]))
    if not lead.reqs:
        res.skip("sessions without lead requests")
        return [], []
    return rows, spawn_rows


def codex_session(path: Path, recs: list[tuple[int, dict[str, Any]]], res: AdapterResult) -> list[dict[str, Any]]:
    """One Codex CLI rollout → single-agent request rows."""
    sid = None
    model = ""
    turn = -1
    tools: list[str] = []
    obs = 0
    window_start: float | None = None
    last_gen: float | None = None  # last generated item of the window (decode end)
    last_total = None
    rows: list[dict[str, Any]] = []
    for lineno, rec in recs:
        where = f"line {lineno}"
        t = rec.get("type")
        p = rec.get("payload") or {}
        ts = rec.get("timestamp")
        tsec = iso_seconds(ts, path, where) if isinstance(ts, str) else None
        if t == "session_meta":
            sid = str(need(p, "id", path, where + " payload"))
        elif t == "turn_context":
            model = str(p.get("model", model))
        elif t == "compacted":
            res.skip("codex compaction events (no boundary emitted)")
        elif t == "response_item":
            if window_start is None:
                window_start = tsec
            if p.get("type") in ("function_call", "custom_tool_call"):
                tools.append(str(p.get("name", "")))
            if p.get("type") in ("function_call", "custom_tool_call", "reasoning", "message") and p.get("role") != "user":
                last_gen = tsec
            elif p.get("type") in ("function_call_output", "custom_tool_call_output"):
                obs += 1
        elif t == "event_msg":
            if p.get("type") == "user_message":
                turn += 1
                window_start = tsec
            elif p.get("type") == "token_count":
                info = p.get("info")
                if not info:
                    res.skip("codex token_count events without usage")
                    continue
                total = need(info, "total_token_usage", path, where + " payload.info", dict)
                key = tuple(sorted(total.items()))
                if key == last_total:
                    res.skip("repeated codex token_count events")
                    continue
                last_total = key
                last = need(info, "last_token_usage", path, where + " payload.info", dict)
                vals = {f: need(last, f, path, where + " payload.info.last_token_usage", int)
                        for f in ("input_tokens", "cached_input_tokens", "output_tokens")}
                reasoning = int(last.get("reasoning_output_tokens", 0) or 0)
                if sid is None:
                    raise TraceError(str(path), where, "session_meta", "token usage before the session_meta record")
                rows.append(dict(session_id=sid, request_id=f"{sid}:{lineno}", agent_id=f"{sid}:agent",
                                 parent_agent_id=None, role="single", turn=max(turn, 0),
                                 input_tokens=vals["input_tokens"], matched_prefix_tokens=vals["cached_input_tokens"],
                                 output_tokens=vals["output_tokens"], reasoning_tokens=reasoning,
                                 tool_names=tools, n_observations=obs,
                                 t_start=min(x for x in (window_start, last_gen, tsec) if x is not None),
                                 t_end=last_gen if last_gen is not None else tsec,
                                 model=model, benchmark="codex_cli", cache_creation_tokens=0, thinking_blocks=0,
                                 shared_prefix_tokens=vals["cached_input_tokens"] if not rows else 0))
                tools, obs, window_start, last_gen = [], 0, tsec, None
    if sid is None:
        raise TraceError(str(path), "line 1", "session_meta", "no session_meta record")
    return rows
