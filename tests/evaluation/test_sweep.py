"""Sweep: one load per cell, cache, grid shape, runners, gain versus load, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sim_fixtures import ONE_CONFIG, TINY, multi_agent_trace

from lachesis.evaluation import gains, grid, plancache, runner, store, tables
from lachesis.evaluation import sweep as W
from lachesis.node import simulator as S


def test_grid_shapes():
    # with reviewer: the paper's three policies and the three baselines; without: the ablation's three (§5.4)
    assert len(grid.multi_agent_grid()) == 5 * 2 * 2 * (6 + 3)
    no_reviewer = {p.policy for p in grid.multi_agent_grid() if p.workload == "multi_agent_no_reviewer"}
    assert no_reviewer == set(grid.PAPER_MULTI_POLICIES)
    assert len(grid.multi_agent_grid(no_reviewer_policies=None)) == 5 * 2 * 2 * 6 * 2
    assert len(grid.single_agent_grid()) == 2 * 5 * 2 * 5
    assert {p.slo for p in grid.single_agent_grid()} == {"tight"}
    three = grid.single_agent_grid(seed=[0, 1, 2])
    assert len(three) == 3 * len(grid.single_agent_grid()) and {p.seed for p in three} == {0, 1, 2}
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        grid.multi_agent_grid(seed=[])
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        grid.single_agent_grid(seed=[0, -1])
    assert {p.policy for p in grid.single_agent_grid(policies=["rho_threshold:quantile=0.25"])} == {
        "rho_threshold:quantile=0.25"}


def test_point_cache_is_written_once_and_reused(plan, tmp_path, monkeypatch):
    pt = grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", "deterministic", 1.0, 0)
    a = W.evaluate_point(pt, TINY, tmp_path, plan=plan)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["n_star"] == a["n_star"]
    monkeypatch.setattr(S, "simulate", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    b = W.evaluate_point(pt, TINY, tmp_path, plan=plan)
    np.testing.assert_equal(b, a)
    # a different input (policy) is a different key
    assert store.point_key(pt, plan.fingerprint, TINY) != store.point_key(
        grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", "lachesis"), plan.fingerprint, TINY)


def _tiny_points():
    return [grid.Point("multi_agent", "4/4", "Qwen3-235B-A22B", "loose", p, scale=0.02, seed=0)
            for p in ("hbm_first", "lachesis")]


@pytest.mark.slow
def test_run_grid_local_processes(tmp_path):
    df = W.run_grid(_tiny_points(), TINY, tmp_path, n_jobs=2, progress=False)
    assert len(df) == 2 and (df["n_star"] >= 1).all()
    assert np.isfinite(df["lifetime_years"]).all()
    g = tables.ratio_table(df)
    assert len(g) == 1 and np.isfinite(g["lachesis/hbm_first"].iloc[0])
    comp = tables.write_composition(df)
    assert np.allclose(comp.groupby("policy")["pct"].sum(), 100)


@pytest.mark.slow
def test_run_grid_on_dask_localcluster(tmp_path):
    """The same grid on a Dask cluster: seeds replicate after their first seed's cell, the oracle reads the
    baseline's record from the shared cache, and an independent run on a local process pool, into a cache of
    its own, computes every column again to the same values."""
    distributed = pytest.importorskip("dask.distributed")
    pts = [grid.Point("multi_agent", "4/4", "Qwen3-235B-A22B", "loose", p, scale=0.02, seed=k)
           for k in (0, 1) for p in ("hbm_first", "oracle")]
    rule = grid.LoadRule(configs=("4/4",), base="4/4", sizing="load_policy")  # HBM-first at 4/4, both seeds
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        df = W.run_grid(pts, TINY, tmp_path, scheduler=client, progress=False, load=rule)
    local = W.run_grid(pts, TINY, tmp_path / "local", n_jobs=2, progress=False, load=rule)  # computed again
    assert len(list((tmp_path / "local").glob("*.json"))) == len(list(tmp_path.glob("*.json")))
    timing = [c for c in df.columns if c.endswith("solve_s")]  # wall-clock seconds, not results
    pd.testing.assert_frame_equal(df.drop(columns=timing), local.drop(columns=timing))
    assert df["n_sessions"].nunique() == 1 and set(df["load_seed"]) == {0}
    # the search at 4/4 that starts the sizing, the sizing's own entry, each seed's baseline and oracle run at the
    # load it found; a close record beside each seed's baseline run at that load (seed 0's is its search's N* run)
    entries = [f for f in tmp_path.glob("*.json") if not f.name.endswith(".rank.json")]
    assert len(entries) == 6 and len(list(tmp_path.glob("*.closes.npz"))) == 2
    assert set(df["load_sizing"]) == {"load_policy"} and set(df["load"]) == {"per_deployment"}
    assert len(list(tmp_path.glob("*.rank.json"))) == 2  # the ranker fitted once per seed's trace, for every worker


@pytest.mark.slow
def test_a_grid_the_cache_holds_whole_is_read_back_identically_without_a_plan(tmp_path, monkeypatch):
    """Seeds, the paper's policies, the baselines and the oracle: computed, then read back from the cache by
    run_grid itself without building a plan or starting a process, with every column equal."""
    pts = [grid.Point("multi_agent", m, "Qwen3-235B-A22B", "tight", p, scale=0.02, seed=k)
           for k in (0, 1) for m in ("1/7", "4/4") for p in grid.MULTI_POLICIES]
    computed = W.run_grid(pts, TINY, tmp_path, n_jobs=2, progress=False)

    def boom(*a, **k):
        raise AssertionError("built a plan or started a pool for a cached grid")

    monkeypatch.setattr(plancache, "_plan", boom)
    monkeypatch.setattr(runner, "worker_pool", boom)
    monkeypatch.setattr(runner, "shared_pool", boom)  # the workers the grid above started are reused otherwise
    again = W.run_grid(pts, TINY, tmp_path, n_jobs=2, progress=False)
    pd.testing.assert_frame_equal(again, computed)
    # one point missing: the grid runs (here: refused, the plan builder is gone)
    last, n_last = pts[-1], int(computed["n_sessions"].iloc[-1])
    last_key = store.point_key(last, plancache.point_fingerprint(last), TINY, n=n_last)
    (tmp_path / f"{last_key}.json").unlink()
    with pytest.raises(AssertionError, match="built a plan"):
        W.run_grid(pts, TINY, tmp_path, n_jobs=1, progress=False)


# ------------------------------------------------------------------------------------------------
# One load per cell
# ------------------------------------------------------------------------------------------------


def _cell(policies=("hbm_first", "deterministic", "lachesis"), **kw):
    return [grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", p, 1.0, 0, **kw) for p in policies]


def test_every_policy_runs_at_the_baselines_n_star(fixture_plan, tmp_path):
    pts = _cell()
    rows = W.evaluate_cell(pts, TINY, str(tmp_path), load="per_cell")
    own = {p.policy: W.evaluate_point(p, TINY, tmp_path, plan=fixture_plan) for p in pts}
    n = own["hbm_first"]["n_star"]
    assert n >= 1
    assert [r["n_sessions"] for r in rows] == [n] * 3 and {r["n_star"] for r in rows} == {n}
    assert {r["load_policy"] for r in rows} == {"hbm_first"} and all(isinstance(r["slo_met"], bool) for r in rows)
    # the baseline's row is its own N* run; a fresh run at that load gives the same numbers (the shortcut is exact)
    fresh = W.run_at_load(pts[0], n, TINY, None, fixture_plan)
    for k in ("lifetime_years", "hbf_write_rate", "p99_tpot_s", "requests_done"):
        np.testing.assert_equal(rows[0][k], fresh[k])
    assert rows[0]["slo_met"] and fresh["slo_met"]
    # the other policies ran at n, not at their own N*
    for r, p in zip(rows[1:], pts[1:]):
        again = W.run_at_load(p, n, TINY, tmp_path, fixture_plan)
        np.testing.assert_equal(r["lifetime_years"], again["lifetime_years"])


def test_load_rules_min_and_own(fixture_plan, tmp_path):
    pts = _cell()
    own = W.evaluate_cell(pts, TINY, str(tmp_path), load="own")
    n_own = {r["policy"]: r["n_star"] for r in own}
    assert [r["n_sessions"] for r in own] == [n_own[p.policy] for p in pts]
    low = W.evaluate_cell(pts, TINY, str(tmp_path), load="min")
    assert {r["n_sessions"] for r in low} == {min(n_own.values())}
    assert all(r["slo_met"] for r in low)  # the lowest N* over policies: every policy met the SLO there
    assert tables.capacity_table(W.results_frame(own)).iloc[0][list(n_own)].to_dict() == n_own
    with pytest.raises(ValueError, match="load must be one of"):
        W.run_grid(pts, TINY, tmp_path, load="highest", progress=False)


def test_laden_close_is_a_point_input():
    a, b = _cell(("lachesis",))[0], _cell(("lachesis",), laden_close="arrival")[0]
    assert a.laden_close == "last_read"
    assert store.point_key(a, "fp", TINY) != store.point_key(b, "fp", TINY)
    with pytest.raises(ValueError, match="laden_close"):
        W.run_grid([grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis", laden_close="later")],
                   TINY, progress=False)


def test_workload_plan_closes_laden_segments_as_asked():
    a = plancache.workload_plan("tau3", 0.01, 0)
    b = plancache.workload_plan("tau3", 0.01, 0, laden_close="arrival")
    assert (a.laden_close, b.laden_close) == ("last_read", "arrival")
    assert len(a.ca_seg) < len(b.ca_seg)  # laden segments moved from "close at arrival" to "close at end"


# ------------------------------------------------------------------------------------------------
# Robustness: cache entries, plan cache, bad grids, impossible models, progress, parent death
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["edited", "truncated", "foreign", "other_version", "not_an_object"])
def test_bad_cache_entry_is_reported_and_recomputed(plan, tmp_path, damage):
    pt = grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", "deterministic", 1.0, 0)
    good = W.evaluate_point(pt, TINY, tmp_path, plan=plan)
    (path,) = tmp_path.glob("*.json")
    entry = json.loads(path.read_text())
    if damage == "edited":
        entry["lifetime_years"] = 99.0
        path.write_text(json.dumps(entry))
    elif damage == "truncated":
        path.write_text(path.read_text()[:200])
    elif damage == "foreign":  # another point's entry under this key's name
        other = W.evaluate_point(grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", "lachesis", 1.0, 0), TINY,
                                 None, plan=plan)
        path.write_text(json.dumps(dict(other, digest="x")))
    elif damage == "other_version":
        entry["version"] = "0.0.0"
        path.write_text(json.dumps(entry))
    else:
        path.write_text("[1, 2]")
    with pytest.warns(store.CacheWarning, match=str(path.name)):
        again = W.evaluate_point(pt, TINY, tmp_path, plan=plan)
    np.testing.assert_equal(again, good)
    assert W.evaluate_point(pt, TINY, tmp_path, plan=plan) == again  # rewritten intact: no warning now


def test_plan_cache_follows_the_trace_files_content(tmp_path):
    from lachesis.traces.trace import write_trace

    path = tmp_path / "t.jsonl"
    write_trace(multi_agent_trace(n_sessions=5), path)
    a = plancache.workload_plan("t", 1.0, 0, str(path))
    assert plancache.workload_plan("t", 1.0, 0, str(path)) is a  # unchanged file: the cached plan
    write_trace(multi_agent_trace(n_sessions=6), path)
    b = plancache.workload_plan("t", 1.0, 0, str(path))
    assert b is not a and len(b.sessions) == 6 and b.fingerprint != a.fingerprint
    with pytest.raises(FileNotFoundError, match="no_such"):
        plancache.workload_plan("t", 1.0, 0, str(tmp_path / "no_such.jsonl"))


def test_empty_grids_and_unknown_names_are_one_line_errors():
    with pytest.raises(ValueError, match="grid is empty"):
        W.run_grid([], TINY, progress=False)
    with pytest.raises(ValueError, match="multi_agent_grid: policies is empty"):
        grid.multi_agent_grid(policies=[])
    with pytest.raises(ValueError, match="single_agent_grid: configs is empty"):
        grid.single_agent_grid(configs="")
    with pytest.raises(ValueError, match="models: unknown 'GPT-9'"):
        grid.multi_agent_grid(models=["GPT-9"])
    with pytest.raises(ValueError, match="unknown policy"):
        W.run_grid([grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lru")], TINY, progress=False)


def test_model_too_big_for_the_memory_is_a_clear_error(monkeypatch):
    from lachesis.config import MemoryConfig, StackSpec

    small = MemoryConfig("1/1 small", 1, 1, hbf=StackSpec("HBF 1 GB", 1e9, 1.6e12, 16e9))
    monkeypatch.setattr(grid, "memory_config", lambda label: small)
    with pytest.raises(ValueError, match="'Llama-4-Maverick' does not fit memory configuration '1/1 small'"):
        W.run_grid([grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis")], TINY, progress=False)


def test_progress_line_per_finished_cell(fixture_plan, tmp_path, capfd):
    W.run_grid(_cell(("hbm_first", "lachesis")), TINY, tmp_path, n_jobs=1, progress=True)
    err = capfd.readouterr().err
    assert "[sweep] 1/1 fixture Llama-4-Maverick tight 1/7 seed 0:" in err and "(elapsed" in err


WATCH = """
import os, sys, time
from lachesis.evaluation import runner

def work(path):
    open(path, "w").write(str(os.getpid()))
    time.sleep(120)

if __name__ == "__main__":
    out = sys.argv[1]
    ex = runner.worker_pool(2)
    futs = [ex.submit(work, f"{out}/w{i}") for i in range(2)]
    while len(os.listdir(out)) < 2:
        time.sleep(0.05)
    print("ready", flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see the workers")
def test_pool_workers_exit_when_their_parent_dies(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(WATCH)
    (tmp_path / "out").mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "out")], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        pids = [int((tmp_path / "out" / f"w{i}").read_text()) for i in range(2)]
        assert all(_alive(p) for p in pids)
        proc.kill()  # SIGKILL: no clean-up in the parent
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids), "pool workers outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids:  # leave nothing behind if the test failed
            if _alive(p):
                os.kill(p, signal.SIGKILL)


# ------------------------------------------------------------------------------------------------
# Gain versus load
# ------------------------------------------------------------------------------------------------


def test_loads_in_range_interpolates_between_samples():
    n = np.array([10, 20, 40, 80])
    g = np.array([8.0, 4.0, 2.0, 1.0])  # falls with load
    (iv,) = gains.loads_in_range(n, g, 3.0, 3.0)
    assert iv == pytest.approx((30, 30))  # 4 at 20, 2 at 40: 3 at 30
    (lo, hi), = gains.loads_in_range(n, g, 1.5, 2.5)
    assert (lo, hi) == pytest.approx((30 + 5, 40 + 20))  # 2.5 at 35; 1.5 at 60
    assert gains.loads_in_range(n, g, 9, 10) == []
    # a non-monotone curve gives two intervals
    assert len(gains.loads_in_range(np.array([1, 2, 3]), np.array([1.0, 3.0, 1.0]), 0.5, 1.5)) == 2


def test_load_curve_runs_every_policy_at_fractions_of_n_star(fixture_plan, tmp_path):
    pts = _cell()
    grid = W.run_grid(pts, TINY, tmp_path, n_jobs=1, progress=False)
    curve = W.load_curve(pts, [0.5], TINY, tmp_path, n_jobs=1, progress=False)
    n = int(grid["n_star"].iloc[0])
    assert sorted(curve["n_sessions"].unique()) == sorted({max(1, round(0.5 * n)), n})
    at_n = curve[curve["n_sessions"] == n].set_index("policy")["lifetime_years"]
    np.testing.assert_equal(at_n.to_dict(), grid.set_index("policy")["lifetime_years"].to_dict())  # the grid's runs
    g = gains.load_gains(curve)
    assert {"lachesis/hbm_first", "deterministic/hbm_first", "n_star", "all_meet_slo"} <= set(g)
    assert len(g) == curve["n_sessions"].nunique()
    with pytest.raises(ValueError, match="fractions"):
        W.load_curve(pts, [0.0], TINY, tmp_path, n_jobs=1, progress=False)


def test_paper_load_sentences_come_from_the_curve():
    rows = []
    for mem in ("1/7", "4/4", "8/8*"):
        for n, g in ((20, 12.0), (40, 3.0), (80, 1.2)):
            rows.append(dict(workload="multi_agent", model="M", slo="tight", memory=mem, n_sessions=n,
                             **{"lachesis/hbm_first": g, "deterministic/hbm_first": g / 2}, n_star=80,
                             all_meet_slo=True))
    found = gains.paper_loads(pd.DataFrame(rows))
    one = found[(found["memory"] == "1/7") & (found["ratio"] == "lachesis/hbm_first")].iloc[0]
    # 1.50 lies between 3.0 at 40 and 1.2 at 80: 40 + (3.0 - 1.5) / (3.0 - 1.2) * 40 = 73.3
    assert one["loads"] == [pytest.approx((73.33, 73.33), abs=0.01)]
    text = found["sentence"].tolist()
    assert len(text) == 5 and any("1.50× (tight, low end of 1/7–4/4); ours on 1/7, M: reproduced at ≈73 sessions/GPU"
                                  in t for t in text)
    daisy = found[found["memory"] == "8/8*"].iloc[0]  # 10.06-10.09: between 12 at 20 and 3 at 40
    assert daisy["loads"] and 24 < daisy["loads"][0][0] < 25
    rows = [dict(r, **{"lachesis/hbm_first": 1.1}) for r in rows]
    found = gains.paper_loads(pd.DataFrame(rows))
    assert any("not reached at 20–80 sessions/GPU" in t for t in found["sentence"])


# ------------------------------------------------------------------------------------------------
# The oracle: the baseline's close record, cached beside its run
# ------------------------------------------------------------------------------------------------


def _count_runs(monkeypatch) -> list[str]:
    """Policies of every simulator run started from now on (a spy on simulate_windows)."""
    seen: list[str] = []
    real = S.simulate_windows

    def spy(plan, cfg, policy, *a, **k):
        seen.append(getattr(policy, "name", policy))
        return real(plan, cfg, policy, *a, **k)

    monkeypatch.setattr(S, "simulate_windows", spy)
    return seen


def test_oracle_runs_at_the_cells_load_with_the_baselines_close_record(fixture_plan, tmp_path, monkeypatch):
    pts = _cell(("hbm_first", "lachesis", "oracle"))
    rows = W.evaluate_cell(pts, TINY, str(tmp_path), load="per_cell")
    n = rows[0]["n_star"]
    assert [r["n_sessions"] for r in rows] == [n] * 3 and rows[2]["load_policy"] == "hbm_first"
    assert 0 < rows[2]["close_drift_matched"] <= 1 and rows[2]["close_drift_median_abs_s"] >= 0
    assert "close_drift_matched" not in rows[1]
    # the record is filed under the baseline's run at N* (its search run, continued)
    base_key = store.point_key(pts[0], fixture_plan.fingerprint, TINY, n=n)
    assert (tmp_path / f"{base_key}.closes.npz").exists()
    closes = W.baseline_closes(pts[2], n, TINY, str(tmp_path), fixture_plan)
    assert len(closes) > 0 and closes.fingerprint == fixture_plan.fingerprint
    # the oracle alone, recomputed: it reads the record and never reruns the baseline
    for f in tmp_path.glob("*.json"):
        if json.loads(f.read_text())["policy"] == "oracle":
            f.unlink()
    seen = _count_runs(monkeypatch)
    again = W.run_at_load(pts[2], n, TINY, str(tmp_path), fixture_plan)
    assert seen == ["oracle"]
    np.testing.assert_equal(again["lifetime_years"], rows[2]["lifetime_years"])
    # without a cache the baseline is rerun for its record: the same numbers
    seen.clear()
    fresh = W.run_at_load(pts[2], n, TINY, None, fixture_plan)
    assert seen == ["hbm_first", "oracle"]
    np.testing.assert_equal(fresh["lifetime_years"], rows[2]["lifetime_years"])


@pytest.mark.parametrize("damage", ["truncated", "edited", "foreign"])
def test_a_bad_close_record_is_reported_and_the_baseline_rerun(fixture_plan, tmp_path, damage):
    pts = _cell(("hbm_first", "oracle"))
    W.evaluate_cell(pts, TINY, str(tmp_path), load=ONE_CONFIG)
    (path,) = tmp_path.glob("*.closes.npz")
    n = W.evaluate_point(pts[0], TINY, tmp_path, plan=fixture_plan)["n_star"]
    good = W.baseline_closes(pts[1], n, TINY, str(tmp_path), fixture_plan)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "edited":
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["offset_s"] = arrays["offset_s"] + 1.0
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)
    else:  # another run's record under this name
        other = tmp_path / "other"
        W.run_at_load(pts[0], max(1, n - 1), TINY, str(other), fixture_plan)
        path.write_bytes(next(other.glob("*.closes.npz")).read_bytes())
    with pytest.warns(store.CacheWarning, match=path.name):
        back = W.baseline_closes(pts[1], n, TINY, str(tmp_path), fixture_plan)
    np.testing.assert_array_equal(back.offset_s, good.offset_s)
    assert W.baseline_closes(pts[1], n, TINY, str(tmp_path), fixture_plan).offset_s.tolist() == good.offset_s.tolist()


def test_the_oracle_is_never_searched(fixture_plan, tmp_path):
    pts = _cell(("hbm_first", "lachesis", "oracle"))
    with pytest.raises(ValueError, match="'oracle' is not capacity-searched"):
        W.evaluate_point(pts[2], TINY, tmp_path, plan=fixture_plan)
    own = W.evaluate_cell(pts, TINY, str(tmp_path), load="own")
    assert own[2]["n_sessions"] == own[0]["n_star"] and own[2]["load_policy"] == "hbm_first"
    low = W.evaluate_cell(pts, TINY, str(tmp_path), load="min")
    assert own[2]["n_sessions"] >= low[2]["n_sessions"] == min(own[0]["n_star"], own[1]["n_star"])


# ------------------------------------------------------------------------------------------------
# Seeds: replicas at the first seed's load, intervals, and judging the paper's ranges with them
# ------------------------------------------------------------------------------------------------


def test_seeds_replicate_at_the_first_seeds_load(fixture_plan, tmp_path, monkeypatch):
    pts = [grid.Point("fixture", "1/7", "Llama-4-Maverick", "tight", p, 1.0, k)
           for k in (2, 0, 1) for p in ("hbm_first", "lachesis", "oracle")]
    searched: list[int] = []
    real = W.evaluate_point
    monkeypatch.setattr(W, "evaluate_point", lambda p, *a, **k: searched.append(p.seed) or real(p, *a, **k))
    df = W.run_grid(pts, TINY, tmp_path, n_jobs=1, progress=False)
    assert set(searched) == {0}  # only the lowest seed searches N* (the cells read the deployment's search back)
    assert [(r.seed, r.policy) for r in df.itertuples()] == [(p.seed, p.policy) for p in pts]  # input order
    n0 = int(df.loc[df.seed.eq(0), "n_sessions"].iloc[0])
    assert (df["n_sessions"] == n0).all() and (df["n_star"] == n0).all() and (df["load_seed"] == 0).all()
    assert df["slo_met"].map(type).eq(bool).all()
    # a replica is the policy's run at that load and seed: the same numbers as a direct run
    one = df[df.seed.eq(1) & df.policy.eq("lachesis")].iloc[0]
    direct = W.run_at_load(replace_seed(pts[1], 1), n0, TINY, None, fixture_plan)
    assert one["lifetime_years"] == direct["lifetime_years"]
    assert df.groupby("seed")["lifetime_years"].apply(tuple).nunique() == 3  # the seeds draw differently
    searched.clear()
    again = W.run_grid(pts, TINY, tmp_path, n_jobs=1, progress=False, seed_load="search")
    assert set(searched) == {0, 1, 2} and set(again["load_seed"]) == {0, 1, 2}
    with pytest.raises(ValueError, match="seed_load must be one of"):
        W.run_grid(pts, TINY, tmp_path, progress=False, seed_load="each")


def replace_seed(p, seed):
    from dataclasses import replace

    return replace(p, seed=seed)


def test_seed_table_and_intervals():
    r = pd.DataFrame(dict(workload="w", model="m", slo="tight", memory=["1/7"] * 3 + ["4/4"] * 3,
                          seed=[0, 1, 2] * 2, g=[1.0, 1.4, 1.2, 2.0, 2.0, 2.0]))
    t = tables.seed_table(r, ["g"])
    assert t[["g", "g_min", "g_max", "seeds"]].values.tolist() == [[1.2, 1.0, 1.4, 3], [2.0, 2.0, 2.0, 3]]
    assert tables.interval_text(t, ["g"])["g"].tolist() == ["1.2 [1–1.4]", "2"]
    assert tables.judge_interval((1.0, 1.4), (0.5, 2.0)) == "inside"
    assert tables.judge_interval((1.0, 1.4), (1.3, 2.0)) == "overlaps"
    assert tables.judge_interval((1.0, 1.4), (1.5, 2.0)) == "disjoint"
    assert tables.judge_interval((1.0, 1.4), 1.2) == "overlaps" and tables.judge_interval(1.2, 1.2) == "inside"
    assert tables.judge_interval((1.0, 1.4), tables.NOT_IN_PAPER) == ""
    v = r.set_index(grid.CELL + ["seed"])["g"]
    stat, S = tables.Statistic, tables.Stat
    cmp = tables.compare_intervals([S(stat("g", "g", (1.1, 2.5)), v), S(stat("absent", "absent", 1.0), None),
                                    S(stat("new", "new"), v)], note="x")
    one = cmp.iloc[0]
    # medians 1.2 and 2.0 lie in the paper's range; every seed's value spans 1.0-2.0, which only overlaps it
    assert (one["ours"], one["interval"], one["in_paper_range"], one["interval_vs_paper"]) == ("1.2–2", "1–2", "yes",
                                                                                              "overlaps")
    assert (one["seeds"], one["cells"]) == (3, 2) and list(cmp["statistic"]) == ["g", "new"]
    assert cmp.iloc[1]["interval_vs_paper"] == "" and cmp.iloc[1]["in_paper_range"] == ""


def test_ratio_table_per_seed_with_the_oracle_share():
    rows = [dict(workload="w", model="m", slo="tight", memory="1/7", seed=s, policy=p, lifetime_years=v)
            for s, vals in ((0, (2.0, 3.0, 4.0)), (1, (2.0, 2.5, 3.0)))
            for p, v in zip(("hbm_first", "lachesis", "oracle"), vals)]
    r = tables.ratio_table(pd.DataFrame(rows))
    assert r["lachesis/hbm_first"].tolist() == [1.5, 1.25] and r["oracle/hbm_first"].tolist() == [2.0, 1.5]
    assert r[tables.ORACLE_SHARE].tolist() == [0.5, 0.5]
    assert "deterministic/hbm_first" not in r  # only ratios whose policies ran


def test_run_tasks_runs_followups_locally_and_in_process():
    def follow(k, res):
        return [(pow, (res, 2), f"sq {res}")] if res < 100 else []

    for n_jobs in (1, 2):
        out = runner.run_tasks(pow, [(2, 1), (3, 1)], ["a", "b"], n_jobs=n_jobs, progress=False, follow=follow)
        assert sorted(out) == [2, 3, 4, 9, 16, 81, 256, 6561] and out[:2] == [2, 3]


def test_named_grid_names_the_workloads_or_a_trace_path(tmp_path):
    assert {p.workload for p in grid.named_grid("tau3", 0.1)} == {"tau3"}
    assert {p.workload for p in grid.named_grid("single", 0.1)} == set(grid.SINGLE_WORKLOADS)
    both = grid.named_grid("all", 0.1)
    assert {p.workload for p in both} == set(grid.MULTI_WORKLOADS) | set(grid.SINGLE_WORKLOADS)
    (tmp_path / "my_trace").mkdir()
    mine = grid.named_grid(str(tmp_path / "my_trace"), 0.1)
    assert {(p.workload, p.trace) for p in mine} == {("my_trace", str(tmp_path / "my_trace"))}
    with pytest.raises(FileNotFoundError, match="not a workload name"):
        grid.named_grid("no_such_thing")


@pytest.mark.slow
def test_the_rankers_keys_are_kept_in_the_cache_and_read_back_exactly(tmp_path, monkeypatch):
    from lachesis.analysis import ranker
    from lachesis.analysis.segments import prepare

    prep = prepare("multi_agent", 0.02, 0)
    fitted = plancache.rank_keys_cached(prep, tmp_path)
    (path,) = tmp_path.glob("*.rank.json")
    monkeypatch.setattr(ranker, "rank_keys", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refitted")))
    back = plancache.rank_keys_cached(prep, tmp_path)
    pd.testing.assert_series_equal(back, fitted)
    # another clock is another key; a damaged or foreign entry is reported and refitted
    other = prepare("multi_agent", 0.02, 0, clock=prep.clock.__class__(tool_class_of=dict(prep.clock.tool_class_of),
                                                                       user_delay_median_s=30.0))
    with pytest.raises(AssertionError, match="refitted"):
        plancache.rank_keys_cached(other, tmp_path)
    monkeypatch.undo()
    for damage in ("{not json", '{"key": "someone else", "index": null, "agents": [], "values": []}'):
        path.write_text(damage)
        with pytest.warns(store.CacheWarning, match=path.name):
            again = plancache.rank_keys_cached(prep, tmp_path)
        pd.testing.assert_series_equal(again, fitted)


def test_task_lists_share_their_workers_and_an_interruption_ends_them() -> None:
    """Two task lists run on the same worker processes (a worker keeps the plans it built); a task list that fails
    shuts them down, and the next one starts new workers."""
    first = runner.run_tasks(os.getpid, [()] * 4, ["pid"] * 4, n_jobs=2, progress=False)
    second = runner.run_tasks(os.getpid, [()] * 4, ["pid"] * 4, n_jobs=2, progress=False)
    assert set(second) <= set(first) and os.getpid() not in first
    with pytest.raises(ZeroDivisionError):
        runner.run_tasks(divmod, [(1, 0), (1, 1)], ["boom", "ok"], n_jobs=2, progress=False)
    third = runner.run_tasks(os.getpid, [()] * 4, ["pid"] * 4, n_jobs=2, progress=False)
    assert not set(third) & set(first)
    runner.close_shared_pool()
