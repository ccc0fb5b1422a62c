"""``lachesis reproduce`` on a throw-away project of tiny notebooks: progress, failures, missing sources, an interrupted
run; parameters checked by name, type and choice before anything runs (the params file, ``-p``, and each notebook's
``notebook_setup``)."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import nbformat
import pytest
import yaml
from fixture_paths import REPO

from lachesis import pages, parameters, provenance, reproduce
from lachesis.cli import main


def _notebook(path: Path, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('out_dir: str = "build/figures"\nseed: int = 0')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# test"), params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    nbs = root / "notebooks"
    (nbs / "params").mkdir(parents=True)
    _notebook(nbs / "a_ok.ipynb", 'print("hello from a", seed)\nimport sys; print("progress 1/2", file=sys.stderr)')
    _notebook(nbs / "b_fails.ipynb", 'raise ValueError("the table is\\nnot there")')
    _notebook(nbs / "real_traces.ipynb",
              "import json, pathlib\n"
              "d = pathlib.Path(out_dir) / 'real_traces'; d.mkdir(parents=True, exist_ok=True)\n"
              "(d / 'missing_sources.json').write_text(json.dumps(['claude_code_more', 'who_and_when']))")
    (nbs / "params" / "p.yaml").write_text(yaml.safe_dump({"common": {"seed": 7, "out_dir": "out"}}))
    return root


@pytest.fixture(scope="module")
def full_run(project) -> tuple[int, str]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["reproduce", "--params", str(project / "notebooks" / "params" / "p.yaml")])
    return rc, buf.getvalue()


@pytest.mark.slow
def test_every_notebook_runs_and_the_failure_is_summarized(full_run) -> None:
    rc, out = full_run
    assert rc == 1
    assert "reproduce: 2 notebook(s) ran, 1 failed, 2 real-trace source(s) missing" in out
    assert "  FAILED  b_fails: ValueError: the table is not there" in out  # the error's last line, folded
    assert "  ran     real_traces (" in out  # the failure did not stop the notebooks after it


@pytest.mark.slow
def test_progress_is_visible(full_run) -> None:
    _, out = full_run
    assert "[reproduce 1/3] a_ok started  {'out_dir': 'out', 'seed': 7}" in out  # only declared parameters
    assert "[reproduce 1/3] a_ok done in " in out and "[reproduce 2/3] b_fails FAILED after " in out
    assert "  [a_ok] hello from a 7" in out and "  [a_ok] progress 1/2" in out  # streamed from the kernel


@pytest.mark.slow
def test_missing_sources_name_the_fetch_command(full_run) -> None:
    _, out = full_run
    assert "  missing claude_code_more, who_and_when" in out
    assert "lachesis datasets fetch claude_code_more who_and_when" in out


def test_only_runs_the_named_notebooks(project, capsys) -> None:
    assert main(["reproduce", "--params", str(project / "notebooks/params/p.yaml"), "--only", "a_ok"]) == 0
    out = capsys.readouterr().out
    assert "reproduce: 1 notebook(s) ran, 0 failed, 0 real-trace source(s) missing" in out


@pytest.mark.parametrize("spec, words", [
    ({"order": ["a_ok", "nope"]}, "order: names no notebook 'nope'; valid names: a_ok, b_fails, real_traces"),
    ({"notebooks": {"zzz": {}}}, "notebooks: names no notebook 'zzz'"),
])
def test_params_naming_unknown_notebooks_fail_before_running(project, tmp_path, capsys, spec, words) -> None:
    p = project / "notebooks" / "params" / f"bad{len(words)}.yaml"
    p.write_text(yaml.safe_dump(spec))
    assert main(["reproduce", "--params", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_missing_sources_file_of_an_earlier_run_is_ignored(tmp_path, monkeypatch) -> None:
    f = tmp_path / reproduce.MISSING_SOURCES_FILE
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"missing_sources": ["x"]}))
    assert reproduce.missing_sources(tmp_path, since=0.0) == ["x"]
    import lachesis.traces.datasets

    monkeypatch.setattr(lachesis.traces.datasets, "missing_sources", lambda names=None, local=None: ["from_registry"],
                        raising=False)
    assert reproduce.missing_sources(tmp_path, since=f.stat().st_mtime + 10) == ["from_registry"]
    f.write_text(json.dumps({"missing_sources": [3]}))
    with pytest.raises(ValueError, match="expected a list of dataset names"):
        reproduce.missing_sources(tmp_path, since=0.0)


def test_prefixed_stream_marks_every_line() -> None:
    import io

    buf = io.StringIO()
    w = reproduce._Prefixed(buf, "> ")
    w.write("a\nb")
    w.write("c\r 50%\r100%\n")
    assert buf.getvalue() == "> a\n> bc\r>  50%\r> 100%\n"


def test_an_order_runs_its_names_first_and_never_skips_the_rest(project) -> None:
    p = project / "notebooks" / "params" / "ordered.yaml"
    p.write_text(yaml.safe_dump({"order": ["real_traces", "b_fails"]}))
    assert [name for name, _, _ in parameters.plan(p)] == ["real_traces", "b_fails", "a_ok"]


def _lanes_project(tmp_path: Path, beside: list[str]) -> Path:
    nbs = tmp_path / "notebooks"
    (nbs / "params").mkdir(parents=True)
    for name in ("grid_a", "grid_b", "plot_c", "plot_d"):
        _notebook(nbs / f"{name}.ipynb", "pass")
    p = nbs / "params" / "p.yaml"
    p.write_text(yaml.safe_dump({"order": ["grid_a", "grid_b", "plot_c", "plot_d"], "beside": beside,
                                 "common": {"out_dir": "out"}}))
    return p


@pytest.fixture()
def no_pages(monkeypatch) -> None:
    monkeypatch.setattr(reproduce._Run, "write_pages", lambda self, name, params: None)
    monkeypatch.setattr(pages, "write_index", lambda *a: [])
    monkeypatch.setattr(reproduce.glance, "write", lambda figures: None)
    monkeypatch.setattr(provenance, "write_environment", lambda *a: None)
    monkeypatch.setattr(provenance, "write_run_record", lambda *a: None)


def test_the_notebooks_beside_run_in_a_second_lane_at_the_same_time(tmp_path, monkeypatch, no_pages) -> None:
    """Each lane keeps its order; a notebook of each lane runs at once (the barrier breaks if they do not meet);
    --serial runs all in one thread in the plan's order."""
    import papermill

    p = _lanes_project(tmp_path, ["plot_c", "plot_d"])
    meet = threading.Barrier(2, timeout=20)
    ran: list[tuple[str, str]] = []

    def execute(src, dest, **kw):
        name = Path(src).stem
        ran.append((name, threading.current_thread().name))
        if name in ("grid_a", "plot_c"):
            meet.wait()

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    result = reproduce.run_notebooks(p, log=io.StringIO(), fetch=False)
    assert [r[0] for r in result.ran] == ["grid_a", "grid_b", "plot_c", "plot_d"] and not result.failed
    lanes = {name: thread for name, thread in ran}
    assert lanes["grid_a"] == lanes["grid_b"] == threading.current_thread().name != lanes["plot_c"] == lanes["plot_d"]
    assert [n for n, _ in ran if n.startswith("plot")] == ["plot_c", "plot_d"]

    ran.clear()
    monkeypatch.setattr(papermill, "execute_notebook", lambda src, dest, **kw: ran.append((Path(src).stem, "")))
    reproduce.run_notebooks(p, log=io.StringIO(), fetch=False, serial=True)
    assert [n for n, _ in ran] == ["grid_a", "grid_b", "plot_c", "plot_d"]


def test_an_interrupt_stops_the_second_lane_after_its_notebook(tmp_path, monkeypatch, no_pages) -> None:
    """Ctrl-C in the main lane: the notebook beside finishes, the next one beside never starts, the interrupt
    reaches the caller."""
    import papermill

    p = _lanes_project(tmp_path, ["plot_c", "plot_d"])
    started = threading.Event()
    ran: list[str] = []

    def execute(src, dest, **kw):
        name = Path(src).stem
        ran.append(name)
        if name == "plot_c":
            started.set()
            time.sleep(0.2)
        if name == "grid_a":
            started.wait(20)
            raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        reproduce.run_notebooks(p, log=log, fetch=False)
    assert sorted(ran) == ["grid_a", "plot_c"]
    assert "[reproduce 3/4] plot_c done in " in log.getvalue()
    assert provenance.interrupted(tmp_path / "out") == ["grid_a"]


def test_a_main_lane_that_ends_first_waits_for_every_notebook_beside(tmp_path, monkeypatch, no_pages) -> None:
    """The lane beside is slower than the main lane: each of its notebooks still runs, in order."""
    import papermill

    p = _lanes_project(tmp_path, ["plot_c", "plot_d"])
    main_done = threading.Event()
    ran: list[str] = []

    def execute(src, dest, **kw):
        name = Path(src).stem
        ran.append(name)
        if name == "grid_b":
            main_done.set()
        if name == "plot_c":
            assert main_done.wait(20)
            time.sleep(0.2)  # the main lane has returned from its last notebook by now

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    log = io.StringIO()
    result = reproduce.run_notebooks(p, log=log, fetch=False)
    assert [r[0] for r in result.ran] == ["grid_a", "grid_b", "plot_c", "plot_d"] and not result.failed
    assert [n for n in ran if n.startswith("plot")] == ["plot_c", "plot_d"]
    assert "waiting for the notebooks beside to finish" in log.getvalue()


def test_an_interrupt_while_waiting_for_the_lane_beside_ends_it_after_its_notebook(tmp_path, monkeypatch,
                                                                                    no_pages) -> None:
    """Ctrl-C once the main lane is done: the notebook beside finishes, the next never starts, the interrupt is
    raised."""
    import papermill

    p = _lanes_project(tmp_path, ["plot_c", "plot_d"])
    ran: list[str] = []
    joined = threading.Event()
    real_join = threading.Thread.join

    def join(self, timeout=None):
        if self.name == "reproduce-beside" and not joined.is_set():
            joined.set()
            raise KeyboardInterrupt
        return real_join(self, timeout)

    def execute(src, dest, **kw):
        name = Path(src).stem
        ran.append(name)
        if name == "plot_c":
            assert joined.wait(20)
            time.sleep(0.2)  # still running when the interrupt arrives

    monkeypatch.setattr(threading.Thread, "join", join)
    monkeypatch.setattr(papermill, "execute_notebook", execute)
    with pytest.raises(KeyboardInterrupt):
        reproduce.run_notebooks(p, log=io.StringIO(), fetch=False)
    assert sorted(ran) == ["grid_a", "grid_b", "plot_c"]
    assert not any(th.name == "reproduce-beside" for th in threading.enumerate())  # stopped before the raise


def test_beside_naming_an_unknown_notebook_is_refused(tmp_path) -> None:
    p = _lanes_project(tmp_path, ["plot_c", "plot_z"])
    with pytest.raises(ValueError, match=r"beside: names no notebook 'plot_z'; valid names: grid_a"):
        parameters.plan(p)
    p.write_text(yaml.safe_dump({"beside": "plot_c"}))
    with pytest.raises(ValueError, match=r"p.yaml: beside: expected a list of notebook names, got 'plot_c'"):
        parameters.plan(p)


def test_the_paper_params_run_the_gain_table_before_the_grid_that_reads_it() -> None:
    names = [name for name, _, _ in parameters.plan(Path(__file__).parents[1] / "notebooks/params/paper.yaml")]
    assert sorted(names) == sorted(p.stem for p in (Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
    assert names.index("gain_vs_load") < names.index("fig09_fig10_multi_agent") < names.index("explorer")


def test_the_missing_sources_the_real_trace_report_writes_are_read_back(tmp_path) -> None:
    import pandas as pd

    from lachesis.analysis import report

    out = {"missing": pd.DataFrame({"source": ["who_and_when", "azure_llm_2023"], "how_to_get": ["a", "b"]})}
    report.write_missing(out, tmp_path / "real_traces")
    assert reproduce.missing_sources(tmp_path, since=0.0) == ["who_and_when", "azure_llm_2023"]
    report.write_missing({"missing": out["missing"].iloc[:0]}, tmp_path / "real_traces")
    assert reproduce.missing_sources(tmp_path, since=0.0) == []


@pytest.fixture()
def offline_project(tmp_path, monkeypatch) -> Path:
    """A project whose real-traces notebook reads the registered sources, on a machine with no network and an
    empty cache; its committed figure is a file that must survive the run."""
    import lachesis.traces.datasets

    def no_network(name, local=None, progress=False):
        raise lachesis.traces.datasets.DatasetError(f"{name}: download failed (no network)")

    monkeypatch.setattr(lachesis.traces.datasets, "fetch", no_network)
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "empty-cache"))
    nbs = tmp_path / "notebooks"
    (nbs / "params").mkdir(parents=True)
    _notebook(nbs / "a_ok.ipynb", 'print("hello")')
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('source: str = "all"\ndata: str = "tests/fixtures/traces"\n'
                                       'out_dir: str = "build/figures"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell('raise RuntimeError("must not run offline")')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbs / "real_traces.ipynb")
    (tmp_path / "figs" / "real_traces").mkdir(parents=True)
    (tmp_path / "figs" / "real_traces" / "real_traces.png").write_text("committed")
    (nbs / "params" / "p.yaml").write_text(yaml.safe_dump(
        {"common": {"out_dir": "figs"}, "notebooks": {"real_traces": {"data": "", "source": "public"}}}))
    return tmp_path


def test_offline_reproduce_keeps_the_real_trace_figures_names_the_fetch_command_and_exits_0(offline_project,
                                                                                             capsys) -> None:
    from lachesis.traces import datasets

    assert main(["reproduce", "--params", str(offline_project / "notebooks/params/p.yaml")]) == 0
    out = capsys.readouterr().out
    public = datasets.public_sources()
    assert f"{len(public)} real-trace source(s) missing" in out
    assert f"lachesis datasets fetch {' '.join(public)}" in out
    assert "kept    real_traces: not run" in out and "ran     a_ok" in out
    assert (offline_project / "figs/real_traces/real_traces.png").read_text() == "committed"
    assert (offline_project / "figs" / provenance.ENVIRONMENT_FILE).is_file()  # a complete run records its environment
    assert set(public) < set(datasets.registry()["dataset"])  # the local-only source is not in the default set


def test_strict_makes_a_missing_source_an_error(offline_project, capsys) -> None:
    assert main(["reproduce", "--strict", "--params", str(offline_project / "notebooks/params/p.yaml")]) == 1
    assert "(an error: --strict)" in capsys.readouterr().out


def test_environment_records_versions_sources_and_params_but_nothing_of_the_machine(tmp_path) -> None:
    root = Path(__file__).resolve().parents[1]
    env = provenance.environment(root, root / "notebooks/params/paper.yaml")
    assert env["packages"]["numpy"] and env["python"] and env["blas"]
    assert env["params_file"]["path"] == "notebooks/params/paper.yaml"
    assert env == provenance.environment(root, root / "notebooks/params/paper.yaml")  # deterministic
    text = json.dumps(env)
    import socket

    assert socket.gethostname() not in text and "num_threads" not in text


def _drawn_project(tmp_path: Path) -> Path:
    """A project of one notebook that draws a figure, prints a number, and runs two tasks with progress lines."""
    nbs = tmp_path / "notebooks"
    (nbs / "params").mkdir(parents=True)
    _notebook(nbs / "drawn.ipynb", "import math\nimport matplotlib.pyplot as plt\n"
                                   "from lachesis.evaluation import runner\n"
                                   "r = runner.run_tasks(math.sqrt, [(1.0,), (4.0,)], ['t0', 't1'], n_jobs=1, "
                                   "desc='demo')\n"
                                   "plt.plot([0, 1], [1, 0])\nplt.title('a line')\nplt.show()\nprint('key number', 42)")
    nb = nbformat.read(nbs / "drawn.ipynb", as_version=4)
    nb.cells[0].source = "# Fig. 1 — a line\n\nWhat the line shows."
    nbformat.write(nb, nbs / "drawn.ipynb")
    (nbs / "params" / "p.yaml").write_text(yaml.safe_dump({"common": {"out_dir": "figs", "seed": 3}}))
    return nbs / "params" / "p.yaml"


@pytest.mark.slow
def test_each_executed_notebook_becomes_a_report_page_and_a_notebook_that_open_on_its_figure(tmp_path) -> None:
    """The HTML page: titled after the heading, links, the figure first, the injected parameters as a table, the
    code hidden, every image embedded; the .ipynb beside it keeps code and outputs; an index lists both.  The
    progress lines go to build/logs/drawn.log and the terminal, never into a page.  A rerun writes the same
    bytes (pages and ENVIRONMENT.json)."""
    params = _drawn_project(tmp_path)
    pages_dir = tmp_path / "figs" / pages.FOLDER
    pages_dir.mkdir(parents=True)
    (pages_dir / "drawn.html").write_text("a page of an earlier run")
    log = io.StringIO()
    assert reproduce.run_notebooks(params, log=log, fetch=False).ok
    html = (pages_dir / "drawn.html").read_text(encoding="utf-8")
    assert "<title>Fig. 1 — a line</title>" in html and "key number 42" in html
    assert "plt.plot" not in html and 'class="jp-CodeMirrorEditor' not in html and "In&nbsp;[" not in html  # no code
    assert 'alt="Fig. 1 — a line: figure 1"' in html
    first_image, body = html.index('src="data:image/png;base64,'), html.index("What the line shows")
    assert html.index("<h1") < first_image < html.index("Parameters of this run") < body  # the figure opens it
    assert "<code>seed</code>" in html and "<code>3</code>" in html and 'seed: int = 0' not in html
    assert 'href="index.html"' in html and "drawn_files" not in html
    ran = nbformat.read(pages_dir / "drawn.ipynb", as_version=4)
    assert any("plt.plot" in c.source for c in ran.cells) and pages.problems(ran) == []
    assert "papermill" not in ran.metadata and all("papermill" not in c.metadata and "execution" not in c.metadata
                                                    for c in ran.cells)
    for text in (html, (pages_dir / "drawn.ipynb").read_text()):
        assert "[demo]" not in text and str(tmp_path) not in text  # no progress, no machine path
    assert "[demo] 2/2 t1" in (tmp_path / "build" / "logs" / "drawn.log").read_text()
    assert [ln for ln in log.getvalue().splitlines() if "[demo] 2/2 t1" in ln][0].startswith("  [drawn] [demo]")
    assert {p.name for p in pages_dir.iterdir()} == {"drawn.html", "drawn.ipynb", "index.html", "README.md"}
    before = {p: p.read_bytes() for p in (tmp_path / "figs").rglob("*") if p.is_file()}
    assert reproduce.run_notebooks(params, log=io.StringIO(), fetch=False).ok
    after = {p: p.read_bytes() for p in (tmp_path / "figs").rglob("*") if p.is_file()}
    assert [p.name for p in before if before[p] != after.get(p)] == [] and set(after) == set(before)


@pytest.mark.slow
def test_a_real_notebook_at_ci_scale_becomes_a_readable_page(tmp_path) -> None:
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "figures"
    assert main(["reproduce", "--params", str(root / "notebooks/params/ci.yaml"), "--only", "table3_corpus",
                 "-p", "out_dir", str(out)]) == 0
    html = (out / pages.FOLDER / "table3_corpus.html").read_text(encoding="utf-8")
    assert "<title>Table 3 — corpus scale per workload (Appendix A)</title>" in html
    assert html.index('src="data:image/png;base64,') < html.index("<table")  # the figure before any table
    assert "NBVAL_CHECK_OUTPUT" not in html  # the code is hidden
    nb = nbformat.read(out / pages.FOLDER / "table3_corpus.ipynb", as_version=4)
    assert pages.problems(nb) == [] and any("NBVAL_CHECK_OUTPUT" in c.source for c in nb.cells)


def test_a_second_run_in_the_same_clone_is_refused_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    """Two runs at once would share build/notebooks and the figures: the second is refused before it runs anything,
    naming the lock and the process holding it; the lock ends with its holder."""
    import papermill

    p = _lanes_project(tmp_path, [])
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    with reproduce.one_run(tmp_path):
        assert main(["reproduce", "--params", str(p), "--no-fetch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lachesis reproduce: error: build/reproduce.lock: another lachesis "
                                               f"reproduce (pid {__import__('os').getpid()}) is running"), err
    with reproduce.one_run(tmp_path):  # released: taken again
        pass


def test_a_stopped_runs_temporaries_are_removed_at_the_start_and_at_the_end(tmp_path, monkeypatch, no_pages) -> None:
    """A kernel ended in the middle of an atomic write (a second Ctrl-C) leaves ``.NAME….tmp`` beside the figures:
    the next run removes it before any notebook starts, and a run removes those of its own on the way out."""
    import papermill

    p = _lanes_project(tmp_path, [])
    out = tmp_path / "out"
    out.mkdir()
    stale = out / ".fig04_temporal.pdfk3j_x8.tmp"
    stale.write_text("half a pdf")
    seen = []

    def execute(src, dest, **kw):
        seen.append(stale.exists())
        if Path(src).stem == "grid_b":
            (out / ".grid_b.pngq1w2e3.tmp").write_text("half a png")  # the kernel ends mid-write
            raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        reproduce.run_notebooks(p, log=log, fetch=False, serial=True)
    assert seen == [False, False] and not list(out.glob(".*.tmp"))
    assert "[reproduce] removed 1 temporary file(s) a stopped run left: .fig04_temporal.pdfk3j_x8.tmp" in log.getvalue()


# -- an interrupted run: announced, and named by the provenance check ---------------------------------


def test_an_interrupted_reproduce_is_announced_and_named_by_the_provenance_check(tmp_path, monkeypatch) -> None:
    """A run stopped while a notebook writes its figures leaves ``NAME.in-progress`` beside them: the provenance
    check names it, the next run says so before writing them again, and a finished run removes it."""
    import contextlib
    import io as stdio

    import nbformat
    import papermill
    import yaml

    from lachesis import reproduce

    nbs = tmp_path / "notebooks"
    (nbs / "params").mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('out_dir: str = "figures"')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbs / "fig01.ipynb")
    params = nbs / "params" / "p.yaml"
    params.write_text(yaml.safe_dump({"common": {"out_dir": "figures"}}))
    figs = tmp_path / "figures"
    figs.mkdir()
    (figs / "fig01.png").write_text("old figure")
    (figs / "fig01.csv").write_text("old numbers")

    def stopped(src, dest, **kw):  # the new figure is written, then Ctrl-C before its numbers
        (figs / "fig01.png").write_text("new figure")
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", stopped)
    with pytest.raises(KeyboardInterrupt):
        reproduce.run_notebooks(params, log=stdio.StringIO())
    assert provenance.interrupted(figs) == ["fig01"]
    problem = provenance.provenance_problem(tmp_path)
    assert problem.startswith("figures/fig01.in-progress: a run of fig01 stopped while writing its figures"), problem

    monkeypatch.setattr(papermill, "execute_notebook", lambda src, dest, **kw: (figs / "fig01.csv").write_text("new"))
    monkeypatch.setattr(reproduce._Run, "write_pages", lambda self, name, params: None)
    monkeypatch.setattr(pages, "write_index", lambda *a: [])
    monkeypatch.setattr(reproduce.glance, "write", lambda figures: None)
    monkeypatch.setattr(provenance, "write_environment", lambda *a: None)
    monkeypatch.setattr(provenance, "write_run_record", lambda *a: None)
    log = stdio.StringIO()
    with contextlib.redirect_stdout(stdio.StringIO()):
        result = reproduce.run_notebooks(params, log=log, fetch=False)
    assert result.ran and not result.failed
    assert "[reproduce] fig01: an earlier run stopped while writing its figures" in log.getvalue()
    assert provenance.interrupted(figs) == [] and not (figs / "fig01.in-progress").exists()


# -- parameters checked by name, type and choice before anything runs ---------------------------------


def _params_notebook(path: Path, params: str, body: str = "print('ran')") -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell(
        "from lachesis.reproduce import notebook_setup; notebook_setup(globals())\n" + body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture()
def params_project(tmp_path) -> Path:
    nbs = tmp_path / "notebooks"
    (nbs / "params").mkdir(parents=True)
    _params_notebook(nbs / "grid.ipynb", 'seeds: str = "0,1"\nscale: float = 0.05\nn_jobs: int = 2\nfast: bool = True')
    _params_notebook(nbs / "table.ipynb", 'scale: float = 0.05\nout_dir: str = "build"')
    return tmp_path


def _refused(params_project: Path, spec: dict, capsys, *extra: str) -> str:
    p = params_project / "notebooks" / "params" / "p.yaml"
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
def test_params_file_refused_by_key_and_type_before_running(params_project, capsys, monkeypatch, spec, words) -> None:
    import papermill as pm

    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    err = _refused(params_project, spec, capsys)
    assert all(w in err for w in words), err


@pytest.mark.parametrize("argv, words", [
    (["-p", "scael", "1"], ["-p scael: a parameter of none of the notebooks to run", "'scale'"]),
    (["-p", "n_jobs", "two"], ["-p n_jobs: expected int, got 'two'", "notebook grid"]),
    (["-p", "fast", "maybe"], ["-p fast: expected bool"]),
    (["--only", "table", "-p", "seeds", "0"], ["-p seeds: a parameter of none of the notebooks to run (table)"]),
])
def test_p_overrides_refused_by_name_and_type(params_project, capsys, monkeypatch, argv, words) -> None:
    import papermill as pm

    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    err = _refused(params_project, {}, capsys, *argv)
    assert all(w in err for w in words), err


def test_valid_params_and_p_overrides_typed_by_the_declaration(params_project) -> None:
    p = params_project / "notebooks" / "params" / "ok.yaml"
    p.write_text(yaml.safe_dump({"common": {"scale": 1}, "notebooks": {"grid": {"seeds": "0,1,2"}}}))
    got = dict((n, v) for n, _, v in parameters.plan(p, overrides=[("seeds", "0"), ("n_jobs", "1"), ("fast", "false")]))
    assert got == {"grid": {"scale": 1, "seeds": "0", "n_jobs": 1, "fast": False}, "table": {"scale": 1}}


def test_the_paper_and_ci_params_pass_the_check() -> None:
    notebooks = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    for name in ("paper", "ci"):  # every notebook, each once
        planned = [n for n, _, _ in parameters.plan(REPO / "notebooks" / "params" / f"{name}.yaml")]
        assert sorted(planned) == sorted(notebooks)


def test_every_notebook_checks_its_parameters_first() -> None:
    """The first code cell after the parameters cell opens with the one setup call; no notebook resolves a path
    parameter by hand."""
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
        code = [c.source for c in nb.cells[i + 1:] if c.cell_type == "code"]
        first = code[0].splitlines()[0]
        assert first.startswith("from lachesis.reproduce import notebook_setup; ") and \
            "notebook_setup(globals())" in first, path
        assert not any("repo_path(" in s or "check_parameters(" in s for s in code), path


def test_notebook_setup_resolves_path_parameters_from_the_repository(tmp_path, monkeypatch) -> None:
    """Folders become Paths under the repository root, a given input an existing path's text, an empty input stays
    empty; the values as given are returned; a missing input and a value of the wrong type are refused by name."""
    monkeypatch.chdir(tmp_path)
    given = {"out_dir": "build/figures", "trace": "tests/fixtures/traces", "table": "", "seed": 0}
    ns = {"__annotations__": {"out_dir": "str", "trace": "str", "table": "str", "seed": "int"}, **given,
          "data": "not/a/parameter"}
    assert parameters.notebook_setup(ns) == given
    assert ns["out_dir"] == REPO / "build" / "figures" and ns["trace"] == str(REPO / "tests" / "fixtures" / "traces")
    assert ns["table"] == "" and ns["seed"] == 0 and ns["data"] == "not/a/parameter"  # only declared names move
    with pytest.raises(FileNotFoundError, match=r"^trace: .*no_such_trace does not exist"):
        parameters.notebook_setup({"__annotations__": {"trace": "str"}, "trace": "no_such_trace"})
    with pytest.raises(TypeError, match="parameter out_dir: expected str, got int 3"):
        parameters.notebook_setup({"__annotations__": {"out_dir": "str"}, "out_dir": 3})


def test_check_parameters_names_the_parameter_and_type() -> None:
    ns = {"__annotations__": {"seeds": "str", "scale": float, "n": "int"}, "seeds": 0, "scale": 1, "n": 3}
    with pytest.raises(TypeError, match=r"parameter seeds: expected str, got int 0 .*-r"):
        parameters.check_parameters(ns)
    ns["seeds"] = "0"
    parameters.check_parameters(ns)  # an int fits a float


def test_papermill_p_with_the_wrong_type_stops_at_the_check(tmp_path) -> None:
    import papermill as pm

    src = tmp_path / "nb.ipynb"
    _params_notebook(src, 'seeds: str = "0,1"', "raise AssertionError('ran past the check')")
    with pytest.raises(pm.PapermillExecutionError, match="parameter seeds: expected str, got int 0"):
        pm.execute_notebook(str(src), str(tmp_path / "out.ipynb"), parameters={"seeds": 0}, progress_bar=False,
                            kernel_name="python3", cwd=str(REPO))


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
        parameters.check_parameters({"__annotations__": {key: "str"}, key: value})


def test_choices_are_refused_before_anything_runs_and_defaults_pass() -> None:
    for name in GRID_NOTEBOOKS:  # every grid notebook's declared defaults are valid choices
        params = parameters.notebook_parameters(REPO / "notebooks" / f"{name}.ipynb")
        assert {"node", "search"} <= set(params), name
    with pytest.raises(ValueError, match=r"-p search: unknown choice 'bogus'.*\(notebook "):
        parameters.plan(REPO / "notebooks" / "params" / "ci.yaml", only=["gain_vs_load"],
                       overrides=[("search", "bogus")])
    ok = parameters.plan(REPO / "notebooks" / "params" / "ci.yaml", only=["gain_vs_load"],
                         overrides=[("node", "paper")])
    assert ok[0][2]["node"] == "paper"
    parameters.check_parameters({"__annotations__": {"configs": "str", "knobs": "str"}, "configs": "", "knobs": ""})


def test_every_grid_parameter_has_a_help_comment() -> None:
    import papermill as pm

    for name in GRID_NOTEBOOKS:
        for key, info in pm.inspect_notebook(str(REPO / "notebooks" / f"{name}.ipynb")).items():
            assert info["help"].strip(), f"{name}: parameter {key} has no help comment"
            if key in parameters.parameter_choices():
                choices, _ = parameters.parameter_choices()[key]
                assert any(c in info["help"] for c in choices) or "lachesis." in info["help"], (name, key)


@pytest.mark.parametrize("key, value", [("seed", -1), ("scale", 0.0), ("scale", -0.5)])
def test_a_numeric_parameter_out_of_range_is_named(key, value):
    """`papermill -p seed -1` is refused naming the parameter, before the grid runs."""
    from lachesis.parameters import check_parameters

    ann = "int" if key == "seed" else "float"
    with pytest.raises(ValueError, match=f"parameter {key}: must be"):
        check_parameters({"__annotations__": {key: ann}, key: value})


def test_notebook_kernels_draw_inline_and_the_shells_backend_comes_back(monkeypatch) -> None:
    """A kernel started by ``lachesis reproduce`` draws inline; the shell's own environment comes back after."""
    from lachesis import kernel

    monkeypatch.setenv("MPLBACKEND", "Agg")
    with kernel.kernel_env():
        assert os.environ["MPLBACKEND"] == kernel.KERNEL_BACKEND
    assert os.environ["MPLBACKEND"] == "Agg"
