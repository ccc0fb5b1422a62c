"""The simulator's and the allocator's fast paths give exactly the recorded outputs.

``tests/fixtures/sim_reference.json`` holds, for small closed-loop runs of every policy, every
``SimResult`` field (floats round-trip exactly through JSON), and for a seeded allocator event stream
per policy a digest of every block id handed out, the free lists and the block states.  A change that
moves any output bit fails here.

Re-record (only for an intended change of the model):

    .venv/bin/python tests/node/test_sim_identity.py --record

The block-id digests are integer logic.  The simulator's floats are computed in an explicit order
(the decode step's products input by input, its operators left to right: ``step_cost.dot_rows``,
``step_cost.sum_in_order``; no BLAS kernel picks it), so the run records are compared exactly on every
machine, on the Python reference and on the native core alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import sys
from dataclasses import replace

import numpy as np
import pytest
from fixture_paths import FIXTURES
from sim_fixtures import multi_agent_trace, single_agent_trace  # noqa: E402

from lachesis.analysis.ranker import rank_keys  # noqa: E402
from lachesis.analysis.segments import recover  # noqa: E402
from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS, MemoryConfig, StackSpec  # noqa: E402
from lachesis.memory.allocator import SegmentTable  # noqa: E402
from lachesis.memory.free_lists import TieredAllocator  # noqa: E402
from lachesis.memory.replay import annotate_clairvoyant, parse_event  # noqa: E402
from lachesis.node import block_capacity, native, step_cost  # noqa: E402
from lachesis.node import simulator as S  # noqa: E402
from lachesis.node.plan import build_plan  # noqa: E402

REFERENCE = FIXTURES / "sim_reference.json"
#: the policies the records hold; Lachesis's records size a ranked worker at least at the finished workers' mean
#: (``size_estimate=mean_floor``)
POLICIES = ("hbm_first", "deterministic", "lachesis:size_estimate=mean_floor", "hbm_first_reclaim", "rho_threshold",
            "oracle")
#: the allocator's digests (integer logic, any machine) also pin today's default Lachesis (``held``)
BLOCK_POLICIES = POLICIES + ("lachesis",)


def platform_key() -> dict:
    """Where the records were made (kept for the reader; the comparison does not depend on it)."""
    return dict(numpy=np.__version__, machine=platform.machine(), python=platform.python_version())


def _memory(hbm_gb: float, hbf_kv_gb: float):
    w = block_capacity.weight_storage_bytes_per_gpu(DEFAULT.model, DEFAULT.deployment)
    return DEFAULT.with_(memory=MemoryConfig("small", 1, 1, hbm=StackSpec("h", hbm_gb * 1e9, 1.6e12, 1.6e12),
                                             hbf=StackSpec("f", w + hbf_kv_gb * 1e9, 1.6e12, 16e9)))


def _plans() -> dict:
    out = {}
    for name, tr in (("multi", multi_agent_trace(12, scale=40)), ("single", single_agent_trace(12, scale=40))):
        seg = recover(tr, seed=0)
        out[name] = build_plan(tr, seg, rank_keys(tr, seg))
    return out


# (plan, memory (HBM GB, HBF GB for KV) or a Table-2 label, sessions per GPU, node); the small memories
# make HBM-first evict, and the fourth run out of memory; the last is the paper's node (eight GPUs in
# lockstep, landings stalling the group, an aged cache at the start).
RUNS = [("multi", "1/7", 12, "one_gpu"), ("multi", (2.0, 160.0), 12, "one_gpu"), ("single", (2.0, 80.0), 16, "one_gpu"),
        ("multi", (2.0, 160.0), 40, "one_gpu"), ("multi", "4/4", 3, "paper")]


def _run_record(r: S.SimResult) -> dict:
    d = r.to_dict()
    d["series"] = {c: r.series[c].tolist() for c in r.series.columns}
    d["totals"] = r.totals.as_dict()
    return json.loads(json.dumps(d))


#: the nodes of the records: one GPU (landings overlapping decode, no aged cache) and the paper's
NODES = {"one_gpu": replace(DEFAULT.deployment, group_ranks=1, landing="overlap", start="empty"),
         "paper": replace(DEFAULT.deployment, group_ranks=8, landing="stall", start="aged")}
ONE_GPU = NODES["one_gpu"]


def _label(name, mem, n, node, policy) -> str:
    return f"{name} {mem} N={n} {policy}" + ("" if node == "one_gpu" else f" {node}")


def simulator_records(backend: str = "python") -> dict:
    plans = _plans()
    out = {}
    for name, mem, n, node in RUNS:
        cfg = DEFAULT.with_(memory=next(m for m in MEMORY_CONFIGS if m.label == mem)) if isinstance(mem, str) \
            else _memory(*mem)
        cfg = cfg.with_(deployment=NODES[node])
        plan = plans[name]
        m = plan.mean_session_s
        for policy in POLICIES:
            short, long_ = S.simulate_windows(plan, cfg, policy, n, [S.Window(0.7 * m, 0.2 * m, 25),
                                                                     S.Window(2.5 * m, 0.5 * m, 60)],
                                              S.RunSettings(seed=3, backend=backend))
            out[_label(name, mem, n, node, policy)] = dict(short=_run_record(short), long=_run_record(long_))
    return out


def _events(seed: int = 0, n: int = 4000) -> list[tuple]:
    """A seeded allocator event stream: sessions whose segments of every class grow, are read and
    close, and sessions that end holding segments; sizes so that a few hundred blocks run out."""
    rng = np.random.default_rng(seed)
    classes = ("reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer")
    events, live, sessions, k = [], {}, [], 0
    for t in range(n):
        u = rng.random()
        if u < 0.04 or not sessions:
            sessions.append(f"s{k}")
            k += 1
        if u < 0.02 and len(sessions) > 3:
            s = sessions.pop(int(rng.integers(len(sessions))))
            events.append((float(t), "session_end", s))
            live = {sid: v for sid, v in live.items() if v != s}
        elif (u < 0.3 or len(live) > 24) and live:
            sid = list(live)[int(rng.integers(len(live)))]
            events.append((float(t), "read", sid, int(rng.integers(0, 5000))))
            events.append((float(t), "close", sid, float(t) - float(rng.integers(0, 3))))
            del live[sid]
        else:
            if live and rng.random() < 0.6:
                sid = list(live)[int(rng.integers(len(live)))]
                cls, s = sid.split("|")[1], live[sid]
            else:
                s = sessions[int(rng.integers(len(sessions)))]
                cls = classes[int(rng.integers(len(classes)))]
                sid = f"{s}|{cls}|{t}"
                live[sid] = s
            key = float(rng.integers(0, 6)) if cls == "worker" and rng.random() < 0.9 else math.nan
            events.append((float(t), "write", sid, cls, int(rng.integers(1, 120)), s, key))
    return events


def block_digests() -> dict:
    events = annotate_clairvoyant(_events())
    out = {}
    for policy in BLOCK_POLICIES:
        table = SegmentTable(TieredAllocator(60, 540), policy, block_tokens=8)
        h = hashlib.sha256()
        for raw in events:
            ev = parse_event(raw)
            if ev[1] == "write":
                ids = table.add_write(ev[2], ev[4], ev[0], seg_class=ev[3], session_id=ev[5], rank_key=ev[6],
                                      close_s=ev[7], final_tokens=ev[8])
                h.update(np.asarray(ids, dtype=np.int64).tobytes())
            elif ev[1] == "read":
                table.add_reads(ev[2], ev[3])
            elif ev[1] == "close":
                table.close(ev[2], ev[0], ev[3])
            else:
                table.end_session(ev[2], ev[0])
        a = table.allocator
        for tier in (0, 1):
            h.update(a._free[tier][: a._top[tier]].tobytes())
        h.update(a._state.tobytes())
        out[policy] = dict(digest=h.hexdigest(), totals=table.totals.as_dict())
    return out


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text())


def test_allocator_hands_out_the_recorded_blocks(reference):
    got = block_digests()
    assert got.keys() == reference["blocks"].keys()
    for policy in BLOCK_POLICIES:
        assert got[policy]["totals"]["evicted_blocks"] > 0 or not policy.startswith("hbm_first")
        assert got[policy] == reference["blocks"][policy], policy


def _first_difference(got, ref, path="", rtol=0.0):
    """The first place where ``got`` differs from the recorded ``ref`` (fields the record lacks are new)."""
    if isinstance(got, dict) and isinstance(ref, dict):
        if not ref.keys() <= got.keys():
            return f"{path}: keys {sorted(ref.keys() - got.keys())} missing"
        return next((d for k in ref if (d := _first_difference(got[k], ref[k], f"{path}.{k}", rtol))), None)
    if isinstance(got, list) and isinstance(ref, list):
        if len(got) != len(ref):
            return f"{path}: length {len(got)} != {len(ref)}"
        return next((d for i, (x, y) in enumerate(zip(got, ref))
                     if (d := _first_difference(x, y, f"{path}[{i}]", rtol))),
                    None)
    if isinstance(got, float) and isinstance(ref, float):
        if (math.isnan(got) and math.isnan(ref)) or got == ref or (rtol and math.isclose(got, ref, rel_tol=rtol)):
            return None
    return None if (got == ref and type(got) is type(ref)) else f"{path}: {got!r} != {ref!r}"


@pytest.mark.parametrize("backend", ["python", "native"])
def test_simulator_gives_the_recorded_results(reference, backend):
    """One GPU and the paper's node give exactly the recorded results, on the reference and the native core."""
    if backend == "native" and native.core() is None:
        pytest.skip("the native core is not built here (tests/node/test_native_memory.py says whether it should be)")
    got = simulator_records(backend)
    assert got.keys() == reference["runs"].keys()
    assert any(r["long"]["oom"] for r in got.values()) and any(r["long"]["totals"]["evicted_blocks"]
                                                               for r in got.values())
    for label, rec in got.items():
        assert (d := _first_difference(rec, reference["runs"][label], rtol=0.0)) is None, f"{label}: {d}"


def test_a_small_model_change_moves_the_records(reference):
    """The comparison catches a model change: HBM read bandwidth 0.01% higher moves the first recorded run
    by more than a relative 1e-6."""
    name, mem, n, _ = RUNS[0]
    label = f"{name} {mem} N={n} {POLICIES[0]}"
    paper = next(m for m in MEMORY_CONFIGS if m.label == mem)
    faster = replace(paper, hbm=replace(paper.hbm, read_bw=paper.hbm.read_bw * 1.0001))
    cfg = DEFAULT.with_(memory=faster, deployment=ONE_GPU)
    plan = _plans()[name]
    m = plan.mean_session_s
    short, long_ = S.simulate_windows(plan, cfg, POLICIES[0], n, [S.Window(0.7 * m, 0.2 * m, 25),
                                                                 S.Window(2.5 * m, 0.5 * m, 60)], S.RunSettings(seed=3))
    got = dict(short=_run_record(short), long=_run_record(long_))
    assert _first_difference(got, reference["runs"][label], rtol=1e-6) is not None


def test_the_simulators_step_function_is_the_scalar_step():
    rng = np.random.default_rng(1)
    for mem in MEMORY_CONFIGS:
        for model in MODELS.values():
            sm = step_cost.StepModel(mem, model, DEFAULT.deployment)
            f = step_cost.scalar_step_fn(mem, model, DEFAULT.deployment)
            for _ in range(300):
                a = (float(rng.integers(0, 3000)), float(rng.uniform(0, 1e12)), float(rng.uniform(0, 5e12)),
                     float(rng.uniform(0, 1e9)), float(rng.uniform(0, 1e8)))
                assert f(*a) == sm.scalar(*a)
            with pytest.raises(ValueError, match="kv_hbf_bytes"):
                f(1.0, 0.0, -1.0, 0.0, 0.0)


if __name__ == "__main__" and "--record" in sys.argv:
    REFERENCE.write_text(json.dumps(dict(platform=platform_key(), blocks=block_digests(), runs=simulator_records())))
    print(f"wrote {REFERENCE}")
