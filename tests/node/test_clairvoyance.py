"""The oracle's clairvoyance: close offsets recorded in a baseline run, read back as close times."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sim_fixtures import const_step, small_cfg

from lachesis.memory.policies import Oracle
from lachesis.node import simulator as S
from lachesis.node.clairvoyance import Clock, CloseTimes, Recorder, drift


@pytest.fixture(scope="module")
def plan(multi_plan):
    return multi_plan


def test_recorder_keeps_offsets_by_session_occurrence_and_segment():
    r = Recorder(["a", "b"], "fp")
    r.started(1, "a", 0.0)
    r.started(2, "b", 5.0)
    r.started(3, "a", 10.0)  # the second occurrence of session "a"
    r.closed(1, 7, 4.0)
    r.closed(3, 7, 16.0)
    r.closed(2, 0, 6.5)
    t = r.close_times()
    got = sorted(zip(t.session.tolist(), t.occurrence.tolist(), t.segment.tolist(), t.offset_s.tolist()))
    assert got == [(0, 0, 7, 4.0), (0, 1, 7, 6.0), (1, 0, 0, 1.5)]
    assert t.fingerprint == "fp" and len(Recorder(["a"], "fp").close_times()) == 0


def test_clock_answers_the_same_occurrence_else_the_mean_else_unknown():
    times = CloseTimes(np.array([0, 0, 1], np.int32), np.array([0, 1, 0], np.int32), np.array([7, 7, 3], np.int32),
                       np.array([4.0, 6.0, 1.5]), "fp")
    c = Clock(times, ["a", "b"], "fp")
    c.started(10, "a", 100.0)  # occurrence 0 of "a"
    c.started(11, "a", 200.0)  # occurrence 1
    c.started(12, "a", 300.0)  # occurrence 2: the baseline never ran it
    c.started(13, "b", 50.0)
    assert c.close_s(10, 7) == 104.0
    assert c.close_s(11, 7) == 206.0
    assert c.close_s(12, 7) == 305.0  # the mean offset of segment 7 over the baseline's occurrences of "a"
    assert np.isnan(c.close_s(13, 7))  # never closed for "b": unknown, the oracle ranks it last
    assert c.close_s(13, 3) == 51.5
    with pytest.raises(ValueError, match="recorded on trace 'fp', not on this run's 'other'"):
        Clock(times, ["a", "b"], "other")


def test_close_times_arrays_round_trip_and_bad_columns_name_the_field():
    t = CloseTimes(np.array([1], np.int32), np.array([0], np.int32), np.array([2], np.int32), np.array([3.5]), "fp")
    back = CloseTimes.from_arrays(t.arrays(), "fp")
    for k, v in t.arrays().items():
        np.testing.assert_array_equal(getattr(back, k), v)
    with pytest.raises(ValueError, match="missing column 'offset_s'"):
        CloseTimes.from_arrays({k: v for k, v in t.arrays().items() if k != "offset_s"}, "fp")
    with pytest.raises(ValueError, match="column 'segment' must hold integers"):
        CloseTimes.from_arrays(dict(t.arrays(), segment=np.array([2.0])), "fp")
    with pytest.raises(ValueError, match="'offset_s' must be finite"):
        CloseTimes(t.session, t.occurrence, t.segment, np.array([np.nan]), "fp")


def test_drift_compares_the_closes_both_runs_recorded():
    base = CloseTimes(np.array([0, 0, 1], np.int32), np.array([0, 0, 0], np.int32), np.array([1, 2, 1], np.int32),
                      np.array([10.0, 20.0, 40.0]), "fp")
    other = CloseTimes(np.array([0, 0, 2], np.int32), np.array([0, 0, 0], np.int32), np.array([1, 2, 1], np.int32),
                       np.array([11.0, 23.0, 5.0]), "fp")
    d = drift(base, other)
    assert d["matched"] == pytest.approx(2 / 3)
    assert d["median_abs_s"] == pytest.approx(2.0)  # |1|, |3|
    assert d["median_rel"] == pytest.approx((0.1 + 0.15) / 2)
    assert np.isnan(drift(base, CloseTimes(*(np.zeros(0, np.int32),) * 3, np.zeros(0), "fp"))["matched"])


class Spy(Oracle):
    """The oracle, noting the close time it was told for each segment."""

    def __init__(self) -> None:
        self.told: dict[str, float] = {}

    def tier(self, seg, view):
        self.told.setdefault(seg.segment_id, seg.close_s)
        return super().tier(seg, view)


def test_oracle_is_told_the_baselines_close_times(plan):
    """With a placement-independent step (constant, no landing) both runs share one timeline, so the close
    time the oracle is told at a segment's first write is exactly when that segment closes in its own run."""
    cfg = small_cfg(hbm_bytes=5e7)
    kw = dict(duration_s=3 * plan.mean_session_s, warmup_s=0.5 * plan.mean_session_s)
    settings = S.RunSettings(seed=0, step_fn=const_step, land=False, record_closes=True)
    base = S.simulate(plan, cfg, "hbm_first", 4, **kw, settings=settings)
    spy = Spy()
    orc = S.simulate(plan, cfg, spy, 4, **kw, settings=replace(settings, clairvoyance=base.closes, record_events=True))
    closed = {e[2]: e[0] for e in orc.events if e[1] == "close"}
    assert len(closed) > 20 and base.closes is not None and len(base.closes) == len(orc.closes)
    told = {sid: spy.told[sid] for sid in closed if sid in spy.told}
    assert len(told) > 0.8 * len(closed)
    np.testing.assert_allclose([told[s] for s in told], [closed[s] for s in told], rtol=0, atol=1e-9)
    d = drift(base.closes, orc.closes)
    assert d["matched"] == 1.0 and d["median_abs_s"] == pytest.approx(0.0, abs=1e-9)
    # the oracle's knowledge changes its placement: without it every segment ranks last (open order)
    blind = S.simulate(plan, cfg, "oracle", 4, **kw, settings=settings)
    assert blind.lifetime.bytes_by_tier != orc.lifetime.bytes_by_tier


def test_a_run_records_no_closes_unless_asked(plan):
    r = S.simulate(plan, small_cfg(), "lachesis", 2, duration_s=plan.mean_session_s, warmup_s=0.0,
                   settings=S.RunSettings(seed=0))
    assert r.closes is None and "closes" not in r.to_dict()
