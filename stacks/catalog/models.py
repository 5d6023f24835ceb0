"""The models a stack may serve, by Hugging Face id, with the bytes a weight takes by precision.

Model architectures: `ModelArchitecture` (stacks.catalog.model_arch); the B200 recipe models and
their serving rules live in stacks.catalog.model_catalog.
"""

from __future__ import annotations

from stacks.catalog.model_arch import ModelArchitecture
from stacks.catalog.model_catalog import B200_MODELS

# Qwen3-30B-A3B: config.json of the model (../shared/reference/models/qwen3-30b-a3b.json);
# 30.5B total / 3.3B active from the model card. max_context is max_position_embeddings.
QWEN3_30B_A3B = ModelArchitecture(
    total_params_b=30.5, active_params_b=3.3, layers=48, attention_heads=32, kv_heads=4,
    head_dim=128, max_context=40960, hidden_size=2048, vocab_size=151936, experts=128,
    experts_per_token=8,
)

MODELS: dict[str, ModelArchitecture] = {
    "Qwen/Qwen3-30B-A3B": QWEN3_30B_A3B,
    "Qwen/Qwen3-30B-A3B-FP8": QWEN3_30B_A3B,
    **B200_MODELS,
}

# One model's checkpoints by precision (Hugging Face ids), for a search over precisions
# (stacks/explore): Qwen publishes the FP8 checkpoint beside the BF16 one, and the plan names
# Qwen/Qwen3-30B-A3B-FP8 as its quantization trial.
CHECKPOINTS: dict[str, dict[str, str]] = {
    "Qwen/Qwen3-30B-A3B": {"bf16": "Qwen/Qwen3-30B-A3B", "fp8": "Qwen/Qwen3-30B-A3B-FP8"},
}

# Bytes per weight parameter by checkpoint precision. NVFP4 = 4-bit values + one FP8 scale per
# 16 values (0.5 + 1/16 bytes).
BYTES_PER_PARAM = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5625}
