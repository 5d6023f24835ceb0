"""Memory arithmetic of the four B200 models against hand-computed values.

Each expected number is worked out in the comments from the catalogue's facts (labelled there
VERIFIED / THIRD-PARTY / ESTIMATED), independently of stacks/sizing/memory.py. A B200 reports
183,359 MiB. The Qwen3 arithmetic is tests/test_memory.py's and stays as it was.
"""

from __future__ import annotations

import pytest
from recipe_stacks import changed, problems

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.catalog.model_arch import PROVENANCE_LABELS
from stacks.catalog.model_catalog import AX_K2, B200_MODELS, K_EXAONE, MOTIF_3, SOLAR_OPEN2
from stacks.catalog.models import MODELS
from stacks.preflight.run import check_stack
from stacks.sizing.memory import (
    hybrid_page_tokens,
    kv_bytes_per_token_per_gpu,
    sequence_fixed_bytes_per_gpu,
    weights_bytes_per_gpu,
    worker_memory,
)

GIB = 2**30
B200_BYTES = 183_359 * 2**20
P6 = INSTANCE_TYPES["p6-b200.48xlarge"]


def test_catalogue_knows_the_four_models_with_labelled_provenance() -> None:
    assert set(B200_MODELS) == {AX_K2, K_EXAONE, SOLAR_OPEN2, MOTIF_3} <= set(MODELS)
    for arch in B200_MODELS.values():
        assert arch.checkpoint_precision == "nvfp4" and arch.checkpoint_gb
        assert arch.provenance and all(v.startswith(PROVENANCE_LABELS)
                                       for v in arch.provenance.values())
    assert MODELS[SOLAR_OPEN2].max_context == 1_048_576
    assert {MODELS[m].max_context for m in (AX_K2, K_EXAONE, MOTIF_3)} == {262_144}


def test_kv_bytes_per_token_per_gpu_fp8() -> None:
    # A.X K2, MLA: 61 layers x (576 latent x 1 B + 132 B indexer) = 43,188, on every TP rank
    assert kv_bytes_per_token_per_gpu(MODELS[AX_K2], 4, 1.0) == 43_188
    assert kv_bytes_per_token_per_gpu(MODELS[AX_K2], 8, 1.0) == 43_188
    # K-EXAONE, GQA: 20 full layers x 8 KV heads / TP4 = 2 x (128 + 128) x 1 B = 10,240
    assert kv_bytes_per_token_per_gpu(MODELS[K_EXAONE], 4, 1.0) == 10_240
    # Solar Open 2: 12 GQA layers x 4 heads (TP2) x 256 B = 12,288
    assert kv_bytes_per_token_per_gpu(MODELS[SOLAR_OPEN2], 2, 1.0) == 12_288
    # Motif 3, materialized GQA: 14 global layers x 8 heads (TP2) x (192 + 128) B = 35,840
    assert kv_bytes_per_token_per_gpu(MODELS[MOTIF_3], 2, 1.0) == 35_840


def test_fixed_bytes_per_sequence() -> None:
    # K-EXAONE sliding layers: (57 x 128 + 1 x 4096) tokens x 2 heads x 256 B = 5,832,704
    assert sequence_fixed_bytes_per_gpu(MODELS[K_EXAONE], 4, 1.0) == 5_832_704
    # Solar KDA state: 36 layers x 4,341,760 B / TP2 = 78,151,680 (74.5 MiB) per sequence
    assert sequence_fixed_bytes_per_gpu(MODELS[SOLAR_OPEN2], 2, 1.0) == 78_151_680
    # Motif sliding: 39 layers x 129 tokens x 8 heads x 320 B = 12,879,360
    assert sequence_fixed_bytes_per_gpu(MODELS[MOTIF_3], 2, 1.0) == 12_879_360
    assert sequence_fixed_bytes_per_gpu(MODELS[AX_K2], 4, 1.0) == 0


def test_solar_hybrid_page_is_the_2128_tokens_the_recipe_reports() -> None:
    # one KDA layer's state per GPU at TP2: 2,170,880 B; attention per token per layer at FP8:
    # 4 heads x 256 B = 1,024 B -> 2,120 tokens -> next multiple of 16 = 2,128
    assert hybrid_page_tokens(MODELS[SOLAR_OPEN2], 2, 1.0) == 2128
    # TP4: half the state (1,085,440 B) over half the heads (512 B/token): the same page
    assert hybrid_page_tokens(MODELS[SOLAR_OPEN2], 4, 1.0) == 2128
    # the docs' other figure, ~1072 tokens, is the same arithmetic with BF16 KV
    assert hybrid_page_tokens(MODELS[SOLAR_OPEN2], 2, 2.0) == 1072
    assert hybrid_page_tokens(MODELS[K_EXAONE], 4, 1.0) == 0


def test_weights_per_gpu_come_from_the_checkpoint_size() -> None:
    # params x 0.5625 B would undercount: parts of the NVFP4 checkpoints stay BF16/FP8
    assert weights_bytes_per_gpu(MODELS[AX_K2], "nvfp4", 4) == pytest.approx(398e9 / 4)
    assert weights_bytes_per_gpu(MODELS[K_EXAONE], "nvfp4", 4) == pytest.approx(132.5e9)
    assert weights_bytes_per_gpu(MODELS[K_EXAONE], "nvfp4", 2) == pytest.approx(265e9)
    assert weights_bytes_per_gpu(MODELS[SOLAR_OPEN2], "nvfp4", 2) == pytest.approx(76.5e9)
    assert weights_bytes_per_gpu(MODELS[MOTIF_3], "nvfp4", 2) == pytest.approx(93.45e9)


def _b200(model: str, tp: int, util: float, max_len: int, **kw) -> object:
    return worker_memory(arch=MODELS[model], precision="nvfp4", kv_cache_dtype="fp8",
                         instance=P6, role="worker", replicas=1, tp=tp, max_model_len=max_len,
                         gpu_memory_utilization=util, overhead_gib=14.0, **kw)


def test_k_exaone_tp4_capacity_is_close_to_the_published_2_99_m_tokens() -> None:
    mem = _b200(K_EXAONE, 4, 0.93, 262_144, concurrent_sequences=14)
    # (183,359 MiB x 0.93 - 132.5e9 B - 14 GiB - 14 x 5,832,704 B) / 10,240 B
    free = B200_BYTES * 0.93 - 132.5e9 - 14 * GIB - 14 * 5_832_704
    assert mem.kv_capacity_tokens == int(free // 10_240) == 3_046_210
    # VERIFIED recipe README: 2.99 M tokens measured at TP4; the overhead is calibrated on it
    assert mem.kv_capacity_tokens == pytest.approx(2.99e6, rel=0.03)


def test_k_exaone_does_not_fit_tp2() -> None:
    mem = _b200(K_EXAONE, 2, 0.93, 262_144)
    # 265e9 B = 246.8 GiB of weights alone > 183,359 MiB x 0.93 = 166.5 GiB
    assert mem.weights_gib_per_gpu == pytest.approx(246.8, abs=0.05)
    assert not mem.fits and mem.kv_capacity_tokens == 0


def test_solar_capacity_reserves_the_state_of_every_running_sequence() -> None:
    one = _b200(SOLAR_OPEN2, 2, 0.95, 1_048_576)
    twenty = _b200(SOLAR_OPEN2, 2, 0.95, 1_048_576, concurrent_sequences=20)
    # 19 more sequences x 78,151,680 B of state / 12,288 B per token = 120,840 tokens fewer
    assert one.kv_capacity_tokens - twenty.kv_capacity_tokens in (120_840, 120_841)
    # fits: 71.25 GiB + 14 + one 1M-token sequence (12 GiB) + its state (0.07 GiB) < 170.1
    assert twenty.fits and twenty.needed_gib == pytest.approx(97.32, abs=0.01)


def test_solar_tp1_does_not_fit_the_1m_context() -> None:
    # 153e9 B = 142.5 GiB + 14 + 1,048,576 x 24,576 B (24 GiB) > 0.9 x 179.06 = 161.2 GiB
    assert not _b200(SOLAR_OPEN2, 1, 0.9, 1_048_576).fits
    stack = changed("baseline-b200-solar2", {"serving.workers.0.tensorParallelSize": 1,
                                             "serving.workers.0.replicas": 4})
    (msg,) = [p.message for p in problems(stack) if p.field.endswith("tensorParallelSize")]
    assert "1048576-token sequence" in msg and "sliding-window/linear state" in msg


def test_eagle3_draft_weights_are_counted() -> None:
    # A.X K2 TP4: 398e9 / 4 + 3e9 x 2 B (EAGLE3 draft, BF16) / 4 = 101.0e9 B = 94.06 GiB
    (row,) = check_stack("agg-b200-axk2").memory
    assert row.weights_gib_per_gpu * GIB == pytest.approx(101.0e9)
    (plain,) = check_stack("baseline-b200-axk2").memory
    assert plain.weights_gib_per_gpu * GIB == pytest.approx(99.5e9)


@pytest.mark.parametrize(("name", "weights", "capacity"), [
    # (183,359 MiB x util - weights - 14 GiB - seqs x fixed) // KV bytes per token
    ("agg-b200-axk2", 101.0e9, (B200_BYTES * 0.9 - 101.0e9 - 14 * GIB) // 43_188),
    ("agg-b200-kexaone", 132.5e9,
     (B200_BYTES * 0.93 - 132.5e9 - 14 * GIB - 14 * 5_832_704) // 10_240),
    ("agg-b200-solar2", 76.5e9,
     (B200_BYTES * 0.95 - 76.5e9 - 14 * GIB - 20 * 78_151_680) // 12_288),
    ("agg-b200-motif3", 93.45e9,
     (B200_BYTES * 0.85 - 93.45e9 - 14 * GIB - 22 * 12_879_360) // 35_840),
])
def test_preflight_table_rows_of_the_recipes(name: str, weights: float, capacity: float):
    (row,) = check_stack(name).memory
    assert row.weights_gib_per_gpu * GIB == pytest.approx(weights)
    assert row.kv_capacity_tokens == int(capacity)
    assert row.fits
