"""Two-tier KV block allocator and segment table: where each KV block lives (§4, Fig. 8; docs/design.md §5 contract).

:class:`TieredAllocator` keeps one free list per tier (HBM, HBF) as numpy stacks; a block id's
tier is implied by its range (``[0, hbm_blocks)`` is HBM, ``[hbm_blocks, hbm_blocks+hbf_blocks)``
is HBF) and a per-block ``uint8`` state array (0 free, 1 used) makes double frees and unknown ids
vectorized checks.  ``alloc(tier, n)`` serves n blocks from ``tier`` and the rest from the other
tier once ``tier``'s free list is empty (block-by-block fallback); ``free(ids)`` returns each block
to the list it came from.  Every call is O(n) numpy work, never a Python loop per block.

:class:`SegmentTable` is Lachesis' segment table: one row per live segment (id, class, closing
boundary, session, rank key, block ids as a list of numpy chunks).  ``add_write(segment_id,
n_tokens)`` fills the segment's partially-filled last block first, then asks the policy
(:mod:`lachesis.policies`) for the tier of the new blocks; ``add_reads`` records the decode-stage
reads of a segment (Eq. 3) that reuse-based policies learn from; ``close(segment_id)`` frees the
row's blocks at its boundary — or, for a boundary-unaware policy (HBM-first), keeps them cached as
dead blocks that are evicted least-recently-used first, across both tiers, only when an allocation
cannot be served from free blocks (vLLM-style prefix-cache block pool).  Written KV is counted at
token level per tier and per class, so bytes written = bytes placed in HBM + bytes placed in HBF.

:func:`replay_events` replays an ordered event list through a table; ``tests/reference_blocksim.py``
replays the same list through a naive one-object-per-block allocator, and the two must agree.

Event format (tuples; trailing fields optional)::

    (t, "write", segment_id, seg_class, tokens[, session_id[, rank_key[, close_s[, final_tokens]]]])
    (t, "read", segment_id, read_tokens)  # decode-stage reads of a live segment (Eq. 3)
    (t, "close", segment_id[, last_use])   # last_use: when it was last read (default t), for LRU
    (t, "session_end", session_id)        # closes every live segment of the session

``close_s``/``final_tokens`` (NaN or None when unknown) are the clairvoyant facts only the oracle
policy uses; like ``session_id`` and ``rank_key`` they are taken when the write opens the segment.

ASSUMPTIONS (named):

* Fallback is symmetric: an HBF request is served from HBM once HBF's free list is empty.
  Reason: with 512 GB HBF stacks it never binds in the paper's configurations, and raising there
  would be an artefact; both tiers exhausted raises :class:`AllocationError`.
* Token attribution: a write's tokens fill the segment's last block first (in that block's tier),
  then whole new blocks in allocation order; only the final new block may be partial.
* Eviction (boundary-unaware policies): when n new blocks exceed the free blocks of both tiers,
  first all free blocks are taken (requested tier first), then exactly the missing number of
  blocks is evicted from dead segments in order of their last use (the ``last_use`` given at
  close, default the close time; a dead segment is never read again, rematerialized KV being a
  new segment, docs/design.md §3), ties in close order, within a segment tail blocks first (as vLLM frees
  a request's blocks in reverse order), and those blocks serve the rest (requested tier first).
  Live segments are never evicted.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from lachesis.kv import (
    DEFAULT_BOUNDARY,
    RHO_WINDOW,
    SEG_CLASSES,
    AllocationError,
    PlacementStats,
    Policy,
    SegmentInfo,
    Tier,
    as_tier,
    check_class,
)
from lachesis.policies import as_policy

__all__ = [
    "TieredAllocator",
    "SegmentTable",
    "WriteTotals",
    "replay_events",
    "parse_event",
    "annotate_clairvoyant",
    # the vocabulary, re-exported from lachesis.kv for callers that import it from here
    "Tier",
    "AllocationError",
    "SEG_CLASSES",
    "DEFAULT_BOUNDARY",
]

_TIERS = (Tier.HBM, Tier.HBF)
_sum = np.add.reduce
_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


class TieredAllocator:
    """One free list per tier in numpy arrays; ``alloc`` falls back to the other tier block by block."""

    def __init__(self, hbm_blocks: int, hbf_blocks: int) -> None:
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
    def free_blocks(self, tier: Tier | int) -> int:
        """Blocks on the tier's free list."""
        return self._top[as_tier(tier)]

    def used_blocks(self, tier: Tier | int) -> int:
        """Blocks of the tier currently allocated."""
        t = as_tier(tier)
        return self._cap[t] - self._top[t]

    def tier_of(self, block_ids: np.ndarray) -> np.ndarray:
        """Tier (0 HBM, 1 HBF) of each block id, as uint8."""
        return (np.asarray(block_ids, dtype=np.int64) >= self.hbm_blocks).astype(np.uint8)

    # -- the two calls ---------------------------------------------------------------------------
    def alloc(self, tier: Tier | int, n: int) -> np.ndarray:
        """n block ids (int64): from ``tier`` while its free list lasts, the rest from the other tier."""
        t = as_tier(tier)
        n = int(n)
        if n < 0:
            raise ValueError(f"alloc: n must be >= 0, got {n}")
        other = _TIERS[1 - t]
        if n > self._top[t] + self._top[other]:
            raise AllocationError(
                f"alloc({t.name}, {n}): only {self._top[Tier.HBM]} HBM + {self._top[Tier.HBF]} HBF blocks free"
            )
        return self._alloc(t, n)[0]

    def _alloc(self, t: int, n: int) -> tuple[np.ndarray, int, int]:
        """:meth:`alloc` of n free blocks (not checked), with how many are HBM blocks and the tier of the
        last one (known from where each came, no scan of the ids)."""
        if n <= self._top[t]:
            return self._pop(t, n), (n if t == 0 else 0), t
        other = 1 - t
        take = self._top[t]
        ids = self._pop(other, n) if take == 0 else np.concatenate([self._pop(t, take), self._pop(other, n - take)])
        return ids, (take if t == 0 else n - take), other

    def _reissue(self, ids: np.ndarray, n_hbm: int, want: int) -> tuple[np.ndarray, int, int]:
        """Blocks just evicted, handed straight to the write that needed them while both free lists are
        empty: what freeing them and allocating as many would return (``want``'s blocks first, each tier
        in release order), with :meth:`_alloc`'s counts, without the round trip through the free lists."""
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
            raise AllocationError(f"free: expected a 1-D array of integer block ids, got shape {ids.shape} dtype {ids.dtype}")
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

    def _free_owned(self, ids: np.ndarray, n_hbm: int | None = None) -> None:
        """``free`` for the segment table's own block ids (int64, distinct by construction: every id
        came from ``alloc`` and a row drops the ids it gives back), so only the allocation state is
        checked.  ``n_hbm``: how many are HBM blocks, when the caller knows (saves the range scan)."""
        if ids.size:
            if n_hbm is None:
                self._release(ids, int(ids.min()), int(ids.max()))
            else:
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


class _Row:
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
        self.wslot = -1  # slot in the table's live-worker arrays (workers only)
        self.aslot = -1  # slot in the table's live-segment arrays (once a policy asked for them)
        self.tier_pref: Tier | None = None  # the policy's latest decision for this segment
        self.reads = 0  # decode-stage reads reported so far (Eq. 3)
        self.close_s = math.nan  # clairvoyant close time (oracle)
        self.final_tokens = math.nan  # clairvoyant final size in tokens (oracle)
        self.final_blocks = math.nan  # the same in blocks
        self.rank: tuple | None = None  # (rank key, NaN as +inf; open order; row): entry in the table's worker ranking

    def blocks_to_write(self) -> int:
        """Blocks the segment has still to write by its clairvoyant final size (0 when unknown)."""
        f = self.final_blocks
        return 0 if f != f or f <= self.n_blocks else int(f) - self.n_blocks

    def block_ids(self) -> np.ndarray:
        if not self.chunks:
            return np.zeros(0, dtype=np.int64)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


class _Slots:
    """Live rows as parallel numpy columns in open order (vectorized rankings); a closed row's slot
    is masked and the columns are compacted once most slots are dead."""

    __slots__ = ("attr", "n", "dead", "ids", "key", "close", "final", "blocks", "hbm", "alive", "rows",
                 "rclose", "demand")

    def __init__(self, attr: str) -> None:
        self.attr = attr  # the _Row attribute holding a row's slot
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
        self.rows: list[_Row | None] = []

    _COLS = ("ids", "key", "close", "final", "blocks", "hbm", "rclose", "demand", "alive")  # alive last: compact masks by it

    def add(self, row: _Row) -> None:
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

    def remove(self, row: _Row) -> None:
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

    def position(self, row: _Row) -> int:
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


class SegmentTable:
    """Lachesis' segment table over a :class:`TieredAllocator`, placing new blocks by a policy.

    It also implements :class:`lachesis.kv.MemoryView` (``table.view is table``).  ``policy`` is a
    policy object or a registered name (:func:`lachesis.policies.as_policy`).
    """

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
        self._evicted = 0
        self._live: dict[str, _Row] = {}  # in open order
        self._by_session: dict[str, dict[str, None]] = {}  # session -> its live segment ids, in open order
        self._workers: dict[str, _Row] = {}
        self._reviewers: dict[str, _Row] = {}
        self._dead: dict[str, _Row] = {}  # cached dead segments (boundary-unaware policies)
        self._dead_heap: list[tuple[float, int, str]] = []  # (last use, close order, id): LRU first
        self._dead_heap_tier: tuple[list, list] = ([], [])  # the same, per tier holding the segment's blocks
        #: Policy option: cached (dead) HBM blocks count as free for HBM placement (see HBMFirstReclaim).
        self._reclaim_hbm = bool(getattr(policy, "reclaims_cached_hbm", False))
        self._n_closed = 0
        self._dead_blocks = [0, 0]  # cached dead blocks per tier [HBM, HBF]
        self._closed_ids: set[str] = set()
        self._ws: _Slots | None = None  # live workers as numpy columns, built the first time a policy asks
        self._as: _Slots | None = None  # every live segment, the same
        # Live workers sorted by (rank key, NaN last; open order) and their HBM blocks: the predictive
        # path's ranking kept current per open/close, so a decision reads a prefix instead of sorting.
        self._ranked: list[tuple[float, int, _Row]] = []
        self._worker_hbm = 0
        self._reviewer_hbm = 0
        self._n_opened = 0

    @property
    def view(self) -> "SegmentTable":
        return self

    @property
    def totals(self) -> WriteTotals:
        """KV written so far per tier and per class (a snapshot; token level, plus blocks and evictions)."""
        return WriteTotals(
            tokens=np.array(self._tok, dtype=np.int64),
            tokens_by_class={c: np.array(v, dtype=np.int64) for c, v in self._tok_class.items()},
            blocks=np.array(self._blk, dtype=np.int64),
            evicted_blocks=self._evicted,
            bytes_per_token=self.bytes_per_token,
        )

    def tokens_written(self) -> tuple[int, int]:
        """(HBM, HBF) tokens written so far, without building a WriteTotals (hot-path friendly)."""
        return self._tok[0], self._tok[1]

    # -- harness-facing calls ----------------------------------------------------------------------
    def open(self, segment_id: str, seg_class: str, session_id: str = "", role: str = "",
             rank_key: float = math.nan, boundary: str | None = None, now: float = 0.0, *,
             close_s: float = math.nan, final_tokens: float = math.nan) -> None:
        """Register a segment (at its spawn / first write); a closed id cannot be reopened.

        ``close_s``/``final_tokens``: clairvoyant facts for the oracle policy (NaN when unknown)."""
        self._open(segment_id, seg_class, session_id, role, rank_key, boundary, now, close_s, final_tokens)

    def _open(self, segment_id: str, seg_class: str, session_id: str, role: str, rank_key: float,
              boundary: str | None, now: float, close_s: float, final_tokens: float) -> _Row:
        """:meth:`open`, returning the new row."""
        if segment_id in self._live:
            raise ValueError(f"segment {segment_id!r} is already open")
        if segment_id in self._closed_ids:
            raise ValueError(f"segment {segment_id!r} was already closed; rematerialized KV needs a new segment id")
        check_class(segment_id, seg_class)
        row = _Row(segment_id, seg_class, str(session_id), str(role or ""),
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
        self._n_opened += 1
        if seg_class == "worker":
            self._workers[segment_id] = row
            if self._ws is not None:
                self._ws.add(row)
            key = row.rank_key
            row.rank = (math.inf if key != key else key, self._n_opened, row)
            bisect.insort(self._ranked, row.rank)
        elif seg_class == "reviewer":
            self._reviewers[segment_id] = row
        if self._as is not None:
            self._as.add(row)
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
            want = self.policy.tier(info, self)
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
            self._worker_hbm += n_hbm
            if row.wslot >= 0:
                self._ws.blocks[row.wslot] += nb  # type: ignore[union-attr]
                self._ws.hbm[row.wslot] += n_hbm  # type: ignore[union-attr]
        elif n_hbm and row.seg_class == "reviewer":
            self._reviewer_hbm += n_hbm
        if row.aslot >= 0:
            self._as.blocks[row.aslot] += nb  # type: ignore[union-attr]
            self._as.hbm[row.aslot] += n_hbm  # type: ignore[union-attr]
            self._as.demand[row.aslot] = row.n_hbm + row.blocks_to_write()  # type: ignore[union-attr]
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
            del self._workers[segment_id]
            if row.wslot >= 0:
                self._ws.remove(row)  # type: ignore[union-attr]
            ranked = self._ranked
            del ranked[bisect.bisect_left(ranked, row.rank)]
            row.rank = None
            self._worker_hbm -= row.n_hbm
        if row.aslot >= 0:
            self._as.remove(row)  # type: ignore[union-attr]
        if row.seg_class == "reviewer":
            del self._reviewers[segment_id]
            self._reviewer_hbm -= row.n_hbm
        self._closed_ids.add(segment_id)
        self.stats.closed(row.seg_class, row.n_blocks, row.session_id, row.n_tokens, row.reads)
        row.last_use = float(now if last_use is None else last_use)
        self._n_closed += 1
        if self.policy.frees_at_boundary:
            if row.n_blocks:
                self.allocator._release(row.block_ids(), all_hbm=row.n_hbm == row.n_blocks, all_hbf=not row.n_hbm)
            row.chunks = []
        elif row.n_blocks:
            self._dead[segment_id] = row
            entry = (row.last_use, self._n_closed, segment_id)
            heapq.heappush(self._dead_heap, entry)
            if row.n_hbm:
                heapq.heappush(self._dead_heap_tier[0], entry)
            if row.n_blocks - row.n_hbm:
                heapq.heappush(self._dead_heap_tier[1], entry)
            self._dead_blocks[0] += row.n_hbm
            self._dead_blocks[1] += row.n_blocks - row.n_hbm
        return row.n_blocks

    def end_session(self, session_id: str, now: float = 0.0) -> list[str]:
        """Close every live segment of a session (boundary ``session_end``), in open order; returns their ids.
        The session's own reuse history is forgotten: a later segment of the same id is a new session."""
        ids = list(self._by_session.get(session_id, ()))
        for s in ids:
            self.close(s, now)
        self.stats.session_ended(session_id)
        return ids

    # -- eviction ------------------------------------------------------------------------------
    def _allocate(self, want: Tier, nb: int) -> tuple[np.ndarray, int, int]:
        """nb block ids for a write, ``want`` first, evicting cached dead blocks when none are free;
        also how many are HBM blocks and the tier of the last one (known from where each came)."""
        a = self.allocator
        free_total = a._top[0] + a._top[1]
        cached = self._dead_blocks[0] + self._dead_blocks[1]
        if nb > free_total + cached:
            raise AllocationError(
                f"cannot place {nb} blocks: {free_total} free and {cached} cached blocks, "
                f"{len(self._live)} live segments hold the rest ({a.hbm_blocks} HBM + {a.hbf_blocks} HBF blocks)"
            )
        if want == Tier.HBM and self._reclaim_hbm and self._dead_blocks[0]:
            # Cached HBM blocks count as free for HBM placement: evict LRU dead HBM blocks first.
            k = min(nb - a.free_blocks(Tier.HBM), int(self._dead_blocks[0]))
            if k > 0:
                a._free_owned(*self._evict(k, Tier.HBM))
                free_total += k
        if nb <= a._top[want]:  # the common case, inline: every block from the tier asked for
            return a._pop(want, nb), (nb if want == 0 else 0), want
        if nb <= free_total:
            return a._alloc(want, nb)
        deficit = nb - free_total
        first = a._alloc(want, free_total) if free_total else None  # every free block; both lists are now empty
        rest = a._reissue(*self._evict(deficit), want)
        if first is None:
            return rest
        return np.concatenate([first[0], rest[0]]), first[1] + rest[1], rest[2]

    def _evict(self, k: int, tier: Tier | None = None) -> tuple[np.ndarray, int]:
        """Take k blocks from dead segments (of ``tier`` only, if given), least recently used segment
        first, tail blocks first within a segment; returns them and how many are HBM blocks.  Heaps
        hold stale entries, skipped lazily."""
        out: list[np.ndarray] = []
        hbm = self.allocator.hbm_blocks
        heap = self._dead_heap if tier is None else self._dead_heap_tier[tier]
        dead = self._dead
        n_hbm_all = 0
        while k > 0:
            sid = heap[0][2]
            row = dead.get(sid)
            n_t = 0 if row is None else (row.n_blocks if tier is None else
                                         row.n_hbm if tier == Tier.HBM else row.n_blocks - row.n_hbm)
            if n_t == 0:
                heapq.heappop(heap)
                continue
            ids = row.block_ids()
            take = min(k, n_t)
            if take == row.n_blocks:  # the whole segment goes (its HBM count is known)
                ev, keep, n_hbm = ids[::-1], None, row.n_hbm
            elif tier is None:
                ev = ids[ids.size - take :][::-1]
                keep = ids[: ids.size - take]
                held = row.n_hbm  # a segment wholly in one tier needs no scan of its tail
                n_hbm = take if held == row.n_blocks else int(np.count_nonzero(ev < hbm)) if held else 0
            else:
                pos = np.flatnonzero((ids >= hbm) == bool(tier))[::-1][:take]
                ev = ids[pos]
                keep = np.delete(ids, pos)
                n_hbm = take if tier == Tier.HBM else 0
            out.append(ev)
            n_hbm_all += n_hbm
            self._dead_blocks[0] -= n_hbm
            self._dead_blocks[1] -= take - n_hbm
            row.n_hbm -= n_hbm
            row.n_blocks -= take
            row.chunks = [keep] if keep is not None and keep.size else []
            if row.n_blocks == 0:
                del dead[sid]
            k -= take
        ev = out[0] if len(out) == 1 else np.concatenate(out)
        self._evicted += int(ev.size)
        return ev, n_hbm_all

    # -- MemoryView ----------------------------------------------------------------------------------
    def total(self, tier: Tier) -> int:
        return self.allocator._cap[as_tier(tier)]

    def free(self, tier: Tier) -> int:
        return self.allocator.free_blocks(tier)

    def used(self, tier: Tier) -> int:
        return self.allocator.used_blocks(tier)

    def cached(self, tier: Tier) -> int:
        return int(self._dead_blocks[as_tier(tier)])

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self._worker_slots().live("ids", "key", "blocks", "hbm")

    def worker_position(self, segment_id: str) -> int:
        row = self._worker_row(segment_id)
        return self._worker_slots().position(row)

    def _worker_slots(self) -> _Slots:
        """The live-worker arrays, built from the rows the first time a policy asks, then kept current."""
        if self._ws is None:
            self._ws = _Slots("wslot")
            for row in self._workers.values():
                self._ws.add(row)
        return self._ws

    def workers_ahead(self, segment_id: str) -> tuple[Iterator[int], int, int]:
        """Blocks held by the live workers ranked before one worker (rank key ascending, NaN last, ties
        in open order), lazily in rank order; the worker's own blocks; the HBM blocks all live workers hold.
        Consume the iterator before the table changes."""
        row = self._worker_row(segment_id)
        ranked = self._ranked
        i = bisect.bisect_left(ranked, row.rank)
        return (r.n_blocks for _, _, r in islice(ranked, i)), row.n_blocks, self._worker_hbm

    def _worker_row(self, segment_id: str) -> _Row:
        row = self._workers.get(segment_id)
        if row is None:
            raise KeyError(f"worker segment {segment_id!r} is not live in the segment table")
        return row

    def live_segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self._all_slots().live("close", "final", "blocks", "hbm")

    def segment_position(self, segment_id: str) -> int:
        return self._all_slots().position(self._live_row(segment_id))

    def _live_row(self, segment_id: str) -> _Row:
        row = self._live.get(segment_id)
        if row is None:
            raise KeyError(f"segment {segment_id!r} is not live in the segment table")
        return row

    def demand_ahead(self, segment_id: str) -> tuple[int, int, int]:
        """The oracle's ranking read in place: the HBM blocks held plus the blocks still to write (by
        final size; 0 when unknown) of the live segments that close before one segment (unknown close
        last, ties in open order), then that segment's own HBM blocks and blocks still to write.
        Integer sums, so their order does not matter; closed slots count zero, so none is masked."""
        row = self._live_row(segment_id)
        slots = self._all_slots()
        i, n = row.aslot, slots.n
        key, demand = slots.rclose, slots.demand
        k = key[i]
        ahead = int(_sum(demand[:i][key[:i] <= k])) + int(_sum(demand[i + 1 : n][key[i + 1 : n] < k]))
        return ahead, row.n_hbm, row.blocks_to_write()

    def _all_slots(self) -> _Slots:
        """The live-segment arrays, built from the rows the first time a policy asks, then kept current."""
        if self._as is None:
            self._as = _Slots("aslot")
            for row in self._live.values():
                self._as.add(row)
        return self._as

    def live_reviewer_hbm_blocks(self) -> int:
        return self._reviewer_hbm

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
        row = self._live.get(segment_id) or self._dead.get(segment_id)
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


def _field_float(ev: Sequence[Any], i: int, field_name: str) -> float:
    """Optional float field i of an event (NaN when absent or None), ValueError naming the field."""
    if len(ev) <= i or ev[i] is None:
        return math.nan
    try:
        return float(ev[i])
    except (TypeError, ValueError):
        raise ValueError(f"event {ev!r}: field {field_name!r} must be a number, got {ev[i]!r}") from None


def _field_count(ev: Sequence[Any], i: int, field_name: str) -> int:
    """Non-negative integer field i of an event, ValueError naming the field."""
    x = ev[i]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, float, np.floating)) or int(x) != x or x < 0:
        raise ValueError(f"event {ev!r}: field {field_name!r} must be a non-negative integer")
    return int(x)


def parse_event(ev: Sequence[Any]) -> tuple:
    """Normalise one event tuple (module docstring), raising ValueError naming the bad field.

    Returns ``(t, "write", segment_id, seg_class, tokens, session_id, rank_key, close_s, final_tokens)``,
    ``(t, "read", segment_id, read_tokens)``, ``(t, "close", segment_id, last_use)`` or
    ``(t, "session_end", session_id)``."""
    if len(ev) < 3:
        raise ValueError(f"event {ev!r}: expected at least (time, kind, id)")
    t, kind = float(ev[0]), ev[1]
    if kind == "write":
        n = len(ev)
        if n < 5 or n > 9:
            raise ValueError(f"event {ev!r}: write needs (t, 'write', segment_id, seg_class, tokens"
                             f"[, session_id[, rank_key[, close_s[, final_tokens]]]])")
        tok = _field_count(ev, 4, "tokens")
        session = str(ev[5]) if n > 5 and ev[5] is not None else ""
        key = _field_float(ev, 6, "rank_key") if n > 6 else math.nan
        if n < 8:
            return (t, "write", str(ev[2]), str(ev[3]), tok, session, key, math.nan, math.nan)
        final = _field_float(ev, 8, "final_tokens")
        if not (math.isnan(final) or (final >= 0 and math.isfinite(final))):
            raise ValueError(f"event {ev!r}: field 'final_tokens' must be a finite number >= 0 (or None)")
        return (t, "write", str(ev[2]), str(ev[3]), tok, session, key, _field_float(ev, 7, "close_s"), final)
    if kind == "read":
        if len(ev) != 4:
            raise ValueError(f"event {ev!r}: read needs (t, 'read', segment_id, read_tokens)")
        return (t, "read", str(ev[2]), _field_count(ev, 3, "read_tokens"))
    if kind == "close":
        if len(ev) not in (3, 4):
            raise ValueError(f"event {ev!r}: close needs (t, 'close', segment_id[, last_use])")
        last = float(ev[3]) if len(ev) == 4 and ev[3] is not None else t
        if not last <= t:
            raise ValueError(f"event {ev!r}: field 'last_use' must be <= the event time")
        return (t, "close", str(ev[2]), last)
    if kind == "session_end":
        if len(ev) != 3:
            raise ValueError(f"event {ev!r}: session_end needs (t, 'session_end', session_id)")
        return (t, kind, str(ev[2]))
    raise ValueError(f"event {ev!r}: field 'kind' must be 'write', 'read', 'close' or 'session_end', got {kind!r}")


def annotate_clairvoyant(events: Iterable[Sequence[Any]]) -> list[tuple]:
    """The events (normalised) with every write carrying its segment's true close time and final size
    in tokens, read off the list itself: the clairvoyant facts of a recorded run, for the oracle policy.
    A segment the list never closes gets close time NaN (it ranks last)."""
    parsed = [parse_event(e) for e in events]
    close_t: dict[str, float] = {}
    final: dict[str, int] = {}
    live: dict[str, dict[str, None]] = {}  # session -> live segment ids
    session_of: dict[str, str] = {}
    for ev in parsed:
        if ev[1] == "write":
            final[ev[2]] = final.get(ev[2], 0) + ev[4]
            session_of.setdefault(ev[2], ev[5])
            live.setdefault(session_of[ev[2]], {})[ev[2]] = None
        elif ev[1] == "close":
            close_t.setdefault(ev[2], ev[0])
            live.get(session_of.get(ev[2], ""), {}).pop(ev[2], None)
        elif ev[1] == "session_end":
            for sid in live.pop(ev[2], {}):
                close_t.setdefault(sid, ev[0])
    return [ev[:7] + (close_t.get(ev[2], math.nan), float(final[ev[2]])) if ev[1] == "write" else ev for ev in parsed]


def replay_events(events: Iterable[Sequence[Any]], policy: Policy | str, hbm_blocks: int, hbf_blocks: int,
                  block_tokens: int = 16, bytes_per_token: int = 1) -> WriteTotals:
    """Replay an ordered event list through the fast allocator and return the per-tier write totals."""
    table = SegmentTable(TieredAllocator(hbm_blocks, hbf_blocks), policy, block_tokens, bytes_per_token)
    for i, raw in enumerate(events):
        ev = parse_event(raw)
        try:
            kind = ev[1]
            if kind == "write":
                _, _, sid, cls, tok, session, key, close_s, final = ev
                opened = table.live_class(sid)
                if opened is not None and opened != cls:
                    raise ValueError(f"segment {sid!r} written as {cls!r} but opened as {opened!r}")
                table.add_write(sid, tok, ev[0], seg_class=cls, session_id=session, rank_key=key,
                                close_s=close_s, final_tokens=final)
            elif kind == "read":
                table.add_reads(ev[2], ev[3])
            elif kind == "close":
                table.close(ev[2], ev[0], ev[3])
            else:
                table.end_session(ev[2], ev[0])
        except (AllocationError, KeyError, ValueError) as exc:
            raise type(exc)(f"event {i} {tuple(raw)!r}: {exc}") from exc
    return table.totals
