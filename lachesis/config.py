"""One typed configuration for every model constant.

Each constant the paper gives carries the section it comes from (``§x`` = the Lachesis paper,
``[n]`` = its reference list).  Every value the paper leaves open is an :class:`Assumption`
field named as such, with its reason, so a reviewer can audit the model in one file.

Everything here is a frozen dataclass: build a variant with :func:`dataclasses.replace`.
Models live in :mod:`lachesis.models` (re-exported here): users add one from its public
``config.json`` with :func:`model_from_hf_config` or from a mapping with :func:`model_from_dict`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping

# Models (§5.2) are defined from their public configs in lachesis.models; re-exported here.
from lachesis.models import (  # noqa: F401
    LLAMA4_MAVERICK,
    MODELS,
    QWEN3_235B,
    ModelSpec,
    known_model,
    model_from_dict,
    model_from_hf_config,
)


def check_number(owner: str, name: str, value: object, unit: str, low: float = 0.0, inclusive: bool = False) -> None:
    """A finite number above ``low`` (at least ``low`` when ``inclusive``), else a one-line ValueError naming the
    dataclass, the field, its value and its unit: a NaN, an infinity or a negative value never reaches the model."""
    v = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(v) and (v >= low if inclusive else v > low)):
        raise ValueError(f"{owner}: {name} must be a finite number {'>=' if inclusive else '>'} {low:g} ({unit}), "
                         f"got {value!r}")


GB = 1e9  # decimal gigabyte (docs/design.md §5: HBM/HBF capacities are decimal)
TB = 1e12
SECONDS_PER_YEAR = 365.25 * 24 * 3600  # 31,557,600 s, the year Kyung et al. [23] use

# ---------------------------------------------------------------------------------------------
# Reference clock (Eq. 1, §3.2, §5.2, Appendix B)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolClass:
    """A tool-call latency class: exponential with this mean (Appendix B, after [2] and [53])."""

    name: str
    mean_latency_s: float
    source: str


#: Tool classes.  ASSUMPTION (named): the paper cites "a published measurement for each tool
#: class" [2] (InferCept, Table 1) but prints only one value, the 0.69 s mean of Fig. 4's caption,
#: which is InferCept's question-answering (Wikipedia API) class.  The other means are InferCept's
#: remaining classes as we read that table; they span the "three to four orders of magnitude" of
#: §3.5.  Which trace tool maps to which class is the corpus' / adapter's job (see
#: ``ReferenceClock.tool_class_of``).
TOOL_CLASSES: tuple[ToolClass, ...] = (
    ToolClass("arithmetic", 9e-5, "[2] InferCept Table 1, math/calculator augmentation"),
    ToolClass("virtual_env", 0.09, "[2] InferCept Table 1, virtual-environment step (shell, code)"),
    ToolClass("api", 0.69, "[2] InferCept Table 1, QA/Wikipedia API; Fig. 4 caption mean 0.69 s"),
    ToolClass("image", 20.03, "[2] InferCept Table 1, image generation"),
    ToolClass("tts", 17.24, "[2] InferCept Table 1, text-to-speech"),
)


#: Tool names that spawn a sub-agent.  The clock charges them no tool latency: the spawned
#: sub-agent's own requests advance time instead (docs/design.md §3).
SPAWN_TOOL_NAMES: frozenset[str] = frozenset({"spawn_subagent", "Task", "Agent"})


@dataclass(frozen=True)
class ReferenceClock:
    """The fixed clock of Eq. 1 on which T_norm is measured (§3.2)."""

    tpot_ref_s: float = 0.2  # §3.2, [8, 18, 19]: time per output token
    ttft_ref_s: float = 1.0  # §3.2, [7, 56]: charged once per observation prefill (Appendix B)
    user_delay_median_s: float = 120.0  # §5.2, [12, 49, 54]: log-normal median
    #: ASSUMPTION: the paper gives the log-normal's median only.  sigma = 1.0 (a factor e
    #: between median and the ~84th percentile) is a moderate think-time spread; it moves
    #: reasoning-stripped T_norm, not its median across sessions.
    user_delay_sigma: float = 1.0
    tool_classes: tuple[ToolClass, ...] = TOOL_CLASSES
    #: ASSUMPTION: a tool with no class mapping is charged as an API call (the Fig. 4 mean).
    default_tool_class: str = "api"
    #: ASSUMPTION: map of tool name -> class for tool names a trace uses; unknown names fall
    #: back to ``default_tool_class``.  Corpus presets and adapters extend this table.
    tool_class_of: Mapping[str, str] = field(default_factory=dict)
    #: ASSUMPTION: the tool calls of one request run one after another (their latencies add),
    #: as ReAct harnesses execute a response's calls in order.
    parallel_tool_calls: bool = False
    spawn_tools: frozenset[str] = SPAWN_TOOL_NAMES

    def tool_mean_s(self, tool_name: str) -> float:
        """Mean latency (s) of one call to ``tool_name`` on this clock."""
        cls = self.tool_class_of.get(tool_name, self.default_tool_class)
        for tc in self.tool_classes:
            if tc.name == cls:
                return tc.mean_latency_s
        raise KeyError(f"tool {tool_name!r} maps to unknown tool class {cls!r}")


# ---------------------------------------------------------------------------------------------
# Memory devices (§5.2; docs/design.md §5 after Son et al. [41] Table I)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackSpec:
    """One stack of a memory tier."""

    name: str
    capacity_bytes: float
    read_bw: float  # bytes/s
    write_bw: float  # bytes/s
    t_read_s: float = 0.0
    t_prog_s: float = 0.0

    def __post_init__(self) -> None:
        for f, unit in (("capacity_bytes", "bytes"), ("read_bw", "bytes/s"), ("write_bw", "bytes/s")):
            check_number(f"stack {self.name!r}", f, getattr(self, f), unit)
        for f in ("t_read_s", "t_prog_s"):
            check_number(f"stack {self.name!r}", f, getattr(self, f), "s", inclusive=True)


HBM4_STACK = StackSpec("HBM4", 36 * GB, 1.6 * TB, 1.6 * TB)  # [41] Table I
HBF_STACK = StackSpec("HBF", 512 * GB, 1.6 * TB, 16 * GB, t_read_s=1e-6, t_prog_s=100e-6)  # [41], [38]
#: Alternate preset, Kyung et al. [23]: 48 GB/s write per HBF stack, tR 3 us.  A knob, not a default.
HBF_STACK_KYUNG = StackSpec("HBF-Kyung", 512 * GB, 1.6 * TB, 48 * GB, t_read_s=3e-6, t_prog_s=100e-6)
#: Alternate preset, Kyung et al. [23]: a B200-class GPU's whole HBM (256 GB at 8 TB/s) as one
#: aggregate "stack".  A knob for the Kyung validation (lachesis.node.step_cost), not a default.
HBM_B200_KYUNG = StackSpec("HBM-B200-Kyung", 256 * GB, 8 * TB, 8 * TB)


#: How a group's lifetime reads its ranks' HBF write rates (``Endurance.lifetime_over_ranks``)
LIFETIME_OVER_RANKS = ("mean", "worst")


@dataclass(frozen=True)
class Endurance:
    """Flash wear constants (§5.2)."""

    pe_cycles: float = 100_000  # §5.2, SLC [41]
    write_amplification: float = 1.02  # §5.2, [16, 23]
    warranty_years: float = 5.0  # §5.2, §5.3: "a device must outlast its five-year warranty"
    #: ASSUMPTION (lifetime over the group's ranks, docs/design.md §5 "Lifetime"): "mean" reads the P/E budget
    #: at the ranks' mean HBF write rate (§5.2: "the mean rate at which KV is written to it"); "worst" at the
    #: most-written rank's, as the cited LLMSimulator_HBF [41] takes its worst device
    lifetime_over_ranks: str = "mean"

    def __post_init__(self) -> None:
        check_number("endurance", "pe_cycles", self.pe_cycles, "P/E cycles")
        # the flash writes at least the bytes it is given: an amplification below 1 is not a device
        check_number("endurance", "write_amplification", self.write_amplification, "×", low=1.0, inclusive=True)
        check_number("endurance", "warranty_years", self.warranty_years, "years")
        if self.lifetime_over_ranks not in LIFETIME_OVER_RANKS:
            raise ValueError(f"endurance: lifetime_over_ranks must be one of {list(LIFETIME_OVER_RANKS)}, got "
                             f"{self.lifetime_over_ranks!r}")


ReadPricing = Literal["aggregate", "per_tier"]


@dataclass(frozen=True)
class MemoryConfig:
    """Per-GPU memory: eight stack slots split between HBM and HBF (§5.2, Fig. 9 x-axis).

    ``read_pricing`` — how :mod:`lachesis.node.step_cost` prices a read on a co-located design:
    ``"aggregate"`` (default) reads every byte, HBM- or HBF-resident, over the aggregate bandwidth
    of all stacks (§2.2: "the accelerator can utilize the aggregate memory bandwidth of all stacks
    through direct and inter-stack paths"; §5.2: "the two tiers have the same read bandwidth and
    differ only in write bandwidth"); ``"per_tier"`` (a sensitivity, and Kyung et al.'s device)
    reads each tier's bytes over that tier's own stacks, the tiers in parallel.  The 8/8* daisy
    chain reads everything through the HBM links whichever is set (docs/design.md §5).
    """

    label: str
    hbm_stacks: int
    hbf_stacks: int
    #: 8/8* (H3 daisy chain [14]): HBF sits behind HBM and its traffic crosses the HBM links, so
    #: the two tiers share one set of links and read bandwidth does not add up (docs/design.md §5).
    daisy_chain: bool = False
    hbm: StackSpec = HBM4_STACK
    hbf: StackSpec = HBF_STACK
    read_pricing: ReadPricing = "aggregate"

    def __post_init__(self) -> None:
        if self.read_pricing not in ("aggregate", "per_tier"):
            raise ValueError(f"memory {self.label!r}: read_pricing must be 'aggregate' or 'per_tier', "
                             f"got {self.read_pricing!r}")
        for f in ("hbm_stacks", "hbf_stacks"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise ValueError(f"memory {self.label!r}: {f} must be a whole number >= 0, got {v!r}")

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_stacks * self.hbm.capacity_bytes

    @property
    def hbf_bytes(self) -> float:
        return self.hbf_stacks * self.hbf.capacity_bytes

    @property
    def hbm_read_bw(self) -> float:
        return self.hbm_stacks * self.hbm.read_bw

    @property
    def hbm_write_bw(self) -> float:
        return self.hbm_stacks * self.hbm.write_bw

    @property
    def hbf_read_bw(self) -> float:
        """Aggregate HBF read bandwidth.  Daisy chain: HBF reads share the HBM links."""
        return self.hbm_read_bw if self.daisy_chain else self.hbf_stacks * self.hbf.read_bw

    @property
    def hbf_write_bw(self) -> float:
        return self.hbf_stacks * self.hbf.write_bw


#: The five GPU-memory configurations of §5.2.
MEMORY_CONFIGS: tuple[MemoryConfig, ...] = (
    MemoryConfig("1/7", 1, 7),
    MemoryConfig("2/6", 2, 6),
    MemoryConfig("3/5", 3, 5),
    MemoryConfig("4/4", 4, 4),
    MemoryConfig("8/8*", 8, 8, daisy_chain=True),
)


#: Kyung et al. [23] "device_HBF": B200-class HBM (256 GB @ 8 TB/s) + 5 HBF stacks x 512 GB,
#: 1.6 TB/s read / 48 GB/s write each, co-located.  Used only by the Kyung validation; not in MEMORY_CONFIGS.
#: Reads are per tier: Kyung et al. price flash-resident weights and KV at the flash stacks' own
#: bandwidth (their Fig. 5 TPOT doubles from the HBF to the half-bandwidth HBF device, 51 -> 100 ms)
#: and keep activations in the HBM.
MEMORY_KYUNG = MemoryConfig("Kyung-HBF", 1, 5, hbm=HBM_B200_KYUNG, hbf=HBF_STACK_KYUNG, read_pricing="per_tier")


def memory_config(label: str) -> MemoryConfig:
    """Look up one of :data:`MEMORY_CONFIGS` by its label ("1/7" … "8/8*")."""
    for mc in MEMORY_CONFIGS:
        if mc.label == label:
            return mc
    raise KeyError(f"unknown memory configuration {label!r}; known: {[m.label for m in MEMORY_CONFIGS]}")


# ---------------------------------------------------------------------------------------------
# Deployment, SLO, and the GPU (§5.2)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPUSpec:
    """Compute and node interconnect of one GPU.

    ASSUMPTION: the paper uses Son et al.'s GPU [41] but prints no compute rate; we take the
    B200-class 2,250 TFLOPS (BF16 dense) of the Kyung validation setting, so decode is memory-bound
    for every configuration here, as the paper's analysis presumes.
    ASSUMPTION: no interconnect is given either; the expert-parallel exchange runs over NVLink 5 at
    900 GB/s per GPU with 0.8 µs per transfer, LLMSimulator's B200 preset [1]
    (``device_ict_bandwidth``, ``device_ict_latency``).
    """

    name: str = "B200-class"
    flops: float = 2250e12
    link_bw: float = 900e9
    link_latency_s: float = 0.8e-6

    def __post_init__(self) -> None:
        check_number(f"gpu {self.name!r}", "flops", self.flops, "FLOP/s")
        check_number(f"gpu {self.name!r}", "link_bw", self.link_bw, "bytes/s")
        check_number(f"gpu {self.name!r}", "link_latency_s", self.link_latency_s, "s", inclusive=True)


AttentionKernel = Literal["fused", "unfused"]
Landing = Literal["stall", "overlap"]
LANDINGS = ("stall", "overlap")
NodeStart = Literal["aged", "empty"]
NODE_STARTS = ("aged", "empty")


@dataclass(frozen=True)
class Deployment:
    """Eight GPUs, attention data-parallel, experts expert-parallel (§5.2).

    ASSUMPTION (``attention_kernel``): decode attention runs as one fused kernel, so scores never
    leave the chip, as in Son et al.'s HBF simulator [41] (``use_flash_attention: on``).
    ``"unfused"`` is LLMSimulator's original decode path [1]: the QKᵀ GEMV writes the scores to
    memory and the AV GEMV reads them back.
    """

    n_gpus: int = 8
    gpu: GPUSpec = field(default_factory=GPUSpec)
    block_tokens: int = 16  # KV block size (docs/design.md §5 default)
    attention_kernel: AttentionKernel = "fused"
    #: GPUs of the expert-parallel group the simulator steps in lockstep (§5.2); 1 simulates one GPU
    #: and takes the other ranks as its copies (docs/design.md §5, "Decode node")
    group_ranks: int = 1
    #: "overlap": a prompt's KV lands beside the decode steps and delays only its own request (§5.1: the engine,
    #: Frontier [11], moves prefilled KV as a transfer event apart from the decode step, and HBF's write bandwidth
    #: prices the step's own flush); "stall": the landing occupies its GPU, so the lockstep group's step waits (Son et
    #: al.'s simulator [41] adds the prompt's KV write to the device time); docs/design.md §5, "Decode node"
    landing: Landing = "overlap"
    #: "aged": a boundary-unaware cache starts full of dead blocks whose LRU order mixes the tiers, as a
    #: long-running node's does; "empty": free lists start empty of cached blocks
    start: NodeStart = "empty"

    def __post_init__(self) -> None:
        if not (isinstance(self.n_gpus, int) and self.n_gpus >= 1):
            raise ValueError(f"deployment: n_gpus must be an integer >= 1, got {self.n_gpus!r}")
        if isinstance(self.block_tokens, bool) or not isinstance(self.block_tokens, int) or self.block_tokens < 1:
            raise ValueError(f"deployment: block_tokens must be an integer >= 1 (tokens per KV block), "
                             f"got {self.block_tokens!r}")
        if isinstance(self.group_ranks, bool) or not isinstance(self.group_ranks, int) \
                or not 1 <= self.group_ranks <= self.n_gpus:
            raise ValueError(f"deployment: group_ranks must be an integer in [1, n_gpus={self.n_gpus}], "
                             f"got {self.group_ranks!r}")
        if self.landing not in LANDINGS:
            raise ValueError(f"deployment: landing must be one of {list(LANDINGS)}, got {self.landing!r}")
        if self.start not in NODE_STARTS:
            raise ValueError(f"deployment: start must be one of {list(NODE_STARTS)}, got {self.start!r}")
        if self.attention_kernel not in ("fused", "unfused"):
            raise ValueError("deployment: attention_kernel must be 'fused' or 'unfused', "
                             f"got {self.attention_kernel!r}")


@dataclass(frozen=True)
class SLO:
    """Service-level objective (§5.2): TTFT 2 s and a p99 TPOT bound."""

    name: str
    ttft_s: float = 2.0  # [42, 50]
    p99_tpot_s: float = 0.060

    def __post_init__(self) -> None:
        check_number(f"slo {self.name!r}", "ttft_s", self.ttft_s, "s")
        check_number(f"slo {self.name!r}", "p99_tpot_s", self.p99_tpot_s, "s")

    def __str__(self) -> str:
        return self.name


SLO_TIGHT = SLO("tight", p99_tpot_s=0.060)  # §5.2, [6, 42]
SLO_LOOSE = SLO("loose", p99_tpot_s=0.100)  # §5.2, [6, 42]
SLOS: dict[str, SLO] = {s.name: s for s in (SLO_TIGHT, SLO_LOOSE)}


@dataclass(frozen=True)
class Config:
    """Everything a run of the model depends on, in one object."""

    clock: ReferenceClock = field(default_factory=ReferenceClock)
    endurance: Endurance = field(default_factory=Endurance)
    deployment: Deployment = field(default_factory=Deployment)
    memory: MemoryConfig = MEMORY_CONFIGS[0]
    model: ModelSpec = LLAMA4_MAVERICK
    slo: SLO = SLO_TIGHT

    def with_(self, **changes: Any) -> "Config":
        """A copy with some fields replaced (``cfg.with_(memory=memory_config("2/6"))``)."""
        return replace(self, **changes)


DEFAULT = Config()
