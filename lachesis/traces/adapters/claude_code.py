"""Claude Code transcripts (lead + sub-agents) → Trace (structural axis, §3.4); Codex CLI rollouts
found among them are read by :mod:`lachesis.traces.adapters.codex`.  Every file is recognised by its content.
Field by field, the assumptions and what is skipped: docs/design.md §7 (Claude Code).

Evidence for :data:`CACHE_TOLERANCE_TOKENS` (the provider-cache assumption, docs/design.md §3), on the
project's mirror of ``claude_code_more`` and ``claude_code_subagents``, 3,738 requests after an agent's
first: the cache read equals the previous input + output at 2 requests only; it falls short of the
previous INPUT by 1–14 tokens at 3,334 (89%; 1 token at 2,120, 8 at 586, 3 at 223, 7 at 175, 10 at 97),
in all but one with the whole previous context inside the new input; the next shortfalls are 41–83
tokens (6 requests), then ≥ 162 (113 requests: cache expiry, compactions).  Read exactly, 87% of the
Claude Code segments were fragments under 700 tokens and a worker split into 5–10 segments closed at
``turn_end``; 16 covers the observed 1–14 with a margin and stays far below the first real discard.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from lachesis.config import SPAWN_TOOL_NAMES
from lachesis.traces.adapters import (
    MAX_COUNT,
    AdapterResult,
    dedupe_requests,
    earlier_context,
    find_files,
    iso_seconds,
    iter_jsonl,
    json_records,
    name_duplicate_files,
    need,
    need_count,
    read_each,
    read_text,
    require_data,
    stem,
)
from lachesis.traces.adapters.codex import CODEX_TYPES, codex_session
from lachesis.traces.schema import TraceError, cache_tolerance
from lachesis.traces.trace import Trace

NOT_PROMPT_PREFIXES = ("<local-command-", "<task-notification>", "[Request interrupted", "<system-reminder>",
                       "Caveat:", "<bash-stdout>", "<bash-stderr>")
USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
#: The usage fields every usage record carries (the API always reports them; the cache fields may be absent,
#: as 0): one without is refused naming its file, line and field, not read as a request of 0 tokens.
REQUIRED_USAGE = ("input_tokens", "output_tokens")


def usage_counts(usage: dict[str, Any], path: Path, where: str) -> dict[str, int]:
    """A usage record's token counts (:data:`USAGE_FIELDS`): the cache fields 0 when absent, the others required."""
    return {f: need_count(usage, f, path, where, default=None if f in REQUIRED_USAGE else 0) for f in USAGE_FIELDS}
_AGENT_ID_TEXT = re.compile(r"\bagentId:\s*([\w@.-]+)")
#: Records read before a file's kind is decided (the first user/assistant record is within them in practice).
SNIFF_RECORDS = 200
#: How far a Claude Code cache read may fall short of the previous request's input and still continue the
#: same segment (module docstring: the evidence; docs/design.md §3, "Provider caches": the rule).
CACHE_TOLERANCE_TOKENS = 16


@dataclass
class Sniff:
    """What a file's first records say: its kind, session, sub-agent id and first time stamp."""

    kind: str  # "lead" | "subagent" | "codex"
    session_id: str
    agent_id: str = ""
    first_ts: float = float("inf")
    size: int = 0


def sniff(path: Path, part: AdapterResult | None = None) -> Sniff:
    """Recognise a transcript by its first records (streamed: large files are not read whole here)."""
    size = path.stat().st_size
    gz = path.name.endswith(".gz")
    try:
        fh = gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")
        with fh:
            return _sniff_records(json_records(fh, str(path)), path, size)
    except UnicodeDecodeError:
        read_text(path)  # raises the TraceError naming the line and offset of the byte
        raise
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        if not gz:
            raise
        raise TraceError(str(path), "(file)", "(gzip)", f"truncated or corrupt gzip: {e}") from None


def _sniff_records(records: Iterator[tuple[int, dict[str, Any]]], path: Path, size: int) -> Sniff:
    """A file's kind from its first records: a Codex record type first, else a sidechain's ``agentId``
    at the first user/assistant record (a sub-agent), else a lead transcript."""
    sid = agent = None
    first_ts = float("inf")
    for k, (lineno, rec) in enumerate(records):
        if k == 0 and rec.get("type") in CODEX_TYPES:
            payload: dict[str, Any] = rec["payload"] if isinstance(rec.get("payload"), dict) else {}
            sid = str(payload.get("id") or "") if rec["type"] == "session_meta" else ""
            return Sniff("codex", sid or stem(path), first_ts=_ts_or_inf(rec, path, lineno), size=size)
        if "type" not in rec:
            raise TraceError(str(path), f"line {lineno}", "type",
                             "missing field (not a Claude Code transcript or a Codex rollout)")
        first_ts = min(first_ts, _ts_or_inf(rec, path, lineno))
        sid = sid or (rec.get("sessionId") if isinstance(rec.get("sessionId"), str) else None)
        if rec["type"] in ("user", "assistant"):
            if rec.get("isSidechain") and rec.get("agentId"):
                agent = str(rec["agentId"])
            break
        if k >= SNIFF_RECORDS:
            break
    if agent is not None:  # a sub-agent transcript: its lead's session, else the <session>/subagents/ folder
        sid = sid or (path.parent.parent.name if path.parent.name == "subagents" else "")
        return Sniff("subagent", sid, agent, first_ts, size)
    return Sniff("lead", sid or stem(path), "", first_ts, size)


def _ts_or_inf(rec: dict[str, Any], path: Path, lineno: int) -> float:
    ts = rec.get("timestamp")
    return iso_seconds(ts, path, f"line {lineno}") if isinstance(ts, str) else float("inf")


def load(path: Path, cache_tolerance_tokens: int = CACHE_TOLERANCE_TOKENS) -> AdapterResult:
    """Every Claude Code session transcript and Codex rollout in a file or folder → one Trace.

    ``cache_tolerance_tokens``: the provider-cache tolerance declared on every Claude Code request
    (docs/design.md §3; 0 reads cache hits exactly).
    """
    cache_tolerance(cache_tolerance_tokens)
    res = AdapterResult(dataset=Path(path).name)
    files = find_files(path, (".jsonl", ".jsonl.gz"), "Claude Code transcript or Codex rollout")
    kinds = read_each(res, files, sniff)
    subs: dict[str, list[tuple[Path, Sniff]]] = defaultdict(list)
    for p, s in kinds:
        if s.kind == "subagent":
            subs[s.session_id].append((p, s))
    leads = sorted(((p, s) for p, s in kinds if s.kind != "subagent"), key=lambda x: (x[1].first_ts, -x[1].size, x[0]))
    lead_sessions = {s.session_id for _, s in leads if s.kind == "lead"}
    for sid, items in subs.items():
        if sid not in lead_sessions:
            res.skip("sub-agent transcripts without their lead transcript", len(items))
    sniffed = dict(leads)
    # two files of one session (checkpoints, a resumed copy): each keeps its own chain, the later one
    # labelled <session>#2, …; requests they share are counted once, in the file read first
    label: dict[Path, str] = {}
    seen: dict[str, int] = defaultdict(int)
    for p, sn in leads:
        seen[sn.session_id] += 1
        label[p] = sn.session_id if seen[sn.session_id] == 1 else f"{sn.session_id}#{seen[sn.session_id]}"
    n_failed = len(res.failed)
    parsed = read_each(res, list(sniffed), lambda p, part: _session(p, sniffed[p], label[p], subs, part))
    res.files = len(kinds) - (len(res.failed) - n_failed)
    require_data(res, path, len(parsed), "a Claude Code transcript or a Codex rollout")
    name_duplicate_files(res, [(p, [r for r in rs if not r.get("synthetic")]) for p, (rs, _) in parsed])
    rows = [row for _, (session_rows, _) in parsed for row in session_rows]
    spawns = [sp for _, (_, session_spawns) in parsed for sp in session_spawns]
    req, sp = _merge(res, rows, spawns)
    req["cache_tolerance_tokens"] = np.where(req["benchmark"] == "claude_code", int(cache_tolerance_tokens), 0)
    req["synthetic"] = req["synthetic"].fillna(False).astype(bool) if "synthetic" in req else False
    res.trace = Trace.from_frames(req, pd.DataFrame(sp) if sp else None, source=str(path))
    if (req["benchmark"] == "claude_code").any():
        res.note("reasoning_tokens = 0 for Claude Code (thinking tokens are not reported separately)")
    return res


def _session(path: Path, s: Sniff, label: str, subs: dict[str, list[tuple[Path, Sniff]]], part: AdapterResult):
    recs = list(iter_jsonl(path))
    if s.kind == "codex":
        return codex_session(path, recs, part, label), []
    own = subs.get(s.session_id, []) if label == s.session_id else []  # sub-agent files: the first copy's
    return claude_session(path, label, recs, own, part)


def _merge(res: AdapterResult, rows: list[dict[str, Any]], spawns: list[dict[str, Any]]
           ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Requests counted once across files; spawn records, roles, order and declared prefixes made consistent."""
    rows = dedupe_requests(res, rows)
    for r in rows:  # spawns left out, counted on their spawning request: once, in the copy kept
        for why in r.pop("_skipped_spawns", ()):
            res.skip(why)
    kept = {(r["session_id"], r["request_id"]) for r in rows}
    sp = []
    for s in spawns:  # a spawn whose spawning request is a repeat was kept, with its worker, in another copy
        if (s["session_id"], s["spawn_request_id"]) in kept:
            sp.append(s)
        else:
            res.skip("spawn records repeated in another copy of their session (counted once)")
    spawned = {s["agent_id"] for s in sp}
    orphans = sum(1 for r in rows if r["role"] == "worker" and r["agent_id"] not in spawned)
    if orphans:
        res.skip("requests of sub-agents whose spawn record is a repeat", orphans)
        rows = [r for r in rows if not (r["role"] == "worker" and r["agent_id"] not in spawned)]
    if not rows:
        raise TraceError(res.dataset, "(files)", "(requests)", "no request in any file (see the skip counts)")
    df = pd.DataFrame(rows)
    leads = {s["parent_agent_id"] for s in sp}
    top = (df["benchmark"] == "claude_code").to_numpy() & df["parent_agent_id"].isna().to_numpy()
    df.loc[top, "role"] = np.where(df.loc[top, "agent_id"].isin(leads), "lead", "single")
    order = {s: i for i, s in enumerate(dict.fromkeys(df["session_id"]))}
    df = (df.assign(_s=df["session_id"].map(order)).sort_values(["_s", "t_start", "t_end"], kind="stable")
          .drop(columns="_s").reset_index(drop=True))
    df["shared_prefix_tokens"] = np.maximum(df["matched_prefix_tokens"].to_numpy(np.int64) - earlier_context(df), 0)
    return df, sp


def _content(msg: dict[str, Any]) -> list[Any] | str:
    c = msg.get("content")
    return c if isinstance(c, (list, str)) else []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(b.get("text") or b.get("content")) for b in content if isinstance(b, dict))
    return ""


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


def _is_queued_prompt(rec: dict[str, Any]) -> bool:
    """A prompt the user typed while the agent worked (an ``attachment`` record of type ``queued_command``)."""
    a = rec.get("attachment")
    if not isinstance(a, dict) or a.get("type") != "queued_command" or a.get("isMeta") or rec.get("isMeta"):
        return False
    origin = a.get("origin")
    return a.get("commandMode", "prompt") == "prompt" and (not isinstance(origin, dict)
                                                           or origin.get("kind", "human") == "human")


class _Agent:
    """Requests of one context chain, built record by record."""

    def __init__(self, path: Path, sid: str, agent_id: str):
        self.path, self.sid, self.agent_id = path, sid, agent_id
        self.reqs: dict[str, dict[str, Any]] = {}
        self.last: dict[str, Any] | None = None
        self.last_other_ts: float | None = None
        self.spawn_tools: set[str | None] = set()  # tool_use ids of this agent's Task/Agent calls
        self.first_prompt: str | None = None

    def assistant(self, rec: dict[str, Any], where: str) -> dict[str, Any]:
        msg = need(rec, "message", self.path, where, dict)
        usage = need(msg, "usage", self.path, where + ".message", dict)
        key = rec.get("requestId") or msg.get("id")
        if not key or not isinstance(key, str):
            raise TraceError(str(self.path), where, "requestId", "missing field (and no message.id)")
        ts = iso_seconds(need(rec, "timestamp", self.path, where, str), self.path, where)
        u = usage_counts(usage, self.path, where + ".message.usage")
        r = self.reqs.get(key)
        if r is None:
            start = self.last_other_ts if self.last_other_ts is not None and self.last_other_ts <= ts else ts
            r = dict(key=key, usage=u, out=0, tools=[], thinking=0, obs=0, spawn_results=[], t_start=start, t_end=ts,
                     model=str(msg.get("model", "")), spawn_ids=[], skipped_spawns=[])
            self.reqs[key] = r
        r["out"] = max(r["out"], u["output_tokens"])
        r["t_end"] = max(r["t_end"], ts)
        for b in _content(msg):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                r["tools"].append(str(b.get("name", "")))
                if b.get("name") in SPAWN_TOOL_NAMES:
                    r["spawn_ids"].append((b.get("id"), b.get("input") if isinstance(b.get("input"), dict) else {}))
                    self.spawn_tools.add(b.get("id"))
            elif b.get("type") in ("thinking", "redacted_thinking"):
                r["thinking"] += 1
        self.last = r
        return r

    def other(self, rec: dict[str, Any], where: str) -> None:
        """A non-assistant record: remember its time; count tool results onto the last request."""
        ts = rec.get("timestamp")
        if isinstance(ts, str):
            self.last_other_ts = iso_seconds(ts, self.path, where)
        content = _content(rec.get("message") or {})
        if self.first_prompt is None and not self.reqs:
            self.first_prompt = _text(content).strip()
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result" and self.last is not None:
                if b.get("tool_use_id") in self.spawn_tools:
                    self.last["spawn_results"].append(b.get("tool_use_id"))
                else:
                    self.last["obs"] += 1

    def rows(self, role: str, parent: str | None, turn_of: dict[str, int], linked: set[str]) -> list[dict[str, Any]]:
        out = []
        for r in self.reqs.values():
            u = r["usage"]
            cr, cc, inp = u["cache_read_input_tokens"], u["cache_creation_input_tokens"], u["input_tokens"]
            out.append(dict(session_id=self.sid, request_id=r["key"], agent_id=self.agent_id,
                            parent_agent_id=parent, role=role, turn=turn_of.get(r["key"], 0),
                            input_tokens=inp + cr + cc, matched_prefix_tokens=cr, output_tokens=r["out"],
                            reasoning_tokens=0, tool_names=r["tools"],
                            n_observations=r["obs"] + sum(t not in linked for t in r["spawn_results"]),
                            t_start=r["t_start"], t_end=r["t_end"], model=r["model"], benchmark="claude_code",
                            cache_creation_tokens=cc, thinking_blocks=r["thinking"], synthetic=False,
                            _skipped_spawns=r["skipped_spawns"]))
        return out


def _worker_from(records, agent: _Agent, label: str) -> _Agent:
    for lineno, rec in records:
        where = f"line {lineno}{label}"
        if rec.get("type") == "assistant":
            agent.assistant(rec, where)
        elif rec.get("type") == "user":
            agent.other(rec, where)
    return agent


def claude_session(path: Path, sid: str, recs: list[tuple[int, dict[str, Any]]], sub_files: list[tuple[Path, Sniff]],
                   res: AdapterResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One Claude Code lead transcript (+ its sub-agent transcripts) → request rows and spawn records."""
    scan = _LeadFile(path, sid)
    for lineno, rec in recs:
        scan.record(lineno, rec, res)
    workers = _read_workers(scan, sub_files, res)
    _link_by_prompt(scan, workers)
    spawns = _Spawns()
    for key, r in scan.lead.reqs.items():
        for tid, inp in r["spawn_ids"]:
            spawns.add(scan, workers, key, r, tid, inp, res)
    if not scan.lead.reqs:
        res.skip("sessions without lead requests")
        return [], []
    rows: list[dict[str, Any]] = []
    spawned_turn = {s["agent_id"]: scan.lead_turn.get(s["spawn_request_id"], 0) for s in spawns.records}
    for w in workers.values():
        if w.agent_id not in spawned_turn:
            if w.reqs:
                res.skip("sub-agents without a spawn link (their requests left out)")
                res.skip("requests of sub-agents without a spawn link", len(w.reqs))
            continue
        t = spawned_turn[w.agent_id]
        rows += w.rows("worker", scan.lead.agent_id, {k: t for k in w.reqs}, set())
    rows += spawns.synthetic
    role = "lead" if spawns.records else "single"
    rows = scan.lead.rows(role, None, scan.lead_turn, spawns.linked_tools) + rows
    rows.sort(key=lambda x: (x["t_start"], x["t_end"]))
    return rows, spawns.records


class _LeadFile:
    """A lead transcript read record by record: the lead's requests and turns, and what links each of its
    ``Task``/``Agent`` spawns to a worker (agent ids, recorded totals, embedded progress records)."""

    def __init__(self, path: Path, sid: str) -> None:
        self.path, self.sid = path, sid
        self.lead = _Agent(path, sid, f"{sid}:lead")
        self.turn = -1
        self.lead_turn: dict[str, int] = {}
        self.tool_agent: dict[str, str] = {}        # spawn tool_use id -> agentId
        self.tool_result: dict[str, dict[str, Any]] = {}
        self.result_line: dict[str, int] = {}        # spawn tool_use id -> line of its toolUseResult
        self.embedded: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)

    def record(self, lineno: int, rec: dict[str, Any], res: AdapterResult) -> None:
        where = f"line {lineno}"
        t = rec.get("type")
        if t is None:
            raise TraceError(str(self.path), where, "type", "missing field")
        if rec.get("isSidechain") and t in ("assistant", "user"):
            res.skip("sidechain records inside a lead file")
        elif t == "assistant":
            r = self.lead.assistant(rec, where)
            self.lead_turn.setdefault(r["key"], max(self.turn, 0))
        elif t == "user":
            if rec.get("isCompactSummary"):
                res.skip("compaction events in lead transcripts (no boundary emitted)")
            elif _is_prompt(rec):
                self.turn += 1
            self.lead.other(rec, where)
            self.spawn_results(lineno, rec)
        elif t == "attachment" and _is_queued_prompt(rec):
            self.turn += 1
            self.lead.other(rec, where)
        elif t == "progress":
            self.progress(rec, where, lineno)

    def spawn_results(self, lineno: int, rec: dict[str, Any]) -> None:
        """A user record's results of the lead's spawns: their recorded totals and the worker's agent id."""
        tur = rec.get("toolUseResult")
        spawn_tools = self.lead.spawn_tools
        for b in _content(rec.get("message") or {}):
            if not (isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in spawn_tools):
                continue
            tid = b["tool_use_id"]
            if isinstance(tur, dict):
                self.tool_result[tid] = tur
                self.result_line[tid] = lineno
            m = _AGENT_ID_TEXT.search(_text(b.get("content")))
            aid = tur.get("agentId") if isinstance(tur, dict) and tur.get("agentId") else (m.group(1) if m else None)
            if aid:
                self.tool_agent[tid] = str(aid)

    def progress(self, rec: dict[str, Any], where: str, lineno: int) -> None:
        """An embedded sub-agent step (``agent_progress``): kept for its worker, linked to its spawn."""
        data = rec.get("data") or {}
        if not (isinstance(data, dict) and data.get("type") == "agent_progress"):
            return
        aid = data.get("agentId")
        if not aid:
            raise TraceError(str(self.path), where, "data.agentId", "missing field")
        if rec.get("parentToolUseID"):
            self.tool_agent.setdefault(rec["parentToolUseID"], str(aid))
        if isinstance(data.get("message"), dict):
            self.embedded[str(aid)].append((lineno, data["message"]))


def _read_workers(scan: _LeadFile, sub_files: list[tuple[Path, Sniff]], res: AdapterResult) -> dict[str, _Agent]:
    """The session's workers: sub-agent transcripts first, then embedded progress records."""
    sid = scan.sid
    workers: dict[str, _Agent] = {}
    for wpath, ws in sub_files:
        if ws.agent_id.startswith("acompact"):
            res.skip("compaction agents (agent-acompact-*)")
            continue
        try:
            workers[ws.agent_id] = _worker_from(iter_jsonl(wpath), _Agent(wpath, sid, f"{sid}:{ws.agent_id}"), "")
        except TraceError as e:
            res.failed.append((str(wpath), str(e)))
            res.errors.append(e)
    for aid, items in scan.embedded.items():
        if aid in workers:
            res.skip("embedded sub-agent records superseded by the sub-agent's own file", len(items))
            continue
        if aid.startswith("acompact"):
            res.skip("compaction agents (agent-acompact-*)")
            continue
        workers[aid] = _worker_from(items, _Agent(scan.path, sid, f"{sid}:{aid}"), " (data.message)")
    return workers


def _link_by_prompt(scan: _LeadFile, workers: dict[str, _Agent]) -> None:
    """Link each spawn without an agent id to the unlinked worker whose first message is the spawn's prompt."""
    free = [a for a in workers if a not in scan.tool_agent.values()]
    for r in scan.lead.reqs.values():
        for tid, inp in r["spawn_ids"]:
            if tid in scan.tool_agent or not inp.get("prompt"):
                continue
            hit = next((a for a in free if workers[a].first_prompt == str(inp["prompt"]).strip()), None)
            if hit:
                scan.tool_agent[tid] = hit
                free.remove(hit)


class _Spawns:
    """The session's spawn records, the spawn tool_use ids linked to a worker, and the synthetic requests
    of workers known only by their recorded totals."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.linked_tools: set[str] = set()
        self.linked: set[str] = set()
        self.synthetic: list[dict[str, Any]] = []

    def add(self, scan: _LeadFile, workers: dict[str, _Agent], key: str, r: dict[str, Any], tid: str,
            inp: dict[str, Any], res: AdapterResult) -> None:
        """The spawn ``tid`` of lead request ``key``: its worker's spawn record, or a counted skip."""
        aid = scan.tool_agent.get(tid)
        w = workers.get(aid) if aid else None
        tur = scan.tool_result.get(tid, {})
        synthetic: dict[str, Any] | None = None  # the worker's one request from its spawn's totals
        if w is None or not w.reqs:
            # counted on the spawning request, so a spawn repeated in a de-duplicated copy counts once
            built = _from_totals(scan, key, r, tid, aid, inp)
            if isinstance(built, str):
                r["skipped_spawns"].append(built)
                return
            synthetic, w = built, _Agent(scan.path, scan.sid, built["agent_id"])
        aid = aid or tid  # a worker found by its record has its agent id
        if aid in self.linked:
            res.skip("second spawn link to an already linked sub-agent")
            return
        if synthetic is not None:
            self.synthetic.append(synthetic)
        self.linked.add(aid)
        self.linked_tools.add(tid)
        u = r["usage"]
        wreq = list(w.reqs.values()) if synthetic is None else [
            dict(t_start=synthetic["t_start"], t_end=synthetic["t_end"], model=synthetic["model"])]
        self.records.append(dict(
            session_id=scan.sid, agent_id=w.agent_id, parent_agent_id=scan.lead.agent_id, role="worker",
            spawn_request_id=key,
            instruction=f"{inp.get('description', '')}\n\n{inp.get('prompt', '')}".strip(),
            context=int(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]),
            tools=[str(inp.get("subagent_type") or "general-purpose")],
            model=str(inp.get("model") or wreq[0]["model"]), spawn_index=len(self.records),
            subagent_type=str(inp.get("subagent_type") or ""),
            t_start=min(x["t_start"] for x in wreq), t_end=max(x["t_end"] for x in wreq),
            total_duration_ms=_duration_ms(tur.get("totalDurationMs")), from_totals=not w.reqs))


def _from_totals(scan: _LeadFile, key: str, r: dict[str, Any], tid: str, aid: str | None,
                 inp: dict[str, Any]) -> dict[str, Any] | str:
    """The one synthetic request of a sub-agent known only by its spawn's recorded totals (docs/design.md §7,
    Claude Code), or why it cannot be built (a skip reason)."""
    path, sid = scan.path, scan.sid
    tur = scan.tool_result.get(tid, {})
    if not tur or tur.get("status") == "async_launched" or ("usage" not in tur and "totalTokens" not in tur):
        return "spawns without per-request worker records or recorded totals"
    where = f"line {scan.result_line.get(tid)}"
    dur = tur.get("totalDurationMs")
    if dur is None:
        return "spawns with recorded tokens but no totalDurationMs (no clock for the worker)"
    if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not np.isfinite(dur) or not 0 <= dur < MAX_COUNT:
        raise TraceError(str(path), where, "toolUseResult.totalDurationMs",
                         f"expected a duration in milliseconds in [0, 2**31), got {dur!r}")
    if "usage" in tur:
        usage = need(tur, "usage", path, where + " toolUseResult", dict)
        if not any(f in usage for f in USAGE_FIELDS) and "totalTokens" not in tur:
            return "spawns with recorded totals that hold no token count (usage: {})"
        u = usage_counts(usage, path, where + " toolUseResult.usage")
        prompt = u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        out, cc = u["output_tokens"], u["cache_creation_input_tokens"]
    else:
        prompt, out, cc = need_count(tur, "totalTokens", path, where + " toolUseResult"), 0, 0
    t0 = r["t_end"]
    model = str(inp.get("model") or "(unrecorded)")
    return dict(session_id=sid, request_id=f"{tid}:totals", agent_id=f"{sid}:{aid or tid}",
                parent_agent_id=scan.lead.agent_id, role="worker", turn=scan.lead_turn.get(key, 0),
                input_tokens=prompt, matched_prefix_tokens=0, output_tokens=out,
                reasoning_tokens=0, tool_names=[], n_observations=0, t_start=t0, t_end=t0 + float(dur) / 1000.0,
                model=model, benchmark="claude_code", cache_creation_tokens=cc, thinking_blocks=0, synthetic=True)


def _duration_ms(v: Any) -> float:
    """A spawn's measured ``totalDurationMs``, NaN when absent or not a plausible duration."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and 0 <= v < MAX_COUNT
    return float(v) if ok else float("nan")
