"""Kernel choices only the target GPU refuses, which vLLM's CPU platform never fires (pure).

vLLM picks a fused-MoE kernel when the model loads on the GPU, long after `stacks check` and
the engine's parse (stacks/preflight/engine_parse.py) run on a CPU. Two of its refusals are
arithmetic on the stack, so they are checked here for the GPU of each worker's node group
(stacks.catalog.instances: compute capability):

- the MoE backend a stack pins (serving.kernels.moeBackend) x the checkpoint's quantization x
  the GPU: MOE_BACKENDS says which backends each quantization's oracle maps at all (any other
  is a ValueError on every GPU) and MOE_DEVICES where a mapped backend's kernels run (else the
  oracle's `_return_or_raise` raises: "... does not support the deployment configuration").
  Read in vLLM 0.31.0 (.venv-parsers) and found the same, for the backends the schema offers,
  in 0.28.0 and 0.26.0 (the recipe images' vLLM; the line numbers are 0.31.0's);
- the block-FP8 shape: tensor parallelism without expert parallelism splits each expert's
  intermediate size over the TP ranks, and a shard that is not a whole number of the
  checkpoint's quantization blocks cannot carry its scales (block_fp8_problem).
A pin of `auto` is vLLM's own choice among the kernels that run there: nothing to refuse.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from stacks.catalog.instances import INSTANCE_TYPES, Gpu
from stacks.config.errors import Problem
from stacks.config.schema import ClusterConfig, StackConfig, WorkerGroup
from stacks.config.stack_file import PROJECT
from stacks.preflight.engine_model_config import config_json
from stacks.preflight.engine_releases import parser_release

P = f"{PROJECT}:"
_ORACLE = "vllm/model_executor/layers/fused_moe/oracle"
_EXPERTS = "vllm/model_executor/layers/fused_moe/experts"
Capability = tuple[int, int]


def _family(major: int) -> Callable[[Capability], bool]:
    # vLLM's is_device_capability_family: any <major>.x (vllm/platforms/interface.py:493-504)
    return lambda cc: cc[0] == major


def _hopper_or_blackwell(cc: Capability) -> bool:
    return cc == (9, 0) or cc[0] in (10, 12)


# quantization -> (the MoE backends its oracle maps, where)
MOE_BACKENDS: dict[str, tuple[frozenset[str], str]] = {
    "bf16": (frozenset({"triton", "flashinfer_trtllm", "flashinfer_cutlass"}),
             f"{_ORACLE}/unquantized.py:180-194 (map_unquantized_backend)"),
    # `cutlass` maps, then is refused for an FP8 checkpoint (Fp8MoEMethod passes
    # allow_vllm_cutlass=False, vllm/model_executor/layers/quantization/fp8.py:518-523;
    # oracle/fp8.py:460-470 "vLLM CUTLASS FP8 MoE backend is disabled")
    "fp8": (frozenset({"triton", "deep_gemm", "flashinfer_trtllm", "flashinfer_cutlass",
                       "marlin"}),
            f"{_ORACLE}/fp8.py:264-282 (map_fp8_backend) and 460-470 (cutlass disabled for "
            "FP8 checkpoints)"),
    "nvfp4": (frozenset({"cutlass", "flashinfer_trtllm", "flashinfer_cutlass",
                         "flashinfer_cutedsl", "marlin"}),
              f"{_ORACLE}/nvfp4.py:155-173 (map_nvfp4_backend)"),
}


@dataclass(frozen=True)
class Devices:
    runs_on: Callable[[Capability], bool]
    said: str          # where it runs, in words
    source: str        # the upstream lines


_FI_CUTLASS = Devices(_hopper_or_blackwell, "compute capability 9.0, 10.x or 12.x",
                      f"{_EXPERTS}/flashinfer_cutlass_moe.py:128-139 (FlashInferExperts)")
# (quantization, backend) -> where its kernels run; mapped backends not listed run on every
# CUDA GPU the catalogue has (triton on BF16: triton_moe.py:118-119; marlin: sm75+,
# marlin_moe.py:587-589)
MOE_DEVICES: dict[tuple[str, str], Devices] = {
    ("bf16", "flashinfer_trtllm"): Devices(
        _family(10), "compute capability 10.x (Blackwell)",
        f"{_EXPERTS}/trtllm_bf16_moe.py:95-102, raised at {_ORACLE}/unquantized.py:316"),
    ("bf16", "flashinfer_cutlass"): _FI_CUTLASS,
    ("fp8", "flashinfer_trtllm"): Devices(_family(10), "compute capability 10.x (Blackwell)",
                                          f"{_EXPERTS}/trtllm_fp8_moe.py:165-172"),
    ("fp8", "flashinfer_cutlass"): _FI_CUTLASS,
    ("fp8", "deep_gemm"): Devices(_hopper_or_blackwell, "compute capability 9.0, 10.x or 12.x",
                                  "vllm/utils/deep_gemm.py:110-115 and "
                                  "vllm/platforms/cuda.py:709-715 (support_deep_gemm)"),
    ("fp8", "triton"): Devices(lambda cc: cc >= (8, 9), "compute capability 8.9 or newer",
                               f"{_EXPERTS}/triton_moe.py:157-160 (FP8 schemes only where "
                               "vllm/platforms/cuda.py:605-606 supports_fp8: >= 8.9)"),
    ("nvfp4", "flashinfer_trtllm"): Devices(_family(10), "compute capability 10.x (Blackwell)",
                                            f"{_EXPERTS}/trtllm_nvfp4_moe.py:207-214"),
    ("nvfp4", "flashinfer_cutlass"): _FI_CUTLASS,
    ("nvfp4", "flashinfer_cutedsl"): Devices(_family(10), "compute capability 10.x "
                                             "(Blackwell)",
                                             f"{_EXPERTS}/flashinfer_cutedsl_moe.py:76-82"),
}


def moe_backend_problem(quantization: str, backend: str, gpu: str,
                        capability: Capability) -> str | None:
    """Why vLLM refuses MoE backend `backend` for a `quantization` checkpoint on that GPU."""
    if backend == "auto" or quantization not in MOE_BACKENDS:
        return None
    mapped, where = MOE_BACKENDS[quantization]
    if backend not in mapped:
        return (f"vLLM refuses the {backend} MoE backend for {quantization} weights on every "
                f"GPU (it takes {', '.join(sorted(mapped))}: {where})")
    devices = MOE_DEVICES.get((quantization, backend))
    if devices is not None and not devices.runs_on(capability):
        cc = f"{capability[0]}.{capability[1]}"
        return (f"the {backend} MoE kernel for {quantization} weights runs only on "
                f"{devices.said}, and {gpu} is {cc} ({devices.source})")
    return None


def _worker_gpu(cluster: ClusterConfig, w: WorkerGroup) -> Gpu | None:
    group = cluster.group(w.node_group)
    instance = INSTANCE_TYPES.get(group.instance_type) if group is not None else None
    return instance.gpu if instance is not None else None


def check_moe_backend(stack: StackConfig, cluster: ClusterConfig, out: list[Problem]) -> None:
    s = stack.serving
    assert s is not None
    pinned = s.kernels.moe_backend
    if pinned is None or stack.model.arch.experts == 0:
        return
    quantization = stack.model.precision.value
    for i, w in enumerate(s.workers):
        gpu = _worker_gpu(cluster, w)
        if gpu is None:
            continue   # an unknown group or instance type is refused by its own rule
        why = moe_backend_problem(quantization, pinned.value, gpu.name, gpu.compute_capability)
        if why:
            ok = [b for b in sorted(MOE_BACKENDS[quantization][0])
                  if moe_backend_problem(quantization, b, gpu.name,
                                         gpu.compute_capability) is None]
            out.append(Problem(f"{P}serving.kernels.moeBackend",
                               f"serving.workers[{i}] ({w.node_group}): {why}",
                               f"pin one that runs there ({', '.join(ok)}) or auto"))
            return


# The block-FP8 rule as each vLLM applies it when the experts' weights are created.
# vLLM 0.26.0 / 0.28.0: the shard must be whole blocks (quantization/fp8.py:562-574 in 0.26.0,
# 534-546 in 0.28.0). vLLM 0.31.0 first adapts the blocks to the shard
# (oracle/fp8.py:285-388, resolve_fp8_moe_weight_block_shape): refine them to
# gcd(block_n, block_k, shard, hidden) when that is >= 32 (Triton kernels; the `auto` choice),
# or, for a pinned backend, pad the shard up to whole blocks (square blocks, whole global
# dimensions, no expert parallelism); only what neither can fix reaches the check
# (quantization/utils/fp8_utils.py:1263-1289, called at quantization/fp8.py:549-553).
# (0.31.0 is the first we read that adapts; 0.28.0 does not)
_ADAPTS_BLOCKS = (0, 31, 0)


def block_fp8_problem(vllm: str, intermediate: int, hidden: int, block: tuple[int, int],
                      tp: int, expert_parallel: bool, backend: str) -> str | None:
    """Why vLLM `vllm` cannot shard a block-FP8 MoE checkpoint over `tp` ranks, or None."""
    if expert_parallel or tp == 1:
        return None            # each rank holds whole experts: no intermediate split
    block_n, block_k = block
    shard = intermediate // tp
    if shard * tp == intermediate and shard % block_n == 0 and shard % block_k == 0:
        return None
    whole = (f"{intermediate} / TP {tp} = {intermediate / tp:g} is not a whole number of "
             f"{block_n}x{block_k} blocks")
    if tuple(int(p) for p in vllm.split(".")) < _ADAPTS_BLOCKS:
        return (f"{whole}, and vLLM {vllm} requires whole blocks per shard "
                "(vllm/model_executor/layers/quantization/fp8.py, create_weights)")
    if backend == "auto":
        refine = math.gcd(block_n, block_k, shard, hidden)
        return None if refine >= 32 else (
            f"{whole}, and no finer block of at least 32 divides it (gcd {refine}: vLLM {vllm} "
            "oracle/fp8.py:285-314, then fp8_utils.py:1263-1289)")
    if block_n == block_k and intermediate % block_n == 0 and hidden % block_n == 0:
        return None            # padded to whole blocks (oracle/fp8.py:317-345)
    return (f"{whole}, and a pinned {backend} backend can neither refine nor pad it (vLLM "
            f"{vllm} oracle/fp8.py:317-345, fp8_utils.py:1263-1289)")


def check_block_fp8(stack: StackConfig, out: list[Problem]) -> None:
    s = stack.serving
    assert s is not None
    config = config_json(stack.model.id) or {}
    block = (config.get("quantization_config") or {}).get("weight_block_size")
    intermediate = config.get("moe_intermediate_size")
    if not block or not intermediate:
        return
    vllm = parser_release(s.image, s.dynamo_version).vllm
    backend = s.kernels.moe_backend.value if s.kernels.moe_backend else "auto"
    for i, w in enumerate(s.workers):
        why = block_fp8_problem(vllm, intermediate, config["hidden_size"],
                                (block[0], block[1]), w.tensor_parallel_size,
                                w.expert_parallel, backend)
        if why:
            out.append(Problem(f"{P}serving.workers[{i}].tensorParallelSize",
                               f"{stack.model.id}'s experts cannot be split over TP "
                               f"{w.tensor_parallel_size}: {why}",
                               "use a TP whose shard is whole blocks, or set "
                               f"serving.workers[{i}].expertParallel: true"))


def check_kernels(stack: StackConfig, cluster: ClusterConfig, out: list[Problem]) -> None:
    """The MoE backend at each worker's GPU and the block-FP8 shape of each worker's TP."""
    check_moe_backend(stack, cluster, out)
    check_block_fp8(stack, out)
