"""Fixtures the node tests share: the hand-made multi-agent trace's plan (ranked workers)."""

from __future__ import annotations

import pytest
from sim_fixtures import multi_agent_trace

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.node.plan import build_plan


@pytest.fixture(scope="module")
def multi_plan():
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    return build_plan(tr, seg, rank_keys(tr, seg))
