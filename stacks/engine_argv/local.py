"""The local engine's command lines (pure): `python -m dynamo.frontend` and one
`python -m dynamo.mocker` per worker replica, every flag with the stack field it came from.

workloads.targets.local starts the processes with `tokens(...)` of these; pre-flight
(stacks.preflight.engine_parse) runs the same lists through Dynamo 1.6.1's own frontend and
mocker parsers (dynamo/frontend/main.py parse_args, dynamo/mocker/args.py parse_args(argv);
ai-dynamo 1.6.1), so a flag the local engine would refuse at start is refused before it.
A worker group's extraArgs go to its mockers, the frontend's extraArgs to the frontend; they come
last, so they win. A disaggregated stack's prefill mockers carry the KV transfer its real workers
would see (`kv_transfer_args`: the bandwidth of the path stacks/catalog/kv_transfer.py finds for
the hardware the stack names, the model's KV bytes per token), so the live rehearsal and its
DynoSim replay (workloads/sim/engine_setup.py) charge one transfer time. What only the runner
knows (the ports, the model snapshot's folder, pre-flight's KV blocks when numGpuBlocks is
unset, the timing table it builds) is a parameter here, and a stand-in of the same type when
pre-flight parses (local_frontend_argv, local_mocker_argvs).
"""

from __future__ import annotations

from dataclasses import dataclass

from stacks.catalog.kv_transfer import (
    Endpoint,
    Link,
    Placement,
    UncataloguedLink,
    efa_link,
    tcp_link,
)
from stacks.config.schema import (
    ClusterConfig,
    NodeGroup,
    Role,
    StackConfig,
    Topology,
    WorkerGroup,
)
from stacks.conventions.efa_groups import uses_efa
from stacks.conventions.kv_path import KvPath, kv_path
from stacks.engine_argv.argv import FIXED, Arg
from stacks.sizing.memory import kv_bytes_per_token_per_gpu, kv_element_bytes

LOOPBACK = "127.0.0.1"
# pre-flight's stand-ins for what the runner decides when it starts the processes
STAND_IN_PORT = 8000
STAND_IN_MODEL_PATH = "/models/snapshot"
STAND_IN_BLOCKS = 16


def _extra(field: str, extra_args: list[str]) -> list[Arg]:
    return [Arg(a, f"{field}.extraArgs[{j}]") for j, a in enumerate(extra_args)]


def frontend_args(stack: StackConfig, port: int) -> list[Arg]:
    """The local frontend's arguments on `port`, routing with the stack's router mode."""
    s = stack.serving
    assert s is not None
    out = [Arg(t, FIXED) for t in ("--http-host", LOOPBACK, "--http-port", str(port))]
    out += [Arg("--router-mode", "serving.router"), Arg(s.router.value, "serving.router")]
    if s.topology == Topology.DISAGGREGATED:
        out.append(Arg("--enforce-disagg", "serving.topology"))  # never aggregated silently
    return out + _extra("serving.frontend", s.frontend.extra_args)


def mocker_args(stack: StackConfig, group: int, blocks: int, model_path: str,
                table: str | None) -> list[Arg]:
    """A mocker's arguments for worker group `group` with `blocks` KV blocks; `table`: the
    step-timing table (npz) it runs on, None for the mocker's generic timings."""
    s = stack.serving
    assert s is not None
    w = s.workers[group]
    f = f"serving.workers[{group}]"
    blocks_field = ("serving.mocker.numGpuBlocks" if s.mocker.num_gpu_blocks is not None
                    else FIXED)
    pairs = [("--model-path", model_path, FIXED),
             ("--model-name", stack.model.name,
              "model.servedName" if stack.model.served_name else "model.id"),
             ("--speedup-ratio", str(s.mocker.speedup_ratio), "serving.mocker.speedupRatio"),
             ("--block-size", str(s.mocker.block_size), "serving.mocker.blockSize"),
             ("--num-gpu-blocks-override", str(blocks), blocks_field),
             ("--max-model-len", str(w.max_model_len), f"{f}.maxModelLen")]
    if w.role != Role.WORKER:
        pairs.append(("--disaggregation-mode", w.role.value, f"{f}.role"))
    if table is not None:
        # the step timings only: KV capacity stays --num-gpu-blocks-override's (Dynamo 1.6.1
        # lib/mocker/src/common/perf_model.rs PerfModel::from_npz reads the five timing arrays)
        pairs.append(("--planner-profile-data", table, FIXED))
    out = [Arg(tok, field) for flag, value, field in pairs for tok in (flag, value)]
    if not s.prefix_caching:
        out.append(Arg("--no-enable-prefix-caching", "serving.prefixCaching"))
    return out + kv_transfer_args(stack, group) + _extra(f, w.extra_args)


def local_frontend_argv(stack: StackConfig) -> list[Arg]:
    """The frontend's arguments as pre-flight parses them (the port a stand-in)."""
    return frontend_args(stack, STAND_IN_PORT)


def local_mocker_argvs(stack: StackConfig) -> list[list[Arg]]:
    """One mocker command line per worker group as pre-flight parses them (a group's replicas
    differ only in the runner's ports): the model folder and, without numGpuBlocks, the KV
    blocks are stand-ins; without the timing table (the runner's own file)."""
    s = stack.serving
    assert s is not None
    blocks = s.mocker.num_gpu_blocks or STAND_IN_BLOCKS
    return [mocker_args(stack, g, blocks, STAND_IN_MODEL_PATH, None)
            for g in range(len(s.workers))]


# --- KV transfer between disaggregated workers -----------------------------------------------

# vLLM 0.31.0's NixlConnector pulls only the prompt tokens the decode worker lacks
# (stacks/catalog/kv_transfer.py); the mocker's name for that count (ai-dynamo 1.6.1
# dynamo/mocker/args.py --kv-transfer-timing-mode).
TIMING_MODE = "destination_missing"


def kv_bytes_per_token(stack: StackConfig, group: int) -> int:
    """A worker's whole KV per token: every TP rank's share (stacks/sizing/memory.py geometry;
    a head or latent that TP replicates counted on every rank that holds it). Given to the
    mocker as --kv-bytes-per-token: its own estimate reads hidden_size / heads as the head size
    (ai-dynamo 1.6.1 dynamo/mocker/utils/kv_cache.py compute_kv_bytes_per_token), half of
    Qwen3-30B-A3B's real 128. Full-attention layers only: a sliding-window layer's fixed window
    per sequence (K-EXAONE, Motif 3) is not counted."""
    s = stack.serving
    assert s is not None
    w = s.workers[group]
    per_gpu = kv_bytes_per_token_per_gpu(stack.model.arch, w.tensor_parallel_size,
                                         kv_element_bytes(s.kv_cache_dtype))
    return w.tensor_parallel_size * per_gpu


@dataclass(frozen=True)
class TransferPlan:
    """The KV transfer of one prefill group: the slowest link to any decode group, its decode
    group, and what was assumed about where their pods sit."""
    link: Link
    decode_group: int
    placement: Placement
    notes: tuple[str, ...]


def _group(cluster: ClusterConfig, name: str) -> NodeGroup:
    group = cluster.group(name)
    assert group is not None, f"node group '{name}' (transfer_plan checks it exists)"
    return group


def _endpoint(cluster: ClusterConfig, w: WorkerGroup) -> Endpoint:
    return Endpoint(_group(cluster, w.node_group).instance_type, w.tensor_parallel_size,
                    w.gpus_per_pod)


def placement(cluster: ClusterConfig, owner: StackConfig, a: WorkerGroup,
              b: WorkerGroup) -> tuple[Placement, str | None]:
    """Where a pod of `a` and one of `b` sit: different node groups are different nodes (each
    EFA group has its own cluster placement group: components/node_specs.py
    needs_placement_group); a group of one node holds both. On a group of several nodes the
    Kubernetes scheduler decides, and its default scoring spreads pods (NodeResourcesFit,
    LeastAllocated), which pre-flight's first-fit packing (stacks/preflight/pods.py) does not
    predict: the pair is taken as on different nodes, said in the note."""
    if a.node_group != b.node_group:
        return Placement.APART, None
    group = _group(cluster, a.node_group)
    if group.count == 1:
        return Placement.SAME_NODE, None
    in_group = uses_efa(group, owner) and group.capacity_reservation_id is None
    where = Placement.SAME_PLACEMENT_GROUP if in_group else Placement.APART
    return where, (f"node group '{group.name}' has {group.count} nodes: the scheduler may put "
                   f"a prefill and a decode pod on one node; taken as {where.value}")


def transfer_plan(stack: StackConfig, group: int, cluster: ClusterConfig | None = None,
                  owner: StackConfig | None = None) -> TransferPlan | None:
    """The KV transfer of prefill group `group` on `cluster` (default: the stack's own; an
    attached variant's is its base's, `owner` the stack that owns it), None when the group
    sends none, or when pre-flight refuses what it would need (no KV path: serving.transfer
    none, LIBFABRIC without an EFA userspace; a nodeGroup the cluster lacks). The path is
    stacks/conventions/kv_path.py's, the one the graph builds: LIBFABRIC over EFA (the image's
    or a donor's userspace), UCX over TCP, UCX over InfiniBand (uncatalogued: raises
    kv_transfer.UncataloguedLink)."""
    s = stack.serving
    assert s is not None
    cluster, owner = cluster or stack.cluster, owner or stack
    w = s.workers[group]
    path = kv_path(s)
    if (w.role != Role.PREFILL or path in (KvPath.NONE, KvPath.MISSING)
            or any(cluster.group(x.node_group) is None for x in s.workers)):
        return None
    if path == KvPath.UCX_INFINIBAND:
        raise UncataloguedLink("NIXL UCX over InfiniBand (serving.rdma): no AWS instance type "
                               "has it; no bandwidth catalogued (stacks/catalog/kv_transfer.py)")
    plans = []
    for d, dw in enumerate(s.workers):
        if dw.role != Role.DECODE:
            continue
        where, note = placement(cluster, owner, w, dw)
        src, dst = _endpoint(cluster, w), _endpoint(cluster, dw)
        link = efa_link(src, dst) if path != KvPath.UCX_TCP else tcp_link(src, dst, where)
        plans.append(TransferPlan(link, d, where, () if note is None else (note,)))
    slowest = min(plans, key=lambda p: p.link.gb_s)
    if len({round(p.link.gb_s, 9) for p in plans}) > 1:
        slowest = TransferPlan(slowest.link, slowest.decode_group, slowest.placement,
                               (*slowest.notes, "the decode groups sit on links of different "
                                "bandwidth; the slowest is charged to every transfer"))
    return slowest


def kv_transfer_args(stack: StackConfig, group: int, cluster: ClusterConfig | None = None,
                     owner: StackConfig | None = None) -> list[Arg]:
    """The mocker flags that charge a prefill group's KV transfer: the link's bandwidth, the
    worker's KV bytes per token, and only the tokens the decode worker lacks. DynoSim reads
    them from the prefill (source) worker (stacks/catalog/kv_transfer.py), and the mocker has
    one bytes-per-token for transfer and offload: when the decode worker's KV per token differs
    (another TP replicating heads), the bandwidth is scaled so the time is the decode's bytes
    over the link."""
    plan = transfer_plan(stack, group, cluster, owner)
    if plan is None:
        return []
    own, moved = kv_bytes_per_token(stack, group), kv_bytes_per_token(stack, plan.decode_group)
    bandwidth = plan.link.gb_s * own / moved
    pairs = [("--kv-transfer-bandwidth", f"{bandwidth:.6g}", "serving.transfer"),
             ("--kv-bytes-per-token", str(own), "model.id"),
             ("--kv-transfer-timing-mode", TIMING_MODE, FIXED)]
    return [Arg(tok, field) for flag, value, field in pairs for tok in (flag, value)]
