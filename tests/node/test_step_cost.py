"""The decode step priced operator by operator, by hand: weights read, every operator, read pricing, the scalar and
array paths, bad input (lachesis.node.step_cost)."""

from dataclasses import replace

import numpy as np
import pytest
from model_configs import DEEPSEEK_V3

from lachesis import config as C
from lachesis.node import step_cost

MAV, QWEN = C.LLAMA4_MAVERICK, C.QWEN3_235B
DEP = C.Deployment()
M17, DAISY = C.memory_config("1/7"), C.memory_config("8/8*")

MAV_ROUTED, MAV_TOTAL = 386_547_056_640, 400_711_848_960  # tests/test_models.py derives both by hand
MAV_EMB = 202048 * 5120

def test_weight_read_saturated_skips_embedding_and_small_batch_hits_fewer_experts() -> None:
    rep = MAV_TOTAL - MAV_ROUTED - MAV_EMB  # the input table is gathered, not streamed
    full = (rep + MAV_ROUTED / 8) * 2
    assert step_cost.weight_read_bytes_per_gpu(MAV, DEP) == pytest.approx(full)
    # batch 1 per GPU -> 8 tokens on the node, top-1 of 128: P(local expert read) = 1 - (127/128)^8
    p = 1 - (127 / 128) ** 8
    got = step_cost.weight_read_bytes_per_gpu(MAV, DEP, batch=np.array([1, 10_000]))
    assert isinstance(got, np.ndarray)
    assert got[0] == pytest.approx((rep + MAV_ROUTED / 8 * p) * 2) and got[1] == pytest.approx(full)
    assert step_cost.weight_read_bytes_per_gpu(MAV, DEP, batch=0) == pytest.approx(rep * 2)
    assert step_cost.local_experts_read(MAV, DEP, 1) == pytest.approx(16 * p)


# --- decode step: operators by hand ----------------------------------------------------------

#: A small MoE model and memory with round numbers, priced by hand below.
TOY = C.ModelSpec("toy", layers=2, hidden=1024, q_heads=8, kv_heads=2, head_dim=128, vocab=1000, dense_ffn=4096,
                  moe_layers=1, n_experts=16, experts_per_token=2, expert_ffn=2048, n_shared_experts=1,
                  shared_ffn=2048)
TOY_MEM = C.MemoryConfig("toy 1/1", 1, 1, hbm=C.StackSpec("h", 1e12, 1e12, 1e12), hbf=C.StackSpec("f", 1e12, 1e12, 1e9))
TOY_DEP = C.Deployment(n_gpus=4, gpu=C.GPUSpec("g", flops=1e15, link_bw=1e11, link_latency_s=1e-6))


def test_operators_priced_by_hand() -> None:
    b, kvh, kvf, fl, hw = 10.0, 1e9, 3e9, 1e6, 1e5
    bd = step_cost.decode_step_breakdown(b, kvh, kvf, fl, TOY_MEM, TOY, TOY_DEP, hbm_write_bytes=hw).iloc[0]
    agg = 2e12  # aggregate read bandwidth of the two stacks (default pricing)
    # QKV projection: 1024 x (8 + 2 x 2) x 128 per layer, 2 layers; activations 10 x (1024 + 1536) per layer
    w = 1024 * 1536
    assert bd.attention_in_proj == pytest.approx(max(2 * w * 10 * 2 / 1e15, (w * 2 * 2 + 10 * 2560 * 2 * 2) / agg))
    # attention core: KV 2 layers x 2 heads x (128 + 128) x 2 B = 2048 B/token -> 4e9 / 2048 context tokens;
    # FLOPs per context token per layer 2 x 8 x 256 (QK^T, AV) + 7 x 8 (softmax); query + output 8 x 256 per token
    ctx = 4e9 / 2048
    flops = 2 * (2 * 8 * 256 + 7 * 8) * ctx
    mem = (kvh + kvf + 10 * 2 * 8 * 256 * 2) / agg + hw / 1e12  # HBM-bound KV appended at HBM write bandwidth
    assert bd.attention == pytest.approx(max(flops / 1e15, mem))
    # routed experts: 4 local of 16; P(read) = 1 - (1 - 2/16)^(4 x 10); 20 token-expert pairs
    local = 4 * (1 - (14 / 16) ** 40)
    per_expert = 3 * 1024 * 2048
    # activations per pair: 1024 in + 2 x 2048 out (gate, up), 2048 in + 1024 out (down)
    routed_bytes = local * per_expert * 2 + 20 * (1024 + 4096 + 2048 + 1024) * 2
    assert bd.routed_experts == pytest.approx(max(2 * per_expert * 20 / 1e15, routed_bytes / agg))
    # dense FFN layer (1 of 2): gate+up 1024 -> 2 x 4096, down 4096 -> 1024
    assert bd.dense_ffn == pytest.approx(max(2 * 3 * 1024 * 4096 * 10 / 1e15,
                                             (3 * 1024 * 4096 * 2 + 10 * (1024 + 8192 + 4096 + 1024) * 2) / agg))
    # expert-parallel exchange: dispatch + combine of 10 x 2 hidden vectors, 3/4 of them to other GPUs
    assert bd.expert_exchange == pytest.approx(2 * (1e-6 + 10 * 2 * 1024 * 2 * 0.75 / 1e11))
    assert bd.flush == pytest.approx(fl / 1e9)  # end-of-step flush at HBF write bandwidth (§5.1)
    ops = bd.drop(["flush", "total"])
    assert bd.total == pytest.approx(ops.sum() + bd.flush)
    total = step_cost.decode_step_time(b, kvh, kvf, fl, TOY_MEM, TOY, TOY_DEP, hbm_write_bytes=hw)
    assert total == pytest.approx(bd.total)


def test_read_pricing_per_tier_and_daisy_chain() -> None:
    b, kvh, kvf = 10.0, 1e9, 3e9
    per_tier = replace(TOY_MEM, read_pricing="per_tier")
    bd = step_cost.decode_step_breakdown(b, kvh, kvf, 0.0, per_tier, TOY, TOY_DEP).iloc[0]
    # each tier over its own stack, in parallel; activations in HBM
    assert bd.attention == pytest.approx(max((kvh + 10 * 2 * 8 * 256 * 2) / 1e12, kvf / 1e12))
    w = 1024 * 1536
    assert bd.attention_in_proj == pytest.approx(max(w * 2 * 2 / 1e12, 10 * 2560 * 2 * 2 / 1e12))
    # LLMSimulator's unfused decode attention writes each score and reads it back: 2 x 8 heads x 2 B per
    # context token per layer, in the HBM with the other activations
    unfused = replace(TOY_DEP, attention_kernel="unfused")
    bd = step_cost.decode_step_breakdown(b, kvh, kvf, 0.0, per_tier, TOY, unfused).iloc[0]
    assert bd.attention == pytest.approx(max((kvh + 10 * 2 * 8 * 256 * 2 + 2 * 2 * 8 * 2 * 4e9 / 2048) / 1e12,
                                             kvf / 1e12))
    daisy = replace(TOY_MEM, daisy_chain=True)
    bd = step_cost.decode_step_breakdown(b, kvh, kvf, 0.0, daisy, TOY, TOY_DEP).iloc[0]
    assert bd.attention == pytest.approx((kvh + kvf + 10 * 2 * 8 * 256 * 2) / 1e12)  # everything over the HBM links


def test_aggregate_pricing_makes_reads_placement_blind() -> None:
    """§5.2: the tiers share one read bandwidth, so moving KV between them does not change the step."""
    for mem in C.MEMORY_CONFIGS:
        a = step_cost.decode_step_time(200, 30e9, 700e9, 0.0, mem, MAV, DEP)
        assert step_cost.decode_step_time(200, 700e9, 30e9, 0.0, mem, MAV, DEP) == pytest.approx(a)
    m17 = replace(M17, read_pricing="per_tier")
    assert step_cost.decode_step_time(200, 30e9, 700e9, 0, m17, MAV, DEP) != pytest.approx(
        step_cost.decode_step_time(200, 700e9, 30e9, 0, m17, MAV, DEP))


def test_operator_max_does_not_hide_compute_behind_reads() -> None:
    """Sum of per-operator maxima >= the whole-step max; strictly when operators are bound differently.

    Maverick on 1/7 at 240 sequences: the dense FFN layers are compute-bound (240 FLOPs/B > 2250/12.8),
    attention is bound by its KV reads.
    """
    args = (240, 0.0, 300e9, 0.0)
    step = step_cost.decode_step_time(*args, M17, MAV, DEP)
    fast = replace(DEP, gpu=replace(DEP.gpu, flops=1e30, link_latency_s=0.0, link_bw=1e30))
    memory_only = step_cost.decode_step_time(*args, M17, MAV, fast)
    wide = replace(M17, hbm=replace(M17.hbm, read_bw=1e30), hbf=replace(M17.hbf, read_bw=1e30))
    compute_only = step_cost.decode_step_time(*args, wide, MAV, DEP)
    assert step > max(memory_only, compute_only) * 1.01
    bd = step_cost.decode_step_breakdown(*args, M17, MAV, DEP).iloc[0]
    assert bd.dense_ffn == pytest.approx(2 * 24 * 3 * 5120 * 16384 * 240 / 2250e12)  # compute-bound


def test_mla_attention_can_be_compute_bound() -> None:
    """Absorbed MLA does 61 x (2 x 128 x (2 x 512 + 64) + 7 x 128) FLOPs per 70,272 B of KV (~243 FLOPs/B), more
    than 1/7's 2250e12 / 12.8e12: its attention is priced by compute, where GQA's (~5 FLOPs/B) is priced by reads."""
    ds = C.model_from_hf_config(DEEPSEEK_V3, "DeepSeek-V3", weight_dtype_bytes=2)
    kv = 500e9
    bd = step_cost.decode_step_breakdown(100, 0.0, kv, 0.0, M17, ds, DEP).iloc[0]
    flops = 61 * (2 * 128 * (2 * 512 + 64) + 7 * 128) * kv / 70_272
    assert bd.attention == pytest.approx(flops / 2250e12)
    assert flops / 2250e12 > kv / 12.8e12
    gqa = step_cost.decode_step_breakdown(100, 0.0, kv, 0.0, M17, MAV, DEP).iloc[0]
    assert gqa.attention == pytest.approx((kv + 100 * 48 * 40 * 256 * 2) / 12.8e12)


def test_scalar_fast_path_equals_array_path() -> None:
    rng = np.random.default_rng(0)
    mems = (list(C.MEMORY_CONFIGS) + [replace(m, read_pricing="per_tier") for m in C.MEMORY_CONFIGS[:4]]
            + [C.MEMORY_KYUNG])
    for mem in mems:
        for model in (MAV, QWEN, TOY):
            b, kh, kf, fl, hw = (rng.integers(0, 500, 40).astype(float), rng.uniform(0, 1e11, 40),
                                 rng.uniform(0, 1e12, 40), rng.uniform(0, 1e9, 40), rng.uniform(0, 1e8, 40))
            arr = step_cost.decode_step_time(b, kh, kf, fl, mem, model, DEP, hbm_write_bytes=hw)
            ref = step_cost.decode_step_breakdown(b, kh, kf, fl, mem, model, DEP,
                                                  hbm_write_bytes=hw)["total"].to_numpy()
            f = step_cost.scalar_step_fn(mem, model, DEP)
            one = [f(float(x), float(y), float(z), float(w), float(v)) for x, y, z, w, v in zip(b, kh, kf, fl, hw)]
            np.testing.assert_allclose(one, ref, rtol=1e-12)
            np.testing.assert_allclose(arr, ref, rtol=1e-12)


def test_step_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="kv_hbf_bytes"):
        step_cost.decode_step_time(1, 0, -1.0, 0, M17, MAV, DEP)
    with pytest.raises(ValueError, match="kv_hbf_bytes"):
        step_cost.decode_step_time(np.ones(2), 0, np.array([1.0, np.nan]), 0, M17, MAV, DEP)
    with pytest.raises(ValueError, match="batch"):
        step_cost.scalar_step_fn(M17, MAV, DEP)(float("inf"), 0, 0, 0, 0)
    no_hbm = C.MemoryConfig("0/8", 0, 8)
    with pytest.raises(ValueError, match="zero bandwidth"):
        step_cost.decode_step_time(1, 1e9, 0, 0, no_hbm, MAV, DEP)
    with pytest.raises(ValueError, match="zero bandwidth"):
        step_cost.scalar_step_fn(no_hbm, MAV, DEP)(1, 0, 0, 0, 5.0)
    assert step_cost.decode_step_time(1, 0, 1e9, 0, no_hbm, MAV, DEP) > 0  # HBF-only KV is fine


# --- landing -----------------------------------------------------------------------------------
