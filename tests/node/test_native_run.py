"""The native run (lachesis/node/native/run/) against the Python reference (lachesis.node.simulator): the same run on
both backends gives the same result in every field (every TPOT and TTFT sample, lifetimes, bytes by class and
tier, the series, the recorded events and closes, the write totals) and leaves every rank's memory with the same
free lists, over one GPU and the paper's eight-GPU node, every policy, every knob that changes a run, runs that
run out of memory or miss the SLO, and small random plans."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from own_policies import NATIVE_POLICIES, own_policy
from sim_fixtures import multi_agent_trace, single_agent_trace, small_cfg

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.config import DEFAULT, SLOS, memory_config
from lachesis.node import native
from lachesis.node import simulator as S
from lachesis.node.plan import AgentPlan, Plan, build_plan

if native.core() is None:  # pragma: no cover - a machine without a C++ compiler
    pytest.skip("the native core is not built (tests/node/test_native_memory.py says whether it should be)",
                allow_module_level=True)

#: every registered policy, knob settings, and each built-in rule as a policy of one's own (called back natively)
POLICIES = NATIVE_POLICIES
PAPER_NODE = replace(DEFAULT.deployment, group_ranks=8, landing="stall", start="aged")


def _plan(kind: str, n: int = 10, scale: int = 10, laden_close: str = "last_read"):
    tr = multi_agent_trace(n, scale=scale) if kind == "multi" else single_agent_trace(n, scale=scale)
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg), laden_close=laden_close)


@pytest.fixture(scope="module")
def plans() -> dict:
    return {"multi": _plan("multi"), "single": _plan("single")}


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return type(a) is type(b) and a == b


def differences(ref: S.SimResult, got: S.SimResult) -> list[str]:
    """Every field of two results that differs (the series frame, the totals and closes by value)."""
    out = [k for k, a in ref.to_dict().items() if not _same(a, got.to_dict()[k])]
    for k in ("series", "totals", "closes", "events"):
        a, b = getattr(ref, k), getattr(got, k)
        if k == "series":
            ok = a.equals(b) and list(a.dtypes) == list(b.dtypes)
        elif k == "totals":
            ok = (a is None) == (b is None) and (a is None or _same(a.as_dict(), b.as_dict()))
        elif k == "closes":
            ok = (a is None) == (b is None) and (a is None or all(np.array_equal(x, y) for x, y in
                                                                   zip(a.arrays().values(), b.arrays().values())))
        elif k == "events" and a is not None and b is not None:
            ok = len(a) == len(b) and all(_same(tuple(float(v) if i == 0 else v for i, v in enumerate(x)),
                                                tuple(float(v) if i == 0 else v for i, v in enumerate(y)))
                                          for x, y in zip(a, b))  # simpy's clock starts at the int 0
        else:
            ok = _same(a, b)
        if not ok:
            out.append(k)
    return out


def both(plan, cfg, policy, n, windows, **kw) -> tuple[list[S.SimResult], list[S.SimResult]]:
    """Each window's result on both backends, as it was when yielded (the reference's event list keeps growing
    as its run goes on, so each is copied then)."""
    ref, got = [], []
    settings = S.RunSettings(**kw)
    policy = own_policy(policy)
    for a, b in zip(S.simulate_windows(plan, cfg, policy, n, windows, replace(settings, backend="python")),
                    S.simulate_windows(plan, cfg, policy, n, windows, replace(settings, backend="native"))):
        for r, out in ((a, ref), (b, got)):
            out.append(replace(r, events=list(r.events)) if r.events is not None else r)
    return ref, got


def windows(plan, *spans: tuple[float, float]) -> list[S.Window]:
    m = plan.mean_session_s
    return [S.Window(d * m, w * m, 30) for d, w in spans]


def assert_same(plan, cfg, policy, n, spans=((1.2, 0.3), (2.5, 0.5)), **kw) -> list[S.SimResult]:
    ref, got = both(plan, cfg, policy, n, windows(plan, *spans), **kw)
    for k, (a, b) in enumerate(zip(ref, got)):
        assert not (d := differences(a, b)), f"{policy} window {k}: {d}"
    return ref


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("node", ["one_gpu", "paper"])
def test_every_policy_on_both_nodes(plans, policy, node):
    cfg = small_cfg(1e9, 1e10)
    if node == "paper":
        cfg = cfg.with_(deployment=PAPER_NODE)
    ref = assert_same(plans["multi"], cfg, policy, 6 if node == "one_gpu" else 2, record_events=True,
                      record_closes=True)
    assert ref[-1].measurement.requests_done > 0


@pytest.mark.parametrize("deployment", [
    dict(landing="stall"), dict(start="aged"), dict(group_ranks=4), dict(group_ranks=2, landing="stall", start="aged"),
    dict(block_tokens=32)], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_every_node_knob(plans, deployment):
    cfg = small_cfg(1e9, 1e10).with_(deployment=replace(DEFAULT.deployment, **deployment))
    for policy in ("hbm_first", "lachesis"):
        assert_same(plans["multi"], cfg, policy, 4)


def test_no_landing_seeds_and_the_single_agent_plan(plans):
    cfg = small_cfg(1e9, 1e10)
    assert_same(plans["single"], cfg, "lachesis", 8, seed=5)
    assert_same(plans["multi"], cfg, "hbm_first", 5, land=False)
    assert_same(_plan("multi", laden_close="arrival"), cfg, "lachesis", 5)


def test_the_oracle_at_a_baseline_runs_close_times(plans):
    plan, cfg = plans["multi"], small_cfg(1e9, 1e10).with_(deployment=PAPER_NODE)
    base = S.simulate(plan, cfg, "hbm_first", 2, settings=S.RunSettings(record_closes=True, backend="python"))
    assert len(base.closes) > 0
    assert_same(plan, cfg, "oracle", 2, clairvoyance=base.closes)


def test_a_run_that_runs_out_of_memory(plans):
    ref = assert_same(plans["multi"], small_cfg(2e7, 1e8), "lachesis", 30)
    assert ref[0].measurement.oom and ref[-1].measurement.oom


def test_a_run_that_misses_the_slo(plans):
    cfg = small_cfg(1e9, 1e10).with_(deployment=PAPER_NODE)
    ref = assert_same(plans["multi"], cfg, "hbm_first", 3)
    assert not ref[-1].measurement.oom and not ref[-1].meets(SLOS["tight"])


def test_a_paper_memory_configuration_at_the_paper_node(plans):
    cfg = DEFAULT.with_(memory=memory_config("2/6"), deployment=PAPER_NODE)
    assert_same(plans["multi"], cfg, "lachesis", 8)


def _memories(run) -> list[tuple[np.ndarray, np.ndarray]]:
    if isinstance(run, S._NativeRun):
        return [tuple(m.free_lists()) for m in run.mems]
    return [tuple(m.alloc._free[t][: m.alloc._top[t]].copy() for t in (0, 1)) for m in run.mems]


def test_every_rank_ends_with_the_same_free_lists(plans):
    """The block ids each write took, seen at the end: every rank's free lists, bottom to top."""
    plan = plans["multi"]
    cfg = small_cfg(1e9, 1e10).with_(deployment=PAPER_NODE)
    w = windows(plan, (1.5, 0.3))
    setup = S.RunSetup.make(plan, cfg, "lachesis", 3, S.RunSettings(), w)
    ref = S._Run(setup)
    obs = ref.start()
    ref.finish_window(0, obs[0])
    got = S._backend(setup)
    assert isinstance(got, S._NativeRun)
    obs = got.start()
    got.finish_window(0, obs[0])
    for (a_h, a_f), (b_h, b_f) in zip(_memories(ref), _memories(got)):
        assert np.array_equal(a_h, b_h) and np.array_equal(a_f, b_f)


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["multi", "single"]), sessions=st.integers(5, 9), scale=st.integers(3, 20),
       n=st.integers(1, 12), ranks=st.sampled_from([1, 2, 8]), policy=st.sampled_from(POLICIES),
       hbm=st.floats(1e8, 2e9), seed=st.integers(0, 3), stall=st.booleans(), aged=st.booleans())
@example(kind="multi", sessions=5, scale=3, n=1, ranks=8, policy="oracle", hbm=1e8, seed=0, stall=True, aged=True)
def test_small_random_plans(kind, sessions, scale, n, ranks, policy, hbm, seed, stall, aged):
    plan = _plan(kind, sessions, scale)
    dep = replace(DEFAULT.deployment, group_ranks=ranks, landing="stall" if stall else "overlap",
                  start="aged" if aged else "empty")
    assert_same(plan, small_cfg(hbm, 10 * hbm).with_(deployment=dep), policy, n, spans=((1.0, 0.25),), seed=seed)


def test_backend_choice_and_the_reference_fallback(plans, monkeypatch):
    """A step function of one's own runs on the reference (a user's own policy runs natively, called back); without
    the core, "auto" falls back (said once, in one line) and "native" is refused naming why; an unknown backend is
    refused."""
    plan, cfg = plans["multi"], small_cfg()
    with pytest.raises(ValueError, match="backend must be one of"):
        S.simulate(plan, cfg, "hbm_first", 2, settings=S.RunSettings(backend="fast"))
    with pytest.raises(ValueError, match="does not cover"):
        S.simulate(plan, cfg, "hbm_first", 2, settings=S.RunSettings(backend="native", step_fn=lambda *a: 0.01))
    own_step = S.RunSetup.make(plan, cfg, "hbm_first", 2, S.RunSettings(step_fn=lambda *a: 0.01), [S.Window(1, 0)])
    assert isinstance(S._backend(own_step), S._Run)
    monkeypatch.setattr(native, "core", lambda: None)
    ref = S.simulate(plan, cfg, "hbm_first", 2)
    assert ref.measurement.requests_done > 0
    with pytest.raises(ValueError, match="not built"):
        S.simulate(plan, cfg, "hbm_first", 2, settings=S.RunSettings(backend="native"))


def test_the_missing_core_is_said_once_in_one_line(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_core(name, globals=None, locals=None, fromlist=(), level=0):
        if fromlist and "_core" in fromlist:
            raise ImportError("no _core")
        return real(name, globals, locals, fromlist, level)

    native.core.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_core)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert native.core() is None and native.core() is None
        assert len(caught) == 1 and "\n" not in str(caught[0].message)
        assert "Python reference" in str(caught[0].message)
    finally:
        monkeypatch.undo()
        native.core.cache_clear()
    assert native.core() is not None


def _far_apart_plan(n_req: int = 3, gap_s: float = 1e6) -> Plan:
    """One session of one agent whose requests are ``gap_s`` apart (the user's delay), each writing and reading a
    little of one segment: a run reaches millions of simulated seconds within a few requests."""
    i = np.arange(n_req)
    agent = AgentPlan("a", "lead", i, i.tolist())
    return Plan(n_req=n_req, out_tokens=np.full(n_req, 100), t_tools=np.zeros(n_req), t_obs=np.zeros(n_req),
                t_user=np.full(n_req, gap_s), w_ptr=np.arange(n_req + 1), w_seg=np.zeros(n_req, np.int64),
                w_tok=np.full(n_req, 500, np.int64), r_ptr=np.arange(n_req + 1), r_seg=np.zeros(n_req, np.int64),
                r_tok=500 * (i + 1), ca_ptr=np.zeros(n_req + 1, np.int64), ca_seg=np.zeros(0, np.int64),
                ce_ptr=np.r_[np.zeros(n_req, np.int64), 1], ce_seg=np.zeros(1, np.int64),
                seg_ids=np.array(["s:0"], object), seg_class=np.array(["lead"], object),
                seg_role=np.array(["lead"], object), seg_tokens=np.array([500 * n_req]), seg_reads=np.array([0]),
                seg_key=np.array([np.nan]), sessions=["s"], roots={"s": [agent]}, fingerprint="far-apart")


def test_requests_a_million_seconds_apart_end():
    """Past ≈4e6 s of simulated time a step's last fraction is below the clock's resolution (now + left * tau ==
    now): such a decoder finishes at once on both backends (decode.DecodeEngine._finished), where the timer used to
    land on the same instant forever.  An alarm stops a hang (the native loop checks for signals)."""
    import signal

    def hung(*_):
        raise TimeoutError("the run did not end: the decode timer lands on the same instant forever")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        ref, got = both(_far_apart_plan(), DEFAULT, "hbm_first", 1, [S.Window(2e7, 0.0, 50)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not (d := differences(ref[0], got[0])), d
    assert ref[0].point.sim_s == 2e7 and ref[0].measurement.requests_done == 20


def test_ctrl_c_stops_a_native_window_promptly(plans):
    """An interrupt (Ctrl-C) during a native window acts within a few thousand events: KeyboardInterrupt, at once."""
    import _thread
    import threading
    import time

    plan = plans["multi"]
    long_window = [S.Window(20_000 * plan.mean_session_s, 0.0, 10)]  # minutes of work
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(S.simulate_windows(plan, small_cfg(1e9, 1e10), "lachesis", 6, long_window,
                                    S.RunSettings(backend="native")))
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("native_class", ["DeterministicOnly", None])
def test_a_new_builtin_policy_in_its_files(plans, monkeypatch, native_class):
    """docs/design.md §5, "Adding a built-in policy", done for a toy: its class in policies.POLICIES and its entry
    in the registry are all the package needs; a spec names it, the figures draw it in its colour, and both
    backends run it alike, the native one by the class its entry names (a rule it shares) or, with none, by
    calling it back."""
    from lachesis import plotting
    from lachesis.memory import policies
    from lachesis.registry import POLICY_BY_NAME, PolicyEntry

    class ShortLivedOnly:
        """The toy: short-lived classes to HBM, the rest to HBF (DeterministicOnly's rule, under its own name)."""

        name = "short_lived_only"
        frees_at_boundary = True

        def tier(self, seg, view):
            return policies._deterministic(seg)

    monkeypatch.setitem(policies.POLICIES, ShortLivedOnly.name, ShortLivedOnly)
    monkeypatch.setitem(POLICY_BY_NAME, ShortLivedOnly.name,
                        PolicyEntry("short_lived_only", "short-lived only", "short-lived only (toy)", "#123456", "P",
                                    native_class))
    assert isinstance(policies.as_policy("short_lived_only"), ShortLivedOnly)
    assert (plotting.policy_label("short_lived_only"), plotting.policy_color("short_lived_only"),
            plotting.policy_marker("short_lived_only")) == ("short-lived only (toy)", "#123456", "P")
    assert native.policy("short_lived_only", plans["multi"]).calls_python == (native_class is None)
    toy = assert_same(plans["multi"], small_cfg(1e8, 1e10), "short_lived_only", 6)
    same = assert_same(plans["multi"], small_cfg(1e8, 1e10), "deterministic", 6)
    assert differences(toy[-1], same[-1]) == ["policy"] and toy[-1].point.policy == "short_lived_only"
