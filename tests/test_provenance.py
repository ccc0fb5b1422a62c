"""The committed figures say which sources made them and hold the bytes that run wrote (``figures/ENVIRONMENT.json``:
the sources' digest and every file's sha256), and the README shows them: the headline images and the pages."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lachesis import pages, provenance

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = ("figures/fig09_multi_agent_lifetime.png", "figures/fig11_single_agent_lifetime.png",
            "figures/gain_vs_operating_point.png")


def _committed() -> dict:
    env = provenance.read_environment(ROOT / "figures" / provenance.ENVIRONMENT_FILE)
    if "figures" not in env:  # written before the figures' digests were recorded; the next make reproduce adds them
        pytest.skip("figures/ENVIRONMENT.json predates the figures' digests (an older lachesis reproduce wrote it); "
                    "make reproduce rewrites it")
    return env


def test_the_committed_figures_are_this_sources_and_unedited() -> None:
    _committed()
    problem = provenance.provenance_problem(ROOT)
    assert problem is None, problem


def test_the_readme_shows_the_headline_figures_and_links_the_pages() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", text)
    assert set(HEADLINE) <= set(images)
    assert all((ROOT / p).is_file() for p in images), [p for p in images if not (ROOT / p).is_file()]
    linked = set(re.findall(r"\]\((figures/notebooks/[^)#]+)\)", text))
    every = {f"figures/{pages.FOLDER}/{p.stem}.html" for p in (ROOT / "notebooks").glob("*.ipynb")}
    index = {f"figures/{pages.FOLDER}/", f"figures/{pages.FOLDER}/README.md", f"figures/{pages.FOLDER}/index.html"}
    assert linked & index or every <= linked, "the README links the pages' index or every page"
    assert all((ROOT / p).exists() for p in linked), [p for p in linked if not (ROOT / p).exists()]


def test_every_notebook_has_its_pages_and_they_show_no_warning_path_or_widget() -> None:
    _committed()
    folder = ROOT / "figures" / pages.FOLDER
    import nbformat

    for src in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for ext in ("html", "ipynb"):
            assert (folder / f"{src.stem}.{ext}").is_file(), f"figures/notebooks lacks {src.stem}.{ext}: make reproduce"
        nb = nbformat.read(folder / f"{src.stem}.ipynb", as_version=4)
        assert pages.problems(nb) == [], (src.stem, pages.problems(nb))
        title = pages.title_of(nbformat.read(src, as_version=4), src.stem)
        assert f"<title>{title}</title>" in (folder / f"{src.stem}.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# The digests and the check, on a throw-away project
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
    (root / "figures" / "notebooks").mkdir(parents=True)
    (root / "figures" / "fig01.csv").write_text("config,years\n1/7,4.25\n")
    (root / "figures" / "fig01.png").write_bytes(bytes(range(256)) * 4)
    (root / "figures" / "notebooks" / "fig01.html").write_text("<html>a page</html>\n")
    return root


def _record(root: Path) -> dict:
    path = provenance.write_environment(root / "figures", root, root / "notebooks" / "params" / "p.yaml")
    return json.loads(path.read_text())


def test_the_digest_reads_content_only_in_a_fixed_order(tmp_path) -> None:
    root = _project(tmp_path)
    d = provenance.source_digest(root)
    (root / "lachesis" / "a.py").write_bytes(b"x = 1\r\n")  # line endings of another machine
    (root / "lachesis" / "__pycache__").mkdir()
    (root / "lachesis" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0junk")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("not a source")
    (root / "lachesis" / "sub" / "b.py").chmod(0o600)
    assert provenance.source_digest(root) == d
    (root / "lachesis" / "sub" / "b.py").write_text("y = 3\n")
    assert provenance.source_digest(root) != d
    # folders before a longer name on every OS: lachesis/a/ sorts before lachesis/a.py, as pathlib orders them
    assert provenance.is_source("lachesis/a/c.py") and provenance.is_source("notebooks/params/p.yaml")
    assert not provenance.is_source("notebooks/sub/n.ipynb") and not provenance.is_source("lachesis/x.pyc")


def test_the_record_holds_every_figures_digest_and_nothing_of_the_machine_or_the_moment(tmp_path) -> None:
    import socket

    root = _project(tmp_path)
    env = _record(root)
    assert sorted(env["figures"]) == ["fig01.csv", "fig01.png", "notebooks/fig01.html"]
    assert env["sources_sha256"] == provenance.source_digest(root) and env["params_file"]["path"] == \
        "notebooks/params/p.yaml"
    assert env["simulator"]["backend"] in ("native", "python")
    text = json.dumps(env)
    for volatile in (str(tmp_path), socket.gethostname(), "commit", "dirty", "started", "num_threads"):
        assert volatile not in text, volatile
    first = (root / "figures" / provenance.ENVIRONMENT_FILE).read_bytes()
    _record(root)  # the same sources and figures: the same bytes
    assert (root / "figures" / provenance.ENVIRONMENT_FILE).read_bytes() == first
    assert provenance.provenance_problem(root) is None


@pytest.mark.parametrize("edit, words", [
    (lambda f: (f / "fig01.csv").write_text("config,years\n1/7,4.35\n"), "figures/fig01.csv: its sha256 is not"),
    (lambda f: (f / "fig01.png").write_bytes(bytes([(f / "fig01.png").read_bytes()[0] ^ 1])
                                             + (f / "fig01.png").read_bytes()[1:]), "figures/fig01.png: its sha256"),
    (lambda f: (f / "fig01.csv").unlink(), "figures/fig01.csv: recorded in ENVIRONMENT.json but missing"),
    (lambda f: (f / "fig02.csv").write_text("x\n"), "figures/fig02.csv: not recorded in ENVIRONMENT.json"),
    (lambda f: (f / "notebooks" / "fig01.html").write_text("<html>edited</html>\n"), "notebooks/fig01.html"),
    (lambda f: (f / ".fig01.pdfk3j_x.tmp").write_text("half"), "figures/.fig01.pdfk3j_x.tmp: a temporary file"),
    (lambda f: (f / "ENVIRONMENT.json").write_text((f / "ENVIRONMENT.json").read_text()[:40]),
     "figures/ENVIRONMENT.json: not valid JSON ("),
])
def test_an_edited_added_or_missing_figure_or_a_truncated_record_is_named_in_one_line(tmp_path, edit, words) -> None:
    """One digit of a CSV, one bit of a PNG, a page, a file added or removed, a stopped write's temporary, a cut
    ENVIRONMENT.json: each is named, with its file, in one line."""
    root = _project(tmp_path)
    _record(root)
    edit(root / "figures")
    problem = provenance.provenance_problem(root)
    assert problem and words in problem and len(problem.splitlines()) == 1, problem


def test_figures_of_other_sources_or_an_older_record_are_named(tmp_path) -> None:
    root = _project(tmp_path)
    _record(root)
    (root / "lachesis" / "a.py").write_text("x = 2\n")
    assert "made from other sources than this tree's" in provenance.provenance_problem(root)
    env_file = root / "figures" / provenance.ENVIRONMENT_FILE
    env_file.write_text(json.dumps({"sources_sha256": provenance.source_digest(root), "commit": "abc"}))
    assert "records no digest of the figures" in provenance.provenance_problem(root)
    env_file.unlink()
    assert "missing; make reproduce writes it" in provenance.provenance_problem(root)
    with pytest.raises(ValueError, match=r"ENVIRONMENT.json: not valid JSON"):
        env_file.write_text("{")
        provenance.read_environment(env_file)


def test_the_compiler_of_the_native_core_is_read_from_its_elf_comment(tmp_path) -> None:
    import importlib.util

    assert provenance.compiler_of(tmp_path / "missing.so") is None
    (tmp_path / "not_elf.so").write_bytes(b"MZ" + bytes(200))
    assert provenance.compiler_of(tmp_path / "not_elf.so") is None
    (tmp_path / "cut.so").write_bytes(b"\x7fELF\x02\x01" + bytes(10))  # truncated: unknown, not a crash
    assert provenance.compiler_of(tmp_path / "cut.so") is None
    spec = importlib.util.find_spec("lachesis.node._core")
    if spec is None or spec.origin is None:
        pytest.skip("the native core is not built here")
    found = provenance.compiler_of(Path(spec.origin))
    if shutil.which("readelf"):
        shown = subprocess.run(["readelf", "-p", ".comment", spec.origin], capture_output=True, text=True).stdout
        assert found is not None and found["banner"] in shown and found["version"] in found["banner"]
    assert provenance.simulator() == {"backend": "native", "compiler": found}


@needs_git
def test_the_runs_commit_goes_to_build_not_to_the_record(tmp_path) -> None:
    root = _project(tmp_path)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "made the figures")
    made = _git(root, "rev-parse", "HEAD")
    assert provenance.git_state(root) == {"commit": made, "dirty": False}
    assert provenance.source_digest_at(root, made) == provenance.source_digest(root)
    first = _record(root)
    record = json.loads(provenance.write_run_record(root / "build" / "run.json", root, root / "figures", 0.0)
                        .read_text())
    assert record["commit"] == made and record["dirty"] is False and record["figures"] == "figures"
    (root / "lachesis" / "a.py").write_text("x = 2\n")
    assert provenance.git_state(root)["dirty"] is True
    (root / "lachesis" / "a.py").write_text("x = 1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "the figures committed", "--allow-empty")
    assert _record(root) == first  # a later commit of the same sources: the same record


def test_outside_git_the_state_is_unknown(tmp_path, monkeypatch) -> None:
    root = _project(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above the project either
    assert provenance.git_state(root) == {"commit": None, "dirty": None}
