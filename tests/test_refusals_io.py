"""Output folders written whole: a reused folder holds one format and one run; a failed write
leaves the old folder intact; a folder the command did not write is never replaced; empty paths refused."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from lachesis import io
from lachesis.cli import main
from lachesis.traces import adapters, corpus

FIX = Path(__file__).resolve().parent / "fixtures" / "traces"
SRC = FIX / "tau2-qwen3.5-justinchiu"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


def test_adapt_into_a_reused_folder_holds_one_format(tmp_path) -> None:
    out = tmp_path / "out"
    adapters.adapt("tau2", SRC, out, fmt="parquet")
    rep = adapters.adapt("tau2", SRC, out, fmt="jsonl")
    assert sorted(p.name for p in out.iterdir()) == ["adapt_report.json", "requests.jsonl", "spawns.jsonl"]
    assert rep.written == [str(out / n) for n in ("requests.jsonl", "spawns.jsonl", "adapt_report.json")]
    assert siblings(out) == []  # no temporary folder left beside it


def test_corpus_into_a_reused_folder_holds_one_run(tmp_path) -> None:
    out = tmp_path / "c"
    corpus.write_all(out, 0.02, 0, "parquet", ["bfcl_base", "webarena"])
    corpus.write_all(out, 0.02, 0, "jsonl", ["bfcl_base"])
    assert sorted(p.name for p in out.iterdir()) == ["bfcl_base"]
    assert not list(out.rglob("*.parquet")) and (out / "bfcl_base" / "requests.jsonl").is_file()
    assert siblings(out) == []


def _full_disk(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_adapt_leaves_the_old_folder_intact(tmp_path, capsys, monkeypatch) -> None:
    out = tmp_path / "out"
    adapters.adapt("tau2", SRC, out, fmt="parquet")
    before = snapshot(out)
    monkeypatch.setattr(adapters, "write_json", _full_disk)  # the report, written after the tables
    assert main(["adapt", "tau2", str(SRC), "--out", str(out), "--format", "jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and str(out) in err[0]
    assert snapshot(out) == before and siblings(out) == []


def test_a_failed_corpus_leaves_the_old_folder_intact(tmp_path, monkeypatch) -> None:
    out = tmp_path / "c"
    corpus.write_all(out, 0.02, 0, "parquet", ["bfcl_base"])
    before = snapshot(out)
    calls = []

    def second_fails(tr, d, fmt="parquet"):
        calls.append(d)
        if len(calls) == 2:
            _full_disk()
        return real(tr, d, fmt)

    real = corpus.write_trace
    monkeypatch.setattr(corpus, "write_trace", second_fails)
    with pytest.raises(OSError, match="No space"):
        corpus.write_all(out, 0.02, 0, "jsonl", ["bfcl_base", "webarena"])
    assert snapshot(out) == before and siblings(out) == []


def test_a_folder_the_command_did_not_write_is_refused_untouched(tmp_path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for argv in (["adapt", "tau2", str(SRC), "--out", str(mine)],
                 ["corpus", "--scale", "0.02", "--workloads", "bfcl_base", "--out", str(mine)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "replaced whole" in err[0], err
        assert snapshot(mine) == {"notes.txt": b"keep me"}


def test_adapt_refuses_an_out_holding_its_source(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for f in SRC.iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ValueError, match="holds the source"):
        adapters.adapt("tau2", src, src)
    with pytest.raises(ValueError, match="holds the source"):
        adapters.adapt("tau2", src, tmp_path)


@pytest.mark.parametrize("argv", [["adapt", "tau2", str(SRC), "--out", ""], ["corpus", "--out", ""],
                                  ["corpus", "--out", "  "], ["segments", str(SRC), "--out", ""],
                                  ["explore", "--cache-dir", ""]])
def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch, argv) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty path" in err[0], err
    assert list(tmp_path.iterdir()) == []  # nothing written into the working folder


def test_empty_out_refused_by_the_functions_too(tmp_path) -> None:
    with pytest.raises(ValueError, match="empty path"):
        adapters.adapt("tau2", SRC, "")
    with pytest.raises(ValueError, match="empty path"):
        corpus.write_all("", 0.02, 0, "jsonl", ["bfcl_base"])


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "many"])
def test_jobs_must_be_at_least_one(tmp_path, capsys, value) -> None:
    assert main(["explore", "--cache-dir", str(tmp_path), "--jobs", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--jobs" in err[0], err


def test_replace_folder_mode_is_that_of_mkdir(tmp_path) -> None:
    out = io.replace_folder(tmp_path / "x", lambda t: (t / "a.json").write_text("{}"), lambda f: "never")
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask


# -- a full disk part-way through `lachesis adapt`: never new requests beside old spawns and an old report


def _adapt_fails(tmp_path, capsys, monkeypatch, patch) -> None:
    out = tmp_path / "out"
    adapters.adapt("claude_code_subagents", FIX / "claude_code_subagents", out, fmt="jsonl")
    before = snapshot(out)
    assert {"requests.jsonl", "spawns.jsonl", "adapt_report.json"} <= set(before)
    patch(monkeypatch)
    assert main(["adapt", "claude_code_subagents", str(FIX / "claude_code_subagents"), "--out", str(out),
                 "--format", "jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and "left as it was" in err[0], err
    assert snapshot(out) == before and siblings(out) == []


def test_a_full_disk_after_the_requests_leaves_the_old_requests_spawns_and_report(tmp_path, capsys, monkeypatch) -> None:
    from lachesis.traces import trace

    real = trace._write_table

    def spawns_fail(df, path):
        if path.name.startswith("spawns"):
            _full_disk()
        return real(df, path)

    _adapt_fails(tmp_path, capsys, monkeypatch, lambda m: m.setattr(trace, "_write_table", spawns_fail))


def test_a_full_disk_half_way_through_a_file_leaves_the_old_folder(tmp_path, capsys, monkeypatch) -> None:
    real = io.atomic_write

    def half_then_full(path, write):
        if Path(path).name.startswith("requests"):
            def partial(tmp):
                write(tmp)
                with open(tmp, "r+b") as fh:  # the disk filled half-way through this file
                    fh.truncate(max(1, fh.seek(0, 2) // 2))
                _full_disk()
            return real(path, partial)
        return real(path, write)

    from lachesis.traces import trace

    _adapt_fails(tmp_path, capsys, monkeypatch, lambda m: m.setattr(trace, "atomic_write", half_then_full))


def test_a_full_disk_at_the_swap_restores_the_old_folder(tmp_path, capsys, monkeypatch) -> None:
    real = os.replace

    def swap_fails(src, dst):
        if str(src).endswith(".new"):  # the new folder moved in over the old one
            _full_disk()
        return real(src, dst)

    _adapt_fails(tmp_path, capsys, monkeypatch, lambda m: m.setattr(io.os, "replace", swap_fails))


def test_a_full_disk_names_the_file_being_written(tmp_path, capsys, monkeypatch) -> None:
    """ENOSPC from a write names no file; the error raised names the file the write was for."""
    target = tmp_path / "figs" / "fig09_grid.csv"
    with pytest.raises(OSError) as e:
        io.atomic_write(target, _full_disk)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target), e.value
    assert str(target) in str(e.value) and not list(target.parent.iterdir())  # no temporary file left
    # through the command line: one line, the path and the reason
    import json

    real = io.atomic_write
    monkeypatch.setattr(io, "atomic_write", lambda path, write: real(path, _full_disk))
    trace = tmp_path / "t"
    trace.mkdir()
    (trace / "requests.jsonl").write_text(json.dumps(dict(
        session_id="s", request_id="r0", agent_id="a", parent_agent_id=None, role="single", turn=0, input_tokens=10,
        matched_prefix_tokens=0, output_tokens=5, reasoning_tokens=0, tool_names=[], n_observations=0)) + "\n")
    out = tmp_path / "seg.csv"
    assert main(["segments", str(trace), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lachesis segments: error: {out}: No space left on device"], err


def test_an_error_that_names_its_file_keeps_it(tmp_path) -> None:
    other = tmp_path / "elsewhere"

    def fails(tmp):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(other))

    with pytest.raises(FileNotFoundError) as e:
        io.atomic_write(tmp_path / "x.json", fails)
    assert e.value.filename == str(other)


def test_datasets_fetch_tries_every_source_and_names_each_it_could_not_fetch(tmp_path, capsys, monkeypatch) -> None:
    """With no names, a local-only source (and a failed download) does not stop the others: each is named on
    stderr and the command exits 1 after trying them all."""
    from lachesis.traces import datasets as ds

    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    real, tried = ds.fetch, []
    every = ds.names()
    local_only = [n for n in every if ds.fetch_hint(n) != f"lachesis datasets fetch {n}"]
    public = [n for n in every if n not in local_only]
    assert local_only and len(public) >= 2 and min(map(every.index, local_only)) < max(map(every.index, public))
    offline = public[0]

    def fetch(name, local=None, progress=False):
        tried.append(name)
        if name in local_only:
            return real(name, local)  # refused before any download: no public origin
        if name == offline:
            raise ds.DatasetError(f"{name}/x.json: download from https://example.org/x.json failed: no network")
        return tmp_path / "cache" / name

    monkeypatch.setattr(ds, "fetch", fetch)
    assert main(["datasets", "fetch"]) == 1
    assert tried == every  # every source tried, in order
    out, err = capsys.readouterr()
    assert [ln.split(":")[0] for ln in out.splitlines()] == [n for n in public if n != offline]
    lines = err.strip().splitlines()
    assert len(lines) == len(local_only) + 2, lines
    for n in (*local_only, offline):
        assert any(ln.startswith(f"lachesis datasets: {n}: could not fetch: ") for ln in lines), n
    assert lines[-1] == (f"lachesis datasets: {len(local_only) + 1} of {len(every)} source(s) not fetched: "
                         f"{', '.join(n for n in every if n in local_only or n == offline)}")
    assert main(["datasets", "fetch", *public[1:]]) == 0


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
    assert reproduce.interrupted(figs) == ["fig01"]
    problem = reproduce.provenance_problem(tmp_path)
    assert problem.startswith("figures/fig01.in-progress: a run of fig01 stopped while writing its figures"), problem

    monkeypatch.setattr(papermill, "execute_notebook", lambda src, dest, **kw: (figs / "fig01.csv").write_text("new"))
    monkeypatch.setattr(reproduce, "write_html", lambda executed, dest: dest)
    monkeypatch.setattr(reproduce.glance, "write", lambda figures: None)
    monkeypatch.setattr(reproduce, "write_environment", lambda *a: None)
    log = stdio.StringIO()
    with contextlib.redirect_stdout(stdio.StringIO()):
        result = reproduce.run_notebooks(params, log=log, fetch=False)
    assert result.ran and not result.failed
    assert "[reproduce] fig01: an earlier run stopped while writing its figures" in log.getvalue()
    assert reproduce.interrupted(figs) == [] and not (figs / "fig01.in-progress").exists()


# ------------------------------------------------------------------------------------------------
# The browser check ends everything it started, on every way out
# ------------------------------------------------------------------------------------------------

#: A stand-in for JupyterLab or chromedriver that never answers and ignores SIGTERM: it starts a child in its
#: own group and a grandchild in a session of its own (as a Jupyter kernel is), prints the three pids, hangs.
HANG = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sleep = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
kid = subprocess.Popen(sleep)
kernel = subprocess.Popen(sleep, start_new_session=True)
print(os.getpid(), kid.pid, kernel.pid, flush=True)
time.sleep(600)
"""


def _browser_check():
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("browser_check", root / "scripts" / "browser_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie is gone, only not yet reaped


def _gone(pids: list[int], within: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(map(_alive, pids)):
            return True
        time.sleep(0.1)
    return False


def test_the_browser_check_ends_what_it_started_on_an_error_and_a_timeout(tmp_path) -> None:
    import subprocess
    import sys

    bc = _browser_check()
    pids: list[int] = []
    with pytest.raises(RuntimeError):
        with bc.Started(grace=1) as started:
            p = started.start([sys.executable, "-c", HANG], stdout=subprocess.PIPE, text=True)
            pids = [int(x) for x in p.stdout.readline().split()]
            raise RuntimeError("a step of the check failed")
    assert len(pids) == 3 and _gone(pids), [pid for pid in pids if _alive(pid)]
    with pytest.raises(SystemExit, match="did not answer within 1 s"):  # JupyterLab that never answers
        with bc.Started(grace=1) as started:
            bc.start_lab(started, bc.free_port(), "t", tmp_path / "lab.log", cmd=[sys.executable, "-c", HANG],
                         timeout_s=1)
    pids = [int(x) for x in (tmp_path / "lab.log").read_text().split()]
    assert len(pids) == 3 and _gone(pids), [pid for pid in pids if _alive(pid)]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_the_browser_check_ends_what_it_started_on_ctrl_c_and_sigterm(tmp_path, sig) -> None:
    import signal
    import subprocess
    import sys

    script = tmp_path / "check.py"
    script.write_text(
        "import importlib.util, subprocess, sys, time\n"
        f"spec = importlib.util.spec_from_file_location('bc', {str(Path(__file__).resolve().parents[1] / 'scripts' / 'browser_check.py')!r})\n"
        "bc = importlib.util.module_from_spec(spec); spec.loader.exec_module(bc)\n"
        "try:\n"
        "    with bc.Started(grace=1) as started:\n"
        f"        p = started.start([sys.executable, '-c', {HANG!r}], stdout=subprocess.PIPE, text=True)\n"
        "        print(p.stdout.readline().strip(), flush=True)\n"
        "        time.sleep(600)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n")
    check = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids = [int(x) for x in check.stdout.readline().split()]
    assert len(pids) == 3 and all(map(_alive, pids))
    check.send_signal(getattr(signal, sig))
    assert check.wait(timeout=30) == (130 if sig == "SIGINT" else 128 + signal.SIGTERM)
    assert _gone(pids), [pid for pid in pids if _alive(pid)]
