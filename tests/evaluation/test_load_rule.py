"""The deployment's load rule (docs/design.md §5, "Load"): one load per model × SLO × trace held across memory
configurations under ``per_deployment``, sized so that every compared policy meets the SLO at every configuration
and seed; ``per_cell`` gives the rows it gave before the rule existed."""

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


#: the loads at which a policy stops meeting the SLO, per (memory, model, SLO, policy, seed), where it differs from
#: its first-seed N*: a joint sizing must find the largest load every sizing policy meets everywhere
CAP = {("4/4", "Llama-4-Maverick", "tight", "hbm_first", 1): 2, ("1/7", "Qwen3-235B-A22B", "tight", "lachesis", 1): 1}


def _cap(p: grid.Point) -> int:
    return CAP.get((p.memory, p.model, p.slo, p.policy, p.seed), N_STAR[(p.memory, p.model, p.slo)])


class _Calls(list):
    """The searches a stubbed grid ran (the list), and its runs at a load (``ran``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[tuple[grid.Point, int]] = []


@pytest.fixture()
def stubbed(monkeypatch):
    """Searches and runs that only record what load they were asked for, and meet the SLO up to :func:`_cap`."""
    searched: _Calls = _Calls()
    ran = searched.ran

    def search(p, params=None, cache_dir=None, plan=None, hint=None):
        searched.append(p)
        n = N_STAR[(p.memory, p.model, p.slo)] + (10 if p.policy != "hbm_first" else 0)
        return dict(asdict(p), n_star=n, n_sessions=n, load="own", lifetime_years=1.0, slo_met=True, search=[])

    def run(p, n, params=None, cache_dir=None, plan=None, bound=False):
        ran.append((p, int(n)))
        return dict(asdict(p), n_sessions=int(n), load="fixed", lifetime_years=2.0, slo_met=int(n) <= _cap(p))

    monkeypatch.setattr(W, "evaluate_point", search)
    monkeypatch.setattr(W, "run_at_load", run)
    monkeypatch.setattr(plancache, "point_plan", lambda p, cache_dir=None: None)
    monkeypatch.setattr(plancache, "point_fingerprint", lambda p: "stub")
    return searched


def _points(seeds=(0,), policies=("hbm_first", "lachesis", "oracle")):
    return [grid.Point("multi_agent", c, m, s, p, seed=k) for k in seeds for (c, m, s) in N_STAR for p in policies]


def _joint(model, slo):
    """The load a joint sizing must find: the largest n at most HBM-first's first-seed N* at 1/7 (where the sizing
    starts) at which every sizing policy meets the SLO at every configuration and seed (0 and 1)."""
    n = N_STAR[("1/7", model, slo)]
    pts = [grid.Point("multi_agent", c, model, slo, p, seed=k) for k in (0, 1) for (c, m, s) in N_STAR
           if (m, s) == (model, slo) for p in grid.PAPER_MULTI_POLICIES]
    while n > 0 and any(n > _cap(p) for p in pts):
        n -= 1
    return n


def test_one_load_per_deployment_that_every_compared_policy_meets_at_every_configuration_and_seed(stubbed):
    df = W.run_grid(_points((0, 1)), TINY, None, n_jobs=1, progress=False, load=_rule())  # the default rule
    per = df.groupby(["workload", "model", "slo"])["n_sessions"].agg(["nunique", "first"])
    assert per["nunique"].eq(1).all()  # 8/8* shares the deployment's load by default
    for (_, m, s), r in per.iterrows():
        assert r["first"] == _joint(m, s), (m, s)
    assert _joint("Llama-4-Maverick", "tight") == 2 and _joint("Qwen3-235B-A22B", "tight") == 1  # the caps bind
    assert df["load"].eq("per_deployment").all() and df["load_sizing"].eq("compared").all()
    assert df["n_star"].eq(df["n_sessions"]).all() and df["load_policy"].eq("hbm_first").all()
    assert df["daisy_chain_load"].eq("shared").all() and df["group_ranks"].eq(1).all()
    # the invariant: every row of a compared policy meets the SLO at its load, at every seed
    assert df.loc[df["policy"].isin(grid.PAPER_MULTI_POLICIES), "slo_met"].all()
    binding = df.groupby(["model", "slo"])["load_binding"].first()
    assert binding[("Llama-4-Maverick", "tight")] == "hbm_first 4/4 seed 1"
    assert binding[("Qwen3-235B-A22B", "tight")] == "lachesis 1/7 seed 1"
    assert {"slo_tpot_bound_s", "slo_ttft_bound_s", "slo_met"} <= set(df.columns)
    assert df.loc[df["slo"].eq("tight"), "slo_tpot_bound_s"].eq(0.060).all()
    assert df.loc[df["slo"].eq("loose"), "slo_tpot_bound_s"].eq(0.100).all()
    # the sizing starts from the load policy's first-seed search at the base configuration, and only that one
    assert {(p.policy, p.seed, p.memory) for p in stubbed} == {("hbm_first", 0, "1/7")}


def test_a_policy_the_sizing_does_not_cover_is_shown_as_a_miss_with_its_own_n_star(stubbed):
    """ρR/W selection is not compared by the paper: at the deployment's load it may miss, and its row says so."""
    CAP[("1/7", "Llama-4-Maverick", "tight", "rho_threshold", 0)] = 0
    try:
        df = W.run_grid(_points((0,), ("hbm_first", "lachesis", "rho_threshold")), TINY, None, n_jobs=1,
                        progress=False, load=_rule())
    finally:
        del CAP[("1/7", "Llama-4-Maverick", "tight", "rho_threshold", 0)]
    miss = df[~df["slo_met"].astype(bool)]
    assert list(miss["policy"]) == ["rho_threshold"] and miss["memory"].tolist() == ["1/7"]
    assert miss["own_n_star"].tolist() == [N_STAR[("1/7", "Llama-4-Maverick", "tight")] + 10]
    assert df.loc[df["slo_met"].astype(bool), "own_n_star"].isna().all()


def test_the_sizing_policies_and_the_offered_load_are_knobs(stubbed):
    only = W.run_grid(_points((0, 1)), TINY, None, n_jobs=1, progress=False,
                      load=_rule(sizing="load_policy"))
    q = only[(only["model"] == "Qwen3-235B-A22B") & (only["slo"] == "tight")]
    assert q["n_sessions"].eq(N_STAR[("4/4", "Qwen3-235B-A22B", "tight")]).all()  # Lachesis's cap is not its concern
    assert not q.loc[(q["policy"] == "lachesis") & (q["memory"] == "1/7") & (q["seed"] == 1), "slo_met"].any()
    base = W.run_grid(_points((0, 1)), TINY, None, n_jobs=1, progress=False, load=_rule(sizing="base"))
    held = base[base["memory"].ne("8/8*")]
    for r in held.itertuples():  # the offered-load view: HBM-first's N* at 1/7, first seed, whatever misses there
        assert r.n_sessions == N_STAR[("1/7", r.model, r.slo)] and r.load_sizing == "base"
    assert not base["slo_met"].all()


def test_the_base_and_the_daisy_chain_are_knobs(stubbed):
    rule = grid.LoadRule("per_deployment", base="4/4", daisy_chain="own", sizing="base")
    df = W.run_grid(_points(), TINY, None, n_jobs=1, progress=False, load=rule)
    for r in df.itertuples():
        if r.memory == "8/8*":  # sized on its own: HBM-first's N* of that cell
            assert (r.n_sessions, r.load, r.load_base) == (N_STAR[("8/8*", r.model, r.slo)], "per_cell", "8/8*")
        else:
            assert (r.n_sessions, r.load, r.load_base) == (N_STAR[("4/4", r.model, r.slo)], "per_deployment", "4/4")
    joint = W.run_grid(_points(), TINY, None, n_jobs=1, progress=False,
                       load=_rule(daisy_chain="own", configs=("1/7", "4/4")))
    dc = joint[joint["memory"].eq("8/8*")]
    assert (dc["n_sessions"].to_numpy() == [N_STAR[("8/8*", m, s)] for m, s in zip(dc["model"], dc["slo"])]).all()
    cell = W.run_grid(_points(), TINY, None, n_jobs=1, progress=False, load="per_cell")
    assert (cell["n_sessions"].to_numpy() == [N_STAR[(m, o, s)] for m, o, s in
                                              zip(cell["memory"], cell["model"], cell["slo"])]).all()
    assert (cell["load_base"] == cell["memory"]).all()


def test_a_joint_sizing_is_cached_and_read_back_without_running(stubbed, tmp_path):
    W.run_grid(_points((0, 1)), TINY, tmp_path, n_jobs=1, progress=False, load=_rule())
    rule = _rule().over(_points((0, 1)))
    p = _points()[0]
    hit = W.cached_deployment(p, rule, tmp_path, TINY)
    assert hit is not None and hit["n_star"] == _joint(p.model, p.slo) and hit["load_sizing"] == "compared"
    before = len(stubbed.ran)
    assert W.size_deployment(p, rule, TINY, str(tmp_path))["n_star"] == hit["n_star"]
    assert len(stubbed.ran) == before  # read, not run again
    other = _rule(seeds=(0,)).over(_points())  # another set of seeds is another deployment sizing
    assert W.cached_deployment(p, other, tmp_path, TINY) is None


#: the configurations the stubbed deployments are sized over (every one N_STAR names)
CONFIGS = ("1/7", "4/4", "8/8*")


def _rule(**kw) -> grid.LoadRule:
    return grid.LoadRule(configs=kw.pop("configs", CONFIGS), **kw)


@pytest.mark.parametrize("bad, match", [(dict(rule="baseline"), "load must be one of"),
                                        (dict(base="2/7"), "load_base must be one of"),
                                        (dict(sizing="each"), "load_sizing must be one of"),
                                        (dict(configs=("2/7",)), "load_configs: unknown"),
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
    b = W.run_grid(pts, TINY, None, n_jobs=1, progress=False, load=grid.LoadRule(sizing="base"))
    c = W.run_grid(pts, TINY, None, n_jobs=1, progress=False, load=_rule(configs=("1/7", "4/4")))
    assert list(a["n_sessions"]) == [5, 5, 3, 3] and list(b["n_sessions"]) == [5, 5, 5, 5]
    assert list(c["n_sessions"]) == [3, 3, 3, 3]


# ------------------------------------------------------------------------------------------------
# per_cell is today's rule: the rows of a G = 1, overlap grid before the load rule existed
# ------------------------------------------------------------------------------------------------

#: made by the code before the rule (load="baseline", commit 8a1e3e4) on the same points and settings
BEFORE = FIXTURES / "per_cell_rows.json"
#: wall-clock timings, the entry's cache key and digest (the key hashes the configuration, which gained
#: Endurance.lifetime_over_ranks), and the package and simulator versions that made the entry: not results
TIMINGS = {"bound_solve_s", "key", "digest", "version", "code"}
#: the fields the rule added to every row
NEW = {"load_base", "daisy_chain_load", "group_ranks", "slo_tpot_bound_s", "slo_ttft_bound_s", "hbf_rank_spread",
       "load_sizing", "load_binding"}


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


def test_a_step_down_is_n_over_the_margin_at_least_the_resolution_at_most_half() -> None:
    """After a run that misses by margin m the sizing steps to N ÷ m, at least the search's resolution below and
    at most half the load: it never jumps past the largest load that meets the SLO on a margin that is a burst."""
    p = capacity.SearchParams(rel_tol=0.04)
    assert W._step_down(100, 1.10, p) == 90  # N / m
    assert W._step_down(100, 1.002, p) == 96  # never less than the resolution
    assert W._step_down(100, 3.0, p) == 50  # never more than half
    assert W._step_down(100, float("nan"), p) == 96 and W._step_down(1, 2.0, p) == 0
