"""Lifetime over a group's ranks (knob ``lifetime_over_ranks``: mean, the default, or worst)."""

from __future__ import annotations

import math

import pytest
from sim_fixtures import multi_agent_trace

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.config import Endurance, memory_config
from lachesis.evaluation import grid, knobs
from lachesis.evaluation import sweep as W
from lachesis.node import capacity, endurance
from lachesis.node.plan import build_plan


def test_two_ranks_by_hand():
    """Rank 0 writes 3 GB to HBF in the window, rank 1 writes 1 GB: the mean rank writes 2 GB, the worst
    1.5× that.  At a mean rate of 1 GB/s on 1/7 (7 stacks × 512 GB × 100,000 P/E, WA 1.02):
    mean  = 7 × 512e9 × 1e5 / (1.02 × 1e9) / 31,557,600 s = 11.1343… years,
    worst = the same at 1.5 GB/s = 7.4229… years."""
    assert endurance.rank_spread([3e9, 1e9]) == 1.5
    mem = memory_config("1/7")
    assert mem.hbf_bytes == 7 * 512e9
    mean = endurance.group_lifetime_years(mem, 1e9, Endurance(), 1.5)
    worst = endurance.group_lifetime_years(mem, 1e9, Endurance(lifetime_over_ranks="worst"), 1.5)
    by_hand = 7 * 512e9 * 1e5 / (1.02 * 1e9) / 31_557_600
    assert mean == pytest.approx(by_hand, rel=1e-12) and mean == pytest.approx(11.13432, abs=1e-5)
    assert worst == pytest.approx(by_hand / 1.5, rel=1e-12) and worst == pytest.approx(7.42288, abs=1e-5)
    assert worst <= mean  # the worst rank wears at least as fast as the mean one
    # one rank, or equal ranks: the two readings agree
    assert endurance.rank_spread([2.0]) == endurance.rank_spread([1.0, 1.0]) == endurance.rank_spread([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="rank_spread"):
        endurance.rank_spread([1.0, -1.0])
    with pytest.raises(ValueError, match="lifetime_over_ranks must be one of"):  # refused where it is set
        endurance.group_lifetime_years(mem, 1e9, Endurance(lifetime_over_ranks="max"), 1.5)


def test_the_knob():
    k = knobs.KNOBS["lifetime_over_ranks"]
    assert k.default == "mean" and k.acts_on == "endurance" and not k.simulated and "lifetime_over_ranks" in knobs.STUDY
    p = grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis",
                   overrides={"lifetime_over_ranks": "worst"})
    assert p.config().endurance.lifetime_over_ranks == "worst"
    with pytest.raises(ValueError, match="lifetime_over_ranks"):
        grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis",
                   overrides={"lifetime_over_ranks": "max"})


TINY = capacity.SearchParams(search_warmup=0.2, search_measure=0.3, warmup=0.2, measure=0.5, n_max=8, n_samples=40)


def test_a_two_rank_run_carries_its_spread_and_worst_is_mean_over_spread():
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    plan = build_plan(tr, seg, rank_keys(tr, seg))
    node = {"group_ranks": 2}
    p = grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", "lachesis", overrides=node)
    mean = W.run_at_load(p, 4, TINY, None, plan)
    worst = W.run_at_load(grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", "lachesis",
                                     overrides=node | {"lifetime_over_ranks": "worst"}), 4, TINY, None, plan)
    assert mean["ranks"] == 2 and mean["hbf_rank_spread"] >= 1.0
    assert mean["hbf_write_rate"] == worst["hbf_write_rate"]  # the same run: the knob only reads it
    assert math.isfinite(mean["lifetime_years"])
    assert worst["lifetime_years"] == pytest.approx(mean["lifetime_years"] / mean["hbf_rank_spread"], rel=1e-12)
    assert worst["lifetime_years"] <= mean["lifetime_years"]
