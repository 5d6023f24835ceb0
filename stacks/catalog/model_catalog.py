"""The four Korean MoE models of the B200 recipes (design brief, "Second source"), as data.

Every number carries its status in `provenance` (see stacks.catalog.model_arch): VERIFIED ones were
read in a primary source (the Dynamo recipe manifests/READMEs in ai-dynamo/dynamo, the Dynamo
release notes, the model card, the seed article); THIRD-PARTY ones come from non-vendor ports or
runbooks; ESTIMATED ones are arithmetic on verified numbers, with the reasoning. Sources:
/work/briefs/b200-models.md (research brief with file paths and commits).

`SERVING_RULES` holds what a checkpoint and its runtime demand of a stack: pre-flight refuses a
stack that breaks one (stacks.preflight.recipe_checks); every catalogued model has an entry, so
every model's speculative methods are checked. `CHECKPOINTS` holds each checkpoint's size on disk
and weight precision: the model cache must hold it, and the precision label must be its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stacks.catalog.model_arch import (
    AttentionBackend,
    AttentionKind,
    ModelArchitecture,
    MoeBackend,
    SlidingWindowLayers,
    SpecMethod,
)

QWEN3_30B_A3B_ID = "Qwen/Qwen3-30B-A3B"
QWEN3_30B_A3B_FP8_ID = "Qwen/Qwen3-30B-A3B-FP8"
AX_K2 = "skt/A.X-K2-NVFP4"
K_EXAONE = "LGAI-EXAONE/K-EXAONE-2.0-750B-A37B-NVFP4"
SOLAR_OPEN2 = "nota-ai/Solar-Open2-250B-Nota-NVFP4"
MOTIF_3 = "Motif-Technologies/Motif-3-NVFP4"

_DYN = "VERIFIED ai-dynamo/dynamo recipes"

AX_K2_ARCH = ModelArchitecture(
    total_params_b=688, active_params_b=33, layers=61, attention_heads=64, kv_heads=1,
    head_dim=192, v_head_dim=128, max_context=262144, hidden_size=7168, vocab_size=163840,
    experts=256, experts_per_token=8, attention_kind=AttentionKind.MLA, mla_latent_dim=576,
    indexer_bytes_per_token_layer=132, checkpoint_gb=398, checkpoint_precision="nvfp4",
    provenance={
        "params": "VERIFIED seed article: 688B total / 33B active, 256 routed experts top-8",
        "max_context": f"{_DYN}/ax-k2 deploy.yaml --max-model-len 262144",
        "vocab_size": f"{_DYN}/ax-k2/perf/README.md (163,840-token vocabulary)",
        "layers": "ESTIMATED 61 (1 dense + 60 MoE): with hidden 7168 and expert dim 2048 this "
                  "reproduces the published 688.1B total",
        "attention_heads": "ESTIMATED 64 (SKT vLLM unit test values)",
        "mla_latent_dim": "ESTIMATED 576 = kv_lora_rank 512 + rope 64 (DSv3 layout vLLM uses); "
                          "KV is the latent, replicated on every TP rank",
        "indexer_bytes_per_token_layer": "ESTIMATED 132 = 128 FP8 + 4 B scale (DSv3.2 "
                                         "indexer key cache)",
        "checkpoint_gb": f"{_DYN}/a.x-k2/README.md: about 398 GB on disk",
    })

K_EXAONE_ARCH = ModelArchitecture(
    total_params_b=764.5, active_params_b=37, layers=78, attention_heads=64, kv_heads=8,
    head_dim=128, max_context=262144, hidden_size=6144, vocab_size=153600, experts=256,
    experts_per_token=8, full_attention_layers=20,
    sliding_windows=(SlidingWindowLayers(layers=57, window=128),
                     SlidingWindowLayers(layers=1, window=4096)),
    checkpoint_gb=530, checkpoint_precision="nvfp4",
    provenance={
        "architecture": "VERIFIED model card: 78 layers, GQA 64 Q / 8 KV heads x 128, hidden "
                        "6144, 256 experts top-8, vocab 153,600, context 262,144",
        "total_params_b": f"{_DYN}/k-exaone-2.0/README.md and release notes: 764.5B",
        "attention_layers": "VERIFIED model card: 1 global + 1 SWA-4096 + 19 x [3 SWA-128 + 1 "
                            "global] = 20 full + 58 sliding layers",
        "checkpoint_gb": f"{_DYN}/k-exaone-2.0/README.md: ~530 GB, 53 shards",
        "mtp_kv": "UNKNOWN whether vLLM allocates KV for the MTP layer; not counted",
    })

SOLAR_OPEN2_ARCH = ModelArchitecture(
    total_params_b=250, active_params_b=15, layers=48, attention_heads=64, kv_heads=8,
    head_dim=128, max_context=1048576, hidden_size=4096, vocab_size=196608, experts=320,
    experts_per_token=8, attention_kind=AttentionKind.HYBRID_LINEAR, full_attention_layers=12,
    linear_attention_layers=36, linear_state_bytes_per_layer=4_341_760, checkpoint_gb=153,
    checkpoint_precision="nvfp4",
    provenance={
        "params": "VERIFIED seed article: 250B total / 15B active",
        "layers": "VERIFIED Dynamo solar-open2-250b docs: 48 = 12 GQA + 36 KDA linear layers",
        "max_context": f"{_DYN}/solar-open2-250b deploy.yaml --max-model-len=1048576",
        "gqa_heads": "VERIFIED as SolarOpen2Config defaults in vLLM/transformers: 64 Q / 8 KV "
                     "x 128 (the checkpoint's config.json itself not read)",
        "linear_state_bytes_per_layer": "ESTIMATED 4,341,760 = FP32 state 64 heads x 128 x 128 "
                                        "x 4 B + BF16 conv 3 x 8192 x 3 x 2 B; reproduces the "
                                        "2128-token hybrid block the recipe README reports",
        "checkpoint_gb": "VERIFIED Dynamo solar-open2-250b docs: ~153 GB",
    })

MOTIF_3_ARCH = ModelArchitecture(
    total_params_b=314, active_params_b=13.2, layers=53, attention_heads=80, kv_heads=16,
    head_dim=192, v_head_dim=128, max_context=262144, hidden_size=4096, vocab_size=220160,
    experts=384, experts_per_token=8, full_attention_layers=14,
    sliding_windows=(SlidingWindowLayers(layers=39, window=129),),
    checkpoint_gb=186.9, checkpoint_precision="nvfp4",
    provenance={
        "params": "VERIFIED seed article: 314B total / 13.2B active, 384 experts top-8",
        "max_context": f"{_DYN}/motif-3 deploy.yaml --max-model-len=262144",
        "dims": "THIRD-PARTY (MLX, tt-metal ports agree): 53 layers, hidden 4096, 80 Q heads, "
                "16 KV heads, K 192 / V 128, vocab 220,160",
        "full_attention_layers": "THIRD-PARTY 14 global layers (2 of 3 ports; the MLX port "
                                 "says 13), the other 39 slide over 128 keys + self",
        "kv_layout": "UNKNOWN which layout Motif's vLLM fork caches; the larger materialized "
                     "GQA layout (16 KV heads, K 192 + V 128) is used so pre-flight never "
                     "promises memory that is not there",
        "checkpoint_gb": "THIRD-PARTY 186.9 GB (runbook); ESTIMATED cross-check: routed experts "
                         "NVFP4 + 6.81B BF16 = 186.89 GB",
    })

B200_MODELS: dict[str, ModelArchitecture] = {
    AX_K2: AX_K2_ARCH, K_EXAONE: K_EXAONE_ARCH, SOLAR_OPEN2: SOLAR_OPEN2_ARCH,
    MOTIF_3: MOTIF_3_ARCH,
}


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as downloaded: decimal GB on disk and the precision of its weights."""

    size_gb: float
    precision: str
    provenance: str


_QWEN_FP8_SIZE = ("ESTIMATED 31.2 GB: 29.90B parameters of linear layers in FP8 e4m3 (1 byte) "
                  "with 128x128-block float32 scales (+0.02 %), plus the BF16 embedding and "
                  "untied lm_head (2 x 151,936 x 2,048), router gates and norms (1.27 GB); the "
                  "FP8 checkpoint's own index was not found (reference/models notes its "
                  "quantization_config as unconfirmed)")
CHECKPOINTS: dict[str, Checkpoint] = {
    QWEN3_30B_A3B_ID: Checkpoint(61.064245248, "bf16", (
        "THIRD-PARTY model.safetensors.index.json total_size 61,064,245,248 bytes, 16 shards "
        "(quoted in a public sglang weight-loading note); = 30.53B params x 2 bytes (BF16, "
        "the config's torch_dtype)")),
    QWEN3_30B_A3B_FP8_ID: Checkpoint(31.2, "fp8", _QWEN_FP8_SIZE),
    **{model: Checkpoint(arch.checkpoint_gb or 0.0, arch.checkpoint_precision or "",
                         arch.provenance.get("checkpoint_gb", ""))
       for model, arch in B200_MODELS.items()},
}


@dataclass(frozen=True)
class DraftModel:
    """An external draft checkpoint loaded beside the target (its weights take GPU memory)."""

    params_b: float
    bytes_per_param: float
    provenance: str

    @property
    def size_gb(self) -> float:
        return self.params_b * self.bytes_per_param


DRAFT_MODELS: dict[str, DraftModel] = {
    "skt/A.X-K2-EAGLE3": DraftModel(
        params_b=3.0, bytes_per_param=2.0,
        provenance="VERIFIED huggingface.co/skt listing: 3B; ESTIMATED BF16 weights"),
}


@dataclass(frozen=True)
class ServingRules:
    """What a checkpoint and its runtime demand of a stack; pre-flight refuses the rest."""

    # The recipe's runtime images; with `image_pinned` no other image may serve the model.
    recipe_images: tuple[str, ...] = ()
    image_pinned: bool = False
    speculative_methods: tuple[SpecMethod, ...] = ()
    refused_attention_backends: dict[AttentionBackend, str] = field(default_factory=dict)
    # The attention backend must be pinned to one of these (vLLM's auto choice is not enough).
    required_attention_backends: tuple[AttentionBackend, ...] = ()
    # With an FP8 KV cache only these attention backends may run (unset: vLLM's choice).
    fp8_kv_attention_backends: tuple[AttentionBackend, ...] = ()
    required_moe_backend: MoeBackend | None = None
    # Host memory each worker pod must request, per GPU of the pod.
    host_memory_gib_per_gpu: int = 0
    # serving.parsers fields the model's own responses need (snake_case field -> value).
    required_parsers: dict[str, str] = field(default_factory=dict)
    # Disaggregated: prefill and decode must run one pinned block size (serving.blockSize).
    disagg_pins_block_size: bool = False
    # Model-cache storage the recipe asks for (checkpoint plus download headroom), GiB.
    storage_gib_min: int = 0
    provenance: dict[str, str] = field(default_factory=dict)


_SEED = "VERIFIED seed article (design brief 'Second source', seeds/001)"
_QWEN_RULES = ServingRules(provenance={
    "speculative_methods": "VERIFIED config.json (reference/models/qwen3-30b-a3b.json) has no "
                           "MTP layers; no EAGLE3 draft for it is catalogued (DRAFT_MODELS)"})
SERVING_RULES: dict[str, ServingRules] = {
    QWEN3_30B_A3B_ID: _QWEN_RULES,
    QWEN3_30B_A3B_FP8_ID: _QWEN_RULES,
    AX_K2: ServingRules(
        recipe_images=("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-a.x-k2-post.1",),
        speculative_methods=(SpecMethod.EAGLE3,), storage_gib_min=600,
        required_attention_backends=(AttentionBackend.FLASHINFER_MLA_SPARSE,
                                     AttentionBackend.FLASHMLA_SPARSE),
        host_memory_gib_per_gpu=100,
        provenance={"recipe_images": "VERIFIED Dynamo release v1.4.1-a.x-k2-post.1",
                    "storage_gib_min": f"{_DYN}/ax-k2: model-cache PVC 600Gi",
                    "required_attention_backends": f"{_DYN}/ax-k2 agg-b200-chat deploy.yaml "
                    f"--attention-backend FLASHINFER_MLA_SPARSE; {_SEED}: sparse MLA runs "
                    "through FLASHINFER_MLA_SPARSE",
                    "host_memory_gib_per_gpu": f"{_SEED}: 400 GiB host memory per TP4 worker; "
                    f"{_DYN}/ax-k2 deploy.yaml requests memory: 400Gi per 4-GPU pod"}),
    K_EXAONE: ServingRules(
        recipe_images=("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-k-exaone-2.0-750b-post.1",),
        speculative_methods=(SpecMethod.EXAONE_MOE_MTP,),
        required_moe_backend=MoeBackend.FLASHINFER_CUTLASS, storage_gib_min=652,
        required_parsers={"chat_processor": "dynamo", "tool_call": "qwen3_coder",
                          "reasoning": "qwen3"},
        disagg_pins_block_size=True,
        provenance={
            "required_parsers": f"{_DYN}/k-exaone-2.0 disagg-b200-chat deploy.yaml: "
                                "--dyn-reasoning-parser qwen3 --dyn-tool-call-parser "
                                f"qwen3_coder; {_SEED}: plain vLLM parser flags alone do not "
                                "give the same response handling",
            "disagg_pins_block_size": f"{_DYN}/k-exaone-2.0 disagg deploy.yaml: prefill and "
                                      "decode MUST carry identical spec-dec and block-size "
                                      "settings (a mismatch gives silent garbage); both pin "
                                      "--block-size 64",
            "recipe_images": "VERIFIED Dynamo release v1.4.1-k-exaone-2.0-750b-post.1",
            "required_moe_backend": "VERIFIED release notes: FLASHINFER_CUTLASS is required; "
                                    "vLLM auto picks FLASHINFER_TRTLLM, which can silently "
                                    "corrupt long outputs on this checkpoint",
            "storage_gib_min": "VERIFIED recipe README: >= 700 GB free RWX storage (652 GiB)"}),
    SOLAR_OPEN2: ServingRules(
        recipe_images=("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-solar-open2-250b-post.1"
                       "@sha256:42fd3ed0607aa19b7d4c1b0a8f8aaaefefc8ec6292294ea2b5e6757353891f49",),
        refused_attention_backends={
            AttentionBackend.FLASH_ATTN: "VERIFIED Dynamo solar-open2-250b docs: forcing "
                                         "FlashAttention fails at start-up"},
        fp8_kv_attention_backends=(AttentionBackend.FLASHINFER,),
        storage_gib_min=1200,
        provenance={"fp8_kv_attention_backends": f"{_SEED}: the FP8 KV cache is used with the "
                                                 "FlashInfer attention path",
                    "speculative_methods": "VERIFIED release notes: speculative decoding is not "
                                           "supported on this checkpoint",
                    "storage_gib_min": f"{_DYN}/solar-open2-250b: 1200Gi model-cache PVC"}),
    MOTIF_3: ServingRules(
        recipe_images=("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-motif-3-dev.1",),
        image_pinned=True, speculative_methods=(SpecMethod.MTP,), storage_gib_min=244,
        provenance={
            "recipe_images": "VERIFIED ai-dynamo/dynamo recipes/motif-3 (agg and disagg "
                             "manifests, docs: dev.1; perf/results/disagg-round-robin-b200-"
                             "2026-10-08/README.md@3fada0a9: dev.1 at sha256:76e2612108f8...): "
                             "Motif's vLLM compatibility code; never swap it for another vLLM. "
                             "The seed article's dev.2 has no upstream trace",
            "storage_gib_min": "ESTIMATED 186.9 GB checkpoint x 1.4 download headroom (the "
                               "recipe's PVC size is UNKNOWN)"}),
}
