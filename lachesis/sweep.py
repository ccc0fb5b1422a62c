"""Evaluation sweeps (§5.2–§5.5): one load per cell, every policy's HBF lifetime at it, cached, in parallel.

A *cell* is (workload, model, SLO, memory configuration); a *point* is a cell and a placement
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

Every search and every run at a load is cached as JSON under ``cache_dir``, keyed by a hash of its
inputs (trace fingerprint, point, configuration, search settings, load, code version), written
atomically and checked when read: an entry whose stored key, code or package version differs, whose
content digest does not match, or that does not parse is reported (a :class:`CacheWarning` naming
its path) and recomputed.  Cells run on local processes (``concurrent.futures``; workers exit when
their parent dies) or on a Dask cluster; one line per finished cell goes to the process's stderr
(visible under papermill), beside a tqdm bar.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

import lachesis
from lachesis import capacity, knobs
from lachesis import simulator as sim
from lachesis.capacity import SearchParams
from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS, SLOS, Config, memory_config
from lachesis.trace import atomic_write

CODE_VERSION = f"sweep-3/{sim.SIM_VERSION}"
MULTI_POLICIES = ("hbm_first", "deterministic", "lachesis")
SINGLE_POLICIES = ("hbm_first", "lachesis")
MULTI_WORKLOADS = ("multi_agent", "multi_agent_no_reviewer")
SINGLE_WORKLOADS = ("tau3", "bfcl")
CONFIG_LABELS = tuple(m.label for m in MEMORY_CONFIGS)
MODEL_NAMES = tuple(MODELS)
#: the policy whose N* sets a cell's load under ``load="baseline"`` (module docstring)
LOAD_POLICY = "hbm_first"
LOADS = ("baseline", "min", "own")


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


def _grid(name: str, **dims: Sequence[str]) -> None:
    """One-line errors for an empty or unknown grid dimension."""
    from lachesis.policies import POLICIES

    known = dict(configs=CONFIG_LABELS, models=MODEL_NAMES, slos=tuple(SLOS), policies=tuple(POLICIES))
    for arg, vals in dims.items():
        if not len(vals):
            raise ValueError(f"{name}: {arg} is empty")
        bad = [v for v in vals if arg in known and v not in known[arg]]
        if bad:
            raise ValueError(f"{name}: {arg}: unknown {bad[0]!r}; expected one of {list(known[arg])}")


def multi_agent_grid(scale: float = 1.0, seed: int = 0, configs: Sequence[str] = CONFIG_LABELS,
                     models: Sequence[str] = MODEL_NAMES, slos: Sequence[str] = ("tight", "loose"),
                     policies: Sequence[str] = MULTI_POLICIES, workloads: Sequence[str] = MULTI_WORKLOADS,
                     laden_close: str = "last_read") -> list[Point]:
    """Fig. 9/10 grid: configs × models × SLOs × policies × (with, without reviewer)."""
    _grid("multi_agent_grid", configs=configs, models=models, slos=slos, policies=policies, workloads=workloads)
    return [Point(w, c, m, s, p, scale, seed, laden_close=laden_close) for w in workloads for s in slos
            for m in models for c in configs for p in policies]


def single_agent_grid(scale: float = 1.0, seed: int = 0, configs: Sequence[str] = CONFIG_LABELS,
                      models: Sequence[str] = MODEL_NAMES, policies: Sequence[str] = SINGLE_POLICIES,
                      workloads: Sequence[str] = SINGLE_WORKLOADS, laden_close: str = "last_read") -> list[Point]:
    """Fig. 11/12 grid: τ³-bench and BFCLv4 at the tight SLO × configs × models × policies."""
    _grid("single_agent_grid", configs=configs, models=models, policies=policies, workloads=workloads)
    return [Point(w, c, m, "tight", p, scale, seed, laden_close=laden_close) for w in workloads for m in models
            for c in configs for p in policies]


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
        if entry.get("key") != key:
            problem = f"belongs to key {entry.get('key')!r}, not {key!r}"
        elif entry.get("code") != CODE_VERSION or entry.get("version") != lachesis.__version__:
            problem = (f"written by code {entry.get('code')!r} / package {entry.get('version')!r}, "
                       f"not {CODE_VERSION!r} / {lachesis.__version__!r}")
        elif entry.get("digest") != _digest(entry):
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


def evaluate_point(point: Point, params: SearchParams = SearchParams(), cache_dir: str | os.PathLike | None = None,
                   plan: sim.Plan | None = None, hint: int | None = None) -> dict:
    """Capacity search of the point's policy + lifetime run at its own N*; cached as JSON when ``cache_dir`` is set."""
    plan = plan or point_plan(point)
    key = point_key(point, plan.fingerprint, params)
    path = _cache_path(cache_dir, key)
    if (hit := _cache_read(path, key)) is not None:
        return hit
    cfg = point.config()
    sw, lw = _windows(plan, params)

    def probe(n: int):
        """A candidate's short run, paused so that N*'s run continues into the lifetime window."""
        if sw.duration_s > lw.duration_s:  # a search window longer than the lifetime run: nothing to continue
            return sim.simulate(plan, cfg, point.policy, n, seed=point.seed, duration_s=sw.duration_s,
                                warmup_s=sw.warmup_s, n_samples=sw.n_samples), None
        runs = sim.simulate_windows(plan, cfg, point.policy, n, [sw, lw], seed=point.seed)
        return next(runs), runs

    n_star, tried, cont = capacity.search(probe, cfg.slo, params, hint)
    out: dict[str, Any] = dict(asdict(point), n_star=n_star, n_sessions=n_star, load="own", search=tried,
                               warmup_s=lw.warmup_s, duration_s=lw.duration_s)
    if n_star > 0:
        r = next(cont) if cont is not None else sim.simulate(plan, cfg, point.policy, n_star, seed=point.seed,
                                                             duration_s=lw.duration_s, warmup_s=lw.warmup_s,
                                                             n_samples=lw.n_samples)
        capacity.close(cont)
        at = next(t for t in tried if t["n"] == n_star)
        out.update(_run_fields(r), slo_met=True, slo_p99_tpot_s=at["p99_tpot_s"], slo_p99_ttft_s=at["p99_ttft_s"])
    else:
        out.update(lifetime_years=float("nan"), slo_met=False)
    return _cache_write(path, _cache_entry(out, key))


def run_at_load(point: Point, n: int, params: SearchParams = SearchParams(),
                cache_dir: str | os.PathLike | None = None, plan: sim.Plan | None = None) -> dict:
    """The point's policy at ``n`` sessions per GPU: the lifetime run, and whether a search-length window
    there meets the SLO (``slo_met``, the criterion N* was searched with); cached."""
    plan = plan or point_plan(point)
    key = point_key(point, plan.fingerprint, params, n=int(n))
    path = _cache_path(cache_dir, key)
    if (hit := _cache_read(path, key)) is not None:
        return hit
    cfg = point.config()
    sw, lw = _windows(plan, params)
    if sw.duration_s <= lw.duration_s:  # one run observed through both windows
        short, long_ = sim.simulate_windows(plan, cfg, point.policy, int(n), [sw, lw], seed=point.seed)
    else:  # a search window longer than the lifetime run: two runs
        short, long_ = (next(sim.simulate_windows(plan, cfg, point.policy, int(n), [w], seed=point.seed))
                        for w in (sw, lw))
    out = dict(asdict(point), n_sessions=int(n), load="fixed", duration_s=lw.duration_s)
    out.update(_run_fields(long_), slo_met=bool(short.meets(cfg.slo)), slo_p99_tpot_s=short.p99_tpot_s,
               slo_p99_ttft_s=short.p99_ttft_s)
    return _cache_write(path, _cache_entry(out, key))


def _at_own_n_star(entry: dict) -> dict:
    """A search entry as the row of its own N* load (the lifetime run there is exactly that run)."""
    return {k: v for k, v in entry.items() if k != "search"}


def _no_load_row(point: Point) -> dict:
    """A point of a cell whose load policy meets the SLO at no load: no run, no lifetime."""
    return dict(asdict(point), n_sessions=0, lifetime_years=float("nan"), slo_met=False)


def evaluate_cell_at(points: Sequence[Point], n: int, params: SearchParams, cache_dir: str | None,
                     searched: dict[str, dict] | None = None, plan: sim.Plan | None = None) -> list[dict]:
    """Every point of one cell at ``n`` sessions per GPU (a policy searched to exactly ``n`` reuses that run)."""
    plan = plan or point_plan(points[0])
    searched = searched or {}
    rows = []
    for p in points:
        if n <= 0:
            rows.append(_no_load_row(p))
        elif p.policy in searched and searched[p.policy]["n_star"] == n:
            rows.append(_at_own_n_star(searched[p.policy]))
        else:
            rows.append(run_at_load(p, n, params, cache_dir, plan))
    return rows


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


def evaluate_cell(points: Sequence[Point], params: SearchParams, cache_dir: str | None,
                  load: str = "baseline") -> list[dict]:
    """The rows of one cell's points under a ``load`` rule: "baseline", "min" or "own" (module docstring)."""
    plan = point_plan(points[0])
    if load == "own":
        searched = search_cell(points, [p.policy for p in points], params, cache_dir, plan)
        return [dict(_at_own_n_star(searched[p.policy]), load_policy=p.policy) for p in points]
    pols = [LOAD_POLICY] if load == "baseline" else list(dict.fromkeys(p.policy for p in points))
    searched = search_cell(points, pols, params, cache_dir, plan)
    n, by = cell_load(searched, load)
    return [dict(r, load=load, n_star=n, load_policy=by)
            for r in evaluate_cell_at(points, n, params, cache_dir, searched, plan)]


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


def cached_results(points: Sequence[Point], cache_dir: str | os.PathLike | None,
                   params: SearchParams = SearchParams(), load: str = "baseline") -> tuple[pd.DataFrame, list[Point]]:
    """The rows :func:`run_grid` would return for ``points`` that the cache holds, and the points it lacks.

    A cell whose load-setting search (``load``: module docstring) is not cached lacks every point.
    Never simulates: a user sees what is there and runs :func:`run_grid` for the rest.
    """
    points = list(points)
    if points:
        _check_points(points, load)
    rows, missing = [], []
    for g in _cells(points):
        cell = [points[i] for i in g]
        if load == "own":
            for p in cell:
                if (e := cached_entry(p, cache_dir, params)) is None:
                    missing.append(p)
                else:
                    rows.append(dict(_at_own_n_star(e), load_policy=p.policy))
            continue
        pols = [LOAD_POLICY] if load == "baseline" else list(dict.fromkeys(p.policy for p in cell))
        searched = {pol: cached_entry(replace(cell[0], policy=pol), cache_dir, params) for pol in pols}
        if any(e is None for e in searched.values()):
            missing += cell
            continue
        n, by = cell_load(searched, load)  # type: ignore[arg-type]
        for p in cell:
            if n <= 0:
                r = _no_load_row(p)
            elif p.policy in searched and searched[p.policy]["n_star"] == n:  # type: ignore[index]
                r = _at_own_n_star(searched[p.policy])  # type: ignore[arg-type]
            else:
                r = cached_entry(p, cache_dir, params, n)
            if r is None:
                missing.append(p)
            else:
                rows.append(dict(r, load=load, n_star=n, load_policy=by))
    return results_frame(rows), missing


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


def run_tasks(fn: Callable, args: Sequence[tuple], labels: Sequence[str], n_jobs: int | None = None,
              scheduler: str | Any | None = None, progress: bool = True, desc: str = "sweep") -> list:
    """``[fn(*a) for a in args]`` on local processes, a Dask cluster, or in-process; a line per finished task."""
    from tqdm.auto import tqdm

    out: list[Any] = [None] * len(args)
    t0 = time.perf_counter()
    bar = tqdm(total=len(args), disable=not progress, desc=desc)

    def put(k: int, res: tuple[Any, float]) -> None:
        out[k] = res[0]
        bar.update(1)
        if progress:
            progress_line(f"[{desc}] {bar.n}/{len(args)} {labels[k]}: {res[1]:.1f} s "
                          f"(elapsed {time.perf_counter() - t0:.0f} s)")

    try:
        if scheduler is not None:
            from dask.distributed import Client, as_completed as das_completed

            client = scheduler if hasattr(scheduler, "submit") else Client(scheduler)
            try:
                futs = {client.submit(_timed, fn, a, pure=False): k for k, a in enumerate(args)}
                for f in das_completed(list(futs)):
                    put(futs[f], f.result())
            finally:
                if client is not scheduler:
                    client.close()
        elif (n_jobs or os.cpu_count() or 1) <= 1 or len(args) <= 1:
            for k, a in enumerate(args):
                put(k, _timed(fn, a))
        else:
            with worker_pool(n_jobs or os.cpu_count() or 1) as ex:
                futs = {ex.submit(_timed, fn, a): k for k, a in enumerate(args)}
                for f in as_completed(futs):
                    put(futs[f], f.result())
    finally:
        bar.close()
    return out


def _check_points(points: Sequence[Point], load: str = "baseline") -> None:
    """Clear one-line errors before any process starts: empty grid, unknown load rule/policy, a model too big."""
    from lachesis.policies import get_policy

    if not len(points):
        raise ValueError("the grid is empty: no points to evaluate")
    if load not in LOADS:
        raise ValueError(f"load must be one of {LOADS}, got {load!r}")
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
    # cells of one workload next to each other, so a process builds a plan once
    return sorted(groups.values(), key=lambda g: (points[g[0]].workload, points[g[0]].model))


def run_grid(points: Sequence[Point], params: SearchParams = SearchParams(), cache_dir: str | os.PathLike | None = None,
             n_jobs: int | None = None, scheduler: str | Any | None = None, progress: bool = True,
             load: str = "baseline") -> pd.DataFrame:
    """Evaluate every point (cached) with one load per cell (``load``), in parallel; one row per point."""
    points = list(points)
    _check_points(points, load)
    cells = _cells(points)
    args = [([points[i] for i in g], params, str(cache_dir) if cache_dir else None, load) for g in cells]
    res = run_tasks(evaluate_cell, args, [points[g[0]].label() for g in cells], n_jobs, scheduler, progress)
    results: list[dict] = [None] * len(points)  # type: ignore[list-item]
    for g, rows in zip(cells, res):
        for i, r in zip(g, rows):
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
                    policies: Sequence[str] = MULTI_POLICIES, laden_close: str = "last_read") -> list[Point]:
    """The cells of the gain-versus-load figure (§5.3: Lachesis and w/o predictive path over HBM-first)."""
    return multi_agent_grid(scale, seed, configs, models, (slo,), policies, workloads, laden_close)


def _cell_searches(points: Sequence[Point], params: SearchParams, cache_dir: str | None) -> dict[str, dict]:
    return search_cell(points, [LOAD_POLICY], params, cache_dir)


def load_curve(points: Sequence[Point], fractions: Sequence[float], params: SearchParams = SearchParams(),
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
# Derived tables (gains, write composition)
# ------------------------------------------------------------------------------------------------


def gains(df: pd.DataFrame, num: str = "lachesis", den: str = "hbm_first") -> pd.DataFrame:
    """Lifetime ratio num/den per (workload, model, SLO, memory)."""
    idx = ["workload", "model", "slo", "memory"]
    p = df.pivot_table(index=idx, columns="policy", values="lifetime_years", aggfunc="first")
    return (p[num] / p[den]).rename(f"{num}_over_{den}").reset_index()


def write_composition(df: pd.DataFrame) -> pd.DataFrame:
    """Write bytes by (class, tier) as % of each run's total (Figs. 10 and 12)."""
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
                             policy=r["policy"], seg_class=cls, tier=tier, bytes=v,
                             pct=100.0 * v / tot if tot > 0 else np.nan))
    return pd.DataFrame(rows)


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
        pts = [replace(p, workload=Path(name).stem, trace=name) for p in multi_agent_grid(scale, seed, workloads=("x",))]
    out = Path(getattr(args, "out", "build/sweep.csv"))
    cache = out.parent / "sweep_cache"
    df = run_grid(pts, cache_dir=cache, scheduler=getattr(args, "scheduler", None),
                  load=getattr(args, "load", "baseline"))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda tmp: df.to_csv(tmp, index=False))
    print(f"wrote {len(df)} points to {out} (cache: {cache})")
    return 0


# ------------------------------------------------------------------------------------------------
# Presets and summaries for the Fig. 9–12 notebooks
# ------------------------------------------------------------------------------------------------

#: Search/measurement presets.  "paper": the defaults (used by paper.yaml at scale 1); "ci": short
#: windows and a coarse capacity resolution so a reduced grid runs in CI-sized time.  Neither is
#: tuned to any evaluation number.
SEARCH_PRESETS: dict[str, SearchParams] = {
    "paper": SearchParams(),
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


def _present(rows: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """Drop statistics the (reduced) grid has no cells for."""
    return [r for r in rows if not (isinstance(r[1], float) and np.isnan(r[1]))]


def ratio_table(df: pd.DataFrame) -> pd.DataFrame:
    """Lifetime per point with the policy ratios beside it (one row per workload/model/SLO/config)."""
    idx = ["workload", "model", "slo", "memory"]
    p = df.pivot_table(index=idx, columns="policy", values="lifetime_years", aggfunc="first")
    out = p.copy()
    if {"lachesis", "hbm_first"} <= set(p):
        out["lachesis/hbm_first"] = p["lachesis"] / p["hbm_first"]
    if {"deterministic", "hbm_first"} <= set(p):
        out["deterministic/hbm_first"] = p["deterministic"] / p["hbm_first"]
    if {"lachesis", "deterministic"} <= set(p):
        out["lachesis/deterministic"] = p["lachesis"] / p["deterministic"]
    return out.reset_index()


def hbm_share(df: pd.DataFrame) -> pd.DataFrame:
    """Share of each run's KV write bytes that HBM takes (Fig. 10/12 text)."""
    d = df.assign(hbm_share=df["bytes_hbm"] / (df["bytes_hbm"] + df["bytes_hbf"]))
    return d[["workload", "model", "slo", "memory", "policy", "hbm_share"]]


def class_to_flash(df: pd.DataFrame, seg_class: str) -> pd.DataFrame:
    """Fraction of one class's write bytes that reaches HBF, per run."""
    h, f = f"bytes_{seg_class}_hbm", f"bytes_{seg_class}_hbf"
    if h not in df or f not in df:
        return pd.DataFrame(columns=["workload", "model", "slo", "memory", "policy", "to_flash"])
    d = df.assign(to_flash=df[f] / (df[h] + df[f]))
    return d[["workload", "model", "slo", "memory", "policy", "to_flash"]]


def multi_agent_comparison(df: pd.DataFrame) -> list[tuple[str, Any, Any]]:
    """(statistic, ours, paper) rows for §5.3–§5.4 over whatever part of the grid was run."""
    from lachesis import paper

    r = ratio_table(df)
    split = ~r["memory"].eq("8/8*")
    wr = r["workload"].eq("multi_agent")
    rows: list[tuple[str, Any, Any]] = []

    def sel(**kw):
        m = split & wr
        for k, v in kw.items():
            m &= r[k].eq(v)
        return r[m]

    if "lachesis/hbm_first" in r:
        rows.append(("gain Lachesis/HBM-first, tight, 1/7–4/4", _range(sel(slo="tight")["lachesis/hbm_first"]),
                     paper.MULTI_GAIN_TIGHT))
        rows.append(("gain Lachesis/HBM-first, loose, 1/7–4/4", _range(sel(slo="loose")["lachesis/hbm_first"]),
                     paper.MULTI_GAIN_LOOSE))
        d = r[r["memory"].eq("8/8*") & wr]
        rows.append(("gain on 8/8*, tight", _range(d[d["slo"].eq("tight")]["lachesis/hbm_first"]), paper.DAISY_GAIN_TIGHT))
        rows.append(("gain on 8/8*, loose", _range(d[d["slo"].eq("loose")]["lachesis/hbm_first"]), paper.DAISY_GAIN_LOOSE))
        rows.append(("Lachesis device-years, tight, 1/7–4/4", _range(sel(slo="tight").get("lachesis")),
                     paper.MULTI_LACHESIS_YEARS_1_TO_4))
        rows.append(("HBM-first device-years, tight, 1/7–4/4", _range(sel(slo="tight").get("hbm_first")),
                     paper.MULTI_HBM_FIRST_YEARS_1_TO_4))
    if "deterministic/hbm_first" in r:
        rows.append(("w/o predictive path / HBM-first", _range(sel()["deterministic/hbm_first"]), paper.DETERMINISTIC_GAIN))
        rows.append(("Lachesis / w/o predictive path, with reviewer", _range(sel()["lachesis/deterministic"]),
                     paper.PREDICTIVE_GAIN_WITH_REVIEWER))
        nr = r[split & r["workload"].eq("multi_agent_no_reviewer")]
        rows.append(("Lachesis / w/o predictive path, no reviewer", _range(nr["lachesis/deterministic"]),
                     paper.PREDICTIVE_GAIN_WITHOUT_REVIEWER))
    hs = hbm_share(df)
    hs = hs[hs["workload"].eq("multi_agent") & ~hs["memory"].eq("8/8*")]
    rows.append(("HBM share of write bytes, Lachesis", _range(hs[hs["policy"].eq("lachesis")]["hbm_share"]),
                 paper.HBM_WRITE_SHARE_LACHESIS))
    rows.append(("HBM share of write bytes, HBM-first", _range(hs[hs["policy"].eq("hbm_first")]["hbm_share"]),
                 paper.HBM_WRITE_SHARE_HBM_FIRST))
    rv = class_to_flash(df, "reviewer")
    rv = rv[rv["workload"].eq("multi_agent")]
    rows.append(("reviewer bytes reaching flash, w/o predictive path",
                 _range(rv[rv["policy"].eq("deterministic")]["to_flash"]), paper.REVIEWER_TO_FLASH_WO_PREDICTIVE))
    rows.append(("reviewer bytes reaching flash, Lachesis", _range(rv[rv["policy"].eq("lachesis")]["to_flash"]),
                 paper.REVIEWER_TO_FLASH_LACHESIS))
    return _present(rows)


def single_agent_comparison(df: pd.DataFrame) -> list[tuple[str, Any, Any]]:
    """(statistic, ours, paper) rows for §5.5 over whatever part of the grid was run."""
    from lachesis import paper

    r = ratio_table(df)
    split = ~r["memory"].eq("8/8*")
    rows: list[tuple[str, Any, Any]] = [
        ("gain Lachesis/HBM-first, 1/7–4/4", _range(r[split]["lachesis/hbm_first"]), paper.SINGLE_GAIN),
        ("Lachesis device-years, 1/7–4/4", _range(r[split]["lachesis"]), paper.SINGLE_LACHESIS_YEARS_1_TO_4),
        ("HBM-first device-years, 1/7–4/4", _range(r[split]["hbm_first"]), paper.SINGLE_HBM_FIRST_YEARS_1_TO_4),
        ("gain overall (any trace, 1/7–4/4)", _range(r[split]["lachesis/hbm_first"]), paper.GAIN_OVERALL),
    ]
    b = r[r["workload"].eq("bfcl")].set_index(["model", "memory"])["lachesis"] if "lachesis" in r else pd.Series(dtype=float)
    loss = [1 - b[(m, "4/4")] / b[(m, "1/7")] for m in b.index.get_level_values(0).unique()
            if (m, "4/4") in b.index and (m, "1/7") in b.index]
    rows.append(("BFCLv4 Lachesis loss 4/4 vs 1/7", _range(pd.Series(loss)), paper.BFCL_4_4_VS_1_7_LOSS))
    return _present(rows)
