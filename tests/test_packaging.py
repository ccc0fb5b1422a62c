"""The package's metadata agrees with itself: pyproject.toml's authors, classifiers and addresses; CITATION.cff's
author and version; every requirement (dependencies, extras, the build's) met by requirements.lock, the build's
pinned to the lock's versions."""

from __future__ import annotations

import re
import tomllib

import yaml
from fixture_paths import REPO
from packaging.requirements import Requirement

from lachesis.version import __version__

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
CITATION = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))


def _lock() -> dict[str, str]:
    """requirements.lock's ``name==version`` lines, by normalized name."""
    out = {}
    for line in (REPO / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return out


def _name(req: Requirement) -> str:
    return re.sub(r"[-_.]+", "-", req.name).lower()


def test_every_requirement_is_met_by_the_lock_and_the_build_is_pinned_to_it() -> None:
    lock = _lock()
    project = PROJECT["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    for req in reqs:
        if _name(req) == "lachesis-repro":  # the package's own extras
            continue
        assert _name(req) in lock, f"requirements.lock lacks {req.name} (make lock)"
        assert req.specifier.contains(lock[_name(req)], prereleases=True), (str(req), lock[_name(req)])
    build = [Requirement(r) for r in PROJECT["build-system"]["requires"]]
    for req in build:
        pins = [s for s in req.specifier if s.operator == "=="]
        assert pins and pins[0].version == lock.get(_name(req)), (str(req), lock.get(_name(req)))
    assert "selenium" in lock  # the [browser] extra is locked too


def test_the_metadata_names_this_packages_authors_and_its_public_addresses() -> None:
    project = PROJECT["project"]
    assert [a["name"] for a in project["authors"]] == ["Lachesis reproducibility package contributors"]
    assert {"Programming Language :: Python :: 3.11", "Intended Audience :: Science/Research"} <= \
        set(project["classifiers"])
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # the license expression says it
    assert all(url.startswith("https://") for url in project["urls"].values())


def test_the_citation_names_the_package_and_the_paper() -> None:
    assert CITATION["version"] == __version__
    assert [a.get("name") for a in CITATION["authors"]] == [a["name"] for a in PROJECT["project"]["authors"]]
    paper = CITATION["preferred-citation"]
    assert [a["family-names"] for a in paper["authors"]] == ["Yang", "Lee", "Lee", "Kim", "Lee"]  # its first page
    assert "arXiv:2610.08378" in str(paper["identifiers"]) and paper["title"].startswith("Lachesis: Lifetime-Aware")
    text = (REPO / "CITATION.cff").read_text(encoding="utf-8").lower()
    assert "todo" not in text and "placeholder" not in text and "the lachesis reproducibility package authors" \
        not in text
