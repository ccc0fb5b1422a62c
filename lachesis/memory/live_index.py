"""The segment table's rows and the indexes over its live rows that placement policies read (§4).

:class:`SegmentRow` is one segment's row; :class:`WorkerRanking` keeps the node's live workers
ranked by predicted lifetime (the predictive path's ranking, kept current per open and close so a
decision reads a prefix instead of sorting); :class:`LiveSegments` keeps every live segment's
clairvoyant close time and remaining size as numpy columns (the oracle's ranking).  Both are read
through the policy's memory view (docs/design.md §5).
"""

from __future__ import annotations

import bisect
import math
from itertools import islice
from typing import Iterator

import numpy as np

from lachesis.kv import Tier

__all__ = ["SegmentRow", "LiveColumns", "WorkerRanking", "LiveSegments"]

_sum = np.add.reduce


class SegmentRow:
    """One live (or cached dead) segment: its metadata and block ids as numpy chunks."""

    __slots__ = ("segment_id", "seg_class", "session_id", "role", "rank_key", "boundary", "chunks",
                 "n_blocks", "n_hbm", "n_tokens", "last_tier", "last_use", "wslot", "aslot", "tier_pref",
                 "reads", "close_s", "final_tokens", "final_blocks", "rank")

    def __init__(self, segment_id: str, seg_class: str, session_id: str, role: str, rank_key: float, boundary: str) -> None:
        self.segment_id = segment_id
        self.seg_class = seg_class
        self.session_id = session_id
        self.role = role
        self.rank_key = rank_key
        self.boundary = boundary
        self.chunks: list[np.ndarray] = []
        self.n_blocks = 0
        self.n_hbm = 0
        self.n_tokens = 0
        self.last_tier = 0  # tier of the segment's last (possibly partial) block
        self.last_use = 0.0
        self.wslot = -1  # slot in the worker ranking's columns (workers only)
        self.aslot = -1  # slot in the live-segment columns (once a policy asked for them)
        self.tier_pref: Tier | None = None  # the policy's latest decision for this segment
        self.reads = 0  # decode-stage reads reported so far (Eq. 3)
        self.close_s = math.nan  # clairvoyant close time (oracle)
        self.final_tokens = math.nan  # clairvoyant final size in tokens (oracle)
        self.final_blocks = math.nan  # the same in blocks
        self.rank: tuple | None = None  # (rank key, NaN as +inf; open order; row): entry in the worker ranking

    def blocks_to_write(self) -> int:
        """Blocks the segment has still to write by its clairvoyant final size (0 when unknown)."""
        f = self.final_blocks
        return 0 if f != f or f <= self.n_blocks else int(f) - self.n_blocks

    def block_ids(self) -> np.ndarray:
        """The row's block ids in write order (its chunks joined once)."""
        if not self.chunks:
            return np.zeros(0, dtype=np.int64)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


class LiveColumns:
    """Live rows as parallel numpy columns in open order (vectorized rankings); a closed row's slot
    is masked and the columns are compacted once most slots are dead."""

    __slots__ = ("attr", "n", "dead", "ids", "key", "close", "final", "blocks", "hbm", "alive", "rows",
                 "rclose", "demand")

    def __init__(self, attr: str) -> None:
        self.attr = attr  # the SegmentRow attribute holding a row's slot
        self.n = 0
        self.dead = 0
        self.ids = np.empty(64, dtype=object)
        self.key = np.empty(64, dtype=np.float64)  # rank key
        self.close = np.empty(64, dtype=np.float64)  # clairvoyant close time
        self.final = np.empty(64, dtype=np.float64)  # clairvoyant final size in blocks
        self.blocks = np.zeros(64, dtype=np.int64)
        self.hbm = np.zeros(64, dtype=np.int64)
        self.alive = np.zeros(64, dtype=bool)
        self.rclose = np.empty(64, dtype=np.float64)  # close time as the oracle ranks it (unknown: +inf)
        self.demand = np.zeros(64, dtype=np.int64)  # HBM blocks held + blocks still to write (0 once dead)
        self.rows: list[SegmentRow | None] = []

    _COLS = ("ids", "key", "close", "final", "blocks", "hbm", "rclose", "demand", "alive")  # alive last: compact masks by it

    def add(self, row: SegmentRow) -> None:
        if self.n == self.ids.size:
            for c in self._COLS:
                a = getattr(self, c)
                setattr(self, c, np.concatenate([a, np.zeros_like(a)]))
        i = self.n
        self.ids[i] = row.segment_id
        self.key[i] = row.rank_key
        self.close[i] = row.close_s
        self.final[i] = row.final_blocks
        self.blocks[i] = row.n_blocks
        self.hbm[i] = row.n_hbm
        self.alive[i] = True
        self.rclose[i] = math.inf if row.close_s != row.close_s else row.close_s
        self.demand[i] = row.n_hbm + row.blocks_to_write()
        self.rows.append(row)
        setattr(row, self.attr, i)
        self.n += 1

    def remove(self, row: SegmentRow) -> None:
        i = getattr(row, self.attr)
        self.alive[i] = False
        self.demand[i] = 0
        self.rows[i] = None
        setattr(row, self.attr, -1)
        self.dead += 1
        if self.dead > 64 and 2 * self.dead > self.n:
            self.compact()

    def compact(self) -> None:
        m = self.alive[: self.n]
        k = int(m.sum())
        for c in self._COLS:
            a = getattr(self, c)
            a[:k] = a[: self.n][m]
        self.alive[k : self.n] = False
        self.rows = [r for r in self.rows if r is not None]
        for i, r in enumerate(self.rows):
            setattr(r, self.attr, i)
        self.n, self.dead = k, 0

    def position(self, row: SegmentRow) -> int:
        """Index of a row among the live slots (open order)."""
        i = getattr(row, self.attr)
        return int(self.alive[:i].sum()) if self.dead else i

    def live(self, *cols: str) -> tuple[np.ndarray, ...]:
        """The named columns over live slots, in open order (views when no slot is dead)."""
        n = self.n
        if self.dead:
            m = self.alive[:n]
            return tuple(getattr(self, c)[:n][m] for c in cols)
        return tuple(getattr(self, c)[:n] for c in cols)


class _RowIndex:
    """Live rows by segment id, with numpy columns of them (:class:`LiveColumns`) built the first time
    a policy asks and kept current from then on."""

    def __init__(self, rows: dict[str, SegmentRow], slot_attr: str, what: str) -> None:
        self.rows = rows  # live rows, in open order
        self.cols: LiveColumns | None = None  # None until a policy first asks
        self._slot_attr = slot_attr
        self._what = what

    def _columns(self) -> LiveColumns:
        if self.cols is None:
            self.cols = LiveColumns(self._slot_attr)
            for row in self.rows.values():
                self.cols.add(row)
        return self.cols

    def _row(self, segment_id: str) -> SegmentRow:
        row = self.rows.get(segment_id)
        if row is None:
            raise KeyError(f"{self._what} {segment_id!r} is not live in the segment table")
        return row


class WorkerRanking(_RowIndex):
    """The live workers of one table sorted by (rank key, NaN last; open order), with the HBM blocks
    they hold, and in open order as numpy columns."""

    def __init__(self) -> None:
        super().__init__({}, "wslot", "worker segment")
        self.hbm_blocks = 0  # HBM blocks all live workers hold
        self._ranked: list[tuple[float, int, SegmentRow]] = []
        self._n_added = 0

    def add(self, row: SegmentRow) -> None:
        """Rank a worker that just opened."""
        self.rows[row.segment_id] = row
        if self.cols is not None:
            self.cols.add(row)
        self._n_added += 1
        key = row.rank_key
        row.rank = (math.inf if key != key else key, self._n_added, row)
        bisect.insort(self._ranked, row.rank)

    def grew(self, row: SegmentRow, nb: int, n_hbm: int) -> None:
        """A ranked worker was given nb new blocks, n_hbm of them in HBM."""
        self.hbm_blocks += n_hbm
        i = row.wslot
        if i >= 0:
            self.cols.blocks[i] += nb  # type: ignore[union-attr]
            self.cols.hbm[i] += n_hbm  # type: ignore[union-attr]

    def remove(self, row: SegmentRow) -> None:
        """Drop a worker that closed."""
        del self.rows[row.segment_id]
        if row.wslot >= 0:
            self.cols.remove(row)  # type: ignore[union-attr]
        ranked = self._ranked
        del ranked[bisect.bisect_left(ranked, row.rank)]
        row.rank = None
        self.hbm_blocks -= row.n_hbm

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Live workers in open order: (ids, rank keys, blocks, HBM blocks)."""
        return self._columns().live("ids", "key", "blocks", "hbm")

    def worker_position(self, segment_id: str) -> int:
        """Index of a live worker in the arrays :meth:`live_workers` returns."""
        row = self._row(segment_id)
        return self._columns().position(row)

    def workers_ahead(self, segment_id: str) -> tuple[Iterator[int], int, int]:
        """Blocks held by the live workers ranked before one worker, lazily in rank order; the worker's
        own blocks; the HBM blocks all live workers hold.  Consume the iterator before the table changes."""
        row = self._row(segment_id)
        ranked = self._ranked
        i = bisect.bisect_left(ranked, row.rank)
        return (r.n_blocks for _, _, r in islice(ranked, i)), row.n_blocks, self.hbm_blocks


class LiveSegments(_RowIndex):
    """Every live segment of one table as numpy columns in open order (the oracle's close-time
    ranking); it reads the table's live rows, and is told of a change only once its columns exist."""

    def __init__(self, live: dict[str, SegmentRow]) -> None:
        super().__init__(live, "aslot", "segment")  # the table's own dict, read only here

    def add(self, row: SegmentRow) -> None:
        """A segment opened."""
        self.cols.add(row)  # type: ignore[union-attr]

    def grew(self, row: SegmentRow, nb: int, n_hbm: int) -> None:
        """A segment with a slot was given nb new blocks, n_hbm of them in HBM."""
        cols, i = self.cols, row.aslot
        cols.blocks[i] += nb  # type: ignore[union-attr]
        cols.hbm[i] += n_hbm  # type: ignore[union-attr]
        cols.demand[i] = row.n_hbm + row.blocks_to_write()  # type: ignore[union-attr]

    def remove(self, row: SegmentRow) -> None:
        """A segment with a slot closed."""
        self.cols.remove(row)  # type: ignore[union-attr]

    def live_segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every live segment in open order: (close_s, final size in blocks, blocks, HBM blocks)."""
        return self._columns().live("close", "final", "blocks", "hbm")

    def segment_position(self, segment_id: str) -> int:
        """Index of a live segment in the arrays :meth:`live_segments` returns."""
        return self._columns().position(self._row(segment_id))

    def demand_ahead(self, segment_id: str) -> tuple[int, int, int]:
        """The oracle's ranking read in place: the HBM blocks held plus the blocks still to write (by
        final size; 0 when unknown) of the live segments that close before one segment (unknown close
        last, ties in open order), then that segment's own HBM blocks and blocks still to write.
        Integer sums, so their order does not matter; closed slots count zero, so none is masked."""
        row = self._row(segment_id)
        slots = self._columns()
        i, n = row.aslot, slots.n
        key, demand = slots.rclose, slots.demand
        k = key[i]
        ahead = int(_sum(demand[:i][key[:i] <= k])) + int(_sum(demand[i + 1 : n][key[i + 1 : n] < k]))
        return ahead, row.n_hbm, row.blocks_to_write()
