"""Lachesis' segment table: one row per live segment over the two free lists, placed by a policy (§4, Fig. 8).

The table is the only writer of its rows (:class:`lachesis.memory.segment_row.SegmentRow`) and tells its
parts of every event: the live index (:mod:`lachesis.memory.live_index`) of each open, placement, growth
and close, the placement statistics (:mod:`lachesis.memory.placement_stats`) of each open and close, the
written-KV counters (:mod:`lachesis.memory.written`) of each write, and the prefix-cache pool
(:mod:`lachesis.memory.eviction`) of each dead segment it caches; each part keeps its own numbers.
``add_write`` fills a segment's partially-filled last block first, then asks the policy
(:mod:`lachesis.memory.policies`) for the tier of the new blocks (:class:`Placer`); ``close`` frees the
row's blocks at its boundary, or hands them to the pool for LRU eviction under a boundary-unaware policy.
A policy sees memory only through the table's :class:`TableView`.  The contract and its assumptions
(token attribution, eviction) are in docs/design.md §5.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import numpy as np

from lachesis.kv import DEFAULT_BOUNDARY, AllocationError, Tier, as_tier, check_class
from lachesis.memory.eviction import LRUEviction
from lachesis.memory.free_lists import TieredAllocator
from lachesis.memory.live_index import LiveIndex
from lachesis.memory.lookup import LiveLookup
from lachesis.memory.placement_stats import RHO_WINDOW, PlacementStats
from lachesis.memory.policies import as_policy
from lachesis.memory.protocol import Policy, SegmentInfo
from lachesis.memory.segment_row import SegmentRow
from lachesis.memory.written import WriteTotals, WrittenKV

__all__ = ["SegmentTable", "TableView", "Placer", "WriteTotals"]

_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


def _as_float(x: Any, segment_id: str, field_name: str) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"segment {segment_id!r}: {field_name} must be a number (or NaN), got {x!r}") from None


class TableView:
    """What §4 lets a policy know about memory, read-only (:class:`lachesis.memory.protocol.MemoryView`):
    blocks per tier, the live workers ranked, the live segments' clairvoyant demand, the HBM live
    reviewers hold, and the closed segments' statistics.  One per table; its calls are the
    allocator's, the pool's and the live index's own methods, bound (no forwarding on the hot path).
    It holds the table's parts, never the table (no cycle, so a dropped table frees at once)."""

    total: Callable[[Tier], int]
    free: Callable[[Tier], int]
    used: Callable[[Tier], int]
    cached: Callable[[Tier], int]
    live_reviewer_hbm_blocks: Callable[[], int]
    workers_ahead: Callable[[str], tuple[Iterator[int], int, int]]
    spawns_ahead: Callable[[str], tuple[Iterator[tuple[int, float]], tuple[int, float], int]]
    demand_ahead: Callable[[str], tuple[int, int, int]]
    live_workers: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    worker_position: Callable[[str], int]
    live_segments: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    segment_position: Callable[[str], int]

    def __init__(self, stats: PlacementStats, allocator: TieredAllocator, cache: LRUEviction, live: LiveIndex) -> None:
        self.stats = stats
        a = allocator
        self.total, self.free, self.used = a.total_blocks, a.free_blocks, a.used_blocks
        self.cached = cache.cached
        self.live_reviewer_hbm_blocks = live.live_reviewer_hbm_blocks
        w = live.workers
        self.workers_ahead, self.spawns_ahead = w.workers_ahead, w.spawns_ahead
        self.live_workers, self.worker_position = w.live_workers, w.worker_position
        s = live.segments
        self.demand_ahead = s.demand_ahead
        self.live_segments, self.segment_position = s.live_segments, s.segment_position


class Placer:
    """Places a write's new blocks: the policy picks their tier from the segment's row and the view,
    then the free lists give them, evicting cached dead blocks (LRU) when both run out."""

    def __init__(self, policy: Policy, view: TableView, allocator: TieredAllocator, cache: LRUEviction,
                 n_live: Callable[[], int]) -> None:
        self.policy = policy
        self.view = view
        self.allocator = allocator
        self.cache = cache
        self._n_live = n_live  # for the error message
        #: Policy option: cached (dead) HBM blocks count as free for HBM placement (see HBMFirstReclaim).
        self._reclaim_hbm = bool(getattr(policy, "reclaims_cached_hbm", False))

    def place(self, row: SegmentRow, have: int, nb: int) -> tuple[np.ndarray, int, int, Tier]:
        """nb new block ids for a row holding ``have`` tokens, in the tier the policy wants first; also
        how many are HBM blocks, the tier of the last one (known from where each came) and the tier the
        policy wanted.  AllocationError, nothing changed, when memory cannot hold them."""
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
        return got[0], got[1], got[2], want

    def _check_room(self, nb: int) -> int:
        """The free blocks of both tiers; AllocationError when they and the cached blocks cannot hold nb."""
        a = self.allocator
        free_total = a.free_total()
        cached = self.cache.blocks[0] + self.cache.blocks[1]
        if nb > free_total + cached:
            raise AllocationError(
                f"cannot place {nb} blocks: {free_total} free and {cached} cached blocks, "
                f"{self._n_live()} live segments hold the rest ({a.hbm_blocks} HBM + {a.hbf_blocks} HBF blocks)"
            )
        return free_total


class SegmentTable:
    """Lachesis' segment table over a :class:`TieredAllocator`: the harness's writes, reads and boundaries.

    ``policy`` is a policy object or a registered name (:func:`lachesis.memory.policies.as_policy`); it is
    given :attr:`view`, never the table.  The table writes its rows; its parts, each told of the events
    that concern it: :attr:`live` (the live index), :attr:`stats` (placement statistics), :attr:`placer`,
    :attr:`written` (the KV-written counters) and :attr:`cache` (dead blocks); :attr:`lookup` answers the
    harness's questions."""

    def __init__(self, allocator: TieredAllocator, policy: Policy | str, block_tokens: int = 16,
                 bytes_per_token: int = 1) -> None:
        if int(block_tokens) <= 0:
            raise ValueError(f"block_tokens must be > 0, got {block_tokens}")
        policy = as_policy(policy)
        self.allocator = allocator
        self.policy = policy
        self.block_tokens = int(block_tokens)
        self.bytes_per_token = int(bytes_per_token)
        self._rows: dict[str, SegmentRow] = {}  # the live rows, in open order
        self._by_session: dict[str, dict[str, None]] = {}  # session -> its live segment ids, in open order
        self._closed_ids: set[str] = set()
        self.stats = PlacementStats(rho_window=getattr(policy, "rho_window", RHO_WINDOW))
        self.written = WrittenKV(self.bytes_per_token)
        self.tokens_written = self.written.tokens_written  # (HBM, HBF) tokens so far, no WriteTotals built
        self.live = LiveIndex(self._rows)
        self.cache = LRUEviction(allocator.hbm_blocks)  # dead segments of a boundary-unaware policy
        self.cached = self.cache.cached  # blocks of dead (closed, not yet evicted) segments in a tier
        self.lookup = LiveLookup(self._rows, self.cache.blocks_of)
        self.view = TableView(self.stats, allocator, self.cache, self.live)
        self.placer = Placer(policy, self.view, allocator, self.cache, self._rows.__len__)
        # The write path's bindings: the parts' calls.
        self._place, self._wrote, self._grew = self.placer.place, self.written.wrote, self.live.grew
        self._worker_placing = self.live.workers.placing

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

    def _open(self, segment_id: str, seg_class: str, session_id: str, role: str, rank_key: float,
              boundary: str | None, now: float, close_s: float, final_tokens: float) -> SegmentRow:
        """A new live row from a segment's fields (``boundary`` None or "": the class's default), its parts told."""
        if segment_id in self._rows:
            raise ValueError(f"segment {segment_id!r} is already open")
        if segment_id in self._closed_ids:
            raise ValueError(f"segment {segment_id!r} was already closed; rematerialized KV needs a new segment id")
        check_class(segment_id, seg_class)
        row = SegmentRow(segment_id, seg_class, str(session_id), str(role or ""),
                         float(rank_key) if rank_key is not None else math.nan,
                         boundary or DEFAULT_BOUNDARY[seg_class])
        if close_s is not None:
            row.close_s = close_s if type(close_s) is float else _as_float(close_s, segment_id, "close_s")
        if final_tokens is not None:
            final = final_tokens if type(final_tokens) is float else _as_float(final_tokens, segment_id, "final_tokens")
            if final == final:
                if not (final >= 0 and math.isfinite(final)):
                    raise ValueError(f"segment {segment_id!r}: final_tokens must be a finite number >= 0 (or NaN), "
                                     f"got {final_tokens!r}")
                row.final_tokens = final
                row.final_blocks = float(math.ceil(final / self.block_tokens))
        row.last_use = float(now)
        self._rows[segment_id] = row
        mine = self._by_session.get(row.session_id)
        if mine is None:
            mine = self._by_session[row.session_id] = {}
        mine[segment_id] = None
        self.live.opened(row)
        self.stats.opened(seg_class, self.live.n_reviewers)
        self.written.opened(seg_class)
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
            if row.tier_pref is None and row.seg_class == "worker":  # not yet placed: this may be its spawn
                self._worker_placing(segment_id, row.n_blocks + nb, self.stats.mean_worker_blocks)
            ids, n_hbm, last, want = self._place(row, have, nb)
        row.last_use = float(now)
        row.n_tokens = have + n
        th = tf = 0
        if fill:  # the partly filled last block, in its tier
            if row.last_tier:
                tf = fill
            else:
                th = fill
        if not nb:
            if fill:
                self._wrote(row.seg_class, th, tf, 0, 0)
            return _EMPTY
        n_hbf = nb - n_hbm
        slack = nb * bt - rest  # empty slots of the last new block
        if last:
            th += n_hbm * bt
            tf += n_hbf * bt - slack
        else:
            th += n_hbm * bt - slack
            tf += n_hbf * bt
        self._wrote(row.seg_class, th, tf, n_hbm, n_hbf)
        row.chunks.append(ids)
        row.n_blocks += nb
        row.n_hbm += n_hbm
        row.last_tier = last
        row.tier_pref = want
        self._grew(row, nb, n_hbm)
        return ids

    def add_reads(self, segment_id: str, read_tokens: int) -> None:
        """Record decode-stage reads of a live segment (Eq. 3: a request decoding L tokens reads each
        token of the segment in its context L times); a segment's realized ρR/W is its reads over
        its tokens written when it closes (:class:`lachesis.memory.placement_stats.PlacementStats`)."""
        row = self._rows.get(segment_id)
        if row is None:
            raise KeyError(f"add_reads: segment {segment_id!r} is not open")
        if type(read_tokens) is not int and (isinstance(read_tokens, (bool, np.bool_))
                                             or not isinstance(read_tokens, (int, np.integer))) or read_tokens < 0:
            raise ValueError(f"add_reads: segment {segment_id!r}: read_tokens must be an integer >= 0, "
                             f"got {read_tokens!r}")
        row.reads += int(read_tokens)

    def close(self, segment_id: str, now: float = 0.0, last_use: float | None = None) -> int:
        """Report a segment's boundary: free its blocks (or cache them, boundary-unaware policy); returns its
        block count.

        ``last_use`` (default ``now``) is the time the segment was last read; cached dead segments
        are evicted in increasing ``last_use`` (ties: close order)."""
        row = self._rows.pop(segment_id, None)
        if row is None:
            raise KeyError(f"close: segment {segment_id!r} is not open")
        mine = self._by_session[row.session_id]
        del mine[segment_id]
        if not mine:
            del self._by_session[row.session_id]
        self.live.closed(row)
        self._closed_ids.add(segment_id)
        self.stats.closed(row.seg_class, row.n_blocks, row.session_id, row.n_tokens, row.reads)
        row.last_use = float(now if last_use is None else last_use)
        if row.n_blocks:
            if self.policy.frees_at_boundary:
                self.allocator.free_owned(row.block_ids(), row.n_hbm)
            else:
                self.cache.add(segment_id, row.chunks, row.n_blocks, row.n_hbm, row.last_use)
        return row.n_blocks

    def end_session(self, session_id: str, now: float = 0.0) -> list[str]:
        """Close every live segment of a session (boundary ``session_end``), in open order; returns their ids.
        The session's own reuse history is forgotten: a later segment of the same id is a new session."""
        ids = list(self._by_session.get(session_id, ()))
        for s in ids:
            self.close(s, now)
        self.stats.session_ended(session_id)
        return ids
