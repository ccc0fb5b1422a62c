"""Bad model configs refused by name: each case here was read silently into a wrong model before."""

from __future__ import annotations

import json

import pytest

from lachesis import models as M
from lachesis.paths import package_data

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
