"""The Makefile a newcomer meets: ``make`` alone lists every target with what it does, ``make lab`` opens copies in
build/ (never the source notebooks), and CI reproduces before it tests, so a tracked file a run rewrites is caught."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from fixture_paths import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

#: the stamp that installs .venv: `make -n -o STAMP` prints a target's own commands, never an install
STAMP = ".venv/.installed-stamp"


def _make(*args: str) -> str:
    return subprocess.run(["make", "-s", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def _targets() -> dict[str, str]:
    """Each target the Makefile names (not a pattern rule or a file) with the first words of its ``##`` comment."""
    out, text = {}, ""
    for line in (REPO / "Makefile").read_text().splitlines():
        if line.startswith("## "):
            text += " " + line[3:]
        elif m := re.match(r"^([a-z][a-z-]*):", line):
            out[m.group(1)] = " ".join(text.split())
            text = ""
        elif not line.strip():
            text = ""
    return out


def test_make_alone_lists_every_target_with_its_comment() -> None:
    targets = _targets()
    assert {"help", "reproduce", "reproduce-ci", "test", "test-fast", "lint", "lab", "clean-build"} <= set(targets)
    assert all(targets.values()), [t for t, text in targets.items() if not text]  # every target says what it does
    shown = _make()
    assert shown == _make("help")
    listed = dict(re.findall(r"^  make (\S+) +(.*)$", shown, re.MULTILINE))
    assert set(listed) == set(targets)
    for target, text in targets.items():
        assert listed[target].split()[:4] == text.split()[:4], target


def test_make_lab_opens_copies_in_build_never_the_sources() -> None:
    """JupyterLab's autosave writes outputs into what it opens: the copies under build/lab, made from the sources."""
    dry = _make("-n", "-B", "-o", STAMP, "lab")
    lab = [ln for ln in dry.splitlines() if "jupyter lab" in ln]
    assert len(lab) == 1 and "--notebook-dir=build/lab " in lab[0] and lab[0].rstrip().endswith(
        "notebooks/explorer.ipynb"), lab
    copies = re.findall(r"cp notebooks/(\S+) build/lab/notebooks/(\S+)", dry)
    assert {a for a, b in copies if a == b} == {p.name for p in (REPO / "notebooks").glob("*.ipynb")}


def test_ci_reproduces_before_it_tests_and_checks_the_tree_is_clean() -> None:
    run = (REPO / ".ci" / "run").read_text()
    steps = [ln.strip() for ln in run.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    make = [s for s in steps if s.startswith("make ")]
    assert make[:2] == ["make reproduce-ci", "make test"], make
    assert any("git status --porcelain" in s for s in steps[steps.index("make test"):])
