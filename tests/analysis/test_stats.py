"""Statistics helpers against answers worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lachesis.analysis.stats import cdf_overlap, kendall_tau, laden_share, median_ratio, p90_over_p10, separability


def test_separability_counts_ties_half():
    # pairs (long, short) with long > short: 3>{1,2}, 4>{1,2,3}, 5>{1,2,3} = 2+3+3 = 8; tie 3=3 counts 0.5
    assert separability([3, 4, 5], [1, 2, 3]) == pytest.approx(8.5 / 9)
    assert separability([1, 1], [1, 1]) == pytest.approx(0.5)  # all ties
    assert separability([10, 20], [1, 2]) == 1.0 and separability([1, 2], [10, 20]) == 0.0


def test_median_ratio_and_spread():
    assert median_ratio([1, 10, 100], [2, 5, 8]) == pytest.approx(10 / 5)
    # 1..11: p10 at rank 0.1*10 = 1 -> 2, p90 at rank 9 -> 10 (linear interpolation) -> 5
    assert p90_over_p10(np.arange(1, 12)) == pytest.approx(5.0)
    # NaNs are dropped, not propagated
    assert median_ratio([1, np.nan, 3], [1]) == pytest.approx(2.0)


def test_kendall_tau():
    # 6 pairs, one discordant (positions 2 and 3 swapped): (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_cdf_overlap_ks_and_histogram():
    # ECDFs of {1,2,3,4} and {3,4,5,6}: largest gap 0.5 (at x=2: 0.5 vs 0; at x=4: 1 vs 0.5) -> 1 - 0.5
    assert cdf_overlap([1, 2, 3, 4], [3, 4, 5, 6]) == pytest.approx(0.5)
    assert cdf_overlap([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert cdf_overlap([1, 2], [10, 20]) == pytest.approx(0.0)
    # log10 values {0,1} and {1,2}, 2 common bins [0,1) [1,2]: shares (.5,.5) and (0,1) -> shared .5
    assert cdf_overlap([1, 10], [10, 100], method="histogram", bins=2) == pytest.approx(0.5)
    # invariant to a monotone transform (the log axis) for the KS definition
    a, b = np.array([1.0, 3, 9, 27]), np.array([2.0, 5, 30, 40])
    assert cdf_overlap(a, b) == pytest.approx(cdf_overlap(np.log(a), np.log(b)))
    with pytest.raises(ValueError):
        cdf_overlap([1], [2], method="nope")
    with pytest.raises(ValueError):
        cdf_overlap([], [1])


def test_laden_share_aggregates_over_turns():
    seg = pd.DataFrame({
        "session_id": ["s", "s", "s", "s", "t"], "agent_id": ["a", "a", "a", "a", "b"],
        "write_turn": [0, 0, 1, 1, 0],
        "seg_class": ["reasoning_laden", "reasoning_stripped", "reasoning_laden", "reasoning_stripped", "lead"],
        "tokens_written": [60, 40, 10, 90, 1000]})
    # the lead row is not a single-agent turn and is ignored: (60 + 10) / (60 + 40 + 10 + 90)
    assert laden_share(seg) == pytest.approx(70 / 200)
    assert laden_share(seg, per_turn=True).tolist() == pytest.approx([0.6, 0.1])
