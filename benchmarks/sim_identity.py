"""Simulator output identity and CPU cost: record every SimResult field of sample runs, or check them.

A speed change to the simulator, the allocator, the policies or the step model must not change one
output bit.  This script runs a fixed set of sample runs (closed loop through the search and the
lifetime window, as the sweep does, plus capacity searches) and writes every result field —
scalars, ``bytes_by_class_tier``, ``series``, the write totals — to JSON (floats round-trip exactly),
or compares a run against such a file with ``==``.  It also prints the CPU time per simulated request.

    # on the code before the change (e.g. `git archive <base> | tar -x -C /tmp/base`):
    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/sim_identity.py --set paper --record /tmp/ref.json
    # on the code after it:
    .venv/bin/python benchmarks/sim_identity.py --set paper --check /tmp/ref.json

Sets: ``small`` (corpus scale 0.1 and a tiny memory that forces eviction and OOM, seconds) and
``paper`` (scale 1 at the grid's loads, every policy; minutes).  Measurements: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

ALL_POLICIES = ("hbm_first", "deterministic", "lachesis", "hbm_first_reclaim", "rho_threshold", "oracle")


def _runs(which: str) -> list[dict]:
    """Sample runs: (workload, scale, memory, model, slo, policy, n), the sweep's windows, or a capacity search."""
    if which == "small":
        out = [dict(workload=w, scale=0.1, memory="1/7", model="Qwen3-235B-A22B", slo="tight", policy=p, n=n)
               for w, n in (("multi_agent", 40), ("tau3", 120)) for p in ALL_POLICIES]
        out += [dict(workload=w, scale=0.1, memory="tiny", model="Qwen3-235B-A22B", slo="tight", policy=p, n=n)
                for w, n in (("multi_agent", 10), ("tau3", 100)) for p in ALL_POLICIES]
        out += [dict(workload="multi_agent", scale=0.1, memory="tiny", model="Qwen3-235B-A22B", slo="tight",
                     policy=p, n=30) for p in ("hbm_first", "lachesis")]  # out of memory
        out += [dict(search=True, workload=w, scale=0.1, memory="4/4", model="Llama-4-Maverick", slo="tight",
                     policy=p) for w, p in (("multi_agent", "lachesis"), ("bfcl", "hbm_first"))]
        return out
    if which == "paper":
        q = dict(scale=1.0, model="Qwen3-235B-A22B", slo="tight")
        out = [dict(q, workload="multi_agent", memory="1/7", policy=p, n=150) for p in ALL_POLICIES]
        out += [dict(q, workload="tau3", memory="1/7", policy=p, n=880) for p in ALL_POLICIES]
        out += [dict(workload="multi_agent_no_reviewer", scale=1.0, memory="8/8*", model="Llama-4-Maverick",
                     slo="loose", policy=p, n=264) for p in ("hbm_first", "lachesis")]
        out += [dict(workload="bfcl", scale=1.0, memory="4/4", model="Llama-4-Maverick", slo="tight", policy=p,
                     n=1656) for p in ("hbm_first", "lachesis")]
        out += [dict(search=True, workload="multi_agent", scale=1.0, memory="2/6", model="Qwen3-235B-A22B",
                     slo="tight", policy="hbm_first")]
        return out
    raise SystemExit(f"unknown set {which!r}")


def _config(spec: dict):
    from lachesis.config import DEFAULT, MODELS, SLOS, MemoryConfig, StackSpec, memory_config
    from lachesis.node import block_capacity

    model = MODELS[spec["model"]]
    if spec["memory"] == "tiny":  # 2 GB HBM + 160 GB HBF for KV: eviction under HBM-first, OOM at high load
        w = block_capacity.weight_storage_bytes_per_gpu(model, DEFAULT.deployment)
        mem = MemoryConfig("tiny", 1, 1, hbm=StackSpec("h", 2e9, 1.6e12, 1.6e12),
                           hbf=StackSpec("f", w + 160e9, 1.6e12, 16e9))
    else:
        mem = memory_config(spec["memory"])
    return DEFAULT.with_(memory=mem, model=model, slo=SLOS[spec["slo"]])


def _fields(r: Any) -> dict:
    d = r.to_dict()
    d["series"] = {c: r.series[c].tolist() for c in r.series.columns}
    d["totals"] = r.totals.as_dict()
    return d


def run_one(spec: dict) -> tuple[dict, float, int]:
    """(recorded fields, CPU seconds, requests simulated) of one sample."""
    from lachesis.evaluation import plancache
    from lachesis.node import capacity
    from lachesis.node import simulator as S

    plan = plancache.workload_plan(spec["workload"], spec["scale"], 0)
    plan.lists()  # per-plan work a sweep process does once
    _ = plan.mean_session_s  # the session spans, computed once per plan
    cfg = _config(spec)
    paper = spec["scale"] >= 1 or spec.get("search")
    params = capacity.SEARCH_PRESETS["paper" if paper else "ci"]
    sw, lw = params.search_window(plan), params.lifetime_window(plan)
    t0 = time.process_time()
    if spec.get("search"):
        runs: list = []

        def run(*a, **kw):
            r = S.simulate(*a, **kw)
            runs.append(r)
            return r

        n_star, tried = capacity.capacity_search(plan, cfg, spec["policy"], 0, params, run=run)
        cpu = time.process_time() - t0
        done = sum(r.measurement.requests_done for r in runs)
        return dict(n_star=n_star, tried=tried, runs=[_fields(r) for r in runs]), cpu, done
    short, long_ = S.simulate_windows(plan, cfg, spec["policy"], spec["n"], [sw, lw], settings=S.RunSettings(seed=0))
    cpu = time.process_time() - t0
    return dict(short=_fields(short), long=_fields(long_)), cpu, long_.measurement.requests_done


def _label(spec: dict) -> str:
    kind = "search" if spec.get("search") else f"N={spec['n']}"
    return (f"{spec['workload']} x{spec['scale']:g} {spec['model'][:5]} {spec['memory']} {spec['slo']} "
            f"{spec['policy']} {kind}")


def _diff(a: Any, b: Any, path: str = "") -> str | None:
    """First path where a and b differ (NaN equals NaN), else None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            if (d := _diff(a[k], b[k], f"{path}.{k}")) is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if (d := _diff(x, y, f"{path}[{i}]")) is not None:
                return d
        return None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return None
    return None if (a == b and type(a) is type(b)) else f"{path}: {a!r} != {b!r}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="small", choices=("small", "paper"))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--record", help="write the results to this JSON file")
    g.add_argument("--check", help="compare the results with this JSON file (exit 1 on any difference)")
    ap.add_argument("--only", default="", help="run only samples whose label contains this text")
    a = ap.parse_args()
    ref = json.loads(open(a.check).read()) if a.check else None
    out, bad, tot_cpu, tot_req = {}, 0, 0.0, 0
    for spec in _runs(a.set):
        label = _label(spec)
        if a.only and a.only not in label:
            continue
        res, cpu, nreq = run_one(spec)
        res = json.loads(json.dumps(res))  # as it reads back from the file (tuples -> lists)
        out[label] = dict(res, cpu_s=cpu, requests=nreq)
        tot_cpu, tot_req = tot_cpu + cpu, tot_req + nreq
        verdict = ""
        if ref is not None:
            if label not in ref:
                verdict = "  (no reference)"
            else:
                d = _diff({k: v for k, v in ref[label].items() if k not in ("cpu_s", "requests")}, res)
                verdict = "  identical" if d is None else f"  DIFFERENT at {d}"
                bad += d is not None
                if "cpu_s" in ref[label]:
                    verdict += f"  (reference {1e6 * ref[label]['cpu_s'] / max(ref[label]['requests'], 1):.1f} us/req)"
        print(f"{label:70s} {cpu:7.2f} s CPU {nreq:7d} req {1e6 * cpu / max(nreq, 1):7.1f} us/req{verdict}", flush=True)
    print(f"total {tot_cpu:.1f} s CPU, {tot_req} requests, {1e6 * tot_cpu / max(tot_req, 1):.1f} us/req")
    if a.record:
        with open(a.record, "w") as f:
            json.dump(out, f)
    if ref is not None:
        print("all identical" if not bad else f"{bad} sample(s) DIFFER")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
