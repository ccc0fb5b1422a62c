"""Decode-node simulator: closed loop, boundaries, byte conservation, lifetime, differential vs reference."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from reference_blocksim import reference_replay
from sim_fixtures import const_step, multi_agent_trace, single_agent_trace, small_cfg

from lachesis.analysis.segments import recover
from lachesis.config import DEFAULT, MemoryConfig, StackSpec
from lachesis.node import endurance
from lachesis.node import simulator as S
from lachesis.node.decode import DecodeEngine
from lachesis.node.node_memory import Memory
from lachesis.node.plan import build_plan

POLICIES = ("hbm_first", "deterministic", "lachesis")


@pytest.fixture(scope="module")
def single_plan():
    tr = single_agent_trace(6)
    seg = recover(tr, seed=0)
    return build_plan(tr, seg)


def test_closed_loop_keeps_n_sessions_live(multi_plan):
    n = 7
    r = S.simulate(multi_plan, small_cfg(), "lachesis", n, settings=S.RunSettings(seed=1, step_fn=const_step))
    after = r.series[r.series["t_s"] >= r.point.warmup_s]
    assert (after["sessions_live"] == n).all()
    assert r.measurement.sessions_done > n  # sessions were replaced (the trace cycles)


@pytest.mark.parametrize("policy", ["deterministic", "lachesis"])
def test_boundary_frees_leave_no_cache(multi_plan, policy):
    r = S.simulate(multi_plan, small_cfg(hbm_bytes=5e9), policy, 6, settings=S.RunSettings(seed=0, step_fn=const_step))
    assert r.series["cached_hbm_bytes"].max() == 0 and r.series["cached_hbf_bytes"].max() == 0


def test_hbm_first_caches_until_pressure(multi_plan):
    # large HBM: closed segments stay cached (never freed at the boundary) ...
    big = S.simulate(multi_plan, small_cfg(hbm_bytes=5e9, hbf_kv_bytes=5e10), "hbm_first", 6,
                     settings=S.RunSettings(seed=0, step_fn=const_step))
    assert big.series["cached_hbm_bytes"].iloc[-1] > 0
    assert big.totals.evicted_blocks == 0
    # ... and with a small memory they are evicted under pressure, so the run still fits.
    small = S.simulate(multi_plan, small_cfg(hbm_bytes=1e8, hbf_kv_bytes=2e9), "hbm_first", 6,
                       settings=S.RunSettings(seed=0, step_fn=const_step))
    assert not small.measurement.oom and small.totals.evicted_blocks > 0


@pytest.mark.parametrize("plan_name", ["multi_plan", "single_plan"])
def test_bytes_written_identical_across_policies(plan_name, request):
    plan = request.getfixturevalue(plan_name)
    runs = {p: S.simulate(plan, small_cfg(), p, 5,
                          settings=S.RunSettings(seed=3, step_fn=const_step, land=False)) for p in POLICIES}
    tot = {p: int(r.totals.tokens.sum()) for p, r in runs.items()}
    assert len(set(tot.values())) == 1, tot
    cls = {p: {c: int(v.sum()) for c, v in r.totals.tokens_by_class.items()} for p, r in runs.items()}
    assert cls["hbm_first"] == cls["deterministic"] == cls["lachesis"]
    # and the placement differs: the deterministic path keeps the lead out of HBM
    long_lived = "lead" if plan_name == "multi_plan" else "reasoning_stripped"
    assert runs["deterministic"].totals.tokens_by_class[long_lived][0] == 0
    assert runs["hbm_first"].totals.tokens_by_class[long_lived][0] > 0


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("plan_name", ["multi_plan", "single_plan"])
def test_differential_against_reference(plan_name, policy, request):
    """The simulator's per-tier (and per-class) write bytes equal the per-block oracle on the same events."""
    plan = request.getfixturevalue(plan_name)
    cfg = small_cfg(hbm_bytes=1.5e8, hbf_kv_bytes=4e9)
    r = S.simulate(plan, cfg, policy, 6, settings=S.RunSettings(seed=0, record_events=True))
    assert r.events and not r.measurement.oom
    mem = Memory(plan, cfg, policy)
    ref = reference_replay(r.events, policy, mem.alloc.hbm_blocks, mem.alloc.hbf_blocks, cfg.deployment.block_tokens)
    np.testing.assert_array_equal(r.totals.tokens, ref.tokens)
    for c, v in r.totals.tokens_by_class.items():
        np.testing.assert_array_equal(v, ref.tokens_by_class.get(c, np.zeros(2)))


def test_lifetime_monotone_in_hbf_writes(multi_plan):
    cfg = DEFAULT
    rates = np.array([1e6, 1e7, 1e8])
    life = [endurance.hbf_lifetime_years(cfg.memory, r, cfg.endurance) for r in rates]
    assert life[0] > life[1] > life[2]
    runs = [S.simulate(multi_plan, small_cfg(hbm_bytes=h), "deterministic", 6,
                       settings=S.RunSettings(seed=0, step_fn=const_step))
            for h in (1e8, 5e9)]
    # more HBM -> fewer HBF bytes -> longer life on the same HBF
    assert runs[1].lifetime.bytes_by_tier["hbf"] < runs[0].lifetime.bytes_by_tier["hbf"]
    assert runs[1].lifetime.lifetime_years > runs[0].lifetime.lifetime_years


def test_step_time_advances_in_aggregate():
    """All decoders advance together; a decoder's finish time is tokens × step time (constant step)."""
    import simpy

    env = simpy.Environment()
    eng = DecodeEngine(env, lambda b, *a: 0.01 * b)
    done = {}

    def req(name, start, tokens):
        yield env.timeout(start)
        yield eng.join(tokens, 0, 0, 0)
        done[name] = env.now

    env.process(req("a", 0.0, 10))
    env.process(req("b", 0.0, 20))
    env.run()
    # both decode at 20 ms/step for 10 steps (0.2 s), then b alone at 10 ms/step for 10 more (0.1 s)
    assert done["a"] == pytest.approx(0.2)
    assert done["b"] == pytest.approx(0.3)
    w = np.array(eng.tpot_w)
    assert w.sum() == pytest.approx(30)  # tokens decoded


def test_weighted_p99():
    x = np.array([0.01, 0.1])
    assert S.weighted_quantile(x, np.array([99.5, 0.5]), 0.99) == 0.01
    assert S.weighted_quantile(x, np.array([98, 2]), 0.99) == 0.1


def test_build_plan_rejects_unknown_segment(multi_plan):
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    seg.writes = seg.writes.copy()
    seg.writes.loc[0, "segment_id"] = "nope"
    with pytest.raises(ValueError, match="writes.segment_id"):
        build_plan(tr, seg)


def test_same_seed_same_numbers(multi_plan):
    a = S.simulate(multi_plan, small_cfg(), "lachesis", 5, settings=S.RunSettings(seed=2))
    b = S.simulate(multi_plan, small_cfg(), "lachesis", 5, settings=S.RunSettings(seed=2))
    def same(r):  # NaN (an unsettled rate) equals itself
        return json.dumps(r.to_dict(), sort_keys=True, default=str)

    assert same(a) == same(b)


def test_laden_close_at_last_read_frees_hbm_earlier():
    """Closing reasoning-laden segments at their last read (not after the user delay) turns HBM over faster."""
    tr = single_agent_trace(6)
    seg = recover(tr, seed=0)
    cfg = small_cfg(hbm_bytes=6e7, hbf_kv_bytes=3e9)
    share = {}
    for mode in ("arrival", "last_read"):
        plan = build_plan(tr, seg, laden_close=mode)
        r = S.simulate(plan, cfg, "deterministic", 6, settings=S.RunSettings(seed=0, step_fn=const_step, land=False))
        share[mode] = r.totals.tokens_by_class["reasoning_laden"][0] / r.totals.tokens_by_class["reasoning_laden"].sum()
    assert share["last_read"] > share["arrival"]
    with pytest.raises(ValueError, match="laden_close"):
        build_plan(tr, seg, laden_close="later")


@pytest.mark.parametrize("policy", ["hbm_first", "lachesis"])
def test_windows_of_one_run_equal_separate_runs(multi_plan, policy):
    """A run observed through a short and a long window gives, for each, exactly what a separate run
    with that window alone gives (the capacity search continues N*'s short run into the lifetime run)."""
    m = multi_plan.mean_session_s
    short, long_ = S.Window(0.7 * m, 0.2 * m, 50), S.Window(2.5 * m, 0.5 * m, 200)
    a, b = list(S.simulate_windows(multi_plan, small_cfg(), policy, 6, [short, long_], settings=S.RunSettings(seed=4)))
    for got, w in ((a, short), (b, long_)):
        ref = S.simulate(multi_plan, small_cfg(), policy, 6, duration_s=w.duration_s, warmup_s=w.warmup_s,
                         n_samples=w.n_samples, settings=S.RunSettings(seed=4))
        np.testing.assert_equal(got.to_dict(), ref.to_dict())  # NaN == NaN here
        pd.testing.assert_frame_equal(got.series, ref.series)
    assert b.measurement.requests_done > a.measurement.requests_done
    with pytest.raises(ValueError, match="non-decreasing"):
        next(S.simulate_windows(multi_plan, small_cfg(), policy, 6, [long_, short]))


def _result(**kw):
    base = dict(n_sessions=1, policy="x", sim_s=1.0, warmup_s=0.0, p99_tpot_s=0.01, mean_tpot_s=0.01, p99_ttft_s=0.5,
                oom=False, requests_done=1, sessions_done=0, max_batch=1, hbf_write_rate=1.0, settled=True,
                settled_at_s=0.5, lifetime_years=1.0, bytes_by_tier={}, bytes_by_class_tier={}, live_peak={},
                live_mean={})
    d = {**base, **kw}

    def part(cls):
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    return S.SimResult(part(S.OperatingPoint), part(S.Measurement), part(S.Lifetime))


def test_a_run_that_served_nothing_fails_the_slo():
    slo = DEFAULT.slo
    assert _result().meets(slo)
    assert not _result(p99_tpot_s=float("nan")).meets(slo)  # no decode step finished in the window
    assert not _result(p99_ttft_s=float("nan")).meets(slo)  # no request admitted in the window
    assert not _result(oom=True).meets(slo)


def test_no_lifetime_for_an_infeasible_run(multi_plan):
    # out of memory: no lifetime (never inf)
    oom = S.simulate(multi_plan, small_cfg(hbm_bytes=1e6, hbf_kv_bytes=1e6), "lachesis", 6,
                     settings=S.RunSettings(seed=0, step_fn=const_step))
    assert oom.measurement.oom and np.isnan(oom.lifetime.lifetime_years) and not oom.meets(DEFAULT.slo)
    # a window in which no decode step finished: NaN p99, no lifetime
    m = multi_plan.mean_session_s
    idle = S.simulate(multi_plan, small_cfg(), "lachesis", 1, duration_s=1e-3 * m, warmup_s=1e-3 * m,
                      settings=S.RunSettings(seed=0, step_fn=const_step))
    assert np.isnan(idle.measurement.p99_tpot_s) and np.isnan(idle.lifetime.lifetime_years)
    assert not idle.meets(DEFAULT.slo)


@pytest.mark.parametrize("kw, name", [
    (dict(n_sessions=2.5), "n_sessions"), (dict(n_sessions=0), "n_sessions"), (dict(n_sessions=True), "n_sessions"),
    (dict(seed=-1), "seed"), (dict(seed=1.5), "seed"), (dict(n_samples=0), "n_samples"),
    (dict(duration_s=float("inf")), "duration_s"), (dict(warmup_s=-1.0), "warmup_s"),
    (dict(duration_s=1.0, warmup_s=2.0), "warmup_s"),
])
def test_argument_errors_name_the_argument(multi_plan, kw, name):
    args = dict(n_sessions=2, seed=0) | kw
    n, seed = args.pop("n_sessions"), args.pop("seed")
    with pytest.raises(ValueError, match=f"simulate: {name}"):
        S.simulate(multi_plan, small_cfg(), "lachesis", n, **args, settings=S.RunSettings(seed=seed))


def test_model_whose_weights_exceed_the_memory_is_refused(multi_plan):
    mem = MemoryConfig("1 GB of HBF", 1, 1, hbm=StackSpec("h", 2e8, 1.6e12, 1.6e12),
                       hbf=StackSpec("f", 1e9, 1.6e12, 16e9))
    with pytest.raises(ValueError, match="'Llama-4-Maverick' does not fit memory configuration '1 GB of HBF'"):
        S.simulate(multi_plan, DEFAULT.with_(memory=mem), "lachesis", 2)
