"""The predictive path's size estimate (``Lachesis(size_estimate=...)``, knob ``size_estimate``): what
each value counts a ranked worker for, by hand; the fast table against the per-block reference; and that
the knob moves Lachesis's runs only."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_blocksim import compare_to_reference as _compare
from reference_blocksim import reference_replay
from sim_fixtures import event_lists, multi_agent_trace, random_worker_events, small_cfg

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.config import Config
from lachesis.evaluation import grid, knobs
from lachesis.memory.allocator import SegmentTable
from lachesis.memory.free_lists import TieredAllocator
from lachesis.memory.policies import SIZE_ESTIMATES, Lachesis, as_policy, get_policy
from lachesis.memory.protocol import SegmentInfo
from lachesis.node import simulator as sim
from lachesis.node.plan import build_plan


def table(policy, hbm=12, hbf=100) -> SegmentTable:
    return SegmentTable(TieredAllocator(hbm, hbf), policy, block_tokens=1)


def tiers(t: SegmentTable, sid: str) -> list[int]:
    return t.allocator.tier_of(t.lookup.blocks_of(sid)).tolist()


def hand_worked(size_estimate: str) -> SegmentTable:
    """HBM of 12 blocks; two finished workers of 4 and 8 blocks (mean 6); then worker a (rank 1) spawns
    with 2 blocks and grows to 8, b (rank 2) and c (rank 3) spawn with 2 blocks each."""
    t = table(Lachesis(size_estimate))
    for i, n in enumerate([4, 8]):
        t.add_write(f"old{i}", n, seg_class="worker", rank_key=9.0)
        t.close(f"old{i}")
    assert t.stats.mean_worker_blocks == 6.0
    t.add_write("a", 2, seg_class="worker", rank_key=1.0)  # 6 | 2 | 6 <= 12 under every estimate
    t.add_write("a", 6)  # a grows: 8 | 8 | 6 (its spawn size) <= 12
    t.add_write("b", 2, seg_class="worker", rank_key=2.0)
    t.add_write("c", 2, seg_class="worker", rank_key=3.0)
    return t


def test_hand_worked_which_worker_takes_hbm_under_each_estimate():
    """a (8 blocks held) ranks first, b second, c third; what b and c count for decides their tier.

    * mean_floor: b: 8 + max(2, 6) = 14 > 12 -> HBF; c: 8 + 6 + 6 = 20 -> HBF.  HBM 8/12 full.
    * held:       b: 8 + 2 = 10 <= 12 -> HBM;     c: 8 + 2 + 2 = 12 -> HBM.    HBM 12/12 full.
    * spawn:      b: 6 + 6 = 12 <= 12 -> HBM (a counts at its spawn size 6, not the 8 it holds);
                  c: 6 + 6 + 6 = 18 -> HBF.                                    HBM 10/12 full."""
    want = {"mean_floor": ([1, 1], [1, 1], 8), "held": ([0, 0], [0, 0], 12), "spawn": ([0, 0], [1, 1], 10)}
    for est, (b, c, hbm_used) in want.items():
        t = hand_worked(est)
        assert tiers(t, "a") == [0] * 8, est
        assert (tiers(t, "b"), tiers(t, "c"), t.view.used(0)) == (b, c, hbm_used), est


def test_held_outranks_a_grown_worker_by_its_own_growth_and_spawn_keeps_its_size():
    """After the hand-worked case, b writes 2 more blocks under ``held``: a 8 + b 4 = 12 fits, but HBM
    is full (c holds the rest), so the allocator spills; under ``spawn`` b still counts 6 whatever it
    grows to, so its growth keeps asking for HBM while a's 6 + its 6 fit."""
    t = hand_worked("held")
    info = SegmentInfo("b", "worker", rank_key=2.0, n_blocks=2, new_blocks=2)
    assert Lachesis.admitted(info, t.view, "held")
    assert not Lachesis.admitted(SegmentInfo("c", "worker", rank_key=3.0, n_blocks=2, new_blocks=1), t.view, "held")
    s = hand_worked("spawn")
    s.add_write("b", 30)  # b now holds 32 blocks, still counted at 6
    assert Lachesis.admitted(SegmentInfo("b", "worker", rank_key=2.0, n_blocks=32, new_blocks=1), s.view, "spawn")
    m = hand_worked("mean_floor")
    assert not Lachesis.admitted(SegmentInfo("b", "worker", rank_key=2.0, n_blocks=2, new_blocks=1), m.view,
                                 "mean_floor")


def test_default_is_held_and_the_spec_round_trips():
    assert Lachesis().size_estimate == "held" == SIZE_ESTIMATES[0] and Lachesis().name == "lachesis"
    for est in SIZE_ESTIMATES[1:]:
        p = as_policy(f"lachesis:size_estimate={est}")
        assert p.size_estimate == est and p.name == f"lachesis:size_estimate={est}"
        assert as_policy(p.name).name == p.name
    assert as_policy("lachesis:size_estimate=held").name == "lachesis"
    with pytest.raises(ValueError, match="size_estimate must be one of"):
        as_policy("lachesis:size_estimate=mean")
    with pytest.raises(ValueError, match="must be a number"):  # other policies' knobs stay numbers
        as_policy("rho_threshold:quantile=held")


def test_the_registry_knob_reaches_lachesis_only():
    assert knobs.KNOBS["size_estimate"].default == "held" and "size_estimate" in knobs.OVERRIDES
    assert "size_estimate" in knobs.STUDY
    o = knobs.canonical({"size_estimate": "mean_floor"})
    assert knobs.apply_policy("lachesis", o) == "lachesis:size_estimate=mean_floor"
    with pytest.raises(ValueError, match="'spawn' in the spec but 'mean_floor' in the point's overrides"):
        knobs.apply_policy("lachesis:size_estimate=spawn", o)  # not the spec's value run under the override's label
    assert knobs.apply_policy("lachesis:size_estimate=mean_floor", o) == "lachesis:size_estimate=mean_floor"
    assert knobs.apply_policy("lachesis", knobs.canonical({"size_estimate": "held"})) == "lachesis"
    for other in ("hbm_first", "deterministic", "oracle", "rho_threshold:quantile=0.25"):
        assert knobs.apply_policy(other, o) == other
    cfg = Config()
    assert knobs.apply(cfg, o) == cfg  # no run input but the policy changes
    with pytest.raises(ValueError, match="size_estimate"):
        knobs.canonical({"size_estimate": "mean"})
    pt = grid.Point("multi_agent", "4/4", "Llama-4-Maverick", "tight", "lachesis", overrides=o)
    assert pt.run_policy() == "lachesis:size_estimate=mean_floor" and pt.policy == "lachesis"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=event_lists(classes=("worker",) * 4 + ("reviewer", "reasoning_laden")), hbm=st.integers(0, 24),
       bt=st.integers(1, 4), est=st.sampled_from(SIZE_ESTIMATES[1:]))
def test_fast_equals_reference_for_each_estimate(events, hbm, bt, est):
    """The segment table's replay of ``mean_floor`` and ``spawn`` equals the naive per-block reference."""
    _compare(events, f"lachesis:size_estimate={est}", hbm, 400, bt)


@pytest.mark.parametrize("est", SIZE_ESTIMATES)
def test_policy_object_through_the_reference_view(est):
    """The policy object driven through the reference's naive view (its slow path) equals the reference's
    own naive rule and the fast table, on a long worker-heavy trace."""
    from lachesis.memory.replay import replay_events

    events = random_worker_events(1, 600)
    spec = f"lachesis:size_estimate={est}"
    a = reference_replay(events, spec, 20, 600, 4)
    b = reference_replay(events, Lachesis(est), 20, 600, 4)
    c = replay_events(events, get_policy(spec), 20, 600, 4)
    for x in (b, c):
        assert x.tokens.tolist() == a.tokens.tolist() and x.blocks.tolist() == a.blocks.tolist()


def test_estimates_differ_on_a_long_trace():
    """On the same trace the three estimates place differently; HBM holds most under ``held``."""
    from lachesis.memory.replay import replay_events

    events = random_worker_events(3, 800, p_close=0.25, p_new=0.3, max_tokens=40, reviewers=False,
                                  integer_keys=False)
    hbm = {est: int(replay_events(events, f"lachesis:size_estimate={est}", 64, 4000, 4).tokens[0])
           for est in SIZE_ESTIMATES}
    assert len(set(hbm.values())) == 3 and hbm["held"] == max(hbm.values())


@pytest.fixture(scope="module")
def multi_plan():
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg))


def _run(plan, policy, cfg):
    r = sim.simulate(plan, cfg, policy, 7, settings=sim.RunSettings(seed=1, step_fn=lambda *a, **k: 0.02))
    return r.lifetime.bytes_by_tier["hbm"], r.lifetime.bytes_by_tier["hbf"], r.point.live_mean["hbm"]


def test_simulated_runs_move_with_the_knob_for_lachesis_only(multi_plan):
    """HBM-first and w/o predictive path run the same whatever the knob (the sweep leaves their spec
    alone); Lachesis's runs differ where the estimates differ."""
    cfg = small_cfg(hbm_bytes=2e8)  # about 1000 tokens of HBM: the workers contend for it
    runs = {}
    for est in SIZE_ESTIMATES:
        o = knobs.canonical({"size_estimate": est})
        for pol in ("hbm_first", "deterministic", "lachesis"):
            runs[est, pol] = _run(multi_plan, knobs.apply_policy(pol, o), cfg)
    for pol in ("hbm_first", "deterministic"):
        assert len({runs[est, pol] for est in SIZE_ESTIMATES}) == 1, pol
    assert runs["held", "lachesis"] == _run(multi_plan, "lachesis", cfg)
    assert len({runs[est, "lachesis"] for est in SIZE_ESTIMATES}) == 3  # measured: each places differently
    assert all(math.isfinite(x) for v in runs.values() for x in v)
