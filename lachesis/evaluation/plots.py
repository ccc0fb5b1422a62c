"""The figures the grid notebooks draw (Figs. 9–12): HBF lifetime per memory configuration (bars for the
paper's policies, markers for the baselines beyond it, the offline bound, the paper's bands), the KV write
bytes by segment class in each tier, the lifetime ratios against load and against the operating point, and the
sensitivity study's charts (one knob at a time at the held load, the user delay at its own N*).

A figure is laid out by its notebook as rows of panels; each panel names the cell it shows (``where``: the
grid columns it selects on), its title and whether the paper's values go beside ours there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatter, NullFormatter

from lachesis.evaluation import tables
from lachesis.evaluation.grid import BASELINES, CONFIG_LABELS
from lachesis.plotting import (
    CLASS_STYLE,
    LIFETIME_AXIS,
    MEMORY_AXIS,
    MISSED_SLO_HATCH,
    NSTAR_STYLE,
    RATIO_STYLE,
    bound_marks,
    missed_slo_keys,
    nstar_key,
    paper_band,
    policy_color,
    policy_key,
    policy_label,
    policy_marker,
    warranty_key,
    warranty_line,
    whisker_key,
)

#: The baselines beyond the paper, drawn as markers beside the paper's bars.
MARK_POLICIES = BASELINES
#: The paper's band spans these memory configurations (its numbers are for 1/7–4/4).
PAPER_SPLIT = ("1/7", "2/6", "3/5", "4/4")


@dataclass(frozen=True)
class Panel:
    """One panel: the grid rows it shows (``where``: column -> value), its title, and whether the paper's
    values are drawn in it."""
    where: Mapping[str, Any]
    title: str
    paper: bool = False
    policy: str = ""  # write-composition panels: the policy shown
    paper_range: tuple[float, float] | None = None  # write-composition panels: the paper's HBM share there


def _select(t: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    keep = np.ones(len(t), dtype=bool)
    for k, v in where.items():
        keep &= (t[k] == v).to_numpy()
    return t[keep]


def rows_by_workload(panels: Sequence[Panel], per_row: int) -> list[list[Panel]]:
    """``panels`` in rows of at most ``per_row``, each row one workload's (in the order they first appear)."""
    wls = list(dict.fromkeys(q.where["workload"] for q in panels))
    rows = []
    for w in wls:
        ps = [q for q in panels if q.where["workload"] == w]
        rows += [ps[i:i + per_row] for i in range(0, len(ps), per_row)]
    return rows


def config_order(df: pd.DataFrame) -> list[str]:
    """The memory configurations the grid ran, in the paper's order."""
    return [c for c in CONFIG_LABELS if c in set(df["memory"])]


def lifetime_figure(df: pd.DataFrame, r: pd.DataFrame, layout: Sequence[Sequence[Panel]], bars: Sequence[str],
                    paper_years: Sequence[tuple[str, tuple[float, float]]], sharey: Any = True) -> plt.Figure:
    """HBF lifetime (device-years) at each cell's common load (Figs. 9 and 11).

    ``df``: the grid rows; ``r``: :func:`lachesis.evaluation.tables.ratio_table` of them; ``bars``: the paper's
    policies, drawn as bars (the rest of :data:`MARK_POLICIES` that ran as markers); ``paper_years``:
    (policy, (lo, hi)) the paper gives over 1/7–4/4, drawn as bands in panels with ``paper`` set.  Bars and
    markers are medians over seeds with min–max whiskers; a hatched bar or an open marker misses the SLO at
    the seed that sized the load."""
    pols = [p for p in r.columns if p in set(df["policy"])]
    bound = [tables.BOUND] if tables.BOUND in r else []
    life = tables.seed_table(r, pols + bound)
    missed = tables.missed_slo(df)
    cfg_order = config_order(df)
    bars = [p for p in bars if p in pols]
    n_rows, n_cols = len(layout), max(len(row) for row in layout)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4.6 * n_cols, 3.4 * n_rows), squeeze=False, sharey=sharey)
    bound_key = None
    paper_keys = {}
    x = np.arange(len(cfg_order))
    for i, row in enumerate(layout):
        for j, panel in enumerate(row):
            ax = axes[i][j]
            d = _select(life, panel.where).set_index("memory").reindex(cfg_order)
            ok = _select(missed, panel.where)
            marks = [p for p in MARK_POLICIES if p in d and d[p].notna().any()]
            wd = (0.54 if marks else 0.8) / max(len(bars), 1)  # bars left of each group's centre, markers right
            for k, p in enumerate(bars + marks):
                y, lo, hi = d[p].to_numpy(float), d[f"{p}_min"].to_numpy(float), d[f"{p}_max"].to_numpy(float)
                met = ok[ok.policy == p].set_index("memory")["all_met"].reindex(cfg_order).fillna(True).to_numpy(bool)
                if p in bars:
                    xs = x - 0.4 + (k + 0.5) * wd
                    b = ax.bar(xs, y, wd, color=policy_color(p), label=policy_label(p))
                    ax.errorbar(xs, y, yerr=[y - lo, hi - y], fmt="none", ecolor="0.2", elinewidth=0.8, capsize=2)
                    for bb, good in zip(b, met):
                        if not good:
                            bb.set_hatch(MISSED_SLO_HATCH)
                else:
                    mk, col = policy_marker(p), policy_color(p)
                    xs = x + 0.2 + 0.09 * (k - len(bars))
                    ms = 10 if mk == "*" else 6
                    ax.errorbar(xs, y, yerr=[y - lo, hi - y], fmt="none", ecolor=col, elinewidth=0.8, capsize=2)
                    ax.plot(xs[met], y[met], mk, color=col, ms=ms, label=policy_label(p))
                    ax.plot(xs[~met], y[~met], mk, color=col, ms=ms, mfc="white")
            if bound and d[tables.BOUND].notna().any():
                bound_key = bound_marks(ax, x, d[tables.BOUND], d[f"{tables.BOUND}_min"],
                                        d[f"{tables.BOUND}_max"])
            slots = [k for k, cfg in enumerate(cfg_order) if cfg in PAPER_SPLIT]
            if panel.paper and slots:
                for p, (lo_p, hi_p) in paper_years:
                    if p in pols:
                        paper_keys[p] = paper_band(ax, lo_p, hi_p, policy_color(p),
                                                   x=(min(slots) - 0.45, max(slots) + 0.45),
                                                   label=f"paper: {policy_label(p)}, {lo_p:g}–{hi_p:g} (1/7–4/4)")
            warranty_line(ax)
            ax.set_xticks(x, cfg_order)
            ax.set_xlabel(MEMORY_AXIS, fontsize=8)
            ax.set_title(panel.title, fontsize=9)
            if j == 0:
                ax.set_ylabel(LIFETIME_AXIS)
    keys = ([policy_key(p) for p in bars] + [policy_key(p, bar=False) for p in MARK_POLICIES if p in pols]
            + ([bound_key] if bound_key else []) + list(paper_keys.values())
            + [warranty_key(), *missed_slo_keys(), whisker_key()])
    if n_cols > 1:  # the keys in rows of four below the panels
        fig.legend(handles=keys, loc="lower center", ncol=4, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.24 * (1 + (len(keys) - 1) // 4) / fig.get_figheight(), 1, 1))
    else:  # one panel column: the keys beside it
        fig.tight_layout()
        fig.legend(handles=keys, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    return fig


def composition_figure(df: pd.DataFrame, comp: pd.DataFrame, layout: Sequence[Sequence[Panel]],
                       classes: Sequence[str], n_cols: int, figsize: tuple[float, float],
                       title_size: float = 9) -> plt.Figure:
    """KV write bytes by segment class in each tier, % of each run's total, mean over seeds (Figs. 10 and 12).

    ``comp``: :func:`lachesis.evaluation.tables.write_composition` rows of the figure's model (and SLO); each panel
    shows ``panel.policy`` on ``panel.where["workload"]``, the offline bound's HBM share of the same cell
    (:func:`lachesis.evaluation.tables.bound_share_pct` over ``df`` restricted as ``comp`` is) and, where
    ``panel.paper_range`` is set, the paper's HBM share of write bytes."""
    cfg_order = config_order(df)
    means = tables.composition_means(comp)
    fig, axes = plt.subplots(len(layout), n_cols, figsize=figsize, squeeze=False, sharey=True)
    colors = {k: CLASS_STYLE[k]["color"] for k in classes}
    bound_key = paper_key = None
    for i, row in enumerate(layout):
        for j in range(n_cols):
            ax = axes[i][j]
            if j >= len(row):
                ax.axis("off")
                continue
            panel = row[j]
            w = panel.where["workload"]
            d = means[(means.workload == w) & (means.policy == panel.policy)]
            bottom = np.zeros(len(cfg_order))
            for tier, hatch in (("hbm", ""), ("hbf", "//")):
                for c in classes:
                    y = np.array([d[(d.memory == m) & (d.seg_class == c) & (d.tier == tier)]["pct"].sum()
                                  for m in cfg_order])
                    ax.bar(cfg_order, y, bottom=bottom, color=colors[c], hatch=hatch, edgecolor="white",
                           label=f"{CLASS_STYLE[c]['label']} ({tier.upper()}{', hatched' if hatch else ''})")
                    bottom += y
            b = tables.bound_share_pct(df, **{k: v for k, v in panel.where.items() if k != "workload"})
            if w in b.index.get_level_values("workload"):
                b = b.loc[w].reindex(cfg_order)
                bound_key = bound_marks(ax, np.arange(len(cfg_order)), b["mean"], b["min"], b["max"])
            if panel.paper_range is not None:  # the paper's HBM share of write bytes (§5.3)
                lo_p, hi_p = panel.paper_range
                paper_key = paper_band(ax, 100 * lo_p, 100 * hi_p, "k", label="paper: HBM share of write bytes (§5.3)",
                                       zorder=5)
            ax.set_xlabel(MEMORY_AXIS, fontsize=7)
            ax.set_title(panel.title, fontsize=title_size)
            if j == 0:
                ax.set_ylabel("KV write bytes (% of run)")
    # the classes' keys from the first panel (the last slot of the first row may be empty), beside that row
    handles = (axes[0][0].get_legend_handles_labels()[0] + ([bound_key] if bound_key else [])
               + ([paper_key] if paper_key else []))
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(composition_title(comp), fontsize=title_size + 1)
    fig.tight_layout()
    return fig


def composition_title(comp: pd.DataFrame) -> str:
    """A write-composition figure's title: the model(s) and SLO(s) its rows are of (a saved image says which)."""
    names = [", ".join(map(str, dict.fromkeys(comp[c]))) if c in comp and len(comp) else "" for c in ("model", "slo")]
    model, slo = names
    return "KV write bytes by segment class" + (f": {model}" if model else "") + (f", {slo} SLO" if slo else "")


# ------------------------------------------------------------------------------------------------
# Gain versus load (Figs. 9–10's ratios against the load and against the operating point it sets)
# ------------------------------------------------------------------------------------------------

#: One marker per memory configuration where configurations share a panel.
CONFIG_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _ratio_lines(ax: plt.Axes, d: pd.DataFrame, x: str, marker: str = "o", label_suffix: str = "") -> None:
    """Each ratio of :data:`~lachesis.plotting.RATIO_STYLE` against column ``x``: filled markers where every
    policy meets the SLO at that load, open ones where one misses it."""
    d = d.sort_values(x)
    met = d["all_meet_slo"].astype(bool)
    for col, style in RATIO_STYLE.items():
        if col not in d:
            continue
        ax.plot(d[x], d[col], "-", color=style["color"], linewidth=1.0, label=style["label"] + label_suffix)
        ax.plot(d.loc[met, x], d.loc[met, col], marker, ls="", color=style["color"], ms=5)
        ax.plot(d.loc[~met, x], d.loc[~met, col], marker, ls="", mfc="white", color=style["color"], ms=5)


class TimesFormatter(LogFormatter):
    """A ratio's log-axis tick as a plain multiple (``2×``, ``10×``), on the ticks matplotlib would label."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}×" if super().__call__(x, pos) else ""


def times_axis(axis: Axis) -> None:
    """Plain ``2×``/``10×`` labels on a log axis of ratios (matplotlib's default prints ``2×10⁰``)."""
    axis.set_major_formatter(TimesFormatter())
    axis.set_minor_formatter(TimesFormatter(labelOnlyBase=False))


def _gain_axes(ax: plt.Axes, xlabel: str, ylabel: bool) -> None:
    ax.axhline(1.0, color="0.6", linewidth=0.6)
    ax.set_yscale("log")
    times_axis(ax.yaxis)
    if ax.get_xscale() == "log":
        times_axis(ax.xaxis)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel("HBF lifetime ratio (×, log)")


def _gain_keys(gains: pd.DataFrame, extra: Sequence[Artist] = ()) -> list[Artist]:
    return ([Line2D([], [], color=s["color"], marker="o", label=s["label"]) for k, s in RATIO_STYLE.items()
             if k in gains] + list(extra)
            + [Line2D([], [], ls="", marker="o", mfc="white", color="0.3",
                      label="a policy misses the SLO at this load"),
               Line2D([], [], color="0.6", lw=0.6, label="no gain (1×)")])


def _legend_below(fig: plt.Figure, keys: Sequence[Artist]) -> None:
    fig.legend(handles=list(keys), loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.22 * (1 + (len(keys) - 1) // 3) / fig.get_figheight(), 1, 1))


def gain_load_figure(gains: pd.DataFrame, found: pd.DataFrame, models: Sequence[str]) -> plt.Figure:
    """Lifetime ratios over HBM-first against sessions per GPU: a panel per model (rows) and memory configuration
    (columns), N* dotted, the paper's number or range for that cell dashed or shaded (``found``:
    :func:`lachesis.evaluation.gains.paper_loads`)."""
    cfgs = config_order(gains)
    fig, axes = plt.subplots(len(models), len(cfgs), figsize=(4.0 * len(cfgs), 3.2 * len(models)), squeeze=False)
    paper_keys: dict[str, Any] = {}
    for i, m in enumerate(models):
        for j, c in enumerate(cfgs):
            ax = axes[i][j]
            d = gains[(gains.model == m) & (gains.memory == c)]
            _ratio_lines(ax, d, "n_sessions")
            for f in found[(found.model == m) & (found.memory == c)].itertuples() if len(found) else ():
                style = RATIO_STYLE[f.ratio]
                paper_keys[f.ratio] = paper_band(ax, f.paper_lo, f.paper_hi, style["color"],
                                                 label=f"paper: {style['label']}")
            if len(d):
                ax.axvline(d["n_star"].iloc[0], **NSTAR_STYLE)
            ax.set_title(f"{m}, {c}", fontsize=9)
            _gain_axes(ax, "load (concurrent sessions per GPU)", j == 0)
    _legend_below(fig, _gain_keys(gains, list(paper_keys.values()) + [nstar_key()]))
    return fig


def gain_capacity_figure(gains: pd.DataFrame, models: Sequence[str]) -> plt.Figure:
    """The same ratios against the operating point §5.3 names, "HBM's capacity against the short-lived KV live at
    one time": one GPU's HBM ÷ the live short-lived KV per GPU (HBM-first's run, time-averaged), a panel per model,
    every memory configuration and load in it (one marker per configuration).  If that ratio sets the gain, the
    configurations' curves line up."""
    cfgs = config_order(gains)
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 3.8), squeeze=False)
    for i, m in enumerate(models):
        ax = axes[0][i]
        for c, marker in zip(cfgs, CONFIG_MARKERS):
            d = gains[(gains.model == m) & (gains.memory == c)]
            if "hbm_over_live_short" in d and len(d):
                _ratio_lines(ax, d, "hbm_over_live_short", marker)
        ax.set_xscale("log")
        ax.set_title(m, fontsize=9)
        _gain_axes(ax, "HBM ÷ live short-lived KV per GPU (×, log)", i == 0)
    config_keys = [Line2D([], [], ls="", marker=mk, color="0.3", label=f"memory {c}")
                   for c, mk in zip(cfgs, CONFIG_MARKERS)]
    _legend_below(fig, _gain_keys(gains, config_keys))
    return fig


# ------------------------------------------------------------------------------------------------
# The sensitivity chart: one knob at a time around the paper's setting
# ------------------------------------------------------------------------------------------------

#: The chart's metrics: column, axis label, log axis.
SENSITIVITY_METRICS = (("lachesis/hbm_first", "HBF lifetime ratio, Lachesis / HBM-first (×)", False),
                       ("years_lachesis", "HBF lifetime under Lachesis (device-years, log)", True))
LOWER, HIGHER, OTHER = "#2166ac", "#b2182b", "#762a83"
#: Where a value's label may go (points from its marker), tried in turn until it overlaps no other label.
LABEL_SPOTS = ((0, 5), (0, -10), (0, 14), (0, -19), (0, 23), (0, -28))


def _place_labels(fig: plt.Figure, ax: plt.Axes, labels: Sequence[tuple[float, float, str, bool]]) -> None:
    """Each (x, y, text, below) annotated at the first of :data:`LABEL_SPOTS` (below-first if ``below``)
    whose box overlaps no label already placed in ``ax``."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # NOTE: the Agg canvas every figure here has
    placed: list[Any] = []
    for x, y, text, below in labels:
        spots = sorted(LABEL_SPOTS, key=lambda s: (s[1] > 0) == below)
        for off in spots:
            a = ax.annotate(text, (x, y), textcoords="offset points", xytext=off, ha="center", fontsize=6)
            box = a.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed) or off == spots[-1]:
                placed.append(box)
                break
            a.remove()


def sensitivity_figure(gains: pd.DataFrame, id_cols: Sequence[str], warranty_years: float) -> plt.Figure:
    """One knob at a time around the paper's setting (``gains``: :func:`lachesis.evaluation.sensitivity.gains`): a
    panel per
    cell (``id_cols``) and metric, a row per knob, each value a dot labelled in words
    (:mod:`lachesis.evaluation.knobs`'s name
    table); filled where every policy meets the SLO."""
    from lachesis.evaluation.knobs import KNOBS, knob_label, value_label
    from lachesis.plotting import WARRANTY_STYLE, workload_label

    ids = list(gains[list(id_cols)].drop_duplicates().itertuples(index=False))
    order = [k for k in KNOBS if k in set(gains["knob"])]
    n_m = len(SENSITIVITY_METRICS)
    fig, axes = plt.subplots(n_m, len(ids), figsize=(4.3 * len(ids), 0.42 * len(order) * n_m + 1.6),
                             squeeze=False, sharey=True)
    pending = []
    for j, cid in enumerate(ids):
        d = gains[np.logical_and.reduce([gains[c].eq(v) for c, v in zip(id_cols, cid)])]
        base = d[d["knob"].eq("paper")].iloc[0]
        for i, (col, label, log) in enumerate(SENSITIVITY_METRICS):
            ax = axes[i][j]
            labels = []
            for y, k in enumerate(order):
                e = d[d["knob"].eq(k)]
                x = e[col].to_numpy(float)
                if not np.isfinite(x).any():
                    continue
                ax.plot([np.nanmin([*x, base[col]]), np.nanmax([*x, base[col]])], [y, y], color="0.85", lw=7,
                        solid_capstyle="butt", zorder=1)
                dflt = KNOBS[k].default
                row: list[tuple[float, list[str], bool]] = []  # values landing on one spot share a label
                for xv, v, met in sorted(zip(x, e["value"], e["all_meet_slo"].astype(bool))):
                    below = not isinstance(dflt, str) and float(v) < dflt
                    c = OTHER if isinstance(dflt, str) else (LOWER if below else HIGHER)
                    ax.plot(xv, y, "o", color=c, mfc=c if met else "white", ms=5, zorder=3)
                    if row and abs(xv - row[-1][0]) <= 0.004 * abs(xv):
                        row[-1][1].append(v)
                    else:
                        row.append((xv, [v], below))
                for xv, vs, below in row:
                    vs = vs if isinstance(dflt, str) else sorted(vs, key=float)
                    labels.append((xv, y, ", ".join(value_label(v) for v in vs), below))
            pending.append((ax, labels))
            ax.axvline(base[col], color="k", lw=0.9)
            if log:
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(NullFormatter())
                ax.axvline(warranty_years, **WARRANTY_STYLE)
            ax.set_yticks(range(len(order)), [knob_label(k) for k in order], fontsize=7)
            ax.set_ylim(len(order) - 0.4, -0.7)
            ax.set_xlabel(label, fontsize=8)
            if i == 0:
                ax.set_title(f"{workload_label(cid.workload)}\n{cid.model}, {cid.slo} SLO, {cid.memory}, "
                             f"{int(base['n_sessions'])} sessions/GPU", fontsize=8)
    keys = [Line2D([], [], ls="", marker="o", color=LOWER, label="a value below the paper's"),
            Line2D([], [], ls="", marker="o", color=HIGHER, label="a value above the paper's"),
            Line2D([], [], ls="", marker="o", color=OTHER, label="another choice (categorical knob)"),
            Line2D([], [], ls="", marker="o", mfc="white", color="0.3", label="misses the SLO at this load"),
            Line2D([], [], color="k", lw=0.9, label="the paper's setting"),
            Line2D([], [], color="0.85", lw=7, label="range over the values tried"), warranty_key(warranty_years)]
    fig.legend(handles=keys, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.5 / fig.get_figheight(), 1, 1))
    for ax, labels in pending:  # after the layout: label boxes are measured where they will be drawn
        _place_labels(fig, ax, labels)
    return fig


#: The own-load chart's panels: column of :func:`lachesis.evaluation.sensitivity.at_own_load`, axis label.
OWN_LOAD_PANELS = (("n_star", "N* (concurrent sessions per GPU)"), ("lachesis/hbm_first", "Lachesis / HBM-first (×)"),
                   ("live_short_kv_gb", "live short-lived KV per GPU at N* (GB)"))


def user_delay_figure(own: pd.DataFrame, id_cols: Sequence[str]) -> plt.Figure:
    """The user's think time at its own N* (``own``: :func:`lachesis.evaluation.sensitivity.at_own_load` over
    ``user_delay_median_s``): N*, the gain and the live short-lived KV against the delay, a line per cell
    (``id_cols``), the paper's median dotted."""
    from lachesis.evaluation.knobs import KNOBS
    from lachesis.plotting import workload_label

    paper_median = KNOBS["user_delay_median_s"].default
    values = sorted(own["value"].unique())
    fig, axes = plt.subplots(1, len(OWN_LOAD_PANELS), figsize=(4.0 * len(OWN_LOAD_PANELS), 3.2), squeeze=False)
    for ax, (col, label) in zip(axes[0], OWN_LOAD_PANELS):
        for (w, m, s, mem), d in own.groupby(list(id_cols), sort=False):
            ax.plot(d["value"], d[col], "o-", label=f"{workload_label(w)}, {m}, {s}, {mem}")
        ax.axvline(paper_median, color="0.4", ls=":", lw=1, label=f"the paper's median ({paper_median:g} s)")
        ax.set_xscale("log")
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("user delay median (s)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


#: The claim ledger's verdict colours (lachesis.evaluation.claims.VERDICTS).
VERDICT_COLORS = {"reproduced": "#4c9a2a", "close": "#e0b000", "off": "#c0392b", "not evaluable": "0.75"}


def tally_figure(tally: pd.DataFrame) -> plt.Figure:
    """The claim ledger's verdicts per section (``tally``: :func:`lachesis.evaluation.claims.tally`), one stacked bar
    each, "all" last."""
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(tally) + 0.9))
    y = np.arange(len(tally))[::-1]
    left = np.zeros(len(tally))
    for verdict, color in VERDICT_COLORS.items():
        n = tally[verdict].to_numpy(float) if verdict in tally else np.zeros(len(tally))
        ax.barh(y, n, left=left, color=color, label=verdict, height=0.7)
        for yi, li, ni in zip(y, left, n):
            if ni:
                ax.text(li + ni / 2, yi, f"{int(ni)}", ha="center", va="center", fontsize=8)
        left += n
    ax.set_yticks(y, [str(s) for s in tally.index])
    ax.set_xlabel("statements")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(ncols=len(VERDICT_COLORS), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig
