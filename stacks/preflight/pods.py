"""What each worker pod asks of its node, and whether all of them fit the nodes (pure).

The pod resources are the ones the graph requests (components.graph builds its pods from
`pod_memory_gib` / `pod_cpus` here), so pre-flight packs exactly what Kubernetes will be asked
to schedule. `check_node_packing` places every pod of every role on the nodes of its group,
largest first, one node at a time, and refuses the first pod that finds no node with enough of
every resource left:
- GPUs: `nvidia.com/gpu` per pod; a multinode replica takes whole nodes;
- host memory: the pods' memory requests within `ALLOCATABLE_SHARE` of the node (the kubelet,
  system daemons and eviction threshold keep the rest: stated, not measured);
- CPU KV cache: the offload tier of the pods on a node within `HOST_SHARE` of its memory;
- disk KV cache (KVBM): within `HOST_SHARE` of the group's root volume;
- CPUs: the pods' CPU requests within `ALLOCATABLE_SHARE` of the node's vCPUs.
All sizes are GiB: `kvOffload.cpuGb` / `diskGb` are read as GiB by the connector that sizes the
cache (components.kv_config: `cpu_bytes_to_use = cpuGb x 2**30`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from stacks.catalog.instances import INSTANCE_TYPES, InstanceType
from stacks.config.errors import Problem
from stacks.config.schema import (
    ClusterConfig,
    ComputeMode,
    NodeGroup,
    ScratchSpace,
    ServingConfig,
    WorkerGroup,
)
from stacks.config.stack_file import PROJECT
from stacks.engine_argv.kv import (  # noqa: F401 - re-exported: the offload rule decides flags
    NATIVE_OFFLOAD_SINCE,
    offloads,
    uses_kvbm,
    version_tuple,
)

P = f"{PROJECT}:"
# Host memory a worker pod needs besides any CPU KV cache: the vLLM engine and its TP worker
# processes (CUDA contexts, NCCL, tokenizer) and weights streamed through host memory while
# loading. Stated, not measured.
WORKER_BASE_MEMORY_GIB = 16
WORKER_MEMORY_GIB_PER_GPU = 8
WORKER_CPU_PER_GPU = 6
# /dev/shm for NCCL between TP ranks; tmpfs counts against the pod's memory.
WORKER_SHM_GIB = 16
ALLOCATABLE_SHARE = 0.9
HOST_SHARE = 0.8
def pod_cpu_cache_gib(serving: ServingConfig, w: WorkerGroup) -> float:
    return serving.kv_offload.cpu_gb if offloads(serving, w.role) else 0.0


def pod_disk_cache_gib(serving: ServingConfig, w: WorkerGroup) -> float:
    if serving.kv_offload.kind != "disk" or not offloads(serving, w.role):
        return 0.0
    return serving.kv_offload.disk_gb


def pod_memory_gib(serving: ServingConfig, w: WorkerGroup,
                   host_staging_gib: float = 0.0) -> int:
    """The memory request of one worker pod: the stack's own, or the estimate above plus
    NIXL's host staging buffers (stacks.preflight.host_staging; pre-flight refuses a stack's
    own request below them)."""
    if w.host_memory_gib is not None:
        return w.host_memory_gib
    need = (WORKER_BASE_MEMORY_GIB + WORKER_MEMORY_GIB_PER_GPU * w.gpus_per_pod
            + WORKER_SHM_GIB + pod_cpu_cache_gib(serving, w) + host_staging_gib)
    return math.ceil(need)


def pod_cpus(w: WorkerGroup) -> int:
    return WORKER_CPU_PER_GPU * w.gpus_per_pod


@dataclass
class _Node:
    gpus: float
    memory: float
    cache: float
    disk: float
    cpus: float
    pods: list[str] = field(default_factory=list)


FRONTEND = -1   # the _Pod.worker of a frontend pod


@dataclass(frozen=True)
class _Pod:
    worker: int        # index in serving.workers, or FRONTEND
    gpus: int
    memory: int
    cache: float
    disk: float
    cpus: int
    whole_nodes: int   # > 0: a multinode replica's share, on that many empty nodes


def pod_scratch_gib(scratch: ScratchSpace) -> float:
    """The ephemeral storage a pod's scratch asks of its node's root volume."""
    return float(scratch.ephemeral_storage_gib or 0)


def _frontend_pods(serving: ServingConfig) -> list[_Pod]:
    fe = serving.frontend
    return [_Pod(FRONTEND, 0, fe.memory_gib, 0.0, pod_scratch_gib(fe.scratch), fe.cpu, 0)
            ] * fe.replicas


def _pods(serving: ServingConfig, workers: list[tuple[int, WorkerGroup]],
          staging: dict[int, float], with_frontend: bool) -> list[_Pod]:
    pods = _frontend_pods(serving) if with_frontend else []
    for i, w in workers:
        pod = _Pod(i, w.gpus_per_pod, pod_memory_gib(serving, w, staging.get(i, 0.0)),
                   pod_cpu_cache_gib(serving, w),
                   pod_disk_cache_gib(serving, w) + pod_scratch_gib(w.scratch), pod_cpus(w),
                   w.node_count if w.node_count > 1 else 0)
        pods += [pod] * w.replicas
    return sorted(pods, key=lambda p: (-p.whole_nodes, -p.gpus, -p.memory))


def _shortfall(node: _Node, pod: _Pod) -> str | None:
    for name, free, need in (("gpus", node.gpus, pod.gpus), ("cache", node.cache, pod.cache),
                             ("memory", node.memory, pod.memory), ("disk", node.disk, pod.disk),
                             ("cpus", node.cpus, pod.cpus)):
        if need > free + 1e-9:
            return name
    return None


def _take(node: _Node, pod: _Pod) -> None:
    node.gpus -= pod.gpus
    node.cache -= pod.cache
    node.memory -= pod.memory
    node.disk -= pod.disk
    node.cpus -= pod.cpus
    node.pods.append(f"worker {pod.worker}")


def _place(pods: list[_Pod], nodes: list[_Node], full_gpus: int) -> tuple[_Pod, str] | None:
    """Place every pod; the first that does not fit and the resource that ran out."""
    for pod in pods:
        if pod.whole_nodes:
            empty = [n for n in nodes if n.gpus == full_gpus and not n.pods]
            if len(empty) < pod.whole_nodes:
                return pod, "gpus"
            for n in empty[:pod.whole_nodes]:
                missing = _shortfall(n, pod)
                if missing:
                    return pod, missing
                _take(n, pod)
                n.gpus = 0
            continue
        reasons = [(n, _shortfall(n, pod)) for n in nodes]
        home = next((n for n, why in reasons if why is None), None)
        if home is None:
            # no home: every node gave a reason (why is None on none of them)
            fits_gpus = [why for n, why in reasons if why is not None and n.gpus >= pod.gpus]
            return pod, (fits_gpus[0] if fits_gpus else "gpus")
        _take(home, pod)
    return None


def _problem(serving: ServingConfig, pod: _Pod, why: str, group: NodeGroup,
             inst: InstanceType, workers: list[tuple[int, WorkerGroup]],
             staging: dict[int, float]) -> Problem:
    f = f"{P}serving.workers[{pod.worker}]"
    on = f"{group.count} x {inst.name} of node group '{group.name}'"
    if pod.worker == FRONTEND:
        return _frontend_problem(serving, why, f"beside the workers on {on}", inst, group)
    pods = "; ".join(f"worker {i} ({x.role.value}): {x.replicas} pod(s) x {x.gpus_per_pod} GPU, "
                     f"{pod_memory_gib(serving, x, staging.get(i, 0.0))} GiB, "
                     f"{pod_cpu_cache_gib(serving, x):g} GiB CPU cache" for i, x in workers)
    if why == "gpus":
        asked = sum(x.replicas * (x.node_count * inst.gpus_per_node if x.node_count > 1
                                  else x.tensor_parallel_size) for _, x in workers)
        return Problem(f"{f}.replicas", f"workers on '{group.name}' take {asked} GPUs in whole "
                       f"TP groups; {group.count} x {inst.name} provide "
                       f"{group.count * inst.gpus_per_node}", "lower replicas/TP or add nodes")
    if why == "cache":
        return Problem(f"{P}serving.kvOffload.cpuGb", f"the CPU KV caches of the pods placed "
                       f"together do not fit: {on} hold {HOST_SHARE:.0%} of "
                       f"{inst.memory_gib} GiB each for CPU cache ({pods})",
                       "lower cpuGb, or spread the workers over more nodes")
    if why == "disk" and pod_scratch_gib(serving.workers[pod.worker].scratch):
        return Problem(f"{f}.scratch.ephemeralStorageGib", f"the pods' ephemeral storage "
                       f"(scratch and any disk KV cache) does not fit {HOST_SHARE:.0%} of "
                       f"diskGib {group.disk_gib} GiB per node ({on})",
                       "lower ephemeralStorageGib or raise the group's diskGib")
    if why == "disk":
        return Problem(f"{P}serving.kvOffload.diskGb", f"the disk KV caches of the pods placed "
                       f"together do not fit {HOST_SHARE:.0%} of diskGib {group.disk_gib} GiB "
                       f"per node ({on})", "lower diskGb or raise the group's diskGib")
    what = "memory" if why == "memory" else "CPUs"
    total = inst.memory_gib if why == "memory" else inst.vcpus
    unit = " GiB" if why == "memory" else " vCPUs"
    # name the largest explicit memory request on the group (often another role's pod)
    explicit = [(x.host_memory_gib, i) for i, x in workers if x.host_memory_gib is not None]
    if why == "memory" and explicit:
        target = f"{P}serving.workers[{max(explicit)[1]}].hostMemoryGib"
    elif why == "memory" and any(pod_cpu_cache_gib(serving, x) for _, x in workers):
        target = f"{P}serving.kvOffload.cpuGb"
    else:
        target = f"{f}.replicas"
    return Problem(target, f"the worker pods that share a node ask more {what} than one "
                   f"{inst.name} allows ({ALLOCATABLE_SHARE:.0%} of {total}{unit}; {pods})",
                   "lower hostMemoryGib / cpuGb, or spread the workers over more nodes")


def check_node_packing(serving: ServingConfig, cluster: ClusterConfig, out: list[Problem],
                       staging: dict[int, float] | None = None) -> None:
    """Every worker pod, all roles together, on the nodes of its group, with the frontend where
    it runs there; a frontend on the CPU nodes must fit one of them. `staging`: worker index
    -> GiB of NIXL host staging per pod (stacks.preflight.host_staging)."""
    staging = staging or {}
    for group in cluster.node_groups:
        inst = INSTANCE_TYPES.get(group.instance_type)
        if inst is None or inst.gpu is None:
            continue
        # a TP group larger than its nodes is reported by the TP check already
        workers = [(i, w) for i, w in enumerate(serving.workers) if w.node_group == group.name
                   and w.tensor_parallel_size <= inst.gpus_per_node * w.node_count]
        # a frontend placed on a GPU group shares its nodes with the workers (Solar's recipe)
        with_frontend = serving.frontend.node_group == group.name
        if not workers and not with_frontend:
            continue
        nodes = [_Node(inst.gpus_per_node, ALLOCATABLE_SHARE * inst.memory_gib,
                       HOST_SHARE * inst.memory_gib, HOST_SHARE * group.disk_gib,
                       ALLOCATABLE_SHARE * inst.vcpus) for _ in range(group.count)]
        failed = _place(_pods(serving, workers, staging, with_frontend), nodes,
                        inst.gpus_per_node)
        if failed is not None:
            out.append(_problem(serving, *failed, group, inst, workers, staging))
    check_frontend_on_cpu_nodes(serving, cluster, out)


def _frontend_problem(serving: ServingConfig, why: str, where: str, inst: InstanceType,
                      group: NodeGroup) -> Problem:
    fe = serving.frontend
    field, asked, room = {
        "memory": ("memoryGib", f"{fe.memory_gib} GiB", f"{ALLOCATABLE_SHARE:.0%} of "
                   f"{inst.memory_gib} GiB"),
        "cpus": ("cpu", f"{fe.cpu} CPUs", f"{ALLOCATABLE_SHARE:.0%} of {inst.vcpus} vCPUs"),
        "disk": ("scratch.ephemeralStorageGib", f"{pod_scratch_gib(fe.scratch):g} GiB of "
                 "ephemeral storage", f"{HOST_SHARE:.0%} of diskGib {group.disk_gib} GiB"),
    }[why]
    return Problem(f"{P}serving.frontend.{field}", f"the frontend pod asks {asked}, which does "
                   f"not fit {where} ({room} per node)", f"lower serving.frontend.{field}, or "
                   "set serving.frontend.nodeGroup to a group whose nodes hold it (the Solar "
                   "recipe's frontends run on the GPU nodes)")


def check_frontend_on_cpu_nodes(serving: ServingConfig, cluster: ClusterConfig,
                                out: list[Problem]) -> None:
    """A frontend without a GPU group (its own CPU group, or any CPU group: it tolerates no GPU
    taint) must fit one such node. Auto Mode sizes its nodes to the pods: nothing to check."""
    if cluster.compute_mode == ComputeMode.AUTO:
        return
    named = cluster.group(serving.frontend.node_group) if serving.frontend.node_group else None
    groups = [named] if named else cluster.node_groups
    cpu = [(g, INSTANCE_TYPES[g.instance_type]) for g in groups
           if g.instance_type in INSTANCE_TYPES and INSTANCE_TYPES[g.instance_type].gpu is None]
    if not cpu:
        return   # on a GPU group: packed with the workers (check_node_packing)
    pod = _frontend_pods(serving)[0]
    reasons = [(g, i, _shortfall(_Node(0, ALLOCATABLE_SHARE * i.memory_gib, 0.0,
                                       HOST_SHARE * g.disk_gib, ALLOCATABLE_SHARE * i.vcpus),
                                 pod)) for g, i in cpu]
    if all(why is not None for _, _, why in reasons):
        group, inst, why = max(reasons, key=lambda r: (r[1].memory_gib, r[1].vcpus))
        assert why is not None
        out.append(_frontend_problem(serving, why, f"a {inst.name} of node group "
                                     f"'{group.name}'", inst, group))
