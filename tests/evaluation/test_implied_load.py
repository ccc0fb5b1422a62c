"""The operating point the paper's numbers imply: §5.2's metric inverted, Little's law on our sessions, the named
assumptions every row carries, and our live KV per session by class."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lachesis.config import MODELS, memory_config
from lachesis.evaluation import implied_load as I
from lachesis.node.endurance import hbf_lifetime_years

MODEL = "Qwen3-235B-A22B"


@pytest.mark.parametrize("memory, years", [("1/7", 4.8), ("4/4", 2.1), ("8/8*", 54.3)])
def test_the_write_rate_is_the_one_the_lifetime_metric_gives_those_years(memory, years) -> None:
    rate = I.hbf_write_rate(memory, years)
    assert float(hbf_lifetime_years(memory_config(memory), rate)) == pytest.approx(years)
    assert rate == pytest.approx(memory_config(memory).hbf_bytes * 1e5 / (1.02 * years * 365.25 * 86400))


def _rows(years: float = 4.0, share: float = 0.2, n: int = 50) -> pd.DataFrame:
    rate = I.hbf_write_rate("1/7", years)
    return pd.DataFrame([dict(workload="w", model=MODEL, slo="tight", memory="1/7", policy="hbm_first", seed=s,
                              slo_met=s == 0, n_sessions=n, lifetime_years=years, hbf_write_rate=rate,
                              bytes_hbm=share, bytes_hbf=1 - share, live_short_kv_bytes=n * 2e9,
                              hbm_over_live_short=0.5) for s in (0, 1)])


def test_the_implied_load_is_ours_times_the_papers_total_write_rate_over_ours() -> None:
    sessions = pd.DataFrame([dict(workload="w", seed=s, sessions=10, kv_tokens_per_session=1e5, span_nominal_s=600.0)
                             for s in (0, 1)])
    pt = I.PaperPoint("p", "w", "tight", "1/7", "hbm_first", (8.0, 8.0), (0.2, 0.6), (MODEL,), ("A8",))
    op = I.implied_loads(_rows(), sessions, [pt])
    r = op.iloc[0]
    # twice our lifetime at our share: half our HBF rate, so half our load; at 60% HBM, 0.8/0.4 of that
    assert r["implied_sessions_per_gpu_lo"] == pytest.approx(25.0)
    assert r["implied_sessions_per_gpu_hi"] == pytest.approx(50.0)
    assert r["implied_over_ours_lo"] == pytest.approx(0.5) and r["slo_met"] == "1 of 2"
    k = 1e5 * MODELS[MODEL].kv_bytes_per_token
    total_ours = I.hbf_write_rate("1/7", 4.0) / 0.8
    assert r["span_effective_s"] == pytest.approx(50 * k / total_ours)
    assert r["ours_sessions_nominal"] == pytest.approx(total_ours * 600 / k)
    assert r["implied_sessions_nominal_lo"] == pytest.approx(total_ours / 2 * 600 / k)
    assert r["implied_live_short_per_gpu_GB_lo"] == pytest.approx(25 * 2.0)
    assert r["implied_hbm_over_live_short_hi"] == pytest.approx(1.0)
    assert I.implied_loads(_rows(), sessions.iloc[:0], [pt]).empty  # no corpus for its seeds: no row


def test_every_point_names_assumptions_that_exist_and_the_readings_follow_the_text() -> None:
    pts = I.paper_points()
    assert all(set(p.assumptions) <= set(I.ASSUMPTIONS) and p.assumptions for p in pts)
    by = {(p.label, p.models): p for p in pts}
    assert by[("multi, tight, 4/4, HBM-first", I.MODEL_NAMES)].years[0] == pytest.approx(9.3 / 2.95)
    assert by[("multi, tight, 1/7, Lachesis", I.MODEL_NAMES)].years[0] == pytest.approx(4.8 * 1.5)
    assert by[("multi, tight, 8/8*, HBM-first", (MODEL,))].years == pytest.approx((54.3 / 10.09, 54.3 / 10.06))
    assert set(I.assumptions_table()["assumption"]) == set(I.ASSUMPTIONS)


def test_a_sessions_requests_are_its_agents_and_their_sub_agents_each_once() -> None:
    from lachesis.analysis import segments
    from lachesis.node.plan import build_plan

    prep = segments.prepare("appworld", 0.05, 0)
    plan = build_plan(prep.trace, prep.segments)
    reqs = [q for s in plan.sessions for q in I.session_requests(plan, s)]
    assert sorted(reqs) == list(range(plan.n_req))
    got = I.plan_sessions(plan)
    assert got["kv_tokens_per_session"] == pytest.approx(plan.w_tok.sum() / len(plan.sessions))
    assert got["span_nominal_s"] == plan.mean_session_s


def test_live_kv_by_class_is_per_session_with_the_short_lived_shares() -> None:
    rows = pd.DataFrame([dict(workload="w", model=MODEL, slo="tight", memory="1/7", policy=p, seed=0, slo_met=True,
                              n_sessions=10, live_short_kv_bytes=30e9, live_kv_lead_bytes=10e9,
                              live_kv_worker_bytes=20e9, live_kv_reviewer_bytes=10e9) for p in ("hbm_first", "x")])
    t = I.live_kv_by_class(rows)
    assert len(t) == 1 and t.loc[0, "worker_GB_per_session"] == pytest.approx(2.0)
    assert t.loc[0, "short_lived_GB_per_session"] == pytest.approx(3.0)
    assert t.loc[0, "worker_share_of_short"] == pytest.approx(2 / 3) and "lead_share_of_short" not in t
    assert np.isclose(t.loc[0, "short_lived_GB_per_gpu"], 30.0)
