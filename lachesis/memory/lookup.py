"""The harness's read-only questions about the segment table's rows (§4): is a segment live, its class,
its blocks and their HBM fraction, the rows themselves (docs/design.md §5)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np

from lachesis.memory.segment_row import SegmentRow

__all__ = ["LiveLookup"]


class LiveLookup:
    """The harness's read-only questions about the live rows (and the cached dead ones' blocks)."""

    def __init__(self, rows: Mapping[str, SegmentRow], cached_blocks: Callable[[str], np.ndarray | None]) -> None:
        self._live = rows  # the table's live rows, read only here
        self._cached_blocks = cached_blocks  # the block ids a cached dead segment still holds (None: not cached)

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
        row = self._live.get(segment_id)
        ids = row.block_ids() if row is not None else self._cached_blocks(segment_id)
        if ids is None:
            raise KeyError(f"segment {segment_id!r} holds no blocks (unknown, freed or evicted)")
        return ids.copy()

    def rows(self) -> list[dict[str, Any]]:
        """One dict per live segment, in open order (id, class, boundary, session, role, rank key, tier
        preference, blocks, HBM blocks, tokens, reads, clairvoyant close time and final size)."""
        return [dict(segment_id=r.segment_id, seg_class=r.seg_class, boundary=r.boundary, session_id=r.session_id,
                     role=r.role, rank_key=r.rank_key, tier_pref=None if r.tier_pref is None else r.tier_pref.name,
                     n_blocks=r.n_blocks, n_hbm=r.n_hbm, n_tokens=r.n_tokens, read_tokens=r.reads,
                     close_s=r.close_s, final_tokens=r.final_tokens)
                for r in self._live.values()]
