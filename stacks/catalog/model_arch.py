"""What pre-flight must know about a model's network to size its weights, KV cache and state.

`ModelArchitecture` started with uniform GQA models (every layer caches K and V per KV head);
the fields after `experts_per_token` describe the other layouts the B200 recipes need, and all
default to "uniform GQA, size from the parameter count", so a Qwen3 entry means what it did:

- GQA layers cache K (head_dim) and V (v_head_dim, default head_dim) per KV head; KV heads are
  split over TP (replicated when TP exceeds them).
- MLA layers cache one compressed latent per token (`mla_latent_dim` elements), the same on
  every TP rank (vLLM replicates it); DeepSeek-V3.2-style sparse attention adds an FP8 indexer
  key cache of `indexer_bytes_per_token_layer` bytes.
- Sliding-window layers hold at most `window` tokens per sequence: a fixed cost per sequence.
- Linear-attention layers (hybrid models) keep a fixed-size recurrent state per sequence
  (`linear_state_bytes_per_layer`, whole model, split over TP) instead of per-token KV.

`provenance` labels the facts that are not plain config values: "VERIFIED <source>",
"THIRD-PARTY <source>", "ESTIMATED <reasoning>" or "UNKNOWN <what was tried>".

The vLLM option names the catalogue's serving rules refer to (attention and MoE backends,
speculative methods) are enums here too, so catalogue and schema share one spelling.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

PROVENANCE_LABELS = ("VERIFIED", "THIRD-PARTY", "ESTIMATED", "UNKNOWN")


class AttentionKind(str, Enum):
    GQA = "gqa"
    MLA = "mla"
    HYBRID_LINEAR = "hybrid-linear"   # softmax GQA layers + linear-attention layers with state


class AttentionBackend(str, Enum):
    """vLLM `--attention-backend` names for NVIDIA GPUs (vLLM AttentionBackendEnum)."""

    FLASH_ATTN = "FLASH_ATTN"
    TRITON_ATTN = "TRITON_ATTN"
    FLASHINFER = "FLASHINFER"
    FLEX_ATTENTION = "FLEX_ATTENTION"
    FLASHINFER_MLA = "FLASHINFER_MLA"
    FLASHINFER_MLA_SPARSE = "FLASHINFER_MLA_SPARSE"
    FLASHMLA = "FLASHMLA"
    FLASHMLA_SPARSE = "FLASHMLA_SPARSE"
    CUTLASS_MLA = "CUTLASS_MLA"
    TRITON_MLA = "TRITON_MLA"
    TRITON_MLA_SPARSE = "TRITON_MLA_SPARSE"
    FLASH_ATTN_MLA = "FLASH_ATTN_MLA"

    @property
    def is_mla(self) -> bool:
        return "MLA" in self.value

    @property
    def is_sparse(self) -> bool:
        return self.value.endswith("_SPARSE")


class MoeBackend(str, Enum):
    """vLLM `KernelConfig.moe_backend` values (vLLM lower-cases what it is given, so the
    recipes' "FLASHINFER_CUTLASS" and "flashinfer_cutlass" are the same setting)."""

    AUTO = "auto"
    TRITON = "triton"
    DEEP_GEMM = "deep_gemm"
    CUTLASS = "cutlass"
    FLASHINFER_TRTLLM = "flashinfer_trtllm"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"
    FLASHINFER_CUTEDSL = "flashinfer_cutedsl"
    MARLIN = "marlin"


class SpecMethod(str, Enum):
    """vLLM speculative-config methods the catalogue's models use (EagleModelTypes,
    MTPModelTypes in vLLM's SpeculativeConfig)."""

    EAGLE3 = "eagle3"
    MTP = "mtp"
    EXAONE_MOE_MTP = "exaone_moe_mtp"

    @property
    def needs_draft_model(self) -> bool:
        return self == SpecMethod.EAGLE3


class SlidingWindowLayers(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    layers: StrictInt = Field(ge=1)
    window: StrictInt = Field(ge=1)   # tokens one sequence keeps in these layers (incl. itself)


class ModelArchitecture(BaseModel):
    """The facts pre-flight needs to size weights and KV cache."""

    # A stack's `model.architecture` is one of these: strict scalars and finite numbers, as in
    # every stack config model (stacks/config/schema_base.py says why; `layers: true` was 1).
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid",
                              allow_inf_nan=False)

    total_params_b: StrictFloat
    active_params_b: StrictFloat
    layers: StrictInt
    attention_heads: StrictInt
    kv_heads: StrictInt
    head_dim: StrictInt
    max_context: StrictInt
    hidden_size: StrictInt
    vocab_size: StrictInt
    experts: StrictInt = 0
    experts_per_token: StrictInt = 0
    # --- beyond uniform GQA (all optional; defaults keep the uniform-GQA arithmetic) ---
    attention_kind: AttentionKind = AttentionKind.GQA
    # Layers that cache every token (softmax attention without a window); default: all.
    full_attention_layers: StrictInt | None = None
    v_head_dim: StrictInt | None = None
    sliding_windows: tuple[SlidingWindowLayers, ...] = ()
    mla_latent_dim: StrictInt = 0
    indexer_bytes_per_token_layer: StrictInt = 0
    linear_attention_layers: StrictInt = 0
    linear_state_bytes_per_layer: StrictInt = 0
    # Decimal GB of the checkpoint on disk; when known, weights per GPU come from it (quantized
    # checkpoints keep some modules in BF16/FP8, so params x bytes/param undercounts).
    checkpoint_gb: StrictFloat | None = None
    checkpoint_precision: str | None = None
    provenance: dict[str, str] = {}

    @field_validator("provenance")
    @classmethod
    def _labelled(cls, v: dict[str, str]) -> dict[str, str]:
        for key, text in v.items():
            if not text.startswith(PROVENANCE_LABELS):
                raise ValueError(f"provenance of '{key}' must start with one of "
                                 f"{', '.join(PROVENANCE_LABELS)}")
        return v

    @property
    def full_layers(self) -> int:
        return self.layers if self.full_attention_layers is None else self.full_attention_layers

    @property
    def sparse_mla(self) -> bool:
        return self.attention_kind == AttentionKind.MLA and self.indexer_bytes_per_token_layer > 0
