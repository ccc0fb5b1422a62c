"""The native core's Python side: whether ``lachesis.node._core`` (the C++ in this folder, built at install) is here
and sound, and the typed seam objects it reads, each built from what the Python modules decide: the segment classes,
the memory's sizes and constants, a policy (a built-in rule by its registry entry, or any other policy as a call
back into Python), the plan's columns, the step's rows, a run's settings and random draws.  The simulator
(:mod:`lachesis.node.simulator`) decides when a run goes native; the Python modules stay the reference.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from lachesis.config import Config
from lachesis.kv import DEFAULT_BOUNDARY, SEG_CLASSES, SHORT_LIVED_CLASSES, AllocationError, Tier, as_tier
from lachesis.memory.placement_stats import EMA_ALPHA, RHO_WINDOW
from lachesis.memory.policies import POLICIES, as_policy
from lachesis.memory.protocol import Policy, SegmentInfo
from lachesis.memory.written import WriteTotals
from lachesis.node import decode, step_cost
from lachesis.node.clairvoyance import CloseTimes
from lachesis.node.native import build_record
from lachesis.node.node_memory import AGED_CHUNK_TOKENS, AGED_CLASS, MemorySizes, OutOfMemory
from lachesis.node.plan import NOMINAL_TPOT_S, Plan
from lachesis.registry import POLICY_BY_NAME

if TYPE_CHECKING:  # the calls below are checked against the stubs (lachesis/node/_core.pyi, pybind11-stubgen)
    from lachesis.node import _core
else:
    _core = None  # the module, once core() has verified and loaded it

__all__ = ["BACKENDS", "INTERFACE", "core", "classes", "memory_spec", "policy", "builtin", "plan_segments",
           "plan_requests", "step", "run_spec", "memory", "node_run", "recorder", "clock", "close_times",
           "write_totals"]

#: the backends a run may ask for: "auto" (native where it applies, else the reference), "native" or "python"
BACKENDS = ("auto", "native", "python")
#: the seam's version the core must have been built for (:data:`build_record.INTERFACE`)
INTERFACE = build_record.INTERFACE
_REBUILD = "rebuild it with `make .venv/.installed-stamp` or `pip install -e .` (README, 'Without a compiler')"


def _say(text: str) -> None:
    warnings.warn(f"lachesis: {text}; every run takes the Python reference simulator", RuntimeWarning, stacklevel=4)


@lru_cache(maxsize=1)
def core() -> ModuleType | None:
    """The compiled core, verified before it is loaded (its build record: size, digest, seam version, sources), or
    None, said once in one line: not built (no C++17 compiler at install), damaged, stale, or not loadable."""
    global _core
    spec = importlib.util.find_spec("lachesis.node._core")
    if spec is None or spec.origin is None:
        _say("the native core is not built (no C++17 compiler at install?); README, 'Without a compiler'")
        return None
    path = Path(spec.origin)
    why = build_record.problem(path)
    if why is not None:
        _say(f"the native core {path.name} {why}: {_REBUILD}")
        return None
    try:
        from lachesis.node import _core as loaded
    except ImportError as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _say(f"the native core {path.name} does not load ({why}): {_REBUILD}")
        return None
    if getattr(loaded, "INTERFACE", None) != INTERFACE:
        _say(f"the native core {path.name} is stale (seam version {getattr(loaded, 'INTERFACE', None)}, these "
             f"sources need {INTERFACE}): {_REBUILD}")
        return None
    loaded.set_error_classes(out_of_memory=OutOfMemory, allocation_error=AllocationError)
    _core = loaded
    return loaded


def _require() -> None:
    if core() is None:
        raise RuntimeError("the native core is not available (lachesis.node.native.core() said why)")


@lru_cache(maxsize=1)
def classes() -> _core.Classes:
    """:data:`lachesis.kv.SEG_CLASSES` as the core numbers them, with the codes its rules read."""
    _require()
    return _core.Classes(names=list(SEG_CLASSES), short_lived=[c in SHORT_LIVED_CLASSES for c in SEG_CLASSES],
                         worker=SEG_CLASSES.index("worker"), reviewer=SEG_CLASSES.index("reviewer"),
                         aged=SEG_CLASSES.index(AGED_CLASS))


def memory_spec(sizes: MemorySizes) -> _core.MemorySpec:
    """A memory's sizes with the constants the memory reads (the aged start's chunk, the statistics' smoothing)."""
    _require()
    return _core.MemorySpec(hbm_blocks=sizes.hbm_blocks, hbf_blocks=sizes.hbf_blocks, block_tokens=sizes.block_tokens,
                            bytes_per_token=sizes.bytes_per_token, aged_chunk_tokens=AGED_CHUNK_TOKENS,
                            ema_alpha=EMA_ALPHA)


def _options(p: Policy) -> _core.PolicyOptions:
    """The protocol's attributes the table honours (:class:`lachesis.memory.allocator.SegmentTable` reads the same)."""
    return _core.PolicyOptions(frees_at_boundary=bool(p.frees_at_boundary),
                               reclaims_cached_hbm=bool(getattr(p, "reclaims_cached_hbm", False)),
                               rho_window=int(getattr(p, "rho_window", RHO_WINDOW)))


def _decider(p: Policy, plan: Plan) -> Callable[..., int]:
    """A policy written in Python as the native table calls it: the row's fields in, the
    :class:`~lachesis.memory.protocol.SegmentInfo` the reference's table builds, the policy's tier out."""
    lists = plan.lists()
    cls, role, key, boundary = lists.seg_class, lists.seg_role, lists.seg_key, DEFAULT_BOUNDARY
    tier, nan = p.tier, math.nan

    def decide(inst: int, s: int, n_blocks: int, n_tokens: int, new_blocks: int, reads: int, close_s: float,
               final_tokens: float, view: _core.TableView) -> int:
        if inst < 0:  # an aged start's pseudo-segment (node_memory.Memory.age)
            info = SegmentInfo(f"aged:{s}", AGED_CLASS, "aged", "", nan, boundary[AGED_CLASS], n_blocks, n_tokens,
                               new_blocks, reads, close_s, final_tokens)
        else:
            c = cls[s]
            info = SegmentInfo(f"{inst}:{s}", c, str(inst), role[s], key[s], boundary[c], n_blocks, n_tokens,
                               new_blocks, reads, close_s, final_tokens)
        want = tier(info, view)
        return want if want.__class__ is Tier else as_tier(want)

    return decide


def builtin(p: Policy) -> bool:
    """Whether a policy object is a built-in one (its registered class exactly: a subclass may change the rule)."""
    return POLICIES.get(getattr(p, "name", "").partition(":")[0]) is type(p)


def policy(p: Policy | str, plan: Plan) -> _core.Policy:
    """One memory's native policy: a built-in policy's rule (the class its registry entry names, with the knobs it
    lists) or, for any other, the policy itself called back from the native table with the table's view."""
    _require()
    p = as_policy(p)
    entry = POLICY_BY_NAME.get(type(p).name) if builtin(p) else None
    if entry is None or entry.native is None:
        return _core.callback_policy(decide=_decider(p, plan), options=_options(p))
    numbers: dict[str, float] = {}
    words: dict[str, str] = {}
    for k in entry.native_knobs:
        v = getattr(p, k)
        if isinstance(v, str):
            words[k] = v
        else:
            numbers[k] = math.nan if v is None else float(v)
    return _core.make_policy(kind=entry.native, numbers=numbers, words=words, options=_options(p), classes=classes())


def plan_segments(plan: Plan) -> _core.PlanSegments:
    """The plan's per-segment columns (:meth:`lachesis.node.plan.Plan.segment_columns`), read in place."""
    cols = plan.segment_columns()
    return _core.PlanSegments(seg_class=cols.seg_class, seg_key=cols.seg_key, seg_tokens=cols.seg_tokens,
                              seg_reads=cols.seg_reads, classes=classes())


def plan_requests(plan: Plan) -> _core.PlanRequests:
    """The plan's requests and agents (:meth:`lachesis.node.plan.Plan.request_arrays`), read in place."""
    _require()
    a = plan.request_arrays()
    return _core.PlanRequests(t_user=a.t_user, t_tools=a.t_tools, t_obs=a.t_obs, out=a.out, w_ptr=a.w_ptr,
                              w_seg=a.w_seg, w_tok=a.w_tok, r_ptr=a.r_ptr, r_seg=a.r_seg, r_tok=a.r_tok,
                              r_tok_f=a.r_tok_f, r_sum=a.r_sum, ca_ptr=a.ca_ptr, ca_seg=a.ca_seg, ce_ptr=a.ce_ptr,
                              ce_seg=a.ce_seg, kid_ptr=a.kid_ptr, kid_agent=a.kid_agent, agent_ptr=a.agent_ptr,
                              agent_req=a.agent_req, root_ptr=a.root_ptr, root_agent=a.root_agent)


def memory(plan: Plan, sizes: MemorySizes, p: Policy | str, clock: _core.Clock | None = None,
           recorder: _core.Recorder | None = None) -> _core.NodeMemory:
    """One GPU's native memory (``node_memory.Memory(plan, cfg, p, clock, recorder)``'s twin)."""
    _require()
    return _core.NodeMemory(spec=memory_spec(sizes), policy=policy(p, plan), plan=plan_segments(plan),
                            classes=classes(), clock=clock, recorder=recorder)


def step(cfg: Config) -> _core.StepModel | None:
    """The step model's coefficient rows (:func:`lachesis.node.step_cost.dot_rows`' operands); None for a memory
    whose tiers forbid some input (the reference raises there, naming it)."""
    model = step_cost.step_model(cfg.memory, cfg.model, cfg.deployment)
    if not model.carries_every_input:
        return None
    _require()
    group = step_cost.GroupStep(model)
    n_local, log_miss = model.expert_terms
    rows = _core.StepRows
    return _core.StepModel(all=rows(n_ops=len(model.names), lanes=model.lanes, cols=model.columns),
                           own=rows(n_ops=group.n_own, lanes=model.lanes, cols=group.own_columns),
                           group=rows(n_ops=group.n_group, lanes=model.lanes, cols=group.group_columns),
                           flush_per_byte=float(model.flush_s_per_byte), n_local=float(n_local),
                           log_miss=float(log_miss))


def run_spec(cfg: Config, n_sessions: int, first_warmup: float, land: bool, order: np.ndarray, firsts: np.ndarray,
             phases: Sequence[float], windows: Sequence[tuple[float, float, int]]) -> _core.RunSpec:
    """A run's settings as the core reads them (the node, the load, the random draws, the windows)."""
    _require()
    c = _core
    mem, model, dep = cfg.memory, cfg.model, cfg.deployment
    landing = c.Landing(bw_hbm=float(mem.hbm_stacks * mem.hbm.write_bw), bw_hbf=float(mem.hbf_write_bw),
                        kv_bytes_per_token=float(model.kv_bytes_per_token))
    return c.RunSpec(ranks=int(dep.group_ranks), n_sessions=int(n_sessions),
                     bytes_per_token=float(model.kv_bytes_per_token), first_warmup=float(first_warmup),
                     stall=dep.landing == "stall", land=bool(land), ttft_ref=float(cfg.clock.ttft_ref_s),
                     nominal_tpot=NOMINAL_TPOT_S, decode_capacity=decode.CAPACITY, landing=landing,
                     order=np.asarray(order, dtype=np.int64), firsts=np.asarray(firsts, dtype=np.int64),
                     phases=np.asarray(phases, dtype=np.float64),
                     windows=[c.Window(duration_s=float(d), warmup_s=float(w), n_samples=int(n))
                              for d, w, n in windows])


def node_run(plan: Plan, step: _core.StepModel, spec: _core.RunSpec,
             memories: Sequence[_core.NodeMemory]) -> _core.NodeRun:
    """The native run of a plan on its memories (one per rank)."""
    _require()
    return _core.NodeRun(plan=plan_requests(plan), step=step, spec=spec, memories=list(memories))


def recorder() -> _core.Recorder:
    """:class:`lachesis.node.clairvoyance.Recorder`'s twin (shared by the ranks of a group)."""
    _require()
    return _core.Recorder()


def clock(times: CloseTimes, plan: Plan) -> _core.Clock:
    """:class:`lachesis.node.clairvoyance.Clock`'s twin (the same fingerprint check)."""
    if times.fingerprint != plan.fingerprint:
        raise ValueError(f"clairvoyance recorded on trace {times.fingerprint!r}, not on this run's "
                         f"{plan.fingerprint!r}")
    _require()
    return _core.Clock(session=times.session, occurrence=times.occurrence, segment=times.segment,
                       offset_s=times.offset_s)


def close_times(recorder: _core.Recorder, fingerprint: str) -> CloseTimes:
    """What a native recorder holds, as :class:`lachesis.node.clairvoyance.CloseTimes`."""
    session, occurrence, segment, offset_s = recorder.close_times()
    return CloseTimes(session, occurrence, segment, offset_s, fingerprint)


def write_totals(t: _core.WriteTotals) -> WriteTotals:
    """A native memory's totals as :class:`lachesis.memory.written.WriteTotals`."""
    return WriteTotals(tokens=np.array(t.tokens, dtype=np.int64),
                       tokens_by_class={c: np.array(v, dtype=np.int64) for c, v in t.tokens_by_class.items()},
                       blocks=np.array(t.blocks, dtype=np.int64), evicted_blocks=int(t.evicted_blocks),
                       bytes_per_token=int(t.bytes_per_token))
