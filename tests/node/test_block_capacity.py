"""What one GPU holds: the weights' HBF bytes and the KV blocks left in each tier, by hand
(lachesis.node.block_capacity)."""


import pytest

from lachesis import config as C
from lachesis.node import block_capacity

MAV, QWEN = C.LLAMA4_MAVERICK, C.QWEN3_235B
DEP = C.Deployment()
M17, DAISY = C.memory_config("1/7"), C.memory_config("8/8*")

MAV_ROUTED, MAV_TOTAL = 386_547_056_640, 400_711_848_960  # tests/test_models.py derives both by hand
MAV_EMB = 202048 * 5120

def test_weight_storage_per_gpu_replicated_plus_one_eighth_of_experts() -> None:
    assert block_capacity.weight_storage_bytes_per_gpu(MAV, DEP) == (MAV_TOTAL - MAV_ROUTED + MAV_ROUTED / 8) * 2


def test_kv_blocks_hbm_whole_hbf_less_weights_floored_to_blocks() -> None:
    """Blocks are whole: HBM bytes // block bytes, (HBF bytes - weights) // block bytes; no room is an error."""
    model, dep = MAV, DEP
    block = int(model.kv_bytes_per_token) * dep.block_tokens
    w = block_capacity.weight_storage_bytes_per_gpu(model, dep)
    mem = C.MemoryConfig("t", 1, 1, hbm=C.StackSpec("h", 10 * block + block - 1, 1e12, 1e12),
                         hbf=C.StackSpec("f", w + 7 * block + 1, 1e12, 1e10))
    assert block_capacity.kv_blocks(mem, model, dep) == (10, 7)
    small = C.MemoryConfig("t", 1, 1, hbm=mem.hbm, hbf=C.StackSpec("f", w, 1e12, 1e10))
    with pytest.raises(ValueError, match="does not fit"):
        block_capacity.kv_blocks(small, model, dep)
