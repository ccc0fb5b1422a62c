"""The explorer's figure: device-years per policy and the write composition side by side, and lifetime against
load below them when the curve is there, sized for JupyterLab's output width."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lachesis.config import Endurance
from lachesis.evaluation import plots
from lachesis.evaluation.explorer.selection import Selection, View, label
from lachesis.evaluation.explorer.summaries import composition, summary
from lachesis.plotting import (
    CLASS_STYLE,
    LIFETIME_AXIS,
    NSTAR_STYLE,
    miss_overlay,
    missed_run_key,
    nstar_key,
    policy_color,
    slo_outcomes,
    warranty_key,
    warranty_line,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def sel_load_words(sel: Selection) -> str:
    """The selection's load rule in words, for a legend."""
    return {"per_deployment": "the deployment's, held from its base", "per_cell": "each cell's own N*"}.get(
        sel.load, sel.load)


#: The explorer's figure: inches wide at 100 dpi, so it shows at JupyterLab's output width unscaled (px).
FIGURE_WIDTH_PX = 900


def figure(v: View) -> Figure | None:
    """Device-years per policy and write composition side by side, and (when there) lifetime against sessions
    per GPU below them: :data:`FIGURE_WIDTH_PX` wide."""
    from matplotlib.figure import Figure

    s = summary(v)
    if s.empty:
        return None
    curve = not v.curve.empty
    # a Figure of its own, not pyplot's: drawn the same whether the kernel runs a cell or a widget's callback
    fig = Figure(figsize=(FIGURE_WIDTH_PX / 100, 3.5 * (2 if curve else 1)), dpi=100, layout="constrained")
    grid_ = fig.add_gridspec(2 if curve else 1, 2)
    ax = [fig.add_subplot(grid_[0, 0]), fig.add_subplot(grid_[0, 1])]
    if curve:
        ax.append(fig.add_subplot(grid_[1, :]))
    seeds = v.selection.seeds
    _lifetimes(ax[0], s, v)
    _composition(ax[1], s, composition(v), seeds, v.grid)
    for a in ax[:2]:
        a.tick_params(axis="x", labelsize=7, labelrotation=30)
        a.tick_params(axis="y", labelsize=7)
        for t in a.get_xticklabels():
            t.set_horizontalalignment("right")
    if curve:
        _curve(ax[2], v, int(s["n_sessions"].iloc[0]))
    sel = v.selection
    fig.suptitle(f"{label('workload', sel.workload)}, {sel.model}, {label('slo', sel.slo)} SLO, {sel.memory}; "
                 f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}", fontsize=10)
    return fig


def _lifetimes(ax: Axes, s: pd.DataFrame, v: View) -> None:
    """Device-years per policy (median, min–max whiskers; a policy that misses the SLO at any seed drawn as a miss,
    not a lifetime), the selected policy outlined, the warranty line."""
    names = [label("policy", p) for p in s["policy"]]
    keys = plots.policy_bars(ax, s, v.grid, names, v.selection.policy)
    warranty_line(ax, Endurance().warranty_years)
    ax.margins(y=0.1 + 0.08 * len(keys))  # headroom: the legend above the bars
    ax.legend(handles=[warranty_key(Endurance().warranty_years), *keys], fontsize=6.5, loc="upper right")
    seeds = v.selection.seeds
    ax.set_ylabel(LIFETIME_AXIS, fontsize=8)
    ax.set_title(f"at {int(s['n_sessions'].iloc[0])} sessions/GPU"
                 + (f"; median, min–max over {len(seeds)} seeds" if len(seeds) > 1 else ""), fontsize=9)


def _composition(ax: Axes, s: pd.DataFrame, c: pd.DataFrame, seeds: tuple[int, ...], rows: pd.DataFrame) -> None:
    """Each policy's KV write bytes stacked by segment class and tier (% of its run), when the view has them; a
    policy that misses the SLO at any seed faded and crossed out, as Figs. 10 and 12 draw it."""
    if c.empty:
        return
    names = [label("policy", p) for p in s["policy"]]
    outcomes = [slo_outcomes(rows, ["policy"]).get((p,)) for p in s["policy"]]
    faded = np.array([o is not None and not o.met for o in outcomes])
    bottom = np.zeros(len(s))
    for i, cls in enumerate(dict.fromkeys(c["seg_class"])):
        for tier in [t for t in ("hbm", "hbf") if t in c]:
            vals = np.array([c.loc[c["policy"].eq(p) & c["seg_class"].eq(cls), tier].sum() for p in s["policy"]])
            word = "all classes" if cls == "all" else CLASS_STYLE.get(cls, {}).get("label", cls)
            alpha = np.where(faded, 0.3, 1.0) * (1.0 if tier == "hbm" else 0.45)
            for k in range(len(s)):
                ax.bar([k], [vals[k]], bottom=[bottom[k]], label=f"{word} → {tier.upper()}" if k == 0 else None,
                       color=CLASS_STYLE.get(cls, {}).get("color", f"C{i}"), alpha=float(alpha[k]),
                       hatch="" if tier == "hbm" else "//", edgecolor="white")
            bottom += np.nan_to_num(vals)
    for k, o in enumerate(outcomes):
        if o is not None and not o.met:
            miss_overlay(ax, k, 0.8, bottom[k], o)
    ax.set_xticks(np.arange(len(s)), names)
    ax.set_ylabel("% of KV write bytes" + (" (mean over seeds)" if len(seeds) > 1 else ""), fontsize=8)
    ax.set_ylim(0, 130)  # room for the legend above the bars
    ax.set_yticks([0, 25, 50, 75, 100])
    handles = ax.get_legend_handles_labels()[0] + ([missed_run_key()] if faded.any() else [])
    ax.legend(handles=handles, fontsize=6.5, loc="upper center", ncol=2, frameon=False)
    ax.set_title("write composition", fontsize=9)


def _curve(ax: Axes, v: View, held: int) -> None:
    """Lifetime against sessions per GPU on a log axis, the cell's own N* and (when it differs) the grid's load."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for pol, d in v.curve.groupby("policy"):
        d = d.sort_values("n_sessions")
        ax.plot(d["n_sessions"], d["lifetime_years"], "o-", color=policy_color(pol), label=label("policy", pol))
    ax.set_yscale("log")  # lifetimes at low load run an order of magnitude above N*'s
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(labelsize=7)
    own = int(v.curve["n_star"].iloc[0])
    ax.axvline(own, **NSTAR_STYLE)  # the curve's fractions are of this cell's own N*
    extra = []
    if held != own:  # the grid's rows run at the deployment's load, held across configurations
        style: dict[str, Any] = dict(NSTAR_STYLE, linestyle="-.")
        ax.axvline(held, **style)
        extra = [Line2D([], [], label=f"the grid's load ({sel_load_words(v.selection)})", **style)]
    warranty_line(ax, Endurance().warranty_years)
    ax.set_xlabel("load (concurrent sessions per GPU)", fontsize=8)
    ax.set_ylabel(LIFETIME_AXIS, fontsize=8)
    handles = ax.get_legend_handles_labels()[0] + [nstar_key(), *extra, warranty_key(Endurance().warranty_years)]
    ax.legend(handles=handles, fontsize=7, loc="upper right")
    ax.set_title(f"lifetime against load (seed {v.selection.seeds[0]})", fontsize=9)
