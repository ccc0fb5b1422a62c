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
        " build/lab/notebooks/explorer.ipynb"), lab
    copies = re.findall(r"cp notebooks/(\S+) build/lab/notebooks/(\S+)", dry)
    assert {a for a, b in copies if a == b} == {p.name for p in (REPO / "notebooks").glob("*.ipynb")}


@pytest.mark.slow
def test_make_lab_serves_the_copies(tmp_path) -> None:
    """`make lab` serves the explorer's copy from its root, build/lab (the file to open lies under it)."""
    import json
    import os
    import secrets
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(8)
    log = (tmp_path / "lab.log").open("w")
    lab = subprocess.Popen(["make", "-o", STAMP, "lab", f"ARGS=--no-browser --port={port} --ip=127.0.0.1 "
                            f"--IdentityProvider.token={token}"],
                           cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                           env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config")})
    try:
        url = f"http://127.0.0.1:{port}/api/contents/notebooks/explorer.ipynb?token={token}&content=0"
        deadline, served = time.monotonic() + 90, None
        while time.monotonic() < deadline and lab.poll() is None and served is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    served = json.load(r)
            except OSError:
                time.sleep(0.5)
        assert served is not None, (tmp_path / "lab.log").read_text()[-2000:]
        assert served["path"] == "notebooks/explorer.ipynb" and served["type"] == "notebook"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/?token={token}", timeout=5) as r:
            top = {e["name"] for e in json.load(r)["content"]}
        assert "notebooks" in top and not {"lachesis", "figures", "pyproject.toml"} & top, top  # its root: build/lab
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(lab.pid, sig)
                lab.wait(timeout=20)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def test_ci_reproduces_before_it_tests_and_checks_the_tree_is_clean() -> None:
    run = (REPO / ".ci" / "run").read_text()
    steps = [ln.strip() for ln in run.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    make = [s for s in steps if s.startswith("make ")]
    assert make[:2] == ["make reproduce-ci", "make test"], make
    assert any("git status --porcelain" in s for s in steps[steps.index("make test"):])
