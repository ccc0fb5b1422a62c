"""One typed configuration for every model constant.

Each constant the paper gives carries the section it comes from (``§x`` = the Lachesis paper,
``[n]`` = its reference list).  Every value the paper leaves open is an :class:`Assumption`
field named as such, with its reason, so a reviewer can audit the model in one file.

Everything here is a frozen dataclass: build a variant with :func:`dataclasses.replace`.
Users add models (including MLA-style latent KV) by constructing :class:`ModelSpec` or by
loading a JSON/YAML mapping with :func:`model_from_dict`; no code changes are needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

GB = 1e9  # decimal gigabyte (DESIGN §5: HBM/HBF capacities are decimal)
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
#: sub-agent's own requests advance time instead (DESIGN §3).
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
# Memory devices (§5.2; DESIGN §5 after Son et al. [41] Table I)
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


HBM4_STACK = StackSpec("HBM4", 36 * GB, 1.6 * TB, 1.6 * TB)  # [41] Table I
HBF_STACK = StackSpec("HBF", 512 * GB, 1.6 * TB, 16 * GB, t_read_s=1e-6, t_prog_s=100e-6)  # [41], [38]
#: Alternate preset, Kyung et al. [23]: 48 GB/s write per HBF stack, tR 3 us.  A knob, not a default.
HBF_STACK_KYUNG = StackSpec("HBF-Kyung", 512 * GB, 1.6 * TB, 48 * GB, t_read_s=3e-6, t_prog_s=100e-6)
#: Alternate preset, Kyung et al. [23]: a B200-class GPU's whole HBM (256 GB at 8 TB/s) as one
#: aggregate "stack".  A knob for the Kyung validation (lachesis.hbf), not a default.
HBM_B200_KYUNG = StackSpec("HBM-B200-Kyung", 256 * GB, 8 * TB, 8 * TB)


@dataclass(frozen=True)
class Endurance:
    """Flash wear constants (§5.2)."""

    pe_cycles: float = 100_000  # §5.2, SLC [41]
    write_amplification: float = 1.02  # §5.2, [16, 23]
    warranty_years: float = 5.0  # §5.2, §5.3: "a device must outlast its five-year warranty"


@dataclass(frozen=True)
class MemoryConfig:
    """Per-GPU memory: eight stack slots split between HBM and HBF (§5.2, Fig. 9 x-axis)."""

    label: str
    hbm_stacks: int
    hbf_stacks: int
    #: 8/8* (H3 daisy chain [14]): HBF sits behind HBM and its traffic crosses the HBM links, so
    #: the two tiers share one set of links and read bandwidth does not add up (DESIGN §5).
    daisy_chain: bool = False
    hbm: StackSpec = HBM4_STACK
    hbf: StackSpec = HBF_STACK

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
MEMORY_KYUNG = MemoryConfig("Kyung-HBF", 1, 5, hbm=HBM_B200_KYUNG, hbf=HBF_STACK_KYUNG)


def memory_config(label: str) -> MemoryConfig:
    """Look up one of :data:`MEMORY_CONFIGS` by its label ("1/7" … "8/8*")."""
    for mc in MEMORY_CONFIGS:
        if mc.label == label:
            return mc
    raise KeyError(f"unknown memory configuration {label!r}; known: {[m.label for m in MEMORY_CONFIGS]}")


# ---------------------------------------------------------------------------------------------
# Models (§5.2; DESIGN §5)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelLayout:
    """Where a model's parameters sit under attention-DP / expert-EP (lachesis.hbf weight reads).

    ``routed_expert_params`` are sharded across GPUs by expert parallelism; every other parameter
    (attention, dense/shared FFN, router, norms, embeddings, LM head) is replicated per GPU.
    ``embedding_params`` (the input table) is resident but only gathered (B rows) per step.
    """

    routed_expert_params: float
    n_experts: int
    experts_per_token: int
    embedding_params: float
    q_heads: int  # query heads (attention FLOPs over context)


@dataclass(frozen=True)
class ModelSpec:
    """A served model: what sets the KV bytes per token and the weight bytes.

    Standard attention: ``kv_bytes_per_token = layers * 2 * kv_heads * head_dim * kv_dtype_bytes``.
    MLA (DeepSeek-style): set ``mla_latent_dim`` (latent + rope width per layer) and the K/V
    factor of 2 is dropped: ``layers * mla_latent_dim * kv_dtype_bytes``.
    """

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    total_params: float
    active_params: float
    kv_dtype_bytes: int = 2  # BF16 KV (DESIGN §5)
    weight_dtype_bytes: int = 2  # BF16 weights
    mla_latent_dim: int | None = None
    #: Parameter layout for expert-parallel weight reads; None = ASSUMPTION in lachesis.hbf.
    layout: ModelLayout | None = None

    @property
    def kv_bytes_per_token(self) -> int:
        if self.mla_latent_dim is not None:
            return self.layers * self.mla_latent_dim * self.kv_dtype_bytes
        return self.layers * 2 * self.kv_heads * self.head_dim * self.kv_dtype_bytes

    @property
    def weight_bytes(self) -> float:
        return self.total_params * self.weight_dtype_bytes


#: Layouts derived from the public model configs (HF config.json), not from the paper:
#: Maverick: hidden 5120, 40 q heads, 24 MoE layers (every other layer) x 128 routed experts
#: (top-1 + a shared expert), expert FFN 8192 -> 24*128*3*5120*8192 = 386.5e9 routed params;
#: vocab 202,048 x 5120 = 1.034e9 embedding; the rest (attention 3.02e9, dense FFN 6.04e9, shared
#: experts 3.02e9, LM head 1.03e9, ...) = 14.2e9 replicated.  Sums to 400.7e9 (DESIGN §5).
#: Qwen3-235B-A22B: hidden 4096, 64 q heads, 94 MoE layers x 128 experts (top-8), expert FFN
#: 1536 -> 94*128*3*4096*1536 = 227.1e9 routed; vocab 151,936 x 4096 = 0.622e9 embedding;
#: attention 6.70e9 + LM head + router = 8.0e9 replicated.  Sums to 235.1e9.
LLAMA4_MAVERICK_LAYOUT = ModelLayout(386.547e9, 128, 1, 1.0345e9, 40)
QWEN3_235B_LAYOUT = ModelLayout(227.096e9, 128, 8, 0.6223e9, 64)
LLAMA4_MAVERICK = ModelSpec("Llama-4-Maverick", 48, 8, 128, 400.7e9, 17.2e9,
                            layout=LLAMA4_MAVERICK_LAYOUT)  # 196,608 B/token
QWEN3_235B = ModelSpec("Qwen3-235B-A22B", 94, 4, 128, 235.1e9, 22.2e9,
                       layout=QWEN3_235B_LAYOUT)  # 192,512 B/token
MODELS: dict[str, ModelSpec] = {m.name: m for m in (LLAMA4_MAVERICK, QWEN3_235B)}


def model_from_dict(d: Mapping[str, object]) -> ModelSpec:
    """Build a user-defined model from a plain mapping (e.g. parsed JSON/YAML); validates fields."""
    allowed = set(ModelSpec.__dataclass_fields__)
    unknown = set(d) - allowed
    if unknown:
        raise ValueError(f"model spec has unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}")
    missing = {"name", "layers", "total_params", "active_params"} - set(d)
    if missing:
        raise ValueError(f"model spec is missing fields {sorted(missing)}")
    if d.get("mla_latent_dim") is None and not {"kv_heads", "head_dim"} <= set(d):
        raise ValueError("model spec needs kv_heads and head_dim, or mla_latent_dim for an MLA model")
    kw = dict(d)
    if isinstance(kw.get("layout"), Mapping):
        kw["layout"] = ModelLayout(**kw["layout"])  # type: ignore[arg-type]
    kw.setdefault("kv_heads", 0)
    kw.setdefault("head_dim", 0)
    spec = ModelSpec(**kw)  # type: ignore[arg-type]
    if spec.kv_bytes_per_token <= 0 or spec.total_params <= 0 or spec.active_params <= 0:
        raise ValueError(f"model {spec.name!r}: sizes must be positive")
    return spec


# ---------------------------------------------------------------------------------------------
# Deployment, SLO, and the GPU (§5.2)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPUSpec:
    """Compute of one GPU.

    ASSUMPTION: the paper uses Son et al.'s GPU [41] but prints no compute rate; we take the
    B200-class 2,250 TFLOPS (BF16 dense) of the Kyung validation setting, so the roofline is
    memory-bound at decode for every configuration here, as the paper's analysis presumes.
    """

    name: str = "B200-class"
    flops: float = 2250e12


@dataclass(frozen=True)
class Deployment:
    """Eight GPUs, attention data-parallel, experts expert-parallel (§5.2)."""

    n_gpus: int = 8
    gpu: GPUSpec = field(default_factory=GPUSpec)
    block_tokens: int = 16  # KV block size (DESIGN §5 default)


@dataclass(frozen=True)
class SLO:
    """Service-level objective (§5.2): TTFT 2 s and a p99 TPOT bound."""

    name: str
    ttft_s: float = 2.0  # [42, 50]
    p99_tpot_s: float = 0.060

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

    def with_(self, **changes: object) -> "Config":
        """A copy with some fields replaced (``cfg.with_(memory=memory_config("2/6"))``)."""
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULT = Config()
