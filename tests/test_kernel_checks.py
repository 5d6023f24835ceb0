"""Kernel choices only the target GPU refuses (stacks/preflight/kernel_checks.py, pure): the MoE
backend x quantization x GPU table and the block-FP8 shard rule, each as vLLM applies it (the
lines read in the installed vLLM 0.31.0, 0.28.0 and 0.26.0), and each refused by `stacks check`
with the field and the fix."""

from __future__ import annotations

import pytest
from stack_variants import both, check, copy_shipped, edit, variant_config, write_stack

from stacks.catalog.instances import A100_40GB, B200, H100, L40S
from stacks.preflight.kernel_checks import block_fp8_problem, moe_backend_problem

F = "dynamo-bench:"
A100, L40S_, H100_, B200_ = (A100_40GB.compute_capability, L40S.compute_capability,
                             H100.compute_capability, B200.compute_capability)


def test_the_catalogue_gives_each_gpu_its_compute_capability():
    assert (A100, L40S_, H100_, B200_) == ((8, 0), (8, 9), (9, 0), (10, 0))


# (quantization, backend, compute capability) -> refused?
TABLE = {
    # BF16 MoE: only triton / flashinfer_* map (oracle/unquantized.py:180-194)
    ("bf16", "marlin", B200_): True, ("bf16", "cutlass", H100_): True,
    ("bf16", "deep_gemm", H100_): True, ("bf16", "flashinfer_cutedsl", B200_): True,
    ("bf16", "triton", A100): False,
    # flashinfer_trtllm BF16 kernels: Blackwell only (trtllm_bf16_moe.py:95-102)
    ("bf16", "flashinfer_trtllm", A100): True, ("bf16", "flashinfer_trtllm", H100_): True,
    ("bf16", "flashinfer_trtllm", B200_): False,
    # FlashInferExperts: 9.0, 10.x, 12.x (flashinfer_cutlass_moe.py:128-139)
    ("bf16", "flashinfer_cutlass", A100): True, ("bf16", "flashinfer_cutlass", L40S_): True,
    ("bf16", "flashinfer_cutlass", H100_): False,
    # FP8: cutlass disabled for FP8 checkpoints; triton's FP8 schemes need 8.9; marlin on all
    ("fp8", "cutlass", H100_): True, ("fp8", "triton", A100): True,
    ("fp8", "triton", L40S_): False, ("fp8", "marlin", A100): False,
    ("fp8", "deep_gemm", L40S_): True, ("fp8", "deep_gemm", H100_): False,
    ("fp8", "flashinfer_cutedsl", B200_): True,
    # NVFP4 on B200: the recipes' pins run; triton has no NVFP4 MoE kernel
    ("nvfp4", "flashinfer_trtllm", B200_): False, ("nvfp4", "flashinfer_cutlass", B200_): False,
    ("nvfp4", "triton", B200_): True, ("nvfp4", "flashinfer_cutedsl", H100_): True,
    ("bf16", "auto", A100): False,
}


@pytest.mark.parametrize("cell", TABLE, ids=lambda c: "-".join(map(str, c)))
def test_the_moe_backend_table(cell):
    quantization, backend, cc = cell
    assert (moe_backend_problem(quantization, backend, "GPU", cc) is not None) == TABLE[cell]


def test_the_block_fp8_shard_rule_follows_each_vllm():
    qwen_fp8 = dict(intermediate=768, hidden=2048, block=(128, 128), expert_parallel=False)
    # vLLM 0.28.0 / 0.26.0: 768 / 4 = 192 is not whole 128-blocks (fp8.py:534-546 / 562-574)
    assert "requires whole blocks" in block_fp8_problem("0.28.0", tp=4, backend="auto",
                                                        **qwen_fp8)
    assert block_fp8_problem("0.26.0", tp=2, backend="auto", **qwen_fp8) is None  # 384
    # vLLM 0.31.0 refines the blocks to gcd(128, 128, 192, 2048) = 64 for the auto choice,
    # and pads a pinned backend's shard to 256 (oracle/fp8.py:285-388)
    assert block_fp8_problem("0.31.0", tp=4, backend="auto", **qwen_fp8) is None
    assert block_fp8_problem("0.31.0", tp=4, backend="flashinfer_cutlass", **qwen_fp8) is None
    # expert parallelism keeps each expert whole on one rank
    assert block_fp8_problem("0.28.0", tp=4, backend="auto",
                             **{**qwen_fp8, "expert_parallel": True}) is None
    # what 0.31.0 cannot fix: no block >= 32 divides the shard (200: gcd 8), nor can a pinned
    # backend pad non-square blocks
    odd = dict(intermediate=400, hidden=2048, block=(128, 128), expert_parallel=False)
    assert "gcd 8" in block_fp8_problem("0.31.0", tp=2, backend="auto", **odd)
    assert block_fp8_problem("0.31.0", tp=4, backend="deep_gemm", intermediate=768,
                             hidden=2048, block=(128, 64), expert_parallel=False)


def _variants(tmp_path, cases):
    stacks_dir = copy_shipped(tmp_path)
    for name, (source, mutate) in cases.items():
        write_stack(stacks_dir, name, variant_config(source, mutate))
    return stacks_dir


def test_stacks_check_refuses_a_moe_backend_the_gpu_cannot_run(tmp_path):
    stacks_dir = _variants(tmp_path, {
        "kc-trtllm-a100": ("agg-a100", edit("serving.kernels", {
            "moeBackend": "flashinfer_trtllm", "delivery": "flags"})),
        "kc-marlin-bf16": ("agg-a100", edit("serving.kernels", {
            "moeBackend": "marlin", "delivery": "flags"})),
        "kc-triton-a100": ("agg-a100", edit("serving.kernels", {
            "moeBackend": "triton", "delivery": "flags"}))})
    code, out = check(stacks_dir, "kc-trtllm-a100")
    assert code == 2, out
    assert (f"{F}serving.kernels.moeBackend: serving.workers[0] (p4d): the flashinfer_trtllm "
            "MoE kernel for bf16 weights runs only on compute capability 10.x (Blackwell), and "
            "A100-SXM4-40GB is 8.0") in out, out
    assert "trtllm_bf16_moe.py:95-102" in out and "fix: pin one that runs there (triton)" in out
    code, out = check(stacks_dir, "kc-marlin-bf16")
    assert code == 2 and "refuses the marlin MoE backend for bf16 weights on every GPU" in out
    assert "oracle/unquantized.py:180-194" in out
    code, out = check(stacks_dir, "kc-triton-a100")
    assert code == 0, out


def test_stacks_check_refuses_a_block_fp8_shard_the_image_cannot_load(tmp_path):
    tp4 = edit("serving.workers.0", {"role": "worker", "replicas": 1, "tensorParallelSize": 4,
                                     "nodeGroup": "g6e", "maxModelLen": 32768})
    on_150 = both(tp4, edit("serving.dynamoVersion", "1.5.0"),
                  edit("serving.image", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0"))
    stacks_dir = _variants(tmp_path, {"kc-fp8-tp4-150": ("agg-l40s-fp8", on_150),
                                      "kc-fp8-tp4-161": ("agg-l40s-fp8", tp4)})
    code, out = check(stacks_dir, "kc-fp8-tp4-150")
    assert code == 2, out
    assert (f"{F}serving.workers[0].tensorParallelSize: Qwen/Qwen3-30B-A3B-FP8's experts cannot "
            "be split over TP 4: 768 / TP 4 = 192 is not a whole number of 128x128 blocks, and "
            "vLLM 0.28.0 requires whole blocks per shard") in out, out
    assert "serving.workers[0].expertParallel: true" in out
    code, out = check(stacks_dir, "kc-fp8-tp4-161")
    assert "experts cannot be split" not in out, out
