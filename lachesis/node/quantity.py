"""A node quantity: a scalar or a numpy array in, a float or an array out, so the simulator's per-event calls and
the notebooks' sweeps price with one function; the one check that a quantity is finite and non-negative."""

from __future__ import annotations

import numpy as np

ArrayLike = float | int | np.ndarray
#: Python and numpy scalars: a pricing function's fast path (no array made)
SCALARS = (int, float, np.integer, np.floating)


def as_result(x: np.ndarray) -> float | np.ndarray:
    """A 0-d result as a Python float, anything else as an array."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def check_nonnegative(where: str, name: str, value: ArrayLike, *, finite: bool = True) -> None:
    """Raise ``ValueError("<where>: <name> must be finite and >= 0, got …")`` unless every element of ``value`` is
    (``finite=False``: only a negative fails, so a rate not yet measured (NaN) or unbounded passes)."""
    v = np.asarray(value, dtype=float)
    bad = (v < 0) | ~np.isfinite(v) if finite else v < 0
    if np.any(bad):
        shown = v.item() if v.ndim == 0 else v[bad].ravel()[:3].tolist()
        raise ValueError(f"{where}: {name} must be {'finite and ' if finite else ''}>= 0, got {shown!r}")


def per_bandwidth(num: np.ndarray, bandwidth: float, what: str) -> np.ndarray:
    """Seconds to move ``num`` bytes at ``bandwidth`` B/s, with 0/0 = 0 and a clear error for bytes sent to a tier
    that has no bandwidth."""
    if bandwidth > 0:
        return num / bandwidth
    if np.any(num > 0):
        raise ValueError(f"{what}: bytes routed to a tier with zero bandwidth")
    return np.zeros_like(num)
