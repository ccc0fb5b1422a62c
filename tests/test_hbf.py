"""HBF endurance and latency model: hand-computed answers for every function (lachesis.hbf)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats
import pytest

from lachesis import config as C
from lachesis import hbf

MAV, QWEN = C.LLAMA4_MAVERICK, C.QWEN3_235B
DEP = C.Deployment()
M17, DAISY = C.memory_config("1/7"), C.memory_config("8/8*")


# --- weights -----------------------------------------------------------------------------------

def test_weight_storage_per_gpu_replicated_plus_one_eighth_of_experts() -> None:
    # Maverick: 400.7e9 - 386.547e9 = 14.153e9 replicated; 386.547e9 / 8 = 48.318375e9 local experts; BF16
    assert hbf.weight_storage_bytes_per_gpu(MAV, DEP) == pytest.approx((14.153e9 + 48.318375e9) * 2)
    # Qwen3: 235.1e9 - 227.096e9 = 8.004e9 replicated; 227.096e9 / 8 = 28.387e9
    assert hbf.weight_storage_bytes_per_gpu(QWEN, DEP) == pytest.approx((8.004e9 + 28.387e9) * 2)


def test_weight_read_saturated_skips_embedding_and_small_batch_hits_fewer_experts() -> None:
    full = (14.153e9 - 1.0345e9 + 48.318375e9) * 2
    assert hbf.weight_read_bytes_per_gpu(MAV, DEP) == pytest.approx(full)
    # batch 1 per GPU -> 8 tokens on the node, top-1 of 128: P(local expert hit) = 1 - (127/128)^8
    p = 1 - (127 / 128) ** 8
    one = (14.153e9 - 1.0345e9 + 48.318375e9 * p) * 2
    got = hbf.weight_read_bytes_per_gpu(MAV, DEP, batch=np.array([1, 10_000]))
    assert isinstance(got, np.ndarray)
    assert got[0] == pytest.approx(one) and got[1] == pytest.approx(full)
    assert hbf.weight_read_bytes_per_gpu(MAV, DEP, batch=0) == pytest.approx((14.153e9 - 1.0345e9) * 2)


def test_model_without_layout_uses_named_fallback() -> None:
    m = C.ModelSpec("toy", 2, 1, 64, total_params=10e9, active_params=2e9)
    # replicated = active (2e9), routed = total - active (8e9) over 8 GPUs -> 3e9 params, BF16
    assert hbf.weight_storage_bytes_per_gpu(m, DEP) == pytest.approx(6e9)


# --- decode step -------------------------------------------------------------------------------

def _known_step(memory: C.MemoryConfig) -> float:
    return hbf.decode_step_time(batch=100, kv_hbm_bytes=80e9, kv_hbf_bytes=1008e9, hbf_flush_bytes=1.12e9,
                                memory=memory, model=MAV, deployment=DEP, weight_read_bytes=112e9)


def test_step_on_1_7_reads_tiers_in_parallel_then_flushes() -> None:
    # HBF: (112 + 1008) GB / (7 x 1.6 TB/s) = 0.100 s; HBM: 80 GB / 1.6 TB/s = 0.050 s -> max 0.100 s
    # compute ~ (100 x 2 x 17.2e9 + 4 x 48 x 40 x 128 x 1088e9/196608) / 2250e12 = 3.9 ms (not binding)
    # flush: 1.12 GB / (7 x 16 GB/s) = 0.010 s   => 0.110 s
    assert _known_step(M17) == pytest.approx(0.110)
    bd = hbf.decode_step_breakdown(100, 80e9, 1008e9, 1.12e9, M17, MAV, DEP, weight_read_bytes=112e9)
    assert bd.read_s == pytest.approx(0.100) and bd.flush_s == pytest.approx(0.010)
    ctx = 1088e9 / 196_608
    assert bd.compute_s == pytest.approx((100 * 2 * 17.2e9 + 4 * 48 * 40 * 128 * ctx) / 2250e12)


def test_daisy_chain_bandwidth_does_not_add_up() -> None:
    # 8/8*: all (112 + 1008 + 80) GB cross the 8 x 1.6 TB/s HBM links: 0.09375 s;
    # flush 1.12 GB / (8 x 16 GB/s) = 8.75 ms => 0.1025 s
    assert _known_step(DAISY) == pytest.approx(0.09375 + 0.00875)
    # a co-located 8/8 would read the two tiers in parallel: max(0.05/1.6*1.6 ..) -> 1120/12.8 TB/s
    colo = replace(DAISY, daisy_chain=False)
    assert _known_step(colo) == pytest.approx(1120e9 / 12.8e12 + 0.00875)


def test_compute_bound_step_and_vectorized_batches() -> None:
    t = hbf.decode_step_time(batch=np.array([1e5, 1.0]), kv_hbm_bytes=0.0, kv_hbf_bytes=0.0, hbf_flush_bytes=0.0,
                             memory=M17, model=MAV, deployment=DEP, weight_read_bytes=0.0)
    assert isinstance(t, np.ndarray) and t.shape == (2,)
    assert t[0] == pytest.approx(1e5 * 2 * 17.2e9 / 2250e12)  # 1.5289 s of FLOPs, no bytes
    # default weight read: a memory-bound step of 1 sequence on 1/7 (HBF 11.2 TB/s)
    w = hbf.weight_read_bytes_per_gpu(MAV, DEP, batch=1)
    assert hbf.decode_step_time(1, 0, 0, 0, M17, MAV, DEP) == pytest.approx(w / 11.2e12)


def test_scalar_fast_path_equals_array_path() -> None:
    rng = np.random.default_rng(0)
    for mem in C.MEMORY_CONFIGS:
        for model in (MAV, QWEN):
            b, kh, kf, fl = (rng.integers(0, 500, 40).astype(float), rng.uniform(0, 1e11, 40),
                             rng.uniform(0, 1e12, 40), rng.uniform(0, 1e9, 40))
            arr = hbf.decode_step_time(b, kh, kf, fl, mem, model, DEP)
            one = [hbf.decode_step_time(float(x), float(y), float(z), float(w), mem, model, DEP)
                   for x, y, z, w in zip(b, kh, kf, fl)]
            np.testing.assert_allclose(arr, one, rtol=1e-12)


def test_step_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="kv_hbf_bytes"):
        hbf.decode_step_time(1, 0, -1.0, 0, M17, MAV, DEP)
    with pytest.raises(ValueError, match="kv_hbf_bytes"):
        hbf.decode_step_time(np.ones(2), 0, np.array([1.0, np.nan]), 0, M17, MAV, DEP)
    no_hbm = C.MemoryConfig("0/8", 0, 8)
    with pytest.raises(ValueError, match="zero bandwidth"):
        hbf.decode_step_time(1, 1e9, 0, 0, no_hbm, MAV, DEP)


# --- landing -----------------------------------------------------------------------------------

def test_kv_landing_time_at_tier_write_bandwidth() -> None:
    # 1000 tokens x 196,608 B = 196.608 MB; HBF 7 x 16 GB/s; HBM 1 x 1.6 TB/s
    assert hbf.kv_landing_time(1000, "hbf", M17, MAV) == pytest.approx(196.608e6 / 112e9)
    assert hbf.kv_landing_time(1000, "hbm", M17, MAV) == pytest.approx(196.608e6 / 1.6e12)
    arr = hbf.kv_landing_time(np.array([0, 2000]), "hbf", M17, MAV)
    assert arr[0] == 0 and arr[1] == pytest.approx(2 * 196.608e6 / 112e9)
    with pytest.raises(ValueError, match="unknown tier"):
        hbf.kv_landing_time(1, "ssd", M17, MAV)  # type: ignore[arg-type]


# --- lifetime ----------------------------------------------------------------------------------

def test_lifetime_formula_at_1_gb_per_s() -> None:
    # 7 x 512e9 B x 1e5 P/E / (1.02 x 1e9 B/s) = 3.5137e8 s = 11.134 years of 31,557,600 s
    y = hbf.hbf_lifetime_years(M17, 1e9, C.Endurance())
    assert y == pytest.approx(7 * 512e9 * 1e5 / 1.02e9 / 31_557_600)
    assert y == pytest.approx(11.1343, rel=1e-4)
    ys = hbf.hbf_lifetime_years(M17, np.array([1e9, 2e9, 0.0]))
    assert ys[1] == pytest.approx(y / 2) and np.isinf(ys[2])
    # flash holding read-only weights is excluded from the budget when asked
    assert hbf.hbf_lifetime_years(M17, 1e9, reserved_bytes=512e9) == pytest.approx(y * 6 / 7)
    with pytest.raises(ValueError):
        hbf.hbf_lifetime_years(M17, -1.0)


# --- settling ----------------------------------------------------------------------------------

def test_settled_rate_finds_end_of_warmup_transient() -> None:
    t = np.arange(0, 1001, 1.0)
    rate = np.where(t < 200, 5e9, 1e9)  # fast fill, then a steady 1 GB/s
    cum = np.concatenate([[0.0], np.cumsum(rate[1:] * np.diff(t))])
    s = hbf.settled_rate(t, cum, rtol=0.05)
    assert s.settled and s.rate == pytest.approx(1e9)
    # half-vs-quarter agree within 5% once the second half of the prefix is steady: t/2 >= ~200
    assert 380 <= s.settled_at_s <= 460
    rate2, settled2, t2 = s  # a plain tuple for callers
    assert (rate2, settled2, t2) == (s.rate, s.settled, s.settled_at_s)


def test_settled_rate_tolerates_sampling_noise_at_a_steady_rate() -> None:
    rng = np.random.default_rng(7)
    t = np.arange(0, 2000.0)
    inc = 1e9 * rng.uniform(0.7, 1.3, len(t) - 1)  # +-30% per-sample noise around 1 GB/s
    cum = np.concatenate([[0.0], np.cumsum(inc)])
    s = hbf.settled_rate(t, cum)
    assert s.settled and s.rate == pytest.approx(1e9, rel=0.02) and s.settled_at_s < 200


def test_settled_rate_reports_unsettled_growth_and_bad_input() -> None:
    t = np.linspace(1, 100, 200)
    s = hbf.settled_rate(t, t**3)  # rate keeps growing: never within 10%
    assert not s.settled and np.isnan(s.settled_at_s)
    with pytest.raises(ValueError, match="non-decreasing"):
        hbf.settled_rate(np.arange(5.0), np.array([0, 2, 1, 3, 4.0]))
    with pytest.raises(ValueError, match="strictly increasing"):
        hbf.settled_rate(np.array([0, 1, 1, 2.0]), np.arange(4.0))


# --- the validation-table parser ---------------------------------------------------------------

GOOD = """# header
### Llama 4 Maverick — CV = 0.1
| L_in:L_out | 8K | 16K |
|---|---|---|
| 1:3 | 6.2 (52) | 12.8 (52) |
| 15:1 | 0.8 (80) | 1.5 (79) |
"""


def test_parser_reads_cells(tmp_path: Path) -> None:
    p = tmp_path / "t.md"
    p.write_text(GOOD)
    df = hbf.parse_kyung_tables(p)
    assert len(df) == 4
    r = df.iloc[1]
    assert (r.ratio, r.context_tokens, r.lifetime_years, r.tpot_ms, r.cv) == ("1:3", 16384, 12.8, 52.0, 0.1)
    assert df.iloc[2].in_share == pytest.approx(15 / 16)


@pytest.mark.parametrize("bad,field", [
    (GOOD.replace("6.2 (52)", "6.2 [52]"), "8K"),
    (GOOD.replace("|---|---|---|\n", ""), "separator"),
    (GOOD.replace("| 15:1 |", "| 15-1 |"), "L_in:L_out"),
    (GOOD.replace("| 16K |", "| 16k tokens |"), "header"),
    (GOOD.replace("| 1.5 (79) |", "|"), "row"),
    ("no tables here\n", "heading"),
])
def test_parser_rejects_malformed_tables_naming_file_line_field(tmp_path: Path, bad: str, field: str) -> None:
    p = tmp_path / "bad.md"
    p.write_text(bad)
    with pytest.raises(hbf.KyungTableError) as e:
        hbf.parse_kyung_tables(p)
    assert e.value.field == field and "bad.md:" in str(e.value)


# --- the steady-state model on a hand-checked cell ---------------------------------------------

def test_kyung_steady_state_hand_checked_cell() -> None:
    # 8K, 1:1, CV 0: budget 512 GB - 124.94 GB weights -> floor(387.06e9 / (8192 x 196608)) = 240
    r = hbf.kyung_steady_state(8192, 0.5, 0.0).iloc[0]
    assert r.batch_per_gpu == 240
    ctx = 4096 + (4096 - 1) / 2  # in-flight context: L_in + uniform decode age
    kv = 240 * ctx * 196_608
    w = (14.153e9 - 1.0345e9 + 48.318375e9) * 2
    written = 240 * 196_608 * 2  # one appended token + L_in/L_out = 1 landed prompt token per sequence
    # the step waits for the slowest of 8 ranks' landings: completions per rank per step ~ Poisson(240/4096),
    # E[max of 8] = Σ_a (1 - F(a)^8) ≈ 0.388 prompts of 4096 tokens (the mean, 0.059, is what wears)
    lam = 240 / 4096
    e_max = sum(1 - stats.poisson.cdf(a, lam) ** 8 for a in range(30))
    assert e_max == pytest.approx(0.388, abs=1e-3)
    flush = 240 * 196_608 + e_max * 4096 * 196_608
    step = (w + kv) / 8e12 + flush / 240e9
    assert r.tpot_ms == pytest.approx(step * 1e3)
    life = (2560e9 - hbf.weight_storage_bytes_per_gpu(MAV, DEP)) * 1e5 / (1.02 * written / step) / 31_557_600
    assert r.lifetime_years == pytest.approx(life)


def test_kyung_dispersion_moments_match_monte_carlo() -> None:
    """The closed-form in-flight context (context CV + Beta(κ) share, size-biased by L_out) vs sampling."""
    rng = np.random.default_rng(0)
    n, mean_ctx, cv, share_in, kappa = 400_000, 8192.0, 0.3, 0.75, 30.0
    c = rng.normal(mean_ctx, cv * mean_ctx, n)
    mu = 1 - share_in
    r = rng.beta(mu * kappa, (1 - mu) * kappa, n)
    l_out, l_in = r * c, (1 - r) * c
    mc = np.sum(l_out * (l_in + (l_out - 1) / 2)) / np.sum(l_out)
    ours = hbf.kyung_steady_state(mean_ctx, share_in, cv)["inflight_context"].iloc[0]
    assert ours == pytest.approx(mc, rel=0.005)
