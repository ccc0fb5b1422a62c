"""Public config.json values (architecture keys) of model families the loader reads, as the model tests use them."""

DEEPSEEK_V3 = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
               "num_key_value_heads": 128, "vocab_size": 129280, "intermediate_size": 18432,
               "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
               "first_k_dense_replace": 3, "moe_layer_freq": 1, "kv_lora_rank": 512, "q_lora_rank": 1536,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "tie_word_embeddings": False,
               "torch_dtype": "bfloat16", "num_nextn_predict_layers": 1, "quantization_config": {"quant_method": "fp8"}}
MIXTRAL_8X7B = {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8,
                "num_experts_per_tok": 2, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
LLAMA31_8B = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16",
              "tie_word_embeddings": False}
