"""Evaluation sweeps (§5.2–§5.5): one load per cell, every policy's HBF lifetime at it, over seeds, cached, in parallel.

Per cell (:mod:`lachesis.evaluation.grid`) the capacity search (:mod:`lachesis.node.capacity`) finds N*, the sessions
per GPU the SLO admits; every policy of the cell then runs at one load (``load``), and HBF lifetime is read from
a LONGER run there once the HBF write traffic has settled (:func:`lachesis.node.endurance.settled_rate`).  The
searched policy's lifetime run is its N* search run continued (:func:`lachesis.node.simulator.simulate_windows`
gives exactly the numbers of a separate run).  A cell's other seeds run at its first seed's load
(``seed_load``); the oracle runs with the load policy's recorded close times; the load policy's searched
run carries the offline bound (:func:`bound_fields`).  The assumptions and their knobs are in
docs/design.md §5 ("Load", "Seeds", "Oracle clairvoyance", "Offline bound"); every search and run is
cached (:mod:`lachesis.evaluation.store`, :mod:`lachesis.evaluation.plancache`) and runs on
:mod:`lachesis.evaluation.runner`.
:func:`cached_results` reads what a cache holds without simulating; :func:`load_curve` runs every policy
at fractions of N* (gain versus load).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

import numpy as np
import pandas as pd

from lachesis.config import SLOS, Config
from lachesis.evaluation import plancache, runner, store
from lachesis.evaluation.bound import Timeline, hbm_bound
from lachesis.evaluation.grid import LOAD_POLICY, SEED_LOADS, LoadRule, Point, is_clairvoyant, load_at
from lachesis.evaluation.row import FLATTENED, GridRow, fields, grid_row
from lachesis.memory.policies import get_policy
from lachesis.node import block_capacity, capacity, endurance
from lachesis.node import simulator as sim
from lachesis.node.capacity import PAPER, SearchParams
from lachesis.node.clairvoyance import CloseTimes, drift
from lachesis.node.plan import LADEN_CLOSES, Plan

# ------------------------------------------------------------------------------------------------
# Points: a capacity search, a run at a given load, the load policy's record and bound
# ------------------------------------------------------------------------------------------------


def _run_fields(r: sim.SimResult) -> dict:
    """A run's numbers as row fields (the row names its own load and policy)."""
    return {k: v for k, v in r.to_dict().items() if k not in ("n_sessions", "policy")}


def _read(path: Any, key: str) -> GridRow | None:
    """The cache's entry at ``path`` for ``key`` as a row; None when absent."""
    hit = store.read_entry(path, key)
    return None if hit is None else grid_row(hit)


def _write(path: Any, key: str, out: Mapping[str, Any]) -> GridRow:
    """``out`` checked as a row and written as its cache entry under ``key``."""
    return grid_row(store.write_entry(path, store.as_entry(dict(grid_row(out)), key)))


def evaluate_point(point: Point, params: SearchParams = PAPER, cache_dir: str | os.PathLike | None = None,
                   plan: Plan | None = None, hint: int | None = None) -> GridRow:
    """Capacity search of the point's policy + lifetime run at its own N*; cached as JSON when ``cache_dir`` is set.

    The load policy's N* run also keeps its segment closes (the oracle's clairvoyance at that load)."""
    if is_clairvoyant(point.policy):
        raise ValueError(f"{point.policy!r} is not capacity-searched: it runs at the cell's load with the load "
                         f"policy's close times (docs/design.md §5, \"Oracle clairvoyance\")")
    plan = plan or plancache.point_plan(point, cache_dir)
    key = store.point_key(point, plan.fingerprint, params)
    path = store.entry_path(cache_dir, key)
    if (hit := _read(path, key)) is not None:
        return hit
    cfg = point.config()
    sw, lw = params.windows(plan)
    record = point.policy == LOAD_POLICY
    recording = sim.RunSettings(seed=point.seed, record_closes=record, record_events=record)

    def probe(n: int):
        """A candidate's short run, paused so that N*'s run continues into the lifetime window."""
        if sw.duration_s > lw.duration_s:  # a search window longer than the lifetime run: nothing to continue
            return sim.simulate(plan, cfg, point.run_policy(), n, duration_s=sw.duration_s, warmup_s=sw.warmup_s,
                                n_samples=sw.n_samples, settings=sim.RunSettings(seed=point.seed)), None
        runs = sim.simulate_windows(plan, cfg, point.run_policy(), n, [sw, lw], settings=recording)
        return next(runs), runs

    n_star, tried, cont = capacity.search(probe, cfg.slo, params, hint)
    out: dict[str, Any] = dict(asdict(point), n_star=n_star, n_sessions=n_star, load="own", search=tried,
                               warmup_s=lw.warmup_s, duration_s=lw.duration_s)
    if n_star > 0:
        r = next(cont) if cont is not None else sim.simulate(plan, cfg, point.run_policy(), n_star,
                                                             duration_s=lw.duration_s, warmup_s=lw.warmup_s,
                                                             n_samples=lw.n_samples, settings=recording)
        capacity.close(cont)
        at = next(t for t in tried if t["n"] == n_star)
        out.update(_run_fields(r), slo_met=True, slo_p99_tpot_s=at["p99_tpot_s"], slo_p99_ttft_s=at["p99_ttft_s"])
        if record:  # filed under the key of the run at N*, which this run is exactly
            at_key = store.point_key(point, plan.fingerprint, params, n=n_star)
            out.update(_baseline_record(r, cfg, cache_dir, at_key, plan.fingerprint))
    else:
        out.update(lifetime_years=float("nan"), slo_met=False)
    return _write(path, key, out)


def run_at_load(point: Point, n: int, params: SearchParams = PAPER,
                cache_dir: str | os.PathLike | None = None, plan: Plan | None = None, bound: bool = False) -> GridRow:
    """The point's policy at ``n`` sessions per GPU: the lifetime run, and whether a search-length window
    there meets the SLO (``slo_met``, the criterion N* was searched with); cached.  The oracle runs with
    the load policy's close times at the same load (:func:`baseline_closes`).  ``bound``: a load-policy run
    also carries the offline bound (a cached entry without it is run again with it)."""
    plan = plan or plancache.point_plan(point, cache_dir)
    key = store.point_key(point, plan.fingerprint, params, n=int(n))
    path = store.entry_path(cache_dir, key)
    bound = bound and point.policy == LOAD_POLICY
    if (hit := _read(path, key)) is not None and (not bound or "bound_status" in hit):
        return hit
    clair = baseline_closes(point, n, params, cache_dir, plan) if is_clairvoyant(point.policy) else None
    return _run_at_load(point, n, params, cache_dir, plan, clair, bound=bound)[0]


def _run_at_load(point: Point, n: int, params: SearchParams, cache_dir: str | os.PathLike | None, plan: Plan,
                 clair: CloseTimes | None = None, bound: bool = False) -> tuple[GridRow, sim.SimResult]:
    """:func:`run_at_load` without the cache lookup: (its entry, written to the cache; the run).  ``bound``:
    a load-policy run also records its timeline and solves the bound on it (:func:`baseline_timeline`)."""
    key = store.point_key(point, plan.fingerprint, params, n=int(n))
    cfg = point.config()
    sw, lw = params.windows(plan)
    base = point.policy == LOAD_POLICY
    settings = sim.RunSettings(seed=point.seed, record_closes=base or clair is not None, clairvoyance=clair,
                               record_events=base and bound)
    if sw.duration_s <= lw.duration_s:  # one run observed through both windows
        short, long_ = sim.simulate_windows(plan, cfg, point.run_policy(), int(n), [sw, lw], settings)
    else:  # a search window longer than the lifetime run: two runs
        short, long_ = (next(sim.simulate_windows(plan, cfg, point.run_policy(), int(n), [w], settings))
                        for w in (sw, lw))
    out = dict(asdict(point), n_sessions=int(n), load="fixed", duration_s=lw.duration_s)
    out.update(_run_fields(long_), slo_met=bool(short.meets(cfg.slo)), slo_p99_tpot_s=short.measurement.p99_tpot_s,
               slo_p99_ttft_s=short.measurement.p99_ttft_s)
    if clair is not None:
        assert long_.closes is not None  # NOTE: a run told the baseline's closes records its own (settings above)
        out.update({f"close_drift_{k}": v for k, v in drift(clair, long_.closes).items()})
    if base:
        out.update(_baseline_record(long_, cfg, cache_dir, key, plan.fingerprint))
    return _write(store.entry_path(cache_dir, key), key, out), long_


def baseline_closes(point: Point, n: int, params: SearchParams = PAPER,
                    cache_dir: str | os.PathLike | None = None, plan: Plan | None = None) -> CloseTimes:
    """The segment closes of the load policy's run at the point's cell, ``n`` sessions per GPU and seed:
    from the cache (written by that run), else by running it again (which caches it)."""
    plan = plan or plancache.point_plan(point, cache_dir)
    base = replace(point, policy=LOAD_POLICY)
    key = store.point_key(base, plan.fingerprint, params, n=int(n))
    if (hit := store.read_closes(store.closes_path(cache_dir, key), key, plan.fingerprint)) is not None:
        return hit
    closes = _run_at_load(base, n, params, cache_dir, plan)[1].closes
    assert closes is not None  # the load policy's runs keep their closes
    return closes


def baseline_timeline(point: Point, n: int, params: SearchParams = PAPER,
                      cache_dir: str | os.PathLike | None = None, plan: Plan | None = None) -> Timeline:
    """The write timeline (:class:`lachesis.evaluation.bound.Timeline`) of the load policy's run at the point's cell,
    ``n`` sessions per GPU and seed (the run its entry's ``bound_*`` fields were solved on, if any): from the
    cache, else by running it again (which caches it, its bound solved)."""
    plan = plan or plancache.point_plan(point, cache_dir)
    base = replace(point, policy=LOAD_POLICY)
    key = store.point_key(base, plan.fingerprint, params, n=int(n))
    if (hit := store.read_timeline(store.timeline_path(cache_dir, key), key, plan.fingerprint)) is not None:
        return hit
    return Timeline.from_events(_run_at_load(base, n, params, cache_dir, plan, bound=True)[1].events or [])


def bound_fields(r: sim.SimResult, cfg: Config, timeline: Timeline) -> dict:
    """The offline bound (:mod:`lachesis.evaluation.bound`) on a load-policy run's timeline over its measurement
    window, as row fields ``bound_*``, and the lifetime it allows (``bound_lifetime_years``).

    ASSUMPTION (the bound's lifetime, no knob): the run's total KV write rate is its settled HBF rate
    over its HBF share of the window's bytes, so the bound's HBF rate is that total × (1 − bound share),
    i.e. the run's settled rate × the bound's HBF bytes / the run's HBF bytes in the window.  Reason:
    the bound and the run are then read on the same window and timeline, so bound/HBM-first ≥ 1 holds
    exactly, and the lifetime is settled as every row's is (:func:`lachesis.node.endurance.settled_rate`)."""
    bpt, bt = int(cfg.model.kv_bytes_per_token), int(cfg.deployment.block_tokens)
    hbm_tokens = block_capacity.kv_blocks(cfg.memory, cfg.model, cfg.deployment)[0] * bt
    res = hbm_bound(timeline, hbm_tokens, window=(r.point.warmup_s, np.inf), bytes_per_token=bpt)
    wear = r.lifetime
    hbf_run = float((wear.events_bytes_by_tier or wear.bytes_by_tier).get("hbf", np.nan))  # the recorded rank's
    rate = (wear.hbf_write_rate * (res.window_bytes - res.hbm_bytes) / hbf_run if hbf_run > 0
            else 0.0 * wear.hbf_write_rate)
    life = float(endurance.hbf_lifetime_years(cfg.memory, rate, cfg.endurance)) if np.isfinite(rate) else float("nan")
    return dict(res.as_dict(), bound_lifetime_years=life)


def _baseline_record(r: sim.SimResult, cfg: Config, cache_dir: str | os.PathLike | None, key: str,
                     fingerprint: str) -> dict:
    """A load-policy run's sidecars (its closes, the oracle's clairvoyance; its write timeline if it recorded
    its events), filed under the key of the run it is, and its bound fields for its entry (none without events)."""
    assert r.closes is not None  # NOTE: the load policy's runs record their closes
    store.write_closes(store.closes_path(cache_dir, key), key, r.closes)
    if r.events is None:
        return {}
    timeline = Timeline.from_events(r.events)
    store.write_timeline(store.timeline_path(cache_dir, key), key, fingerprint, timeline)
    return bound_fields(r, cfg, timeline)



# ------------------------------------------------------------------------------------------------
# Cells: one load per cell, a seed's replica at its first seed's load
# ------------------------------------------------------------------------------------------------


def _at_own_n_star(entry: GridRow) -> GridRow:
    """A search entry as the row of its own N* load (the lifetime run there is exactly that run)."""
    return grid_row({k: v for k, v in entry.items() if k != "search"})


def _no_load_row(point: Point) -> GridRow:
    """A point of a cell whose load policy meets the SLO at no load: no run, no lifetime."""
    return grid_row(dict(asdict(point), n_sessions=0, lifetime_years=float("nan"), slo_met=False))


#: a row, or a row or None (a cache read that may lack it)
_R = TypeVar("_R", GridRow, Optional[GridRow])


def _rows_at(points: Sequence[Point], loads: dict[str, int], searched: Mapping[str, GridRow],
             fetch: Callable[[Point, int], _R]) -> list[_R]:
    """Every point of one cell at its policy's load: no row when the load is 0, a policy searched to
    exactly that load reuses that run, any other comes from ``fetch(point, n)`` (a run or a cache read).

    The load policy is fetched before the oracle, so a run of the oracle finds its close record."""
    rows: list[Any] = [None] * len(points)
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
              searched: dict[str, GridRow] | None = None, plan: Plan | None = None,
              bound: bool = False) -> list[GridRow]:
    """Every point of one cell at its policy's load, run (or read from the cache) as :func:`run_at_load`
    (``bound``: the load policy's run carries the offline bound)."""
    plan = plan or plancache.point_plan(points[0], cache_dir)
    return _rows_at(points, loads, searched or {}, lambda p, n: run_at_load(p, n, params, cache_dir, plan, bound))


def evaluate_cell_at(points: Sequence[Point], n: int, params: SearchParams, cache_dir: str | None,
                     searched: dict[str, GridRow] | None = None, plan: Plan | None = None) -> list[GridRow]:
    """Every point of one cell at ``n`` sessions per GPU (a policy searched to exactly ``n`` reuses that run)."""
    return _at_loads(points, {p.policy: n for p in points}, params, cache_dir, searched, plan)


def search_cell(points: Sequence[Point], policies: Sequence[str], params: SearchParams, cache_dir: str | None,
                plan: Plan | None = None) -> dict[str, GridRow]:
    """Capacity searches of ``policies`` at the cell of ``points``, each hinted by the previous N*.

    ASSUMPTION (hint): policies at the same cell admit similar N, so the previous policy's N* is a
    cheap starting bracket; the search still verifies the boundary for each policy.
    """
    plan = plan or plancache.point_plan(points[0], cache_dir)
    out, hint = {}, None
    for pol in policies:
        e = evaluate_point(replace(points[0], policy=pol), params, cache_dir, plan, hint)
        out[pol] = e
        hint = e["n_star"] or hint
    return out


def cell_load(searched: Mapping[str, GridRow], load: str) -> tuple[int, str]:
    """(sessions per GPU, the policy whose N* it is) of a cell under a ``load`` rule (docs/design.md §5, "Load")."""
    if load in ("per_cell", "per_deployment"):
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
    return [LOAD_POLICY] if load == "per_cell" or not pols else pols


def _cell_loads(points: Sequence[Point], searched: Mapping[str, GridRow], load: str) -> dict[str, tuple[int, str]]:
    """Per policy of a cell: (its sessions per GPU, the policy whose N* that is) under a ``load`` rule."""
    if load == "own":
        by = {p.policy: LOAD_POLICY if is_clairvoyant(p.policy) else p.policy for p in points}
        return {pol: (int(searched[b]["n_star"]), b) for pol, b in by.items()}
    n, by_cell = cell_load(searched, load)
    return {p.policy: (n, by_cell) for p in points}


def _point_fields(p: Point) -> dict:
    """The row fields a point states about its node and SLO: the group's size and the SLO's two bounds
    (``slo_met`` judges ``slo_p99_tpot_s`` and ``slo_p99_ttft_s`` against them)."""
    slo = SLOS[p.slo]
    return dict(group_ranks=p.config().deployment.group_ranks, slo_tpot_bound_s=slo.p99_tpot_s,
                slo_ttft_bound_s=slo.ttft_s)


def _tag_cell(points: Sequence[Point], rows: Sequence[_R], at: dict[str, tuple[int, str]], rule: LoadRule,
              binding: str = "") -> list[_R]:
    """A cell's rows with the load they ran at: the rule and its base, N*, the policy it is N* of, the seed
    that sized it, the (configuration, seed) that bound a joint sizing; and the point's node and SLO bounds."""
    return [None if r is None else grid_row(dict(r, **rule.tags(p.memory), n_star=at[p.policy][0],
                                                 load_policy=at[p.policy][1], load_seed=p.seed, load_binding=binding,
                                                 **_point_fields(p)))
            for p, r in zip(points, rows)]


def _own_n_star(points: Sequence[Point], rows: list[GridRow], params: SearchParams, cache_dir: str | None,
                plan: Plan | None = None) -> list[GridRow]:
    """``rows`` with ``own_n_star`` on each row that misses the SLO at its load: that policy's own N* at its cell
    and seed (a capacity search, cached), so a miss is shown with the load its policy does admit.  The oracle
    is never searched (docs/design.md §5, "Oracle clairvoyance"): NaN."""
    out = []
    for p, r in zip(points, rows):
        if r is not None and not r.get("slo_met", True) and int(r.get("n_sessions", 0)) > 0:
            own = float("nan") if is_clairvoyant(p.policy) else float(
                evaluate_point(p, params, cache_dir, plan, hint=int(r["n_sessions"]))["n_star"])
            r = grid_row(dict(r, own_n_star=own))
        out.append(r)
    return out


def deployment_search(point: Point, rule: LoadRule, params: SearchParams, cache_dir: str | None,
                      plan: Plan | None = None) -> GridRow:
    """HBM-first's capacity search at the deployment's base configuration (``rule.base``) for the point's
    model, SLO, trace and seed: the start of a joint sizing, and the load itself under ``sizing="base"``."""
    return evaluate_point(rule.base_point(point), params, cache_dir, plan)


def _deployment_key(rule: LoadRule, base: Point, params: SearchParams) -> str:
    """The joint sizing's cache key (:func:`lachesis.evaluation.store.deployment_key`)."""
    keys = []
    for s in rule.seeds:
        b = replace(base, seed=s)
        keys.append(store.point_key(b, plancache.point_fingerprint(b), params))
    return store.deployment_key(keys, rule.configs, rule.sizing, rule.sizing_policies(base.workload))


def size_deployment(point: Point, rule: LoadRule, params: SearchParams, cache_dir: str | None) -> GridRow:
    """The deployment's load under a joint sizing (docs/design.md §5, "Load"): the largest N, to the search's
    resolution, at which every sizing policy (:meth:`LoadRule.sizing_policies`) meets the SLO at every
    configuration and seed of ``rule``; cached.

    It starts at the load policy's first-seed N* at ``rule.base`` (:func:`deployment_search`, cached: the offered
    load) and steps down until every (policy, configuration, seed)'s run meets the SLO there (:func:`_step_down`).
    Each load tries first the run that missed, then those not yet seen to meet it, then the others by their
    margin.  The runs are the grid's own rows at that load (:func:`run_at_load`, cached), so
    every held row of a sizing policy meets the SLO."""
    if not (rule.joint() and rule.configs and rule.seeds):
        raise ValueError(f"size_deployment: a joint rule with its configurations and seeds set, got {rule!r}")
    base = rule.deployment(point)
    key = _deployment_key(rule, base, params)
    path = store.entry_path(cache_dir, key)
    if (hit := _read(path, key)) is not None:
        return hit
    first, slo = rule.seeds[0], SLOS[base.slo]
    plans = {s: plancache.point_plan(replace(base, seed=s), cache_dir) for s in rule.seeds}
    n = int(deployment_search(base, rule, params, cache_dir, plans[first])["n_star"])
    # the load policy before the others, then the seeds and configurations the start's search did not run
    policies = rule.sizing_policies(base.workload)
    combos = sorted(((p, c, s) for p in policies for s in rule.seeds for c in rule.configs),
                    key=lambda x: (policies.index(x[0]), (x[1], x[2]) == (rule.base, first)))
    tried: list[dict[str, Any]] = []
    margins: dict[tuple[str, str, int], float] = {}  # each run's margin at the last load it ran
    while n > 0:
        miss = None
        for pol, c, s in combos:
            r = run_at_load(replace(base, policy=pol, memory=c, seed=s), n, params, cache_dir, plans[s],
                            bound=pol == LOAD_POLICY and s == first)
            rec = dict(n=n, policy=pol, memory=c, seed=s, p99_tpot_s=r.get("slo_p99_tpot_s", np.nan),
                       p99_ttft_s=r.get("slo_p99_ttft_s", np.nan), oom=False, feasible=bool(r["slo_met"]))
            tried.append(rec)
            margins[(pol, c, s)] = capacity.margin(rec, slo) or 0.0
            if not rec["feasible"]:
                miss = (pol, c, s)
                break
        if miss is None:
            break
        rest = [x for x in combos if x != miss]
        combos = [miss] + [x for x in rest if x not in margins] + sorted(
            (x for x in rest if x in margins), key=lambda x: -margins[x])
        n = _step_down(n, margins[miss], params)
    worst = max((r for r in tried if r["n"] == n), key=lambda r: capacity.margin(r, slo) or 0.0, default=None)
    out: dict[str, Any] = dict(asdict(base), n_star=n, n_sessions=n, load="per_deployment", load_sizing=rule.sizing,
                               search=tried, load_binding="" if worst is None else
                               f"{worst['policy']} {worst['memory']} seed {worst['seed']}")
    return _write(path, key, out)


def _step_down(n: int, margin: float, params: SearchParams) -> int:
    """The next load below ``n`` after a run that missed by ``margin``: N ÷ the margin, at least the search's
    resolution below ``n``.  N ÷ m never passes below the load the missing run admits where its margin grows
    with N at less than proportion (a decode step's fixed part), so the sizing never skips the largest load that
    meets the SLO by more than a step; halving at most bounds a margin that is a burst, not the load."""
    down = n - max(1, int(params.rel_tol * n))
    if margin > 1:
        down = min(down, int(n / margin))
    return max(0, max(down, n // 2) if n > 1 else 0)


def deployment_load(point: Point, rule: LoadRule, params: SearchParams, cache_dir: str | None,
                    plan: Plan | None = None) -> GridRow:
    """The entry whose ``n_star`` is the held load of the deployment ``point`` belongs to, under ``rule``."""
    if rule.joint():
        return size_deployment(point, rule, params, cache_dir)
    return deployment_search(point, rule, params, cache_dir, plan)


def _held(points: Sequence[Point], rule: LoadRule,
          base: GridRow) -> tuple[dict[str, GridRow], dict[str, tuple[int, str]]]:
    """(the searches a cell reuses, each policy's load) at the deployment's held load: under ``sizing="base"``
    the base cell reuses its own search run; every other cell runs at that load."""
    searched = {LOAD_POLICY: base} if points[0].memory == rule.base and not rule.joint() else {}
    return searched, {p.policy: (int(base["n_star"]), LOAD_POLICY) for p in points}


def evaluate_cell(points: Sequence[Point], params: SearchParams, cache_dir: str | None,
                  load: str | LoadRule = "per_deployment") -> list[GridRow]:
    """The rows of one cell's points under a ``load`` rule (:class:`lachesis.evaluation.grid.LoadRule`, or its name:
    "per_deployment", "per_cell", "min" or "own"; docs/design.md §5, "Load").

    The oracle is not searched: it runs at the cell's load (under "own", at the load policy's N*)."""
    rule = LoadRule.of(load).over(points)
    plan = plancache.point_plan(points[0], cache_dir)
    binding = ""
    if rule.held(points[0].memory):
        dep = deployment_load(points[0], rule, params, cache_dir, plan)
        searched, at = _held(points, rule, dep)
        binding = str(dep.get("load_binding", ""))
    else:
        cr = rule.cell_rule(points[0].memory)
        searched = search_cell(points, _searched_policies(points, cr), params, cache_dir, plan)
        at = _cell_loads(points, searched, cr)
    # the bound is solved on the run that sized the load: the search's, or at a held cell the load policy's run there
    rows = _at_loads(points, {pol: n for pol, (n, _) in at.items()}, params, cache_dir, searched, plan,
                     bound=rule.held(points[0].memory))
    return _tag_cell(points, _own_n_star(points, rows, params, cache_dir, plan), at, rule, binding)


#: the fields a seed's replica takes from its first seed's row (the load it ran at)
_LOAD_FIELDS = fields("load", "load_base", "daisy_chain_load", "n_star", "load_policy", "load_seed", "load_sizing",
                      "load_binding")


def _load_of(first: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a seed's replica takes from its first seed's row ``first`` (None where it has none)."""
    return {k: first.get(k) for k in _LOAD_FIELDS}


def _first_rows(leader: Sequence[GridRow | None]) -> dict[str, GridRow]:
    """The first seed's row per policy of a cell (``leader``; a None row is left out)."""
    return {r["policy"]: r for r in leader if r is not None}


def replicate_cell(points: Sequence[Point], leader: Sequence[GridRow], params: SearchParams,
                   cache_dir: str | None) -> list[GridRow]:
    """The rows of one cell at another seed, each policy at the load its row of the first seed's cell
    (``leader``, :func:`evaluate_cell`'s rows) ran at (``seed_load="fixed"``, docs/design.md §5, "Seeds")."""
    first = _first_rows(leader)
    missing = [p.policy for p in points if p.policy not in first]
    if missing:
        raise ValueError(f"replicate_cell: the first seed's cell has no row for policy {missing[0]!r}")
    loads = {pol: int(r["n_sessions"]) for pol, r in first.items()}
    rows = _own_n_star(points, _at_loads(points, loads, params, cache_dir), params, cache_dir)
    return [grid_row(dict(r, **_load_of(first[p.policy]), **_point_fields(p))) for p, r in zip(points, rows)]



# ------------------------------------------------------------------------------------------------
# Cache-only reading: what a cache holds for some points, without simulating (the explorer, sensitivity)
# ------------------------------------------------------------------------------------------------


def cached_entry(point: Point, cache_dir: str | os.PathLike | None, params: SearchParams = SearchParams(),
                 n: int | None = None) -> GridRow | None:
    """The cache's entry for the point's capacity search (``n`` None) or its run at ``n`` sessions per GPU,
    checked against its key like every cache read; None when absent.  Never simulates."""
    key = store.point_key(point, plancache.point_fingerprint(point), params, None if n is None else int(n))
    return _read(store.entry_path(cache_dir, key), key)


def cached_deployment(point: Point, rule: LoadRule, cache_dir: str | os.PathLike | None,
                      params: SearchParams = SearchParams()) -> GridRow | None:
    """The cache's entry of the held load of the deployment ``point`` belongs to under ``rule`` (its
    configurations and seeds set); None when absent.  Never simulates."""
    if not rule.joint():
        return cached_entry(rule.base_point(point), cache_dir, params)
    key = _deployment_key(rule, rule.deployment(point), params)
    return _read(store.entry_path(cache_dir, key), key)


def _cached_cell(points: Sequence[Point], cache_dir: str | os.PathLike | None, params: SearchParams,
                 load: str | LoadRule) -> list[GridRow | None] | None:
    """:func:`evaluate_cell`'s rows as far as the cache holds them (None per missing point); None when a
    search the ``load`` rule needs is missing."""
    rule = LoadRule.of(load).over(points)
    binding = ""
    if rule.held(points[0].memory):
        base = cached_deployment(points[0], rule, cache_dir, params)
        if base is None:
            return None
        searched, at = _held(points, rule, base)
        binding = str(base.get("load_binding", ""))
    else:
        cr = rule.cell_rule(points[0].memory)
        got = {pol: cached_entry(replace(points[0], policy=pol), cache_dir, params)
               for pol in _searched_policies(points, cr)}
        searched = {pol: e for pol, e in got.items() if e is not None}
        if len(searched) < len(got):
            return None
        at = _cell_loads(points, searched, cr)
    rows = _rows_at(points, {pol: n for pol, (n, _) in at.items()}, searched,
                    lambda p, n: cached_entry(p, cache_dir, params, n))
    rows = [r if r is None or r.get("slo_met", True) or is_clairvoyant(p.policy)
            else grid_row(dict(r, own_n_star=float((cached_entry(p, cache_dir, params) or {}).get("n_star", np.nan))))
            for p, r in zip(points, rows)]
    return _tag_cell(points, rows, at, rule, binding)


def cached_results(points: Sequence[Point], cache_dir: str | os.PathLike | None,
                   params: SearchParams = SearchParams(), load: str | LoadRule = "per_deployment",
                   seed_load: str = "fixed") -> tuple[pd.DataFrame, list[Point]]:
    """The rows :func:`run_grid` would return for ``points`` that the cache holds (in their order), and
    the points it lacks.

    A cell whose load-setting search (``load``: docs/design.md §5, "Load") is not cached lacks every point, and
    so, under ``seed_load="fixed"``, do its other seeds.  Never simulates: a user sees what is there and
    runs :func:`run_grid` for the rest.
    """
    points = list(points)
    if points:
        _check_points(points, load, seed_load)
    load = _grid_rule(points, load, seed_load)
    cells = _cells(points)
    groups = _replicas(points, cells) if seed_load == "fixed" else [[c] for c in range(len(cells))]
    rows: list[GridRow | None] = [None] * len(points)
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
                if f is None:
                    continue
                r = _rows_at([p], {p.policy: int(f["n_sessions"])}, {},
                             lambda q, n: cached_entry(q, cache_dir, params, n))[0]
                rows[i] = None if r is None else grid_row(dict(r, **_load_of(f), **_point_fields(p)))
    return results_frame([r for r in rows if r is not None]), [p for p, r in zip(points, rows) if r is None]



# ------------------------------------------------------------------------------------------------
# Grids: every point, in parallel, one row per point
# ------------------------------------------------------------------------------------------------


def _check_points(points: Sequence[Point], load: str | LoadRule = "per_deployment", seed_load: str = "fixed") -> None:
    """Clear one-line errors before any process starts: empty grid, unknown load rule/policy, a model too big."""
    if not len(points):
        raise ValueError("the grid is empty: no points to evaluate")
    LoadRule.of(load)
    if seed_load not in SEED_LOADS:
        raise ValueError(f"seed_load must be one of {SEED_LOADS}, got {seed_load!r}")
    for pol in {p.policy for p in points}:
        get_policy(pol)
    for lc in {p.laden_close for p in points}:
        if lc not in LADEN_CLOSES:
            raise ValueError(f"laden_close must be one of {LADEN_CLOSES}, got {lc!r}")
    for p in {(p.model, p.memory, p.slo): p for p in points}.values():
        cfg = p.config()
        block_capacity.kv_blocks(cfg.memory, cfg.model, cfg.deployment)  # KV fits beside the weights, or a ValueError


def _grid_rule(points: Sequence[Point], load: str | LoadRule, seed_load: str) -> LoadRule:
    """The grid's load rule with the configurations and seeds its deployments are sized over: every held
    configuration of the grid, and its seeds together (``seed_load="fixed"``) or each seed alone ("search":
    the seed's cells are a deployment of their own, filled in per cell by :func:`evaluate_cell`)."""
    rule = LoadRule.of(load).over(points)
    return replace(rule, seeds=()) if seed_load == "search" and not LoadRule.of(load).seeds else rule


def _cells(points: Sequence[Point]) -> list[list[int]]:
    """The points' indices grouped by cell."""
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
             load: str | LoadRule = "per_deployment", seed_load: str = "fixed") -> pd.DataFrame:
    """Evaluate every point (cached) with one load per cell (``load``) and every seed of a cell at its first
    seed's load (``seed_load="fixed"``; ``"search"``: each seed searches), in parallel; one row per point.
    When the cache holds every point, its rows are read (:func:`cached_results`) without building a plan.
    Under ``per_deployment`` the deployments' base searches run first, so no two cells search one."""
    points = list(points)
    _check_points(points, load, seed_load)
    rule = _grid_rule(points, load, seed_load)
    cache = str(cache_dir) if cache_dir else None
    cells = _cells(points)
    # a grid the cache holds whole is read without a plan or a process (a cold cache costs one trace here)
    if cache is not None and points and _cached_cell([points[i] for i in cells[0]], cache, params, rule) is not None:
        got, lacking = cached_results(points, cache, params, rule, seed_load)
        if not lacking:
            if progress:
                runner.progress_line(f"[sweep] all {len(points)} points read from the cache {cache}")
            return got
    groups = _replicas(points, cells) if seed_load == "fixed" else [[c] for c in range(len(cells))]
    leaders = [g[0] for g in groups]
    # the deployments' loads first (each sized once, a joint sizing running the load policy's held rows)
    deployments: dict[tuple[Point, LoadRule], None] = {}
    for c in leaders:
        if rule.held(points[cells[c][0]].memory):
            r = rule.over([points[i] for i in cells[c]])
            deployments[((r.deployment if r.joint() else r.base_point)(points[cells[c][0]]), r)] = None
    if deployments:
        runner.run_tasks(deployment_load, [(b, r, params, cache) for b, r in deployments],
                         [f"{b.workload} {b.model} {b.slo} seed {b.seed}" + (f" [{b.overrides}]" if b.overrides else "")
                          for b, _ in deployments], n_jobs, scheduler, progress, desc="deployment load")
    followers = {g[0]: g[1:] for g in groups}
    label = {c: f"{points[cells[c][0]].label()} seed {points[cells[c][0]].seed}" for c in range(len(cells))}
    pts = {c: [points[i] for i in cells[c]] for c in range(len(cells))}
    order: list[int] = list(leaders)  # the cell of each task, in the order run_tasks returns them

    def follow(k: int, rows: list[GridRow]) -> list[tuple[Callable, tuple, str]]:
        more = followers.get(order[k], [])
        order.extend(more)
        return [(replicate_cell, (pts[c], rows, params, cache), label[c]) for c in more]

    res = runner.run_tasks(evaluate_cell, [(pts[c], params, cache, rule) for c in leaders], [label[c] for c in leaders],
                    n_jobs, scheduler, progress, follow=follow)
    results: list[GridRow | None] = [None] * len(points)
    for c, rows in zip(order, res):
        for i, r in zip(cells[c], rows):
            results[i] = r
    return results_frame([r for r in results if r is not None])


def results_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Flatten point results into one row per point (the :data:`lachesis.evaluation.row.FLATTENED` fields as
    columns: tier bytes, class×tier bytes, peaks, live KV per class).  ``results`` may be rows with fields
    of their own (the sensitivity study's knob, a frame's records read back)."""
    rows = []
    for r in results:
        row = {k: v for k, v in r.items() if not isinstance(v, (dict, list))}
        for f, name in FLATTENED.items():
            for a, v in (r.get(f) or {}).items():
                if isinstance(v, dict):
                    row.update({name.format(a, b): w for b, w in v.items()})
                else:
                    row[name.format(a)] = v
        rows.append(row)
    return pd.DataFrame(rows)



# ------------------------------------------------------------------------------------------------
# Gain versus load
# ------------------------------------------------------------------------------------------------


def _cell_searches(points: Sequence[Point], params: SearchParams, cache_dir: str | None) -> dict[str, GridRow]:
    """The load policy's capacity search at a cell (a task of :func:`load_curve`)."""
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
    searched = runner.run_tasks(_cell_searches, [(c, params, cache) for c in cell_pts], labels, n_jobs, scheduler,
                         progress, desc="load curve: N*")
    tasks, tlabels, meta = [], [], []
    for c, lab, s in zip(cell_pts, labels, searched):
        n_star = int(s[LOAD_POLICY]["n_star"])
        loads = sorted({load_at(f, n_star) for f in fr}) if n_star > 0 else []
        for n in loads:
            tasks.append((c, n, params, cache, s))
            tlabels.append(f"{lab} N={n}")
            meta.append((n_star, n / n_star))
    res = runner.run_tasks(evaluate_cell_at, tasks, tlabels, n_jobs, scheduler, progress, desc="load curve")
    rows = [grid_row(dict(r, n_star=ns, fraction=f, load="curve")) for rs, (ns, f) in zip(res, meta) for r in rs]
    if not rows:
        raise ValueError("load_curve: no cell admits any load (N* = 0 everywhere)")
    return results_frame(rows)
