"""The command line: help text, and errors reported without a traceback."""

import subprocess
import sys

from lachesis.cli import main


def test_help_lists_every_command(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    for cmd in ("corpus", "segments", "datasets", "sweep", "reproduce"):
        assert cmd in out


def test_module_entry_point_runs() -> None:
    r = subprocess.run([sys.executable, "-m", "lachesis", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "lifetime-aware" in r.stdout


def test_missing_trace_is_a_clean_error(tmp_path, capsys) -> None:
    rc = main(["segments", str(tmp_path / "nope")])
    assert rc == 2
    assert "no trace at" in capsys.readouterr().err


def test_reproduce_finds_the_project_from_any_params_file(tmp_path, monkeypatch) -> None:
    from pathlib import Path

    from lachesis.reproduce import project_root

    repo = Path(__file__).resolve().parents[1]
    assert project_root(repo / "notebooks" / "params" / "paper.yaml") == repo
    monkeypatch.chdir(repo)  # a params file elsewhere falls back to the working directory
    assert project_root(tmp_path / "mine.yaml") == repo
