"""Parameters checked by name and type before anything runs: a misspelled params-file key, a value
not of the type the notebook declares, a ``-p`` override, and ``papermill -p`` straight into a notebook."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import yaml

from lachesis import reproduce
from lachesis.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, params: str, body: str = "print('ran')") -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell(
        "from lachesis.reproduce import check_parameters; check_parameters(globals())\n" + body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture()
def project(tmp_path) -> Path:
    nbs = tmp_path / "notebooks"
    (nbs / "params").mkdir(parents=True)
    _notebook(nbs / "grid.ipynb", 'seeds: str = "0,1"\nscale: float = 0.05\nn_jobs: int = 2\nfast: bool = True')
    _notebook(nbs / "table.ipynb", 'scale: float = 0.05\nout_dir: str = "build"')
    return tmp_path


def _run(project: Path, spec: dict, capsys, *extra: str) -> str:
    p = project / "notebooks" / "params" / "p.yaml"
    p.write_text(yaml.safe_dump(spec))
    assert main(["reproduce", "--params", str(p), "--no-fetch", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    return err[0]


@pytest.mark.parametrize("spec, words", [
    ({"notebooks": {"table": {"scael": 0.02}}}, ["p.yaml", "notebooks: table:", "'scael'", "did you mean 'scale'"]),
    ({"common": {"scael": 0.02}}, ["p.yaml", "common:", "'scael' is a parameter of no notebook", "'scale'"]),
    ({"comon": {"scale": 0.02}}, ["p.yaml", "unknown top-level key 'comon'"]),
    ({"notebooks": {"grid": {"seeds": 0}}}, ["notebooks: grid: seeds: expected str, got int 0", "notebook grid"]),
    ({"common": {"scale": "big"}}, ["common: scale: expected float, got str 'big'"]),
    ({"notebooks": {"grid": {"n_jobs": 1.5}}}, ["grid: n_jobs: expected int, got float 1.5"]),
    ({"notebooks": {"grid": {"fast": "yes"}}}, ["grid: fast: expected bool, got str 'yes'"]),
    ({"notebooks": {"grid": {"n_jobs": True}}}, ["grid: n_jobs: expected int, got bool True"]),
])
def test_params_file_refused_by_key_and_type_before_running(project, capsys, monkeypatch, spec, words) -> None:
    import papermill as pm

    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    err = _run(project, spec, capsys)
    assert all(w in err for w in words), err


@pytest.mark.parametrize("argv, words", [
    (["-p", "scael", "1"], ["-p scael: a parameter of none of the notebooks to run", "'scale'"]),
    (["-p", "n_jobs", "two"], ["-p n_jobs: expected int, got 'two'", "notebook grid"]),
    (["-p", "fast", "maybe"], ["-p fast: expected bool"]),
    (["--only", "table", "-p", "seeds", "0"], ["-p seeds: a parameter of none of the notebooks to run (table)"]),
])
def test_p_overrides_refused_by_name_and_type(project, capsys, monkeypatch, argv, words) -> None:
    import papermill as pm

    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    err = _run(project, {}, capsys, *argv)
    assert all(w in err for w in words), err


def test_valid_params_and_p_overrides_typed_by_the_declaration(project) -> None:
    p = project / "notebooks" / "params" / "ok.yaml"
    p.write_text(yaml.safe_dump({"common": {"scale": 1}, "notebooks": {"grid": {"seeds": "0,1,2"}}}))
    got = dict((n, v) for n, _, v in reproduce.plan(p, overrides=[("seeds", "0"), ("n_jobs", "1"), ("fast", "false")]))
    assert got == {"grid": {"scale": 1, "seeds": "0", "n_jobs": 1, "fast": False}, "table": {"scale": 1}}


def test_the_paper_and_ci_params_pass_the_check() -> None:
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    for name in ("paper", "ci"):  # every notebook, each once
        planned = [n for n, _, _ in reproduce.plan(ROOT / "notebooks" / "params" / f"{name}.yaml")]
        assert sorted(planned) == sorted(notebooks)


def test_every_notebook_checks_its_parameters_first() -> None:
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
        nxt = next(c for c in nb.cells[i + 1:] if c.cell_type == "code")
        assert nxt.source.startswith("from lachesis.reproduce import check_parameters; check_parameters(globals())"), path


def test_check_parameters_names_the_parameter_and_type() -> None:
    ns = {"__annotations__": {"seeds": "str", "scale": float, "n": "int"}, "seeds": 0, "scale": 1, "n": 3}
    with pytest.raises(TypeError, match=r"parameter seeds: expected str, got int 0 .*-r"):
        reproduce.check_parameters(ns)
    ns["seeds"] = "0"
    reproduce.check_parameters(ns)  # an int fits a float


def test_papermill_p_with_the_wrong_type_stops_at_the_check(tmp_path) -> None:
    import papermill as pm

    src = tmp_path / "nb.ipynb"
    _notebook(src, 'seeds: str = "0,1"', "raise AssertionError('ran past the check')")
    with pytest.raises(pm.PapermillExecutionError, match="parameter seeds: expected str, got int 0"):
        pm.execute_notebook(str(src), str(tmp_path / "out.ipynb"), parameters={"seeds": 0}, progress_bar=False,
                            kernel_name="python3", cwd=str(ROOT))


# ------------------------------------------------------------------------------------------------
# Choice parameters: an unknown choice is refused with one line naming the parameter
# ------------------------------------------------------------------------------------------------

GRID_NOTEBOOKS = ("fig09_fig10_multi_agent", "fig11_fig12_single_agent", "gain_vs_load", "sensitivity")


@pytest.mark.parametrize("key, value, words", [
    ("search", "bogus", "parameter search: unknown choice 'bogus'; expected one of paper, ci"),
    ("node", "two_gpus", "parameter node: unknown choice 'two_gpus'; expected one of paper, one_gpu"),
    ("load", "baseline", "parameter load: unknown choice 'baseline'"),
    ("load_base", "8/8*", "parameter load_base: unknown choice '8/8\\*'"),
    ("configs", "1/7, 5/3", "parameter configs: unknown choice '5/3'; expected a comma-separated list of"),
    ("policies", "hbm_first,lachesis:size_estimate=spawn,lru", "parameter policies: unknown choice 'lru'"),
    ("lifetime_over_ranks", "max", "parameter lifetime_over_ranks: unknown choice 'max'"),
])
def test_an_unknown_choice_is_refused_naming_the_parameter(key, value, words) -> None:
    with pytest.raises(ValueError, match=words):
        reproduce.check_parameters({"__annotations__": {key: "str"}, key: value})


def test_choices_are_refused_before_anything_runs_and_defaults_pass() -> None:
    for name in GRID_NOTEBOOKS:  # every grid notebook's declared defaults are valid choices
        params = reproduce.notebook_parameters(ROOT / "notebooks" / f"{name}.ipynb")
        assert {"node", "search"} <= set(params), name
    with pytest.raises(ValueError, match=r"-p search: unknown choice 'bogus'.*\(notebook "):
        reproduce.plan(ROOT / "notebooks" / "params" / "ci.yaml", only=["gain_vs_load"], overrides=[("search", "bogus")])
    ok = reproduce.plan(ROOT / "notebooks" / "params" / "ci.yaml", only=["gain_vs_load"], overrides=[("node", "paper")])
    assert ok[0][2]["node"] == "paper"
    reproduce.check_parameters({"__annotations__": {"configs": "str", "knobs": "str"}, "configs": "", "knobs": ""})


def test_every_grid_parameter_has_a_help_comment() -> None:
    import papermill as pm

    for name in GRID_NOTEBOOKS:
        for key, info in pm.inspect_notebook(str(ROOT / "notebooks" / f"{name}.ipynb")).items():
            assert info["help"].strip(), f"{name}: parameter {key} has no help comment"
            if key in reproduce.parameter_choices():
                choices, _ = reproduce.parameter_choices()[key]
                assert any(c in info["help"] for c in choices) or "lachesis." in info["help"], (name, key)


@pytest.mark.parametrize("key, value", [("seed", -1), ("scale", 0.0), ("scale", -0.5)])
def test_a_numeric_parameter_out_of_range_is_named(key, value):
    """`papermill -p seed -1` is refused naming the parameter, before the grid runs."""
    from lachesis.reproduce import check_parameters

    ann = "int" if key == "seed" else "float"
    with pytest.raises(ValueError, match=f"parameter {key}: must be"):
        check_parameters({"__annotations__": {key: ann}, key: value})


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
        text = (ROOT / "notebooks" / f"{nb}.ipynb").read_text(encoding="utf-8")
        assert "grid.on_trace(points, trace)" in text and "replace(p, trace=trace)" not in text, nb


@pytest.mark.parametrize("argv, words", [
    (["--configs", "9/9"], "memory '9/9' is not one of"),
    (["--models", "GPT-5"], "model 'GPT-5' is not one of"),
    (["--slos", "tight,lax"], "slo 'lax' is not one of"),
])
def test_group_node_refuses_an_unknown_cell_in_one_line(argv, words, capsys) -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("group_node", ROOT / "benchmarks" / "group_node.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert mod.main([*argv, "--no-record"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("group_node.py: error: grid point: ") and words in err[0], err
