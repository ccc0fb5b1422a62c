"""The KV vocabulary, defined once: tiers, segment classes, boundaries, what a placement decision is told (§3–§4).

Everything segment recovery (:mod:`lachesis.analysis.segments`), the figures, the allocator
(:mod:`lachesis.memory.allocator`), the placement policies (:mod:`lachesis.memory.policies`) and their callers
share lives here and is imported downward (docs/design.md §1, §3, §5): the memory tiers, the
segment classes (by axis, and with §4's short-/long-lived split), the boundary kinds, what a
placement decision is told about a segment
(:class:`SegmentInfo`) and about memory (:class:`MemoryView`, :class:`PlacementStats`), and the
:class:`Policy` protocol itself.

Statistics of closed segments that policies use (:class:`PlacementStats`): the worker-size and
reviewer-reservation estimates are stated with the predictive path in docs/design.md §5;
the reuse estimates are NAMED ASSUMPTIONS here, each with its knob:

* Realized reuse (Eq. 3): a closed segment's ρR/W = decode-stage reads reported for it
  (:meth:`lachesis.memory.allocator.SegmentTable.add_reads`) / tokens it wrote; segments that wrote no
  token carry no ρ.  The predicted ρ of a segment is the token-weighted ρ of the earlier closed
  segments of the same class in the same session (since its last ``session_end``), else of the
  class on this node, else of every closed segment on this node, else unknown (NaN).  Reason: an
  engine with per-session statistics knows how often a session's earlier context of that kind was
  re-read; the class and node fall-backs are the running estimates it has before that.
* Reuse threshold distribution: the realized ρ of the last ``rho_window`` (default
  :data:`RHO_WINDOW`) closed segments, count-weighted (as Fig. 5(b)); its q-quantile is the order
  statistic ``sorted[max(ceil(q n) - 1, 0)]`` (inverted CDF, no interpolation).  Reason: a
  quantile of what the node observed is scale-free, so one setting transfers across workloads; a
  window keeps it current and each update O(window).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from enum import IntEnum
from typing import Iterator, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Tier",
    "as_tier",
    "AllocationError",
    "SEG_CLASSES",
    "TEMPORAL_CLASSES",
    "STRUCTURAL_CLASSES",
    "SHORT_LIVED_CLASSES",
    "LONG_LIVED_CLASSES",
    "BOUNDARIES",
    "DEFAULT_BOUNDARY",
    "check_class",
    "SegmentInfo",
    "PlacementStats",
    "EMA_ALPHA",
    "RHO_WINDOW",
    "MemoryView",
    "RankedMemoryView",
    "Policy",
]


class Tier(IntEnum):
    """Memory tier of a KV block (§4: one free list per tier)."""

    HBM = 0
    HBF = 1


_TIERS = (Tier.HBM, Tier.HBF)


def as_tier(tier: Tier | int | str) -> Tier:
    """A :class:`Tier` from a Tier, 0/1, or 'HBM'/'HBF' (any case); ValueError naming the bad value."""
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


class AllocationError(RuntimeError):
    """Raised when an allocation cannot be served, or on a bad free (double free, unknown id)."""


#: Segment classes (docs/design.md §3): the single-agent temporal split, then the multi-agent roles.
SEG_CLASSES = ("reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer")
#: The classes of the temporal axis (single agent, §3.3, Fig. 4) and of the structural axis (§3.4, Fig. 5).
TEMPORAL_CLASSES = SEG_CLASSES[:2]
STRUCTURAL_CLASSES = SEG_CLASSES[2:]
#: §4 deterministic path: classes discarded at a boundary well before the session ends.
SHORT_LIVED_CLASSES = frozenset({"reasoning_laden", "worker", "reviewer"})
#: §4 deterministic path: classes that carry past their boundary (reasoning-stripped context, lead).
LONG_LIVED_CLASSES = frozenset({"reasoning_stripped", "lead"})
#: Boundary kinds that close a segment (docs/design.md §3).
BOUNDARIES = ("turn_end", "subagent_return", "session_end")
#: Closing boundary per class when the caller does not give one (docs/design.md §3).
DEFAULT_BOUNDARY = {
    "reasoning_laden": "turn_end",
    "reasoning_stripped": "session_end",
    "lead": "session_end",
    "worker": "subagent_return",
    "reviewer": "subagent_return",
}


_CLASS_SET = frozenset(SEG_CLASSES)


def check_class(segment_id: str, seg_class: str) -> None:
    """Raise ValueError naming the segment when ``seg_class`` is not one of :data:`SEG_CLASSES`."""
    if seg_class not in _CLASS_SET:
        raise ValueError(f"segment {segment_id!r}: unknown seg_class {seg_class!r}; expected one of {sorted(SEG_CLASSES)}")


class SegmentInfo(NamedTuple):
    """What the harness reported about a segment, plus its size, at a placement decision (immutable;
    a named tuple because one is built per decision).

    ``close_s`` and ``final_tokens`` are clairvoyant facts (when the segment will close, how many
    tokens it will have written) that only an oracle is given; NaN when unknown."""

    segment_id: str
    seg_class: str
    session_id: str = ""
    role: str = ""
    rank_key: float = math.nan  # predicted lifetime rank key (workers); lower = shorter-lived
    boundary: str = ""
    n_blocks: int = 0  # blocks the segment holds before this write
    n_tokens: int = 0  # tokens written before this write
    new_blocks: int = 0  # blocks this write is about to allocate
    read_tokens: int = 0  # decode-stage reads reported for the segment so far (Eq. 3)
    close_s: float = math.nan  # clairvoyant: when its boundary will be reported
    final_tokens: float = math.nan  # clairvoyant: tokens it will have written when it closes


EMA_ALPHA = 0.1  # ASSUMPTION: smoothing of the reviewer-reservation EMAs (docs/design.md §5)
RHO_WINDOW = 1024  # ASSUMPTION: closed segments whose realized ρ form the threshold distribution


class PlacementStats:
    """Running statistics of closed segments that placement policies consult (module docstring)."""

    def __init__(self, alpha: float = EMA_ALPHA, rho_window: int = RHO_WINDOW) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        if int(rho_window) < 1:
            raise ValueError(f"rho_window must be >= 1, got {rho_window}")
        self.alpha = alpha
        self.closed_workers = 0
        self.closed_worker_blocks = 0
        self.reviewer_blocks_ema = 0.0
        self.closed_reviewers = 0
        self.live_reviewers_ema = 0.0
        # Realized reuse: [reads, tokens] per (session, class), per class, and node-wide.
        self._reuse_session: dict[str, dict[str, list[int]]] = {}
        self._reuse_class: dict[str, list[int]] = {}
        self._reuse_node = [0, 0]
        # The last rho_window realized ρ values, in close order, and a sorted mirror synced lazily.
        self.rho_window = int(rho_window)
        self._rho_recent: deque[float] = deque()
        self._rho_sorted: list[float] = []
        self._rho_added: list[float] = []
        self._rho_dropped: list[float] = []
        self._rho_resort = False

    def opened(self, seg_class: str, n_live_reviewers: int) -> None:
        """Record a segment open; samples the live-reviewer count (after the open)."""
        self.live_reviewers_ema += self.alpha * (n_live_reviewers - self.live_reviewers_ema)

    def closed(self, seg_class: str, n_blocks: int, session_id: str = "", tokens: int = 0, reads: int = 0) -> None:
        """Record a segment close with its final size in blocks, its tokens written and its reads."""
        if seg_class == "worker":
            self.closed_workers += 1
            self.closed_worker_blocks += int(n_blocks)
        elif seg_class == "reviewer":
            if self.closed_reviewers == 0:
                self.reviewer_blocks_ema = float(n_blocks)
            else:
                self.reviewer_blocks_ema += self.alpha * (n_blocks - self.reviewer_blocks_ema)
            self.closed_reviewers += 1
        if tokens > 0:
            per_session = self._reuse_session.get(session_id)
            if per_session is None:
                per_session = self._reuse_session[session_id] = {}
            mine = per_session.get(seg_class)
            if mine is None:
                mine = per_session[seg_class] = [0, 0]
            cls = self._reuse_class.get(seg_class)
            if cls is None:
                cls = self._reuse_class[seg_class] = [0, 0]
            for acc in (mine, cls, self._reuse_node):
                acc[0] += reads
                acc[1] += tokens
            rho = reads / tokens
            recent = self._rho_recent
            recent.append(rho)
            if len(recent) > self.rho_window:
                self._rho_dropped.append(recent.popleft())
            added = self._rho_added
            added.append(rho)
            if len(added) > self.rho_window:  # nobody asked for a while: re-sort on the next ask
                self._rho_added, self._rho_dropped, self._rho_resort = [], [], True

    def session_ended(self, session_id: str) -> None:
        """Forget a session's own reuse history (a later segment of the same id is a new session)."""
        self._reuse_session.pop(session_id, None)

    @property
    def mean_worker_blocks(self) -> float:
        """Mean size (blocks) of closed workers; 0 before any closed."""
        return self.closed_worker_blocks / self.closed_workers if self.closed_workers else 0.0

    def reviewer_reserve(self, live_reviewer_hbm_blocks: int) -> int:
        """HBM blocks held back for reviewers before workers are counted (docs/design.md §5, reviewer reservation)."""
        expected = math.ceil(self.reviewer_blocks_ema * self.live_reviewers_ema - 1e-9)
        return max(0, expected - int(live_reviewer_hbm_blocks))

    def predicted_rho(self, session_id: str, seg_class: str) -> float:
        """Reads per written token expected of a segment: session+class, else class, else node; NaN if none."""
        acc = self._reuse_session.get(session_id, {}).get(seg_class) or self._reuse_class.get(seg_class)
        if acc is None:
            acc = self._reuse_node
        return acc[0] / acc[1] if acc[1] else math.nan

    def rho_quantile(self, q: float) -> float:
        """q-quantile (inverted CDF) of the realized ρ of the last ``rho_window`` closed segments; NaN if none."""
        if self._rho_resort:
            self._rho_sorted, self._rho_resort = sorted(self._rho_recent), False
            self._rho_added, self._rho_dropped = [], []
        elif self._rho_added:
            srt = self._rho_sorted
            for x in self._rho_added:
                bisect.insort(srt, x)
            for x in self._rho_dropped:  # each is in srt now: it entered before it left
                del srt[bisect.bisect_left(srt, x)]
            self._rho_added, self._rho_dropped = [], []
        srt = self._rho_sorted
        if not srt:
            return math.nan
        return srt[max(math.ceil(q * len(srt)) - 1, 0)]


@runtime_checkable
class MemoryView(Protocol):
    """Read-only memory state a policy may consult, what §4 lets it know (the segment table's
    :class:`lachesis.memory.allocator.TableView` and the test reference implement it)."""

    stats: PlacementStats

    def total(self, tier: Tier) -> int:
        """Blocks in the tier."""
        ...

    def free(self, tier: Tier) -> int:
        """Blocks on the tier's free list."""
        ...

    def used(self, tier: Tier) -> int:
        """Blocks allocated in the tier (live + cached dead)."""
        ...

    def cached(self, tier: Tier) -> int:
        """Blocks of dead (closed, not yet evicted) segments in the tier."""
        ...

    def live_workers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Live workers in open order: (segment ids (object array), rank keys float64, blocks int64, HBM blocks int64)."""
        ...

    def worker_position(self, segment_id: str) -> int:
        """Index of a live worker in the arrays :meth:`live_workers` returns."""
        ...

    def live_reviewer_hbm_blocks(self) -> int:
        """HBM blocks held by live reviewer segments."""
        ...

    def live_segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every live segment in open order: (close_s float64, final size in blocks float64 (NaN
        unknown), blocks int64, HBM blocks int64)."""
        ...

    def segment_position(self, segment_id: str) -> int:
        """Index of a live segment in the arrays :meth:`live_segments` returns."""
        ...


@runtime_checkable
class RankedMemoryView(MemoryView, Protocol):
    """A :class:`MemoryView` that also reads its rankings in place (the segment table's view);
    policies use these when the view has them and the arrays of :class:`MemoryView` otherwise."""

    def workers_ahead(self, segment_id: str) -> tuple[Iterator[int], int, int]:
        """Blocks of the live workers ranked before one worker (lazily, in rank order), its own
        blocks, and the HBM blocks all live workers hold."""
        ...

    def demand_ahead(self, segment_id: str) -> tuple[int, int, int]:
        """HBM demand (held + still to write) of the live segments closing before one segment, then
        its own HBM blocks and blocks still to write."""
        ...


@runtime_checkable
class Policy(Protocol):
    """A placement policy: one decision function (see :mod:`lachesis.memory.policies` to add your own).

    Optional attributes the segment table honours: ``reclaims_cached_hbm`` (cached dead HBM blocks
    count as free for HBM placement) and ``rho_window`` (size of :class:`PlacementStats`' ρ window)."""

    name: str
    frees_at_boundary: bool

    def tier(self, seg: SegmentInfo, view: MemoryView) -> Tier:
        """Tier the segment's next blocks are allocated in (the allocator falls back when it is full)."""
        ...
