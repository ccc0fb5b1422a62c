"""Where the repository's folders are, whatever the working directory.

A notebook takes its folders (``out_dir``, ``cache_dir``) and inputs (a trace, a table) as parameters
relative to the repository root — ``build/figures``, ``figures``, ``tests/fixtures/traces`` — and
resolves them here, so papermill, JupyterLab, nbval or ``lachesis reproduce`` started from any folder
read and write the same files inside the repository.  An absolute path is used as given.  An input
that is not there is an error naming it, never a silent skip.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

#: What marks the repository root: the package's source tree beside its notebooks.
_MARKERS = ("pyproject.toml", "notebooks", "lachesis")


def _is_root(d: Path) -> bool:
    return all((d / m).exists() for m in _MARKERS)


def repo_root() -> Path:
    """The repository this package runs from: ``LACHESIS_ROOT`` if set, else the folder above the package
    (an editable install, the README's), else the nearest folder at or above the working directory that
    holds ``pyproject.toml``, ``notebooks/`` and ``lachesis/``."""
    if env := os.environ.get("LACHESIS_ROOT"):
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[1]
    if _is_root(here):
        return here
    cwd = Path.cwd().resolve()
    for d in (cwd, *cwd.parents):
        if _is_root(d):
            return d
    raise FileNotFoundError(f"no Lachesis repository above {cwd} or {here} (set LACHESIS_ROOT to the clone)")


def package_data(*parts: str) -> Path:
    """A file the package ships (``lachesis/data/...``: model configs, the source registry, validation tables)."""
    return Path(str(resources.files("lachesis").joinpath("data", *parts)))


def repo_path(p: str | os.PathLike[str], *, must_exist: bool = False, what: str = "") -> Path:
    """``p`` resolved from the repository root (an absolute path as is); with ``must_exist``, a missing
    path raises :class:`FileNotFoundError` naming ``what`` (the parameter) and where it was looked for."""
    if str(p) == "":
        raise ValueError(f"{what or 'path'}: empty path")
    path = Path(os.path.expanduser(str(p)))
    path = path if path.is_absolute() else repo_root() / path
    if must_exist and not path.exists():
        raise FileNotFoundError(f"{what + ': ' if what else ''}{path} does not exist "
                                f"(a relative path is read from the repository root, {repo_root()})")
    return path
