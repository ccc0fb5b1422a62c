"""The command line: help text, and every expected error as one line on stderr with a non-zero exit."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fixture_paths import TAU2_SOURCE as SRC

from lachesis import cli
from lachesis.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_every_command(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    for cmd in ("corpus", "segments", "datasets", "sweep", "reproduce"):
        assert cmd in out


def test_module_entry_point_runs() -> None:
    r = subprocess.run([sys.executable, "-m", "lachesis", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "lifetime-aware" in r.stdout


def one_error_line(capsys, argv: list[str]) -> str:
    """Run the CLI; it must fail with exactly one line on stderr, which is returned."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc != 0, f"{argv} exited 0"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{argv}: expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bad_gzip(tmp: Path) -> Path:
    p = tmp / "requests.jsonl.gz"
    p.write_bytes(b"this is not gzip")
    return p


def _truncated_gzip(tmp: Path) -> Path:
    p = tmp / "cut.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"a": 1}\n' * 200)[:40])
    return p


def _bad_yaml(tmp: Path) -> Path:
    p = tmp / "params.yaml"
    p.write_text("common:\n  scale: [1,\n")
    return p


def _folder(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir()
    return tmp / name


def _a_file(tmp: Path) -> Path:
    p = tmp / "taken"
    p.write_text("x")
    return p


CASES = [  # (id, argv builder, words the one line must hold)
    ("bad-gzip", lambda t: ["segments", str(_bad_gzip(t))],
     ["lachesis segments: error:", "requests.jsonl.gz", "(gzip)"]),
    ("truncated-gzip", lambda t: ["segments", str(_truncated_gzip(t))], ["cut.jsonl.gz", "(gzip)"]),
    ("missing-trace", lambda t: ["segments", str(t / "nope")], ["argument trace: no trace at"]),
    ("segments-out-suffix", lambda t: ["segments", str(_a_file(t)), "--out", str(t / "x.txt")],
     ["argument --out: must end in .csv or .parquet"]),
    ("segments-out-folder", lambda t: ["segments", str(_a_file(t)), "--out", str(_folder(t, "x.csv"))],
     ["argument --out:", "is a folder"]),
    ("corpus-out-is-a-file", lambda t: ["corpus", "--out", str(_a_file(t))],
     ["lachesis corpus: error: argument --out:", "exists and is not a folder"]),
    ("corpus-out-under-a-file", lambda t: ["corpus", "--out", str(_a_file(t) / "sub")],
     ["argument --out: cannot create", "is a file, not a folder"]),
    ("unknown-workload", lambda t: ["corpus", "--out", str(t), "--workloads", "tau3", "nope"],
     ["argument --workloads: unknown workload 'nope'; choose from", "multi_agent"]),
    ("scale-inf", lambda t: ["corpus", "--out", str(t), "--scale", "inf"],
     ["argument --scale: must be a finite number > 0"]),
    ("scale-nan", lambda t: ["corpus", "--out", str(t), "--scale", "nan"],
     ["argument --scale: must be a finite number > 0"]),
    ("scale-zero", lambda t: ["corpus", "--out", str(t), "--scale", "0"],
     ["argument --scale: must be a finite number > 0"]),
    ("scale-negative", lambda t: ["sweep", "--scale", "-0.5"], ["lachesis sweep: error: argument --scale:"]),
    ("scale-text", lambda t: ["corpus", "--out", str(t), "--scale", "half"], ["argument --scale: expected a number"]),
    ("seed-negative", lambda t: ["corpus", "--out", str(t), "--seed", "-1"], ["argument --seed: must be >= 0"]),
    ("unknown-dataset", lambda t: ["datasets", "fetch", "no_such_source"],
     ["lachesis datasets: error: argument names: unknown dataset 'no_such_source'; choose from"]),
    ("local-not-a-folder", lambda t: ["datasets", "list", "--local", str(t / "none")],
     ["argument --local: no folder at"]),
    ("bad-yaml", lambda t: ["reproduce", "--params", str(_bad_yaml(t))],
     ["argument --params:", "not valid YAML at line 3"]),
    ("yaml-not-a-mapping", lambda t: ["reproduce", "--params", str(_a_file(t))], ["expected a YAML mapping"]),
    ("missing-params", lambda t: ["reproduce", "--params", str(t / "none.yaml")],
     ["argument --params: no params file"]),
    ("unknown-notebook", lambda t: ["reproduce", "--params", str(REPO / "notebooks/params/paper.yaml"),
                                    "--only", "no_such_notebook"],
     ["lachesis reproduce: error: --only names no notebook 'no_such_notebook'; valid names:", "fig04_temporal",
      "real_traces"]),
    ("unreachable-scheduler", lambda t: ["sweep", "--scale", "0.01", "--out", str(t / "s.csv"),
                                         "--scheduler", f"tcp://127.0.0.1:{_free_port()}"],
     ["lachesis sweep: error: --scheduler tcp://127.0.0.1:", "cannot reach the Dask scheduler"]),
    ("scheduler-scheme", lambda t: ["sweep", "--scheduler", "http://x:1"], ["argument --scheduler: unknown scheme"]),
    ("scheduler-no-port", lambda t: ["sweep", "--scheduler", "tcp://host"],
     ["argument --scheduler: expected tcp://host:port"]),
    ("unknown-command", lambda t: ["frobnicate"], ["lachesis: error: argument command: invalid choice"]),
    ("missing-argument", lambda t: ["corpus"], ["lachesis corpus: error: the following arguments are required: --out"]),
]


@pytest.mark.parametrize("build, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(tmp_path, capsys, build, words) -> None:
    line = one_error_line(capsys, build(tmp_path))
    for w in words:
        assert w in line, f"{w!r} not in {line!r}"


def test_bad_trace_row_names_file_line_and_field(tmp_path, capsys) -> None:
    p = tmp_path / "requests.jsonl"
    p.write_text('{"session_id": "S", "request_id": "r0", "agent_id": "A", "parent_agent_id": null, "role": "single", '
                 '"turn": 0, "input_tokens": 1e30, "matched_prefix_tokens": 0, "output_tokens": 1, '
                 '"reasoning_tokens": 0, "tool_names": [], "n_observations": 0}\n')
    line = one_error_line(capsys, ["segments", str(p)])
    assert line.startswith(f"lachesis segments: error: {p}: record line 1 (request_id='r0'): field 'input_tokens': "
                           "out of range")


def test_unwritable_output_is_one_line(tmp_path, capsys) -> None:
    """A folder the process may not write in (as root, permissions do not bind: /proc refuses instead)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        target = ro if os.access(ro, os.W_OK) is False else Path("/proc/lachesis-test-out")
        if not Path("/proc").is_dir() and target != ro:
            pytest.skip("no read-only place to write to")
        line = one_error_line(capsys, ["corpus", "--out", str(target / "corpus"), "--scale", "0.01",
                                       "--workloads", "webarena"])
        assert line.startswith("lachesis corpus: error:") and str(target) in line
    finally:
        ro.chmod(0o700)


def test_internal_errors_are_one_line_unless_debug(monkeypatch, tmp_path, capsys) -> None:
    import lachesis.traces.corpus

    def boom(*a, **k):
        raise RuntimeError("unexpected\nstate")

    monkeypatch.setattr(lachesis.traces.corpus, "write_all", boom)
    line = one_error_line(capsys, ["corpus", "--out", str(tmp_path)])
    assert line == ("lachesis corpus: error: internal error (RuntimeError): unexpected state "
                    "(rerun with --debug for the traceback)")
    with pytest.raises(RuntimeError):
        main(["--debug", "corpus", "--out", str(tmp_path)])


@pytest.mark.parametrize("argv, words", [
    (["corpus", "--scale", "inf", "--out", "x"], "argument --scale: must be a finite number > 0, got 'inf'"),
    (["segments", "{bad_gzip}"], "field '(gzip)': not a complete gzip file"),
])
def test_subprocess_exit_code_and_one_stderr_line(tmp_path, argv, words) -> None:
    argv = [a.replace("{bad_gzip}", str(_bad_gzip(tmp_path))) for a in argv]
    r = subprocess.run([sys.executable, "-m", "lachesis", *argv], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr


def test_segments_prints_summary_and_writes_table(tmp_path, capsys) -> None:
    from sim_fixtures import two_turn_trace

    from lachesis.traces.trace import write_trace

    d = write_trace(two_turn_trace(), tmp_path / "tr", fmt="jsonl")
    out = tmp_path / "segs.parquet"
    assert main(["segments", str(d), "--seed", "0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "reasoning_laden" in printed and "reasoning_stripped" in printed
    back = pd.read_parquet(out)
    assert len(back) == 4 and back["tokens_written"].sum() == 270


def test_readme_recover_and_lachesis_segments_give_the_same_numbers(tmp_path, capsys) -> None:
    """The README's ``recover(read_trace(folder), seed=0)`` and ``lachesis segments folder`` pick the same
    reference clock for a corpus trace (its tool classes travel with it), so they give the same segments,
    and so does the trace in memory; the default clock (every tool an API call) would not."""
    from lachesis.analysis.segments import recover
    from lachesis.config import ReferenceClock
    from lachesis.traces import corpus
    from lachesis.traces.trace import read_trace

    assert main(["corpus", "--scale", "0.05", "--out", str(tmp_path / "c"), "--workloads", "bfcl_base"]) == 0
    folder = tmp_path / "c" / "bfcl_base"
    assert main(["segments", str(folder), "--out", str(tmp_path / "seg.csv")]) == 0
    capsys.readouterr()
    cli_t = pd.read_csv(tmp_path / "seg.csv")["t_norm_s"].to_numpy()
    readme_t = recover(read_trace(folder), seed=0).segments["t_norm_s"].to_numpy()
    memory_t = recover(corpus.generate("bfcl_base", 0.05, 0), seed=0).segments["t_norm_s"].to_numpy()
    np.testing.assert_allclose(cli_t, readme_t, rtol=1e-12)
    np.testing.assert_array_equal(readme_t, memory_t)
    default_t = recover(read_trace(folder), clock=ReferenceClock(), seed=0).segments["t_norm_s"].to_numpy()
    assert not np.allclose(default_t, readme_t)


def test_corpus_and_segments_run(tmp_path, capsys) -> None:
    assert main(["corpus", "--scale", "0.02", "--out", str(tmp_path / "c"), "--workloads", "webarena",
                 "--format", "jsonl"]) == 0
    assert (tmp_path / "c" / "webarena" / "requests.jsonl").is_file()
    assert main(["segments", str(tmp_path / "c" / "webarena"), "--out", str(tmp_path / "seg.csv")]) == 0
    out = capsys.readouterr().out
    assert "worker" in out and (tmp_path / "seg.csv").is_file()


def test_no_cli_handler_lives_in_a_domain_module() -> None:
    """Every subcommand's handler lives in cli.py and calls typed package functions: no other module
    defines a ``cli_*`` handler or parses arguments (``lachesis.evaluation.sweep``'s handler moves in a later pass)."""
    import importlib
    import inspect
    import pkgutil

    import lachesis

    later = {"lachesis.evaluation.sweep"}
    for info in pkgutil.walk_packages(lachesis.__path__, "lachesis."):
        if info.name in later | {"lachesis.cli", "lachesis.__main__"}:
            continue
        mod = importlib.import_module(info.name)
        if not (getattr(mod, "__file__", "") or "").endswith(".py"):
            continue  # the native core (lachesis.node._core) has no Python source
        handlers = [n for n, f in inspect.getmembers(mod, inspect.isfunction) if n.startswith("cli_")
                    and f.__module__ == mod.__name__]
        assert not handlers, f"{info.name} defines command-line handlers {handlers}"
        assert "argparse" not in inspect.getsource(mod), info.name
    assert "importlib" not in inspect.getsource(cli)


def test_reproduce_finds_the_project_from_any_params_file(tmp_path, monkeypatch) -> None:
    from lachesis.reproduce import project_root

    assert project_root(REPO / "notebooks" / "params" / "paper.yaml") == REPO
    monkeypatch.chdir(REPO)  # a params file elsewhere falls back to the working directory
    assert project_root(tmp_path / "mine.yaml") == REPO


@pytest.mark.slow
def test_sweep_runs_the_named_grid_and_writes_its_rows(tmp_path, monkeypatch, capsys) -> None:
    """``lachesis sweep``: the handler runs :func:`grid.named_grid`'s points (two small ones here, at the CI
    preset) and writes one CSV row per point, with the cache beside it."""
    from lachesis.evaluation import grid
    from lachesis.node import capacity

    pts = [grid.Point("multi_agent", "4/4", "Qwen3-235B-A22B", "loose", p, scale=0.02, seed=0)
           for p in ("hbm_first", "lachesis")]
    seen = {}
    monkeypatch.setattr(grid, "named_grid", lambda name, scale, seed: seen.update(name=name, scale=scale) or pts)
    monkeypatch.setattr(capacity, "PAPER", capacity.SEARCH_PRESETS["ci"])
    out = tmp_path / "grid" / "s.csv"
    assert main(["sweep", "--trace", "multi_agent", "--scale", "0.02", "--out", str(out)]) == 0
    assert seen == {"name": "multi_agent", "scale": 0.02}
    df = pd.read_csv(out)
    assert list(df["policy"]) == ["hbm_first", "lachesis"] and np.isfinite(df["lifetime_years"]).all()
    assert (tmp_path / "grid" / "sweep_cache").is_dir() and "wrote 2 points" in capsys.readouterr().out


def test_version_printed(capsys):
    """`lachesis --version` prints the package's one version and exits 0."""
    import lachesis
    from lachesis.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lachesis {lachesis.__version__}"


# -- an empty --out and --jobs below one, refused in one line -----------------------------------------


@pytest.mark.parametrize("argv", [["adapt", "tau2", str(SRC), "--out", ""], ["corpus", "--out", ""],
                                  ["corpus", "--out", "  "], ["segments", str(SRC), "--out", ""],
                                  ["explore", "--cache-dir", ""]])
def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch, argv) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty path" in err[0], err
    assert list(tmp_path.iterdir()) == []  # nothing written into the working folder


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "many"])
def test_jobs_must_be_at_least_one(tmp_path, capsys, value) -> None:
    assert main(["explore", "--cache-dir", str(tmp_path), "--jobs", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--jobs" in err[0], err
