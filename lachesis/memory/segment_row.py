"""A segment table row (§4): one live segment's class, closing boundary, block ids and counts.

The segment table (:class:`lachesis.memory.allocator.SegmentTable`) is the only writer of a row; its parts
read a row when the table tells them of an event and keep their own numbers (docs/design.md §5).
"""

from __future__ import annotations

import math

import numpy as np

from lachesis.kv import Tier

__all__ = ["SegmentRow"]


class SegmentRow:
    """One live segment: what the harness reported, its block ids as numpy chunks in write order, its counts."""

    __slots__ = ("segment_id", "seg_class", "session_id", "role", "rank_key", "boundary", "chunks",
                 "n_blocks", "n_hbm", "n_tokens", "last_tier", "last_use", "tier_pref", "reads",
                 "close_s", "final_tokens", "final_blocks")

    def __init__(self, segment_id: str, seg_class: str, session_id: str, role: str, rank_key: float,
                 boundary: str) -> None:
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
        self.tier_pref: Tier | None = None  # the policy's latest decision for this segment
        self.reads = 0  # decode-stage reads reported so far (Eq. 3)
        self.close_s = math.nan  # clairvoyant close time (oracle)
        self.final_tokens = math.nan  # clairvoyant final size in tokens (oracle)
        self.final_blocks = math.nan  # the same in blocks

    def blocks_to_write(self) -> int:
        """Blocks the segment has still to write by its clairvoyant final size (0 when unknown)."""
        f = self.final_blocks
        return 0 if f != f or f <= self.n_blocks else int(f) - self.n_blocks

    def block_ids(self) -> np.ndarray:
        """The row's block ids in write order (its own array when it has one chunk: read it, do not change it)."""
        chunks = self.chunks
        if not chunks:
            return np.zeros(0, dtype=np.int64)
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
