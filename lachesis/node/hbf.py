"""HBF endurance and latency model: operator-level decode step, KV landing, flash lifetime (§2.2, §4, §5.1–§5.3).

The decode-node simulator calls these per event, so each function takes scalars or numpy arrays
and returns a float (scalar input) or an array (array input); nothing loops per sequence or block.
:class:`StepModel` prices one GPU's decode step operator by operator, LLMSimulator's way, plus the
expert-parallel exchange and the HBF flush (:class:`GroupStep`: a lockstep group); :func:`landing_fn`
prices a prefilled KV landing; :func:`hbf_lifetime_years` and :func:`settled_rate` give the flash
lifetime once the write traffic has settled.

The operators, what one GPU holds, the routing assumption, the exchange, read pricing, landing,
lifetime and settling, with their sources: docs/design.md §5, "Decode-step time", "Decode node" and
"Lifetime".  The validation against Kyung et al.'s Fig. 4 is :mod:`lachesis.node.kyung`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Literal, NamedTuple, Sequence

import numpy as np
import pandas as pd

from lachesis.config import SECONDS_PER_YEAR, Deployment, Endurance, MemoryConfig, ModelSpec

ArrayLike = float | int | np.ndarray
_maximum = np.maximum  # the lane maximum without method overhead
_SCALARS = (int, float, np.integer, np.floating)

__all__ = [
    "weight_storage_bytes_per_gpu", "weight_read_bytes_per_gpu", "local_experts_read",
    "StepModel", "GroupStep", "GROUP_OPERATORS", "step_model", "group_step", "scalar_step_fn", "decode_step_time", "decode_step_breakdown",
    "kv_landing_time", "landing_fn", "hbf_lifetime_years", "Settling", "settled_rate",
]


def _out(x: np.ndarray) -> float | np.ndarray:
    """A 0-d result as a Python float, anything else as an array."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _div(num: np.ndarray, den: float, what: str) -> np.ndarray:
    """num/den, with 0/0 = 0 and a clear error for traffic to a tier that has no bandwidth."""
    if den > 0:
        return num / den
    if np.any(num > 0):
        raise ValueError(f"{what}: bytes routed to a tier with zero bandwidth")
    return np.zeros_like(num)


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------


def weight_storage_bytes_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """HBF bytes one GPU's weights occupy: all replicated parameters + 1/n_gpus of the routed experts."""
    routed = model.routed_expert_params
    return (model.total_params - routed + routed / deployment.n_gpus) * model.weight_dtype_bytes


def kv_blocks(memory: MemoryConfig, model: ModelSpec, deployment: Deployment) -> tuple[int, int]:
    """KV blocks one GPU holds in (HBM, HBF): HBM whole, HBF less the weights (§5.2: weights live in HBF);
    a ValueError if the weights leave no room for KV."""
    w = float(weight_storage_bytes_per_gpu(model, deployment))
    if not w < memory.hbf_bytes:
        raise ValueError(f"model {model.name!r} does not fit memory configuration {memory.label!r}: its "
                         f"weights need {w / 1e9:.1f} GB of HBF per GPU, the configuration has "
                         f"{memory.hbf_bytes / 1e9:.1f} GB")
    block_bytes = int(model.kv_bytes_per_token) * int(deployment.block_tokens)
    return int(memory.hbm_bytes // block_bytes), int((memory.hbf_bytes - w) // block_bytes)


def local_experts_read(model: ModelSpec, deployment: Deployment, batch: ArrayLike) -> float | np.ndarray:
    """Expected distinct local experts (per MoE layer, per GPU) that a step at ``batch`` sequences per GPU reads.

    ASSUMPTION (routing, docs/design.md §5, "Decode-step time"): E/n_gpus · (1 - (1 - k/E)^(n_gpus · batch)).
    """
    b = np.asarray(batch, dtype=float)
    if not model.moe_layers:
        return _out(np.zeros_like(b))
    n, e, k = deployment.n_gpus, model.n_experts, model.experts_per_token
    miss = n * math.log1p(-k / e) if k < e else -math.inf
    with np.errstate(invalid="ignore"):
        hit = np.where(b > 0, -np.expm1(b * miss) if miss > -math.inf else 1.0, 0.0)
    return _out(e / n * hit)


def weight_read_bytes_per_gpu(model: ModelSpec, deployment: Deployment,
                              batch: ArrayLike | None = None) -> float | np.ndarray:
    """Weight bytes one decode step reads on one GPU (``batch`` None = saturated: every local expert).

    Every replicated weight except the input embedding table (only ``batch`` rows are gathered;
    a tied table is read whole as the LM head) plus the local experts the batch reaches.
    """
    routed = model.routed_expert_params
    rep = model.total_params - routed - (0 if model.tie_embeddings else model.embedding_params)
    per_expert = model.moe_layers * model.ffn_params(model.expert_ffn)
    if batch is None:
        experts = model.n_experts / deployment.n_gpus if model.moe_layers else 0.0
    else:
        b = np.asarray(batch, dtype=float)
        if np.any(b < 0) or np.any(~np.isfinite(b)):
            raise ValueError("weight_read_bytes_per_gpu: batch must be finite and >= 0")
        experts = local_experts_read(model, deployment, b)
    return _out((rep + per_expert * np.asarray(experts)) * model.weight_dtype_bytes)


# ---------------------------------------------------------------------------------------------
# Operator-level decode step
# ---------------------------------------------------------------------------------------------

#: Inputs of a step, the columns of every operator's coefficient rows: a step is running (1 if
#: batch > 0), batch, KV bytes read from HBM / HBF, KV bytes appended to HBM, local experts read.
_INPUTS = ("running", "batch", "kv_hbm", "kv_hbf", "hbm_write", "experts")
_ARGS = ("batch", "kv_hbm_bytes", "kv_hbf_bytes", "hbf_flush_bytes", "hbm_write_bytes")


def dot_rows(cols: np.ndarray, x: np.ndarray, out: np.ndarray | None = None, tmp: np.ndarray | None = None) -> np.ndarray:
    """Each coefficient row times the inputs ``x`` (``cols`` is the rows' transpose, one row per input),
    summed input by input in :data:`_INPUTS` order (a running sum down the products: ``add.accumulate`` adds
    in sequence).  One arithmetic everywhere: no BLAS kernel picks the order, so a step costs the same bits
    on every machine and in the native core.  ``x`` is a vector (one step) or a matrix (one column per step);
    ``tmp``/``out``: buffers for a vector's products and running sums (``cols``' shape)."""
    x = np.asarray(x)
    if x.ndim == 2:
        return np.add.accumulate(cols[:, :, None] * x[:, None, :], axis=0)[-1]
    prod = np.multiply(cols, x[:, None], out=tmp)
    return np.add.accumulate(prod, axis=0, out=out)[-1]


def sum_in_order(v: np.ndarray) -> float | np.ndarray:
    """The sum over the first axis, left to right (numpy's ``sum`` pairs terms by block size): the
    operator times of a step add up to the same bits here and in the native core."""
    return np.add.accumulate(v, axis=0)[-1]


def _row(**coef: float) -> np.ndarray:
    r = np.zeros(len(_INPUTS))
    for k, v in coef.items():
        r[_INPUTS.index(k)] = v
    return r


@dataclass(frozen=True)
class _Op:
    """One operator summed over its layers: FLOPs and bytes per input, bytes keyed by where they live."""

    name: str
    flops: np.ndarray
    bytes_at: dict[str, np.ndarray]  # "hbm" / "hbf" -> bytes per input
    hbm_write: np.ndarray | None = None  # bytes written to HBM per input
    fixed_s: np.ndarray | None = None  # time not priced by the roofline (the exchange), per input


def _operators(memory: MemoryConfig, model: ModelSpec, deployment: Deployment) -> list[_Op]:
    """The decode step's operators for one GPU (docs/design.md §5, "Decode-step time"), each summed over its layers."""
    m, dep = model, deployment
    h, wb, ab = m.hidden, m.weight_dtype_bytes, m.weight_dtype_bytes
    wt = "hbf" if memory.hbf_stacks > 0 else "hbm"  # where weights live (§4)
    at = "hbm" if memory.hbm_stacks > 0 else "hbf"  # where activations live
    L, D, M = m.layers, m.dense_layers, m.moe_layers
    ops: list[_Op] = []

    def linear(name: str, linears: tuple[tuple[int, int, int], ...], count: int, tokens_per_seq: float = 1.0,
               weight_input: str = "running", weight_scale: float = 1.0) -> None:
        params = sum(k * n * c for k, n, c in linears)
        act = sum((k + n) * c for k, n, c in linears)
        if count and params:
            ops.append(_Op(name, _row(batch=2.0 * params * tokens_per_seq * count),
                           {wt: _row(**{weight_input: params * wb * weight_scale * count}),
                            at: _row(batch=act * ab * tokens_per_seq * count)}))

    # attention (every layer)
    linear("attention_in_proj", m.attn_in_linears, L)
    ctx_flops = m.attention_flops_per_context_token + 7 * m.q_heads  # QKᵀ, AV, and scale/mask/softmax per score
    per_kv_byte = L / m.kv_bytes_per_token  # context tokens x layers per KV byte read
    score_bytes = 2 * m.q_heads * ab if dep.attention_kernel == "unfused" else 0  # score written, then read
    attn_bytes = {"hbm": _row(kv_hbm=1.0), "hbf": _row(kv_hbf=1.0)}
    attn_bytes[at] = attn_bytes[at] + _row(batch=m.attention_io_per_token * ab * L,
                                           kv_hbm=score_bytes * per_kv_byte, kv_hbf=score_bytes * per_kv_byte)
    ops.append(_Op("attention", _row(kv_hbm=ctx_flops * per_kv_byte, kv_hbf=ctx_flops * per_kv_byte),
                   attn_bytes, hbm_write=_row(hbm_write=1.0)))
    linear("attention_out_proj", m.attn_out_linears, L)
    # dense FFN layers
    linear("dense_ffn", ((h, 2 * m.dense_ffn, 1), (m.dense_ffn, h, 1)) if D else (), D)
    # MoE layers: router, dispatch, routed experts, combine, shared experts
    if M:
        e, k, fe = m.n_experts, m.experts_per_token, m.expert_ffn
        linear("router", ((h, e, 1),), M)
        experts = ((h, 2 * fe, 1), (fe, h, 1))
        linear("routed_experts", experts, M, tokens_per_seq=k, weight_input="experts")
        if m.n_shared_experts:
            linear("shared_experts", ((h, 2 * m.shared_ffn, 1), (m.shared_ffn, h, 1)), M,
                   tokens_per_seq=m.n_shared_experts, weight_scale=m.n_shared_experts)
        n = dep.n_gpus
        if n > 1:
            remote = k * h * ab * (n - 1) / n  # bytes per sequence leaving (and entering) this GPU
            ops.append(_Op("expert_exchange", _row(), {},
                           fixed_s=2 * M * _row(running=dep.gpu.link_latency_s, batch=remote / dep.gpu.link_bw)))
    # element-wise: RMSNorms (input, post-attention, MLA's query/latent, final), residual adds, gated activation
    norm_elems = 2 * h + (m.q_lora_rank + m.kv_lora_rank if m.is_mla else 0)
    act_elems = (L * (2 * norm_elems + 2 * 3 * h) + h * 2  # norms read + write, residuals 2 reads + 1 write, final norm
                 + 3 * (D * m.dense_ffn + M * (m.experts_per_token * m.expert_ffn + m.n_shared_experts * m.shared_ffn)))
    ops.append(_Op("elementwise", _row(batch=4.0 * (L * norm_elems + h) + 2.0 * L * h),
                   {at: _row(batch=act_elems * ab), wt: _row(running=(L * norm_elems + h) * wb)}))
    # once per step: LM head, embedding gather
    linear("lm_head", ((h, m.vocab, 1),), 1)
    ops.append(_Op("embedding", _row(), {wt: _row(batch=h * wb), at: _row(batch=h * ab)}))
    return ops


class StepModel:
    """The decode step of one (memory, model, deployment), compiled once into coefficient rows.

    Each operator is a few lanes — its compute time, and its memory time per group of stacks
    that serve it in parallel — each lane linear in the step's inputs (:data:`_INPUTS`); an
    operator costs the max over its lanes, the step the sum over operators plus the HBF flush.
    One matrix product evaluates it for scalars (:meth:`scalar`, the simulator's fast path) and
    for arrays (:meth:`breakdown`, the Kyung validation and notebooks).
    """

    def __init__(self, memory: MemoryConfig, model: ModelSpec, deployment: Deployment):
        self.memory, self.model, self.deployment = memory, model, deployment
        ops = _operators(memory, model, deployment)
        rd = {"hbm": memory.hbm_read_bw, "hbf": memory.hbf_stacks * memory.hbf.read_bw}
        pooled = memory.daisy_chain or memory.read_pricing == "aggregate"
        pool_bw = memory.hbm_read_bw if memory.daisy_chain else rd["hbm"] + rd["hbf"]
        # inputs a design cannot carry: KV in a tier it lacks, or written where there is no bandwidth
        self._forbidden: list[tuple[str, str]] = [(a, t) for a, t, bw in (
            ("kv_hbm_bytes", "HBM", memory.hbm_read_bw), ("hbm_write_bytes", "HBM", memory.hbm_write_bw),
            ("kv_hbf_bytes", "HBF", rd["hbf"]), ("hbf_flush_bytes", "HBF", memory.hbf_write_bw)) if bw <= 0]

        def per_bw(vec: np.ndarray, bw: float, tier: str) -> np.ndarray:
            if bw > 0:
                return vec / bw
            if np.any(vec[:2]):
                raise ValueError(f"memory {memory.label!r}: {tier} has no bandwidth but holds weights or activations")
            return np.zeros_like(vec)  # its KV inputs are forbidden above

        rows: list[list[np.ndarray]] = []
        for op in ops:
            lanes = [op.flops / deployment.gpu.flops + (op.fixed_s if op.fixed_s is not None else 0.0)]
            write = per_bw(op.hbm_write, memory.hbm_write_bw, "HBM") if op.hbm_write is not None else 0.0
            if pooled:
                total = sum(op.bytes_at.values(), np.zeros(len(_INPUTS)))
                lanes.append(per_bw(total, pool_bw, "the memory") + write)
            else:
                for tier, vec in op.bytes_at.items():
                    lanes.append(per_bw(vec, rd[tier], tier.upper()) + (write if tier == "hbm" else 0.0))
                if "hbm" not in op.bytes_at and op.hbm_write is not None:
                    lanes.append(write)
            rows.append(lanes)
        width = max(len(r) for r in rows)
        self.names: tuple[str, ...] = tuple(op.name for op in ops)
        self._lanes = width
        padded = np.array([r + [np.zeros(len(_INPUTS))] * (width - len(r)) for r in rows])  # (ops, lanes, inputs)
        self._coef = padded.transpose(1, 0, 2).reshape(-1, len(_INPUTS))  # lane-major rows
        self._cols = np.ascontiguousarray(self._coef.T)  # one row per input (dot_rows' operand)
        self._flush_per_byte = 1.0 / memory.hbf_write_bw if memory.hbf_write_bw > 0 else 0.0
        self._n_ops = len(ops)
        m, dep = model, deployment
        self._n_local = m.n_experts / dep.n_gpus if m.moe_layers else 0.0
        k_over_e = m.experts_per_token / m.n_experts if m.moe_layers else 0.0
        self._log_miss = dep.n_gpus * math.log1p(-k_over_e) if k_over_e < 1 else -math.inf

    def _experts(self, b):
        """Expected local experts read at batch ``b`` per GPU (:func:`local_experts_read`), scalar or array."""
        if self._log_miss == -math.inf:
            return self._n_local * (b > 0)
        return -self._n_local * (math.expm1(b * self._log_miss) if isinstance(b, float) else np.expm1(b * self._log_miss))

    def _check_tiers(self, kv_hbm, kv_hbf, flush, hbm_w) -> None:
        for name, tier in self._forbidden:
            v = {"kv_hbm_bytes": kv_hbm, "kv_hbf_bytes": kv_hbf, "hbm_write_bytes": hbm_w, "hbf_flush_bytes": flush}[name]
            if np.any(v > 0):
                raise ValueError(f"decode step ({self.memory.label}): {name}: bytes routed to {tier}, "
                                 "a tier with zero bandwidth")

    def _array_inputs(self, b, kv_hbm, kv_hbf, flush, hbm_w) -> tuple[np.ndarray, np.ndarray]:
        """The input matrix (one column per step) and the flush bytes, validated."""
        arrs = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (b, kv_hbm, kv_hbf, flush, hbm_w)))
        for name, v in zip(_ARGS, arrs):
            if np.any(~np.isfinite(v)) or np.any(v < 0):
                raise ValueError(f"decode step: {name} must be finite and >= 0")
        b, kv_hbm, kv_hbf, flush, hbm_w = arrs
        self._check_tiers(kv_hbm, kv_hbf, flush, hbm_w)
        return np.stack(((b > 0).astype(float), b, kv_hbm, kv_hbf, hbm_w, self._experts(b))), flush

    def _op_times(self, x: np.ndarray) -> np.ndarray:
        """Seconds per operator: the max over its lanes of the coefficient rows times the inputs.

        Rows are lane-major (every operator's lane 0, then every operator's lane 1, ...), so
        one product serves a vector ``x`` (one step) and a matrix (one column per step).
        """
        n = len(self.names)
        t = dot_rows(self._cols, x)
        m = t[:n]
        for k in range(1, self._lanes):
            m = np.maximum(m, t[k * n:(k + 1) * n])
        return m

    def scalar(self, batch: float, kv_hbm: float, kv_hbf: float, flush: float, hbm_write: float = 0.0) -> float:
        """Seconds of one decode step for scalar inputs: the simulator's per-event call, same rows as arrays."""
        b, h, f, fl, hw = float(batch), float(kv_hbm), float(kv_hbf), float(flush), float(hbm_write)
        if not (0.0 <= b < math.inf and 0.0 <= h < math.inf and 0.0 <= f < math.inf and 0.0 <= fl < math.inf
                and 0.0 <= hw < math.inf):
            for name, v in zip(_ARGS, (b, h, f, fl, hw)):
                if not 0.0 <= v < math.inf:
                    raise ValueError(f"decode step: {name} must be finite and >= 0, got {v!r}")
        if self._forbidden:
            self._check_tiers(h, f, fl, hw)
        x = np.array((1.0 if b > 0 else 0.0, b, h, f, hw, self._experts(b)))
        return float(sum_in_order(self._op_times(x))) + fl * self._flush_per_byte

    def scalar_fn(self) -> Callable[..., float]:
        """:meth:`scalar` as a function with its own input and result buffers, so a call allocates no
        array (the same products, maxima and sum).  One per simulation run: not for sharing across threads."""
        if self._lanes != 2:
            return self.scalar
        cols, n, per_byte, experts, forbidden = self._cols, self._n_ops, self._flush_per_byte, self._experts, self._forbidden
        x, m = np.zeros(len(_INPUTS)), np.zeros(n)
        prod, run = np.zeros_like(cols), np.zeros_like(cols)
        accumulate, inf = np.add.accumulate, math.inf

        def step(batch: float, kv_hbm: float, kv_hbf: float, flush: float, hbm_write: float = 0.0) -> float:
            b, h, f, fl, hw = float(batch), float(kv_hbm), float(kv_hbf), float(flush), float(hbm_write)
            if not (0.0 <= b < inf and 0.0 <= h < inf and 0.0 <= f < inf and 0.0 <= fl < inf and 0.0 <= hw < inf):
                return self.scalar(b, h, f, fl, hw)  # raises, naming the argument
            if forbidden:
                self._check_tiers(h, f, fl, hw)
            x[0], x[1], x[2], x[3], x[4], x[5] = 1.0 if b > 0 else 0.0, b, h, f, hw, experts(b)
            t = dot_rows(cols, x, run, prod)
            _maximum(t[:n], t[n:], out=m)
            return float(accumulate(m)[-1]) + fl * per_byte

        return step

    def __call__(self, batch: ArrayLike, kv_hbm: ArrayLike, kv_hbf: ArrayLike, flush: ArrayLike,
                 hbm_write: ArrayLike = 0.0) -> float | np.ndarray:
        """Seconds of one decode step; scalars take :meth:`scalar`, arrays broadcast."""
        if all(isinstance(v, _SCALARS) for v in (batch, kv_hbm, kv_hbf, flush, hbm_write)):
            return self.scalar(batch, kv_hbm, kv_hbf, flush, hbm_write)
        x, fl = self._array_inputs(batch, kv_hbm, kv_hbf, flush, hbm_write)
        return _out(sum_in_order(self._op_times(x)) + fl * self._flush_per_byte)

    def breakdown(self, batch: ArrayLike, kv_hbm: ArrayLike, kv_hbf: ArrayLike, flush: ArrayLike,
                  hbm_write: ArrayLike = 0.0) -> pd.DataFrame:
        """Seconds per operator, the flush and the total, one row per input (arrays broadcast)."""
        x, fl = self._array_inputs(*(np.atleast_1d(np.asarray(v, dtype=float))
                                     for v in (batch, kv_hbm, kv_hbf, flush, hbm_write)))
        t = self._op_times(x)
        df = pd.DataFrame({name: t[i] for i, name in enumerate(self.names)})
        df["flush"] = fl * self._flush_per_byte
        df["total"] = sum_in_order(t) + df["flush"].to_numpy()
        return df


#: Operators an expert-parallel group prices over the whole group's tokens (balanced over its GPUs);
#: every other operator runs on each GPU's own sequences (attention data-parallel, §5.2).
GROUP_OPERATORS = ("routed_experts",)


class GroupStep:
    """The decode step of ``ranks`` GPUs that step in lockstep (§5.2: attention data-parallel, experts
    expert-parallel, so every MoE layer exchanges tokens across the group).

    A step lasts the slowest rank's own operators (its attention over its KV, projections, shared
    experts, router, its share of the exchange) plus its flush of HBF-bound KV, plus the routed experts
    priced at the group's mean tokens per GPU (ASSUMPTION routing, docs/design.md §5: tokens spread
    evenly over the experts' GPUs).  Per-layer barriers add up to one max over ranks because identical
    layers keep the same rank slowest.  The same coefficient rows as :class:`StepModel`, split by operator.
    """

    def __init__(self, model: StepModel):
        lanes, n = model._lanes, model._n_ops
        coef = model._coef.reshape(lanes, n, len(_INPUTS))
        group = [i for i, name in enumerate(model.names) if name in GROUP_OPERATORS]
        own = [i for i in range(n) if i not in group]
        self._own = np.ascontiguousarray(coef[:, own, :].reshape(-1, len(_INPUTS)).T)  # dot_rows' operands
        self._group = np.ascontiguousarray(coef[:, group, :].reshape(-1, len(_INPUTS)).T)
        self._n_own, self._n_group, self._lanes = len(own), len(group), lanes
        self._model = model
        self._per_byte = model._flush_per_byte
        self._x = np.zeros(len(_INPUTS))
        self._memo: dict[float, float] = {}

    def _max_lanes(self, t: np.ndarray, n: int) -> float:
        m = t[:n]
        for k in range(1, self._lanes):
            m = _maximum(m, t[k * n:(k + 1) * n])
        return float(sum_in_order(m))

    def rank(self, batch: float, kv_hbm: float, kv_hbf: float, flush: float, hbm_write: float = 0.0) -> float:
        """Seconds of one rank's own operators and flush at its batch and KV bytes."""
        model = self._model
        if not (0.0 <= batch < math.inf and 0.0 <= kv_hbm < math.inf and 0.0 <= kv_hbf < math.inf
                and 0.0 <= flush < math.inf and 0.0 <= hbm_write < math.inf):
            model.scalar(batch, kv_hbm, kv_hbf, flush, hbm_write)  # raises, naming the argument
        if model._forbidden:
            model._check_tiers(kv_hbm, kv_hbf, flush, hbm_write)
        x = self._x
        x[0], x[1], x[2], x[3], x[4], x[5] = 1.0 if batch > 0 else 0.0, batch, kv_hbm, kv_hbf, hbm_write, 0.0
        return self._max_lanes(dot_rows(self._own, x), self._n_own) + flush * self._per_byte

    def experts(self, mean_batch: float) -> float:
        """Seconds of the group-wide operators at the group's mean sequences per GPU (memoized: a group's
        mean batch takes few distinct values)."""
        t = self._memo.get(mean_batch)
        if t is None:
            if not self._n_group:
                return 0.0
            x = self._x
            b = float(mean_batch)
            x[0], x[1], x[2], x[3], x[4], x[5] = 1.0 if b > 0 else 0.0, b, 0.0, 0.0, 0.0, self._model._experts(b)
            t = self._memo[mean_batch] = self._max_lanes(dot_rows(self._group, x), self._n_group)
        return t

    def __call__(self, batches: Sequence[float], rows: Sequence[Sequence[float]]) -> float:
        """Seconds of one group step: ``batches[r]`` sequences and ``rows[r] = (kv_hbm, kv_hbf, flush,
        hbm_write)`` bytes on rank r."""
        own = max(self.rank(float(b), *map(float, r)) for b, r in zip(batches, rows))
        return own + self.experts(sum(batches) / len(batches))


@lru_cache(maxsize=64)
def step_model(memory: MemoryConfig, model: ModelSpec, deployment: Deployment) -> StepModel:
    """The compiled :class:`StepModel` of this (memory, model, deployment) (cached)."""
    return StepModel(memory, model, deployment)


def group_step(memory: MemoryConfig, model: ModelSpec, deployment: Deployment) -> GroupStep:
    """The :class:`GroupStep` of this (memory, model, deployment), for one simulation run (own buffers)."""
    return GroupStep(step_model(memory, model, deployment))


def scalar_step_fn(memory: MemoryConfig, model: ModelSpec, deployment: Deployment):
    """``f(batch, kv_hbm, kv_hbf, flush, hbm_write) -> step s`` for Python floats: :meth:`StepModel.scalar`
    (a fresh :meth:`StepModel.scalar_fn` per call, for one simulation run)."""
    return step_model(memory, model, deployment).scalar_fn()


def decode_step_time(batch: ArrayLike, kv_hbm_bytes: ArrayLike, kv_hbf_bytes: ArrayLike,
                     hbf_flush_bytes: ArrayLike, memory: MemoryConfig, model: ModelSpec,
                     deployment: Deployment, hbm_write_bytes: ArrayLike = 0.0) -> float | np.ndarray:
    """Seconds of one decode step on one GPU (operator-level roofline + HBF flush, docs/design.md §5).

    ``batch``: sequences decoding on this GPU; ``kv_*_bytes``: their KV read from each tier;
    ``hbf_flush_bytes``: KV bound for HBF this step; ``hbm_write_bytes``: KV appended to HBM.
    """
    return step_model(memory, model, deployment)(batch, kv_hbm_bytes, kv_hbf_bytes, hbf_flush_bytes, hbm_write_bytes)


def decode_step_breakdown(batch: ArrayLike, kv_hbm_bytes: ArrayLike, kv_hbf_bytes: ArrayLike,
                          hbf_flush_bytes: ArrayLike, memory: MemoryConfig, model: ModelSpec,
                          deployment: Deployment, hbm_write_bytes: ArrayLike = 0.0) -> pd.DataFrame:
    """:func:`decode_step_time` by operator: seconds per operator, ``flush`` and ``total`` (one row per input)."""
    return step_model(memory, model, deployment).breakdown(batch, kv_hbm_bytes, kv_hbf_bytes, hbf_flush_bytes,
                                                           hbm_write_bytes)


def kv_landing_time(tokens: ArrayLike, tier: Literal["hbm", "hbf"], memory: MemoryConfig,
                    model: ModelSpec) -> float | np.ndarray:
    """Seconds for prefilled KV of ``tokens`` to land in ``tier`` at that tier's write bandwidth (per GPU)."""
    if tier not in ("hbm", "hbf"):
        raise ValueError(f"kv_landing_time: unknown tier {tier!r} (use 'hbm' or 'hbf')")
    bw = memory.hbf_write_bw if tier == "hbf" else memory.hbm_stacks * memory.hbm.write_bw
    if isinstance(tokens, _SCALARS):  # fast path for the simulator's per-request calls
        if not (0 <= tokens < math.inf):
            raise ValueError("kv_landing_time: tokens must be finite and >= 0")
        if bw > 0:
            return tokens * model.kv_bytes_per_token / bw
        if tokens > 0:
            raise ValueError(f"{tier} landing: bytes routed to a tier with zero bandwidth")
        return 0.0
    n = np.asarray(tokens, dtype=float)
    if np.any(n < 0) or np.any(~np.isfinite(n)):
        raise ValueError("kv_landing_time: tokens must be finite and >= 0")
    return _out(_div(n * model.kv_bytes_per_token, bw, f"{tier} landing"))



def landing_fn(memory: MemoryConfig, model: ModelSpec):
    """``f(hbm_tokens, hbf_tokens) -> s``: :func:`kv_landing_time` of both tiers in parallel (their max),
    bandwidths bound once for the simulator's per-request call; the same float operations."""
    bw_hbm, bw_hbf = memory.hbm_stacks * memory.hbm.write_bw, memory.hbf_write_bw
    kb, inf = model.kv_bytes_per_token, math.inf

    def land(hbm_tokens: float, hbf_tokens: float) -> float:
        if not (bw_hbm > 0 and bw_hbf > 0 and 0 <= hbm_tokens < inf and 0 <= hbf_tokens < inf):
            t1 = kv_landing_time(hbm_tokens, "hbm", memory=memory, model=model) if hbm_tokens else 0.0
            t2 = kv_landing_time(hbf_tokens, "hbf", memory=memory, model=model) if hbf_tokens else 0.0
            return float(max(t1, t2))
        t1 = hbm_tokens * kb / bw_hbm if hbm_tokens else 0.0
        t2 = hbf_tokens * kb / bw_hbf if hbf_tokens else 0.0
        return t2 if t2 > t1 else t1  # max(t1, t2), both floats

    return land

# ---------------------------------------------------------------------------------------------
# Lifetime and settling
# ---------------------------------------------------------------------------------------------


def hbf_lifetime_years(memory: MemoryConfig, hbf_kv_write_bytes_per_s: ArrayLike,
                       endurance: Endurance = Endurance(), reserved_bytes: float = 0.0) -> float | np.ndarray:
    """Years the HBF P/E budget lasts at a KV write rate (B/s, per GPU): stacks×512 GB×P/E/(WA×rate).

    The one-time weight load is excluded (it is not in the rate).  ``reserved_bytes`` removes flash
    holding read-only data from the budget (Kyung et al.'s accounting; 0 in the Lachesis paper).
    A zero rate gives ``inf``; a NaN rate gives NaN.
    """
    rate = np.asarray(hbf_kv_write_bytes_per_s, dtype=float)
    if np.any(rate < 0):
        raise ValueError("hbf_lifetime_years: write rate must be >= 0")
    budget = (memory.hbf_bytes - reserved_bytes) * endurance.pe_cycles
    if budget <= 0:
        raise ValueError(f"hbf_lifetime_years: no flash left to wear ({memory.label}, reserved {reserved_bytes:g} B)")
    with np.errstate(divide="ignore"):
        secs = budget / (endurance.write_amplification * rate)
    return _out(secs / SECONDS_PER_YEAR)


#: how a group's lifetime reads its ranks' HBF write rates (``Endurance.lifetime_over_ranks``)
OVER_RANKS = ("mean", "worst")


def rank_spread(hbf_bytes_by_rank: Sequence[float]) -> float:
    """The most-written rank's HBF KV bytes over the ranks' mean (1 for one rank or no HBF write)."""
    b = np.asarray(hbf_bytes_by_rank, dtype=float)
    if b.size == 0 or np.any(b < 0) or not np.all(np.isfinite(b)):
        raise ValueError(f"rank_spread: expected finite bytes >= 0 per rank, got {list(b)!r}")
    mean = float(b.mean())
    return float(b.max() / mean) if mean > 0 else 1.0


def group_lifetime_years(memory: MemoryConfig, mean_rate: ArrayLike, endurance: Endurance = Endurance(),
                         spread: float = 1.0) -> float | np.ndarray:
    """Lifetime of a group's HBF from its ranks' mean write rate (B/s per GPU) and :func:`rank_spread`:
    at the mean rate, or at the worst rank's (mean × spread) under ``lifetime_over_ranks="worst"``."""
    over = endurance.lifetime_over_ranks
    if over not in OVER_RANKS:
        raise ValueError(f"lifetime_over_ranks must be one of {list(OVER_RANKS)}, got {over!r}")
    if not (np.isfinite(spread) and spread >= 1.0):
        raise ValueError(f"group_lifetime_years: rank spread must be >= 1, got {spread!r}")
    rate = np.asarray(mean_rate, dtype=float) * (spread if over == "worst" else 1.0)
    return hbf_lifetime_years(memory, rate, endurance)


class Settling(NamedTuple):
    """Result of :func:`settled_rate` (a tuple: ``rate, settled, settled_at_s``)."""

    rate: float  # B/s over the second half of the whole series
    settled: bool  # the half-vs-quarter rule holds at the end of the series (and from settled_at_s on)
    settled_at_s: float  # earliest prefix end after which the rule holds for every longer prefix (NaN if never)


def settled_rate(t: np.ndarray, cum_bytes: np.ndarray, rtol: float = 0.10, min_points: int = 8) -> Settling:
    """Detect when a cumulative-bytes series has settled (rule *half-vs-quarter*, vectorized).

    For each prefix ``[t0, t_i]`` of length T_i: r½ = rate over its second half, r¼ = rate over its
    last quarter (cumulative bytes linearly interpolated).  The prefix passes when
    ``|r½ - r¼| <= rtol · r½``.  Settled at the first ``t_i`` (i ≥ ``min_points``) from which every
    longer prefix passes; the reported rate is r½ of the whole series.
    """
    t = np.asarray(t, dtype=float)
    c = np.asarray(cum_bytes, dtype=float)
    if t.ndim != 1 or t.shape != c.shape:
        raise ValueError("settled_rate: t and cum_bytes must be 1-D arrays of the same length")
    if len(t) < 2:
        raise ValueError("settled_rate: need at least two samples")
    if np.any(np.diff(t) <= 0):
        raise ValueError("settled_rate: t must be strictly increasing")
    if np.any(np.diff(c) < 0) or np.any(~np.isfinite(c)):
        raise ValueError("settled_rate: cum_bytes must be finite and non-decreasing")
    T = t - t[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        r_half = (c - np.interp(t[0] + T / 2, t, c)) / (T / 2)
        r_quarter = (c - np.interp(t[0] + 3 * T / 4, t, c)) / (T / 4)
        ok = np.abs(r_half - r_quarter) <= rtol * np.abs(r_half)
    ok[: max(min_points, 1)] = False
    ok &= np.isfinite(r_half)
    # suffix-all: ok_from[i] = ok[i] and ok[i+1] and ...
    ok_from = np.flip(np.logical_and.accumulate(np.flip(ok)))
    idx = np.flatnonzero(ok_from)
    rate = float(r_half[-1])
    if len(idx) == 0:
        return Settling(rate, False, float("nan"))
    return Settling(rate, True, float(t[idx[0]]))


