"""Host memory taken by NIXL's host staging buffers, and the rule that a pod asks for it (pure).

A disaggregated worker whose `--kv-transfer-config` stages the KV cache through host memory
(`"kv_buffer_device":"cpu"`: NIXL over UCX on TCP, stacks.engine_argv.kv.nixl_connector) gets a
host copy of its whole GPU KV cache on every TP rank: vLLM 0.31.0
vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py sets `use_host_buffer =
self.kv_buffer_device == "cpu"` (line 728) and, after the KV cache is allocated,
`initialize_host_xfer_buffer(kv_caches)` (line 1424) allocates `torch.empty(kv_shape, ...)` on
the CPU for every layer's KV tensor (lines 1184-1215). So one pod needs, besides its engine,
GPUs-per-pod x the KV pool of one GPU (GPU memory x gpuMemoryUtilization - weights - runtime
overhead) of host memory: ~22 GiB per L40S rank of disagg-l40s-decode (dynamo.md F11).

`host_staging_gib` is what stacks.preflight.pods adds to a pod's default memory request (and
so what components.graph requests and the node packing counts); `check_host_staging` refuses a
stack's own `hostMemoryGib` / `hostMemoryLimitGib` below it (a limit below it is an OOM kill at
start-up, a request below it packs pods onto nodes that cannot hold them).
"""

from __future__ import annotations

from typing import Any

from stacks.catalog.instances import INSTANCE_TYPES, InstanceType
from stacks.config.errors import Problem
from stacks.config.schema import ClusterConfig, Role, StackConfig, WorkerGroup
from stacks.config.stack_file import PROJECT
from stacks.engine_argv.kv import kv_transfer_config, uses_rdma
from stacks.sizing.memory import worker_memory

P = f"{PROJECT}:"


def _connectors(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """A connector config and the ones it nests (MultiConnector, PdConnector)."""
    nested = (cfg.get("kv_connector_extra_config") or {}).get("connectors") or []
    return [cfg, *(c for n in nested for c in _connectors(n))]


def stages_kv_on_host(stack: StackConfig, role: Role, *, rdma: bool) -> bool:
    """Whether this role's own `--kv-transfer-config` puts NIXL's buffers in host memory."""
    assert stack.serving is not None
    cfg = kv_transfer_config(stack.serving, role, rdma=rdma)
    return cfg is not None and any(c.get("kv_connector") == "NixlConnector"
                                   and c.get("kv_buffer_device") == "cpu"
                                   for c in _connectors(cfg))


def host_staging_gib(stack: StackConfig, w: WorkerGroup, inst: InstanceType, *, rdma: bool,
                     draft_weights_bytes: float = 0.0) -> float:
    """Host memory one pod of `w` on `inst` gives NIXL's staging buffers (0 without them)."""
    serving = stack.serving
    assert serving is not None
    if inst.gpu is None or not stages_kv_on_host(stack, w.role, rdma=rdma):
        return 0.0
    mem = worker_memory(arch=stack.model.arch, precision=stack.model.precision.value,
                        kv_cache_dtype=serving.kv_cache_dtype, instance=inst,
                        role=w.role.value, replicas=w.replicas, tp=w.tensor_parallel_size,
                        max_model_len=w.max_model_len,
                        gpu_memory_utilization=w.gpu_memory_utilization,
                        overhead_gib=serving.runtime_overhead_gib,
                        draft_weights_bytes=draft_weights_bytes)
    kv_pool_per_gpu = max(0.0, mem.budget_gib - mem.weights_gib_per_gpu - mem.overhead_gib)
    return kv_pool_per_gpu * w.gpus_per_pod


def check_host_staging(index: int, w: WorkerGroup, staging_gib: float,
                       out: list[Problem]) -> None:
    """A stack's own memory request or limit must hold the staging buffers."""
    if staging_gib <= 0:
        return
    f = f"{P}serving.workers[{index}]"
    why = (f"NIXL stages this worker's KV cache in host memory (kv_buffer_device cpu): "
           f"{staging_gib:.0f} GiB per pod ({w.gpus_per_pod} GPU x its KV pool)")
    for name, asked in (("hostMemoryLimitGib", w.host_memory_limit_gib),
                        ("hostMemoryGib", w.host_memory_gib)):
        if asked is not None and asked < staging_gib:
            out.append(Problem(f"{f}.{name}", f"{asked} GiB is below what {why} needs",
                               f"raise {name} above {staging_gib:.0f} GiB plus the engine's "
                               "own, or unset it, or move KV over RDMA (GPU buffers)"))


def staging_by_worker(stack: StackConfig, cluster: ClusterConfig, draft_weights_bytes: float,
                      out: list[Problem]) -> dict[int, float]:
    """Worker index -> host staging GiB per pod, refusing own requests below it. A worker
    on an unknown group or type is reported by the worker checks and skipped here."""
    assert stack.serving is not None
    staging: dict[int, float] = {}
    for i, w in enumerate(stack.serving.workers):
        group = cluster.group(w.node_group)
        inst = INSTANCE_TYPES.get(group.instance_type) if group else None
        if inst is None:
            continue
        staging[i] = host_staging_gib(stack, w, inst,
                                      rdma=uses_rdma(stack.serving, inst.efa_interfaces > 0),
                                      draft_weights_bytes=draft_weights_bytes)
        check_host_staging(i, w, staging[i], out)
    return staging
