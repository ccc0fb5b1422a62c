"""The offline optimum of write-time placement: the most KV one run's HBM could have absorbed (beyond the paper).

Given one run's timeline (:class:`Timeline`: every write — its place in the run, time and tokens — and
the close of its segment), :func:`hbm_bound` gives the most HBM tokens any placement that writes each
block once and frees it no earlier than its segment's close could put among the writes of a window.
:func:`max_absorbed` solves it as a min-cost flow with HiGHS (:func:`scipy.optimize.linprog`) and checks
the rounded solution in integers.

The formulation, the flow network and its citation, and the named assumptions (one run's timeline,
dead blocks, token-level relaxation, token counts, ties): docs/design.md §5, "Offline bound".
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from lachesis.io import check_columns, read_columns
from lachesis.memory.replay import parse_event

__all__ = ["Timeline", "BoundResult", "max_absorbed", "hbm_bound"]

_FIELDS = ("t_write", "start", "end", "tokens")

#: The most tokens a timeline may hold in all (docs/design.md §5, "Offline bound": float64 is exact
#: for whole numbers below it).
MAX_TOKENS = 2**53


def _check_total(where: str, tokens: np.ndarray) -> None:
    """Refuse tokens whose total reaches :data:`MAX_TOKENS` (summed in float64, so it cannot wrap)."""
    total = float(np.sum(tokens, dtype=np.float64)) if tokens.size else 0.0
    if not total < MAX_TOKENS:
        raise ValueError(f"{where}: field 'tokens' totals {total:.4g} tokens, at or past the bound's limit of "
                         f"2**53 = {MAX_TOKENS:.4g} (float64 keeps whole token counts exact only below it)")


@dataclass(frozen=True)
class Timeline:
    """One run's writes: time (s), position of the write and of its segment's close on one ordered axis
    (``end`` past every write when the run never closed it), and tokens.  Positions order events; only
    their order matters."""

    t_write: np.ndarray  # float64
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    tokens: np.ndarray  # int64

    def __post_init__(self) -> None:
        n = check_columns("Timeline", self.arrays())
        if not np.isfinite(self.t_write).all():
            raise ValueError("Timeline: field 't_write' must be finite")
        if n and (self.tokens.min() < 0):
            raise ValueError("Timeline: field 'tokens' must be >= 0")
        _check_total("Timeline", self.tokens)

    def __len__(self) -> int:
        return len(self.t_write)

    def arrays(self) -> dict[str, np.ndarray]:
        """The four columns by name (what the sweep cache stores)."""
        return {f: getattr(self, f) for f in _FIELDS}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "Timeline":
        """The inverse of :meth:`arrays`; a ValueError names a missing or malformed column."""
        return cls(**read_columns("Timeline", arrays, dict(t_write=("f", np.float64), start=("iu", np.int64),
                                                           end=("iu", np.int64), tokens=("iu", np.int64))))

    @classmethod
    def from_times(cls, t_write: Sequence[float], t_close: Sequence[float], tokens: Sequence[int]) -> "Timeline":
        """A timeline from bare times: write i holds its tokens over [t_write[i], t_close[i]) (``inf``:
        never closed).  At one instant closes come before writes (half-open intervals).  A close before its
        write is refused (it would hold nothing and so count as absorbed), as is a total past :data:`MAX_TOKENS`."""
        t = np.asarray(t_write, dtype=np.float64)
        c = np.asarray(t_close, dtype=np.float64)
        tok = np.asarray(tokens)
        if t.ndim != 1 or t.shape != c.shape or t.shape != tok.shape:
            raise ValueError("Timeline.from_times: t_write, t_close and tokens must be 1-D and of one length")
        if np.isnan(c).any():
            raise ValueError("Timeline.from_times: t_close must not be NaN (inf: never closed)")
        if tok.size and (tok.dtype.kind not in "iu" or tok.min() < 0):
            raise ValueError("Timeline.from_times: tokens must be integers >= 0")
        _check_total("Timeline.from_times", tok)  # before the cast to int64, which would wrap a uint64
        if (early := np.flatnonzero(c < t)).size:
            i = int(early[0])
            raise ValueError(f"Timeline.from_times: write {i}: field 't_close' {float(c[i])!r} precedes its write at "
                             f"t_write {float(t[i])!r} (a close at or after the write; inf: never closed)")
        n = len(t)
        kind = np.repeat(np.array([0, 1], dtype=np.int8), n)  # closes (0) before writes (1) at one time
        order = np.lexsort((kind, np.concatenate([c, t])))
        rank = np.empty(2 * n, dtype=np.int64)
        rank[order] = np.arange(2 * n)
        return cls(t, rank[n:], rank[:n], tok.astype(np.int64))

    @classmethod
    def from_events(cls, events: Iterable[Sequence[Any]]) -> "Timeline":
        """A timeline from an allocator event stream (the format of docs/design.md §5, what
        ``simulate(..., settings=RunSettings(record_events=True))`` returns): ``write`` events give the writes,
        ``close`` and ``session_end`` the closes (positions: the events' order); ``read`` events are ignored.  Times
        must not decrease; a segment is closed once and never written after its close, as
        :func:`~lachesis.memory.replay.replay_events` requires.  One pass over the events."""
        t_w: list[float] = []
        pos_w: list[int] = []
        seg_w: list[int] = []
        tok_w: list[int] = []
        index: dict[str, int] = {}  # segment id -> its number
        end: list[int] = []  # per segment: position of its close (-1 while live)
        owner: list[str] = []  # per segment: the session it was opened in
        live: dict[str, dict[int, None]] = {}  # session -> its live segments
        last_t = -math.inf
        pos = -1
        for pos, raw in enumerate(events):
            ev = parse_event(raw)
            t, kind = ev[0], ev[1]
            if not t >= last_t:
                raise ValueError(f"event {pos} {tuple(raw)!r}: time {t!r} is before the previous event's {last_t!r}")
            last_t = t
            if kind == "write":
                k = index.get(ev[2])
                if k is None:
                    k = index[ev[2]] = len(end)
                    end.append(-1)
                    owner.append(ev[5])
                    live.setdefault(ev[5], {})[k] = None
                elif end[k] >= 0:
                    raise ValueError(f"event {pos} {tuple(raw)!r}: segment {ev[2]!r} was already closed")
                t_w.append(t)
                pos_w.append(pos)
                seg_w.append(k)
                tok_w.append(ev[4])
            elif kind == "close":
                k = index.get(ev[2], -1)
                if k < 0 or end[k] >= 0:
                    raise KeyError(f"event {pos} {tuple(raw)!r}: segment {ev[2]!r} is not open")
                end[k] = pos
                del live[owner[k]][k]
            elif kind == "session_end":
                for k in live.pop(ev[2], {}):
                    end[k] = pos
        _check_total("Timeline.from_events", np.asarray(tok_w, dtype=np.float64))  # before any int64 cast
        ends = np.asarray(end, dtype=np.int64)
        ends[ends < 0] = pos + 1  # never closed: live past the last event
        return cls(np.asarray(t_w, dtype=np.float64), np.asarray(pos_w, dtype=np.int64),
                   ends[np.asarray(seg_w, dtype=np.int64)], np.asarray(tok_w, dtype=np.int64))


@dataclass(frozen=True)
class BoundResult:
    """The bound over one window: the most HBM tokens among the window's writes, what the window wrote,
    and how the optimum was found (``status``: "optimal", or "trivial" when no LP was needed)."""

    hbm_tokens: float  # the optimum (a whole number when capacity and sizes are)
    window_tokens: int  # tokens written in the window
    capacity_tokens: float
    window: tuple[float, float]
    bytes_per_token: int = 1
    status: str = "optimal"
    solve_s: float = 0.0  # seconds building and solving the LP
    n_writes: int = 0  # writes in the window
    n_arcs: int = 0  # LP columns (free-capacity arcs + merged write arcs)

    @property
    def share(self) -> float:
        """The bound's share of the window's write bytes that HBM takes (NaN when nothing was written)."""
        return self.hbm_tokens / self.window_tokens if self.window_tokens else math.nan

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_tokens * self.bytes_per_token

    @property
    def window_bytes(self) -> int:
        return self.window_tokens * self.bytes_per_token

    def as_dict(self, prefix: str = "bound_") -> dict[str, Any]:
        """Plain-Python fields (bytes and share included), each name prefixed."""
        d = dict(hbm_bytes=float(self.hbm_bytes), window_bytes=float(self.window_bytes), hbm_share=float(self.share),
                 capacity_tokens=float(self.capacity_tokens), window_start_s=float(self.window[0]),
                 window_end_s=float(self.window[1]), status=self.status, solve_s=float(self.solve_s),
                 n_writes=int(self.n_writes), n_arcs=int(self.n_arcs))
        return {prefix + k: v for k, v in d.items()}


def max_absorbed(start: np.ndarray, end: np.ndarray, size: np.ndarray, capacity: float,
                 weight: np.ndarray | None = None) -> tuple[float, str, int]:
    """max Σ w·x over 0 ≤ x ≤ size with Σ x of the intervals [start, end) covering any point ≤ capacity.

    ``start``/``end``: integer positions on one axis (``end <= start``: the interval holds nothing);
    ``weight`` ≥ 0 (default 1).  Returns (optimum, status, LP columns).  The min-cost flow of the module
    docstring, solved by HiGHS, over the points where the constraint can bind; with whole sizes and
    capacity the optimum is whole (total unimodularity), and the rounded flow is checked against every
    constraint before its value is returned."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    size = np.asarray(size, dtype=np.float64)
    w = np.ones_like(size) if weight is None else np.asarray(weight, dtype=np.float64)
    if not (start.shape == end.shape == size.shape == w.shape) or start.ndim != 1:
        raise ValueError("max_absorbed: start, end, size and weight must be 1-D and of one length")
    if (size < 0).any() or (w < 0).any() or not (np.isfinite(size).all() and np.isfinite(w).all()):
        raise ValueError("max_absorbed: size and weight must be finite and >= 0")
    if not capacity >= 0:
        raise ValueError(f"max_absorbed: capacity must be >= 0, got {capacity!r}")
    keep = (w > 0) & (size > 0) & (end > start)  # the rest adds nothing, or holds nothing and all of it fits
    free = float(w[~keep & (end <= start)] @ size[~keep & (end <= start)])
    start, end, size, w = start[keep], end[keep], size[keep], w[keep]
    if not len(start) or capacity == 0:
        return free, "trivial", 0
    # Between two closes the live set only grows, so the constraint after the last write of each run of
    # writes with no close between them implies the others: one node per such run (coordinates: the number
    # of distinct closes at or before a position), write i covering the nodes [a_i, b_i).
    closes = np.unique(end)
    start, end = np.searchsorted(closes, start, side="right"), np.searchsorted(closes, end) + 1
    nodes = np.unique(start)
    a, b = np.searchsorted(nodes, start), np.searchsorted(nodes, end)
    # Only where the writes live there exceed the capacity can the constraint bind: keep those nodes.
    m = len(nodes)
    load = np.cumsum(np.bincount(a, size, m + 1) - np.bincount(b, size, m + 1))[:m]
    tight = np.flatnonzero(load > capacity)
    a, b = np.searchsorted(tight, a), np.searchsorted(tight, b)
    loose = b <= a  # covers no tight node: all of it fits
    free += float(w[loose] @ size[loose])
    a, b, size, w = a[~loose], b[~loose], size[~loose], w[~loose]
    if not len(a):
        return free, "trivial", 0
    # the flow: nodes 0..m (m tight nodes, then a sink), a free-capacity arc k -> k+1 (capacity C, cost 0)
    # and one arc per distinct (a, b, w) of the writes (capacity their total size, cost -w); C units 0 -> m
    m = len(tight)
    arcs, inv = np.unique(np.column_stack([a, b, w]), axis=0, return_inverse=True)
    cap = np.bincount(inv.ravel(), weights=size, minlength=len(arcs))
    ga, gb, gw = arcs[:, 0].astype(np.int64), arcs[:, 1].astype(np.int64), arcs[:, 2]
    n_arcs = m + len(arcs)
    tail = np.concatenate([np.arange(m), ga])
    head = np.concatenate([np.arange(1, m + 1), gb])
    cols = np.arange(n_arcs)
    a_eq = sparse.csr_array((np.concatenate([-np.ones(n_arcs), np.ones(n_arcs)]),
                             (np.concatenate([tail, head]), np.concatenate([cols, cols]))), shape=(m + 1, n_arcs))
    b_eq = np.zeros(m + 1)
    b_eq[0], b_eq[m] = -capacity, capacity
    bounds = np.column_stack([np.zeros(n_arcs), np.concatenate([np.full(m, float(capacity)), cap])])
    res = linprog(np.concatenate([np.zeros(m), -gw]), A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"max_absorbed: HiGHS did not solve the flow ({res.message})")
    x = res.x[m:]
    if float(capacity).is_integer() and np.all(np.mod(cap, 1) == 0):
        xi = np.clip(np.rint(x), 0, cap)
        live = np.cumsum(np.bincount(ga, xi, m + 1) - np.bincount(gb, xi, m + 1))[:m]
        if live.max() <= capacity:  # whole and within every constraint: the exact optimum
            return free + float(gw @ xi), "optimal", n_arcs
    return free - float(res.fun), "optimal", n_arcs


def hbm_bound(timeline: Timeline | Iterable[Sequence[Any]], hbm_tokens: float,
              window: tuple[float, float] = (-math.inf, math.inf), bytes_per_token: int = 1) -> BoundResult:
    """The most KV HBM can absorb among the writes of ``window`` = [t0, t1) (write times) of one run.

    ``timeline``: a :class:`Timeline`, or an allocator event stream (:meth:`Timeline.from_events`);
    ``hbm_tokens``: HBM's capacity in tokens (blocks × tokens per block; ``inf`` for no limit).  Writes
    outside the window carry no weight (docs/design.md §5, "Offline bound", says why they are dropped)."""
    tl = timeline if isinstance(timeline, Timeline) else Timeline.from_events(timeline)
    t0, t1 = float(window[0]), float(window[1])
    if not t0 <= t1:
        raise ValueError(f"hbm_bound: window must have t0 <= t1, got {window!r}")
    clock = time.perf_counter()
    inside = (tl.t_write >= t0) & (tl.t_write < t1)
    value, status, n_arcs = max_absorbed(tl.start[inside], tl.end[inside], tl.tokens[inside], float(hbm_tokens))
    return BoundResult(hbm_tokens=value, window_tokens=int(tl.tokens[inside].sum()), capacity_tokens=float(hbm_tokens),
                       window=(t0, t1), bytes_per_token=int(bytes_per_token), status=status,
                       solve_s=time.perf_counter() - clock, n_writes=int(inside.sum()), n_arcs=n_arcs)
