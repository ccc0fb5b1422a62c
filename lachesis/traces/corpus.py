"""The embedded synthetic corpus: a seeded simulation of the agent harnesses of §3.2 (Table 2) that
emits, per Table 3 workload, a per-request trace in the contract of :mod:`lachesis.traces.trace`.

Single-agent sessions are turns of reason-act-observe rounds whose reasoning is stripped at the turn
end; multi-agent sessions are a lead spawning waves of workers, some reviewed.  Every matched prefix
follows from what the simulated harness re-sends, so segment recovery finds real segments in them.
The harness, the trace layout and every assumption: docs/design.md §7; the workloads' inputs and
presets: :mod:`lachesis.traces.workloads`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from lachesis.config import SPAWN_TOOL_NAMES, TOOL_CLASSES, ReferenceClock
from lachesis.io import replace_folder, stranger
from lachesis.paper import TABLE3
from lachesis.traces.sampling import NORMAL, Draws, poisson_ppf, quantile, session_draws
from lachesis.traces.schema import REQUEST_COLUMNS, SPAWN_COLUMNS
from lachesis.traces.trace import Trace, tokens_processed, tokens_written, write_trace
from lachesis.traces.workloads import (
    COMPOSITES,
    STRUCTURAL_PRESETS,
    STRUCTURAL_WORKLOADS,
    TABLE3_INPUT,
    TEMPORAL_PRESETS,
    TEMPORAL_WORKLOADS,
    TURN_DIM,
    WORKLOADS,
    RoundNorms,
    StructuralDerived,
    StructuralPreset,
    TemporalDerived,
    TemporalPreset,
    WorkerSpec,
    corpus_text,
    derive_structural,
    derive_temporal,
    n_tokens,
    review_instruction,
    tool_table,
    worker_spec,
)

MODEL_NAME = "gemma-4"  # Table 2: both regimes use Gemma 4
SPAWN_TOOL = "spawn_subagent"
assert SPAWN_TOOL in SPAWN_TOOL_NAMES
SPAWN_COLS = tuple(SPAWN_COLUMNS)


class _Rows:
    """Column-wise accumulator of request rows (no per-row dict)."""

    COLS = (*REQUEST_COLUMNS, "observation_tokens", "shared_prefix_tokens")

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in self.COLS}

    def add(self, *vals: Any) -> None:
        for c, v in zip(self.COLS, vals):
            self.cols[c].append(v)

    def frame(self, benchmark: str, domain: str) -> pd.DataFrame:
        df = pd.DataFrame(self.cols)
        df["benchmark"] = benchmark
        df["domain"] = domain
        df["model"] = MODEL_NAME
        return df



@dataclass
class _Tables:
    """The request rows and spawn records of the sessions generated so far, column-wise."""

    rows: _Rows = field(default_factory=_Rows)
    spawns: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in SPAWN_COLS})


@dataclass(frozen=True)
class _SessionKey:
    """One session of a workload: its id, its position in the workload and the seed; the session's
    quasi-random quantiles depend on nothing else (docs/design.md §7)."""

    workload: str
    sid: str
    index: int
    seed: int

    def q(self, dim: int, j: int = 0) -> float:
        """The session's quasi-random quantile of dimension ``dim`` for item ``j``."""
        return quantile(self.seed, self.workload, dim, self.index, j)

# ------------------------------------------------------------------------------------------------
# Temporal regime
# ------------------------------------------------------------------------------------------------


def _split(total: float, weights: Sequence[float]) -> list[int]:
    """``total`` tokens (rounded) in integer parts proportional to ``weights``, each at least 1 (largest
    remainder; a total below the number of parts is raised to it)."""
    n = len(weights)
    tot = max(int(round(total)), n)
    s = sum(weights)
    raw = [tot * w / s for w in weights]
    parts = [int(x) for x in raw]
    for i in sorted(range(n), key=lambda i: parts[i] - raw[i])[:tot - sum(parts)]:
        parts[i] += 1
    for i in range(n):
        if parts[i] < 1:
            j = max(range(n), key=parts.__getitem__)
            parts[j] -= 1 - parts[i]
            parts[i] = 1
    return parts


def _temporal_session(p: TemporalPreset, d: TemporalDerived, key: _SessionKey, rows: _Rows) -> None:
    """Simulate one single-agent session (turns of reason-act-observe rounds, reasoning stripped).

    Each turn takes its rounds, stripped content X and reasoning R at one quantile (TemporalDerived.turn);
    R is split among the rounds, X among the answer, the calls and their observations."""
    sid = key.sid
    rng = session_draws(key.seed, sid)
    names, probs, obsw = tool_table(p.tools)
    cum = np.cumsum(probs).tolist()
    sig = p.token_sigma
    agent = f"{sid}-agent"
    n_turns = 1 + poisson_ppf(key.q(0), d.extra_turns)
    prompt = rng.tok(d.prompt_tokens, p.prompt_sigma)
    shared = prompt if p.shared_system_prompt else 0
    base = prompt  # context before the current turn's user message
    carried = 0  # stripped content of the previous turn, re-sent at this turn's start
    turn_start_matched = shared  # matched prefix of the turn's first request
    q = 0
    for t in range(n_turns):
        u = rng.tok(p.user_tokens, sig)
        k, x_total, r_total = d.turn(key.q(TURN_DIM, t))
        reasoning = _split(r_total, [rng.ln(1.0, sig) for _ in range(k)])
        calls = [[rng.pick(cum) for _ in range(1 + int(rng.u() < p.multi_call_p))] for _ in range(k - 1)]
        flat = [j for cs in calls for j in cs]
        weights = ([rng.ln(p.answer_tokens, sig)] + [rng.ln(p.call_tokens, sig) for _ in flat]
                   + [rng.ln(d.observation_tokens * obsw[j], sig) for j in flat])
        parts = _split(x_total, weights)
        answer, call_tok, obs_tok = parts[0], parts[1:1 + len(flat)], parts[1 + len(flat):]
        ctx = base + carried + u  # input of the turn's first request
        matched = turn_start_matched
        first_reasoning_at = ctx  # stripping cuts the context here at the next turn
        at = 0  # position in the turn's flat list of calls
        for i in range(k):
            r = reasoning[i]
            if i < k - 1:
                nc = len(calls[i])
                out = r + sum(call_tok[at:at + nc])
                obs = sum(obs_tok[at:at + nc])
                rows.add(sid, f"{sid}-r{q:03d}", agent, None, "single", t, ctx, matched, out, r,
                         [names[j] for j in calls[i]], nc, obs, shared)
                at += nc
                matched = ctx + out
                ctx = ctx + out + obs
            else:
                rows.add(sid, f"{sid}-r{q:03d}", agent, None, "single", t, ctx, matched, r + answer, r, [], 0, 0,
                         shared)
            q += 1
        # turn end: the harness strips this turn's reasoning; the next request re-sends the rest
        base = first_reasoning_at
        turn_start_matched = first_reasoning_at
        carried = sum(parts)


# ------------------------------------------------------------------------------------------------
# Structural regime
# ------------------------------------------------------------------------------------------------


@dataclass
class _Worker:
    """One worker's whole run, drawn before the lead's requests are laid out."""

    aid: str
    wave: int
    ordinal: int  # its spawn_index among the session's workers
    spec: WorkerSpec
    context_tokens: int  # the context the lead hands it
    requests: list[tuple[Any, ...]]
    result: int  # the result it returns to the lead
    total: int  # its final context: what a reviewer of it reads


@dataclass
class _Reviews:
    """Reviewer decisions and sizes per worker, from the session's separate reviewer stream."""

    chosen: list[bool]
    prompt: list[int]
    reasoning: list[int]
    output: list[int]


@dataclass
class _Lead:
    """The lead's own draws: system prompt, task, reasoning per request and final answer."""

    prompt: int
    task: int
    reasoning: list[int]
    answer: int


def _draw_worker(p: StructuralPreset, d: StructuralDerived, key: _SessionKey, rng: Draws, wave: int,
                 j: int) -> _Worker:
    """Draw worker ``j``: its spawn record, its round count (the lifetime signal plus unobservable
    noise) and the requests of its rounds, the last one returning its result."""
    sig = p.token_sigma
    spec = worker_spec(p, rng, RoundNorms(d.type_norm, d.scope_norm, d.obs_norm), (key.q(2, j), key.q(3, j)))
    ctx_tok = rng.tok(p.context_tokens, sig)
    z = NORMAL.inv_cdf(key.q(4, j))
    lam = (d.worker_rounds - 1) * spec.rounds_mult * math.exp(p.rounds_sigma * z - p.rounds_sigma ** 2 / 2)
    k = 1 + poisson_ppf(key.q(5, j), lam)
    aid = f"{key.sid}-w{j:02d}"
    so = p.worker_observation_sigma  # the size of what this worker's tools return
    f_o = math.exp(so * NORMAL.inv_cdf(key.q(7, j)) - so * so / 2)
    prompt = rng.tok(p.worker_prompt_tokens, 0.1)
    ctx = prompt + n_tokens(spec.instruction) + ctx_tok
    matched = 0
    reqs = []
    tool_catalog = p.text["tools"]
    for i in range(k):
        r = rng.tok(d.reasoning_tokens, sig)
        if i < k - 1:
            nc = 1 + int(rng.u() < p.multi_call_p)
            names = [spec.tools[rng.pick(spec.tool_cum)] for _ in range(nc)]
            calls = sum(rng.tok(p.call_tokens, sig) for _ in range(nc))
            obs = sum(rng.tok(f_o * d.observation_tokens * tool_catalog[n]["obs"] / d.obs_norm, sig) for n in names)
            out = r + calls
            reqs.append((f"{aid}-r{i:02d}", ctx, matched, out, r, names, nc, obs))
            matched = ctx + out
            ctx = ctx + out + obs
        else:
            res = rng.tok(p.result_tokens, sig)
            reqs.append((f"{aid}-r{i:02d}", ctx, matched, r + res, r, [], 0, 0))
            total = ctx + r + res
    return _Worker(aid, wave, j, spec, ctx_tok, reqs, res, total)


def _draw_reviews(p: StructuralPreset, key: _SessionKey, workers: list[_Worker], reviewers: bool) -> _Reviews:
    """Reviewer decisions and sizes, drawn for every worker whether or not reviewers are kept, from a
    stream of their own, so that the workers are the same sessions with and without reviewers."""
    rrng = session_draws(key.seed, key.sid, 1)
    sig = p.token_sigma
    chosen = [reviewers and key.q(6, w.ordinal) < p.reviewer_rate for w in workers]
    prompt = [rrng.tok(p.reviewer_prompt_tokens, 0.1) for _ in workers]
    reasoning = [rrng.tok(p.review_reasoning_tokens, sig) for _ in workers]
    output = [rrng.tok(p.review_tokens, sig) for _ in workers]
    return _Reviews(chosen, prompt, reasoning, output)


@dataclass
class _LeadLog:
    """Where one structural session's rows and spawn records go; every sub-agent's parent is the lead."""

    tables: _Tables
    sid: str
    n_reviewers: int = 0

    @property
    def lead(self) -> str:
        return f"{self.sid}-lead"

    def lead_request(self, rid: str, ctx: int, matched: int, out: int, reasoning: int, tools: list[str]) -> None:
        """A lead request row (n_observations 0: its sub-agents' returned results are charged from the
        spawn records, lachesis.traces.clock)."""
        self.tables.rows.add(self.sid, rid, self.lead, None, "lead", 0, ctx, matched, out, reasoning, tools, 0, 0, 0)

    def spawn(self, aid: str, role: str, req: str, instruction: str, context: int, tools: list[str],
              index: int) -> None:
        for c, v in (("session_id", self.sid), ("agent_id", aid), ("parent_agent_id", self.lead), ("role", role),
                     ("spawn_request_id", req), ("instruction", instruction), ("context", int(context)),
                     ("tools", list(tools)), ("model", MODEL_NAME), ("spawn_index", int(index))):
            self.tables.spawns[c].append(v)

    def worker(self, w: _Worker, spawn_req: str) -> None:
        """A worker's rows and its spawn record."""
        for (rid, inp, mp, out, r, names, nobs, obs) in w.requests:
            self.tables.rows.add(self.sid, rid, w.aid, self.lead, "worker", 0, inp, mp, out, r, names, nobs, obs, 0)
        self.spawn(w.aid, "worker", spawn_req, w.spec.instruction, w.context_tokens, w.spec.tools, w.ordinal)

    def reviewer(self, w: _Worker, reviews: _Reviews, spawn_req: str) -> int:
        """The reviewer of worker ``w``: one request reading the worker's whole trace (a fresh prefill);
        returns the review's tokens, which the lead reads."""
        i = w.ordinal
        aid = f"{self.sid}-v{i:02d}"
        instr = review_instruction(w.aid, w.spec.instruction)
        inp = reviews.prompt[i] + n_tokens(instr) + w.total
        reasoning = reviews.reasoning[i]
        self.tables.rows.add(self.sid, f"{aid}-r00", aid, self.lead, "reviewer", 0, inp, 0,
                             reasoning + reviews.output[i], reasoning, [], 0, 0, 0)
        self.spawn(aid, "reviewer", spawn_req, instr, int(w.total), [], self.n_reviewers)
        self.n_reviewers += 1
        return reviews.output[i]


def _lead_requests(p: StructuralPreset, log: _LeadLog, lead: _Lead, waves: list[list[_Worker]],
                   reviews: _Reviews) -> None:
    """The lead's requests: each spawns the next wave and the reviewers of the wave it reads; the lead
    answers once nothing is left to delegate or review.  Each lead row comes before the rows of the
    sub-agents it spawns (per-agent order is what the trace contract needs)."""
    ctx, matched = lead.prompt + lead.task, 0
    n_waves = len(waves)
    lead_q = 0
    for j_req in range(n_waves + 1):
        to_review = [w for w in waves[j_req - 1] if reviews.chosen[w.ordinal]] if j_req >= 1 else []
        to_spawn = waves[j_req] if j_req < n_waves else []
        rid = f"{log.lead}-r{lead_q:02d}"
        n_spawn = len(to_spawn) + len(to_review)
        if n_spawn == 0:  # nothing left to delegate or review: the lead answers
            log.lead_request(rid, ctx, matched, lead.reasoning[lead_q] + lead.answer, lead.reasoning[lead_q], [])
            return
        call_tok = sum(n_tokens(w.spec.instruction) + p.spawn_call_overhead for w in to_spawn)
        call_tok += sum(n_tokens(review_instruction(w.aid, w.spec.instruction)) + p.spawn_call_overhead
                        for w in to_review)
        out = lead.reasoning[lead_q] + int(round(call_tok))
        obs_tok = sum(w.result for w in to_spawn)
        log.lead_request(rid, ctx, matched, out, lead.reasoning[lead_q], [SPAWN_TOOL] * n_spawn)
        row_idx = len(log.tables.rows.cols["request_id"]) - 1
        for w in to_spawn:
            log.worker(w, rid)
        for w in to_review:
            obs_tok += log.reviewer(w, reviews, rid)
        log.tables.rows.cols["observation_tokens"][row_idx] = int(obs_tok)
        matched = ctx + out
        ctx = ctx + out + int(obs_tok)
        lead_q += 1
    # the last wave was reviewed: one more lead request reads the reviews and answers
    rid = f"{log.lead}-r{lead_q:02d}"
    log.lead_request(rid, ctx, matched, lead.reasoning[lead_q] + lead.answer, lead.reasoning[lead_q], [])


def _structural_session(p: StructuralPreset, d: StructuralDerived, key: _SessionKey, tables: _Tables,
                        reviewers: bool) -> None:
    """Simulate one lead/worker/reviewer session (waves of concurrent workers, optional reviews)."""
    rng = session_draws(key.seed, key.sid)  # everything but the reviewers
    sig = p.token_sigma
    n_waves = 1 + poisson_ppf(key.q(0), p.mean_extra_waves)
    sizes = [1 + poisson_ppf(key.q(1, w), p.extra_wave_size) for w in range(n_waves)]
    lead_prompt = rng.tok(p.lead_prompt_tokens, 0.1)
    task = rng.tok(p.task_tokens, sig)
    lead_reason = [rng.tok(p.lead_reasoning_tokens, sig) for _ in range(n_waves + 2)]
    lead = _Lead(lead_prompt, task, lead_reason, rng.tok(p.lead_answer_tokens, sig))
    workers: list[_Worker] = []
    for w_i in range(n_waves):
        for _ in range(int(sizes[w_i])):
            workers.append(_draw_worker(p, d, key, rng, w_i, len(workers)))
    reviews = _draw_reviews(p, key, workers, reviewers)
    waves = [[w for w in workers if w.wave == i] for i in range(n_waves)]
    _lead_requests(p, _LeadLog(tables, key.sid), lead, waves, reviews)

# ------------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------------

#: The largest corpus scale (a multiple of Table 3's session counts).  A corpus is held in memory while it is
#: generated, validated and written, at about :data:`BYTES_PER_SCALE` per unit of scale (every workload; measured
#: in benchmarks/RESULTS.md, "Corpus size by scale"): 64× the paper's sessions take about 7.5 GB and minutes,
#: within a 16 GB machine, and beyond any figure's need (the paper's is scale 1).  A larger scale is refused
#: before anything is generated, instead of filling the machine's memory.
MAX_SCALE = 64.0
#: Memory and time one unit of scale costs :func:`write_all` on every workload (benchmarks/RESULTS.md, "Corpus size
#: by scale"): what the estimate :func:`cost` prints before a large corpus is made.
BYTES_PER_SCALE, SECONDS_PER_SCALE = 115e6, 5.0


def check_scale(scale: object) -> float:
    """``scale`` as a float in ``(0, MAX_SCALE]``, else a one-line ValueError naming the bound and why."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.number)) or not 0 < float(scale) < math.inf:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    if float(scale) > MAX_SCALE:
        raise ValueError(f"scale {float(scale):g} is above corpus.MAX_SCALE = {MAX_SCALE:g}: it would need about "
                         f"{cost(float(scale))} (the paper's corpus is scale 1)")
    return float(scale)


def cost(scale: float) -> str:
    """The memory and time a corpus of every workload at ``scale`` takes, roughly, in words."""
    gb, minutes = scale * BYTES_PER_SCALE / 1e9, scale * SECONDS_PER_SCALE / 60
    return f"{gb:.3g} GB of memory and {minutes:.2g} minutes"


def n_sessions(workload: str, scale: float) -> int:
    """Sessions of a Table 3 workload at a scale (at least one; the scale at most :data:`MAX_SCALE`)."""
    return max(1, int(round(check_scale(scale) * TABLE3_INPUT[workload][0])))


def _generate_one(workload: str, scale: float, seed: int, reviewers: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    tables = _Tables()
    n = n_sessions(workload, scale)
    p: TemporalPreset | StructuralPreset
    if workload in TEMPORAL_PRESETS:
        p = TEMPORAL_PRESETS[workload]
        d = derive_temporal(p)
        for i in range(n):
            _temporal_session(p, d, _SessionKey(workload, f"{workload}-s{i:04d}", i, seed), tables.rows)
    else:
        sp = STRUCTURAL_PRESETS[workload]
        sd = derive_structural(sp)
        for i in range(n):
            _structural_session(sp, sd, _SessionKey(workload, f"{workload}-s{i:04d}", i, seed), tables, reviewers)
        p = sp
    req = tables.rows.frame(workload, p.domain)
    sp_df = pd.DataFrame(tables.spawns) if tables.spawns["agent_id"] else None
    return req, sp_df


def generate(workload: str, scale: float = 1.0, seed: int = 0) -> Trace:
    """The synthetic trace of one workload (a Table 3 row or a composite), validated.

    ``scale`` multiplies the paper's session counts (≥ 1 session per workload); the same
    ``(workload, scale, seed)`` gives the same trace.
    """
    if workload not in WORKLOADS:
        raise KeyError(f"unknown workload {workload!r}; known: {list(WORKLOADS)}")
    parts = COMPOSITES.get(workload, (workload,))
    reviewers = workload != "multi_agent_no_reviewer"
    reqs, sps = [], []
    for w in parts:
        r, s = _generate_one(w, scale, seed, reviewers)
        reqs.append(r)
        if s is not None:
            sps.append(s)
    req = pd.concat(reqs, ignore_index=True)
    sp = pd.concat(sps, ignore_index=True) if sps else None
    return Trace.from_frames(req, sp, source=f"<synthetic corpus {workload} scale={scale:g} seed={seed}>",
                             tool_class_of=tool_classes())


def generate_all(scale: float = 1.0, seed: int = 0, workloads: list[str] | tuple[str, ...] | None = None
                 ) -> dict[str, Trace]:
    """Every workload and composite trace (composites are concatenations of the generated parts)."""
    names = list(workloads) if workloads else list(WORKLOADS)
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        raise KeyError(f"unknown workloads {unknown}; known: {list(WORKLOADS)}")
    base = {w: generate(w, scale, seed) for w in dict.fromkeys(
        x for n in names for x in COMPOSITES.get(n, (n,)) if n != "multi_agent_no_reviewer")}
    out: dict[str, Trace] = {}
    for n in names:
        if n == "multi_agent_no_reviewer":
            out[n] = generate(n, scale, seed)
        elif n in COMPOSITES:
            out[n] = Trace.concat([base[w] for w in COMPOSITES[n]], f"<synthetic corpus {n}>")
        else:
            out[n] = base[n]
    return out


def tool_classes() -> dict[str, str]:
    """Tool name -> tool class for every tool the corpus uses (spawn tools excluded)."""
    known = {tc.name for tc in TOOL_CLASSES}
    out: dict[str, str] = {}
    text = corpus_text()
    cats = list(text["temporal"].values()) + [b["tools"] for b in text["structural"].values()]
    for cat in cats:
        for name, spec in cat.items():
            cls = spec["class"]
            if cls not in known:
                raise ValueError(f"corpus_text.json: tool {name!r} has unknown class {cls!r}; known {sorted(known)}")
            if out.setdefault(name, cls) != cls:
                raise ValueError(f"corpus_text.json: tool {name!r} has two classes ({out[name]!r}, {cls!r})")
    return out


def reference_clock(**overrides: Any) -> ReferenceClock:
    """The reference clock of a corpus trace: what :func:`lachesis.traces.clock.clock_for` gives every trace
    :func:`generate` makes (its ``tool_class_of`` knows the corpus' tool names)."""
    return ReferenceClock(tool_class_of=tool_classes(), **overrides)


def table3(traces: Mapping[str, Trace], scale: float = 1.0) -> pd.DataFrame:
    """Table 3 regenerated: per workload ours beside ``scale`` × the paper's, with relative errors.

    The paper's values come from :data:`lachesis.paper.TABLE3` (display copy).  At a scale below 1
    the session count is rounded, so compare per-session columns (``*_per_session_rel_err``) too.
    """
    rows = []
    for w in TEMPORAL_WORKLOADS + STRUCTURAL_WORKLOADS:
        if w not in traces:
            continue
        r = traces[w].requests
        entry = TABLE3[w]
        ours = dict(sessions=r["session_id"].nunique(), requests=len(r),
                    tokens_processed=int(tokens_processed(r).sum()), tokens_written=int(tokens_written(r).sum()))
        paper: dict[str, Any] = {k: entry[k] for k in ours}
        row: dict[str, Any] = dict(workload=w, label=entry["label"], regime=entry["regime"])
        for k in ours:
            ref = None if paper[k] is None else float(paper[k]) * scale
            row[f"{k}_ours"] = ours[k]
            row[f"{k}_paper_x_scale"] = ref if ref is not None else float("nan")
            row[f"{k}_rel_err"] = (ours[k] - ref) / ref if ref else float("nan")
        for k in ("requests", "tokens_processed", "tokens_written"):
            if paper[k] is not None:
                mine = ours[k] / ours["sessions"]
                theirs = paper[k] / paper["sessions"]
                row[f"{k}_per_session_rel_err"] = (mine - theirs) / theirs
            else:
                row[f"{k}_per_session_rel_err"] = float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def write_all(out: str | Path, scale: float = 1.0, seed: int = 0, fmt: str = "parquet",
              workloads: Sequence[str] | None = None) -> dict[str, Trace]:
    """:func:`generate_all` and write each trace into its own sub-folder ``out/<workload>``
    (:func:`lachesis.traces.trace.write_trace`, with its tool-class map); returns the traces.  ``out`` is written
    whole (:func:`lachesis.io.replace_folder`): it holds this run's workloads in one format, a failed write
    leaves it as it was, and an existing folder holding anything but workload trace folders is refused."""
    if not str(out).strip():
        raise ValueError("--out: an empty path; give the output folder")
    traces = generate_all(scale, seed, list(workloads) if workloads else None)

    def write(tmp: Path) -> None:
        for name, tr in traces.items():
            write_trace(tr, tmp / name, fmt=fmt)

    replace_folder(out, write, _not_a_corpus)
    return traces


def _not_a_corpus(folder: Path) -> str | None:
    """Why ``folder`` is not an earlier corpus output (which :func:`write_all` may replace), or None."""
    def trace_folder(p: Path) -> bool:
        return p.is_dir() and p.name in WORKLOADS and all(
            f.is_file() and f.name.endswith((".parquet", ".jsonl", ".json", ".tmp")) for f in p.iterdir())
    return stranger(folder, trace_folder)


__all__ = ["MODEL_NAME", "SPAWN_TOOL", "MAX_SCALE", "generate", "generate_all", "write_all", "reference_clock",
           "tool_classes", "table3", "n_sessions", "check_scale", "cost"]
