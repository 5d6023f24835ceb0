"""Memory arithmetic against hand-computed values for Qwen3-30B-A3B.

Every expected number below is worked out by hand in the comments (bytes as integers where
possible), independently of stacks/sizing/memory.py; the code must reproduce them.
"""

from __future__ import annotations

import json

import pytest
from reference import reference_file

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.catalog.models import MODELS, QWEN3_30B_A3B
from stacks.config.loader import load_stack
from stacks.preflight.run import check_stack
from stacks.sizing.memory import (
    kv_bytes_per_token_per_gpu,
    weights_bytes_per_gpu,
    worker_memory,
)

GIB = 2**30
# config.json of Qwen/Qwen3-30B-A3B in the reference folder (tests/reference.py; read, never
# copied).
MODEL_CONFIG = "models/qwen3-30b-a3b.json"


def test_catalogue_architecture_matches_the_model_config() -> None:
    config = json.loads(reference_file(MODEL_CONFIG).read_text())["config"]
    arch = MODELS["Qwen/Qwen3-30B-A3B"]
    assert arch.layers == config["num_hidden_layers"] == 48
    assert arch.attention_heads == config["num_attention_heads"] == 32
    assert arch.kv_heads == config["num_key_value_heads"] == 4
    assert arch.head_dim == config["head_dim"] == 128
    assert arch.hidden_size == config["hidden_size"] == 2048
    assert arch.vocab_size == config["vocab_size"] == 151936
    assert arch.experts == config["num_experts"] == 128
    assert arch.experts_per_token == config["num_experts_per_tok"] == 8
    assert arch.max_context == config["max_position_embeddings"] == 40960
    # the FP8 checkpoint is the same network
    assert MODELS["Qwen/Qwen3-30B-A3B-FP8"] == arch


def test_weights_per_gpu() -> None:
    # BF16: 30.5e9 params x 2 B = 61.0e9 B for the whole model
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "bf16", 1) == pytest.approx(61.0e9)
    # TP4 splits every weight (experts included) four ways: 61.0e9 / 4 = 15.25e9 B
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "bf16", 4) == pytest.approx(15.25e9)
    # 15.25e9 / 2**30 = 14.2026... GiB
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "bf16", 4) / GIB == pytest.approx(14.2026,
                                                                                 abs=1e-4)
    # FP8: 1 B/param -> 30.5e9 B; NVFP4: 0.5 B + one 1-byte scale per 16 values = 0.5625 B
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "fp8", 1) == pytest.approx(30.5e9)
    assert weights_bytes_per_gpu(QWEN3_30B_A3B, "nvfp4", 1) == pytest.approx(17.15625e9)


def test_kv_bytes_per_token() -> None:
    # whole model, BF16 KV: 2 (K and V) x 48 layers x 4 KV heads x 128 head_dim x 2 B = 98,304
    assert kv_bytes_per_token_per_gpu(QWEN3_30B_A3B, 1, 2.0) == 98_304
    # TP2: 2 KV heads per GPU -> 49,152; TP4: 1 KV head per GPU -> 24,576
    assert kv_bytes_per_token_per_gpu(QWEN3_30B_A3B, 2, 2.0) == 49_152
    assert kv_bytes_per_token_per_gpu(QWEN3_30B_A3B, 4, 2.0) == 24_576
    # TP8 > 4 KV heads: vLLM replicates a head on each GPU, so still 1 head = 24,576 (not 12,288)
    assert kv_bytes_per_token_per_gpu(QWEN3_30B_A3B, 8, 2.0) == 24_576
    # FP8 KV cache halves it: 2 x 48 x 1 x 128 x 1 B = 12,288 at TP4
    assert kv_bytes_per_token_per_gpu(QWEN3_30B_A3B, 4, 1.0) == 12_288


def a100_worker(tp: int, precision: str = "bf16", kv_cache_dtype: str = "auto"):
    return worker_memory(arch=QWEN3_30B_A3B, precision=precision,
                         kv_cache_dtype=kv_cache_dtype,
                         instance=INSTANCE_TYPES["p4d.24xlarge"], role="worker", replicas=4,
                         tp=tp, max_model_len=32768, gpu_memory_utilization=0.9,
                         overhead_gib=4.0)


def test_bf16_tp4_on_a100_40gb_by_hand() -> None:
    mem = a100_worker(tp=4)
    # budget: 40 GiB x 0.9 = 36 GiB = 38,654,705,664 B
    assert mem.gpu_memory_gib == 40.0
    assert mem.budget_gib == pytest.approx(36.0)
    assert mem.weights_gib_per_gpu == pytest.approx(14.2026, abs=1e-4)
    assert mem.kv_bytes_per_token_per_gpu == 24_576
    # one 32,768-token sequence: 32,768 x 24,576 B = 805,306,368 B = 0.75 GiB per GPU
    assert mem.full_sequence_kv_gib * GIB == pytest.approx(805_306_368)
    assert mem.full_sequence_kv_gib == pytest.approx(0.75)
    # needed: 14.2026 + 4 + 0.75 = 18.9527 GiB <= 36 GiB
    assert mem.needed_gib == pytest.approx(18.9527, abs=1e-4)
    assert mem.fits
    # KV capacity: 38,654,705,664 - 15,250,000,000 (weights) - 4,294,967,296 (4 GiB overhead)
    # = 19,109,738,368 B free; / 24,576 B per token = 777,577.2 -> 777,577 tokens
    assert mem.kv_capacity_tokens == 19_109_738_368 // 24_576 == 777_577


def test_bf16_tp1_does_not_fit_a100_40gb_but_tp2_does() -> None:
    # TP1: 61.0e9 B = 56.81 GiB of weights alone > 36 GiB
    tp1 = a100_worker(tp=1)
    assert tp1.weights_gib_per_gpu == pytest.approx(56.81, abs=0.01)
    assert not tp1.fits
    assert tp1.kv_capacity_tokens == 0
    # TP2: 28.4053 + 4 + 32,768 x 49,152 B (1.5 GiB) = 33.9053 GiB <= 36 GiB
    tp2 = a100_worker(tp=2)
    assert tp2.needed_gib == pytest.approx(33.9053, abs=1e-4)
    assert tp2.fits


def test_fp8_tp2_on_l40s_by_hand() -> None:
    mem = worker_memory(arch=QWEN3_30B_A3B, precision="fp8", kv_cache_dtype="auto",
                        instance=INSTANCE_TYPES["g6e.12xlarge"], role="worker", replicas=2,
                        tp=2, max_model_len=32768, gpu_memory_utilization=0.9,
                        overhead_gib=4.0)
    # an L40S reports 46,068 MiB, not 48 GiB: budget 46,068 x 2**20 x 0.9 = 43,475,219,251.2 B
    assert mem.budget_gib * GIB == pytest.approx(43_475_219_251.2)
    # weights 30.5e9 x 1 B / 2 = 15.25e9 B; KV is BF16 ("auto"): 2 heads/GPU -> 49,152 B/token
    assert mem.kv_bytes_per_token_per_gpu == 49_152
    # (43,475,219,251.2 - 15,250,000,000 - 4,294,967,296) / 49,152 = 486,862.2 -> 486,862
    assert mem.kv_capacity_tokens == 486_862


def test_preflight_table_of_a_shipped_stack_is_the_hand_computation() -> None:
    report = check_stack("agg-a100")
    (row,) = report.memory
    assert (row.role, row.replicas, row.tensor_parallel_size) == ("worker", 4, 4)
    assert row.weights_gib_per_gpu == pytest.approx(14.2026, abs=1e-4)
    assert row.kv_bytes_per_token_per_gpu == 24_576
    assert row.kv_capacity_tokens == 777_577
    assert load_stack("agg-a100").serving.runtime_overhead_gib == row.overhead_gib == 4.0
