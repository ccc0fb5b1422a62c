"""Tests for the spawn-time worker ranker on a small synthetic spawn table built here."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from lachesis.analysis import ranker as R

WORDS_SLOW = ["crawl", "search", "compile", "test", "browse"]
WORDS_FAST = ["summarize", "list", "check", "read", "format"]


def synthetic(n_sessions: int = 40, seed: int = 0):
    """A minimal trace-like object + segments frame whose worker lifetime depends on the signal.

    Lifetime = exp(base + 0.8 * n_slow_words + 1.0 * uses_shell) * noise; the lead request
    table gives the spawn positions.
    """
    rng = np.random.default_rng(seed)
    req_rows, spawn_rows, seg_rows = [], [], []
    for s in range(n_sessions):
        sid = f"s{s:03d}"
        lead = f"{sid}/lead"
        n_workers = int(rng.integers(2, 6))
        for i in range(n_workers):
            rid = f"{sid}/lead/r{i}"
            req_rows.append(dict(session_id=sid, request_id=rid, agent_id=lead, parent_agent_id=None,
                                 role="lead", turn=0, input_tokens=1000 * (i + 1), matched_prefix_tokens=1000 * i,
                                 output_tokens=50, reasoning_tokens=0, tool_names=["spawn_subagent"],
                                 n_observations=1, benchmark="b1" if s % 2 else "b2"))
            n_slow = int(rng.integers(0, 4))
            words = list(rng.choice(WORDS_SLOW, n_slow)) + list(rng.choice(WORDS_FAST, 3))
            shell = bool(rng.integers(0, 2))
            tools = ["shell", "read_file"] if shell else ["read_file"]
            aid = f"{sid}/w{i}"
            t = float(np.exp(3.0 + 0.8 * n_slow + 1.0 * shell + rng.normal(0, 0.3)))
            spawn_rows.append(dict(session_id=sid, agent_id=aid, parent_agent_id=lead, role="worker",
                                   spawn_request_id=rid, instruction=" ".join(words), context=str(200 + 10 * i),
                                   tools=tools, model="m", spawn_index=i))
            req_rows.append(dict(session_id=sid, request_id=f"{aid}/r0", agent_id=aid, parent_agent_id=lead,
                                 role="worker", turn=0, input_tokens=300, matched_prefix_tokens=0,
                                 output_tokens=100, reasoning_tokens=0, tool_names=[], n_observations=0,
                                 benchmark="b1" if s % 2 else "b2"))
            seg_rows.append(dict(segment_id=f"{aid}#0", session_id=sid, agent_id=aid, seg_class="worker",
                                 tokens_written=int(100 * t ** 0.5), t_first_write_s=10.0 * i,
                                 t_last_read_s=10.0 * i + t, t_norm_s=t))
    trace = types.SimpleNamespace(requests=pd.DataFrame(req_rows), spawns=pd.DataFrame(spawn_rows),
                                  source="<synthetic>")
    segments = types.SimpleNamespace(segments=pd.DataFrame(seg_rows))
    return trace, segments


@pytest.fixture(scope="module")
def toy():
    return synthetic()


def test_spawn_signal_positions_and_lengths(toy):
    trace, _ = toy
    sig = R.spawn_signal(trace.spawns, trace.requests)
    first = sig.iloc[0]
    assert first["context_tokens"] == 200.0  # numeric string read as a token count
    assert first["lead_request_index"] == 1.0  # the spawning request is the lead's first
    assert first["lead_tokens_before"] == 1050.0  # 1000 input + 50 output - 0 matched
    second = sig.iloc[1]
    assert second["lead_request_index"] == 2.0
    assert second["lead_tokens_before"] == 1050.0 + (2000 + 50 - 1000)
    assert sig["n_tools"].isin([1.0, 2.0]).all()
    assert first["instruction_words"] == len(trace.spawns["instruction"].iloc[0].split())


def test_context_tokens_kinds():
    assert R._context_tokens(42) == 42.0
    assert R._context_tokens(" 17 ") == 17.0
    assert R._context_tokens("three word context") == 3.0
    assert R._context_tokens(None) == 0.0
    assert (R._context_text(42), R._context_text("17"), R._context_text("fix the bug")) == ("", "", "fix the bug")


def test_ranker_learns_order_and_is_deterministic(toy):
    trace, segments = toy
    cv1 = R.cross_validate(trace, segments, seed=0)
    cv2 = R.cross_validate(trace, segments, seed=0)
    pd.testing.assert_frame_equal(cv1, cv2)
    tau = R.kendall_tau(cv1["pred"], cv1["t_norm_s"])
    assert tau > 0.5, tau  # signal is strong in the toy; a broken feature path gives ~0
    assert list(cv1.columns) == ["agent_id", "session_id", "benchmark", "t_norm_s", "tokens_written",
                                 "pred", "fold"]
    assert cv1["pred"].notna().all()


def test_grouped_cv_never_splits_a_session(toy):
    trace, segments = toy
    cv = R.cross_validate(trace, segments, seed=3)
    assert (cv.groupby("session_id")["fold"].nunique() == 1).all()
    assert sorted(cv["fold"].unique()) == [0, 1, 2, 3, 4]
    # a different seed reshuffles sessions among folds
    other = R.session_folds(cv["session_id"], 5, seed=4)
    assert not np.array_equal(other, cv["fold"].to_numpy())


def test_oof_prediction_uses_no_own_session(toy):
    """Changing one session's lifetimes must not change that session's out-of-fold predictions."""
    trace, segments = toy
    base = R.cross_validate(trace, segments, seed=0)
    seg2 = segments.segments.copy()
    victim = base["session_id"].iloc[0]
    m = seg2["session_id"] == victim
    seg2.loc[m, "t_last_read_s"] = seg2.loc[m, "t_first_write_s"] + 1e6
    moved = R.cross_validate(trace, types.SimpleNamespace(segments=seg2), seed=0)
    sel = base["session_id"] == victim
    np.testing.assert_allclose(base.loc[sel, "pred"], moved.loc[sel, "pred"])
    assert not np.allclose(base.loc[~sel, "pred"], moved.loc[~sel, "pred"])  # other folds saw it


def test_compare_rankers_same_folds(toy):
    trace, segments = toy
    cmp = R.compare_rankers(trace, segments, seed=0)
    ridge_only = R.cross_validate(trace, segments, seed=0)
    np.testing.assert_array_equal(cmp.oof["fold"].to_numpy(), ridge_only["fold"].to_numpy())
    np.testing.assert_allclose(cmp.oof["ridge"].to_numpy(), ridge_only["pred"].to_numpy())
    assert set(cmp.tau) == {"ridge", "boosted"}
    assert cmp.winner == max(cmp.tau, key=cmp.tau.get)
    oof = R.oof_predictions(trace, segments, seed=0)  # the paper's ridge, whichever model wins the comparison
    assert oof.index.name == "agent_id" and len(oof) == len(ridge_only)
    np.testing.assert_allclose(oof.to_numpy(), cmp.oof["ridge"].to_numpy())


def test_rank_keys_are_the_out_of_fold_predictions(toy):
    trace, segments = toy
    keys = R.rank_keys(trace, segments, seed=0)
    pd.testing.assert_series_equal(keys, R.oof_predictions(trace, segments, seed=0))
    no_workers = types.SimpleNamespace(requests=trace.requests.assign(role="single"), spawns=trace.spawns.iloc[:0])
    empty = R.rank_keys(no_workers, segments)
    assert len(empty) == 0 and empty.name == "pred" and empty.dtype == float


def test_fit_score_api_and_errors(toy):
    trace, segments = toy
    t = R.worker_table(trace, segments)
    r = R.SpawnRanker().fit(trace.spawns, t["t_norm_s"].to_numpy())
    keys = r.score(trace.spawns)
    assert keys.shape == (len(trace.spawns),)
    with pytest.raises(RuntimeError):
        R.SpawnRanker().score(trace.spawns)
    bad = t["t_norm_s"].to_numpy().copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match="t_norm"):
        R.SpawnRanker().fit(trace.spawns, bad)
    with pytest.raises(ValueError, match="lifetimes"):
        R.SpawnRanker().fit(trace.spawns, bad[:-1])


def test_worker_without_spawn_record_is_an_error(toy):
    trace, segments = toy
    t2 = types.SimpleNamespace(requests=trace.requests, spawns=trace.spawns.iloc[1:], source="x.jsonl")
    with pytest.raises(ValueError, match="x.jsonl.*no spawn record"):
        R.worker_table(t2, segments)


def test_on_embedded_corpus_small():
    """End to end on the embedded corpus: every worker gets one out-of-fold key, sessions stay whole."""
    from lachesis.analysis import characterize as C

    tr, seg = C.load_segments(["multi_agent"], "", scale=0.03, seed=1)
    cv = R.cross_validate(tr, seg, seed=1)
    workers = set(seg.loc[seg["seg_class"] == "worker", "agent_id"])
    assert set(cv["agent_id"]) == workers and cv["agent_id"].is_unique
    assert (cv.groupby("session_id")["fold"].nunique() == 1).all()
    assert np.isfinite(cv["pred"]).all() and np.isfinite(R.kendall_tau(cv["pred"], cv["t_norm_s"]))
    assert set(cv["benchmark"]) <= {"appworld", "deepsearchqa", "swebench_verified", "terminalbench", "webarena"}


def test_spawns_without_tools_still_rank() -> None:
    """A source whose spawn records grant no tools (e.g. ChatDev phases) must not break the tool-indicator block."""
    import pandas as pd

    from lachesis.analysis.ranker import NO_TOOLS, SpawnRanker, spawn_signal

    sp = pd.DataFrame({"session_id": ["s1", "s1", "s2", "s2"], "agent_id": ["a", "b", "c", "d"],
                       "parent_agent_id": ["L1", "L1", "L2", "L2"], "role": "worker",
                       "spawn_request_id": ["r1", "r1", "r2", "r2"],
                       "instruction": ["write code", "review the design", "write tests", "write docs"],
                       "context": [10, 20, 30, 40], "tools": [[], [], [], []], "model": "m", "spawn_index": [0, 1, 0,
                                                                                                             1]})
    assert (spawn_signal(sp)["tools_text"] == NO_TOOLS).all()
    keys = SpawnRanker().fit(sp, [10.0, 20.0, 30.0, 40.0]).score(sp)
    assert keys.shape == (4,) and np.isfinite(keys).all()


# ------------------------------------------------------------------------------------------------
# Same ranks on another machine (module docstring of lachesis.analysis.ranker)
# ------------------------------------------------------------------------------------------------

_CROSS_KERNEL = """
import json, sys
from lachesis.analysis import characterize as C, ranker as R
tr, seg = C.load_segments(["multi_agent"], "", 0.1, 0)
cv = R.compare_rankers(tr, seg, n_splits=5, seed=0)
json.dump({"ridge": cv.oof["ridge"].tolist(), "tau": cv.tau["ridge"]}, sys.stdout)
"""


@pytest.fixture(scope="module")
def corpus_oof():
    from lachesis.analysis import characterize as C

    tr, seg = C.load_segments(["multi_agent"], "", 0.1, 0)
    return tr, seg, R.compare_rankers(tr, seg, n_splits=5, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"OPENBLAS_CORETYPE": "Sandybridge"},
                                 {"NPY_DISABLE_CPU_FEATURES": "X86_V4,AVX512_ICL,X86_V3"}],
                         ids=["other-blas-kernel", "no-avx-numpy"])
def test_same_predictions_with_other_blas_and_simd_kernels(corpus_oof, env):
    """Another BLAS kernel (or numpy without AVX) gives the same rounded keys, order and τ.  With
    scikit-learn's default ridge tolerance (1e-4) these differed by up to 4e-4 and τ moved."""
    import json
    import os
    import subprocess
    import sys

    _, _, cv = corpus_oof
    r = subprocess.run([sys.executable, "-c", _CROSS_KERNEL], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr[-2000:]
    other = json.loads(r.stdout)
    ours = cv.oof["ridge"].to_numpy()
    assert np.array_equal(np.argsort(ours, kind="stable"), np.argsort(other["ridge"], kind="stable"))
    diff = np.abs(ours - np.asarray(other["ridge"]))
    assert diff.max() <= 1.5 * 10.0 ** -R.RANK_DECIMALS and (diff > 0).mean() < 0.02  # rare rounding-boundary straddles
    assert other["tau"] == cv.tau["ridge"]


def test_ranks_survive_a_relative_perturbation_of_1e_12(corpus_oof):
    """Float noise in the inputs (1e-12 relative, far above last-bit kernel differences) leaves every rank."""
    tr, seg, cv = corpus_oof
    table = R.worker_table(tr, seg)
    folds = cv.oof["fold"].to_numpy()
    rng = np.random.default_rng(1)
    noisy = table.copy()
    for col in ("t_norm_s", *R.NUMERIC_FEATURES):
        noisy[col] = noisy[col] * (1 + 1e-12 * rng.standard_normal(len(noisy)))
    a = R._oof(table, folds, R.ridge_model)
    b = R._oof(noisy, folds, R.ridge_model)
    assert np.array_equal(np.argsort(a, kind="stable"), np.argsort(b, kind="stable"))
    assert np.abs(a - b).max() <= 1.5 * 10.0 ** -R.RANK_DECIMALS  # at most one rounding step


def test_ridge_solve_is_tight_and_keys_are_rounded(toy):
    trace, segs = toy
    table = R.worker_table(trace, segs)
    model = R.SpawnRanker().fit(table, table["t_norm_s"])
    ridge = model.model_.named_steps["ridge"]
    assert ridge.solver == "sparse_cg" and ridge.tol == R.RIDGE_TOL
    keys = model.score(table)
    assert np.array_equal(keys, np.round(keys, R.RANK_DECIMALS))
    # the tight solve is the exact ridge solution: the closed form on the same features agrees
    X = model.model_.named_steps["features"].transform(table).toarray()
    Xc, y = X - X.mean(0), np.log(table["t_norm_s"].to_numpy())
    K = Xc @ Xc.T  # the dual form (fewer workers than features): coef = Xc^T (K + alpha I)^-1 (y - mean y)
    exact = K @ np.linalg.solve(K + R.RIDGE_ALPHA * np.eye(len(y)), y - y.mean()) + y.mean()
    assert np.abs(keys - exact).max() < 1e-8
