"""Writing files: atomically, and JSON from numpy and pandas values with one stated NaN policy.

Every file the package writes goes through :func:`atomic_write` (a temporary file in the same folder,
then a rename), so a reader never sees half a file; an output *folder* (``lachesis adapt``, ``lachesis
corpus``) goes through :func:`replace_folder` (a temporary sibling folder, swapped in whole), so it holds
one run's files in one format, and a failed write leaves the previous folder as it was; a *set* of files in a
shared folder (``lachesis evaluate``'s table and figure) goes through :func:`replace_files` (all written, then all
renamed), under :func:`exclusive` so two runs cannot interleave their sets.  Every JSON document goes
through
:func:`jsonable`, the package's one coercer of numpy scalars and arrays, pandas frames, tuples and
non-string keys into plain JSON values.

NaN policy: JSON has no NaN.  By default (``nan="null"``) a NaN becomes ``null``, so every JSON file
the package publishes is strict JSON any reader parses.  ``nan="keep"`` leaves NaN as a float
(``json.dumps`` then writes the non-standard ``NaN`` token, which Python's ``json`` reads back as NaN):
for files only the package itself reads back and must round-trip unchanged, such as a cache entry.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

NanPolicy = Literal["null", "keep"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """``write(tmp)`` into a temporary file in ``path``'s folder, then rename it to ``path``.  An OSError that
    names no file, or only the temporary one (a full disk, ENOSPC), is raised again naming ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the mode open() would
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        if e.filename is None or str(e.filename) == tmp:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_folder(dest: str | os.PathLike[str], write: Callable[[Path], Any],
                   foreign: Callable[[Path], str | None]) -> Path:
    """``write(tmp)`` into a new temporary sibling of ``dest``, then swap it in for ``dest`` whole.

    ``dest`` afterwards holds exactly what ``write`` wrote (no file of an earlier run or another format
    survives); if ``write`` or the swap fails, the temporary folder is removed and ``dest`` is left as it
    was.  An existing ``dest`` that is not empty is replaced only when ``foreign(dest)`` is None (it is
    an earlier output of the same command); otherwise it is refused, untouched, with a ValueError
    carrying ``foreign``'s reason.  The swap is two renames (``dest`` aside, the new folder in): for that
    instant ``dest`` is absent, never half written.
    """
    dest = Path(os.path.abspath(dest))
    _check_replaceable(dest, foreign)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".new"))
    try:
        write(tmp)
        os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes 0700; give the folder the mode mkdir would
        _swap_in(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _check_replaceable(dest: Path, foreign: Callable[[Path], str | None]) -> None:
    if not dest.exists():
        return
    if not dest.is_dir():
        raise ValueError(f"{dest}: exists and is not a folder")
    if any(dest.iterdir()) and (why := foreign(dest)):
        raise ValueError(f"{dest}: {why}; the output folder is replaced whole, so give a new or empty folder")


def stranger(folder: Path, allowed: Callable[[Path], bool]) -> str | None:
    """"holds 'x' ..." for the first entry of ``folder`` that ``allowed`` refuses, else None."""
    bad = [p.name for p in sorted(folder.iterdir()) if not allowed(p)]
    return f"holds {bad[0]!r} ({len(bad)} such entries) that this command does not write" if bad else None


def _swap_in(new: Path, dest: Path) -> None:
    """``new`` renamed to ``dest``; an existing ``dest`` is set aside first and deleted after (restored on failure)."""
    if not dest.exists():
        os.replace(new, dest)
        return
    old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".old"))
    os.replace(dest, old)  # onto the empty folder mkdtemp made
    try:
        os.replace(new, dest)
    except BaseException:
        os.replace(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_text(path: Path, text: str) -> Path:
    """``text`` as UTF-8 at ``path``, atomically."""
    path = Path(path)
    atomic_write(path, lambda t: t.write_text(text, encoding="utf-8"))
    return path


def jsonable(v: Any, nan: NanPolicy = "null") -> Any:
    """``v`` as plain JSON values: mappings (keys as strings), lists, str, int, float, bool, None.

    numpy scalars become Python scalars, arrays and tuples lists, a DataFrame its list of records; a
    NaN float follows ``nan`` (module docstring).  Anything else is returned as is (``json`` rejects it).
    """
    if isinstance(v, Mapping):
        return {str(k): jsonable(x, nan) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x, nan) for x in v]
    if isinstance(v, np.ndarray):
        return [jsonable(x, nan) for x in v.tolist()]
    if isinstance(v, pd.DataFrame):
        return jsonable(v.to_dict(orient="records"), nan)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return None if nan == "null" and math.isnan(f) else f
    return v


def write_json(path: Path, obj: Any, indent: int | None = 1, sort_keys: bool = False,
               nan: NanPolicy = "null") -> Path:
    """``obj`` (through :func:`jsonable`) as a JSON document ending in a newline, atomically."""
    return write_text(path, json.dumps(jsonable(obj, nan), indent=indent, sort_keys=sort_keys) + "\n")


_KIND_NAMES = {"f": "floats", "iu": "integers"}


def check_columns(owner: str, columns: Mapping[str, Any]) -> int:
    """The common length of ``columns``, each a 1-D numpy array; a ValueError names ``owner`` and the first
    field that is not one of that length (a record of parallel arrays, e.g. one kept beside a cache entry)."""
    n = len(next(iter(columns.values()))) if columns else 0
    for f, a in columns.items():
        if not isinstance(a, np.ndarray) or a.ndim != 1 or len(a) != n:
            raise ValueError(f"{owner}: field {f!r} must be a 1-D array of length {n}")
    return n


def read_columns(owner: str, arrays: Mapping[str, Any], kinds: Mapping[str, tuple[str, Any]]) -> dict[str, np.ndarray]:
    """The columns ``kinds`` names (field -> (accepted dtype kinds, ``"f"`` or ``"iu"``; the dtype to cast
    to)) read from ``arrays`` (e.g. an ``.npz``); a ValueError names a missing or mistyped column."""
    missing = [f for f in kinds if f not in arrays]
    if missing:
        raise ValueError(f"{owner}: missing column {missing[0]!r}")
    out = {}
    for f, (accepted, dtype) in kinds.items():
        a = np.asarray(arrays[f])
        if a.dtype.kind not in accepted:
            raise ValueError(f"{owner}: column {f!r} must hold {_KIND_NAMES[accepted]}, got {a.dtype}")
        out[f] = a.astype(dtype)
    return out


def replace_files(folder: str | os.PathLike[str], write: Callable[[Path], Sequence[Path]]) -> list[Path]:
    """``write(tmp)`` makes a set of files in a new temporary folder inside ``folder`` and returns them; then each
    replaces its namesake in ``folder``.  Every file of the set is complete before any is replaced, so a write
    that fails (a full disk) leaves the previous set as it was, never a new file beside an old one's siblings;
    the temporary folder is removed either way.  An OSError is raised again naming the file in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=".new-"))
    try:
        made = [Path(p) for p in write(tmp)]
        for p in made:
            os.replace(p, folder / p.name)
        return [folder / p.name for p in made]
    except OSError as e:
        name = Path(e.filename).name if e.filename else "(a file of the set)"
        raise OSError(e.errno, f"{e.strerror or e}; no file of the set was replaced", str(folder / name)) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def exclusive(lock: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (made for it, removed after) while the block runs; a second
    process asking for it meanwhile is refused at once with a one-line ValueError naming ``what`` and the holder's
    process id.  POSIX ``flock``; where the platform has none, the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover (Windows)
        yield
        return
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_UMASK)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise ValueError(f"{what}: another process (pid {holder or '?'}) is writing it now; wait for it, or give "
                             "another output folder or name") from None
        try:  # its last holder may have removed the file between our open and our lock: lock the one at the path
            current = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)


__all__ = ["atomic_write", "replace_folder", "replace_files", "exclusive", "stranger", "write_text", "jsonable",
           "write_json", "check_columns", "read_columns"]
