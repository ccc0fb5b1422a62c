"""The embedded synthetic corpus: a seeded simulation of the agent harnesses of §3.2 (Table 2).

The paper's traces are private, so the default corpus *simulates the harness behaviour* the paper
describes, per workload, and emits per-request traces in the contract of :mod:`lachesis.trace`.
Segment recovery (:mod:`lachesis.segments`) then finds real segments in them, because every
``matched_prefix_tokens`` follows from what the simulated harness re-sends.

Temporal regime (§3.3; τ³-bench airline/retail/telecom/banking, BFCLv4 base/long-context).
  A session is a list of turns (one per user message); a turn is a list of rounds (one request
  each): reason -> act (tool calls) -> observe (one observation per call, appended to the context).
  The final round of a turn answers without a tool call.  Each request's output holds its
  reasoning (``reasoning_tokens``) plus its tool calls or answer.  At the turn end the harness
  strips that turn's reasoning: the next turn's first request re-sends the turn's tool calls,
  observations and answer plus the new user message, so its matched prefix ends exactly where
  the previous turn's first reasoning token began.  Inside a turn each request's matched prefix
  is the previous request's input plus output.

Structural regime (§3.4–§3.5; AppWorld, DeepSearchQA, SWE-bench Verified, TerminalBench, WebArena).
  Single-turn sessions.  A lead agent plans and spawns workers with ``spawn_subagent``, in waves:
  the workers one lead request spawns run concurrently; the next lead request reads their results
  (its observations) and spawns the next wave.  After a worker returns, a reviewer may be spawned
  (in the lead request that reads the worker's result); it receives the finished worker's trace as
  its context (a fresh prefill: matched prefix 0) and writes a review without delegating.  The
  lead ends with an answer.  Each sub-agent has its own context, a spawn record with real
  instruction text from the templates and word lists in ``lachesis/data/corpus_text.json``, its
  granted tools, model and ``spawn_index`` (its ordinal among the session's sub-agents of its role).
  ``multi_agent_no_reviewer`` is the SAME sessions with the reviewer spawns removed: reviewer
  decisions and reviewer tokens come from a separate RNG stream, so workers are identical.

Where the numbers come from.  Only the paper's workload statistics are inputs: Table 3 (sessions,
requests, tokens processed, tokens written; :data:`TABLE3_INPUT`) and Fig. 4(b)'s per-turn KV tokens
per class (:data:`FIG4B_INPUT`, means).  Each preset (:class:`TemporalPreset`,
:class:`StructuralPreset`) lists its NAMED ASSUMPTIONS (distribution families, token sizes the paper
does not give, structure of delegation), and :func:`derive_temporal` / :func:`derive_structural`
solve the remaining per-round parameters in closed form from Table 3's per-session arithmetic so
that the *expected* corpus reproduces Table 3 (and Fig. 4(b)'s means).  Lifetimes, T_norm ratios,
separabilities, ρR/W, worker spreads and every Kendall τ are never inputs: they emerge.

FINDING / ASSUMPTION (temporal system prompt).  Table 3 and Fig. 4(b) are only jointly consistent
if the system prompt (policy + tool definitions) is NOT in a session's tokens written: e.g.
BFCLv4 base processes 4,297 tokens per request but writes only 4,001 per session, and τ³ telecom's
per-turn stripped mean (211 tokens) leaves no room for a per-session prompt.  With the prompt
served from the prefix cache shared by all sessions of a workload (as SGLang's radix cache, whose
cache read the paper's trace records, does), the arithmetic closes for all six workloads with
plausible sizes (turns = tokens written / (laden + stripped per turn)).  So by default
(``TemporalPreset.shared_system_prompt``) a session's first request has
``matched_prefix_tokens`` = its system prompt length and the extra column
``shared_prefix_tokens`` says how much of each request's matched prefix is that cross-session
prefix (not the agent's own earlier context).  Set the flag to False for the stricter
per-agent reading (first request matched prefix 0); Table 3's written tokens then overshoot.

Trace layout.  Rows are in session order per agent: a lead request is followed by the requests of
the sub-agents it spawns (each agent's rows in its own order), then the next lead request; rows of
concurrent agents are not interleaved by time (the reference clock schedules them, docs/design.md §3).
``spawn_index`` is a sub-agent's ordinal among the session's sub-agents of its role (workers 0, 1,
…; reviewers 0, 1, …), so a worker's spawn record is identical with and without reviewers.  Request
ids are ``<workload>-s<session>-<agent>-r<round>``: unique across the corpus.  Tool names follow
each benchmark's public vocabulary; their InferCept tool classes (``config.TOOL_CLASSES``) are an
ASSUMPTION listed in ``lachesis/data/corpus_text.json`` and exposed by :func:`reference_clock`.

Worker lifetime ASSUMPTION (the ranker's signal).  A worker's task type and scope level are
visible in its instruction (template wording and scope phrase) and its tool list (granted per task
type).  Its round count is ``1 + Poisson((k̄-1) · m_type · m_scope · ε)``, with ε log-normal
(σ = ``StructuralPreset.rounds_sigma``) unobservable noise; the tools it calls are drawn from the
granted tools, whose latency class (``config.TOOL_CLASSES``) the reference clock charges.  Nothing
here is tuned to a Kendall τ or a lifetime: the ranker's accuracy must emerge from this noise.
"""

from __future__ import annotations

import bisect
import json
import math
import zlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from statistics import NormalDist
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from lachesis.config import SPAWN_TOOL_NAMES, TOOL_CLASSES, ReferenceClock
from lachesis.io import replace_folder, stranger
from lachesis.trace import Trace, tokens_processed, tokens_written, write_trace

MODEL_NAME = "gemma-4"  # Table 2: both regimes use Gemma 4
SPAWN_TOOL = "spawn_subagent"
assert SPAWN_TOOL in SPAWN_TOOL_NAMES

# ------------------------------------------------------------------------------------------------
# Inputs from the paper (Table 3, Appendix A; Fig. 4(b), §3.3).  The model reads these copies.
# ------------------------------------------------------------------------------------------------

#: Table 3: (sessions, requests, tokens processed or None, tokens written) per workload.
TABLE3_INPUT: dict[str, tuple[int, int, int | None, int]] = {
    "tau3_airline": (58, 709, 4_735_468, 591_248),
    "tau3_retail": (114, 1_387, 9_593_474, 1_156_112),
    "tau3_telecom": (114, 2_208, 20_687_494, 1_407_427),
    "tau3_banking": (97, 2_221, 63_759_218, 7_172_200),
    "bfcl_base": (200, 2_063, 8_865_141, 800_193),
    "bfcl_long_context": (200, 2_066, 23_312_059, 5_279_265),
    "appworld": (168, 6_248, None, 9_738_267),
    "deepsearchqa": (125, 12_241, None, 37_196_143),
    "swebench_verified": (149, 8_745, None, 11_677_326),
    "terminalbench": (75, 3_675, None, 7_289_834),
    "webarena": (106, 2_190, None, 6_707_151),
}

#: Fig. 4(b): mean KV tokens a turn writes into (reasoning_laden, reasoning_stripped).  Our reading
#: of the garbled figure text (checked against lachesis.paper.FIG4B_TURN_TOKENS: the same numbers;
#: banking and long-context print both medians before both means, base prints the stripped mean
#: before its median).  Means are used because token totals are sums.
FIG4B_INPUT: dict[str, tuple[float, float]] = {
    "tau3_airline": (1519, 438),
    "tau3_retail": (1537, 502),
    "tau3_telecom": (877, 211),
    "tau3_banking": (8006, 4067),
    "bfcl_base": (516, 203),
    "bfcl_long_context": (4271, 2051),
}

TEMPORAL_WORKLOADS = ("tau3_airline", "tau3_retail", "tau3_telecom", "tau3_banking", "bfcl_base",
                      "bfcl_long_context")
STRUCTURAL_WORKLOADS = ("appworld", "deepsearchqa", "swebench_verified", "terminalbench", "webarena")
COMPOSITES: dict[str, tuple[str, ...]] = {
    "tau3": TEMPORAL_WORKLOADS[:4],
    "bfcl": TEMPORAL_WORKLOADS[4:],
    "multi_agent": STRUCTURAL_WORKLOADS,
    "multi_agent_no_reviewer": STRUCTURAL_WORKLOADS,
}
#: Every name :func:`generate` accepts: the eleven Table 3 workloads, then the composite traces.
WORKLOADS: tuple[str, ...] = TEMPORAL_WORKLOADS + STRUCTURAL_WORKLOADS + tuple(COMPOSITES)


@lru_cache(maxsize=1)
def corpus_text() -> dict[str, Any]:
    """The embedded tool catalogues, spawn templates and word lists (``lachesis/data``)."""
    path = resources.files("lachesis").joinpath("data", "corpus_text.json")
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------
# Presets: named assumptions per workload
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TemporalPreset:
    """A single-agent workload: Table 3 + Fig. 4(b) inputs and the named assumptions.

    Distribution families (ASSUMPTION, reason: the paper gives means only): turns per session
    ``1 + Poisson``, rounds per turn ``1 + Poisson`` (a turn has at least its answering round),
    token counts log-normal with shape ``token_sigma`` around the derived mean.
    """

    name: str
    label: str
    domain: str
    #: ASSUMPTION: user messages are short (τ³'s simulated user, BFCL's queries).
    user_tokens: float = 60.0
    #: ASSUMPTION: the answer that closes a turn (a short reply to the user).
    answer_tokens: float = 90.0
    #: ASSUMPTION: one function call's JSON (name + arguments).
    call_tokens: float = 35.0
    #: ASSUMPTION: a tool round issues a second call with this probability (parallel calls).
    multi_call_p: float = 0.15
    #: ASSUMPTION: log-normal shape of every token draw (moderate spread, CV ≈ 0.66).
    token_sigma: float = 0.6
    #: ASSUMPTION: system-prompt size varies a little across sessions (tool subsets, user profile).
    prompt_sigma: float = 0.1
    #: ASSUMPTION (see module docstring): the system prompt is a prefix shared across the
    #: workload's sessions, served from the prefix cache, not written per session.
    shared_system_prompt: bool = True

    @property
    def tools(self) -> Mapping[str, Mapping[str, Any]]:
        """Tool catalogue (tool -> class, relative observation size, call frequency)."""
        return corpus_text()["temporal"][self.name]


@dataclass(frozen=True)
class StructuralPreset:
    """A multi-agent workload: Table 3 inputs and the named structural assumptions.

    The paper gives none of these splits (workers per session, concurrency, reviewer rate, lead vs
    worker tokens, tool mix); each value below is a plausible reading of the benchmark's harness.
    """

    name: str
    label: str
    domain: str
    #: ASSUMPTION: waves of workers per session = 1 + Poisson(extra_waves) (sequential delegation).
    extra_waves: float
    #: ASSUMPTION: workers per wave = 1 + Poisson(extra_wave_size) (concurrent delegation).
    extra_wave_size: float
    #: ASSUMPTION: a returned worker is reviewed with this probability (the paper gives no rate).
    reviewer_rate: float = 0.5
    #: ASSUMPTION: share of a worker tool round's written tokens that is reasoning.
    reasoning_share: float = 0.3
    #: ASSUMPTION: orchestrator system prompt (AOrchestra inherits Claude Code's), tokens.
    lead_prompt_tokens: float = 3000.0
    task_tokens: float = 150.0  # ASSUMPTION: the user's task statement
    lead_reasoning_tokens: float = 250.0  # ASSUMPTION: lead reasoning per request (planning)
    lead_answer_tokens: float = 200.0  # ASSUMPTION: the lead's final answer
    spawn_call_overhead: float = 30.0  # ASSUMPTION: JSON around an instruction in a spawn call
    worker_prompt_tokens: float = 1800.0  # ASSUMPTION: sub-agent system prompt + tool schemas
    context_tokens: float = 400.0  # ASSUMPTION: mean context the lead hands a worker
    call_tokens: float = 40.0  # ASSUMPTION: one tool call's JSON
    multi_call_p: float = 0.15  # ASSUMPTION: a worker round issues a second call
    result_tokens: float = 250.0  # ASSUMPTION: a worker's returned result
    reviewer_prompt_tokens: float = 800.0  # ASSUMPTION: reviewer system prompt
    review_reasoning_tokens: float = 300.0  # ASSUMPTION: reviewer reasoning
    review_tokens: float = 150.0  # ASSUMPTION: the review returned to the lead
    #: ASSUMPTION: scope levels (narrow, moderate, broad): frequency and round multiplier.
    scope_freq: tuple[float, float, float] = (0.3, 0.45, 0.25)
    scope_rounds: tuple[float, float, float] = (0.45, 1.0, 2.2)
    #: ASSUMPTION: unobservable per-worker round noise (log-normal shape).
    rounds_sigma: float = 0.5
    token_sigma: float = 0.6  # ASSUMPTION: log-normal shape of token draws

    @property
    def text(self) -> Mapping[str, Any]:
        return corpus_text()["structural"][self.name]


TEMPORAL_PRESETS: dict[str, TemporalPreset] = {
    "tau3_airline": TemporalPreset("tau3_airline", "τ³-bench airline", "airline"),
    "tau3_retail": TemporalPreset("tau3_retail", "τ³-bench retail", "retail"),
    "tau3_telecom": TemporalPreset("tau3_telecom", "τ³-bench telecom", "telecom"),
    "tau3_banking": TemporalPreset("tau3_banking", "τ³-bench banking", "banking"),
    # BFCL multi-turn: terse queries and terse confirmations (ASSUMPTION).
    "bfcl_base": TemporalPreset("bfcl_base", "BFCLv4 base", "base", user_tokens=50.0, answer_tokens=40.0),
    "bfcl_long_context": TemporalPreset("bfcl_long_context", "BFCLv4 long-context", "long_context",
                                        user_tokens=50.0, answer_tokens=40.0),
}

STRUCTURAL_PRESETS: dict[str, StructuralPreset] = {
    # App tasks decompose into a few sequential app sub-tasks (ASSUMPTION).
    "appworld": StructuralPreset("appworld", "AppWorld", "apps", extra_waves=1.5, extra_wave_size=0.6,
                                 reasoning_share=0.35),
    # Deep research fans out to parallel searchers, several waves (ASSUMPTION); pages are long.
    "deepsearchqa": StructuralPreset("deepsearchqa", "DeepSearchQA", "web_research", extra_waves=2.0,
                                     extra_wave_size=2.0, reasoning_share=0.2),
    # Locate -> reproduce -> patch -> test is mostly sequential (ASSUMPTION).
    "swebench_verified": StructuralPreset("swebench_verified", "SWE-bench Verified", "software",
                                          extra_waves=2.0, extra_wave_size=0.3, reasoning_share=0.35),
    "terminalbench": StructuralPreset("terminalbench", "TerminalBench", "terminal", extra_waves=1.5,
                                      extra_wave_size=0.3, reasoning_share=0.3),
    # Web tasks: one or two browsing workers; accessibility trees are long (ASSUMPTION).
    "webarena": StructuralPreset("webarena", "WebArena", "web", extra_waves=0.8, extra_wave_size=0.5,
                                 reasoning_share=0.15),
}


# ------------------------------------------------------------------------------------------------
# Derivation: closed-form solution of Table 3's per-session arithmetic
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TemporalDerived:
    """Per-workload parameters solved from Table 3 + Fig. 4(b) under a :class:`TemporalPreset`."""

    extra_turns: float  # Poisson mean of turns - 1
    extra_rounds: float  # Poisson mean of rounds per turn - 1
    reasoning_tokens: float  # mean reasoning per round
    observation_tokens: float  # mean observation per tool call
    prompt_tokens: float  # mean system prompt


def _tool_table(tools: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Tool names, call probabilities, observation-size weights normalized to mean 1 per call."""
    names = list(tools)
    w = np.array([float(tools[n]["weight"]) for n in names])
    p = w / w.sum()
    obs = np.array([float(tools[n]["obs"]) for n in names])
    return names, p, obs / float(p @ obs)


@lru_cache(maxsize=None)
def derive_temporal(preset: TemporalPreset) -> TemporalDerived:
    """Solve turns, rounds, reasoning/observation sizes and prompt size from Table 3 + Fig. 4(b).

    With T = 1 + Pois(a) turns, k = 1 + Pois(b) rounds a turn (K = 1 + b), u user tokens,
    m = 1 + multi_call_p calls per tool round, X = b·m·(c + o) + ans the stripped content a turn
    leaves, laden L = K·r + X and stripped S = u + X·a/(1+a) per turn (turn 0 re-sends nothing):
      tokens written / session   = (1+a)(L + S)        -> a
      requests / session         = (1+a)(1+b)          -> b
      Fig. 4(b) L, S                                   -> r, o
      tokens processed / session = K(1+a)(P+u) + K(X+u)(a + a²/2)
                                   + (1+a)[(r + m(c+o))(b + b²/2) + K·r + b·m·c + ans]   -> P
    With ``shared_system_prompt`` off the prompt P is also written: tokens written gains P.
    """
    n_s, n_req, proc, written = TABLE3_INPUT[preset.name]
    L, S = FIG4B_INPUT[preset.name]
    u, ans, c, m = preset.user_tokens, preset.answer_tokens, preset.call_tokens, 1 + preset.multi_call_p
    W, N, PR = written / n_s, n_req / n_s, proc / n_s
    a = W / (L + S) - 1
    K = N / (1 + a)
    b = K - 1
    X = (S - u) * (1 + a) / a
    o = (X - ans) / (b * m) - c
    r = (L - X) / K
    rest = (K * (1 + a) * u + K * (X + u) * (a + a * a / 2)
            + (1 + a) * ((r + m * (c + o)) * (b + b * b / 2) + K * r + b * m * c + ans))
    P = (PR - rest) / (K * (1 + a))
    for nm, v in (("extra turns", a), ("extra rounds", b), ("observation tokens", o), ("reasoning tokens", r),
                  ("system prompt tokens", P)):
        if not v > 0:
            raise ValueError(f"preset {preset.name}: Table 3 arithmetic gives {nm} = {v:.3g} <= 0; "
                             "revise the preset's assumptions")
    return TemporalDerived(a, b, r, o, P)


@dataclass(frozen=True)
class StructuralDerived:
    """Per-workload parameters solved from Table 3 under a :class:`StructuralPreset`."""

    worker_rounds: float  # mean rounds per worker (k̄)
    round_tokens: float  # mean tokens a worker tool round writes (reasoning + calls + observations)
    reasoning_tokens: float  # mean worker reasoning per round
    observation_tokens: float  # mean observation per call
    instruction_tokens: float  # mean worker instruction tokens (from the templates)
    review_instruction_tokens: float
    type_norm: float  # normalizer of the task-type round multipliers
    scope_norm: float
    obs_norm: float  # normalizer of observation weights (rounds-weighted over task types)


def n_tokens(text: str) -> int:
    """Token count of a text: ASSUMPTION ≈ 4/3 tokens per whitespace word (English BPE average)."""
    return max(1, math.ceil(len(text.split()) * 4 / 3))


@lru_cache(maxsize=None)
def derive_structural(preset: StructuralPreset) -> StructuralDerived:
    """Solve worker rounds and per-round tokens from Table 3's requests and tokens per session.

    E[waves] = 1+α, E[workers] = (1+α)(1+β) = n, ρ = reviewer rate, p = P(last wave reviewed)
    = 1 - (1-ρ)e^{-βρ}; lead requests = (1+α) + 1 + p.
      requests / session = lead requests + n·k̄ + ρ·n                               -> k̄
      tokens written / session = lead + n·W_w + ρ·n·(reviewer prompt + W_w + review)  -> W_w
      W_w = prompt + instruction + context + result + q·(ψ + k̄ - 1)                  -> q
    """
    n_s, n_req, _, written = TABLE3_INPUT[preset.name]
    N, W = n_req / n_s, written / n_s
    alpha, beta, rho = preset.extra_waves, preset.extra_wave_size, preset.reviewer_rate
    n_w = (1 + alpha) * (1 + beta)
    p_last = 1 - (1 - rho) * math.exp(-beta * rho)
    lead_req = (1 + alpha) + 1 + p_last
    k = (N - lead_req - rho * n_w) / n_w
    # mean instruction lengths, measured on the templates with a fixed stream
    rng = _Draws(np.random.default_rng(12345))
    samples = [_worker_spec(preset, rng, _Tnorms(1, 1, 1)) for _ in range(400)]
    instr = float(np.mean([n_tokens(s.instruction) for s in samples]))
    rinstr = float(np.mean([n_tokens(_review_instruction(f"w{i:02d}", s.instruction)) for i, s in enumerate(samples)]))
    types = preset.text["task_types"]
    tf = np.array([t["weight"] for t in types], float)
    tf /= tf.sum()
    tm = np.array([t["rounds"] for t in types], float)
    type_norm = float(tf @ tm)
    scope_norm = float(np.dot(preset.scope_freq, preset.scope_rounds))
    tools = preset.text["tools"]
    per_type_obs = []
    for t in types:
        w = np.array(list(t["tools"].values()), float)
        ob = np.array([tools[n]["obs"] for n in t["tools"]], float)
        per_type_obs.append(float(w @ ob / w.sum()))
    obs_norm = float((tf * tm) @ np.array(per_type_obs) / (tf @ tm))
    lead_w = (preset.lead_prompt_tokens + preset.task_tokens + lead_req * preset.lead_reasoning_tokens
              + preset.lead_answer_tokens + n_w * (instr + preset.spawn_call_overhead + preset.result_tokens)
              + rho * n_w * (rinstr + preset.spawn_call_overhead + preset.review_tokens))
    rev_fixed = preset.reviewer_prompt_tokens + rinstr + preset.review_reasoning_tokens + preset.review_tokens
    ww = (W - lead_w - rho * n_w * rev_fixed) / (n_w * (1 + rho))
    psi = preset.reasoning_share
    q = (ww - preset.worker_prompt_tokens - instr - preset.context_tokens - preset.result_tokens) / (psi + k - 1)
    r = psi * q
    m = 1 + preset.multi_call_p
    o = (1 - psi) * q / m - preset.call_tokens
    for nm, v in (("worker rounds - 1", k - 1), ("observation tokens", o), ("round tokens", q)):
        if not v > 0:
            raise ValueError(f"preset {preset.name}: Table 3 arithmetic gives {nm} = {v:.3g} <= 0; "
                             "revise the preset's assumptions")
    return StructuralDerived(k, q, r, o, instr, rinstr, type_norm, scope_norm, obs_norm)


# ------------------------------------------------------------------------------------------------
# Random helpers
# ------------------------------------------------------------------------------------------------


def _session_rng(seed: int, sid: str, stream: int = 0) -> "_Draws":
    """Per-session draws from (seed, stable hash of the session id, stream)."""
    return _Draws(np.random.default_rng([seed, zlib.crc32(sid.encode()), stream]))


class _Draws:
    """Buffered scalar draws from one numpy Generator (scalar numpy calls are slow)."""

    def __init__(self, rng: np.random.Generator, block: int = 256):
        self.rng, self.block = rng, block
        self._z = self._u = np.empty(0)
        self._iz = self._iu = 0

    def z(self) -> float:
        if self._iz >= len(self._z):
            self._z, self._iz = self.rng.standard_normal(self.block).tolist(), 0
        self._iz += 1
        return self._z[self._iz - 1]

    def u(self) -> float:
        if self._iu >= len(self._u):
            self._u, self._iu = self.rng.random(self.block).tolist(), 0
        self._iu += 1
        return self._u[self._iu - 1]

    def ln(self, mean: float, sigma: float) -> float:
        """A log-normal draw with the given mean."""
        return mean * math.exp(sigma * self.z() - sigma * sigma / 2)

    def tok(self, mean: float, sigma: float) -> int:
        return max(1, int(round(self.ln(mean, sigma))))

    def integers(self, n: int) -> int:
        return min(int(self.u() * n), n - 1)

    def pick(self, cum: list[float]) -> int:
        """Index drawn with cumulative probabilities ``cum`` (last entry 1)."""
        return min(bisect.bisect_right(cum, self.u() * cum[-1]), len(cum) - 1)

    def poisson(self, lam: float) -> int:
        return int(self.rng.poisson(lam)) if lam > 0 else 0


def _poisson_ppf(q: float, lam: float) -> int:
    """Smallest n with P(Pois(lam) <= n) >= q."""
    pmf = math.exp(-lam)
    cdf, n = pmf, 0
    while cdf < q and n < 10_000:
        n += 1
        pmf *= lam / n
        cdf += pmf
    return n


_NORMAL = NormalDist()


#: Quasi-random (Kronecker/Weyl) quantiles for a session's size variables.
#: ASSUMPTION (variance control, not a model statement): the turns of a session and the rounds of
#: each turn (temporal), and the waves, wave sizes, worker task types, scopes and round noise
#: (structural; also each worker's round count given its rate, and whether it is reviewed) are
#: drawn at quasi-random quantiles q = frac(offset_d + i·a_d + j·b_d) of their distributions (session i, item j, dimension d, irrational a_d, b_d) instead of i.i.d. uniforms,
#: so that a workload of 58 sessions sums close to its expectation (Table 3) without rescaling.
#: Each quantile depends only on (seed, workload, dimension, session index, item index): the
#: sessions stay independent of each other and of the scale.  Token sizes stay i.i.d. log-normal.
#: Session steps a_d: fractional parts of square roots of primes.  Item steps b_d: irrationals in
#: (0.3, 0.75), so that consecutive workers of one session jump across the unit interval (no
#: monotone trend of a worker's noise with its spawn position inside a session).
_KRON_A = tuple(math.sqrt(p) % 1.0 for p in (2, 3, 5, 7, 11, 13, 17, 19))
_KRON_B = ((math.sqrt(5) - 1) / 2, math.sqrt(2) - 1, math.sqrt(3) - 1, (math.sqrt(13) - 3) / 2,
           2 - math.sqrt(2), math.sqrt(5) - 2 + 0.236067977, math.sqrt(7) - 2, 1 / math.e)


@lru_cache(maxsize=256)
def _kron_offsets(seed: int, workload: str) -> tuple[float, ...]:
    return tuple(np.random.default_rng([seed, zlib.crc32(workload.encode()), 99]).random(len(_KRON_A)).tolist())


def _q(seed: int, workload: str, dim: int, i: int, j: int = 0) -> float:
    """Quasi-random quantile in (0, 1) of dimension ``dim`` for session ``i``, item ``j``."""
    v = (_kron_offsets(seed, workload)[dim] + i * _KRON_A[dim] + j * _KRON_B[dim]) % 1.0
    return min(max(v, 1e-9), 1 - 1e-9)


def _pick_q(q: float, cum: list[float]) -> int:
    return min(bisect.bisect_right(cum, q * cum[-1]), len(cum) - 1)


class _Rows:
    """Column-wise accumulator of request rows (no per-row dict)."""

    COLS = ("session_id", "request_id", "agent_id", "parent_agent_id", "role", "turn", "input_tokens",
            "matched_prefix_tokens", "output_tokens", "reasoning_tokens", "tool_names", "n_observations",
            "observation_tokens", "shared_prefix_tokens")

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


# ------------------------------------------------------------------------------------------------
# Temporal regime
# ------------------------------------------------------------------------------------------------


def _temporal_session(p: TemporalPreset, d: TemporalDerived, sid: str, index: int, seed: int, rows: _Rows) -> None:
    """Simulate one single-agent session (turns of reason-act-observe rounds, reasoning stripped)."""
    rng = _session_rng(seed, sid)
    names, probs, obsw = _tool_table(p.tools)
    cum = np.cumsum(probs).tolist()
    sig = p.token_sigma
    agent = f"{sid}-agent"
    n_turns = 1 + _poisson_ppf(_q(seed, p.name, 0, index), d.extra_turns)
    prompt = rng.tok(d.prompt_tokens, p.prompt_sigma)
    shared = prompt if p.shared_system_prompt else 0
    base = prompt  # context before the current turn's user message
    carried = 0  # stripped content of the previous turn, re-sent at this turn's start
    turn_start_matched = shared  # matched prefix of the turn's first request
    q = 0
    for t in range(n_turns):
        u = rng.tok(p.user_tokens, sig)
        k = 1 + _poisson_ppf(_q(seed, p.name, 1, index, t), d.extra_rounds)
        ctx = base + carried + u  # input of the turn's first request
        matched = turn_start_matched
        first_reasoning_at = ctx  # stripping cuts the context here at the next turn
        stripped = 0
        for i in range(k):
            r = rng.tok(d.reasoning_tokens, sig)
            if i < k - 1:
                nc = 1 + int(rng.u() < p.multi_call_p)
                picks = [rng.pick(cum) for _ in range(nc)]
                calls = sum(rng.tok(p.call_tokens, sig) for _ in range(nc))
                obs = sum(rng.tok(d.observation_tokens * obsw[j], sig) for j in picks)
                out = r + calls
                rows.add(sid, f"{sid}-r{q:03d}", agent, None, "single", t, ctx, matched, out, r,
                         [names[j] for j in picks], nc, obs, shared)
                stripped += calls + obs
                matched = ctx + out
                ctx = ctx + out + obs
            else:
                a = rng.tok(p.answer_tokens, sig)
                rows.add(sid, f"{sid}-r{q:03d}", agent, None, "single", t, ctx, matched, r + a, r, [], 0, 0, shared)
                stripped += a
            q += 1
        # turn end: the harness strips this turn's reasoning; the next request re-sends the rest
        base = first_reasoning_at
        turn_start_matched = first_reasoning_at
        carried = stripped


# ------------------------------------------------------------------------------------------------
# Structural regime
# ------------------------------------------------------------------------------------------------


@dataclass
class _WorkerSpec:
    task_type: str
    scope: int
    instruction: str
    tools: list[str]
    tool_cum: list[float]
    rounds_mult: float


@dataclass(frozen=True)
class _Tnorms:
    type_norm: float
    scope_norm: float
    obs_norm: float


def _fill(template: str, slots: Mapping[str, list[str]], rng: "_Draws") -> str:
    """Fill ``{slot}`` fields of a template from word lists (twice over, for scope phrases)."""

    class _Pick(dict):
        def __missing__(self, key: str) -> str:
            if key in slots:
                return slots[key][rng.integers(len(slots[key]))]
            return "{" + key + "}"

    out = template
    for _ in range(3):
        if "{" not in out:
            break
        out = out.format_map(_Pick())
    return out


def _worker_spec(p: StructuralPreset, rng: "_Draws", norms: _Tnorms,
                 q: tuple[float, float] | None = None) -> _WorkerSpec:
    """Draw a worker's task type, scope and instruction text (what its spawn record shows)."""
    text = p.text
    types = text["task_types"]
    q = q if q is not None else (rng.u(), rng.u())
    tt = types[_pick_q(q[0], np.cumsum([t["weight"] for t in types]).tolist())]
    scope = _pick_q(q[1], np.cumsum(p.scope_freq).tolist())
    level = ("narrow", "moderate", "broad")[scope]
    phrases = text["scope"][level]
    phrase = phrases[rng.integers(len(phrases))]
    tpl = tt["templates"][rng.integers(len(tt["templates"]))]
    slots = dict(text["slots"])
    instruction = _fill(tpl.replace("{scope}", phrase), slots, rng)
    tools = list(tt["tools"])
    w = np.array([tt["tools"][n] for n in tools], float)
    mult = tt["rounds"] / norms.type_norm * p.scope_rounds[scope] / norms.scope_norm
    return _WorkerSpec(tt["name"], scope, instruction, tools, np.cumsum(w / w.sum()).tolist(), mult)


def _review_instruction(worker: str, instruction: str) -> str:
    return (f"Review the finished trace of sub-agent {worker}, which was asked: \"{instruction}\" "
            "Check that the result is correct and complete, point out errors, and answer APPROVE or REVISE.")


def _structural_session(p: StructuralPreset, d: StructuralDerived, sid: str, index: int, seed: int, rows: _Rows,
                        spawns: dict[str, list[Any]], reviewers: bool) -> None:
    """Simulate one lead/worker/reviewer session (waves of concurrent workers, optional reviews)."""
    rng = _session_rng(seed, sid)  # everything but the reviewers
    rrng = _session_rng(seed, sid, 1)  # reviewer decisions and tokens: a separate stream
    sig = p.token_sigma
    norms = _Tnorms(d.type_norm, d.scope_norm, d.obs_norm)
    tool_catalog = p.text["tools"]
    lead = f"{sid}-lead"
    n_waves = 1 + _poisson_ppf(_q(seed, p.name, 0, index), p.extra_waves)
    sizes = [1 + _poisson_ppf(_q(seed, p.name, 1, index, w), p.extra_wave_size) for w in range(n_waves)]
    lead_prompt = rng.tok(p.lead_prompt_tokens, 0.1)
    task = rng.tok(p.task_tokens, sig)
    lead_reason = [rng.tok(p.lead_reasoning_tokens, sig) for _ in range(n_waves + 2)]
    lead_answer = rng.tok(p.lead_answer_tokens, sig)

    # --- workers: fully determined by the main stream -------------------------------------------
    workers: list[dict[str, Any]] = []
    j = 0
    for w_i in range(n_waves):
        for _ in range(int(sizes[w_i])):
            spec = _worker_spec(p, rng, norms, (_q(seed, p.name, 2, index, j), _q(seed, p.name, 3, index, j)))
            ctx_tok = rng.tok(p.context_tokens, sig)
            z = _NORMAL.inv_cdf(_q(seed, p.name, 4, index, j))
            lam = (d.worker_rounds - 1) * spec.rounds_mult * math.exp(p.rounds_sigma * z - p.rounds_sigma ** 2 / 2)
            k = 1 + _poisson_ppf(_q(seed, p.name, 5, index, j), lam)
            aid = f"{sid}-w{j:02d}"
            prompt = rng.tok(p.worker_prompt_tokens, 0.1)
            ctx = prompt + n_tokens(spec.instruction) + ctx_tok
            matched = 0
            reqs = []
            for i in range(k):
                r = rng.tok(d.reasoning_tokens, sig)
                if i < k - 1:
                    nc = 1 + int(rng.u() < p.multi_call_p)
                    names = [spec.tools[rng.pick(spec.tool_cum)] for _ in range(nc)]
                    calls = sum(rng.tok(p.call_tokens, sig) for _ in range(nc))
                    obs = sum(rng.tok(d.observation_tokens * tool_catalog[n]["obs"] / d.obs_norm, sig) for n in names)
                    out = r + calls
                    reqs.append((f"{aid}-r{i:02d}", ctx, matched, out, r, names, nc, obs))
                    matched = ctx + out
                    ctx = ctx + out + obs
                else:
                    res = rng.tok(p.result_tokens, sig)
                    reqs.append((f"{aid}-r{i:02d}", ctx, matched, r + res, r, [], 0, 0))
                    total = ctx + r + res
            workers.append(dict(aid=aid, wave=w_i, spec=spec, ctx_tok=ctx_tok, reqs=reqs, result=res,
                                total=total, ordinal=j))
            j += 1

    # --- reviewer decisions: separate stream, drawn for every worker in both variants ------------
    review = [reviewers and _q(seed, p.name, 6, index, w["ordinal"]) < p.reviewer_rate for w in workers]
    rv_prompt = [rrng.tok(p.reviewer_prompt_tokens, 0.1) for _ in workers]
    rv_reason = [rrng.tok(p.review_reasoning_tokens, sig) for _ in workers]
    rv_out = [rrng.tok(p.review_tokens, sig) for _ in workers]

    by_wave: list[list[dict[str, Any]]] = [[w for w in workers if w["wave"] == i] for i in range(n_waves)]
    ctx, matched = lead_prompt + task, 0
    n_rev = 0
    lead_q = 0

    def emit_worker(w: dict[str, Any], spawn_req: str) -> None:
        spec = w["spec"]
        for (rid, inp, mp, out, r, names, nobs, obs) in w["reqs"]:
            rows.add(sid, rid, w["aid"], lead, "worker", 0, inp, mp, out, r, names, nobs, obs, 0)
        _add_spawn(spawns, sid, w["aid"], lead, "worker", spawn_req, spec.instruction, w["ctx_tok"],
                   spec.tools, w["ordinal"])

    def emit_reviewer(w: dict[str, Any], spawn_req: str) -> int:
        nonlocal n_rev
        i = w["ordinal"]
        aid = f"{sid}-v{i:02d}"
        instr = _review_instruction(w["aid"], w["spec"].instruction)
        inp = rv_prompt[i] + n_tokens(instr) + w["total"]
        rows.add(sid, f"{aid}-r00", aid, lead, "reviewer", 0, inp, 0, rv_reason[i] + rv_out[i], rv_reason[i],
                 [], 0, 0, 0)
        _add_spawn(spawns, sid, aid, lead, "reviewer", spawn_req, instr, int(w["total"]), [], n_rev)
        n_rev += 1
        return rv_out[i]

    for j_req in range(n_waves + 1):
        to_review = [w for w in by_wave[j_req - 1] if review[w["ordinal"]]] if j_req >= 1 else []
        to_spawn = by_wave[j_req] if j_req < n_waves else []
        rid = f"{lead}-r{lead_q:02d}"
        n_spawn = len(to_spawn) + len(to_review)
        if n_spawn == 0:  # nothing left to delegate or review: the lead answers
            out = lead_reason[lead_q] + lead_answer
            rows.add(sid, rid, lead, None, "lead", 0, ctx, matched, out, lead_reason[lead_q], [], 0, 0, 0)
            return
        call_tok = sum(n_tokens(w["spec"].instruction) + p.spawn_call_overhead for w in to_spawn)
        call_tok += sum(n_tokens(_review_instruction(w["aid"], w["spec"].instruction)) + p.spawn_call_overhead
                        for w in to_review)
        out = lead_reason[lead_q] + int(round(call_tok))
        obs_tok = sum(w["result"] for w in to_spawn)
        # the lead request row first, then the sub-agents it spawns (per-agent order is what matters).
        # n_observations = 0: the lead's only observations are its sub-agents' returned results, which the
        # trace contract leaves out (the clock charges one prefill per spawn record, lachesis.clock).
        rows.add(sid, rid, lead, None, "lead", 0, ctx, matched, out, lead_reason[lead_q],
                 [SPAWN_TOOL] * n_spawn, 0, 0, 0)
        row_idx = len(rows.cols["request_id"]) - 1
        for w in to_spawn:
            emit_worker(w, rid)
        for w in to_review:
            obs_tok += emit_reviewer(w, rid)
        rows.cols["observation_tokens"][row_idx] = int(obs_tok)
        matched = ctx + out
        ctx = ctx + out + int(obs_tok)
        lead_q += 1
    # the last wave was reviewed: one more lead request reads the reviews and answers
    rid = f"{lead}-r{lead_q:02d}"
    rows.add(sid, rid, lead, None, "lead", 0, ctx, matched, lead_reason[lead_q] + lead_answer,
             lead_reason[lead_q], [], 0, 0, 0)


def _add_spawn(spawns: dict[str, list[Any]], sid: str, aid: str, parent: str, role: str, req: str,
               instruction: str, context: int, tools: list[str], index: int) -> None:
    for c, v in (("session_id", sid), ("agent_id", aid), ("parent_agent_id", parent), ("role", role),
                 ("spawn_request_id", req), ("instruction", instruction), ("context", int(context)),
                 ("tools", list(tools)), ("model", MODEL_NAME), ("spawn_index", int(index))):
        spawns[c].append(v)


# ------------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------------

SPAWN_COLS = ("session_id", "agent_id", "parent_agent_id", "role", "spawn_request_id", "instruction",
              "context", "tools", "model", "spawn_index")


def n_sessions(workload: str, scale: float) -> int:
    """Sessions of a Table 3 workload at a scale (at least one)."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    return max(1, int(round(scale * TABLE3_INPUT[workload][0])))


def _generate_one(workload: str, scale: float, seed: int, reviewers: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = _Rows()
    spawns: dict[str, list[Any]] = {c: [] for c in SPAWN_COLS}
    n = n_sessions(workload, scale)
    if workload in TEMPORAL_PRESETS:
        p = TEMPORAL_PRESETS[workload]
        d = derive_temporal(p)
        for i in range(n):
            _temporal_session(p, d, f"{workload}-s{i:04d}", i, seed, rows)
    else:
        sp = STRUCTURAL_PRESETS[workload]
        sd = derive_structural(sp)
        for i in range(n):
            _structural_session(sp, sd, f"{workload}-s{i:04d}", i, seed, rows, spawns, reviewers)
        p = sp  # type: ignore[assignment]
    req = rows.frame(workload, p.domain)
    sp_df = pd.DataFrame(spawns) if spawns["agent_id"] else None
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
    """The reference clock of a corpus trace: what :func:`lachesis.clock.clock_for` gives every trace
    :func:`generate` makes (its ``tool_class_of`` knows the corpus' tool names)."""
    return ReferenceClock(tool_class_of=tool_classes(), **overrides)


def table3(traces: Mapping[str, Trace], scale: float = 1.0) -> pd.DataFrame:
    """Table 3 regenerated: per workload ours beside ``scale`` × the paper's, with relative errors.

    The paper's values come from :data:`lachesis.paper.TABLE3` (display copy).  At a scale below 1
    the session count is rounded, so compare per-session columns (``*_per_session_rel_err``) too.
    """
    from lachesis.paper import TABLE3

    rows = []
    for w in TEMPORAL_WORKLOADS + STRUCTURAL_WORKLOADS:
        if w not in traces:
            continue
        r = traces[w].requests
        entry = TABLE3[w]
        ours = dict(sessions=r["session_id"].nunique(), requests=len(r),
                    tokens_processed=int(tokens_processed(r).sum()), tokens_written=int(tokens_written(r).sum()))
        paper = {k: entry[k] for k in ours}
        row: dict[str, Any] = dict(workload=w, label=entry["label"], regime=entry["regime"])
        for k in ours:
            ref = None if paper[k] is None else float(paper[k]) * scale  # type: ignore[arg-type]
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
    (:func:`lachesis.trace.write_trace`, with its tool-class map); returns the traces.  ``out`` is written
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


__all__ = ["WORKLOADS", "TEMPORAL_WORKLOADS", "STRUCTURAL_WORKLOADS", "COMPOSITES", "TemporalPreset",
           "StructuralPreset", "TEMPORAL_PRESETS", "STRUCTURAL_PRESETS", "derive_temporal", "derive_structural",
           "generate", "generate_all", "write_all", "reference_clock", "tool_classes", "table3", "n_sessions"]
