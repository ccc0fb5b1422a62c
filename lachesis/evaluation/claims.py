"""The claim ledger (abstract, §1, §5.3–§5.5): every quantitative statement and stated trend of the paper's
evaluation beside ours, read from the grids over the same scope and every seed, with a verdict.

A claim is declared once (:data:`CLAIMS`): its quote, section, scope (the cells it speaks of), the paper's value
and the measure that reads ours.  The rules, decided here and in docs/design.md §6 ("The claim ledger"):

- **At the SLO only.** A grid row whose ``slo_met`` is False is not "at the SLO": it is left out of every lifetime,
  ratio and trend, and the ledger row counts it (``misses``).  A value read from several rows (a ratio, a trend
  across configurations) needs every one of them to meet the SLO.
- **A range claim** (the paper gives a number or a range): ours is the range over cells of each cell's median over
  the seeds that meet the SLO, with the range of every such seed's value beside it.  Each end is set against the
  paper's end (a number is a range of one value): *reproduced* when both are within ±10% of the paper's,
  *close* within ±25%, *off* otherwise.
- **A trend** (a stated order, a threshold at every cell, a count): evaluated at each seed, over the groups whose
  rows all meet the SLO at that seed: *reproduced* when it holds at every seed where it can be read, *close* when
  at more than half of them, *off* otherwise.
- **Not evaluable** when no row of the scope can be read: the grids lack the scope, or every row misses the SLO.
  Never reproduced.

A row's ``reason`` is filled from the data (which end, cell or seed departs); a measured cause the lead adds is kept
in the package data (:data:`CAUSES_FILE`, keyed by claim id) and printed beside it, never typed into code.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from lachesis import paper
from lachesis.config import Endurance
from lachesis.evaluation.grid import CELL, CONFIG_LABELS, MODEL_NAMES
from lachesis.evaluation.tables import SPLIT
from lachesis.io import write_text
from lachesis.paths import package_data

#: The verdicts, in the order the tally prints them.
VERDICTS = ("reproduced", "close", "off", "not evaluable")
#: A range end within this relative distance of the paper's is reproduced; within CLOSE, close.
REPRODUCED, CLOSE = 0.10, 0.25
#: §5.2: "A device must outlast its five-year warranty."
WARRANTY_YEARS = Endurance().warranty_years
#: The measured causes of departures, by claim id (package data; the lead's, from measurements).
CAUSES_FILE = "claim_causes.yaml"

KEY = CELL + ["seed"]
MULTI, NO_REVIEWER, TAU3, BFCL = "multi_agent", "multi_agent_no_reviewer", "tau3", "bfcl"
MAVERICK, QWEN3 = MODEL_NAMES
DAISY = CONFIG_LABELS[-1]
ALL_CONFIGS = tuple(CONFIG_LABELS)
SPLIT_CONFIGS = tuple(SPLIT)
SHORT_NAMES = {MULTI: "multi-agent", NO_REVIEWER: "multi-agent w/o reviewer", TAU3: "τ³-bench", BFCL: "BFCLv4",
               MAVERICK: "Maverick", QWEN3: "Qwen3"}
POLICY_NAMES = {"hbm_first": "HBM-first", "deterministic": "w/o predictive path", "lachesis": "Lachesis"}


# ------------------------------------------------------------------------------------------------
# Scope: the cells a claim speaks of
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """A product of workloads, models, SLOs and memory configurations (a scope is a union of these)."""

    workloads: tuple[str, ...]
    slos: tuple[str, ...]
    memories: tuple[str, ...] = SPLIT_CONFIGS
    models: tuple[str, ...] = MODEL_NAMES

    def cells(self) -> list[tuple[str, str, str, str]]:
        return list(itertools.product(self.workloads, self.models, self.slos, self.memories))

    def text(self) -> str:
        mem = self.memories
        mems = (f"{mem[0]}–{mem[-1]}" if len(mem) > 1 and mem == SPLIT_CONFIGS[:len(mem)] else ", ".join(mem))
        models = "both models" if set(self.models) == set(MODEL_NAMES) else ", ".join(self.models)
        return f"{', '.join(SHORT_NAMES.get(w, w) for w in self.workloads)}; {models}; {', '.join(self.slos)}; {mems}"


def scope_cells(parts: Sequence[Part]) -> list[tuple[str, str, str, str]]:
    """The cells of a union of parts, each once, in declaration order."""
    return list(dict.fromkeys(c for p in parts for c in p.cells()))


def scope_dims(parts: Sequence[Part]) -> dict[str, list[str]]:
    """Per dimension (workload, model, slo, memory), the values a scope covers (what the README check compares)."""
    cells = scope_cells(parts)
    return {dim: list(dict.fromkeys(c[i] for c in cells)) for i, dim in enumerate(CELL)}


#: The ledger's scope columns, per dimension of a cell.
SCOPE_COLUMNS = {"workload": "scope_workloads", "model": "scope_models", "slo": "scope_slos",
                 "memory": "scope_memories"}


def cell_label(r: Mapping[str, Any]) -> str:
    """A cell as the ledger's reasons name it: "multi-agent Qwen3 tight 2/6"."""
    return " ".join(str(SHORT_NAMES.get(r[k], r[k])) for k in CELL if k in r)


# ------------------------------------------------------------------------------------------------
# The rows: the grids (and the Fig. 10 class composition) as one frame
# ------------------------------------------------------------------------------------------------

#: What every grid row must carry.
REQUIRED = (*CELL, "policy", "seed", "slo_met", "lifetime_years")


def _check_columns(df: pd.DataFrame, need: Sequence[str], where: str) -> None:
    if missing := [c for c in need if c not in df.columns]:
        raise ValueError(f"{where}: missing column(s) {', '.join(missing)}")


def _as_bool(s: pd.Series, where: str) -> pd.Series:
    """``slo_met`` as booleans; a one-line error naming the row whose value is neither."""
    if pd.api.types.is_bool_dtype(s):
        return s.astype(bool)
    m = s.map(lambda v: {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}.get(
        str(v).strip().lower()))
    if m.isna().any():
        i = m.index[m.isna()][0]
        raise ValueError(f"{where}: row {i}: slo_met {s[i]!r} is not true/false")
    return m.astype(bool)


def read_rows(grids: Sequence[str | Path | pd.DataFrame], composition: str | Path | pd.DataFrame | None = None
              ) -> pd.DataFrame:
    """The grids' rows as one frame (``fig09_grid.csv``, ``fig11_grid.csv``), each row with ``ok`` (its
    ``slo_met``), and with ``composition`` (``fig10_write_composition.csv``: bytes per class and tier per run) folded
    in as ``bytes_<class>_<tier>`` columns where a grid row lacks them.  A missing column or an unreadable
    ``slo_met`` is a ValueError naming the file."""
    frames = []
    for g in grids:
        where = "grid" if isinstance(g, pd.DataFrame) else str(g)
        df = g.copy() if isinstance(g, pd.DataFrame) else pd.read_csv(g)
        _check_columns(df, REQUIRED, where)
        df["ok"] = _as_bool(df["slo_met"], where)
        frames.append(df)
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*REQUIRED, "ok"])
    rows["seed"] = rows["seed"].astype(int)
    if composition is not None:
        where = "composition" if isinstance(composition, pd.DataFrame) else str(composition)
        comp = composition if isinstance(composition, pd.DataFrame) else pd.read_csv(composition)
        _check_columns(comp, (*CELL, "policy", "seed", "seg_class", "tier", "bytes"), where)
        if len(comp):
            wide = comp.assign(col="bytes_" + comp["seg_class"].astype(str) + "_" + comp["tier"].astype(str)
                               ).pivot_table(index=[*KEY, "policy"], columns="col", values="bytes", aggfunc="first")
            wide.columns.name = None
            new = [c for c in wide.columns if c not in rows.columns]
            rows = rows.merge(wide[new].reset_index().astype({"seed": int}), on=[*KEY, "policy"], how="left")
    return rows


# ------------------------------------------------------------------------------------------------
# Reading a scope: one wide row per cell and seed, the policies side by side
# ------------------------------------------------------------------------------------------------


@dataclass
class Read:
    """A scope read off the rows for some policies: ``table`` has one row per (cell, seed) that every policy ran,
    with ``<column>|<policy>`` columns and ``ok`` (every policy's row meets the SLO); ``cells`` the scope's cells,
    ``absent`` how many of them lack a policy's rows, ``misses`` the (cell, seed, policy) rows that miss the SLO."""

    table: pd.DataFrame
    cells: list[tuple[str, str, str, str]]
    absent: int
    misses: int


def read(rows: pd.DataFrame, parts: Sequence[Part], policies: Sequence[str]) -> Read:
    cells = scope_cells(parts)
    want = pd.MultiIndex.from_tuples(cells, names=CELL)
    at = rows.set_index(CELL).index.isin(want)
    wide, misses, present = None, 0, set(cells)
    for p in policies:
        r = rows[at & rows["policy"].eq(p)]
        misses += int((~r["ok"]).sum())
        present &= set(map(tuple, r[CELL].to_numpy().tolist()))
        cols = [c for c in r.columns if c not in (*KEY, "policy")]
        part = r.set_index(KEY)[cols].add_suffix(f"|{p}")
        part = part[~part.index.duplicated()]
        wide = part if wide is None else wide.join(part, how="inner")
    assert wide is not None, "a measure reads one policy or more"
    wide["ok"] = wide[[f"ok|{p}" for p in policies]].astype(bool).all(axis=1)
    return Read(wide.reset_index(), cells, len(cells) - len(present), misses)


def col(t: pd.DataFrame, name: str, policy: str) -> pd.Series:
    """One policy's column of a :class:`Read` table."""
    return t[f"{name}|{policy}"].astype(float)


# ------------------------------------------------------------------------------------------------
# Measures
# ------------------------------------------------------------------------------------------------

Values = Callable[[pd.DataFrame], pd.Series]


def lifetime(policy: str) -> Values:
    return lambda t: col(t, "lifetime_years", policy)


def ratio(num: str, den: str) -> Values:
    return lambda t: col(t, "lifetime_years", num) / col(t, "lifetime_years", den)


def hbm_share(policy: str) -> Values:
    return lambda t: col(t, "bytes_hbm", policy) / (col(t, "bytes_hbm", policy) + col(t, "bytes_hbf", policy))


def hbm_bytes_ratio(num: str, den: str) -> Values:
    return lambda t: col(t, "bytes_hbm", num) / col(t, "bytes_hbm", den)


def to_flash(policy: str, seg_class: str) -> Values:
    def f(t: pd.DataFrame) -> pd.Series:
        h, x = f"bytes_{seg_class}_hbm|{policy}", f"bytes_{seg_class}_hbf|{policy}"
        if h not in t or x not in t:
            return pd.Series(np.nan, index=t.index)
        return t[x].astype(float) / (t[h].astype(float) + t[x].astype(float))
    return f


def column(name: str, policy: str) -> Values:
    return lambda t: col(t, name, policy)


@dataclass(frozen=True)
class PerCell:
    """A range measure: one value per cell and seed (``values`` of the :class:`Read` table)."""

    policies: tuple[str, ...]
    values: Values
    what: str

    def measure(self, rows: pd.DataFrame, parts: Sequence[Part]) -> tuple[pd.DataFrame, Read]:
        rd = read(rows, parts, self.policies)
        t = rd.table
        out = t[KEY].copy()
        out["value"] = self.values(t).to_numpy() if len(t) else []
        out["ok"] = t["ok"].to_numpy(bool)
        out["cell"] = [cell_label(r) for r in out[CELL].to_dict("records")]
        return out, rd


@dataclass(frozen=True)
class Between:
    """A range measure read between two configurations of one (workload, model, SLO): ``fn(at_a, at_b)``, one
    value per group and seed (e.g. the share of flash writes the added HBM absorbs from 1/7 to 4/4)."""

    policies: tuple[str, ...]
    values: Values
    a: str
    b: str
    fn: Callable[[float, float], float]
    what: str

    def measure(self, rows: pd.DataFrame, parts: Sequence[Part]) -> tuple[pd.DataFrame, Read]:
        rd = read(rows, parts, self.policies)
        t = rd.table.assign(value=self.values(rd.table) if len(rd.table) else [])
        g = [k for k in KEY if k != "memory"]
        recs = []
        for key, sub in t.groupby(g, sort=False):
            s = sub.set_index("memory")
            if {self.a, self.b} <= set(s.index):
                recs.append(dict(zip(g, key), memory=f"{self.a}→{self.b}",
                                 value=self.fn(float(s.loc[self.a, "value"]), float(s.loc[self.b, "value"])),
                                 ok=bool(s.loc[[self.a, self.b], "ok"].all())))
        out = pd.DataFrame(recs, columns=[*KEY, "value", "ok"])
        out["cell"] = [cell_label(r) for r in out[CELL].to_dict("records")]
        return out, rd


#: A trend's test on one group at one seed (its rows of the :class:`Read` table with ``value``): whether it holds
#: (None: it cannot be read there) and what was seen.
Test = Callable[[pd.DataFrame], tuple[bool | None, str]]


@dataclass(frozen=True)
class Trend:
    """A trend measure: ``test`` on each group (``by``: the cell's keys a group shares; () for the whole scope) at each
    seed.  A group is read at a seed only when each of its scope cells has a row there meeting the SLO; with
    ``partial``, the test gets the rows that do (``ok``) and decides itself what the others leave open."""

    policies: tuple[str, ...]
    values: Values
    by: tuple[str, ...]
    test: Test
    what: str
    partial: bool = False

    def per_seed(self, rows: pd.DataFrame, parts: Sequence[Part]) -> tuple[pd.DataFrame, Read]:
        """One row per seed: ``holds`` (True, False or None) and ``detail`` (the first group that breaks)."""
        rd = read(rows, parts, self.policies)
        t = rd.table.assign(value=self.values(rd.table) if len(rd.table) else [],
                            cell=[cell_label(r) for r in rd.table[CELL].to_dict("records")])
        cells = pd.DataFrame(rd.cells, columns=CELL)
        by = list(self.by)
        groups = cells.groupby(by, sort=False) if by else [((), cells)]
        recs = []
        for seed in sorted(t["seed"].unique()):
            at = t[t["seed"].eq(seed)]
            verdicts, seen = [], []
            for _, want in groups:
                sub = at.merge(want, on=CELL)
                if self.partial and bool(sub["ok"].any()):
                    v = self.test(sub.assign(missing=len(want) - int(sub["ok"].sum())))
                    got = list(sub.loc[sub["ok"], "cell"])
                elif len(sub) == len(want) and bool(sub["ok"].all()):
                    v, got = self.test(sub.sort_values("memory", key=_config_order)), list(sub["cell"])
                else:
                    v, got = (None, ""), []
                verdicts.append(v)
                seen += got if v[0] is not None else []
            read_ = [v for v in verdicts if v[0] is not None]
            broken = [d for h, d in read_ if h is False]
            recs.append(dict(seed=int(seed), holds=None if not read_ else not broken,
                             detail=broken[0] if broken else "", cells=seen))
        return pd.DataFrame(recs, columns=["seed", "holds", "detail", "cells"]), rd


def _config_order(s: pd.Series) -> pd.Series:
    return s.map({c: i for i, c in enumerate(CONFIG_LABELS)})


# Trend tests -------------------------------------------------------------------------------------


def _fmt_num(v: float) -> str:
    return f"{v:.3g}"


def each(pred: Callable[[float], bool], words: str) -> Test:
    """Every cell (``by`` = the cell): ``pred(value)``; the detail names the cell that breaks it."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        r = sub.iloc[0]
        return bool(pred(float(r["value"]))), f"{r['cell']}: {_fmt_num(float(r['value']))} (needs {words})"
    return test


def monotone(rising: bool) -> Test:
    """The group's values over its configurations in order rise (fall) with each one."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        v = sub["value"].to_numpy(float)
        d = np.diff(v)
        ok = bool(np.all(d > 0) if rising else np.all(d < 0))
        seq = " → ".join(f"{m} {_fmt_num(x)}" for m, x in zip(sub["memory"], v))
        return ok, f"{_group_label(sub)}: {seq}"
    return test


def _group_label(sub: pd.DataFrame) -> str:
    r = sub.iloc[0]
    return " ".join(str(SHORT_NAMES.get(r[k], r[k])) for k in CELL if k != "memory" and sub[k].nunique() == 1)


def peak_in(allowed: Sequence[str]) -> Test:
    """The group's largest value is at one of ``allowed``."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        at = str(sub.loc[sub["value"].idxmax(), "memory"])
        return at in allowed, f"{_group_label(sub)}: peaks at {at}"
    return test


def falls_past_peak(sub: pd.DataFrame) -> tuple[bool | None, str]:
    """After its largest value the group's values fall with every configuration."""
    v = sub["value"].to_numpy(float)
    i = int(np.argmax(v))
    ok = bool(np.all(np.diff(v[i:]) < 0))
    return ok, f"{_group_label(sub)}: " + " → ".join(f"{m} {_fmt_num(x)}" for m, x in zip(sub["memory"], v))


def largest_at(memory: str) -> Test:
    """The group's value at ``memory`` exceeds its value at every other configuration."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        s = sub.set_index("memory")["value"]
        rest = s.drop(memory)
        return bool(s[memory] > rest.max()), (f"{_group_label(sub)}: {memory} {_fmt_num(s[memory])}, "
                                              f"best other {rest.idxmax()} {_fmt_num(rest.max())}")
    return test


def less(dim: str, a: str, b: str) -> Test:
    """Within the group, the value where ``dim`` is ``a`` is below the value where it is ``b``."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        s = sub.set_index(dim)["value"]
        return bool(s[a] < s[b]), (f"{_group_label(sub)}: {SHORT_NAMES.get(a, a)} {_fmt_num(s[a])} vs "
                                   f"{SHORT_NAMES.get(b, b)} {_fmt_num(s[b])}")
    return test


def smaller_loss(with_: str, without: str, smaller: str, larger: str) -> Test:
    """The lifetime lost from ``without`` to ``with_`` (workloads) is smaller under ``smaller`` than ``larger``."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        s = sub.set_index("workload")
        loss = {p: 1 - float(s.loc[with_, f"lifetime_years|{p}"]) / float(s.loc[without, f"lifetime_years|{p}"])
                for p in (smaller, larger)}
        return loss[smaller] < loss[larger], (f"{_group_label(sub)}: loss {POLICY_NAMES[smaller]} "
                                              f"{loss[smaller]:+.0%}, {POLICY_NAMES[larger]} {loss[larger]:+.0%}")
    return test


def margins_hold(sub: pd.DataFrame) -> tuple[bool | None, str]:
    """Both margins of the ablation (§5.4) exceed 1 at the cell: w/o predictive path over HBM-first and Lachesis
    over w/o predictive path."""
    r = sub.iloc[0]
    det = float(r["lifetime_years|deterministic"]) / float(r["lifetime_years|hbm_first"])
    pred = float(r["lifetime_years|lachesis"]) / float(r["lifetime_years|deterministic"])
    return det > 1 and pred > 1, f"{r['cell']}: {det:.3g}× and {pred:.3g}×"


def flattens(sub: pd.DataFrame) -> tuple[bool | None, str]:
    """ASSUMPTION ("flattens", §5.5): the last slot added (3/5 → 4/4) raises the value by less than half of what the
    first (1/7 → 2/6) did."""
    s = sub.set_index("memory")["value"]
    first, last = s["2/6"] - s["1/7"], s["4/4"] - s["3/5"]
    return bool(last < 0.5 * first), f"{_group_label(sub)}: +{100 * first:.1f} pp then +{100 * last:.1f} pp"


def only(cell: tuple[str, str], threshold: float) -> Test:
    """Partial: among (model, memory) cells, the value reaches ``threshold`` at ``cell`` and nowhere else."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        ok = sub[sub["ok"]]
        hit = ok[ok["value"] >= threshold]
        others = hit[[(m, c) != cell for m, c in zip(hit["model"], hit["memory"])]]
        if len(others):
            return False, f"also at {', '.join(others['cell'])}"
        target = ok[[(m, c) == cell for m, c in zip(ok["model"], ok["memory"])]]
        if not len(target):
            return None, ""
        v = float(target["value"].iloc[0])
        return v >= threshold, f"{target['cell'].iloc[0]}: {_fmt_num(v)}"
    return test


def count_below(threshold: float, n: int) -> Test:
    """Partial: exactly ``n`` cells of the scope fall below ``threshold``."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        ok = sub[sub["ok"]]
        below = ok[ok["value"] < threshold]
        detail = f"{len(below)} below ({', '.join(below['cell'])})" if len(below) else "none below"
        if len(below) > n:
            return False, detail
        return (len(below) == n, detail) if int(sub["missing"].iloc[0]) == 0 else (None, "")
    return test


def some_not_all(threshold: float) -> Test:
    """Partial: some cells of the scope reach ``threshold`` and some do not."""
    def test(sub: pd.DataFrame) -> tuple[bool | None, str]:
        ok = sub[sub["ok"]]
        above = int((ok["value"] >= threshold).sum())
        if above and above < len(ok):
            return True, f"{above} of {len(ok)}"
        return (False, f"{above} of {len(ok)} reach it") if int(sub["missing"].iloc[0]) == 0 else (None, "")
    return test


def peaks_later(sub: pd.DataFrame) -> tuple[bool | None, str]:
    """The multi-agent trace's peak configuration lies past each single-agent trace's (§5.5)."""
    peak = {w: CONFIG_LABELS.index(str(d.loc[d["value"].idxmax(), "memory"])) for w, d in sub.groupby("workload")}
    single = [w for w in peak if w != MULTI]
    ok = all(peak[MULTI] > peak[w] for w in single)
    return ok, f"{_group_label(sub)}: " + ", ".join(f"{SHORT_NAMES.get(w, w)} at {CONFIG_LABELS[i]}"
                                                    for w, i in peak.items())


# ------------------------------------------------------------------------------------------------
# The claims
# ------------------------------------------------------------------------------------------------

PaperValue = float | tuple[float, float] | None


def _span(by_model: Mapping[str, float]) -> tuple[float, float]:
    return min(by_model.values()), max(by_model.values())


@dataclass(frozen=True)
class Claim:
    """One statement of the paper: ``paper`` a number, a (lo, hi) range, or None for a trend (it holds);
    ``unit``: × (a ratio), y (device-years), % (a fraction, printed ×100), GB, sessions; ``note``: the reading of the
    scope where the text leaves it open (a named assumption)."""

    id: str
    section: str
    quote: str
    scope: tuple[Part, ...]
    paper: PaperValue
    measure: PerCell | Between | Trend
    unit: str = ""
    note: str = ""

    @property
    def kind(self) -> str:
        return "trend" if isinstance(self.measure, Trend) else "range"


BOTH_SLOS = ("tight", "loose")
M_TIGHT = Part((MULTI,), ("tight",))
M_LOOSE = Part((MULTI,), ("loose",))
M_BOTH = Part((MULTI,), BOTH_SLOS)
M_TIGHT_ALL = Part((MULTI,), ("tight",), ALL_CONFIGS)
M_BOTH_ALL = Part((MULTI,), BOTH_SLOS, ALL_CONFIGS)
#: Fig. 10's panels: Llama-4-Maverick at the loose SLO, every configuration (its caption).
FIG10 = Part((MULTI,), ("loose",), ALL_CONFIGS, (MAVERICK,))
S_SPLIT = Part((TAU3, BFCL), ("tight",))
S_ALL = Part((TAU3, BFCL), ("tight",), ALL_CONFIGS)
#: Fig. 12's panels: Qwen3-235B-A22B at the tight SLO.
FIG12 = Part((TAU3, BFCL), ("tight",), SPLIT_CONFIGS, (QWEN3,))
REVIEWER_PAIR = Part((MULTI, NO_REVIEWER), BOTH_SLOS, ALL_CONFIGS)

GAIN = ("lachesis", "hbm_first")
CELLWISE = tuple(CELL)
SERIES = ("workload", "model", "slo")  # a trend across configurations
_gain, _at_warranty = ratio(*GAIN), (lambda v: v >= WARRANTY_YEARS)
_W = f"≥ {WARRANTY_YEARS:g} y"

SCOPE_ALL_TRACES = ("All three traces (the multi-agent trace with the reviewer at both SLOs, the single-agent traces "
                    "at the tight SLO), both models, 1/7–4/4: the low end is §5.3's loose one and the high end §5.5's, "
                    "and 8/8*'s 10.06× lies outside the range.")
SCOPE_YEARS_BOTH_SLOS = ("Both SLOs: the sentence gives the ratios at both, and Lachesis's 3.3 y is below the warranty "
                         "§5.3 says it outlasts at every tight configuration, so it is a loose cell.")

CLAIMS: tuple[Claim, ...] = (
    # Abstract, §1 (and §6) -------------------------------------------------------------------------------------
    Claim("abstract.gain", "abstract; §1", "Lachesis extends HBF lifetime by 1.19–3.13× over HBM-first placement",
          (M_BOTH, S_SPLIT), paper.GAIN_OVERALL, PerCell(GAIN, _gain, "Lachesis/HBM-first"), "×",
          SCOPE_ALL_TRACES),
    Claim("abstract.years", "abstract", "reaching 3.3–12.2 device-years", (M_BOTH, S_SPLIT),
          (paper.MULTI_LACHESIS_YEARS_1_TO_4[0], paper.SINGLE_LACHESIS_YEARS_1_TO_4[1]),
          PerCell(("lachesis",), lifetime("lachesis"), "Lachesis"), "y", SCOPE_ALL_TRACES),
    Claim("abstract.warranty", "abstract; §1",
          "at the full load a tight SLO admits, HBF outlasts its five-year warranty on the multi-agent trace",
          (M_TIGHT_ALL,), None, Trend(GAIN, lifetime("lachesis"), CELLWISE, each(_at_warranty, _W),
                                      "Lachesis, where HBM-first too meets the SLO (the load is one it admits)"),
          "y", "Every configuration and both models (§5.3's reading); a cell counts only where the load policy, "
               "HBM-first, meets the SLO as well: the load is one the tight SLO admits."),
    # §5.3 -------------------------------------------------------------------------------------------------------
    Claim("multi.warranty.lachesis", "§5.3", "At a tight SLO, HBF outlasts the five-year warranty under Lachesis at "
          "every GPU-memory configuration and on both models", (M_TIGHT_ALL,), None,
          Trend(("lachesis",), lifetime("lachesis"), CELLWISE, each(_at_warranty, _W), "Lachesis"), "y"),
    Claim("multi.warranty.hbm_first", "§5.3", "and under HBM-first placement only with Qwen3-235B-A22B on H3's daisy "
          "chain", (M_TIGHT_ALL,), None,
          Trend(("hbm_first",), lifetime("hbm_first"), (), only((QWEN3, DAISY), WARRANTY_YEARS), "HBM-first",
                partial=True), "y"),
    Claim("multi.years.lachesis", "§5.3", "Lachesis reaches 3.3–9.3 device-years", (M_BOTH,),
          paper.MULTI_LACHESIS_YEARS_1_TO_4, PerCell(("lachesis",), lifetime("lachesis"), "Lachesis"), "y",
          SCOPE_YEARS_BOTH_SLOS),
    Claim("multi.years.hbm_first", "§5.3", "against HBM-first's 1.9–4.8", (M_BOTH,),
          paper.MULTI_HBM_FIRST_YEARS_1_TO_4, PerCell(("hbm_first",), lifetime("hbm_first"), "HBM-first"), "y",
          SCOPE_YEARS_BOTH_SLOS),
    Claim("multi.gain.tight", "§5.3", "extending HBF lifetime by 1.50–2.95× at the tight SLO", (M_TIGHT,),
          paper.MULTI_GAIN_TIGHT, PerCell(GAIN, _gain, "Lachesis/HBM-first"), "×"),
    Claim("multi.gain.loose", "§5.3", "and 1.19–1.89× at the loose one", (M_LOOSE,), paper.MULTI_GAIN_LOOSE,
          PerCell(GAIN, _gain, "Lachesis/HBM-first"), "×"),
    Claim("multi.gain.everywhere", "§5.3", "Lachesis extends HBF lifetime over HBM-first at every model, SLO and "
          "configuration of the multi-agent trace", (M_BOTH_ALL,), None,
          Trend(GAIN, _gain, CELLWISE, each(lambda v: v > 1, "> 1×"), "Lachesis/HBM-first"), "×"),
    Claim("multi.absorbed.hbm_first", "§5.3", "At the tight SLO, the added HBM absorbs 12% of HBM-first's flash "
          "writes", (Part((MULTI,), ("tight",), ("1/7", "4/4")),), paper.ADDED_HBM_ABSORBS_TIGHT["hbm_first"],
          Between(("hbm_first",), column("hbf_write_rate", "hbm_first"), "1/7", "4/4", lambda a, b: 1 - b / a,
                  "HBM-first, 1 − HBF write rate at 4/4 ÷ at 1/7"), "%",
          "From one HBM slot to four (the sentence before it), per model: the fall of the HBF write rate per GPU."),
    Claim("multi.absorbed.lachesis", "§5.3", "and 54–56% of Lachesis's",
          (Part((MULTI,), ("tight",), ("1/7", "4/4")),), paper.ADDED_HBM_ABSORBS_TIGHT["lachesis"],
          Between(("lachesis",), column("hbf_write_rate", "lachesis"), "1/7", "4/4", lambda a, b: 1 - b / a,
                  "Lachesis, 1 − HBF write rate at 4/4 ÷ at 1/7"), "%",
          "From one HBM slot to four, per model: the fall of the HBF write rate per GPU."),
    Claim("multi.trend.hbm_first_falls", "§5.3", "HBF lifetime falls under HBM-first [...] with each slot added",
          (M_TIGHT,), None, Trend(("hbm_first",), lifetime("hbm_first"), SERIES, monotone(False), "HBM-first"), "y"),
    Claim("multi.trend.lachesis_rises", "§5.3", "and rises under Lachesis with each slot added", (M_TIGHT,), None,
          Trend(("lachesis",), lifetime("lachesis"), SERIES, monotone(True), "Lachesis"), "y"),
    Claim("multi.loose.more_sessions", "§5.3", "A looser SLO instead admits more concurrent sessions", (M_BOTH_ALL,),
          None, Trend(("hbm_first",), column("n_sessions", "hbm_first"), ("workload", "model", "memory"),
                      less("slo", "tight", "loose"), "sessions per GPU at HBM-first's load"), "sessions"),
    Claim("multi.loose.gain_narrows", "§5.3", "so that ratio falls and the gain narrows", (M_BOTH_ALL,), None,
          Trend(GAIN, _gain, ("workload", "model", "memory"), less("slo", "loose", "tight"), "Lachesis/HBM-first"),
          "×"),
    Claim("multi.loose.peak", "§5.3", "It also moves the longest-lived configuration down to two or three HBM slots "
          "in eight", (M_LOOSE,), None,
          Trend(("lachesis",), lifetime("lachesis"), SERIES, peak_in(("2/6", "3/5")), "Lachesis"), "y",
          "Lachesis's longest-lived configuration among those that split the eight slots (8/8* outlives them all)."),
    Claim("multi.write.hbm_bytes", "§5.3", "Lachesis writes 8.2–19.5× as much KV to HBM as HBM-first placement",
          (FIG10,), paper.HBM_WRITE_RATIO_LACHESIS_OVER_HBM_FIRST,
          PerCell(GAIN, hbm_bytes_ratio(*GAIN), "HBM bytes, Lachesis ÷ HBM-first"), "×",
          "Fig. 10's scope (Llama-4-Maverick at the loose SLO, its caption), every configuration it shows."),
    Claim("multi.write.hbm_share.lachesis", "§5.3", "HBM takes 19–51% of a run's write bytes under Lachesis", (FIG10,),
          paper.HBM_WRITE_SHARE_LACHESIS, PerCell(("lachesis",), hbm_share("lachesis"), "Lachesis"), "%",
          "Fig. 10's scope (Llama-4-Maverick at the loose SLO, its caption), every configuration it shows."),
    Claim("multi.write.hbm_share.hbm_first", "§5.3", "against 1–7% under HBM-first", (FIG10,),
          paper.HBM_WRITE_SHARE_HBM_FIRST, PerCell(("hbm_first",), hbm_share("hbm_first"), "HBM-first"), "%",
          "Fig. 10's scope (Llama-4-Maverick at the loose SLO, its caption), every configuration it shows."),
    Claim("multi.reviewer.live_short", "§5.3", "The reviewer increases the short-lived KV live at one time",
          (REVIEWER_PAIR,), None,
          Trend(("lachesis",), lambda t: col(t, "live_short_kv_bytes", "lachesis") / 1e9, ("model", "slo", "memory"),
                less("workload", NO_REVIEWER, MULTI), "live short-lived KV per GPU"), "GB",
          "Per GPU, each trace at its own load; read off Lachesis's runs (live KV barely depends on the placement)."),
    Claim("multi.reviewer.hbm_first", "§5.3", "HBF lifetime falls under both placement policies [HBM-first]",
          (REVIEWER_PAIR,), None,
          Trend(("hbm_first",), lifetime("hbm_first"), ("model", "slo", "memory"), less("workload", MULTI, NO_REVIEWER),
                "HBM-first, with the reviewer vs without"), "y"),
    Claim("multi.reviewer.lachesis", "§5.3", "HBF lifetime falls under both placement policies [Lachesis]",
          (REVIEWER_PAIR,), None,
          Trend(("lachesis",), lifetime("lachesis"), ("model", "slo", "memory"), less("workload", MULTI, NO_REVIEWER),
                "Lachesis, with the reviewer vs without"), "y"),
    Claim("multi.reviewer.smaller_loss", "§5.3", "so the loss is smaller under Lachesis than under HBM-first",
          (REVIEWER_PAIR,), None,
          Trend(GAIN, lifetime("lachesis"), ("model", "slo", "memory"),
                smaller_loss(MULTI, NO_REVIEWER, "lachesis", "hbm_first"), "1 − lifetime with ÷ without the reviewer"),
          "%"),
    Claim("multi.daisy.gain_tight", "§5.3", "Lachesis extends HBF lifetime by 10.06–10.09× at the tight SLO on H3's "
          "daisy chain", (Part((MULTI,), ("tight",), (DAISY,)),), paper.DAISY_GAIN_TIGHT,
          PerCell(GAIN, _gain, "Lachesis/HBM-first"), "×"),
    Claim("multi.daisy.largest", "§5.3", "the largest gain at any configuration", (M_TIGHT_ALL,), None,
          Trend(GAIN, _gain, SERIES, largest_at(DAISY), "Lachesis/HBM-first"), "×",
          "At the tight SLO (the sentence's), per model."),
    Claim("multi.daisy.gain_loose", "§5.3", "The gain falls to 2.53× on the change of SLO alone",
          (Part((MULTI,), ("loose",), (DAISY,)),), paper.DAISY_GAIN_LOOSE,
          PerCell(GAIN, _gain, "Lachesis/HBM-first"), "×"),
    Claim("multi.daisy.years.lachesis", "Fig. 9", "[8/8*, tight, printed on the bars] Lachesis 43.6 and 54.3",
          (Part((MULTI,), ("tight",), (DAISY,)),), _span(paper.DAISY_YEARS_TIGHT["lachesis"]),
          PerCell(("lachesis",), lifetime("lachesis"), "Lachesis"), "y",
          "Our reading of the figure's text (lachesis.paper.DAISY_YEARS_TIGHT): 43.6 y Maverick, 54.3 y Qwen3."),
    Claim("multi.daisy.years.deterministic", "Fig. 9", "[8/8*, tight, printed on the bars] w/o predictive path 42.1 "
          "and 49.0", (Part((MULTI,), ("tight",), (DAISY,)),), _span(paper.DAISY_YEARS_TIGHT["deterministic"]),
          PerCell(("deterministic",), lifetime("deterministic"), "w/o predictive path"), "y",
          "Our reading of the figure's text (lachesis.paper.DAISY_YEARS_TIGHT): 42.1 y Maverick, 49.0 y Qwen3."),
    Claim("multi.daisy.years.no_reviewer", "Fig. 9", "[8/8*, tight, w/o reviewer, printed on the bars] 39.1 and 43.0",
          (Part((NO_REVIEWER,), ("tight",), (DAISY,)),), _span(paper.DAISY_YEARS_TIGHT["no_reviewer"]),
          PerCell(("lachesis",), lifetime("lachesis"), "Lachesis"), "y",
          "Our reading of the figure's text: Lachesis and w/o predictive path both 39.1 y (Maverick), 43.0 y (Qwen3)."),
    # §5.4 -------------------------------------------------------------------------------------------------------
    Claim("ablation.deterministic", "§5.4", "It yields 1.11–2.00× over HBM-first on the multi-agent trace", (M_BOTH,),
          paper.DETERMINISTIC_GAIN, PerCell(("deterministic", "hbm_first"), ratio("deterministic", "hbm_first"),
                                            "w/o predictive path/HBM-first"), "×",
          "Both SLOs and models at the configurations that split the eight slots (the next sentence's)."),
    Claim("ablation.predictive", "§5.4", "and Lachesis adds 1.33–1.54× over it", (M_BOTH,),
          paper.PREDICTIVE_GAIN_WITH_REVIEWER,
          PerCell(("lachesis", "deterministic"), ratio("lachesis", "deterministic"), "Lachesis/w/o predictive path"),
          "×", "Both SLOs and models at the configurations that split the eight slots."),
    Claim("ablation.margins_hold", "§5.4", "Both margins hold on both models and at every configuration that splits "
          "the eight slots", (M_BOTH,), None,
          Trend(("hbm_first", "deterministic", "lachesis"), lifetime("lachesis"), CELLWISE, margins_hold,
                "both ratios > 1"), "×"),
    Claim("ablation.predictive.no_reviewer", "§5.4", "1.33–1.54× with a reviewer present against 1.05–1.14× without "
          "one", (Part((NO_REVIEWER,), BOTH_SLOS),), paper.PREDICTIVE_GAIN_WITHOUT_REVIEWER,
          PerCell(("lachesis", "deterministic"), ratio("lachesis", "deterministic"), "Lachesis/w/o predictive path"),
          "×", "The trace without the reviewer, both SLOs and models, 1/7–4/4."),
    Claim("ablation.reviewer_flash.deterministic", "§5.4", "The reviewer's own write volume reaches flash at 45–95% "
          "without the predictive path", (FIG10,), paper.REVIEWER_TO_FLASH_WO_PREDICTIVE,
          PerCell(("deterministic",), to_flash("deterministic", "reviewer"), "w/o predictive path"), "%",
          "Fig. 10's scope (the sentence cites it): Llama-4-Maverick at the loose SLO, every configuration."),
    Claim("ablation.reviewer_flash.lachesis", "§5.4", "and at 2–25% under Lachesis", (FIG10,),
          paper.REVIEWER_TO_FLASH_LACHESIS, PerCell(("lachesis",), to_flash("lachesis", "reviewer"), "Lachesis"), "%",
          "Fig. 10's scope (the sentence cites it): Llama-4-Maverick at the loose SLO, every configuration."),
    # §5.5 -------------------------------------------------------------------------------------------------------
    Claim("single.warranty.lachesis", "§5.5", "HBF outlasts the five-year warranty under Lachesis at every "
          "configuration but one", (S_ALL,), None,
          Trend(("lachesis",), lifetime("lachesis"), (), count_below(WARRANTY_YEARS, 1), "Lachesis", partial=True),
          "y", "Both traces, both models, all five configurations: exactly one cell below the warranty."),
    Claim("single.warranty.hbm_first_tau3", "§5.5", "and under HBM-first placement at some of τ³-bench's",
          (Part((TAU3,), ("tight",), ALL_CONFIGS),), None,
          Trend(("hbm_first",), lifetime("hbm_first"), (), some_not_all(WARRANTY_YEARS), "HBM-first", partial=True),
          "y"),
    Claim("single.warranty.hbm_first_bfcl", "§5.5", "and none of BFCLv4's", (Part((BFCL,), ("tight",), ALL_CONFIGS),),
          None, Trend(("hbm_first",), lifetime("hbm_first"), CELLWISE, each(lambda v: v < WARRANTY_YEARS,
                                                                              f"< {WARRANTY_YEARS:g} y"),
                      "HBM-first"), "y"),
    Claim("single.years.lachesis", "§5.5", "Lachesis reaches 4.6–12.2 device-years", (S_SPLIT,),
          paper.SINGLE_LACHESIS_YEARS_1_TO_4, PerCell(("lachesis",), lifetime("lachesis"), "Lachesis"), "y"),
    Claim("single.years.hbm_first", "§5.5", "against HBM-first's 2.1–6.4", (S_SPLIT,),
          paper.SINGLE_HBM_FIRST_YEARS_1_TO_4, PerCell(("hbm_first",), lifetime("hbm_first"), "HBM-first"), "y"),
    Claim("single.gain", "§5.5", "extending HBF lifetime by 1.35–3.13×", (S_SPLIT,), paper.SINGLE_GAIN,
          PerCell(GAIN, _gain, "Lachesis/HBM-first"), "×"),
    Claim("single.peak", "§5.5", "Lachesis's lifetime peaks at one to three HBM slots in eight", (S_SPLIT,), None,
          Trend(("lachesis",), lifetime("lachesis"), SERIES, peak_in(("1/7", "2/6", "3/5")), "Lachesis"), "y"),
    Claim("single.falls_past_peak", "§5.5", "and falls with every slot added past the peak", (S_SPLIT,), None,
          Trend(("lachesis",), lifetime("lachesis"), SERIES, falls_past_peak, "Lachesis"), "y"),
    Claim("single.share_flattens", "§5.5", "its share of a run's write bytes flattens (Figure 12)", (FIG12,), None,
          Trend(("lachesis",), hbm_share("lachesis"), SERIES, flattens, "Lachesis's HBM share"), "%",
          "Fig. 12's scope (Qwen3-235B-A22B, tight). Flattens: the last slot adds under half of what the first did."),
    Claim("single.bfcl_loss", "§5.5", "Lachesis reaches 30–31% fewer device-years on BFCLv4 at four HBM slots in "
          "eight than at one", (Part((BFCL,), ("tight",), ("1/7", "4/4")),), paper.BFCL_4_4_VS_1_7_LOSS,
          Between(("lachesis",), lifetime("lachesis"), "1/7", "4/4", lambda a, b: 1 - b / a,
                  "Lachesis, 1 − lifetime at 4/4 ÷ at 1/7"), "%"),
    Claim("single.daisy_longest", "§5.5", "Under Lachesis, H3's daisy chain [...] reaches the longest lifetime at "
          "every benchmark and model", (S_ALL,), None,
          Trend(("lachesis",), lifetime("lachesis"), SERIES, largest_at(DAISY), "Lachesis"), "y"),
    Claim("single.multi_peaks_later", "§5.5", "The multi-agent trace peaks later at the same SLO",
          (Part((MULTI, TAU3, BFCL), ("tight",)),), None,
          Trend(("lachesis",), lifetime("lachesis"), ("model",), peaks_later, "Lachesis's peak configuration"), "y",
          "Lachesis at the tight SLO, per model: the multi-agent peak lies past each single-agent trace's."),
)


def claim(claim_id: str) -> Claim:
    """The claim of ``claim_id``; a KeyError naming the known ids when there is none."""
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}; known: {', '.join(c.id for c in CLAIMS)}")


# ------------------------------------------------------------------------------------------------
# Verdicts
# ------------------------------------------------------------------------------------------------


def _ends(v: PaperValue) -> tuple[float, float]:
    if isinstance(v, tuple):
        return float(v[0]), float(v[1])
    assert v is not None
    return float(v), float(v)


def range_verdict(ours: tuple[float, float], paper_value: PaperValue) -> tuple[str, float, float]:
    """(verdict, error of the low end, error of the high end): each end of ours against the paper's, relative to the
    paper's; reproduced when both are within :data:`REPRODUCED`, close within :data:`CLOSE`, off otherwise."""
    lo, hi = _ends(paper_value)
    e_lo, e_hi = ours[0] / lo - 1, ours[1] / hi - 1
    worst = max(abs(e_lo), abs(e_hi))
    return ("reproduced" if worst <= REPRODUCED else "close" if worst <= CLOSE else "off"), e_lo, e_hi


def trend_verdict(holds: int, read_at: int) -> str:
    """Reproduced when a trend holds at every seed it can be read at, close at more than half, off otherwise."""
    if read_at == 0:
        return "not evaluable"
    return "reproduced" if holds == read_at else "close" if holds > read_at / 2 else "off"


#: How a value of each unit ends when printed.
UNIT_SUFFIX = {"%": "%", "×": "×", "y": " y", "GB": " GB"}


def fmt(v: float, unit: str, digits: int = 3) -> str:
    """A value as the ledger prints it: a fraction (%) ×100, device-years (y), ratios (×)."""
    if not np.isfinite(v):
        return "—"
    x = 100 * v if unit == "%" else v
    text = f"{x:.{digits}g}".replace("-", "−")
    return text + UNIT_SUFFIX.get(unit, "")


def fmt_range(lo: float, hi: float, unit: str) -> str:
    """``lo–hi`` (one value when they print alike at the most digits), with more digits where three print two
    different ends alike."""
    for d in (3, 4, 5):
        a, b = fmt(lo, unit, d), fmt(hi, unit, d)
        if a != b or lo == hi:
            break
    if a == b:
        return a
    bare = a.removesuffix(UNIT_SUFFIX.get(unit, "")) if unit else a
    return f"{bare}–{b}" if not (a.startswith("−") or b.startswith("−")) else f"{bare} to {b}"


def paper_text(c: Claim) -> str:
    if c.paper is None:
        return "holds"
    lo, hi = _ends(c.paper)
    suffix = UNIT_SUFFIX.get(c.unit, "")
    g = (lambda x: f"{100 * x:g}") if c.unit == "%" else (lambda x: f"{x:g}")
    return f"{g(lo)}{suffix}" if lo == hi else f"{g(lo)}–{g(hi)}{suffix}"


def load_causes(path: str | Path | None = None) -> dict[str, str]:
    """The measured causes by claim id (package data :data:`CAUSES_FILE`, or ``path``): a mapping of id to one line;
    an unknown id or a non-text cause is a ValueError naming the file."""
    path = Path(path) if path is not None else package_data(CAUSES_FILE)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    data = data or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of claim id to cause, got {type(data).__name__}")
    known = {c.id for c in CLAIMS}
    for k, v in data.items():
        if k not in known:
            raise ValueError(f"{path}: {k!r} is no claim id (known: {', '.join(sorted(known))})")
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{path}: {k}: the cause must be one line of text")
    return {str(k): " ".join(str(v).split()) for k, v in data.items()}


def _signed(x: float) -> str:
    return f"{x:+.0%}".replace("-", "−")


def evaluate(c: Claim, rows: pd.DataFrame) -> dict[str, Any]:
    """One ledger row: the claim beside ours over its scope and every seed (the module's rules)."""
    out: dict[str, Any] = dict(
        id=c.id, section=c.section, quote=c.quote, kind=c.kind,
        scope=" + ".join(p.text() for p in c.scope) + f" | {c.measure.what}",
        **{SCOPE_COLUMNS[k]: ",".join(v) for k, v in scope_dims(c.scope).items()},
        unit=c.unit, paper=paper_text(c), ours="", seeds="", paper_lo=np.nan, paper_hi=np.nan, ours_lo=np.nan,
        ours_hi=np.nan, seeds_lo=np.nan, seeds_hi=np.nan, error_lo=np.nan, error_hi=np.nan, holds="",
        cells=0, cells_read=0, values_read=0, misses=0, absent=0, verdict="not evaluable", reason="", note=c.note)
    if isinstance(c.measure, Trend):
        per_seed, rd = c.measure.per_seed(rows, c.scope)
        out.update(cells=len(rd.cells), absent=rd.absent, misses=rd.misses)
        read_at = per_seed[per_seed["holds"].notna()]
        k, n = int((read_at["holds"] == True).sum()), len(read_at)  # noqa: E712 — an object column of bools
        out.update(holds=f"{k} of {n} seeds" + (f" ({len(per_seed) - n} not readable)" if len(per_seed) > n else ""),
                   values_read=int(read_at["cells"].map(len).sum()),
                   cells_read=len({c for cs in read_at["cells"] for c in cs}), verdict=trend_verdict(k, n))
        out["ours"] = "holds" if n and k == n else (f"holds at {k} of {n} seeds" if n else "")
        if n and k < n:
            bad = read_at[read_at["holds"] == False]  # noqa: E712
            out["reason"] = (f"breaks at seed {', '.join(map(str, bad['seed']))}: {bad['detail'].iloc[0]}")
    else:
        vals, rd = c.measure.measure(rows, c.scope)
        ok = vals[vals["ok"] & np.isfinite(vals["value"].astype(float))]
        out.update(cells=len(rd.cells), absent=rd.absent, misses=rd.misses, values_read=len(ok))
        if len(ok):
            med = ok.groupby("cell", sort=False)["value"].median()
            lo, hi = float(med.min()), float(med.max())
            p_lo, p_hi = _ends(c.paper)
            verdict, e_lo, e_hi = range_verdict((lo, hi), c.paper)
            out.update(ours=fmt_range(lo, hi, c.unit), seeds=fmt_range(float(ok["value"].min()),
                                                                      float(ok["value"].max()), c.unit),
                       paper_lo=p_lo, paper_hi=p_hi, ours_lo=lo, ours_hi=hi, seeds_lo=float(ok["value"].min()),
                       seeds_hi=float(ok["value"].max()), error_lo=e_lo, error_hi=e_hi, cells_read=len(med),
                       verdict=verdict)
            if verdict != "reproduced":
                out["reason"] = (f"low end {_signed(e_lo)}, high end {_signed(e_hi)} of the paper's (lowest at "
                                 f"{med.idxmin()}, highest at {med.idxmax()})")
    if out["verdict"] == "not evaluable":
        out["reason"] = ("the grids hold no cell of this scope" if out["absent"] == out["cells"]
                         else f"no row of the scope meets the SLO ({out['misses']} runs miss it)"
                         if out["misses"] else "the grids hold too few cells of this scope to read it")
    return out


#: The ledger's columns, in order (``figures/claims.csv``).
COLUMNS = ("id", "section", "quote", "kind", "scope", "scope_workloads", "scope_models", "scope_slos",
           "scope_memories", "unit", "paper", "ours", "seeds", "holds", "verdict", "reason", "cause", "cells",
           "cells_read", "values_read", "misses", "absent", "paper_lo", "paper_hi", "ours_lo", "ours_hi", "seeds_lo",
           "seeds_hi", "error_lo", "error_hi", "note")


#: The ledger's text columns (read back as text, blanks as "").
TEXT_COLUMNS = ("id", "section", "quote", "kind", "scope", "scope_workloads", "scope_models", "scope_slos",
                "scope_memories", "unit", "paper", "ours", "seeds", "holds", "verdict", "reason", "cause", "note")


def read_ledger(path: str | Path) -> pd.DataFrame:
    """A ledger written by :func:`write` (``claims.csv``), its text columns as text; a missing column is a ValueError
    naming the file."""
    led = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=False, na_values={
        c: [""] for c in COLUMNS if c not in TEXT_COLUMNS})
    _check_columns(led, COLUMNS, str(path))
    return led


def ledger(rows: pd.DataFrame, claims: Sequence[Claim] = CLAIMS, causes: Mapping[str, str] | None = None
           ) -> pd.DataFrame:
    """Every claim beside ours (one row each, :data:`COLUMNS`), with the measured cause where one is recorded
    (``causes``: by claim id; default :func:`load_causes`)."""
    causes = load_causes() if causes is None else dict(causes)
    recs = [dict(evaluate(c, rows), cause=causes.get(c.id, "")) for c in claims]
    return pd.DataFrame(recs, columns=list(COLUMNS))


def tally(led: pd.DataFrame) -> pd.DataFrame:
    """Verdict counts per section (the first section a claim names) and in all."""
    sec = led["section"].str.split(";").str[0].str.strip()
    t = pd.crosstab(sec, led["verdict"]).reindex(columns=list(VERDICTS), fill_value=0)
    t = t.reindex(list(dict.fromkeys(sec)))
    t.loc["all"] = t.sum()
    t.index.name, t.columns.name = "section", None
    return t.astype(int)


def tally_sentence(led: pd.DataFrame) -> str:
    """"48 statements: 14 reproduced, 11 close, 14 off, 9 not evaluable"."""
    n = led["verdict"].value_counts()
    return f"{len(led)} statements: " + ", ".join(f"{int(n.get(v, 0))} {v}" for v in VERDICTS)


def off_lines(led: pd.DataFrame) -> list[str]:
    """One short markdown line per off row: id, section, paper, ours (its reason and measured cause are
    ``claims.md``'s)."""
    off = led[led["verdict"].eq("off")]
    return [f"- `{r.id}` ({r.section}): paper {r.paper}, ours {r.ours or '—'}"
            + (f" [seeds {r.seeds}]" if r.seeds and r.seeds != r.ours else "") for r in off.itertuples()]


def summary_markdown(led: pd.DataFrame) -> str:
    """The ledger's summary (what the README's ledger block holds): the tally and the off rows."""
    return (f"**Claim ledger** (`figures/claims.csv`): {tally_sentence(led)}.\n\n"
            + ("Off (each row's reason and measured cause: `figures/claims.md`):\n\n" + "\n".join(off_lines(led))
               + "\n" if (led["verdict"] == "off").any() else ""))


def markdown(led: pd.DataFrame) -> str:
    """``claims.md``: the summary, the tally per section, and every row."""
    t = tally(led)
    head = "| section | " + " | ".join(VERDICTS) + " |\n|---|" + "---|" * len(VERDICTS) + "\n"
    tab = "".join(f"| {s} | " + " | ".join(str(int(t.loc[s, v])) for v in VERDICTS) + " |\n" for s in t.index)
    rows = "| id | section | paper | ours | seeds | verdict | reason |\n|---|---|---|---|---|---|---|\n" + "".join(
        f"| `{r.id}` | {r.section} | {r.paper} | {r.ours or r.holds} | {r.seeds or r.holds} | {r.verdict} | "
        f"{(r.cause or r.reason).replace('|', '/')} |\n" for r in led.itertuples())
    return f"# Claim ledger\n\n{summary_markdown(led)}\n{head}{tab}\n{rows}"


def write(led: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """``claims.csv`` and ``claims.md`` in ``out_dir``."""
    from lachesis.plotting import save_numbers

    return [save_numbers(led, out_dir, "claims"), write_text(Path(out_dir) / "claims.md", markdown(led))]
