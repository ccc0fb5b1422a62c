"""The decode step's cost (§5.1–§5.2): one GPU's step priced operator by operator, LLMSimulator's way — each
operator the max of its compute time and its memory time per group of stacks that serve it — plus the HBF flush,
and the lockstep step of an expert-parallel group (:class:`GroupStep`).

The simulator calls these per event, so each takes scalars or arrays (:mod:`lachesis.node.quantity`) and nothing
loops per sequence or block.  The operators, what one GPU holds, the routing assumption, the exchange and read
pricing, with their sources: docs/design.md §5, "Decode-step time" and "Decode node".  The validation against
Kyung et al.'s Fig. 4 is :mod:`lachesis.node.kyung`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence, cast

import numpy as np
import pandas as pd

from lachesis.config import Deployment, MemoryConfig, ModelSpec
from lachesis.node.quantity import SCALARS, ArrayLike, as_result, check_nonnegative

_maximum = np.maximum  # the lane maximum without method overhead

__all__ = ["weight_read_bytes_per_gpu", "local_experts_read", "dot_rows", "sum_in_order", "StepModel", "GroupStep",
           "GROUP_OPERATORS", "step_model", "group_step", "scalar_step_fn", "decode_step_time",
           "decode_step_breakdown"]


def local_experts_read(model: ModelSpec, deployment: Deployment, batch: ArrayLike) -> float | np.ndarray:
    """Expected distinct local experts (per MoE layer, per GPU) that a step at ``batch`` sequences per GPU reads.

    ASSUMPTION (routing, docs/design.md §5, "Decode-step time"): E/n_gpus · (1 - (1 - k/E)^(n_gpus · batch)).
    """
    b = np.asarray(batch, dtype=float)
    if not model.moe_layers:
        return as_result(np.zeros_like(b))
    n, e, k = deployment.n_gpus, model.n_experts, model.experts_per_token
    miss = n * math.log1p(-k / e) if k < e else -math.inf
    with np.errstate(invalid="ignore"):
        hit = np.where(b > 0, -np.expm1(b * miss) if miss > -math.inf else 1.0, 0.0)
    return as_result(e / n * hit)


def weight_read_bytes_per_gpu(model: ModelSpec, deployment: Deployment,
                              batch: ArrayLike | None = None) -> float | np.ndarray:
    """Weight bytes one decode step reads on one GPU (``batch`` None = saturated: every local expert).

    Every replicated weight except the input embedding table (only ``batch`` rows are gathered;
    a tied table is read whole as the LM head) plus the local experts the batch reaches.
    """
    routed = model.routed_expert_params
    rep = model.total_params - routed - (0 if model.tie_embeddings else model.embedding_params)
    per_expert = model.moe_layers * model.ffn_params(model.expert_ffn)
    experts: float | np.ndarray
    if batch is None:
        experts = model.n_experts / deployment.n_gpus if model.moe_layers else 0.0
    else:
        b = np.asarray(batch, dtype=float)
        check_nonnegative("weight_read_bytes_per_gpu", "batch", b)
        experts = local_experts_read(model, deployment, b)
    return as_result((rep + per_expert * np.asarray(experts)) * model.weight_dtype_bytes)


# ---------------------------------------------------------------------------------------------
# Operator-level decode step
# ---------------------------------------------------------------------------------------------

#: Inputs of a step, the columns of every operator's coefficient rows: a step is running (1 if
#: batch > 0), batch, KV bytes read from HBM / HBF, KV bytes appended to HBM, local experts read.
_INPUTS = ("running", "batch", "kv_hbm", "kv_hbf", "hbm_write", "experts")
_ARGS = ("batch", "kv_hbm_bytes", "kv_hbf_bytes", "hbf_flush_bytes", "hbm_write_bytes")


def dot_rows(cols: np.ndarray, x: np.ndarray, out: np.ndarray | None = None,
             tmp: np.ndarray | None = None) -> np.ndarray:
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

        rows: list[list[np.ndarray | float]] = []
        for op in ops:
            lanes: list[np.ndarray | float] = [op.flops / deployment.gpu.flops
                                               + (op.fixed_s if op.fixed_s is not None else 0.0)]
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

    @property
    def lanes(self) -> int:
        """Lanes per operator: its compute time, then its memory time per group of stacks (padded with zeros)."""
        return self._lanes

    @property
    def coefficients(self) -> np.ndarray:
        """The coefficient rows as (lanes, operators, inputs): seconds per unit of each input."""
        return self._coef.reshape(self._lanes, self._n_ops, len(_INPUTS))

    @property
    def columns(self) -> np.ndarray:
        """The lane-major rows transposed, one row per input: :func:`dot_rows`' operand for the whole step."""
        return self._cols

    @property
    def flush_s_per_byte(self) -> float:
        """Seconds per byte of KV flushed to HBF (0 for a memory without HBF write bandwidth)."""
        return self._flush_per_byte

    @property
    def carries_every_input(self) -> bool:
        """Whether every input has a tier with bandwidth to carry it (else :meth:`check_tiers` may raise)."""
        return not self._forbidden

    @property
    def expert_terms(self) -> tuple[float, float]:
        """(local experts, n·log(1 − k/E)) of :meth:`experts_read`'s closed form (−inf when every expert is hit)."""
        return self._n_local, self._log_miss

    def experts_read(self, b):
        """Expected local experts read at batch ``b`` per GPU (:func:`local_experts_read`), scalar or array."""
        if self._log_miss == -math.inf:
            return self._n_local * (b > 0)
        miss = self._log_miss
        return -self._n_local * (math.expm1(b * miss) if isinstance(b, float) else np.expm1(b * miss))

    def check_tiers(self, kv_hbm, kv_hbf, flush, hbm_w) -> None:
        """Raise if a step sends bytes to a tier this memory lacks (no bandwidth), naming the input."""
        for name, tier in self._forbidden:
            v = {"kv_hbm_bytes": kv_hbm, "kv_hbf_bytes": kv_hbf, "hbm_write_bytes": hbm_w,
                 "hbf_flush_bytes": flush}[name]
            if np.any(v > 0):
                raise ValueError(f"decode step ({self.memory.label}): {name}: bytes routed to {tier}, "
                                 "a tier with zero bandwidth")

    def _array_inputs(self, b, kv_hbm, kv_hbf, flush, hbm_w) -> tuple[np.ndarray, np.ndarray]:
        """The input matrix (one column per step) and the flush bytes, validated."""
        arrs = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (b, kv_hbm, kv_hbf, flush, hbm_w)))
        for name, v in zip(_ARGS, arrs):
            check_nonnegative("decode step", name, v)
        b, kv_hbm, kv_hbf, flush, hbm_w = arrs
        self.check_tiers(kv_hbm, kv_hbf, flush, hbm_w)
        return np.stack(((b > 0).astype(float), b, kv_hbm, kv_hbf, hbm_w, self.experts_read(b))), flush

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
                and 0.0 <= hw < math.inf):  # the fast screen; the check names the argument
            for name, v in zip(_ARGS, (b, h, f, fl, hw)):
                check_nonnegative("decode step", name, v)
        if self._forbidden:
            self.check_tiers(h, f, fl, hw)
        x = np.array((1.0 if b > 0 else 0.0, b, h, f, hw, self.experts_read(b)))
        return float(sum_in_order(self._op_times(x))) + fl * self._flush_per_byte

    def scalar_fn(self) -> Callable[..., float]:
        """:meth:`scalar` as a function with its own input and result buffers, so a call allocates no
        array (the same products, maxima and sum).  One per simulation run: not for sharing across threads."""
        if self._lanes != 2:
            return self.scalar
        cols, n, per_byte = self._cols, self._n_ops, self._flush_per_byte
        experts, forbidden = self.experts_read, self._forbidden
        x, m = np.zeros(len(_INPUTS)), np.zeros(n)
        prod, run = np.zeros_like(cols), np.zeros_like(cols)
        accumulate, inf = np.add.accumulate, math.inf

        def step(batch: float, kv_hbm: float, kv_hbf: float, flush: float, hbm_write: float = 0.0) -> float:
            b, h, f, fl, hw = float(batch), float(kv_hbm), float(kv_hbf), float(flush), float(hbm_write)
            if not (0.0 <= b < inf and 0.0 <= h < inf and 0.0 <= f < inf and 0.0 <= fl < inf and 0.0 <= hw < inf):
                return self.scalar(b, h, f, fl, hw)  # raises, naming the argument
            if forbidden:
                self.check_tiers(h, f, fl, hw)
            x[0], x[1], x[2], x[3], x[4], x[5] = 1.0 if b > 0 else 0.0, b, h, f, hw, experts(b)
            t = dot_rows(cols, x, run, prod)
            _maximum(t[:n], t[n:], out=m)
            return float(accumulate(m)[-1]) + fl * per_byte

        return step

    def __call__(self, batch: ArrayLike, kv_hbm: ArrayLike, kv_hbf: ArrayLike, flush: ArrayLike,
                 hbm_write: ArrayLike = 0.0) -> float | np.ndarray:
        """Seconds of one decode step; scalars take :meth:`scalar`, arrays broadcast."""
        args = (batch, kv_hbm, kv_hbf, flush, hbm_write)
        if all(isinstance(v, SCALARS) for v in args):
            return self.scalar(*cast(tuple[float, ...], args))
        x, fl = self._array_inputs(batch, kv_hbm, kv_hbf, flush, hbm_write)
        return as_result(sum_in_order(self._op_times(x)) + fl * self._flush_per_byte)

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
        coef, lanes = model.coefficients, model.lanes
        group = [i for i, name in enumerate(model.names) if name in GROUP_OPERATORS]
        own = [i for i in range(len(model.names)) if i not in group]
        #: dot_rows' operands: each rank's own operators, and the group-wide ones
        self.own_columns = np.ascontiguousarray(coef[:, own, :].reshape(-1, len(_INPUTS)).T)
        self.group_columns = np.ascontiguousarray(coef[:, group, :].reshape(-1, len(_INPUTS)).T)
        self.n_own, self.n_group, self._lanes = len(own), len(group), lanes
        self._model = model
        self._per_byte = model.flush_s_per_byte
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
        if not model.carries_every_input:
            model.check_tiers(kv_hbm, kv_hbf, flush, hbm_write)
        x = self._x
        x[0], x[1], x[2], x[3], x[4], x[5] = 1.0 if batch > 0 else 0.0, batch, kv_hbm, kv_hbf, hbm_write, 0.0
        return self._max_lanes(dot_rows(self.own_columns, x), self.n_own) + flush * self._per_byte

    def experts(self, mean_batch: float) -> float:
        """Seconds of the group-wide operators at the group's mean sequences per GPU (memoized: a group's
        mean batch takes few distinct values)."""
        t = self._memo.get(mean_batch)
        if t is None:
            if not self.n_group:
                return 0.0
            x = self._x
            b = float(mean_batch)
            x[0], x[1], x[2], x[3], x[4], x[5] = 1.0 if b > 0 else 0.0, b, 0.0, 0.0, 0.0, self._model.experts_read(b)
            t = self._memo[mean_batch] = self._max_lanes(dot_rows(self.group_columns, x), self.n_group)
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
