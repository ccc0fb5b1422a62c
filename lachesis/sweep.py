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
the lifetime that allows, :func:`bound_fields`); :func:`ratio_table` reads it as the pseudo-policy
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
the trace and their digest the same way).  Cells run
on local processes (``concurrent.futures``; workers exit when their parent dies) or on a Dask
cluster, a seed's replica as soon as its first seed's cell has finished; one line per finished
task goes to the process's stderr (visible under papermill), beside a tqdm bar.
"""

from __future__ import annotations

import argparse
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
from lachesis.trace import atomic_write

CODE_VERSION = f"sweep-5/{sim.SIM_VERSION}"
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
                  overrides: tuple = ()) -> sim.Plan:
    """Trace -> segments -> ranker keys -> replay plan, for a corpus workload or a trace path.

    ``overrides``: clock knobs (:func:`lachesis.knobs.apply_clock`) applied to the corpus' reference clock.
    Built once per process per input: a trace path is keyed on its content, so a changed file is re-read.
    """
    return _plan(workload, float(scale), int(seed), str(trace), content_digest(trace) if trace else "", laden_close,
                 knobs.clock_overrides(knobs.canonical(overrides)))


@lru_cache(maxsize=8)
def _plan(workload: str, scale: float, seed: int, trace: str, digest: str, laden_close: str,
          overrides: tuple = ()) -> sim.Plan:
    from lachesis import corpus
    from lachesis.segments import recover

    tr = _trace(workload, scale, seed, trace, digest)
    seg = recover(tr, clock=knobs.apply_clock(corpus.reference_clock(), overrides), seed=seed)
    return sim.build_plan(tr, seg, sim.rank_keys(tr, seg, seed), laden_close=laden_close)


def _trace(workload: str, scale: float, seed: int, trace: str, digest: str) -> Any:
    """The trace of a corpus workload or a trace path (``digest`` keys a path's content in callers' caches)."""
    from lachesis import corpus

    if trace:
        from lachesis.trace import read_trace

        return read_trace(trace)
    return corpus.generate(workload, scale=scale, seed=seed)


def point_plan(point: Point) -> sim.Plan:
    return workload_plan(point.workload, point.scale, point.seed, point.trace, point.laden_close, point.overrides)


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
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=_json_default).encode()).hexdigest()


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
    return json.loads(json.dumps(entry, default=_json_default))


def _cache_write(path: Path | None, entry: dict) -> dict:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(dict(entry, digest=_digest(entry)), default=_json_default, indent=1)
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
    hbm_tokens = int(cfg.memory.hbm_bytes // (bpt * bt)) * bt  # the simulator's HBM blocks × tokens per block
    res = hbm_bound(timeline, hbm_tokens, window=(r.warmup_s, np.inf), bytes_per_token=bpt)
    hbf_run = float(r.bytes_by_tier.get("hbf", np.nan))
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


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.bool_,)):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o)}")


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
    plan = plan or point_plan(point)
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
            return sim.simulate(plan, cfg, point.policy, n, seed=point.seed, duration_s=sw.duration_s,
                                warmup_s=sw.warmup_s, n_samples=sw.n_samples), None
        runs = sim.simulate_windows(plan, cfg, point.policy, n, [sw, lw], seed=point.seed, record_closes=record,
                                    record_events=record)
        return next(runs), runs

    n_star, tried, cont = capacity.search(probe, cfg.slo, params, hint)
    out: dict[str, Any] = dict(asdict(point), n_star=n_star, n_sessions=n_star, load="own", search=tried,
                               warmup_s=lw.warmup_s, duration_s=lw.duration_s)
    if n_star > 0:
        r = next(cont) if cont is not None else sim.simulate(plan, cfg, point.policy, n_star, seed=point.seed,
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
    plan = plan or point_plan(point)
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
        short, long_ = sim.simulate_windows(plan, cfg, point.policy, int(n), [sw, lw], **kw)
    else:  # a search window longer than the lifetime run: two runs
        short, long_ = (next(sim.simulate_windows(plan, cfg, point.policy, int(n), [w], **kw)) for w in (sw, lw))
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
    plan = plan or point_plan(point)
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
    plan = plan or point_plan(point)
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
    plan = plan or point_plan(points[0])
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
    plan = plan or point_plan(points[0])
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
    plan = point_plan(points[0])
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
    seed's load (``seed_load="fixed"``; ``"search"``: each seed searches), in parallel; one row per point."""
    points = list(points)
    _check_points(points, load, seed_load)
    cells = _cells(points)
    cache = str(cache_dir) if cache_dir else None
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
        rows.append(row)
    return pd.DataFrame(rows)


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


def load_gains(df: pd.DataFrame) -> pd.DataFrame:
    """Policy lifetime ratios per cell and load (one row per workload/model/SLO/config/sessions per GPU)."""
    idx = ["workload", "model", "slo", "memory", "n_sessions"]
    p = df.pivot_table(index=idx, columns="policy", values="lifetime_years", aggfunc="first")
    out = pd.DataFrame(index=p.index)
    for num in ("lachesis", "deterministic"):
        if {num, LOAD_POLICY} <= set(p):
            out[f"{num}/{LOAD_POLICY}"] = p[num] / p[LOAD_POLICY]
    out["n_star"] = df.groupby(idx)["n_star"].first()
    out["all_meet_slo"] = df.groupby(idx)["slo_met"].all()
    return out.reset_index()


def loads_in_range(n: np.ndarray, ratio: np.ndarray, lo: float, hi: float) -> list[tuple[float, float]]:
    """Intervals of load where the piecewise-linear ratio(load) through the samples lies in [lo, hi]."""
    ok = np.isfinite(ratio)
    n, y = np.asarray(n, float)[ok], np.asarray(ratio, float)[ok]
    o = np.argsort(n)
    n, y = n[o], y[o]
    if len(n) == 1:
        return [(float(n[0]), float(n[0]))] if lo <= y[0] <= hi else []
    out: list[tuple[float, float]] = []
    for n0, n1, y0, y1 in zip(n[:-1], n[1:], y[:-1], y[1:]):
        dy = y1 - y0
        if dy == 0:
            t = (0.0, 1.0) if lo <= y0 <= hi else None
        else:
            a, b = sorted(((lo - y0) / dy, (hi - y0) / dy))
            t = (max(a, 0.0), min(b, 1.0)) if a <= 1 and b >= 0 else None
        if t is None:
            continue
        iv = (float(n0 + t[0] * (n1 - n0)), float(n0 + t[1] * (n1 - n0)))
        if out and iv[0] <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], iv[1]))
        else:
            out.append(iv)
    return out


#: The paper numbers the gain-versus-load figure reads against, with the cells they belong to.
#: §5.3: "HBF lifetime falls under HBM-first and rises under Lachesis with each slot added", so the
#: gain grows from 1/7 to 4/4: we read the low end of the 1/7–4/4 range at 1/7 and the high end at 4/4.
#: The w/o-predictive-path range (§5.4) gives no such order; it is read as a range at every cell.
def _paper_targets() -> list[tuple[str, str, str, float, float]]:
    from lachesis import paper

    lo, hi = paper.MULTI_GAIN_TIGHT
    d_lo, d_hi = paper.DETERMINISTIC_GAIN
    return [
        (f"Lachesis/HBM-first {lo:.2f}× (tight, low end of 1/7–4/4)", "lachesis/hbm_first", "1/7", lo, lo),
        (f"Lachesis/HBM-first {hi:.2f}× (tight, high end of 1/7–4/4)", "lachesis/hbm_first", "4/4", hi, hi),
        (f"Lachesis/HBM-first {paper.DAISY_GAIN_TIGHT[0]:.2f}–{paper.DAISY_GAIN_TIGHT[1]:.2f}× (tight, 8/8*)",
         "lachesis/hbm_first", "8/8*", *paper.DAISY_GAIN_TIGHT),
        (f"w/o predictive path/HBM-first {d_lo:.2f}–{d_hi:.2f}× (1/7–4/4)", "deterministic/hbm_first", "1/7", d_lo, d_hi),
        (f"w/o predictive path/HBM-first {d_lo:.2f}–{d_hi:.2f}× (1/7–4/4)", "deterministic/hbm_first", "4/4", d_lo, d_hi),
    ]


def paper_loads(gains: pd.DataFrame) -> pd.DataFrame:
    """Per paper number and cell: the loads at which our ratio equals it (a range: lies inside it).

    ``gains`` is :func:`load_gains` output.  Intervals come from linear interpolation between the
    sampled loads (``loads``); ``sentence`` says which load on our corpus reproduces the paper's number,
    or that the number lies outside the ratios we measured.
    """
    rows = []
    for label, col, mem, lo, hi in _paper_targets():
        if col not in gains:
            continue
        for (w, m), d in gains[gains["memory"].eq(mem)].groupby(["workload", "model"]):
            d = d.sort_values("n_sessions")
            n, r = d["n_sessions"].to_numpy(float), d[col].to_numpy(float)
            n_star = int(d["n_star"].iloc[0])
            at_star = d.loc[d["n_sessions"].eq(n_star), col]
            row = dict(paper=label, workload=w, model=m, memory=mem, ratio=col, paper_lo=lo, paper_hi=hi,
                       n_star=n_star, ours_at_n_star=float(at_star.iloc[0]) if len(at_star) else np.nan,
                       ours_min=float(np.nanmin(r)), ours_max=float(np.nanmax(r)), n_min=float(n.min()),
                       n_max=float(n.max()), loads=loads_in_range(n, r, lo, hi))
            rows.append(dict(row, sentence=_paper_load_sentence(row)))
    return pd.DataFrame(rows)


def _paper_load_sentence(r: dict) -> str:
    head = f"Paper {r['paper']}; ours on {r['memory']}, {r['model']}:"
    star = f"(our N* = {r['n_star']}, where it is {r['ours_at_n_star']:.2f}×)"
    if r["loads"]:
        at = ", ".join(f"≈{a:.0f}" if b - a < 1 else f"{a:.0f}–{b:.0f}" for a, b in r["loads"])
        return f"{head} reproduced at {at} sessions/GPU {star}."
    where = "above" if r["paper_lo"] > r["ours_max"] else "below"
    return (f"{head} not reached at {r['n_min']:.0f}–{r['n_max']:.0f} sessions/GPU, where ours spans "
            f"{r['ours_min']:.2f}–{r['ours_max']:.2f}× (the paper's is {where} it) {star}.")


def capacity_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per-policy N* (sessions per GPU the SLO admits), one row per cell: the ``load="own"`` grid's table."""
    return df.pivot_table(index=["workload", "model", "slo", "memory"], columns="policy", values="n_star",
                          aggfunc="first").reset_index()


# ------------------------------------------------------------------------------------------------
# Derived tables (per cell and seed; seed intervals; write composition)
# ------------------------------------------------------------------------------------------------

#: Lifetime ratios reported per cell: the paper's three (§5.3–§5.5) and the baselines beyond it.
RATIOS: dict[str, tuple[str, str]] = {
    "lachesis/hbm_first": ("lachesis", "hbm_first"),
    "deterministic/hbm_first": ("deterministic", "hbm_first"),
    "lachesis/deterministic": ("lachesis", "deterministic"),
    "hbm_first_reclaim/hbm_first": ("hbm_first_reclaim", "hbm_first"),
    "lachesis/hbm_first_reclaim": ("lachesis", "hbm_first_reclaim"),
    "rho_threshold/hbm_first": ("rho_threshold", "hbm_first"),
    "lachesis/rho_threshold": ("lachesis", "rho_threshold"),
    "oracle/hbm_first": ("oracle", "hbm_first"),
    "bound/hbm_first": ("bound", "hbm_first"),
}
#: Lachesis's share of the oracle's gain over HBM-first: (Lachesis − HBM-first) / (oracle − HBM-first)
ORACLE_SHARE = "lachesis_share_of_oracle_gain"
#: the offline bound (:func:`bound_fields`) as a pseudo-policy of the derived tables, read off the load policy's rows
BOUND = "bound"
#: the share of the bound's gain over HBM-first a policy reaches: (policy − HBM-first) / (bound − HBM-first)
BOUND_SHARES = {"lachesis": "lachesis_share_of_bound_gain", "oracle": "oracle_share_of_bound_gain"}


def _by_seed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``seed`` column (a single-seed table from before seeds were recorded: seed 0)."""
    return df if "seed" in df else df.assign(seed=0)


def _with_bound(df: pd.DataFrame, value: str, bound_col: str) -> pd.DataFrame:
    """``df`` (with a seed) plus one :data:`BOUND` row per load-policy row that carries ``bound_col``,
    its ``value`` column set from it."""
    df = _by_seed(df)
    if bound_col not in df:
        return df
    b = df[df["policy"].eq(LOAD_POLICY) & df[bound_col].notna()]
    return pd.concat([df, b.assign(policy=BOUND, **{value: b[bound_col]})], ignore_index=True)


def ratio_table(df: pd.DataFrame) -> pd.DataFrame:
    """Lifetime per policy (the offline bound as :data:`BOUND`) and the :data:`RATIOS` its policies allow,
    one row per cell and seed; :data:`ORACLE_SHARE` when Lachesis, the oracle and HBM-first all ran, and
    :data:`BOUND_SHARES` when the bound was solved."""
    idx = CELL + ["seed"]
    d = _with_bound(df, "lifetime_years", "bound_lifetime_years")
    p = d.pivot_table(index=idx, columns="policy", values="lifetime_years", aggfunc="first")
    out = p.copy()
    for name, (num, den) in RATIOS.items():
        if {num, den} <= set(p):
            out[name] = p[num] / p[den]
    if {"lachesis", "oracle", LOAD_POLICY} <= set(p):
        out[ORACLE_SHARE] = (p["lachesis"] - p[LOAD_POLICY]) / (p["oracle"] - p[LOAD_POLICY])
    for pol, name in BOUND_SHARES.items():
        if {pol, BOUND, LOAD_POLICY} <= set(p):
            out[name] = (p[pol] - p[LOAD_POLICY]) / (p[BOUND] - p[LOAD_POLICY])
    out.columns.name = None
    return out.reset_index()


def gains(df: pd.DataFrame, num: str = "lachesis", den: str = "hbm_first") -> pd.DataFrame:
    """Lifetime ratio num/den per (workload, model, SLO, memory, seed)."""
    p = _by_seed(df).pivot_table(index=CELL + ["seed"], columns="policy", values="lifetime_years", aggfunc="first")
    return (p[num] / p[den]).rename(f"{num}_over_{den}").reset_index()


def seed_table(table: pd.DataFrame, cols: Sequence[str] | None = None, by: Sequence[str] = tuple(CELL)) -> pd.DataFrame:
    """Per ``by`` group, each of ``cols`` (default: every numeric column) as its median over seeds with
    its min and max (``<col>``, ``<col>_min``, ``<col>_max``) and the number of seeds (``seeds``).

    A ratio is taken per seed first (the policies of one seed ran on the same draws), then summarized."""
    by = list(by)
    t = _by_seed(table)
    cols = list(cols) if cols is not None else [c for c in t.columns if c not in by + ["seed"]
                                                and pd.api.types.is_numeric_dtype(t[c])]
    g = t.groupby(by, sort=False)
    parts = []
    for c in cols:
        parts += [g[c].median().rename(c), g[c].min().rename(f"{c}_min"), g[c].max().rename(f"{c}_max")]
    return pd.concat(parts + [g["seed"].nunique().rename("seeds")], axis=1).reset_index()


def interval_text(summary: pd.DataFrame, cols: Sequence[str], by: Sequence[str] = tuple(CELL),
                  fmt: str = ".3g") -> pd.DataFrame:
    """:func:`seed_table` columns as "median [min–max]" strings (one value when the seeds agree)."""
    def cell(m: float, lo: float, hi: float) -> str:
        if not np.isfinite(m):
            return ""
        if format(lo, fmt) == format(hi, fmt):
            return format(m, fmt)
        return f"{m:{fmt}} [{lo:{fmt}}–{hi:{fmt}}]"

    out = summary[list(by)].copy()
    for c in cols:
        if c in summary:
            out[c] = [cell(m, lo, hi) for m, lo, hi in zip(summary[c], summary[f"{c}_min"], summary[f"{c}_max"])]
    return out


def write_composition(df: pd.DataFrame) -> pd.DataFrame:
    """Write bytes by (class, tier) as % of each run's total (Figs. 10 and 12), per run (seed included)."""
    df = _by_seed(df)
    cols = [c for c in df.columns if c.startswith("bytes_") and c.count("_") >= 2 and c not in ("bytes_hbm", "bytes_hbf")]
    rows = []
    for _, r in df.iterrows():
        tot = float(np.nansum([r[c] for c in cols]))
        for c in cols:
            cls, tier = c[len("bytes_"):].rsplit("_", 1)
            v = r[c]
            if pd.isna(v):
                continue
            rows.append(dict(workload=r["workload"], model=r["model"], slo=r["slo"], memory=r["memory"],
                             policy=r["policy"], seed=r["seed"], seg_class=cls, tier=tier, bytes=v,
                             pct=100.0 * v / tot if tot > 0 else np.nan))
    return pd.DataFrame(rows)


def hbm_share(df: pd.DataFrame) -> pd.DataFrame:
    """Share of each run's KV write bytes that HBM takes (Fig. 10/12 text), and the offline bound's share
    on the load policy's run (policy :data:`BOUND`) where it was solved."""
    d = _by_seed(df)
    d = d.assign(hbm_share=d["bytes_hbm"] / (d["bytes_hbm"] + d["bytes_hbf"]))
    return _with_bound(d, "hbm_share", "bound_hbm_share")[CELL + ["policy", "seed", "hbm_share"]]


def class_to_flash(df: pd.DataFrame, seg_class: str) -> pd.DataFrame:
    """Fraction of one class's write bytes that reaches HBF, per run."""
    h, f = f"bytes_{seg_class}_hbm", f"bytes_{seg_class}_hbf"
    if h not in df or f not in df:
        return pd.DataFrame(columns=CELL + ["policy", "seed", "to_flash"])
    d = _by_seed(df)
    d = d.assign(to_flash=d[f] / (d[h] + d[f]))
    return d[CELL + ["policy", "seed", "to_flash"]]


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------


def cli_sweep(args: argparse.Namespace) -> int:
    """``lachesis sweep``: run a grid (``--trace`` multi_agent | single | all | a trace path) to a CSV."""
    name = getattr(args, "trace", "multi_agent")
    scale, seed = float(getattr(args, "scale", 1.0)), int(getattr(args, "seed", 0))
    if name in ("multi_agent", "multi"):
        pts = multi_agent_grid(scale, seed)
    elif name in ("single", "tau3", "bfcl"):
        pts = single_agent_grid(scale, seed, workloads=SINGLE_WORKLOADS if name == "single" else (name,))
    elif name == "all":
        pts = multi_agent_grid(scale, seed) + single_agent_grid(scale, seed)
    else:
        if not Path(name).exists():
            raise FileNotFoundError(f"--trace {name!r}: not a workload name (multi_agent, single, tau3, bfcl, all) "
                                    f"nor an existing trace path")
        pts = [replace(p, workload=Path(name).stem, trace=name)
               for p in multi_agent_grid(scale, seed, workloads=("x",), no_reviewer_policies=None)]
    out = Path(getattr(args, "out", "build/sweep.csv"))
    cache = out.parent / "sweep_cache"
    df = run_grid(pts, PAPER, cache_dir=cache, scheduler=getattr(args, "scheduler", None),
                  load=getattr(args, "load", "baseline"))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda tmp: df.to_csv(tmp, index=False))
    print(f"wrote {len(df)} points to {out} (cache: {cache})")
    return 0


# ------------------------------------------------------------------------------------------------
# Presets and the paper comparisons for the Fig. 9–12 notebooks
# ------------------------------------------------------------------------------------------------

#: Search/measurement presets.  "paper": :data:`PAPER` (used by paper.yaml at scale 1); "ci": short
#: windows and a coarse capacity resolution so a reduced grid runs in CI-sized time.  Neither is
#: tuned to any evaluation number.
SEARCH_PRESETS: dict[str, SearchParams] = {
    "paper": PAPER,
    "ci": SearchParams(search_warmup=0.05, search_measure=0.15, warmup=0.1, measure=0.4, rel_tol=0.25, n_samples=60),
}


def _csv(s: str | Sequence[str]) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()] if isinstance(s, str) else list(s)


def _range(x: pd.Series | None) -> tuple[float, float] | float:
    """(lo, hi) of a series, one float when they agree, NaN when the grid has no such cell."""
    x = pd.Series(x if x is not None else [], dtype=float).dropna()
    if not len(x):
        return float("nan")
    lo, hi = round(float(x.min()), 3), round(float(x.max()), 3)
    return lo if lo == hi else (lo, hi)


#: A statistic the notebooks set beside the paper: its label, its values per cell and seed (a Series
#: whose last index level is ``seed``), and the paper's value (a number, a (lo, hi) range, or text).
Stat = tuple[str, pd.Series, Any]

NOT_IN_PAPER = "— (not in the paper)"


def judge_interval(interval: tuple[float, float] | float, paper: Any) -> str:
    """Whether a seed interval lies "inside" the paper's range, "overlaps" it, or is "disjoint" from it
    ("" when either is not a number).  A point value of the paper is a range of one value."""
    lo, hi = interval if isinstance(interval, tuple) else (interval, interval)
    if isinstance(paper, tuple) and len(paper) == 2:
        a, b = float(paper[0]), float(paper[1])
    elif isinstance(paper, (int, float, np.integer, np.floating)) and not isinstance(paper, bool):
        a = b = float(paper)
    else:
        return ""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    if a <= lo and hi <= b:
        return "inside"
    return "disjoint" if hi < a or lo > b else "overlaps"


def compare_intervals(stats: Sequence[Stat], note: str = "") -> pd.DataFrame:
    """The comparison table of a notebook: per statistic, ``ours`` = the range over cells of each cell's
    median over seeds, ``interval`` = the range over cells and seeds (every seed's value), the paper's
    value, whether our medians' range lies in the paper's (``in_paper_range``: yes/partly/no, as
    :func:`lachesis.plotting.compare_table`) and whether the interval does (``interval_vs_paper``:
    inside/overlaps/disjoint), and how many seeds and cells it rests on."""
    from lachesis.plotting import compare_table

    rows, extra = [], []
    for label, values, paper in stats:
        v = pd.Series(values, dtype=float).dropna() if values is not None else pd.Series(dtype=float)
        if not len(v):
            continue
        levels = [n for n in v.index.names if n != "seed"]
        med = v.groupby(level=levels).median() if levels else pd.Series([v.median()])
        interval = _range(v)
        rows.append((label, _range(med), paper))
        seeds = v.index.get_level_values("seed").nunique() if "seed" in v.index.names else 1
        extra.append(dict(interval=interval, interval_vs_paper=judge_interval(interval, paper), seeds=seeds,
                          cells=len(med)))
    table = compare_table(rows, note=note)
    if not len(table):
        return table
    fmt = [f"{i[0]:g}–{i[1]:g}" if isinstance(i, tuple) else f"{i:g}" for i in (e["interval"] for e in extra)]
    table.insert(2, "interval", fmt)
    table.insert(5, "interval_vs_paper", [e["interval_vs_paper"] for e in extra])
    table.insert(6, "seeds", [e["seeds"] for e in extra])
    table.insert(7, "cells", [e["cells"] for e in extra])
    return table


def _select(table: pd.DataFrame, col: str, **where: Any) -> pd.Series | None:
    """``col`` of a per-(cell, seed) table where each keyword's column equals (or, for a list, is in) its
    value, indexed by cell and seed; None when the column is absent."""
    if col not in table:
        return None
    m = pd.Series(True, index=table.index)
    for k, v in where.items():
        m &= table[k].isin(v) if isinstance(v, (list, tuple)) else table[k].eq(v)
    return table.loc[m].set_index(CELL + ["seed"])[col]


#: The co-located configurations (the paper's "one to four of the eight slots"); 8/8* is H3's daisy chain.
SPLIT = ["1/7", "2/6", "3/5", "4/4"]


def _baseline_stats(r: pd.DataFrame, hs: pd.DataFrame, frame: str, **where: Any) -> list[Stat]:
    """The rows for the baselines and the offline bound beyond the paper (``r``: :func:`ratio_table`, ``hs``:
    :func:`hbm_share`), over the cells ``where`` selects (``frame`` names them)."""
    shares = [(f"HBM share of write bytes, {name}, {frame}", _select(hs, "hbm_share", policy=pol, **where), NOT_IN_PAPER)
              for pol, name in ((BOUND, "offline bound"), ("oracle", "oracle"), ("lachesis", "Lachesis"),
                                (LOAD_POLICY, "HBM-first")) if pol in set(hs["policy"])]
    return [
        (f"HBM-first with reclaim / HBM-first, {frame}", _select(r, "hbm_first_reclaim/hbm_first", **where), NOT_IN_PAPER),
        (f"Lachesis / HBM-first with reclaim, {frame}", _select(r, "lachesis/hbm_first_reclaim", **where), NOT_IN_PAPER),
        (f"ρR/W selection / HBM-first, {frame}", _select(r, "rho_threshold/hbm_first", **where), NOT_IN_PAPER),
        (f"Lachesis / ρR/W selection, {frame}", _select(r, "lachesis/rho_threshold", **where), NOT_IN_PAPER),
        (f"oracle / HBM-first, {frame}", _select(r, "oracle/hbm_first", **where), NOT_IN_PAPER),
        (f"Lachesis share of the oracle's gain, {frame}", _select(r, ORACLE_SHARE, **where), NOT_IN_PAPER),
        (f"offline bound / HBM-first, {frame}", _select(r, "bound/hbm_first", **where), NOT_IN_PAPER),
        (f"Lachesis share of the bound's gain, {frame}", _select(r, BOUND_SHARES["lachesis"], **where), NOT_IN_PAPER),
        (f"oracle share of the bound's gain, {frame}", _select(r, BOUND_SHARES["oracle"], **where), NOT_IN_PAPER),
    ] + shares


def multi_agent_stats(df: pd.DataFrame) -> list[Stat]:
    """The §5.3–§5.4 statistics per cell and seed, over whatever part of the grid was run."""
    from lachesis import paper

    r = ratio_table(df)
    ma = dict(workload="multi_agent", memory=SPLIT)
    hs, rv = hbm_share(df), class_to_flash(df, "reviewer")
    out: list[Stat] = [
        ("gain Lachesis/HBM-first, tight, 1/7–4/4", _select(r, "lachesis/hbm_first", slo="tight", **ma),
         paper.MULTI_GAIN_TIGHT),
        ("gain Lachesis/HBM-first, loose, 1/7–4/4", _select(r, "lachesis/hbm_first", slo="loose", **ma),
         paper.MULTI_GAIN_LOOSE),
        ("gain on 8/8*, tight", _select(r, "lachesis/hbm_first", workload="multi_agent", memory="8/8*", slo="tight"),
         paper.DAISY_GAIN_TIGHT),
        ("gain on 8/8*, loose", _select(r, "lachesis/hbm_first", workload="multi_agent", memory="8/8*", slo="loose"),
         paper.DAISY_GAIN_LOOSE),
        ("Lachesis device-years, tight, 1/7–4/4", _select(r, "lachesis", slo="tight", **ma),
         paper.MULTI_LACHESIS_YEARS_1_TO_4),
        ("HBM-first device-years, tight, 1/7–4/4", _select(r, "hbm_first", slo="tight", **ma),
         paper.MULTI_HBM_FIRST_YEARS_1_TO_4),
        ("w/o predictive path / HBM-first", _select(r, "deterministic/hbm_first", **ma), paper.DETERMINISTIC_GAIN),
        ("Lachesis / w/o predictive path, with reviewer", _select(r, "lachesis/deterministic", **ma),
         paper.PREDICTIVE_GAIN_WITH_REVIEWER),
        ("Lachesis / w/o predictive path, no reviewer",
         _select(r, "lachesis/deterministic", workload="multi_agent_no_reviewer", memory=SPLIT),
         paper.PREDICTIVE_GAIN_WITHOUT_REVIEWER),
        ("HBM share of write bytes, Lachesis", _select(hs, "hbm_share", policy="lachesis", **ma),
         paper.HBM_WRITE_SHARE_LACHESIS),
        ("HBM share of write bytes, HBM-first", _select(hs, "hbm_share", policy="hbm_first", **ma),
         paper.HBM_WRITE_SHARE_HBM_FIRST),
        ("reviewer bytes reaching flash, w/o predictive path",
         _select(rv, "to_flash", policy="deterministic", workload="multi_agent"), paper.REVIEWER_TO_FLASH_WO_PREDICTIVE),
        ("reviewer bytes reaching flash, Lachesis", _select(rv, "to_flash", policy="lachesis", workload="multi_agent"),
         paper.REVIEWER_TO_FLASH_LACHESIS),
    ]
    return out + _baseline_stats(r, hs, "tight, 1/7–4/4", slo="tight", **ma)


def single_agent_stats(df: pd.DataFrame) -> list[Stat]:
    """The §5.5 statistics per cell and seed, over whatever part of the grid was run."""
    from lachesis import paper

    r = ratio_table(df)
    split = dict(memory=SPLIT)
    out: list[Stat] = [
        ("gain Lachesis/HBM-first, 1/7–4/4", _select(r, "lachesis/hbm_first", **split), paper.SINGLE_GAIN),
        ("Lachesis device-years, 1/7–4/4", _select(r, "lachesis", **split), paper.SINGLE_LACHESIS_YEARS_1_TO_4),
        ("HBM-first device-years, 1/7–4/4", _select(r, "hbm_first", **split), paper.SINGLE_HBM_FIRST_YEARS_1_TO_4),
        ("gain overall (any trace, 1/7–4/4)", _select(r, "lachesis/hbm_first", **split), paper.GAIN_OVERALL),
    ]
    if "lachesis" in r:
        b = r[r["workload"].eq("bfcl")].set_index(["model", "memory", "seed"])["lachesis"].unstack("memory")
        if {"1/7", "4/4"} <= set(b.columns):
            out.append(("BFCLv4 Lachesis loss 4/4 vs 1/7", 1 - b["4/4"] / b["1/7"], paper.BFCL_4_4_VS_1_7_LOSS))
    return out + _baseline_stats(r, hbm_share(df), "1/7–4/4", **split)
