"""The oracle's knowledge of the future: each segment's close time, taken from a baseline run.

The oracle placement (:class:`lachesis.memory.policies.Oracle`) needs, at a segment's first write, the time
the segment will close; the evaluation borrows it from a run of the baseline (HBM-first) at the same
cell, load and seed.  :class:`Recorder` records that run's closes, :class:`CloseTimes` keeps them as
close offsets from each session instance's start, :class:`Clock` answers the oracle's run, and
:func:`drift` measures how far the oracle's own closes moved.

The keying, the fallbacks and the assumption (clairvoyance from the baseline, no knob):
docs/design.md §5, "Oracle clairvoyance".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from lachesis.io import check_columns, read_columns

__all__ = ["CloseTimes", "Recorder", "Clock", "drift"]

_FIELDS = ("session", "occurrence", "segment", "offset_s")


@dataclass(frozen=True)
class CloseTimes:
    """Per recorded close: session (index into the plan's ``sessions``), its occurrence in the run,
    the segment (index into the plan's segments) and the close offset from the instance's start.
    ``fingerprint`` names the plan the indices refer to."""

    session: np.ndarray  # int32
    occurrence: np.ndarray  # int32
    segment: np.ndarray  # int32
    offset_s: np.ndarray  # float64
    fingerprint: str

    def __post_init__(self) -> None:
        n = check_columns("CloseTimes", self.arrays())
        if n and (self.session.min() < 0 or self.occurrence.min() < 0 or self.segment.min() < 0):
            raise ValueError("CloseTimes: session, occurrence and segment indices must be >= 0")
        if not np.isfinite(self.offset_s).all():
            raise ValueError("CloseTimes: field 'offset_s' must be finite")

    def __len__(self) -> int:
        return len(self.session)

    def arrays(self) -> dict[str, np.ndarray]:
        """The four columns by name (what the sweep cache stores)."""
        return {f: getattr(self, f) for f in _FIELDS}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], fingerprint: str) -> "CloseTimes":
        """The inverse of :meth:`arrays`; a ValueError names a missing or malformed column."""
        cols = read_columns("CloseTimes", arrays, dict(session=("iu", np.int32), occurrence=("iu", np.int32),
                                                       segment=("iu", np.int32), offset_s=("f", np.float64)))
        return cls(**cols, fingerprint=str(fingerprint))


class _Instances:
    """Session instances in start order: which session each replays, its occurrence and its start."""

    def __init__(self, sessions: Sequence[str]) -> None:
        self._index = {s: i for i, s in enumerate(sessions)}
        self._seen: dict[int, int] = {}  # session index -> occurrences started so far
        self._inst: dict[int, tuple[int, int, float]] = {}  # instance -> (session, occurrence, start)

    def started(self, inst: int, session: str, t0: float) -> None:
        i = self._index[session]
        k = self._seen.get(i, 0)
        self._seen[i] = k + 1
        self._inst[inst] = (i, k, float(t0))


class Recorder(_Instances):
    """What one run records for a later clairvoyant run: instance starts and segment closes."""

    def __init__(self, sessions: Sequence[str], fingerprint: str) -> None:
        super().__init__(sessions)
        self._fingerprint = fingerprint
        self._closes: list[tuple[int, int, float]] = []  # (instance, segment, time)

    def closed(self, inst: int, segment: int, t: float) -> None:
        self._closes.append((inst, segment, t))

    def close_times(self) -> CloseTimes:
        """The closes recorded so far as offsets from their instance's start."""
        if not self._closes:
            z = np.zeros(0, dtype=np.int32)
            return CloseTimes(z, z, z, np.zeros(0), self._fingerprint)
        inst, seg, t = (np.asarray(c) for c in zip(*self._closes))
        meta = np.array([self._inst[int(i)] for i in inst], dtype=np.float64)
        return CloseTimes(meta[:, 0].astype(np.int32), meta[:, 1].astype(np.int32), seg.astype(np.int32),
                          t.astype(np.float64) - meta[:, 2], self._fingerprint)


class Clock(_Instances):
    """The oracle's close times during a run, from a baseline's :class:`CloseTimes` (docs/design.md §5,
    "Oracle clairvoyance")."""

    def __init__(self, times: CloseTimes, sessions: Sequence[str], fingerprint: str) -> None:
        if times.fingerprint != fingerprint:
            raise ValueError(f"clairvoyance recorded on trace {times.fingerprint!r}, not on this run's "
                             f"{fingerprint!r}")
        super().__init__(sessions)
        s, k, g, off = (times.session.tolist(), times.occurrence.tolist(), times.segment.tolist(),
                        times.offset_s.tolist())
        self._exact = {(a, b, c): o for a, b, c, o in zip(s, k, g, off)}
        sums: dict[tuple[int, int], list[float]] = {}
        for a, c, o in zip(s, g, off):
            acc = sums.setdefault((a, c), [0.0, 0])
            acc[0] += o
            acc[1] += 1
        self._mean = {key: v[0] / v[1] for key, v in sums.items()}

    def close_s(self, inst: int, segment: int) -> float:
        """Absolute close time of ``segment`` in instance ``inst`` (NaN when the baseline never closed it)."""
        i, k, t0 = self._inst[inst]
        off = self._exact.get((i, k, segment))
        if off is None:
            off = self._mean.get((i, segment))
            if off is None:
                return float("nan")
        return t0 + off


def drift(baseline: CloseTimes, other: CloseTimes) -> dict[str, float]:
    """How far ``other``'s close offsets are from ``baseline``'s, over the closes both recorded.

    ``matched``: share of ``other``'s closes that the baseline also recorded (same session,
    occurrence, segment); ``median_abs_s`` / ``p90_abs_s``: |offset difference| over them;
    ``median_rel``: median of |difference| / baseline offset (offsets of zero left out).
    """
    out = dict(matched=float("nan"), median_abs_s=float("nan"), p90_abs_s=float("nan"), median_rel=float("nan"))
    if not len(other):
        return out
    cols = ["session", "occurrence", "segment"]
    m = pd.DataFrame(baseline.arrays()).merge(pd.DataFrame(other.arrays()), on=cols, suffixes=("_b", "_o"))
    out["matched"] = len(m) / len(other)
    if not len(m):
        return out
    base = m["offset_s_b"].to_numpy()
    diff = np.abs(m["offset_s_o"].to_numpy() - base)
    out["median_abs_s"] = float(np.median(diff))
    out["p90_abs_s"] = float(np.quantile(diff, 0.9))
    pos = base > 0
    if pos.any():
        out["median_rel"] = float(np.median(diff[pos] / base[pos]))
    return out
