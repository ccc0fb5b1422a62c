"""Statistics the characterization figures report (§3.3–3.5), on top of :mod:`scipy.stats`: separability,
median ratio, p90/p10 spread, Kendall's τ-b, CDF overlap, the laden share, and the small-sample flag.
Each function's docstring names the paper's numbers it is compared with; the definitions (CDF overlap
is a named one): docs/design.md §6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats as st

from lachesis.kv import TEMPORAL_CLASSES

if TYPE_CHECKING:
    from lachesis.analysis.segments import Segments


#: ASSUMPTION (small samples): a statistic computed on fewer than 20 units (segments, turns, workers),
#: or from fewer than 20 sessions (units of one session share its draws, so sessions bound the
#: effective sample), is flagged beside the paper's number.  Reason: with 20 samples the 95% interval
#: of a median already runs from about the 27th to the 73rd percentile (order statistics 6 and 15),
#: wider than most of the paper's ranges; below it an "in range" verdict says little.
MIN_UNITS = 20


def small_sample(n: int, sessions: int, min_units: int = MIN_UNITS) -> str:
    """Flag of a comparison row: "" when both counts reach ``min_units``, else which falls short."""
    short = [f"{what} {k} < {min_units}" for what, k in (("n", n), ("sessions", sessions)) if k < min_units]
    return "; ".join(short)


def _arr(x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    a = a[~np.isnan(a)]
    if a.size == 0:
        raise ValueError("empty sample")
    return a


def separability(long: Any, short: Any) -> float:
    """P(random ``long`` sample > random ``short`` sample), ties counting half (Mann–Whitney U / n1 n2);
    §3.3 "0.96–0.99", §3.4 "0.90–1.00"."""
    a, b = _arr(long), _arr(short)
    u = st.mannwhitneyu(a, b, alternative="two-sided").statistic
    return float(u / (a.size * b.size))


def median_ratio(a: Any, b: Any) -> float:
    """median(a) / median(b); §3.3 "7.6–17.2×", §3.4 "4.0–6.1×"."""
    return float(np.median(_arr(a)) / np.median(_arr(b)))


def p90_over_p10(x: Any) -> float:
    """90th over 10th percentile (linear interpolation between order statistics): the spread of one
    class; §3.5 "3.7–23.6×"."""
    p10, p90 = np.percentile(_arr(x), [10, 90])
    return float(p90 / p10)


def kendall_tau(x: Any, y: Any) -> float:
    """Kendall's τ-b between paired samples (scipy.stats.kendalltau); §3.5 "0.51–0.72", ranker "0.53"."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(st.kendalltau(x, y).statistic)


def cdf_overlap(a: Any, b: Any, method: str = "ks", bins: int = 30) -> float:
    """Overlap of two distributions: ``1 - KS statistic`` (default) or the shared histogram area on log bins
    (docs/design.md §6); §3.4 "lead and worker overlap in ρR/W by 0.25–0.60"."""
    a, b = _arr(a), _arr(b)
    if method == "ks":
        return float(1.0 - st.ks_2samp(a, b).statistic)
    if method == "histogram":
        if (a <= 0).any() or (b <= 0).any():
            raise ValueError("histogram overlap on a log axis needs positive values")
        la, lb = np.log10(a), np.log10(b)
        edges = np.histogram_bin_edges(np.r_[la, lb], bins=bins)
        pa, _ = np.histogram(la, edges)
        pb, _ = np.histogram(lb, edges)
        return float(np.minimum(pa / a.size, pb / b.size).sum())
    raise ValueError(f"method must be 'ks' or 'histogram', not {method!r}")


def laden_share(seg: Segments | pd.DataFrame, per_turn: bool = False) -> float | pd.Series:
    """Reasoning-laden share of the KV tokens single-agent turns write (aggregate, or one value per turn);
    §3.3 "66–83%"."""
    df = seg if isinstance(seg, pd.DataFrame) else seg.segments
    df = df[df["seg_class"].isin(TEMPORAL_CLASSES)]
    if per_turn:
        g = df.assign(laden=df["tokens_written"].where(df["seg_class"] == "reasoning_laden", 0)) \
              .groupby(["session_id", "agent_id", "write_turn"], sort=False)[["laden", "tokens_written"]].sum()
        return g["laden"] / g["tokens_written"]
    total = df["tokens_written"].sum()
    if total == 0:
        raise ValueError("no single-agent (reasoning-laden/stripped) segments")
    return float(df.loc[df["seg_class"] == "reasoning_laden", "tokens_written"].sum() / total)
