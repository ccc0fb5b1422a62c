"""The native node memory (lachesis/node/native/memory/) against the Python reference (lachesis.node.node_memory):
both driven by the same calls, every output compared (tiers and tokens per write, the block ids each segment
holds, snapshots, live tokens, bytes by class and tier, evictions, free lists, out of memory, events, closes)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from own_policies import NATIVE_POLICIES, own_policy
from sim_fixtures import multi_agent_trace, single_agent_trace, small_cfg

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.kv import SEG_CLASSES
from lachesis.node import block_capacity, native
from lachesis.node import simulator as S
from lachesis.node.clairvoyance import Clock, CloseTimes, Recorder
from lachesis.node.node_memory import Memory, OutOfMemory, memory_sizes
from lachesis.node.plan import PlanLists, build_plan, segment_columns

core = native.core()
if core is None:  # pragma: no cover - a machine without a C++ compiler
    pytest.skip("the native core is not built (reference path only)", allow_module_level=True)

#: every registered policy, knob settings, and each built-in rule as a policy of one's own (called back natively)
POLICIES = NATIVE_POLICIES


def seq_hbm_tokens(py: Memory, inst: int, segs, tokens) -> float:
    """Memory.hbm_tokens' split case summed left to right (the native order)."""
    sids = py._sids(inst)
    frac = py.table.lookup.hbm_fraction([sids[s] for s in segs])
    acc = 0.0
    for t, f in zip(tokens.tolist(), frac.tolist()):
        acc += t * f
    return acc


class Twin:
    """A Python Memory and a native NodeMemory driven together; each call's outputs are compared and the
    reference's returned (so a simulator run on it is the reference run)."""

    stats = {"split_hbm_tokens": 0, "hbm_tokens_ulp": 0, "writes": 0}

    def __init__(self, plan, cfg, policy, clock=None, recorder=None, *, native_clock=None, native_recorder=None,
                 check_lists_every: int = 1):
        policy = own_policy(policy) if isinstance(policy, str) else policy
        self.py = Memory(plan, cfg, policy, clock, recorder)
        self.nat = native.memory(plan, memory_sizes(cfg), policy, native_clock, native_recorder)
        self._session = {s: i for i, s in enumerate(plan.sessions)}
        self._every = check_lists_every
        self._calls = 0

    # what the simulator reads directly
    policy = property(lambda self: self.py.policy)
    table = property(lambda self: self.py.table)
    alloc = property(lambda self: self.py.alloc)
    recorder = property(lambda self: self.py.recorder)

    @property
    def events(self):
        return self.py.events

    @events.setter
    def events(self, v):
        self.py.events = v
        self.nat.record_events(v is not None)

    def check_state(self, full: bool = False) -> None:
        py, nat = self.py, self.nat
        assert nat.snapshot() == py.snapshot()
        assert list(nat.live_tokens().items()) == list(py.live_tokens().items())
        assert nat.cached_blocks() == [py.table.cached(0), py.table.cached(1)]
        assert nat.evicted_blocks == py.table.cache.evicted
        self._calls += 1
        if full or self._calls % self._every == 0:
            fl = nat.free_lists()
            for t in (0, 1):
                np.testing.assert_array_equal(fl[t], py.alloc._free[t][: py.alloc._top[t]])

    def age(self, order):
        assert self.nat.aged_chunks() == self.py.sizes.aged_chunks
        self.py.age(order)
        self.nat.age(order)
        self.check_state(full=True)

    def session_start(self, inst, session, t0):
        self.py.session_start(inst, session, t0)
        self.nat.session_start(inst, self._session[session], t0)

    def write_request(self, inst, writes, now):
        Twin.stats["writes"] += len(writes)
        try:
            got = self.py.write_request(inst, writes, now)
        except OutOfMemory as exc:
            with pytest.raises(OutOfMemory) as nexc:
                self.nat.write_request(inst, writes, now)
            assert str(nexc.value) == str(exc)
            raise
        assert self.nat.write_request(inst, writes, now) == got
        sids = self.py._sids(inst)
        handed: dict[int, list[int]] = {}
        for (s, _), ids in zip(writes, self.nat.last_write_blocks()):
            handed.setdefault(s, []).extend(ids.tolist())
        for s, ids in handed.items():
            held = self.py.table.lookup.blocks_of(sids[s])
            np.testing.assert_array_equal(self.nat.blocks_of(inst, s), held)
            assert held[held.size - len(ids):].tolist() == ids  # the ids handed to this request's writes
        self.check_state()
        return got

    def close(self, inst, s, now):
        self.py.close(inst, s, now)
        self.nat.close(inst, s, now)
        self.check_state()

    def session_end(self, inst, now):
        self.py.session_end(inst, now)
        self.nat.session_end(inst, now)
        self.check_state()

    def hbm_tokens(self, inst, segs, tokens, tokens_int):
        ref = self.py.hbm_tokens(inst, segs, tokens, tokens_int)
        got = self.nat.hbm_tokens(inst, list(segs), tokens.tolist(), list(tokens_int))
        sids = self.py._sids(inst)
        if self.py.table.lookup.hbm_share([sids[s] for s in segs], tokens_int) is None:
            Twin.stats["split_hbm_tokens"] += 1
            assert got == seq_hbm_tokens(self.py, inst, segs, tokens)
            assert got == pytest.approx(ref, rel=1e-12, abs=1e-9)
            Twin.stats["hbm_tokens_ulp"] += got != ref
        else:
            assert got == ref
        return ref

    def snapshot(self):
        got = self.py.snapshot()
        assert self.nat.snapshot() == got
        return got

    def live_tokens(self):
        got = self.py.live_tokens()
        assert list(self.nat.live_tokens().items()) == list(got.items())
        return got

    def mark(self, window=0):
        self.py.mark(window)
        self.nat.mark(window)

    def bytes_by_class_tier(self, window=0):
        got = self.py.bytes_by_class_tier(window)
        nat = self.nat.bytes_by_class_tier(window)
        assert list(nat.items()) == list(got.items())
        return got

    def finish(self) -> None:
        """The end of a run: totals, events and free lists."""
        assert native.write_totals(self.nat.totals()).as_dict() == self.py.table.totals.as_dict()
        if self.py.events is not None:
            # repr: exact floats, NaN equal; simpy's clock starts at the int 0, the native one at 0.0
            assert repr(self.nat.events()) == repr([(float(e[0]),) + e[1:] for e in self.py.events])
        self.check_state(full=True)


def twin_factory(made: list, closes: CloseTimes | None, plan):
    """A stand-in for simulator.Memory building Twins that share one native clock/recorder per group."""
    shared = {}

    def make(plan_, cfg, policy, clock=None, recorder=None):
        if "clock" not in shared:
            shared["clock"] = native.clock(closes, plan) if clock is not None else None
            shared["recorder"] = core.Recorder() if recorder is not None else None
        t = Twin(plan_, cfg, policy, clock, recorder, native_clock=shared["clock"],
                 native_recorder=shared["recorder"], check_lists_every=7)
        made.append(t)
        return t

    return make, shared


def run_twin(monkeypatch, plan, cfg, policy, n, *, closes=None, record_closes=False, **fields):
    made: list[Twin] = []
    make, shared = twin_factory(made, closes, plan)
    monkeypatch.setattr(S, "Memory", make)
    r = S.simulate(plan, cfg, own_policy(policy), n, **fields,
                   settings=S.RunSettings(clairvoyance=closes, record_closes=record_closes, record_events=True,
                                          step_fn=lambda b, *a: 0.004 + 0.0003 * b))
    for t in made:
        t.finish()
    if record_closes:
        nat = shared["recorder"].close_times()
        ref = r.closes
        for a, b in zip(nat, (ref.session, ref.occurrence, ref.segment, ref.offset_s)):
            np.testing.assert_array_equal(a, b)
    return r, made


@pytest.fixture(scope="module")
def multi_plan():
    tr = multi_agent_trace(8)
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg))


@pytest.fixture(scope="module")
def single_plan():
    tr = single_agent_trace(6)
    return build_plan(tr, recover(tr, seed=0))


def group_cfg(ranks: int, start: str = "empty", landing: str = "overlap", hbm_bytes: float = 1.2e8,
              hbf_kv_bytes: float = 4e9):
    cfg = small_cfg(hbm_bytes=hbm_bytes, hbf_kv_bytes=hbf_kv_bytes)
    return cfg.with_(deployment=dataclasses.replace(cfg.deployment, group_ranks=ranks, start=start, landing=landing))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("plan_name", ["multi_plan", "single_plan"])
def test_simulated_runs_match(plan_name, policy, monkeypatch, request):
    """G = 1, empty start: every memory call of a simulated run gives the same outputs (oracle: with the
    baseline's close times, through the native clock)."""
    plan = request.getfixturevalue(plan_name)
    cfg = group_cfg(1)
    closes = None
    if policy.endswith("oracle"):
        base, _ = run_twin(monkeypatch, plan, cfg, "hbm_first", 6, record_closes=True)
        closes = base.closes
    r, made = run_twin(monkeypatch, plan, cfg, policy, 6, closes=closes)
    assert not r.measurement.oom and r.measurement.requests_done > 0
    assert sum(sum(t.nat.totals().tokens) for t in made) > 0


@pytest.mark.parametrize("policy", ["hbm_first", "hbm_first_reclaim", "lachesis", "lachesis:size_estimate=spawn",
                                    "rho_threshold", "deterministic"])
def test_group_of_eight_aged_stall(policy, multi_plan, monkeypatch):
    """G = 8, an aged start (boundary-unaware policies), landings stall: every rank's memory matches."""
    cfg = group_cfg(8, start="aged", landing="stall", hbm_bytes=6e7)
    r, made = run_twin(monkeypatch, multi_plan, cfg, policy, 3)
    assert len(made) == 8
    if not made[0].py.policy.frees_at_boundary:
        assert made[0].py._base != (0, 0)  # the aged start ran
        assert r.lifetime.evicted_blocks >= 0


@pytest.mark.parametrize("policy", ["hbm_first", "lachesis", "oracle"])
def test_out_of_memory_matches(policy, multi_plan, monkeypatch):
    """A node too small for the load: both raise OutOfMemory at the same write with the same message."""
    cfg = group_cfg(1, hbm_bytes=2e6, hbf_kv_bytes=2e7)
    closes = None
    if policy == "oracle":
        big = group_cfg(1)
        closes = run_twin(monkeypatch, multi_plan, big, "hbm_first", 12, record_closes=True)[0].closes
    r, _ = run_twin(monkeypatch, multi_plan, cfg, policy, 12, closes=closes)
    assert r.measurement.oom


@pytest.mark.slow
@pytest.mark.parametrize("workload,n", [("multi_agent", 4), ("tau3", 24)])
@pytest.mark.parametrize("policy", ["hbm_first", "lachesis", "rho_threshold"])
def test_paper_node_runs_match(workload, n, policy, monkeypatch):
    """The paper's node (DEFAULT, G = 8, aged start, landings stall) on a generated workload: millions of
    block ids, every write's compared (free lists every 5,000 calls, and at the end)."""
    from lachesis.config import DEFAULT
    from lachesis.evaluation.plancache import workload_plan

    plan = workload_plan(workload, 0.1, 0)
    cfg = DEFAULT.with_(deployment=dataclasses.replace(DEFAULT.deployment, group_ranks=8, start="aged",
                                                       landing="stall"))
    made: list[Twin] = []
    make, _ = twin_factory(made, None, plan)

    def make_sparse(*a, **k):
        t = make(*a, **k)
        t._every = 5000
        return t

    monkeypatch.setattr(S, "Memory", make_sparse)
    r = S.simulate(plan, cfg, policy, n, duration_s=3 * plan.mean_session_s, warmup_s=plan.mean_session_s,
                   settings=S.RunSettings(seed=0))
    for t in made:
        t.finish()
    assert not r.measurement.oom and r.measurement.requests_done > 10_000


# -- small random streams ------------------------------------------------------------------------------------


def random_plan(rng: np.random.Generator, n_sessions: int, segs_per: int):
    """A plan-shaped object: sessions, per-segment class, key, final tokens and reads."""
    n = n_sessions * segs_per
    cls = np.array([SEG_CLASSES[i] for i in rng.integers(0, len(SEG_CLASSES), n)], dtype=object)
    key = np.where(cls == "worker", rng.integers(0, 4, n).astype(float), np.nan)
    key[(cls == "worker") & (rng.random(n) < 0.2)] = np.nan
    tokens = rng.integers(0, 60, n).astype(np.int64)
    reads = rng.integers(0, 200, n).astype(np.int64)
    plan = SimpleNamespace(seg_class=cls, seg_key=key, seg_tokens=tokens, seg_reads=reads, seg_role=cls.copy(),
                           sessions=[f"s{i}" for i in range(n_sessions)], fingerprint="random")
    plan.lists = lambda: PlanLists(requests=[], seg_class=[str(c) for c in cls], seg_role=[str(c) for c in cls],
                                   seg_key=[float(k) for k in key])
    plan.segs_of = lambda i: list(range(i * segs_per, (i + 1) * segs_per))
    plan.segment_columns = lambda: segment_columns(cls, key, tokens, reads)
    return plan


def random_stream(seed: int, policy: str, hbm: int, hbf_: int, bt: int, aged: bool) -> None:
    rng = np.random.default_rng(seed)
    plan = random_plan(rng, int(rng.integers(1, 5)), int(rng.integers(1, 7)))
    rows = [(i, k, s, float(rng.integers(0, 50))) for i in range(len(plan.sessions)) for k in range(3)
            for s in plan.segs_of(i) if rng.random() < 0.7]
    sess, occ, seg, off = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
    times = CloseTimes(np.array(sess, dtype=np.int32), np.array(occ, dtype=np.int32), np.array(seg, dtype=np.int32),
                       np.array(off, dtype=np.float64), "random")
    cfg = SimpleNamespace(model=SimpleNamespace(kv_bytes_per_token=3), deployment=SimpleNamespace(block_tokens=bt),
                          memory=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(block_capacity, "kv_blocks", lambda *a: (hbm, hbf_))
        clock, rec = Clock(times, plan.sessions, "random"), Recorder(plan.sessions, "random")
        nrec = core.Recorder()
        t = Twin(plan, cfg, policy, clock, rec, native_clock=native.clock(times, plan), native_recorder=nrec)
    t.events = []
    if aged:
        t.age(np.random.default_rng(seed + 1).permutation(t.py.sizes.aged_chunks))
    live: dict[int, list[int]] = {}  # instance -> segments it may still write
    live_segs: dict[int, list[int]] = {}  # instance -> all its segments
    inst, now = 0, 0.0
    for _ in range(int(rng.integers(5, 60))):
        now += float(rng.integers(0, 3))
        op = rng.random()
        if not live or op < 0.15:
            inst += 1
            i = int(rng.integers(0, len(plan.sessions)))
            t.session_start(inst, plan.sessions[i], now)
            live[inst] = plan.segs_of(i)
            live_segs[inst] = plan.segs_of(i)
            continue
        k = list(live)[int(rng.integers(0, len(live)))]
        segs = live[k]
        if op < 0.6:
            if not segs:
                continue
            writes = [(int(rng.choice(segs)), int(rng.integers(0, 3 * bt + 5))) for _ in range(int(rng.integers(1, 4)))]
            try:
                t.write_request(k, writes, now)
            except OutOfMemory:
                break
        elif op < 0.75:
            c = int(rng.choice(live_segs[k]))
            t.close(k, c, now)
            if c in segs:  # a closed segment is never written again (a closed id cannot reopen)
                segs.remove(c)
        elif op < 0.85:
            sel = [int(x) for x in rng.choice(live_segs[k], size=min(3, len(live_segs[k])), replace=False)]
            ti = [int(rng.integers(1, 100)) for _ in sel]
            t.hbm_tokens(k, sel, np.array(ti, dtype=np.float64), ti)
        elif op < 0.92:
            t.session_end(k, now)
            del live[k]
        else:
            w = int(rng.integers(0, 2))
            t.mark(w)
            t.bytes_by_class_tier(w)
            t.bytes_by_class_tier(1 - w)
    t.finish()
    ref = rec.close_times()  # the recorder the reference run filled, column by column
    for a, b in zip(nrec.close_times(), (ref.session, ref.occurrence, ref.segment, ref.offset_s)):
        np.testing.assert_array_equal(a, b)


@settings(derandomize=True, max_examples=150, deadline=None)
@example(seed=17, policy="hbm_first", hbm=0, hbf_=3, bt=16, aged=False)  # kept draws (a request writing one
@example(seed=0, policy="hbm_first", hbm=0, hbf_=4, bt=16, aged=False)  # segment twice; a closed one rewritten)
@example(seed=5, policy="hbm_first_reclaim", hbm=6, hbf_=20, bt=2, aged=True)
@example(seed=9, policy="oracle", hbm=8, hbf_=30, bt=1, aged=False)
@given(seed=st.integers(0, 2**31 - 1), policy=st.sampled_from(POLICIES), hbm=st.integers(0, 24),
       hbf_=st.integers(0, 48), bt=st.sampled_from([1, 2, 4, 16]), aged=st.booleans())
def test_random_streams_match(seed, policy, hbm, hbf_, bt, aged):
    random_stream(seed, policy, hbm, hbf_, bt, aged)


def test_a_builtin_policy_runs_its_native_rule_and_any_other_policy_its_own(multi_plan):
    """A built-in policy (its registered class exactly) runs the native rule its registry entry names; a user's own
    policy, a subclass included, is called back (the same results: test_simulated_runs_match); the table's options
    are read off the policy object."""
    from lachesis.memory.policies import HBMFirst

    class Mine(HBMFirst):
        name = "mine"

    assert native.policy(Mine(), multi_plan).calls_python
    assert not native.policy("hbm_first", multi_plan).calls_python
    assert native.policy("hbm_first", multi_plan).options.frees_at_boundary is False
    assert native.policy("hbm_first_reclaim", multi_plan).options.reclaims_cached_hbm is True
    assert native.policy("oracle", multi_plan).options.frees_at_boundary is True
    assert native.policy("rho_threshold:window=8", multi_plan).options.rho_window == 8
    with pytest.raises(ValueError, match="no knob 'quantile'"):
        core.make_policy(kind="Lachesis", numbers={"quantile": 0.5}, words={},
                         options=native.policy("lachesis", multi_plan).options, classes=native.classes())


def test_the_core_is_built_where_a_compiler_is():
    """Where the machine has a C++ compiler the install builds lachesis.node._core (the optional build never hides a
    broken one there); elsewhere the reference path runs alone."""
    import shutil
    import sysconfig

    if not (shutil.which("c++") or shutil.which("g++")) or not sysconfig.get_paths().get("include"):
        pytest.skip("no C++ compiler: the reference path runs alone")
    import importlib

    importlib.import_module("lachesis.node._core")
