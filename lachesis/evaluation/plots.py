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
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from lachesis.evaluation import tables
from lachesis.evaluation.grid import BASELINES, CONFIG_LABELS
from lachesis.plotting import (
    CLASS_STYLE,
    LIFETIME_AXIS,
    MEMORY_AXIS,
    NSTAR_STYLE,
    RATIO_STYLE,
    UNBOUNDED_STYLE,
    SloOutcome,
    bound_marks,
    miss_mark,
    miss_overlay,
    missed_run_key,
    missed_slo_key,
    nstar_key,
    paper_band,
    paper_whiskers,
    policy_color,
    policy_key,
    policy_label,
    policy_marker,
    slo_outcomes,
    unbounded_key,
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


def in_rows(panels: Sequence[Panel], per_row: int) -> list[list[Panel]]:
    """``panels`` in rows of at most ``per_row``, in order (a grid, not one long row)."""
    return [list(panels[i:i + per_row]) for i in range(0, len(panels), per_row)]


def config_order(df: pd.DataFrame) -> list[str]:
    """The memory configurations the grid ran, in the paper's order."""
    return [c for c in CONFIG_LABELS if c in set(df["memory"])]


#: Configurations drawn beside the others on a y scale of their own: the daisy-chained 8/8* (and its offline bound)
#: lasts an order of magnitude longer than the split configurations, whose bars it would flatten.
OWN_SCALE = ("8/8*",)
#: Where a group's paper policies (bars) and baselines (markers) sit, as offsets from the group's centre: the bars
#: share [BAR_SPAN[0], BAR_SPAN[1]], the markers start at MARK_START, MARK_STEP apart (each wide enough for a
#: miss's upright text).
BAR_SPAN, MARK_START, MARK_STEP = (-0.42, 0.10), 0.16, 0.12


def lifetime_marks(ax: plt.Axes, xs: np.ndarray, policy: str, y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   outcomes: Sequence[SloOutcome | None], width: float, bar: bool) -> bool:
    """One policy's lifetimes at ``xs``: where its rows meet the SLO at every seed
    (:func:`~lachesis.plotting.slo_outcome`), a bar (``bar``) or its marker at the median ``y`` with a min–max
    whisker; where one seed misses, no lifetime but :func:`~lachesis.plotting.miss_mark`; where no KV reached HBF (an
    infinite lifetime), the unbounded mark at the top in its colour (returns whether it drew one); where it did not
    run (None, or no value), nothing."""
    col = policy_color(policy)
    unbounded = False
    for x, v, a, b, out in zip(xs, y, lo, hi, outcomes):
        if out is None or np.isnan(v):
            continue
        if not out.met:
            miss_mark(ax, x, width, out, col)
            continue
        if np.isinf(v):  # no KV reached HBF: an unbounded lifetime, marked at the top in the policy's colour
            ax.plot([x], [0.95], ls="", transform=ax.get_xaxis_transform(), zorder=4,
                    **dict(UNBOUNDED_STYLE, color=col, ms=9))
            ax.margins(y=0.15)
            unbounded = True
            continue
        a, b = (a if np.isfinite(a) else v), (b if np.isfinite(b) else v)  # an unbounded seed: no whisker past the axes
        if bar:
            ax.bar([x], [v], width, color=col, label=policy_label(policy))
            ax.errorbar([x], [v], yerr=[[v - a], [b - v]], fmt="none", ecolor="0.2", elinewidth=0.8, capsize=2)
        else:
            mk = policy_marker(policy)
            ax.errorbar([x], [v], yerr=[[v - a], [b - v]], fmt="none", ecolor=col, elinewidth=0.8, capsize=2)
            ax.plot([x], [v], mk, color=col, ms=9 if mk == "*" else 5.5, label=policy_label(policy))
    return unbounded


def policy_bars(ax: plt.Axes, summary: pd.DataFrame, rows: pd.DataFrame, names: Sequence[str],
                selected: str = "") -> list[Artist]:
    """One cell's policies side by side (the explorer's figure): ``summary`` one row per policy with
    ``lifetime_years`` and its ``_min``/``_max`` over seeds (and ``own_n_star`` where searched), ``rows`` the cell's
    grid rows (one per policy and seed); each policy by :func:`lifetime_marks` under its name in ``names``, the
    ``selected`` one outlined.  Returns the legend keys of what was drawn beyond the bars."""
    outcomes = slo_outcomes(rows, ["policy"])
    unbounded = missed = False
    for k, r in enumerate(summary.to_dict("records")):
        out = outcomes.get((r["policy"],))
        own = r.get("own_n_star", np.nan)
        if out is not None and out.own_n_star is None and np.isfinite(own):  # the explorer's own search
            out = SloOutcome(out.seeds, out.misses, (float(own), float(own)))
        v = float(r["lifetime_years"])
        unbounded |= lifetime_marks(ax, np.array([k]), r["policy"], np.array([v]),
                                    np.array([r["lifetime_years_min"]]), np.array([r["lifetime_years_max"]]), [out],
                                    0.8, bar=True)
        missed |= out is not None and not out.met
        if r["policy"] == selected and out is not None and out.met and np.isfinite(v):
            ax.bar([k], [v], 0.8, fill=False, edgecolor="k", linewidth=1.6, zorder=3)
    ax.set_xticks(np.arange(len(summary)), list(names))
    ax.set_xlim(-0.6, len(summary) - 0.4)
    return ([missed_slo_key()] if missed else []) + ([unbounded_key(policy=True)] if unbounded else [])


def _panel_axes(fig: plt.Figure, layout: Sequence[Sequence[Panel]], main: Sequence[str], own: Sequence[str],
                sharey: Any) -> list[list[list[tuple[plt.Axes, list[str]]]]]:
    """Per panel, its axes and their configurations: one for the ``main`` ones, one beside it for the ``own``-scale
    ones (where there are both kinds), sharing y as ``sharey`` says (True: every panel, "row": each row, False: none)
    within each kind."""
    n_rows, n_cols = len(layout), max(len(row) for row in layout)
    outer = fig.add_gridspec(n_rows, n_cols)
    parts = [(kind, list(cfgs)) for kind, cfgs in (("main", main), ("own", own)) if cfgs]
    ratios = [len(main), len(own) + 0.45] if len(parts) == 2 else [1]
    out = []
    shared: dict[Any, plt.Axes] = {}
    for i, row in enumerate(layout):
        cells = []
        for j in range(len(row)):
            sub = outer[i, j].subgridspec(1, len(parts), wspace=0.0, width_ratios=ratios)
            cell = []
            for k, (kind, cfgs) in enumerate(parts):
                key = (kind, i if sharey == "row" else 0)
                ax = fig.add_subplot(sub[0, k], sharey=shared.get(key) if sharey else None)
                shared.setdefault(key, ax)
                cell.append((ax, cfgs))
            cells.append(cell)
        out.append(cells)
    return out


def lifetime_figure(df: pd.DataFrame, r: pd.DataFrame, layout: Sequence[Sequence[Panel]], bars: Sequence[str],
                    paper_years: Sequence[tuple[str, tuple[float, float]]], sharey: Any = True,
                    title: str = "") -> plt.Figure:
    """HBF lifetime (device-years) at each cell's load (Figs. 9 and 11, ``lachesis evaluate``'s figure).

    ``df``: the grid rows; ``r``: :func:`lachesis.evaluation.tables.ratio_table` of them; ``bars``: the paper's
    policies, drawn as bars (the rest of :data:`MARK_POLICIES` that ran as markers); ``paper_years``:
    (policy, (lo, hi)) the paper gives over 1/7–4/4, drawn as bands behind the bars in panels with ``paper`` set;
    ``title`` above the panels.  A policy that meets the SLO at every seed is its median with a min–max whisker;
    one that misses at any seed is a miss (:func:`lifetime_marks`).  :data:`OWN_SCALE` configurations get an axis
    of their own beside each panel's."""
    pols = [p for p in r.columns if p in set(df["policy"])]
    bound = [tables.BOUND] if tables.BOUND in r else []
    life = tables.seed_table(r, pols + bound)
    cfg_order = config_order(df)
    main = [c for c in cfg_order if c not in OWN_SCALE]
    own = [c for c in cfg_order if c in OWN_SCALE]
    bars = [p for p in bars if p in pols]
    n_rows, n_cols = len(layout), max(len(row) for row in layout)
    fig = plt.figure(figsize=(max((0.95 * len(cfg_order) + 1.1) * n_cols, 7.0), 2.75 * n_rows + 1.3),
                     layout="constrained")
    grid_axes = _panel_axes(fig, layout, main, own, sharey)
    keys: dict[str, Artist] = {}
    any_miss = False
    for i, row in enumerate(layout):
        for j, panel in enumerate(row):
            rows = _select(df, panel.where)
            d = _select(life, panel.where).set_index("memory")
            outcomes = slo_outcomes(rows, ["memory", "policy"])
            any_miss |= any(not o.met for o in outcomes.values())
            marks = [p for p in MARK_POLICIES if p in d and d[p].notna().any()]
            wd = (BAR_SPAN[1] - BAR_SPAN[0] if marks else 0.84) / max(len(bars), 1)
            for ax, cfgs in grid_axes[i][j]:
                dd = d.reindex(cfgs)
                x = np.arange(len(cfgs))
                for k, p in enumerate(bars + marks):
                    if p not in dd:
                        continue
                    xs = (x + BAR_SPAN[0] + (k + 0.5) * wd if p in bars
                          else x + MARK_START + MARK_STEP * (k - len(bars)))
                    if lifetime_marks(ax, xs, p, dd[p].to_numpy(float), dd[f"{p}_min"].to_numpy(float),
                                      dd[f"{p}_max"].to_numpy(float), [outcomes.get((c, p)) for c in cfgs],
                                      wd if p in bars else MARK_STEP * 0.8, bar=p in bars):
                        keys["policy unbounded"] = unbounded_key(policy=True)
                if bound and dd[tables.BOUND].notna().any():
                    y = dd[tables.BOUND].to_numpy(float)
                    keys["bound"] = bound_marks(ax, x, y, dd[f"{tables.BOUND}_min"], dd[f"{tables.BOUND}_max"],
                                                width=0.9)
                    if np.isinf(y).any():
                        keys["unbounded"] = unbounded_key()
                slots = [k for k, cfg in enumerate(cfgs) if cfg in PAPER_SPLIT]
                if panel.paper and slots:
                    for p, (lo_p, hi_p) in paper_years:
                        if p in pols:
                            keys[f"paper {p}"] = paper_band(
                                ax, lo_p, hi_p, policy_color(p), x=(min(slots) - 0.48, max(slots) + 0.48),
                                label=f"paper: {policy_label(p)}, {lo_p:g}–{hi_p:g} (1/7–4/4)")
                ran = rows[rows["memory"].isin(cfgs)]
                if len(ran) and ran["lifetime_years"].isna().all():  # e.g. a trace too short to write any KV
                    none = {"bytes_hbm", "bytes_hbf"} <= set(ran) and not (ran["bytes_hbm"] + ran["bytes_hbf"]).any()
                    ax.text(0.5, 0.5, "no lifetime measured" + ("\n(no KV written in the\nmeasured windows)"
                                                                if none else ""),
                            transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.3")
                warranty_line(ax)
                ax.set_xticks(x, cfgs)
                ax.set_xlim(-0.55, len(cfgs) - 0.45)
                ax.tick_params(labelsize=9)
            first = grid_axes[i][j][0][0]
            first.set_title(panel.title, fontsize=10, loc="left")
            first.set_xlabel(MEMORY_AXIS, fontsize=9)
            if j == 0:
                first.set_ylabel(LIFETIME_AXIS, fontsize=9)
            if len(grid_axes[i][j]) == 2:
                grid_axes[i][j][1][0].set_xlabel("own y scale", fontsize=8, color="0.3")
    for ax in fig.axes:  # once every panel is drawn: a shared axis autoscales over all of its panels
        ax.set_ylim(bottom=0)
    handles = ([policy_key(p) for p in bars] + [policy_key(p, bar=False) for p in MARK_POLICIES if p in pols]
               + [keys[k] for k in ("bound", "unbounded", "policy unbounded") if k in keys]
               + [keys[f"paper {p}"] for p, _ in paper_years if f"paper {p}" in keys]
               + [warranty_key()] + ([missed_slo_key()] if any_miss else []) + [whisker_key()])
    fig.legend(handles=handles, loc="outside lower center", ncol=3 if fig.get_figwidth() >= 9 else 2, fontsize=9,
               frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def composition_figure(df: pd.DataFrame, comp: pd.DataFrame, layout: Sequence[Sequence[Panel]],
                       classes: Sequence[str], n_cols: int, figsize: tuple[float, float],
                       title_size: float = 9, figure: str = "") -> plt.Figure:
    """KV write bytes by segment class in each tier, % of each run's total, mean over seeds (Figs. 10 and 12).

    ``comp``: :func:`lachesis.evaluation.tables.write_composition` rows of the figure's model (and SLO); each panel
    shows ``panel.policy`` on ``panel.where["workload"]``, the offline bound's HBM share of the same cell
    (:func:`lachesis.evaluation.tables.bound_share_pct` over ``df`` restricted as ``comp`` is) and, where
    ``panel.paper_range`` is set, the paper's HBM share of write bytes as a black whisker beside each 1/7–4/4 bar
    (beside, so it recolours no bar).  A run that misses the SLO at any seed is faded and crossed out
    (:func:`~lachesis.plotting.miss_overlay`).  ``figure`` ("Fig. 10") opens the title."""
    cfg_order = config_order(df)
    means = tables.composition_means(comp)
    n_keys = 2 * len(classes) + 3
    fig, axes = plt.subplots(len(layout), n_cols, figsize=(figsize[0], figsize[1] + 0.2 * (n_keys + 1) / 2 + 0.3),
                             squeeze=False, sharey=True, layout="constrained")
    colors = {k: CLASS_STYLE[k]["color"] for k in classes}
    keys: dict[str, Artist] = {}
    for i, row in enumerate(layout):
        for j in range(n_cols):
            ax = axes[i][j]
            if j >= len(row):
                ax.axis("off")
                continue
            panel = row[j]
            w = panel.where["workload"]
            d = means[(means.workload == w) & (means.policy == panel.policy)]
            outcomes = slo_outcomes(_select(df, panel.where), ["memory", "policy"])
            met = np.array([(o := outcomes.get((m, panel.policy))) is None or o.met for m in cfg_order])
            bottom = np.zeros(len(cfg_order))
            for tier, hatch in (("hbm", ""), ("hbf", "//")):
                for c in classes:
                    y = np.array([d[(d.memory == m) & (d.seg_class == c) & (d.tier == tier)]["pct"].sum()
                                  for m in cfg_order])
                    for faded in (False, True):
                        sel = met != faded
                        ax.bar(np.arange(len(cfg_order))[sel], y[sel], bottom=bottom[sel], color=colors[c],
                               hatch=hatch, edgecolor="white", alpha=0.3 if faded else 1.0)
                    bottom += y
            for k, m in enumerate(cfg_order):
                o = outcomes.get((m, panel.policy))
                if o is not None and not o.met:
                    miss_overlay(ax, k, 0.8, bottom[k], o)
                    keys["miss"] = missed_run_key()
            b = tables.bound_share_pct(df, **{k: v for k, v in panel.where.items() if k != "workload"})
            if w in b.index.get_level_values("workload"):
                b = b.loc[w].reindex(cfg_order)
                keys["bound"] = bound_marks(ax, np.arange(len(cfg_order)), b["mean"], b["min"], b["max"])
            slots = [k for k, m in enumerate(cfg_order) if m in PAPER_SPLIT]
            if panel.paper_range is not None and slots:  # the paper's HBM share of write bytes (§5.3)
                lo_p, hi_p = panel.paper_range
                keys["paper"] = paper_whiskers(ax, np.array(slots) + 0.47, 100 * lo_p, 100 * hi_p,
                                               label=f"paper: HBM share of write bytes, {100 * lo_p:g}–"
                                                     f"{100 * hi_p:g}% over 1/7–4/4 (§5.3)")
            ax.set_xticks(np.arange(len(cfg_order)), cfg_order)
            ax.set_xlim(-0.6, len(cfg_order) - 0.35)
            ax.set_xlabel(MEMORY_AXIS if j == 0 else "HBM / HBF stacks", fontsize=7)
            ax.set_title(panel.title, fontsize=title_size)
            if j == 0:
                ax.set_ylabel("KV write bytes (% of run)")
    # the classes' keys, below the panels
    handles: list[Artist] = [Patch(facecolor=colors[c], hatch=hatch, edgecolor="white",
                                   label=f"{CLASS_STYLE[c]['label']} ({tier.upper()}{', hatched' if hatch else ''})")
                             for tier, hatch in (("hbm", ""), ("hbf", "//")) for c in classes]
    handles += [keys[k] for k in ("bound", "paper", "miss") if k in keys]
    fig.legend(handles=handles, fontsize=7.5, loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(composition_title(comp, figure), fontsize=title_size + 1)
    return fig


def composition_title(comp: pd.DataFrame, figure: str = "") -> str:
    """A write-composition figure's title: the figure's number, then the model(s) and SLO(s) its rows are of (a
    saved image says which)."""
    names = [", ".join(map(str, dict.fromkeys(comp[c]))) if c in comp and len(comp) else "" for c in ("model", "slo")]
    model, slo = names
    return ((f"{figure} — " if figure else "") + "KV write bytes by segment class" + (f": {model}" if model else "")
            + (f", {slo} SLO" if slo else ""))


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


#: The labelled ticks of a log axis of ratios within each decade (1×, 2×, 3×, 5×, 10×, …).
TIMES_SUBS = (1.0, 2.0, 3.0, 5.0)


def times_axis(axis: Axis) -> None:
    """A log axis of ratios labelled as plain multiples at 1, 2, 3 and 5 of each decade (``0.5×``, ``1×``,
    ``2×``, ``3×``, ``5×``, ``10×``; matplotlib's default labels only the decades, as ``10⁰``), the other
    integer multiples as unlabelled minor ticks."""
    axis.set_major_locator(LogLocator(base=10, subs=TIMES_SUBS))
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}×"))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(s for s in range(2, 10) if s not in TIMES_SUBS)))
    axis.set_minor_formatter(NullFormatter())


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
#: Where a value's label may go, in points from its marker: above or below its row (never into a neighbour row),
#: shifted sideways in turn until it overlaps no other label and stays inside the panel.
LABEL_DY = (5, -11)
LABEL_DX = (0, 9, -9, 18, -18, 30, -30, 45, -45, 60, -60)
#: Values whose markers lie closer than this (points) share one label ("2, 4"), never two labels that touch.
MERGE_PT = 14.0


def _clusters(ax: plt.Axes, points: Sequence[tuple[float, float, str, bool, float]]
              ) -> list[tuple[float, float, str, bool]]:
    """A row's (x, y, text, below, sort key) points merged where their markers are within :data:`MERGE_PT` on
    screen: one (x, y, "a, b", below) per cluster, its values in ``sort key`` order, at the cluster's middle."""
    to_px = ax.transData.transform
    pt = ax.figure.dpi / 72.0
    groups: list[list[tuple[float, float, str, bool, float]]] = []
    for row in dict.fromkeys(p[1] for p in points):  # one knob's row at a time
        pts = sorted((p for p in points if p[1] == row), key=lambda p: to_px((p[0], p[1]))[0])
        groups.append([pts[0]])
        for p in pts[1:]:
            if to_px((p[0], p[1]))[0] - to_px((groups[-1][-1][0], p[1]))[0] < MERGE_PT * pt:
                groups[-1].append(p)
            else:
                groups.append([p])
    out = []
    for g in groups:
        xs = [to_px((p[0], p[1]))[0] for p in g]
        x = ax.transData.inverted().transform(((min(xs) + max(xs)) / 2, to_px((g[0][0], g[0][1]))[1]))[0]
        text = ", ".join(dict.fromkeys(p[2] for p in sorted(g, key=lambda p: p[4])))
        out.append((float(x), g[0][1], text, g[0][3]))
    return out


def _place_labels(fig: plt.Figure, ax: plt.Axes, points: Sequence[tuple[float, float, str, bool, float]]) -> None:
    """Each cluster of :func:`_clusters` annotated at the first spot (:data:`LABEL_DY` × :data:`LABEL_DX`, below
    first if ``below``) whose box overlaps no label already placed in ``ax`` and lies inside it."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # NOTE: the Agg canvas every figure here has
    frame = ax.get_window_extent(renderer)
    placed: list[Any] = []
    for x, y, text, below in _clusters(ax, points):
        dys = LABEL_DY[::-1] if below else LABEL_DY
        spots = [(dx, dy) for dy in dys for dx in LABEL_DX]
        for off in spots:
            a = ax.annotate(text, (x, y), textcoords="offset points", xytext=off, ha="center", fontsize=6.5,
                            bbox=dict(boxstyle="square,pad=0.05", facecolor="white", edgecolor="none", alpha=0.8))
            box = a.get_window_extent(renderer)
            fits = frame.x0 <= box.x0 and box.x1 <= frame.x1 and not any(box.overlaps(b) for b in placed)
            if fits or off == spots[-1]:
                placed.append(box)
                break
            a.remove()


def sensitivity_figure(gains: pd.DataFrame, id_cols: Sequence[str], warranty_years: float) -> plt.Figure:
    """One knob at a time around the paper's setting (``gains``: :func:`lachesis.evaluation.sensitivity.gains`): a
    panel per cell (``id_cols``) and metric, a row per knob, each value a dot labelled in words
    (:mod:`lachesis.evaluation.knobs`'s name table; values whose dots touch share a label); filled where every
    policy meets the SLO."""
    from lachesis.evaluation.knobs import KNOBS, knob_label, value_label
    from lachesis.plotting import WARRANTY_STYLE, workload_label

    ids = list(gains[list(id_cols)].drop_duplicates().itertuples(index=False))
    order = [k for k in KNOBS if k in set(gains["knob"])]
    n_m = len(SENSITIVITY_METRICS)
    fig, axes = plt.subplots(n_m, len(ids), figsize=(4.3 * len(ids), 0.5 * len(order) * n_m + 1.6),
                             squeeze=False, sharey=True)
    pending = []
    for j, cid in enumerate(ids):
        d = gains[np.logical_and.reduce([gains[c].eq(v) for c, v in zip(id_cols, cid)])]
        base = d[d["knob"].eq("paper")].iloc[0]
        for i, (col, label, log) in enumerate(SENSITIVITY_METRICS):
            ax = axes[i][j]
            points = []
            for y, k in enumerate(order):
                e = d[d["knob"].eq(k)]
                x = e[col].to_numpy(float)
                if not np.isfinite(x).any():
                    continue
                ax.plot([np.nanmin([*x, base[col]]), np.nanmax([*x, base[col]])], [y, y], color="0.85", lw=7,
                        solid_capstyle="butt", zorder=1)
                dflt = KNOBS[k].default
                for n, (xv, v, met) in enumerate(zip(x, e["value"], e["all_meet_slo"].astype(bool))):
                    below = not isinstance(dflt, str) and float(v) < dflt
                    c = OTHER if isinstance(dflt, str) else (LOWER if below else HIGHER)
                    ax.plot(xv, y, "o", color=c, mfc=c if met else "white", ms=5, zorder=3)
                    if np.isfinite(xv):
                        points.append((xv, y, value_label(v), below, n if isinstance(dflt, str) else float(v)))
            pending.append((ax, points))
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
    for ax, points in pending:  # after the layout: label boxes are measured where they will be drawn
        _place_labels(fig, ax, points)
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
