"""Evaluation statistics (Figs. 9–12, §5.3–§5.5): what the grid's rows say, beside what the paper reports.

The counterpart of :mod:`lachesis.analysis.characterize` for the evaluation: from the rows
:func:`lachesis.evaluation.sweep.run_grid` returns, the lifetime ratios per
cell and seed (:func:`ratio_table`, the one place a ratio is computed: :func:`with_ratios`), their
median over seeds with min–max (:func:`seed_table`), the write composition and HBM shares
(Figs. 10 and 12), and the
comparison tables the notebooks print beside the paper (:func:`multi_agent_stats`,
:func:`single_agent_stats`, :func:`compare_intervals`), and what the Figs. 9–12 notebooks print beside
them (:func:`run_line`, :func:`check_numbers`, :func:`multi_agent_findings`, :func:`single_agent_findings`).
Nothing here simulates; the figures are drawn by :mod:`lachesis.evaluation.plots`; the load curve is read by
:mod:`lachesis.evaluation.gains`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from lachesis import paper
from lachesis.config import SLOS
from lachesis.evaluation.grid import CELL, LOAD_POLICY, compared_policies, is_clairvoyant
from lachesis.evaluation.row import columns
from lachesis.plotting import compare_table, format_range, slo_outcomes, span

# ------------------------------------------------------------------------------------------------
# Lifetime ratios per cell and seed; seed intervals; write composition
# ------------------------------------------------------------------------------------------------

#: The columns of a grid's rows (:class:`lachesis.evaluation.row.GridRow`) the figures keep (``fig09_grid.csv``,
#: ``fig11_grid.csv``): the cell, the load, the SLO check, the lifetime and its rate, the tier bytes, and the operating
#: point per GPU in units that carry over (§5.3: "HBM's capacity against the short-lived KV live at one time"): the KV
#: one decode step reads, the live KV of each class and of the short-lived ones, and HBM ÷ that.
GRID_COLUMNS = columns("workload", "model", "slo", "memory", "policy", "seed", "group_ranks", "load", "load_base",
                       "load_sizing", "load_binding", "own_n_star",
                       "daisy_chain_load", "n_sessions", "load_seed", "slo_met", "slo_p99_tpot_s", "slo_tpot_bound_s",
                       "slo_p99_ttft_s", "slo_ttft_bound_s", "p99_tpot_s", "p99_ttft_s", "hbf_write_rate",
                       "hbf_rank_spread", "settled", "in_regime", "lifetime_years", "bytes_hbm", "bytes_hbf",
                       "kv_read_per_step_bytes", "live_short_kv_bytes", "hbm_over_live_short")


def grid_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The grid's rows as the figures keep them: :data:`GRID_COLUMNS` (those present) and the live KV per class."""
    live = sorted(c for c in df.columns if c.startswith("live_kv_") and c.endswith("_bytes"))
    return df[[c for c in GRID_COLUMNS if c in df.columns] + live]


#: Lifetime ratios reported per cell: the paper's three (§5.3–§5.5) and the baselines beyond it.
RATIOS: dict[str, tuple[str, str]] = {
    "lachesis/hbm_first": ("lachesis", "hbm_first"),
    "deterministic/hbm_first": ("deterministic", "hbm_first"),
    "lachesis/deterministic": ("lachesis", "deterministic"),
    "hbm_first_reclaim/hbm_first": ("hbm_first_reclaim", "hbm_first"),
    "lachesis/hbm_first_reclaim": ("lachesis", "hbm_first_reclaim"),
    "rho_threshold/hbm_first": ("rho_threshold", "hbm_first"),
    "lachesis/rho_threshold": ("lachesis", "rho_threshold"),
    "oracle/hbm_first": ("oracle", "hbm_first"),
    "bound/hbm_first": ("bound", "hbm_first"),
}
#: Lachesis's share of the oracle's gain over HBM-first: (Lachesis − HBM-first) / (oracle − HBM-first)
ORACLE_SHARE = "lachesis_share_of_oracle_gain"
#: the offline bound (:func:`lachesis.evaluation.sweep.bound_fields`) as a pseudo-policy of the tables, read off the
#: load policy's rows
BOUND = "bound"
#: the share of the bound's gain over HBM-first a policy reaches: (policy − HBM-first) / (bound − HBM-first)
BOUND_SHARES = {"lachesis": "lachesis_share_of_bound_gain", "oracle": "oracle_share_of_bound_gain"}


def with_ratios(lifetimes: pd.DataFrame, ratios: Mapping[str, tuple[str, str]] = RATIOS,
                shares: bool = True) -> pd.DataFrame:
    """``lifetimes`` (one column of device-years per policy) with every ratio of ``ratios`` its policies
    allow and, with ``shares``, :data:`ORACLE_SHARE` and :data:`BOUND_SHARES` where their policies are there:
    the one place a lifetime ratio is computed (the grid's tables, the load curve, the sensitivity study)."""
    out = lifetimes.copy()
    for name, (num, den) in ratios.items():
        if {num, den} <= set(lifetimes):
            out[name] = lifetimes[num] / lifetimes[den]
    if shares and {"lachesis", "oracle", LOAD_POLICY} <= set(lifetimes):
        out[ORACLE_SHARE] = ((lifetimes["lachesis"] - lifetimes[LOAD_POLICY])
                             / (lifetimes["oracle"] - lifetimes[LOAD_POLICY]))
    for pol, name in BOUND_SHARES.items() if shares else ():
        if {pol, BOUND, LOAD_POLICY} <= set(lifetimes):
            out[name] = (lifetimes[pol] - lifetimes[LOAD_POLICY]) / (lifetimes[BOUND] - lifetimes[LOAD_POLICY])
    return out


def _with_bound(df: pd.DataFrame, value: str, bound_col: str) -> pd.DataFrame:
    """``df`` plus one :data:`BOUND` row per load-policy row that carries ``bound_col``,
    its ``value`` column set from it."""
    if bound_col not in df:
        return df
    b = df[df["policy"].eq(LOAD_POLICY) & df[bound_col].notna()]
    return pd.concat([df, b.assign(policy=BOUND, **{value: b[bound_col]})], ignore_index=True)


def ratio_table(df: pd.DataFrame) -> pd.DataFrame:
    """Lifetime per policy (the offline bound as :data:`BOUND`) and the :data:`RATIOS` its policies allow,
    one row per cell and seed; :data:`ORACLE_SHARE` when Lachesis, the oracle and HBM-first all ran, and
    :data:`BOUND_SHARES` when the bound was solved."""
    idx = CELL + ["seed"]
    p = _with_bound(df, "lifetime_years", "bound_lifetime_years").pivot_table(
        index=idx, columns="policy", values="lifetime_years", aggfunc="first")
    out = with_ratios(p)
    out.columns.name = None
    return out.reset_index()


def seed_table(table: pd.DataFrame, cols: Sequence[str] | None = None, by: Sequence[str] = tuple(CELL)) -> pd.DataFrame:
    """Per ``by`` group, each of ``cols`` (default: every numeric column) as its median over seeds with
    its min and max (``<col>``, ``<col>_min``, ``<col>_max``) and the number of seeds (``seeds``).

    A ratio is taken per seed first (the policies of one seed ran on the same draws), then summarized."""
    by = list(by)
    cols = list(cols) if cols is not None else [c for c in table.columns if c not in by + ["seed"]
                                                and pd.api.types.is_numeric_dtype(table[c])]
    g = table.groupby(by, sort=False)
    parts = []
    for c in cols:
        parts += [g[c].median().rename(c), g[c].min().rename(f"{c}_min"), g[c].max().rename(f"{c}_max")]
    return pd.concat(parts + [g["seed"].nunique().rename("seeds")], axis=1).reset_index()


def interval_text(summary: pd.DataFrame, cols: Sequence[str], by: Sequence[str] = tuple(CELL),
                  fmt: str = ".3g") -> pd.DataFrame:
    """:func:`seed_table` columns as "median [min–max]" strings (one value when the seeds agree)."""
    def cell(m: float, lo: float, hi: float) -> str:
        if not np.isfinite(m):
            return ""
        if format(lo, fmt) == format(hi, fmt):
            return format(m, fmt)
        return f"{m:{fmt}} [{lo:{fmt}}–{hi:{fmt}}]"

    out = summary[list(by)].copy()
    for c in cols:
        if c in summary:
            out[c] = [cell(m, lo, hi) for m, lo, hi in zip(summary[c], summary[f"{c}_min"], summary[f"{c}_max"])]
    return out


def write_composition(df: pd.DataFrame) -> pd.DataFrame:
    """Write bytes by (class, tier) as % of each run's total (Figs. 10 and 12), per run (seed included)."""
    cols = [c for c in df.columns if c.startswith("bytes_") and c.count("_") >= 2
            and c not in ("bytes_hbm", "bytes_hbf")]
    rows = []
    for _, r in df.iterrows():
        tot = float(np.nansum([r[c] for c in cols]))
        for c in cols:
            cls, tier = c[len("bytes_"):].rsplit("_", 1)
            v = r[c]
            if pd.isna(v):
                continue
            rows.append(dict(workload=r["workload"], model=r["model"], slo=r["slo"], memory=r["memory"],
                             policy=r["policy"], seed=r["seed"], seg_class=cls, tier=tier, bytes=v,
                             pct=100.0 * v / tot if tot > 0 else np.nan))
    return pd.DataFrame(rows)


def hbm_share(df: pd.DataFrame) -> pd.DataFrame:
    """Share of each run's KV write bytes that HBM takes (Fig. 10/12 text), and the offline bound's share
    on the load policy's run (policy :data:`BOUND`) where it was solved."""
    d = df.assign(hbm_share=df["bytes_hbm"] / (df["bytes_hbm"] + df["bytes_hbf"]))
    return _with_bound(d, "hbm_share", "bound_hbm_share")[CELL + ["policy", "seed", "hbm_share"]]


def class_to_flash(df: pd.DataFrame, seg_class: str) -> pd.DataFrame:
    """Fraction of one class's write bytes that reaches HBF, per run."""
    h, f = f"bytes_{seg_class}_hbm", f"bytes_{seg_class}_hbf"
    if h not in df or f not in df:
        return pd.DataFrame(columns=CELL + ["policy", "seed", "to_flash"])
    d = df.assign(to_flash=df[f] / (df[h] + df[f]))
    return d[CELL + ["policy", "seed", "to_flash"]]


def capacity_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per-policy N* (sessions per GPU the SLO admits), one row per cell: the ``load="own"`` grid's table."""
    return df.pivot_table(index=["workload", "model", "slo", "memory"], columns="policy", values="n_star",
                          aggfunc="first").reset_index()


# ------------------------------------------------------------------------------------------------
# Beside the paper: the comparison tables of the Fig. 9–12 notebooks
# ------------------------------------------------------------------------------------------------


def _range(x: pd.Series | None) -> tuple[float, float] | float:
    """(lo, hi) of a series, one float when they agree, NaN when the grid has no such cell."""
    x = pd.Series(x if x is not None else [], dtype=float).dropna()
    if not len(x):
        return float("nan")
    lo, hi = round(float(x.min()), 3), round(float(x.max()), 3)
    return lo if lo == hi else (lo, hi)


NOT_IN_PAPER = "— (not in the paper)"
#: What the paper gives for a statistic: a number, a (lo, hi) range, or text.
PaperValue = float | tuple[float, float] | str


@dataclass(frozen=True)
class Statistic:
    """A statistic the notebooks set beside the paper: ``key``, what code and text look it up by (stable);
    ``label``, what the comparison tables print; ``paper``, the paper's value (a number, a (lo, hi) range,
    or text)."""

    key: str
    label: str
    paper: PaperValue = NOT_IN_PAPER


class Stat(NamedTuple):
    """One :class:`Statistic` with its values per cell and seed (a Series whose last index level is ``seed``;
    None when the grid did not run it)."""

    statistic: Statistic
    values: pd.Series | None


#: The cells the baselines beyond the paper are read over, per wing of the grid (the key's first part).
FRAMES = {"multi": "tight, 1/7–4/4", "single": "1/7–4/4"}
#: The baselines beyond the paper (:func:`_baseline_stats`): key tail -> label head (the frame follows it).
BEYOND = {
    "hbm_first_reclaim/hbm_first": "HBM-first with reclaim / HBM-first",
    "lachesis/hbm_first_reclaim": "Lachesis / HBM-first with reclaim",
    "rho_threshold/hbm_first": "ρR/W selection / HBM-first",
    "lachesis/rho_threshold": "Lachesis / ρR/W selection",
    "oracle/hbm_first": "oracle / HBM-first",
    ORACLE_SHARE: "Lachesis share of the oracle's gain",
    "bound/hbm_first": "offline bound / HBM-first",
    BOUND_SHARES["lachesis"]: "Lachesis share of the bound's gain",
    BOUND_SHARES["oracle"]: "oracle share of the bound's gain",
}
#: The policies whose HBM share of write bytes :func:`_baseline_stats` reports, as the labels name them.
SHARE_NAMES = {BOUND: "offline bound", "oracle": "oracle", "lachesis": "Lachesis", LOAD_POLICY: "HBM-first"}

#: Every statistic of the Figs. 9–12 comparison tables, by key.
STATISTICS: dict[str, Statistic] = {s.key: s for s in (
    Statistic("multi.gain.tight", "gain Lachesis/HBM-first, tight, 1/7–4/4", paper.MULTI_GAIN_TIGHT),
    Statistic("multi.gain.loose", "gain Lachesis/HBM-first, loose, 1/7–4/4", paper.MULTI_GAIN_LOOSE),
    Statistic("multi.daisy_gain.tight", "gain on 8/8*, tight", paper.DAISY_GAIN_TIGHT),
    Statistic("multi.daisy_gain.loose", "gain on 8/8*, loose", paper.DAISY_GAIN_LOOSE),
    Statistic("multi.lachesis_years.tight", "Lachesis device-years, tight, 1/7–4/4", paper.MULTI_LACHESIS_YEARS_1_TO_4),
    Statistic("multi.hbm_first_years.tight", "HBM-first device-years, tight, 1/7–4/4",
              paper.MULTI_HBM_FIRST_YEARS_1_TO_4),
    Statistic("multi.deterministic_gain", "w/o predictive path / HBM-first", paper.DETERMINISTIC_GAIN),
    Statistic("multi.predictive_gain.reviewer", "Lachesis / w/o predictive path, with reviewer",
              paper.PREDICTIVE_GAIN_WITH_REVIEWER),
    Statistic("multi.predictive_gain.no_reviewer", "Lachesis / w/o predictive path, no reviewer",
              paper.PREDICTIVE_GAIN_WITHOUT_REVIEWER),
    Statistic("multi.hbm_share.lachesis", "HBM share of write bytes, Lachesis", paper.HBM_WRITE_SHARE_LACHESIS),
    Statistic("multi.hbm_share.hbm_first", "HBM share of write bytes, HBM-first", paper.HBM_WRITE_SHARE_HBM_FIRST),
    Statistic("multi.reviewer_to_flash.deterministic", "reviewer bytes reaching flash, w/o predictive path",
              paper.REVIEWER_TO_FLASH_WO_PREDICTIVE),
    Statistic("multi.reviewer_to_flash.lachesis", "reviewer bytes reaching flash, Lachesis",
              paper.REVIEWER_TO_FLASH_LACHESIS),
    Statistic("single.gain", "gain Lachesis/HBM-first, 1/7–4/4", paper.SINGLE_GAIN),
    Statistic("single.lachesis_years", "Lachesis device-years, 1/7–4/4", paper.SINGLE_LACHESIS_YEARS_1_TO_4),
    Statistic("single.hbm_first_years", "HBM-first device-years, 1/7–4/4", paper.SINGLE_HBM_FIRST_YEARS_1_TO_4),
    Statistic("single.gain_overall", "gain overall (any trace, 1/7–4/4)", paper.GAIN_OVERALL),
    Statistic("single.bfcl_loss", "BFCLv4 Lachesis loss 4/4 vs 1/7", paper.BFCL_4_4_VS_1_7_LOSS),
    *(Statistic(f"{wing}.beyond.{tail}", f"{head}, {frame}") for wing, frame in FRAMES.items()
      for tail, head in BEYOND.items()),
    *(Statistic(f"{wing}.beyond.hbm_share.{pol}", f"HBM share of write bytes, {name}, {frame}")
      for wing, frame in FRAMES.items() for pol, name in SHARE_NAMES.items()),
)}


def statistic(key: str) -> Statistic:
    """The statistic of ``key``; a KeyError naming it and the known keys when there is none."""
    try:
        return STATISTICS[key]
    except KeyError:
        raise KeyError(f"no statistic {key!r}; known: {', '.join(STATISTICS)}") from None


def _stat(key: str, values: pd.Series | None) -> Stat:
    return Stat(statistic(key), values)


def judge_interval(interval: tuple[float, float] | float, paper: object) -> str:
    """Whether a seed interval lies "inside" the paper's range, "overlaps" it, or is "disjoint" from it
    ("" when either is not a number).  A point value of the paper is a range of one value."""
    lo, hi = interval if isinstance(interval, tuple) else (interval, interval)
    if isinstance(paper, tuple) and len(paper) == 2:
        a, b = float(paper[0]), float(paper[1])
    elif isinstance(paper, (int, float, np.integer, np.floating)) and not isinstance(paper, bool):
        a = b = float(paper)
    else:
        return ""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    if a <= lo and hi <= b:
        return "inside"
    return "disjoint" if hi < a or lo > b else "overlaps"


def compare_intervals(stats: Sequence[Stat], note: str = "") -> pd.DataFrame:
    """The comparison table of a notebook: per statistic, ``ours`` = the range over cells of each cell's
    median over seeds, ``interval`` = the range over cells and seeds (every seed's value), the paper's
    value, whether our medians' range lies in the paper's (``in_paper_range``: yes/partly/no, as
    :func:`lachesis.plotting.compare_table`) and whether the interval does (``interval_vs_paper``:
    inside/overlaps/disjoint), and how many seeds and cells it rests on; indexed by the statistics' keys (the
    CSV a notebook writes carries the labels alone)."""
    rows, extra, keys = [], [], []
    for stat, values in stats:
        v = pd.Series(values, dtype=float).dropna() if values is not None else pd.Series(dtype=float)
        if not len(v):
            continue
        theirs = stat.paper
        levels = [n for n in v.index.names if n != "seed"]
        med = v.groupby(level=levels).median() if levels else pd.Series([v.median()])
        interval = _range(v)
        rows.append((stat.label, _range(med), theirs))
        keys.append(stat.key)
        seeds = v.index.get_level_values("seed").nunique() if "seed" in v.index.names else 1
        extra.append(dict(interval=interval, interval_vs_paper=judge_interval(interval, theirs), seeds=seeds,
                          cells=len(med)))
    table = compare_table(rows, note=note)
    if not len(table):
        return table
    table.insert(2, "interval", [format_range(e["interval"]) for e in extra])
    table.insert(5, "interval_vs_paper", [e["interval_vs_paper"] for e in extra])
    table.insert(6, "seeds", [e["seeds"] for e in extra])
    table.insert(7, "cells", [e["cells"] for e in extra])
    table.index = pd.Index(keys, name="key")
    return table


def _select(table: pd.DataFrame, col: str, **where: Any) -> pd.Series | None:
    """``col`` of a per-(cell, seed) table where each keyword's column equals (or, for a list, is in) its
    value, indexed by cell and seed; None when the column is absent."""
    if col not in table:
        return None
    m = pd.Series(True, index=table.index)
    for k, v in where.items():
        m &= table[k].isin(v) if isinstance(v, (list, tuple)) else table[k].eq(v)
    return table.loc[m].set_index(CELL + ["seed"])[col]


#: The co-located configurations (the paper's "one to four of the eight slots"); 8/8* is H3's daisy chain.
SPLIT = ["1/7", "2/6", "3/5", "4/4"]


def _baseline_stats(r: pd.DataFrame, hs: pd.DataFrame, wing: str, **where: Any) -> list[Stat]:
    """The rows for the baselines and the offline bound beyond the paper (``r``: :func:`ratio_table`, ``hs``:
    :func:`hbm_share`), over the cells ``where`` selects (``wing``: :data:`FRAMES`' key naming them)."""
    shares = [_stat(f"{wing}.beyond.hbm_share.{pol}", _select(hs, "hbm_share", policy=pol, **where))
              for pol in SHARE_NAMES if pol in set(hs["policy"])]
    return [_stat(f"{wing}.beyond.{tail}", _select(r, tail, **where)) for tail in BEYOND] + shares


def multi_agent_stats(df: pd.DataFrame) -> list[Stat]:
    """The §5.3–§5.4 statistics per cell and seed, over whatever part of the grid was run."""

    r = ratio_table(df)
    ma = dict(workload="multi_agent", memory=SPLIT)
    hs, rv = hbm_share(df), class_to_flash(df, "reviewer")
    out = [
        _stat("multi.gain.tight", _select(r, "lachesis/hbm_first", slo="tight", **ma)),
        _stat("multi.gain.loose", _select(r, "lachesis/hbm_first", slo="loose", **ma)),
        _stat("multi.daisy_gain.tight",
              _select(r, "lachesis/hbm_first", workload="multi_agent", memory="8/8*", slo="tight")),
        _stat("multi.daisy_gain.loose",
              _select(r, "lachesis/hbm_first", workload="multi_agent", memory="8/8*", slo="loose")),
        _stat("multi.lachesis_years.tight", _select(r, "lachesis", slo="tight", **ma)),
        _stat("multi.hbm_first_years.tight", _select(r, "hbm_first", slo="tight", **ma)),
        _stat("multi.deterministic_gain", _select(r, "deterministic/hbm_first", **ma)),
        _stat("multi.predictive_gain.reviewer", _select(r, "lachesis/deterministic", **ma)),
        _stat("multi.predictive_gain.no_reviewer",
              _select(r, "lachesis/deterministic", workload="multi_agent_no_reviewer", memory=SPLIT)),
        _stat("multi.hbm_share.lachesis", _select(hs, "hbm_share", policy="lachesis", **ma)),
        _stat("multi.hbm_share.hbm_first", _select(hs, "hbm_share", policy="hbm_first", **ma)),
        _stat("multi.reviewer_to_flash.deterministic",
              _select(rv, "to_flash", policy="deterministic", workload="multi_agent")),
        _stat("multi.reviewer_to_flash.lachesis", _select(rv, "to_flash", policy="lachesis", workload="multi_agent")),
    ]
    return out + _baseline_stats(r, hs, "multi", slo="tight", **ma)


def single_agent_stats(df: pd.DataFrame) -> list[Stat]:
    """The §5.5 statistics per cell and seed, over whatever part of the grid was run."""

    r = ratio_table(df)
    split = dict(memory=SPLIT)
    out = [
        _stat("single.gain", _select(r, "lachesis/hbm_first", **split)),
        _stat("single.lachesis_years", _select(r, "lachesis", **split)),
        _stat("single.hbm_first_years", _select(r, "hbm_first", **split)),
        _stat("single.gain_overall", _select(r, "lachesis/hbm_first", **split)),
    ]
    if "lachesis" in r:
        b = r[r["workload"].eq("bfcl")].set_index(["model", "memory", "seed"])["lachesis"].unstack("memory")
        if {"1/7", "4/4"} <= set(b.columns):
            out.append(_stat("single.bfcl_loss", 1 - b["4/4"] / b["1/7"]))
    return out + _baseline_stats(r, hbm_share(df), "single", **split)


# ------------------------------------------------------------------------------------------------
# What the Figs. 9–12 notebooks print: the run's summary line, the figures' tables, the narrative
# ------------------------------------------------------------------------------------------------

#: The single-agent workloads as the text names them.
SINGLE_NAMES = {"tau3": "τ³-bench", "bfcl": "BFCLv4"}


def ratio_columns(r: pd.DataFrame) -> list[str]:
    """The ratio and share columns of :func:`ratio_table` ``r`` holds, in the tables' order."""
    return [c for c in [*RATIOS, ORACLE_SHARE, *BOUND_SHARES.values()] if c in r]


def replicas(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The runs of seeds beyond the one that sized their cell's load, and each one's p99 TPOT over its SLO's
    bound."""
    rep = df[df["seed"].ne(df["load_seed"])]
    return rep, rep["slo_p99_tpot_s"] / rep["slo"].map(lambda s: SLOS[s].p99_tpot_s).astype(float)


def run_line(df: pd.DataFrame, n_seeds: int) -> str:
    """One line on the grid's runs: how many, how many settled, and how many miss the SLO at their load, the
    placements the deployment is sized on apart from the others (a miss among them breaks the load rule)."""
    miss = ~df["slo_met"].astype(bool)
    sized = df["policy"].isin(compared_policies(str(df["workload"].iloc[0]))) if len(df) else miss
    return (f"{len(df)} runs over {n_seeds} seed(s); HBF write traffic settled in {df['settled'].mean():.0%} of them; "
            f"{int((miss & sized).sum())} of {int(sized.sum())} runs of the compared placements and "
            f"{int((miss & ~sized).sum())} of {int((~sized).sum())} runs of the others miss the SLO at their load "
            f"(drawn as misses)")


def missed_slo(df: pd.DataFrame) -> pd.DataFrame:
    """Per cell and policy, whether every seed's run met the SLO at its load (``all_met``), how many seeds
    missed (``seeds_missed`` of ``seeds``), with the worst p99 TPOT and TTFT (judged on a search-length window,
    as N* was) beside the bounds.  A figure draws a policy whose ``all_met`` is False as a miss, never as a
    lifetime at the SLO; none is left out."""
    g = df.groupby(CELL + ["policy"])
    outcome = slo_outcomes(df, CELL + ["policy"])  # the figures' own rule
    out = pd.DataFrame({"all_met": {k: o.misses == 0 for k, o in outcome.items()},
                        "seeds_missed": {k: o.misses for k, o in outcome.items()},
                        "seeds": {k: o.seeds for k, o in outcome.items()}})
    out.index = pd.MultiIndex.from_tuples(out.index, names=CELL + ["policy"])
    out = out.sort_index()
    for col in ("slo_p99_tpot_s", "slo_p99_ttft_s"):
        if col in df:
            out[col] = g[col].max()
    if "own_n_star" in df:
        out["own_n_star"] = g["own_n_star"].min()
    bounds = out.index.get_level_values("slo").map(SLOS)
    out["slo_tpot_bound_s"] = [b.p99_tpot_s for b in bounds]
    out["slo_ttft_bound_s"] = [b.ttft_s for b in bounds]
    return out.reset_index()


def slo_misses(df: pd.DataFrame) -> pd.DataFrame:
    """The cells and policies that miss the SLO at their load at any seed: how many seeds, their p99 TPOT and
    TTFT beside the bounds, their own N*, the load and its rule.  ``len`` of it is the count a README sentence
    states."""
    m = missed_slo(df)
    m = m[~m["all_met"].astype(bool)].drop(columns="all_met")
    loads = df.groupby(CELL + ["policy"])[
        [c for c in ("n_sessions", "load", "load_sizing", "load_binding", "group_ranks") if c in df]].first()
    return m.merge(loads.reset_index(), on=CELL + ["policy"], how="left").reset_index(drop=True)


def _of_deployment(frame: pd.DataFrame, key: tuple) -> pd.Series:
    """The rows of one (workload, model, SLO)."""
    return frame["workload"].eq(key[0]) & frame["model"].eq(key[1]) & frame["slo"].eq(key[2])


def load_rule_table(frames: Mapping[str, pd.DataFrame], policy: str = "lachesis") -> pd.DataFrame:
    """The load rules side by side (docs/design.md §5, "Load"), one row per rule and (workload, model, SLO):
    sessions per GPU over the configurations, ``policy``/HBM-first per configuration (medians over seeds), how
    HBM-first's and ``policy``'s lifetimes move from the first to the last split configuration (%), and how
    many (configuration, policy) pairs miss the SLO at their load.  ``frames``: rule name -> grid rows, each
    taken on the same points (:func:`lachesis.evaluation.grid.rule_comparison_points`: the first seed, HBM-first and
    ``policy``)."""
    rows = []
    for rule, df in frames.items():
        df = df[df["seed"].eq(df["seed"].min()) & df["policy"].isin((LOAD_POLICY, policy))]
        r = seed_table(ratio_table(df))
        misses = slo_misses(df)
        for key, d in r.groupby(["workload", "model", "slo"], sort=False):
            d = d.set_index("memory")
            order = [c for c in (*SPLIT, "8/8*") if c in d.index]
            split = [c for c in order if c in SPLIT]
            runs = df[_of_deployment(df, key)]
            ratio = f"{policy}/{LOAD_POLICY}"
            row = dict(rule=rule, workload=key[0], model=key[1], slo=key[2],
                       sessions_per_gpu=f"{runs['n_sessions'].min():g}–{runs['n_sessions'].max():g}",
                       **{f"{ratio} {c}": float(d.loc[c, ratio]) if ratio in d else float("nan") for c in order})
            for p in (LOAD_POLICY, policy):
                if len(split) > 1 and p in d:
                    a, b = float(d.loc[split[0], p]), float(d.loc[split[-1], p])
                    row[f"{p} {split[0]}→{split[-1]} %"] = 100 * (b / a - 1) if a > 0 else float("nan")
            row["SLO misses"] = int(_of_deployment(misses, key).sum()) if len(misses) else 0
            rows.append(row)
    return pd.DataFrame(rows)


def composition_means(comp: pd.DataFrame) -> pd.DataFrame:
    """:func:`write_composition` rows as the mean over seeds of each (cell, policy, class, tier) share."""
    return comp.groupby(["workload", "memory", "policy", "seg_class", "tier"], as_index=False)["pct"].mean()


def bound_share_pct(df: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """The offline bound's HBM share of write bytes (%) per workload and memory, over the rows ``where``
    selects (column -> value): mean, min and max over the seeds that carry it."""
    hs = hbm_share(df)
    m = hs["policy"].eq(BOUND)
    for k, v in where.items():
        m &= hs[k].eq(v)
    g = hs[m].groupby(["workload", "memory"])["hbm_share"]
    return 100 * pd.concat([g.mean().rename("mean"), g.min().rename("min"), g.max().rename("max")], axis=1)


def check_numbers(df: pd.DataFrame, cmp: pd.DataFrame, keys: Sequence[str]) -> dict[str, Any]:
    """The numbers a notebook's checked cell prints: runs, cells, the span of N*, and the statistic of each of
    ``keys`` from the comparison table ``cmp`` under its label, as "ours [interval]" ("absent" when the grid did
    not run it; a KeyError for a key no statistic has)."""

    def ours(key: str) -> str:
        return f"{cmp.loc[key, 'ours']} [{cmp.loc[key, 'interval']}]" if key in cmp.index else "absent"

    return {"runs": len(df), "cells": int(df.groupby(CELL).ngroups), "N*": span(df["n_star"]),
            **{statistic(k).label: ours(k) for k in keys}}


def say(cmp: pd.DataFrame, key: str, what: str | None = None) -> str:
    """The statistic of ``key`` in the comparison table ``cmp`` as a clause: ours, the seed interval, and the
    paper's value with both judgements ("" when the grid did not run it; a KeyError for a key no statistic
    has)."""
    label = statistic(key).label
    if key not in cmp.index:
        return ""
    t = cmp.loc[key]
    if t["paper"] == NOT_IN_PAPER:
        return f"{what or label}: {t['ours']} (seeds {t['interval']})"
    return (f"{what or label}: {t['ours']} (seeds {t['interval']}; paper {t['paper']}: medians {t['in_paper_range']}, "
            f"interval {t['interval_vs_paper']})")


def _measured(df: pd.DataFrame, n_seeds: int, n_cells: int) -> str:
    n_load = df[df.policy.eq(LOAD_POLICY)].groupby(CELL)["n_sessions"].first()
    return (f"**What we measured** ({n_seeds} seed(s), {n_cells} cells, each at one load: "
            f"{int(n_load.min())}–{int(n_load.max())} sessions per GPU). ")


def _seeds_and_oracle(df: pd.DataFrame, oracle_tail: str = "") -> list[str]:
    """The closing sentences both notebooks share: the load and its seeds, the oracle's clairvoyance."""
    lines = []
    if "load_binding" in df and df["load_sizing"].isin(("compared", "load_policy")).any():
        held = df[df["load_sizing"].isin(("compared", "load_policy"))]
        bind = held.groupby(["workload", "model", "slo"])[["n_sessions", "load_binding"]].first()
        lines.append("**The load** is each deployment's, sized over every configuration and seed it runs "
                     "(docs/design.md §5, \"Load\"): " + "; ".join(
                         f"{w} {m} {s} {int(r.n_sessions)} sessions per GPU (bound by {r.load_binding})"
                         for (w, m, s), r in bind.iterrows()) + ". Each seed draws its own corpus, clock and "
                     "simulator streams at that load.")
    od = df[df.policy.map(is_clairvoyant)]
    if len(od) and "close_drift_median_abs_s" in od:
        lines.append(f"**The oracle's clairvoyance** (the HBM-first run's close times): its own run closes "
                     f"{od['close_drift_matched'].median():.1%} of its segments in instances the baseline also ran, a "
                     f"median {od['close_drift_median_abs_s'].median():.2f} s (p90 "
                     f"{od['close_drift_p90_abs_s'].median():.2f} s, {od['close_drift_median_rel'].median():.2%} of "
                     f"the offset) from the recorded time (medians over {len(od)} runs){oracle_tail}.")
    return lines


def _beyond(cmp: pd.DataFrame, wing: str) -> list[str]:
    """The clauses on the baselines and the bound beyond the paper, over the cells of ``wing`` (:data:`FRAMES`)."""
    tails = [t for t in BEYOND if t != BOUND_SHARES["oracle"]] + [f"hbm_share.{BOUND}"]
    return [s for s in (say(cmp, f"{wing}.beyond.{t}") for t in tails) if s]


def multi_agent_findings(df: pd.DataFrame, cmp: pd.DataFrame, summary: pd.DataFrame, models: Sequence[str],
                         n_seeds: int) -> list[str]:
    """The paragraphs of "What we measured" for Figs. 9–10: ours beside the paper's (§5.3–§5.4), each model's
    trend from 1/7 to 4/4, the baselines beyond the paper, the seeds and the oracle."""
    tight = summary[summary.slo.eq("tight") & summary.workload.eq("multi_agent")].set_index(["model", "memory"])
    lines = [_measured(df, n_seeds, len(summary)) + "; ".join(s for s in (
        say(cmp, "multi.gain.tight", "Lachesis over HBM-first, tight, 1/7–4/4"),
        say(cmp, "multi.gain.loose", "loose"),
        say(cmp, "multi.daisy_gain.tight", "on H3's daisy chain, tight"),
        say(cmp, "multi.deterministic_gain"),
        say(cmp, "multi.predictive_gain.reviewer"),
        say(cmp, "multi.hbm_share.lachesis")) if s) + "."]
    for m in models:
        trend = []
        for pol, name in (("hbm_first", "HBM-first"), ("lachesis", "Lachesis")):
            if (m, "1/7") in tight.index and (m, "4/4") in tight.index and pol in tight:
                a, b = tight.loc[(m, "1/7"), pol], tight.loc[(m, "4/4"), pol]
                trend.append(f"{name}'s {'falls' if b < a else 'rises'} ({a:.2f} → {b:.2f})")
        if trend:
            lines.append(f"{m}, tight SLO, median device-years from 1/7 to 4/4: " + ", ".join(trend)
                         + " (§5.3: it falls under HBM-first and rises under Lachesis).")
    base = _beyond(cmp, "multi")
    if base:
        lines.append("**Beyond the paper** (the trace with the reviewer): " + "; ".join(base) + ". A share above 1 "
                     "means Lachesis outlasts the oracle: the oracle ranks by close time alone and reserves HBM for a "
                     "segment's whole remaining size, a clairvoyant heuristic rather than a proven optimum; the "
                     "offline bound is the proven optimum of write-time placement on HBM-first's run "
                     "(`lachesis.evaluation.bound`).")
    return lines + _seeds_and_oracle(df, ": placement moves timing little at one load, as the named assumption says")


def single_agent_findings(df: pd.DataFrame, cmp: pd.DataFrame, summary: pd.DataFrame, workloads: Sequence[str],
                          models: Sequence[str], n_seeds: int) -> list[str]:
    """The paragraphs of "What we measured" for Figs. 11–12: ours beside the paper's (§5.5), Lachesis's trend
    from 1/7 to 4/4 per workload and model, the baselines beyond the paper, the seeds and the oracle."""
    share = hbm_share(df)
    sh_l = share[share.policy.eq("lachesis")].groupby(CELL)["hbm_share"].median()
    lines = [_measured(df, n_seeds, len(summary)) + "; ".join(s for s in (
        say(cmp, "single.gain", "Lachesis over HBM-first, 1/7–4/4"),
        say(cmp, "single.lachesis_years"),
        say(cmp, "single.hbm_first_years"),
        say(cmp, "single.bfcl_loss")) if s)
        + (f"; HBM takes {100 * sh_l.min():.0f}–{100 * sh_l.max():.0f}% of write bytes under Lachesis (cell medians)."
           if len(sh_l) else ".")]
    for w in workloads:
        t = summary[summary.workload.eq(w)].set_index(["model", "memory"])
        for m in models:
            if "lachesis" in t and (m, "1/7") in t.index and (m, "4/4") in t.index:
                a, b = t.loc[(m, "1/7"), "lachesis"], t.loc[(m, "4/4"), "lachesis"]
                way = "falls" if b < a else "rises"
                lines.append(f"{SINGLE_NAMES.get(w, w)}, {m}: Lachesis's median lifetime {way} "
                             f"from 1/7 to 4/4 ({a:.2f} → {b:.2f} device-years; §5.5: it peaks at one to three slots "
                             "and falls past the peak).")
    base = _beyond(cmp, "single")
    if base:
        lines.append("**Beyond the paper**: " + "; ".join(base) + ".")
    return lines + _seeds_and_oracle(df)


#: Why our Figs. 9–10 still differ from the paper's (§5.3).
MULTI_DIFFERENCE = (
    "**Where we still differ, and why.** What sets the gain is HBM's capacity against the short-lived KV live at one "
    "time (§5.3). Our decode-step model admits the loads above, and the paper never states its "
    "own; the more sessions a GPU serves, the more short-lived KV is live at one time and the smaller the gain "
    "(`gain_vs_load.ipynb` measures it against sessions per GPU). The corpus is "
    "synthetic, parameterized by the paper's published statistics, not the authors' traces, and the predictive path "
    "ranks with out-of-fold keys and the allocator's named reviewer-reservation rule. ")
#: Why our Figs. 11–12 still differ from the paper's (§5.5).
SINGLE_DIFFERENCE = (
    "**Where we still differ, and why.** The gain is set by how much of the reasoning-laden KV live at one time HBM "
    "can hold (§5.5). Our load comes from our decode-step model and our synthetic single-agent sessions; at the loads "
    "above the live reasoning-laden KV can exceed one to four HBM stacks, so HBM absorbs a smaller share of it (the "
    "HBM share above) and the gain shrinks toward 1×. The paper's engine (Frontier + LLMSimulator) sets the load "
    "differently and does not state it. ")


def differences(why: str, search: str) -> str:
    """``why`` (:data:`MULTI_DIFFERENCE`, :data:`SINGLE_DIFFERENCE`), saying so when the run is a reduced grid."""
    return why + ("This run is a reduced CI grid at a tiny corpus scale with short windows." if search != "paper"
                  else "")


def gain_vs_load_text(path: str | os.PathLike, name: str) -> str:
    """The sentences ``gain_vs_load.ipynb`` wrote on Lachesis's gain over HBM-first (its CSV at ``path``,
    ``name`` as the parameter gave it)."""
    g = pd.read_csv(path)
    g = g[g["ratio"].eq("lachesis/hbm_first")]
    return (f"From `{name}`, written by `gain_vs_load.ipynb` (`make reproduce` runs it before this "
            "notebook): " + " ".join(g["sentence"]))
