"""The grid's vocabulary (lachesis.evaluation.grid): a run on a trace labelled with the trace, and an unknown cell
refused in one line (benchmarks/group_node.py)."""

from __future__ import annotations

import pytest
from fixture_paths import REPO


def test_a_run_on_a_trace_is_labelled_with_the_trace_not_a_corpus_workload(tmp_path) -> None:
    """A point whose workload names the corpus while it replays a trace is refused; the grids on a trace label
    every point with the trace's name (the figures' panels and rows then say what ran)."""
    from dataclasses import replace

    from lachesis.evaluation import grid

    trace = str(tmp_path / "my_trace")
    p = grid.multi_agent_grid(0.05, 0, configs=("1/7",), models=("Llama-4-Maverick",), slos=("tight",))[0]
    with pytest.raises(ValueError, match=r"workload 'multi_agent' labels a run on trace .*my_trace.*'my_trace'"):
        replace(p, trace=trace)
    pts = grid.single_agent_grid(0.05, 0, configs=("1/7",), models=("Qwen3-235B-A22B",), policies=("hbm_first",))
    assert {q.workload for q in pts} == {"tau3", "bfcl"}
    on = grid.on_trace(pts, trace)
    assert [(q.workload, q.trace) for q in on] == [("my_trace", trace)]  # one run, not the trace twice as tau3 and bfcl
    for nb in ("fig09_fig10_multi_agent", "fig11_fig12_single_agent", "gain_vs_load"):
        text = (REPO / "notebooks" / f"{nb}.ipynb").read_text(encoding="utf-8")
        assert "grid.on_trace(points, trace)" in text and "replace(p, trace=trace)" not in text, nb


@pytest.mark.parametrize("argv, words", [
    (["--configs", "9/9"], "memory '9/9' is not one of"),
    (["--models", "GPT-5"], "model 'GPT-5' is not one of"),
    (["--slos", "tight,lax"], "slo 'lax' is not one of"),
])
def test_group_node_refuses_an_unknown_cell_in_one_line(argv, words, capsys) -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("group_node", REPO / "benchmarks" / "group_node.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert mod.main([*argv, "--no-record"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("group_node.py: error: grid point: ") and words in err[0], err
    for jobs in ("0", "-1", "two"):  # no worker at all is refused, not run
        with pytest.raises(SystemExit) as e:
            mod.main(["--jobs", jobs, "--no-record"])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and err == ["group_node.py: error: argument --jobs: " + (
            f"must be >= 1, got {jobs!r}" if jobs != "two" else "expected a whole number >= 1, got 'two'")], err


def test_a_run_on_a_trace_may_carry_a_name_of_its_own_and_a_spec_may_not_contradict_its_overrides(tmp_path) -> None:
    """``lachesis evaluate --name``: a label no corpus workload has names the run; a dotted folder keeps its whole
    name.  A policy knob set both in the spec and in the overrides to other values is refused (the label would
    name the override while the spec's value ran)."""
    from lachesis.evaluation import grid

    trace = str(tmp_path / "tau2-qwen3.5-justinchiu")
    p = grid.Point("mine", "1/7", "Llama-4-Maverick", "tight", "lachesis", trace=trace)
    assert p.label().startswith("mine ")
    assert [q.workload for q in grid.on_trace([p], trace)] == ["tau2-qwen3.5-justinchiu"]
    for bad in ("tau3", " "):
        with pytest.raises(ValueError, match="a name of its own that no corpus workload has"):
            grid.Point(bad, "1/7", "Llama-4-Maverick", "tight", "lachesis", trace=trace)
    with pytest.raises(ValueError, match="knob 'size_estimate' is 'spawn' in the spec but 'mean_floor'"):
        grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis:size_estimate=spawn",
                   overrides={"size_estimate": "mean_floor"})
    same = grid.Point("multi_agent", "1/7", "Llama-4-Maverick", "tight", "lachesis:size_estimate=spawn",
                      overrides={"size_estimate": "spawn"})
    assert same.run_policy() == "lachesis:size_estimate=spawn"
