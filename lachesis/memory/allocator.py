"""Lachesis' segment table: one row per live segment over the two free lists, placed by a policy (§4, Fig. 8).

``add_write`` fills a segment's partially-filled last block first, then asks the policy
(:mod:`lachesis.memory.policies`) for the tier of the new blocks (:class:`Placer`); ``close`` frees the row's
blocks at its boundary, or caches them for LRU eviction under a boundary-unaware policy
(:mod:`lachesis.memory.eviction`).  Written KV is counted at token level per tier and per class
(:mod:`lachesis.memory.written`); the live rows are kept by :mod:`lachesis.memory.live_set`.  A policy sees memory
only through the table's :class:`TableView`.  The contract and its assumptions (token attribution,
eviction) are in docs/design.md §5.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

import numpy as np

from lachesis.kv import (
    RHO_WINDOW,
    AllocationError,
    PlacementStats,
    Policy,
    SegmentInfo,
    Tier,
    as_tier,
)
from lachesis.memory.eviction import LRUEviction
from lachesis.memory.free_lists import TieredAllocator
from lachesis.memory.live_index import SegmentRow
from lachesis.memory.live_set import LiveLookup, LiveSet
from lachesis.memory.policies import as_policy
from lachesis.memory.written import WriteTotals, WrittenKV

__all__ = ["SegmentTable", "TableView", "Placer", "WriteTotals"]

_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


class TableView:
    """What §4 lets a policy know about memory, read-only (:class:`lachesis.kv.RankedMemoryView`):
    blocks per tier, the live workers ranked, the live segments' clairvoyant demand, the HBM live
    reviewers hold, and the closed segments' statistics.  One per table; its calls are the
    allocator's, the cache's and the indexes' own methods, bound (no forwarding on the hot path).
    It holds the table's parts, never the table (no cycle, so a dropped table frees at once)."""

    total: Callable[[Tier], int]
    free: Callable[[Tier], int]
    used: Callable[[Tier], int]
    cached: Callable[[Tier], int]
    live_workers: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    worker_position: Callable[[str], int]
    workers_ahead: Callable[[str], tuple[Iterator[int], int, int]]
    live_segments: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    segment_position: Callable[[str], int]
    demand_ahead: Callable[[str], tuple[int, int, int]]

    def __init__(self, table: SegmentTable) -> None:
        self.stats: PlacementStats = table.stats
        a = table.allocator
        self.total, self.free, self.used = a.total_blocks, a.free_blocks, a.used_blocks
        self.cached = table.cache.cached
        self._live = live = table.live
        w = live.workers
        self.live_workers, self.worker_position, self.workers_ahead = w.live_workers, w.worker_position, w.workers_ahead
        s = live.segments
        self.live_segments, self.segment_position, self.demand_ahead = s.live_segments, s.segment_position, s.demand_ahead

    def live_reviewer_hbm_blocks(self) -> int:
        """HBM blocks held by live reviewer segments."""
        return self._live.reviewer_hbm_blocks


class Placer:
    """Places a write's new blocks: the policy picks their tier from the segment's row and the view,
    then the free lists give them, evicting cached dead blocks (LRU) when both run out."""

    def __init__(self, policy: Policy, view: TableView, allocator: TieredAllocator, cache: LRUEviction,
                 live_rows: dict[str, SegmentRow]) -> None:
        self.policy = policy
        self.view = view
        self.allocator = allocator
        self.cache = cache
        self._live = live_rows  # read only, for the error message
        #: Policy option: cached (dead) HBM blocks count as free for HBM placement (see HBMFirstReclaim).
        self._reclaim_hbm = bool(getattr(policy, "reclaims_cached_hbm", False))

    def place(self, row: SegmentRow, have: int, nb: int) -> tuple[np.ndarray, int, int]:
        """nb new block ids for a row holding ``have`` tokens, in the tier the policy wants first; also
        how many are HBM blocks and the tier of the last one (known from where each came).  Sets the
        row's tier preference once placed; AllocationError, nothing changed, when memory cannot hold them."""
        info = SegmentInfo(row.segment_id, row.seg_class, row.session_id, row.role, row.rank_key, row.boundary,
                           row.n_blocks, have, nb, row.reads, row.close_s, row.final_tokens)
        want = self.policy.tier(info, self.view)
        if want.__class__ is not Tier:
            want = as_tier(want)
        a = self.allocator
        cache = self.cache
        if want == Tier.HBM and self._reclaim_hbm and cache.blocks[0]:
            # Cached HBM blocks count as free for HBM placement: evict LRU dead HBM blocks first.
            k = min(nb - a.free_blocks(Tier.HBM), int(cache.blocks[0]))
            if k > 0:
                self._check_room(nb)  # before anything changes
                a.free_owned(*cache.evict(k, Tier.HBM))
        got = a.take(want, nb)
        if got is None:
            free_total = self._check_room(nb)
            first = a.take(want, free_total) if free_total else None  # every free block; both lists are now empty
            got = a.reissue(*cache.evict(nb - free_total), want)
            if first is not None:
                got = np.concatenate([first[0], got[0]]), first[1] + got[1], got[2]
        row.tier_pref = want
        return got

    def _check_room(self, nb: int) -> int:
        """The free blocks of both tiers; AllocationError when they and the cached blocks cannot hold nb."""
        a = self.allocator
        free_total = a.free_total()
        cached = self.cache.blocks[0] + self.cache.blocks[1]
        if nb > free_total + cached:
            raise AllocationError(
                f"cannot place {nb} blocks: {free_total} free and {cached} cached blocks, "
                f"{len(self._live)} live segments hold the rest ({a.hbm_blocks} HBM + {a.hbf_blocks} HBF blocks)"
            )
        return free_total


class SegmentTable:
    """Lachesis' segment table over a :class:`TieredAllocator`: the harness's writes, reads and boundaries.

    ``policy`` is a policy object or a registered name (:func:`lachesis.memory.policies.as_policy`); it is
    given :attr:`view`, never the table.  Its parts: :attr:`live` (the live rows), :attr:`placer`,
    :attr:`written` (the KV-written counters), :attr:`cache` (dead blocks) and :attr:`lookup` (inspection)."""

    def __init__(self, allocator: TieredAllocator, policy: Policy | str, block_tokens: int = 16,
                 bytes_per_token: int = 1) -> None:
        if int(block_tokens) <= 0:
            raise ValueError(f"block_tokens must be > 0, got {block_tokens}")
        policy = as_policy(policy)
        self.allocator = allocator
        self.policy = policy
        self.block_tokens = int(block_tokens)
        self.stats = PlacementStats(rho_window=getattr(policy, "rho_window", RHO_WINDOW))
        self.bytes_per_token = int(bytes_per_token)
        self.written = WrittenKV(self.bytes_per_token)
        self.tokens_written = self.written.tokens_written  # (HBM, HBF) tokens so far, no WriteTotals built
        self.live = LiveSet(self.stats, self.block_tokens)
        self.cache = LRUEviction(allocator.hbm_blocks)  # dead segments of a boundary-unaware policy
        self.cached = self.cache.cached  # blocks of dead (closed, not yet evicted) segments in a tier
        self.lookup = LiveLookup(self.live.rows, self.cache.rows)
        self.view = TableView(self)
        self.placer = Placer(policy, self.view, allocator, self.cache, self.live.rows)
        # The write path's bindings: the live rows, the parts' calls, the counters it bumps in place.
        self._rows, self._open_row, self._place = self.live.rows, self.live.open, self.placer.place
        self._tok, self._tok_class, self._blk = self.written.tokens, self.written.by_class, self.written.blocks
        self._workers, self._segments = self.live.workers, self.live.segments

    @property
    def totals(self) -> WriteTotals:
        """KV written so far per tier and per class (a snapshot; token level, plus blocks and evictions)."""
        return self.written.totals(self.cache.evicted)

    # -- harness-facing calls ----------------------------------------------------------------------
    def open(self, info: SegmentInfo, now: float = 0.0) -> None:
        """Register a segment (at its spawn / first write) from what the harness reported about it (its
        size fields are not read; ``boundary`` "" is the class's default); a closed id cannot be reopened.
        ``close_s``/``final_tokens`` are the clairvoyant facts for the oracle policy (NaN when unknown)."""
        self._open(info.segment_id, info.seg_class, info.session_id, info.role, info.rank_key, info.boundary,
                   now, info.close_s, info.final_tokens)

    def _open(self, *fields: object) -> SegmentRow:
        """A new live row (:meth:`LiveSet.open`'s fields); its class's written-KV counters start at its first open."""
        row = self._open_row(*fields)
        if row.seg_class not in self._tok_class:
            self._tok_class[row.seg_class] = [0, 0]
        return row

    def add_write(self, segment_id: str, n_tokens: int, now: float = 0.0, *, seg_class: str | None = None,
                  session_id: str = "", role: str = "", rank_key: float = math.nan,
                  close_s: float = math.nan, final_tokens: float = math.nan) -> np.ndarray:
        """Write n_tokens of KV to a segment (opening it if seg_class is given); returns the new block ids.

        Raises AllocationError, with no counter or block changed, when memory cannot hold the write
        (a segment this call opened stays open, empty)."""
        row = self._rows.get(segment_id)
        if row is None:
            if seg_class is None:
                raise KeyError(f"add_write: segment {segment_id!r} is not open (pass seg_class= to open it)")
            row = self._open(segment_id, seg_class, session_id, role, rank_key, None, now, close_s, final_tokens)
        n = n_tokens if type(n_tokens) is int else int(n_tokens)
        if n < 0:
            raise ValueError(f"add_write: segment {segment_id!r}: n_tokens must be >= 0, got {n_tokens}")
        bt = self.block_tokens
        have = row.n_tokens
        room = row.n_blocks * bt - have
        fill = room if room < n else n
        rest = n - fill
        nb = -(-rest // bt)
        if nb:  # decide and allocate before touching any counter, so a failed write changes nothing
            ids, n_hbm, last = self._place(row, have, nb)
        row.last_use = float(now)
        row.n_tokens = have + n
        tok = self._tok
        by_class = self._tok_class[row.seg_class]
        if fill:
            tok[row.last_tier] += fill
            by_class[row.last_tier] += fill
        if not nb:
            return _EMPTY
        n_hbf = nb - n_hbm
        slack = nb * bt - rest  # empty slots of the last new block
        th, tf = (n_hbm * bt, n_hbf * bt - slack) if last else (n_hbm * bt - slack, n_hbf * bt)
        tok[0] += th
        tok[1] += tf
        by_class[0] += th
        by_class[1] += tf
        blk = self._blk
        blk[0] += n_hbm
        blk[1] += n_hbf
        row.chunks.append(ids)
        row.n_blocks += nb
        row.n_hbm += n_hbm
        row.last_tier = last
        if row.rank is not None:
            self._workers.grew(row, nb, n_hbm)
        elif n_hbm and row.seg_class == "reviewer":
            self.live.reviewer_hbm_blocks += n_hbm
        if row.aslot >= 0:
            self._segments.grew(row, nb, n_hbm)
        return ids

    def add_reads(self, segment_id: str, read_tokens: int) -> None:
        """Record decode-stage reads of a live segment (Eq. 3: a request decoding L tokens reads each
        token of the segment in its context L times); a segment's realized ρR/W is its reads over
        its tokens written when it closes (:class:`lachesis.kv.PlacementStats`)."""
        row = self._rows.get(segment_id)
        if row is None:
            raise KeyError(f"add_reads: segment {segment_id!r} is not open")
        if type(read_tokens) is not int and (isinstance(read_tokens, (bool, np.bool_))
                                             or not isinstance(read_tokens, (int, np.integer))) or read_tokens < 0:
            raise ValueError(f"add_reads: segment {segment_id!r}: read_tokens must be an integer >= 0, got {read_tokens!r}")
        row.reads += int(read_tokens)

    def close(self, segment_id: str, now: float = 0.0, last_use: float | None = None) -> int:
        """Report a segment's boundary: free its blocks (or cache them, boundary-unaware policy); returns its block count.

        ``last_use`` (default ``now``) is the time the segment was last read; cached dead segments
        are evicted in increasing ``last_use`` (ties: close order)."""
        row = self.live.close(segment_id)
        row.last_use = float(now if last_use is None else last_use)
        if self.policy.frees_at_boundary:
            if row.n_blocks:
                self.allocator.free_owned(row.block_ids(), row.n_hbm)
            row.chunks = []
        elif row.n_blocks:
            self.cache.add(row)
        return row.n_blocks

    def end_session(self, session_id: str, now: float = 0.0) -> list[str]:
        """Close every live segment of a session (boundary ``session_end``), in open order; returns their ids.
        The session's own reuse history is forgotten: a later segment of the same id is a new session."""
        ids = list(self.live.by_session.get(session_id, ()))
        for s in ids:
            self.close(s, now)
        self.stats.session_ended(session_id)
        return ids
