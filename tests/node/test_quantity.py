"""A pricing function's input check and bandwidth division (lachesis.node.quantity), the one place their messages
are written."""

import math

import numpy as np
import pytest

from lachesis.node.quantity import as_result, check_nonnegative, per_bandwidth


def test_a_negative_or_unbounded_input_is_named_with_its_value():
    with pytest.raises(ValueError, match=r"^decode step: batch must be finite and >= 0, got -1.0$"):
        check_nonnegative("decode step", "batch", -1)
    with pytest.raises(ValueError, match=r"tokens must be finite and >= 0, got \[inf, nan\]"):
        check_nonnegative("kv_landing_time", "tokens", np.array([1.0, math.inf, 2.0, math.nan]))
    check_nonnegative("decode step", "batch", np.array([0.0, 3.0]))


def test_a_rate_not_yet_measured_passes_the_lenient_check_and_a_negative_one_does_not():
    check_nonnegative("hbf_lifetime_years", "write rate", np.array([math.nan, math.inf, 0.0]), finite=False)
    with pytest.raises(ValueError, match=r"write rate must be >= 0, got -2.0"):
        check_nonnegative("hbf_lifetime_years", "write rate", -2.0, finite=False)


def test_bytes_over_a_tier_without_bandwidth_are_refused_and_none_cost_nothing():
    assert per_bandwidth(np.array([4.0]), 2.0, "x").tolist() == [2.0]
    assert per_bandwidth(np.array([0.0, 0.0]), 0.0, "x").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="hbf landing: bytes routed to a tier with zero bandwidth"):
        per_bandwidth(np.array([0.0, 1.0]), 0.0, "hbf landing")


def test_a_zero_dimensional_result_is_a_python_float():
    assert type(as_result(np.array(2.5))) is float and as_result(np.array([1.0, 2.0])).tolist() == [1.0, 2.0]
