"""Served models: the architecture a decode step prices, read from a model's public config (§5.2).

A :class:`ModelSpec` carries what the operator-level step of :mod:`lachesis.node.step_cost` needs — layers,
hidden size, query and KV heads and their widths, MLA latent and RoPE widths, dense and MoE layers,
routed and shared experts and their FFN widths, the vocabulary — and derives everything else from
it: parameter counts (total, active, routed-expert), KV bytes per token, attention FLOPs per
context token.  Nothing is a free number: a definition that would silently zero a priced term (an
MLA model without a latent width, a MoE layer without experts, a dense layer without an FFN) is
refused.

:func:`model_from_hf_config` reads a Hugging Face ``config.json`` (file or mapping) of the Llama /
Qwen / Mistral dense families, Mixtral, Qwen2/3-MoE, Llama-4 and DeepSeek-V2/V3 (MLA);
:func:`model_from_dict` reads this module's own field names (JSON/YAML).  The two paper models are
shipped as public config files under ``lachesis/data/models/``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from lachesis.paths import package_data

__all__ = ["ModelSpec", "model_from_dict", "model_from_hf_config", "packaged_model", "known_model",
           "LLAMA4_MAVERICK", "QWEN3_235B", "MODELS"]

#: Tolerance of the cross-check between derived and declared parameter totals (declared totals
#: are rounded names such as "400B"; a larger gap means the config was read wrongly).
DECLARED_PARAMS_RTOL = 0.05


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer as the decode step sees it (widths in elements, dtypes in bytes).

    Standard attention (MHA/GQA): ``q_heads`` query heads and ``kv_heads`` KV heads of width
    ``head_dim`` (values ``v_head_dim``).  MLA (DeepSeek-V2/V3): ``kv_lora_rank`` > 0 is the
    latent width cached per token with ``qk_rope_head_dim`` decoupled RoPE key dims;
    ``head_dim`` is then the per-head no-RoPE query/key width and ``q_lora_rank`` the query
    compression (0 = a direct query projection).  FFNs are gated (gate, up, down: ``ffn_matrices``
    = 3).  ``moe_layers`` of the ``layers`` carry ``n_experts`` routed experts of width
    ``expert_ffn`` (``experts_per_token`` active) plus ``n_shared_experts`` of width
    ``shared_ffn``; the other layers carry a dense FFN of width ``dense_ffn``.
    """

    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dense_ffn: int = 0
    moe_layers: int = 0
    n_experts: int = 0
    experts_per_token: int = 0
    expert_ffn: int = 0
    n_shared_experts: int = 0
    shared_ffn: int = 0
    v_head_dim: int = 0  # 0 = head_dim
    kv_lora_rank: int = 0  # MLA latent width; 0 = standard attention
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    ffn_matrices: int = 3
    tie_embeddings: bool = False
    kv_dtype_bytes: int = 2  # BF16 KV (docs/design.md §5)
    weight_dtype_bytes: int = 2  # BF16 weights; activations are carried in the same dtype
    declared_total_params: float | None = None
    declared_active_params: float | None = None
    source: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ValueError(f"model {self.name!r}: {what}")

        for f in ("layers", "hidden", "q_heads", "kv_heads", "head_dim", "vocab", "ffn_matrices",
                  "kv_dtype_bytes", "weight_dtype_bytes"):
            v = getattr(self, f)
            need(isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                 f"field {f!r} must be an integer >= 1, got {v!r}")
        for f in ("dense_ffn", "moe_layers", "n_experts", "experts_per_token", "expert_ffn", "n_shared_experts",
                  "shared_ffn", "v_head_dim", "kv_lora_rank", "qk_rope_head_dim", "q_lora_rank"):
            v = getattr(self, f)
            need(isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                 f"field {f!r} must be an integer >= 0, got {v!r}")
        need(self.moe_layers <= self.layers, f"moe_layers {self.moe_layers} exceeds layers {self.layers}")
        need(self.dense_layers == 0 or self.dense_ffn > 0,
             f"{self.dense_layers} dense layers need dense_ffn > 0 (it would price their FFN at zero)")
        if self.moe_layers:
            need(self.n_experts >= 1 and self.expert_ffn >= 1,
                 "MoE layers need n_experts >= 1 and expert_ffn >= 1 (they would price the experts at zero)")
            need(1 <= self.experts_per_token <= self.n_experts,
                 f"experts_per_token must be in 1..n_experts ({self.n_experts}), got {self.experts_per_token}")
        need(self.n_shared_experts == 0 or self.shared_ffn > 0, "shared experts need shared_ffn > 0")
        need(self.kv_lora_rank > 0 or (self.qk_rope_head_dim == 0 and self.q_lora_rank == 0),
             "qk_rope_head_dim / q_lora_rank are MLA widths: set kv_lora_rank (the latent) too")
        for f, v in (("declared_total_params", self.declared_total_params),
                     ("declared_active_params", self.declared_active_params)):
            if v is not None:
                need(math.isfinite(v) and v > 0, f"field {f!r} must be a positive number, got {v!r}")
                got = self.total_params if f == "declared_total_params" else self.active_params
                need(abs(got / v - 1) <= DECLARED_PARAMS_RTOL,
                     f"the architecture gives {got / 1e9:.2f}e9 {f.split('_')[1]} parameters, the declared "
                     f"{v / 1e9:.2f}e9 differs by more than {DECLARED_PARAMS_RTOL:.0%}: check the config")

    # --- structure -------------------------------------------------------------------------

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def ffn_params(self, width: int) -> int:
        """Parameters of one gated FFN of this width (gate, up: hidden → width; down: width → hidden)."""
        return self.ffn_matrices * self.hidden * width

    @property
    def attn_in_linears(self) -> tuple[tuple[int, int, int], ...]:
        """(k, n, copies) of the attention input projections, in decode order.

        Standard: one fused QKV projection (LLMSimulator's ``attn_qkv_proj``).  MLA, absorbed as
        decode runs it (LLMSimulator's AbsorbMLA path): query down/up projections, the KV
        down-projection to latent + RoPE key, and the per-head key up-projection absorbed into the
        query (k = head_dim → n = latent, one copy per head).
        """
        h, hq = self.hidden, self.q_heads
        if not self.is_mla:
            return ((h, hq * self.head_dim + 2 * self.kv_heads * self.head_dim, 1),)
        qw = hq * (self.head_dim + self.qk_rope_head_dim)
        q = ((h, self.q_lora_rank, 1), (self.q_lora_rank, qw, 1)) if self.q_lora_rank else ((h, qw, 1),)
        return q + ((h, self.kv_lora_rank + self.qk_rope_head_dim, 1), (self.head_dim, self.kv_lora_rank, hq))

    @property
    def attn_out_linears(self) -> tuple[tuple[int, int, int], ...]:
        """(k, n, copies) of the attention output projections (MLA: value up-projection per head, then O)."""
        h, hq = self.hidden, self.q_heads
        o = ((hq * self.v_dim, h, 1),)
        return ((self.kv_lora_rank, self.v_dim, hq),) + o if self.is_mla else o

    @staticmethod
    def _params(linears: tuple[tuple[int, int, int], ...]) -> int:
        return sum(k * n * c for k, n, c in linears)

    @property
    def norm_params_per_layer(self) -> int:
        """RMSNorm weights: input + post-attention norms (MLA adds the query and KV latent norms)."""
        return 2 * self.hidden + (self.q_lora_rank + self.kv_lora_rank if self.is_mla else 0)

    @property
    def attention_params_per_layer(self) -> int:
        return self._params(self.attn_in_linears) + self._params(self.attn_out_linears)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_embeddings else self.vocab * self.hidden

    @property
    def routed_expert_params(self) -> float:
        """Parameters of every routed expert of every MoE layer (sharded by expert parallelism)."""
        return float(self.moe_layers * self.n_experts * self.ffn_params(self.expert_ffn))

    @property
    def total_params(self) -> float:
        per_layer = self.attention_params_per_layer + self.norm_params_per_layer
        moe = self.n_experts * self.ffn_params(self.expert_ffn) + self.n_shared_experts * self.ffn_params(
            self.shared_ffn) + self.hidden * self.n_experts
        return float(self.layers * per_layer + self.dense_layers * self.ffn_params(self.dense_ffn)
                     + self.moe_layers * moe + self.embedding_params + self.lm_head_params + self.hidden)

    @property
    def active_params(self) -> float:
        """Parameters one token uses: total minus the routed experts it is not routed to."""
        idle = self.moe_layers * (self.n_experts - self.experts_per_token) * self.ffn_params(self.expert_ffn)
        return self.total_params - idle

    @property
    def weight_bytes(self) -> float:
        return self.total_params * self.weight_dtype_bytes

    # --- KV and attention ------------------------------------------------------------------

    @property
    def kv_width_per_layer(self) -> int:
        """Elements cached per token per layer: K and V per KV head, or MLA's latent + RoPE key."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return self.kv_heads * (self.head_dim + self.v_dim)

    @property
    def kv_bytes_per_token(self) -> int:
        return self.layers * self.kv_width_per_layer * self.kv_dtype_bytes

    @property
    def mla_latent_dim(self) -> int | None:
        """Latent + RoPE width per layer of an MLA model (None for standard attention)."""
        return self.kv_width_per_layer if self.is_mla else None

    @property
    def attention_flops_per_context_token(self) -> int:
        """Multiply-add FLOPs per layer for one query token against one cached token (QKᵀ and AV).

        Standard: 2·Hq·(head_dim + v_dim).  Absorbed MLA attends in the latent space: the score
        is over latent + RoPE key and the value product over the latent, 2·Hq·(2·latent + rope).
        """
        if self.is_mla:
            return 2 * self.q_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * self.q_heads * (self.head_dim + self.v_dim)

    @property
    def attention_io_per_token(self) -> int:
        """Elements the attention core reads (query) and writes (output) per decoded token per layer."""
        if self.is_mla:
            return self.q_heads * (self.kv_lora_rank + self.qk_rope_head_dim) + self.q_heads * self.kv_lora_rank
        return self.q_heads * (self.head_dim + self.v_dim)


# ---------------------------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------------------------

_FIELDS = {f.name for f in fields(ModelSpec)}


def model_from_dict(d: Mapping[str, Any], source: str = "model spec") -> ModelSpec:
    """A model from a mapping of :class:`ModelSpec` field names (e.g. parsed JSON/YAML); validates every field."""
    if not isinstance(d, Mapping):
        raise ValueError(f"{source}: expected a mapping of ModelSpec fields, got {type(d).__name__}")
    unknown = set(d) - _FIELDS
    if unknown:
        raise ValueError(f"{source}: unknown fields {sorted(unknown)}; allowed: {sorted(_FIELDS)}")
    missing = {"name", "layers", "hidden", "q_heads", "kv_heads", "head_dim", "vocab"} - set(d)
    if missing:
        raise ValueError(f"{source}: missing fields {sorted(missing)}")
    kw = dict(d)
    if isinstance(kw.get("notes"), list):
        kw["notes"] = tuple(kw["notes"])
    return ModelSpec(**kw)


def _dtype_bytes(name: object, src: str, field_: str) -> int:
    table = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8_e4m3fn": 1, "fp8": 1}
    key = str(name).lower().replace("torch.", "")
    if key not in table:
        raise ValueError(f"{src}: field {field_!r}: unknown dtype {name!r} (known: {sorted(table)})")
    return table[key]


#: Deepest nesting of a config file read (HF configs nest two or three levels).
MAX_CONFIG_DEPTH = 64


def _read_json(path: Path, src: str) -> Any:
    """A config file's JSON; every failure one ValueError line naming the file."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise ValueError(f"{src}: cannot read the model config ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{src}: byte {e.start} is not UTF-8 (a config.json is UTF-8 JSON)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{src}:{e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise ValueError(f"{src}: nested deeper than Python's JSON reader allows: not a model config") from None


def _refuse_non_finite(node: Any, src: str, path: str = "", depth: int = 0) -> None:
    """Every number anywhere in the config is finite (NaN / Infinity mean a corrupted file), named by its path."""
    if depth > MAX_CONFIG_DEPTH:
        raise ValueError(f"{src}: field {path!r}: nested deeper than {MAX_CONFIG_DEPTH} levels: not a model config")
    items = node.items() if isinstance(node, Mapping) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        sub = f"{path}.{k}" if path else str(k)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{src}: field {sub!r}: expected a finite number, got {v!r}")
        _refuse_non_finite(v, src, sub, depth + 1)


def _whole(v: Any, src: str, key: str, least: int) -> int:
    """``v`` as an integer >= ``least`` (an integral float such as 4096.0 is accepted), or a named error."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) or v < least:
        raise ValueError(f"{src}: field {key!r}: expected an integer >= {least}, got {v!r}")
    return int(v)


def _check_heads(q_heads: int, kv_heads: int, src: str) -> None:
    """Grouped-query attention: 1 <= KV heads <= query heads, and the KV heads divide the query heads."""
    if q_heads < 1:
        raise ValueError(f"{src}: field 'num_attention_heads': expected an integer >= 1, got {q_heads}")
    if kv_heads < 1 or q_heads % kv_heads:
        raise ValueError(f"{src}: field 'num_key_value_heads': {kv_heads} KV heads must be >= 1 and divide the "
                         f"{q_heads} query heads (num_attention_heads)")


def model_from_hf_config(config: str | Path | Mapping[str, Any], name: str | None = None, *,
                         kv_dtype_bytes: int | None = None, weight_dtype_bytes: int | None = None,
                         declared_total_params: float | None = None,
                         declared_active_params: float | None = None) -> ModelSpec:
    """A model from a Hugging Face ``config.json`` (a path or the parsed mapping).

    Reads the keys of the Llama / Qwen / Mistral dense families, Mixtral (``num_local_experts``),
    Qwen2/3-MoE (``num_experts``, ``moe_intermediate_size``, ``decoder_sparse_step``,
    ``mlp_only_layers``, ``shared_expert_intermediate_size``), Llama-4 (``text_config``,
    ``moe_layers`` / ``interleave_moe_layer_step``, ``intermediate_size_mlp``, one shared expert per
    MoE layer) and DeepSeek-V2/V3 (``n_routed_experts``, ``n_shared_experts``,
    ``first_k_dense_replace``, ``moe_layer_freq``, MLA's ``kv_lora_rank``, ``qk_rope_head_dim``,
    ``qk_nope_head_dim``, ``v_head_dim``, ``q_lora_rank``).  Dtypes come from ``torch_dtype``
    (FP8 ``quantization_config`` → 1-byte weights) unless given.  Architecture features the step
    does not price are kept as ``notes`` (ASSUMPTION, docs/design.md §5).  A missing or malformed key raises a one-line
    ValueError naming the source and the field: KV heads must be >= 1 and divide the query heads,
    MoE layer steps (``interleave_moe_layer_step``, ``decoder_sparse_step``, ``moe_layer_freq``)
    are integers >= 1, and a NaN / Infinity anywhere in the file is refused by its key path.
    """
    cfg = _HFConfig.read(config)
    attn = _attention_fields(cfg)
    ffn = _ffn_fields(cfg, attn["layers"])
    dtype = cfg.opt("torch_dtype", "dtype")
    base = _dtype_bytes(dtype, cfg.src, "torch_dtype") if dtype is not None else 2
    quant = cfg.c.get("quantization_config")
    wq = base
    if isinstance(quant, Mapping) and "fp8" in str(quant.get("quant_method", "")).lower():
        wq = 1
    if name is None:
        name = str(cfg.opt("_name_or_path") or cfg.mtype or "model").rstrip("/").rsplit("/", 1)[-1]
    return ModelSpec(
        name=name, **attn, **ffn, tie_embeddings=bool(cfg.c.get("tie_word_embeddings", False)),
        kv_dtype_bytes=kv_dtype_bytes or base, weight_dtype_bytes=weight_dtype_bytes or wq,
        declared_total_params=declared_total_params, declared_active_params=declared_active_params,
        source=str(cfg.c.get("_source") or cfg.src), notes=tuple(_unpriced_features(cfg)))


@dataclass(frozen=True)
class _HFConfig:
    """A Hugging Face config's keys (a multimodal wrapper's language model flattened in), its source name
    and model type; values read by key, each malformed one a ValueError naming the source and the field."""

    src: str
    c: Mapping[str, Any]
    mtype: str

    @classmethod
    def read(cls, config: str | Path | Mapping[str, Any]) -> _HFConfig:
        if isinstance(config, (str, Path)):
            src = str(config)
            raw = _read_json(Path(config), src)
        else:
            src, raw = "model config", config
        if not isinstance(raw, Mapping):
            raise ValueError(f"{src}: expected a JSON object, got {type(raw).__name__}")
        _refuse_non_finite(raw, src)
        c: dict[str, Any] = dict(raw)
        if isinstance(raw.get("text_config"), Mapping):  # multimodal wrappers (Llama-4): the language model
            c = {**{k: v for k, v in raw.items() if k != "text_config"}, **raw["text_config"]}
        return cls(src, c, str(c.get("model_type") or "").lower())

    def opt(self, *keys: str) -> Any:
        """The first of ``keys`` the config sets (not null), else None."""
        for k in keys:
            if self.c.get(k) is not None:
                return self.c[k]
        return None

    def integer(self, *keys: str, default: int | None = None) -> int:
        """The first of ``keys`` set, as an integer >= 0; ``default`` when none is (missing without one raises)."""
        v = self.opt(*keys)
        if v is None:
            if default is None:
                raise ValueError(f"{self.src}: field {keys[0]!r}: missing (needed to price the decode step)")
            return default
        return _whole(v, self.src, next(k for k in keys if self.c.get(k) is not None), 0)


def _attention_fields(cfg: _HFConfig) -> dict[str, int]:
    """Layers, widths, heads and vocabulary; MLA's latent, RoPE and query-LoRA widths (0 without MLA)."""
    layers = cfg.integer("num_hidden_layers", "n_layer", "num_layers")
    hidden = cfg.integer("hidden_size", "d_model")
    q_heads = cfg.integer("num_attention_heads", "n_head")
    kv_heads = cfg.integer("num_key_value_heads", default=q_heads)
    _check_heads(q_heads, kv_heads, cfg.src)
    vocab = cfg.integer("vocab_size")
    mla = cfg.opt("kv_lora_rank") is not None
    mla_keys = [k for k in ("qk_rope_head_dim", "qk_nope_head_dim", "q_lora_rank") if cfg.opt(k) is not None]
    if not mla and mla_keys:
        raise ValueError(f"{cfg.src}: field 'kv_lora_rank': missing, but the config has MLA fields {mla_keys}")
    if mla:
        head_dim = cfg.integer("qk_nope_head_dim")
        v_head_dim = cfg.integer("v_head_dim", default=head_dim)
        kv_lora, rope = cfg.integer("kv_lora_rank"), cfg.integer("qk_rope_head_dim")
        q_lora = cfg.integer("q_lora_rank", default=0)
    else:
        if q_heads == 0 or hidden % max(q_heads, 1):
            head_default = None
        else:
            head_default = hidden // q_heads
        head_dim = cfg.integer("head_dim", default=head_default)
        v_head_dim, kv_lora, rope, q_lora = 0, 0, 0, 0
    return dict(layers=layers, hidden=hidden, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
                v_head_dim=v_head_dim, kv_lora_rank=kv_lora, qk_rope_head_dim=rope, q_lora_rank=q_lora)


def _ffn_fields(cfg: _HFConfig, layers: int) -> dict[str, int]:
    """The dense FFN width, the MoE layers, their routed experts (count, top-k, width) and shared experts."""
    n_experts = cfg.integer("num_local_experts", "num_experts", "n_routed_experts", default=0)
    is_llama4 = cfg.mtype.startswith("llama4")
    if n_experts:
        k = cfg.integer("num_experts_per_tok", "num_experts_per_token", "moe_topk")
        expert_ffn = cfg.integer("moe_intermediate_size", "intermediate_size")
        dense_ffn = cfg.integer("intermediate_size_mlp", "intermediate_size", default=0) if is_llama4 else \
            cfg.integer("intermediate_size", default=0)
        moe_flags = _moe_layer_flags(cfg.c, layers, cfg.mtype, cfg.src)
    else:
        k, expert_ffn, moe_flags = 0, 0, [False] * layers
        dense_ffn = cfg.integer("intermediate_size", "ffn_dim", "n_inner")
    moe_layers = sum(moe_flags)
    if not moe_layers:
        n_shared, shared_ffn = 0, 0
    elif is_llama4:  # Llama4TextMoe: one shared expert of the expert width in every MoE layer
        n_shared, shared_ffn = 1, expert_ffn
    elif cfg.opt("n_shared_experts") is not None:
        n_shared, shared_ffn = cfg.integer("n_shared_experts"), expert_ffn
    elif cfg.opt("shared_expert_intermediate_size") is not None:
        n_shared, shared_ffn = 1, cfg.integer("shared_expert_intermediate_size")
        n_shared = n_shared if shared_ffn else 0
    else:
        n_shared, shared_ffn = 0, 0
    return dict(dense_ffn=dense_ffn if moe_layers < layers else 0, moe_layers=moe_layers,
                n_experts=n_experts if moe_layers else 0, experts_per_token=k if moe_layers else 0,
                expert_ffn=expert_ffn if moe_layers else 0, n_shared_experts=n_shared, shared_ffn=shared_ffn)


def _unpriced_features(cfg: _HFConfig) -> list[str]:
    """Architecture features the step does not price, kept as the model's notes."""
    notes: list[str] = []
    for key, what in (("attention_chunk_size", "chunked local attention"),
                      ("sliding_window", "sliding-window attention")):
        if cfg.opt(key) and (key != "sliding_window" or cfg.c.get("use_sliding_window", True)):
            notes.append(f"{key}={cfg.c[key]}: {what} not modelled; every layer caches and reads the full context")
    if cfg.opt("num_nextn_predict_layers"):
        notes.append(f"num_nextn_predict_layers={cfg.c['num_nextn_predict_layers']}: multi-token-prediction layers "
                     "are not served (not counted)")
    return notes


def _moe_layer_flags(c: Mapping[str, Any], layers: int, mtype: str, src: str) -> list[bool]:
    """Which decoder layers carry routed experts, by each family's config convention."""
    def ints(key: str) -> list[int]:
        v = c.get(key) or []
        if not isinstance(v, (list, tuple)) or not all(type(i) is int and 0 <= i < layers for i in v):
            raise ValueError(f"{src}: field {key!r}: expected a list of layer indices in 0..{layers - 1}")
        return list(v)

    def read_step(key: str, default: int, least: int = 1) -> int:
        v = c.get(key)
        return default if v is None else _whole(v, src, key, least)

    if mtype.startswith("llama4"):
        if c.get("moe_layers") is not None:
            idx = set(ints("moe_layers"))
            return [i in idx for i in range(layers)]
        every = read_step("interleave_moe_layer_step", 1)
        return [(i + 1) % every == 0 for i in range(layers)]
    if c.get("first_k_dense_replace") is not None or mtype.startswith("deepseek"):
        first, freq = read_step("first_k_dense_replace", 0, least=0), read_step("moe_layer_freq", 1)
        return [i >= first and i % freq == 0 for i in range(layers)]
    if c.get("decoder_sparse_step") is not None or c.get("mlp_only_layers") is not None:
        step = read_step("decoder_sparse_step", 1)
        dense = set(ints("mlp_only_layers"))
        return [i not in dense and (i + 1) % step == 0 for i in range(layers)]
    return [True] * layers  # Mixtral and other all-MoE families


# ---------------------------------------------------------------------------------------------
# The paper's two models (§5.2), from their public configs
# ---------------------------------------------------------------------------------------------


def packaged_model(filename: str, name: str, **kw: Any) -> ModelSpec:
    """A model from a config file shipped under ``lachesis/data/models/``."""
    return model_from_hf_config(package_data("models", filename), name, **kw)


#: Llama-4-Maverick-17B-128E (48 layers, MoE every other layer, 128 experts top-1 + 1 shared).
LLAMA4_MAVERICK = packaged_model("llama-4-maverick.json", "Llama-4-Maverick",
                                 declared_total_params=400e9, declared_active_params=17e9)
#: Qwen3-235B-A22B (94 MoE layers, 128 experts top-8, GQA 64/4).
QWEN3_235B = packaged_model("qwen3-235b-a22b.json", "Qwen3-235B-A22B",
                            declared_total_params=235e9, declared_active_params=22e9)
MODELS: dict[str, ModelSpec] = {m.name: m for m in (LLAMA4_MAVERICK, QWEN3_235B)}


def _norm_name(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def known_model(name: str, extra: Mapping[str, ModelSpec] | None = None) -> ModelSpec:
    """Look a model up by name among :data:`MODELS` (and ``extra``), ignoring case, spaces and dashes.

    "Llama 4 Maverick", "llama-4-maverick" and "Llama-4-Maverick" are one model.  Unknown names
    raise a KeyError listing the known ones.
    """
    pool = {**MODELS, **(extra or {})}
    hits = [m for k, m in pool.items() if _norm_name(k) == _norm_name(name)]
    if not hits:
        raise KeyError(f"unknown model {name!r}; known: {sorted(pool)} (define it from its public config with "
                       "lachesis.models.model_from_hf_config)")
    return hits[0]


def with_dtypes(model: ModelSpec, kv_dtype_bytes: int, weight_dtype_bytes: int) -> ModelSpec:
    """``model`` with other KV / weight dtypes (e.g. a study's BF16 setting)."""
    return replace(model, kv_dtype_bytes=kv_dtype_bytes, weight_dtype_bytes=weight_dtype_bytes)
