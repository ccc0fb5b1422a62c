"""What a view shows in words and tables: one row per policy as the median (min–max) over seeds, the write
composition, the load curve and the study, the headline sentence, and the tables in the figures' words."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lachesis.config import Endurance
from lachesis.evaluation import sensitivity, tables
from lachesis.evaluation.explorer.selection import View, label
from lachesis.evaluation.gains import load_gains
from lachesis.evaluation.grid import CELL, LOAD_POLICY
from lachesis.plotting import CLASS_STYLE


def _per_seed(v: View) -> pd.DataFrame:
    """The grid rows with, per seed, each policy's lifetime over HBM-first's, over w/o predictive path's,
    and the selected policy's over it, and its HBM share of the write bytes."""
    g = v.grid.copy()
    years = g.pivot_table(index="seed", columns="policy", values="lifetime_years", aggfunc="first")
    for den in ("hbm_first", "deterministic"):
        if den in years:
            g[f"over_{den}"] = g["lifetime_years"] / g["seed"].map(years[den])
    if v.selection.policy in years:
        g["selected_over"] = g["seed"].map(years[v.selection.policy]) / g["lifetime_years"]
    if {"bytes_hbm", "bytes_hbf"} <= set(g):
        g["hbm_share_of_writes"] = g["bytes_hbm"] / (g["bytes_hbm"] + g["bytes_hbf"])
    return g


def summary(v: View) -> pd.DataFrame:
    """One row per policy of the cell: the cell's load (N* of HBM-first at the first seed) and the policy's
    own N*, at how many seeds it meets the SLO there, and device-years, gains (over HBM-first, over w/o
    predictive path, the selected policy's over it) and HBM share as the median over seeds (``<col>``) with
    ``<col>_min``/``<col>_max``."""
    if v.grid.empty:
        return pd.DataFrame()
    g = _per_seed(v)
    cols = [c for c in ("lifetime_years", "over_hbm_first", "over_deterministic", "selected_over",
                        "hbm_share_of_writes") if c in g]
    out = tables.seed_table(g, cols, by=["policy"])
    first = g[g["seed"].eq(g["seed"].min())].set_index("policy")
    by = g.groupby("policy", sort=False)
    out.insert(1, "n_star", out["policy"].map(first["n_star"]))
    out.insert(2, "n_sessions", out["policy"].map(first["n_sessions"]))
    met = by["slo_met"].apply(lambda x: int(x.astype(bool).sum())) if "slo_met" in g else by["seed"].size() * np.nan
    out.insert(3, "slo_met_seeds", out["policy"].map(met))
    if not v.own.empty:
        out = out.merge(v.own.rename(columns={"n_star": "own_n_star"}), on="policy", how="left")
    out["outlasts_warranty"] = out["lifetime_years"] >= Endurance().warranty_years
    out["selected"] = out["policy"].eq(v.selection.policy)
    return out


def composition(v: View) -> pd.DataFrame:
    """Write bytes by segment class and tier, % of each policy's run, mean over seeds (Figs. 10 and 12)."""
    if v.grid.empty or v.composition.empty:
        return pd.DataFrame()
    return v.composition.pivot_table(index=["policy", "seg_class"], columns="tier", values="pct", aggfunc="mean",
                                     sort=False).reset_index()


def curve_table(v: View) -> pd.DataFrame:
    """Lifetime per policy and the gains over HBM-first at each cached load of the cell."""
    if v.curve.empty:
        return pd.DataFrame()
    return load_gains(v.curve).merge(
        v.curve.pivot_table(index="n_sessions", columns="policy", values="lifetime_years", aggfunc="first")
        .add_prefix("years_").reset_index(), on="n_sessions")


def sensitivity_table(v: View) -> pd.DataFrame:
    """The cell's sensitivity study (:func:`lachesis.evaluation.sensitivity.gains`), whatever part of it is cached."""
    return v.sensitivity


def _interval(r: pd.Series, col: str, fmt: str = ".2f", unit: str = "") -> str:
    """A summary value as "median" or "median (min–max)" when the seeds differ."""
    m, lo, hi = r[col], r[f"{col}_min"], r[f"{col}_max"]
    if format(lo, fmt) == format(hi, fmt):
        return f"{m:{fmt}}{unit}"
    return f"{m:{fmt}}{unit} ({lo:{fmt}}–{hi:{fmt}})"


def headline(v: View) -> str:
    """One sentence on the selected policy at the cell's load, computed from the cached rows."""
    s, sel = summary(v), v.selection
    row = s[s["policy"].eq(sel.policy)] if not s.empty else s
    if row.empty:
        return f"{sel.policy} at this cell is not in the cache."
    r = row.iloc[0]
    if not r["n_sessions"]:
        return f"The SLO admits no load at this cell (N* = {int(r['n_star'])}): no lifetime."
    name = sensitivity.pol_name
    seeds = f"seed {sel.seeds[0]}" if len(sel.seeds) == 1 else \
        f"the median over seeds {', '.join(map(str, sel.seeds))} (min–max in brackets)"
    at = f"At {int(r['n_sessions'])} sessions per GPU (N* of {name(LOAD_POLICY)} at seed {sel.seeds[0]}), "
    met = (f"it meets the SLO there at {int(r['slo_met_seeds'])} of {int(r['seeds'])} seeds"
           if np.isfinite(r["slo_met_seeds"]) else "its rows do not say whether it meets the SLO there")
    if not np.isfinite(r["lifetime_years"]):  # the run ran, but no settled HBF write rate: say so, not "no load"
        return (at + f"{name(sel.policy)} has no lifetime ({seeds}): its run ran out of memory or finished no decode "
                f"step in its measurement window; {met}.")
    over = s.set_index("policy")
    gains = ", ".join(f"{_interval(o, 'selected_over', unit='×')} {name(p)}" for p, o in over.iterrows()
                      if p != sel.policy and "selected_over" in o and np.isfinite(o["selected_over"]))
    own = f"; its own N* is {int(r['own_n_star'])}" if "own_n_star" in r and np.isfinite(r["own_n_star"]) else ""
    return (at + f"{name(sel.policy)} lasts {_interval(r, 'lifetime_years')} device-years"
            + (f", {gains}" if gains else "") + f" ({seeds}); {met}{own}; its median "
            f"{'outlasts' if r['outlasts_warranty'] else 'does not outlast'} the "
            f"{Endurance().warranty_years:g}-year warranty.")


def table(v: View) -> pd.DataFrame:
    """The summary in the figures' words, one row per policy: the load, device-years and gains as
    "median (min–max)" over seeds, the HBM share of the KV writes, the SLO at that load and the warranty."""
    s = summary(v)
    if s.empty:
        return s
    sel = v.selection
    out = pd.DataFrame({label("column", "policy"): [label("policy", p) + (" ◀" if p == sel.policy else "")
                                                    for p in s["policy"]],
                        label("column", "n_sessions"): s["n_sessions"].astype(int)})
    for col in ("lifetime_years", "over_hbm_first", "over_deterministic", "selected_over", "hbm_share_of_writes"):
        if col not in s or not np.isfinite(s[col]).any():
            continue
        # the selected policy over each: its gain, read along the rows
        name = f"{label('policy', sel.policy)} ÷ this" if col == "selected_over" else label("column", col)
        pct = col == "hbm_share_of_writes"
        out[name] = [_interval(pd.Series({col: 100 * r[col] if pct else r[col],
                                          f"{col}_min": 100 * r[f"{col}_min"] if pct else r[f"{col}_min"],
                                          f"{col}_max": 100 * r[f"{col}_max"] if pct else r[f"{col}_max"]}),
                               col, ".1f" if pct else ".2f", "%" if pct else "")
                     if np.isfinite(r[col]) else "" for _, r in s.iterrows()]
    if s["slo_met_seeds"].notna().any():
        out[label("column", "slo_met_seeds")] = [f"{int(m)}/{int(n)}" for m, n in zip(s["slo_met_seeds"], s["seeds"])]
    if "own_n_star" in s:
        out[label("column", "own_n_star")] = [f"{x:.0f}" if np.isfinite(x) else "" for x in s["own_n_star"]]
    out[label("column", "outlasts_warranty")] = np.where(s["outlasts_warranty"], "yes", "no")
    return out


#: Columns the folded tables leave out: the cell (named in the heading) and the study's bookkeeping.
FOLDED_DROP = (*CELL, "n_star", "simulated", "slo_margin", "live_short_kv_bytes", "fraction")


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    """A folded table in the figures' words: the cell's columns left out (the heading names the cell)."""
    df = df.drop(columns=[c for c in df if c in FOLDED_DROP or c.startswith("outlasts_warranty_")])
    for kind in ("policy", "workload"):
        if kind in df:
            df[kind] = df[kind].map(lambda x, k=kind: label(k, x))
    if "seg_class" in df:
        df["seg_class"] = [label("column", c) if c == "all" else CLASS_STYLE.get(c, {}).get("label", c)
                           for c in df["seg_class"]]
    return df.rename(columns=lambda c: label("column", c))

