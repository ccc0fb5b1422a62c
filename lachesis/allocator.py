"""Two-tier KV block allocator and segment table (§4, Fig. 8; DESIGN §5 contract).

:class:`TieredAllocator` keeps one free list per tier (HBM, HBF) as numpy stacks; a block id's
tier is implied by its range (``[0, hbm_blocks)`` is HBM, ``[hbm_blocks, hbm_blocks+hbf_blocks)``
is HBF) and a per-block ``uint8`` state array (0 free, 1 used) makes double frees and unknown ids
vectorized checks.  ``alloc(tier, n)`` serves n blocks from ``tier`` and the rest from the other
tier once ``tier``'s free list is empty (block-by-block fallback); ``free(ids)`` returns each block
to the list it came from.  Every call is O(n) numpy work, never a Python loop per block.

:class:`SegmentTable` is Lachesis' segment table: one row per live segment (id, class, closing
boundary, session, rank key, block ids as a list of numpy chunks).  ``add_write(segment_id,
n_tokens)`` fills the segment's partially-filled last block first, then asks the policy
(:mod:`lachesis.policies`) for the tier of the new blocks; ``close(segment_id)`` frees the row's
blocks at its boundary — or, for a boundary-unaware policy (HBM-first), keeps them cached as
dead blocks that are evicted least-recently-used first, across both tiers, only when an allocation
cannot be served from free blocks (vLLM-style prefix-cache block pool).  Written KV is counted at
token level per tier and per class, so bytes written = bytes placed in HBM + bytes placed in HBF.

:func:`replay_events` replays an ordered event list through a table; ``tests/reference_blocksim.py``
replays the same list through a naive one-object-per-block allocator, and the two must agree.

Event format (tuples; trailing fields optional)::

    (t, "write", segment_id, seg_class, tokens[, session_id[, rank_key]])
    (t, "close", segment_id[, last_use])   # last_use: when it was last read (default t), for LRU
    (t, "session_end", session_id)        # closes every live segment of the session

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
  new segment, DESIGN §3), ties in close order, within a segment tail blocks first (as vLLM frees a request's blocks in reverse order), and those
  blocks serve the rest (requested tier first).  Live segments are never evicted.
"""

from __future__ import annotations

import math
import heapq
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from lachesis.policies import Policy, PlacementStats

__all__ = [
    "Tier",
    "AllocationError",
    "TieredAllocator",
    "SegmentTable",
    "WriteTotals",
    "replay_events",
    "parse_event",
    "SEG_CLASSES",
    "DEFAULT_BOUNDARY",
]

#: Segment classes (segments contract, DESIGN §3).
SEG_CLASSES = frozenset({"reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer"})
#: Closing boundary per class when the caller does not give one (DESIGN §3).
DEFAULT_BOUNDARY = {
    "reasoning_laden": "turn_end",
    "reasoning_stripped": "session_end",
    "lead": "session_end",
    "worker": "subagent_return",
    "reviewer": "subagent_return",
}


class Tier(IntEnum):
    """Memory tier of a KV block."""

    HBM = 0
    HBF = 1


class AllocationError(RuntimeError):
    """Raised when an allocation cannot be served, or on a bad free (double free, unknown id)."""


_TIERS = (Tier.HBM, Tier.HBF)
_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


def _segment_info() -> type:
    """lachesis.policies.SegmentInfo (imported lazily: policies imports this module)."""
    global _SEGMENT_INFO
    if _SEGMENT_INFO is None:
        from lachesis.policies import SegmentInfo

        _SEGMENT_INFO = SegmentInfo
    return _SEGMENT_INFO


_SEGMENT_INFO: type | None = None


def _tier(tier: Tier | int | str) -> Tier:
    if tier.__class__ is Tier:
        return tier  # type: ignore[return-value]
    if isinstance(tier, str):
        try:
            return Tier[tier.upper()]
        except KeyError:
            raise ValueError(f"unknown tier {tier!r}; expected 'HBM' or 'HBF'") from None
    if tier in (0, 1):
        return _TIERS[int(tier)]
    raise ValueError(f"unknown tier {tier!r}; expected Tier.HBM (0) or Tier.HBF (1)")


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
        #: Cumulative blocks handed out per tier (index by :class:`Tier`).
        self.blocks_written = np.zeros(2, dtype=np.int64)

    # -- counters ------------------------------------------------------------------------------
    def free_blocks(self, tier: Tier | int) -> int:
        """Blocks on the tier's free list."""
        return self._top[_tier(tier)]

    def used_blocks(self, tier: Tier | int) -> int:
        """Blocks of the tier currently allocated."""
        t = _tier(tier)
        return int(self.capacity[t]) - self._top[t]

    def tier_of(self, block_ids: np.ndarray) -> np.ndarray:
        """Tier (0 HBM, 1 HBF) of each block id, as uint8."""
        return (np.asarray(block_ids, dtype=np.int64) >= self.hbm_blocks).astype(np.uint8)

    def is_used(self, block_ids: np.ndarray) -> np.ndarray:
        """Boolean per block id: currently allocated."""
        return self._state[np.asarray(block_ids, dtype=np.int64)] == 1

    # -- the two calls ---------------------------------------------------------------------------
    def alloc(self, tier: Tier | int, n: int) -> np.ndarray:
        """n block ids (int64): from ``tier`` while its free list lasts, the rest from the other tier."""
        t = _tier(tier)
        n = int(n)
        if n < 0:
            raise ValueError(f"alloc: n must be >= 0, got {n}")
        other = _TIERS[1 - t]
        if n > self._top[t] + self._top[other]:
            raise AllocationError(
                f"alloc({t.name}, {n}): only {self._top[Tier.HBM]} HBM + {self._top[Tier.HBF]} HBF blocks free"
            )
        take = min(n, self._top[t])
        if take == 0 and n:  # the tier is full: everything from the other tier
            return self._pop(other, n)
        first = self._pop(t, take)
        if take == n:
            return first
        return np.concatenate([first, self._pop(other, n - take)])

    def _pop(self, t: Tier, k: int) -> np.ndarray:
        top = self._top[t]
        ids = self._free[t][top - k : top][::-1].copy()
        self._top[t] = top - k
        self._state[ids] = 1
        self.blocks_written[t] += k
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

    def _free_owned(self, ids: np.ndarray) -> None:
        """``free`` for the segment table's own block ids (int64, distinct by construction: every id
        came from ``alloc`` and a row drops the ids it gives back), so only the allocation state is checked."""
        if ids.size:
            self._release(ids, int(ids.min()), int(ids.max()))

    def _release(self, ids: np.ndarray, lo: int, hi: int) -> None:
        if not self._state[ids].all():
            not_used = self._state[ids] == 0
            raise AllocationError(f"free: block id(s) {ids[not_used][:5].tolist()} are not allocated (double free)")
        self._state[ids] = 0
        hbm = self.hbm_blocks
        if hi < hbm:
            parts = ((Tier.HBM, ids),)
        elif lo >= hbm:
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


class _Row:
    """One live (or cached dead) segment: its metadata and block ids as numpy chunks."""

    __slots__ = ("segment_id", "seg_class", "session_id", "role", "rank_key", "boundary", "chunks",
                 "n_blocks", "n_hbm", "n_tokens", "last_tier", "last_use", "wslot", "tier_pref")

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
        self.tier_pref: Tier | None = None  # the policy's latest decision for this segment

    def block_ids(self) -> np.ndarray:
        if not self.chunks:
            return np.zeros(0, dtype=np.int64)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


class SegmentTable:
    """Lachesis' segment table over a :class:`TieredAllocator`, placing new blocks by a policy.

    It also implements :class:`lachesis.policies.MemoryView` (``table.view is table``).
    """

    def __init__(self, allocator: TieredAllocator, policy: "Policy", block_tokens: int = 16, bytes_per_token: int = 1) -> None:
        from lachesis.policies import PlacementStats

        if int(block_tokens) <= 0:
            raise ValueError(f"block_tokens must be > 0, got {block_tokens}")
        self.allocator = allocator
        self.policy = policy
        self.block_tokens = int(block_tokens)
        self.stats: PlacementStats = PlacementStats()
        self.bytes_per_token = int(bytes_per_token)
        # Python-int counters on the hot path; :attr:`totals` snapshots them as a WriteTotals.
        self._tok = [0, 0]
        self._tok_class: dict[str, list[int]] = {}
        self._blk = [0, 0]
        self._evicted = 0
        self._live: dict[str, _Row] = {}
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
        # Live workers as slot arrays in open order (vectorized ranking; compacted as workers close).
        self._w_n = 0
        self._w_dead = 0
        self._w_ids = np.empty(64, dtype=object)
        self._w_keys = np.empty(64, dtype=np.float64)
        self._w_blocks = np.zeros(64, dtype=np.int64)
        self._w_hbm = np.zeros(64, dtype=np.int64)
        self._w_alive = np.zeros(64, dtype=bool)
        self._w_rows: list[_Row | None] = []

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
             rank_key: float = math.nan, boundary: str | None = None, now: float = 0.0) -> None:
        """Register a segment (at its spawn / first write); a closed id cannot be reopened."""
        if segment_id in self._live:
            raise ValueError(f"segment {segment_id!r} is already open")
        if segment_id in self._closed_ids:
            raise ValueError(f"segment {segment_id!r} was already closed; rematerialized KV needs a new segment id")
        if seg_class not in SEG_CLASSES:
            raise ValueError(f"segment {segment_id!r}: unknown seg_class {seg_class!r}; expected one of {sorted(SEG_CLASSES)}")
        row = _Row(segment_id, seg_class, str(session_id), str(role or ""),
                   float(rank_key) if rank_key is not None else math.nan,
                   boundary or DEFAULT_BOUNDARY[seg_class])
        row.last_use = float(now)
        self._live[segment_id] = row
        self._by_session.setdefault(row.session_id, {})[segment_id] = None
        if seg_class == "worker":
            self._workers[segment_id] = row
            self._worker_slot(row)
        elif seg_class == "reviewer":
            self._reviewers[segment_id] = row
        self._tok_class.setdefault(seg_class, [0, 0])
        self.stats.opened(seg_class, len(self._reviewers))

    def add_write(self, segment_id: str, n_tokens: int, now: float = 0.0, *, seg_class: str | None = None,
                  session_id: str = "", role: str = "", rank_key: float = math.nan) -> np.ndarray:
        """Write n_tokens of KV to a segment (opening it if seg_class is given); returns the new block ids.

        Raises AllocationError, with no counter or block changed, when memory cannot hold the write
        (a segment this call opened stays open, empty)."""
        row = self._live.get(segment_id)
        if row is None:
            if seg_class is None:
                raise KeyError(f"add_write: segment {segment_id!r} is not open (pass seg_class= to open it)")
            self.open(segment_id, seg_class, session_id, role, rank_key, now=now)
            row = self._live[segment_id]
        n = int(n_tokens)
        if n < 0:
            raise ValueError(f"add_write: segment {segment_id!r}: n_tokens must be >= 0, got {n_tokens}")
        bt = self.block_tokens
        room = row.n_blocks * bt - row.n_tokens
        fill = min(room, n)
        rest = n - fill
        nb = -(-rest // bt)
        ids = None
        if nb:  # decide and allocate before touching any counter, so a failed write changes nothing
            info = _segment_info()(row.segment_id, row.seg_class, row.session_id, row.role, row.rank_key, row.boundary,
                               row.n_blocks, row.n_tokens, nb)
            want = _tier(self.policy.tier(info, self))
            ids = self._allocate(want, nb)
            row.tier_pref = want
        row.last_use = float(now)
        row.n_tokens += n
        tok = self._tok
        by_class = self._tok_class[row.seg_class]
        if fill:
            tok[row.last_tier] += fill
            by_class[row.last_tier] += fill
        if ids is None:
            return _EMPTY
        hbm = self.allocator.hbm_blocks
        n_hbm = int(np.count_nonzero(ids < hbm)) if nb > 1 else int(ids[0] < hbm)
        n_hbf = nb - n_hbm
        last = 0 if ids[-1] < hbm else 1
        short = bt - (rest - (nb - 1) * bt)  # empty slots of the last new block
        th, tf = n_hbm * bt, n_hbf * bt
        if last:
            tf -= short
        else:
            th -= short
        tok[0] += th
        tok[1] += tf
        by_class[0] += th
        by_class[1] += tf
        self._blk[0] += n_hbm
        self._blk[1] += n_hbf
        row.chunks.append(ids)
        row.n_blocks += nb
        row.n_hbm += n_hbm
        row.last_tier = last
        if row.wslot >= 0:
            self._w_blocks[row.wslot] += nb
            self._w_hbm[row.wslot] += n_hbm
        return ids

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
        if self._workers.pop(segment_id, None) is not None:
            self._w_alive[row.wslot] = False
            self._w_rows[row.wslot] = None
            row.wslot = -1
            self._w_dead += 1
            if self._w_dead > 64 and 2 * self._w_dead > self._w_n:
                self._compact_workers()
        self._reviewers.pop(segment_id, None)
        self._closed_ids.add(segment_id)
        self.stats.closed(row.seg_class, row.n_blocks)
        row.last_use = float(now if last_use is None else last_use)
        self._n_closed += 1
        if self.policy.frees_at_boundary:
            self.allocator._free_owned(row.block_ids())
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
        """Close every live segment of a session (boundary ``session_end``), in open order; returns their ids."""
        ids = list(self._by_session.get(session_id, ()))
        for s in ids:
            self.close(s, now)
        return ids

    # -- live-worker slots -------------------------------------------------------------------------------
    def _worker_slot(self, row: _Row) -> None:
        if self._w_n == self._w_ids.size:
            grow = lambda a: np.concatenate([a, np.zeros_like(a)])  # noqa: E731
            self._w_ids, self._w_keys, self._w_blocks, self._w_hbm, self._w_alive = map(
                grow, (self._w_ids, self._w_keys, self._w_blocks, self._w_hbm, self._w_alive))
        i = self._w_n
        self._w_ids[i] = row.segment_id
        self._w_keys[i] = row.rank_key
        self._w_blocks[i] = row.n_blocks
        self._w_hbm[i] = row.n_hbm
        self._w_alive[i] = True
        self._w_rows.append(row)
        row.wslot = i
        self._w_n += 1

    def _compact_workers(self) -> None:
        m = self._w_alive[: self._w_n]
        k = int(m.sum())
        for arr in (self._w_ids, self._w_keys, self._w_blocks, self._w_hbm, self._w_alive):
            arr[:k] = arr[: self._w_n][m]
        self._w_alive[k : self._w_n] = False
        self._w_rows = [r for r in self._w_rows if r is not None]
        for i, r in enumerate(self._w_rows):
            r.wslot = i
        self._w_n, self._w_dead = k, 0

    # -- eviction ------------------------------------------------------------------------------
    def _allocate(self, want: Tier, nb: int) -> np.ndarray:
        a = self.allocator
        free_total = a.free_blocks(Tier.HBM) + a.free_blocks(Tier.HBF)
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
                a._free_owned(self._evict(k, Tier.HBM))
                free_total += k
        if nb <= free_total:
            return a.alloc(want, nb)
        deficit = nb - free_total
        first = a.alloc(want, free_total) if free_total else None
        a._free_owned(self._evict(deficit))
        rest = a.alloc(want, deficit)
        return rest if first is None else np.concatenate([first, rest])

    def _evict(self, k: int, tier: Tier | None = None) -> np.ndarray:
        """Take k blocks from dead segments (of ``tier`` only, if given), least recently used segment
        first, tail blocks first within a segment.  Heaps hold stale entries, skipped lazily."""
        out: list[np.ndarray] = []
        hbm = self.allocator.hbm_blocks
        heap = self._dead_heap if tier is None else self._dead_heap_tier[tier]
        while k > 0:
            sid = heap[0][2]
            row = self._dead.get(sid)
            n_t = 0 if row is None else (row.n_blocks if tier is None else
                                         row.n_hbm if tier == Tier.HBM else row.n_blocks - row.n_hbm)
            if n_t == 0:
                heapq.heappop(heap)
                continue
            ids = row.block_ids()
            take = min(k, n_t)
            if tier is None:
                ev = ids[ids.size - take :][::-1]
                keep = ids[: ids.size - take]
            else:
                pos = np.flatnonzero((ids >= hbm) == bool(tier))[::-1][:take]
                ev = ids[pos]
                keep = np.delete(ids, pos)
            out.append(ev)
            n_hbm = int((ev < hbm).sum())
            self._dead_blocks[0] -= n_hbm
            self._dead_blocks[1] -= take - n_hbm
            row.n_hbm -= n_hbm
            row.n_blocks -= take
            row.chunks = [keep] if keep.size else []
            if row.n_blocks == 0:
                del self._dead[sid]
            k -= take
        ev = np.concatenate(out)
        self._evicted += int(ev.size)
        return ev

    # -- MemoryView ----------------------------------------------------------------------------------
    def total(self, tier: Tier) -> int:
        return int(self.allocator.capacity[_tier(tier)])

    def free(self, tier: Tier) -> int:
        return self.allocator.free_blocks(tier)

    def used(self, tier: Tier) -> int:
        return self.allocator.used_blocks(tier)

    def cached(self, tier: Tier) -> int:
        return int(self._dead_blocks[_tier(tier)])

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        m = self._w_alive[: self._w_n]
        return (self._w_ids[: self._w_n][m], self._w_keys[: self._w_n][m],
                self._w_blocks[: self._w_n][m], self._w_hbm[: self._w_n][m])

    def worker_position(self, segment_id: str) -> int:
        row = self._workers.get(segment_id)
        if row is None:
            raise KeyError(f"worker segment {segment_id!r} is not live in the segment table")
        return int(self._w_alive[: row.wslot].sum())

    def worker_ranking(self, segment_id: str) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(rank keys, blocks, total HBM blocks) of the live workers in open order, and one worker's
        position: :meth:`live_workers` + :meth:`worker_position` in one call (read-only arrays)."""
        row = self._workers.get(segment_id)
        if row is None:
            raise KeyError(f"worker segment {segment_id!r} is not live in the segment table")
        n = self._w_n
        if self._w_dead:
            m = self._w_alive[:n]
            return (self._w_keys[:n][m], self._w_blocks[:n][m], int(self._w_hbm[:n][m].sum()),
                    int(m[: row.wslot].sum()))
        # no worker closed since the last compaction: every slot is alive
        return self._w_keys[:n], self._w_blocks[:n], int(self._w_hbm[:n].sum()), row.wslot

    def live_reviewer_hbm_blocks(self) -> int:
        return sum(r.n_hbm for r in self._reviewers.values())

    # -- inspection ------------------------------------------------------------------------------
    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._live

    def __len__(self) -> int:
        return len(self._live)

    def blocks_of(self, segment_id: str) -> np.ndarray:
        """Block ids a live (or cached dead) segment holds, in write order."""
        row = self._live.get(segment_id) or self._dead.get(segment_id)
        if row is None:
            raise KeyError(f"segment {segment_id!r} holds no blocks (unknown, freed or evicted)")
        return row.block_ids().copy()

    def rows(self) -> list[dict[str, Any]]:
        """One dict per live segment (id, class, boundary, session, rank key, tier preference, blocks, HBM blocks, tokens)."""
        return [dict(segment_id=r.segment_id, seg_class=r.seg_class, boundary=r.boundary, session_id=r.session_id,
                     role=r.role, rank_key=r.rank_key, tier_pref=None if r.tier_pref is None else r.tier_pref.name,
                     n_blocks=r.n_blocks, n_hbm=r.n_hbm, n_tokens=r.n_tokens)
                for r in self._live.values()]


def parse_event(ev: Sequence[Any]) -> tuple:
    """Normalise one event tuple (module docstring), raising ValueError naming the bad field."""
    if len(ev) < 3:
        raise ValueError(f"event {ev!r}: expected at least (time, kind, id)")
    t, kind = float(ev[0]), ev[1]
    if kind == "write":
        if len(ev) < 5 or len(ev) > 7:
            raise ValueError(f"event {ev!r}: write needs (t, 'write', segment_id, seg_class, tokens[, session_id[, rank_key]])")
        sid, cls, tok = str(ev[2]), str(ev[3]), ev[4]
        if isinstance(tok, bool) or int(tok) != tok or int(tok) < 0:
            raise ValueError(f"event {ev!r}: field 'tokens' must be a non-negative integer")
        session = str(ev[5]) if len(ev) > 5 and ev[5] is not None else ""
        key = float(ev[6]) if len(ev) > 6 and ev[6] is not None else math.nan
        return (t, "write", sid, cls, int(tok), session, key)
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
    raise ValueError(f"event {ev!r}: field 'kind' must be 'write', 'close' or 'session_end', got {kind!r}")


def replay_events(events: Iterable[Sequence[Any]], policy: "Policy | str", hbm_blocks: int, hbf_blocks: int,
                  block_tokens: int = 16, bytes_per_token: int = 1) -> WriteTotals:
    """Replay an ordered event list through the fast allocator and return the per-tier write totals."""
    from lachesis.policies import get_policy

    pol = get_policy(policy) if isinstance(policy, str) else policy
    table = SegmentTable(TieredAllocator(hbm_blocks, hbf_blocks), pol, block_tokens, bytes_per_token)
    for i, raw in enumerate(events):
        ev = parse_event(raw)
        try:
            if ev[1] == "write":
                _, _, sid, cls, tok, session, key = ev
                row = table._live.get(sid)
                if row is not None and row.seg_class != cls:
                    raise ValueError(f"segment {sid!r} written as {cls!r} but opened as {row.seg_class!r}")
                table.add_write(sid, tok, ev[0], seg_class=cls, session_id=session, rank_key=key)
            elif ev[1] == "close":
                table.close(ev[2], ev[0], ev[3])
            else:
                table.end_session(ev[2], ev[0])
        except (AllocationError, KeyError, ValueError) as exc:
            raise type(exc)(f"event {i} {tuple(raw)!r}: {exc}") from exc
    return table.totals
