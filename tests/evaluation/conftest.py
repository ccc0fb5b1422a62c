"""Fixtures the evaluation tests share: the hand-made multi-agent trace's plan, and grid points that replay it."""

from __future__ import annotations

import pytest
from sim_fixtures import multi_agent_trace

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.evaluation import plancache
from lachesis.node.plan import Plan, build_plan


@pytest.fixture(scope="module")
def plan() -> Plan:
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg))


@pytest.fixture()
def fixture_plan(plan: Plan, monkeypatch: pytest.MonkeyPatch) -> Plan:
    """Points of workload "fixture" replay the hand-made multi-agent trace."""
    real, real_fp = plancache.point_plan, plancache.point_fingerprint
    monkeypatch.setattr(plancache, "point_plan",
                        lambda p, cache_dir=None: plan if p.workload == "fixture" else real(p, cache_dir))
    monkeypatch.setattr(plancache, "point_fingerprint",
                        lambda p: plan.fingerprint if p.workload == "fixture" else real_fp(p))
    return plan
