"""What a placement decision is told (§4): the segment (:class:`SegmentInfo`), memory through a read-only
view (:class:`MemoryView`), and the :class:`Policy` protocol itself.

Every view answers every query a policy asks, so each policy is written once: the segment table's view
(:class:`lachesis.memory.allocator.TableView`) reads its rankings in place, the test reference's view
(``tests/reference_blocksim.py``) recomputes them naively.  The contract is in docs/design.md §5.
"""

from __future__ import annotations

import math
from typing import Iterator, NamedTuple, Protocol, runtime_checkable

import numpy as np

from lachesis.kv import Tier

__all__ = ["SegmentInfo", "StatsView", "MemoryView", "Policy"]


class SegmentInfo(NamedTuple):
    """What the harness reported about a segment, plus its size, at a placement decision (immutable;
    a named tuple because one is built per decision).

    ``close_s`` and ``final_tokens`` are clairvoyant facts (when the segment will close, how many
    tokens it will have written) that only an oracle is given; NaN when unknown."""

    segment_id: str
    seg_class: str
    session_id: str = ""
    role: str = ""
    rank_key: float = math.nan  # predicted lifetime rank key (workers); lower = shorter-lived
    boundary: str = ""
    n_blocks: int = 0  # blocks the segment holds before this write
    n_tokens: int = 0  # tokens written before this write
    new_blocks: int = 0  # blocks this write is about to allocate
    read_tokens: int = 0  # decode-stage reads reported for the segment so far (Eq. 3)
    close_s: float = math.nan  # clairvoyant: when its boundary will be reported
    final_tokens: float = math.nan  # clairvoyant: tokens it will have written when it closes


class StatsView(Protocol):
    """The closed segments' statistics as a policy reads them (:class:`PlacementStats` is one; the native
    core's view answers the same)."""

    @property
    def closed_workers(self) -> int: ...

    @property
    def closed_worker_blocks(self) -> int: ...

    @property
    def closed_reviewers(self) -> int: ...

    @property
    def reviewer_blocks_ema(self) -> float: ...

    @property
    def live_reviewers_ema(self) -> float: ...

    @property
    def mean_worker_blocks(self) -> float: ...

    def reviewer_reserve(self, live_reviewer_hbm_blocks: int) -> int: ...

    def predicted_rho(self, session_id: str, seg_class: str) -> float: ...

    def rho_quantile(self, q: float) -> float: ...


@runtime_checkable
class MemoryView(Protocol):
    """Read-only memory state a policy may consult, what §4 lets it know."""

    @property
    def stats(self) -> StatsView:
        """The closed segments' statistics (:class:`PlacementStats`)."""
        ...

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

    def live_reviewer_hbm_blocks(self) -> int:
        """HBM blocks held by live reviewer segments."""
        ...

    def workers_ahead(self, segment_id: str) -> tuple[Iterator[int], int, int]:
        """Blocks held by the live workers ranked before one live worker (rank key ascending, NaN last, ties
        in open order), lazily in rank order; that worker's blocks; the HBM blocks all live workers hold.
        Consume the iterator before memory changes."""
        ...

    def spawns_ahead(self, segment_id: str) -> tuple[Iterator[tuple[int, float]], tuple[int, float], int]:
        """:meth:`workers_ahead` with each worker's spawn, its first placement, in place of its blocks: (the
        blocks it was placed with, the closed workers' mean size in blocks then); (-1, NaN) before it."""
        ...

    def demand_ahead(self, segment_id: str) -> tuple[int, int, int]:
        """HBM demand (HBM blocks held + blocks still to write by the final size, 0 when unknown) of the live
        segments closing before one live segment (unknown close last, ties in open order), then that
        segment's own HBM blocks and blocks still to write."""
        ...

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Live workers in open order: (segment ids (object array), rank keys float64, blocks int64, HBM
        blocks int64)."""
        ...

    def worker_position(self, segment_id: str) -> int:
        """Index of a live worker in the arrays :meth:`live_workers` returns."""
        ...

    def live_segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every live segment in open order: (close_s float64, final size in blocks float64 (NaN
        unknown), blocks int64, HBM blocks int64)."""
        ...

    def segment_position(self, segment_id: str) -> int:
        """Index of a live segment in the arrays :meth:`live_segments` returns."""
        ...


@runtime_checkable
class Policy(Protocol):
    """A placement policy: one decision function (see :mod:`lachesis.memory.policies` to add your own).

    Optional attributes the segment table honours: ``reclaims_cached_hbm`` (cached dead HBM blocks
    count as free for HBM placement) and ``rho_window`` (size of :class:`PlacementStats`' ρ window)."""

    name: str
    frees_at_boundary: bool

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        """Tier the segment's next blocks are allocated in (the allocator falls back when it is full)."""
        ...
