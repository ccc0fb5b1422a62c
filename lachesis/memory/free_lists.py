"""The two free lists of KV blocks, one per tier (§4, Fig. 8): ``alloc(tier, n)`` and ``free(block_ids)``.

A block id's tier is implied by its range (``[0, hbm_blocks)`` is HBM, the rest HBF); a per-block
state array makes double frees and unknown ids vectorized checks, and every call is O(n) numpy
work, never a Python loop per block.  The contract and its assumptions (symmetric fallback) are in
docs/design.md §5.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lachesis.kv import AllocationError, Tier, as_tier

__all__ = ["TieredAllocator"]


class TieredAllocator:
    """One free list per tier in numpy arrays; ``alloc`` falls back to the other tier block by block."""

    def __init__(self, hbm_blocks: int, hbf_blocks: int) -> None:
        for name, n in (("hbm_blocks", hbm_blocks), ("hbf_blocks", hbf_blocks)):
            if isinstance(n, bool) or not float(n).is_integer():
                raise ValueError(f"{name} must be a whole number of blocks, got {n!r}")
        if int(hbm_blocks) < 0 or int(hbf_blocks) < 0:
            raise ValueError(f"block counts must be >= 0, got hbm_blocks={hbm_blocks}, hbf_blocks={hbf_blocks}")
        self.hbm_blocks = int(hbm_blocks)
        self.hbf_blocks = int(hbf_blocks)
        self.n_blocks = self.hbm_blocks + self.hbf_blocks
        self.capacity = np.array([self.hbm_blocks, self.hbf_blocks], dtype=np.int64)
        self._state = np.zeros(self.n_blocks, dtype=np.uint8)  # 0 free, 1 used
        # Free stacks: pop from the end, so the lowest ids are handed out first.
        self._free = [
            np.arange(self.hbm_blocks - 1, -1, -1, dtype=np.int64),
            np.arange(self.n_blocks - 1, self.hbm_blocks - 1, -1, dtype=np.int64),
        ]
        self._top = [self.hbm_blocks, self.hbf_blocks]  # free count per tier
        self._cap = (self.hbm_blocks, self.hbf_blocks)
        self._written = [0, 0]

    @property
    def blocks_written(self) -> np.ndarray:
        """Cumulative blocks handed out per tier (index by :class:`Tier`)."""
        return np.array(self._written, dtype=np.int64)

    # -- counters ------------------------------------------------------------------------------
    def total_blocks(self, tier: Tier | int) -> int:
        """Blocks in the tier."""
        return self._cap[as_tier(tier)]

    def free_blocks(self, tier: Tier | int) -> int:
        """Blocks on the tier's free list."""
        return self._top[as_tier(tier)]

    def used_blocks(self, tier: Tier | int) -> int:
        """Blocks of the tier currently allocated."""
        t = as_tier(tier)
        return self._cap[t] - self._top[t]

    def free_total(self) -> int:
        """Blocks on both free lists."""
        return self._top[0] + self._top[1]

    def tier_of(self, block_ids: np.ndarray) -> np.ndarray:
        """Tier (0 HBM, 1 HBF) of each block id, as uint8."""
        return (np.asarray(block_ids, dtype=np.int64) >= self.hbm_blocks).astype(np.uint8)

    # -- the two calls ---------------------------------------------------------------------------
    def alloc(self, tier: Tier | int, n: int) -> np.ndarray:
        """n block ids (int64): from ``tier`` while its free list lasts, the rest from the other tier."""
        t = as_tier(tier)
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"alloc: n must be a whole number of blocks >= 0, got {n!r}")
        n = int(n)
        got = self.take(t, n)
        if got is None:
            raise AllocationError(
                f"alloc({t.name}, {n}): only {self._top[Tier.HBM]} HBM + {self._top[Tier.HBF]} HBF blocks free"
            )
        return got[0]

    def take(self, t: int, n: int) -> tuple[np.ndarray, int, int] | None:
        """:meth:`alloc` for the segment table: n blocks, ``t`` first, with how many are HBM blocks and
        the tier of the last one (known from where each came, no scan of the ids); None, with nothing
        changed, when both free lists together hold fewer than n."""
        top = self._top[t]
        if n <= top:  # the common case, inline: every block from the tier asked for
            ids = self._free[t][top - n : top][::-1].copy()
            self._top[t] = top - n
            self._state[ids] = 1
            self._written[t] += n
            return ids, (n if t == 0 else 0), t
        other = 1 - t
        if n > top + self._top[other]:
            return None
        ids = self._pop(other, n) if top == 0 else np.concatenate([self._pop(t, top), self._pop(other, n - top)])
        return ids, (top if t == 0 else n - top), other

    def reissue(self, ids: np.ndarray, n_hbm: int, want: int) -> tuple[np.ndarray, int, int]:
        """Blocks just evicted, handed straight to the write that needed them while both free lists are
        empty: what freeing them and allocating as many would return (``want``'s blocks first, each tier
        in release order), with :meth:`take`'s counts, without the round trip through the free lists."""
        n = ids.size
        self._written[0] += n_hbm
        self._written[1] += n - n_hbm
        if n_hbm == n or n_hbm == 0:  # one tier: the order they were released in
            return ids.copy(), n_hbm, 0 if n_hbm else 1
        is_hbm = ids < self.hbm_blocks
        first, second = (is_hbm, ~is_hbm) if want == 0 else (~is_hbm, is_hbm)
        return np.concatenate([ids[first], ids[second]]), n_hbm, 1 - want

    def _pop(self, t: Tier | int, k: int) -> np.ndarray:
        top = self._top[t]
        ids = self._free[t][top - k : top][::-1].copy()
        self._top[t] = top - k
        self._state[ids] = 1
        self._written[t] += k
        return ids

    def free(self, block_ids: Sequence[int] | np.ndarray) -> None:
        """Return each block to its tier's free list; raises on unknown ids, duplicates or double frees."""
        ids = np.asarray(block_ids)
        if ids.size == 0:
            return
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise AllocationError(f"free: expected a 1-D array of integer block ids, "
                                  f"got shape {ids.shape} dtype {ids.dtype}")
        ids = ids.astype(np.int64, copy=False)
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= self.n_blocks:
            bad = (ids < 0) | (ids >= self.n_blocks)
            raise AllocationError(f"free: unknown block id(s) {ids[bad][:5].tolist()} (valid: 0..{self.n_blocks - 1})")
        distinct = len(set(ids.tolist())) if ids.size <= 256 else np.unique(ids).size
        if distinct != ids.size:
            s = np.sort(ids)
            dup = s[1:][s[1:] == s[:-1]]
            raise AllocationError(f"free: block id(s) {np.unique(dup)[:5].tolist()} given more than once (double free)")
        self._release(ids, lo, hi)

    def free_owned(self, ids: np.ndarray, n_hbm: int) -> None:
        """``free`` for the segment table's own block ids (int64, distinct by construction: every id
        came from the allocator and a row drops the ids it gives back), so only the allocation state
        is checked; ``n_hbm``, how many are HBM blocks, saves the range scan."""
        if ids.size:
            self._release(ids, all_hbm=n_hbm == ids.size, all_hbf=n_hbm == 0)

    def _release(self, ids: np.ndarray, lo: int = 0, hi: int = 0, *, all_hbm: bool | None = None,
                 all_hbf: bool | None = None) -> None:
        if not self._state[ids].all():
            not_used = self._state[ids] == 0
            raise AllocationError(f"free: block id(s) {ids[not_used][:5].tolist()} are not allocated (double free)")
        self._state[ids] = 0
        hbm = self.hbm_blocks
        if all_hbm is None:
            all_hbm, all_hbf = hi < hbm, lo >= hbm
        parts: tuple[tuple[Tier, np.ndarray], ...]
        if all_hbm:
            parts = ((Tier.HBM, ids),)
        elif all_hbf:
            parts = ((Tier.HBF, ids),)
        else:
            is_hbf = ids >= hbm
            parts = ((Tier.HBM, ids[~is_hbf]), (Tier.HBF, ids[is_hbf]))
        for t, sel in parts:
            k = sel.size
            if k:
                top = self._top[t]
                self._free[t][top : top + k] = sel[::-1]
                self._top[t] = top + k

    def check(self) -> None:
        """Assert the invariants (free + used = capacity per tier, free lists match the state array)."""
        for t in Tier:
            lst = self._free[t][: self._top[t]]
            lo, hi = (0, self.hbm_blocks) if t == Tier.HBM else (self.hbm_blocks, self.n_blocks)
            assert np.unique(lst).size == lst.size, f"{t.name} free list holds a block twice"
            assert ((lst >= lo) & (lst < hi)).all(), f"{t.name} free list holds a foreign block"
            assert (self._state[lst] == 0).all(), f"{t.name} free list holds a used block"
            assert int((self._state[lo:hi] == 0).sum()) == self._top[t], f"{t.name} free count mismatch"
