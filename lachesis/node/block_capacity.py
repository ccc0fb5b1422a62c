"""Block capacity (§5.2): what one GPU's HBM and HBF hold once the weights are placed — the weights' bytes per GPU
(all replicated parameters and 1/n of the routed experts, in HBF) and the KV blocks left in each tier."""

from __future__ import annotations

from lachesis.config import Deployment, MemoryConfig, ModelSpec


def weight_storage_bytes_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """HBF bytes one GPU's weights occupy: all replicated parameters + 1/n_gpus of the routed experts."""
    routed = model.routed_expert_params
    return (model.total_params - routed + routed / deployment.n_gpus) * model.weight_dtype_bytes


def kv_blocks(memory: MemoryConfig, model: ModelSpec, deployment: Deployment) -> tuple[int, int]:
    """KV blocks one GPU holds in (HBM, HBF): HBM whole, HBF less the weights (§5.2: weights live in HBF);
    a ValueError if the weights leave no room for KV."""
    w = float(weight_storage_bytes_per_gpu(model, deployment))
    if not w < memory.hbf_bytes:
        raise ValueError(f"model {model.name!r} does not fit memory configuration {memory.label!r}: its "
                         f"weights need {w / 1e9:.1f} GB of HBF per GPU, the configuration has "
                         f"{memory.hbf_bytes / 1e9:.1f} GB")
    block_bytes = int(model.kv_bytes_per_token) * int(deployment.block_tokens)
    return int(memory.hbm_bytes // block_bytes), int((memory.hbf_bytes - w) // block_bytes)
