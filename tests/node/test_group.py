"""The expert-parallel decode group (§5.2): lockstep steps, landings that stall the group, an aged cache."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import simpy
from sim_fixtures import multi_agent_trace
from test_simulator import small_cfg

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS
from lachesis.node import simulator as S
from lachesis.node import step_cost
from lachesis.node.decode import DecodeEngine
from lachesis.node.plan import build_plan


def node(cfg=None, **changes):
    cfg = cfg or DEFAULT
    return cfg.with_(deployment=replace(cfg.deployment, **changes))


@pytest.fixture(scope="module")
def multi_plan():
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg))


def test_a_landing_on_one_rank_lengthens_the_other_ranks_tpot():
    """Hand-worked: rank 0 decodes 10 tokens at 10 ms a step; at 20 ms rank 1 lands KV for 50 ms.  The
    group waits, so rank 0's request ends at 0.02 + 0.05 + 8 × 0.01 = 0.15 s, and one of its steps lasts
    60 ms.  With landings overlapping decode it ends at 0.10 s."""
    def run(stall: bool) -> tuple[float, list[float]]:
        env = simpy.Environment()
        eng = DecodeEngine(env, lambda b, *a: 0.01, ranks=2)
        done = {}

        def decoder():
            yield eng.join(10, 0.0, 0.0, 0.0, rank=0)
            done["t"] = env.now

        def lander():
            yield env.timeout(0.02)
            wait = eng.stall(1, 0.05) if stall else 0.05
            assert wait == pytest.approx(0.05)
            yield env.timeout(wait)

        env.process(decoder())
        env.process(lander())
        env.run()
        return done["t"], eng.tpot

    t, tpot = run(stall=True)
    assert t == pytest.approx(0.15)
    assert max(tpot) == pytest.approx(0.06)
    t, tpot = run(stall=False)
    assert t == pytest.approx(0.10)
    assert max(tpot) == pytest.approx(0.01)


def test_landings_on_one_rank_queue_and_on_two_ranks_overlap():
    env = simpy.Environment()
    eng = DecodeEngine(env, lambda b, *a: 0.01, ranks=2)
    assert eng.stall(0, 0.05) == pytest.approx(0.05)
    assert eng.stall(0, 0.05) == pytest.approx(0.10)  # behind the first on the same device
    assert eng.stall(1, 0.03) == pytest.approx(0.03)  # another device: in parallel
    assert eng.pause_end == pytest.approx(0.10)


def test_the_group_step_is_the_slowest_rank_plus_experts_over_the_groups_tokens():
    for mem in MEMORY_CONFIGS:
        for model in MODELS.values():
            one = step_cost.step_model(mem, model, DEFAULT.deployment)
            group = step_cost.group_step(mem, model, DEFAULT.deployment)
            inputs = (64.0, 4e11, 2e11, 1e7, 1e6)
            # identical ranks: the one-GPU step (the other ranks are its copies)
            assert group([inputs[0]] * 8, [inputs[1:]] * 8) == pytest.approx(one.scalar(*inputs), rel=1e-12)
            # one busy rank, seven idle: its own operators, and the experts at the group's mean batch
            busy = group([64.0] + [0.0] * 7, [inputs[1:]] + [(0.0,) * 4] * 7)
            assert busy == pytest.approx(group.rank(*inputs) + group.experts(8.0))
            assert busy < one.scalar(*inputs)  # fewer tokens reach the experts than when every rank is busy


def test_group_ranks_share_the_load_per_gpu(multi_plan):
    """``n_sessions`` is per GPU: a group of 2 serves twice as many sessions, and reports the per-GPU mean."""
    cfg = node(small_cfg(hbm_bytes=5e9, hbf_kv_bytes=5e10), group_ranks=2, landing="overlap", start="empty")
    r = S.simulate(multi_plan, cfg, "lachesis", 3, settings=S.RunSettings(seed=0))
    after = r.series[r.series["t_s"] >= r.point.warmup_s]
    assert r.point.ranks == 2 and (after["sessions_live"] == 3).all()
    one = S.simulate(multi_plan, node(cfg, group_ranks=1), "lachesis", 3, settings=S.RunSettings(seed=0))
    assert r.measurement.requests_done > 1.5 * one.measurement.requests_done
    assert r.point.kv_read_per_step_bytes > 0 and r.point.live_short_kv_bytes > 0
    assert r.point.hbm_over_live_short == pytest.approx(cfg.memory.hbm_bytes / r.point.live_short_kv_bytes)


def test_landing_stalls_raise_tpot_in_a_group(multi_plan):
    cfg = node(small_cfg(hbm_bytes=5e9, hbf_kv_bytes=5e10), group_ranks=4, start="empty")
    stall = S.simulate(multi_plan, node(cfg, landing="stall"), "hbm_first", 4, settings=S.RunSettings(seed=0))
    overlap = S.simulate(multi_plan, node(cfg, landing="overlap"), "hbm_first", 4, settings=S.RunSettings(seed=0))
    assert stall.measurement.stalled_s > 0 and overlap.measurement.stalled_s == 0
    assert stall.measurement.mean_tpot_s > overlap.measurement.mean_tpot_s


def test_an_aged_start_fills_the_cache_and_counts_no_write(multi_plan):
    cfg = small_cfg(hbm_bytes=5e8, hbf_kv_bytes=5e9)
    aged = S.simulate(multi_plan, node(cfg, start="aged"), "hbm_first", 4, settings=S.RunSettings(seed=0))
    empty = S.simulate(multi_plan, node(cfg, start="empty"), "hbm_first", 4, settings=S.RunSettings(seed=0))
    first = aged.series.iloc[0]
    assert first["cached_hbm_bytes"] > 0 and first["cached_hbf_bytes"] > 0
    assert aged.lifetime.in_regime and aged.lifetime.evicted_blocks > 0
    assert "reasoning_stripped" not in aged.lifetime.bytes_by_class_tier  # the pseudo-segments are not trace KV
    assert aged.series["hbf_written_bytes"].iloc[0] < 1e9  # nor written bytes
    # HBM-first on an aged cache writes to HBM as its LRU queue hands back HBM blocks
    assert aged.lifetime.bytes_by_tier["hbm"] > 0
    assert empty.lifetime.in_regime == (empty.lifetime.evicted_blocks > 0)
    # a policy that frees at the boundary has no cache to age: identical runs
    a = S.simulate(multi_plan, node(cfg, start="aged"), "lachesis", 4, settings=S.RunSettings(seed=0))
    b = S.simulate(multi_plan, node(cfg, start="empty"), "lachesis", 4, settings=S.RunSettings(seed=0))
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def test_the_node_is_a_set_of_knobs():
    from lachesis.evaluation import grid, knobs

    p = grid.Point("multi_agent", "4/4", "Llama-4-Maverick", "tight", "lachesis",
                    overrides={"group_ranks": 8, "landing": "stall", "node_start": "aged"})
    dep = p.config().deployment
    assert (dep.group_ranks, dep.landing, dep.start) == (8, "stall", "aged")
    assert grid.Point("multi_agent", "4/4", "Llama-4-Maverick", "tight", "lachesis").config().deployment \
        == DEFAULT.deployment
    for bad in ({"group_ranks": 9}, {"group_ranks": 2.5}, {"landing": "sometimes"}, {"node_start": "warm"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            grid.Point("multi_agent", "4/4", "Llama-4-Maverick", "tight", "lachesis", overrides=bad).config()
    # the group's size and the landing are studied at the deployment's held load (a row over the SLO says so); the
    # cache's start is left to benchmarks/group_node.py (docs/design.md §5, "Load")
    assert {"group_ranks", "landing"} <= set(knobs.STUDY) and "node_start" not in knobs.STUDY
    # the named node is the same set of knobs: the group in lockstep, an aged cache, landings at their default
    paper = grid.Point("multi_agent", "4/4", "Llama-4-Maverick", "tight", "lachesis", overrides=knobs.node("paper"))
    assert paper.config().deployment.landing == "overlap" and paper == grid.Point(
        "multi_agent", "4/4", "Llama-4-Maverick", "tight", "lachesis",
        overrides={"group_ranks": 8, "node_start": "aged"})
    assert knobs.node("one_gpu") == ()
    with pytest.raises(ValueError, match="node: unknown 'two'"):
        knobs.node("two")
