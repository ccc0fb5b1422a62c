"""The embedded synthetic corpus: determinism, contract, Table 3 scale, harness semantics, its output folder written
whole."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
from cli_checks import full_disk, siblings, snapshot

from lachesis.config import TOOL_CLASSES
from lachesis.traces import corpus, workloads
from lachesis.traces.clock import clock_for
from lachesis.traces.trace import Trace, read_trace, tokens_written

SMALL = 0.05


@pytest.fixture(scope="module")
def paper_scale() -> tuple[dict[str, Trace], float]:
    """Every Table 3 workload at scale 1 (seed 0) and the time it took."""
    t0 = time.perf_counter()
    traces = {w: corpus.generate(w, 1.0, 0) for w in workloads.TEMPORAL_WORKLOADS + workloads.STRUCTURAL_WORKLOADS}
    return traces, time.perf_counter() - t0


def test_workload_names() -> None:
    composites = {"tau3", "bfcl", "multi_agent", "multi_agent_no_reviewer"}
    assert set(workloads.WORKLOADS) == set(workloads.TABLE3_INPUT) | composites
    with pytest.raises(KeyError, match="unknown workload"):
        corpus.generate("no_such_workload")
    with pytest.raises(ValueError, match="scale"):
        corpus.generate("tau3_airline", scale=0)


def test_same_seed_same_corpus_and_seed_matters() -> None:
    a = corpus.generate("appworld", SMALL, 3)
    b = corpus.generate("appworld", SMALL, 3)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.spawns, b.spawns)
    c = corpus.generate("appworld", SMALL, 4)
    assert not a.requests["output_tokens"].equals(c.requests["output_tokens"])


def test_sessions_do_not_depend_on_scale() -> None:
    """Per-session generation: a session is the same whatever the number of sessions beside it."""
    small = corpus.generate("tau3_retail", 0.02, 0).requests
    big = corpus.generate("tau3_retail", 0.1, 0).requests
    sid = small["session_id"].iloc[0]
    pd.testing.assert_frame_equal(small[small.session_id == sid].reset_index(drop=True),
                                  big[big.session_id == sid].reset_index(drop=True))


def test_validation_and_round_trip(tmp_path) -> None:
    tr = corpus.generate("multi_agent", SMALL, 0)
    again = Trace.from_frames(tr.requests, tr.spawns)  # re-validates every row
    assert len(again.requests) == len(tr.requests)
    assert tr.requests["request_id"].is_unique
    for col in ("benchmark", "domain", "observation_tokens"):
        assert tr.requests[col].notna().all()
    written = corpus.write_all(tmp_path, scale=0.02, seed=0, fmt="jsonl", workloads=["bfcl_base", "webarena"])
    assert list(written) == ["bfcl_base", "webarena"]
    back = read_trace(tmp_path / "webarena")
    ref = corpus.generate("webarena", 0.02, 0)
    assert back.requests["request_id"].tolist() == ref.requests["request_id"].tolist()
    assert back.spawns["instruction"].tolist() == ref.spawns["instruction"].tolist()
    assert (tmp_path / "bfcl_base" / "requests.jsonl").exists()


def test_request_ids_unique_across_corpus() -> None:
    traces = corpus.generate_all(0.02, 0)
    ids = pd.concat([traces[w].requests["request_id"] for w in workloads.TABLE3_INPUT])
    assert ids.is_unique
    parts = [traces[w].requests for w in workloads.STRUCTURAL_WORKLOADS]
    assert len(traces["multi_agent"].requests) == sum(len(p) for p in parts)
    assert set(traces["tau3"].requests["benchmark"]) == set(workloads.TEMPORAL_WORKLOADS[:4])


@pytest.mark.slow
def test_table3_within_ten_percent_at_scale_one(paper_scale) -> None:
    traces, seconds = paper_scale
    tab = corpus.table3(traces, scale=1.0)
    assert len(tab) == 11
    errs = tab[[c for c in tab.columns if c.endswith("_rel_err")]]
    assert (errs["sessions_rel_err"] == 0).all()
    bad = errs.abs() > 0.10
    assert not bad.to_numpy().any(), tab.loc[bad.any(axis=1), ["workload"] + list(errs.columns)].to_string()
    # processed tokens are compared where Table 3 reports them (the temporal regime)
    assert tab.loc[tab.regime == "temporal", "tokens_processed_rel_err"].notna().all()
    assert seconds < 20, f"paper-scale generation took {seconds:.1f} s"


def test_stripping_semantics() -> None:
    """Next turn's matched prefix ends exactly where the previous turn's first reasoning token began."""
    r = corpus.generate("tau3_telecom", SMALL, 0).requests
    checked = 0
    for _, s in r.groupby("session_id", sort=False):
        inp, mp = s["input_tokens"].to_numpy(), s["matched_prefix_tokens"].to_numpy()
        out = s["output_tokens"].to_numpy()
        turn = s["turn"].to_numpy()
        first = np.flatnonzero(np.r_[True, turn[1:] != turn[:-1]])
        assert mp[0] == s["shared_prefix_tokens"].iloc[0] > 0  # the system prompt: shared prefix, not written
        for a, b in zip(first[:-1], first[1:]):
            # the first reasoning token of turn a's first request sits right after its input
            assert mp[b] == inp[a]
            assert inp[b] > mp[b]  # stripped context + new user message are re-sent (rematerialized)
            checked += 1
        inside = np.flatnonzero(turn[1:] == turn[:-1]) + 1
        assert (mp[inside] == inp[inside - 1] + out[inside - 1]).all()
        # what the next turn re-sends = the turn's calls, observations and answer (its outputs minus
        # reasoning, plus observations) + the new user message: exactly the reasoning is stripped
        rs, ob = s["reasoning_tokens"].to_numpy(), s["observation_tokens"].to_numpy()
        for a, b in zip(first[:-1], first[1:]):
            kept = int((out[a:b] - rs[a:b] + ob[a:b]).sum())
            user = (inp[b] - mp[b]) - kept
            assert 0 < user < 1000
    assert checked > 10
    # the final round of a turn answers without a tool call; tool rounds carry observations
    last_of_turn = r.groupby(["session_id", "turn"]).tail(1)
    assert (last_of_turn["tool_names"].map(len) == 0).all()
    tool_rounds = r[r["tool_names"].map(len) > 0]
    assert (tool_rounds["n_observations"] == tool_rounds["tool_names"].map(len)).all()
    assert (tool_rounds["observation_tokens"] > 0).all()


def test_reviewer_free_variant_has_same_workers() -> None:
    with_r = corpus.generate("multi_agent", SMALL, 1)
    without = corpus.generate("multi_agent_no_reviewer", SMALL, 1)
    w1 = with_r.requests[with_r.requests.role == "worker"].reset_index(drop=True)
    w2 = without.requests[without.requests.role == "worker"].reset_index(drop=True)
    pd.testing.assert_frame_equal(w1, w2)
    s1 = with_r.spawns[with_r.spawns.role == "worker"].reset_index(drop=True)
    s2 = without.spawns[without.spawns.role == "worker"].reset_index(drop=True)
    pd.testing.assert_frame_equal(s1, s2)
    assert (with_r.requests.role == "reviewer").sum() > 0
    assert (without.requests.role == "reviewer").sum() == 0
    assert set(with_r.requests.session_id) == set(without.requests.session_id)


def test_spawn_records_are_textual_and_consistent() -> None:
    tr = corpus.generate("multi_agent", SMALL, 0)
    req, sp = tr.requests, tr.spawns
    subs = req.loc[req.role.isin(["worker", "reviewer"]), "agent_id"].unique()
    assert set(sp.agent_id) == set(subs)
    assert sp["instruction"].map(lambda t: isinstance(t, str) and len(t.split()) >= 6 and "{" not in t).all()
    workers = sp[sp.role == "worker"]
    assert workers["tools"].map(len).min() >= 1
    # every worker's instruction is one of several distinct texts (not a constant)
    assert workers["instruction"].nunique() > 0.8 * len(workers)
    # the tools a worker calls are among the tools its spawn record grants
    granted = dict(zip(workers.agent_id, workers.tools.map(set)))
    for aid, names in req[req.role == "worker"].groupby("agent_id")["tool_names"]:
        used = set().union(*map(set, names))
        assert used <= granted[aid]
    # each spawn record's request is a lead request that calls spawn_subagent once per record
    n_calls = req.set_index("request_id")["tool_names"].map(lambda t: t.count(corpus.SPAWN_TOOL))
    per_req = sp.groupby("spawn_request_id").size()
    assert (n_calls.loc[per_req.index] == per_req).all()
    assert (req.set_index("request_id").loc[per_req.index, "role"] == "lead").all()
    # a reviewer's context is its worker's finished trace
    rv = sp[sp.role == "reviewer"]
    assert rv["context"].map(lambda c: isinstance(c, (int, np.integer)) and c > 0).all()


def test_reference_clock_knows_every_tool() -> None:
    classes = {tc.name for tc in TOOL_CLASSES}
    tr = corpus.generate_all(0.02, 0, ["tau3", "bfcl", "multi_agent"])
    for t in tr.values():  # every corpus trace carries the map, so its clock charges each tool by its class
        clock = clock_for(t)
        assert clock == corpus.reference_clock()
        used = set().union(*map(set, t.requests["tool_names"]))
        for name in used - set(clock.spawn_tools):
            assert clock.tool_class_of[name] in classes, name
    used = set().union(*(set().union(*map(set, t.requests["tool_names"])) for t in tr.values()))
    assert corpus.SPAWN_TOOL in used


def test_derivations_follow_table3_arithmetic() -> None:
    """Expected requests per session from the closed form equal Table 3's (no hidden fudge)."""
    for w, p in workloads.TEMPORAL_PRESETS.items():
        d = workloads.derive_temporal(p)
        s, n, _, _ = workloads.TABLE3_INPUT[w]
        assert (1 + d.extra_turns) * (1 + d.extra_rounds) == pytest.approx(n / s)
    for p in workloads.STRUCTURAL_PRESETS.values():
        d = workloads.derive_structural(p)
        assert d.worker_rounds > 1 and d.observation_tokens > 0


def test_temporal_derivation_reproduces_what_it_is_solved_from() -> None:
    """Each temporal parameter reproduces the published statistic it is solved from (docs/design.md §7):
    turns and rounds from Table 3, X̄ and R̄ from Fig. 4(b)'s means, σ_X from its stripped median (median of
    u + X, checked here by Monte Carlo), σ_R from its laden median (one quantile: median R + median X)."""
    z = np.random.default_rng(0).standard_normal((2, 400_000))
    reached = set()
    for w, p in workloads.TEMPORAL_PRESETS.items():
        d = workloads.derive_temporal(p)
        n_s, n_req, _, written = workloads.TABLE3_INPUT[w]
        (m_l, mu_l), (m_s, mu_s) = (workloads.FIG4B_INPUT[w][c] for c in ("reasoning_laden", "reasoning_stripped"))
        turns, u, su = 1 + d.extra_turns, p.user_tokens, p.token_sigma
        assert turns * (1 + d.extra_rounds) == pytest.approx(n_req / n_s)
        assert turns * mu_l + d.extra_turns * mu_s + u == pytest.approx(written / n_s)  # the last turn: no stripped
        assert (d.stripped_mean + u, d.reasoning_mean + d.stripped_mean) == pytest.approx((mu_s, mu_l))
        x = d.stripped_mean * np.exp(d.stripped_sigma * z[1] - d.stripped_sigma ** 2 / 2)
        assert np.median(u * np.exp(su * z[0] - su * su / 2) + x) == pytest.approx(m_s, rel=0.01), w
        k, x_med, r_med = d.turn(0.5)
        assert x_med + r_med == pytest.approx(d.laden_median)
        sigma_l = math.sqrt(2 * math.log(mu_l / m_l))
        if d.laden_median == pytest.approx(m_l):
            reached.add(w)
            assert 0 < d.reasoning_sigma < sigma_l
        else:  # out of reach: the nearest shape in [0, σ_L] (base: median R would exceed R̄; long-context: < 0)
            assert d.reasoning_sigma in (0.0, pytest.approx(sigma_l)), w
        # a turn's rounds, stripped content and reasoning grow together with its quantile
        sizes = [d.turn(q) for q in (0.05, 0.5, 0.95)]
        assert all(a <= b for a, b in zip(sizes, sizes[1:]))
        assert d.observation_tokens > 0 and d.prompt_tokens > 0
    assert reached == {"tau3_airline", "tau3_retail", "tau3_telecom", "tau3_banking"}


def test_fig4b_turn_tokens_match_the_input_medians() -> None:
    """Per-turn laden/stripped KV tokens of the recovered segments land on Fig. 4(b)'s medians (as solved) at a
    small scale; the means' heavy tails need the paper's scale (tests/analysis/test_paper_scale.py)."""
    from lachesis.analysis import characterize as C
    from lachesis.analysis.segments import recover

    for w in workloads.TEMPORAL_WORKLOADS:
        tr = corpus.generate(w, 0.3, 0)
        seg = recover(tr, seed=0).segments
        tw = C.turn_writes(seg.assign(group=w))
        d = workloads.derive_temporal(workloads.TEMPORAL_PRESETS[w])
        targets = {"reasoning_laden": d.laden_median,
                   "reasoning_stripped": workloads.FIG4B_INPUT[w]["reasoning_stripped"][0]}
        for cls, med in targets.items():
            assert tw.loc[tw.seg_class == cls, "tokens_written"].median() == pytest.approx(med, rel=0.12), (w, cls)
        # and the segments account for every token the trace writes
        assert seg.loc[seg.seg_class.isin(["reasoning_laden", "reasoning_stripped"]), "tokens_written"].sum() == \
            tokens_written(tr.requests).sum()


# -- an output folder written whole: one run, the old folder kept on a failure ------------------------


def test_corpus_into_a_reused_folder_holds_one_run(tmp_path) -> None:
    out = tmp_path / "c"
    corpus.write_all(out, 0.02, 0, "parquet", ["bfcl_base", "webarena"])
    corpus.write_all(out, 0.02, 0, "jsonl", ["bfcl_base"])
    assert sorted(p.name for p in out.iterdir()) == ["bfcl_base"]
    assert not list(out.rglob("*.parquet")) and (out / "bfcl_base" / "requests.jsonl").is_file()
    assert siblings(out) == []


def test_a_failed_corpus_leaves_the_old_folder_intact(tmp_path, monkeypatch) -> None:
    out = tmp_path / "c"
    corpus.write_all(out, 0.02, 0, "parquet", ["bfcl_base"])
    before = snapshot(out)
    calls = []

    def second_fails(tr, d, fmt="parquet"):
        calls.append(d)
        if len(calls) == 2:
            full_disk()
        return real(tr, d, fmt)

    real = corpus.write_trace
    monkeypatch.setattr(corpus, "write_trace", second_fails)
    with pytest.raises(OSError, match="No space"):
        corpus.write_all(out, 0.02, 0, "jsonl", ["bfcl_base", "webarena"])
    assert snapshot(out) == before and siblings(out) == []


def test_a_scale_beyond_the_bound_is_refused_before_anything_is_made(tmp_path, capsys) -> None:
    """``corpus --scale 1e6`` would fill the machine's memory: refused at once, naming the bound and the cost."""
    from lachesis.cli import main
    from lachesis.traces import corpus

    assert main(["corpus", "--scale", "1e6", "--out", str(tmp_path / "big")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scale 1e+06 is above corpus.MAX_SCALE = 64" in err[0] and "GB of memory" in err[0]
    assert not (tmp_path / "big").exists()
    for bad in (corpus.MAX_SCALE * 1.01, 0, float("nan"), True):
        with pytest.raises(ValueError, match="scale"):
            corpus.generate("tau3", bad)
    assert corpus.check_scale(corpus.MAX_SCALE) == corpus.MAX_SCALE
    assert "GB of memory" in corpus.cost(32)
