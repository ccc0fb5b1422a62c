"""Codex CLI rollouts → single-agent request rows, read by the Claude Code adapter
(:mod:`lachesis.traces.adapters.claude_code`, source ``claude_code_more``).  How each field is derived:
docs/design.md §7 (Codex CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lachesis.traces.adapters import AdapterResult, iso_seconds, need, need_count
from lachesis.traces.schema import TraceError

#: Record types that open a Codex rollout (its first record is one of them).
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context"}
_GENERATED = ("function_call", "custom_tool_call", "reasoning", "message")
_TOOL_CALLS = ("function_call", "custom_tool_call")
_TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def codex_session(path: Path, recs: list[tuple[int, dict[str, Any]]], res: AdapterResult,
                  label: str | None = None) -> list[dict[str, Any]]:
    """One Codex CLI rollout → single-agent request rows (session ``label``, default its own id)."""
    roll = _Rollout(path, res, label)
    for lineno, rec in recs:
        roll.record(lineno, rec)
    if roll.sid is None:
        raise TraceError(str(path), "line 1", "session_meta", "no session_meta record")
    if not roll.rows:
        res.skip("Codex rollouts without token usage (no requests)")
    return roll.rows


class _Rollout:
    """A rollout read record by record: one request per new ``token_count``, with the tool calls, tool
    outputs and time window since the previous one."""

    def __init__(self, path: Path, res: AdapterResult, label: str | None) -> None:
        self.path, self.res, self.label = path, res, label
        self.sid: str | None = None
        self.model = ""
        self.turn = -1
        self.tools: list[str] = []
        self.obs = 0
        self.window_start: float | None = None
        self.last_gen: float | None = None  # last generated item of the window (decode end)
        self.last_total: tuple[Any, ...] | None = None
        self.rows: list[dict[str, Any]] = []

    def record(self, lineno: int, rec: dict[str, Any]) -> None:
        where = f"line {lineno}"
        t = rec.get("type")
        p = rec.get("payload") or {}
        if not isinstance(p, dict):
            raise TraceError(str(self.path), where, "payload", "expected an object")
        ts = rec.get("timestamp")
        tsec = iso_seconds(ts, self.path, where) if isinstance(ts, str) else None
        if t == "session_meta":
            self.sid = str(need(p, "id", self.path, where + " payload"))
        elif t == "turn_context":
            self.model = str(p.get("model", self.model))
        elif t == "compacted":
            self.res.skip("codex compaction events (no boundary emitted)")
        elif t == "response_item":
            self.item(p, tsec)
        elif t == "event_msg" and p.get("type") == "user_message":
            self.turn += 1
            self.window_start = tsec
        elif t == "event_msg" and p.get("type") == "token_count":
            self.token_count(p, tsec, where)

    def item(self, p: dict[str, Any], tsec: float | None) -> None:
        """A response item: a tool call, a generated item (the window's decode end) or a tool output."""
        if self.window_start is None:
            self.window_start = tsec
        if p.get("type") in _TOOL_CALLS:
            self.tools.append(str(p.get("name", "")))
        if p.get("type") in _GENERATED and p.get("role") != "user":
            self.last_gen = tsec
        elif p.get("type") in _TOOL_OUTPUTS:
            self.obs += 1

    def token_count(self, p: dict[str, Any], tsec: float | None, where: str) -> None:
        """A usage event: a request, unless it has no usage or repeats the previous total."""
        path = self.path
        info = p.get("info")
        if not info:
            self.res.skip("codex token_count events without usage")
            return
        total = need(info, "total_token_usage", path, where + " payload.info", dict)
        key = tuple(sorted(total.items()))
        if key == self.last_total:
            self.res.skip("repeated codex token_count events")
            return
        self.last_total = key
        last = need(info, "last_token_usage", path, where + " payload.info", dict)
        lw = where + " payload.info.last_token_usage"
        vals = {f: need_count(last, f, path, lw) for f in ("input_tokens", "cached_input_tokens", "output_tokens")}
        reasoning = need_count(last, "reasoning_output_tokens", path, lw, default=0)
        if self.sid is None:
            raise TraceError(str(path), where, "session_meta", "token usage before the session_meta record")
        total_tokens = sum(v for v in total.values() if isinstance(v, int) and not isinstance(v, bool))
        sess = self.label or self.sid
        self.rows.append(dict(
            session_id=sess, request_id=f"{self.sid}:t{total_tokens}", agent_id=f"{sess}:agent",
            parent_agent_id=None, role="single", turn=max(self.turn, 0),
            input_tokens=vals["input_tokens"], matched_prefix_tokens=vals["cached_input_tokens"],
            output_tokens=vals["output_tokens"], reasoning_tokens=reasoning,
            tool_names=self.tools, n_observations=self.obs,
            t_start=min(x for x in (self.window_start, self.last_gen, tsec) if x is not None),
            t_end=self.last_gen if self.last_gen is not None else tsec,
            model=self.model, benchmark="codex_cli", cache_creation_tokens=0, thinking_blocks=0))
        self.tools, self.obs, self.window_start, self.last_gen = [], 0, tsec, None
