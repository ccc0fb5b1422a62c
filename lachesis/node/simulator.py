"""The decode node (§5.1–§5.2): a closed-loop simpy replay of agent sessions on an expert-parallel
group of G ranks stepping in lockstep (one GPU when G = 1), every KV write and boundary going
through each rank's memory (:mod:`lachesis.node.node_memory`) and every decode step through the decode
engine (:mod:`lachesis.node.decode`), measured through one or more windows.  What it assumes (write
timing, context tiers, TTFT, landing, the steady-state start, the unit of simulated time) is in
docs/design.md §5 ("Decode node").
"""

from __future__ import annotations

import math
import numbers
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Protocol, Sequence, TypedDict, cast

import numpy as np
import pandas as pd
import simpy

from lachesis.config import SLO, Config
from lachesis.kv import SEG_CLASSES, SHORT_LIVED_CLASSES
from lachesis.memory.allocator import WriteTotals
from lachesis.memory.policies import as_policy
from lachesis.memory.protocol import Policy
from lachesis.node import endurance, kv_landing, native, step_cost
from lachesis.node.clairvoyance import Clock, CloseTimes, Recorder
from lachesis.node.decode import DecodeEngine
from lachesis.node.node_memory import Memory, MemorySizes, OutOfMemory, memory_sizes
from lachesis.node.plan import NOMINAL_TPOT_S, AgentPlan, Plan

SIM_VERSION = "sim-4"


# ------------------------------------------------------------------------------------------------
# Inputs checked before a run
# ------------------------------------------------------------------------------------------------


def _check_run_args(n_sessions: object, seed: object, duration_s: float, warmup_s: float, n_samples: object) -> None:
    """One-line errors naming the argument (a float session count would otherwise surface as a bad seed)."""
    def integer(name: str, v: object, lo: int) -> None:
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
# One run
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatingPoint:
    """Where a run stood: its load and policy, how long it ran, and what one GPU held and read there
    (time-averaged over the measurement window; §5.3 reads the gain off HBM against the short-lived KV)."""

    n_sessions: int
    policy: str
    sim_s: float
    warmup_s: float
    live_peak: dict[str, float]  # bytes, per tier, over the whole run
    live_mean: dict[str, float]  # bytes, per tier, in the window
    ranks: int = 1  # GPUs of the expert-parallel group simulated (per-GPU figures are their mean)
    kv_read_per_step_bytes: float = float("nan")  # per GPU
    live_short_kv_bytes: float = float("nan")  # per GPU: reasoning-laden, worker, reviewer
    hbm_over_live_short: float = float("nan")  # one GPU's HBM capacity / live_short_kv_bytes
    live_kv_by_class: dict[str, float] = field(default_factory=dict)  # per GPU


@dataclass(frozen=True)
class Measurement:
    """What the run served in its measurement window: the SLO's percentiles, whether memory ran out, the
    work done, and how long the group stalled on landings."""

    p99_tpot_s: float
    mean_tpot_s: float
    p99_ttft_s: float
    oom: bool
    requests_done: int
    sessions_done: int
    max_batch: int
    stalled_s: float = 0.0  # seconds the group's decode waited for landings after the first warm-up


@dataclass(frozen=True)
class Lifetime:
    """The flash's wear in the window: the settled HBF write rate, the lifetime it allows, and the bytes
    behind it by tier and class."""

    hbf_write_rate: float  # settled HBF KV write rate, bytes/s per GPU
    settled: bool
    settled_at_s: float
    lifetime_years: float
    bytes_by_tier: dict[str, float]  # written in the measurement window
    bytes_by_class_tier: dict[str, dict[str, float]]
    in_regime: bool = True  # a boundary-unaware cache evicted in the window (its steady state)
    evicted_blocks: int = 0  # blocks evicted from the cache in the window, all ranks
    events_bytes_by_tier: dict[str, float] = field(default_factory=dict)  # the recorded rank's
    hbf_rank_spread: float = 1.0  # the most-written rank's HBF KV bytes in the window over the ranks' mean


class RunRecord(TypedDict, total=False):
    """A run's flat record (:meth:`SimResult.to_dict`; a grid row's run fields), in the order the cache writes it:
    the fields of :class:`OperatingPoint`, :class:`Measurement` and :class:`Lifetime`, each once."""

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
    hbf_write_rate: float
    settled: bool
    settled_at_s: float
    lifetime_years: float
    bytes_by_tier: dict[str, float]
    bytes_by_class_tier: dict[str, dict[str, float]]
    live_peak: dict[str, float]
    live_mean: dict[str, float]
    ranks: int
    in_regime: bool
    evicted_blocks: int
    stalled_s: float
    events_bytes_by_tier: dict[str, float]
    hbf_rank_spread: float
    kv_read_per_step_bytes: float
    live_short_kv_bytes: float
    hbm_over_live_short: float
    live_kv_by_class: dict[str, float]


#: :class:`RunRecord`'s keys in order.
RESULT_FIELDS: tuple[str, ...] = tuple(RunRecord.__annotations__)


@dataclass
class SimResult:
    """What one closed-loop run measured (per GPU): where it stood, what it served, what it wore, and
    what a caller asked it to keep (the memory series, the event stream, the write totals, the closes)."""

    point: OperatingPoint
    measurement: Measurement
    lifetime: Lifetime
    series: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    events: list | None = field(default=None, repr=False)  # allocator event stream (record_events=True)
    totals: WriteTotals | None = field(default=None, repr=False)  # the segment table's WriteTotals over the whole run
    closes: CloseTimes | None = field(default=None, repr=False)  # segment closes so far (record_closes=True)

    def meets(self, slo: SLO) -> bool:
        """Feasible at this SLO: p99 TPOT and p99 TTFT within bounds and memory never ran out.

        A NaN percentile (no decode step finished, or no request admitted, in the window) fails: a run
        that served nothing has not shown that it meets the SLO.
        """
        m = self.measurement
        return (not m.oom) and bool(m.p99_tpot_s <= slo.p99_tpot_s) and bool(m.p99_ttft_s <= slo.ttft_s)

    def to_dict(self) -> RunRecord:
        """The three parts as one flat record, keyed and ordered by :class:`RunRecord`."""
        parts = {**asdict(self.point), **asdict(self.measurement), **asdict(self.lifetime)}
        return cast(RunRecord, {k: parts[k] for k in RESULT_FIELDS})


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
    """One observation of a run: simulate until ``duration_s``, measure after ``warmup_s``, take ``n_samples``
    snapshots."""

    duration_s: float
    warmup_s: float
    n_samples: int = 200


@dataclass(frozen=True)
class RunSettings:
    """How one run is driven and what it keeps, beside the node (``cfg``), the policy and the load."""

    seed: int = 0
    #: ``(batch, kv_hbm_bytes, kv_hbf_bytes, flush_bytes, hbm_write_bytes) -> s``, replacing
    #: :func:`lachesis.node.step_cost.scalar_step_fn`'s decode step (a toy step in tests)
    step_fn: Callable[..., float] | None = None
    land: bool = True  # False skips KV landing delays
    #: a baseline run's closes, giving each segment its close time at its first write, for the oracle
    #: (:mod:`lachesis.node.clairvoyance`)
    clairvoyance: CloseTimes | None = None
    record_events: bool = False  # keep the recorded rank's allocator event stream (``SimResult.events``)
    record_closes: bool = False  # keep every segment close (``SimResult.closes``)
    #: "auto": the native core (:mod:`lachesis.node.native`) where it is built and covers the run (the model's own
    #: step, every tier with bandwidth; any policy: one of one's own is called back), else this module; "native" or
    #: "python" to insist (same results)
    backend: str = "auto"


def simulate(plan: Plan, cfg: Config, policy: Policy | str, n_sessions: int, duration_s: float | None = None,
             warmup_s: float | None = None, n_samples: int = 200, settings: RunSettings | None = None) -> SimResult:
    """Replay ``n_sessions`` concurrent sessions per GPU (closed loop) for ``duration_s``, measured after
    ``warmup_s`` (by default one mean session span, then three more), driven as ``settings`` says (the
    defaults of :class:`RunSettings` without).  One window of :func:`simulate_windows`."""
    mean_s = plan.mean_session_s
    warmup_s = mean_s if warmup_s is None else warmup_s
    duration_s = warmup_s + 3 * mean_s if duration_s is None else duration_s
    return next(simulate_windows(plan, cfg, policy, n_sessions, [Window(duration_s, warmup_s, n_samples)], settings))


def simulate_windows(plan: Plan, cfg: Config, policy: Policy | str, n_sessions: int, windows: Sequence[Window],
                     settings: RunSettings | None = None) -> Iterator[SimResult]:
    """One run observed through several windows of increasing length, driven as ``settings`` says (the
    defaults of :class:`RunSettings` without); yields one result per window.

    The run pauses after each window's result, so a caller that needs the longer windows only
    sometimes (the capacity search's candidate at N*) continues it instead of replaying from the
    start.  Each window's result equals :func:`simulate` with that window's settings alone: the
    extra markers and samplers only read state, and simpy keeps the other events' order.
    """
    settings = RunSettings() if settings is None else settings
    if settings.backend not in native.BACKENDS:
        raise ValueError(f"simulate: backend must be one of {native.BACKENDS}, got {settings.backend!r}")
    windows = list(windows)
    if not windows or any(b.duration_s < a.duration_s for a, b in zip(windows, windows[1:])):
        raise ValueError("simulate_windows: need at least one window, in non-decreasing duration_s")
    for w in windows:
        _check_run_args(n_sessions, settings.seed, w.duration_s, w.warmup_s, w.n_samples)
    run = _backend(RunSetup.make(plan, cfg, policy, n_sessions, settings, windows))
    observers = run.start()
    for k, obs in enumerate(observers):
        run.finish_window(k, obs)
        yield obs.result(run)


def _random_streams(plan: Plan, cfg: Config, n_sessions: int,
                    seed: int) -> tuple[np.random.Generator, np.random.Generator | None]:
    """The run's random stream (the cycle of sessions, each slot's first session and phase) and the aged
    start's (None unless the node starts aged), both seeded by the seed, the load and the trace."""
    key = [seed, n_sessions, zlib.crc32(plan.fingerprint.encode())]
    aged = cfg.deployment.start == "aged"
    return np.random.default_rng(key), (np.random.default_rng(key + [1]) if aged else None)


def _first_sessions(plan: Plan, rng: np.random.Generator, slots: int) -> tuple[np.ndarray, list[float]]:
    """Steady-state start: in a closed loop a slot is found in a session with probability proportional to
    its span, at a uniform phase of it; each slot's first session and phase, drawn so."""
    spans = plan.session_spans(NOMINAL_TPOT_S)
    firsts = rng.choice(len(plan.sessions), size=slots, p=spans / spans.sum())
    return firsts, rng.uniform(0, spans[firsts]).tolist()  # the same draws, in order, as one call per slot


@dataclass(frozen=True)
class RunSetup:
    """One run as either backend is given it, made once in Python: the node, the policy, the load and the windows,
    one GPU's memory sizes, and every random draw in the reference's order (the aged start's LRU order per rank,
    the closed loop's cycle of sessions, each slot's first session and phase)."""

    plan: Plan
    cfg: Config
    policy: Policy | str  # as the caller gave it (each rank's memory coerces it, as the reference always has)
    n_sessions: int
    settings: RunSettings
    windows: tuple[Window, ...]
    sizes: MemorySizes
    frees_at_boundary: bool
    aged_orders: tuple[np.ndarray, ...] | None  # per rank (None: the node starts empty)
    order: np.ndarray
    firsts: np.ndarray
    phases: list[float]

    @classmethod
    def make(cls, plan: Plan, cfg: Config, policy: Policy | str, n_sessions: int, settings: RunSettings,
             windows: Sequence[Window]) -> "RunSetup":
        rng, aging = _random_streams(plan, cfg, n_sessions, settings.seed)
        sizes = memory_sizes(cfg)
        ranks = cfg.deployment.group_ranks
        frees = bool(as_policy(policy).frees_at_boundary)
        aged = None
        if aging is not None and not frees:
            aged = tuple(aging.permutation(sizes.aged_chunks) for _ in range(ranks))
        order = rng.permutation(len(plan.sessions))  # the closed loop's cycle of sessions
        # Each slot's first session is fast-forwarded (its KV written, no decode, no waiting) to its phase.
        firsts, phases = _first_sessions(plan, rng, n_sessions * ranks)
        return cls(plan, cfg, policy, n_sessions, settings, tuple(windows), sizes, frees, aged, order, firsts, phases)

    @property
    def ranks(self) -> int:
        return self.cfg.deployment.group_ranks

    @property
    def policy_name(self) -> str:
        return getattr(self.policy, "name", str(self.policy))

    @property
    def first_warmup(self) -> float:
        """The earliest warm-up end: the decode engine records from there on."""
        return min(w.warmup_s for w in self.windows)


@dataclass(frozen=True)
class Served:
    """What a run has served so far, as a window's result reads it: the decode engine's TPOT records (each
    interval's step, its weight in tokens and its end time), the TTFT samples and their admission times, the
    largest batch, the seconds stalled on landings, the requests and sessions finished, whether memory ran out,
    and the simulated time."""

    tpot: Sequence[float] | np.ndarray
    tpot_w: Sequence[float] | np.ndarray
    tpot_t: Sequence[float] | np.ndarray
    ttft: list[float]
    ttft_t: list[float]
    max_batch: int
    stalled_s: float
    requests: int
    sessions: int
    oom: bool
    now: float


class RunBackend(Protocol):
    """A run on either backend, as :class:`_Observer` reads it: its setup, its windows' observers, what it served,
    the evictions, the bytes written per rank in a window and what it was asked to record."""

    setup: RunSetup

    def start(self) -> list["_Observer"]: ...

    def finish_window(self, k: int, obs: "_Observer") -> None: ...

    def served(self) -> Served: ...

    def evicted_blocks(self) -> int: ...

    def bytes_by_rank(self, k: int) -> list[dict[str, dict[str, float]]]: ...

    def recorded(self) -> tuple[list | None, WriteTotals, CloseTimes | None]: ...


def _backend(setup: RunSetup) -> RunBackend:
    """The run on the native core when the settings allow it and it covers the run (the model's own step, tiers
    every input may use; any policy: one of one's own is called back from the core); else the reference."""
    settings = setup.settings
    if settings.backend == "python":
        return _Run(setup)
    core = native.core()
    step = None if core is None or settings.step_fn is not None else native.step(setup.cfg)
    if step is None:
        if settings.backend == "native":
            raise ValueError("simulate: backend='native' asked for a run the native core does not cover "
                             + ("(the core is not built or not loadable: lachesis.node.native.core() said why)"
                                if core is None else "(a step_fn, or a memory with a tier of zero bandwidth)"))
        return _Run(setup)
    return _NativeRun(setup, step)


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
    """One closed-loop run on the decode node's G ranks: the simpy environment, each rank's memory, the
    decode engine and the explicit state its processes share (counts, TTFT samples, fast-forward budgets).

    Its processes are one :meth:`slot` per concurrent session, which replays sessions one after
    another, each through :meth:`agent` processes (one per agent, sub-agents concurrent).
    """

    def __init__(self, setup: RunSetup) -> None:
        self.setup = setup
        plan, cfg, settings = setup.plan, setup.cfg, setup.settings
        self.plan, self.cfg = plan, cfg
        dep = cfg.deployment
        self.ranks = setup.ranks
        self.env = simpy.Environment()
        self.bpt = float(cfg.model.kv_bytes_per_token)
        closes = settings.clairvoyance
        clock = None if closes is None else Clock(closes, plan.sessions, plan.fingerprint)
        recorder = Recorder(plan.sessions, plan.fingerprint) if settings.record_closes else None
        self.mems = [Memory(plan, cfg, setup.policy, clock, recorder) for _ in range(self.ranks)]
        self.mem = self.mems[0]  # the rank whose event stream is recorded (for the offline bound)
        if settings.record_events:
            self.mem.events = []
        self.first_warmup = setup.first_warmup
        self.engine = self._decode_engine(settings.step_fn)
        self.stall = dep.landing == "stall"
        if setup.aged_orders is not None:
            for mem, order in zip(self.mems, setup.aged_orders):
                mem.age(order)
        self.order = setup.order
        self.counts = _Counts()
        self.ttft: list[float] = []
        self.ttft_t: list[float] = []  # admission time of each TTFT (windows filter on it)
        self.per_request = plan.lists().requests
        self.ttft_ref = cfg.clock.ttft_ref_s
        self.land = settings.land
        self.landing = kv_landing.landing_fn(cfg.memory, cfg.model)
        self.ff: dict[int, float] = {}  # session instance -> fast-forward seconds left (steady-state start)

    def _decode_engine(self, step_fn: Callable[..., float] | None) -> DecodeEngine:
        """The group's decode engine, pricing steps with ``step_fn`` if given, else the model's step."""
        cfg = self.cfg
        if self.ranks == 1:
            step_fn = step_fn or step_cost.scalar_step_fn(cfg.memory, cfg.model, cfg.deployment)
            group = None
        else:
            group = None if step_fn is not None else step_cost.group_step(cfg.memory, cfg.model, cfg.deployment)
        return DecodeEngine(self.env, step_fn, record_from=self.first_warmup, ranks=self.ranks, group=group)

    def start(self) -> list["_Observer"]:
        """Schedule the windows' markers, the slots, the windows' samplers and their ends (in this order)."""
        env, windows = self.env, self.setup.windows
        observers = [_Observer(k, w) for k, w in enumerate(windows)]
        for obs in observers:
            env.process(obs.marker(self))
        # Slot i serves rank i mod G, and a finished session's replacement stays there: a data-parallel
        # router that keeps every rank at the same number of sessions.
        for i, (first, phase) in enumerate(zip(self.setup.firsts, self.setup.phases)):
            env.process(self.slot(int(first), phase, i % self.ranks))
        for obs in observers:
            env.process(obs.sampler(self))
        self.stops = [_stop_at(env, w.duration_s) for w in windows]
        return observers

    def finish_window(self, k: int, obs: "_Observer") -> None:
        """Run to window ``k``'s end and take its last sample."""
        self.run_until(self.stops[k])
        obs.samples.append(self.sample())

    # What a window's result reads (RunBackend; the native run answers the same)
    def served(self) -> Served:
        e, c = self.engine, self.counts
        return Served(e.tpot, e.tpot_w, e.tpot_t, self.ttft, self.ttft_t, e.max_batch, e.stalled_s, c.requests,
                      c.sessions, c.oom, self.env.now)

    def evicted_blocks(self) -> int:
        """Blocks evicted from the ranks' caches so far."""
        return sum(m.table.totals.evicted_blocks for m in self.mems)

    def bytes_by_rank(self, k: int) -> list[dict[str, dict[str, float]]]:
        """Each rank's bytes written per class and tier in window ``k``."""
        return [m.bytes_by_class_tier(k) for m in self.mems]

    def recorded(self) -> tuple[list | None, WriteTotals, CloseTimes | None]:
        """The recorded rank's event stream, its write totals, and the closes recorded so far."""
        mem = self.mem
        return mem.events, mem.table.totals, mem.recorder.close_times() if mem.recorder is not None else None

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
                spawned = [env.process(self.agent(inst, c, rank)) for c in kids]
                if t_tools > 0 and (w := wait(inst, t_tools)) is not None:
                    yield w
                yield env.all_of(spawned)
                if t_obs > 0 and (w := wait(inst, t_obs)) is not None:
                    yield w
            elif t_tools + t_obs > 0 and (w := wait(inst, t_tools + t_obs)) is not None:
                yield w


class _NativeRun:
    """The same run on the native core (:mod:`lachesis.node.native`, C++): the same setup, the same order of events
    and the same float operations as :class:`_Run`, so the same results, bit for bit (tests/node/test_native_run.py);
    a window's result is read from it the way :class:`_Run`'s is.  A policy of one's own runs inside it, called back
    with the native table's view."""

    def __init__(self, setup: RunSetup, step: native._core.StepModel) -> None:
        self.setup = setup
        plan, settings = setup.plan, setup.settings
        closes = settings.clairvoyance
        clock = None if closes is None else native.clock(closes, plan)
        self.recorder = native.recorder() if settings.record_closes else None
        self.mems = [native.memory(plan, setup.sizes, setup.policy, clock, self.recorder) for _ in range(setup.ranks)]
        if settings.record_events:
            self.mems[0].record_events(True)
        if setup.aged_orders is not None:
            for mem, order in zip(self.mems, setup.aged_orders):
                mem.age(order)
        spec = native.run_spec(setup.cfg, setup.n_sessions, setup.first_warmup, settings.land, setup.order,
                               setup.firsts, setup.phases, [(w.duration_s, w.warmup_s, w.n_samples)
                                                            for w in setup.windows])
        self.core = native.node_run(plan, step, spec, self.mems)
        self.records = self.core.decode_records()

    def start(self) -> list["_Observer"]:
        return [_Observer(k, w) for k, w in enumerate(self.setup.windows)]

    def finish_window(self, k: int, obs: "_Observer") -> None:
        """Run to window ``k``'s end natively, then copy what the run recorded into the observer and here."""
        c = self.core
        c.run_window(k)
        o = c.observed(k)
        one = self.setup.ranks == 1
        obs.samples = [(int(t) if whole else t, int(live) if one else live, *rest)
                       for (t, live, *rest), whole in zip(o.samples.tolist(), o.sample_int_time.tolist())]
        obs.points = [(p[0], p[1], {SEG_CLASSES[i]: p[2 + i] for i in range(len(SEG_CLASSES)) if bits >> i & 1})
                      for p, bits in zip(o.points.tolist(), o.point_classes.tolist())]
        obs.evicted_at_warmup = int(o.evicted_at_warmup)
        self.records = c.decode_records()

    def served(self) -> Served:
        r = self.records
        return Served(r.tpot, r.tpot_w, r.tpot_t, r.ttft.tolist(), r.ttft_t.tolist(), int(r.max_batch),
                      float(r.stalled_s), int(r.requests), int(r.sessions), bool(r.oom), float(r.now))

    def evicted_blocks(self) -> int:
        return sum(int(m.evicted_blocks) for m in self.mems)

    def bytes_by_rank(self, k: int) -> list[dict[str, dict[str, float]]]:
        return [m.bytes_by_class_tier(k) for m in self.mems]

    def recorded(self) -> tuple[list | None, WriteTotals, CloseTimes | None]:
        mem = self.mems[0]
        events = mem.events() if mem.recording_events() else None
        closes = None if self.recorder is None else native.close_times(self.recorder, self.setup.plan.fingerprint)
        return events, native.write_totals(mem.totals()), closes


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
        self.evicted_at_warmup = run.evicted_blocks()

    def sampler(self, run: _Run):
        dt = self.window.duration_s / self.window.n_samples
        while True:
            self.samples.append(run.sample())
            self.points.append((run.env.now,) + run.sample_operating_point())
            yield run.env.timeout(dt)

    def operating_point(self, run: RunBackend) -> dict[str, Any]:
        """Time-averaged over the measurement window, per GPU: KV bytes one decode step reads, live KV bytes
        of each class and of the short-lived ones (§5.3: what sets the gain is HBM capacity against the
        short-lived KV live at one time), and that ratio."""
        pts = [p for p in self.points if p[0] >= self.window.warmup_s]
        out: dict[str, Any] = dict(kv_read_per_step_bytes=float(np.mean([p[1] for p in pts])) if pts else float("nan"))
        classes = sorted({c for p in pts for c in p[2]})
        live = {c: float(np.mean([p[2].get(c, 0.0) for p in pts])) if pts else float("nan") for c in classes}
        short = sum(v for c, v in live.items() if c in SHORT_LIVED_CLASSES) if pts else float("nan")
        out.update(live_kv_by_class=live, live_short_kv_bytes=short,
                   hbm_over_live_short=float(run.setup.cfg.memory.hbm_bytes / short) if short and short > 0
                   else float("nan"))
        return out

    def result(self, run: RunBackend) -> SimResult:
        warmup_s, setup, served = self.window.warmup_s, run.setup, run.served()
        ser = pd.DataFrame(self.samples, columns=SERIES_COLUMNS)
        tp, tw = np.asarray(served.tpot), np.asarray(served.tpot_w)
        ttft = served.ttft
        if setup.first_warmup < warmup_s:  # a later window of a multi-window run: its own measurement span
            keep = np.asarray(served.tpot_t) > warmup_s
            tp, tw = tp[keep], tw[keep]
            ttft = [v for v, t in zip(ttft, served.ttft_t) if t > warmup_s]
        ser = ser.drop_duplicates("t_s", keep="last").reset_index(drop=True)
        meas = ser[ser["t_s"] >= warmup_s]
        p99_tpot = weighted_quantile(tp, tw, 0.99)
        # No lifetime for a run that ran out of memory or finished no decode step in its window (infeasible).
        if len(meas) >= 4 and not served.oom and np.isfinite(p99_tpot):
            rate, settled, t_set = endurance.settled_rate(meas["t_s"].to_numpy(), meas["hbf_written_bytes"].to_numpy())
        else:
            rate, settled, t_set = float("nan"), False, float("nan")
        cfg, ranks = setup.cfg, setup.ranks
        by_rank = run.bytes_by_rank(self.k)
        by_ct = by_rank[0] if ranks == 1 else {
            c: {t: sum(r.get(c, {}).get(t, 0.0) for r in by_rank) / ranks for t in ("hbm", "hbf")}
            for c in sorted({c for r in by_rank for c in r})}
        tiers = {"hbm": sum(v["hbm"] for v in by_ct.values()), "hbf": sum(v["hbf"] for v in by_ct.values())}
        # ASSUMPTION (regime): a boundary-unaware cache has reached its steady state only once it evicts
        # (HBM-first turns HBM over only through LRU eviction); ``in_regime`` says whether the window did.
        evictions = run.evicted_blocks() - self.evicted_at_warmup
        regime = bool(setup.frees_at_boundary or evictions > 0)
        spread = endurance.rank_spread([sum(v["hbf"] for v in r.values()) for r in by_rank])
        life = (float(endurance.group_lifetime_years(cfg.memory, rate, cfg.endurance, spread)) if np.isfinite(rate)
                else float("nan"))
        events, totals, closes = run.recorded()
        point = OperatingPoint(
            n_sessions=setup.n_sessions, policy=setup.policy_name, sim_s=float(served.now), warmup_s=float(warmup_s),
            live_peak={"hbm": float(ser["live_hbm_bytes"].max()), "hbf": float(ser["live_hbf_bytes"].max())},
            live_mean={"hbm": float(meas["live_hbm_bytes"].mean()) if len(meas) else float("nan"),
                       "hbf": float(meas["live_hbf_bytes"].mean()) if len(meas) else float("nan")},
            ranks=ranks, **self.operating_point(run))
        measured = Measurement(
            p99_tpot_s=p99_tpot, mean_tpot_s=float((tp * tw).sum() / tw.sum()) if tw.sum() else float("nan"),
            p99_ttft_s=float(np.quantile(ttft, 0.99)) if ttft else float("nan"), oom=bool(served.oom),
            requests_done=int(served.requests), sessions_done=int(served.sessions), max_batch=int(served.max_batch),
            stalled_s=float(served.stalled_s))
        wear = Lifetime(
            hbf_write_rate=float(rate), settled=bool(settled), settled_at_s=float(t_set), lifetime_years=life,
            bytes_by_tier=tiers, bytes_by_class_tier=by_ct, in_regime=regime, evicted_blocks=int(evictions),
            events_bytes_by_tier={t: sum(v[t] for v in by_rank[0].values()) for t in ("hbm", "hbf")},
            hbf_rank_spread=spread)
        return SimResult(point, measured, wear, series=ser, events=events, totals=totals, closes=closes)


def _stop_at(env: simpy.Environment, t: float) -> simpy.Event:
    """An event at absolute time ``t`` that ends ``env.run`` there, as ``env.run(until=t)`` does from time 0
    (urgent, so nothing else at ``t`` runs first).  Scheduled up front, it lands on exactly ``t``; a
    float ``until`` given later would land on ``now + (t - now)``, which can differ in the last bit."""
    ev = simpy.Event(env)
    ev._ok, ev._value = True, None  # a triggered event, as simpy builds its own ``until`` event
    env.schedule(ev, simpy.core.URGENT, t - env.now)
    return ev

