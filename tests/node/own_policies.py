"""The policies the native differential tests run (tests/node/test_native_run.py, test_native_memory.py), from the
registry: every registered policy, a few knob settings, and each built-in rule again as a policy of one's own (which
the native core calls back), with one reading every query of the view.  A helper module, not a test module."""

from __future__ import annotations

import copy

import numpy as np

from lachesis.kv import Tier
from lachesis.memory.policies import as_policy
from lachesis.memory.protocol import MemoryView, SegmentInfo
from lachesis.registry import POLICY_REGISTRY

#: knob settings the native rules must honour, beside each registered policy's defaults
KNOB_SPECS = ("lachesis:size_estimate=mean_floor", "lachesis:size_estimate=spawn",
              "rho_threshold:quantile=0.25,window=8", "rho_threshold:threshold=1.5")
#: policies of one's own: each built-in rule as a subclass (the native core calls it back) and one reading every
#: query of the view
OWN_POLICIES = tuple(f"py:{e.name}" for e in POLICY_REGISTRY) + ("py:lachesis:size_estimate=spawn", "py:every_query")
#: the policies the native differential tests run, from the registry
NATIVE_POLICIES = tuple(e.name for e in POLICY_REGISTRY) + KNOB_SPECS + OWN_POLICIES


class EveryQuery:
    """A policy of one's own that reads every query of :class:`~lachesis.memory.protocol.MemoryView` and lets
    each answer move its decision, so a backend answering one differently places differently."""

    name = "every_query"
    frees_at_boundary = True

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        ids, keys, blocks, hbm = view.live_workers()
        close, final, seg_blocks, seg_hbm = view.live_segments()
        stats = view.stats
        score = (int(blocks.sum()) + int(hbm.sum()) + sum(len(i) for i in ids) + int(np.isnan(keys).sum())
                 + int(seg_blocks.sum()) + int(seg_hbm.sum()) + int(np.isfinite(close).sum())
                 + int(np.nan_to_num(final).sum()) + view.segment_position(seg.segment_id)
                 + view.cached(Tier.HBM) + view.free(Tier.HBF) + view.used(Tier.HBM) + view.total(Tier.HBF)
                 + view.live_reviewer_hbm_blocks() + stats.reviewer_reserve(1) + stats.closed_workers
                 + int(stats.mean_worker_blocks) + sum(view.demand_ahead(seg.segment_id)))
        rho = stats.predicted_rho(seg.session_id, seg.seg_class)
        q = stats.rho_quantile(0.5)
        if rho == rho and q == q:
            score += int(rho > q)
        if seg.seg_class == "worker":
            ahead, mine, workers_hbm = view.workers_ahead(seg.segment_id)
            spawns, spawn, _ = view.spawns_ahead(seg.segment_id)
            score += sum(ahead) + mine + workers_hbm + view.worker_position(seg.segment_id)
            score += sum(b for b, _ in spawns) + spawn[0]
        return Tier.HBM if score % 3 else Tier.HBF


def own_policy(spec: str):
    """The policy a spec of :data:`NATIVE_POLICIES` names: a registered spec as is, ``py:<spec>`` its rule as a
    policy of one's own (a subclass with the same knobs), ``py:every_query`` :class:`EveryQuery`."""
    if not spec.startswith("py:"):
        return spec
    if spec == "py:every_query":
        return EveryQuery()
    base = as_policy(spec[3:])
    mine = copy.copy(base)
    mine.__class__ = type(f"Own{type(base).__name__}", (type(base),), {})
    return mine
