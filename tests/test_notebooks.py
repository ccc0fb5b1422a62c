"""Source notebooks: a parseable `parameters` cell, small defaults, a params entry, and one output check.

Each source carries exactly one output: that of its cell marked ``# NBVAL_CHECK_OUTPUT`` (key numbers at
its small defaults), which ``make test`` compares through nbval; every other cell is committed empty.
"""

from pathlib import Path

import nbformat
import papermill as pm
import pytest
import yaml

from lachesis.kernel import CHECK_MARK, check_cells

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))


def _parameters_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged `parameters`"
    return cells[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_source_notebook_is_clean_and_parameterized(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown", "opens with a markdown lead"
    marked = check_cells(nb)
    others = [c for i, c in enumerate(nb.cells) if c.cell_type == "code" and i not in marked]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in others), \
        "source notebooks are committed without outputs, except their output check"
    assert len(marked) == 1, f"exactly one cell marked {CHECK_MARK!r}"
    check = nb.cells[marked[0]]
    assert check.execution_count and [o.output_type for o in check.outputs] == ["stream"], \
        "the check cell stores its expected output (lachesis reproduce --refresh-checks)"
    assert check.outputs[0].name == "stdout" and check.outputs[0].text.strip()
    cell = _parameters_cell(nb)
    assigned = {ln.split(":")[0].split("=")[0].strip() for ln in cell.source.splitlines()
                if ln and not ln.lstrip().startswith("#") and "=" in ln.split("#")[0]}
    declared = set(pm.inspect_notebook(str(path)))
    assert assigned == declared, f"papermill must see every parameter (unparsed: {assigned - declared})"
    assert "out_dir" in declared, "every notebook writes into a parameterized out_dir"
    defaults = pm.inspect_notebook(str(path))
    if "scale" in defaults:
        assert float(defaults["scale"]["default"]) <= 0.25, "CI-sized default scale"
    assert defaults["out_dir"]["default"].strip("\"'").startswith("build/"), \
        "small runs never overwrite figures/ (paths are relative to the repository root)"
    for name, p in defaults.items():
        assert "../" not in p["default"], f"{name}: paths resolve from the repository root (lachesis.paths)"


@pytest.mark.parametrize("params_file", ["paper.yaml", "ci.yaml"])
def test_params_files_name_real_notebooks_and_parameters(params_file: str) -> None:
    spec = yaml.safe_load((NB_DIR / "params" / params_file).read_text())
    stems = {p.stem for p in NOTEBOOKS}
    for name, params in (spec.get("notebooks") or {}).items():
        assert name in stems, f"paper.yaml names unknown notebook {name!r}"
        declared = set(pm.inspect_notebook(str(NB_DIR / f"{name}.ipynb")))
        assert set(params or {}) <= declared, f"{name}: {set(params) - declared} not declared in its parameters cell"
    assert spec["common"]["out_dir"] == ("figures" if params_file == "paper.yaml" else "build/figures")
    assert spec["order"] == yaml.safe_load((NB_DIR / "params" / "paper.yaml").read_text())["order"]


@pytest.mark.slow
def test_the_real_trace_notebook_finishes_and_names_every_source_when_none_is_available(tmp_path, monkeypatch) -> None:
    """A clone with no download and no offline copy: the notebook runs to its end (what `make reproduce`
    shows a new user) and writes the list of missing sources."""
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "empty-cache"))
    out = tmp_path / "figs"
    pm.execute_notebook(str(NB_DIR / "real_traces.ipynb"), str(tmp_path / "run.ipynb"), cwd=str(tmp_path),
                        parameters={"data": "", "out_dir": str(out)}, progress_bar=False, kernel_name="python3")
    missing = yaml.safe_load((out / "real_traces" / "missing_sources.json").read_text())
    assert len(missing["missing_sources"] if isinstance(missing, dict) else missing) >= 8
    assert sorted(p.name for p in (out / "real_traces").iterdir()) == ["missing_sources.json"]  # nothing else touched


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_leave_the_backend_to_the_environment(path: Path) -> None:
    """A notebook never picks a matplotlib backend (``matplotlib.use``): under a Jupyter kernel that turns off
    inline figures; headless runs set ``MPLBACKEND`` (notebooks/conftest.py checks each shows a figure)."""
    nb = nbformat.read(path, as_version=4)
    assert not any("matplotlib.use(" in c.source or "%matplotlib" in c.source for c in nb.cells)


#: Notebooks whose cells the lead fixes (grid notebooks' owners): remove a name once its cells end in ``;``.
def test_no_cell_echoes_the_paths_a_save_returns() -> None:
    """A cell ending in ``save_figure(...)``/``save_numbers(...)`` shows ``[PosixPath(...)]`` above its figure."""
    import ast
    import json
    from pathlib import Path

    bad = []
    for nb in sorted(Path(__file__).resolve().parents[1].joinpath("notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            body = ast.parse(src).body
            last = body[-1] if body else None
            if isinstance(last, ast.Expr) and not src.rstrip().endswith(";") and isinstance(last.value, ast.Call) \
                    and ast.unparse(last.value.func).startswith("save_"):
                bad.append(f"{nb.name} cell {i}")
    assert not bad, bad
