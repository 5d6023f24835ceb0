"""GPU memory and KV arithmetic to the byte (stacks.sizing.memory): exact weights (no rounding
hidden behind a tolerance), the MLA latent at BF16, integer KV heads, one linear-attention layer,
every field of the memory row. Hand arithmetic in the comments. (`make mutate`: group
`memory`.)"""

from __future__ import annotations

import pytest

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.catalog.model_arch import AttentionKind
from stacks.catalog.models import MODELS, QWEN3_30B_A3B
from stacks.sizing.memory import (
    GIB,
    WorkerMemory,
    hybrid_page_tokens,
    kv_bytes_per_token_per_gpu,
    kv_heads_per_gpu,
    weights_bytes_per_gpu,
    worker_memory,
)

AX_K2 = MODELS["skt/A.X-K2-NVFP4"]
P4D = INSTANCE_TYPES["p4d.24xlarge"]


def test_weights_are_exact():
    # 30.5e9 params x 2 B = 61,000,000,000 B, exactly representable: no tolerance needed
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "bf16", 1) == 61_000_000_000.0
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "bf16", 4) == 15_250_000_000.0
    # a checkpoint of known size: 398 GB on disk (A.X K2), split over TP4
    assert AX_K2.checkpoint_gb == 398.0
    assert weights_bytes_per_gpu(AX_K2, "nvfp4", 4) == 99_500_000_000.0


def test_kv_heads_per_gpu_are_whole_heads():
    assert [kv_heads_per_gpu(QWEN3_30B_A3B, tp) for tp in (1, 2, 4, 8)] == [4, 2, 1, 1]
    assert all(type(kv_heads_per_gpu(QWEN3_30B_A3B, tp)) is int for tp in (1, 2, 4, 8))
    assert kv_heads_per_gpu(QWEN3_30B_A3B.model_copy(update={"kv_heads": 6}), 4) == 1


def test_mla_latent_at_bf16_and_fp8():
    assert AX_K2.attention_kind == AttentionKind.MLA
    layer_fp8 = AX_K2.mla_latent_dim * 1 + AX_K2.indexer_bytes_per_token_layer
    layer_bf16 = AX_K2.mla_latent_dim * 2 + AX_K2.indexer_bytes_per_token_layer
    assert kv_bytes_per_token_per_gpu(AX_K2, 4, 1.0) == AX_K2.full_layers * layer_fp8
    assert kv_bytes_per_token_per_gpu(AX_K2, 4, 2.0) == AX_K2.full_layers * layer_bf16
    assert kv_bytes_per_token_per_gpu(AX_K2, 1, 2.0) == kv_bytes_per_token_per_gpu(AX_K2, 8, 2.0)


def test_one_linear_attention_layer_sets_the_page():
    one = QWEN3_30B_A3B.model_copy(update={"attention_kind": AttentionKind.HYBRID_LINEAR,
                                           "linear_attention_layers": 1,
                                           "linear_state_bytes_per_layer": 4_000_000})
    # TP4, BF16: 1 KV head x (128 + 128) x 2 B = 512 B per token per layer;
    # state 4e6 / 4 = 1e6 B per GPU -> 1e6 / 512 = 1953.1 tokens -> next multiple of 16: 1968
    assert hybrid_page_tokens(one, 4, 2.0) == 1968
    assert hybrid_page_tokens(QWEN3_30B_A3B, 4, 2.0) == 0


def _worker(**kw):
    args = {"arch": QWEN3_30B_A3B, "precision": "bf16", "kv_cache_dtype": "auto",
            "instance": P4D, "role": "prefill", "replicas": 3, "tp": 4,
            "max_model_len": 32768, "gpu_memory_utilization": 0.9, "overhead_gib": 4.0}
    return worker_memory(**{**args, **kw})


def test_every_field_of_the_memory_row():
    mem = _worker(concurrent_sequences=8)
    assert (mem.role, mem.replicas, mem.tensor_parallel_size, mem.instance_type, mem.gpu) == (
        "prefill", 3, 4, "p4d.24xlarge", "A100-SXM4-40GB")
    assert (mem.gpu_memory_gib, mem.overhead_gib, mem.full_sequence_tokens) == (40.0, 4.0, 32768)
    assert mem.weights_gib_per_gpu == 15_250_000_000 / GIB          # exactly: no draft model
    assert (mem.concurrent_sequences, mem.sequence_fixed_bytes_per_gpu, mem.page_tokens) == (
        8, 0, 0)
    # a draft model's weights split over TP too: 1e9 B / 4
    draft = _worker(draft_weights_bytes=1e9)
    assert draft.weights_gib_per_gpu == (15_250_000_000 + 250_000_000) / GIB


def test_the_hybrid_page_reaches_the_row():
    solar = MODELS["nota-ai/Solar-Open2-250B-Nota-NVFP4"]
    mem = worker_memory(arch=solar, precision="nvfp4", kv_cache_dtype="fp8",
                        instance=INSTANCE_TYPES["p6-b200.48xlarge"], role="worker", replicas=1,
                        tp=2, max_model_len=32768, gpu_memory_utilization=0.9,
                        overhead_gib=4.0, concurrent_sequences=4)
    assert mem.page_tokens == hybrid_page_tokens(solar, 2, 1.0) > 0
    assert mem.concurrent_sequences == 4 and mem.sequence_fixed_bytes_per_gpu > 0


def test_a_gpu_less_instance_is_refused_by_name():
    with pytest.raises(ValueError) as err:
        _worker(instance=INSTANCE_TYPES["m7i.4xlarge"])
    assert str(err.value) == "m7i.4xlarge has no GPU"


def test_a_worker_that_needs_exactly_its_budget_fits():
    def mem(budget_gib: float) -> WorkerMemory:
        return WorkerMemory(role="worker", replicas=1, tensor_parallel_size=4,
                            instance_type="p4d.24xlarge", gpu="A100-SXM4-40GB",
                            gpu_memory_gib=40.0, budget_gib=budget_gib,
                            weights_gib_per_gpu=14.0, overhead_gib=4.0,
                            kv_bytes_per_token_per_gpu=24_576, full_sequence_tokens=32768,
                            full_sequence_kv_gib=0.75, kv_capacity_tokens=0,
                            sequence_fixed_bytes_per_gpu=2**29)
    # 14 + 4 + 0.75 + 2^29 B (0.5 GiB) = 19.25 GiB, exact in binary floating point
    assert mem(19.25).needed_gib == 19.25
    assert mem(19.25).fits                      # exactly the budget: it fits
    assert not mem(19.0).fits
