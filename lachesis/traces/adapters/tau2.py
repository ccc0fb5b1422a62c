"""tau2-bench result files → single-agent Trace (temporal axis, §3.3).

One simulation = one session; reasoning tokens come from the exact cost (xAI models) or the model's
tokenizer (Qwen3.5), and the context is rebuilt under a stripping rule (``stripping=``).  Each field
and both rules: docs/design.md §7 (tau2-bench).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lachesis.traces.adapters import (
    MAX_COUNT,
    AdapterResult,
    count_tokens,
    dedupe_requests,
    find_files,
    frames_to_trace,
    iso_seconds,
    need,
    need_count,
    read_each,
    read_json,
    require_data,
)
from lachesis.traces.schema import TraceError

#: USD per token (litellm price table, PROVENANCE.md): (input, output).
XAI_PRICES: dict[str, tuple[float, float]] = {
    "grok-3-mini": (0.30e-6, 0.50e-6),
    "grok-4-fast-reasoning": (0.20e-6, 0.50e-6),
    "grok-4": (3.0e-6, 15.0e-6),
}
QWEN35_TOKENIZER = "qwen3.5-27b"
STRIPPING_RULES = ("turn_end", "every_call")


def _xai_price(model: str) -> tuple[float, float] | None:
    name = model.rsplit("/", 1)[-1]
    return XAI_PRICES.get(name)


def load(path: Path, stripping: str = "turn_end") -> AdapterResult:
    """Every tau2-bench results file (``*.json[.gz]``, recognised by its ``info`` and ``simulations``) → one Trace."""
    if stripping not in STRIPPING_RULES:
        raise ValueError(f"stripping must be one of {STRIPPING_RULES}, not {stripping!r}")
    res = AdapterResult(dataset=Path(path).name)
    files = find_files(path, (".json", ".json.gz"), "tau2-bench results file")
    parsed = read_each(res, files, lambda p, part: parse_file(p, stripping, part))
    require_data(res, path, len(parsed), "tau2-bench results")
    rows = dedupe_requests(res, [r for _, rows in parsed for r in rows])
    res.trace = frames_to_trace(rows, [], source=str(path))
    res.note(f"stripping rule: {stripping}")
    return res


def parse_file(path: Path, stripping: str, res: AdapterResult) -> list[dict[str, Any]]:
    """One tau2 results file → request rows."""
    doc = read_json(path)
    info = need(doc, "info", path, "(header)", dict)
    model = str(need(need(info, "agent_info", path, "info", dict), "llm", path, "info.agent_info"))
    domain = str((info.get("environment_info") or {}).get("domain_name", ""))
    sims = need(doc, "simulations", path, "(header)", list)
    price = _xai_price(model)
    res.note(f"{model}: reasoning tokens " + ("derived from the exact cost (xAI)" if price else
                                             "= tokens of reasoning_content (Qwen3.5 tokenizer)"))
    src = _File(path, model, domain, price, stripping)
    rows: list[dict[str, Any]] = []
    for si, sim in enumerate(sims):
        rows += _session(sim, f"simulations[{si}]", src, res)
    return rows


@dataclass(frozen=True)
class _File:
    """What one results file fixes for all its simulations: the agent's model and its price (xAI), the
    domain, and the stripping rule the context is rebuilt under."""

    path: Path
    model: str
    domain: str
    price: tuple[float, float] | None
    stripping: str


def _session(sim: dict[str, Any], where: str, src: _File, res: AdapterResult) -> list[dict[str, Any]]:
    """One simulation → request rows: the recorded calls, their reasoning, then the context rebuilt."""
    sid = str(need(sim, "id", src.path, where))
    calls = _calls(need(sim, "messages", src.path, where, list), where, src, res)
    if not calls:
        res.skip("session without agent requests")
        return []
    if src.price is None:  # Qwen: completion includes reasoning; count it with the model's tokenizer
        counts = count_tokens([c["rtext"] for c in calls], QWEN35_TOKENIZER)
        for c, n in zip(calls, counts):
            c["R"] = min(n, c["C"])
            c["visible"] = c["C"] - c["R"]
    obs_tok = count_tokens(["".join(c["obs"]) for c in calls], QWEN35_TOKENIZER)
    rows = []
    context = _Context(src.stripping)
    for c, ot in zip(calls, obs_tok):
        rnd, inp, mp = context.request(c)
        rows.append(dict(session_id=sid, request_id=f"{sid}:{c['j']}", agent_id=f"{sid}:agent",
                         parent_agent_id=None, role="single", turn=c["turn"], input_tokens=inp,
                         matched_prefix_tokens=mp, output_tokens=c["O"], reasoning_tokens=c["R"],
                         tool_names=c["tools"], n_observations=len(c["obs"]), observation_tokens=ot,
                         t_start=c["t_start"], t_end=c["t_end"], benchmark="tau2-bench", domain=src.domain, round=rnd,
                         model=src.model, recorded_prompt_tokens=c["P"], recorded_completion_tokens=c["C"]))
    return rows


def _calls(msgs: list[Any], where: str, src: _File, res: AdapterResult) -> list[dict[str, Any]]:
    """The simulation's agent requests as recorded: usage, reasoning, tools, observations, times, turn."""
    calls: list[dict[str, Any]] = []
    n_user = 0
    for j, m in enumerate(msgs):
        rec = f"{where}.messages[{j}]"
        role = need(m, "role", src.path, rec, str)
        if role == "user":
            n_user += 1
        elif role == "tool":
            if calls:
                calls[-1]["obs"].append(m.get("content") or "")
            else:
                res.skip("tool message before any agent request")
        elif role == "assistant":
            if m.get("usage") is None:
                res.skip("assistant message without usage (canned greeting)")
                continue
            prev_ts = msgs[j - 1].get("timestamp") if j > 0 else None
            calls.append(_call(m, j, rec, src, prev_ts, f"{where}.messages[{j - 1}]") | dict(turn=max(n_user - 1, 0)))
    return calls


def _call(m: dict[str, Any], j: int, rec: str, src: _File, prev_ts: Any, prev_rec: str) -> dict[str, Any]:
    """One assistant message with usage; its reasoning from the exact cost when the model's price is
    known (xAI), else left to the tokenizer (``R`` None)."""
    path, usage = src.path, m.get("usage")
    p = need_count(usage, "prompt_tokens", path, rec + ".usage")
    c = need_count(usage, "completion_tokens", path, rec + ".usage")
    raw = ((m.get("raw_data") or {}).get("message") or {})
    rtext = raw.get("reasoning_content") or ""
    ts_end = iso_seconds(need(m, "timestamp", path, rec, str), path, rec)
    ts_start = iso_seconds(prev_ts, path, prev_rec) if prev_ts else ts_end
    if src.price is not None:
        cost = need(m, "cost", path, rec, (int, float))
        total = (cost - p * src.price[0]) / src.price[1]
        if not np.isfinite(total) or abs(total - round(total)) > 0.05 or not c <= round(total) < MAX_COUNT:
            raise TraceError(str(path), rec, "cost",
                             f"cost {cost} does not give an integer output count >= completion ({total:.3f})")
        r = int(round(total)) - c
        visible, out = c, c + r
    else:
        r = None  # tokenized below, in one batch
        visible, out = c, c
    return dict(j=j, rec=rec, P=p, C=c, R=r, visible=visible, O=out, rtext=rtext,
                tools=[str(need(t, "name", path, rec + ".tool_calls")) for t in (m.get("tool_calls") or [])],
                obs=[], t_start=min(ts_start, ts_end), t_end=ts_end)


class _Context:
    """The agent's context rebuilt request by request under a stripping rule (docs/design.md §7): each
    request's round in its turn, its input and its matched prefix."""

    def __init__(self, stripping: str) -> None:
        self.stripping = stripping
        self.prev: dict[str, Any] | None = None
        self.first_reason_pos: int | None = None
        self.retained = 0
        self.rnd = 0

    def request(self, c: dict[str, Any]) -> tuple[int, int, int]:
        prev = self.prev
        new_turn = prev is None or c["turn"] != prev["turn"]
        self.rnd = 0 if new_turn else self.rnd + 1
        if self.stripping == "every_call":
            inp = c["P"]
            mp = 0 if prev is None else prev["P"] if prev["R"] > 0 else prev["P"] + prev["visible"]
        else:
            inp, mp = self.turn_end(c, prev, new_turn)
        mp = max(0, min(mp, inp))
        c["input"] = inp
        self.prev = c
        return self.rnd, inp, mp

    def turn_end(self, c: dict[str, Any], prev: dict[str, Any] | None, new_turn: bool) -> tuple[int, int]:
        """Reasoning stripped at the turn end: a turn's first request matches up to where the previous
        turn's first reasoning began; inside a turn the reasoning is retained in the input."""
        if new_turn:
            inp = c["P"]
            if prev is None:
                mp = 0
            else:
                mp = self.first_reason_pos if self.first_reason_pos is not None else prev["input"] + prev["O"]
            self.retained = 0
            self.first_reason_pos = None
        else:
            assert prev is not None  # NOTE: a request inside a turn follows the turn's first
            self.retained += prev["R"]
            inp = c["P"] + self.retained
            mp = prev["input"] + prev["O"]
        if c["R"] > 0 and self.first_reason_pos is None:
            self.first_reason_pos = inp
        return inp, mp
