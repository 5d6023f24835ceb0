"""GPU memory arithmetic for one worker (pure): weights, KV cache per token, KV capacity.

Per GPU of a worker with tensor-parallel size TP:
  weights/GPU       = total params x bytes/param / TP          (TP and EP both split the experts)
  KV bytes/token    = 2 (K and V) x layers x max(1, kv_heads / TP) x head_dim x bytes/element
                      (vLLM replicates a KV head when TP exceeds the KV head count)
  budget            = GPU memory x gpu_memory_utilization
  fits              = weights/GPU + runtime overhead + KV of one max_model_len sequence <= budget
  KV capacity       = (budget - weights/GPU - overhead) / KV bytes/token   tokens per replica
"""

from __future__ import annotations

from dataclasses import dataclass

from stacks.catalog import BYTES_PER_PARAM, InstanceType, ModelArchitecture

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

    @property
    def needed_gib(self) -> float:
        return self.weights_gib_per_gpu + self.overhead_gib + self.full_sequence_kv_gib

    @property
    def fits(self) -> bool:
        return self.needed_gib <= self.budget_gib

    @property
    def headroom_gib(self) -> float:
        return self.budget_gib - self.needed_gib


def kv_heads_per_gpu(arch: ModelArchitecture, tp: int) -> int:
    return max(1, arch.kv_heads // tp)


def kv_bytes_per_token_per_gpu(arch: ModelArchitecture, tp: int, kv_bytes: float) -> int:
    return int(2 * arch.layers * kv_heads_per_gpu(arch, tp) * arch.head_dim * kv_bytes)


def weights_bytes_per_gpu(arch: ModelArchitecture, precision: str, tp: int) -> float:
    return arch.total_params_b * 1e9 * BYTES_PER_PARAM[precision] / tp


def kv_element_bytes(kv_cache_dtype: str) -> float:
    # "auto" stores KV in the activation dtype, which is BF16 for BF16, FP8 and NVFP4 checkpoints.
    return 1.0 if kv_cache_dtype == "fp8" else 2.0


def worker_memory(*, arch: ModelArchitecture, precision: str, kv_cache_dtype: str,
                  instance: InstanceType, role: str, replicas: int, tp: int,
                  max_model_len: int, gpu_memory_utilization: float,
                  overhead_gib: float) -> WorkerMemory:
    if instance.gpu is None:
        raise ValueError(f"{instance.name} has no GPU")
    gpu_gib = instance.gpu.memory_gib
    budget = gpu_gib * gpu_memory_utilization
    weights = weights_bytes_per_gpu(arch, precision, tp) / GIB
    per_token = kv_bytes_per_token_per_gpu(arch, tp, kv_element_bytes(kv_cache_dtype))
    free_bytes = max(0.0, (budget - weights - overhead_gib) * GIB)
    return WorkerMemory(
        role=role, replicas=replicas, tensor_parallel_size=tp, instance_type=instance.name,
        gpu=instance.gpu.name, gpu_memory_gib=gpu_gib, budget_gib=budget,
        weights_gib_per_gpu=weights, overhead_gib=overhead_gib,
        kv_bytes_per_token_per_gpu=per_token, full_sequence_tokens=max_model_len,
        full_sequence_kv_gib=max_model_len * per_token / GIB,
        kv_capacity_tokens=int(free_bytes // per_token),
    )
