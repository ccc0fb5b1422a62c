"""Cached dead segments of a boundary-unaware policy, evicted least-recently-used first (§5.2-§5.3).

A dead segment's blocks stay allocated (the engine's prefix-cache block pool) until an allocation
needs them; then whole segments go in order of last use, tail blocks first.  The eviction rule is a
named assumption of docs/design.md §5.
"""

from __future__ import annotations

import heapq

import numpy as np

from lachesis.kv import Tier, as_tier

__all__ = ["LRUEviction"]


class _Cached:
    """A dead segment's blocks in the pool: its block ids as numpy chunks in write order (joined when first
    needed) and how many it holds, how many in HBM."""

    __slots__ = ("chunks", "n_blocks", "n_hbm")

    def __init__(self, chunks: list[np.ndarray], n_blocks: int, n_hbm: int) -> None:
        self.chunks = chunks
        self.n_blocks = n_blocks
        self.n_hbm = n_hbm

    def ids(self) -> np.ndarray:
        """Its block ids in write order (the pool's own array: read only)."""
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


class LRUEviction:
    """Dead segments that still hold blocks, with per-tier counts, evicted LRU first (ties in the
    order they were cached).  The table hands a closed segment's blocks over; from then on they are the
    pool's.  Heaps hold stale entries, skipped lazily."""

    def __init__(self, hbm_blocks: int) -> None:
        self.hbm_blocks = hbm_blocks  # block ids below it are HBM blocks
        self._dead: dict[str, _Cached] = {}  # cached dead segments
        self.blocks = [0, 0]  # cached dead blocks per tier [HBM, HBF]
        self.evicted = 0  # blocks evicted so far
        self._heap: list[tuple[float, int, str]] = []  # (last use, cache order, id): LRU first
        self._heap_tier: tuple[list, list] = ([], [])  # the same, per tier holding the segment's blocks
        self._n_cached = 0

    def cached(self, tier: Tier | int) -> int:
        """Blocks of dead (closed, not yet evicted) segments in the tier."""
        return int(self.blocks[as_tier(tier)])

    def blocks_of(self, segment_id: str) -> np.ndarray | None:
        """Block ids a cached dead segment still holds, in write order (the pool's own array: read only);
        None when it holds none."""
        dead = self._dead.get(segment_id)
        return None if dead is None else dead.ids()

    def add(self, segment_id: str, chunks: list[np.ndarray], n_blocks: int, n_hbm: int, last_use: float) -> None:
        """Take over a closed segment's blocks (``chunks`` of block ids in write order, ``n_blocks`` in all,
        ``n_hbm`` of them HBM blocks), evicted in order of ``last_use``."""
        self._n_cached += 1
        self._dead[segment_id] = _Cached(chunks, n_blocks, n_hbm)
        entry = (last_use, self._n_cached, segment_id)
        heapq.heappush(self._heap, entry)
        if n_hbm:
            heapq.heappush(self._heap_tier[0], entry)
        if n_blocks - n_hbm:
            heapq.heappush(self._heap_tier[1], entry)
        self.blocks[0] += n_hbm
        self.blocks[1] += n_blocks - n_hbm

    def evict(self, k: int, tier: Tier | None = None) -> tuple[np.ndarray, int]:
        """Take k blocks from dead segments (of ``tier`` only, if given), least recently used segment
        first, tail blocks first within a segment; returns them and how many are HBM blocks."""
        out: list[np.ndarray] = []
        hbm = self.hbm_blocks
        heap = self._heap if tier is None else self._heap_tier[tier]
        pool = self._dead
        n_hbm_all = 0
        while k > 0:
            sid = heap[0][2]
            dead = pool.get(sid)
            n_t = 0 if dead is None else (dead.n_blocks if tier is None else
                                          dead.n_hbm if tier == Tier.HBM else dead.n_blocks - dead.n_hbm)
            if dead is None or n_t == 0:
                heapq.heappop(heap)
                continue
            ids = dead.ids()
            take = min(k, n_t)
            if take == dead.n_blocks:  # the whole segment goes (its HBM count is known)
                ev, keep, n_hbm = ids[::-1], ids[:0], dead.n_hbm
            elif tier is None:
                ev = ids[ids.size - take :][::-1]
                keep = ids[: ids.size - take]
                held = dead.n_hbm  # a segment wholly in one tier needs no scan of its tail
                n_hbm = take if held == dead.n_blocks else int(np.count_nonzero(ev < hbm)) if held else 0
            else:
                pos = np.flatnonzero((ids >= hbm) == bool(tier))[::-1][:take]
                ev = ids[pos]
                keep = np.delete(ids, pos)
                n_hbm = take if tier == Tier.HBM else 0
            out.append(ev)
            n_hbm_all += n_hbm
            self.blocks[0] -= n_hbm
            self.blocks[1] -= take - n_hbm
            dead.n_hbm -= n_hbm
            dead.n_blocks -= take
            if dead.n_blocks == 0:
                del pool[sid]
            else:
                dead.chunks = [keep]
            k -= take
        ev = out[0] if len(out) == 1 else np.concatenate(out)
        self.evicted += int(ev.size)
        return ev, n_hbm_all
