"""Evaluation sweeps (§5.2–§5.5): capacity search per grid point, cached, run in parallel.

A *point* is (workload, memory configuration, model, SLO, policy).  For each point the capacity
search finds the most concurrent sessions per GPU, N*, whose p99 TPOT and p99 TTFT meet the SLO
and whose live KV fits HBM + HBF (minus the weights), to a resolution of ``rel_tol`` × N.  Each
candidate is a SHORT closed-loop run (``search_warmup``/``search_measure`` mean session durations).
The search brackets the boundary (doubling from N = 1, or 10 %, 20 %, … steps from a hint), and
narrows it.  Every run yields a *margin* (p99 TPOT / bound, or p99 TTFT / bound if larger), which
grows roughly linearly with N, so both phases step to where the line through two candidates
crosses 1 (secant while bracketing; regula falsi kept inside the middle half of the bracket, then
one resolution step from the end it moved, while narrowing).  Without margins (out of memory,
NaN) the steps fall back to doubling and bisection.  Lifetime is then read from a LONGER run at N*
(``warmup`` + ``measure`` mean session durations) once the HBF write traffic has settled (hbf.py's
rule).  That run is N*'s own search run continued (same seed and N share every event up to the
search window's end; :func:`lachesis.simulator.simulate_windows` gives exactly the numbers of a
separate run).

ASSUMPTION (monotone capacity): feasibility is taken to be monotone in N (more sessions ⇒ larger
batches and more live KV), which bracketing needs; the search records every candidate it ran so a
non-monotone case is visible in the cached JSON.  It is monotone only in expectation: p99 TPOT of
a short run is noisy by a few percent near N*, so two valid candidate sequences can settle on
different N* within the noise.  Measured: the earlier bisection-only search and this one, on the
same 160 points, gave N* differing by a median 3.3 % (max 25 %), lifetimes by a median 3.1 % (max
17 %), and per-cell Lachesis/HBM-first gains by a median 5.4 % (max 35 %).  Read per-cell gains
with that resolution.
ASSUMPTION (durations): simulated time is counted in mean reference-clock session durations of the
workload, so the same settings cover short single-agent and long multi-agent sessions.

Every point is cached as JSON under ``cache_dir`` keyed by a hash of its inputs (trace
fingerprint, configuration, policy, seed, search settings, code version), written atomically, so a
repeated sweep recomputes nothing.  Points run on local processes (``concurrent.futures``) with a
tqdm bar, or on a Dask cluster when a scheduler address is given.  Points of one
(workload, model, configuration, SLO) cell run in one task, each policy's search hinted by the
previous policy's N*.

Measured cost (2-core container, scale 1, "paper" preset, two local processes): the whole 160-point
Fig. 9–12 grid from an empty cache, both notebooks through papermill, takes 247 s (multi-agent) +
191 s (single-agent) = 7 min 18 s.  Before the continued lifetime runs and the margin-guided search
it took 9 min 18 s and 11 min 10 s in two runs, and ≈28 min before the simulator/allocator fast paths.
The CI preset runs each notebook's reduced grid in ≈30 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from lachesis import simulator as sim
from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS, SLOS, Config, memory_config
from lachesis.trace import atomic_write

CODE_VERSION = f"sweep-2/{sim.SIM_VERSION}"
MULTI_POLICIES = ("hbm_first", "deterministic", "lachesis")
SINGLE_POLICIES = ("hbm_first", "lachesis")
MULTI_WORKLOADS = ("multi_agent", "multi_agent_no_reviewer")
SINGLE_WORKLOADS = ("tau3", "bfcl")
SEARCH_SAMPLES = 50  # memory snapshots per search run (its settling check is not used; only p99 TPOT/TTFT and OOM are)
CONFIG_LABELS = tuple(m.label for m in MEMORY_CONFIGS)
MODEL_NAMES = tuple(MODELS)


@dataclass(frozen=True)
class SearchParams:
    """How long each run simulates (in mean session durations) and how far the search goes."""

    search_warmup: float = 0.2
    search_measure: float = 0.5
    warmup: float = 0.5
    measure: float = 2.0
    n_max: int = 8192
    n_samples: int = 200
    #: the search stops when the bracket is within this fraction of N (the capacity's resolution)
    rel_tol: float = 0.04


@dataclass(frozen=True)
class Point:
    """One grid point."""

    workload: str
    memory: str
    model: str
    slo: str
    policy: str
    scale: float = 1.0
    seed: int = 0
    trace: str = ""  # empty: the embedded corpus workload; else a trace path

    def config(self, base: Config = DEFAULT) -> Config:
        return base.with_(memory=memory_config(self.memory), model=MODELS[self.model], slo=SLOS[self.slo])


def multi_agent_grid(scale: float = 1.0, seed: int = 0, configs: Sequence[str] = CONFIG_LABELS,
                     models: Sequence[str] = MODEL_NAMES, slos: Sequence[str] = ("tight", "loose"),
                     policies: Sequence[str] = MULTI_POLICIES, workloads: Sequence[str] = MULTI_WORKLOADS) -> list[Point]:
    """Fig. 9/10 grid: configs × models × SLOs × policies × (with, without reviewer)."""
    return [Point(w, c, m, s, p, scale, seed) for w in workloads for s in slos for m in models
            for c in configs for p in policies]


def single_agent_grid(scale: float = 1.0, seed: int = 0, configs: Sequence[str] = CONFIG_LABELS,
                      models: Sequence[str] = MODEL_NAMES, policies: Sequence[str] = SINGLE_POLICIES,
                      workloads: Sequence[str] = SINGLE_WORKLOADS) -> list[Point]:
    """Fig. 11/12 grid: τ³-bench and BFCLv4 at the tight SLO × configs × models × policies."""
    return [Point(w, c, m, "tight", p, scale, seed) for w in workloads for m in models
            for c in configs for p in policies]


# ------------------------------------------------------------------------------------------------
# Workloads -> plans (built once per process)
# ------------------------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def workload_plan(workload: str, scale: float, seed: int, trace: str = "") -> sim.Plan:
    """Trace -> segments -> ranker keys -> replay plan, for a corpus workload or a trace path."""
    from lachesis.segments import recover

    if trace:
        from lachesis.trace import read_trace

        tr = read_trace(trace)
        clock = None
        try:
            from lachesis import corpus

            clock = corpus.reference_clock()
        except ImportError:  # pragma: no cover
            pass
    else:
        from lachesis import corpus

        tr = corpus.generate(workload, scale=scale, seed=seed)
        clock = corpus.reference_clock()
    seg = recover(tr, clock=clock, seed=seed)
    return sim.build_plan(tr, seg, sim.rank_keys(tr, seg, seed))


# ------------------------------------------------------------------------------------------------
# Capacity search
# ------------------------------------------------------------------------------------------------


def _durations(plan: sim.Plan, warm: float, meas: float) -> tuple[float, float]:
    m = plan.mean_session_s
    return warm * m, (warm + meas) * m


def capacity_search(plan: sim.Plan, cfg: Config, policy: str, seed: int = 0,
                    params: SearchParams = SearchParams(), run=sim.simulate,
                    hint: int | None = None) -> tuple[int, list[dict]]:
    """Largest N (sessions per GPU) meeting the SLO and fitting memory: bracket, then narrow.

    Without a hint the bracket grows from N = 1 (doubling, or to the margin line's crossing when
    that is nearer); with a ``hint`` (e.g. N* of another policy at the same
    workload/model/configuration/SLO) it starts there and steps up or down (the margin line's
    crossing, else 10 %, 20 %, 40 %, …).  Narrowing (regula falsi on the margin, or bisection)
    stops at ``rel_tol`` × N; the result is always a candidate that ran and met the SLO with the
    next larger bracket end failing (module docstring).  ``run(plan, cfg, policy, n, seed=,
    duration_s=, warmup_s=, n_samples=)`` is one candidate's short run (the simulator by default;
    a stub in tests).
    """
    warm, dur = _durations(plan, params.search_warmup, params.search_measure)

    def probe(n: int):
        return run(plan, cfg, policy, n, seed=seed, duration_s=dur, warmup_s=warm, n_samples=SEARCH_SAMPLES), None

    n_star, tried, _ = _search(probe, cfg, params, hint)
    return n_star, tried


def _search(probe, cfg: Config, params: SearchParams, hint: int | None) -> tuple[int, list[dict], Any]:
    """The search of :func:`capacity_search` over ``probe(n) -> (short-run result, continuation)``.

    Returns (N*, candidates tried, N*'s continuation).  Only the best feasible candidate's
    continuation is kept; every other one is closed as soon as it is superseded.
    """
    tried: dict[int, dict] = {}
    best: dict[str, Any] = {"n": 0, "cont": None}

    def ok(n: int) -> bool:
        if n not in tried:
            r, cont = probe(n)
            feasible = bool(r.meets(cfg.slo))
            tried[n] = dict(n=n, p99_tpot_s=r.p99_tpot_s, p99_ttft_s=r.p99_ttft_s, oom=r.oom, feasible=feasible)
            if feasible and n > best["n"]:
                _close(best["cont"])
                best.update(n=n, cont=cont)
            else:
                _close(cont)
        return tried[n]["feasible"]

    def done() -> tuple[int, list[dict], Any]:
        cont = best["cont"] if best["n"] == lo else None
        if cont is None:
            _close(best["cont"])
        return lo, sorted(tried.values(), key=lambda d: d["n"]), cont

    def margin(n: int) -> float | None:
        return _margin(tried[n], cfg.slo)

    def estimate(pts: list[int]) -> float | None:
        """N at which the margin reaches 1, on the line through two tried candidates (or one and the origin)."""
        ms = [(n, margin(n)) for n in pts]
        ms = [(n, m) for n, m in ms if m is not None and m > 0]
        if len(ms) == 1:
            ms = [(0, 0.0)] + ms
        if len(ms) != 2:
            return None
        (n0, m0), (n1, m1) = sorted(ms)
        if n1 == n0 or m1 <= m0:
            return None
        return n0 + (1.0 - m0) * (n1 - n0) / (m1 - m0)

    def width(n: int) -> int:
        return max(1, int(params.rel_tol * n))

    lo, hi = 0, None
    n_max = params.n_max
    if hint and hint > 1:
        start = min(int(hint), n_max)
    else:
        start = 1
    if ok(start):
        lo = start
    elif start == 1:
        return done()
    else:
        hi = start
    # bracket from below (lo feasible, nothing above failed yet): the margin line's crossing, at least
    # 2^k × rel_tol above lo after k estimates in a row that fell short, at most 2 × lo
    streak = 0
    while hi is None and lo < n_max:
        feas = sorted(n for n, t in tried.items() if t["feasible"])[-2:]
        est = estimate(feas) if lo > 1 else None
        if est is None:
            nxt = 2 * lo if start == 1 else max(lo + 1, int(lo * (1 + 0.1 * 2 ** streak)))
        else:
            floor_ = max(lo + width(lo), int(lo * (1 + params.rel_tol * 2 ** streak)))
            nxt = min(max(int(round(est)), floor_), 2 * lo)
        nxt = min(nxt, n_max)
        if ok(nxt):
            # count the steps that fell short: a hinted blind step (10 %, 20 %, 40 %, …) or an estimate below the cap
            lo, streak = nxt, streak + ((start != 1) if est is None else (nxt < 2 * lo))
        else:
            hi = nxt
    # bracket from above (the hint failed): the same, downward
    streak = 0
    while lo == 0:
        infeas = sorted(n for n, t in tried.items() if not t["feasible"])[:2]
        est = estimate(infeas)
        if est is None:
            nxt = max(1, min(hi - 1, int(hi / (1 + 0.1 * 2 ** streak))))
        else:
            ceil_ = min(hi - width(hi), int(hi / (1 + params.rel_tol * 2 ** streak)))
            nxt = max(1, min(max(int(round(est)), hi // 2), ceil_, hi - 1))
        if ok(nxt):
            lo = nxt
        elif nxt == 1:
            return done()
        else:
            hi, streak = nxt, streak + 1
    # narrow, alternating two steps until the bracket is within rel_tol:
    #   estimate: the margin line's crossing between lo and hi (regula falsi), kept inside the middle
    #             half of the bracket, so a noisy margin still removes at least a quarter of it;
    #   confirm:  one resolution step from the end the estimate just moved, which closes the bracket
    #             when the estimate was right.
    # Without margins (or with a flat margin line) each step is a bisection.
    confirm = None  # side the last estimate landed on (True: feasible, lo moved)
    while hi is not None and hi - lo > width(lo):
        est = None
        if confirm is None:
            est = estimate([lo, hi])
            q = (hi - lo) / 4
            mid = (lo + hi) // 2 if est is None else int(round(min(max(est, lo + q), hi - q)))
        elif confirm:
            mid = lo + width(lo)
        else:
            mid = hi - max(1, int(params.rel_tol * hi / (1 + params.rel_tol)))
        mid = min(max(mid, lo + 1), hi - 1)
        feasible = ok(mid)
        if feasible:
            lo = mid
        else:
            hi = mid
        confirm = feasible if (confirm is None and est is not None) else None
    return done()


def _margin(rec: dict, slo: Any) -> float | None:
    """A candidate's load relative to the SLO: max(p99 TPOT / bound, p99 TTFT / bound); None if unknown or OOM."""
    if rec["oom"]:
        return None
    vals = [v for v in (rec["p99_tpot_s"] / slo.p99_tpot_s, rec["p99_ttft_s"] / slo.ttft_s) if v == v]
    return max(vals) if vals else None


def _close(cont: Any) -> None:
    """Release a paused run (a generator from :func:`lachesis.simulator.simulate_windows`)."""
    if cont is not None and hasattr(cont, "close"):
        cont.close()


def point_key(point: Point, plan_fingerprint: str, params: SearchParams) -> str:
    """Cache key: hash of the point's inputs, the trace fingerprint, the search settings, the code version."""
    cfg = point.config()
    blob = json.dumps(dict(point=asdict(point), trace=plan_fingerprint, config=_canonical(asdict(cfg)),
                           params=asdict(params), code=CODE_VERSION), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def evaluate_point(point: Point, params: SearchParams = SearchParams(), cache_dir: str | os.PathLike | None = None,
                   plan: sim.Plan | None = None, hint: int | None = None) -> dict:
    """Capacity search + lifetime run at N* for one point; cached as JSON when ``cache_dir`` is set."""
    plan = plan or workload_plan(point.workload, point.scale, point.seed, point.trace)
    key = point_key(point, plan.fingerprint, params)
    path = Path(cache_dir) / f"{key}.json" if cache_dir else None
    if path is not None and path.exists():
        return json.loads(path.read_text())
    cfg = point.config()
    s_warm, s_dur = _durations(plan, params.search_warmup, params.search_measure)
    warm, dur = _durations(plan, params.warmup, params.measure)
    windows = [sim.Window(s_dur, s_warm, SEARCH_SAMPLES), sim.Window(dur, warm, params.n_samples)]

    def probe(n: int):
        """A candidate's short run, paused so that N*'s run continues into the lifetime window."""
        runs = sim.simulate_windows(plan, cfg, point.policy, n, windows, seed=point.seed)
        return next(runs), runs

    if s_dur > dur:  # a search window longer than the lifetime run: nothing to continue
        probe = lambda n: (sim.simulate(plan, cfg, point.policy, n, seed=point.seed, duration_s=s_dur,  # noqa: E731
                                        warmup_s=s_warm, n_samples=SEARCH_SAMPLES), None)
    n_star, tried, cont = _search(probe, cfg, params, hint)
    out: dict[str, Any] = dict(asdict(point), key=key, n_star=n_star, search=tried, code=CODE_VERSION,
                               warmup_s=warm, duration_s=dur)
    if n_star > 0:
        # Shortcut, not an approximation: N*'s search run and its lifetime run share every event up to the
        # search window's end (same seed, same N), so the lifetime run continues it.
        r = next(cont) if cont is not None else sim.simulate(plan, cfg, point.policy, n_star, seed=point.seed,
                                                             duration_s=dur, warmup_s=warm, n_samples=params.n_samples)
        _close(cont)
        out.update({k: v for k, v in r.to_dict().items() if k not in ("n_sessions", "policy")})
    else:
        out.update(lifetime_years=float("nan"), oom=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(out, default=_json_default, indent=1)))
    return out


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
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o)}")


def _group_key(p: Point) -> tuple:
    return (p.workload, p.model, p.memory, p.slo, p.scale, p.seed, p.trace)


def evaluate_group(points: Sequence[Point], params: SearchParams, cache_dir: str | None) -> list[dict]:
    """Evaluate points sharing workload/model/configuration/SLO in order, each search hinted by the previous N*.

    ASSUMPTION (hint): policies at the same cell admit similar N, so the previous policy's N* is a
    cheap starting bracket; the search still verifies the boundary for each policy.
    """
    out, hint = [], None
    for p in points:
        r = evaluate_point(p, params, cache_dir, hint=hint)
        out.append(r)
        hint = r.get("n_star") or hint
    return out


def _eval_group(args: tuple) -> list[dict]:
    return evaluate_group(*args)


def run_grid(points: Sequence[Point], params: SearchParams = SearchParams(), cache_dir: str | os.PathLike | None = None,
             n_jobs: int | None = None, scheduler: str | Any | None = None, progress: bool = True) -> pd.DataFrame:
    """Evaluate every point (cached), in parallel on local processes or on a Dask cluster."""
    from tqdm.auto import tqdm

    points = list(points)
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        groups.setdefault(_group_key(p), []).append(i)
    idx = list(groups.values())
    args = [([points[i] for i in g], params, str(cache_dir) if cache_dir else None) for g in idx]
    results: list[dict] = [None] * len(points)  # type: ignore[list-item]

    def put(k: int, res: list[dict]) -> None:
        for i, r in zip(idx[k], res):
            results[i] = r

    if scheduler is not None:
        from dask.distributed import Client, as_completed as das_completed

        client = scheduler if hasattr(scheduler, "submit") else Client(scheduler)
        futs = {client.submit(_eval_group, a, pure=False): k for k, a in enumerate(args)}
        for f in tqdm(das_completed(list(futs)), total=len(futs), disable=not progress, desc="sweep (dask)"):
            put(futs[f], f.result())
        if client is not scheduler:
            client.close()
    elif (n_jobs or os.cpu_count() or 1) <= 1 or len(args) <= 1:
        for k, a in enumerate(tqdm(args, disable=not progress, desc="sweep")):
            put(k, _eval_group(a))
    else:
        # groups of one workload first, so each process builds a plan once
        order = sorted(range(len(args)), key=lambda k: (args[k][0][0].workload, args[k][0][0].model))
        with ProcessPoolExecutor(max_workers=n_jobs or os.cpu_count()) as ex:
            futs = {ex.submit(_eval_group, args[k]): k for k in order}
            for f in tqdm(as_completed(futs), total=len(futs), disable=not progress, desc="sweep"):
                put(futs[f], f.result())
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
    df = run_grid(pts, cache_dir=cache, scheduler=getattr(args, "scheduler", None))
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
