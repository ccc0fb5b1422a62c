"""The typed configuration: paper constants and derived quantities; a block size refused where a deployment is
built."""

from dataclasses import FrozenInstanceError, replace

import pytest

from lachesis import config as C


def test_kv_bytes_per_token_match_design() -> None:
    # 48 layers x 2 (K,V) x 8 heads x 128 dims x 2 B = 196,608 B; 94 x 2 x 4 x 128 x 2 = 192,512 B
    assert C.LLAMA4_MAVERICK.kv_bytes_per_token == 196_608
    assert C.QWEN3_235B.kv_bytes_per_token == 192_512


def test_memory_configs_split_eight_slots() -> None:
    labels = [m.label for m in C.MEMORY_CONFIGS]
    assert labels == ["1/7", "2/6", "3/5", "4/4", "8/8*"]
    for m in C.MEMORY_CONFIGS[:4]:
        assert m.hbm_stacks + m.hbf_stacks == 8 and not m.daisy_chain
    one = C.memory_config("1/7")
    assert one.hbm_bytes == 36e9 and one.hbf_bytes == 7 * 512e9
    assert one.hbf_write_bw == 7 * 16e9
    daisy = C.memory_config("8/8*")
    # daisy chain: HBF reads cross the HBM links, so they don't add to the HBM bandwidth
    assert daisy.hbf_read_bw == daisy.hbm_read_bw == 8 * 1.6e12
    with pytest.raises(KeyError):
        C.memory_config("5/3")


def test_reference_clock_constants_and_tool_classes() -> None:
    clk = C.ReferenceClock()
    assert (clk.tpot_ref_s, clk.ttft_ref_s, clk.user_delay_median_s) == (0.2, 1.0, 120.0)
    assert clk.tool_mean_s("unmapped_tool") == 0.69  # default class = API (Fig. 4 caption mean)
    clk2 = C.ReferenceClock(tool_class_of={"bash": "virtual_env"})
    assert clk2.tool_mean_s("bash") == 0.09
    bad = C.ReferenceClock(tool_class_of={"x": "nope"})
    with pytest.raises(KeyError, match="unknown tool class"):
        bad.tool_mean_s("x")


def test_slos_and_endurance() -> None:
    assert C.SLO_TIGHT.p99_tpot_s == 0.060 and C.SLO_LOOSE.p99_tpot_s == 0.100
    assert C.SLO_TIGHT.ttft_s == 2.0
    e = C.Endurance()
    assert (e.pe_cycles, e.write_amplification, e.warranty_years) == (100_000, 1.02, 5.0)


def test_read_pricing_knob_and_kyung_device() -> None:
    assert all(m.read_pricing == "aggregate" for m in C.MEMORY_CONFIGS)  # §2.2/§5.2 default
    per_tier = replace(C.memory_config("2/6"), read_pricing="per_tier")
    assert per_tier.read_pricing == "per_tier"
    with pytest.raises(ValueError, match="read_pricing"):
        replace(C.memory_config("2/6"), read_pricing="fastest")
    k = C.MEMORY_KYUNG
    assert k.read_pricing == "per_tier" and k.hbm_read_bw == 8e12 and k.hbf_read_bw == 5 * 1.6e12
    assert k.hbf_write_bw == 5 * 48e9
    assert C.memory_config("1/7").hbm_write_bw == 1.6e12


def test_deployment_and_gpu_defaults() -> None:
    d = C.Deployment()
    assert (d.n_gpus, d.gpu.flops, d.gpu.link_bw, d.gpu.link_latency_s) == (8, 2250e12, 900e9, 0.8e-6)
    assert d.attention_kernel == "fused"
    with pytest.raises(ValueError, match="attention_kernel"):
        C.Deployment(attention_kernel="paged")
    with pytest.raises(ValueError, match="n_gpus"):
        C.Deployment(n_gpus=0)


def test_models_are_reexported() -> None:
    assert C.MODELS == {"Llama-4-Maverick": C.LLAMA4_MAVERICK, "Qwen3-235B-A22B": C.QWEN3_235B}
    assert C.known_model("llama 4 maverick") is C.LLAMA4_MAVERICK


def test_config_is_frozen_and_replaceable() -> None:
    cfg = C.Config()
    with pytest.raises(FrozenInstanceError):
        cfg.model = C.QWEN3_235B  # type: ignore[misc]
    cfg2 = cfg.with_(memory=C.memory_config("4/4"), model=C.QWEN3_235B)
    assert cfg2.memory.label == "4/4" and cfg.memory.label == "1/7"


# -- the deployment's block size: an integer >= 1 -----------------------------------------------------


@pytest.mark.parametrize("bt", [0, -16, 1.5, True, "16"])
def test_block_tokens_is_refused_when_the_deployment_is_built(bt):
    """``block_tokens=0`` is one ValueError naming the field where the configuration is made, not a
    ZeroDivisionError in the simulator's block arithmetic."""
    from dataclasses import replace

    from lachesis.config import DEFAULT, Deployment

    with pytest.raises(ValueError) as e:
        Deployment(block_tokens=bt)
    assert "deployment: block_tokens must be an integer >= 1" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="block_tokens"):
        replace(DEFAULT.deployment, block_tokens=bt)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("build, said", [
    (lambda: replace(C.HBF_STACK, write_bw=NAN), "write_bw must be a finite number > 0 (bytes/s), got nan"),
    (lambda: replace(C.HBF_STACK, write_bw=-1.0), "stack 'HBF': write_bw must be a finite number > 0 (bytes/s)"),
    (lambda: replace(C.HBM4_STACK, read_bw=0.0), "stack 'HBM4': read_bw must be a finite number > 0"),
    (lambda: replace(C.HBF_STACK, capacity_bytes=NAN), "stack 'HBF': capacity_bytes must be a finite number > 0"),
    (lambda: replace(C.HBF_STACK, capacity_bytes=INF), "capacity_bytes must be a finite number > 0 (bytes), got inf"),
    (lambda: replace(C.HBF_STACK, t_prog_s=-1e-6), "t_prog_s must be a finite number >= 0 (s)"),
    (lambda: C.Endurance(write_amplification=-1), "endurance: write_amplification must be a finite number >= 1"),
    (lambda: C.Endurance(write_amplification=NAN), "write_amplification must be a finite number >= 1 (×), got nan"),
    (lambda: C.Endurance(pe_cycles=NAN), "endurance: pe_cycles must be a finite number > 0 (P/E cycles), got nan"),
    (lambda: C.Endurance(pe_cycles=0), "endurance: pe_cycles must be a finite number > 0 (P/E cycles), got 0"),
    (lambda: C.Endurance(warranty_years=-5), "warranty_years must be a finite number > 0"),
    (lambda: C.Endurance(lifetime_over_ranks="best"), "lifetime_over_ranks must be one of ['mean', 'worst']"),
    (lambda: C.MemoryConfig("x", 1.5, 7), "memory 'x': hbm_stacks must be a whole number >= 0, got 1.5"),
    (lambda: C.GPUSpec(link_bw=NAN), "gpu 'B200-class': link_bw must be a finite number > 0"),
    (lambda: C.SLO("x", p99_tpot_s=0), "slo 'x': p99_tpot_s must be a finite number > 0"),
])
def test_a_constant_out_of_its_range_is_refused_naming_its_field_and_value(build, said) -> None:
    """A NaN, infinite or negative bandwidth, capacity, P/E budget or amplification never reaches the model (where it
    read as "zero bandwidth", a NaN to integer, a negative or NaN lifetime): refused where the dataclass is made."""
    with pytest.raises(ValueError) as e:
        build()
    assert said in str(e.value) and "\n" not in str(e.value)


def test_a_trace_without_requests_makes_no_plan() -> None:
    from lachesis.analysis.segments import recover
    from lachesis.node.plan import build_plan
    from lachesis.traces.corpus import generate
    from lachesis.traces.trace import Trace

    tr = generate("tau3", 0.01)
    empty = Trace.from_frames(tr.requests.iloc[:0], None, source="empty")
    with pytest.raises(ValueError, match="build_plan: trace 'empty' has no requests: nothing to replay"):
        build_plan(empty, recover(empty))
