"""Model definitions from public configs (lachesis.models): hand arithmetic for the paper's models and the other
families, and bad configs refused by name in one line."""

import json

import pytest
from model_configs import DEEPSEEK_V3, LLAMA31_8B, MIXTRAL_8X7B

from lachesis import models as M
from lachesis.config import Deployment
from lachesis.node import block_capacity
from lachesis.paths import package_data

DEP = Deployment()

def test_maverick_from_its_public_config() -> None:
    m = M.LLAMA4_MAVERICK
    # KV: 48 layers x 2 (K, V) x 8 KV heads x 128 x 2 B
    assert m.kv_bytes_per_token == 48 * 2 * 8 * 128 * 2 == 196_608
    assert (m.moe_layers, m.dense_layers, m.n_experts, m.experts_per_token, m.n_shared_experts) == (24, 24, 128, 1, 1)
    attn = 48 * (5120 * (40 * 128 + 2 * 8 * 128) + 40 * 128 * 5120)  # fused QKV + O
    norms = 48 * 2 * 5120 + 5120
    dense = 24 * 3 * 5120 * 16384
    expert = 3 * 5120 * 8192
    moe = 24 * (128 * expert + 1 * expert + 5120 * 128)  # routed + shared + router
    emb_head = 2 * 202048 * 5120
    total = attn + norms + dense + moe + emb_head
    assert m.total_params == total == 400_711_848_960
    routed = 24 * 128 * expert
    assert m.routed_expert_params == routed
    assert m.active_params == total - 24 * 127 * expert  # one routed expert per token
    # per GPU (8 GPUs, experts expert-parallel): everything replicated + 1/8 of the routed experts, BF16
    assert block_capacity.weight_storage_bytes_per_gpu(m, DEP) == (total - routed + routed / 8) * 2 == 124_966_348_800
    assert any("attention_chunk_size" in n for n in m.notes)  # chunked attention is named, not silently dropped


def test_qwen3_from_its_public_config() -> None:
    m = M.QWEN3_235B
    assert m.kv_bytes_per_token == 94 * 2 * 4 * 128 * 2 == 192_512
    assert (m.moe_layers, m.dense_layers, m.n_shared_experts) == (94, 0, 0)
    attn = 94 * (4096 * (64 * 128 + 2 * 4 * 128) + 64 * 128 * 4096)
    norms = 94 * 2 * 4096 + 4096
    expert = 3 * 4096 * 1536
    moe = 94 * (128 * expert + 4096 * 128)
    emb_head = 2 * 151936 * 4096
    total = attn + norms + moe + emb_head
    assert m.total_params == total == 235_093_610_496
    assert m.active_params == total - 94 * 120 * expert  # top-8 of 128
    routed = 94 * 128 * expert
    assert block_capacity.weight_storage_bytes_per_gpu(m, DEP) == (total - routed + routed / 8) * 2 == 72_768_528_384


def test_deepseek_v3_mla() -> None:
    m = M.model_from_hf_config(DEEPSEEK_V3, "DeepSeek-V3", declared_total_params=671e9, declared_active_params=37e9)
    assert m.is_mla and m.head_dim == 128 and m.kv_lora_rank == 512 and m.qk_rope_head_dim == 64
    # MLA caches the latent + the RoPE key per layer: 61 x (512 + 64) x 2 B (KV dtype from torch_dtype)
    assert m.kv_bytes_per_token == 61 * 576 * 2 == 70_272
    # absorbed MLA: score over latent + rope, value over latent, per query head
    assert m.attention_flops_per_context_token == 2 * 128 * (2 * 512 + 64)
    assert (m.moe_layers, m.dense_layers, m.n_shared_experts) == (58, 3, 1)
    assert m.weight_dtype_bytes == 1  # FP8 checkpoint
    assert any("nextn" in n for n in m.notes)
    # attention parameters per layer: q_a, q_b, kv_a, kv_b (split into absorbed K and V up-projections), o
    attn = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 128 * 128 * 512 + 512 * 128 * 128 + 128 * 128 * 7168
    assert m.attention_params_per_layer == attn
    assert m.total_params == pytest.approx(671e9, rel=0.005)


def test_mixtral_and_dense_llama() -> None:
    mx = M.model_from_hf_config(MIXTRAL_8X7B, declared_total_params=46.7e9, declared_active_params=12.9e9)
    attn = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096)
    experts = 32 * 8 * 3 * 4096 * 14336
    total = attn + experts + 32 * 4096 * 8 + 2 * 32000 * 4096 + 32 * 2 * 4096 + 4096
    assert mx.total_params == total and mx.moe_layers == 32 and mx.dense_layers == 0
    assert mx.active_params == total - 32 * 6 * 3 * 4096 * 14336
    assert mx.name == "mixtral"
    ll = M.model_from_hf_config(LLAMA31_8B, "Llama-3.1-8B", declared_total_params=8.03e9)
    assert ll.moe_layers == 0 and ll.dense_ffn == 14336 and ll.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert ll.total_params == attn + 32 * 3 * 4096 * 14336 + 2 * 128256 * 4096 + 32 * 2 * 4096 + 4096
    assert block_capacity.weight_storage_bytes_per_gpu(ll, DEP) == ll.total_params * 2  # nothing to shard


def test_loader_reads_files_and_names_bad_fields(tmp_path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**LLAMA31_8B, "_name_or_path": "meta-llama/Llama-3.1-8B"}))
    assert M.model_from_hf_config(p).name == "Llama-3.1-8B"
    bad = dict(LLAMA31_8B)
    del bad["hidden_size"]
    with pytest.raises(ValueError, match="field 'hidden_size': missing"):
        M.model_from_hf_config(bad)
    with pytest.raises(ValueError, match="field 'num_hidden_layers'"):
        M.model_from_hf_config({**LLAMA31_8B, "num_hidden_layers": -3})
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"broken\.json:1: not valid JSON"):
        M.model_from_hf_config(tmp_path / "broken.json")
    with pytest.raises(ValueError, match="cannot read"):
        M.model_from_hf_config(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="kv_lora_rank"):  # an MLA config without its latent
        M.model_from_hf_config({k: v for k, v in DEEPSEEK_V3.items() if k != "kv_lora_rank"} | {"head_dim": 128})


def test_model_from_dict_refuses_definitions_that_zero_a_term() -> None:
    base = dict(name="x", layers=4, hidden=64, q_heads=4, kv_heads=2, head_dim=16, vocab=100, dense_ffn=128)
    assert M.model_from_dict(base).kv_bytes_per_token == 4 * 2 * 2 * 16 * 2
    with pytest.raises(ValueError, match="dense_ffn"):
        M.model_from_dict({**base, "dense_ffn": 0})
    with pytest.raises(ValueError, match="n_experts"):
        M.model_from_dict({**base, "moe_layers": 4})
    with pytest.raises(ValueError, match="head_dim"):  # the old MLA spelling gave head_dim = 0: no attention FLOPs
        M.model_from_dict({**base, "head_dim": 0})
    with pytest.raises(ValueError, match="kv_lora_rank"):
        M.model_from_dict({**base, "qk_rope_head_dim": 64})
    with pytest.raises(ValueError, match="unknown fields"):
        M.model_from_dict({**base, "mla_latent_dim": 576})
    with pytest.raises(ValueError, match="missing fields"):
        M.model_from_dict({"name": "x", "layers": 1})
    with pytest.raises(ValueError, match="differs by more than"):
        M.model_from_dict({**base, "declared_total_params": 1e9})


def test_known_model_lookup() -> None:
    assert M.known_model("Llama 4 Maverick") is M.LLAMA4_MAVERICK
    assert M.known_model("qwen3-235b-a22b") is M.QWEN3_235B
    mine = M.model_from_hf_config(LLAMA31_8B, "Llama-3.1-8B")
    assert M.known_model("llama 3.1 8b", {mine.name: mine}) is mine
    with pytest.raises(KeyError, match="unknown model"):
        M.known_model("GPT-5")


# -- bad model configs refused by name, in one line ---------------------------------------------------


LLAMA = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16"}


MAVERICK = json.loads(package_data("models", "llama-4-maverick.json").read_text())


QWEN_MOE = {"model_type": "qwen3_moe", "num_hidden_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
            "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 1000, "num_experts": 8,
            "num_experts_per_tok": 2, "moe_intermediate_size": 256, "intermediate_size": 2048,
            "decoder_sparse_step": 1, "mlp_only_layers": []}


DEEPSEEK = {"model_type": "deepseek_v3", "num_hidden_layers": 6, "hidden_size": 1024, "num_attention_heads": 16,
            "num_key_value_heads": 16, "vocab_size": 1000, "intermediate_size": 2048, "moe_intermediate_size": 256,
            "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
            "moe_layer_freq": 1, "kv_lora_rank": 128, "q_lora_rank": 256, "qk_nope_head_dim": 64,
            "qk_rope_head_dim": 32, "v_head_dim": 64}


def maverick(**text: object) -> dict:
    return {**MAVERICK, "text_config": {**MAVERICK["text_config"], **text}}


def refused(tmp_path, cfg: dict, field: str) -> str:
    """Write ``cfg`` to a file; loading it must raise one ValueError line naming the file and ``field``."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))  # json.dumps writes NaN / Infinity as Python's json reads them
    with pytest.raises(ValueError) as e:
        M.model_from_hf_config(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and repr(field) in msg, msg
    return msg


@pytest.mark.parametrize("kv", [0, -1, 40, 64, 3, 5.5, True, "8"])
def test_kv_heads_must_divide_the_query_heads(tmp_path, kv) -> None:
    refused(tmp_path, {**LLAMA, "num_key_value_heads": kv}, "num_key_value_heads")


def test_valid_kv_heads_still_read() -> None:
    for kv in (1, 8, 32):
        assert M.model_from_hf_config({**LLAMA, "num_key_value_heads": kv}).kv_heads == kv
    assert M.model_from_hf_config({k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}).kv_heads == 32


@pytest.mark.parametrize("step", [-2, 0, 2.5, "2", True])
def test_llama4_moe_step_is_a_positive_integer(tmp_path, step) -> None:
    refused(tmp_path, maverick(interleave_moe_layer_step=step), "interleave_moe_layer_step")


@pytest.mark.parametrize("key,value", [("decoder_sparse_step", -1), ("decoder_sparse_step", 0),
                                       ("decoder_sparse_step", 1.5)])
def test_qwen_moe_step_is_a_positive_integer(tmp_path, key, value) -> None:
    refused(tmp_path, {**QWEN_MOE, key: value}, key)


@pytest.mark.parametrize("key,value", [("moe_layer_freq", 0), ("moe_layer_freq", -1), ("moe_layer_freq", 1.5),
                                       ("first_k_dense_replace", -1), ("first_k_dense_replace", 2.5)])
def test_deepseek_layer_steps_are_integers(tmp_path, key, value) -> None:
    refused(tmp_path, {**DEEPSEEK, key: value}, key)


def test_valid_moe_steps_still_read() -> None:
    assert M.model_from_hf_config(maverick()).moe_layers == 24
    assert M.model_from_hf_config(maverick(interleave_moe_layer_step=1)).moe_layers == 48
    assert M.model_from_hf_config({**QWEN_MOE, "decoder_sparse_step": 2}).moe_layers == 4
    assert M.model_from_hf_config(DEEPSEEK).moe_layers == 5


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "4096", None])
def test_numeric_fields_finite_and_numbers(tmp_path, value) -> None:
    cfg = {**LLAMA, "hidden_size": value}
    if value is None:  # null is "absent": named as missing
        assert "missing" in refused(tmp_path, cfg, "hidden_size")
    else:
        refused(tmp_path, cfg, "hidden_size")


@pytest.mark.parametrize("key", ["num_hidden_layers", "vocab_size", "intermediate_size", "head_dim"])
def test_nan_anywhere_in_the_read_fields(tmp_path, key) -> None:
    refused(tmp_path, {**LLAMA, key: float("nan")}, key)


def test_nan_in_an_unread_field_is_still_refused(tmp_path) -> None:
    """A non-finite number anywhere means a corrupted file: refused by its path, not read around."""
    msg = refused(tmp_path, maverick(rope_theta=float("inf")), "text_config.rope_theta")
    assert "finite" in msg


def test_deep_nesting_names_the_file(tmp_path) -> None:
    p = tmp_path / "deep.json"
    p.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match=r"deep\.json"):
        M.model_from_hf_config(p)


def test_non_utf8_names_the_file(tmp_path) -> None:
    p = tmp_path / "latin.json"
    p.write_bytes(b'{"model_type": "llama\xff"}')
    with pytest.raises(ValueError, match=r"latin\.json.*UTF-8"):
        M.model_from_hf_config(p)


def test_cli_prints_a_config_error_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    """The CLI's handler turns the loader's ValueError into one stderr line and exit 2 (no traceback)."""
    from lachesis import cli
    from lachesis.traces import corpus

    p = tmp_path / "config.json"
    p.write_text(json.dumps({**LLAMA, "num_key_value_heads": 0}))
    monkeypatch.setattr(corpus, "write_all", lambda *a, **k: M.model_from_hf_config(p))  # a command that loads it
    assert cli.main(["corpus", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "num_key_value_heads" in err[0] and str(p) in err[0] and "Traceback" not in err[0]
