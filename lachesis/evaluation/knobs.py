"""The parameters the paper leaves open or fixes by citation, as named overrides of one grid point.

Each :class:`Knob` has a unit, its default (the paper's setting, read from :mod:`lachesis.config`), a
validity check, its source, the values the sensitivity study (:mod:`lachesis.evaluation.sensitivity`) tries, and
what it acts on: ``clock``, ``memory``, ``deployment``, ``policy`` or ``endurance`` (the ``apply_*``
functions), or, for the load and the laden free point, a setting made elsewhere.  :data:`KNOBS` names
every knob once; a grid point carries its overrides as ``grid.Point.overrides``.

What each kind of knob acts on and why: docs/design.md §5, "Contract (knob overrides)".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Iterable, Mapping

from lachesis.config import (
    HBF_STACK,
    LANDINGS,
    MEMORY_CONFIGS,
    NODE_STARTS,
    Config,
    Deployment,
    Endurance,
    MemoryConfig,
    ReferenceClock,
)
from lachesis.memory.policies import SIZE_ESTIMATES
from lachesis.node.plan import LADEN_CLOSES

_CLOCK = ReferenceClock()
_ENDURANCE = Endurance()
_DEPLOYMENT = Deployment()


def _field_default(cls: type, name: str) -> Any:
    return next(f.default for f in fields(cls) if f.name == name)


@dataclass(frozen=True)
class Knob:
    """One parameter: its unit, the paper's value, the values a one-at-a-time study tries, and its source."""

    name: str
    unit: str
    default: float | str
    #: "clock", "memory", "endurance", "deployment", "policy", "trace" (overrides); "load" and "point" (set
    #: elsewhere, see docs/design.md §5, "Contract (knob overrides)")
    acts_on: str
    #: the values :mod:`lachesis.evaluation.sensitivity` tries around ``default`` (paper scale)
    values: tuple
    source: str
    #: allowed values: (lo, hi, lo inclusive) for a number, or the choices of a categorical knob.  Every
    #: numeric range is bounded by a physical limit (a clock 100x faster or slower than the paper's, a user
    #: delay up to an hour, a load up to 10 N*): past 1e5x tool latency the replay's clock loses the
    #: precision a decode step needs and ``simulate`` never settles (tests/evaluation/test_knobs.py)
    allowed: tuple = ()

    @property
    def simulated(self) -> bool:
        """Whether moving this knob needs new decode-node runs (endurance knobs do not)."""
        return self.acts_on != "endurance"

    @property
    def categorical(self) -> bool:
        return isinstance(self.default, str)

    def check(self, value: Any) -> float | str:
        """The value in canonical form (float or str); a one-line ValueError naming the knob if invalid."""
        if self.categorical:
            if value not in self.allowed:
                raise ValueError(f"knob {self.name!r}: expected one of {list(self.allowed)}, got {value!r}")
            return str(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"knob {self.name!r}: expected a finite number ({self.unit}), got {value!r}")
        lo, hi, lo_incl = self.allowed
        if not ((value >= lo if lo_incl else value > lo) and value <= hi):
            raise ValueError(f"knob {self.name!r}: {value!r} {self.unit} is outside "
                             f"{'[' if lo_incl else '('}{lo:g}, {hi:g}]")
        return float(value)


_INF = math.inf

#: Every knob of the sensitivity study, in the order a figure lists them.
KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("load", "× N*", 1.0, "load", (0.5, 1.5),
         "ASSUMPTION (sweep: one load per cell): sessions per GPU, as a multiple of HBM-first's N* of the cell",
         (0.0, 10.0, False)),
    Knob("load_base", "", "1/7", "load", ("4/4",),
         "ASSUMPTION (grid.LoadRule.base): the configuration whose first-seed HBM-first N* starts the deployment's "
         "sizing (under load_sizing=base: is its load)",
         tuple(m.label for m in MEMORY_CONFIGS if not m.daisy_chain)),
    Knob("load_sizing", "", "compared", "load", ("load_policy", "base"),
         "ASSUMPTION (grid.LoadRule.sizing): §5.2 runs every configuration at the SLO; compared = the largest load "
         "every compared placement meets at every held configuration and seed; load_policy = HBM-first's alone; "
         "base = HBM-first's N* at load_base, first seed (offered load)",
         ("compared", "load_policy", "base")),
    Knob("user_delay_median_s", "s", _CLOCK.user_delay_median_s, "clock", (30.0, 600.0),
         "§5.2 [12, 49, 54]: user delay ~ log-normal with median 120 s", (1.0, 3600.0, True)),
    Knob("user_delay_sigma", "log-normal σ", _CLOCK.user_delay_sigma, "clock", (0.5, 1.5),
         "ASSUMPTION (config.ReferenceClock.user_delay_sigma): the paper gives the median only", (0.0, 3.0, True)),
    Knob("tool_latency_scale", "×", 1.0, "clock", (0.1, 10.0),
         "Appendix B [2]: every tool class's mean latency (config.TOOL_CLASSES) multiplied", (0.01, 100.0, True)),
    Knob("pe_cycles", "P/E cycles", float(_ENDURANCE.pe_cycles), "endurance", (3_000.0, 10_000.0, 30_000.0),
         "§5.2 [41]: 100,000 at SLC density; MLC-class 10k and TLC-class 3k as alternatives", (1.0, 1e6, True)),
    Knob("write_amplification", "×", _ENDURANCE.write_amplification, "endurance", (1.5, 3.0),
         "§5.2 [16, 23]: 1.02 for KV blocks written whole and in order", (1.0, 100.0, True)),
    Knob("lifetime_over_ranks", "", _ENDURANCE.lifetime_over_ranks, "endurance", ("worst",),
         "ASSUMPTION (config.Endurance.lifetime_over_ranks): §5.2 'the mean rate'; worst = LLMSimulator_HBF [41]",
         ("mean", "worst")),
    Knob("hbf_write_bw_scale", f"× {HBF_STACK.write_bw / 1e9:g} GB/s per stack", 1.0, "memory", (0.5, 3.0),
         "§5.2 [41]: 16 GB/s per HBF stack; 3× is Kyung et al.'s 48 GB/s [23]", (0.01, 100.0, True)),
    Knob("read_pricing", "", _field_default(MemoryConfig, "read_pricing"), "memory", ("per_tier",),
         "§2.2, §5.2: reads over the aggregate bandwidth of all stacks; per_tier is Kyung et al.'s device",
         ("aggregate", "per_tier")),
    Knob("group_ranks", "GPUs", float(_DEPLOYMENT.group_ranks), "deployment", (1.0, 2.0, 4.0, 8.0),
         "§5.2: eight GPUs, experts expert-parallel, so they step in lockstep; 1 = one GPU and its copies",
         (1.0, float(_DEPLOYMENT.n_gpus), True)),
    Knob("landing", "", _DEPLOYMENT.landing, "deployment", ("stall",),
         "ASSUMPTION (config.Deployment.landing): §5.1's engine moves prefilled KV apart from the decode step "
         "(overlap); Son et al.'s simulator [41] adds its write to the device time (stall)",
         LANDINGS),
    Knob("node_start", "", _DEPLOYMENT.start, "deployment", ("aged",),
         "ASSUMPTION (node_memory.Memory.age): a long-running node's boundary-unaware cache is full of dead blocks",
         NODE_STARTS),
    Knob("size_estimate", "", SIZE_ESTIMATES[0], "policy", ("mean_floor", "spawn"),
         "ASSUMPTION (policies.Lachesis.size_estimate): what a ranked worker counts for when k is found",
         SIZE_ESTIMATES),
    Knob("sessions", "sessions", 0.0, "trace", (64.0, 1024.0),
         "ASSUMPTION (gaps.resample): a trace's sessions drawn whole, with replacement, seeded; 0 = as recorded",
         (0.0, 1e5, True)),
    Knob("think_time", "", "reference", "trace", ("trace",),
         "§3.2: tool and user delays modelled (reference); trace = the trace's own timestamps where recorded",
         ("reference", "trace")),
    Knob("reasoning_per_output", "reasoning tokens per output token", 0.0, "trace", (0.5, 2.0),
         "ASSUMPTION (gaps.add_reasoning): reasoning a single agent's trace does not record, stripped at turn end",
         (0.0, 20.0, True)),
    Knob("laden_close", "", "last_read", "point", ("arrival",),
         "DESIGN §3: reasoning-laden KV freed at its last read; arrival = at the next user message",
         LADEN_CLOSES),
)}

#: The knobs a ``Point.overrides`` pair may name.
OVERRIDES = tuple(k for k, v in KNOBS.items() if v.acts_on in ("clock", "memory", "endurance", "deployment",
                                                                "policy", "trace"))
#: The knobs the one-at-a-time sensitivity study moves at a cell's fixed load.  The group's size and the landing
#: are moved at the deployment's held load (a row that misses the SLO there says so); each node's own N* per
#: configuration is ``benchmarks/node_assumptions.py``'s.  The cache's start is left to ``benchmarks/group_node.py``.
#: The trace knobs fill what a real trace lacks (``lachesis evaluate``,
#: :mod:`lachesis.evaluation.verdict`); the corpus records all of it, so the study of the corpus leaves them out.
STUDY = tuple(k for k, v in KNOBS.items() if (v.acts_on != "deployment" or k in ("group_ranks", "landing"))
              and v.acts_on != "trace" and k != "load_base")


#: The decode nodes a grid runs on, by name (docs/design.md §5, "Decode node"): ``paper`` is §5.2's eight-GPU
#: expert-parallel group in lockstep with a long-running node's aged cache (landings overlap decoding and the size
#: estimate is ``held``: both defaults), the node the committed figures are made on (notebooks/params/paper.yaml);
#: ``one_gpu`` is one GPU with an empty cache, the CI parameters' node.
NODES: dict[str, dict[str, Any]] = {
    "paper": {"group_ranks": 8, "node_start": "aged"},
    "one_gpu": {},
}


def node(name: str, **more: Any) -> tuple[tuple[str, Any], ...]:
    """The overrides of a named node (:data:`NODES`) with ``more`` knobs set (a knob at its default is left
    out, so the paper's setting keeps its cache keys); a one-line error naming an unknown node."""
    if name not in NODES:
        raise ValueError(f"node: unknown {name!r}; expected one of {list(NODES)}")
    extra = {k: v for k, v in more.items() if k not in KNOBS or KNOBS[k].check(v) != KNOBS[k].default}
    return canonical(NODES[name] | extra)


def canonical(overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> tuple[tuple[str, Any], ...]:
    """``overrides`` as a sorted tuple of (knob, canonical value) pairs; a ValueError naming a bad pair."""
    if not overrides:
        return ()
    items = overrides.items() if isinstance(overrides, Mapping) else overrides
    out: dict[str, Any] = {}
    for pair in items:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"overrides: expected (knob, value) pairs, got {pair!r}")
        name, value = pair
        if name not in OVERRIDES:
            raise ValueError(f"overrides: unknown knob {name!r}; expected one of {list(OVERRIDES)}")
        if name in out:
            raise ValueError(f"overrides: knob {name!r} given twice")
        out[name] = KNOBS[name].check(value)
    return tuple(sorted(out.items()))


def _of(overrides: tuple, acts_on: str) -> dict[str, Any]:
    return {k: v for k, v in overrides if KNOBS[k].acts_on == acts_on}


def clock_overrides(overrides: tuple) -> tuple[tuple[str, Any], ...]:
    """The pairs that change the reference clock (they change the replay plan; the others do not)."""
    return tuple((k, v) for k, v in overrides if KNOBS[k].acts_on == "clock")


def trace_overrides(overrides: tuple) -> tuple[tuple[str, Any], ...]:
    """The pairs that change the trace a plan replays (:func:`lachesis.traces.gaps.fill`)."""
    return tuple((k, v) for k, v in overrides if KNOBS[k].acts_on == "trace")


def plan_overrides(overrides: tuple) -> tuple[tuple[str, Any], ...]:
    """The pairs a replay plan depends on: the clock's and the trace's (the others leave the plan as it is)."""
    return tuple((k, v) for k, v in overrides if KNOBS[k].acts_on in ("clock", "trace"))


def apply_clock(clock: ReferenceClock, overrides: tuple) -> ReferenceClock:
    """``clock`` with the clock knobs of ``overrides`` applied (tool scale multiplies every class mean)."""
    o = _of(overrides, "clock")
    if not o:
        return clock
    changes: dict[str, Any] = {k: o[k] for k in ("user_delay_median_s", "user_delay_sigma") if k in o}
    if "tool_latency_scale" in o:
        s = o["tool_latency_scale"]
        changes["tool_classes"] = tuple(replace(tc, mean_latency_s=tc.mean_latency_s * s) for tc in clock.tool_classes)
    return replace(clock, **changes)


def apply_memory(memory: MemoryConfig, overrides: tuple) -> MemoryConfig:
    """``memory`` with its HBF stacks' write bandwidth scaled and/or its read pricing set."""
    o = _of(overrides, "memory")
    if not o:
        return memory
    changes: dict[str, Any] = {}
    if "hbf_write_bw_scale" in o:
        changes["hbf"] = replace(memory.hbf, write_bw=memory.hbf.write_bw * o["hbf_write_bw_scale"])
    if "read_pricing" in o:
        changes["read_pricing"] = o["read_pricing"]
    return replace(memory, **changes)


def apply_endurance(endurance: Endurance, overrides: tuple) -> Endurance:
    """``endurance`` with P/E cycles and/or write amplification set."""
    o = _of(overrides, "endurance")
    return replace(endurance, **o) if o else endurance


def apply_deployment(deployment: Deployment, overrides: tuple) -> Deployment:
    """``deployment`` with its group size, landing and cache start set."""
    o = _of(overrides, "deployment")
    changes: dict[str, Any] = {}
    if "group_ranks" in o:
        if o["group_ranks"] != int(o["group_ranks"]):
            raise ValueError(f"knob 'group_ranks': expected a whole number of GPUs, got {o['group_ranks']!r}")
        changes["group_ranks"] = int(o["group_ranks"])
    if "landing" in o:
        changes["landing"] = o["landing"]
    if "node_start" in o:
        changes["start"] = o["node_start"]
    return replace(deployment, **changes) if changes else deployment


def apply_policy(policy: str, overrides: tuple) -> str:
    """The policy spec a point runs: ``lachesis`` with the policy knobs of ``overrides`` as its knobs; every other
    policy as given.  A knob the spec names and the overrides set to another value is refused in one line (the
    point's label would name the override while the spec's value runs)."""
    o = _of(overrides, "policy")
    name, sep, rest = policy.partition(":")
    if not o or name.strip() != "lachesis":
        return policy
    given = dict(part.partition("=")[::2] for part in rest.split(",")) if sep else {}
    given = {k.strip(): v.strip() for k, v in given.items()}
    for k, v in o.items():
        if k in given and given[k] != str(v):
            raise ValueError(f"policy {policy!r}: knob {k!r} is {given[k]!r} in the spec but {v!r} in the point's "
                             "overrides; set it in one place")
    extra = [f"{k}={v}" for k, v in sorted(o.items()) if k not in given and v != KNOBS[k].default]
    if not extra:
        return policy
    return f"{policy},{','.join(extra)}" if sep else f"{policy}:{','.join(extra)}"


def apply(cfg: Config, overrides: tuple) -> Config:
    """``cfg`` with every override applied (clock, memory, endurance, deployment)."""
    if not overrides:
        return cfg
    return cfg.with_(clock=apply_clock(cfg.clock, overrides), memory=apply_memory(cfg.memory, overrides),
                     endurance=apply_endurance(cfg.endurance, overrides),
                     deployment=apply_deployment(cfg.deployment, overrides))


def describe(overrides: tuple) -> str:
    """A short label: ``"user_delay_median_s=600"``, or ``"paper"`` for no override."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in overrides) or "paper"



#: Every knob and categorical value in words: the one name table the sensitivity chart and its sentences read.
KNOB_WORDS = {"load": "load on the node", "user_delay_median_s": "user think time, median",
              "user_delay_sigma": "user think time, spread", "tool_latency_scale": "tool-call latency",
              "pe_cycles": "HBF endurance", "write_amplification": "write amplification",
              "hbf_write_bw_scale": "HBF write bandwidth", "read_pricing": "KV read pricing",
              "group_ranks": "expert-parallel group size", "landing": "KV landing on HBF",
              "node_start": "node start state", "size_estimate": "ranked worker's size estimate",
              "laden_close": "reasoning-laden KV freed at",
              "load_base": "configuration the held load is sized at",
              "load_sizing": "how the deployment's load is sized", "sessions": "sessions drawn from the trace",
              "think_time": "tool and user delays", "reasoning_per_output": "reasoning added where none is recorded",
              "lifetime_over_ranks": "lifetime over ranks",
              "paper": "the paper's setting"}
VALUE_WORDS = {"aggregate": "all stacks", "per_tier": "per tier", "stall": "stalls decode", "overlap": "overlaps",
               "aged": "aged", "empty": "empty", "held": "KV held", "mean_floor": "class mean (floor)",
               "spawn": "size at spawn", "last_read": "last read", "arrival": "next user message",
               "mean": "mean rank", "worst": "worst rank", "reference": "reference clock",
               "trace": "trace timestamps", "compared": "every compared policy, configuration and seed",
               "load_policy": "HBM-first at every configuration and seed", "base": "1/7, first seed (offered)"}


def knob_label(name: str) -> str:
    """A knob in words, with its unit (an axis label)."""
    k = KNOBS.get(name)
    unit = k.unit if k is not None else ""
    text = KNOB_WORDS.get(name, name.replace("_", " "))
    return f"{text} ({unit})" if unit else text


def value_label(value: Any) -> str:
    """A knob's value as a chart label: a number as written, a categorical value in words."""
    return VALUE_WORDS.get(str(value), str(value).replace("_", " "))
