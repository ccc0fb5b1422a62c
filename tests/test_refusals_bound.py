"""The offline bound refuses what it cannot solve exactly: token totals past 2**53 (which summed
past int64 into a negative window and share) and a close before its write (which counted as absorbed)."""

from __future__ import annotations

import numpy as np
import pytest

from lachesis.evaluation.bound import MAX_TOKENS, Timeline, hbm_bound


@pytest.mark.parametrize("tokens", [np.array([2**62] * 3), np.array([2**64 - 1], dtype=np.uint64),
                                    np.array([MAX_TOKENS // 2, MAX_TOKENS // 2])])
def test_huge_token_totals_are_refused_not_wrapped(tokens) -> None:
    n = len(tokens)
    with pytest.raises(ValueError, match=r"field 'tokens' totals .* limit of 2\*\*53"):
        Timeline.from_times(np.arange(n, dtype=float), np.arange(n, dtype=float) + 5, tokens)


def test_a_timeline_built_directly_is_refused_too() -> None:
    with pytest.raises(ValueError, match=r"^Timeline: field 'tokens' totals"):
        Timeline(np.zeros(2), np.array([0, 1]), np.array([2, 2]), np.array([2**62, 2**62]))


def test_events_with_huge_tokens_are_refused() -> None:
    ev = [(0.0, "write", "s0", "lead", 2**62, "sess"), (1.0, "write", "s1", "lead", 2**62, "sess")]
    with pytest.raises(ValueError, match="from_events: field 'tokens' totals"):
        Timeline.from_events(ev)


def test_below_the_limit_the_window_and_share_stay_exact() -> None:
    big = 2**50
    r = hbm_bound(Timeline.from_times([0.0, 1.0, 2.0], [10.0, 10.0, 10.0], [big, big, big]), hbm_tokens=2 * big)
    assert r.window_tokens == 3 * big and r.hbm_tokens == 2 * big and r.share == pytest.approx(2 / 3)


def test_a_close_before_its_write_is_refused_not_counted_as_absorbed() -> None:
    with pytest.raises(ValueError, match=r"write 1: field 't_close' 0\.5 precedes its write at t_write 1\.0"):
        Timeline.from_times([0.0, 1.0], [5.0, 0.5], [10, 10])


def test_a_close_at_its_write_still_holds_nothing() -> None:
    assert hbm_bound(Timeline.from_times([3.0], [3.0], [7]), 0).hbm_tokens == 7
