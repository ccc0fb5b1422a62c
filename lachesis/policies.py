"""KV placement policies (§4, §5.2, §5.4): which tier a segment's next KV blocks are allocated in.

A policy is a small object with ONE decision function, :meth:`Policy.tier`, called by the
segment table (:class:`lachesis.allocator.SegmentTable`) every time a segment's write needs new
blocks (so at its first write, and again whenever it grows past its last block).  It receives

* :class:`SegmentInfo` — what the harness told Lachesis about the segment (class, session, role,
  the predicted rank key of a worker, its size so far and the blocks about to be written), and
* :class:`MemoryView` — read-only memory state: free/used/cached blocks per tier, the live
  workers with their rank keys and sizes, the HBM held by everything else, and running
  statistics (:class:`PlacementStats`) the predictive path needs.

and returns a :class:`~lachesis.allocator.Tier`.  Whatever it returns, the allocator serves the
blocks from the other tier once the chosen tier's free list is empty (block-by-block fallback,
DESIGN §5), so a policy never has to check capacity itself.  ``frees_at_boundary`` says whether a
closed segment's blocks return to the free lists at once (Lachesis, deterministic) or stay cached
until memory pressure evicts them least-recently-used first (HBM-first, the engine's prefix cache).

Adding a policy takes a few lines::

    from lachesis.allocator import Tier
    from lachesis.policies import SegmentInfo, MemoryView

    class ReviewersOnlyInHBM:
        name = "reviewers-only"
        frees_at_boundary = True
        def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
            return Tier.HBM if seg.seg_class == "reviewer" else Tier.HBF

    from lachesis.allocator import replay_events
    totals = replay_events(events, ReviewersOnlyInHBM(), hbm_blocks=1024, hbf_blocks=65536)
    totals.hbm_bytes, totals.hbf_bytes, totals.bytes_by_class()

Policies here:

* :class:`HBMFirst` — the engine without Lachesis (§5.2 baseline): every write asks for HBM, so it
  lands in HBM while HBM has a free block and in HBF otherwise; boundary-unaware (dead segments stay
  cached, evicted LRU across both tiers only when an allocation cannot be served).
* :class:`HBMFirstReclaim` — a sensitivity variant of the baseline: the same, except that cached dead
  HBM blocks count as free for HBM placement (HBM evicts its own LRU dead blocks before spilling
  to HBF).  A policy opts into this with the optional attribute ``reclaims_cached_hbm = True``.
* :class:`DeterministicOnly` — "w/o predictive path" (§5.4): short-lived classes (reasoning_laden,
  worker, reviewer) to HBM, long-lived classes (reasoning_stripped, lead) to HBF; frees at boundary.
* :class:`Lachesis` — §4: the deterministic path, but reviewers take HBM unconditionally and workers
  are admitted by the predictive path (rank by predicted key, shortest first, as many as fit in
  the HBM not reserved for reviewers; k follows free capacity and is never a parameter).

Predictive-path definitions (NAMED ASSUMPTIONS; the paper fixes the ranking and that reviewers
are reserved for "before it counts k", not the arithmetic):

* ASSUMPTION (worker size at spawn): a live worker's size is estimated as
  ``max(blocks it holds (+ the blocks being written, for the deciding worker),
  mean size in blocks of the workers that have closed so far)``; before any worker has closed the
  mean is 0, i.e. a worker counts with what it has written.  Reason: only the rank is predicted
  (§4: "only a worker's rank is consumed, never a lifetime"), so sizes must come from what the
  node has observed; the running mean of finished workers is the simplest such estimate.
* ASSUMPTION (reviewer reservation): ``reserve = max(0, ceil(R_ema * N_ema) - HBM blocks live
  reviewers hold)`` where ``R_ema`` is an exponential moving average (alpha = 0.1) of closed
  reviewer segment sizes in blocks and ``N_ema`` an EMA (alpha = 0.1) of the number of live
  reviewers, sampled at every segment open.  Before any reviewer closed, ``R_ema = 0`` (no
  reservation without evidence).  Reason: a reviewer spawns only after its worker (§4), so the
  HBM it will need must be held back from worker admission before it exists.
* ASSUMPTION (budget and k): ``budget = HBM blocks - HBM blocks used by anything but live workers
  - reserve``.  Live workers are sorted by rank key ascending (NaN last, ties by open order);
  k is the longest prefix whose estimated sizes sum to <= budget.  A worker's new blocks go to
  HBM iff it is within the first k at the moment of the write, so a worker outranked by later,
  shorter-predicted spawns (or grown past what fits) sends its later blocks to HBF; blocks
  already written never move.
* ASSUMPTION (scope of the ranking): the ranking covers the live workers of one segment table,
  i.e. of one memory domain (the simulator keeps one per GPU, whose HBM is the capacity k must fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from lachesis.allocator import SEG_CLASSES, Tier

__all__ = [
    "SegmentInfo",
    "MemoryView",
    "Policy",
    "PlacementStats",
    "HBMFirst",
    "HBMFirstReclaim",
    "DeterministicOnly",
    "Lachesis",
    "POLICIES",
    "get_policy",
    "SHORT_LIVED_CLASSES",
    "LONG_LIVED_CLASSES",
]

#: §4 deterministic path: classes that die at a boundary well before the session ends.
SHORT_LIVED_CLASSES = frozenset({"reasoning_laden", "worker", "reviewer"})
#: §4 deterministic path: classes that carry past their boundary (reasoning-stripped context, lead).
LONG_LIVED_CLASSES = frozenset({"reasoning_stripped", "lead"})

EMA_ALPHA = 0.1  # ASSUMPTION: smoothing of the reviewer-reservation EMAs (see module docstring)


@dataclass(frozen=True)
class SegmentInfo:
    """What the harness reported about a segment, plus its size, at a placement decision."""

    segment_id: str
    seg_class: str
    session_id: str = ""
    role: str = ""
    rank_key: float = math.nan  # predicted lifetime rank key (workers); lower = shorter-lived
    boundary: str = ""
    n_blocks: int = 0  # blocks the segment holds before this write
    n_tokens: int = 0  # tokens written before this write
    new_blocks: int = 0  # blocks this write is about to allocate


class PlacementStats:
    """Running statistics of closed segments the predictive path uses (shared by fast and reference tables)."""

    def __init__(self, alpha: float = EMA_ALPHA) -> None:
        self.alpha = alpha
        self.closed_workers = 0
        self.closed_worker_blocks = 0
        self.reviewer_blocks_ema = 0.0
        self.closed_reviewers = 0
        self.live_reviewers_ema = 0.0

    def opened(self, seg_class: str, n_live_reviewers: int) -> None:
        """Record a segment open; samples the live-reviewer count (after the open)."""
        self.live_reviewers_ema += self.alpha * (n_live_reviewers - self.live_reviewers_ema)

    def closed(self, seg_class: str, n_blocks: int) -> None:
        """Record a segment close with its final size in blocks."""
        if seg_class == "worker":
            self.closed_workers += 1
            self.closed_worker_blocks += int(n_blocks)
        elif seg_class == "reviewer":
            if self.closed_reviewers == 0:
                self.reviewer_blocks_ema = float(n_blocks)
            else:
                self.reviewer_blocks_ema += self.alpha * (n_blocks - self.reviewer_blocks_ema)
            self.closed_reviewers += 1

    @property
    def mean_worker_blocks(self) -> float:
        """Mean size (blocks) of closed workers; 0 before any closed."""
        return self.closed_worker_blocks / self.closed_workers if self.closed_workers else 0.0

    def reviewer_reserve(self, live_reviewer_hbm_blocks: int) -> int:
        """HBM blocks held back for reviewers before workers are counted (module docstring)."""
        expected = math.ceil(self.reviewer_blocks_ema * self.live_reviewers_ema - 1e-9)
        return max(0, expected - int(live_reviewer_hbm_blocks))


@runtime_checkable
class MemoryView(Protocol):
    """Read-only memory state a policy may consult (implemented by both segment tables)."""

    stats: PlacementStats

    def total(self, tier: Tier) -> int:
        """Blocks in the tier."""
        ...

    def free(self, tier: Tier) -> int:
        """Blocks on the tier's free list."""
        ...

    def used(self, tier: Tier) -> int:
        """Blocks allocated in the tier (live + cached dead)."""
        ...

    def cached(self, tier: Tier) -> int:
        """Blocks of dead (closed, not yet evicted) segments in the tier."""
        ...

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Live workers in open order: (segment ids (object array), rank keys float64, blocks int64, HBM blocks int64)."""
        ...

    def worker_position(self, segment_id: str) -> int:
        """Index of a live worker in the arrays :meth:`live_workers` returns."""
        ...

    def live_reviewer_hbm_blocks(self) -> int:
        """HBM blocks held by live reviewer segments."""
        ...


@runtime_checkable
class Policy(Protocol):
    """A placement policy: one decision function (see the module docstring to add your own)."""

    name: str
    frees_at_boundary: bool

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        """Tier the segment's next blocks are allocated in (the allocator falls back when it is full)."""
        ...


def _check_class(seg: SegmentInfo) -> None:
    if seg.seg_class not in SEG_CLASSES:
        raise ValueError(
            f"segment {seg.segment_id!r}: unknown seg_class {seg.seg_class!r}; expected one of {sorted(SEG_CLASSES)}"
        )


class HBMFirst:
    """Engine without Lachesis: HBM while it has a free block, else HBF; boundaries unknown (§5.2)."""

    name = "hbm_first"
    frees_at_boundary = False

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        return Tier.HBM


class HBMFirstReclaim(HBMFirst):
    """HBM-first variant (sensitivity knob, not the paper's baseline definition in DESIGN §5): cached
    dead HBM blocks count as free for HBM placement, so HBM reclaims its own LRU dead blocks before
    spilling to HBF (vLLM's per-pool free queue, where cached blocks with no reference are evictable)."""

    name = "hbm_first_reclaim"
    reclaims_cached_hbm = True


class DeterministicOnly:
    """"W/o predictive path" (§5.4): short-lived classes to HBM, long-lived to HBF, free at boundary."""

    name = "deterministic"
    frees_at_boundary = True

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        _check_class(seg)
        return Tier.HBM if seg.seg_class in SHORT_LIVED_CLASSES else Tier.HBF


class Lachesis:
    """§4: deterministic path + predictive admission of workers, shortest-predicted first."""

    name = "lachesis"
    frees_at_boundary = True

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        _check_class(seg)
        if seg.seg_class != "worker":
            return Tier.HBM if seg.seg_class in SHORT_LIVED_CLASSES else Tier.HBF
        return Tier.HBM if self.admitted(seg, view) else Tier.HBF

    @staticmethod
    def admitted(seg: SegmentInfo, view: MemoryView) -> bool:
        """Whether the worker is within the first k of the node's live-worker ranking right now."""
        ranking = getattr(view, "worker_ranking", None)  # the segment table's one-call form of the two below
        if ranking is not None:
            keys, blocks, hbm_live_workers, me = ranking(seg.segment_id)
        else:
            _, keys, blocks, hbm_blocks = view.live_workers()
            me = view.worker_position(seg.segment_id)
            hbm_live_workers = int(hbm_blocks.sum())
        stats = view.stats
        mean = stats.mean_worker_blocks
        est = np.maximum(blocks.astype(np.float64), mean)
        est[me] = max(float(blocks[me] + seg.new_blocks), mean)
        pinned = view.used(Tier.HBM) - hbm_live_workers
        reserve = stats.reviewer_reserve(view.live_reviewer_hbm_blocks())
        budget = view.total(Tier.HBM) - pinned - reserve
        nan = np.isnan(keys)
        if nan.any():
            keys = np.where(nan, np.inf, keys)
        order = np.argsort(keys, kind="stable")
        # k = how many ranked workers fit; sizes are >= 0, so the running sum never decreases and the
        # worker is within the first k exactly when the running sum up to and including it fits.
        pos = int(np.flatnonzero(order == me)[0])
        return bool(np.cumsum(est[order[: pos + 1]])[-1] <= budget + 1e-9)


POLICIES: dict[str, type] = {p.name: p for p in (HBMFirst, HBMFirstReclaim, DeterministicOnly, Lachesis)}


def get_policy(name: str) -> Policy:
    """A fresh policy object by name (``hbm_first``, ``hbm_first_reclaim``, ``deterministic``, ``lachesis``)."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; expected one of {sorted(POLICIES)}") from None
