"""The segment table's live rows: who is open, kept current per open and close (:class:`LiveSet`),
and the harness's read-only questions about them (:class:`LiveLookup`); docs/design.md §5.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from lachesis.kv import DEFAULT_BOUNDARY, PlacementStats, check_class
from lachesis.memory.live_index import LiveSegments, SegmentRow, WorkerRanking

__all__ = ["LiveSet", "LiveLookup"]


def _as_float(x: Any, segment_id: str, field_name: str) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"segment {segment_id!r}: {field_name} must be a number (or NaN), got {x!r}") from None


class LiveSet:
    """The live rows in open order and what is kept current as a row opens or closes: rows per session,
    the live reviewers and their HBM blocks, the worker ranking, the oracle's segment columns, the stats."""

    def __init__(self, stats: PlacementStats, block_tokens: int) -> None:
        self.rows: dict[str, SegmentRow] = {}  # in open order
        self.by_session: dict[str, dict[str, None]] = {}  # session -> its live segment ids, in open order
        self.reviewers: dict[str, SegmentRow] = {}
        self.closed_ids: set[str] = set()
        self.workers = WorkerRanking()
        self.segments = LiveSegments(self.rows)
        self.reviewer_hbm_blocks = 0  # HBM blocks live reviewers hold
        self.stats = stats
        self.block_tokens = block_tokens

    def open(self, segment_id: str, seg_class: str, session_id: str, role: str, rank_key: float,
             boundary: str | None, now: float, close_s: float, final_tokens: float) -> SegmentRow:
        """A new row from a segment's fields (``boundary`` None or "": the class's default), registered;
        a closed id cannot be reopened.  ``close_s``/``final_tokens``: the oracle's facts (NaN when unknown)."""
        if segment_id in self.rows:
            raise ValueError(f"segment {segment_id!r} is already open")
        if segment_id in self.closed_ids:
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
        self.rows[segment_id] = row
        mine = self.by_session.get(row.session_id)
        if mine is None:
            mine = self.by_session[row.session_id] = {}
        mine[segment_id] = None
        if seg_class == "worker":
            self.workers.add(row)
        elif seg_class == "reviewer":
            self.reviewers[segment_id] = row
        if self.segments.cols is not None:  # a policy asked for them: keep them current
            self.segments.add(row)
        self.stats.opened(seg_class, len(self.reviewers))
        return row

    def close(self, segment_id: str) -> SegmentRow:
        """Unregister a live row at its boundary (KeyError if it is not open) and return it."""
        row = self.rows.pop(segment_id, None)
        if row is None:
            raise KeyError(f"close: segment {segment_id!r} is not open")
        mine = self.by_session[row.session_id]
        del mine[segment_id]
        if not mine:
            del self.by_session[row.session_id]
        if row.rank is not None:  # a live worker
            self.workers.remove(row)
        if row.aslot >= 0:
            self.segments.remove(row)
        if row.seg_class == "reviewer":
            del self.reviewers[segment_id]
            self.reviewer_hbm_blocks -= row.n_hbm
        self.closed_ids.add(segment_id)
        self.stats.closed(row.seg_class, row.n_blocks, row.session_id, row.n_tokens, row.reads)
        return row


class LiveLookup:
    """The harness's read-only questions about the live rows (and the cached dead ones' blocks)."""

    def __init__(self, rows: dict[str, SegmentRow], cached_rows: dict[str, SegmentRow]) -> None:
        self._live = rows  # the LiveSet's dict, read only here
        self._cached = cached_rows  # the LRU cache's dead rows, read only here

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._live

    def __len__(self) -> int:
        return len(self._live)

    def is_live(self, segment_id: str) -> bool:
        """Whether the segment is open (written or opened, boundary not yet reported)."""
        return segment_id in self._live

    def live_class(self, segment_id: str) -> str | None:
        """The class of a live segment, None when it is not open."""
        row = self._live.get(segment_id)
        return None if row is None else row.seg_class

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
        row = self._live.get(segment_id) or self._cached.get(segment_id)
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
