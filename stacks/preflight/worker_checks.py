"""Pre-flight checks of the serving workers: node groups, TP, precision, GPU memory fit.

Pure: each check appends `Problem`s naming the worker's field (`dynamo-bench:serving.workers[i]
.<field>`) and returns nothing else, except `check_workers`, which also returns the per-worker
memory table the CLI prints even for a valid stack. Packing the pods onto nodes (GPUs, host
memory, CPU cache, disk, CPUs, all roles together) is stacks.preflight.pods.
"""

from __future__ import annotations

import math

from stacks.catalog.gpudirect import has_gpudirect_rdma
from stacks.catalog.instances import INSTANCE_TYPES, InstanceType
from stacks.catalog.model_arch import ModelArchitecture
from stacks.catalog.model_catalog import DRAFT_MODELS
from stacks.config.loader import P, Problem
from stacks.config.schema import (
    ClusterConfig,
    Precision,
    ServingConfig,
    StackConfig,
    TransferBackend,
    WorkerGroup,
)
from stacks.preflight.host_staging import staging_by_worker
from stacks.preflight.pods import check_node_packing
from stacks.sizing.memory import WorkerMemory, worker_memory


def _check_tp(arch: ModelArchitecture, w: WorkerGroup, inst: InstanceType, multinode: bool,
              f: str, out: list[Problem]) -> None:
    tp = w.tensor_parallel_size
    if arch.attention_heads % tp:
        out.append(Problem(f"{f}.tensorParallelSize", f"TP {tp} does not divide the "
                           f"{arch.attention_heads} attention heads",
                           "use a divisor such as 1, 2, 4 or 8"))
    elif (tp > arch.kv_heads and tp % arch.kv_heads) or (tp < arch.kv_heads
                                                         and arch.kv_heads % tp):
        out.append(Problem(f"{f}.tensorParallelSize", f"TP {tp} and {arch.kv_heads} KV "
                           "heads: one must divide the other", "pick a power of two"))
    if w.node_count > 1 and not multinode:
        out.append(Problem(f"{f}.nodeCount", "multinode workers are off",
                           "set cluster.allowMultinode: true or nodeCount: 1"))
    elif tp % w.node_count:
        out.append(Problem(f"{f}.nodeCount", f"TP {tp} does not split evenly over "
                           f"{w.node_count} nodes (one pod per node, TP / nodeCount GPUs each)",
                           "use a nodeCount that divides tensorParallelSize"))
    if tp > inst.gpus_per_node * w.node_count:
        out.append(Problem(f"{f}.tensorParallelSize", f"TP {tp} does not fit one "
                           f"{inst.name} ({inst.gpus_per_node} GPUs) x nodeCount "
                           f"{w.node_count}", f"use TP <= {inst.gpus_per_node}"))


def _check_precision(stack: StackConfig, i: int, inst: InstanceType,
                     out: list[Problem]) -> None:
    model, gpu = stack.model, inst.gpu
    assert gpu is not None
    if model.precision == Precision.FP8 and not gpu.fp8_tensor_cores \
            and not model.accept_fp8_weight_only_fallback:
        out.append(Problem(f"{P}model.precision", f"FP8 on {gpu.name} (worker {i}, "
                           f"{inst.name}): no FP8 tensor cores, only a weight-only fallback",
                           "set model.acceptFp8WeightOnlyFallback: true to test that path, "
                           "or use an FP8-capable GPU (L40S, H100, B200)"))
    if model.precision == Precision.NVFP4 and not gpu.fp4_tensor_cores:
        out.append(Problem(f"{P}model.precision", f"NVFP4 on {gpu.name} (worker {i}) "
                           "has no FP4 tensor cores", "use a B200 node group"))


def _check_memory(mem: WorkerMemory, w: WorkerGroup, f: str, out: list[Problem]) -> None:
    if not mem.fits:
        out.append(Problem(f"{f}.tensorParallelSize", (
            f"does not fit: weights {mem.weights_gib_per_gpu:.1f} GiB/GPU + overhead "
            f"{mem.overhead_gib:.1f} + KV of one {w.max_model_len}-token sequence "
            f"{mem.full_sequence_kv_gib:.2f}{_fixed(mem)} = {mem.needed_gib:.1f} GiB > "
            f"{mem.budget_gib:.1f} GiB ({mem.gpu} x {w.gpu_memory_utilization})"),
            "raise TP, lower maxModelLen, or use a larger GPU"))
    elif mem.kv_capacity_tokens < w.max_model_len:
        out.append(Problem(f"{f}.replicas", (
            f"{mem.concurrent_sequences} concurrent sequences per replica hold "
            f"{mem.concurrent_sequences * mem.sequence_fixed_gib:.1f} GiB/GPU of fixed state, "
            f"leaving KV for {mem.kv_capacity_tokens} tokens, less than one "
            f"{w.max_model_len}-token sequence"), "add replicas or lower the concurrency"))


def _fixed(mem: WorkerMemory) -> str:
    if not mem.sequence_fixed_bytes_per_gpu:
        return ""
    return f" + its sliding-window/linear state {mem.sequence_fixed_gib:.2f}"


def peak_concurrency(stack: StackConfig) -> int:
    """The most requests any enabled workload keeps in flight (sequences the KV cache holds)."""
    w, peaks = stack.workloads, [1]
    enabled = w.enabled()
    if "concurrency_sweep" in enabled:
        peaks += w.concurrency_sweep.concurrencies
    if "multi_turn" in enabled:
        peaks.append(w.multi_turn.conversations)
    if "sequence_distributions" in enabled:
        peaks.append(w.sequence_distributions.concurrency)
    if "prefix_cache" in enabled:
        peaks.append(w.prefix_cache.concurrency)
    if "trace_replay" in enabled:
        peaks += w.trace_replay.concurrencies
    return max(peaks)


def draft_weights_bytes(serving: ServingConfig) -> float:
    """Weights of an external draft model (0 without one, or for one the catalogue lacks:
    stacks.preflight.recipe_checks refuses that case)."""
    spec = serving.speculative
    draft = DRAFT_MODELS.get(spec.draft_model or "") if spec else None
    return draft.params_b * 1e9 * draft.bytes_per_param if draft else 0.0


def check_workers(stack: StackConfig, cluster: ClusterConfig,
                  out: list[Problem]) -> list[WorkerMemory]:
    """Check every worker group against the cluster it runs on; return the memory table."""
    serving, arch = stack.serving, stack.model.arch
    assert serving is not None
    table: list[WorkerMemory] = []
    known = [g.name for g in cluster.node_groups]
    where = f"base '{stack.cluster.attach_to}'" if stack.is_attached else "this stack"
    fe = serving.frontend.node_group
    if fe is not None and cluster.group(fe) is None:
        out.append(Problem(f"{P}serving.frontend.nodeGroup", f"node group '{fe}' does not "
                           f"exist in {where}", f"use one of {known}"))
    for i, w in enumerate(serving.workers):
        f = f"{P}serving.workers[{i}]"
        group = cluster.group(w.node_group)
        if group is None:
            out.append(Problem(f"{f}.nodeGroup", f"node group '{w.node_group}' does not exist "
                               f"in {where}", f"use one of {known}"))
            continue
        inst = INSTANCE_TYPES.get(group.instance_type)
        if inst is None:
            continue  # reported by the cluster check
        if inst.gpu is None:
            out.append(Problem(f"{f}.nodeGroup", f"node group '{w.node_group}' "
                               f"({inst.name}) has no GPUs", "place workers on a GPU group"))
            continue
        _check_tp(arch, w, inst, cluster.allow_multinode, f, out)
        if w.max_model_len > arch.max_context:
            out.append(Problem(f"{f}.maxModelLen", f"{w.max_model_len} exceeds the model's "
                               f"context {arch.max_context}", f"use <= {arch.max_context}"))
        _check_precision(stack, i, inst, out)
        mem = worker_memory(arch=arch, precision=stack.model.precision.value,
                            kv_cache_dtype=serving.kv_cache_dtype, instance=inst,
                            role=w.role.value, replicas=w.replicas, tp=w.tensor_parallel_size,
                            max_model_len=w.max_model_len,
                            gpu_memory_utilization=w.gpu_memory_utilization,
                            overhead_gib=serving.runtime_overhead_gib,
                            draft_weights_bytes=draft_weights_bytes(serving),
                            concurrent_sequences=math.ceil(peak_concurrency(stack)
                                                           / w.replicas))
        table.append(mem)
        _check_memory(mem, w, f, out)
        if serving.transfer == TransferBackend.NIXL_LIBFABRIC and inst.efa_interfaces == 0:
            out.append(Problem(f"{P}serving.transfer", f"nixl-libfabric needs EFA; {inst.name} "
                               f"(worker {i}) has none", "use nixl-ucx or an EFA instance type"))
        elif serving.transfer == TransferBackend.NIXL_LIBFABRIC and not has_gpudirect_rdma(
                inst.name):
            out.append(Problem(f"{P}serving.transfer", f"nixl-libfabric moves KV GPU-to-GPU "
                               f"with GPUDirect RDMA, which nothing confirms on {inst.name} "
                               f"(worker {i}; stacks/catalog/gpudirect.py)", "use nixl-ucx "
                               "(TCP, KV staged through host memory) or a type listed there"))
    check_node_packing(serving, cluster, out,
                       staging_by_worker(stack, cluster, draft_weights_bytes(serving), out))
    return table
