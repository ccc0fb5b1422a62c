"""Evaluation sweeps (§5.2–§5.5): one load per cell, every policy's HBF lifetime at it, over seeds, cached, in parallel.

A *cell* is (workload, model, SLO, memory configuration, seed); a *point* is a cell and a placement
policy.  Per cell the capacity search (:mod:`lachesis.capacity`) finds N*, the sessions per GPU the
SLO admits; every policy of the cell then runs at one load, and HBF lifetime is read from a LONGER
run there (``warmup`` + ``measure`` mean session durations) once the HBF write traffic has settled
(:func:`lachesis.hbf.settled_rate`).  The searched policy's lifetime run is its N* search run
continued (same seed and N share every event up to the search window's end;
:func:`lachesis.simulator.simulate_windows` gives exactly the numbers of a separate run).

ASSUMPTION (one load per cell; knob ``load``): placements are compared on the same work, at the
load the SLO admits for the deployment without Lachesis.  §1: "A session writes the same KV volume
under either policy … the same HBM capacity absorbs more of that volume"; §5.2: HBM-first "is the
placement an engine performs without Lachesis", so it is what sizes the deployment; abstract: "at the
full load a tight SLO admits".  ``load="baseline"`` (default): the N* of HBM-first
(:data:`LOAD_POLICY`); every other policy's row records whether it also meets the SLO there
(``slo_met``, judged on a search-length window, as N* was).  ``load="min"``: the lowest N* over the
cell's policies, so every policy meets the SLO.  ``load="own"``: each policy at its own N* (the
per-policy capacity table; a placement's throughput is a side effect worth showing).
:func:`load_curve` runs every policy at fractions of N* (gain versus load).

ASSUMPTION (seeds replicate at a fixed load; knob ``seed_load``): a grid may hold several seeds of
a cell (each seed draws its own corpus, reference clock and simulator streams).  ``"fixed"``
(default): only the lowest seed searches N*; every other seed runs each policy at that seed's load.
Reason: a deployment is sized once, and the replication then measures what varies at fixed
provisioning (the corpus, the clock and the simulator's draws), not the capacity search's own
resolution (``rel_tol`` on a noisy p99 TPOT, :mod:`lachesis.capacity`), which would otherwise
enter every interval through the load (the gain depends strongly on load, :func:`load_curve`).  Each
row records whether its policy meets the SLO at its own seed (``slo_met``).  ``"search"``: every
seed searches its own N*.  :func:`seed_table` gives each lifetime and ratio as the median over seeds
with its min–max; :func:`compare_intervals` judges the paper's ranges with those intervals.

ASSUMPTION (the oracle's clairvoyance comes from the baseline run, no knob): the oracle
(:class:`lachesis.policies.Oracle`) runs with the segment close times that the load policy's run
at the same cell, load and seed recorded (:mod:`lachesis.clairvoyance`, which states why that is
close to its own).  The baseline's record is cached beside its run, so the oracle never reruns it;
the oracle's row carries the measured drift of its own close times from the record
(``close_drift_*``).  The oracle is never capacity-searched: it runs at the cell's common load (at
the load policy's N* under ``load="own"``).

The offline bound (:mod:`lachesis.bound`, beyond the paper): the load policy's searched run at its N*
also records its write timeline, and its entry carries the bound solved on it once (``bound_*``: the
most KV bytes HBM could have absorbed in the measurement window under any write-time placement, and
the lifetime that allows, :func:`bound_fields`); :func:`lachesis.evaluation.ratio_table` reads it as the pseudo-policy
``bound``.  ASSUMPTION (cost, knob: ``seed_load``): the bound is solved only on the run of the search
that sized a cell's load — the first seed's under ``seed_load="fixed"`` (the paper-scale grid), every
seed's under ``"search"``; runs at a given load (other seeds' replicas, load curves, sensitivity)
carry none, though :func:`baseline_timeline` solves any on demand.  Reason: a single-agent cell's
timeline and LP cost about a second of CPU, and at every seed and load they would take minutes of
the ``make reproduce`` budget (``benchmarks/RESULTS.md``).

Every search and every run at a load is cached as JSON under ``cache_dir``, keyed by a hash of its
inputs (trace fingerprint, point, configuration, search settings, load, code version), written
atomically and checked when read: an entry whose stored key, code or package version differs, whose
content digest does not match, or that does not parse is reported (a :class:`CacheWarning` naming
its path) and recomputed.  The baseline's close record and write timeline are ``.closes.npz`` and
``.timeline.npz`` beside its entry (arrays only, read without pickle, checked against its own key,
the trace and their digest the same way).  The ranker's keys of each trace and clock are kept beside them
(``<key>.rank.json``, :func:`rank_keys_cached`), so every process of a grid reads the same fit.  Cells run
on local processes (``concurrent.futures``; workers exit when their parent dies) or on a Dask
cluster, a seed's replica as soon as its first seed's cell has finished; one line per finished
task goes to the process's stderr (visible under papermill), beside a tqdm bar.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import threading
import time
import warnings
import zipfile
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

import lachesis
from lachesis import capacity, hbf, knobs
from lachesis import simulator as sim
from lachesis.bound import Timeline, hbm_bound
from lachesis.capacity import SearchParams
from lachesis.clairvoyance import CloseTimes, drift
from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS, SLOS, Config, memory_config
from lachesis.io import atomic_write, jsonable

CODE_VERSION = f"sweep-6/{sim.SIM_VERSION}"
#: the placements the paper evaluates (§5.3–§5.5)
PAPER_MULTI_POLICIES = ("hbm_first", "deterministic", "lachesis")
PAPER_SINGLE_POLICIES = ("hbm_first", "lachesis")
#: beyond the paper: a vLLM-style pool, reuse-based selection (Kyung et al.) and the clairvoyant oracle
BASELINES = ("hbm_first_reclaim", "rho_threshold", "oracle")
MULTI_POLICIES = PAPER_MULTI_POLICIES + BASELINES
SINGLE_POLICIES = PAPER_SINGLE_POLICIES + BASELINES
#: how the text names each grid policy (the paper's names; the baselines as the README introduces them)
POLICY_NAMES = {"hbm_first": "HBM-first", "deterministic": "w/o predictive path", "lachesis": "Lachesis",
                "hbm_first_reclaim": "HBM-first with reclaim", "rho_threshold": "ρR/W selection", "oracle": "oracle"}
MULTI_WORKLOADS = ("multi_agent", "multi_agent_no_reviewer")
SINGLE_WORKLOADS = ("tau3", "bfcl")
CONFIG_LABELS = tuple(m.label for m in MEMORY_CONFIGS)
MODEL_NAMES = tuple(MODELS)
#: the policy whose N* sets a cell's load under ``load="baseline"`` (module docstring)
LOAD_POLICY = "hbm_first"
LOADS = ("baseline", "min", "own")
#: the policy that runs with the load policy's recorded close times (module docstring)
CLAIRVOYANT = "oracle"
SEED_LOADS = ("fixed", "search")
CELL = ["workload", "model", "slo", "memory"]
#: The grid's search and measurement settings: :class:`~lachesis.capacity.SearchParams` with a shorter
#: lifetime run.  ASSUMPTION (lifetime window, knobs ``warmup``/``measure``): 0.25 + 1.0 mean session
#: durations instead of 0.5 + 2.0.  Reason: every seed of a cell is a lifetime run of every policy,
#: the grid's main cost; the settled rate is read over the window's second half, so each seed reads
#: 0.5 mean session durations and three seeds 1.5, against 1.0 for one seed at the longer window.
#: The change in gains and settling on a sample of cells is in ``benchmarks/RESULTS.md``
#: (``benchmarks/lifetime_window.py``); the notebooks print the share of settled runs.
PAPER = SearchParams(warmup=0.25, measure=1.0)


class CacheWarning(UserWarning):
    """A sweep cache entry that could not be used (foreign, edited, stale or truncated): recomputed."""


@dataclass(frozen=True)
class Point:
    """One grid point: a cell (workload, memory, model, SLO, corpus scale/seed or trace) and a policy."""

    workload: str
    memory: str
    model: str
    slo: str
    policy: str
    scale: float = 1.0
    seed: int = 0
    trace: str = ""  # empty: the embedded corpus workload; else a trace path
    #: when reasoning-laden KV is freed (:func:`lachesis.simulator.build_plan`); "arrival" is a sensitivity knob
    laden_close: str = "last_read"
    #: (knob, value) pairs moving the paper's setting (:mod:`lachesis.knobs`); a mapping is accepted and
    #: stored sorted and validated.  Clock knobs rebuild the plan; every pair is part of the cache key.
    overrides: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", knobs.canonical(self.overrides))

    def config(self, base: Config = DEFAULT) -> Config:
        cfg = base.with_(memory=memory_config(self.memory), model=MODELS[self.model], slo=SLOS[self.slo])
        return knobs.apply(cfg, self.overrides)

    def run_policy(self) -> str:
        """The policy spec the point's runs use: its policy with the policy knobs of its overrides
        (:func:`lachesis.knobs.apply_policy`; ``policy`` itself names the row)."""
        return knobs.apply_policy(self.policy, self.overrides)

    def cell(self) -> tuple:
        """Everything but the policy: the points of one cell share a plan and a load."""
        return (self.workload, self.model, self.memory, self.slo, self.scale, self.seed, self.trace, self.laden_close,
                self.overrides)

    def label(self) -> str:
        return f"{self.workload} {self.model} {self.slo} {self.memory}" + (
            f" [{knobs.describe(self.overrides)}]" if self.overrides else "")


def grid_policies(workload: str) -> tuple[str, ...]:
    """The policies the Figs. 9–12 grid runs on a workload (the defaults of :func:`multi_agent_grid` and
    :func:`single_agent_grid`): the ablation's three on the trace without the reviewer."""
    if workload == "multi_agent_no_reviewer":
        return PAPER_MULTI_POLICIES
    return MULTI_POLICIES if workload in MULTI_WORKLOADS else SINGLE_POLICIES


def _grid(name: str, **dims: Sequence[str]) -> None:
    """One-line errors for an empty or unknown grid dimension."""
    from lachesis.policies import POLICIES

    known = dict(configs=CONFIG_LABELS, models=MODEL_NAMES, slos=tuple(SLOS), policies=tuple(POLICIES))
    for arg, vals in dims.items():
        if not len(vals):
            raise ValueError(f"{name}: {arg} is empty")
        base = [v.partition(":")[0] if arg == "policies" else v for v in vals]  # a policy may carry knobs
        bad = [v for v, b in zip(vals, base) if arg in known and b not in known[arg]]
        if bad:
            raise ValueError(f"{name}: {arg}: unknown {bad[0]!r}; expected one of {list(known[arg])}")


def _seeds(name: str, seed: int | Sequence[int]) -> list[int]:
    """One seed or several (each a replicate of every cell), as a list; a one-line error otherwise."""
    seeds = [seed] if isinstance(seed, (int, np.integer)) else list(seed)
    if not seeds or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0 for x in seeds):
        raise ValueError(f"{name}: seed must be an integer >= 0 or a non-empty sequence of them, got {seed!r}")
    return [int(x) for x in dict.fromkeys(seeds)]


def multi_agent_grid(scale: float = 1.0, seed: int | Sequence[int] = 0, configs: Sequence[str] = CONFIG_LABELS,
                     models: Sequence[str] = MODEL_NAMES, slos: Sequence[str] = ("tight", "loose"),
                     policies: Sequence[str] = MULTI_POLICIES, workloads: Sequence[str] = MULTI_WORKLOADS,
                     laden_close: str = "last_read",
                     no_reviewer_policies: Sequence[str] | None = PAPER_MULTI_POLICIES) -> list[Point]:
    """Fig. 9/10 grid: configs × models × SLOs × policies × (with, without reviewer) × seeds.

    On the trace without the reviewer only ``policies`` that are also in ``no_reviewer_policies`` run
    (None: all of them): the paper reads that trace only in its ablation (§5.2: "every result below is
    read on the first unless it names the second (§5.4)"), which names HBM-first, w/o predictive path
    and Lachesis.
    """
    _grid("multi_agent_grid", configs=configs, models=models, slos=slos, policies=policies, workloads=workloads)
    seeds = _seeds("multi_agent_grid", seed)

    def pols(w: str) -> list[str]:
        if w != "multi_agent_no_reviewer" or no_reviewer_policies is None:
            return list(policies)
        return [p for p in policies if p in set(no_reviewer_policies)]

    return [Point(w, c, m, s, p, scale, k, laden_close=laden_close) for k in seeds for w in workloads for s in slos
            for m in models for c in configs for p in pols(w)]


def single_agent_grid(scale: float = 1.0, seed: int | Sequence[int] = 0, configs: Sequence[str] = CONFIG_LABELS,
                      models: Sequence[str] = MODEL_NAMES, policies: Sequence[str] = SINGLE_POLICIES,
                      workloads: Sequence[str] = SINGLE_WORKLOADS, laden_close: str = "last_read") -> list[Point]:
    """Fig. 11/12 grid: τ³-bench and BFCLv4 at the tight SLO × configs × models × policies × seeds."""
    _grid("single_agent_grid", configs=configs, models=models, policies=policies, workloads=workloads)
    seeds = _seeds("single_agent_grid", seed)
    return [Point(w, c, m, "tight", p, scale, k, laden_close=laden_close) for k in seeds for w in workloads
            for m in models for c in configs for p in policies]


# ------------------------------------------------------------------------------------------------
# Workloads -> plans (built once per process, keyed on the trace's content)
# ------------------------------------------------------------------------------------------------


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
                  overrides: tuple = (), cache_dir: str | os.PathLike | None = None) -> sim.Plan:
    """Trace -> segments -> ranker keys -> replay plan, for a corpus workload or a trace path.

    ``overrides``: clock knobs (:func:`lachesis.knobs.apply_clock`) applied to the trace's reference clock.
    Built once per process per input: a trace path is keyed on its content, so a changed file is re-read.
    With ``cache_dir``, the ranker's keys are kept there (:func:`rank_keys_cached`), so the processes of a
    grid fit the ranker once per trace and clock.
    """
    return _plan(workload, float(scale), int(seed), str(trace), content_digest(trace) if trace else "", laden_close,
                 knobs.clock_overrides(knobs.canonical(overrides)), str(cache_dir) if cache_dir else "")


@lru_cache(maxsize=8)
def _plan(workload: str, scale: float, seed: int, trace: str, digest: str, laden_close: str,
          overrides: tuple = (), cache_dir: str = "") -> sim.Plan:
    from lachesis.clock import clock_for
    from lachesis.segments import prepare

    tr = _trace(workload, scale, seed, trace, digest)
    prep = prepare(tr, scale, seed, clock=knobs.apply_clock(clock_for(tr), overrides))
    keys = rank_keys_cached(prep, cache_dir or None)
    return sim.build_plan(prep.trace, prep.segments, keys, laden_close=laden_close)


@lru_cache(maxsize=1)
def _ranker_code() -> str:
    """A digest of the code the ranker's keys depend on (segments, clock, ranker) and of the package and
    scikit-learn versions: a changed model never reads keys of the old one."""
    import sklearn

    from lachesis import clock, ranker, segments

    h = hashlib.sha256(f"{lachesis.__version__}/{sklearn.__version__}".encode())
    for m in (segments, clock, ranker):
        h.update(Path(m.__file__).read_bytes())
    return h.hexdigest()


def rank_keys_cached(prep: Any, cache_dir: str | os.PathLike | None) -> pd.Series:
    """:func:`lachesis.ranker.rank_keys` of a prepared trace (:func:`lachesis.segments.prepare`), kept in
    ``cache_dir`` as ``<key>.rank.json``: keyed by a SHA-256 of the trace's requests and spawns, its clock,
    the seed and :func:`_ranker_code`, checked when read against its key and its content digest (a
    :class:`CacheWarning` and a refit otherwise), written atomically.  The keys read back are the floats that were written, so the plan is the same."""
    from lachesis.ranker import rank_keys

    if not cache_dir or prep.trace.spawns is None or not len(prep.trace.spawns):  # nothing worth keeping
        return rank_keys(prep.trace, prep.segments, prep.seed)
    h = hashlib.sha256(b"".join(sim.trace_row_hashes(prep.trace)))
    h.update(json.dumps(jsonable(dict(clock=_canonical(asdict(prep.clock)), seed=prep.seed, code=_ranker_code()),
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
    else None (with a :class:`CacheWarning` naming the file when one was there)."""
    if not path.exists():
        return None
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(got, dict) or got.get("key") != key:
            raise ValueError(f"stored for key {got.get('key') if isinstance(got, dict) else None!r}")
        if got.get("digest") != _digest(got):
            raise ValueError("its content does not match its digest (edited or truncated)")
        if len(got["agents"]) != len(got["values"]):
            raise ValueError(f"{len(got['agents'])} agents but {len(got['values'])} values")
        return pd.Series(np.asarray(got["values"], dtype=float), index=pd.Index(got["agents"], name=got["index"]),
                         name="pred")
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(CacheWarning(f"{path}: {type(e).__name__}: {e}; the ranker is refitted"), stacklevel=3)
    return None


def _rank_write(path: Path, key: str, keys: pd.Series) -> None:
    """The ranker's keys as ``path`` (atomically), with the digest of their content."""
    body = dict(key=key, index=keys.index.name, agents=[str(a) for a in keys.index], values=[float(v) for v in keys])
    text = json.dumps(jsonable(dict(body, digest=_digest(body)), nan="keep"))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _trace(workload: str, scale: float, seed: int, trace: str, digest: str) -> Any:
    """The trace of a corpus workload or a trace path (``digest`` keys a path's content in callers' caches)."""
    from lachesis.segments import load_trace

    return load_trace(trace or workload, scale, seed)


def point_plan(point: Point, cache_dir: str | os.PathLike | None = None) -> sim.Plan:
    """The replay plan of a point's workload, seed and clock knobs (``cache_dir``: :func:`workload_plan`)."""
    return workload_plan(point.workload, point.scale, point.seed, point.trace, point.laden_close, point.overrides,
                         cache_dir)


# ------------------------------------------------------------------------------------------------
# Cache: JSON entries checked against their key, the code and package versions, and their digest
# ------------------------------------------------------------------------------------------------


def point_key(point: Point, plan_fingerprint: str, params: SearchParams, n: int | None = None) -> str:
    """Cache key: hash of the point's inputs, the trace fingerprint, the search settings, the load
    (``n``; None = the point's own capacity search) and the code version."""
    pt = asdict(point)
    if not pt["overrides"]:  # the paper's setting keeps the keys it had before overrides existed
        del pt["overrides"]
    blob = json.dumps(dict(point=pt, trace=plan_fingerprint, config=_canonical(asdict(point.config())),
                           params=asdict(params), load=n, code=CODE_VERSION), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _digest(entry: dict) -> str:
    body = {k: v for k, v in entry.items() if k != "digest"}
    return hashlib.sha256(json.dumps(jsonable(body, nan="keep"), sort_keys=True).encode()).hexdigest()


def _cache_path(cache_dir: str | os.PathLike | None, key: str) -> Path | None:
    return Path(cache_dir) / f"{key}.json" if cache_dir else None


def _foreign(entry: dict, key: str) -> str | None:
    """Why a cache entry (or a close record's header) is not ``key``'s under this code, or None."""
    if entry.get("key") != key:
        return f"belongs to key {entry.get('key')!r}, not {key!r}"
    if entry.get("code") != CODE_VERSION or entry.get("version") != lachesis.__version__:
        return (f"written by code {entry.get('code')!r} / package {entry.get('version')!r}, "
                f"not {CODE_VERSION!r} / {lachesis.__version__!r}")
    return None


def _cache_read(path: Path | None, key: str) -> dict | None:
    """The entry at ``path`` if it is intact and belongs to ``key``; else None (and a warning if it existed)."""
    if path is None or not path.exists():
        return None
    try:
        entry = json.loads(path.read_text())
        problem = None if isinstance(entry, dict) else "not a JSON object"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        entry, problem = None, f"unreadable ({type(e).__name__}: {e})"
    if problem is None:
        problem = _foreign(entry, key)
        if problem is None and entry.get("digest") != _digest(entry):
            problem = "its content does not match its digest (edited or truncated)"
    if problem is not None:
        warnings.warn(f"sweep cache entry {path}: {problem}; recomputing it", CacheWarning, stacklevel=3)
        return None
    entry.pop("digest")
    return entry


def _cache_entry(out: dict, key: str) -> dict:
    """``out`` as its cache entry (key, versions; JSON-normal values), without the digest."""
    entry = dict(out, key=key, code=CODE_VERSION, version=lachesis.__version__)
    return json.loads(json.dumps(jsonable(entry, nan="keep")))


def _cache_write(path: Path | None, entry: dict) -> dict:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(jsonable(dict(entry, digest=_digest(entry)), nan="keep"), indent=1)
        atomic_write(path, lambda tmp: tmp.write_text(text))
    return entry


def _closes_path(cache_dir: str | os.PathLike | None, key: str) -> Path | None:
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
    meta = dict(key=key, code=CODE_VERSION, version=lachesis.__version__, fingerprint=fingerprint,
                digest=_arrays_digest(arrays))

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a path
            np.savez_compressed(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)

    atomic_write(path, write)


def _sidecar_read(path: Path | None, key: str, fingerprint: str, build: Callable[[dict], Any]) -> Any:
    """``build(arrays)`` of the sidecar at ``path`` if it is intact and belongs to ``key`` and the trace;
    else None (a :class:`CacheWarning` if it existed).  Read without pickle."""
    if path is None or not path.exists():
        return None
    problem, out = None, None
    try:
        with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        if not isinstance(meta, dict):
            problem = "its header is not a JSON object"
        elif (problem := _foreign(meta, key)) is not None:
            pass
        elif meta.get("digest") != _arrays_digest(arrays):
            problem = "its arrays do not match their digest (edited or truncated)"
        elif meta.get("fingerprint") != fingerprint:
            problem = f"recorded on trace {meta.get('fingerprint')!r}, not {fingerprint!r}"
        else:
            out = build(arrays)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        problem = f"unreadable ({type(e).__name__}: {e})"
    if problem is not None:
        warnings.warn(f"sweep cache entry {path}: {problem}; recomputing it", CacheWarning, stacklevel=3)
        return None
    return out


def _closes_write(path: Path | None, key: str, closes: CloseTimes) -> None:
    """A baseline run's close record beside its entry."""
    _sidecar_write(path, key, closes.fingerprint, closes.arrays())


def _closes_read(path: Path | None, key: str, fingerprint: str) -> CloseTimes | None:
    """The close record at ``path`` if it is intact and belongs to ``key``; else None (a warning if it existed)."""
    return _sidecar_read(path, key, fingerprint, lambda arrays: CloseTimes.from_arrays(arrays, fingerprint))


def _timeline_path(cache_dir: str | os.PathLike | None, key: str) -> Path | None:
    return Path(cache_dir) / f"{key}.timeline.npz" if cache_dir else None


def _timeline_write(path: Path | None, key: str, fingerprint: str, timeline: Timeline) -> None:
    """A baseline run's write timeline beside its entry (positions and tokens as int32 when they fit)."""
    small = {f: a.astype(np.int32) if a.dtype.kind == "i" and (not a.size or a.max() < 2**31) else a
             for f, a in timeline.arrays().items()}
    _sidecar_write(path, key, fingerprint, small)


def bound_fields(r: sim.SimResult, cfg: Config, timeline: Timeline) -> dict:
    """The offline bound (:mod:`lachesis.bound`) on a load-policy run's timeline over its measurement
    window, as row fields ``bound_*``, and the lifetime it allows (``bound_lifetime_years``).

    ASSUMPTION (the bound's lifetime, no knob): the run's total KV write rate is its settled HBF rate
    over its HBF share of the window's bytes, so the bound's HBF rate is that total × (1 − bound share),
    i.e. the run's settled rate × the bound's HBF bytes / the run's HBF bytes in the window.  Reason:
    the bound and the run are then read on the same window and timeline, so bound/HBM-first ≥ 1 holds
    exactly, and the lifetime is settled as every row's is (:func:`lachesis.hbf.settled_rate`)."""
    bpt, bt = int(cfg.model.kv_bytes_per_token), int(cfg.deployment.block_tokens)
    hbm_tokens = hbf.kv_blocks(cfg.memory, cfg.model, cfg.deployment)[0] * bt
    res = hbm_bound(timeline, hbm_tokens, window=(r.warmup_s, np.inf), bytes_per_token=bpt)
    hbf_run = float((r.events_bytes_by_tier or r.bytes_by_tier).get("hbf", np.nan))  # the recorded rank's
    rate = r.hbf_write_rate * (res.window_bytes - res.hbm_bytes) / hbf_run if hbf_run > 0 else 0.0 * r.hbf_write_rate
    life = float(hbf.hbf_lifetime_years(cfg.memory, rate, cfg.endurance)) if np.isfinite(rate) else float("nan")
    return dict(res.as_dict(), bound_lifetime_years=life)


def _baseline_record(r: sim.SimResult, cfg: Config, cache_dir: str | os.PathLike | None, key: str,
                     fingerprint: str) -> dict:
    """A load-policy run's sidecars (its closes, the oracle's clairvoyance; its write timeline if it recorded
    its events), filed under the key of the run it is, and its bound fields for its entry (none without events)."""
    _closes_write(_closes_path(cache_dir, key), key, r.closes)
    if r.events is None:
        return {}
    timeline = Timeline.from_events(r.events)
    _timeline_write(_timeline_path(cache_dir, key), key, fingerprint, timeline)
    return bound_fields(r, cfg, timeline)


def _canonical(o: Any) -> Any:
    """A hash-seed independent form of a config (sets sorted, mappings sorted by key)."""
    if isinstance(o, (set, frozenset)):
        return sorted(map(str, o))
    if isinstance(o, dict):
        return {str(k): _canonical(v) for k, v in sorted(o.items(), key=lambda kv: str(kv[0]))}
    if isinstance(o, (list, tuple)):
        return [_canonical(v) for v in o]
    return o


# ------------------------------------------------------------------------------------------------
# Points: a capacity search, a run at a given load
# ------------------------------------------------------------------------------------------------


def _run_fields(r: sim.SimResult) -> dict:
    return {k: v for k, v in r.to_dict().items() if k not in ("n_sessions", "policy")}


def _windows(plan: sim.Plan, params: SearchParams) -> list[sim.Window]:
    return [params.search_window(plan), params.lifetime_window(plan)]


def is_clairvoyant(policy: str) -> bool:
    """Whether a policy (name, possibly with knobs) runs with the baseline's recorded close times."""
    return policy.partition(":")[0] == CLAIRVOYANT


def evaluate_point(point: Point, params: SearchParams = PAPER, cache_dir: str | os.PathLike | None = None,
                   plan: sim.Plan | None = None, hint: int | None = None) -> dict:
    """Capacity search of the point's policy + lifetime run at its own N*; cached as JSON when ``cache_dir`` is set.

    The load policy's N* run also keeps its segment closes (the oracle's clairvoyance at that load)."""
    if is_clairvoyant(point.policy):
        raise ValueError(f"{point.policy!r} is not capacity-searched: it runs at the cell's load with the load "
                         f"policy's close times (lachesis.sweep module docstring)")
    plan = plan or point_plan(point, cache_dir)
    key = point_key(point, plan.fingerprint, params)
    path = _cache_path(cache_dir, key)
    if (hit := _cache_read(path, key)) is not None:
        return hit
    cfg = point.config()
    sw, lw = _windows(plan, params)
    record = point.policy == LOAD_POLICY

    def probe(n: int):
        """A candidate's short run, paused so that N*'s run continues into the lifetime window."""
        if sw.duration_s > lw.duration_s:  # a search window longer than the lifetime run: nothing to continue
            return sim.simulate(plan, cfg, point.run_policy(), n, seed=point.seed, duration_s=sw.duration_s,
                                warmup_s=sw.warmup_s, n_samples=sw.n_samples), None
        runs = sim.simulate_windows(plan, cfg, point.run_policy(), n, [sw, lw], seed=point.seed, record_closes=record,
                                    record_events=record)
        return next(runs), runs

    n_star, tried, cont = capacity.search(probe, cfg.slo, params, hint)
    out: dict[str, Any] = dict(asdict(point), n_star=n_star, n_sessions=n_star, load="own", search=tried,
                               warmup_s=lw.warmup_s, duration_s=lw.duration_s)
    if n_star > 0:
        r = next(cont) if cont is not None else sim.simulate(plan, cfg, point.run_policy(), n_star, seed=point.seed,
                                                             duration_s=lw.duration_s, warmup_s=lw.warmup_s,
                                                             n_samples=lw.n_samples, record_closes=record,
                                                             record_events=record)
        capacity.close(cont)
        at = next(t for t in tried if t["n"] == n_star)
        out.update(_run_fields(r), slo_met=True, slo_p99_tpot_s=at["p99_tpot_s"], slo_p99_ttft_s=at["p99_ttft_s"])
        if record:  # filed under the key of the run at N*, which this run is exactly
            at_key = point_key(point, plan.fingerprint, params, n=n_star)
            out.update(_baseline_record(r, cfg, cache_dir, at_key, plan.fingerprint))
    else:
        out.update(lifetime_years=float("nan"), slo_met=False)
    return _cache_write(path, _cache_entry(out, key))


def run_at_load(point: Point, n: int, params: SearchParams = PAPER,
                cache_dir: str | os.PathLike | None = None, plan: sim.Plan | None = None) -> dict:
    """The point's policy at ``n`` sessions per GPU: the lifetime run, and whether a search-length window
    there meets the SLO (``slo_met``, the criterion N* was searched with); cached.  The oracle runs with
    the load policy's close times at the same load (:func:`baseline_closes`)."""
    plan = plan or point_plan(point, cache_dir)
    key = point_key(point, plan.fingerprint, params, n=int(n))
    path = _cache_path(cache_dir, key)
    if (hit := _cache_read(path, key)) is not None:
        return hit
    clair = baseline_closes(point, n, params, cache_dir, plan) if is_clairvoyant(point.policy) else None
    return _run_at_load(point, n, params, cache_dir, plan, clair)[0]


def _run_at_load(point: Point, n: int, params: SearchParams, cache_dir: str | os.PathLike | None, plan: sim.Plan,
                 clair: CloseTimes | None = None, bound: bool = False) -> tuple[dict, sim.SimResult]:
    """:func:`run_at_load` without the cache lookup: (its entry, written to the cache; the run).  ``bound``:
    a load-policy run also records its timeline and solves the bound on it (:func:`baseline_timeline`)."""
    key = point_key(point, plan.fingerprint, params, n=int(n))
    cfg = point.config()
    sw, lw = _windows(plan, params)
    base = point.policy == LOAD_POLICY
    kw = dict(seed=point.seed, record_closes=base or clair is not None, clairvoyance=clair,
              record_events=base and bound)
    if sw.duration_s <= lw.duration_s:  # one run observed through both windows
        short, long_ = sim.simulate_windows(plan, cfg, point.run_policy(), int(n), [sw, lw], **kw)
    else:  # a search window longer than the lifetime run: two runs
        short, long_ = (next(sim.simulate_windows(plan, cfg, point.run_policy(), int(n), [w], **kw)) for w in (sw, lw))
    out = dict(asdict(point), n_sessions=int(n), load="fixed", duration_s=lw.duration_s)
    out.update(_run_fields(long_), slo_met=bool(short.meets(cfg.slo)), slo_p99_tpot_s=short.p99_tpot_s,
               slo_p99_ttft_s=short.p99_ttft_s)
    if clair is not None:
        out.update({f"close_drift_{k}": v for k, v in drift(clair, long_.closes).items()})
    if base:
        out.update(_baseline_record(long_, cfg, cache_dir, key, plan.fingerprint))
    return _cache_write(_cache_path(cache_dir, key), _cache_entry(out, key)), long_


def baseline_closes(point: Point, n: int, params: SearchParams = PAPER,
                    cache_dir: str | os.PathLike | None = None, plan: sim.Plan | None = None) -> CloseTimes:
    """The segment closes of the load policy's run at the point's cell, ``n`` sessions per GPU and seed:
    from the cache (written by that run), else by running it again (which caches it)."""
    plan = plan or point_plan(point, cache_dir)
    base = replace(point, policy=LOAD_POLICY)
    key = point_key(base, plan.fingerprint, params, n=int(n))
    if (hit := _closes_read(_closes_path(cache_dir, key), key, plan.fingerprint)) is not None:
        return hit
    closes = _run_at_load(base, n, params, cache_dir, plan)[1].closes
    assert closes is not None  # the load policy's runs keep their closes
    return closes


def baseline_timeline(point: Point, n: int, params: SearchParams = PAPER,
                      cache_dir: str | os.PathLike | None = None, plan: sim.Plan | None = None) -> Timeline:
    """The write timeline (:class:`lachesis.bound.Timeline`) of the load policy's run at the point's cell,
    ``n`` sessions per GPU and seed (the run its entry's ``bound_*`` fields were solved on, if any): from the
    cache, else by running it again (which caches it, its bound solved)."""
    plan = plan or point_plan(point, cache_dir)
    base = replace(point, policy=LOAD_POLICY)
    key = point_key(base, plan.fingerprint, params, n=int(n))
    if (hit := _sidecar_read(_timeline_path(cache_dir, key), key, plan.fingerprint, Timeline.from_arrays)) is not None:
        return hit
    return Timeline.from_events(_run_at_load(base, n, params, cache_dir, plan, bound=True)[1].events or [])


def _at_own_n_star(entry: dict) -> dict:
    """A search entry as the row of its own N* load (the lifetime run there is exactly that run)."""
    return {k: v for k, v in entry.items() if k != "search"}


def _no_load_row(point: Point) -> dict:
    """A point of a cell whose load policy meets the SLO at no load: no run, no lifetime."""
    return dict(asdict(point), n_sessions=0, lifetime_years=float("nan"), slo_met=False)


def _rows_at(points: Sequence[Point], loads: dict[str, int], searched: dict[str, dict],
             fetch: Callable[[Point, int], dict | None]) -> list[dict | None]:
    """Every point of one cell at its policy's load: no row when the load is 0, a policy searched to
    exactly that load reuses that run, any other comes from ``fetch(point, n)`` (a run or a cache read).

    The load policy is fetched before the oracle, so a run of the oracle finds its close record."""
    rows: list[dict | None] = [None] * len(points)
    for i in sorted(range(len(points)), key=lambda i: is_clairvoyant(points[i].policy)):
        p, n = points[i], int(loads[points[i].policy])
        if n <= 0:
            rows[i] = _no_load_row(p)
        elif p.policy in searched and searched[p.policy]["n_star"] == n:
            rows[i] = _at_own_n_star(searched[p.policy])
        else:
            rows[i] = fetch(p, n)
    return rows


def _at_loads(points: Sequence[Point], loads: dict[str, int], params: SearchParams, cache_dir: str | None,
              searched: dict[str, dict] | None = None, plan: sim.Plan | None = None) -> list[dict]:
    """Every point of one cell at its policy's load, run (or read from the cache) as :func:`run_at_load`."""
    plan = plan or point_plan(points[0], cache_dir)
    return _rows_at(points, loads, searched or {}, lambda p, n: run_at_load(p, n, params, cache_dir, plan))


def evaluate_cell_at(points: Sequence[Point], n: int, params: SearchParams, cache_dir: str | None,
                     searched: dict[str, dict] | None = None, plan: sim.Plan | None = None) -> list[dict]:
    """Every point of one cell at ``n`` sessions per GPU (a policy searched to exactly ``n`` reuses that run)."""
    return _at_loads(points, {p.policy: n for p in points}, params, cache_dir, searched, plan)


def search_cell(points: Sequence[Point], policies: Sequence[str], params: SearchParams, cache_dir: str | None,
                plan: sim.Plan | None = None) -> dict[str, dict]:
    """Capacity searches of ``policies`` at the cell of ``points``, each hinted by the previous N*.

    ASSUMPTION (hint): policies at the same cell admit similar N, so the previous policy's N* is a
    cheap starting bracket; the search still verifies the boundary for each policy.
    """
    plan = plan or point_plan(points[0], cache_dir)
    out, hint = {}, None
    for pol in policies:
        e = evaluate_point(replace(points[0], policy=pol), params, cache_dir, plan, hint)
        out[pol] = e
        hint = e["n_star"] or hint
    return out


def cell_load(searched: dict[str, dict], load: str) -> tuple[int, str]:
    """(sessions per GPU, the policy whose N* it is) of a cell under a ``load`` rule (module docstring)."""
    if load == "baseline":
        return int(searched[LOAD_POLICY]["n_star"]), LOAD_POLICY
    pol = min(searched, key=lambda p: searched[p]["n_star"])
    return int(searched[pol]["n_star"]), pol


def _searched_policies(points: Sequence[Point], load: str) -> list[str]:
    """The policies whose N* a cell's ``load`` rule needs (the oracle is never searched: under "own" it
    needs the load policy's)."""
    pols = list(dict.fromkeys(p.policy for p in points if not is_clairvoyant(p.policy)))
    if load == "own":
        oracle = any(is_clairvoyant(p.policy) for p in points)
        return pols + ([LOAD_POLICY] if oracle and LOAD_POLICY not in pols else [])
    return [LOAD_POLICY] if load == "baseline" or not pols else pols


def _cell_loads(points: Sequence[Point], searched: dict[str, dict], load: str) -> dict[str, tuple[int, str]]:
    """Per policy of a cell: (its sessions per GPU, the policy whose N* that is) under a ``load`` rule."""
    if load == "own":
        by = {p.policy: LOAD_POLICY if is_clairvoyant(p.policy) else p.policy for p in points}
        return {pol: (int(searched[b]["n_star"]), b) for pol, b in by.items()}
    n, by_cell = cell_load(searched, load)
    return {p.policy: (n, by_cell) for p in points}


def _tag_cell(points: Sequence[Point], rows: Sequence[dict | None], at: dict[str, tuple[int, str]],
              load: str) -> list[dict | None]:
    """A cell's rows with the load they ran at: the rule, N*, the policy it is N* of, and the seed that sized it."""
    return [None if r is None else dict(r, load=load, n_star=at[p.policy][0], load_policy=at[p.policy][1],
                                        load_seed=p.seed) for p, r in zip(points, rows)]


def evaluate_cell(points: Sequence[Point], params: SearchParams, cache_dir: str | None,
                  load: str = "baseline") -> list[dict]:
    """The rows of one cell's points under a ``load`` rule: "baseline", "min" or "own" (module docstring).

    The oracle is not searched: it runs at the cell's load (under "own", at the load policy's N*)."""
    plan = point_plan(points[0], cache_dir)
    searched = search_cell(points, _searched_policies(points, load), params, cache_dir, plan)
    at = _cell_loads(points, searched, load)
    rows = _at_loads(points, {pol: n for pol, (n, _) in at.items()}, params, cache_dir, searched, plan)
    return _tag_cell(points, rows, at, load)  # type: ignore[return-value]


#: the fields a seed's replica takes from its first seed's row (the load it ran at)
_LOAD_FIELDS = ("load", "n_star", "load_policy", "load_seed")


def _first_rows(leader: Sequence[dict | None]) -> dict[str, dict]:
    """The first seed's row per policy of a cell (``leader``; a None row is left out)."""
    return {r["policy"]: r for r in leader if r is not None}


def replicate_cell(points: Sequence[Point], leader: Sequence[dict], params: SearchParams,
                   cache_dir: str | None) -> list[dict]:
    """The rows of one cell at another seed, each policy at the load its row of the first seed's cell
    (``leader``, :func:`evaluate_cell`'s rows) ran at (``seed_load="fixed"``, module docstring)."""
    first = _first_rows(leader)
    missing = [p.policy for p in points if p.policy not in first]
    if missing:
        raise ValueError(f"replicate_cell: the first seed's cell has no row for policy {missing[0]!r}")
    loads = {pol: int(r["n_sessions"]) for pol, r in first.items()}
    return [dict(r, **{k: first[p.policy].get(k) for k in _LOAD_FIELDS})
            for p, r in zip(points, _at_loads(points, loads, params, cache_dir))]


# ------------------------------------------------------------------------------------------------
# Cache-only reading: what a cache holds for some points, without simulating (the explorer, sensitivity)
# ------------------------------------------------------------------------------------------------


def point_fingerprint(point: Point) -> str:
    """The fingerprint of the point's trace (its plan's), from the trace alone: no segments, ranker or run."""
    return _fingerprint(point.workload, float(point.scale), int(point.seed), str(point.trace),
                        content_digest(point.trace) if point.trace else "")


@lru_cache(maxsize=16)
def _fingerprint(workload: str, scale: float, seed: int, trace: str, digest: str) -> str:
    return sim.trace_fingerprint(_trace(workload, scale, seed, trace, digest))


def cached_entry(point: Point, cache_dir: str | os.PathLike | None, params: SearchParams = SearchParams(),
                 n: int | None = None) -> dict | None:
    """The cache's entry for the point's capacity search (``n`` None) or its run at ``n`` sessions per GPU,
    checked against its key like every cache read; None when absent.  Never simulates."""
    key = point_key(point, point_fingerprint(point), params, None if n is None else int(n))
    return _cache_read(_cache_path(cache_dir, key), key)


def _cached_cell(points: Sequence[Point], cache_dir: str | os.PathLike | None, params: SearchParams,
                 load: str) -> list[dict | None] | None:
    """:func:`evaluate_cell`'s rows as far as the cache holds them (None per missing point); None when a
    search the ``load`` rule needs is missing."""
    searched = {pol: cached_entry(replace(points[0], policy=pol), cache_dir, params)
                for pol in _searched_policies(points, load)}
    if any(e is None for e in searched.values()):
        return None
    at = _cell_loads(points, searched, load)  # type: ignore[arg-type]
    rows = _rows_at(points, {pol: n for pol, (n, _) in at.items()}, searched,  # type: ignore[arg-type]
                    lambda p, n: cached_entry(p, cache_dir, params, n))
    return _tag_cell(points, rows, at, load)


def cached_results(points: Sequence[Point], cache_dir: str | os.PathLike | None,
                   params: SearchParams = SearchParams(), load: str = "baseline",
                   seed_load: str = "fixed") -> tuple[pd.DataFrame, list[Point]]:
    """The rows :func:`run_grid` would return for ``points`` that the cache holds (in their order), and
    the points it lacks.

    A cell whose load-setting search (``load``: module docstring) is not cached lacks every point, and
    so, under ``seed_load="fixed"``, do its other seeds.  Never simulates: a user sees what is there and
    runs :func:`run_grid` for the rest.
    """
    points = list(points)
    if points:
        _check_points(points, load, seed_load)
    cells = _cells(points)
    groups = _replicas(points, cells) if seed_load == "fixed" else [[c] for c in range(len(cells))]
    rows: list[dict | None] = [None] * len(points)
    for g in groups:
        lead = [points[i] for i in cells[g[0]]]
        got = _cached_cell(lead, cache_dir, params, load)
        if got is None:
            continue
        for i, r in zip(cells[g[0]], got):
            rows[i] = r
        first = _first_rows(got)
        for c in g[1:]:
            for i in cells[c]:
                p = points[i]
                f = first.get(p.policy)
                r = None if f is None else _rows_at([p], {p.policy: int(f["n_sessions"])}, {},
                                                    lambda q, n: cached_entry(q, cache_dir, params, n))[0]
                rows[i] = None if r is None else dict(r, **{k: f.get(k) for k in _LOAD_FIELDS})  # type: ignore[union-attr]
    return results_frame([r for r in rows if r is not None]), [p for p, r in zip(points, rows) if r is None]


# ------------------------------------------------------------------------------------------------
# Runners: local processes (exiting with their parent) or Dask, one progress line per task
# ------------------------------------------------------------------------------------------------


def _exit_with_parent(parent_pid: int, interval_s: float = 0.5) -> None:
    """Pool-worker initializer: a daemon thread ends the worker once its parent has died (it is reparented)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="lachesis-parent-watch", daemon=True).start()


def worker_pool(n_jobs: int) -> ProcessPoolExecutor:
    """Local worker processes that exit when the process that started them dies."""
    return ProcessPoolExecutor(max_workers=n_jobs, initializer=_exit_with_parent, initargs=(os.getpid(),))


def progress_line(text: str) -> None:
    """One line on the process's own stderr: the terminal running papermill shows it (a kernel's
    ``sys.stderr`` goes into the notebook instead); a tqdm bar on the same stream is redrawn below it."""
    from tqdm.auto import tqdm

    tqdm.write(text, file=sys.__stderr__ or sys.stderr)


def _timed(fn: Callable, args: tuple) -> tuple[Any, float]:
    t = time.perf_counter()
    return fn(*args), time.perf_counter() - t


Followup = Callable[[int, Any], Sequence[tuple[Callable, tuple, str]]]


def run_tasks(fn: Callable, args: Sequence[tuple], labels: Sequence[str], n_jobs: int | None = None,
              scheduler: str | Any | None = None, progress: bool = True, desc: str = "sweep",
              follow: Followup | None = None) -> list:
    """``[fn(*a) for a in args]`` on local processes, a Dask cluster, or in-process; a line per finished task.

    ``follow(k, result)`` may return more tasks, ``(fn, args, label)``, once task ``k`` has finished
    (a seed's replica after its first seed's cell); they run on the same workers and their results
    are appended to the returned list in the order they were returned."""
    from tqdm.auto import tqdm

    tasks: list[tuple[Callable, tuple, str]] = [(fn, a, lab) for a, lab in zip(args, labels)]
    out: list[Any] = [None] * len(tasks)
    t0 = time.perf_counter()
    bar = tqdm(total=len(tasks), disable=not progress, desc=desc)

    def put(k: int, res: tuple[Any, float]) -> list[int]:
        """Record task k's result; the indices of the tasks it adds."""
        out[k] = res[0]
        bar.update(1)
        if progress:
            progress_line(f"[{desc}] {bar.n}/{len(tasks)} {tasks[k][2]}: {res[1]:.1f} s "
                          f"(elapsed {time.perf_counter() - t0:.0f} s)")
        more = list(follow(k, res[0])) if follow is not None else []
        tasks.extend(more)
        out.extend([None] * len(more))
        if more:
            bar.total = len(tasks)
            bar.refresh()
        return list(range(len(tasks) - len(more), len(tasks)))

    try:
        if scheduler is not None:
            from dask.distributed import Client, as_completed as das_completed

            client = scheduler if hasattr(scheduler, "submit") else Client(scheduler)
            try:
                def submit(k: int):
                    f = client.submit(_timed, tasks[k][0], tasks[k][1], pure=False)
                    futs[f] = k
                    return f

                futs: dict[Any, int] = {}
                done = das_completed([submit(k) for k in range(len(tasks))])
                for f in done:
                    for k in put(futs[f], f.result()):
                        done.add(submit(k))
            finally:
                if client is not scheduler:
                    client.close()
        elif (n_jobs or os.cpu_count() or 1) <= 1 or (len(tasks) <= 1 and follow is None):
            todo = deque(range(len(tasks)))
            while todo:
                k = todo.popleft()
                todo.extend(put(k, _timed(tasks[k][0], tasks[k][1])))
        else:
            with worker_pool(n_jobs or os.cpu_count() or 1) as ex:
                pending = {ex.submit(_timed, f_, a): k for k, (f_, a, _) in enumerate(tasks)}
                while pending:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        for k in put(pending.pop(f), f.result()):
                            pending[ex.submit(_timed, tasks[k][0], tasks[k][1])] = k
    finally:
        bar.close()
    return out


def _check_points(points: Sequence[Point], load: str = "baseline", seed_load: str = "fixed") -> None:
    """Clear one-line errors before any process starts: empty grid, unknown load rule/policy, a model too big."""
    from lachesis.policies import get_policy

    if not len(points):
        raise ValueError("the grid is empty: no points to evaluate")
    if load not in LOADS:
        raise ValueError(f"load must be one of {LOADS}, got {load!r}")
    if seed_load not in SEED_LOADS:
        raise ValueError(f"seed_load must be one of {SEED_LOADS}, got {seed_load!r}")
    for pol in {p.policy for p in points}:
        get_policy(pol)
    for lc in {p.laden_close for p in points}:
        if lc not in sim.LADEN_CLOSES:
            raise ValueError(f"laden_close must be one of {sim.LADEN_CLOSES}, got {lc!r}")
    for p in {(p.model, p.memory, p.slo): p for p in points}.values():
        sim.check_fits(p.config())


def _cells(points: Sequence[Point]) -> list[list[int]]:
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        groups.setdefault(p.cell(), []).append(i)
    # cells of one workload and seed next to each other, so a process builds a plan once
    return sorted(groups.values(), key=lambda g: (points[g[0]].workload, points[g[0]].seed, points[g[0]].model))


def _replicas(points: Sequence[Point], cells: Sequence[Sequence[int]]) -> list[list[int]]:
    """Cells grouped as seeds of one cell (every field but the seed and the policy alike), lowest seed first."""
    groups: dict[str, list[int]] = {}
    for c, g in enumerate(cells):
        p = points[g[0]]
        groups.setdefault(json.dumps(asdict(replace(p, policy="", seed=0)), sort_keys=True, default=str), []).append(c)
    return [sorted(cs, key=lambda c: points[cells[c][0]].seed) for cs in groups.values()]


def run_grid(points: Sequence[Point], params: SearchParams = PAPER, cache_dir: str | os.PathLike | None = None,
             n_jobs: int | None = None, scheduler: str | Any | None = None, progress: bool = True,
             load: str = "baseline", seed_load: str = "fixed") -> pd.DataFrame:
    """Evaluate every point (cached) with one load per cell (``load``) and every seed of a cell at its first
    seed's load (``seed_load="fixed"``; ``"search"``: each seed searches), in parallel; one row per point.
    When the cache holds every point, its rows are read (:func:`cached_results`) without building a plan."""
    points = list(points)
    _check_points(points, load, seed_load)
    cache = str(cache_dir) if cache_dir else None
    cells = _cells(points)
    # a grid the cache holds whole is read without a plan or a process (a cold cache costs one trace here)
    if cache is not None and points and _cached_cell([points[i] for i in cells[0]], cache, params, load) is not None:
        got, lacking = cached_results(points, cache, params, load, seed_load)
        if not lacking:
            if progress:
                progress_line(f"[sweep] all {len(points)} points read from the cache {cache}")
            return got
    groups = _replicas(points, cells) if seed_load == "fixed" else [[c] for c in range(len(cells))]
    leaders = [g[0] for g in groups]
    followers = {g[0]: g[1:] for g in groups}
    label = {c: f"{points[cells[c][0]].label()} seed {points[cells[c][0]].seed}" for c in range(len(cells))}
    pts = {c: [points[i] for i in cells[c]] for c in range(len(cells))}
    order: list[int] = list(leaders)  # the cell of each task, in the order run_tasks returns them

    def follow(k: int, rows: list[dict]) -> list[tuple[Callable, tuple, str]]:
        more = followers.get(order[k], [])
        order.extend(more)
        return [(replicate_cell, (pts[c], rows, params, cache), label[c]) for c in more]

    res = run_tasks(evaluate_cell, [(pts[c], params, cache, load) for c in leaders], [label[c] for c in leaders],
                    n_jobs, scheduler, progress, follow=follow)
    results: list[dict] = [None] * len(points)  # type: ignore[list-item]
    for c, rows in zip(order, res):
        for i, r in zip(cells[c], rows):
            results[i] = r
    return results_frame(results)


def results_frame(results: Iterable[dict]) -> pd.DataFrame:
    """Flatten point results into one row per point (tier bytes and class×tier bytes as columns)."""
    rows = []
    for r in results:
        row = {k: v for k, v in r.items() if not isinstance(v, (dict, list))}
        for t, v in (r.get("bytes_by_tier") or {}).items():
            row[f"bytes_{t}"] = v
        for c, d in (r.get("bytes_by_class_tier") or {}).items():
            for t, v in d.items():
                row[f"bytes_{c}_{t}"] = v
        for t, v in (r.get("live_peak") or {}).items():
            row[f"live_peak_{t}"] = v
        for c, v in (r.get("live_kv_by_class") or {}).items():
            row[f"live_kv_{c}_bytes"] = v
        rows.append(row)
    return pd.DataFrame(rows)


def named_grid(name: str, scale: float = 1.0, seed: int = 0) -> list[Point]:
    """The grid ``lachesis sweep --trace NAME`` runs: ``multi_agent`` (or ``multi``), ``single``, ``tau3``,
    ``bfcl``, ``all``, or the path of a trace folder (the multi-agent grid's cells on that trace)."""
    if name in ("multi_agent", "multi"):
        return multi_agent_grid(scale, seed)
    if name in ("single", "tau3", "bfcl"):
        return single_agent_grid(scale, seed, workloads=SINGLE_WORKLOADS if name == "single" else (name,))
    if name == "all":
        return multi_agent_grid(scale, seed) + single_agent_grid(scale, seed)
    if not Path(name).exists():
        raise FileNotFoundError(f"--trace {name!r}: not a workload name (multi_agent, single, tau3, bfcl, all) "
                                f"nor an existing trace path")
    return [replace(p, workload=Path(name).stem, trace=name)
            for p in multi_agent_grid(scale, seed, workloads=("x",), no_reviewer_policies=None)]


# ------------------------------------------------------------------------------------------------
# Gain versus load
# ------------------------------------------------------------------------------------------------


def load_curve_grid(scale: float = 1.0, seed: int = 0, configs: Sequence[str] = ("1/7", "4/4", "8/8*"),
                    models: Sequence[str] = MODEL_NAMES, slo: str = "tight", workloads: Sequence[str] = ("multi_agent",),
                    policies: Sequence[str] = PAPER_MULTI_POLICIES, laden_close: str = "last_read") -> list[Point]:
    """The cells of the gain-versus-load figure (§5.3: Lachesis and w/o predictive path over HBM-first)."""
    return multi_agent_grid(scale, seed, configs, models, (slo,), policies, workloads, laden_close)


def _cell_searches(points: Sequence[Point], params: SearchParams, cache_dir: str | None) -> dict[str, dict]:
    return search_cell(points, [LOAD_POLICY], params, cache_dir)


def load_curve(points: Sequence[Point], fractions: Sequence[float], params: SearchParams = PAPER,
               cache_dir: str | os.PathLike | None = None, n_jobs: int | None = None,
               scheduler: str | Any | None = None, progress: bool = True) -> pd.DataFrame:
    """Every point at loads ``fractions`` × its cell's N* (the load policy's, always including N* itself).

    One row per (point, load) with ``n_sessions``, ``fraction``, ``n_star`` and the run's numbers; the
    N* runs are the grid's own (same cache).  A finding, not a knob: the fractions are a fixed sampling.
    """
    points = list(points)
    _check_points(points)
    fr = sorted({float(f) for f in fractions} | {1.0})
    if not fr[0] > 0 or not all(np.isfinite(fr)):
        raise ValueError(f"fractions must be finite and > 0, got {list(fractions)!r}")
    cache = str(cache_dir) if cache_dir else None
    cells = _cells(points)
    labels = [points[g[0]].label() for g in cells]
    cell_pts = [[points[i] for i in g] for g in cells]
    searched = run_tasks(_cell_searches, [(c, params, cache) for c in cell_pts], labels, n_jobs, scheduler,
                         progress, desc="load curve: N*")
    tasks, tlabels, meta = [], [], []
    for c, lab, s in zip(cell_pts, labels, searched):
        n_star = int(s[LOAD_POLICY]["n_star"])
        loads = sorted({max(1, int(round(f * n_star))) for f in fr}) if n_star > 0 else []
        for n in loads:
            tasks.append((c, n, params, cache, s))
            tlabels.append(f"{lab} N={n}")
            meta.append((n_star, n / n_star))
    res = run_tasks(evaluate_cell_at, tasks, tlabels, n_jobs, scheduler, progress, desc="load curve")
    rows = [dict(r, n_star=ns, fraction=f, load="curve") for rs, (ns, f) in zip(res, meta) for r in rs]
    if not rows:
        raise ValueError("load_curve: no cell admits any load (N* = 0 everywhere)")
    return results_frame(rows)


# ------------------------------------------------------------------------------------------------
# Presets and parameters
# ------------------------------------------------------------------------------------------------

#: Search/measurement presets.  "paper": :data:`PAPER` (used by paper.yaml at scale 1); "ci": short
#: windows and a coarse capacity resolution so a reduced grid runs in CI-sized time.  Neither is
#: tuned to any evaluation number.
SEARCH_PRESETS: dict[str, SearchParams] = {
    "paper": PAPER,
    "ci": SearchParams(search_warmup=0.05, search_measure=0.15, warmup=0.1, measure=0.4, rel_tol=0.25, n_samples=60),
}


def split_csv(s: str | Sequence[str]) -> list[str]:
    """A notebook's or command's comma-separated parameter (``"1/7, 4/4"``) as a list; a sequence as is."""
    return [x.strip() for x in s.split(",") if x.strip()] if isinstance(s, str) else list(s)
