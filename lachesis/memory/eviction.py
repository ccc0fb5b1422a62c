"""Cached dead segments of a boundary-unaware policy, evicted least-recently-used first (§5.2-§5.3).

A dead segment's blocks stay allocated (the engine's prefix-cache block pool) until an allocation
needs them; then whole segments go in order of last use, tail blocks first.  The eviction rule is a
named assumption of docs/design.md §5.
"""

from __future__ import annotations

import heapq

import numpy as np

from lachesis.kv import Tier, as_tier
from lachesis.memory.live_index import SegmentRow

__all__ = ["LRUEviction"]


class LRUEviction:
    """Dead segments that still hold blocks, with per-tier counts, evicted LRU first (ties in the
    order they were cached).  Heaps hold stale entries, skipped lazily."""

    def __init__(self, hbm_blocks: int) -> None:
        self.hbm_blocks = hbm_blocks  # block ids below it are HBM blocks
        self.rows: dict[str, SegmentRow] = {}  # cached dead segments
        self.blocks = [0, 0]  # cached dead blocks per tier [HBM, HBF]
        self.evicted = 0  # blocks evicted so far
        self._heap: list[tuple[float, int, str]] = []  # (last use, cache order, id): LRU first
        self._heap_tier: tuple[list, list] = ([], [])  # the same, per tier holding the segment's blocks
        self._n_cached = 0

    def cached(self, tier: Tier | int) -> int:
        """Blocks of dead (closed, not yet evicted) segments in the tier."""
        return int(self.blocks[as_tier(tier)])

    def add(self, row: SegmentRow) -> None:
        """Cache a closed segment's blocks (ordered by its ``last_use``)."""
        self._n_cached += 1
        self.rows[row.segment_id] = row
        entry = (row.last_use, self._n_cached, row.segment_id)
        heapq.heappush(self._heap, entry)
        if row.n_hbm:
            heapq.heappush(self._heap_tier[0], entry)
        if row.n_blocks - row.n_hbm:
            heapq.heappush(self._heap_tier[1], entry)
        self.blocks[0] += row.n_hbm
        self.blocks[1] += row.n_blocks - row.n_hbm

    def evict(self, k: int, tier: Tier | None = None) -> tuple[np.ndarray, int]:
        """Take k blocks from dead segments (of ``tier`` only, if given), least recently used segment
        first, tail blocks first within a segment; returns them and how many are HBM blocks."""
        out: list[np.ndarray] = []
        hbm = self.hbm_blocks
        heap = self._heap if tier is None else self._heap_tier[tier]
        dead = self.rows
        n_hbm_all = 0
        while k > 0:
            sid = heap[0][2]
            row = dead.get(sid)
            n_t = 0 if row is None else (row.n_blocks if tier is None else
                                         row.n_hbm if tier == Tier.HBM else row.n_blocks - row.n_hbm)
            if n_t == 0:
                heapq.heappop(heap)
                continue
            ids = row.block_ids()
            take = min(k, n_t)
            if take == row.n_blocks:  # the whole segment goes (its HBM count is known)
                ev, keep, n_hbm = ids[::-1], None, row.n_hbm
            elif tier is None:
                ev = ids[ids.size - take :][::-1]
                keep = ids[: ids.size - take]
                held = row.n_hbm  # a segment wholly in one tier needs no scan of its tail
                n_hbm = take if held == row.n_blocks else int(np.count_nonzero(ev < hbm)) if held else 0
            else:
                pos = np.flatnonzero((ids >= hbm) == bool(tier))[::-1][:take]
                ev = ids[pos]
                keep = np.delete(ids, pos)
                n_hbm = take if tier == Tier.HBM else 0
            out.append(ev)
            n_hbm_all += n_hbm
            self.blocks[0] -= n_hbm
            self.blocks[1] -= take - n_hbm
            row.n_hbm -= n_hbm
            row.n_blocks -= take
            row.chunks = [keep] if keep is not None and keep.size else []
            if row.n_blocks == 0:
                del dead[sid]
            k -= take
        ev = out[0] if len(out) == 1 else np.concatenate(out)
        self.evicted += int(ev.size)
        return ev, n_hbm_all
