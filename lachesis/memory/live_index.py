"""The live index (§4): what placement reads about the live segments, kept current as the segment table
reports each event (a segment opened, a worker is about to be placed, a segment grew, closed).

:class:`WorkerRanking` keeps the live workers ranked by predicted lifetime (the predictive path's
ranking, so a decision reads a prefix instead of sorting), with each worker's blocks and first placement;
:class:`LiveSegments` keeps every live segment's clairvoyant close time and remaining size as numpy
columns (the oracle's ranking); :class:`LiveIndex` tells both, and counts the live reviewers and their
HBM blocks.  The table's rows are read here, never written; a policy reads the index through its memory
view (docs/design.md §5).
"""

from __future__ import annotations

import bisect
import math
from itertools import islice
from typing import Iterator, Mapping

import numpy as np

from lachesis.memory.segment_row import SegmentRow

__all__ = ["LiveColumns", "WorkerRanking", "LiveSegments", "LiveIndex"]

_sum = np.add.reduce


class LiveColumns:
    """Live rows as parallel numpy columns in open order (vectorized rankings), with each row's slot by
    segment id; a closed row's slot is masked and the columns are compacted once most slots are dead."""

    __slots__ = ("n", "dead", "ids", "key", "close", "final", "blocks", "hbm", "alive", "rclose", "demand", "slot")

    def __init__(self) -> None:
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
        self.slot: dict[str, int] = {}  # live segment id -> its slot

    #: every column; alive last, as compaction masks by it
    _COLS = ("ids", "key", "close", "final", "blocks", "hbm", "rclose", "demand", "alive")

    def add(self, row: SegmentRow) -> None:
        """A slot for a live row, from what it holds now."""
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
        self.slot[row.segment_id] = i
        self.n += 1

    def grew(self, segment_id: str, nb: int, n_hbm: int) -> int:
        """A row's slot was given nb new blocks, n_hbm of them in HBM; returns the slot."""
        i = self.slot[segment_id]
        self.blocks[i] += nb
        self.hbm[i] += n_hbm
        return i

    def remove(self, segment_id: str) -> None:
        """A row's slot closed."""
        i = self.slot.pop(segment_id)
        self.alive[i] = False
        self.demand[i] = 0
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
        self.slot = {sid: i for i, sid in enumerate(self.ids[:k].tolist())}
        self.n, self.dead = k, 0

    def position(self, segment_id: str) -> int:
        """Index of a row among the live slots (open order)."""
        i = self.slot[segment_id]
        return int(self.alive[:i].sum()) if self.dead else i

    def live(self, *cols: str) -> tuple[np.ndarray, ...]:
        """The named columns over live slots, in open order (views when no slot is dead)."""
        n = self.n
        if self.dead:
            m = self.alive[:n]
            return tuple(getattr(self, c)[:n][m] for c in cols)
        return tuple(getattr(self, c)[:n] for c in cols)


class RankedWorker:
    """A live worker as the ranking keeps it: where it sorts, its blocks, its spawn (first placement)."""

    __slots__ = ("rank", "blocks", "spawn_blocks", "spawn_mean")

    def __init__(self, rank_key: float, order: int) -> None:
        # where it sorts: rank key (NaN last), then open order
        self.rank = (math.inf if rank_key != rank_key else rank_key, order)
        self.blocks = 0
        self.spawn_blocks = -1  # blocks of its first placement; -1 before it
        self.spawn_mean = math.nan  # the closed workers' mean size in blocks then


class WorkerRanking:
    """The live workers of one table sorted by (rank key, NaN last; open order), with their blocks, their
    first placement and the HBM blocks they hold; in open order as numpy columns once a policy asks."""

    def __init__(self, rows: Mapping[str, SegmentRow]) -> None:
        self._rows = rows  # the table's live rows, read only here
        self._workers: dict[str, RankedWorker] = {}  # live workers, in open order
        self._ranked: list[tuple[float, int, RankedWorker]] = []
        self._n_added = 0
        self.hbm_blocks = 0  # HBM blocks all live workers hold
        self.cols: LiveColumns | None = None  # None until a policy first asks

    def opened(self, row: SegmentRow) -> None:
        """Rank a worker that just opened."""
        self._n_added += 1
        w = self._workers[row.segment_id] = RankedWorker(row.rank_key, self._n_added)
        bisect.insort(self._ranked, (*w.rank, w))
        if self.cols is not None:
            self.cols.add(row)

    def placing(self, segment_id: str, blocks: int, mean: float) -> None:
        """A worker is about to be placed, before its policy decides, to hold ``blocks`` blocks; the first
        time, that is its spawn (``mean``: the closed workers' mean size then)."""
        w = self._workers[segment_id]
        if w.spawn_blocks < 0:
            w.spawn_blocks, w.spawn_mean = blocks, mean

    def grew(self, segment_id: str, nb: int, n_hbm: int) -> None:
        """A worker was given nb new blocks, n_hbm of them in HBM."""
        self._workers[segment_id].blocks += nb
        self.hbm_blocks += n_hbm
        if self.cols is not None:
            self.cols.grew(segment_id, nb, n_hbm)

    def closed(self, row: SegmentRow) -> None:
        """Drop a worker that closed."""
        w = self._workers.pop(row.segment_id)
        ranked = self._ranked
        del ranked[bisect.bisect_left(ranked, w.rank)]
        self.hbm_blocks -= row.n_hbm
        if self.cols is not None:
            self.cols.remove(row.segment_id)

    def _columns(self) -> LiveColumns:
        if self.cols is None:
            self.cols = LiveColumns()
            rows = self._rows
            for sid in self._workers:
                self.cols.add(rows[sid])
        return self.cols

    def _worker(self, segment_id: str) -> RankedWorker:
        w = self._workers.get(segment_id)
        if w is None:
            raise KeyError(f"worker segment {segment_id!r} is not live in the segment table")
        return w

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Live workers in open order: (ids, rank keys, blocks, HBM blocks)."""
        ids, key, blocks, hbm = self._columns().live("ids", "key", "blocks", "hbm")
        return ids, key, blocks, hbm

    def worker_position(self, segment_id: str) -> int:
        """Index of a live worker in the arrays :meth:`live_workers` returns."""
        self._worker(segment_id)
        return self._columns().position(segment_id)

    def workers_ahead(self, segment_id: str) -> tuple[Iterator[int], int, int]:
        """Blocks held by the live workers ranked before one worker, lazily in rank order; the worker's own
        blocks; the HBM blocks all live workers hold.  Consume the iterator before the table changes."""
        w = self._worker(segment_id)
        ranked = self._ranked
        ahead = islice(ranked, bisect.bisect_left(ranked, w.rank))
        return (r.blocks for _, _, r in ahead), w.blocks, self.hbm_blocks

    def spawns_ahead(self, segment_id: str) -> tuple[Iterator[tuple[int, float]], tuple[int, float], int]:
        """:meth:`workers_ahead` with each worker's spawn (blocks of its first placement, the closed workers'
        mean then; (-1, NaN) before it) in place of its blocks."""
        w = self._worker(segment_id)
        ranked = self._ranked
        ahead = islice(ranked, bisect.bisect_left(ranked, w.rank))
        return ((r.spawn_blocks, r.spawn_mean) for _, _, r in ahead), (w.spawn_blocks, w.spawn_mean), self.hbm_blocks


class LiveSegments:
    """Every live segment of one table as numpy columns in open order (the oracle's close-time ranking),
    built the first time a policy asks and kept current from then on."""

    def __init__(self, rows: Mapping[str, SegmentRow]) -> None:
        self._rows = rows  # the table's live rows, read only here
        self.cols: LiveColumns | None = None  # None until a policy first asks

    def opened(self, row: SegmentRow) -> None:
        """A segment opened."""
        if self.cols is not None:
            self.cols.add(row)

    def grew(self, row: SegmentRow, nb: int, n_hbm: int) -> None:
        """A segment was given nb new blocks, n_hbm of them in HBM (the row already holds them)."""
        cols = self.cols
        if cols is not None:
            cols.demand[cols.grew(row.segment_id, nb, n_hbm)] = row.n_hbm + row.blocks_to_write()

    def closed(self, row: SegmentRow) -> None:
        """A segment closed."""
        if self.cols is not None:
            self.cols.remove(row.segment_id)

    def _columns(self) -> LiveColumns:
        if self.cols is None:
            self.cols = LiveColumns()
            for row in self._rows.values():
                self.cols.add(row)
        return self.cols

    def _row(self, segment_id: str) -> SegmentRow:
        row = self._rows.get(segment_id)
        if row is None:
            raise KeyError(f"segment {segment_id!r} is not live in the segment table")
        return row

    def live_segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every live segment in open order: (close_s, final size in blocks, blocks, HBM blocks)."""
        close, final, blocks, hbm = self._columns().live("close", "final", "blocks", "hbm")
        return close, final, blocks, hbm

    def segment_position(self, segment_id: str) -> int:
        """Index of a live segment in the arrays :meth:`live_segments` returns."""
        self._row(segment_id)
        return self._columns().position(segment_id)

    def demand_ahead(self, segment_id: str) -> tuple[int, int, int]:
        """The oracle's ranking read in place: the HBM blocks held plus the blocks still to write (by
        final size; 0 when unknown) of the live segments that close before one segment (unknown close
        last, ties in open order), then that segment's own HBM blocks and blocks still to write.
        Integer sums, so their order does not matter; closed slots count zero, so none is masked."""
        row = self._row(segment_id)
        slots = self._columns()
        i, n = slots.slot[segment_id], slots.n
        key, demand = slots.rclose, slots.demand
        k = key[i]
        ahead = int(_sum(demand[:i][key[:i] <= k])) + int(_sum(demand[i + 1 : n][key[i + 1 : n] < k]))
        return ahead, row.n_hbm, row.blocks_to_write()


class LiveIndex:
    """The live index of one table, told each event by the table: the worker ranking, the live-segment
    columns, and the live reviewers with the HBM blocks they hold."""

    def __init__(self, rows: Mapping[str, SegmentRow]) -> None:
        self.workers = WorkerRanking(rows)
        self.segments = LiveSegments(rows)
        self.n_reviewers = 0  # live reviewer segments
        self.reviewer_hbm_blocks = 0  # HBM blocks live reviewers hold

    def opened(self, row: SegmentRow) -> None:
        """A row opened (it holds no block yet); a worker is ranked, its spawn still to come."""
        cls = row.seg_class
        if cls == "worker":
            self.workers.opened(row)
        elif cls == "reviewer":
            self.n_reviewers += 1
        if self.segments.cols is not None:
            self.segments.opened(row)

    def grew(self, row: SegmentRow, nb: int, n_hbm: int) -> None:
        """A row was given nb new blocks, n_hbm of them in HBM (the row already holds them)."""
        cls = row.seg_class
        if cls == "worker":
            self.workers.grew(row.segment_id, nb, n_hbm)
        elif cls == "reviewer":
            self.reviewer_hbm_blocks += n_hbm
        if self.segments.cols is not None:
            self.segments.grew(row, nb, n_hbm)

    def closed(self, row: SegmentRow) -> None:
        """A row closed (it still holds its blocks)."""
        cls = row.seg_class
        if cls == "worker":
            self.workers.closed(row)
        elif cls == "reviewer":
            self.n_reviewers -= 1
            self.reviewer_hbm_blocks -= row.n_hbm
        if self.segments.cols is not None:
            self.segments.closed(row)

    def live_reviewer_hbm_blocks(self) -> int:
        """HBM blocks held by live reviewer segments."""
        return self.reviewer_hbm_blocks
