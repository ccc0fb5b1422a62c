"""KV written by the segment table, per tier and per segment class (token level; docs/design.md §5):
the running counters (:class:`WrittenKV`) and their snapshot (:class:`WriteTotals`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lachesis.kv import Tier

__all__ = ["WriteTotals", "WrittenKV"]


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
        bpt = self.bytes_per_token
        return {c: (int(v[0]) * bpt, int(v[1]) * bpt) for c, v in self.tokens_by_class.items()}

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


class WrittenKV:
    """The running written-KV counters [HBM, HBF], told of each write by the segment table: tokens, tokens
    per class (a class enters when a segment of it opens), blocks."""

    def __init__(self, bytes_per_token: int = 1) -> None:
        self._tokens = [0, 0]
        self._by_class: dict[str, list[int]] = {}
        self._blocks = [0, 0]
        self.bytes_per_token = int(bytes_per_token)

    def opened(self, seg_class: str) -> None:
        """A segment of ``seg_class`` opened: the class's counters start at its first."""
        if seg_class not in self._by_class:
            self._by_class[seg_class] = [0, 0]

    def wrote(self, seg_class: str, hbm_tokens: int, hbf_tokens: int, hbm_blocks: int, hbf_blocks: int) -> None:
        """A write placed tokens and new blocks in each tier."""
        tok, cls, blk = self._tokens, self._by_class[seg_class], self._blocks
        tok[0] += hbm_tokens
        tok[1] += hbf_tokens
        cls[0] += hbm_tokens
        cls[1] += hbf_tokens
        blk[0] += hbm_blocks
        blk[1] += hbf_blocks

    def tokens_written(self) -> tuple[int, int]:
        """(HBM, HBF) tokens written so far, without building a WriteTotals (hot-path friendly)."""
        return self._tokens[0], self._tokens[1]

    def tokens_by_class(self) -> dict[str, np.ndarray]:
        """(HBM, HBF) tokens written so far per class, in first-open order (copies)."""
        return {c: np.array(v, dtype=np.int64) for c, v in self._by_class.items()}

    def totals(self, evicted_blocks: int) -> WriteTotals:
        """A snapshot of the counters, with the blocks evicted so far."""
        return WriteTotals(
            tokens=np.array(self._tokens, dtype=np.int64),
            tokens_by_class=self.tokens_by_class(),
            blocks=np.array(self._blocks, dtype=np.int64),
            evicted_blocks=evicted_blocks,
            bytes_per_token=self.bytes_per_token,
        )
