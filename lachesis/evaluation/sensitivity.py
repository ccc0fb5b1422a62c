"""Sensitivity of the gains to what the paper leaves open: one knob at a time around the paper's setting.

For a few representative cells every policy the gains need runs at the cell's load (N* of HBM-first
at the paper's setting, held fixed) while one knob (:data:`lachesis.evaluation.knobs.KNOBS`) moves to each of its
values; each row records whether the SLO is still met.  Endurance knobs need no run: their lifetimes
are recomputed from the measured HBF write rate (:func:`lachesis.node.endurance.hbf_lifetime_years`).  Every run
goes through :mod:`lachesis.evaluation.sweep`, its cache and its runner.

The cells, the fixed load and the endurance arithmetic: docs/design.md §5, "Sensitivity study".
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from lachesis.config import SLOS, Endurance
from lachesis.evaluation import knobs, runner, sweep, tables
from lachesis.evaluation.grid import (
    CELL,
    LOAD_POLICY,
    MULTI_WORKLOADS,
    PAPER_MULTI_POLICIES,
    PAPER_SINGLE_POLICIES,
    POLICY_NAMES,
    LoadRule,
    Point,
    load_at,
    multi_agent_grid,
    single_agent_grid,
)
from lachesis.evaluation.knobs import KNOBS, STUDY
from lachesis.evaluation.row import GridRow
from lachesis.node import endurance
from lachesis.node.capacity import SearchParams

#: The cells of the study (ASSUMPTION, knob: the ``cells`` arguments): the paper's headline multi-agent
#: and single-agent traces at the tight SLO, the smallest and a large HBM share of the split designs.
MULTI_CELL: dict[str, Any] = dict(workload="multi_agent", configs=("1/7", "4/4"))
SINGLE_CELL: dict[str, Any] = dict(workload="tau3", configs=("1/7", "4/4"))
RATIOS = {k: tables.RATIOS[k] for k in ("lachesis/hbm_first", "deterministic/hbm_first")}
ID = CELL


@dataclass(frozen=True)
class Variant:
    """One knob at one value (the paper's setting: ``knob == "paper"``)."""

    knob: str
    value: Any = None

    @property
    def is_paper(self) -> bool:
        return self.knob == "paper"

    def point(self, p: Point) -> Point:
        """``p`` with this knob set (the load knob leaves the point alone)."""
        if self.is_paper or KNOBS[self.knob].acts_on == "load":
            return p
        if KNOBS[self.knob].acts_on == "point":
            return replace(p, **{self.knob: self.value})
        return replace(p, overrides=knobs.canonical(dict(p.overrides) | {self.knob: self.value}))

    def load(self, n_star: int) -> int:
        """Sessions per GPU: the cell's N*, or a multiple of it for the load knob (at least 1)."""
        if not self.is_paper and self.knob == "load":
            return load_at(float(self.value), n_star)
        return int(n_star)

    def label(self) -> str:
        if self.is_paper:
            return "paper"
        return f"{self.value:g}" if isinstance(self.value, float) else str(self.value)


def policies(workload: str) -> tuple[str, ...]:
    """The policies the study's gains (:data:`RATIOS`) need on a workload: multi-agent HBM-first, w/o
    predictive path and Lachesis (§5.4); single-agent HBM-first and Lachesis (the deterministic path places
    every segment, §5.5)."""
    return PAPER_MULTI_POLICIES if workload in MULTI_WORKLOADS else PAPER_SINGLE_POLICIES


def study_cells(scale: float = 1.0, seed: int = 0, models: Sequence[str] = ("Llama-4-Maverick",),
                slo: str = "tight", multi: dict[str, Any] | None = None, single: dict[str, Any] | None = None,
                overrides: Any = ()) -> list[list[Point]]:
    """The study's cells, each a list of the points (:func:`policies`) its gains need.

    ``multi``/``single``: ``dict(workload=…,
    configs=…)``, default :data:`MULTI_CELL`/:data:`SINGLE_CELL`; an empty ``configs`` leaves that trace out.
    """
    multi, single = multi or MULTI_CELL, single or SINGLE_CELL
    pts = []
    if multi["configs"]:
        pts += multi_agent_grid(scale, seed, configs=multi["configs"], models=models, slos=(slo,),
                                      policies=policies(multi["workload"]), workloads=(multi["workload"],),
                                      overrides=overrides)
    if single["configs"]:
        pts += [replace(p, slo=slo) for p in single_agent_grid(
            scale, seed, configs=single["configs"], models=models, policies=policies(single["workload"]),
            workloads=(single["workload"],), overrides=overrides)]
    cells: dict[tuple, list[Point]] = {}
    for p in pts:
        cells.setdefault(p.cell(), []).append(p)
    return list(cells.values())


def variants(names: Sequence[str] = STUDY, values: dict[str, Sequence[Any]] | None = None,
             base: Any = ()) -> list[Variant]:
    """The paper's setting, then each knob of ``names`` at each of its values (``values`` overrides the
    registry's study values); a value equal to the study's setting (the cells' overrides ``base``, e.g. their
    node, else the registry's default) is that setting and is not repeated."""
    at = dict(knobs.canonical(base))
    out = [Variant("paper")]
    for name in names:
        if name not in KNOBS:
            raise ValueError(f"sensitivity: unknown knob {name!r}; expected one of {list(KNOBS)}")
        k = KNOBS[name]
        if k.acts_on == "deployment" and name not in STUDY:  # knobs.STUDY: they move the load the SLO admits
            raise ValueError(f"sensitivity: knob {name!r} changes what load the SLO admits, so at the cell's held "
                             "load it would run one node at a load sized on another; compare nodes at their own N* "
                             "(node: one_gpu or paper; benchmarks/group_node.py, benchmarks/node_assumptions.py)")
        vals = (values or {}).get(name, k.values)
        if not len(vals):
            raise ValueError(f"sensitivity: knob {name!r} has no values")
        for v in vals:
            v = k.check(v)
            if v != at.get(name, k.default):
                out.append(Variant(name, v))
    return out


# ------------------------------------------------------------------------------------------------
# Running the study: cached rows first, the rest through sweep's runner, endurance knobs computed
# ------------------------------------------------------------------------------------------------


def _plan_key(p: Point) -> tuple:
    """Points with the same key replay the same plan (a worker builds it once)."""
    return (p.workload, p.scale, p.seed, p.trace, p.laden_close, knobs.plan_overrides(p.overrides))


def _run_group(tasks: list[tuple[list[Point], int]], params: SearchParams,
               cache_dir: str | None) -> list[list[GridRow]]:
    """Several (cell points, load) runs in one process, sharing the plans they have in common."""
    return [sweep.evaluate_cell_at(pts, n, params, cache_dir) for pts, n in tasks]


def _tag(row: Mapping[str, Any], v: Variant, n_star: int) -> dict[str, Any]:
    return dict(row, knob=v.knob, value=v.label(), n_star=n_star, simulated=True)


def run(cells: Sequence[Sequence[Point]], names: Sequence[str] = STUDY,
        values: dict[str, Sequence[Any]] | None = None, params: SearchParams = SearchParams(),
        cache_dir: str | os.PathLike | None = None, n_jobs: int | None = None, scheduler: Any = None,
        progress: bool = True, load: str | LoadRule = "per_deployment") -> pd.DataFrame:
    """Every cell's policies at each variant (:func:`variants`), one row per (cell, knob, value, policy),
    each cell held at its load under the grid's ``load`` rule (:class:`lachesis.evaluation.grid.LoadRule`).

    Columns: the cell (``workload, model, slo, memory``), ``policy``, ``knob``, ``value``, ``n_sessions``
    (the load held fixed), ``n_star``, ``slo_met``, ``hbf_write_rate``, ``lifetime_years``,
    ``simulated`` (False: an endurance knob, recomputed from the paper-setting run), the run's byte counts.
    """
    return _study(cells, names, values, params, cache_dir, dict(n_jobs=n_jobs, scheduler=scheduler, progress=progress),
                  load)[0]


def cached(cells: Sequence[Sequence[Point]], names: Sequence[str] = STUDY,
           values: dict[str, Sequence[Any]] | None = None, params: SearchParams = SearchParams(),
           cache_dir: str | os.PathLike | None = None,
           load: str | LoadRule = "per_deployment") -> tuple[pd.DataFrame, list[str]]:
    """The rows of :func:`run` that the cache holds, and one line per (cell, variant) it lacks; never simulates."""
    return _study(cells, names, values, params, cache_dir, None, load)


def _study(cells: Sequence[Sequence[Point]], names: Sequence[str], values: dict[str, Sequence[Any]] | None,
           params: SearchParams, cache_dir: str | os.PathLike | None,
           how: dict[str, Any] | None, load: str | LoadRule = "per_deployment") -> tuple[pd.DataFrame, list[str]]:
    """The study's rows and what the cache lacks; ``how`` (n_jobs, scheduler, progress) computes what is missing,
    None reads the cache only."""
    cells = [list(c) for c in cells]
    if not cells:
        raise ValueError("sensitivity: no cells")
    cache = str(cache_dir) if cache_dir else None
    vs = variants(names, values, cells[0][0].overrides)
    base_pts = [p for c in cells for p in c]
    rule = LoadRule.of(load)
    base, missing = sweep.cached_results(base_pts, cache, params, load)
    if missing and how is not None:  # the grid's own evaluation: N* searched once, cached for the grid too
        base, missing = sweep.run_grid(base_pts, params, cache, load=load, **how), []
    lacking = [f"{c[0].label()}: the paper's setting (N*)" for c in cells if any(p in missing for p in c)]
    rows: list[dict] = [dict(r, knob="paper", value="paper", simulated=True) for r in base.to_dict("records")]

    todo: dict[tuple, list[tuple[list[Point], int, Variant, int]]] = {}
    for c in cells:
        if any(p in missing for p in c):
            continue
        ns = int(base.loc[_cell_mask(base, c[0]), "n_star"].iloc[0])
        if ns <= 0:  # the SLO admits no load at the paper's setting: nothing to hold fixed
            continue
        for v in vs:
            if v.is_paper or not KNOBS[v.knob].simulated or v.knob in ("load_base", "load_sizing"):
                continue
            pts, n = [v.point(p) for p in c], v.load(ns)
            hits = [sweep.cached_entry(p, cache, params, n) for p in pts]
            if all(h is not None for h in hits):
                rows += [_tag(h, v, ns) for h in hits if h is not None]
            else:
                todo.setdefault(_plan_key(pts[0]), []).append((pts, n, v, ns))
    if todo and how is None:
        lacking += [f"{c.workload} {c.model} {c.slo} {c.memory}: {v.knob} = {v.label()}"
                    for items in todo.values() for (c, *_), _, v, _ in items]
    elif todo and how is not None:
        groups = _balanced(todo)
        res = runner.run_tasks(_run_group, [([(pts, n) for pts, n, _, _ in g], params, cache) for g in groups],
                              [f"{g[0][0][0].label()} {g[0][2].knob} ({len(g)} cells)" for g in groups],
                              desc="sensitivity", **how)
        for g, out in zip(groups, res):
            for (_, _, v, ns), rs in zip(g, out):
                rows += [_tag(r, v, ns) for r in rs]
    for v in (v for v in vs if v.knob in ("load_base", "load_sizing") and rule.rule == "per_deployment"):
        other = replace(rule, base=v.value) if v.knob == "load_base" else replace(rule, sizing=v.value)
        got, lack = _at_base(base_pts, other, params, cache, how)
        rows += [_tag(r, v, int(r["n_star"])) for r in got.to_dict("records")]
        lacking += [f"{p.label()}: {v.knob} = {v.value}" for p in lack]
    if not rows:
        return pd.DataFrame(columns=ID + ["policy", "knob", "value", "simulated", "lifetime_years"]), lacking
    df = sweep.results_frame(rows)
    df = pd.concat([df, _endurance_rows(df[df["knob"].eq("paper")], vs)], ignore_index=True)
    return _ordered(df, vs), lacking


def _at_base(points: list[Point], rule: LoadRule, params: SearchParams, cache: str | None,
             how: dict[str, Any] | None) -> tuple[pd.DataFrame, list[Point]]:
    """The study's cells at the load another sizing of the deployment gives (the ``load_sizing`` and
    ``load_base`` variants): the rows the grid gives under that rule, from the cache, or run when ``how`` is given."""
    got, lack = sweep.cached_results(points, cache, params, rule)
    if lack and how is not None:
        return sweep.run_grid(points, params, cache, load=rule, **how), []
    return got, lack


def _cell_mask(df: pd.DataFrame, p: Point) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    for col in ID:
        mask &= df[col].eq(getattr(p, col))
    return mask


def _balanced(todo: dict[tuple, list]) -> list[list]:
    """Tasks for the runner: one per plan (a worker builds a plan once per task), the paper plan's split
    per variant so it does not serialize the study; the largest first, so the workers finish together."""
    groups: list[list] = []
    for key, items in todo.items():
        if key[-1] or key[4] != Point.laden_close:  # a plan of its own (clock knob, free point)
            groups.append(items)
        else:
            by: dict[Variant, list] = {}
            for it in items:
                by.setdefault(it[2], []).append(it)
            groups += list(by.values())
    return sorted(groups, key=lambda g: -sum(n * len(pts) for pts, n, _, _ in g))


def _endurance_rows(paper: pd.DataFrame, vs: Sequence[Variant]) -> pd.DataFrame:
    """The paper-setting rows, lifetime recomputed from their HBF write rate for each endurance variant."""
    out = []
    for v in vs:
        if v.is_paper or KNOBS[v.knob].simulated:
            continue
        for r in paper.to_dict("records"):
            cfg = Point(r["workload"], r["memory"], r["model"], r["slo"], r["policy"],
                              overrides=knobs.canonical({v.knob: v.value})).config()
            spread = r.get("hbf_rank_spread", 1.0)
            spread = 1.0 if spread is None or not np.isfinite(spread) else float(spread)
            life = float(endurance.group_lifetime_years(cfg.memory, r.get("hbf_write_rate", math.nan), cfg.endurance,
                                                        spread))
            out.append(dict(r, knob=v.knob, value=v.label(), lifetime_years=life, simulated=False))
    return pd.DataFrame(out)


def _ordered(df: pd.DataFrame, vs: Sequence[Variant]) -> pd.DataFrame:
    """Rows in study order (cell, then the knobs and values as :func:`variants` lists them)."""
    rank = {(v.knob, v.label()): i for i, v in enumerate(vs)}
    df = df.assign(variant=[rank[(k, x)] for k, x in zip(df["knob"], df["value"])])
    return df.sort_values(ID + ["variant", "policy"], kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------------------
# What moved: gains per variant, the swing of each knob, a sentence per knob
# ------------------------------------------------------------------------------------------------


def gains(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, knob, value): lifetime per policy (``years_<policy>``), the gains over HBM-first,
    the load, whether every policy meets the SLO there and the worst ``slo_margin`` (p99 TPOT or TTFT over
    its bound, the larger; judged on a search-length window as N* was), and whether each policy outlasts
    the warranty."""
    idx = ID + ["variant", "knob", "value"]
    slo = runs["slo"].map(SLOS)
    runs = runs.assign(slo_margin=np.fmax(runs["slo_p99_tpot_s"] / slo.map(lambda s: s.p99_tpot_s),
                                          runs["slo_p99_ttft_s"] / slo.map(lambda s: s.ttft_s)))
    p = runs.set_index(idx + ["policy"])["lifetime_years"].unstack("policy")
    out = tables.with_ratios(p, RATIOS, shares=False).drop(columns=list(p.columns))
    out = pd.concat([p.add_prefix("years_"), out], axis=1)
    g = runs.groupby(idx)
    out["n_sessions"] = g["n_sessions"].first()
    out["n_star"] = g["n_star"].first()
    out["all_meet_slo"] = g["slo_met"].all()
    out["simulated"] = g["simulated"].first()
    out["slo_margin"] = g["slo_margin"].max()
    for pol in p.columns:
        out[f"outlasts_warranty_{pol}"] = p[pol] >= Endurance().warranty_years
    return out.reset_index().sort_values(ID + ["variant"], kind="stable").reset_index(drop=True)


def swings(g: pd.DataFrame, column: str = "lachesis/hbm_first") -> pd.DataFrame:
    """Per (cell, knob): ``column`` at the paper's setting and its lowest and highest value over the knob's
    values (with the values that gave them), the largest relative move, and the values at which a policy
    misses the SLO."""
    rows = []
    for cid, d in g.groupby(ID, sort=False):
        base = d[d["knob"].eq("paper")]
        if not len(base) or column not in d:
            continue
        b = float(base[column].iloc[0])
        for knob, k in d[~d["knob"].eq("paper")].groupby("knob", sort=False):
            x = k[column].to_numpy(float)
            ok = np.isfinite(x)
            lo = int(np.nanargmin(x)) if ok.any() else 0
            hi = int(np.nanargmax(x)) if ok.any() else 0
            rel = (x / b - 1.0) if b and np.isfinite(b) else np.full_like(x, np.nan)
            rows.append(dict(zip(ID, cid), knob=knob, column=column, paper=b,
                             low=float(x[lo]), low_value=k["value"].iloc[lo], high=float(x[hi]),
                             high_value=k["value"].iloc[hi], values=", ".join(k["value"]),
                             moves_pct=float(np.nanmax(np.abs(rel)) * 100) if np.isfinite(rel).any() else np.nan,
                             slo_missed_at=", ".join(k.loc[~k["all_meet_slo"].astype(bool), "value"])))
    return pd.DataFrame(rows)


knob_label = knobs.knob_label  # the name table lives in lachesis.evaluation.knobs


def family(workload: str) -> str:
    return "multi-agent" if workload in MULTI_WORKLOADS else "single-agent"


def pol_name(column: str) -> str:
    """"years_lachesis" -> "Lachesis" (the policy a years column belongs to, as the paper names it)."""
    pol = column.removeprefix("years_")
    return POLICY_NAMES.get(pol, pol)


def _span(x: pd.Series) -> str:
    lo, hi = np.nanmin(x.to_numpy(float)), np.nanmax(x.to_numpy(float))
    return f"{lo:.3g}" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g}–{hi:.3g}"


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def sentences(g: pd.DataFrame, column: str = "lachesis/hbm_first", years: str = "years_lachesis") -> list[str]:
    """One sentence per knob, computed from :func:`gains`: how far the knob moves ``column`` in each cell
    (values under 0.5% are "unchanged"), the span of ``years``, and where a policy misses the SLO."""
    out = []
    base = g[g["knob"].eq("paper")].set_index(ID)
    for knob, d in g[~g["knob"].eq("paper")].groupby("knob", sort=False):
        k = KNOBS[knob]
        default = _num(k.default) if isinstance(k.default, float) else k.default
        unit = k.unit if k.unit.startswith("×") else f" {k.unit}" if k.unit else ""
        cells = []
        for cid, c in d.groupby(ID, sort=False):
            b = float(base.loc[cid, column]) if cid in base.index else np.nan
            x = c[column].to_numpy(float)
            where = f"{family(cid[0])} {cid[3]}"
            if not np.isfinite(b):
                continue
            if not np.isfinite(x).all():  # a value that gave no gain says why, never "nan%"
                lost = ", ".join(lab for v, lab in zip(x, c["value"]) if not np.isfinite(v))
                cells.append(f"{where}: no gain at {lost} (a lifetime there is not finite: "
                             + ("the SLO admits no load)" if (c["n_sessions"] <= 0).any() else "see the table)"))
                x = np.where(np.isfinite(x), x, b)  # the rest as usual
            move = np.nanmax(np.abs(x / b - 1)) * 100
            if move < 0.5:
                cells.append(f"{where} unchanged at {b:.2f}×")
            else:
                at = ", ".join(f"{v:.2f}× at {lab}" for v, lab in zip(x, c["value"]))
                cells.append(f"{where} {b:.2f}× → {at} (up to {move:.0f}% away)")
        tried = ", ".join(dict.fromkeys(d["value"]))
        text = f"**{knob}** (paper {default}{unit}; tried {tried}): gain " + "; ".join(cells)
        if years in d:
            text += (f". {pol_name(years)} device-years {_span(d[years])} over the values tried "
                     f"({_span(base[years])} at the paper's setting)")
        pol = years.removeprefix("years_")
        if f"outlasts_warranty_{pol}" in d:
            w, wb = d[f"outlasts_warranty_{pol}"].astype(bool), base[f"outlasts_warranty_{pol}"].astype(bool)
            text += (f"; it outlasts the {Endurance().warranty_years:g}-year warranty in {int(w.sum())} of the "
                     f"{len(w)} runs ({int(wb.sum())} of {len(wb)} at the paper's setting)")
        if not d["simulated"].all():
            text += "; no new run: lifetime recomputed from the measured write rate"
        miss = d[~d["all_meet_slo"].astype(bool)]
        if len(miss):
            text += "; at the fixed load a policy misses the SLO at " + ", ".join(
                f"{r.value} ({family(r.workload)} {r.memory}, p99 at {r.slo_margin:.1%} of its bound)"
                for r in miss.itertuples())
        out.append(text + ".")
    return out


# ------------------------------------------------------------------------------------------------
# At each setting's own N*: what moves the load and what the gain is invariant to
# ------------------------------------------------------------------------------------------------

#: what :func:`at_own_load` reports per (cell, value): the load, the gain, and the operating point per GPU
OWN_LOAD_COLUMNS = ["n_star", "lachesis/hbm_first", "deterministic/hbm_first", "live_short_kv_gb",
                    "kv_read_per_step_gb", "hbm_over_live_short"]


def at_own_load(cells: Sequence[Sequence[Point]], knob: str, values: Sequence[Any],
                params: SearchParams = SearchParams(), cache_dir: str | os.PathLike | None = None,
                n_jobs: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Each cell at each value of ``knob``, with N* searched again at that value (the grid's own evaluation),
    so that a knob which only changes how many sessions fit (the user's think time) shows N* moving while
    the gain and the live short-lived KV per GPU at N* stay put.  One row per (cell, value)."""
    k = KNOBS[knob]
    if not k.simulated or k.acts_on == "load":
        raise ValueError(f"sensitivity: knob {knob!r} needs no run at its own load; use run()")
    vals = [k.check(v) for v in values]
    pts = [Variant(knob, v).point(p) if v != k.default else p for v in vals for c in cells for p in c]
    rows = sweep.run_grid(pts, params, str(cache_dir) if cache_dir else None, n_jobs, progress=progress)
    rows = rows.assign(value=[v for v in vals for c in cells for _ in c])  # run_grid keeps the points' order
    lives = rows.set_index(ID + ["value", "policy"])["lifetime_years"].unstack("policy")
    out = tables.with_ratios(lives, RATIOS, shares=False).drop(columns=list(lives.columns))
    base = rows[rows["policy"].eq(LOAD_POLICY)].set_index(ID + ["value"])
    out["n_star"] = base["n_sessions"]
    out["live_short_kv_gb"] = base["live_short_kv_bytes"] / 1e9
    out["kv_read_per_step_gb"] = base["kv_read_per_step_bytes"] / 1e9
    out["hbm_over_live_short"] = base["hbm_over_live_short"]
    cols = [c for c in OWN_LOAD_COLUMNS if c in out]
    res = out[cols].reset_index().assign(knob=knob)
    return res.assign(why_undefined=[_why_undefined(r, lives, knob, cols) for r in res.to_dict("records")])


def _why_undefined(row: dict, lives: pd.DataFrame, knob: str, cols: Sequence[str]) -> str:
    """Why a row of :func:`at_own_load` has a number that is not finite ("" when every one is): a value at
    which the SLO admits no load (N* = 0, so nothing ran), or the policies whose lifetime is not a number."""
    bad = [c for c in cols if not np.isfinite(float(row[c]))]
    if not bad:
        return ""
    if not row["n_star"] > 0:
        return (f"N* = 0: the {row['slo']} SLO admits no load at {knob} = {row['value']:g}, so nothing ran "
                f"and {', '.join(bad)} are undefined")
    life = lives.loc[tuple(row[k] for k in ID + ["value"])]
    off = [f"{pol} {v!r} y" for pol, v in life.items() if not np.isfinite(v)]
    return f"{', '.join(bad)} undefined at {knob} = {row['value']:g}: " + (
        f"lifetime not finite for {', '.join(off)}" if off else "a lifetime ratio has no finite value")


def spread(df: pd.DataFrame,
           columns: Sequence[str] = ("n_star", "lachesis/hbm_first", "live_short_kv_gb")) -> pd.DataFrame:
    """Per cell of :func:`at_own_load`: how far each column moves over the knob's values (max/min − 1, %),
    over the values where the SLO admits a load (N* > 0; the others say so in ``why_undefined``)."""
    g = df[df["n_star"].gt(0)].groupby(ID, sort=False)
    return pd.DataFrame({c: (g[c].max() / g[c].min() - 1.0) * 100 for c in columns if c in df}).add_suffix(
        " moves %").reset_index()
