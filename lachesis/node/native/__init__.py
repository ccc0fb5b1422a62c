"""The native core's Python side: whether ``lachesis.node._core`` (the C++ in this folder, built at install)
is here, and a run's plan, step model and node memories in the forms it reads.  The simulator
(:mod:`lachesis.node.simulator`) decides when a run goes native; the Python modules stay the reference.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from types import ModuleType

import numpy as np

from lachesis.config import Config
from lachesis.node import step_cost
from lachesis.node.plan import NOMINAL_TPOT_S, Plan

#: the backends a run may ask for: "auto" (native where it applies, else the reference), "native" or "python"
BACKENDS = ("auto", "native", "python")


@lru_cache(maxsize=1)
def core() -> ModuleType | None:
    """The compiled core, or None where it was not built (no C++ compiler at install): said once, in one line."""
    try:
        from lachesis.node import _core
    except ImportError:
        warnings.warn("lachesis: the native core is not built (no C++17 compiler at install); every run takes "
                      "the Python reference simulator, about 10x slower (README, 'Requirements')", RuntimeWarning,
                      stacklevel=3)
        return None
    return _core


def plan_arrays(plan: Plan) -> dict:
    """The plan as the native event loop reads it: per request its costs and CSR rows, per agent its
    requests, per request the agents it spawns, per session its root agents (built once per plan)."""
    cached = plan._native.get("arrays")
    if cached is not None:
        return cached
    agents: list = []
    index: dict[int, int] = {}

    def number(a) -> int:
        if id(a) not in index:
            index[id(a)] = len(agents)
            agents.append(a)
        return index[id(a)]

    root_ptr, root_agent = [0], []
    for s in plan.sessions:
        root_agent += [number(a) for a in plan.roots[s]]
        root_ptr.append(len(root_agent))
    kids_of: dict[int, list[int]] = {}
    k = 0
    while k < len(agents):  # every agent reachable from a root, numbered breadth first
        a = agents[k]
        for q, kids in a.children.items():
            kids_of[int(q)] = [number(c) for c in kids]
        k += 1
    agent_ptr, agent_req = [0], []
    for a in agents:
        agent_req += [int(q) for q in a.requests_list]
        agent_ptr.append(len(agent_req))
    kid_ptr, kid_agent = [0], []
    for q in range(plan.n_req):
        kid_agent += kids_of.get(q, [])
        kid_ptr.append(len(kid_agent))
    r_int = plan.r_tok.astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(r_int)])
    r_sum = (cum[plan.r_ptr[1:]] - cum[plan.r_ptr[:-1]]).astype(float)  # exact: whole tokens, then one rounding
    out = dict(
        t_user=plan.t_user, t_tools=plan.t_tools, t_obs=plan.t_obs, out=plan.out_tokens,
        w_ptr=plan.w_ptr, w_seg=plan.w_seg, w_tok=plan.w_tok, r_ptr=plan.r_ptr, r_seg=plan.r_seg, r_tok=r_int,
        r_tok_f=plan.r_tok.astype(float), r_sum=r_sum, ca_ptr=plan.ca_ptr, ca_seg=plan.ca_seg,
        ce_ptr=plan.ce_ptr, ce_seg=plan.ce_seg, kid_ptr=kid_ptr, kid_agent=kid_agent, agent_ptr=agent_ptr,
        agent_req=agent_req, root_ptr=root_ptr, root_agent=root_agent)
    out = {key: (v.tolist() if isinstance(v, np.ndarray) else v) for key, v in out.items()}
    plan._native["arrays"] = out
    return out


def step_arrays(cfg: Config) -> dict | None:
    """The step model's coefficient rows (:func:`lachesis.node.step_cost.dot_rows`' operands) for the native core;
    None for a memory whose tiers forbid some input (the reference raises there, naming it)."""
    model = step_cost.step_model(cfg.memory, cfg.model, cfg.deployment)
    if not model.carries_every_input:
        return None
    group = step_cost.GroupStep(model)
    n_local, log_miss = model.expert_terms
    return dict(lanes=model.lanes, all_ops=len(model.names), all_cols=model.columns.ravel().tolist(),
                own_ops=group.n_own, own_cols=group.own_columns.ravel().tolist(),
                group_ops=group.n_group, group_cols=group.group_columns.ravel().tolist(),
                flush_per_byte=float(model.flush_s_per_byte), n_local=float(n_local), log_miss=float(log_miss))


def run_settings(cfg: Config, n_sessions: int, first_warmup: float, land: bool, order: np.ndarray,
                 firsts: np.ndarray, phases: list[float], windows: list[tuple[float, float, int]]) -> dict:
    """A run's settings as the native core reads them (the node, the load, the random draws, the windows)."""
    mem, model, dep = cfg.memory, cfg.model, cfg.deployment
    return dict(ranks=int(dep.group_ranks), n_sessions=int(n_sessions), bytes_per_token=float(model.kv_bytes_per_token),
                first_warmup=float(first_warmup), stall=dep.landing == "stall", land=bool(land),
                ttft_ref=float(cfg.clock.ttft_ref_s), nominal_tpot=NOMINAL_TPOT_S,
                bw_hbm=float(mem.hbm_stacks * mem.hbm.write_bw), bw_hbf=float(mem.hbf_write_bw),
                kv_bytes_per_token=float(model.kv_bytes_per_token),
                order=[int(x) for x in order], firsts=[int(x) for x in firsts], phases=list(phases),
                windows=[(float(d), float(w), int(n)) for d, w, n in windows])


def plan_segments(core: ModuleType, plan: Plan):
    """The plan's per-segment columns as the native node memory reads them (built once per plan)."""
    if "segments" not in plan._native:
        plan._native["segments"] = core.plan_segments(plan)
    return plan._native["segments"]


__all__ = ["BACKENDS", "core", "plan_arrays", "plan_segments", "step_arrays", "run_settings"]
