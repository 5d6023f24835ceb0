"""What a base's node groups can hold, as candidate variant stacks (pure).

A candidate is the stack file a person would write for one configuration, built as the shipped
variants are (stacks/Pulumi.agg-a100.yaml, disagg-a100.yaml, disagg-l40s-decode.yaml): attached
to the base, the base's model at one precision, workers with a role, replica count, TP and node
group, maxModelLen 32768 and the default gpuMemoryUtilization, KV events on with either router
(so a round-robin candidate and its KV-router twin run byte-identical workers), the transfer
the GPUs allow (NIXL over LIBFABRIC where every worker's instance has EFA with GPUDirect RDMA,
else over UCX, as disagg-l40s-decode), and the base's budget.

The dimensions, per GPU node group: the precisions its GPU runs natively (FP8 only with FP8
tensor cores), TP in powers of two up to the node's GPUs (the values pre-flight's memory fit
accepts are kept: screen.py), then
- aggregated: one group's GPUs, 1 .. GPUs / TP replicas;
- disaggregated on one group: prefill n x TP plus decode m x TP within the group's GPUs;
- disaggregated over two groups: prefill on one, decode on the other (a decode tier on another
  GPU type, e.g. p4d prefill + g6e decode), each within its own group's GPUs;
each with the router (round-robin, kv) and the host offload (none, cpu at OFFLOAD_CPU_GB per
worker, where pre-flight's pod packing finds the node memory). What is left out, and why, is
`Space.excluded`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from stacks.catalog.gpudirect import has_gpudirect_rdma
from stacks.catalog.instances import INSTANCE_TYPES, Gpu, InstanceType
from stacks.catalog.models import CHECKPOINTS
from stacks.config.loader import parse_config
from stacks.config.schema import NodeGroup, StackConfig

ROUTERS = ("round-robin", "kv")
OFFLOADS = ("none", "cpu")
# Host memory per worker for the CPU KV cache: disagg-a100-kv-offload's figure.
OFFLOAD_CPU_GB = 100.0
MAX_MODEL_LEN = 32768
SETUP_HOURS = 0.25          # the shipped variants' (the base's setup is the base's)
SHORT = {"round-robin": "rr", "kv": "kv"}

EXCLUDED = (
    "router random: DynoSim routes round-robin or with its KV router only (Dynamo 1.6.1 "
    "dynamo.replay router_mode)",
    "aggregated workers spread over two node groups: DynoSim runs one engine configuration per "
    "role, so two GPU types in one role are not simulated",
    "kvOffload disk: Dynamo 1.6's native offload has no disk tier (pre-flight refuses it)",
    "TP across nodes: cluster.allowMultinode is off on the base",
    "expert parallelism: the timing tables are per (GPU, TP) at expert-parallel size 1 "
    "(stacks/predict/mocker_table.py)",
    f"maxModelLen other than {MAX_MODEL_LEN} and gpuMemoryUtilization other than the default "
    "0.90: the shipped variants' values, kept",
)


@dataclass(frozen=True)
class Tier:
    """One role's workers: where, how split, how many."""
    role: str            # worker | prefill | decode
    group: str           # the base's node group
    gpu: str             # the catalogue's GPU name
    tp: int
    replicas: int

    @property
    def gpus(self) -> int:
        return self.tp * self.replicas

    @property
    def words(self) -> str:
        return f"{self.group} tp{self.tp}x{self.replicas}"


@dataclass(frozen=True)
class Candidate:
    name: str                     # the stack name: explore-<base>-<short id>
    label: str                    # what it is, readable
    precision: str
    topology: str                 # aggregated | disaggregated
    tiers: tuple[Tier, ...]       # agg: (worker,); disagg: (prefill, decode)
    router: str
    offload: str                  # none | cpu
    config: dict[str, Any] = field(repr=False, compare=False)   # the stack file's config
    stack: StackConfig = field(repr=False, compare=False)

    @property
    def gpus(self) -> int:
        return sum(t.gpus for t in self.tiers)

    def tier(self, role: str) -> Tier | None:
        return next((t for t in self.tiers if t.role == role), None)


@dataclass
class Space:
    base: str
    candidates: list[Candidate]
    excluded: list[str]
    tp_refused: list[tuple[str, str, int, list[str]]]   # (group, precision, TP, problems)

    @property
    def size(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True)
class GpuGroup:
    group: NodeGroup
    inst: InstanceType
    gpu: Gpu

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def gpus(self) -> int:
        return self.group.count * self.inst.gpus_per_node

    def tier(self, role: str, tp: int, replicas: int) -> Tier:
        return Tier(role, self.name, self.gpu.name, tp, replicas)


def gpu_groups(base: StackConfig) -> list[GpuGroup]:
    """The base's node groups that hold GPUs."""
    out = []
    for g in base.cluster.node_groups:
        inst = INSTANCE_TYPES.get(g.instance_type)
        if inst is not None and inst.gpu is not None and g.count > 0:
            out.append(GpuGroup(g, inst, inst.gpu))
    return out


def precisions(base: StackConfig, g: GpuGroup) -> tuple[dict[str, str], list[str]]:
    """{precision: checkpoint} the group's GPU runs natively, and why the others are left."""
    inst = g.inst
    ckpts = CHECKPOINTS.get(base.model.id, {base.model.precision.value: base.model.id})
    keep, why = {}, []
    for precision, ckpt in ckpts.items():
        if precision == "fp8" and not g.gpu.fp8_tensor_cores:
            why.append(f"fp8 on {g.gpu.name} ({inst.name}): no FP8 tensor cores; {ckpt} could "
                       "still run as a weight-only (Marlin) fallback with "
                       "model.acceptFp8WeightOnlyFallback, a different path reported apart "
                       "from BF16: not explored")
        elif precision == "nvfp4" and not g.gpu.fp4_tensor_cores:
            why.append(f"nvfp4 on {g.gpu.name}: no FP4 tensor cores")
        else:
            keep[precision] = ckpt
    return keep, why


def tp_values(inst: InstanceType) -> list[int]:
    """TP in powers of two that one node holds (no multinode)."""
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= inst.gpus_per_node]


def transfer_for(instances: list[InstanceType]) -> str:
    """NIXL over LIBFABRIC where every worker's instance has EFA and GPUDirect RDMA (what
    pre-flight asks of it), else NIXL over UCX (KV staged through host memory over TCP)."""
    if all(i.efa_interfaces > 0 and has_gpudirect_rdma(i.name) for i in instances):
        return "nixl-libfabric"
    return "nixl-ucx"


def candidate(base: StackConfig, precision: str, tiers: tuple[Tier, ...], router: str,
              offload: str) -> Candidate:
    """The stack a person would write for this configuration, validated by the schema."""
    agg = len(tiers) == 1
    ckpt = CHECKPOINTS.get(base.model.id, {}).get(precision, base.model.id)
    groups = {g.name: g for g in base.cluster.node_groups}
    insts = [INSTANCE_TYPES[groups[t.group].instance_type] for t in tiers]
    serving: dict[str, Any] = {
        "topology": "aggregated" if agg else "disaggregated", "router": router,
        "kvEvents": True, "transfer": "none" if agg else transfer_for(insts)}
    if offload == "cpu":
        serving["kvOffload"] = {"kind": "cpu", "cpuGb": OFFLOAD_CPU_GB}
    serving["workers"] = [{"role": t.role, "replicas": t.replicas, "tensorParallelSize": t.tp,
                           "nodeGroup": t.group, "maxModelLen": MAX_MODEL_LEN} for t in tiers]
    config = {"target": "aws", "cluster": {"attachTo": base.name},
              "model": {"id": ckpt, "precision": precision}, "serving": serving,
              "cost": {"budgetUsd": base.cost.budget_usd, "setupHours": SETUP_HOURS},
              "tags": {"experiment": base.tags.experiment}}
    label = " ".join([("agg " if agg else "disagg ") + " / ".join(t.words for t in tiers),
                      precision, SHORT[router], *(["offload-cpu"] if offload == "cpu" else [])])
    name = f"explore-{base.name}-{hashlib.sha256(label.encode()).hexdigest()[:6]}"
    return Candidate(name, label, precision, serving["topology"], tiers, router, offload,
                     config, parse_config(name, config))


def probe(base: StackConfig, g: GpuGroup, precision: str, tp: int) -> Candidate:
    """One aggregated replica of `tp` on `g`: what the TP screen runs pre-flight on."""
    return candidate(base, precision, (g.tier("worker", tp, 1),), "round-robin", "none")


def _splits(gpus_p: int, tp_p: int, gpus_d: int, tp_d: int,
            shared: bool) -> list[tuple[int, int]]:
    """(prefill replicas, decode replicas) within the GPUs: one pool when `shared`."""
    out = []
    for n_p in range(1, gpus_p // tp_p + 1):
        left = gpus_p - n_p * tp_p if shared else gpus_d
        out += [(n_p, n_d) for n_d in range(1, left // tp_d + 1)]
    return out


def layouts(base: StackConfig, accepted: dict[tuple[str, str], list[int]]
            ) -> list[tuple[str, tuple[Tier, ...]]]:
    """Every (precision, tiers) the accepted TPs allow ({(group, precision): TPs})."""
    groups = gpu_groups(base)
    out: list[tuple[str, tuple[Tier, ...]]] = []
    for g in groups:
        for (name, precision), tps in accepted.items():
            if name == g.name:
                out += [(precision, (g.tier("worker", tp, r),))
                        for tp in tps for r in range(1, g.gpus // tp + 1)]
    for gp in groups:
        for gd in groups:
            for (name, precision), p_tps in accepted.items():
                if name != gp.name:
                    continue
                for tp_p in p_tps:
                    for tp_d in accepted.get((gd.name, precision), []):
                        out += [(precision, (gp.tier("prefill", tp_p, n_p),
                                             gd.tier("decode", tp_d, n_d)))
                                for n_p, n_d in _splits(gp.gpus, tp_p, gd.gpus, tp_d,
                                                        gp.name == gd.name)]
    return out


def candidates(base: StackConfig, accepted: dict[tuple[str, str], list[int]],
               routers: tuple[str, ...] = ROUTERS,
               offloads: tuple[str, ...] = OFFLOADS) -> list[Candidate]:
    """The space: every layout x router x offload."""
    return [candidate(base, precision, tiers, router, offload)
            for precision, tiers in layouts(base, accepted)
            for router in routers for offload in offloads]
