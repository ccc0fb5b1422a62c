"""Decode-node simulator speed: the fast path vs the per-block reference on the same event stream.

For a corpus trace at 1×, 2× and 4× its size (corpus ``scale``), the closed-loop simulator runs N
sessions per GPU long enough to replay each session about once, recording the allocator event
stream.  The same stream is then replayed through the fast allocator
(:func:`lachesis.memory.replay.replay_events`) and through the per-block reference
(``tests/reference_blocksim.py``, one Python object per KV block); per-tier write bytes must agree.

    .venv/bin/python benchmarks/bench_sim.py [--workload multi_agent] [--scale 0.05] [--n 16] [--hbm-gb 4] [--hbf-kv-gb
    300]

The memory is 1/7-shaped but small (default 4 GB HBM + 300 GB of HBF for KV per GPU): the reference
holds one Python object per block, and at the paper's 36 GB + 3.5 TB (≈1.2 M blocks) it does not
finish in reasonable time, which is the point of the fast path.

Prints CPU times (``time.process_time``: the machine is shared, so wall time is not a measure), the
speed-up of the fast replay over the reference, and the whole simulator's CPU time per request, for
each trace length (the reference runs at 1× only unless ``--ref-upto``; 0 skips it), and writes them
as its section of ``benchmarks/RESULTS.md`` (``--no-record``: print only).

``--backends`` instead runs paper-scale cells on both backends side by side (the native core and the Python
reference, alternated, the same run each), at one GPU and at the paper's eight-GPU node, checks that every
result field agrees, and prints CPU µs per request and the native/reference ratio (its own section).

``--own-policy`` runs a policy written in Python (the Lachesis rule as a policy of one's own: a subclass, so the native
core calls it back) on both backends side by side on the paper-scale multi-agent cell of ``--backends``, checks every
result field agrees, and times the native run of one Figs. 9-10 cell's run at the grid's windows (its own section).

``--grid`` times the native core alone on the runs the paper-scale grid makes (its own section): each policy of a
Figs. 11-12 cell and of a Figs. 9-10 cell at the grid's load (HBM-first's N* at 1/7 on the paper's eight-GPU node),
through the grid's search and lifetime windows (:data:`lachesis.node.capacity.PAPER`), the oracle at the HBM-first run's
close times, as :func:`lachesis.evaluation.sweep.run_at_load` runs them; CPU and wall seconds per run (plan built
beforehand,
as a sweep process does once), best of ``--repeats``, and CPU µs per request of the lifetime window.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from reference_blocksim import reference_replay  # noqa: E402
from results import record  # noqa: E402

from lachesis.evaluation import plancache  # noqa: E402
from lachesis.memory.replay import replay_events  # noqa: E402
from lachesis.node import simulator as S  # noqa: E402
from lachesis.node.node_memory import Memory  # noqa: E402

TITLE = "Decode-node simulator (`benchmarks/bench_sim.py`)"
BACKENDS_TITLE = "Native core against the Python reference (`benchmarks/bench_sim.py --backends`)"
GRID_TITLE = "Native core on the grid's runs (`benchmarks/bench_sim.py --grid`)"
OWN_TITLE = "A policy of one's own on the native core (`benchmarks/bench_sim.py --own-policy`)"

#: paper-scale cells (workload, memory configuration, node, sessions per GPU, policy): the loads a sweep
#: runs there (Maverick; multi-agent at 4/4, τ³-bench at 1/7)
BACKEND_CELLS = [("multi_agent", "4/4", "paper", 32, "hbm_first"), ("multi_agent", "4/4", "paper", 32, "lachesis"),
                 ("tau3", "1/7", "paper", 500, "lachesis"), ("multi_agent", "1/7", "one_gpu", 148, "lachesis")]


def backends(repeats: int) -> list[str]:
    """Each cell on the Python reference and the native core, alternated ``repeats`` times; CPU µs per request."""
    import pandas as pd

    from lachesis.config import DEFAULT, memory_config
    from lachesis.evaluation import knobs

    rows = []
    for workload, mem, node, n, policy in BACKEND_CELLS:
        plan = plancache.workload_plan(workload, 1.0, 0)
        plan.lists()
        cfg = knobs.apply(DEFAULT.with_(memory=memory_config(mem)), knobs.node(node))
        times: dict[str, list[float]] = {"python": [], "native": []}
        results = {}
        for _ in range(repeats):
            for backend in ("python", "native"):
                t0 = time.process_time()
                results[backend] = S.simulate(plan, cfg, policy, n, settings=S.RunSettings(seed=0, backend=backend))
                times[backend].append(time.process_time() - t0)
        a, b = results["python"], results["native"]
        same = all(str(getattr(a, k)) == str(getattr(b, k)) for k in a.__dataclass_fields__ if k not in ("series",)) \
            and a.series.equals(b.series)
        req = a.measurement.requests_done
        py, nat = min(times["python"]), min(times["native"])
        rows.append(dict(workload=workload, memory=mem, node=node, N=n, policy=policy, requests=req,
                         python_s=py, native_s=nat, python_us_per_request=1e6 * py / req,
                         native_us_per_request=1e6 * nat / req, ratio=py / nat, identical=same))
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    r = df["ratio"]
    return [f"paper scale, seed 0, the simulator's default windows; CPU seconds (process_time), best of {repeats} "
            "alternated runs per backend; identical: every result field equal",
            df.to_string(index=False, float_format=lambda v: f"{v:.3g}"),
            f"The native core's speed-up per request: {r.median():.0f}x (the median of these cells; "
            f"{r.min():.0f}-{r.max():.0f}x). README and docs/design.md point here for it."]


def _own_lachesis():
    """The Lachesis rule as a researcher would bring it: a subclass (not the registered class, so the native core calls
    its ``tier`` back, with the native table's view), under its own name."""
    from lachesis.memory.policies import Lachesis

    class MyLachesis(Lachesis):
        name = "my_lachesis"

    return MyLachesis()


def own_policy(repeats: int) -> list[str]:
    """A Python policy on both backends on the multi-agent paper cell (alternated, best CPU of ``repeats``), and its
    native run of one Figs. 9-10 cell at the grid's windows."""
    import pandas as pd

    from lachesis.config import DEFAULT, memory_config
    from lachesis.evaluation import knobs
    from lachesis.evaluation.grid import Point
    from lachesis.node.capacity import PAPER

    workload, mem, node, n, _ = BACKEND_CELLS[0]
    plan = plancache.workload_plan(workload, 1.0, 0)
    plan.lists()
    cfg = knobs.apply(DEFAULT.with_(memory=memory_config(mem)), knobs.node(node))
    rows = []
    policies = (("my_lachesis (own, called back)", _own_lachesis), ("lachesis (built-in rule)", lambda: "lachesis"))
    for label, make in policies:
        times: dict[str, list[float]] = {"python": [], "native": []}
        results = {}
        for _ in range(repeats):
            for backend in ("python", "native"):
                t0 = time.process_time()
                results[backend] = S.simulate(plan, cfg, make(), n, settings=S.RunSettings(seed=0, backend=backend))
                times[backend].append(time.process_time() - t0)
        a, b = results["python"], results["native"]
        same = all(str(getattr(a, k)) == str(getattr(b, k)) for k in a.__dataclass_fields__ if k != "series") \
            and a.series.equals(b.series)
        req = a.measurement.requests_done
        py, nat = min(times["python"]), min(times["native"])
        rows.append(dict(policy=label, workload=workload, memory=mem, node=node, N=n, requests=req, python_s=py,
                         native_s=nat, python_us_per_request=1e6 * py / req, native_us_per_request=1e6 * nat / req,
                         ratio=py / nat, identical=same))
        print(rows[-1], flush=True)
    # one Figs. 9-10 cell's run of the policy, as the sweep runs it at the grid's load (search + lifetime windows)
    gw, gmem, gmodel, gslo, gn = GRID_CELLS[2]
    gplan = plancache.workload_plan(gw, 1.0, 0)
    gplan.lists()
    sw, lw = PAPER.windows(gplan)
    gcfg = Point(gw, gmem, gmodel, gslo, "hbm_first", overrides=knobs.node("paper")).config()
    cell = {}
    for label, make in (("my_lachesis", _own_lachesis), ("lachesis", lambda: "lachesis")):
        best = float("inf")
        for _ in range(repeats):
            t0 = time.process_time()
            _, long_ = S.simulate_windows(gplan, gcfg, make(), gn, [sw, lw], S.RunSettings(seed=0))
            best = min(best, time.process_time() - t0)
        cell[label] = (best, long_.measurement.requests_done)
    df = pd.DataFrame(rows)
    return [f"paper scale, seed 0, the simulator's default windows; CPU seconds (process_time), best of {repeats} "
            "alternated runs per backend; identical: every result field equal",
            df.to_string(index=False, float_format=lambda v: f"{v:.3g}"),
            f"one Figs. 9-10 run at the grid's windows ({gw}, {gmem}, {gmodel}, N = {gn}, the paper's node), native: "
            + ", ".join(f"{k} {t:.2f} s CPU ({1e6 * t / r:.2f} µs per request)" for k, (t, r) in cell.items())]


#: the grid's cells at paper scale (workload, memory configuration, model, SLO, sessions per GPU: the load the committed
#: figures ran at, HBM-first's N* at 1/7 on the paper's node) and the policies each runs there
GRID_CELLS = [("bfcl", "1/7", "Llama-4-Maverick", "tight", 1191),
              ("tau3", "1/7", "Qwen3-235B-A22B", "tight", 652),
              ("multi_agent", "1/7", "Qwen3-235B-A22B", "tight", 64)]
GRID_POLICIES = ("hbm_first", "lachesis", "hbm_first_reclaim", "rho_threshold", "oracle")


def grid_runs(repeats: int) -> list[str]:
    """Each policy of each :data:`GRID_CELLS` cell as the sweep runs it at a load, ``repeats`` times; best CPU."""
    import os

    import pandas as pd

    from lachesis.evaluation import knobs
    from lachesis.evaluation.grid import Point
    from lachesis.node.capacity import PAPER

    rows = []
    for workload, mem, model, slo, n in GRID_CELLS:
        plan = plancache.workload_plan(workload, 1.0, 0)
        plan.lists()
        sw, lw = PAPER.windows(plan)
        cfg = Point(workload, mem, model, slo, "hbm_first", overrides=knobs.node("paper")).config()
        closes = None
        for policy in GRID_POLICIES:
            cpu, wall = [], []
            for _ in range(repeats):
                settings = S.RunSettings(seed=0, record_closes=policy in ("hbm_first", "oracle"),
                                         clairvoyance=closes if policy == "oracle" else None)
                t0, w0 = time.process_time(), time.perf_counter()
                short, long_ = S.simulate_windows(plan, cfg, policy, n, [sw, lw], settings)
                cpu.append(time.process_time() - t0)
                wall.append(time.perf_counter() - w0)
            if policy == "hbm_first":
                closes = long_.closes
            req = long_.measurement.requests_done
            rows.append(dict(workload=workload, memory=mem, model=model, N=n, policy=policy, requests=req,
                             cpu_s=min(cpu), wall_s=min(wall), us_per_request=1e6 * min(cpu) / req))
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    total = df.groupby("workload", sort=False)["cpu_s"].sum()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [f"paper's node (G = 8, stalling landings, aged cache), seed 0, the grid's search + lifetime windows "
            f"(capacity.PAPER); CPU seconds (process_time) and wall, best of {repeats} per run; load average at the "
            f"end {load}",
            df.to_string(index=False, float_format=lambda v: f"{v:.3g}"),
            "CPU seconds per cell (the five runs): " + ", ".join(f"{w} {v:.2f}" for w, v in total.items())]


def bench_config(hbm_gb: float, hbf_kv_gb: float):
    """Config 1/7-like but with small per-GPU capacities, so the per-block reference fits in time and memory."""
    from lachesis.config import DEFAULT, GB, MemoryConfig, StackSpec
    from lachesis.node import block_capacity

    w = block_capacity.weight_storage_bytes_per_gpu(DEFAULT.model, DEFAULT.deployment)
    mem = MemoryConfig(f"bench {hbm_gb:g}+{hbf_kv_gb:g} GB", 1, 7,
                       hbm=StackSpec("HBM4-small", hbm_gb * GB, 1.6e12, 1.6e12),
                       hbf=StackSpec("HBF-small", (w + hbf_kv_gb * GB) / 7, 1.6e12, 16e9))
    return DEFAULT.with_(memory=mem)


def bench(workload: str, scale: float, n: int, hbm_gb: float, hbf_kv_gb: float, policy: str,
          with_reference: bool = True) -> dict:
    plan = plancache.workload_plan(workload, scale, 0)
    cfg = bench_config(hbm_gb, hbf_kv_gb)
    dur = len(plan.sessions) / n * plan.mean_session_s
    plan.lists()  # per-plan preparation, done once per process in a sweep
    t0 = time.process_time()
    r = S.simulate(plan, cfg, policy, n, duration_s=dur, warmup_s=0.0,
                   settings=S.RunSettings(seed=0, record_events=True, backend="python"))
    if r.measurement.oom:
        raise SystemExit(f"the run ran out of memory at {n} sessions: raise --hbf-kv-gb or lower --n")
    t_sim = time.process_time() - t0
    mem = Memory(plan, cfg, policy)
    hb, fb, bt = mem.alloc.hbm_blocks, mem.alloc.hbf_blocks, cfg.deployment.block_tokens
    t0 = time.process_time()
    fast = replay_events(r.events, policy, hb, fb, bt)
    t_fast = time.process_time() - t0
    assert np.array_equal(fast.tokens, r.totals.tokens), "fast replay and simulator disagree"
    t_ref = float("nan")
    if with_reference:
        t0 = time.process_time()
        ref = reference_replay(r.events, policy, hb, fb, bt)
        t_ref = time.process_time() - t0
        assert np.array_equal(r.totals.tokens, ref.tokens), "tier bytes differ from the reference"
    return dict(workload=workload, scale=scale, policy=policy, requests=r.measurement.requests_done,
                events=len(r.events),
                blocks=hb + fb, sim_s=t_sim, sim_us_per_request=1e6 * t_sim / max(r.measurement.requests_done, 1),
                fast_replay_s=t_fast, reference_replay_s=t_ref, speedup=t_ref / t_fast,
                sim_vs_reference=t_ref / t_sim)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="multi_agent")
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--n", type=int, default=16, help="concurrent sessions per GPU")
    ap.add_argument("--hbm-gb", type=float, default=4.0, help="HBM per GPU (GB)")
    ap.add_argument("--hbf-kv-gb", type=float, default=300.0, help="HBF per GPU left for KV (GB)")
    ap.add_argument("--policy", default="lachesis")
    ap.add_argument("--ref-upto", type=int, default=1,
                    help="run the per-block reference up to this trace multiple (0, 1, 2 or 4); it is slow")
    ap.add_argument("--no-record", action="store_true", help="do not write benchmarks/RESULTS.md")
    ap.add_argument("--backends", action="store_true", help="native core against the Python reference instead")
    ap.add_argument("--grid", action="store_true", help="the native core alone on the grid's runs instead")
    ap.add_argument("--own-policy", action="store_true",
                    help="a policy written in Python on both backends (the native core calling it back) instead")
    ap.add_argument("--repeats", type=int, default=2, help="--backends: alternated runs per backend; --grid: runs")
    a = ap.parse_args()
    import pandas as pd

    if a.own_policy:
        lines = own_policy(a.repeats)
        print("\n".join(lines))
        if not a.no_record:
            print(f"wrote {record(OWN_TITLE, lines)}")
        return
    if a.grid:
        lines = grid_runs(a.repeats)
        print("\n".join(lines))
        if not a.no_record:
            print(f"wrote {record(GRID_TITLE, lines)}")
        return
    if a.backends:
        lines = backends(a.repeats)
        print("\n".join(lines))
        if not a.no_record:
            print(f"wrote {record(BACKENDS_TITLE, lines)}")
        return

    rows = []
    for k in (1, 2, 4):
        rows.append(bench(a.workload, a.scale * k, a.n, a.hbm_gb, a.hbf_kv_gb, a.policy,
                          with_reference=k <= a.ref_upto))
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    g = df["sim_s"].to_numpy()
    lines = [f"{a.workload}, scale {a.scale:g} = 1x, N = {a.n}, {a.policy}, {a.hbm_gb:g} GB HBM + {a.hbf_kv_gb:g} GB "
             "HBF for KV per GPU", df.to_string(index=False, float_format=lambda v: f"{v:.3g}"),
             f"simulator time growth 1x->2x->4x: {g[1] / g[0]:.2f}x, {g[2] / g[0]:.2f}x (linear would be 2x, 4x)"]
    print("\n".join(lines[1:]))
    if not a.no_record:
        print(f"wrote {record(TITLE, lines)}")


if __name__ == "__main__":
    main()
