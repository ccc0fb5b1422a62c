"""The paper-scale results committed in ``figures/``, read before simulating anything: each file with the setting
(scale, search, seeds, cache, node, load rule) ``ENVIRONMENT.json`` records for the notebook that made it, and the
rows of one selection's cell."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from lachesis.evaluation import row, sensitivity
from lachesis.evaluation.explorer.selection import Selection
from lachesis.evaluation.grid import CELL, LOAD_POLICY, Point, split_csv

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


#: The columns each committed file must carry (what the explorer reads of it; a grid's are fields of
#: :class:`lachesis.evaluation.row.GridRow`), and which of them hold whole numbers and numbers (NaN allowed: a
#: cell the SLO admits no load at, a run with no lifetime).  Extra columns are kept: a newer grid may carry more.
GRID_COLUMNS = row.columns(*CELL, "policy", "seed", "n_sessions", "lifetime_years")
REQUIRED: dict[str, tuple[str, ...]] = {
    "grid": GRID_COLUMNS,
    "composition": (*CELL, "policy", "seed", "seg_class", "tier", "pct"),
    "curve": (*CELL, "policy", "n_sessions", "n_star", "lifetime_years"),
    "sensitivity": (*CELL, "knob", "value"),
}
WHOLE = ("seed", "n_sessions", "n_star")
NUMBERS = ("lifetime_years", "pct")


def _read(path: Path, part: str) -> pd.DataFrame:
    """A committed table of ``part`` (:data:`REQUIRED`), checked: a file that is not there is empty; an empty
    file, one cut mid-line, a missing column or a value of the wrong kind is a one-line error naming the file,
    the line and the column."""
    if not path.is_file():
        return pd.DataFrame()
    need = REQUIRED[part]
    try:
        raw = path.read_bytes()
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"explorer: {path}: empty file (no header line); expected a {part} table with columns "
                         f"{', '.join(need)}") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ValueError(f"explorer: {path}: not a readable CSV table ({' '.join(str(e).split())})") from None
    if not raw.endswith(b"\n"):
        last = raw.count(b"\n") + 1
        raise ValueError(f"explorer: {path}: line {last} ends without a newline: the file is cut "
                         "short (restore it, e.g. git checkout -- figures/)")
    if lacking := [c for c in need if c not in df]:
        raise ValueError(f"explorer: {path}: no column {lacking[0]!r}; a {part} table needs {', '.join(need)}")
    for c in need:
        bad = _bad_values(df[c], c)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            kind = ("a whole number >= 0" if c in WHOLE else "a number" if c in NUMBERS else "a value")
            raise ValueError(f"explorer: {path}: line {i + 2}: column {c!r}: expected {kind}, got "
                             f"{df[c].iloc[i]!r}")
    return df


def _bad_values(col: pd.Series, name: str) -> np.ndarray:
    """Where a required column's value is missing or of the wrong kind (:data:`WHOLE`, :data:`NUMBERS`)."""
    if name in NUMBERS:
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            return np.zeros(len(col), bool)
        return (pd.to_numeric(col, errors="coerce").isna() & col.notna()).to_numpy(bool) | col.map(
            lambda x: isinstance(x, bool)).to_numpy(bool)
    if name in WHOLE:
        v = pd.to_numeric(col, errors="coerce").to_numpy(float)
        with np.errstate(invalid="ignore"):
            return ~(np.isfinite(v) & (v >= 0) & (v == np.floor(v)))
    return col.isna().to_numpy(bool)


def committed(folder: str | Path) -> Committed | None:
    """The paper-scale results in ``folder`` (``figures/``), at the settings its ``ENVIRONMENT.json`` records;
    None when there is no such file (nothing can say at which scale the rows were made)."""
    folder = Path(folder)
    env_file = folder / "ENVIRONMENT.json"
    if not env_file.is_file():
        return None
    try:
        env = json.loads(env_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"explorer: {env_file}: not readable JSON ({e}); restore it (git checkout -- figures/)") \
            from None

    def part(files: dict[str, str], part_name: str) -> list[tuple[Setting, pd.DataFrame]]:
        out = []
        for name, notebook in files.items():
            setting, df = _setting(env, notebook), _read(folder / name, part_name)
            if setting is not None and not df.empty:
                out.append((setting, df))
        return out

    curve = part({CURVE_FILE: CURVE_NOTEBOOK}, "curve")
    sens = part({SENSITIVITY_FILE: SENSITIVITY_NOTEBOOK}, "sensitivity")
    grid = part(GRID_FILES, "grid")
    # the load curve and the study run at the first seed of the grid they share a cache with
    first = grid[0][0].seeds[:1] if grid else (0,)
    curve = [(replace(st, seeds=first), df) for st, df in curve]
    sens = [(replace(st, seeds=first), df) for st, df in sens]
    return Committed(folder, grid, part(COMPOSITION_FILES, "composition"), curve, sens)


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

