"""Landing (§5.1): the seconds a prefilled request's KV takes to land in HBM and HBF at each tier's write
bandwidth, both tiers in parallel; the node stalls its decode for it (docs/design.md §5, "Decode node")."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from lachesis.config import MemoryConfig, ModelSpec
from lachesis.node.quantity import SCALARS, ArrayLike, as_result, check_nonnegative, per_bandwidth


def kv_landing_time(tokens: ArrayLike, tier: Literal["hbm", "hbf"], memory: MemoryConfig,
                    model: ModelSpec) -> float | np.ndarray:
    """Seconds for prefilled KV of ``tokens`` to land in ``tier`` at that tier's write bandwidth (per GPU)."""
    if tier not in ("hbm", "hbf"):
        raise ValueError(f"kv_landing_time: unknown tier {tier!r} (use 'hbm' or 'hbf')")
    bw = memory.hbf_write_bw if tier == "hbf" else memory.hbm_stacks * memory.hbm.write_bw
    if isinstance(tokens, SCALARS):  # fast path for the simulator's per-request calls
        if not (0 <= tokens < math.inf):
            check_nonnegative("kv_landing_time", "tokens", tokens)
        if bw > 0:
            return tokens * model.kv_bytes_per_token / bw
        return float(per_bandwidth(np.asarray(tokens * model.kv_bytes_per_token, dtype=float), bw, f"{tier} landing"))
    n = np.asarray(tokens, dtype=float)
    check_nonnegative("kv_landing_time", "tokens", n)
    return as_result(per_bandwidth(n * model.kv_bytes_per_token, bw, f"{tier} landing"))


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
