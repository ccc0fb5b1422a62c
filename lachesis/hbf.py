"""HBF endurance and latency model: decode-step roofline, KV landing, flash lifetime (§2.2, §4, §5.1–§5.3).

The decode-node simulator calls these per step/event, so every function takes scalars or numpy
arrays and returns a float (scalar input) or an array (array input); nothing loops in Python.

Model (DESIGN §5, §5.1 of the paper):

* **Weights** live in HBF, read-only (§4: "read-only mapping for model weights"); their one load
  is excluded from wear (§5.2).  Eight GPUs, attention data-parallel, experts expert-parallel:
  each GPU holds every replicated parameter (attention, dense/shared FFN, router, norms,
  embeddings, LM head) plus 1/n_gpus of the routed experts (:class:`lachesis.config.ModelLayout`,
  numbers derived from the public model configs: Maverick 14.15e9 replicated + 386.5e9 routed,
  Qwen3-235B 8.0e9 + 227.1e9).  A step reads every replicated weight except the input embedding
  table (only B rows are gathered) and the local experts that at least one token of the node's
  global batch is routed to.
  ASSUMPTION (routing): tokens route uniformly and independently, so a local expert is hit with
  probability 1 - (1 - k/E)^(n_gpus * batch); at a saturated batch every local expert is read.
  ASSUMPTION (no layout): a model without a layout is treated as replicated = active params,
  routed = total - active (an upper bound on the expert-parallel share).
* **Decode step** (one GPU):  ``max(compute, read) + flush``.
  compute = (2 * active params * batch + 4 * layers * q_heads * head_dim * context tokens) / FLOPS.
  read: each tier's bytes at that tier's read bandwidth (§5.1: "prices each read against the
  bandwidth of the tier it is served from"); co-located designs (1/7…4/4) read the two tiers in
  parallel, each HBF byte striped over all HBF stacks (§2.2: aggregate bandwidth of the stacks),
  so read = max(HBM time, HBF time).  The 8/8* daisy chain carries HBF traffic over the HBM links
  (``MemoryConfig.daisy_chain``), so both tiers' bytes share one set of links:
  read = (HBM + HBF bytes) / HBM link bandwidth — the bandwidths do not add up.
  flush: KV bound for HBF is buffered across the decoder layers and flushed once at the end of
  the step (§5.1), priced at HBF write bandwidth and serialized after the step.  HBM-bound KV
  writes are charged to the HBM tier's time at HBM write bandwidth.
* **Landing**: prefilled KV arriving on the decode node is written at the target tier's write
  bandwidth (HBF: 16 GB/s per stack, the slow path).
* **Lifetime** (§5.2): HBF stacks × 512 GB × P/E / (WA × KV write rate), years of 31,557,600 s.
  ``reserved_bytes`` optionally removes flash that holds read-only data from the wear budget (the
  Kyung et al. [23] accounting); the Lachesis paper's formula uses the full flash (default 0).
* **Settling** (§5.2, "measured once the write traffic has settled"): rule *half-vs-quarter* —
  on cumulative HBF bytes, the rate over the second half of the window and the rate over its last
  quarter agree within ``rtol``; settled from the first prefix end after which the rule holds for
  every longer prefix.  See :func:`settled_rate`.

Validation (Kyung et al. [23], Fig. 4, Llama-4-Maverick): :func:`kyung_steady_state` is a
steady-state saturated-batch model built from the SAME :func:`decode_step_time`,
:func:`weight_storage_bytes_per_gpu` and :func:`hbf_lifetime_years`; :func:`kyung_grid` compares
every cell with the transcribed table parsed by :func:`parse_kyung_tables`.  Lengths follow
Kyung's dispersion model (context CV + Beta(κ) output share, :class:`KyungSetting`); it reproduces
their TPOT rise from the CV 0.1 to the CV 0.3 table (mean +2.8 ms ours, +2.9 ms theirs; +0.7 ms
with L_in and L_out independent).  The step waits for the slowest of the eight expert-parallel
ranks' prompt landings (``KyungSetting.ep_barrier``, no free parameter): this makes the TPOT error
flat across L_in:L_out ratios (per-ratio means -11.4%…-10.0%; averaged over the ranks instead, it
grows from -11.9% at 1:3 to -17.7% at 15:1).  Result (30 cells, no per-cell constant): lifetime
within ±15% in 25 cells, errors -24%…-3% (median -10%); TPOT -14%…-8% (median -10%), below
theirs in every cell.  Bytes per step agree — the batch implied by their own lifetime/TPOT pairs
is ours to a median +0.2% (:func:`kyung_implied_batch`) — so the flat miss is the step time: at
peak bandwidths our roofline is about 10% faster than theirs (the independent C++ roofline the
table was transcribed from is 8% faster), and lifetime is proportional to step time at fixed
bytes per step.  The five misses are 32K cells whose own lifetime/TPOT pair implies 3–16% fewer
bytes per step than the capacity batch writes, which no step-time term moves.
Per-step terms checked and left out because they cannot close the flat 10%: expert-parallel all-to-all
(24 MoE layers × dispatch + combine of B × 5,120 BF16 activations, 7/8 remote, at NVLink-5's
900 GB/s per direction: 0.03–0.11 ms per step, < 0.3%, and it shrinks with context while the gap
does not); tR exposure (one 3 µs page read per layer, 0.14 ms, 0.3%); decode-attention compute
(< 10% of the KV read time even at peak, hidden by the roofline's max); reading the full L_in +
L_out per sequence (TPOT flat across ratios: +23% at 1:3, -17% at 15:1); prefill compute on the
decode GPUs (serialized: +58% TPOT at 15:1 8K, far past theirs; overlapped under the roofline's
max: +3.5 ms at 15:1 8K and nothing at 1:3).  Uneven KV reads between ranks would add ~1%.  One
non-physical candidate is the unit convention: the authors' simulator lineage (scale-snu
LLMSimulator) sizes capacities in GiB; with a 512 GiB budget and 5 × 512 GiB flash, 28 cells land
within ±15% (TPOT median -4%) — shown in :func:`kyung_sensitivity`, not the default (the paper
writes GB and DESIGN §5 is decimal).
Attention FLOPs count full attention over the context (Llama-4's chunked layers are not
modelled); decode is memory-bound by >10x in every cell, so this does not move a number.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from lachesis.config import (
    GB,
    LLAMA4_MAVERICK,
    MEMORY_KYUNG,
    SECONDS_PER_YEAR,
    Deployment,
    Endurance,
    GPUSpec,
    MemoryConfig,
    ModelSpec,
)

ArrayLike = float | int | np.ndarray
_SCALARS = (int, float, np.integer, np.floating)

__all__ = [
    "weight_storage_bytes_per_gpu", "weight_read_bytes_per_gpu", "decode_flops_per_gpu",
    "StepTime", "decode_step_breakdown", "decode_step_time", "kv_landing_time",
    "hbf_lifetime_years", "Settling", "settled_rate",
    "KyungTableError", "parse_kyung_tables", "KyungSetting", "kyung_steady_state", "kyung_grid",
    "default_kyung_table", "kyung_summary", "kyung_implied_batch", "kyung_sensitivity", "expected_max_poisson",
]


def _out(x: np.ndarray) -> float | np.ndarray:
    """A 0-d result as a Python float, anything else as an array."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------


def _param_split(model: ModelSpec) -> tuple[float, float, float]:
    """(replicated, routed-expert, input-embedding) parameter counts of ``model``."""
    lay = model.layout
    if lay is None:  # ASSUMPTION (no layout), see module docstring
        return model.active_params, model.total_params - model.active_params, 0.0
    return model.total_params - lay.routed_expert_params, lay.routed_expert_params, lay.embedding_params


def weight_storage_bytes_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """HBF bytes one GPU's weights occupy: all replicated parameters + 1/n_gpus of the routed experts."""
    rep, routed, _ = _param_split(model)
    return (rep + routed / deployment.n_gpus) * model.weight_dtype_bytes


def weight_read_bytes_per_gpu(model: ModelSpec, deployment: Deployment,
                              batch: ArrayLike | None = None) -> float | np.ndarray:
    """Weight bytes one decode step reads on one GPU.

    ``batch`` = sequences decoding on each GPU (attention DP, balanced); None = saturated (every
    local expert is hit).  The input embedding is gathered, not streamed, so it is not read.
    """
    rep, routed, emb = _param_split(model)
    local_routed = routed / deployment.n_gpus
    if batch is None:
        hit = np.asarray(1.0)
    else:
        b = np.asarray(batch, dtype=float)
        if np.any(b < 0):
            raise ValueError("batch must be >= 0")
        lay = model.layout
        k_over_e = (lay.experts_per_token / lay.n_experts) if lay is not None else 1.0
        hit = 1.0 - (1.0 - k_over_e) ** (deployment.n_gpus * b)
    return _out((rep - emb + local_routed * hit) * model.weight_dtype_bytes)


def decode_flops_per_gpu(model: ModelSpec, batch: ArrayLike, context_tokens: ArrayLike) -> float | np.ndarray:
    """FLOPs of one decode step on one GPU: 2·active params per token + attention over the context.

    Balanced EP: each GPU computes its batch's share of the node's expert work, so per-GPU FLOPs
    equal its own batch × active params.  Attention: QKᵀ and AV, 2 FLOPs per MAC, over every
    context token read (``context_tokens`` summed over the batch).
    """
    q_heads = model.layout.q_heads if model.layout is not None else model.kv_heads
    dense = 2.0 * model.active_params * np.asarray(batch, dtype=float)
    attn = 4.0 * model.layers * q_heads * model.head_dim * np.asarray(context_tokens, dtype=float)
    return _out(dense + attn)


# ---------------------------------------------------------------------------------------------
# Decode-step roofline
# ---------------------------------------------------------------------------------------------


class StepTime(NamedTuple):
    """Components (s) of one decode step: ``total = max(compute, read) + flush``."""

    compute_s: float | np.ndarray
    read_s: float | np.ndarray
    flush_s: float | np.ndarray
    total_s: float | np.ndarray


def _div(num: np.ndarray, den: float, what: str) -> np.ndarray:
    """num/den, with 0/0 = 0 and a clear error for traffic to a tier that has no bandwidth."""
    if den > 0:
        return num / den
    if np.any(num > 0):
        raise ValueError(f"{what}: bytes routed to a tier with zero bandwidth")
    return np.zeros_like(num)


@lru_cache(maxsize=128)
def _step_consts(model: ModelSpec, deployment: Deployment) -> tuple[float, float, float, float, float, float]:
    """Per-(model, deployment) constants of the scalar fast path (cached: the simulator calls per step)."""
    rep, routed, emb = _param_split(model)
    wb = model.weight_dtype_bytes
    lay = model.layout
    k_over_e = (lay.experts_per_token / lay.n_experts) if lay is not None else 1.0
    log_miss = deployment.n_gpus * math.log1p(-k_over_e) if k_over_e < 1 else -math.inf
    q_heads = lay.q_heads if lay is not None else model.kv_heads
    return ((rep - emb) * wb, routed / deployment.n_gpus * wb, log_miss, 2.0 * model.active_params,
            4.0 * model.layers * q_heads * model.head_dim, float(model.kv_bytes_per_token))


def _step_scalar(b: float, kv_hbm: float, kv_hbf: float, flush: float, memory: MemoryConfig, model: ModelSpec,
                 deployment: Deployment, ctx: float | None, hbm_w: float, w: float | None) -> StepTime:
    """The same roofline as the array path, in plain floats (≈10x cheaper per call)."""
    for name, v in (("batch", b), ("kv_hbm_bytes", kv_hbm), ("kv_hbf_bytes", kv_hbf),
                    ("hbf_flush_bytes", flush), ("hbm_write_bytes", hbm_w)):
        if not (0 <= v < math.inf):
            raise ValueError(f"decode_step_time: {name} must be finite and >= 0")
    rep, local, log_miss, fl_seq, fl_tok, kvtok = _step_consts(model, deployment)
    if w is None:
        hit = (1.0 if b > 0 else 0.0) if log_miss == -math.inf else -math.expm1(b * log_miss)
        w = rep + local * hit
    if ctx is None:
        ctx = (kv_hbm + kv_hbf) / kvtok
    compute = (fl_seq * b + fl_tok * ctx) / deployment.gpu.flops

    def div(num: float, den: float, what: str) -> float:
        if den > 0:
            return num / den
        if num > 0:
            raise ValueError(f"{what}: bytes routed to a tier with zero bandwidth")
        return 0.0

    if memory.daisy_chain:
        read = div(w + kv_hbf + kv_hbm + hbm_w, memory.hbm_read_bw, "daisy-chain links")
    else:
        read = max(div(kv_hbm, memory.hbm_read_bw, "HBM read")
                   + div(hbm_w, memory.hbm_stacks * memory.hbm.write_bw, "HBM write"),
                   div(w + kv_hbf, memory.hbf_read_bw, "HBF read"))
    flush_s = div(flush, memory.hbf_write_bw, "HBF flush")
    return StepTime(compute, read, flush_s, max(compute, read) + flush_s)



def scalar_step_fn(memory: MemoryConfig, model: ModelSpec, deployment: Deployment):
    """``f(batch, kv_hbm, kv_hbf, flush, hbm_write) -> total step s``: :func:`_step_scalar` with its
    constants bound once (the simulator calls it per event); the same float operations in the same order."""
    rep, local, log_miss, fl_seq, fl_tok, kvtok = _step_consts(model, deployment)
    flops = deployment.gpu.flops
    hbm_r, hbm_wbw = memory.hbm_read_bw, memory.hbm_stacks * memory.hbm.write_bw
    hbf_r, hbf_w = memory.hbf_read_bw, memory.hbf_write_bw
    daisy, inf, expm1 = memory.daisy_chain, math.inf, math.expm1
    if not (hbm_r > 0 and hbm_wbw > 0 and hbf_r > 0 and hbf_w > 0):  # zero-bandwidth tiers: the checked path
        return lambda b, h, f, fl, hw: _step_scalar(float(b), float(h), float(f), float(fl), memory, model,
                                                    deployment, None, float(hw), None).total_s

    def step(b: float, kv_hbm: float, kv_hbf: float, flush: float, hbm_w: float) -> float:
        b, kv_hbm, kv_hbf, flush, hbm_w = float(b), float(kv_hbm), float(kv_hbf), float(flush), float(hbm_w)
        if not (0 <= b < inf and 0 <= kv_hbm < inf and 0 <= kv_hbf < inf and 0 <= flush < inf and 0 <= hbm_w < inf):
            return _step_scalar(b, kv_hbm, kv_hbf, flush, memory, model, deployment, None, hbm_w, None).total_s
        hit = (1.0 if b > 0 else 0.0) if log_miss == -inf else -expm1(b * log_miss)
        w = rep + local * hit
        compute = (fl_seq * b + fl_tok * ((kv_hbm + kv_hbf) / kvtok)) / flops
        if daisy:
            read = (w + kv_hbf + kv_hbm + hbm_w) / hbm_r
        else:
            read = max(kv_hbm / hbm_r + hbm_w / hbm_wbw, (w + kv_hbf) / hbf_r)
        return max(compute, read) + flush / hbf_w

    return step

def decode_step_breakdown(batch: ArrayLike, kv_hbm_bytes: ArrayLike, kv_hbf_bytes: ArrayLike,
                          hbf_flush_bytes: ArrayLike, memory: MemoryConfig, model: ModelSpec,
                          deployment: Deployment, context_tokens: ArrayLike | None = None,
                          hbm_write_bytes: ArrayLike = 0.0,
                          weight_read_bytes: ArrayLike | None = None) -> StepTime:
    """The roofline of one decode step on one GPU, by component (see module docstring).

    ``kv_*_bytes``: KV of the decoding sequences read from each tier; ``hbf_flush_bytes``: KV
    bound for HBF this step (flushed once at step end); ``context_tokens``: tokens attended over
    (default: KV bytes read / KV bytes per token); ``weight_read_bytes``: default
    :func:`weight_read_bytes_per_gpu` at this batch.
    """
    if all(x is None or isinstance(x, _SCALARS) for x in (batch, kv_hbm_bytes, kv_hbf_bytes, hbf_flush_bytes,
                                                         hbm_write_bytes, context_tokens, weight_read_bytes)):
        return _step_scalar(float(batch), float(kv_hbm_bytes), float(kv_hbf_bytes), float(hbf_flush_bytes),
                            memory, model, deployment, None if context_tokens is None else float(context_tokens),
                            float(hbm_write_bytes), None if weight_read_bytes is None else float(weight_read_bytes))
    b = np.asarray(batch, dtype=float)
    kv_hbm = np.asarray(kv_hbm_bytes, dtype=float)
    kv_hbf = np.asarray(kv_hbf_bytes, dtype=float)
    flush = np.asarray(hbf_flush_bytes, dtype=float)
    hbm_w = np.asarray(hbm_write_bytes, dtype=float)
    for name, v in (("batch", b), ("kv_hbm_bytes", kv_hbm), ("kv_hbf_bytes", kv_hbf),
                    ("hbf_flush_bytes", flush), ("hbm_write_bytes", hbm_w)):
        if np.any(~np.isfinite(v)) or np.any(v < 0):
            raise ValueError(f"decode_step_time: {name} must be finite and >= 0")
    w = (np.asarray(weight_read_bytes_per_gpu(model, deployment, b)) if weight_read_bytes is None
         else np.asarray(weight_read_bytes, dtype=float))
    ctx = ((kv_hbm + kv_hbf) / model.kv_bytes_per_token if context_tokens is None
           else np.asarray(context_tokens, dtype=float))
    compute = np.asarray(decode_flops_per_gpu(model, b, ctx)) / deployment.gpu.flops
    if memory.daisy_chain:
        # HBF sits behind HBM: every byte of both tiers crosses the same HBM links.
        read = _div(w + kv_hbf + kv_hbm + hbm_w, memory.hbm_read_bw, "daisy-chain links")
    else:
        t_hbm = _div(kv_hbm, memory.hbm_read_bw, "HBM read") + _div(hbm_w, memory.hbm_stacks * memory.hbm.write_bw,
                                                                     "HBM write")
        t_hbf = _div(w + kv_hbf, memory.hbf_read_bw, "HBF read")
        read = np.maximum(t_hbm, t_hbf)
    flush_s = _div(flush, memory.hbf_write_bw, "HBF flush")
    total = np.maximum(compute, read) + flush_s
    return StepTime(_out(compute), _out(read), _out(flush_s), _out(total))


def decode_step_time(batch: ArrayLike, kv_hbm_bytes: ArrayLike, kv_hbf_bytes: ArrayLike,
                     hbf_flush_bytes: ArrayLike, memory: MemoryConfig, model: ModelSpec,
                     deployment: Deployment, context_tokens: ArrayLike | None = None,
                     hbm_write_bytes: ArrayLike = 0.0,
                     weight_read_bytes: ArrayLike | None = None) -> float | np.ndarray:
    """Seconds of one decode step on one GPU: max(compute, bytes read / read bandwidth) + HBF flush."""
    return decode_step_breakdown(batch, kv_hbm_bytes, kv_hbf_bytes, hbf_flush_bytes, memory, model, deployment,
                                 context_tokens, hbm_write_bytes, weight_read_bytes).total_s


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
        return float(max(t1, t2))

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


# ---------------------------------------------------------------------------------------------
# Validation against Kyung et al. [23], Fig. 4 (Llama-4-Maverick)
# ---------------------------------------------------------------------------------------------


class KyungTableError(ValueError):
    """A malformed validation table: names the file, the line and the field."""

    def __init__(self, source: str | Path, line: int, field_: str, problem: str):
        super().__init__(f"{source}:{line}: field {field_!r}: {problem}")
        self.source, self.line, self.field, self.problem = str(source), line, field_, problem


_HEAD = re.compile(r"^###\s+(?P<model>.+?)\s+[—-]+\s+CV\s*=\s*(?P<cv>[0-9.]+)\s*$")
_CELL = re.compile(r"^(?P<life>[0-9]+(?:\.[0-9]+)?)\s*\(\s*(?P<tpot>[0-9]+(?:\.[0-9]+)?)\s*\)$")
_RATIO = re.compile(r"^(?P<a>[0-9]+):(?P<b>[0-9]+)$")
_CTX = re.compile(r"^(?P<k>[0-9]+)K$")


def parse_kyung_tables(path: str | Path) -> pd.DataFrame:
    """Parse the transcribed Fig. 4 tables: one row per cell (model, cv, ratio, context, lifetime, TPOT).

    Expects, under each ``### <model> — CV = <x>`` heading, a table ``| L_in:L_out | 8K | ... |``
    whose cells read ``<years> (<TPOT ms>)``.  ``8K`` = 8 × 1024 tokens.  Raises
    :class:`KyungTableError` naming the file, line and field on anything else.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    rows: list[dict] = []
    i, n_tables = 0, 0
    while i < len(lines):
        m = _HEAD.match(lines[i].strip())
        if not m:
            i += 1
            continue
        model, cv = m["model"].strip(), float(m["cv"])
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not lines[j].strip().startswith("|"):
            raise KyungTableError(path, j + 1, "table", f"no table under heading {lines[i].strip()!r}")
        header = [h.strip() for h in lines[j].strip().strip("|").split("|")]
        if header[0] != "L_in:L_out" or len(header) < 2:
            raise KyungTableError(path, j + 1, "header", f"expected '| L_in:L_out | 8K | ...', got {lines[j]!r}")
        ctxs = []
        for h in header[1:]:
            mc = _CTX.match(h)
            if not mc:
                raise KyungTableError(path, j + 1, "header", f"context column {h!r} is not like '8K'")
            ctxs.append(int(mc["k"]) * 1024)
        if j + 1 >= len(lines) or not re.match(r"^\|(\s*:?-+:?\s*\|)+$", lines[j + 1].strip()):
            raise KyungTableError(path, j + 2, "separator", "expected a '|---|' separator row")
        k = j + 2
        n_rows = 0
        while k < len(lines) and lines[k].strip().startswith("|"):
            cells = [c.strip() for c in lines[k].strip().strip("|").split("|")]
            if len(cells) != len(header):
                raise KyungTableError(path, k + 1, "row", f"{len(cells)} cells, header has {len(header)}")
            mr = _RATIO.match(cells[0])
            if not mr or int(mr["a"]) <= 0 or int(mr["b"]) <= 0:
                raise KyungTableError(path, k + 1, "L_in:L_out", f"{cells[0]!r} is not a ratio like '1:3'")
            a, b = int(mr["a"]), int(mr["b"])
            for ctx, h, cell in zip(ctxs, header[1:], cells[1:]):
                mv = _CELL.match(cell)
                if not mv:
                    raise KyungTableError(path, k + 1, h, f"cell {cell!r} is not '<years> (<TPOT ms>)'")
                rows.append(dict(model=model, cv=cv, ratio=cells[0], in_share=a / (a + b), context=h,
                                 context_tokens=ctx, lifetime_years=float(mv["life"]), tpot_ms=float(mv["tpot"]),
                                 line=k + 1))
            n_rows += 1
            k += 1
        if n_rows == 0:
            raise KyungTableError(path, j + 3, "row", "table has no data rows")
        n_tables += 1
        i = k
    if n_tables == 0:
        raise KyungTableError(path, 1, "heading", "no '### <model> — CV = <x>' table found")
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class KyungSetting:
    """Kyung et al.'s [23] Fig. 4 setting, per GPU of one 8-GPU node.

    ASSUMPTION (capacity, ``capacity="budget"``): the batch is as many sequences as a per-GPU
    weights+KV budget of ``budget_bytes`` = 512 GB (2 × the 256 GB HBM) holds at the workload's
    context length, with the weights inside the budget.  Reason: the validation note's literal
    reading (the whole 5 × 512 GB flash minus weights, ``capacity="flash"``) gives ~6× the
    batch, TPOTs of ~250 ms and lifetimes ~6× too short; Kyung's Fig. 5 names 512 GB as the
    "weights + reserved-KV capacity" of the HBF bar whose TPOT (51 ms, Maverick 8K 1:3) equals
    Fig. 4's, and the transcribing simulator's batch at that point (240/GPU) is this budget's.
    The lifetime still wears the whole flash minus the weights (``reserved_bytes``).
    Lengths (``dispersion="context_beta"``, Kyung's Fig. 4 caption, "low dispersion (CV=0.1,
    κ=90)" and "high dispersion (CV=0.3, κ=30)" as transcribed in jeongminl/HBF-LLMSimulator
    ``Fig4_Fig5_extracted_numbers.md``): a request's context C has the cell's mean and coefficient
    of variation CV, and its output share r = L_out/C is Beta-distributed with mean L_out/(L_in +
    L_out) and concentration κ (``ratio_kappa``, keyed by CV), independent of C; L_in = (1-r)C.
    Only first and second moments enter (E[C²] = mean²(1 + CV²), E[r²] = μ² + μ(1-μ)/(κ+1)), so
    the shape of C's distribution does not; we take CV as the realized one (the transcribing
    repository draws a normal truncated at ±2σ, which shrinks E[C²] and lowers CV-0.3 TPOTs by
    ~1%; its sampler notes that the paper reports ~+9% mean L_out in flight at CV 0.3, which is
    what 1 + CV² gives).  In-flight sequences are
    size-biased by L_out (continuous batching) at a uniform decode age, so CV raises the context
    read per step through E[C²]/E[C].  ``dispersion="independent"`` is the earlier reading (L_in
    and L_out independent, each with the cell's CV; κ unused), kept for the sensitivity table.
    ``8K`` = 8192 tokens.
    ASSUMPTION (landing): admitted prompts' KV lands in HBF in the same per-step flush as the
    appended tokens (HBF's write port is the only way into flash), so it is in the step time.
    ASSUMPTION (expert-parallel barrier, ``ep_barrier``): the eight GPUs meet at every MoE layer's
    all-to-all, so a step lasts as long as its slowest rank.  Each rank admits a new prompt when
    one of its sequences completes; completions per rank per step are Poisson with Little's-law
    mean λ = B / E[L_out], independent across ranks, and the rank that admits lands its whole
    prompt (E[L_in] tokens) while the others wait.  So the landing term of the step is
    E[max of n_gpus Poisson(λ)] × E[L_in] × KV bytes/token at HBF write bandwidth, not the
    per-rank mean λ × E[L_in] × KV; the bytes written (and so the wear) keep the mean.  No free
    parameter.  Reason: physical (expert parallelism synchronizes the node), and it is how the
    authors' simulator lineage charges a prompt's KV write (to the admitting device, before the
    layers whose all-to-all then syncs the devices).  Variation of L_in between prompts and of
    the KV read between ranks is left out (both would lengthen the slowest rank a little more).
    ``ep_barrier=False`` averages the landing over the ranks (the earlier reading, in
    :func:`kyung_sensitivity`).  Note the decode-node simulator names a different landing
    assumption (a landing delays only its own request; lachesis.simulator): with landing kept out
    of the step here, 17 of 30 cells fall within ±15% (the "landing overlapped" sensitivity row).
    """

    model: ModelSpec = LLAMA4_MAVERICK
    memory: MemoryConfig = MEMORY_KYUNG
    deployment: Deployment = field(default_factory=lambda: Deployment(n_gpus=8, gpu=GPUSpec("B200-class", 2250e12)))
    endurance: Endurance = field(default_factory=Endurance)
    capacity: Literal["budget", "flash"] = "budget"
    budget_bytes: float = 512 * GB
    landing_in_step: bool = True
    ep_barrier: bool = True
    dispersion: Literal["context_beta", "independent"] = "context_beta"
    #: (CV, κ) pairs of Kyung's Fig. 4 tables; CV 0 means deterministic lengths (κ = ∞).
    ratio_kappa: tuple[tuple[float, float], ...] = ((0.1, 90.0), (0.3, 30.0))

    def kappa_for(self, cv: ArrayLike) -> np.ndarray:
        """Beta concentration κ of the output share for each CV (∞ at CV 0); unknown CVs raise."""
        cv_ = np.atleast_1d(np.asarray(cv, dtype=float))
        out = np.full(cv_.shape, np.nan)
        out[cv_ == 0] = np.inf
        for c, k in self.ratio_kappa:
            out[np.isclose(cv_, c)] = k
        if np.any(np.isnan(out)):
            bad = sorted(set(cv_[np.isnan(out)].tolist()))
            raise ValueError(f"KyungSetting: no ratio concentration κ for CV {bad}; known {self.ratio_kappa}")
        return out


def kyung_steady_state(context_tokens: ArrayLike, in_share: ArrayLike, cv: ArrayLike,
                       setting: KyungSetting = KyungSetting()) -> pd.DataFrame:
    """Steady-state saturated continuous batching of stateless requests: TPOT and HBF lifetime per cell.

    Vectorized over cells.  Per GPU: batch B = floor(KV capacity / (context × KV bytes/token));
    each step reads the weights and B × E[in-flight context] tokens of KV from HBF (size-biased
    by L_out under the setting's dispersion model), appends one token per sequence and lands
    B/E[L_out] admitted prompts of E[L_in] tokens (Little's law: admissions = completions).  Step time is :func:`decode_step_time`; the lifetime is
    :func:`hbf_lifetime_years` with the weights' flash reserved.
    """
    s = setting
    ctx, share, cv_ = np.broadcast_arrays(np.atleast_1d(np.asarray(context_tokens, dtype=float)),
                                          np.atleast_1d(np.asarray(in_share, dtype=float)),
                                          np.atleast_1d(np.asarray(cv, dtype=float)))
    if np.any(ctx <= 0) or np.any((share <= 0) | (share >= 1)) or np.any(cv_ < 0):
        raise ValueError("kyung_steady_state: need context > 0, 0 < in_share < 1, cv >= 0")
    kv_tok = s.model.kv_bytes_per_token
    w_store = weight_storage_bytes_per_gpu(s.model, s.deployment)
    cap = (s.budget_bytes if s.capacity == "budget" else s.memory.hbf_bytes) - w_store
    if cap <= 0:
        raise ValueError(f"kyung_steady_state: no KV capacity left after {w_store / GB:.1f} GB of weights")
    batch = np.floor(cap / (ctx * kv_tok))
    l_in, l_out = ctx * share, ctx * (1 - share)
    # size-biased by L_out, uniform decode age j in [0, L_out): context read = E[L_out (L_in + (L_out-1)/2)] / E[L_out]
    if s.dispersion == "independent":
        e_ctx = l_in + (l_out * (1 + cv_**2) - 1) / 2
    elif s.dispersion == "context_beta":
        mu = 1 - share  # mean output share r; L_out = rC, L_in = (1-r)C, r independent of C
        kappa = s.kappa_for(cv_)
        e_r2 = mu**2 + mu * (1 - mu) / (kappa + 1)
        e_ctx = ctx * (1 + cv_**2) * (mu - e_r2 / 2) / mu - 0.5
    else:
        raise ValueError(f"kyung_steady_state: unknown dispersion {s.dispersion!r}")
    kv_read = batch * e_ctx * kv_tok
    append = batch * kv_tok
    admissions = batch / l_out  # per rank per step (Little's law)
    landed = admissions * l_in * kv_tok  # mean prompt bytes landed per rank per step: what wears
    slowest = expected_max_poisson(admissions, s.deployment.n_gpus) if s.ep_barrier else admissions
    flush = append + slowest * l_in * kv_tok if s.landing_in_step else append
    bd = decode_step_breakdown(batch, 0.0, kv_read, flush, s.memory, s.model, s.deployment,
                               context_tokens=batch * e_ctx)
    step = np.asarray(bd.total_s)
    rate = (append + landed) / step
    life = np.asarray(hbf_lifetime_years(s.memory, rate, s.endurance, reserved_bytes=w_store))
    return pd.DataFrame(dict(context_tokens=ctx, in_share=share, cv=cv_, batch_per_gpu=batch,
                             inflight_context=e_ctx, kv_read_gb=kv_read / GB, flush_gb=flush / GB,
                             compute_ms=np.broadcast_to(bd.compute_s, ctx.shape) * 1e3,
                             read_ms=np.broadcast_to(bd.read_s, ctx.shape) * 1e3,
                             flush_ms=np.broadcast_to(bd.flush_s, ctx.shape) * 1e3,
                             tpot_ms=step * 1e3, write_gb_per_s=rate / GB, lifetime_years=life))


def expected_max_poisson(lam: ArrayLike, n: int) -> np.ndarray:
    """E[max of ``n`` independent Poisson(``lam``) counts], elementwise: Σ_a≥0 (1 - F(a)^n)."""
    lam = np.atleast_1d(np.asarray(lam, dtype=float))
    if np.any(lam < 0) or n < 1:
        raise ValueError("expected_max_poisson: need lam >= 0 and n >= 1")
    top = int(stats.poisson.ppf(1 - 1e-15, max(float(lam.max()), 1e-12))) + 2
    a = np.arange(top)[:, None]
    return (1.0 - stats.poisson.cdf(a, lam[None, :]) ** n).sum(axis=0)


def kyung_grid(paper: pd.DataFrame, setting: KyungSetting = KyungSetting()) -> pd.DataFrame:
    """Every cell of the parsed Fig. 4 tables beside ours, with relative errors (ours/theirs - 1)."""
    ours = kyung_steady_state(paper["context_tokens"].to_numpy(), paper["in_share"].to_numpy(),
                              paper["cv"].to_numpy(), setting)
    out = paper[["model", "cv", "ratio", "context"]].reset_index(drop=True).copy()
    out["life_ours"] = ours["lifetime_years"].to_numpy()
    out["life_theirs"] = paper["lifetime_years"].to_numpy()
    out["life_err"] = out["life_ours"] / out["life_theirs"] - 1
    out["tpot_ours_ms"] = ours["tpot_ms"].to_numpy()
    out["tpot_theirs_ms"] = paper["tpot_ms"].to_numpy()
    out["tpot_err"] = out["tpot_ours_ms"] / out["tpot_theirs_ms"] - 1
    out["batch_per_gpu"] = ours["batch_per_gpu"].to_numpy()
    return out


KYUNG_TABLE_REL = "data/validation/kyung2026_fig4_maverick.md"


def default_kyung_table() -> Path:
    """The shared validation table: ``$LACHESIS_SHARED/<rel>`` or ``<repo>/../shared/<rel>``."""
    root = os.environ.get("LACHESIS_SHARED")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "shared"
    return base / KYUNG_TABLE_REL


def kyung_summary(grid: pd.DataFrame, tol: float = 0.15) -> dict[str, float]:
    """Headline statistics of a :func:`kyung_grid`: cells within ``tol``, error medians and ranges."""
    le, te = grid["life_err"], grid["tpot_err"]
    return dict(cells=float(len(grid)), within_tol=float((le.abs() <= tol).sum()), tol=tol,
                life_err_median=float(le.median()), life_err_min=float(le.min()), life_err_max=float(le.max()),
                tpot_err_median=float(te.median()), tpot_err_min=float(te.min()), tpot_err_max=float(te.max()))


def kyung_implied_batch(paper: pd.DataFrame, setting: KyungSetting = KyungSetting()) -> np.ndarray:
    """Per-GPU batch implied by THEIR lifetime and TPOT under our byte accounting (a diagnostic).

    Inverts :func:`hbf_lifetime_years` for their write rate, × their TPOT = bytes written per step,
    ÷ (KV/token × (1 + L_in/L_out)) = sequences.  Equal to our batch ⇔ bytes per step agree, so
    any lifetime miss comes from the step time.
    """
    s = setting
    w = weight_storage_bytes_per_gpu(s.model, s.deployment)
    one = np.asarray(hbf_lifetime_years(s.memory, 1.0, s.endurance, reserved_bytes=w))  # years at 1 B/s
    rate = one / paper["lifetime_years"].to_numpy(dtype=float)
    share = paper["in_share"].to_numpy(dtype=float)
    per_seq = s.model.kv_bytes_per_token * (1 + share / (1 - share))
    return rate * paper["tpot_ms"].to_numpy(dtype=float) / 1e3 / per_seq


def kyung_sensitivity(paper: pd.DataFrame, tol: float = 0.15) -> pd.DataFrame:
    """:func:`kyung_summary` under each named alternative of :class:`KyungSetting` (one row per variant)."""
    gib = 1024**3  # the authors' simulator (scale-snu LLMSimulator) sizes every capacity preset in GiB
    mem_gib = replace(MEMORY_KYUNG, hbf=replace(MEMORY_KYUNG.hbf, capacity_bytes=512 * gib))
    variants = {
        "default (512 GB budget, landing in the step flush on the slowest rank, context CV + Beta(κ) share)":
            KyungSetting(),
        "landing averaged over the ranks (no expert-parallel barrier)": KyungSetting(ep_barrier=False),
        "lengths: L_in, L_out independent, each with the CV (κ unused)": KyungSetting(dispersion="independent"),
        "landing overlapped (not in the step time)": KyungSetting(landing_in_step=False),
        "literal: whole flash minus weights holds the batch": KyungSetting(capacity="flash"),
        "units: budget and flash in GiB (512 GiB, 5 x 512 GiB)": KyungSetting(memory=mem_gib, budget_bytes=512 * gib),
    }
    rows = [dict(variant=k, **kyung_summary(kyung_grid(paper, v), tol)) for k, v in variants.items()]
    return pd.DataFrame(rows)
