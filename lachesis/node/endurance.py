"""Flash endurance (§2.2, §5.2–§5.3): the years an HBF P/E budget lasts at a settled KV write rate, read over an
expert-parallel group's ranks, and the rule that says when a run's write rate has settled."""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from lachesis.config import LIFETIME_OVER_RANKS, SECONDS_PER_YEAR, Endurance, MemoryConfig
from lachesis.node.quantity import ArrayLike, as_result, check_nonnegative

#: the flash the paper assumes (SLC, 100,000 P/E cycles, write amplification 1.02; §5.2)
PAPER_ENDURANCE = Endurance()


def hbf_lifetime_years(memory: MemoryConfig, hbf_kv_write_bytes_per_s: ArrayLike,
                       endurance: Endurance = PAPER_ENDURANCE, reserved_bytes: float = 0.0) -> float | np.ndarray:
    """Years the HBF P/E budget lasts at a KV write rate (B/s, per GPU): stacks×512 GB×P/E/(WA×rate).

    The one-time weight load is excluded (it is not in the rate).  ``reserved_bytes`` removes flash
    holding read-only data from the budget (Kyung et al.'s accounting; 0 in the Lachesis paper).
    A zero rate gives ``inf``; a NaN rate gives NaN.
    """
    rate = np.asarray(hbf_kv_write_bytes_per_s, dtype=float)
    check_nonnegative("hbf_lifetime_years", "write rate", rate, finite=False)
    budget = (memory.hbf_bytes - reserved_bytes) * endurance.pe_cycles
    if budget <= 0:
        raise ValueError(f"hbf_lifetime_years: no flash left to wear ({memory.label}, reserved {reserved_bytes:g} B)")
    with np.errstate(divide="ignore"):
        secs = budget / (endurance.write_amplification * rate)
    return as_result(secs / SECONDS_PER_YEAR)


#: how a group's lifetime reads its ranks' HBF write rates (``Endurance.lifetime_over_ranks``)
OVER_RANKS = LIFETIME_OVER_RANKS


def rank_spread(hbf_bytes_by_rank: Sequence[float]) -> float:
    """The most-written rank's HBF KV bytes over the ranks' mean (1 for one rank or no HBF write)."""
    b = np.asarray(hbf_bytes_by_rank, dtype=float)
    if b.size == 0:
        raise ValueError("rank_spread: expected one rank's bytes or more, got none")
    check_nonnegative("rank_spread", "bytes per rank", b)
    mean = float(b.mean())
    return float(b.max() / mean) if mean > 0 else 1.0


def group_lifetime_years(memory: MemoryConfig, mean_rate: ArrayLike, endurance: Endurance = PAPER_ENDURANCE,
                         spread: float = 1.0) -> float | np.ndarray:
    """Lifetime of a group's HBF from its ranks' mean write rate (B/s per GPU) and :func:`rank_spread`:
    at the mean rate, or at the worst rank's (mean × spread) under ``lifetime_over_ranks="worst"``."""
    over = endurance.lifetime_over_ranks
    if over not in OVER_RANKS:
        raise ValueError(f"lifetime_over_ranks must be one of {list(OVER_RANKS)}, got {over!r}")
    if not (np.isfinite(spread) and spread >= 1.0):
        raise ValueError(f"group_lifetime_years: rank spread must be >= 1, got {spread!r}")
    rate = np.asarray(mean_rate, dtype=float) * (spread if over == "worst" else 1.0)
    return hbf_lifetime_years(memory, rate, endurance)


class Settling(NamedTuple):
    """Result of :func:`settled_rate` (a tuple: ``rate, settled, settled_at_s``)."""

    rate: float  # B/s over the second half of the whole series
    settled: bool  # the half-vs-quarter rule holds at the end of the series (and from settled_at_s on)
    settled_at_s: float  # earliest prefix end after which the rule holds for every longer prefix (NaN if never)


def settled_rate(t: np.ndarray, cum_bytes: np.ndarray, rtol: float = 0.10, min_points: int = 8) -> Settling:
    """Detect when a cumulative-bytes series has settled (rule *half-vs-quarter*, vectorized).

    For each prefix ``[t0, t_i]`` of length T_i: r½ = rate over its second half, r¼ = rate over its
    last quarter (cumulative bytes linearly interpolated).  The prefix passes when
    ``|r½ - r¼| <= rtol · r½``.  Settled at the first ``t_i`` (i ≥ ``min_points``) from which every
    longer prefix passes; the reported rate is r½ of the whole series.
    """
    t = np.asarray(t, dtype=float)
    c = np.asarray(cum_bytes, dtype=float)
    if t.ndim != 1 or t.shape != c.shape:
        raise ValueError("settled_rate: t and cum_bytes must be 1-D arrays of the same length")
    if len(t) < 2:
        raise ValueError("settled_rate: need at least two samples")
    if np.any(np.diff(t) <= 0):
        raise ValueError("settled_rate: t must be strictly increasing")
    if np.any(np.diff(c) < 0) or np.any(~np.isfinite(c)):
        raise ValueError("settled_rate: cum_bytes must be finite and non-decreasing")
    T = t - t[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        r_half = (c - np.interp(t[0] + T / 2, t, c)) / (T / 2)
        r_quarter = (c - np.interp(t[0] + 3 * T / 4, t, c)) / (T / 4)
        ok = np.abs(r_half - r_quarter) <= rtol * np.abs(r_half)
    ok[: max(min_points, 1)] = False
    ok &= np.isfinite(r_half)
    # suffix-all: ok_from[i] = ok[i] and ok[i+1] and ...
    ok_from = np.flip(np.logical_and.accumulate(np.flip(ok)))
    idx = np.flatnonzero(ok_from)
    rate = float(r_half[-1])
    if len(idx) == 0:
        return Settling(rate, False, float("nan"))
    return Settling(rate, True, float(t[idx[0]]))
