"""The evaluation cache: one JSON entry per search or run at a load, and a baseline run's arrays beside it.

Every entry is keyed by a hash of its inputs (:func:`point_key`: the point, its trace's fingerprint, the
configuration, the search settings, the load and :data:`CODE_VERSION`), written atomically with a digest
of its content, and checked when read: an entry whose stored key, code or package version differs, whose
content does not match its digest, or that does not parse is reported (a :class:`CacheWarning` naming its
path) and recomputed.  A baseline run's close record and write timeline are ``<key>.closes.npz`` and
``<key>.timeline.npz`` beside its entry: arrays only, read without pickle, checked against their own key,
the trace and their digest the same way (docs/design.md §5, "Evaluation cache").
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import warnings
import zipfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from lachesis.evaluation.bound import Timeline
from lachesis.evaluation.grid import Point
from lachesis.io import atomic_write, jsonable
from lachesis.node import simulator as sim
from lachesis.node.capacity import SearchParams
from lachesis.node.clairvoyance import CloseTimes
from lachesis.version import __version__

#: the version of the code that writes entries: part of every key, checked on every read
CODE_VERSION = f"sweep-6/{sim.SIM_VERSION}"


class CacheWarning(UserWarning):
    """A sweep cache entry that could not be used (foreign, edited, stale or truncated): recomputed."""


def canonical(o: Any) -> Any:
    """A hash-seed independent form of a config (sets sorted, mappings sorted by key)."""
    if isinstance(o, (set, frozenset)):
        return sorted(map(str, o))
    if isinstance(o, dict):
        return {str(k): canonical(v) for k, v in sorted(o.items(), key=lambda kv: str(kv[0]))}
    if isinstance(o, (list, tuple)):
        return [canonical(v) for v in o]
    return o


def point_key(point: Point, plan_fingerprint: str, params: SearchParams, n: int | None = None) -> str:
    """Cache key: hash of the point's inputs, the trace fingerprint, the search settings, the load
    (``n``; None = the point's own capacity search) and the code version."""
    pt = asdict(point)
    if not pt["overrides"]:  # the paper's setting: no overrides field, so its keys name no knob
        del pt["overrides"]
    blob = json.dumps(dict(point=pt, trace=plan_fingerprint, config=canonical(asdict(point.config())),
                           params=asdict(params), load=n, code=CODE_VERSION), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def deployment_key(base_keys: Sequence[str], configs: Sequence[str], sizing: str, policies: Sequence[str]) -> str:
    """Cache key of a deployment's joint load sizing: its base searches' keys (one per seed, each naming its
    seed's trace, the configuration, the search settings and the code), the configurations and policies it
    covers, the rule."""
    blob = json.dumps(dict(deployment=list(base_keys), configs=list(configs), sizing=sizing, policies=list(policies),
                           code=CODE_VERSION), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def entry_digest(entry: dict) -> str:
    """SHA-256 of an entry's content (every field but its digest), as written."""
    body = {k: v for k, v in entry.items() if k != "digest"}
    return hashlib.sha256(json.dumps(jsonable(body, nan="keep"), sort_keys=True).encode()).hexdigest()


def entry_path(cache_dir: str | os.PathLike | None, key: str) -> Path | None:
    """Where ``key``'s entry lives in ``cache_dir`` (None without a cache)."""
    return Path(cache_dir) / f"{key}.json" if cache_dir else None


def _foreign(entry: dict, key: str) -> str | None:
    """Why a cache entry (or a close record's header) is not ``key``'s under this code, or None."""
    if entry.get("key") != key:
        return f"belongs to key {entry.get('key')!r}, not {key!r}"
    if entry.get("code") != CODE_VERSION or entry.get("version") != __version__:
        return (f"written by code {entry.get('code')!r} / package {entry.get('version')!r}, "
                f"not {CODE_VERSION!r} / {__version__!r}")
    return None


def file_or_absent(path: Path) -> None:
    """Refuse a cache entry's path that exists but is not a file (a folder there would be recomputed and fail to
    be written back, every time): a one-line error naming it."""
    if path.exists() and not path.is_file():
        raise IsADirectoryError(errno.EISDIR, "a sweep cache entry's path is not a file; remove it", str(path))


def read_entry(path: Path | None, key: str) -> dict | None:
    """The entry at ``path`` if it is intact and belongs to ``key``; else None (and a warning if it existed)."""
    if path is None or not path.exists():
        return None
    file_or_absent(path)
    try:
        entry = json.loads(path.read_text())
        problem = None if isinstance(entry, dict) else "not a JSON object"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        entry, problem = None, f"unreadable ({type(e).__name__}: {e})"
    if problem is None:
        problem = _foreign(entry, key)
        if problem is None and entry.get("digest") != entry_digest(entry):
            problem = "its content does not match its digest (edited or truncated)"
    if problem is not None:
        warnings.warn(f"sweep cache entry {path}: {problem}; recomputing it", CacheWarning, stacklevel=3)
        return None
    entry.pop("digest")
    return entry


def as_entry(out: dict, key: str) -> dict:
    """``out`` as its cache entry (key, versions; JSON-normal values), without the digest."""
    entry = dict(out, key=key, code=CODE_VERSION, version=__version__)
    return json.loads(json.dumps(jsonable(entry, nan="keep")))


def write_entry(path: Path | None, entry: dict) -> dict:
    """``entry`` written atomically at ``path`` with its digest (nothing without a cache); the entry."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(jsonable(dict(entry, digest=entry_digest(entry)), nan="keep"), indent=1)
        atomic_write(path, lambda tmp: tmp.write_text(text))
    return entry


def closes_path(cache_dir: str | os.PathLike | None, key: str) -> Path | None:
    """Where the close record of ``key``'s run lives (None without a cache)."""
    return Path(cache_dir) / f"{key}.closes.npz" if cache_dir else None


def _arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode() + a.tobytes())
    return h.hexdigest()


def _sidecar_write(path: Path | None, key: str, fingerprint: str, arrays: dict[str, np.ndarray]) -> None:
    """A baseline run's arrays beside its entry (``.npz``) with a JSON header: key, versions, trace, digest."""
    if path is None:
        return
    meta = dict(key=key, code=CODE_VERSION, version=__version__, fingerprint=fingerprint,
                digest=_arrays_digest(arrays))

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a path
            # numpy's stub reads a mapping of arrays after ** as its allow_pickle flag
            np.savez_compressed(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)  # type: ignore[arg-type]

    atomic_write(path, write)


def _sidecar_problem(meta: Any, arrays: dict[str, np.ndarray], key: str, fingerprint: str) -> str | None:
    """Why a sidecar's header and arrays are not ``key``'s on this trace under this code, or None."""
    if not isinstance(meta, dict):
        return "its header is not a JSON object"
    if (problem := _foreign(meta, key)) is not None:
        return problem
    if meta.get("digest") != _arrays_digest(arrays):
        return "its arrays do not match their digest (edited or truncated)"
    if meta.get("fingerprint") != fingerprint:
        return f"recorded on trace {meta.get('fingerprint')!r}, not {fingerprint!r}"
    return None


def _sidecar_read(path: Path | None, key: str, fingerprint: str, build: Callable[[dict], Any]) -> Any:
    """``build(arrays)`` of the sidecar at ``path`` if it is intact and belongs to ``key`` and the trace;
    else None (a :class:`CacheWarning` if it existed).  Read without pickle."""
    if path is None or not path.exists():
        return None
    file_or_absent(path)
    problem, out = None, None
    try:
        with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        if (problem := _sidecar_problem(meta, arrays, key, fingerprint)) is None:
            out = build(arrays)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        problem = f"unreadable ({type(e).__name__}: {e})"
    if problem is not None:
        warnings.warn(f"sweep cache entry {path}: {problem}; recomputing it", CacheWarning, stacklevel=3)
        return None
    return out


def write_closes(path: Path | None, key: str, closes: CloseTimes) -> None:
    """A baseline run's close record beside its entry."""
    _sidecar_write(path, key, closes.fingerprint, closes.arrays())


def read_closes(path: Path | None, key: str, fingerprint: str) -> CloseTimes | None:
    """The close record at ``path`` if it is intact and belongs to ``key``; else None (a warning if it existed)."""
    return _sidecar_read(path, key, fingerprint, lambda arrays: CloseTimes.from_arrays(arrays, fingerprint))


def timeline_path(cache_dir: str | os.PathLike | None, key: str) -> Path | None:
    """Where the write timeline of ``key``'s run lives (None without a cache)."""
    return Path(cache_dir) / f"{key}.timeline.npz" if cache_dir else None


def write_timeline(path: Path | None, key: str, fingerprint: str, timeline: Timeline) -> None:
    """A baseline run's write timeline beside its entry (positions and tokens as int32 when they fit)."""
    small = {f: a.astype(np.int32) if a.dtype.kind == "i" and (not a.size or a.max() < 2**31) else a
             for f, a in timeline.arrays().items()}
    _sidecar_write(path, key, fingerprint, small)


def read_timeline(path: Path | None, key: str, fingerprint: str) -> Timeline | None:
    """The write timeline at ``path`` if it is intact and belongs to ``key``; else None (a warning if it existed)."""
    return _sidecar_read(path, key, fingerprint, Timeline.from_arrays)
