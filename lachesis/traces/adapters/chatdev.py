"""ChatDev 1.0 WareHouse run logs → Trace (phases as short-lived sub-agents, reviewer loops).

Every ``*.log[.gz]`` file is one run = one session.  The log forms read, each field, and the speaker
and prefix assumptions: docs/design.md §7 (ChatDev).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lachesis.traces.adapters import (
    AdapterResult,
    count,
    dedupe_requests,
    find_files,
    frames_to_trace,
    name_duplicate_files,
    read_each,
    read_text,
    require_data,
    stem,
    unique_names,
)
from lachesis.traces.schema import TraceError

_HEAD = re.compile(r"^\[(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) INFO\] (.*)$")
_CELL = re.compile(r"^\| \*\*(\w+)\*\* \| (.*?) ?\|?$")
_NUM = re.compile(r"^(prompt_tokens|completion_tokens|num_tokens): (\d+)\s*$")
_OUT = re.compile(r"^Out of LLM_api at (.+?)\.?\s*$")
_INTO = re.compile(r"^Into LLM_api at (.+?)\.?\s*$")
MODEL = "gpt-3.5 (unrecorded)"


def load(path: Path) -> AdapterResult:
    """Every ChatDev run log (``*.log[.gz]``) in a file or folder → one Trace."""
    path = Path(path)
    res = AdapterResult(dataset=path.name)
    logs = find_files(path, (".log", ".log.gz"), "ChatDev log")
    # a run's folder names its session when it holds one log; several logs in one folder: the log names
    per_dir: dict[Path, int] = {}
    for p in logs:
        per_dir[p.parent] = per_dir.get(p.parent, 0) + 1
    sids = unique_names(logs, path, lambda p: p.parent.name if per_dir[p.parent] == 1 and p.parent != path else stem(p))
    parsed = read_each(res, logs, lambda p, part: parse_log(p, part, sids[p]))
    require_data(res, path, len(parsed), "ChatDev run logs")
    name_duplicate_files(res, [(p, [r for r in rs if not r.get("placeholder")]) for p, (rs, _) in parsed])
    rows = [r for _, (rs, _) in parsed for r in rs]
    spawns = [s for _, (_, ss) in parsed for s in ss]
    res.trace = frames_to_trace(dedupe_requests(res, rows), spawns, source=str(path))
    return res


def _ts(m: re.Match[str], prev: float | None, path: Path, lineno: int) -> float:
    """A log line's time: ``YYYY-DD-MM`` (ChatDev's own format) or ``YYYY-MM-DD`` (lines some runs log
    through another logger). ASSUMPTION: when both readings are valid dates, the one nearer the
    previous line's time is meant (day first for a log's first line)."""
    y, a, b, hh, mm, ss = (int(x) for x in m.groups()[:6])
    times = []
    for mo, d in ((b, a), (a, b)):  # day first, then month first
        try:
            times.append(datetime(y, mo, d, hh, mm, ss, tzinfo=timezone.utc).timestamp())
        except ValueError:
            pass
    if not times:
        raise TraceError(str(path), f"line {lineno}", "timestamp",
                         f"no valid date as YYYY-DD-MM or YYYY-MM-DD: {m.group(0)[:21]!r}")
    return times[0] if prev is None else min(times, key=lambda t: abs(t - prev))


def _check_usage(vals: dict[str, int], path: Path, line: int, missing: str) -> None:
    """Both token counts of one logged call present and valid, else an error naming the line and the field."""
    for f in ("prompt_tokens", "completion_tokens"):
        if f not in vals:
            raise TraceError(str(path), f"line {line}", f, missing)
        count(vals[f], path, f"line {line}", f)


def _llm_api_call(lines: list[str], i: int, path: Path, ts: float | None, res: AdapterResult
                  ) -> tuple[dict[str, Any] | None, int]:
    """The call an ``Out of LLM_api at <phase>.`` line (line ``i``) reports: its token counts follow up to
    the ``Prompt:`` line or the next log line; the call's time is the last log line's (no Send/Receive
    pair). Returns (call or None when it has no counts: skipped with its reason, the index to go on)."""
    vals: dict[str, int] = {}
    j = i + 1
    while j < len(lines) and not _HEAD.match(lines[j]) and lines[j].strip() != "Prompt:" and not _OUT.match(lines[j]):
        n = _NUM.match(lines[j])
        if n:
            vals.setdefault(n.group(1), int(n.group(2)))
        j += 1
    prompt: list[str] = []
    if j < len(lines) and lines[j].strip() == "Prompt:":
        k = j + 1
        while k < len(lines) and not _HEAD.match(lines[k]) and not _INTO.match(lines[k]) and len(prompt) < 40:
            prompt.append(lines[k])
            k += 1
    if not vals.keys() & {"prompt_tokens", "completion_tokens"}:
        res.skip("ChatDev 'Out of LLM_api' calls without token counts (no usage: not a request)")
        return None, j
    _check_usage(vals, path, i + 1, "missing after 'Out of LLM_api' (the other count is there)")
    if ts is None:
        raise TraceError(str(path), f"line {i + 1}", "timestamp", "an LLM_api call before any timestamped log line")
    return dict(P=vals["prompt_tokens"], C=vals["completion_tokens"], t_start=ts, t_end=ts, line=i + 1,
                prompt="\n".join(prompt).strip()), j


def parse_log(path: Path, res: AdapterResult, sid: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One run log → request rows and spawn records."""
    scan = _LogScan(path, res, read_text(path).splitlines())
    scan.run()
    chain = _Chain(path, sid)
    if not any(ph["calls"] for ph in scan.phases):
        res.skip("ChatDev logs without any LLM usage record (no requests)")
    # the log's clock can run backwards (Tetris: an entry stamped 18:19:21 before one stamped 18:15:13), and the
    # chat chain issues its phases in time, so its placeholder spawns go in time order (stable for ties)
    scan.phases.sort(key=lambda ph: ph["t"])
    for k, ph in enumerate(scan.phases):
        if not ph["calls"]:
            res.skip("ChatDev phase instances without LLM calls")
            continue
        chain.phase(k, ph)
    for s in chain.spawns:
        mine = [r for r in chain.rows if r["agent_id"] == s["agent_id"]]
        s["t_start"], s["t_end"] = min(r["t_start"] for r in mine), max(r["t_end"] for r in mine)
    return chain.rows, chain.spawns


class _LogScan:
    """A run log read line by line into phase instances (a RolePlaying block and the calls its Receive
    blocks report) and single-call units (an ``Out of LLM_api`` call), in log order."""

    def __init__(self, path: Path, res: AdapterResult, lines: list[str]) -> None:
        self.path, self.res, self.lines = path, res, lines
        self.phases: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None  # the role-play phase instance that Receive blocks belong to
        self.entered = 0                            # "Into LLM_api" lines not yet matched by an "Out of LLM_api"
        self.unanswered = 0                         # Send blocks followed by another Send, not by their Receive
        self.chatting: dict[str, str] | None = None
        self.table: dict[str, str] | None = None
        self.send_ts: float | None = None
        self.ts: float | None = None

    def run(self) -> None:
        i = 0
        while i < len(self.lines):
            i = self.line(i)
        self.unanswered += self.send_ts is not None
        if self.unanswered:
            self.res.skip("ChatDev 'OpenAI_Usage_Info Send' blocks without their Receive (no completion count: "
                          "not a request)", self.unanswered)
        if self.entered:
            self.res.skip("ChatDev 'Into LLM_api' calls never logged as returned (no usage: not a request)",
                          self.entered)

    def line(self, i: int) -> int:
        """Read line ``i`` (and any block it opens); the index of the next line to read."""
        lines = self.lines
        m = _HEAD.match(lines[i])
        if not m and _INTO.match(lines[i]):
            self.entered += 1
        if not m and _OUT.match(lines[i]):
            self.entered = max(self.entered - 1, 0)
            call, i = _llm_api_call(lines, i, self.path, self.ts, self.res)
            if call is not None:
                out = _OUT.match(lines[call["line"] - 1])
                assert out is not None  # NOTE: a call is read only from a line _OUT matches
                self.phases.append(dict(params={}, chatting=None, t=call["t_start"], calls=[call], line=call["line"],
                                        single=out.group(1)))
            return i
        if not m:
            c = _CELL.match(lines[i])
            if c and self.table is not None:
                self.table.setdefault(c.group(1), c.group(2).strip())
            return i + 1
        ts, msg = _ts(m, self.ts, self.path, i + 1), m.group(7)
        self.ts = ts
        self.table = None
        if msg.startswith("System: **[chatting]**"):
            self.chatting = {}
            self.table = self.chatting
        elif msg.startswith("System: **[RolePlaying]**"):
            ph: dict[str, Any] = dict(params={}, chatting=self.chatting, t=ts, calls=[], line=i + 1)
            self.phases.append(ph)
            self.current = ph
            self.table = ph["params"]
            self.chatting = None
        elif msg.startswith("**[OpenAI_Usage_Info Send]**"):
            if self.send_ts is not None:
                self.unanswered += 1
            self.send_ts = ts
        elif msg.startswith("**[OpenAI_Usage_Info Receive]**"):
            return self.receive(i, ts)
        return i + 1

    def receive(self, i: int, ts: float) -> int:
        """A Receive block: one call of the current phase, timed from its Send; the index after the block."""
        lines, path = self.lines, self.path
        vals: dict[str, int] = {}
        j = i + 1
        while j < len(lines) and not _HEAD.match(lines[j]):
            n = _NUM.match(lines[j])
            if n:
                vals[n.group(1)] = int(n.group(2))
            j += 1
        _check_usage(vals, path, i + 1, "missing in the OpenAI_Usage_Info Receive block")
        if self.current is None:
            raise TraceError(str(path), f"line {i + 1}", "(phase)", "LLM call before any RolePlaying block")
        send_ts = self.send_ts
        self.current["calls"].append(dict(P=vals["prompt_tokens"], C=vals["completion_tokens"],
                                          t_start=send_ts if send_ts is not None and send_ts <= ts else ts,
                                          t_end=ts, line=i + 1))
        self.send_ts = None
        return j


class _Chain:
    """The chat chain as a lead (a placeholder spawn request per phase instance) and each phase's two
    roles as short-lived sub-agents with their spawn records."""

    def __init__(self, path: Path, sid: str) -> None:
        self.path, self.sid = path, sid
        self.lead = f"{sid}:ChatChain"
        self.rows: list[dict[str, Any]] = []
        self.spawns: list[dict[str, Any]] = []

    def phase(self, k: int, ph: dict[str, Any]) -> None:
        """Phase instance ``k``: its placeholder spawn request, then its calls alternating between its roles."""
        sid, lead = self.sid, self.lead
        params, chat = ph["params"], ph["chatting"] or {}
        phase = ph.get("single") or chat.get("phase_name") or ("TaskPromptSelfImprovement" if k == 0 else "(unnamed)")
        roles = [params.get("assistant_role_name"), params.get("user_role_name")] if not ph.get("single") \
            else [f"LLM_api@L{ph['line']}"] * 2
        if not all(roles):
            raise TraceError(str(self.path), f"line {ph['line']}", "assistant_role_name/user_role_name",
                             "missing in the RolePlaying table")
        spawn_rid = f"{sid}:p{k}:spawn"
        self.rows.append(dict(session_id=sid, request_id=spawn_rid, agent_id=lead, parent_agent_id=None, role="lead",
                              turn=0, input_tokens=0, matched_prefix_tokens=0, output_tokens=0, reasoning_tokens=0,
                              tool_names=["spawn_subagent"], n_observations=0, t_start=ph["t"], t_end=ph["t"],
                              benchmark="chatdev", domain=phase, model="(chat chain program)", placeholder=True))
        last: dict[str, dict[str, Any]] = {}
        for c_i, c in enumerate(ph["calls"]):
            name = roles[c_i % 2]
            aid = f"{sid}:p{k}:{name}"
            prev = last.get(aid)
            mp = min(prev["input_tokens"] + prev["output_tokens"], c["P"]) if prev else 0
            row = dict(session_id=sid, request_id=f"{sid}:L{c['line']}", agent_id=aid, parent_agent_id=lead,
                       role="reviewer" if name == "Code Reviewer" else "worker", turn=0, input_tokens=c["P"],
                       matched_prefix_tokens=mp, output_tokens=c["C"], reasoning_tokens=0, tool_names=[],
                       n_observations=0, t_start=c["t_start"], t_end=c["t_end"], benchmark="chatdev",
                       domain=phase, model=MODEL, placeholder=False)
            self.rows.append(row)
            if prev is None:
                prompt_key = "assistant_role_prompt" if c_i % 2 == 0 else "user_role_prompt"
                text = c.get("prompt") if ph.get("single") else params.get(prompt_key, "")
                self.spawns.append(dict(session_id=sid, agent_id=aid, parent_agent_id=lead, role=row["role"],
                                        spawn_request_id=spawn_rid,
                                        instruction=(chat.get("phase_prompt", "") + "\n\n" + (text or "")).strip(),
                                        context=0, tools=[], model=MODEL, spawn_index=len(self.spawns), phase=phase))
            last[aid] = row
