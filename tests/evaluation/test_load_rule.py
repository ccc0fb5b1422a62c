"""The deployment's load rule (docs/design.md §5, "Load"): one load per model × SLO × trace held across memory
configurations under ``per_deployment``; ``per_cell`` gives the rows it gave before the rule existed."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest
from fixture_paths import FIXTURES
from sim_fixtures import multi_agent_trace

from lachesis.analysis.ranker import rank_keys
from lachesis.analysis.segments import recover
from lachesis.evaluation import grid, plancache
from lachesis.evaluation import sweep as W
from lachesis.node import capacity
from lachesis.node.plan import build_plan

TINY = capacity.SearchParams(search_warmup=0.2, search_measure=0.3, warmup=0.2, measure=0.5, n_max=8, n_samples=40)
#: HBM-first's N* per (memory, model, SLO) of the stubbed searches: it differs with every axis
N_STAR = {("1/7", "Llama-4-Maverick", "tight"): 5, ("4/4", "Llama-4-Maverick", "tight"): 3,
          ("8/8*", "Llama-4-Maverick", "tight"): 7, ("1/7", "Llama-4-Maverick", "loose"): 9,
          ("4/4", "Llama-4-Maverick", "loose"): 4, ("8/8*", "Llama-4-Maverick", "loose"): 11,
          ("1/7", "Qwen3-235B-A22B", "tight"): 6, ("4/4", "Qwen3-235B-A22B", "tight"): 2,
          ("8/8*", "Qwen3-235B-A22B", "tight"): 8}


@pytest.fixture()
def stubbed(monkeypatch):
    """Searches and runs that only record what load they were asked for (the rule is what is tested)."""
    searched: list[grid.Point] = []

    def search(p, params=None, cache_dir=None, plan=None, hint=None):
        searched.append(p)
        n = N_STAR[(p.memory, p.model, p.slo)] + (10 if p.policy != "hbm_first" else 0)
        return dict(asdict(p), n_star=n, n_sessions=n, load="own", lifetime_years=1.0, slo_met=True, search=[])

    def run(p, n, params=None, cache_dir=None, plan=None, bound=False):
        return dict(asdict(p), n_sessions=int(n), load="fixed", lifetime_years=2.0, slo_met=True)

    monkeypatch.setattr(W, "evaluate_point", search)
    monkeypatch.setattr(W, "run_at_load", run)
    monkeypatch.setattr(plancache, "point_plan", lambda p, cache_dir=None: None)
    return searched


def _points(seeds=(0,)):
    return [grid.Point("multi_agent", c, m, s, p, seed=k) for k in seeds for (c, m, s) in N_STAR
            for p in ("hbm_first", "lachesis", "oracle")]


def test_one_load_per_model_slo_and_trace_across_memory_configurations(stubbed):
    df = W.run_grid(_points((0, 1)), TINY, None, n_jobs=1, progress=False)  # the default rule
    held = df[df["memory"].ne("8/8*")]
    per = held.groupby(["workload", "model", "slo"])["n_sessions"].agg(["nunique", "first"])
    assert per["nunique"].eq(1).all()
    for (_, m, s), r in per.iterrows():  # the load is HBM-first's N* at 1/7 ...
        assert r["first"] == N_STAR[("1/7", m, s)]
    assert held["load"].eq("per_deployment").all() and held["load_base"].eq("1/7").all()
    assert held["n_star"].eq(held["n_sessions"]).all() and held["load_policy"].eq("hbm_first").all()
    # ... and 8/8* shares it by default
    dc = df[df["memory"].eq("8/8*")]
    assert (dc["n_sessions"].to_numpy() == [N_STAR[("1/7", m, s)] for m, s in zip(dc["model"], dc["slo"])]).all()
    assert df["daisy_chain_load"].eq("shared").all() and df["group_ranks"].eq(1).all()
    assert {"slo_tpot_bound_s", "slo_ttft_bound_s", "slo_met"} <= set(df.columns)
    assert df.loc[df["slo"].eq("tight"), "slo_tpot_bound_s"].eq(0.060).all()
    assert df.loc[df["slo"].eq("loose"), "slo_tpot_bound_s"].eq(0.100).all()
    # only HBM-first at the base configuration is searched, once per deployment (seed 0 sizes seed 1)
    bases = {(p.memory, p.model, p.slo, p.policy, p.seed) for p in stubbed}
    assert bases == {("1/7", m, s, "hbm_first", 0) for (_, m, s) in N_STAR}


def test_the_base_and_the_daisy_chain_are_knobs(stubbed):
    rule = grid.LoadRule("per_deployment", base="4/4", daisy_chain="own")
    df = W.run_grid(_points(), TINY, None, n_jobs=1, progress=False, load=rule)
    for r in df.itertuples():
        if r.memory == "8/8*":  # sized on its own: HBM-first's N* of that cell
            assert (r.n_sessions, r.load, r.load_base) == (N_STAR[("8/8*", r.model, r.slo)], "per_cell", "8/8*")
        else:
            assert (r.n_sessions, r.load, r.load_base) == (N_STAR[("4/4", r.model, r.slo)], "per_deployment", "4/4")
    cell = W.run_grid(_points(), TINY, None, n_jobs=1, progress=False, load="per_cell")
    assert (cell["n_sessions"].to_numpy() == [N_STAR[(m, o, s)] for m, o, s in
                                              zip(cell["memory"], cell["model"], cell["slo"])]).all()
    assert (cell["load_base"] == cell["memory"]).all()


@pytest.mark.parametrize("bad, match", [(dict(rule="baseline"), "load must be one of"),
                                        (dict(base="2/7"), "load_base must be one of"),
                                        (dict(base="8/8*"), "not the daisy chain"),
                                        (dict(daisy_chain="held"), "daisy_chain_load must be one of")])
def test_an_unknown_rule_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        grid.LoadRule(**bad)
    with pytest.raises(ValueError, match="load must be one of"):
        W.run_grid(_points(), TINY, None, progress=False, load="baseline")


def test_the_cache_reads_the_rule_it_is_asked_for(stubbed, tmp_path):
    """Entries are runs at a load (keyed on it); the rule only picks which load, so per_deployment never
    reads a per_cell row's load: cached_results follows the rule it is given."""
    pts = [grid.Point("multi_agent", c, "Llama-4-Maverick", "tight", p) for c in ("1/7", "4/4")
           for p in ("hbm_first", "lachesis")]
    a = W.run_grid(pts, TINY, None, n_jobs=1, progress=False, load="per_cell")
    b = W.run_grid(pts, TINY, None, n_jobs=1, progress=False, load="per_deployment")
    assert list(a["n_sessions"]) == [5, 5, 3, 3] and list(b["n_sessions"]) == [5, 5, 5, 5]


# ------------------------------------------------------------------------------------------------
# per_cell is today's rule: the rows of a G = 1, overlap grid before the load rule existed
# ------------------------------------------------------------------------------------------------

#: made by the code before the rule (load="baseline", commit 8a1e3e4) on the same points and settings
BEFORE = FIXTURES / "per_cell_rows.json"
#: wall-clock timings, the entry's cache key and digest (the key hashes the configuration, which gained
#: Endurance.lifetime_over_ranks), and the package and simulator versions that made the entry: not results
TIMINGS = {"bound_solve_s", "key", "digest", "version", "code"}
#: the fields the rule added to every row
NEW = {"load_base", "daisy_chain_load", "group_ranks", "slo_tpot_bound_s", "slo_ttft_bound_s", "hbf_rank_spread"}


def test_per_cell_reproduces_the_rows_before_the_rule(monkeypatch, tmp_path):
    tr = multi_agent_trace()
    seg = recover(tr, seed=0)
    plan = build_plan(tr, seg, rank_keys(tr, seg))
    monkeypatch.setattr(plancache, "point_plan", lambda p, cache_dir=None: plan)
    monkeypatch.setattr(plancache, "point_fingerprint", lambda p: plan.fingerprint)
    pts = [grid.Point("fixture", c, "Llama-4-Maverick", "tight", p, 1.0, k) for k in (0, 1) for c in ("1/7", "4/4")
           for p in ("hbm_first", "lachesis", "oracle")]
    df = W.run_grid(pts, TINY, tmp_path, n_jobs=1, progress=False, load="per_cell")
    now = json.loads(df.to_json(orient="records"))
    before = json.loads(BEFORE.read_text())
    assert len(now) == len(before) == 12
    for a, b in zip(now, before):
        assert set(a) - NEW == set(b) and a["load"] == "per_cell" and b["load"] == "baseline"
        assert a["group_ranks"] == 1
        for k in b:
            if k not in TIMINGS | {"load"}:
                assert a[k] == b[k] or (isinstance(b[k], float) and math.isnan(b[k]) and math.isnan(a[k])), k


def test_the_rules_are_compared_on_the_first_seeds_load_policy_and_lachesis():
    pts = [grid.Point("multi_agent", c, "Llama-4-Maverick", "tight", p, 1.0, k) for k in (2, 1) for c in ("1/7", "4/4")
           for p in grid.MULTI_POLICIES]
    few = grid.rule_comparison_points(pts)
    assert {(p.seed, p.policy) for p in few} == {(1, "hbm_first"), (1, "lachesis")} and len(few) == 4
