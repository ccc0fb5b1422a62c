"""Placement statistics (§4, Eq. 3): the running statistics of closed segments a placement policy consults.

The segment table (:class:`lachesis.memory.allocator.SegmentTable`) tells them of every open and close; a
policy reads them through its memory view.  The worker-size and reviewer-reservation estimates are stated
with the predictive path in docs/design.md §5; the reuse estimates are NAMED ASSUMPTIONS here, each with its knob:

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

__all__ = ["EMA_ALPHA", "RHO_WINDOW", "RESERVE_SLACK", "PlacementStats"]


EMA_ALPHA = 0.1  # ASSUMPTION: smoothing of the reviewer-reservation EMAs (docs/design.md §5)
RHO_WINDOW = 1024  # ASSUMPTION: closed segments whose realized ρ form the threshold distribution
RESERVE_SLACK = 1e-9  # the reviewer reservation's tolerance: an expected size within it of a whole block rounds down


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
        expected = math.ceil(self.reviewer_blocks_ema * self.live_reviewers_ema - RESERVE_SLACK)
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
