"""Explorer of the cached evaluation: one selection's lifetimes, gains, write composition and N*, over seeds.

A *selection* is a cell (workload, model, SLO, memory configuration), a policy and the seeds to show.
:func:`view` reads what the sweep cache holds for it — the Figs. 9–12 grid rows (every grid policy at
HBM-first's N*, each seed after the first at the first seed's load), each policy's own N* when it was
searched, the gain-versus-load runs at fractions of N* and the sensitivity study of the cell (both at
the first seed) — through the cache-only readers (:func:`lachesis.sweep.cached_results`,
:func:`lachesis.sensitivity.cached`), so nothing is simulated.  Every number over seeds is shown as
the median with its min–max.  What the cache lacks is listed with the command that computes it
(:func:`command`, ``lachesis explore``), which runs :func:`compute`: the same sweep functions the
notebooks run, into the same cache.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from lachesis import evaluation, sensitivity, sweep
from lachesis.capacity import SEARCH_PRESETS, SearchParams
from lachesis.config import SLOS, Endurance
from lachesis.gains import load_gains
from lachesis.grid import (CONFIG_LABELS, LOAD_POLICY, MODEL_NAMES, MULTI_WORKLOADS, SINGLE_WORKLOADS, Point,
                           grid_policies, is_clairvoyant, load_at, seed_list)
from lachesis.knobs import STUDY
from lachesis.plotting import (CLASS_STYLE, LIFETIME_AXIS, NSTAR_STYLE, nstar_key, policy_color, save_figure,
                               warranty_key, warranty_line)
from lachesis.policies import POLICIES, get_policy

PARTS = ("grid", "load", "sensitivity")


@dataclass(frozen=True)
class Selection:
    """What the user picked, and the corpus, seeds and search preset the cache was built with.

    ``seeds``: one seed or several (stored sorted); the lowest sized the cell's load, as in the grid."""

    workload: str = "multi_agent"
    model: str = "Llama-4-Maverick"
    slo: str = "tight"
    memory: str = "1/7"
    policy: str = "lachesis"
    scale: float = 1.0
    seeds: tuple[int, ...] | int = (0,)
    search: str = "paper"

    def __post_init__(self) -> None:
        if self.search not in SEARCH_PRESETS:
            raise ValueError(f"explorer: search must be one of {list(SEARCH_PRESETS)}, got {self.search!r}")
        for k, allowed in choices().items():
            if k != "policy" and getattr(self, k) not in allowed:
                raise ValueError(f"explorer: {k} must be one of {list(allowed)}, got {getattr(self, k)!r}")
        get_policy(self.policy)  # a registered name, possibly with knobs: a one-line error otherwise
        object.__setattr__(self, "seeds", tuple(sorted(seed_list("explorer", self.seeds))))

    @property
    def params(self) -> SearchParams:
        return SEARCH_PRESETS[self.search]

    def points(self, policies: Sequence[str] | None = None, seeds: Sequence[int] | None = None) -> list[Point]:
        """The cell's points: ``policies`` (default: the grid's, :func:`lachesis.grid.grid_policies`, and
        the selected one) at ``seeds`` (default: every selected seed)."""
        pols = policies if policies is not None else (*grid_policies(self.workload), self.policy)
        return [Point(self.workload, self.memory, self.model, self.slo, p, self.scale, k)
                for k in (seeds if seeds is not None else self.seeds) for p in dict.fromkeys(pols)]

    def curve_points(self) -> list[Point]:
        """The load curve's points: the paper's policies of the family (as ``gain_vs_load`` runs them) and
        the selected one, at the first seed."""
        return self.points((*sensitivity.policies(self.workload), self.policy), self.seeds[:1])

    def study_points(self) -> list[Point]:
        """The sensitivity study's points (:func:`lachesis.sensitivity.policies`), at the first seed."""
        return self.points(sensitivity.policies(self.workload), self.seeds[:1])


@dataclass
class View:
    """Everything the cache holds for a selection, and what it lacks (``missing``: part -> lines)."""

    selection: Selection
    grid: pd.DataFrame
    own: pd.DataFrame
    curve: pd.DataFrame
    sensitivity: pd.DataFrame
    missing: dict[str, list[str]] = field(default_factory=dict)


def view(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = STUDY
         ) -> View:
    """Read a selection from the cache (``fractions`` of N* for the load curve, ``knobs`` of the study)."""
    pts, cache = sel.points(), str(cache_dir)
    grid, miss = sweep.cached_results(pts, cache, sel.params)
    own = pd.DataFrame([dict(policy=p.policy, n_star=e["n_star"]) for p in sel.points(seeds=sel.seeds[:1])
                        if not is_clairvoyant(p.policy)
                        and (e := sweep.cached_entry(p, cache, sel.params)) is not None])
    missing = {"grid": [f"{p.label()} {p.policy} seed {p.seed}" for p in miss]}
    first = grid[grid["seed"].eq(sel.seeds[0])] if not grid.empty else grid
    curve, lack = _curve(sel.curve_points(), first, cache, sel.params, fractions)
    missing["load"] = lack
    sens, lack = sensitivity.cached([sel.study_points()], knobs, None, sel.params, cache)
    missing["sensitivity"] = lack
    return View(sel, grid, own, curve, sens, {k: v for k, v in missing.items() if v})


def _curve(pts: list[Point], grid: pd.DataFrame, cache: str, params: SearchParams,
           fractions: Sequence[float]) -> tuple[pd.DataFrame, list[str]]:
    if not len(fractions):
        return pd.DataFrame(), []
    if grid.empty:
        return pd.DataFrame(), [f"{pts[0].label()}: N* (the grid row) first"]
    n_star = int(grid["n_star"].iloc[0])
    rows, lack = [], []
    for f in sorted({float(x) for x in fractions} | {1.0}):
        n = load_at(f, n_star)
        for p in pts:
            if n == n_star:
                r = grid[grid["policy"].eq(p.policy)].to_dict("records")
                r = r[0] if r else None
            else:
                r = sweep.cached_entry(p, cache, params, n)
            if r is None:
                lack.append(f"{p.label()} {p.policy} at {n} sessions/GPU ({f:g} × N*)")
            else:
                rows.append(dict(r, fraction=f, n_star=n_star))
    return sweep.results_frame(rows), lack


# ------------------------------------------------------------------------------------------------
# What a view shows
# ------------------------------------------------------------------------------------------------


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
    out = evaluation.seed_table(g, cols, by=["policy"])
    first = g[g["seed"].eq(g["seed"].min())].set_index("policy")
    by = g.groupby("policy", sort=False)
    out.insert(1, "n_star", out["policy"].map(first["n_star"]))
    out.insert(2, "n_sessions", out["policy"].map(first["n_sessions"]))
    out.insert(3, "slo_met_seeds", out["policy"].map(by["slo_met"].apply(lambda x: int(x.astype(bool).sum()))))
    if not v.own.empty:
        out = out.merge(v.own.rename(columns={"n_star": "own_n_star"}), on="policy", how="left")
    out["outlasts_warranty"] = out["lifetime_years"] >= Endurance().warranty_years
    out["selected"] = out["policy"].eq(v.selection.policy)
    return out


def composition(v: View) -> pd.DataFrame:
    """Write bytes by segment class and tier, % of each policy's run, mean over seeds (Figs. 10 and 12)."""
    if v.grid.empty:
        return pd.DataFrame()
    return evaluation.write_composition(v.grid).pivot_table(index=["policy", "seg_class"], columns="tier", values="pct",
                                                       aggfunc="mean", sort=False).reset_index()


def curve_table(v: View) -> pd.DataFrame:
    """Lifetime per policy and the gains over HBM-first at each cached load of the cell."""
    if v.curve.empty:
        return pd.DataFrame()
    return load_gains(v.curve).merge(
        v.curve.pivot_table(index="n_sessions", columns="policy", values="lifetime_years", aggfunc="first")
        .add_prefix("years_").reset_index(), on="n_sessions")


def sensitivity_table(v: View) -> pd.DataFrame:
    """The cell's sensitivity study (:func:`lachesis.sensitivity.gains`), whatever part of it is cached."""
    if v.sensitivity.empty or "n_star" not in v.sensitivity:
        return pd.DataFrame()
    return sensitivity.gains(v.sensitivity).drop(columns="variant")


def command(sel: Selection, cache_dir: str | Path, parts: Sequence[str], fractions: Sequence[float] = (),
            knobs: Sequence[str] = STUDY) -> str:
    """The shell command (``lachesis explore``, through this interpreter) that computes ``parts`` of a
    selection into ``cache_dir``, from any folder."""
    args = [sys.executable or "python", "-m", "lachesis", "explore", "--cache-dir", str(Path(cache_dir).resolve()),
            "--search", sel.search, "--scale", f"{sel.scale:g}", "--seeds", ",".join(map(str, sel.seeds)),
            "--workload", sel.workload, "--model", sel.model, "--slo", sel.slo, "--memory", sel.memory,
            "--policy", sel.policy, "--parts", ",".join(parts)]
    if "load" in parts and len(fractions):
        args += ["--fractions", ",".join(f"{f:g}" for f in fractions)]
    if "sensitivity" in parts:
        args += ["--knobs", ",".join(knobs)]
    return shlex.join(args)


def compute(sel: Selection, cache_dir: str | Path, parts: Sequence[str] = PARTS, fractions: Sequence[float] = (),
            knobs: Sequence[str] = STUDY, n_jobs: int | None = None, progress: bool = True) -> None:
    """Run what ``parts`` of a selection need, into ``cache_dir``, with the notebooks' own sweep functions."""
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"explorer: unknown part {bad[0]!r}; expected some of {list(PARTS)}")
    cache = str(cache_dir)
    if "grid" in parts:
        sweep.run_grid(sel.points(), sel.params, cache, n_jobs, progress=progress)
    if "load" in parts and len(fractions):
        sweep.load_curve(sel.curve_points(), [float(f) for f in fractions], sel.params, cache, n_jobs,
                         progress=progress)
    if "sensitivity" in parts:
        sensitivity.run([sel.study_points()], knobs, params=sel.params, cache_dir=cache, n_jobs=n_jobs,
                        progress=progress)


def missing_text(v: View, cache_dir: str | Path, fractions: Sequence[float] = (),
                 knobs: Sequence[str] = STUDY) -> str:
    """Markdown: which points the cache lacks, per part, and the command that computes them."""
    if not v.missing:
        return "Everything shown was read from the cache; nothing is missing."
    lines = []
    for part, what in v.missing.items():
        lines.append(f"- **{part}**: {len(what)} missing, e.g. {'; '.join(what[:3])}")
    cmd = command(v.selection, cache_dir, list(v.missing), fractions, knobs)
    return "\n".join(["Not in the cache (nothing was simulated for them):", *lines, "", "Compute them with:", "",
                      f"```\n{cmd}\n```"])


def require_cell(v: View | None, sel: Selection, cache_dir: str | Path) -> View:
    """``v`` when the cache gave the selected policy's grid row(s); else a ValueError saying, in one line, that
    the cache holds nothing to show for this cell and the command that computes it (what the explorer
    notebook ends with on an empty cache, instead of a KeyError in a table of no rows)."""
    what = f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}, {sel.policy}, seeds {','.join(map(str, sel.seeds))}"
    if v is None:
        raise ValueError(f"explorer: {what}: the cache {cache_dir} could not be read (the reason is printed above)")
    if v.grid.empty or not v.grid["policy"].eq(sel.policy).any():
        held = "nothing" if v.grid.empty else f"no {sel.policy} row (only {', '.join(sorted(set(v.grid['policy'])))})"
        raise ValueError(f"explorer: {what}: the cache {cache_dir} holds {held} for this cell, so there is nothing "
                         f"to show; compute it with: {command(sel, cache_dir, ['grid'])}  (or run the notebook with "
                         "compute: grid)")
    return v


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
    if not r["n_sessions"] or not np.isfinite(r["lifetime_years"]):
        return f"The SLO admits no load at this cell (N* = {int(r['n_star'])}): no lifetime."
    name = sensitivity.pol_name
    over = s.set_index("policy")
    gains = ", ".join(f"{_interval(o, 'selected_over', unit='×')} {name(p)}" for p, o in over.iterrows()
                      if p != sel.policy and "selected_over" in o and np.isfinite(o["selected_over"]))
    seeds = f"seed {sel.seeds[0]}" if len(sel.seeds) == 1 else \
        f"the median over seeds {', '.join(map(str, sel.seeds))} (min–max in brackets)"
    own = f"; its own N* is {int(r['own_n_star'])}" if "own_n_star" in r and np.isfinite(r["own_n_star"]) else ""
    return (f"At {int(r['n_sessions'])} sessions per GPU (N* of {name(LOAD_POLICY)} at seed {sel.seeds[0]}), "
            f"{name(sel.policy)} lasts {_interval(r, 'lifetime_years')} device-years"
            + (f", {gains}" if gains else "") + f" ({seeds}); it meets the SLO there at {int(r['slo_met_seeds'])} "
            f"of {int(r['seeds'])} seeds{own}; its median "
            f"{'outlasts' if r['outlasts_warranty'] else 'does not outlast'} the "
            f"{Endurance().warranty_years:g}-year warranty.")


def figure(v: View) -> Any:
    """Device-years per policy, write composition, and (when cached) lifetime against sessions per GPU."""
    from matplotlib.figure import Figure


    s = summary(v)
    if s.empty:
        return None
    n = 3 if not v.curve.empty else 2
    # a Figure of its own, not pyplot's: drawn the same whether the kernel runs a cell or a widget's callback
    fig = Figure(figsize=(4.6 * n, 3.6), dpi=100)
    ax = fig.subplots(1, n)
    names = [sensitivity.pol_name(p) for p in s["policy"]]
    colors = [policy_color(p) for p in s["policy"]]
    err = np.vstack([s["lifetime_years"] - s["lifetime_years_min"], s["lifetime_years_max"] - s["lifetime_years"]])
    bars = ax[0].bar(names, s["lifetime_years"], color=colors, yerr=np.nan_to_num(err), capsize=3, ecolor="0.3")
    for b, chosen in zip(bars, s["selected"]):  # the selected policy: outlined
        b.set_edgecolor("k" if chosen else "none")
        b.set_linewidth(1.6 if chosen else 0)
    warranty_line(ax[0], Endurance().warranty_years)
    ax[0].legend(handles=[warranty_key(Endurance().warranty_years)], fontsize=7, loc="upper right")
    ax[0].set_ylabel(LIFETIME_AXIS)
    seeds = v.selection.seeds
    ax[0].set_title(f"at {int(s['n_sessions'].iloc[0])} sessions/GPU"
                    + (f"; median, min–max over {len(seeds)} seeds" if len(seeds) > 1 else ""), fontsize=9)
    c = composition(v)
    if not c.empty:
        bottom = np.zeros(len(s))
        for i, cls in enumerate(dict.fromkeys(c["seg_class"])):
            for tier in [t for t in ("hbm", "hbf") if t in c]:
                vals = np.array([c.loc[c["policy"].eq(p) & c["seg_class"].eq(cls), tier].sum() for p in s["policy"]])
                ax[1].bar(names, vals, bottom=bottom, label=f"{CLASS_STYLE.get(cls, {}).get('label', cls)} → "
                          f"{tier.upper()}", color=CLASS_STYLE.get(cls, {}).get("color", f"C{i}"),
                          alpha=1.0 if tier == "hbm" else 0.45, hatch="" if tier == "hbm" else "//", edgecolor="white")
                bottom += np.nan_to_num(vals)
        ax[1].set_ylabel("% of KV write bytes" + (" (mean over seeds)" if len(seeds) > 1 else ""))
        ax[1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for a in ax[:2]:
        a.tick_params(axis="x", labelsize=7, labelrotation=30)
        for t in a.get_xticklabels():
            t.set_horizontalalignment("right")
    if n == 3:
        for pol, d in v.curve.groupby("policy"):
            d = d.sort_values("n_sessions")
            ax[2].plot(d["n_sessions"], d["lifetime_years"], "o-", color=policy_color(pol),
                       label=sensitivity.pol_name(pol))
        ax[2].axvline(int(s["n_star"].iloc[0]), **NSTAR_STYLE)
        warranty_line(ax[2], Endurance().warranty_years)
        ax[2].set_xlabel("load (concurrent sessions per GPU)")
        ax[2].set_ylabel(LIFETIME_AXIS)
        handles = ax[2].get_legend_handles_labels()[0] + [nstar_key(), warranty_key(Endurance().warranty_years)]
        ax[2].legend(handles=handles, fontsize=7)
    sel = v.selection
    fig.suptitle(f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}, seed{'s' if len(seeds) > 1 else ''} "
                 f"{', '.join(map(str, seeds))}", fontsize=10)
    fig.tight_layout()
    return fig


def show(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = STUDY,
         out_dir: str | Path | None = None) -> View | None:
    """Display a selection in a notebook: headline, tables, figure (saved under ``out_dir``), what is missing."""
    from IPython.display import Image, Markdown, display


    sel_txt = f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}, {sel.policy}"
    try:
        v = view(sel, cache_dir, fractions, knobs)
    except (ValueError, KeyError) as e:
        display(Markdown(f"**{sel_txt}**: {e}"))
        return None
    display(Markdown(f"### {sel_txt}\n\n{headline(v)}"))
    over = f", median and min–max over seeds {', '.join(map(str, sel.seeds))}" if len(sel.seeds) > 1 else ""
    for title, table in ((f"Every policy at the cell's load{over}", summary(v)),
                         (f"Write composition (% of each run's KV write bytes{over and ', mean over seeds'})",
                          composition(v)),
                         (f"Lifetime against sessions per GPU (seed {sel.seeds[0]})", curve_table(v)),
                         (f"Sensitivity at the cell's fixed load (seed {sel.seeds[0]})", sensitivity_table(v))):
        if not table.empty:
            display(Markdown(f"**{title}**"))
            display(table)
    fig = figure(v)
    if fig is not None:
        if out_dir is not None:
            png = save_figure(fig, out_dir, "explorer")[0]
            display(Image(filename=str(png)))
        else:
            display(fig)
    display(Markdown(missing_text(v, cache_dir, fractions, knobs)))
    return v


# ------------------------------------------------------------------------------------------------
# Widgets (JupyterLab): dropdowns for the selection, the same display underneath
# ------------------------------------------------------------------------------------------------


def choices() -> dict[str, tuple[str, ...]]:
    """The values each dropdown offers (a selection's values must be among them; a policy may carry knobs)."""

    return dict(workload=MULTI_WORKLOADS + SINGLE_WORKLOADS, model=MODEL_NAMES, slo=tuple(SLOS),
                memory=CONFIG_LABELS, policy=tuple(POLICIES))


def widget(initial: Selection, show: Any) -> Any:
    """Dropdowns for workload, model, SLO, memory and policy; a change renders ``show(selection)`` below them.

    Nothing is rendered until a dropdown changes (the notebook shows the initial selection above): a
    headless run (papermill, nbval) then sends no output into the widget, which its clients need not handle.
    """
    import ipywidgets as w

    drops = {k: w.Dropdown(options=v, value=getattr(initial, k), description=k) for k, v in choices().items()}
    out = w.Output()

    def redraw(_: Any = None) -> None:
        out.clear_output()
        with out:
            show(replace(initial, **{k: d.value for k, d in drops.items()}))

    for d in drops.values():
        d.observe(redraw, names="value")
    box = w.VBox([w.HBox(list(drops.values())[:3]), w.HBox(list(drops.values())[3:]), out])
    box.redraw = redraw  # for tests and scripts: render the current selection
    return box
