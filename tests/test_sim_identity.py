"""The simulator's and the allocator's fast paths give exactly the recorded outputs.

``tests/fixtures/sim_reference.json`` holds, for small closed-loop runs of every policy, every
``SimResult`` field (floats round-trip exactly through JSON), and for a seeded allocator event stream
per policy a digest of every block id handed out, the free lists and the block states.  A change that
moves any output bit fails here.

Re-record (only for an intended change of the model):

    .venv/bin/python tests/test_sim_identity.py --record

The block-id digests are integer logic and hold on any machine.  The simulator's floats go through
BLAS (the decode step's matrix product), whose summation order depends on the CPU kernel, so the
run records are compared exactly on the platform they were recorded on and within a relative
``OTHER_PLATFORM_RTOL`` elsewhere; a 0.01% change of HBM's read bandwidth exceeds that tolerance (tested).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_fixtures import multi_agent_trace, single_agent_trace  # noqa: E402

from lachesis import hbf  # noqa: E402
from lachesis import simulator as S  # noqa: E402
from lachesis.ranker import rank_keys  # noqa: E402
from lachesis.allocator import SegmentTable  # noqa: E402
from lachesis.free_lists import TieredAllocator  # noqa: E402
from lachesis.plan import build_plan  # noqa: E402
from lachesis.replay import annotate_clairvoyant, parse_event  # noqa: E402
from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS, MemoryConfig, StackSpec  # noqa: E402
from lachesis.segments import recover  # noqa: E402

REFERENCE = Path(__file__).resolve().parent / "fixtures" / "sim_reference.json"
#: the policies the records hold; Lachesis's records size a ranked worker at least at the finished workers' mean
#: (``size_estimate=mean_floor``)
POLICIES = ("hbm_first", "deterministic", "lachesis:size_estimate=mean_floor", "hbm_first_reclaim", "rho_threshold",
            "oracle")
#: the allocator's digests (integer logic, any machine) also pin today's default Lachesis (``held``)
BLOCK_POLICIES = POLICIES + ("lachesis",)


def platform_key() -> dict:
    """What exact float results depend on: numpy, its BLAS kernel, the CPU architecture."""
    try:
        from threadpoolctl import threadpool_info

        blas = sorted(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}" for i in threadpool_info()
                      if i.get("user_api") == "blas" and "numpy" in i.get("filepath", ""))  # numpy's own BLAS
    except Exception:  # pragma: no cover - threadpoolctl comes with scikit-learn
        blas = []
    return dict(numpy=np.__version__, blas=blas, machine=platform.machine(), python=platform.python_version())


def _memory(hbm_gb: float, hbf_kv_gb: float):
    w = hbf.weight_storage_bytes_per_gpu(DEFAULT.model, DEFAULT.deployment)
    return DEFAULT.with_(memory=MemoryConfig("small", 1, 1, hbm=StackSpec("h", hbm_gb * 1e9, 1.6e12, 1.6e12),
                                             hbf=StackSpec("f", w + hbf_kv_gb * 1e9, 1.6e12, 16e9)))


def _plans() -> dict:
    out = {}
    for name, tr in (("multi", multi_agent_trace(12, scale=40)), ("single", single_agent_trace(12, scale=40))):
        seg = recover(tr, seed=0)
        out[name] = build_plan(tr, seg, rank_keys(tr, seg))
    return out


# (plan, memory (HBM GB, HBF GB for KV) or a Table-2 label, sessions per GPU); the small memories
# make HBM-first evict, and the last run out of memory.
RUNS = [("multi", "1/7", 12), ("multi", (2.0, 160.0), 12), ("single", (2.0, 80.0), 16), ("multi", (2.0, 160.0), 40)]


def _run_record(r: S.SimResult) -> dict:
    d = r.to_dict()
    d["series"] = {c: r.series[c].tolist() for c in r.series.columns}
    d["totals"] = r.totals.as_dict()
    return json.loads(json.dumps(d))


#: the node the records were made on: one GPU, landings overlapping decode, no aged cache
ONE_GPU = replace(DEFAULT.deployment, group_ranks=1, landing="overlap", start="empty")


def simulator_records() -> dict:
    plans = _plans()
    out = {}
    for name, mem, n in RUNS:
        cfg = DEFAULT.with_(memory=next(m for m in MEMORY_CONFIGS if m.label == mem)) if isinstance(mem, str) \
            else _memory(*mem)
        cfg = cfg.with_(deployment=ONE_GPU)
        plan = plans[name]
        m = plan.mean_session_s
        for policy in POLICIES:
            short, long_ = S.simulate_windows(plan, cfg, policy, n, [S.Window(0.7 * m, 0.2 * m, 25),
                                                                     S.Window(2.5 * m, 0.5 * m, 60)], seed=3)
            out[f"{name} {mem} N={n} {policy}"] = dict(short=_run_record(short), long=_run_record(long_))
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


#: relative float tolerance on a machine whose BLAS kernel differs from the recording's: the decode step's
#: matrix product may round differently in the last bits; a model change moves results far more
OTHER_PLATFORM_RTOL = 1e-6


def _first_difference(got, ref, path="", rtol=0.0):
    """The first place where ``got`` differs from the recorded ``ref`` (fields the record lacks are new)."""
    if isinstance(got, dict) and isinstance(ref, dict):
        if not ref.keys() <= got.keys():
            return f"{path}: keys {sorted(ref.keys() - got.keys())} missing"
        return next((d for k in ref if (d := _first_difference(got[k], ref[k], f"{path}.{k}", rtol))), None)
    if isinstance(got, list) and isinstance(ref, list):
        if len(got) != len(ref):
            return f"{path}: length {len(got)} != {len(ref)}"
        return next((d for i, (x, y) in enumerate(zip(got, ref)) if (d := _first_difference(x, y, f"{path}[{i}]", rtol))),
                    None)
    if isinstance(got, float) and isinstance(ref, float):
        if (math.isnan(got) and math.isnan(ref)) or got == ref or (rtol and math.isclose(got, ref, rel_tol=rtol)):
            return None
    return None if (got == ref and type(got) is type(ref)) else f"{path}: {got!r} != {ref!r}"


def test_simulator_gives_the_recorded_results(reference):
    """One GPU (group_ranks 1, landings overlapping decode, an empty cache at the start) gives exactly the
    recorded results on the recording's platform, and within OTHER_PLATFORM_RTOL elsewhere."""
    rtol = 0.0 if reference["platform"] == platform_key() else OTHER_PLATFORM_RTOL
    got = simulator_records()
    assert got.keys() == reference["runs"].keys()
    assert any(r["long"]["oom"] for r in got.values()) and any(r["long"]["totals"]["evicted_blocks"] for r in got.values())
    for label, rec in got.items():
        assert (d := _first_difference(rec, reference["runs"][label], rtol=rtol)) is None, f"{label}: {d}"


def test_a_small_model_change_exceeds_the_other_platform_tolerance(reference):
    """The cross-platform tolerance still catches a model change: HBM read bandwidth 0.01% higher moves the
    first recorded run by more than OTHER_PLATFORM_RTOL."""
    name, mem, n = RUNS[0]
    label = f"{name} {mem} N={n} {POLICIES[0]}"
    paper = next(m for m in MEMORY_CONFIGS if m.label == mem)
    faster = replace(paper, hbm=replace(paper.hbm, read_bw=paper.hbm.read_bw * 1.0001))
    cfg = DEFAULT.with_(memory=faster, deployment=ONE_GPU)
    plan = _plans()[name]
    m = plan.mean_session_s
    short, long_ = S.simulate_windows(plan, cfg, POLICIES[0], n, [S.Window(0.7 * m, 0.2 * m, 25),
                                                                 S.Window(2.5 * m, 0.5 * m, 60)], seed=3)
    got = dict(short=_run_record(short), long=_run_record(long_))
    assert _first_difference(got, reference["runs"][label], rtol=OTHER_PLATFORM_RTOL) is not None


def test_the_simulators_step_function_is_the_scalar_step():
    rng = np.random.default_rng(1)
    for mem in MEMORY_CONFIGS:
        for model in MODELS.values():
            sm = hbf.StepModel(mem, model, DEFAULT.deployment)
            f = hbf.scalar_step_fn(mem, model, DEFAULT.deployment)
            for _ in range(300):
                a = (float(rng.integers(0, 3000)), float(rng.uniform(0, 1e12)), float(rng.uniform(0, 5e12)),
                     float(rng.uniform(0, 1e9)), float(rng.uniform(0, 1e8)))
                assert f(*a) == sm.scalar(*a)
            with pytest.raises(ValueError, match="kv_hbf_bytes"):
                f(1.0, 0.0, -1.0, 0.0, 0.0)


if __name__ == "__main__" and "--record" in sys.argv:
    REFERENCE.write_text(json.dumps(dict(platform=platform_key(), blocks=block_digests(), runs=simulator_records())))
    print(f"wrote {REFERENCE}")
