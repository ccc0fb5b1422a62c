"""The reviewer's effect (§5.3–§5.4) at one load: the multi-agent trace without the reviewer, run at the load of the
trace with it, beside each trace at its own deployment's load.

§5.3 reads the reviewer as more short-lived KV live at one time on the same HBM ("so more of that KV reaches HBF and
HBF lifetime falls under both placement policies"), which is a comparison at one load.  Each trace's deployment is
sized on its own (docs/design.md §5, "Load"), so the two traces' own rows differ in load as well as in the reviewer;
this table separates the two.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import pandas as pd

from lachesis.evaluation import runner, sweep
from lachesis.evaluation.grid import LOAD_POLICY, Point
from lachesis.evaluation.tables import hbm_share
from lachesis.node.capacity import SearchParams

WITH, WITHOUT = "multi_agent", "multi_agent_no_reviewer"
#: the placements §5.3 names ("under both placement policies")
POLICIES = (LOAD_POLICY, "lachesis")
KEYS = ["model", "slo", "memory", "policy"]


def one_load_points(points: Sequence[Point], rows: pd.DataFrame,
                    policies: Sequence[str] = POLICIES) -> list[tuple[Point, int]]:
    """The first seed's points of the trace without the reviewer, each with the load the trace with the reviewer
    ran at in the same cell (``rows``: the grid's rows; cells the grid lacks are left out)."""
    first = min(p.seed for p in points)
    loads = rows[rows["workload"].eq(WITH)].groupby(["model", "slo", "memory"])["n_sessions"].first()
    out = []
    for p in points:
        if p.workload == WITHOUT and p.seed == first and p.policy in policies and (p.model, p.slo, p.memory) in loads:
            out.append((p, int(loads[(p.model, p.slo, p.memory)])))
    return out


def run_at_one_load(points: Sequence[Point], rows: pd.DataFrame, params: SearchParams,
                    cache_dir: str | os.PathLike | None = None, n_jobs: int | None = None, progress: bool = True,
                    policies: Sequence[str] = POLICIES) -> pd.DataFrame:
    """The rows of :func:`one_load_points`, each run (or read from the cache) at its load."""
    todo = one_load_points(points, rows, policies)
    if not todo:
        return pd.DataFrame()
    cache = str(cache_dir) if cache_dir else None
    res = runner.run_tasks(sweep.run_at_load, [(p, n, params, cache) for p, n in todo],
                           [f"{p.label()} at {n} sessions per GPU" for p, n in todo], n_jobs, None, progress,
                           desc="reviewer at one load")
    return sweep.results_frame(res)


def table(rows: pd.DataFrame, one_load: pd.DataFrame) -> pd.DataFrame:
    """Per (model, SLO, configuration, policy): each trace at its own load (medians over seeds, every seed meeting
    the SLO, else NaN), the trace without the reviewer at the load of the trace with it (its first seed), the
    reviewer's effect with/without at own loads and at one load, and the live short-lived KV per GPU of each."""

    def own(workload: str) -> pd.DataFrame:
        d = rows[rows["workload"].eq(workload) & rows["policy"].isin(POLICIES)]
        met = d.groupby(KEYS)["slo_met"].all()
        g = d.groupby(KEYS).agg(years=("lifetime_years", "median"), n=("n_sessions", "first"),
                                live_short_gb=("live_short_kv_bytes", "median"))
        g["years"] = g["years"].where(met)
        g["live_short_gb"] = g["live_short_gb"] / 1e9
        return g

    w, wo = own(WITH), own(WITHOUT)
    out = w.add_suffix("_with").join(wo.add_suffix("_without"), how="inner")
    if len(one_load):
        one = one_load.set_index(KEYS)
        out["years_without_at_with_load"] = one["lifetime_years"].where(one["slo_met"].astype(bool))
        out["live_short_gb_without_at_with_load"] = one["live_short_kv_bytes"] / 1e9
        share = hbm_share(one_load).set_index(KEYS)["hbm_share"]
        out["hbm_share_without_at_with_load"] = share
    else:
        out["years_without_at_with_load"] = np.nan
    out["reviewer_effect_own_loads"] = out["years_with"] / out["years_without"]
    out["reviewer_effect_one_load"] = out["years_with"] / out["years_without_at_with_load"]
    return out.reset_index()


def sentences(t: pd.DataFrame) -> list[str]:
    """What the table says of §5.3's claim, per policy: how often the reviewer lowers lifetime at own loads and at
    one load (ratios below 1), and the loads the two traces ran at."""
    out: list[str] = []
    for pol, d in t.groupby("policy", sort=False):
        name = "HBM-first" if pol == LOAD_POLICY else "Lachesis" if pol == "lachesis" else str(pol)
        out.append(f"{name}: the reviewer lowers HBF lifetime in {_below_one(d['reviewer_effect_own_loads'])} with "
                   f"each trace at its own load ({_span(d['n_with'])} sessions per GPU with the reviewer, "
                   f"{_span(d['n_without'])} without), and in {_below_one(d['reviewer_effect_one_load'])} with both "
                   f"at the load of the trace with the reviewer.")
    return out


def _below_one(ratios: pd.Series) -> str:
    v = ratios.dropna()
    return f"{int((v < 1).sum())} of {len(v)} cells" if len(v) else "no cell at the SLO"


def _span(s: pd.Series) -> str:
    a, b = int(s.min()), int(s.max())
    return f"{a}" if a == b else f"{a}–{b}"

