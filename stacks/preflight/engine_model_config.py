"""The model's config.json for the engine-config check, written from the catalogue's geometry
(pure), and the offline Hugging Face cache folder the parser process reads (HF_HOME).

vLLM's AsyncEngineArgs resolves `--model` through the HF cache even to parse offline
(HF_HUB_OFFLINE=1: snapshot_download(local_files_only=True), vllm/engine/arg_utils.py, vLLM
0.31.0), so every checkpoint a worker names gets a snapshot at its revision. Only a model whose
config.json this module can write (HF_LAYOUTS) gets one; `create_engine_config()` then checks TP
against its heads, the context length and the KV cache dtype. The others get an empty snapshot:
parsed, no engine config (the catalogue does not hold their layers' layout).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stacks.catalog.models import MODELS
from stacks.config.revision import COMMIT

# What config.json holds beyond the catalogue's geometry (stacks.catalog.models), copied from the
# model's config.json on the Hub (the research copy: ../shared/reference/models/qwen3-30b-a3b.json);
# the FP8 checkpoint's quantization_config is the one Qwen's FP8 cards state (fine-grained e4m3,
# 128x128 blocks): an expectation, not a copy.
_QWEN3_MOE: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "intermediate_size": 6144, "moe_intermediate_size": 768, "decoder_sparse_step": 1,
    "norm_topk_prob": True, "mlp_only_layers": [], "hidden_act": "silu", "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "rope_scaling": None, "tie_word_embeddings": False,
    "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
    "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
}
HF_LAYOUTS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-30B-A3B": _QWEN3_MOE,
    "Qwen/Qwen3-30B-A3B-FP8": {**_QWEN3_MOE, "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
        "weight_block_size": [128, 128]}},
}
NO_REVISION = "0" * 40


def config_json(model_id: str) -> dict[str, Any] | None:
    """config.json of `model_id` from the catalogue's geometry, or None when not writable."""
    layout, arch = HF_LAYOUTS.get(model_id), MODELS.get(model_id)
    if layout is None or arch is None:
        return None
    return {**layout, "hidden_size": arch.hidden_size, "num_hidden_layers": arch.layers,
            "num_attention_heads": arch.attention_heads, "num_key_value_heads": arch.kv_heads,
            "head_dim": arch.head_dim, "max_position_embeddings": arch.max_context,
            "max_window_layers": arch.layers, "vocab_size": arch.vocab_size,
            "num_experts": arch.experts, "num_experts_per_tok": arch.experts_per_token}


def write_snapshot(hf_home: Path, repo: str, revision: str | None) -> bool:
    """One snapshot of `repo` at `revision` in hf_home/hub; True when it holds a config.json."""
    folder = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    # a commit names its snapshot; a branch or tag (model.revision may be one) is a ref file
    # holding the commit, as huggingface_hub's cache keeps them (refs/<name>)
    commit = revision if revision and COMMIT.match(revision) else NO_REVISION
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    ref = folder / "refs" / (revision if revision and commit != revision else "main")
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)
    (folder / "refs" / "main").write_text(commit)
    config = config_json(repo)
    if config is not None:
        (snapshot / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True))
    return config is not None
