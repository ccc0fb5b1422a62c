"""The evaluation grid's vocabulary (Figs. 9–12): a grid point, the named grids, and the names they draw on.

A *cell* is (workload, model, SLO, memory configuration, seed); a *point* is a cell and a placement
policy.  The policies, workloads, configurations and models of the paper's grids are named here once,
with the rules a grid's load follows (``LOADS``, ``SEED_LOADS``: docs/design.md §5, "Load" and "Seeds")
and the parser of a notebook's or command's comma-separated grid parameter (:func:`split_csv`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lachesis.config import DEFAULT, MEMORY_CONFIGS, MODELS, SLOS, Config, memory_config
from lachesis.evaluation import knobs
from lachesis.memory.policies import POLICIES
from lachesis.registry import POLICY_BY_NAME
from lachesis.traces.workloads import WORKLOADS

#: the placements the paper evaluates (§5.3–§5.5)
PAPER_MULTI_POLICIES = ("hbm_first", "deterministic", "lachesis")
PAPER_SINGLE_POLICIES = ("hbm_first", "lachesis")
#: beyond the paper: a vLLM-style pool, reuse-based selection (Kyung et al.) and the clairvoyant oracle
BASELINES = ("hbm_first_reclaim", "rho_threshold", "oracle")
MULTI_POLICIES = PAPER_MULTI_POLICIES + BASELINES
SINGLE_POLICIES = PAPER_SINGLE_POLICIES + BASELINES
#: how the text names each grid policy (the paper's names; the baselines as the README introduces them)
POLICY_NAMES = {p: POLICY_BY_NAME[p].words for p in MULTI_POLICIES}
MULTI_WORKLOADS = ("multi_agent", "multi_agent_no_reviewer")
SINGLE_WORKLOADS = ("tau3", "bfcl")
CONFIG_LABELS = tuple(m.label for m in MEMORY_CONFIGS)
MODEL_NAMES = tuple(MODELS)
#: the policy whose N* sets the load under ``load="per_deployment"`` and ``"per_cell"`` (docs/design.md §5, "Load")
LOAD_POLICY = "hbm_first"
#: the rules a cell's load follows (``load``: docs/design.md §5, "Load"); the first is the default
LOADS = ("per_deployment", "per_cell", "min", "own")
#: the memory configuration whose first-seed N* starts a deployment's sizing, and is its load under
#: ``load_sizing="base"`` (``load_base``)
LOAD_BASE = str(knobs.KNOBS["load_base"].default)
#: how a deployment's load is sized (``load_sizing``: docs/design.md §5, "Load"): "compared", the largest load at
#: which every placement the paper compares on the workload meets the SLO at every held configuration and seed of
#: the grid; "load_policy", the same for the load policy alone; "base", the load policy's N* at ``load_base`` for
#: the first seed alone (the offered-load view: other configurations, seeds and policies may miss the SLO there)
LOAD_SIZINGS = tuple(knobs.KNOBS["load_sizing"].allowed)
#: whether the daisy chain (8/8*) holds the deployment's load or is sized on its own (``daisy_chain_load``)
DAISY_CHAIN_LOADS = ("shared", "own")
#: the policy that runs with the load policy's recorded close times (docs/design.md §5, "Oracle clairvoyance")
CLAIRVOYANT = "oracle"
#: the rules a cell's other seeds' load follows (``seed_load``: docs/design.md §5, "Seeds")
SEED_LOADS = ("fixed", "search")
#: the columns that name a cell in a grid's rows (seeds apart)
CELL = ["workload", "model", "slo", "memory"]


@dataclass(frozen=True)
class LoadRule:
    """How a grid's load is chosen (docs/design.md §5, "Load"): the rule, and under ``per_deployment`` the
    configuration whose first-seed N* starts the sizing (``base``), whether 8/8* shares the load (``daisy_chain``),
    how the load is sized (``sizing``) and over which configurations and seeds (empty: the grid's own)."""

    rule: str = LOADS[0]
    base: str = LOAD_BASE
    daisy_chain: str = DAISY_CHAIN_LOADS[0]
    sizing: str = LOAD_SIZINGS[0]
    #: the held configurations and seeds a joint sizing covers; empty: every configuration of §5.2 the rule
    #: holds, and the grid's seeds
    configs: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    #: the policies a "compared" sizing covers; empty: the paper's compared policies of the workload
    policies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, val, known in (("load", self.rule, LOADS), ("load_base", self.base, CONFIG_LABELS),
                                 ("daisy_chain_load", self.daisy_chain, DAISY_CHAIN_LOADS),
                                 ("load_sizing", self.sizing, LOAD_SIZINGS)):
            if val not in known:
                raise ValueError(f"{name} must be one of {list(known)}, got {val!r}")
        if memory_config(self.base).daisy_chain:
            raise ValueError(f"load_base must split the eight slots (not the daisy chain), got {self.base!r}")
        object.__setattr__(self, "configs", tuple(dict.fromkeys(self.configs)))
        object.__setattr__(self, "seeds", tuple(seed_list("load_seeds", list(self.seeds))) if self.seeds else ())
        if bad := [c for c in self.configs if c not in CONFIG_LABELS]:
            raise ValueError(f"load_configs: unknown {bad[0]!r}; expected one of {list(CONFIG_LABELS)}")

    @classmethod
    def of(cls, load: "str | LoadRule") -> "LoadRule":
        """A rule given by name (the defaults for its base and the daisy chain) or as is."""
        return load if isinstance(load, LoadRule) else cls(load)

    def held(self, memory: str) -> bool:
        """Whether a cell of this memory configuration runs at the deployment's held load."""
        return self.rule == "per_deployment" and not (
            self.daisy_chain == "own" and memory_config(memory).daisy_chain)

    def cell_rule(self, memory: str) -> str:
        """The rule a cell of this memory configuration follows: ``per_deployment`` or a per-cell one."""
        return self.rule if self.rule != "per_deployment" or self.held(memory) else "per_cell"

    def base_point(self, p: "Point") -> "Point":
        """The point whose capacity search starts sizing the deployment ``p`` belongs to (at ``base``)."""
        return replace(p, memory=self.base, policy=LOAD_POLICY)

    def joint(self) -> bool:
        """Whether a held deployment's load is sized jointly over its configurations and seeds."""
        return self.rule == "per_deployment" and self.sizing != "base"

    def sizing_policies(self, workload: str) -> tuple[str, ...]:
        """The policies whose runs must meet the SLO at a jointly sized deployment of ``workload``."""
        if self.sizing == "load_policy":
            return (LOAD_POLICY,)
        return tuple(dict.fromkeys((LOAD_POLICY,) + (self.policies or compared_policies(workload))))

    def over(self, points: Sequence["Point"]) -> "LoadRule":
        """This rule with the configurations and seeds it leaves empty filled in: every configuration it holds
        (so a grid of fewer configurations, the explorer's cell or the sensitivity study's, holds the same load
        as the figures' grid), and the seeds of ``points``."""
        configs = self.configs or tuple(c for c in CONFIG_LABELS if self.held(c))
        seeds = self.seeds or tuple(sorted({p.seed for p in points}))
        return replace(self, configs=configs, seeds=seeds)

    def deployment(self, p: "Point") -> "Point":
        """The point that names the deployment ``p`` belongs to: its load policy at ``base``, first seed."""
        return replace(p, memory=self.base, policy=LOAD_POLICY, seed=min(self.seeds) if self.seeds else p.seed)

    def tags(self, memory: str) -> dict:
        """The row fields naming the load a cell of this configuration ran at."""
        held = self.held(memory)
        return dict(load=self.cell_rule(memory), load_base=self.base if held else memory,
                    daisy_chain_load=self.daisy_chain, load_sizing=self.sizing if held else "cell")


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
    #: when reasoning-laden KV is freed (:func:`lachesis.node.plan.build_plan`); "arrival" is a sensitivity knob
    laden_close: str = "last_read"
    #: (knob, value) pairs moving the paper's setting (:mod:`lachesis.evaluation.knobs`); a mapping is accepted and
    #: stored sorted and validated.  Clock knobs rebuild the plan; every pair is part of the cache key.
    overrides: tuple = ()

    def __post_init__(self) -> None:
        for name, val, known in (("memory", self.memory, CONFIG_LABELS), ("model", self.model, MODEL_NAMES),
                                 ("slo", self.slo, tuple(SLOS))):
            if val not in known:
                raise ValueError(f"grid point: {name} {val!r} is not one of {list(known)}")
        if self.trace and (self.workload in WORKLOADS or not self.workload.strip()):  # the label names what ran
            raise ValueError(f"grid point: workload {self.workload!r} labels a run on trace {str(self.trace)!r}; a run "
                             f"on a trace is labelled with the trace's name {trace_name(self.trace)!r} (grid.on_trace) "
                             "or a name of its own that no corpus workload has")
        object.__setattr__(self, "overrides", knobs.canonical(self.overrides))
        knobs.apply_policy(self.policy, self.overrides)  # a policy knob the spec and the overrides both set: refused

    def config(self, base: Config = DEFAULT) -> Config:
        cfg = base.with_(memory=memory_config(self.memory), model=MODELS[self.model], slo=SLOS[self.slo])
        return knobs.apply(cfg, self.overrides)

    def run_policy(self) -> str:
        """The policy spec the point's runs use: its policy with the policy knobs of its overrides
        (:func:`lachesis.evaluation.knobs.apply_policy`; ``policy`` itself names the row)."""
        return knobs.apply_policy(self.policy, self.overrides)

    def cell(self) -> tuple:
        """Everything but the policy: the points of one cell share a plan and a load."""
        return (self.workload, self.model, self.memory, self.slo, self.scale, self.seed, self.trace, self.laden_close,
                self.overrides)

    def label(self) -> str:
        return f"{self.workload} {self.model} {self.slo} {self.memory}" + (
            f" [{knobs.describe(self.overrides)}]" if self.overrides else "")


def compared_policies(workload: str) -> tuple[str, ...]:
    """The placements the paper compares on a workload (§5.3–§5.5): the ablation's three on a multi-agent trace,
    HBM-first and Lachesis on a single-agent one and on a trace the paper does not name."""
    return PAPER_MULTI_POLICIES if workload in MULTI_WORKLOADS else PAPER_SINGLE_POLICIES


def is_clairvoyant(policy: str) -> bool:
    """Whether a policy (name, possibly with knobs) runs with the baseline's recorded close times."""
    return policy.partition(":")[0] == CLAIRVOYANT


def grid_policies(workload: str) -> tuple[str, ...]:
    """The policies the Figs. 9–12 grid runs on a workload (the defaults of :func:`multi_agent_grid` and
    :func:`single_agent_grid`): the ablation's three on the trace without the reviewer."""
    if workload == "multi_agent_no_reviewer":
        return PAPER_MULTI_POLICIES
    return MULTI_POLICIES if workload in MULTI_WORKLOADS else SINGLE_POLICIES


def _check_dims(name: str, **dims: Sequence[str]) -> None:
    """One-line errors for an empty or unknown grid dimension."""
    known = dict(configs=CONFIG_LABELS, models=MODEL_NAMES, slos=tuple(SLOS), policies=tuple(POLICIES))
    for arg, vals in dims.items():
        if not len(vals):
            raise ValueError(f"{name}: {arg} is empty")
        base = [v.partition(":")[0] if arg == "policies" else v for v in vals]  # a policy may carry knobs
        bad = [v for v, b in zip(vals, base) if arg in known and b not in known[arg]]
        if bad:
            raise ValueError(f"{name}: {arg}: unknown {bad[0]!r}; expected one of {list(known[arg])}")


def seed_list(name: str, seed: int | Sequence[int]) -> list[int]:
    """One seed or several (each a replicate of every cell), as a list; a one-line error otherwise."""
    seeds = [seed] if isinstance(seed, (int, np.integer)) else list(seed)
    if not seeds or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0 for x in seeds):
        raise ValueError(f"{name}: seed must be an integer >= 0 or a non-empty sequence of them, got {seed!r}")
    return [int(x) for x in dict.fromkeys(seeds)]


def multi_agent_grid(scale: float = 1.0, seed: int | Sequence[int] = 0, configs: Sequence[str] = CONFIG_LABELS,
                     models: Sequence[str] = MODEL_NAMES, slos: Sequence[str] = ("tight", "loose"),
                     policies: Sequence[str] = MULTI_POLICIES, workloads: Sequence[str] = MULTI_WORKLOADS,
                     laden_close: str = "last_read",
                     no_reviewer_policies: Sequence[str] | None = PAPER_MULTI_POLICIES,
                     overrides: Any = ()) -> list[Point]:
    """Fig. 9/10 grid: configs × models × SLOs × policies × (with, without reviewer) × seeds.

    On the trace without the reviewer only ``policies`` that are also in ``no_reviewer_policies`` run
    (None: all of them): the paper reads that trace only in its ablation (§5.2: "every result below is
    read on the first unless it names the second (§5.4)"), which names HBM-first, w/o predictive path
    and Lachesis.
    """
    _check_dims("multi_agent_grid", configs=configs, models=models, slos=slos, policies=policies, workloads=workloads)
    seeds = seed_list("multi_agent_grid", seed)

    def pols(w: str) -> list[str]:
        if w != "multi_agent_no_reviewer" or no_reviewer_policies is None:
            return list(policies)
        return [p for p in policies if p in set(no_reviewer_policies)]

    return [Point(w, c, m, s, p, scale, k, laden_close=laden_close, overrides=overrides) for k in seeds
            for w in workloads for s in slos for m in models for c in configs for p in pols(w)]


def single_agent_grid(scale: float = 1.0, seed: int | Sequence[int] = 0, configs: Sequence[str] = CONFIG_LABELS,
                      models: Sequence[str] = MODEL_NAMES, policies: Sequence[str] = SINGLE_POLICIES,
                      workloads: Sequence[str] = SINGLE_WORKLOADS, laden_close: str = "last_read",
                      overrides: Any = ()) -> list[Point]:
    """Fig. 11/12 grid: τ³-bench and BFCLv4 at the tight SLO × configs × models × policies × seeds
    (``overrides``: the node and other knobs every point carries, e.g. :func:`lachesis.evaluation.knobs.node`)."""
    _check_dims("single_agent_grid", configs=configs, models=models, policies=policies, workloads=workloads)
    seeds = seed_list("single_agent_grid", seed)
    return [Point(w, c, m, "tight", p, scale, k, laden_close=laden_close, overrides=overrides) for k in seeds
            for w in workloads for m in models for c in configs for p in policies]




def named_grid(name: str, scale: float = 1.0, seed: int = 0) -> list[Point]:
    """The grid ``lachesis sweep --trace NAME`` runs: ``multi_agent`` (or ``multi``), ``single``, ``tau3``,
    ``bfcl``, ``all``, or the path of a trace folder (the multi-agent grid's cells on that trace)."""
    if name in ("multi_agent", "multi"):
        return multi_agent_grid(scale, seed)
    if name in ("single", "tau3", "bfcl"):
        return single_agent_grid(scale, seed, workloads=SINGLE_WORKLOADS if name == "single" else (name,))
    if name == "all":
        return multi_agent_grid(scale, seed) + single_agent_grid(scale, seed)
    if not Path(name).exists():
        raise FileNotFoundError(f"--trace {name!r}: not a workload name (multi_agent, single, tau3, bfcl, all) "
                                f"nor an existing trace path")
    return on_trace(multi_agent_grid(scale, seed, no_reviewer_policies=None), name)


def trace_name(trace: str | Path) -> str:
    """A trace's name: its folder's name whole (``tau2-qwen3.5-justinchiu``), a requests file's without its format
    suffix (``.jsonl``, ``.jsonl.gz``, ``.parquet``)."""
    name = Path(trace).name
    for suffix in (".jsonl.gz", ".jsonl", ".parquet"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def on_trace(points: Sequence[Point], trace: str) -> list[Point]:
    """``points`` replayed on the trace at ``trace`` instead of the corpus, each labelled with the trace's name
    (:func:`trace_name`); points that differ only in their corpus workload become one."""
    return list(dict.fromkeys(replace(p, workload=trace_name(trace), trace=str(trace)) for p in points))


def load_curve_grid(scale: float = 1.0, seed: int = 0, configs: Sequence[str] = ("1/7", "4/4", "8/8*"),
                    models: Sequence[str] = MODEL_NAMES, slo: str = "tight",
                    workloads: Sequence[str] = ("multi_agent",),
                    policies: Sequence[str] = PAPER_MULTI_POLICIES, laden_close: str = "last_read",
                    overrides: Any = ()) -> list[Point]:
    """The cells of the gain-versus-load figure (§5.3: Lachesis and w/o predictive path over HBM-first)."""
    return multi_agent_grid(scale, seed, configs, models, (slo,), policies, workloads, laden_close,
                            overrides=overrides)


def rule_comparison_points(points: Sequence[Point], policy: str = "lachesis") -> list[Point]:
    """The points a second load rule is compared on (Figs. 9 and 11's side-by-side table): the first seed's
    load policy and ``policy``, the two whose ratio and trends the table shows."""
    first = min(p.seed for p in points)
    return [p for p in points if p.seed == first and p.policy in (LOAD_POLICY, policy)]


def split_csv(s: str | Sequence[str]) -> list[str]:
    """A notebook's or command's comma-separated parameter (``"1/7, 4/4"``) as a list; a sequence as is."""
    return [x.strip() for x in s.split(",") if x.strip()] if isinstance(s, str) else list(s)


def load_at(fraction: float, n_star: int) -> int:
    """Sessions per GPU at ``fraction`` × N*, at least 1: the loads of the load curve and of a load knob."""
    return max(1, int(round(fraction * n_star)))
