"""Explorer of the evaluation: one selection's lifetimes, gains, write composition and N*, over seeds.

A *selection* is a cell (workload, model, SLO, memory configuration), a policy and the seeds to show.
:func:`view` reads what the sweep cache holds for it — the Figs. 9–12 grid rows (every grid policy at
HBM-first's N*, each seed after the first at the first seed's load), each policy's own N* when it was
searched, the gain-versus-load runs at fractions of N* and the sensitivity study of the cell (both at
the first seed) — through the cache-only readers (:func:`lachesis.evaluation.sweep.cached_results`,
:func:`lachesis.evaluation.sensitivity.cached`), and, where the cache lacks a part, the committed paper-scale files
of ``figures/`` (:class:`Committed`: the grids, the load curve, the sensitivity gains), so nothing is
simulated and a fresh clone answers every paper-scale cell the figures hold.  Every number over seeds is
the median with its min–max.  What neither holds is listed with the command that computes it
(:func:`command`, ``lachesis explore``), which runs :func:`compute`: the same sweep functions the
notebooks run, into the same cache; in JupyterLab the widget offers to run it with a progress bar.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from lachesis.config import SLOS, Endurance
from lachesis.evaluation import plots, sensitivity, sweep, tables
from lachesis.evaluation.gains import load_gains
from lachesis.evaluation.grid import (
    CELL,
    CONFIG_LABELS,
    LOAD_POLICY,
    LOADS,
    MODEL_NAMES,
    MULTI_WORKLOADS,
    POLICY_NAMES,
    SINGLE_WORKLOADS,
    Point,
    grid_policies,
    is_clairvoyant,
    load_at,
    seed_list,
    split_csv,
)
from lachesis.evaluation.knobs import KNOBS, NODES
from lachesis.evaluation.knobs import STUDY as _STUDY
from lachesis.evaluation.knobs import node as knobs_node
from lachesis.memory.policies import POLICIES, get_policy
from lachesis.node.capacity import SEARCH_PRESETS, SearchParams
from lachesis.plotting import (
    CLASS_STYLE,
    LIFETIME_AXIS,
    NSTAR_STYLE,
    WORKLOAD_LABEL,
    nstar_key,
    policy_color,
    save_figure,
    warranty_key,
    warranty_line,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PARTS = ("grid", "load", "sensitivity")
#: The sensitivity knobs the explorer offers: its cells run on a named node (:attr:`Selection.node`) at that
#: node's load, so the knobs that change the decode node (``acts_on == "deployment"``: the group's size) are
#: not run here; the sensitivity notebook moves them on its node and ``benchmarks/group_node.py`` sizes each
#: node at its own N*.
STUDY = tuple(k for k in _STUDY if KNOBS[k].acts_on != "deployment")


def study_knobs(knobs: Sequence[str]) -> list[str]:
    """``knobs`` as a list; a knob that changes the decode node is refused in one line (:data:`STUDY`)."""
    node = [k for k in knobs if k in KNOBS and KNOBS[k].acts_on == "deployment"]
    if node:
        raise ValueError(f"explorer: knob {node[0]!r} changes the decode node, but an explorer cell is sized at its "
                         "own node's load, so it would run the other node at a load sized for this one; refused here: "
                         "choose the node (node: one_gpu or paper), or the sensitivity notebook, which moves it; "
                         "benchmarks/group_node.py sizes each node at its own N*")
    return list(knobs)

#: How the explorer names what it shows, in the figures' own words: the dropdowns' options and the tables'
#: values (policies as :data:`lachesis.evaluation.grid.POLICY_NAMES`, workloads as the figures' legends) and columns.
LABELS: dict[str, dict[str, str]] = {
    "policy": dict(POLICY_NAMES),
    "workload": dict(WORKLOAD_LABEL),
    "slo": {k: f"{k} (p99 TPOT {1000 * v.p99_tpot_s:g} ms)" for k, v in SLOS.items()},
    "column": {"policy": "policy", "n_sessions": "sessions/GPU", "own_n_star": "own N*",
               "lifetime_years": "device-years", "over_hbm_first": "÷ HBM-first",
               "over_deterministic": "÷ w/o predictive path", "hbm_share_of_writes": "HBM share of KV writes",
               "slo_met_seeds": "meets the SLO (seeds)", "outlasts_warranty": "outlasts the warranty",
               "seg_class": "segment class", "hbm": "→ HBM (%)", "hbf": "→ HBF (%)", "all": "all classes",
               "knob": "knob", "value": "value", "lachesis/hbm_first": "Lachesis ÷ HBM-first",
               "deterministic/hbm_first": "w/o predictive path ÷ HBM-first",
               "all_meet_slo": "every policy meets the SLO",
               "years_hbm_first": "HBM-first (device-years)", "years_lachesis": "Lachesis (device-years)",
               "years_deterministic": "w/o predictive path (device-years)"},
}


def label(kind: str, value: Any) -> str:
    """``value`` (a policy, workload, SLO or column id) in the figures' words (:data:`LABELS`); as is otherwise."""
    return LABELS.get(kind, {}).get(str(value), str(value))


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
    seeds: tuple[int, ...] = (0,)  # one seed (an int) is taken too
    search: str = "paper"
    #: the grid's load rule (docs/design.md §5, "Load")
    load: str = "per_deployment"
    #: the decode node the cell runs on (:data:`lachesis.evaluation.knobs.NODES`; the committed figures': the paper's)
    node: str = "paper"

    def __post_init__(self) -> None:
        if self.load not in LOADS:
            raise ValueError(f"explorer: load must be one of {list(LOADS)}, got {self.load!r}")
        if self.node not in NODES:
            raise ValueError(f"explorer: node must be one of {list(NODES)}, got {self.node!r}")
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
        """The cell's points: ``policies`` (default: the grid's, :func:`lachesis.evaluation.grid.grid_policies`, and
        the selected one) at ``seeds`` (default: every selected seed)."""
        pols = policies if policies is not None else (*grid_policies(self.workload), self.policy)
        node = knobs_node(self.node)
        return [Point(self.workload, self.memory, self.model, self.slo, p, self.scale, k, overrides=node)
                for k in (seeds if seeds is not None else self.seeds) for p in dict.fromkeys(pols)]

    def curve_points(self) -> list[Point]:
        """The load curve's points: the paper's policies of the family (as ``gain_vs_load`` runs them) and
        the selected one, at the first seed."""
        return self.points((*sensitivity.policies(self.workload), self.policy), self.seeds[:1])

    def study_points(self) -> list[Point]:
        """The sensitivity study's points (:func:`lachesis.evaluation.sensitivity.policies`), at the first seed."""
        return self.points(sensitivity.policies(self.workload), self.seeds[:1])


@dataclass
class View:
    """Everything the cache (or the committed figures) holds for a selection, and what it lacks (``missing``:
    part -> lines).  ``sensitivity``: the study's gains (:func:`lachesis.evaluation.sensitivity.gains`);
    ``composition``:
    write bytes per run, class and tier (:func:`lachesis.evaluation.tables.write_composition`'s rows); ``sources``:
    part -> where it was read."""

    selection: Selection
    grid: pd.DataFrame
    own: pd.DataFrame
    curve: pd.DataFrame
    sensitivity: pd.DataFrame
    missing: dict[str, list[str]] = field(default_factory=dict)
    composition: pd.DataFrame = field(default_factory=pd.DataFrame)
    sources: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# The committed paper-scale results (figures/): read before simulating anything
# ------------------------------------------------------------------------------------------------

#: The files of ``figures/`` the explorer reads, and the notebook whose parameters (as ENVIRONMENT.json
#: records them) say at which scale, search preset and seeds each was made.
GRID_FILES = {"fig09_grid.csv": "fig09_fig10_multi_agent", "fig11_grid.csv": "fig11_fig12_single_agent"}
COMPOSITION_FILES = {"fig10_write_composition.csv": "fig09_fig10_multi_agent",
                     "fig12_write_composition.csv": "fig11_fig12_single_agent"}
CURVE_FILE, CURVE_NOTEBOOK = "gain_vs_load_runs.csv", "gain_vs_load"
SENSITIVITY_FILE, SENSITIVITY_NOTEBOOK = "sensitivity_gains.csv", "sensitivity"


@dataclass(frozen=True)
class Setting:
    """Where a committed file's rows come from: the corpus scale, search preset, seeds, sweep cache, node and
    load rule."""

    scale: float
    search: str
    seeds: tuple[int, ...]
    cache_dir: str
    node: str = "one_gpu"
    load: str = "per_deployment"

    def holds(self, sel: Selection) -> bool:
        """Whether ``sel`` asks for rows of this setting: the same scale, search, node and load rule, seeds among
        these with the same first seed (the one that sized the load)."""
        return bool(np.isclose(sel.scale, self.scale) and sel.search == self.search and sel.node == self.node
                and sel.load == self.load and sel.seeds[0] == self.seeds[0] and set(sel.seeds) <= set(self.seeds))


@dataclass
class Committed:
    """The paper-scale results committed in ``figures/`` (:func:`committed`), one table per part with the
    :class:`Setting` each was made at."""

    folder: Path
    grid: list[tuple[Setting, pd.DataFrame]]
    composition: list[tuple[Setting, pd.DataFrame]]
    curve: list[tuple[Setting, pd.DataFrame]]
    sensitivity: list[tuple[Setting, pd.DataFrame]]

    @property
    def setting(self) -> Setting | None:
        """The grid's setting (the one a selection of the committed results takes)."""
        return self.grid[0][0] if self.grid else None

    def rows(self, part: str, sel: Selection) -> pd.DataFrame:
        """The rows of ``part`` for the selection's cell (and seeds, where rows have one); empty if none."""
        found = []
        for setting, df in getattr(self, part):
            if not setting.holds(sel):
                continue
            m = np.ones(len(df), bool)
            for col, val in zip(CELL, (sel.workload, sel.model, sel.slo, sel.memory)):
                m &= df[col].astype(str).eq(val).to_numpy()
            if "seed" in df:
                m &= df["seed"].isin(sel.seeds).to_numpy()
            found.append(df[m])
        return pd.concat(found, ignore_index=True) if found else pd.DataFrame()

    def where(self, part: str) -> str:
        files: dict[str, Mapping[str, Any]] = {"grid": GRID_FILES, "composition": COMPOSITION_FILES,
                                               "curve": {CURVE_FILE: 0}, "sensitivity": {SENSITIVITY_FILE: 0}}
        names = files[part]
        return ", ".join(f"{self.folder.name}/{n}" for n in names)


def _setting(env: dict[str, Any], notebook: str) -> Setting | None:
    """A notebook's setting from ENVIRONMENT.json's params file (None: the file does not record one)."""
    spec = (env.get("params_file") or {}).get("contents") or {}
    params = {**(spec.get("common") or {}), **((spec.get("notebooks") or {}).get(notebook) or {})}
    if not {"scale", "search"} <= set(params):
        return None
    seeds = params.get("seeds", params.get("seed", 0))
    seeds = [int(x) for x in split_csv(str(seeds))]
    load = str(params.get("load", "per_deployment"))
    load = {"baseline": "per_cell"}.get(load, load)  # figures made before the rule had its name
    return Setting(float(params["scale"]), str(params["search"]), tuple(seeds), str(params.get("cache_dir", "")),
                   str(params.get("node", "one_gpu")), load)


def _read(path: Path) -> pd.DataFrame:
    """A committed table; extra columns are kept (a newer grid may carry more), a file that is not there is
    empty, one without the cell's columns is an error naming it."""
    if not path.is_file():
        return pd.DataFrame()
    df = pd.read_csv(path)
    if lacking := [c for c in CELL if c not in df]:
        raise ValueError(f"explorer: {path}: no column {lacking[0]!r}; expected the cell's {', '.join(CELL)}")
    return df


def committed(folder: str | Path) -> Committed | None:
    """The paper-scale results in ``folder`` (``figures/``), at the settings its ``ENVIRONMENT.json`` records;
    None when there is no such file (nothing can say at which scale the rows were made)."""
    folder = Path(folder)
    env_file = folder / "ENVIRONMENT.json"
    if not env_file.is_file():
        return None
    env = json.loads(env_file.read_text(encoding="utf-8"))

    def part(files: dict[str, str]) -> list[tuple[Setting, pd.DataFrame]]:
        out = []
        for name, notebook in files.items():
            setting, df = _setting(env, notebook), _read(folder / name)
            if setting is not None and not df.empty:
                out.append((setting, df))
        return out

    curve, sens = part({CURVE_FILE: CURVE_NOTEBOOK}), part({SENSITIVITY_FILE: SENSITIVITY_NOTEBOOK})
    grid = part(GRID_FILES)
    # the load curve and the study run at the first seed of the grid they share a cache with
    first = grid[0][0].seeds[:1] if grid else (0,)
    curve = [(replace(st, seeds=first), df) for st, df in curve]
    sens = [(replace(st, seeds=first), df) for st, df in sens]
    return Committed(folder, grid, part(COMPOSITION_FILES), curve, sens)


def _grid_from_figures(sel: Selection, store: Committed) -> tuple[pd.DataFrame, list[Point]]:
    """The selection's grid rows from the committed grids, and the points they lack."""
    rows = store.rows("grid", sel)
    if rows.empty:
        return rows, sel.points()
    have = set(zip(rows["policy"], rows["seed"].astype(int)))
    lack = [p for p in sel.points() if (p.policy, p.seed) not in have]
    keep = rows[[(p, int(k)) in {(q.policy, q.seed) for q in sel.points()} for p,
                 k in zip(rows["policy"], rows["seed"])]]
    keep = keep.copy()
    if "n_star" not in keep:  # the committed rows keep the load each cell ran at: N* of HBM-first at its first seed
        lead = keep[keep["policy"].eq(LOAD_POLICY) & keep["seed"].eq(sel.seeds[0])]["n_sessions"]
        keep["n_star"] = int(lead.iloc[0]) if len(lead) else keep["n_sessions"]
    return keep.reset_index(drop=True), lack


#: Columns a committed grid may carry that name how its rows were run beyond the cell (the node, the load
#: rule): shown beside where the rows were read.
SETTING_COLUMNS = ("group_ranks", "landing", "node_start", "load_rule", "load_base", "load_policy")


def _setting_note(rows: pd.DataFrame) -> str:
    """" (group_ranks 8, load_rule per_deployment)": the setting columns the rows carry, each with its values."""
    said = [f"{c} {'/'.join(map(str, pd.unique(rows[c].dropna())))}" for c in SETTING_COLUMNS
            if c in rows and rows[c].notna().any()]
    return f" ({', '.join(said)})" if said else ""


def view(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = STUDY,
         store: Committed | None = None) -> View:
    """Read a selection from the cache and, for what it lacks, from the committed results ``store``
    (``fractions`` of N* for the load curve, ``knobs`` of the study, :func:`study_knobs`); nothing is simulated."""
    knobs = study_knobs(knobs)
    pts, cache = sel.points(), str(cache_dir)
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


def _value_text(v: Any) -> str:
    """A knob value as text, the same for a value of the registry and one read back from a CSV."""
    try:
        return f"{float(v):g}"
    except (TypeError, ValueError):
        return str(v)


def _study_from_figures(sel: Selection, store: Committed, knobs: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """The cell's committed sensitivity gains for ``knobs`` and the variants they lack."""
    rows = store.rows("sensitivity", replace(sel, seeds=sel.seeds[:1]))  # the study runs at the first seed
    label_ = sel.study_points()[0].label()
    want = sensitivity.variants(knobs)
    if rows.empty:
        return rows, [f"{label_}: {v.knob} = {v.label()}" for v in want]
    have = {(k, _value_text(x)) for k, x in zip(rows["knob"], rows["value"])}
    keys = {(v.knob, _value_text(v.label())) for v in want}
    rows = rows[[(k, _value_text(x)) in keys for k, x in zip(rows["knob"], rows["value"])]]
    return rows.reset_index(drop=True), [f"{label_}: {v.knob} = {v.label()}" for v in want
                                         if (v.knob, _value_text(v.label())) not in have]


def sel_load_words(sel: Selection) -> str:
    """The selection's load rule in words, for a legend."""
    return {"per_deployment": "the deployment's, held from its base", "per_cell": "each cell's own N*"}.get(
        sel.load, sel.load)


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


def command(sel: Selection, cache_dir: str | Path, parts: Sequence[str], fractions: Sequence[float] = (),
            knobs: Sequence[str] = STUDY) -> str:
    """The shell command (``lachesis explore``, through this interpreter) that computes ``parts`` of a
    selection into ``cache_dir``, from any folder."""
    args = [sys.executable or "python", "-m", "lachesis", "explore", "--cache-dir", str(Path(cache_dir).resolve()),
            "--search", sel.search, "--scale", f"{sel.scale:g}", "--seeds", ",".join(map(str, sel.seeds)),
            "--workload", sel.workload, "--model", sel.model, "--slo", sel.slo, "--memory", sel.memory,
            "--policy", sel.policy, "--node", sel.node, "--load", sel.load, "--parts", ",".join(parts)]
    if "load" in parts and len(fractions):
        args += ["--fractions", ",".join(f"{f:g}" for f in fractions)]
    if "sensitivity" in parts:
        args += ["--knobs", ",".join(study_knobs(knobs))]
    return shlex.join(args)


def compute(sel: Selection, cache_dir: str | Path, parts: Sequence[str] = PARTS, fractions: Sequence[float] = (),
            knobs: Sequence[str] = STUDY, n_jobs: int | None = None, progress: bool = True) -> None:
    """Run what ``parts`` of a selection need, into ``cache_dir``, with the notebooks' own sweep functions."""
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"explorer: unknown part {bad[0]!r}; expected some of {list(PARTS)}")
    knobs = study_knobs(knobs) if "sensitivity" in parts else knobs
    cache = str(cache_dir)
    if "grid" in parts:
        sweep.run_grid(sel.points(), sel.params, cache, n_jobs, load=sel.load, progress=progress)
    if "load" in parts and len(fractions):
        sweep.load_curve(sel.curve_points(), [float(f) for f in fractions], sel.params, cache, n_jobs,
                         progress=progress)
    if "sensitivity" in parts:
        sensitivity.run([sel.study_points()], knobs, params=sel.params, cache_dir=cache, n_jobs=n_jobs,
                        progress=progress)


def missing_text(v: View, cache_dir: str | Path, fractions: Sequence[float] = (),
                 knobs: Sequence[str] = STUDY) -> str:
    """Markdown: where each part was read, which points neither the cache nor the committed figures hold,
    per part, and the command that computes them."""
    read = "; ".join(f"{part} from {where}" for part, where in v.sources.items() if part not in v.missing)
    if not v.missing:
        return f"Read without simulating ({read or 'the cache'}); nothing is missing."
    lines = []
    for part, what in v.missing.items():
        lines.append(f"- **{part}**: {len(what)} missing, e.g. {'; '.join(what[:3])}")
    cmd = command(v.selection, cache_dir, list(v.missing), fractions, knobs)
    return "\n".join([f"Read without simulating: {read or 'nothing'}.", "",
                      "Not in the cache nor in the committed figures (nothing was simulated for them):", *lines, "",
                      "Compute them with:", "", f"```\n{cmd}\n```"])


def require_cell(v: View | None, sel: Selection, cache_dir: str | Path) -> View:
    """``v`` when the cache gave the selected policy's grid row(s); else a ValueError saying, in one line, that
    the cache holds nothing to show for this cell and the command that computes it (what the explorer
    notebook ends with on an empty cache, instead of a KeyError in a table of no rows)."""
    seeds = ",".join(map(str, sel.seeds))
    what = f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}, {sel.policy}, seeds {seeds}"
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


#: The explorer's figure: inches wide at 100 dpi, so it shows at JupyterLab's output width unscaled (px).
FIGURE_WIDTH_PX = 900


def figure(v: View) -> Figure | None:
    """Device-years per policy and write composition side by side, and (when there) lifetime against sessions
    per GPU below them: :data:`FIGURE_WIDTH_PX` wide."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter, ScalarFormatter

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
    names = [label("policy", p) for p in s["policy"]]
    # a policy that misses the SLO at any seed is drawn as a miss, not a lifetime; the selected one outlined
    keys = plots.policy_bars(ax[0], s, v.grid, names, v.selection.policy)
    warranty_line(ax[0], Endurance().warranty_years)
    ax[0].margins(y=0.1 + 0.08 * len(keys))  # headroom: the legend above the bars
    ax[0].legend(handles=[warranty_key(Endurance().warranty_years), *keys], fontsize=6.5, loc="upper right")
    ax[0].set_ylabel(LIFETIME_AXIS, fontsize=8)
    seeds = v.selection.seeds
    ax[0].set_title(f"at {int(s['n_sessions'].iloc[0])} sessions/GPU"
                    + (f"; median, min–max over {len(seeds)} seeds" if len(seeds) > 1 else ""), fontsize=9)
    c = composition(v)
    if not c.empty:
        bottom = np.zeros(len(s))
        for i, cls in enumerate(dict.fromkeys(c["seg_class"])):
            for tier in [t for t in ("hbm", "hbf") if t in c]:
                vals = np.array([c.loc[c["policy"].eq(p) & c["seg_class"].eq(cls), tier].sum() for p in s["policy"]])
                word = "all classes" if cls == "all" else CLASS_STYLE.get(cls, {}).get("label", cls)
                ax[1].bar(names, vals, bottom=bottom, label=f"{word} → {tier.upper()}",
                          color=CLASS_STYLE.get(cls, {}).get("color", f"C{i}"),
                          alpha=1.0 if tier == "hbm" else 0.45, hatch="" if tier == "hbm" else "//", edgecolor="white")
                bottom += np.nan_to_num(vals)
        ax[1].set_ylabel("% of KV write bytes" + (" (mean over seeds)" if len(seeds) > 1 else ""), fontsize=8)
        ax[1].set_ylim(0, 130)  # room for the legend above the bars
        ax[1].set_yticks([0, 25, 50, 75, 100])
        ax[1].legend(fontsize=6.5, loc="upper center", ncol=2, frameon=False)
        ax[1].set_title("write composition", fontsize=9)
    for a in ax[:2]:
        a.tick_params(axis="x", labelsize=7, labelrotation=30)
        a.tick_params(axis="y", labelsize=7)
        for t in a.get_xticklabels():
            t.set_horizontalalignment("right")
    if curve:
        for pol, d in v.curve.groupby("policy"):
            d = d.sort_values("n_sessions")
            ax[2].plot(d["n_sessions"], d["lifetime_years"], "o-", color=policy_color(pol), label=label("policy", pol))
        ax[2].set_yscale("log")  # lifetimes at low load run an order of magnitude above N*'s
        ax[2].yaxis.set_major_formatter(ScalarFormatter())
        ax[2].yaxis.set_minor_formatter(NullFormatter())
        ax[2].tick_params(labelsize=7)
        own, held = int(v.curve["n_star"].iloc[0]), int(s["n_sessions"].iloc[0])
        ax[2].axvline(own, **NSTAR_STYLE)  # the curve's fractions are of this cell's own N*
        extra = []
        if held != own:  # the grid's rows run at the deployment's load, held across configurations
            style: dict[str, Any] = dict(NSTAR_STYLE, linestyle="-.")
            ax[2].axvline(held, **style)
            extra = [Line2D([], [], label=f"the grid's load ({sel_load_words(v.selection)})", **style)]
        warranty_line(ax[2], Endurance().warranty_years)
        ax[2].set_xlabel("load (concurrent sessions per GPU)", fontsize=8)
        ax[2].set_ylabel(LIFETIME_AXIS, fontsize=8)
        handles = ax[2].get_legend_handles_labels()[0] + [nstar_key(), *extra,
                                                          warranty_key(Endurance().warranty_years)]
        ax[2].legend(handles=handles, fontsize=7, loc="upper right")
        ax[2].set_title(f"lifetime against load (seed {seeds[0]})", fontsize=9)
    sel = v.selection
    fig.suptitle(f"{label('workload', sel.workload)}, {sel.model}, {label('slo', sel.slo)} SLO, {sel.memory}; "
                 f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}", fontsize=10)
    return fig


def _details(title: str, df: pd.DataFrame) -> str:
    """A table folded under its title (HTML ``<details>``: opens on a click in JupyterLab and in a static page)."""
    table = df.to_html(index=False, na_rep="", float_format="{:.3g}".format)
    return f"<details><summary><b>{title}</b></summary>{table}</details>"


def show(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = STUDY,
         out_dir: str | Path | None = None, store: Committed | None = None) -> View | None:
    """Display a selection in a notebook: the headline, the figure (saved under ``out_dir``), the summary in the
    figures' words, the other tables folded, then where it was read and what is missing."""
    from IPython.display import HTML, Image, Markdown, display

    sel_txt = (f"{label('workload', sel.workload)}, {sel.model}, {label('slo', sel.slo)} SLO, {sel.memory}, "
               f"{label('policy', sel.policy)}")
    try:
        v = view(sel, cache_dir, fractions, knobs, store)
    except (ValueError, KeyError) as e:
        display(Markdown(f"**{sel_txt}**: {e}"))
        return None
    display(Markdown(f"### {sel_txt}\n\n{headline(v)}"))
    fig = figure(v)
    if fig is not None:
        if out_dir is not None:
            png = save_figure(fig, out_dir, "explorer")[0]
            display(Image(filename=str(png), width=FIGURE_WIDTH_PX))  # at its size, not the 150-dpi file's
        else:
            display(fig)
    over = f", median (min–max) over seeds {', '.join(map(str, sel.seeds))}" if len(sel.seeds) > 1 else ""
    t = table(v)
    if not t.empty:
        display(Markdown(f"**Every policy at the cell's load{over}** (◀: the selected policy)"))
        display(HTML(t.to_html(index=False)))
    folded = [(f"Write composition (% of each run's KV write bytes{over and ', mean over seeds'})",
               composition(v)),
              (f"Lifetime against sessions per GPU (seed {sel.seeds[0]})", curve_table(v)),
              (f"Sensitivity at the cell's fixed load (seed {sel.seeds[0]})", sensitivity_table(v))]
    html = [_details(title, _labelled(df)) for title, df in folded if not df.empty]
    if html:
        display(HTML("".join(html)))
    display(Markdown(missing_text(v, cache_dir, fractions, knobs)))
    return v


# ------------------------------------------------------------------------------------------------
# Widgets (JupyterLab): dropdowns for the selection, the same display underneath
# ------------------------------------------------------------------------------------------------


def choices() -> dict[str, tuple[str, ...]]:
    """The values each dropdown offers (a selection's values must be among them; a policy may carry knobs)."""

    return dict(workload=MULTI_WORKLOADS + SINGLE_WORKLOADS, model=MODEL_NAMES, slo=tuple(SLOS),
                memory=CONFIG_LABELS, policy=tuple(POLICIES))


def widget(initial: Selection, show: Callable[[Selection], View | None],
           run: Callable[[Selection, list[str]], Any] | None = None) -> Any:
    """Dropdowns for workload, model, SLO, memory and policy (in the figures' words); a change renders
    ``show(selection)`` below them.  When that view lacks parts and ``run`` is given, a button offers to
    compute them (``run(selection, parts)``, whose progress bar shows below it) and then redraws.

    Nothing is rendered until a dropdown changes (the notebook shows the initial selection above): a
    headless run (papermill, nbval) then sends no output into the widget, which its clients need not handle.
    """
    import ipywidgets as w

    drops = {k: w.Dropdown(options=[(label(k, x), x) for x in v], value=getattr(initial, k), description=k)
             for k, v in choices().items()}
    out = w.Output()

    def current() -> Selection:
        return replace(initial, **{k: d.value for k, d in drops.items()})

    def redraw(_: Any = None) -> None:
        out.clear_output()
        box.offer = None
        sel = current()
        with out:
            v = show(sel)
            if run is not None and v is not None and v.missing:
                n = sum(len(x) for x in v.missing.values())
                button = w.Button(description=f"Simulate the {n} missing run(s)", icon="play",
                                  tooltip=f"{', '.join(v.missing)} of this selection, into the sweep cache "
                                          f"(scale {sel.scale:g}, {sel.search} search: minutes per cell)",
                                  layout=w.Layout(width="auto"))

                def go(_: Any, sel: Selection = sel, parts: tuple[str, ...] = tuple(v.missing)) -> None:
                    button.disabled = True
                    button.description = "simulating…"
                    with out:
                        run(sel, list(parts))
                    redraw()

                button.on_click(go)
                box.offer = button
                from IPython.display import display

                display(button)

    for d in drops.values():
        d.observe(redraw, names="value")
    box = w.VBox([w.HBox(list(drops.values())[:3]), w.HBox(list(drops.values())[3:]), out])
    box.redraw = redraw  # for tests and scripts: render the current selection
    box.offer = None  # the button that offers to simulate what the current selection lacks, if any
    return box


def start(source: str, figures: str | Path, cache_dir: str | Path, scale: float, seeds: Sequence[int], search: str,
          node: str = "paper", load: str = "per_deployment", **cell: str) -> tuple[Selection, Path, Committed | None]:
    """The notebook's selection, sweep cache and committed results: ``source`` "figures" explores the paper-scale
    results committed in ``figures`` (at the scale, search, seeds, cache, node and load rule ENVIRONMENT.json records
    for them; the other arguments unused), "cache" the cache at the given setting alone."""
    if source not in ("figures", "cache"):
        raise ValueError(f"explorer: source must be 'figures' or 'cache', got {source!r}")
    if source == "cache":
        return Selection(scale=scale, seeds=tuple(seeds), search=search, node=node, load=load, **cell), \
            Path(cache_dir), None
    store = committed(figures)
    if store is None or store.setting is None:
        raise ValueError(f"explorer: {figures}: no ENVIRONMENT.json recording the grid's setting, or no grid file "
                         f"({', '.join(GRID_FILES)}); run with source: cache")
    st = store.setting
    from lachesis.paths import repo_path

    return Selection(scale=st.scale, seeds=st.seeds, search=st.search, node=st.node, load=st.load, **cell), \
        repo_path(st.cache_dir or cache_dir), store
