"""A workload's replay plan, built once per process and keyed on the trace's content; the ranker's keys kept.

:func:`workload_plan` turns a corpus workload or a trace path into the simulator's plan (trace ->
segments -> ranker keys -> plan), memoized per process; a trace path is keyed on its content
(:func:`content_digest`), so a changed file is re-read.  The ranker's keys of each trace and clock are
kept in the cache folder as ``<key>.rank.json`` (:func:`rank_keys_cached`), so every process of a grid
reads the same fit (docs/design.md §5, "Evaluation cache").
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import warnings
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from lachesis.analysis import segments
from lachesis.evaluation import knobs, store
from lachesis.evaluation.grid import Point
from lachesis.io import atomic_write, jsonable
from lachesis.node.plan import Plan, build_plan, trace_fingerprint, trace_row_hashes
from lachesis.traces import clock, gaps
from lachesis.traces.trace import Trace
from lachesis.version import __version__


def content_digest(path: str | os.PathLike) -> str:
    """sha256 of a trace file, or of every file under a trace folder (relative names and bytes)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"trace {str(p)!r}: no such file or folder")
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(p) if f != p else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def workload_plan(workload: str, scale: float, seed: int, trace: str = "", laden_close: str = "last_read",
                  overrides: tuple = (), cache_dir: str | os.PathLike | None = None) -> Plan:
    """Trace -> segments -> ranker keys -> replay plan, for a corpus workload or a trace path.

    ``overrides``: clock knobs (:func:`lachesis.evaluation.knobs.apply_clock`) applied to the trace's reference clock,
    and
    trace knobs (:func:`lachesis.traces.gaps.fill`) to the trace: the ranker is fitted on the trace before its sessions
    are drawn, and every drawn copy of a worker takes its original's key.
    Built once per process per input: a trace path is keyed on its content, so a changed file is re-read.
    With ``cache_dir``, the ranker's keys are kept there (:func:`rank_keys_cached`), so the processes of a
    grid fit the ranker once per trace and clock.
    """
    return _plan(workload, float(scale), int(seed), str(trace), content_digest(trace) if trace else "", laden_close,
                 knobs.plan_overrides(knobs.canonical(overrides)), str(cache_dir) if cache_dir else "")


@lru_cache(maxsize=8)
def _plan(workload: str, scale: float, seed: int, trace: str, digest: str, laden_close: str,
          overrides: tuple = (), cache_dir: str = "") -> Plan:
    """:func:`workload_plan` with its inputs made hashable (the trace path's content as ``digest``)."""
    tr = _trace(workload, scale, seed, trace, digest)
    clk = knobs.apply_clock(clock.clock_for(tr), overrides)
    fitted, replayed, origin = gaps.fill(tr, knobs.trace_overrides(overrides), seed)
    prep = segments.prepare(fitted, scale, seed, clock=clk)
    keys = rank_keys_cached(prep, cache_dir or None)
    if origin is not None:  # a drawn copy is ranked by its original's out-of-fold key (folds grouped by session)
        prep = segments.prepare(replayed, scale, seed, clock=clk)
        keys = pd.Series(keys.reindex([origin[a] for a in origin]).to_numpy(), index=pd.Index(list(origin),
                         name=keys.index.name), name=keys.name).dropna() if len(keys) else keys
    return build_plan(prep.trace, prep.segments, keys, laden_close=laden_close)


@lru_cache(maxsize=1)
def _ranker_code() -> str:
    """A digest of the code the ranker's keys depend on (segments, clock, ranker) and of the package and
    scikit-learn versions: a changed model never reads keys of the old one."""
    import sklearn

    from lachesis.analysis import ranker  # scikit-learn loads only where keys are fitted or checked

    h = hashlib.sha256(f"{__version__}/{sklearn.__version__}".encode())
    for m in (segments, clock, ranker):
        h.update(Path(inspect.getfile(m)).read_bytes())
    return h.hexdigest()


def rank_keys_cached(prep: segments.Prepared, cache_dir: str | os.PathLike | None) -> pd.Series:
    """:func:`lachesis.analysis.ranker.rank_keys` of a prepared trace (:func:`lachesis.analysis.segments.prepare`),
    kept in
    ``cache_dir`` as ``<key>.rank.json``: keyed by a SHA-256 of the trace's requests and spawns, its clock,
    the seed and :func:`_ranker_code`, checked when read against its key and its content digest (a
    :class:`~lachesis.evaluation.store.CacheWarning` and a refit otherwise), written atomically.  The keys read back
    are the floats that were written, so the plan is the same."""
    from lachesis.analysis.ranker import rank_keys  # scikit-learn loads only where keys are fitted

    if not cache_dir or prep.trace.spawns is None or not len(prep.trace.spawns):  # nothing worth keeping
        return rank_keys(prep.trace, prep.segments, prep.seed)
    h = hashlib.sha256(b"".join(trace_row_hashes(prep.trace)))
    h.update(json.dumps(jsonable(dict(clock=store.canonical(asdict(prep.clock)), seed=prep.seed, code=_ranker_code()),
                                 nan="keep"), sort_keys=True, default=str).encode())
    key = h.hexdigest()[:32]
    path = Path(cache_dir) / f"{key}.rank.json"
    if (hit := _rank_read(path, key)) is not None:
        return hit
    keys = rank_keys(prep.trace, prep.segments, prep.seed)
    _rank_write(path, key, keys)
    return keys


def _rank_read(path: Path, key: str) -> pd.Series | None:
    """The ranker's keys at ``path`` if the sidecar is ``key``'s and its content matches its digest;
    else None (with a :class:`~lachesis.evaluation.store.CacheWarning` naming the file when one was there)."""
    if not path.exists():
        return None
    store.file_or_absent(path)
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(got, dict) or got.get("key") != key:
            raise ValueError(f"stored for key {got.get('key') if isinstance(got, dict) else None!r}")
        if got.get("digest") != store.entry_digest(got):
            raise ValueError("its content does not match its digest (edited or truncated)")
        if len(got["agents"]) != len(got["values"]):
            raise ValueError(f"{len(got['agents'])} agents but {len(got['values'])} values")
        return pd.Series(np.asarray(got["values"], dtype=float), index=pd.Index(got["agents"], name=got["index"]),
                         name="pred")
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(store.CacheWarning(f"{path}: {type(e).__name__}: {e}; the ranker is refitted"), stacklevel=3)
    return None


def _rank_write(path: Path, key: str, keys: pd.Series) -> None:
    """The ranker's keys as ``path`` (atomically), with the digest of their content."""
    body = dict(key=key, index=keys.index.name, agents=[str(a) for a in keys.index], values=[float(v) for v in keys])
    text = json.dumps(jsonable(dict(body, digest=store.entry_digest(body)), nan="keep"))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


@lru_cache(maxsize=4)
def _trace(workload: str, scale: float, seed: int, trace: str, digest: str = "") -> Trace:
    """The trace of a corpus workload or a trace path (``digest`` keys a path's content in callers' caches), made
    once per process for a plan and a fingerprint both (no reader changes a trace in place)."""
    return segments.load_trace(trace or workload, scale, seed)


def point_plan(point: Point, cache_dir: str | os.PathLike | None = None) -> Plan:
    """The replay plan of a point's workload, seed and clock knobs (``cache_dir``: :func:`workload_plan`)."""
    return workload_plan(point.workload, point.scale, point.seed, point.trace, point.laden_close, point.overrides,
                         cache_dir)


def point_fingerprint(point: Point) -> str:
    """The fingerprint of the point's trace (its plan's), from the trace alone: no segments, ranker or run."""
    return _fingerprint(point.workload, float(point.scale), int(point.seed), str(point.trace),
                        content_digest(point.trace) if point.trace else "")


@lru_cache(maxsize=16)
def _fingerprint(workload: str, scale: float, seed: int, trace: str, digest: str) -> str:
    """:func:`point_fingerprint` with its inputs made hashable."""
    return trace_fingerprint(_trace(workload, scale, seed, trace, digest))
