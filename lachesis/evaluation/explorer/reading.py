"""A selection read without simulating: the sweep cache first, then the committed results for what it lacks
(the grid cell over seeds, each policy's own N*, the load curve, the sensitivity study), and what neither holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from lachesis.evaluation import sensitivity, sweep, tables
from lachesis.evaluation.explorer.figure_files import Committed, _grid_from_figures, _setting_note, _study_from_figures
from lachesis.evaluation.explorer.selection import STUDY, Selection, View, cache_folder, study_knobs
from lachesis.evaluation.grid import CELL, LOAD_POLICY, Point, is_clairvoyant, load_at
from lachesis.node.capacity import SearchParams


def view(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = STUDY,
         store: Committed | None = None) -> View:
    """Read a selection from the cache and, for what it lacks, from the committed results ``store``
    (``fractions`` of N* for the load curve, ``knobs`` of the study, :func:`study_knobs`); nothing is simulated."""
    knobs = study_knobs(knobs)
    pts, cache = sel.points(), cache_folder(cache_dir)
    grid, miss = sweep.cached_results(pts, cache, sel.params, load=sel.load)
    sources = {"grid": f"the sweep cache {cache}"}
    composition = tables.write_composition(grid) if not grid.empty else pd.DataFrame()
    if miss and store is not None:
        got, still = _grid_from_figures(sel, store)
        if len(still) < len(miss):
            grid, miss, sources["grid"] = got, still, store.where("grid") + _setting_note(got)
            composition = store.rows("composition", sel)
            composition = composition[composition["policy"].isin(set(grid["policy"]))] if not composition.empty \
                else composition
            if composition.empty:  # the committed grids keep the tier totals only
                composition = grid.assign(seg_class="all", hbm=grid["bytes_hbm"], hbf=grid["bytes_hbf"]).melt(
                    id_vars=CELL + ["policy", "seed", "seg_class"], value_vars=["hbm", "hbf"], var_name="tier",
                    value_name="bytes")
                composition["pct"] = 100 * composition["bytes"] / composition.groupby(["policy", "seed"])[
                    "bytes"].transform("sum")
    own = pd.DataFrame([dict(policy=p.policy, n_star=e["n_star"]) for p in sel.points(seeds=sel.seeds[:1])
                        if not is_clairvoyant(p.policy)
                        and (e := sweep.cached_entry(p, cache, sel.params)) is not None])
    missing = {"grid": [f"{p.label()} {p.policy} seed {p.seed}" for p in miss]}
    first = grid[grid["seed"].eq(sel.seeds[0])] if not grid.empty else grid
    # the load curve is at fractions of the cell's own N* (HBM-first's search there, as gain_vs_load runs it)
    own_star = own.loc[own["policy"].eq(LOAD_POLICY), "n_star"] if not own.empty else pd.Series(dtype=int)
    curve, lack = _curve(sel.curve_points(), first, cache, sel.params, fractions,
                         n_star=int(own_star.iloc[0]) if len(own_star) else None)
    if lack and store is not None and not first.empty:
        table = store.rows("curve", replace(sel, seeds=sel.seeds[:1]))
        star = int(table["n_star"].iloc[0]) if not table.empty and "n_star" in table else None
        got, lack2 = _curve(sel.curve_points(), first, cache, sel.params, fractions, table, n_star=star)
        if len(lack2) < len(lack):
            curve, lack, sources["load"] = got, lack2, store.where("curve")
    elif len(fractions):
        sources["load"] = f"the sweep cache {cache}"
    missing["load"] = lack
    runs, lack = sensitivity.cached([sel.study_points()], knobs, None, sel.params, cache) if len(knobs) else (
        pd.DataFrame(), [])
    sens = sensitivity.gains(runs).drop(columns="variant") if not runs.empty and "n_star" in runs else pd.DataFrame()
    if lack and store is not None:
        got, lack2 = _study_from_figures(sel, store, knobs)
        if len(lack2) < len(lack):
            sens, lack, sources["sensitivity"] = got, lack2, store.where("sensitivity")
    missing["sensitivity"] = lack
    return View(sel, grid, own, curve, sens, {k: v for k, v in missing.items() if v}, composition, sources)


def _curve(pts: list[Point], grid: pd.DataFrame, cache: str, params: SearchParams, fractions: Sequence[float],
           table: pd.DataFrame | None = None, n_star: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The load curve's rows at ``fractions`` of ``n_star`` (the cell's own N*; by default the grid's load) and at
    N* itself, from the cache or, given ``table`` (the committed runs of the cell), from it; a run at the grid's
    load is the grid row."""
    if not len(fractions):
        return pd.DataFrame(), []
    if grid.empty:
        return pd.DataFrame(), [f"{pts[0].label()}: N* (the grid row) first"]
    grid_n = int(grid["n_star"].iloc[0])
    n_star = grid_n if n_star is None else n_star
    rows, lack = [], []
    for f in sorted({float(x) for x in fractions} | {1.0}):
        n = load_at(f, n_star)
        for p in pts:
            r: Mapping[str, Any] | None = None
            if table is not None and not table.empty:
                found = table[table["policy"].eq(p.policy) & table["n_sessions"].eq(n)].to_dict("records")
                r = dict(found[0], seed=p.seed) if found else None
            elif table is None and n != grid_n:
                r = sweep.cached_entry(p, cache, params, n)
                if r is None and n == n_star and p.policy == LOAD_POLICY:  # the search's own run at its N*
                    r = sweep.cached_entry(p, cache, params)
            if r is None and n == grid_n:
                found = grid[grid["policy"].eq(p.policy)].to_dict("records")
                r = found[0] if found else None
            if r is None:
                lack.append(f"{p.label()} {p.policy} at {n} sessions/GPU ({f:g} × N*)")
            else:
                rows.append(dict(r, fraction=f, n_star=n_star))
    return sweep.results_frame(rows), lack

