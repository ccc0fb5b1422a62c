"""Flash lifetime and the settling rule, by hand (lachesis.node.endurance)."""


import numpy as np
import pytest

from lachesis import config as C
from lachesis.node import endurance

MAV, QWEN = C.LLAMA4_MAVERICK, C.QWEN3_235B
DEP = C.Deployment()
M17, DAISY = C.memory_config("1/7"), C.memory_config("8/8*")

def test_lifetime_formula_at_1_gb_per_s() -> None:
    # 7 x 512e9 B x 1e5 P/E / (1.02 x 1e9 B/s) = 3.5137e8 s = 11.134 years of 31,557,600 s
    y = endurance.hbf_lifetime_years(M17, 1e9, C.Endurance())
    assert y == pytest.approx(7 * 512e9 * 1e5 / 1.02e9 / 31_557_600)
    assert y == pytest.approx(11.1343, rel=1e-4)
    ys = endurance.hbf_lifetime_years(M17, np.array([1e9, 2e9, 0.0]))
    assert ys[1] == pytest.approx(y / 2) and np.isinf(ys[2])
    # flash holding read-only weights is excluded from the budget when asked
    assert endurance.hbf_lifetime_years(M17, 1e9, reserved_bytes=512e9) == pytest.approx(y * 6 / 7)
    with pytest.raises(ValueError):
        endurance.hbf_lifetime_years(M17, -1.0)


# --- settling ----------------------------------------------------------------------------------

def test_settled_rate_finds_end_of_warmup_transient() -> None:
    t = np.arange(0, 1001, 1.0)
    rate = np.where(t < 200, 5e9, 1e9)  # fast fill, then a steady 1 GB/s
    cum = np.concatenate([[0.0], np.cumsum(rate[1:] * np.diff(t))])
    s = endurance.settled_rate(t, cum, rtol=0.05)
    assert s.settled and s.rate == pytest.approx(1e9)
    # half-vs-quarter agree within 5% once the second half of the prefix is steady: t/2 >= ~200
    assert 380 <= s.settled_at_s <= 460
    rate2, settled2, t2 = s  # a plain tuple for callers
    assert (rate2, settled2, t2) == (s.rate, s.settled, s.settled_at_s)


def test_settled_rate_tolerates_sampling_noise_at_a_steady_rate() -> None:
    rng = np.random.default_rng(7)
    t = np.arange(0, 2000.0)
    inc = 1e9 * rng.uniform(0.7, 1.3, len(t) - 1)  # +-30% per-sample noise around 1 GB/s
    cum = np.concatenate([[0.0], np.cumsum(inc)])
    s = endurance.settled_rate(t, cum)
    assert s.settled and s.rate == pytest.approx(1e9, rel=0.02) and s.settled_at_s < 200


def test_settled_rate_reports_unsettled_growth_and_bad_input() -> None:
    t = np.linspace(1, 100, 200)
    s = endurance.settled_rate(t, t**3)  # rate keeps growing: never within 10%
    assert not s.settled and np.isnan(s.settled_at_s)
    with pytest.raises(ValueError, match="non-decreasing"):
        endurance.settled_rate(np.arange(5.0), np.array([0, 2, 1, 3, 4.0]))
    with pytest.raises(ValueError, match="strictly increasing"):
        endurance.settled_rate(np.array([0, 1, 1, 2.0]), np.arange(4.0))
