"""GPU memory arithmetic for one worker (pure): weights, KV cache per token, KV capacity.

Per GPU of a worker with tensor-parallel size TP:
  weights/GPU       = checkpoint size on disk / TP when the catalogue knows it, else
                      total params x bytes/param / TP           (TP and EP both split the experts)
                      + an external draft model's weights / TP (speculative decoding)
  KV bytes/token    = full-attention layers x per-layer bytes, where a layer caches
                      GQA: KV heads per GPU x (K head_dim + V head_dim) x bytes/element
                           (vLLM replicates a KV head when TP exceeds the KV head count)
                      MLA: the latent (mla_latent_dim x bytes/element) + indexer key bytes,
                           replicated on every TP rank
  per sequence      = fixed bytes a running sequence holds whatever its length: sliding-window
                      layers (window tokens each) and linear-attention state (hybrid models,
                      split over TP)
  budget            = GPU memory x gpu_memory_utilization
  fits              = weights/GPU + overhead + KV of one max_model_len sequence + one
                      sequence's fixed bytes <= budget
  KV capacity       = (budget - weights/GPU - overhead - concurrent sequences x fixed bytes)
                      / KV bytes/token                          tokens per replica

Hybrid models (vLLM's hybrid KV allocator) use one page size for every layer: the attention
block grows until its page holds one linear-attention state, `page_tokens` (a multiple of 16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stacks.catalog.instances import InstanceType
from stacks.catalog.model_arch import AttentionKind, ModelArchitecture
from stacks.catalog.models import BYTES_PER_PARAM

GIB = 1024**3


@dataclass(frozen=True)
class WorkerMemory:
    role: str
    replicas: int
    tensor_parallel_size: int
    instance_type: str
    gpu: str
    gpu_memory_gib: float
    budget_gib: float
    weights_gib_per_gpu: float
    overhead_gib: float
    kv_bytes_per_token_per_gpu: int
    full_sequence_tokens: int
    full_sequence_kv_gib: float
    kv_capacity_tokens: int
    # Fixed bytes per running sequence (sliding windows, linear-attention state) and how many
    # sequences the capacity reserves them for; the hybrid page in tokens (0: not hybrid).
    sequence_fixed_bytes_per_gpu: int = 0
    concurrent_sequences: int = 1
    page_tokens: int = 0

    @property
    def sequence_fixed_gib(self) -> float:
        return self.sequence_fixed_bytes_per_gpu / GIB

    @property
    def needed_gib(self) -> float:
        return (self.weights_gib_per_gpu + self.overhead_gib + self.full_sequence_kv_gib
                + self.sequence_fixed_gib)

    @property
    def fits(self) -> bool:
        return self.needed_gib <= self.budget_gib


def kv_heads_per_gpu(arch: ModelArchitecture, tp: int) -> int:
    return max(1, arch.kv_heads // tp)


def _gqa_bytes_per_token_layer(arch: ModelArchitecture, tp: int, kv_bytes: float) -> float:
    k, v = arch.head_dim, arch.v_head_dim or arch.head_dim
    return kv_heads_per_gpu(arch, tp) * (k + v) * kv_bytes


def kv_bytes_per_token_per_gpu(arch: ModelArchitecture, tp: int, kv_bytes: float) -> int:
    if arch.attention_kind == AttentionKind.MLA:
        layer = arch.mla_latent_dim * kv_bytes + arch.indexer_bytes_per_token_layer
    else:
        layer = _gqa_bytes_per_token_layer(arch, tp, kv_bytes)
    return int(arch.full_layers * layer)


def sequence_fixed_bytes_per_gpu(arch: ModelArchitecture, tp: int, kv_bytes: float) -> int:
    """Bytes one running sequence holds regardless of its length."""
    windows = sum(w.layers * w.window for w in arch.sliding_windows)
    sliding = windows * _gqa_bytes_per_token_layer(arch, tp, kv_bytes)
    state = arch.linear_attention_layers * arch.linear_state_bytes_per_layer / tp
    return int(sliding + state)


def hybrid_page_tokens(arch: ModelArchitecture, tp: int, kv_bytes: float) -> int:
    """Tokens per attention block when one page must hold a linear-attention state (vLLM
    raises the block size to a multiple of 16 at or above state bytes / attention bytes)."""
    if arch.linear_attention_layers == 0:
        return 0
    state = arch.linear_state_bytes_per_layer / tp
    return 16 * math.ceil(state / _gqa_bytes_per_token_layer(arch, tp, kv_bytes) / 16)


def weights_bytes_per_gpu(arch: ModelArchitecture, precision: str, tp: int) -> float:
    if arch.checkpoint_gb is not None:
        return arch.checkpoint_gb * 1e9 / tp
    return arch.total_params_b * 1e9 * BYTES_PER_PARAM[precision] / tp


def kv_element_bytes(kv_cache_dtype: str) -> float:
    # "auto" stores KV in the activation dtype, which is BF16 for BF16, FP8 and NVFP4 checkpoints.
    return 1.0 if kv_cache_dtype == "fp8" else 2.0


def worker_memory(*, arch: ModelArchitecture, precision: str, kv_cache_dtype: str,
                  instance: InstanceType, role: str, replicas: int, tp: int,
                  max_model_len: int, gpu_memory_utilization: float,
                  overhead_gib: float, draft_weights_bytes: float = 0.0,
                  concurrent_sequences: int = 1) -> WorkerMemory:
    if instance.gpu is None:
        raise ValueError(f"{instance.name} has no GPU")
    gpu_gib = instance.gpu.memory_gib
    budget = gpu_gib * gpu_memory_utilization
    weights = (weights_bytes_per_gpu(arch, precision, tp) + draft_weights_bytes / tp) / GIB
    kv_bytes = kv_element_bytes(kv_cache_dtype)
    per_token = kv_bytes_per_token_per_gpu(arch, tp, kv_bytes)
    fixed = sequence_fixed_bytes_per_gpu(arch, tp, kv_bytes)
    free_bytes = max(0.0, (budget - weights - overhead_gib) * GIB
                     - concurrent_sequences * fixed)
    return WorkerMemory(
        role=role, replicas=replicas, tensor_parallel_size=tp, instance_type=instance.name,
        gpu=instance.gpu.name, gpu_memory_gib=gpu_gib, budget_gib=budget,
        weights_gib_per_gpu=weights, overhead_gib=overhead_gib,
        kv_bytes_per_token_per_gpu=per_token, full_sequence_tokens=max_model_len,
        full_sequence_kv_gib=max_model_len * per_token / GIB,
        kv_capacity_tokens=int(free_bytes // per_token),
        sequence_fixed_bytes_per_gpu=fixed, concurrent_sequences=concurrent_sequences,
        page_tokens=hybrid_page_tokens(arch, tp, kv_bytes),
    )
