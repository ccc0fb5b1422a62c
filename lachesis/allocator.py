"""Lachesis' segment table: one row per live segment over the two free lists, placed by a policy (§4, Fig. 8).

``add_write`` fills a segment's partially-filled last block first, then asks the policy
(:mod:`lachesis.policies`) for the tier of the new blocks; ``close`` frees the row's blocks at its
boundary, or caches them for LRU eviction under a boundary-unaware policy (:mod:`lachesis.eviction`).
Written KV is counted at token level per tier and per class.  A policy sees memory only through the
table's :class:`TableView`.  The contract and its assumptions (token attribution, eviction) are in
docs/design.md §5.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from lachesis.eviction import LRUEviction
from lachesis.free_lists import TieredAllocator
from lachesis.kv import (
    DEFAULT_BOUNDARY,
    RHO_WINDOW,
    AllocationError,
    PlacementStats,
    Policy,
    SegmentInfo,
    Tier,
    as_tier,
    check_class,
)
from lachesis.live_index import LiveSegments, SegmentRow, WorkerRanking
from lachesis.policies import as_policy

__all__ = ["SegmentTable", "TableView", "WriteTotals"]

_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


@dataclass
class WriteTotals:
    """KV written per tier (token level, and blocks), overall and per segment class."""

    tokens: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))  # [HBM, HBF]
    tokens_by_class: dict[str, np.ndarray] = field(default_factory=dict)  # class -> [HBM, HBF]
    blocks: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))  # blocks allocated per tier
    evicted_blocks: int = 0
    bytes_per_token: int = 1

    @property
    def bytes(self) -> np.ndarray:
        """Bytes written per tier [HBM, HBF]."""
        return self.tokens * self.bytes_per_token

    @property
    def hbm_bytes(self) -> int:
        return int(self.bytes[Tier.HBM])

    @property
    def hbf_bytes(self) -> int:
        return int(self.bytes[Tier.HBF])

    @property
    def total_bytes(self) -> int:
        return int(self.bytes.sum())

    def bytes_by_class(self) -> dict[str, tuple[int, int]]:
        """Class -> (HBM bytes, HBF bytes)."""
        return {c: (int(v[0]) * self.bytes_per_token, int(v[1]) * self.bytes_per_token) for c, v in self.tokens_by_class.items()}

    def as_dict(self) -> dict[str, Any]:
        """Plain-Python summary (for save_numbers / comparisons)."""
        return {
            "hbm_tokens": int(self.tokens[0]),
            "hbf_tokens": int(self.tokens[1]),
            "hbm_bytes": self.hbm_bytes,
            "hbf_bytes": self.hbf_bytes,
            "hbm_blocks": int(self.blocks[0]),
            "hbf_blocks": int(self.blocks[1]),
            "evicted_blocks": int(self.evicted_blocks),
            "by_class": {c: [int(v[0]), int(v[1])] for c, v in sorted(self.tokens_by_class.items())},
        }


def _as_float(x: Any, segment_id: str, field_name: str) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"segment {segment_id!r}: {field_name} must be a number (or NaN), got {x!r}") from None


class TableView:
    """What §4 lets a policy know about memory, read-only (:class:`lachesis.kv.RankedMemoryView`):
    blocks per tier, the live workers ranked, the live segments' clairvoyant demand, the HBM live
    reviewers hold, and the closed segments' statistics.  One per table; its calls are the
    allocator's, the cache's and the indexes' own methods, bound (no forwarding on the hot path)."""

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
        self._table = weakref.ref(table)  # the table owns its view: no cycle, so a dropped table frees at once
        self.stats: PlacementStats = table.stats
        a = table.allocator
        self.total, self.free, self.used = a.total_blocks, a.free_blocks, a.used_blocks
        self.cached = table.cache.cached
        w = table.workers
        self.live_workers, self.worker_position, self.workers_ahead = w.live_workers, w.worker_position, w.workers_ahead
        s = table.segments
        self.live_segments, self.segment_position, self.demand_ahead = s.live_segments, s.segment_position, s.demand_ahead

    def live_reviewer_hbm_blocks(self) -> int:
        """HBM blocks held by live reviewer segments."""
        return self._table().reviewer_hbm_blocks


class SegmentTable:
    """Lachesis' segment table over a :class:`TieredAllocator`, placing new blocks by a policy.

    ``policy`` is a policy object or a registered name (:func:`lachesis.policies.as_policy`); it is
    given :attr:`view`, never the table."""

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
        # Python-int counters on the hot path; :attr:`totals` snapshots them as a WriteTotals.
        self._tok = [0, 0]
        self._tok_class: dict[str, list[int]] = {}
        self._blk = [0, 0]
        self._live: dict[str, SegmentRow] = {}  # in open order
        self._by_session: dict[str, dict[str, None]] = {}  # session -> its live segment ids, in open order
        self._reviewers: dict[str, SegmentRow] = {}
        self._closed_ids: set[str] = set()
        #: Policy option: cached (dead) HBM blocks count as free for HBM placement (see HBMFirstReclaim).
        self._reclaim_hbm = bool(getattr(policy, "reclaims_cached_hbm", False))
        self.cache = LRUEviction(allocator.hbm_blocks)  # dead segments of a boundary-unaware policy
        self.workers = WorkerRanking()
        self.segments = LiveSegments(self._live)
        self.reviewer_hbm_blocks = 0  # HBM blocks live reviewers hold
        self.view = TableView(self)

    @property
    def totals(self) -> WriteTotals:
        """KV written so far per tier and per class (a snapshot; token level, plus blocks and evictions)."""
        return WriteTotals(
            tokens=np.array(self._tok, dtype=np.int64),
            tokens_by_class={c: np.array(v, dtype=np.int64) for c, v in self._tok_class.items()},
            blocks=np.array(self._blk, dtype=np.int64),
            evicted_blocks=self.cache.evicted,
            bytes_per_token=self.bytes_per_token,
        )

    def tokens_written(self) -> tuple[int, int]:
        """(HBM, HBF) tokens written so far, without building a WriteTotals (hot-path friendly)."""
        return self._tok[0], self._tok[1]

    def cached(self, tier: Tier | int) -> int:
        """Blocks of dead (closed, not yet evicted) segments in the tier."""
        return self.cache.cached(tier)

    # -- harness-facing calls ----------------------------------------------------------------------
    def open(self, info: SegmentInfo, now: float = 0.0) -> None:
        """Register a segment (at its spawn / first write) from what the harness reported about it (its
        size fields are not read; ``boundary`` "" is the class's default); a closed id cannot be reopened.
        ``close_s``/``final_tokens`` are the clairvoyant facts for the oracle policy (NaN when unknown)."""
        self._open(info.segment_id, info.seg_class, info.session_id, info.role, info.rank_key, info.boundary, now,
                   info.close_s, info.final_tokens)

    def _open(self, segment_id: str, seg_class: str, session_id: str, role: str, rank_key: float,
              boundary: str | None, now: float, close_s: float, final_tokens: float) -> SegmentRow:
        """:meth:`open` from its fields (the write path's form: no SegmentInfo built), returning the new row."""
        if segment_id in self._live:
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
                    raise ValueError(f"segment {segment_id!r}: final_tokens must be a finite number >= 0 (or NaN), got {final_tokens!r}")
                row.final_tokens = final
                row.final_blocks = float(math.ceil(final / self.block_tokens))
        row.last_use = float(now)
        self._live[segment_id] = row
        mine = self._by_session.get(row.session_id)
        if mine is None:
            mine = self._by_session[row.session_id] = {}
        mine[segment_id] = None
        if seg_class == "worker":
            self.workers.add(row)
        elif seg_class == "reviewer":
            self._reviewers[segment_id] = row
        if self.segments.cols is not None:  # a policy asked for them: keep them current
            self.segments.add(row)
        if seg_class not in self._tok_class:
            self._tok_class[seg_class] = [0, 0]
        self.stats.opened(seg_class, len(self._reviewers))
        return row

    def add_write(self, segment_id: str, n_tokens: int, now: float = 0.0, *, seg_class: str | None = None,
                  session_id: str = "", role: str = "", rank_key: float = math.nan,
                  close_s: float = math.nan, final_tokens: float = math.nan) -> np.ndarray:
        """Write n_tokens of KV to a segment (opening it if seg_class is given); returns the new block ids.

        Raises AllocationError, with no counter or block changed, when memory cannot hold the write
        (a segment this call opened stays open, empty)."""
        row = self._live.get(segment_id)
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
            info = SegmentInfo(segment_id, row.seg_class, row.session_id, row.role, row.rank_key, row.boundary,
                               row.n_blocks, have, nb, row.reads, row.close_s, row.final_tokens)
            want = self.policy.tier(info, self.view)
            if want.__class__ is not Tier:
                want = as_tier(want)
            ids, n_hbm, last = self._allocate(want, nb)
            row.tier_pref = want
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
            self.workers.grew(row, nb, n_hbm)
        elif n_hbm and row.seg_class == "reviewer":
            self.reviewer_hbm_blocks += n_hbm
        if row.aslot >= 0:
            self.segments.grew(row, nb, n_hbm)
        return ids

    def add_reads(self, segment_id: str, read_tokens: int) -> None:
        """Record decode-stage reads of a live segment (Eq. 3: a request decoding L tokens reads each
        token of the segment in its context L times); a segment's realized ρR/W is its reads over
        its tokens written when it closes (:class:`lachesis.kv.PlacementStats`)."""
        row = self._live.get(segment_id)
        if row is None:
            raise KeyError(f"add_reads: segment {segment_id!r} is not open")
        if type(read_tokens) is not int and (isinstance(read_tokens, (bool, np.bool_))
                                             or not isinstance(read_tokens, (int, np.integer))) or read_tokens < 0:
            raise ValueError(f"add_reads: segment {segment_id!r}: read_tokens must be an integer >= 0, got {read_tokens!r}")
        row.reads += int(read_tokens)

    def live_class(self, segment_id: str) -> str | None:
        """The class of a live segment, None when it is not open."""
        row = self._live.get(segment_id)
        return None if row is None else row.seg_class

    def close(self, segment_id: str, now: float = 0.0, last_use: float | None = None) -> int:
        """Report a segment's boundary: free its blocks (or cache them, boundary-unaware policy); returns its block count.

        ``last_use`` (default ``now``) is the time the segment was last read; cached dead segments
        are evicted in increasing ``last_use`` (ties: close order)."""
        row = self._live.pop(segment_id, None)
        if row is None:
            raise KeyError(f"close: segment {segment_id!r} is not open")
        mine = self._by_session[row.session_id]
        del mine[segment_id]
        if not mine:
            del self._by_session[row.session_id]
        if row.rank is not None:  # a live worker
            self.workers.remove(row)
        if row.aslot >= 0:
            self.segments.remove(row)
        if row.seg_class == "reviewer":
            del self._reviewers[segment_id]
            self.reviewer_hbm_blocks -= row.n_hbm
        self._closed_ids.add(segment_id)
        self.stats.closed(row.seg_class, row.n_blocks, row.session_id, row.n_tokens, row.reads)
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
        ids = list(self._by_session.get(session_id, ()))
        for s in ids:
            self.close(s, now)
        self.stats.session_ended(session_id)
        return ids

    def _allocate(self, want: Tier, nb: int) -> tuple[np.ndarray, int, int]:
        """nb block ids for a write, ``want`` first, evicting cached dead blocks when none are free;
        also how many are HBM blocks and the tier of the last one (known from where each came)."""
        a = self.allocator
        cache = self.cache
        if want == Tier.HBM and self._reclaim_hbm and cache.blocks[0]:
            # Cached HBM blocks count as free for HBM placement: evict LRU dead HBM blocks first.
            k = min(nb - a.free_blocks(Tier.HBM), int(cache.blocks[0]))
            if k > 0:
                self._check_room(nb)  # before anything changes
                a.free_owned(*cache.evict(k, Tier.HBM))
        got = a.take(want, nb)
        if got is not None:
            return got
        free_total = self._check_room(nb)
        first = a.take(want, free_total) if free_total else None  # every free block; both lists are now empty
        rest = a.reissue(*cache.evict(nb - free_total), want)
        if first is None:
            return rest
        return np.concatenate([first[0], rest[0]]), first[1] + rest[1], rest[2]

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

    # -- inspection ------------------------------------------------------------------------------
    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._live

    def __len__(self) -> int:
        return len(self._live)

    def is_live(self, segment_id: str) -> bool:
        """Whether the segment is open (written or opened, boundary not yet reported)."""
        return segment_id in self._live

    def seg_class_of(self, segment_id: str) -> str:
        """Class of a live segment (KeyError if it is not open)."""
        row = self._live.get(segment_id)
        if row is None:
            raise KeyError(f"segment {segment_id!r} is not open")
        return row.seg_class

    def hbm_fraction(self, segment_ids: Iterable[str]) -> np.ndarray:
        """Per segment id, the fraction of its blocks in HBM (float64); 0 for a segment that is not
        live or holds no block.  One dictionary lookup per id, no per-block work."""
        live = self._live
        out = []
        for sid in segment_ids:
            row = live.get(sid)
            out.append(row.n_hbm / row.n_blocks if row is not None and row.n_blocks else 0.0)
        return np.array(out, dtype=np.float64)

    def hbm_share(self, segment_ids: Iterable[str], weights: Iterable[int]) -> int | None:
        """Σ weight over the segments lying wholly in HBM (one not live or holding no block counts 0);
        None when a segment's blocks are split across the tiers (then :meth:`hbm_fraction` is needed)."""
        live = self._live
        acc = 0
        for sid, w in zip(segment_ids, weights):
            row = live.get(sid)
            if row is not None and row.n_hbm:
                if row.n_hbm != row.n_blocks:
                    return None
                acc += w
        return acc

    def blocks_of(self, segment_id: str) -> np.ndarray:
        """Block ids a live (or cached dead) segment holds, in write order."""
        row = self._live.get(segment_id) or self.cache.rows.get(segment_id)
        if row is None:
            raise KeyError(f"segment {segment_id!r} holds no blocks (unknown, freed or evicted)")
        return row.block_ids().copy()

    def rows(self) -> list[dict[str, Any]]:
        """One dict per live segment, in open order (id, class, boundary, session, role, rank key, tier
        preference, blocks, HBM blocks, tokens, reads, clairvoyant close time and final size)."""
        return [dict(segment_id=r.segment_id, seg_class=r.seg_class, boundary=r.boundary, session_id=r.session_id,
                     role=r.role, rank_key=r.rank_key, tier_pref=None if r.tier_pref is None else r.tier_pref.name,
                     n_blocks=r.n_blocks, n_hbm=r.n_hbm, n_tokens=r.n_tokens, read_tokens=r.reads,
                     close_s=r.close_s, final_tokens=r.final_tokens)
                for r in self._live.values()]
