"""The committed figures say which sources made them (``figures/ENVIRONMENT.json``, or the README's one line
``Figures made at commit <sha>``), and the README shows them: the headline images and every executed notebook."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lachesis import reproduce

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = ("figures/fig09_multi_agent_lifetime.png", "figures/fig11_single_agent_lifetime.png",
            "figures/gain_vs_operating_point.png")


def test_the_committed_figures_were_made_by_this_source_or_the_readme_names_their_commit() -> None:
    problem = reproduce.provenance_problem(ROOT)
    assert problem is None, problem


def test_the_readme_shows_the_headline_figures_and_links_every_executed_notebook() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", text)
    assert set(HEADLINE) <= set(images)
    assert all((ROOT / p).is_file() for p in images), [p for p in images if not (ROOT / p).is_file()]
    pages = set(re.findall(r"\]\((figures/notebooks/[^)]+\.html)\)", text))
    assert pages == {f"figures/{reproduce.HTML_DIR}/{p.stem}.html" for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_figures_written_by_a_run_that_records_its_commit_have_every_notebook_page() -> None:
    env = json.loads((ROOT / "figures" / reproduce.ENVIRONMENT_FILE).read_text(encoding="utf-8"))
    if "commit" not in env:
        pytest.skip("figures/ENVIRONMENT.json predates the pages (no commit recorded); make reproduce writes both")
    missing = [p.stem for p in (ROOT / "notebooks").glob("*.ipynb")
               if not (ROOT / "figures" / reproduce.HTML_DIR / f"{p.stem}.html").is_file()]
    assert not missing, f"figures/notebooks lacks the pages of {missing}: rerun make reproduce"


# ------------------------------------------------------------------------------------------------
# The digest and the check on a throw-away repository
# ------------------------------------------------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _project(root: Path) -> Path:
    (root / "lachesis" / "sub").mkdir(parents=True)
    (root / "notebooks" / "params").mkdir(parents=True)
    (root / "lachesis" / "a.py").write_text("x = 1\n")
    (root / "lachesis" / "sub" / "b.py").write_text("y = 2\n")
    (root / "notebooks" / "n.ipynb").write_text("{}\n")
    (root / "notebooks" / "params" / "p.yaml").write_text("common: {}\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "figures").mkdir()
    return root


def _record(root: Path, **extra) -> None:
    env = {"sources_sha256": reproduce.source_digest(root), **extra}
    (root / "figures" / reproduce.ENVIRONMENT_FILE).write_text(json.dumps(env))


def test_the_digest_reads_content_only_in_a_fixed_order(tmp_path) -> None:
    root = _project(tmp_path)
    d = reproduce.source_digest(root)
    (root / "lachesis" / "a.py").write_bytes(b"x = 1\r\n")  # line endings of another machine
    (root / "lachesis" / "__pycache__").mkdir()
    (root / "lachesis" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0junk")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("not a source")
    (root / "lachesis" / "sub" / "b.py").chmod(0o600)
    assert reproduce.source_digest(root) == d
    (root / "lachesis" / "sub" / "b.py").write_text("y = 3\n")
    assert reproduce.source_digest(root) != d
    # folders before a longer name on every OS: lachesis/a/ sorts before lachesis/a.py, as pathlib orders them
    assert reproduce.is_source("lachesis/a/c.py") and reproduce.is_source("notebooks/params/p.yaml")
    assert not reproduce.is_source("notebooks/sub/n.ipynb") and not reproduce.is_source("lachesis/x.pyc")


@needs_git
def test_the_check_needs_the_readme_line_once_the_sources_move_on(tmp_path) -> None:
    root = _project(tmp_path)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "made the figures")
    made = _git(root, "rev-parse", "HEAD")
    state = reproduce.git_state(root)
    assert state == {"commit": made, "dirty": False}
    assert reproduce.source_digest_at(root, made) == reproduce.source_digest(root)
    _record(root, **state)
    (root / "README.md").write_text("# x\n")
    assert reproduce.provenance_problem(root) is None  # the figures are this source's

    (root / "lachesis" / "a.py").write_text("x = 2\n")
    assert reproduce.git_state(root)["dirty"] is True
    problem = reproduce.provenance_problem(root)
    assert problem
    assert "regenerate them (make reproduce) or add the README line 'Figures made at commit <sha>'" in problem
    assert made in problem and len(problem.splitlines()) == 1  # it names the commit ENVIRONMENT.json records

    (root / "README.md").write_text(f"# x\n\nFigures made at commit {made[:7]} (then the code moved on).\n")
    assert reproduce.provenance_problem(root) is None
    (root / "README.md").write_text("# x\n\nFigures made at commit 0123abc.\n")
    assert "names no commit in this repository's history" in reproduce.provenance_problem(root)
    _git(root, "commit", "-qam", "the code moved on")
    later = _git(root, "rev-parse", "HEAD")
    (root / "README.md").write_text(f"Figures made at commit {later}\n")  # a commit that did not make them
    assert "that commit's sources are not the ones" in reproduce.provenance_problem(root)


def test_without_the_environment_file_the_check_says_what_writes_it(tmp_path) -> None:
    root = _project(tmp_path)
    assert "missing; make reproduce writes it" in reproduce.provenance_problem(root)


def test_outside_git_the_state_is_unknown_and_the_readme_line_is_taken_as_given(tmp_path, monkeypatch) -> None:
    root = _project(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above the project either
    assert reproduce.git_state(root) == {"commit": None, "dirty": None}
    _record(root)
    (root / "lachesis" / "a.py").write_text("x = 2\n")
    (root / "README.md").write_text("Figures made at commit abc1234\n")
    assert reproduce.provenance_problem(root) is None
