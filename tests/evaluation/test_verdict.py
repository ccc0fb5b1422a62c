"""``lachesis evaluate``: the Figs. 9/11 protocol on a trace folder end to end at CI scale, the trace knobs
(sessions drawn with replacement, the trace's own delays, reasoning added where none is recorded) each moving
only what it names, the sensitivity rows that move them one at a time, and every refusal as one line naming its
input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fixture_paths import FIXTURES

import lachesis
from lachesis.analysis import ranker, segments
from lachesis.cli import main
from lachesis.evaluation import grid, knobs, plancache, verdict
from lachesis.traces import clock, gaps
from lachesis.traces.trace import Trace, read_trace, write_trace

FIX = FIXTURES / "evaluate"
MULTI, SINGLE = FIX / "multi", FIX / "single"
#: the CI-scale cell every end-to-end run here uses (seconds on one core)
CI = ["--node", "one_gpu", "--search", "ci", "--configs", "1/7", "--models", "Qwen3-235B-A22B", "--slos", "tight",
      "--sessions", "16", "--jobs", "1"]


def one_error_line(capsys, argv: list[str]) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    return err[0]


# ------------------------------------------------------------------------------------------------
# End to end
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("evaluate")
    assert main(["evaluate", str(MULTI), "--out", str(out), *CI]) == 0
    return out


def test_evaluate_writes_one_table_and_one_figure(multi_run, capsys) -> None:
    t = pd.read_csv(multi_run / "multi.csv")
    assert list(t.columns) == list(verdict.COLUMNS)
    assert (multi_run / "multi.png").stat().st_size > 0 and (multi_run / "multi.pdf").stat().st_size > 0
    assert set(t.policy) == set(grid.MULTI_POLICIES) | {"bound"}
    hf = t[t.policy == "hbm_first"].iloc[0]
    assert hf.over_hbm_first == 1.0 and hf.n_sessions >= 1 and np.isfinite(hf.lifetime_years)
    assert 0 <= hf.hbm_share <= 1 and hf.hbm_over_live_short > 0
    # every policy at the load HBM-first's search set (one load per deployment), with its verdict on the SLO
    assert t[t.policy != "bound"].n_sessions.nunique() == 1
    assert (t.sessions_in_trace == 8).all() and (t.sessions_drawn == 16).all() and (t.think_time == "reference").all()
    assert not [p for p in multi_run.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]  # atomic: no leftovers


def test_the_python_function_gives_the_commands_table(multi_run) -> None:
    v = lachesis.evaluate(MULTI, models=["Qwen3-235B-A22B"], slos=["tight"], configs=["1/7"], node="one_gpu",
                          search="ci", sessions=16, cache_dir=multi_run / "cache", n_jobs=1, progress=False)
    got = pd.read_csv(multi_run / "multi.csv")
    pd.testing.assert_series_equal(v.table["lifetime_years"].reset_index(drop=True), got["lifetime_years"],
                                   rtol=1e-9, check_names=False)
    assert any("8 sessions" in n for n in v.notes) and "Lachesis/HBM-first" in v.lines()[-1]


def test_single_agent_trace_runs_the_fig11_protocol(tmp_path) -> None:
    v = verdict.evaluate(SINGLE, tmp_path, models=["Qwen3-235B-A22B"], configs=["1/7"], node="one_gpu", search="ci",
                         sessions=8, policies=["hbm_first", "lachesis"], n_jobs=1, progress=False)
    assert set(v.table.slo) == {"tight"} and set(v.table.kind) == {"single"}
    assert (v.table.think_time == "trace").all()  # the trace records times: its own delays by default
    assert (tmp_path / "single.csv").exists()


# ------------------------------------------------------------------------------------------------
# Sessions drawn with replacement
# ------------------------------------------------------------------------------------------------


def test_resampling_is_seeded_and_reproducible() -> None:
    tr = read_trace(MULTI)
    a, oa = gaps.resample(tr, 20, seed=1)
    b, ob = gaps.resample(tr, 20, seed=1)
    c, _ = gaps.resample(tr, 20, seed=2)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert oa == ob
    assert a.requests["session_id"].nunique() == 20
    orig = lambda t: [s.rpartition(gaps.COPY_MARK)[0] for s in pd.unique(t.requests["session_id"])]  # noqa: E731
    assert orig(a) != orig(c) and set(orig(a)) <= set(tr.requests["session_id"])
    # a copy is its original, ids apart
    one = a.requests[a.requests.session_id == pd.unique(a.requests.session_id)[0]]
    src = tr.requests[tr.requests.session_id == orig(a)[0]]
    cols = ["input_tokens", "matched_prefix_tokens", "output_tokens", "turn", "role"]
    pd.testing.assert_frame_equal(one[cols].reset_index(drop=True), src[cols].reset_index(drop=True))
    assert all(oa[x] == x.rpartition(gaps.COPY_MARK)[0] for x in oa)


def test_copies_draw_their_own_clock_and_keep_their_originals_rank() -> None:
    p0 = plancache.workload_plan("m", 1.0, 0, str(MULTI))
    p1 = plancache.workload_plan("m", 1.0, 0, str(MULTI), overrides=(("sessions", 12.0),))
    assert len(p0.sessions) == 8 and len(p1.sessions) == 12
    tr = read_trace(MULTI)
    keys = ranker.rank_keys(tr, segments.recover(tr))
    copied, origin = gaps.resample(tr, 12, seed=0)
    prep = segments.prepare(copied)
    w = prep.segments.segments
    w = w[w.seg_class == "worker"]
    got = dict(zip(p1.seg_ids, p1.seg_key))
    for sid, agent in zip(w.segment_id, w.agent_id):
        assert got[sid] == pytest.approx(keys[origin[agent]])
    # two copies of one session: the same requests, their own user and tool draws
    s = copied.requests.session_id.str.rpartition(gaps.COPY_MARK)[0]
    dup = s[s.duplicated()]
    if len(dup):
        sched = prep.segments.schedule.assign(orig=s.to_numpy())
        ids = pd.unique(copied.requests.session_id[s == dup.iloc[0]])[:2]
        t = [sched[sched.session_id == i].t_tools_s.to_numpy() for i in ids]
        assert not np.array_equal(t[0], t[1]) or not t[0].any()


# ------------------------------------------------------------------------------------------------
# Each knob changes only what it names
# ------------------------------------------------------------------------------------------------


def test_trace_knobs_are_overrides_of_the_plan_not_of_the_corpus_study() -> None:
    for k in ("sessions", "think_time", "reasoning_per_output"):
        assert knobs.KNOBS[k].acts_on == "trace" and k in knobs.OVERRIDES and k not in knobs.STUDY
    ov = knobs.canonical({"sessions": 4, "pe_cycles": 3000, "tool_latency_scale": 2})
    assert dict(knobs.plan_overrides(ov)) == {"sessions": 4.0, "tool_latency_scale": 2.0}
    cfg = grid.Point("x", "1/7", "Qwen3-235B-A22B", "tight", "hbm_first", overrides={"sessions": 4}).config()
    assert cfg == grid.Point("x", "1/7", "Qwen3-235B-A22B", "tight", "hbm_first").config()  # the node is untouched


def test_think_time_from_the_trace_moves_only_recorded_delays() -> None:
    tr = read_trace(SINGLE)
    timed = gaps.recorded_gaps(tr)
    a, b = clock.schedule(tr), clock.schedule(timed)
    gap = timed.requests[gaps.GAP_COLUMN].to_numpy()
    assert np.isfinite(gap).any()
    pd.testing.assert_series_equal(a.t_obs_s, b.t_obs_s)  # observation prefills stay TTFT_ref
    last = ~timed.requests.duplicated("agent_id", keep="last").to_numpy()
    moved = (a.t_tools_s.to_numpy() != b.t_tools_s.to_numpy()) | (a.t_user_s.to_numpy() != b.t_user_s.to_numpy())
    prev_gap = np.r_[np.nan, gap[:-1]]
    assert not (moved & ~np.isfinite(gap) & ~np.isfinite(prev_gap)).any()  # no recorded gap: the draw as before
    assert (b.t_tools_s.to_numpy()[np.isfinite(gap) & ~last] <= gap[np.isfinite(gap) & ~last] + 1e-9).all()
    untimed = read_trace(MULTI)
    assert gaps.recorded_gaps(untimed) is untimed  # no times: the reference clock


def _no_reasoning(tr: Trace) -> Trace:
    return Trace.from_frames(tr.requests.assign(reasoning_tokens=0), tr.spawns, tr.source, tr.tool_class_of)


def test_reasoning_added_where_none_is_recorded_and_stripped_at_the_turn_end() -> None:
    tr = _no_reasoning(read_trace(SINGLE))
    add = gaps.add_reasoning(tr, 1.0)
    r0, r1 = tr.requests, add.requests
    assert (r1.reasoning_tokens == r0.output_tokens).all() and (r1.output_tokens == 2 * r0.output_tokens).all()
    first = ~r0.duplicated(["session_id", "turn"]).to_numpy()
    assert (r1.input_tokens.to_numpy()[first] == r0.input_tokens.to_numpy()[first]).all()  # stripped: as recorded
    assert (r1.input_tokens.to_numpy()[~first] >= r0.input_tokens.to_numpy()[~first]).all()
    assert (r1.matched_prefix_tokens.to_numpy()[first] <= r0.matched_prefix_tokens.to_numpy()[first]).all()
    # the turn's written KV dies at the turn end: more laden and fewer long-lived tokens than without
    s0, s1 = segments.recover(tr).segments, segments.recover(add).segments
    laden = lambda s: s[s.seg_class == "reasoning_laden"].tokens_written.sum()  # noqa: E731
    assert laden(s1) > laden(s0)
    # a trace that records reasoning, and multi-agent sessions, are left as they are
    assert gaps.add_reasoning(read_trace(SINGLE), 1.0).requests.equals(read_trace(SINGLE).requests)
    assert gaps.add_reasoning(read_trace(MULTI), 1.0).requests.equals(read_trace(MULTI).requests)


# ------------------------------------------------------------------------------------------------
# Refusals and stated degenerate results
# ------------------------------------------------------------------------------------------------


def test_missing_trace_is_one_line(capsys, tmp_path) -> None:
    line = one_error_line(capsys, ["evaluate", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert "nope" in line


def test_contract_violation_names_file_line_and_field(capsys, tmp_path) -> None:
    d = tmp_path / "bad"
    d.mkdir()
    rows = [json.loads(x) for x in (MULTI / "requests.jsonl").read_text().splitlines()]
    rows[3]["matched_prefix_tokens"] = rows[3]["input_tokens"] + 1
    (d / "requests.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (d / "spawns.jsonl").write_text((MULTI / "spawns.jsonl").read_text())
    line = one_error_line(capsys, ["evaluate", str(d), "--out", str(tmp_path / "o"), *CI])
    assert "requests.jsonl" in line and "line 4" in line and "matched_prefix_tokens" in line


def test_think_time_from_a_trace_without_times_is_refused(capsys, tmp_path) -> None:
    line = one_error_line(capsys, ["evaluate", str(MULTI), "--out", str(tmp_path), "--think-time", "trace", *CI])
    assert str(MULTI) in line and "t_start" in line


def test_trace_too_small_to_reach_the_load_is_refused(capsys, tmp_path) -> None:
    argv = ["evaluate", str(SINGLE), "--out", str(tmp_path), *CI[:-4], "--sessions", "0", "--jobs", "1",
            "--policies", "hbm_first,lachesis"]
    line = one_error_line(capsys, argv)
    assert "too small to reach the load" in line and "6 sessions" in line and str(SINGLE) in line
    assert not (tmp_path / "single.csv").exists()


def test_no_workers_is_a_stated_degenerate_result() -> None:
    tr = read_trace(MULTI)
    r = tr.requests
    lead_only = Trace.from_frames(r[r.role == "lead"].assign(tool_names=[[]] * int((r.role == "lead").sum())),
                                  None, "lead-only")
    _, notes = verdict.assumptions(lead_only)
    assert any("no workers" in n and "degenerate" in n for n in notes)
    pts = verdict.points("x", lead_only, ["Qwen3-235B-A22B"], ["tight"], ["1/7"], "one_gpu", [0], None, {}, "x")
    assert "deterministic" not in {p.policy for p in pts} and "lachesis" in {p.policy for p in pts}


def test_too_few_sessions_with_workers_leave_workers_unranked() -> None:
    tr = read_trace(MULTI)
    keep = pd.unique(tr.requests.session_id)[:3]
    small = Trace.from_frames(tr.requests[tr.requests.session_id.isin(keep)],
                              tr.spawns[tr.spawns.session_id.isin(keep)], "three sessions")
    keys = ranker.rank_keys(small, segments.recover(small))
    assert len(keys) and keys.isna().all()
    _, notes = verdict.assumptions(small)
    assert any("unranked" in n for n in notes)


# ------------------------------------------------------------------------------------------------
# Sensitivity rows: each named assumption moved one at a time
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multi_sensitivity(multi_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sensitivity")
    assert main(["evaluate", str(MULTI), "--out", str(out), "--cache-dir", str(multi_run / "cache"), *CI,
                 "--sensitivity"]) == 0
    return out


def test_sensitivity_has_the_default_row_first_then_one_row_per_knob_value(multi_sensitivity) -> None:
    s = pd.read_csv(multi_sensitivity / "multi_sensitivity.csv", dtype={"value": str})
    assert list(s.columns) == list(verdict.SENSITIVITY_COLUMNS)
    assert s.knob.iloc[0] == "default" and (s.knob == "default").sum() == 1
    assert s.value.iloc[0] == "sessions=16; think_time=reference; reasoning_per_output=0"
    assert list(zip(s.knob, s.value))[1:] == [("sessions", "64"), ("sessions", "1024"), ("think_time", "trace"),
                                              ("reasoning_per_output", "0.5"), ("reasoning_per_output", "2"),
                                              ("ranker", verdict.NO_RANKER)]
    assert (s.memory == "1/7").all() and set(s.model) == {"Qwen3-235B-A22B"} and set(s.slo) == {"tight"}
    # the default row is the evaluation's own cell (the same cache)
    t = pd.read_csv(multi_sensitivity / "multi.csv")
    hf, la = t[t.policy == "hbm_first"].iloc[0], t[t.policy == "lachesis"].iloc[0]
    d = s.iloc[0]
    assert d.n_sessions == hf.n_sessions and d.lachesis_years == pytest.approx(la.lifetime_years, rel=1e-9)
    assert d.over_hbm_first == pytest.approx(la.over_hbm_first, rel=1e-9) and d.slo_met == la.slo_met
    # a knob the trace cannot take is a row with its reason and no numbers, not a dropped row
    na = s[s.note.fillna("").str.startswith("not applicable")]
    assert set(na.knob) == {"think_time",
                            "reasoning_per_output"} and na[["n_sessions", "lachesis_years"]].isna().all().all()
    assert "t_start" in na[na.knob == "think_time"].note.iloc[0]
    ran = s[s.knob.isin(["sessions", "ranker"])]
    assert np.isfinite(ran[["n_sessions", "hbm_first_years", "lachesis_years", "over_hbm_first"]].to_numpy()).all()
    # the ranker's row is Lachesis w/o predictive path at the default load
    w = s[s.knob == "ranker"].iloc[0]
    assert w.n_sessions == d.n_sessions and w.lachesis_years == pytest.approx(
        t[t.policy == "deterministic"].lifetime_years.iloc[0], rel=1e-9)
    assert not [p for p in multi_sensitivity.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]


def test_sensitivity_is_seeded_and_reproducible(tmp_path) -> None:
    kw = dict(model="Qwen3-235B-A22B", configs=["1/7"], node="one_gpu", search="ci", sessions=16, n_jobs=1,
              progress=False, values=dict(sessions=(24,)))
    a = verdict.assumption_sensitivity(MULTI, cache_dir=tmp_path / "a", **kw).table
    b = verdict.assumption_sensitivity(MULTI, cache_dir=tmp_path / "b", **kw).table
    pd.testing.assert_frame_equal(a, b)
    assert a[a.knob == "sessions"].n_sessions.iloc[0] != a.n_sessions.iloc[0]  # a bigger pool, its own load


def _spy(monkeypatch) -> list[dict]:
    """The evaluations :func:`verdict.assumption_sensitivity` asks for, each answered by a stub table."""
    calls: list[dict] = []

    def fake(trace_dir, *, sessions, think_time, reasoning_per_output, policies, configs, **_):
        calls.append(dict(sessions=sessions, think_time=think_time, reasoning_per_output=reasoning_per_output,
                          policies=tuple(policies)))
        t = pd.DataFrame([dict(memory=m, policy=p, n_sessions=1.0, lifetime_years=1.0, over_hbm_first=1.0,
                               slo_met=True) for m in configs for p in policies])
        return verdict.Verdict(t, t, [])

    monkeypatch.setattr(verdict, "evaluate", fake)
    return calls


def test_each_sensitivity_row_moves_one_knob_from_the_defaults(monkeypatch, tmp_path) -> None:
    bare = tmp_path / "bare"  # the single-agent fixture without its reasoning: every knob applies but the ranker
    write_trace(_no_reasoning(read_trace(SINGLE)), bare)
    calls = _spy(monkeypatch)
    s = verdict.assumption_sensitivity(bare, configs=["1/7", "4/4"], sessions=16, progress=False).table
    knobs_ = ("sessions", "think_time", "reasoning_per_output")
    base = calls[0]
    assert (base["sessions"], base["think_time"], base["reasoning_per_output"]) == (16, "trace", 0.0)
    assert base["policies"] == ("hbm_first", "lachesis")  # no workers: no ranker row to run
    moved = [[k for k in knobs_ if c[k] != base[k]] for c in calls[1:]]
    assert moved == [["sessions"], ["sessions"], ["think_time"], ["reasoning_per_output"], ["reasoning_per_output"]]
    assert [c["sessions"] for c in calls[1:3]] == [64, 1024] and calls[3]["think_time"] == "reference"
    assert len(s) == 2 * (1 + 5 + 1) and list(s.knob[:2]) == ["default", "default"]
    assert s[s.knob == "ranker"].note.str.contains("single-agent").all()
    assert s[s.knob != "ranker"].note.fillna("").eq("").all()


def test_sensitivity_knobs_that_change_nothing_say_why() -> None:
    multi, single = read_trace(MULTI), read_trace(SINGLE)
    assert "multi-agent" in gaps.not_applicable(multi, "reasoning_per_output", 0.5)
    assert "records reasoning" in gaps.not_applicable(single, "reasoning_per_output", 2.0)
    assert gaps.not_applicable(_no_reasoning(single), "reasoning_per_output", 0.5) == ""
    assert "t_start" in gaps.not_applicable(multi, "think_time", "trace")
    assert gaps.not_applicable(single, "think_time", "trace") == gaps.not_applicable(multi, "sessions", 64) == ""
    # the values tried are the knob's, without the evaluation's own setting
    assert verdict.tried("sessions", 512) == (64.0, 1024.0) and verdict.tried("sessions", 64) == (1024.0,)
    assert verdict.tried("think_time", "trace") == ("reference",)
    assert verdict.tried("reasoning_per_output", 0.5) == (0.0, 2.0)


# ------------------------------------------------------------------------------------------------
# Outputs one set, one writer; names; arrival traces; arguments checked; what the figure says
# ------------------------------------------------------------------------------------------------


def test_a_second_writer_of_the_same_files_is_refused_at_once(multi_run, capsys) -> None:
    """Two runs into one --out cannot interleave their CSV and figure: while one holds the name, another is refused
    in one line before it runs, and the files are the first's."""
    from lachesis import io

    before = {p.name: p.read_bytes() for p in multi_run.glob("multi.*")}
    with io.exclusive(multi_run / ".multi.lock", "test"):
        line = one_error_line(capsys, ["evaluate", str(MULTI), "--out", str(multi_run), *CI])
    assert "multi.csv/.png/.pdf" in line and f"pid {os.getpid()}" in line and "is writing it now" in line
    assert {p.name: p.read_bytes() for p in multi_run.glob("multi.*")} == before
    assert not (multi_run / ".multi.lock").exists()  # the holder removed it


def test_a_full_disk_leaves_the_previous_set_whole(multi_run, capsys, monkeypatch) -> None:
    """The figure fails to write after the table is written: no file of the set is replaced, nothing is left."""
    import errno

    from lachesis import plotting

    before = {p.name: p.read_bytes() for p in multi_run.glob("multi.*")}
    assert set(before) == {"multi.csv", "multi.png", "multi.pdf"}

    def full(fig, out_dir, stem):
        (Path(out_dir) / f"{stem}.png").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(out_dir) / f"{stem}.png"))

    monkeypatch.setattr(plotting, "save_figure", full)
    assert main(["evaluate", str(MULTI), "--out", str(multi_run), *CI]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.endswith(f"{multi_run / 'multi.png'}: No space left on device; no file of the set was replaced")
    assert {p.name: p.read_bytes() for p in multi_run.glob("multi.*")} == before
    assert not [p for p in multi_run.iterdir() if p.name.startswith(".")]


def test_name_labels_the_run_and_a_dotted_folder_keeps_its_name(multi_run, tmp_path, capsys) -> None:
    assert main(["evaluate", str(MULTI), "--out", str(tmp_path), "--name", "mine", *CI]) == 0
    capsys.readouterr()
    t = pd.read_csv(tmp_path / "mine.csv")
    assert set(t.trace) == {"mine"} and (tmp_path / "mine.png").exists() and not (tmp_path / "multi.csv").exists()
    assert verdict.run_name(tmp_path / "tau2-qwen3.5-justinchiu") == "tau2-qwen3.5-justinchiu"
    assert verdict.run_name(tmp_path / "x" / "mine.jsonl.gz") == grid.trace_name("a/mine.parquet") == "mine"
    for bad, why in (("../up", "expected a file name"), (".hidden", "expected a file name"),
                     ("multi_agent", "is a corpus workload's name")):
        line = one_error_line(capsys, ["evaluate", str(MULTI), "--out", str(tmp_path), "--name", bad, *CI])
        assert why in line, line


@pytest.mark.parametrize("adapter, fixture", [("mooncake", "mooncake_fast25"), ("azure", "azure_llm_2023")])
def test_an_arrival_trace_is_refused_with_what_it_lacks(tmp_path, capsys, adapter, fixture) -> None:
    from fixture_paths import TRACE_FIXTURES

    assert main(["adapt", adapter, str(TRACE_FIXTURES / fixture), "--out", str(tmp_path / adapter)]) == 0
    capsys.readouterr()
    line = one_error_line(capsys, ["evaluate", str(tmp_path / adapter), "--out", str(tmp_path / "o"), *CI])
    assert f"{adapter}'s tables (lachesis adapt {adapter}) are an arrival trace" in line
    assert "sessions, their agents and turns, the context segments" in line and "no requests" not in line


def test_repeated_names_run_once_and_a_text_list_is_split(multi_run, capsys) -> None:
    argv = ["evaluate", str(MULTI), "--out", str(multi_run), *CI]
    i = argv.index("--configs")
    argv[i + 1] = "1/7,1/7"
    argv[argv.index("--models") + 1] = "Qwen3-235B-A22B,Qwen3-235B-A22B"
    assert main(argv) == 0
    t = pd.read_csv(multi_run / "multi.csv")
    assert list(t.memory.unique()) == ["1/7"] and not t.duplicated(["model", "memory", "seed", "policy"]).any()
    v = lachesis.evaluate(MULTI, models="Qwen3-235B-A22B", slos="tight", configs="1/7", node="one_gpu", search="ci",
                          sessions=16, cache_dir=multi_run / "cache", n_jobs=1, progress=False)
    assert list(v.table.model.unique()) == ["Qwen3-235B-A22B"]


@pytest.mark.parametrize("kw, said", [
    (dict(sessions=2.5), "sessions: expected a whole number >= 0"), (dict(sessions=True), "got True"),
    (dict(sessions="512"), "got '512'"), (dict(sessions=-1), "got -1"),
    (dict(reasoning_per_output=True), "reasoning_per_output: expected a number"),
    (dict(reasoning_per_output=float("nan")), "knob 'reasoning_per_output': expected a finite number"),
    (dict(models=[1]), "models: expected names"), (dict(name=""), "name: expected a file name")])
def test_the_python_function_refuses_a_wrong_kind_of_argument(tmp_path, kw, said) -> None:
    with pytest.raises(ValueError, match=said):
        lachesis.evaluate(MULTI, tmp_path, **kw)
    assert not list(tmp_path.iterdir())


def test_a_run_without_lachesis_says_so_and_the_figure_names_what_ran(multi_run) -> None:
    v = lachesis.evaluate(MULTI, models=["Qwen3-235B-A22B"], slos=["tight"], configs=["1/7"], node="one_gpu",
                          search="ci", sessions=16, policies=["hbm_first"], cache_dir=multi_run / "cache", n_jobs=1,
                          progress=False)
    text = "\n".join(v.lines())
    assert "nan" not in text and "no Lachesis run (policies: hbm_first)" in text and "Lachesis not run" in text
    assert v.caption == "node one_gpu (1 GPU), ci windows (lifetime 0.1 + 0.4 mean sessions), 16 sessions drawn, seed 0"
    fig = verdict.figure(v.rows, ["Qwen3-235B-A22B"], ["tight"], "multi", v.caption)
    title = next(t for t in (" ".join(a.get_title(loc="left").split()) for a in fig.axes) if t)  # the panel's
    assert title.startswith("multi: Qwen3-235B-A22B, tight SLO node one_gpu") and "SLO missed by 0 of 1 policy" in title


def test_a_placement_that_misses_the_slo_at_a_seed_is_said_as_a_miss_never_a_lifetime() -> None:
    """The summary line of ``lachesis evaluate`` (docs/design.md §5, "Load"): a placement over its SLO at any seed
    is counted as a miss in place of its lifetime, and no Lachesis/HBM-first ratio is printed against a baseline
    that missed."""
    def table(met: dict[tuple[str, int], bool]) -> pd.DataFrame:
        return pd.DataFrame([dict(model="Qwen3-235B-A22B", slo="tight", memory="1/7", seed=s, policy=p,
                                  n_sessions=40.0, lifetime_years=2.0 if p == "hbm_first" else 3.0,
                                  hbm_over_live_short=0.5, slo_met=ok) for (p, s), ok in met.items()])

    both = {(p, s): True for p in ("hbm_first", "lachesis") for s in (0, 1)}
    (line,) = verdict.Verdict(table(both), table(both), []).lines()
    assert "HBM-first 2 y, Lachesis 3 y, Lachesis/HBM-first 1.5x" in line and "misses" not in line
    t = table({**both, ("hbm_first", 1): False})
    (line,) = verdict.Verdict(t, t, []).lines()
    assert "HBM-first misses the SLO at 1 of 2 seeds, Lachesis 3 y, HBM" in line and "HBM-first 2 y" not in line
    t = table({**both, ("lachesis", 0): False, ("lachesis", 1): False})
    (line,) = verdict.Verdict(t, t, []).lines()
    assert "HBM-first 2 y, Lachesis misses the SLO at 2 of 2 seeds, HBM" in line and "x," not in line
