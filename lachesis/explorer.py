"""Explorer of the cached evaluation: one selection's lifetimes, gains, write composition and N*.

A *selection* is a cell (workload, model, SLO, memory configuration) and a policy.  :func:`view`
reads what the sweep cache holds for it — the Figs. 9–12 grid row (every policy at HBM-first's N*),
each policy's own N* when it was searched, the gain-versus-load runs at fractions of N*, and the
sensitivity study of the cell — through the cache-only readers (:func:`lachesis.sweep.cached_results`,
:func:`lachesis.sensitivity.cached`), so nothing is simulated.  What the cache lacks is listed with
the command that computes it (:func:`command`, ``python -m lachesis.explorer``), which runs the
same sweep functions the notebooks run, into the same cache.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from lachesis import sensitivity, sweep
from lachesis.config import SLOS, Endurance
from lachesis.knobs import KNOBS

PARTS = ("grid", "load", "sensitivity")


@dataclass(frozen=True)
class Selection:
    """What the user picked, and the corpus and search preset the cache was built with."""

    workload: str = "multi_agent"
    model: str = "Llama-4-Maverick"
    slo: str = "tight"
    memory: str = "1/7"
    policy: str = "lachesis"
    scale: float = 1.0
    seed: int = 0
    search: str = "paper"

    def __post_init__(self) -> None:
        if self.search not in sweep.SEARCH_PRESETS:
            raise ValueError(f"explorer: search must be one of {list(sweep.SEARCH_PRESETS)}, got {self.search!r}")
        if self.slo not in SLOS:
            raise ValueError(f"explorer: slo must be one of {list(SLOS)}, got {self.slo!r}")

    @property
    def params(self) -> sweep.SearchParams:
        return sweep.SEARCH_PRESETS[self.search]

    def points(self) -> list[sweep.Point]:
        """The cell's grid policies (Figs. 9–12) and the selected one."""
        grid = sweep.MULTI_POLICIES if self.workload in sweep.MULTI_WORKLOADS else sweep.SINGLE_POLICIES
        return [sweep.Point(self.workload, self.memory, self.model, self.slo, p, self.scale, self.seed)
                for p in dict.fromkeys((*grid, self.policy))]


@dataclass
class View:
    """Everything the cache holds for a selection, and what it lacks (``missing``: part -> lines)."""

    selection: Selection
    grid: pd.DataFrame
    own: pd.DataFrame
    curve: pd.DataFrame
    sensitivity: pd.DataFrame
    missing: dict[str, list[str]] = field(default_factory=dict)


def view(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = tuple(KNOBS)
         ) -> View:
    """Read a selection from the cache (``fractions`` of N* for the load curve, ``knobs`` of the study)."""
    pts, cache = sel.points(), str(cache_dir)
    grid, miss = sweep.cached_results(pts, cache, sel.params)
    own = pd.DataFrame([dict(policy=p.policy, n_star=e["n_star"]) for p in pts
                        if (e := sweep.cached_entry(p, cache, sel.params)) is not None])
    missing = {"grid": [f"{p.label()} {p.policy}" for p in miss]}
    curve, lack = _curve(pts, grid, cache, sel.params, fractions)
    missing["load"] = lack
    sens, lack = sensitivity.cached([pts], knobs, None, sel.params, cache)
    missing["sensitivity"] = lack
    return View(sel, grid, own, curve, sens, {k: v for k, v in missing.items() if v})


def _curve(pts: list[sweep.Point], grid: pd.DataFrame, cache: str, params: sweep.SearchParams,
           fractions: Sequence[float]) -> tuple[pd.DataFrame, list[str]]:
    if not len(fractions):
        return pd.DataFrame(), []
    if grid.empty:
        return pd.DataFrame(), [f"{pts[0].label()}: N* (the grid row) first"]
    n_star = int(grid["n_star"].iloc[0])
    rows, lack = [], []
    for f in sorted({float(x) for x in fractions} | {1.0}):
        n = sensitivity.load_at(f, n_star)
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


def summary(v: View) -> pd.DataFrame:
    """One row per policy of the cell: N* (the cell's and its own), load, SLO, device-years, gains, HBM share."""
    g = v.grid
    if g.empty:
        return pd.DataFrame()
    years = g.set_index("policy")["lifetime_years"]
    out = g[["policy", "n_star", "n_sessions", "slo_met", "lifetime_years"]].copy()
    if not v.own.empty:
        out = out.merge(v.own.rename(columns={"n_star": "own_n_star"}), on="policy", how="left")
    for den in ("hbm_first", "deterministic"):
        if den in years:
            out[f"over_{den}"] = out["lifetime_years"] / years[den]
    out["outlasts_warranty"] = out["lifetime_years"] >= Endurance().warranty_years
    if {"bytes_hbm", "bytes_hbf"} <= set(g):
        out["hbm_share_of_writes"] = (g["bytes_hbm"] / (g["bytes_hbm"] + g["bytes_hbf"])).to_numpy()
    out["selected"] = out["policy"].eq(v.selection.policy)
    return out


def composition(v: View) -> pd.DataFrame:
    """Write bytes by segment class and tier, % of each policy's run (Figs. 10 and 12)."""
    if v.grid.empty:
        return pd.DataFrame()
    return sweep.write_composition(v.grid).pivot_table(index=["policy", "seg_class"], columns="tier", values="pct",
                                                       aggfunc="first").reset_index()


def curve_table(v: View) -> pd.DataFrame:
    """Lifetime per policy and the gains over HBM-first at each cached load of the cell."""
    if v.curve.empty:
        return pd.DataFrame()
    return sweep.load_gains(v.curve).merge(
        v.curve.pivot_table(index="n_sessions", columns="policy", values="lifetime_years", aggfunc="first")
        .add_prefix("years_").reset_index(), on="n_sessions")


def sensitivity_table(v: View) -> pd.DataFrame:
    """The cell's sensitivity study (:func:`lachesis.sensitivity.gains`), whatever part of it is cached."""
    if v.sensitivity.empty or "n_star" not in v.sensitivity:
        return pd.DataFrame()
    return sensitivity.gains(v.sensitivity).drop(columns="variant")


def command(sel: Selection, cache_dir: str | Path, parts: Sequence[str], fractions: Sequence[float] = (),
            knobs: Sequence[str] = tuple(KNOBS)) -> str:
    """The shell command that computes ``parts`` of a selection into ``cache_dir`` (run from anywhere)."""
    args = [sys.executable or "python", "-m", "lachesis.explorer", "--cache-dir", str(Path(cache_dir).resolve()),
            "--search", sel.search, "--scale", f"{sel.scale:g}", "--seed", str(sel.seed),
            "--workload", sel.workload, "--model", sel.model, "--slo", sel.slo, "--memory", sel.memory,
            "--policy", sel.policy, "--parts", ",".join(parts)]
    if "load" in parts and len(fractions):
        args += ["--fractions", ",".join(f"{f:g}" for f in fractions)]
    if "sensitivity" in parts:
        args += ["--knobs", ",".join(knobs)]
    return shlex.join(args)


def compute(sel: Selection, cache_dir: str | Path, parts: Sequence[str] = PARTS, fractions: Sequence[float] = (),
            knobs: Sequence[str] = tuple(KNOBS), n_jobs: int | None = None, progress: bool = True) -> None:
    """Run what ``parts`` of a selection need, into ``cache_dir``, with the notebooks' own sweep functions."""
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"explorer: unknown part {bad[0]!r}; expected some of {list(PARTS)}")
    pts, cache = sel.points(), str(cache_dir)
    if "grid" in parts:
        sweep.run_grid(pts, sel.params, cache, n_jobs, progress=progress)
    if "load" in parts and len(fractions):
        sweep.load_curve(pts, [float(f) for f in fractions], sel.params, cache, n_jobs, progress=progress)
    if "sensitivity" in parts:
        sensitivity.run([pts], knobs, params=sel.params, cache_dir=cache, n_jobs=n_jobs, progress=progress)


def missing_text(v: View, cache_dir: str | Path, fractions: Sequence[float] = (),
                 knobs: Sequence[str] = tuple(KNOBS)) -> str:
    """Markdown: which points the cache lacks, per part, and the command that computes them."""
    if not v.missing:
        return "Everything shown was read from the cache; nothing is missing."
    lines = []
    for part, what in v.missing.items():
        lines.append(f"- **{part}**: {len(what)} missing, e.g. {'; '.join(what[:3])}")
    cmd = command(v.selection, cache_dir, list(v.missing), fractions, knobs)
    return "\n".join(["Not in the cache (nothing was simulated for them):", *lines, "", "Compute them with:", "",
                      f"```\n{cmd}\n```"])


def headline(v: View) -> str:
    """One sentence on the selected policy at the cell's load, computed from the cached rows."""
    s, sel = summary(v), v.selection
    row = s[s["policy"].eq(sel.policy)] if not s.empty else s
    if row.empty:
        return f"{sel.policy} at this cell is not in the cache."
    r = row.iloc[0]
    if not r["n_sessions"] or not np.isfinite(r["lifetime_years"]):
        return f"The SLO admits no load at this cell (N* = {int(r['n_star'])}): no lifetime."
    gains = ", ".join(f"{r[f'over_{d}']:.2f}× {sensitivity.pol_name(d)}" for d in ("hbm_first", "deterministic")
                      if f"over_{d}" in r and d != sel.policy and np.isfinite(r[f"over_{d}"]))
    own = f"; its own N* is {int(r['own_n_star'])}" if "own_n_star" in r and np.isfinite(r["own_n_star"]) else ""
    return (f"At {int(r['n_sessions'])} sessions per GPU (N* of {sensitivity.pol_name(sweep.LOAD_POLICY)}), "
            f"{sensitivity.pol_name(sel.policy)} lasts {r['lifetime_years']:.2f} device-years"
            + (f" ({gains})" if gains else "") + f" and {'meets' if r['slo_met'] else 'misses'} the SLO there{own}; "
            f"it {'outlasts' if r['outlasts_warranty'] else 'does not outlast'} the "
            f"{Endurance().warranty_years:g}-year warranty.")


def figure(v: View) -> Any:
    """Device-years per policy, write composition, and (when cached) lifetime against sessions per GPU."""
    import matplotlib.pyplot as plt

    from lachesis.plotting import warranty_line

    s = summary(v)
    if s.empty:
        return None
    n = 3 if not v.curve.empty else 2
    fig, ax = plt.subplots(1, n, figsize=(4.2 * n, 3.2))
    colors = ["#08519c" if x else "#9ecae1" for x in s["selected"]]
    ax[0].bar(s["policy"], s["lifetime_years"], color=colors)
    warranty_line(ax[0], Endurance().warranty_years)
    ax[0].set_ylabel("HBF lifetime (device-years)")
    ax[0].set_title(f"at {int(s['n_sessions'].iloc[0])} sessions/GPU", fontsize=9)
    c = composition(v)
    if not c.empty:
        bottom = np.zeros(len(s))
        for i, cls in enumerate(dict.fromkeys(c["seg_class"])):
            for tier in [t for t in ("hbm", "hbf") if t in c]:
                vals = np.array([c.loc[c["policy"].eq(p) & c["seg_class"].eq(cls), tier].sum() for p in s["policy"]])
                ax[1].bar(s["policy"], vals, bottom=bottom, label=f"{cls} → {tier.upper()}", color=f"C{i}",
                          alpha=1.0 if tier == "hbm" else 0.45, hatch="" if tier == "hbm" else "//", edgecolor="white")
                bottom += np.nan_to_num(vals)
        ax[1].set_ylabel("% of KV write bytes")
        ax[1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if n == 3:
        for pol, d in v.curve.groupby("policy"):
            d = d.sort_values("n_sessions")
            ax[2].plot(d["n_sessions"], d["lifetime_years"], "o-", label=sensitivity.pol_name(pol))
        ax[2].axvline(int(s["n_star"].iloc[0]), color="0.3", linestyle=":", linewidth=1.0)
        warranty_line(ax[2], Endurance().warranty_years)
        ax[2].set_xlabel("sessions per GPU")
        ax[2].set_ylabel("device-years")
        ax[2].legend(fontsize=7)
    sel = v.selection
    fig.suptitle(f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}", fontsize=10)
    fig.tight_layout()
    return fig


def show(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = tuple(KNOBS),
         out_dir: str | Path | None = None) -> View | None:
    """Display a selection in a notebook: headline, tables, figure (saved under ``out_dir``), what is missing."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, Markdown, display

    from lachesis.plotting import save_figure

    sel_txt = f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}, {sel.policy}"
    try:
        v = view(sel, cache_dir, fractions, knobs)
    except (ValueError, KeyError) as e:
        display(Markdown(f"**{sel_txt}**: {e}"))
        return None
    display(Markdown(f"### {sel_txt}\n\n{headline(v)}"))
    for title, table in (("Every policy at the cell's load", summary(v)),
                         ("Write composition (% of each run's KV write bytes)", composition(v)),
                         ("Lifetime against sessions per GPU", curve_table(v)),
                         ("Sensitivity at the cell's fixed load", sensitivity_table(v))):
        if not table.empty:
            display(Markdown(f"**{title}**"))
            display(table)
    fig = figure(v)
    if fig is not None:
        if out_dir is not None:
            png = save_figure(fig, out_dir, "explorer")[0]
            display(Image(filename=str(png)))
        plt.close(fig)
    display(Markdown(missing_text(v, cache_dir, fractions, knobs)))
    return v


# ------------------------------------------------------------------------------------------------
# Widgets (JupyterLab): dropdowns for the selection, the same display underneath
# ------------------------------------------------------------------------------------------------


def choices() -> dict[str, tuple[str, ...]]:
    """The values each dropdown offers."""
    from lachesis.policies import POLICIES

    return dict(workload=sweep.MULTI_WORKLOADS + sweep.SINGLE_WORKLOADS, model=sweep.MODEL_NAMES, slo=tuple(SLOS),
                memory=sweep.CONFIG_LABELS, policy=tuple(POLICIES))


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


# ------------------------------------------------------------------------------------------------
# Command line: compute what a selection lacks
# ------------------------------------------------------------------------------------------------


def _floats(s: str) -> list[float]:
    return [float(x) for x in sweep._csv(s)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lachesis.explorer", description=compute.__doc__)
    d = Selection()
    ap.add_argument("--cache-dir", required=True)
    for k in ("workload", "model", "slo", "memory", "policy", "search"):
        ap.add_argument(f"--{k}", default=getattr(d, k))
    ap.add_argument("--scale", type=float, default=d.scale)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--fractions", default="")
    ap.add_argument("--knobs", default=",".join(KNOBS))
    ap.add_argument("--jobs", type=int, default=None)
    a = ap.parse_args(argv)
    try:
        sel = Selection(a.workload, a.model, a.slo, a.memory, a.policy, a.scale, a.seed, a.search)
        compute(sel, a.cache_dir, sweep._csv(a.parts), _floats(a.fractions), sweep._csv(a.knobs), a.jobs)
    except (ValueError, KeyError) as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
