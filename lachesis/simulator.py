"""Decode-node simulator: a closed-loop simpy replay of agent sessions on one GPU (§5.1–§5.2).

The decode node of a prefill–decode disaggregated deployment serves N concurrent sessions per GPU
(attention data-parallel: a GPU holds its own sessions' KV; experts expert-parallel, so every GPU
reads its share of the expert weights each step).  The loop is CLOSED: a finished session is
replaced at once by the next session of the trace (cycling), as in 24×7 operation.

Per request: the user delay before it, the landing of its new KV on the decode node (at the target
tier's write bandwidth, :func:`lachesis.hbf.landing_fn`), decoding of its output tokens at the
current decode-step time (:func:`lachesis.hbf.scalar_step_fn`, the one decode-step model), then its
tool calls and observation prefills (one per tool result and per returned sub-agent result,
:mod:`lachesis.clock`).  Delays are the SAME seeded draws as the reference clock
(``seg.schedule``).  Sub-agents run concurrently, spawned after the parent request that spawns
them; a parent request waits for the children it spawned.  Every KV write and every boundary goes through the tiered
allocator and the placement policy (:mod:`lachesis.allocator`, :mod:`lachesis.policies`).

Cost scales with events, not with decode steps: between two events the set of decoding requests
and their tiers are fixed, so the step time is constant and all decoders advance together in one
vectorized numpy update (:class:`DecodeEngine`).

ASSUMPTION (write timing): a request's KV writes (its new prefix suffix and its output tokens, from
``seg.writes``) are allocated when it is admitted to decode, as an engine reserves a request's
blocks; the output tokens' HBF share is flushed step by step, which prices the step (§5.1).
ASSUMPTION (context tiers): a decoding request reads the tokens of each segment in its context
(``seg.reads``) from the tiers those segments' blocks occupy, measured at admission; context
growth during one request's decode is not re-priced.
ASSUMPTION (TTFT): TTFT = the prefill node's time, provisioned to the reference point
(``clock.ttft_ref_s``, Appendix B), + landing time + the first decode step.
ASSUMPTION (landing): landing does not stall other requests' decode steps (the landing write and
the step flush are not serialized against each other); it delays only its own request.  Stalling
the own rank would lengthen steps by the share of a GPU's time that landings occupy at N* (measured
in ``benchmarks/RESULTS.md``, "Landings at N*"), a node-wide expert-parallel barrier by up to
eight times that share.
ASSUMPTION (steady-state start): in a closed loop a slot is found inside a session with probability
proportional to the session's span, at a uniform phase of it.  Each slot's first session is drawn
that way and fast-forwarded to its phase (its KV up to the phase is written through the allocator,
its decode and delays before the phase are skipped; concurrent sub-agents share one fast-forward
budget), so the node starts near steady state; measurement still starts after a warm-up.
"""

from __future__ import annotations

import math
import numbers
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import simpy

from lachesis import hbf
from lachesis.clairvoyance import Clock, CloseTimes, Recorder
from lachesis.config import Config
from lachesis.kv import AllocationError

SIM_VERSION = "sim-3"
_min_reduce = np.minimum.reduce  # ndarray.min() without the method's Python overhead
NOMINAL_TPOT_S = 0.05  # unit of simulated time, see Plan.mean_session_s


# ------------------------------------------------------------------------------------------------
# Inputs checked before a run
# ------------------------------------------------------------------------------------------------


def check_fits(cfg: Config) -> float:
    """HBF bytes one GPU's weights occupy (§5.2: weights live in HBF); a ValueError if they leave no room for KV."""
    hbf.kv_blocks(cfg.memory, cfg.model, cfg.deployment)
    return float(hbf.weight_storage_bytes_per_gpu(cfg.model, cfg.deployment))


def _check_run_args(n_sessions: Any, seed: Any, duration_s: float, warmup_s: float, n_samples: Any) -> None:
    """One-line errors naming the argument (a float session count would otherwise surface as a bad seed)."""
    def integer(name: str, v: Any, lo: int) -> None:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"simulate: {name} must be an integer >= {lo}, got {v!r}")

    integer("n_sessions", n_sessions, 1)
    integer("seed", seed, 0)
    integer("n_samples", n_samples, 1)
    for name, v in (("duration_s", duration_s), ("warmup_s", warmup_s)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < math.inf:
            raise ValueError(f"simulate: {name} must be a finite number >= 0, got {v!r}")
    if warmup_s > duration_s:
        raise ValueError(f"simulate: warmup_s ({warmup_s!r}) must not exceed duration_s ({duration_s!r})")


# ------------------------------------------------------------------------------------------------
# Plan: the trace and its segments flattened into integer arrays (built once per trace)
# ------------------------------------------------------------------------------------------------


def _csr(keys: np.ndarray, n: int, *cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """Group rows by integer key into CSR (ptr, sorted columns...)."""
    order = np.argsort(keys, kind="stable")
    counts = np.bincount(keys, minlength=n)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    return (ptr,) + tuple(c[order] for c in cols)


@dataclass
class AgentPlan:
    agent_id: str
    role: str
    requests: np.ndarray  # global request indices in reference-clock order
    requests_list: list[int] = field(default_factory=list)
    children: dict[int, list["AgentPlan"]] = field(default_factory=dict)  # request idx -> spawned


@dataclass
class Plan:
    """Integer-indexed replay plan of a trace: per-request costs, writes, reads, closes."""

    n_req: int
    out_tokens: np.ndarray
    t_tools: np.ndarray
    t_obs: np.ndarray
    t_user: np.ndarray
    w_ptr: np.ndarray
    w_seg: np.ndarray
    w_tok: np.ndarray
    r_ptr: np.ndarray
    r_seg: np.ndarray
    r_tok: np.ndarray
    ca_ptr: np.ndarray  # closes at arrival
    ca_seg: np.ndarray
    ce_ptr: np.ndarray  # closes at end of request
    ce_seg: np.ndarray
    seg_ids: np.ndarray  # segment index -> its id in the segment table
    seg_class: np.ndarray
    seg_role: np.ndarray
    seg_tokens: np.ndarray
    seg_reads: np.ndarray  # decode-stage reads per segment (Eq. 3, tokens), from segment recovery
    seg_key: np.ndarray  # ranker key (workers), NaN otherwise
    sessions: list[str]
    roots: dict[str, list[AgentPlan]]
    fingerprint: str  # the trace's (the simulator's random streams derive from it)
    laden_close: str = "last_read"  # see build_plan
    _mean_span: float | None = None
    _lists: dict | None = None
    _spans: dict | None = None

    def lists(self) -> dict:
        """Per-request Python lists for the event loop (numpy scalar indexing is slow per event)."""
        if self._lists is None:
            def split(ptr, col):  # per request, the CSR rows of one column as a Python list
                p, c = ptr.tolist(), col.tolist()
                return [c[p[q]:p[q + 1]] for q in range(self.n_req)]

            r_tok = self.r_tok.astype(float)
            r_seg, r_int, r_ptr = split(self.r_ptr, self.r_seg), split(self.r_ptr, self.r_tok), self.r_ptr.tolist()

            def rd(q):  # segments read, tokens (float64 for the dot product, ints), total tokens (exact: whole numbers)
                a, b = r_ptr[q], r_ptr[q + 1]
                return (r_seg[q], r_tok[a:b], float(sum(r_int[q])), r_int[q]) if b > a else None

            self._lists = dict(
                t_user=self.t_user.tolist(), t_tools=self.t_tools.tolist(), t_obs=self.t_obs.tolist(),
                out=self.out_tokens.tolist(),
                writes=[list(zip(s, t)) for s, t in zip(split(self.w_ptr, self.w_seg), split(self.w_ptr, self.w_tok))],
                reads=[rd(q) for q in range(self.n_req)],
                close_arrival=split(self.ca_ptr, self.ca_seg), close_end=split(self.ce_ptr, self.ce_seg),
                seg_class=[str(x) for x in self.seg_class], seg_role=[str(x) for x in self.seg_role],
                seg_key=[float(x) for x in self.seg_key],
            )
            L = self._lists
            # one tuple per request, in the order the event loop reads it
            L["request"] = list(zip(L["t_user"], L["close_arrival"], L["writes"], L["reads"], L["out"],
                                    L["close_end"], L["t_tools"], L["t_obs"]))
        return self._lists

    def session_span_s(self, session: str, tpot_s: float) -> float:
        """Critical-path duration of one session when every token takes ``tpot_s`` (same delays).  Sub-agents
        before their parents on an explicit stack, so a nesting of any depth has no recursion limit."""
        span: dict[int, float] = {}
        stack = [(a, False) for a in self.roots[session]]
        while stack:
            a, kids_done = stack.pop()
            if not kids_done:
                stack.append((a, True))
                stack += [(c, False) for kids in a.children.values() for c in kids]
                continue
            t = 0.0
            for q in a.requests:
                q = int(q)
                kids = max((span[id(c)] for c in a.children.get(q, [])), default=0.0)
                t += self.t_user[q] + self.out_tokens[q] * tpot_s + max(self.t_tools[q], kids) + self.t_obs[q]
            span[id(a)] = t
        return max(span[id(a)] for a in self.roots[session])

    def session_spans(self, tpot_s: float) -> np.ndarray:
        """:meth:`session_span_s` of every session in ``sessions`` order (cached per TPOT; read-only)."""
        if self._spans is None:
            self._spans = {}
        if tpot_s not in self._spans:
            a = np.array([self.session_span_s(x, tpot_s) for x in self.sessions])
            a.flags.writeable = False
            self._spans[tpot_s] = a
        return self._spans[tpot_s]

    @property
    def mean_session_s(self) -> float:
        """The simulator's unit of simulated time: mean session span at a nominal 50 ms TPOT.

        ASSUMPTION: warm-up and measurement windows are counted in this unit (a session's span at
        a TPOT between the two SLOs), not on the 0.2 s reference clock whose decode time would
        inflate multi-agent sessions several-fold.
        """
        if self._mean_span is None:
            self._mean_span = float(np.mean(self.session_spans(NOMINAL_TPOT_S)))
        return self._mean_span


def trace_row_hashes(trace: Any) -> list[bytes]:
    """pandas' per-row hashes of a trace's requests and (if any) spawns, as text: what its digests hash."""
    tables = [trace.requests] + ([trace.spawns] if trace.spawns is not None and len(trace.spawns) else [])
    return [pd.util.hash_pandas_object(t.astype(str), index=False).to_numpy().tobytes() for t in tables]


def trace_fingerprint(trace: Any) -> str:
    """Stable hash of a trace's requests and spawns (for the sweep cache)."""
    h = 0
    for b in trace_row_hashes(trace):
        h = zlib.crc32(b, h)
    return f"{h:08x}-{len(trace.requests)}"


LADEN_CLOSES = ("last_read", "arrival")


def build_plan(trace: Any, segments: Any, keys: pd.Series | None = None, laden_close: str = "last_read") -> Plan:
    """Flatten a trace and its recovered segments into the arrays the simulator replays.

    ``laden_close``: when a reasoning-laden segment's turn-end boundary is reported to the allocator.
    "last_read" (default): at the end of its last reader, the turn's final response, which is the
    turn end as the harness knows it when it returns the answer.  Eq. 1 ends a segment's lifetime at
    its last read; §4: the free "fires at a context boundary, not after the inactivity that a recency
    policy waits for"; §5.5: HBM holds "every reasoning-laden context segment the deployment has live
    at one time".  ASSUMPTION (sensitivity knob) "arrival": at its ``closing_request``'s arrival,
    i.e. after the next user message's delay (the segment table's literal boundary, DESIGN §3).
    """
    if laden_close not in LADEN_CLOSES:
        raise ValueError(f"laden_close must be one of {LADEN_CLOSES}, got {laden_close!r}")
    req = trace.requests
    sched = segments.schedule.set_index("request_id")
    missing = set(req["request_id"]) - set(sched.index)
    if missing:
        raise ValueError(f"segments.schedule: field 'request_id': no schedule row for requests {sorted(missing)[:5]}")
    r = req.set_index("request_id").join(sched[["t_start_s", "t_tools_s", "t_obs_s", "t_user_s"]])
    r = r.reset_index()
    r = r.sort_values(["session_id", "t_start_s"], kind="stable").reset_index(drop=True)
    rid = {x: i for i, x in enumerate(r["request_id"])}
    n = len(r)
    sg = segments.segments.reset_index(drop=True)
    sid = {x: i for i, x in enumerate(sg["segment_id"])}

    def idx(series: pd.Series, table: dict, what: str) -> np.ndarray:
        out = series.map(table)
        if out.isna().any():
            bad = series[out.isna()].iloc[0]
            raise ValueError(f"segments: field {what!r}: unknown id {bad!r}")
        return out.to_numpy(np.int64)

    w = segments.writes
    w_ptr, w_seg, w_tok = _csr(idx(w["request_id"], rid, "writes.request_id"), n,
                               idx(w["segment_id"], sid, "writes.segment_id"), w["tokens"].to_numpy(np.int64))
    rd = segments.reads
    r_ptr, r_seg, r_tok = _csr(idx(rd["request_id"], rid, "reads.request_id"), n,
                               idx(rd["segment_id"], sid, "reads.segment_id"), rd["tokens"].to_numpy(np.int64))
    closing = sg["closing_request"]
    has_close = closing.notna() & closing.map(lambda x: x in rid)
    if laden_close == "last_read":
        has_close &= ~sg["seg_class"].eq("reasoning_laden")
    ca_req = idx(closing[has_close], rid, "segments.closing_request")
    ca_ptr, ca_seg = _csr(ca_req, n, np.flatnonzero(has_close.to_numpy()))
    ce_mask = ~has_close.to_numpy()
    ce_req = idx(sg.loc[ce_mask, "last_request"], rid, "segments.last_request")
    ce_ptr, ce_seg = _csr(ce_req, n, np.flatnonzero(ce_mask))
    keys = keys if keys is not None else pd.Series(dtype=float)
    seg_key = sg["agent_id"].map(keys).to_numpy(float) if len(keys) else np.full(len(sg), np.nan)

    # Agents (groups of (session, agent) in order of first appearance; a group's rows ascending) and
    # the spawn structure, read from the trace's validated spawn tree (trace rows -> rows of ``r``).
    group = r.groupby(["session_id", "agent_id"], sort=False).ngroup().to_numpy()
    n_groups = int(group.max()) + 1 if n else 0
    rows_of = np.argsort(group, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=n_groups))])
    agent_of, role_of = r["agent_id"].tolist(), r["role"].tolist()
    agents: dict[str, AgentPlan] = {}
    for k in range(n_groups):
        rows = rows_of[bounds[k]:bounds[k + 1]]
        first = int(rows[0])
        agents[agent_of[first]] = AgentPlan(str(agent_of[first]), str(role_of[first]), rows, rows.tolist())
    tree = trace.spawn_tree()
    trace_rid = req["request_id"].tolist()
    for p, kids in tree.children.items():
        q = rid[trace_rid[p]]
        agents[agent_of[q]].children[q] = [agents[k] for k in kids]
    roots = {str(s): [agents[tree.roots[s]]] for s in pd.unique(r["session_id"])}

    return Plan(
        n_req=n, out_tokens=r["output_tokens"].to_numpy(np.int64),
        t_tools=r["t_tools_s"].to_numpy(float), t_obs=r["t_obs_s"].to_numpy(float), t_user=r["t_user_s"].to_numpy(float),
        w_ptr=w_ptr, w_seg=w_seg, w_tok=w_tok, r_ptr=r_ptr, r_seg=r_seg, r_tok=r_tok,
        ca_ptr=ca_ptr, ca_seg=ca_seg, ce_ptr=ce_ptr, ce_seg=ce_seg,
        seg_ids=sg["segment_id"].to_numpy(object), seg_class=sg["seg_class"].to_numpy(object),
        seg_role=sg["role"].to_numpy(object) if "role" in sg else sg["seg_class"].to_numpy(object),
        seg_tokens=sg["tokens_written"].to_numpy(np.int64),
        seg_reads=np.rint(sg["read_tokens"].to_numpy(float)).astype(np.int64),
        seg_key=seg_key, sessions=[str(s) for s in roots], roots=roots,
        fingerprint=trace_fingerprint(trace), laden_close=laden_close,
    )


# ------------------------------------------------------------------------------------------------
# Decode engine: all decoders advance together between events
# ------------------------------------------------------------------------------------------------


class DecodeEngine:
    """Continuous-batching decode on an expert-parallel group of ``ranks`` GPUs stepping in lockstep;
    one vectorized update per join/finish event.

    Between two events the batches and their bytes are fixed, so the step time is constant and every
    decoder of every rank advances by (elapsed / step) tokens in one numpy update.  Remaining tokens of
    idle slots are +inf, so ``rem.min()`` is the next finisher without masking; each rank's roofline
    inputs (batch, KV bytes per tier, flush bytes, HBM write bytes) are kept as running sums.

    One rank prices its step with ``step_fn(batch, kv_hbm, kv_hbf, flush, hbm_write)``.  A group prices
    it with ``group`` (:class:`lachesis.hbf.GroupStep`: the slowest rank's own operators and flush, plus
    the routed experts at the group's mean batch); a ``step_fn`` given for a group prices each rank's own
    part, with no group-wide term.  :meth:`stall` pauses the whole group while a rank's device lands KV.
    """

    def __init__(self, env: simpy.Environment, step_fn: Callable[..., float] | None = None,
                 record_from: float = 0.0, capacity: int = 256, ranks: int = 1, group: Any = None):
        self.env, self.step_fn, self.record_from = env, step_fn, record_from
        self.ranks = int(ranks)
        if self.ranks > 1:
            self._rank_fn = step_fn if step_fn is not None else group.rank
            self._experts_fn = (lambda b: 0.0) if step_fn is not None else group.experts
        self.rem = np.full(capacity, np.inf)
        self.rows: list[tuple | None] = [None] * capacity  # (kv_hbm, kv_hbf, hbf flush, hbm write) per step
        self.slot_rank = [0] * capacity
        # per rank: Python floats, the same IEEE sums as a numpy vector, cheaper per event
        self.rank_sums = [[0.0, 0.0, 0.0, 0.0] for _ in range(self.ranks)]
        self.sums = self.rank_sums[0]
        self.rank_n = [0] * self.ranks
        self.rank_time = [0.0] * self.ranks
        self._dirty: set[int] = set()
        self.n = 0
        self.events: list[simpy.Event | None] = [None] * capacity
        self.free_slots = list(range(capacity - 1, -1, -1))
        self.t_last = 0.0
        self.tau = 0.0
        self._timer: simpy.Event | None = None  # the pending finish timer; earlier ones are stale
        self.tpot: list[float] = []
        self.tpot_w: list[float] = []
        self.tpot_t: list[float] = []  # end time of each recorded interval (windows filter on it)
        self.max_batch = 0
        self._args: tuple = ()  # the step inputs behind ``tau`` (batch aside; one rank)
        self.busy = [0.0] * self.ranks  # when each rank's device finishes the landings queued on it
        self.pause_end = 0.0  # the group decodes nothing before this time (a rank is landing KV)
        self._paused = 0.0  # paused seconds not yet charged to a recorded step
        self.stalled_s = 0.0  # seconds the group spent paused with decoders waiting, after record_from

    def _grow(self) -> None:
        n = len(self.rem)
        self.rem = np.concatenate([self.rem, np.full(n, np.inf)])
        self.rows += [None] * n
        self.events += [None] * n
        self.slot_rank += [0] * n
        self.free_slots = list(range(2 * n - 1, n - 1, -1)) + self.free_slots

    def _advance(self) -> None:
        now = self.env.now
        t_last = self.t_last
        start = t_last if self.pause_end <= t_last else min(self.pause_end, now)  # decoding resumes here
        dt = now - start
        tau = self.tau
        if tau > 0 and self.n:
            if start > t_last:  # a pause: its time lengthens the step it falls in, for every decoder
                self._paused += start - t_last
                if now > self.record_from:
                    self.stalled_s += start - t_last
            if dt > 0:
                steps = dt / tau
                self.rem -= steps
                if now > self.record_from:
                    if self._paused:
                        self.tpot.append(tau + self._paused)
                        self.tpot_w.append(float(self.n))
                        self.tpot_t.append(now)
                    self.tpot.append(tau)
                    self.tpot_w.append(steps * self.n)
                    self.tpot_t.append(now)
                self._paused = 0.0
        self.t_last = now

    def _step_time(self) -> float:
        """The group's step at the current batches (one rank: its step function on its sums)."""
        if self.ranks == 1:
            h, f, fl, hw = self.sums
            # max(x, 0.0) spelled out (the same value, NaN and -0.0 included): float drift is clamped at zero
            args = self._args = (0.0 if h < 0.0 else h, 0.0 if f < 0.0 else f, 0.0 if fl < 0.0 else fl,
                                 0.0 if hw < 0.0 else hw)
            return self.step_fn(self.n, *args)
        rank_fn, times = self._rank_fn, self.rank_time
        for r in self._dirty:
            nr = self.rank_n[r]
            if nr:
                h, f, fl, hw = self.rank_sums[r]
                times[r] = rank_fn(float(nr), 0.0 if h < 0.0 else h, 0.0 if f < 0.0 else f,
                                   0.0 if fl < 0.0 else fl, 0.0 if hw < 0.0 else hw)
            else:
                self.rank_sums[r][:] = (0.0, 0.0, 0.0, 0.0)  # clear float drift
                times[r] = 0.0
        self._dirty.clear()
        return max(times) + self._experts_fn(self.n / self.ranks)

    def _reschedule(self) -> None:
        n = self.n
        if not n:
            self.tau = 0.0
            for s in self.rank_sums:
                s[:] = (0.0, 0.0, 0.0, 0.0)  # clear float drift
            self.rank_time = [0.0] * self.ranks
            self._dirty.clear()
            self._timer = None
            return
        batch = n if self.ranks == 1 else max(self.rank_n)
        if batch > self.max_batch:
            self.max_batch = batch
        tau = self.tau = self._step_time()
        first = float(_min_reduce(self.rem))
        delay = (0.0 if first < 0.0 else first) * tau
        if self.pause_end > self.env.now:
            delay += self.pause_end - self.env.now
        timer = self._timer = simpy.events.Timeout(self.env, delay)
        timer.callbacks.append(self._on_timer)

    def _on_timer(self, timer: simpy.Event) -> None:
        if timer is not self._timer:  # superseded by a later join or finish
            return
        self._advance()
        done = (self.rem <= 1e-7).nonzero()[0]
        rows, slot_rank, rank_sums, rank_n, dirty = self.rows, self.slot_rank, self.rank_sums, self.rank_n, self._dirty
        for i in done.tolist():
            self.rem[i] = np.inf
            row = rows[i]
            rows[i] = None
            r = slot_rank[i]
            sums = rank_sums[r]
            sums[0] -= row[0]
            sums[1] -= row[1]
            sums[2] -= row[2]
            sums[3] -= row[3]
            rank_n[r] -= 1
            dirty.add(r)
            self.n -= 1
            ev = self.events[i]
            self.events[i] = None
            self.free_slots.append(i)
            ev.succeed()
        self._reschedule()

    def stall(self, rank: int, seconds: float) -> float:
        """Land KV on ``rank`` for ``seconds`` of its device: landings on one rank queue, the group decodes
        nothing while any rank lands (the next MoE layer waits for it).  Returns the seconds until this
        landing is done."""
        self._advance()
        now = self.env.now
        end = self.busy[rank] = max(self.busy[rank], now) + seconds
        if end > self.pause_end:
            self.pause_end = end
            if self.n:
                self._reschedule()
        return end - now

    def kv_read_bytes(self) -> float:
        """KV bytes one decode step reads now, summed over the group's ranks."""
        return sum(max(s[0], 0.0) + max(s[1], 0.0) for s in self.rank_sums)

    def join_measured(self, tokens: float, hbm_bytes: float, hbf_bytes: float, flush_bytes: float,
                      hbm_write_bytes: float = 0.0, rank: int = 0) -> tuple[simpy.Event, float]:
        """:meth:`join`, and the step time with this decoder added to the batch as it stood (its first step,
        for TTFT): the new step time when the step inputs after joining equal those, so a request pays one
        step-model call, not two."""
        if self.ranks > 1:
            ev = self.join(tokens, hbm_bytes, hbf_bytes, flush_bytes, hbm_write_bytes, rank)
            return ev, self.tau
        h, f, fl, hw = self.sums
        first = ((0.0 if h < 0.0 else h) + hbm_bytes, (0.0 if f < 0.0 else f) + hbf_bytes,
                 (0.0 if fl < 0.0 else fl) + flush_bytes, (0.0 if hw < 0.0 else hw) + hbm_write_bytes)
        n = self.n + 1
        ev = self.join(tokens, hbm_bytes, hbf_bytes, flush_bytes, hbm_write_bytes)
        if self.n == n and self._args == first:
            return ev, self.tau
        return ev, self.step_fn(n, *first)

    def join(self, tokens: float, hbm_bytes: float, hbf_bytes: float, flush_bytes: float,
             hbm_write_bytes: float = 0.0, rank: int = 0) -> simpy.Event:
        """Start decoding ``tokens`` output tokens on ``rank``; the event fires when the last one is generated."""
        ev = simpy.Event(self.env)
        if tokens <= 0:
            ev.succeed()
            return ev
        self._advance()
        if not self.free_slots:
            self._grow()
        i = self.free_slots.pop()
        self.rem[i] = tokens
        row = (float(hbm_bytes), float(hbf_bytes), float(flush_bytes), float(hbm_write_bytes))
        self.rows[i] = row
        self.slot_rank[i] = rank
        s = self.rank_sums[rank]
        s[0] += row[0]
        s[1] += row[1]
        s[2] += row[2]
        s[3] += row[3]
        self.rank_n[rank] += 1
        self._dirty.add(rank)
        self.n += 1
        self.events[i] = ev
        self._reschedule()
        return ev


# ------------------------------------------------------------------------------------------------
# Memory: the allocator + policy seen through the calls the simulator needs
# ------------------------------------------------------------------------------------------------


class OutOfMemory(RuntimeError):
    """Live KV exceeded HBM + HBF (minus weights): the load is infeasible."""


class _SegmentIds(dict):
    """Segment -> table id ("inst:segment") of one session instance, formatted on first use."""

    def __init__(self, inst: int) -> None:
        super().__init__()
        self.inst, self.session = inst, str(inst)

    def __missing__(self, s: int) -> str:
        sid = self[s] = f"{self.inst}:{s}"
        return sid


#: segment classes whose KV dies within a turn or at a sub-agent's return (§3.3–§3.4)
SHORT_LIVED = ("reasoning_laden", "worker", "reviewer")
#: tokens per pseudo-segment of an aged start (its LRU granularity)
AGED_CHUNK_TOKENS = 1 << 14


class Memory:
    """The segment table + tiered allocator as the simulator drives them (one per GPU).

    ``clock`` (the oracle's close times) and ``recorder`` (a run's own closes) are shared by the ranks
    of a group: session instances are numbered across the group."""

    def __init__(self, plan: Plan, cfg: Config, policy: Any, clock: Clock | None = None,
                 recorder: Recorder | None = None):
        from lachesis.allocator import SegmentTable, TieredAllocator
        from lachesis.policies import as_policy

        self.plan = plan
        self.policy = as_policy(policy)
        self.bpt = int(cfg.model.kv_bytes_per_token)
        bt = int(cfg.deployment.block_tokens)
        self.alloc = TieredAllocator(*hbf.kv_blocks(cfg.memory, cfg.model, cfg.deployment))
        self.table = SegmentTable(self.alloc, self.policy, bt, self.bpt)
        self._marks: dict[int, dict[str, np.ndarray]] = {}  # window -> per-class totals at its warm-up end
        lists = plan.lists()  # per-segment class/role/key as Python objects (no numpy scalars per event)
        self._cls, self._role, self._key = lists["seg_class"], lists["seg_role"], lists["seg_key"]
        self._plan_classes = set(self._cls)
        self._final = plan.seg_tokens.tolist()  # a segment's total tokens (the oracle's clairvoyant size)
        self._reads = plan.seg_reads.tolist()  # a segment's decode-stage reads (Eq. 3), reported at its boundary
        self.events: list[tuple] | None = None  # set to [] to record the allocator event stream
        self.clock, self.recorder = clock, recorder
        self._ids: dict[int, dict[int, str]] = {}  # session instance -> segment -> its id in the table
        self._live_tok: dict[str, int] = {}  # live (not yet closed) tokens per class
        self._seg_tok: dict[int, dict[int, int]] = {}  # session instance -> segment -> its live tokens
        self._base = (0, 0)  # (HBM, HBF) tokens of an aged start, not part of any window's writes
        self._base_class: dict[str, np.ndarray] = {}

    def age(self, rng: np.random.Generator) -> None:
        """Start as a long-running node's cache does under a boundary-unaware policy: every block holds a
        dead, cached segment, and their LRU order mixes the tiers at random (once HBM-first has turned its
        cache over, blocks of both tiers pass through one LRU queue alike).  These writes precede every
        window: they are not KV of the trace, so no measurement counts them."""
        table, alloc = self.table, self.alloc
        chunk = AGED_CHUNK_TOKENS
        blocks = alloc.hbm_blocks + alloc.hbf_blocks
        n = -(-blocks * table.block_tokens // chunk)
        for k in range(n):
            left = (alloc.free_blocks(0) + alloc.free_blocks(1)) * table.block_tokens
            table.add_write(f"aged:{k}", min(chunk, left), 0.0, seg_class="reasoning_stripped", session_id="aged")
        for k, order in enumerate(rng.permutation(n).tolist()):
            table.close(f"aged:{k}", 0.0, last_use=-1.0 - order)
        self._base = table.tokens_written()
        self._base_class = {c: v.copy() for c, v in table.totals.tokens_by_class.items()}

    def live_tokens(self) -> dict[str, int]:
        """Tokens of segments written and not yet closed, per class (what the deployment holds live)."""
        return self._live_tok

    def session_start(self, inst: int, session: str, t0: float) -> None:
        """Instance ``inst`` replays ``session`` from ``t0`` (its virtual start, for a fast-forwarded one)."""
        if self.clock is not None:
            self.clock.started(inst, session, t0)
        if self.recorder is not None:
            self.recorder.started(inst, session, t0)

    def _sids(self, inst: int) -> dict[int, str]:
        """The instance's segment ids ("inst:segment"), formatted once per segment rather than per call."""
        sids = self._ids.get(inst)
        if sids is None:
            sids = self._ids[inst] = _SegmentIds(inst)
        return sids

    def write(self, inst: int, s: int, tokens: int, now: float) -> tuple[int, int]:
        """Write ``tokens`` of segment ``s`` (session instance ``inst``); returns (HBM, HBF) tokens placed."""
        h0, f0 = self.table.tokens_written()
        self._write(self._sids(inst), inst, s, tokens, now)
        h1, f1 = self.table.tokens_written()
        return h1 - h0, f1 - f0

    def _write(self, sids: dict[int, str], inst: int, s: int, tokens: int, now: float) -> None:
        sid, cls, key = sids[s], self._cls[s], self._key[s]
        seg_tok = self._seg_tok.get(inst)
        if seg_tok is None:
            seg_tok = self._seg_tok[inst] = {}
        seg_tok[s] = seg_tok.get(s, 0) + tokens
        self._live_tok[cls] = self._live_tok.get(cls, 0) + tokens
        if self.events is not None:
            self.events.append((now, "write", sid, cls, int(tokens), str(inst), key))
        try:
            self.table.add_write(sid, tokens, now, seg_class=cls, session_id=sids.session, role=self._role[s],
                                 rank_key=key, final_tokens=self._final[s],
                                 close_s=math.nan if self.clock is None else self.clock.close_s(inst, s))
        except AllocationError as exc:
            raise OutOfMemory(str(exc)) from exc

    def write_request(self, inst: int, writes: list[tuple[int, int]], now: float) -> tuple[int, int]:
        """:meth:`write` of each (segment, tokens) of one request, in order; returns the (HBM, HBF) tokens placed."""
        table = self.table
        h0, f0 = table.tokens_written()
        sids = self._sids(inst)
        for s, t in writes:
            self._write(sids, inst, s, t, now)
        h1, f1 = table.tokens_written()
        return h1 - h0, f1 - f0

    def close(self, inst: int, s: int, now: float) -> None:
        """Report segment ``s``'s boundary (frees, or caches under a boundary-unaware policy)."""
        sid = self._sids(inst)[s]
        if self.table.is_live(sid):
            # Every read of a segment happens before its boundary, so its Eq. 3 reads are reported there
            # (only closed segments' realized ρR/W inform a placement).
            self.table.add_reads(sid, self._reads[s])
            if self.events is not None:
                self.events.append((now, "read", sid, self._reads[s]))
                self.events.append((now, "close", sid))
            if self.recorder is not None:
                self.recorder.closed(inst, s, now)
            self.table.close(sid, now)
            self._forget(inst, s)

    def _forget(self, inst: int, s: int) -> None:
        """Segment ``s`` of instance ``inst`` is no longer live: its tokens leave the live count."""
        tok = self._seg_tok.get(inst, {}).pop(s, 0)
        if tok:
            self._live_tok[self._cls[s]] -= tok

    def session_end(self, inst: int, now: float) -> None:
        """Close whatever the session still holds (nothing, when every boundary was reported)."""
        if self.events is not None:
            self.events.append((now, "session_end", str(inst)))
        self.table.end_session(str(inst), now)
        self._ids.pop(inst, None)
        for s in list(self._seg_tok.get(inst, ())):
            self._forget(inst, s)
        self._seg_tok.pop(inst, None)

    def hbm_fraction(self, inst: int, segs: Sequence[int]) -> np.ndarray:
        """Fraction of each segment's blocks that sit in HBM (0 for a segment holding no blocks)."""
        sids = self._sids(inst)
        return self.table.hbm_fraction([sids[s] for s in segs])

    def hbm_tokens(self, inst: int, segs: Sequence[int], tokens: np.ndarray, tokens_int: Sequence[int]) -> float:
        """Σ tokens × HBM fraction over segments (a request's context in HBM, in tokens): ``tokens @
        fractions``.  When every segment lies wholly in one tier the products are whole numbers, so the
        float dot product is exact and equals this integer sum, which is taken instead."""
        sids = self._sids(inst)
        ids = [sids[s] for s in segs]
        acc = self.table.hbm_share(ids, tokens_int)
        return float(acc) if acc is not None else float(tokens @ self.table.hbm_fraction(ids))

    def snapshot(self) -> tuple[float, ...]:
        """(live HBM, live HBF, cached HBM, cached HBF, cumulative HBM written, cumulative HBF written) bytes."""
        from lachesis.allocator import Tier

        bb = self.bpt * self.table.block_tokens
        live_h = (self.alloc.used_blocks(Tier.HBM) - self.table.cached(Tier.HBM)) * bb
        live_f = (self.alloc.used_blocks(Tier.HBF) - self.table.cached(Tier.HBF)) * bb
        tok, base = self.table.tokens_written(), self._base
        return (float(live_h), float(live_f), float(self.table.cached(Tier.HBM) * bb),
                float(self.table.cached(Tier.HBF) * bb), float((tok[0] - base[0]) * self.bpt),
                float((tok[1] - base[1]) * self.bpt))

    def mark(self, window: int = 0) -> None:
        """Remember the per-class totals now (start of ``window``'s measurement)."""
        self._marks[window] = {c: v.copy() for c, v in self.table.totals.tokens_by_class.items()}

    def bytes_by_class_tier(self, window: int = 0) -> dict[str, dict[str, float]]:
        """Bytes written per class and tier since :meth:`mark` of ``window`` (since the start if unmarked)."""
        out = {}
        mark = self._marks.get(window, self._base_class)
        for c, v in self.table.totals.tokens_by_class.items():
            if c not in self._plan_classes:  # an aged start's pseudo-segments
                continue
            d = v - mark.get(c, 0)
            out[c] = {"hbm": float(d[0] * self.bpt), "hbf": float(d[1] * self.bpt)}
        return out


# ------------------------------------------------------------------------------------------------
# One run
# ------------------------------------------------------------------------------------------------


@dataclass
class SimResult:
    """What one closed-loop run measured (per GPU)."""

    n_sessions: int
    policy: str
    sim_s: float
    warmup_s: float
    p99_tpot_s: float
    mean_tpot_s: float
    p99_ttft_s: float
    oom: bool
    requests_done: int
    sessions_done: int
    max_batch: int
    hbf_write_rate: float  # settled HBF KV write rate, bytes/s
    settled: bool
    settled_at_s: float
    lifetime_years: float
    bytes_by_tier: dict[str, float]  # written in the measurement window
    bytes_by_class_tier: dict[str, dict[str, float]]
    live_peak: dict[str, float]  # bytes
    live_mean: dict[str, float]
    ranks: int = 1  # GPUs of the expert-parallel group simulated (per-GPU figures are their mean)
    in_regime: bool = True  # a boundary-unaware cache evicted in the window (its steady state)
    evicted_blocks: int = 0  # blocks evicted from the cache in the window, all ranks
    stalled_s: float = 0.0  # seconds the group's decode waited for landings after the first warm-up
    events_bytes_by_tier: dict[str, float] = field(default_factory=dict)  # the recorded rank's, in the window
    kv_read_per_step_bytes: float = float("nan")  # per GPU, time-averaged over the window
    live_short_kv_bytes: float = float("nan")  # per GPU, time-averaged: reasoning-laden, worker, reviewer
    hbm_over_live_short: float = float("nan")  # one GPU's HBM capacity / live_short_kv_bytes
    live_kv_by_class: dict[str, float] = field(default_factory=dict)  # per GPU, time-averaged
    series: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    events: list | None = field(default=None, repr=False)  # allocator event stream (record_events=True)
    totals: Any = field(default=None, repr=False)  # the segment table's WriteTotals over the whole run
    closes: CloseTimes | None = field(default=None, repr=False)  # segment closes so far (record_closes=True)

    def meets(self, slo: Any) -> bool:
        """Feasible at this SLO: p99 TPOT and p99 TTFT within bounds and memory never ran out.

        A NaN percentile (no decode step finished, or no request admitted, in the window) fails: a run
        that served nothing has not shown that it meets the SLO.
        """
        return (not self.oom) and bool(self.p99_tpot_s <= slo.p99_tpot_s) and bool(self.p99_ttft_s <= slo.ttft_s)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("series", "events", "totals", "closes")}
        return d


def weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    """Quantile of x with weights w (token-weighted TPOT percentile)."""
    x, w = np.asarray(x, float), np.asarray(w, float)
    if len(x) == 0 or w.sum() <= 0:
        return float("nan")
    o = np.argsort(x)
    c = np.cumsum(w[o])
    return float(x[o][np.searchsorted(c, q * c[-1], side="left").clip(0, len(x) - 1)])


@dataclass(frozen=True)
class Window:
    """One observation of a run: simulate until ``duration_s``, measure after ``warmup_s``, take ``n_samples`` snapshots."""

    duration_s: float
    warmup_s: float
    n_samples: int = 200


def simulate(plan: Plan, cfg: Config, policy: Any, n_sessions: int, seed: int = 0,
             duration_s: float | None = None, warmup_s: float | None = None,
             n_samples: int = 200, step_fn: Callable[..., float] | None = None,
             land: bool = True, record_events: bool = False, clairvoyance: CloseTimes | None = None,
             record_closes: bool = False) -> SimResult:
    """Replay ``n_sessions`` concurrent sessions (closed loop) on one GPU for ``duration_s``.

    ``step_fn(batch, kv_hbm_bytes, kv_hbf_bytes, flush_bytes, hbm_write_bytes) -> s`` replaces
    :func:`lachesis.hbf.scalar_step_fn`'s decode step (e.g. a toy step in tests); ``land=False`` skips KV
    landing delays.  ``record_closes`` keeps every segment close (``SimResult.closes``); ``clairvoyance``
    (a baseline run's closes) gives each segment its close time at its first write, for the oracle
    (:mod:`lachesis.clairvoyance`).
    """
    mean_s = plan.mean_session_s
    warmup_s = mean_s if warmup_s is None else warmup_s
    duration_s = warmup_s + 3 * mean_s if duration_s is None else duration_s
    runs = simulate_windows(plan, cfg, policy, n_sessions, [Window(duration_s, warmup_s, n_samples)], seed=seed,
                            step_fn=step_fn, land=land, record_events=record_events, clairvoyance=clairvoyance,
                            record_closes=record_closes)
    return next(runs)


def simulate_windows(plan: Plan, cfg: Config, policy: Any, n_sessions: int, windows: Sequence[Window],
                     seed: int = 0, step_fn: Callable[..., float] | None = None,
                     land: bool = True, record_events: bool = False, clairvoyance: CloseTimes | None = None,
                     record_closes: bool = False) -> Iterator[SimResult]:
    """One run observed through several windows of increasing length; yields one result per window.

    The run pauses after each window's result, so a caller that needs the longer windows only
    sometimes (the capacity search's candidate at N*) continues it instead of replaying from the
    start.  Each window's result equals :func:`simulate` with that window's settings alone: the
    extra markers and samplers only read state, and simpy keeps the other events' order.
    """
    windows = list(windows)
    if not windows or any(b.duration_s < a.duration_s for a, b in zip(windows, windows[1:])):
        raise ValueError("simulate_windows: need at least one window, in non-decreasing duration_s")
    for w in windows:
        _check_run_args(n_sessions, seed, w.duration_s, w.warmup_s, w.n_samples)
    run = _Run(plan, cfg, policy, n_sessions, seed, min(w.warmup_s for w in windows), step_fn, land,
               record_events, clairvoyance, record_closes)
    observers = run.start(windows)
    stops = [_stop_at(run.env, w.duration_s) for w in windows]
    for obs, stop in zip(observers, stops):
        run.run_until(stop)
        obs.samples.append(run.sample())
        yield obs.result(run)


@dataclass
class _Counts:
    """What a run has done so far (the results read it; the slots and agents advance it)."""

    drawn: int = 0  # sessions taken from the cycling order
    instances: int = 0  # session instances started (each slot's first one included)
    requests: int = 0  # requests finished
    sessions: int = 0  # sessions finished
    live: int = 0  # sessions in progress
    oom: bool = False  # memory ran out (the run stopped there)


class _Run:
    """One closed-loop run on one GPU: the simpy environment, the memory, the decode engine and the
    explicit state its processes share (counts, TTFT samples, fast-forward budgets).

    Its processes are one :meth:`slot` per concurrent session, which replays sessions one after
    another, each through :meth:`agent` processes (one per agent, sub-agents concurrent).
    """

    def __init__(self, plan: Plan, cfg: Config, policy: Any, n_sessions: int, seed: int, first_warmup: float,
                 step_fn: Callable[..., float] | None, land: bool, record_events: bool,
                 clairvoyance: CloseTimes | None, record_closes: bool) -> None:
        self.plan, self.cfg, self.n_sessions = plan, cfg, n_sessions
        dep = cfg.deployment
        self.ranks = dep.group_ranks
        self.policy_name = getattr(policy, "name", str(policy))
        self.env = simpy.Environment()
        self.bpt = float(cfg.model.kv_bytes_per_token)
        clock = None if clairvoyance is None else Clock(clairvoyance, plan.sessions, plan.fingerprint)
        recorder = Recorder(plan.sessions, plan.fingerprint) if record_closes else None
        self.mems = [Memory(plan, cfg, policy, clock, recorder) for _ in range(self.ranks)]
        self.mem = self.mems[0]  # the rank whose event stream is recorded (for the offline bound)
        if record_events:
            self.mem.events = []
        if self.ranks == 1:
            step_fn = step_fn or hbf.scalar_step_fn(cfg.memory, cfg.model, dep)
            group = None
        else:
            group = None if step_fn is not None else hbf.group_step(cfg.memory, cfg.model, dep)
        self.first_warmup = first_warmup
        self.engine = DecodeEngine(self.env, step_fn, record_from=first_warmup, ranks=self.ranks, group=group)
        self.stall = dep.landing == "stall"
        self.rng = np.random.default_rng([seed, n_sessions, zlib.crc32(plan.fingerprint.encode())])
        if dep.start == "aged" and not self.mem.policy.frees_at_boundary:
            aging = np.random.default_rng([seed, n_sessions, zlib.crc32(plan.fingerprint.encode()), 1])
            for mem in self.mems:
                mem.age(aging)
        self.order = self.rng.permutation(len(plan.sessions))  # the closed loop's cycle of sessions
        self.counts = _Counts()
        self.ttft: list[float] = []
        self.ttft_t: list[float] = []  # admission time of each TTFT (windows filter on it)
        self.per_request = plan.lists()["request"]
        self.ttft_ref = cfg.clock.ttft_ref_s
        self.land = land
        self.landing = hbf.landing_fn(cfg.memory, cfg.model)
        self.ff: dict[int, float] = {}  # session instance -> fast-forward seconds left (steady-state start)

    def start(self, windows: Sequence[Window]) -> list["_Observer"]:
        """Schedule the windows' markers, the slots and the windows' samplers (in this order)."""
        env, plan, rng = self.env, self.plan, self.rng
        observers = [_Observer(k, w) for k, w in enumerate(windows)]
        for obs in observers:
            env.process(obs.marker(self))
        # Steady-state start: in a closed loop a slot is found in a session with probability
        # proportional to its span, at a uniform phase of it; each slot's first session is drawn so and
        # fast-forwarded (its KV written, no decode, no waiting) to that phase.
        # Slot i serves rank i mod G, and a finished session's replacement stays there: a data-parallel
        # router that keeps every rank at the same number of sessions.
        spans = plan.session_spans(NOMINAL_TPOT_S)
        slots = self.n_sessions * self.ranks
        firsts = rng.choice(len(plan.sessions), size=slots, p=spans / spans.sum())
        for i in range(slots):
            env.process(self.slot(int(firsts[i]), float(rng.uniform(0, spans[firsts[i]])), i % self.ranks))
        for obs in observers:
            env.process(obs.sampler(self))
        return observers

    def run_until(self, stop: simpy.Event) -> None:
        """Advance to ``stop`` unless memory already ran out; running out ends the run (``counts.oom``)."""
        if not self.counts.oom:
            try:
                self.env.run(until=stop)
            except OutOfMemory:
                self.counts.oom = True

    def sample(self) -> tuple:
        """(time, sessions live) + :meth:`Memory.snapshot`, per GPU (the ranks' mean)."""
        if self.ranks == 1:
            return (self.env.now, self.counts.live) + self.mem.snapshot()
        snaps = [m.snapshot() for m in self.mems]
        return (self.env.now, self.counts.live / self.ranks) + tuple(sum(c) / self.ranks for c in zip(*snaps))

    def sample_operating_point(self) -> tuple:
        """(KV bytes a decode step reads, live KV bytes per class), per GPU (the ranks' mean), now."""
        live: dict[str, float] = {}
        for m in self.mems:
            for c, t in m.live_tokens().items():
                live[c] = live.get(c, 0.0) + t * self.bpt / self.ranks
        return self.engine.kv_read_bytes() / self.ranks, live

    def wait(self, inst: int, d: float) -> simpy.Event | None:
        """A timeout of ``d`` s, of which the instance's remaining fast-forward is skipped."""
        ff = self.ff
        left = ff.get(inst, 0.0)
        if left > 0:
            skip = min(left, d)
            ff[inst] = left - skip
            d -= skip
        return simpy.events.Timeout(self.env, d) if d > 0 else None

    def slot(self, first: int, phase: float, rank: int = 0):
        """One concurrent session slot on ``rank``: session ``first`` from ``phase`` on, then the cycle's next ones."""
        env, plan, mem, counts = self.env, self.plan, self.mems[rank], self.counts
        first_session = True
        while True:
            if first_session:
                counts.instances += 1
                inst, s = counts.instances, plan.sessions[first]
                self.ff[inst] = phase
                first_session = False
                mem.session_start(inst, s, env.now - phase)
            else:
                s = plan.sessions[self.order[counts.drawn % len(self.order)]]
                counts.drawn += 1
                counts.instances += 1
                inst = counts.instances
                mem.session_start(inst, s, env.now)
            counts.live += 1
            yield env.all_of([env.process(self.agent(inst, a, rank)) for a in plan.roots[s]])
            mem.session_end(inst, env.now)
            self.ff.pop(inst, None)
            counts.sessions += 1
            counts.live -= 1

    def agent(self, inst: int, a: AgentPlan, rank: int = 0):
        """One agent's requests in order: user delay, closes, writes, landing, decode, tools and sub-agents."""
        env, mem, engine, counts, ff, wait = self.env, self.mems[rank], self.engine, self.counts, self.ff, self.wait
        stall = self.stall
        per_request, bpt, landing, land_on = self.per_request, self.bpt, self.landing, self.land
        first_warmup, ttft, ttft_t, ttft_ref = self.first_warmup, self.ttft, self.ttft_t, self.ttft_ref
        timeout = simpy.events.Timeout  # env.timeout without its descriptor
        for q in a.requests_list:
            t_user, c_arr, writes, reads, out, c_end, t_tools, t_obs = per_request[q]
            if t_user > 0 and (w := wait(inst, t_user)) is not None:
                yield w
            now = env.now
            for s in c_arr:
                mem.close(inst, s, now)
            # admission: this request's writes go through the policy and the allocator
            h_w, f_w = mem.write_request(inst, writes, now) if writes else (0, 0)
            ctx_h = ctx_f = 0.0
            if reads:
                rs, rt, rt_sum, rt_int = reads
                ctx_h = mem.hbm_tokens(inst, rs, rt, rt_int) * bpt
                ctx_f = rt_sum * bpt - ctx_h
            tot = h_w + f_w
            hbf_share = f_w / tot if tot > 0 else 0.0
            pre = max(tot - out, 0)
            land = landing(pre * (1 - hbf_share), pre * hbf_share) if land_on and pre else 0.0
            if land > 0:
                if stall and ff.get(inst, 0.0) <= 0:  # the rank's device writes it: the group waits (§5.1)
                    land = engine.stall(rank, land)
                yield timeout(env, land)
            flush, hbmw = hbf_share * bpt, (1 - hbf_share) * bpt if tot > 0 else 0.0
            if ff.get(inst, 0.0) > 0:  # fast-forward: this request's decode happened before the start
                ff[inst] = max(ff[inst] - out * NOMINAL_TPOT_S, 0.0)
            else:
                if env.now > first_warmup:
                    ev, step = engine.join_measured(out, ctx_h, ctx_f, flush, hbmw, rank)
                    ttft.append(ttft_ref + land + step)
                    ttft_t.append(env.now)
                else:
                    ev = engine.join(out, ctx_h, ctx_f, flush, hbmw, rank)
                yield ev
            counts.requests += 1
            now = env.now
            for s in c_end:
                mem.close(inst, s, now)
            kids = a.children.get(q)
            if kids:  # the reference clock's rule: tools, then wait for the sub-agents this request spawned
                kids = [env.process(self.agent(inst, c, rank)) for c in kids]
                if t_tools > 0 and (w := wait(inst, t_tools)) is not None:
                    yield w
                yield env.all_of(kids)
                if t_obs > 0 and (w := wait(inst, t_obs)) is not None:
                    yield w
            elif t_tools + t_obs > 0 and (w := wait(inst, t_tools + t_obs)) is not None:
                yield w


SERIES_COLUMNS = ["t_s", "sessions_live", "live_hbm_bytes", "live_hbf_bytes", "cached_hbm_bytes",
                  "cached_hbf_bytes", "hbm_written_bytes", "hbf_written_bytes"]


@dataclass
class _Observer:
    """One window's view of a run: marks the end of its warm-up, samples memory ``n_samples`` times
    over its duration, and turns what the run measured after its warm-up into a :class:`SimResult`."""

    k: int  # the window's index (the memory's mark of its warm-up end)
    window: Window
    samples: list[tuple] = field(default_factory=list)
    #: (time, KV read per step, live KV per class) per sample, per GPU: the operating point's units
    points: list[tuple] = field(default_factory=list)
    evicted_at_warmup: int = 0

    def marker(self, run: _Run):
        yield run.env.timeout(self.window.warmup_s)
        for mem in run.mems:
            mem.mark(self.k)
        self.evicted_at_warmup = sum(m.table.totals.evicted_blocks for m in run.mems)

    def sampler(self, run: _Run):
        dt = self.window.duration_s / self.window.n_samples
        while True:
            self.samples.append(run.sample())
            self.points.append((run.env.now,) + run.sample_operating_point())
            yield run.env.timeout(dt)

    def operating_point(self, run: _Run) -> dict[str, float]:
        """Time-averaged over the measurement window, per GPU: KV bytes one decode step reads, live KV bytes
        of each class and of the short-lived ones (§5.3: what sets the gain is HBM capacity against the
        short-lived KV live at one time), that ratio, and the seconds per second the group stood stalled."""
        pts = [p for p in self.points if p[0] >= self.window.warmup_s]
        out = dict(kv_read_per_step_bytes=float(np.mean([p[1] for p in pts])) if pts else float("nan"))
        classes = sorted({c for p in pts for c in p[2]})
        live = {c: float(np.mean([p[2].get(c, 0.0) for p in pts])) if pts else float("nan") for c in classes}
        short = sum(v for c, v in live.items() if c in SHORT_LIVED) if pts else float("nan")
        out.update(live_kv_by_class=live, live_short_kv_bytes=short,
                   hbm_over_live_short=float(run.cfg.memory.hbm_bytes / short) if short and short > 0 else float("nan"))
        return out

    def result(self, run: _Run) -> SimResult:
        warmup_s, engine, counts, mem = self.window.warmup_s, run.engine, run.counts, run.mem
        ser = pd.DataFrame(self.samples, columns=SERIES_COLUMNS)
        tp, tw = np.asarray(engine.tpot), np.asarray(engine.tpot_w)
        ttft = run.ttft
        if engine.record_from < warmup_s:  # a later window of a multi-window run: its own measurement span
            keep = np.asarray(engine.tpot_t) > warmup_s
            tp, tw = tp[keep], tw[keep]
            ttft = [v for v, t in zip(ttft, run.ttft_t) if t > warmup_s]
        ser = ser.drop_duplicates("t_s", keep="last").reset_index(drop=True)
        meas = ser[ser["t_s"] >= warmup_s]
        p99_tpot = weighted_quantile(tp, tw, 0.99)
        # No lifetime for a run that ran out of memory or finished no decode step in its window (infeasible).
        if len(meas) >= 4 and not counts.oom and np.isfinite(p99_tpot):
            rate, settled, t_set = hbf.settled_rate(meas["t_s"].to_numpy(), meas["hbf_written_bytes"].to_numpy())
        else:
            rate, settled, t_set = float("nan"), False, float("nan")
        cfg = run.cfg
        by_rank = [m.bytes_by_class_tier(self.k) for m in run.mems]
        by_ct = by_rank[0] if run.ranks == 1 else {
            c: {t: sum(r.get(c, {}).get(t, 0.0) for r in by_rank) / run.ranks for t in ("hbm", "hbf")}
            for c in sorted({c for r in by_rank for c in r})}
        tiers = {"hbm": sum(v["hbm"] for v in by_ct.values()), "hbf": sum(v["hbf"] for v in by_ct.values())}
        # ASSUMPTION (regime): a boundary-unaware cache has reached its steady state only once it evicts
        # (HBM-first turns HBM over only through LRU eviction); ``in_regime`` says whether the window did.
        evictions = sum(m.table.totals.evicted_blocks for m in run.mems) - self.evicted_at_warmup
        regime = bool(run.mem.policy.frees_at_boundary or evictions > 0)
        life = float(hbf.hbf_lifetime_years(cfg.memory, rate, cfg.endurance)) if np.isfinite(rate) else float("nan")
        return SimResult(
            n_sessions=run.n_sessions, policy=run.policy_name, sim_s=float(run.env.now), warmup_s=float(warmup_s),
            p99_tpot_s=p99_tpot, mean_tpot_s=float((tp * tw).sum() / tw.sum()) if tw.sum() else float("nan"),
            p99_ttft_s=float(np.quantile(ttft, 0.99)) if ttft else float("nan"), oom=bool(counts.oom),
            requests_done=int(counts.requests), sessions_done=int(counts.sessions), max_batch=int(engine.max_batch),
            hbf_write_rate=float(rate), settled=bool(settled), settled_at_s=float(t_set), lifetime_years=life,
            bytes_by_tier=tiers, bytes_by_class_tier=by_ct,
            live_peak={"hbm": float(ser["live_hbm_bytes"].max()), "hbf": float(ser["live_hbf_bytes"].max())},
            live_mean={"hbm": float(meas["live_hbm_bytes"].mean()) if len(meas) else float("nan"),
                       "hbf": float(meas["live_hbf_bytes"].mean()) if len(meas) else float("nan")},
            series=ser, events=mem.events, totals=mem.table.totals,
            closes=mem.recorder.close_times() if mem.recorder is not None else None,
            ranks=run.ranks, in_regime=regime, evicted_blocks=int(evictions), stalled_s=float(engine.stalled_s),
            events_bytes_by_tier={t: sum(v[t] for v in by_rank[0].values()) for t in ("hbm", "hbf")},
            **self.operating_point(run),
        )


def _stop_at(env: simpy.Environment, t: float) -> simpy.Event:
    """An event at absolute time ``t`` that ends ``env.run`` there, as ``env.run(until=t)`` does from time 0
    (urgent, so nothing else at ``t`` runs first).  Scheduled up front, it lands on exactly ``t``; a
    float ``until`` given later would land on ``now + (t - now)``, which can differ in the last bit."""
    ev = simpy.Event(env)
    ev._ok, ev._value = True, None  # a triggered event, as simpy builds its own ``until`` event
    env.schedule(ev, simpy.core.URGENT, t - env.now)
    return ev
