"""What EKS Auto Mode does and does not do for a stack (pure data + the pre-flight refusals).

Every fact is AWS's or Karpenter's own, read at the sources named beside it (EKS user guide:
awsdocs/amazon-eks-user-guide latest/ug/automode/*.adoc and the published pages; Karpenter:
kubernetes-sigs/karpenter v1.14.1, commit 6e7eab7a). Auto Mode runs an AWS-managed Karpenter
whose version AWS does not publish; the EKS pages are the authority where they say more.

- Nodes: NodePool `karpenter.sh/v1` + NodeClass `eks.amazonaws.com/v1` (create-node-pool.adoc,
  create-node-class.adoc). A NodePool either launches nodes for pending pods (dynamic: bounded
  by spec.limits, removed by spec.disruption) or keeps exactly spec.replicas nodes (static-
  capacity node pools, auto-static-capacity.adoc; Karpenter nodepool.go `Replicas`: with it
  only limits.nodes is allowed and consolidation is ignored).
- Labels Auto Mode nodes carry and pods may select on: eks.amazonaws.com/compute-type=auto,
  eks.amazonaws.com/instance-family, eks.amazonaws.com/instance-gpu-name (a100, l40s, b200;
  auto-accelerated.adoc @91872c13, auto-odcr.adoc @4f3d5005); Karpenter's well-known
  karpenter.sh/nodepool, karpenter.sh/capacity-type (on-demand, spot, reserved) and
  node.kubernetes.io/instance-type (pkg/apis/v1/labels.go); and the NodePool template's own
  labels (ours: dynamo-bench.io/node-group). Auto Mode does not taint GPU nodes itself: the
  NodePool's template taints do (ours: nvidia.com/gpu=true:NoSchedule, as auto-odcr.adoc).
- Driver and device plugins: Auto Mode ships the NVIDIA driver and device plugin ("runs
  automatically and isn't visible as a daemon set", auto-accelerated.adoc) and the EFA device
  plugin ("we include device plugins for Neuron ... as well as EFA in addition to the NVIDIA
  device plugin", AWS in awsdocs/amazon-eks-user-guide#914; "the EFA device plugin is already
  included in Auto Mode AMIs", aws/eks-charts#1359, 2026-08-17; the chart itself refuses Auto
  Mode nodes, aws/eks-charts#1358). Nothing of ours may install a second one.
- EFA (EKS user guide, "Manage EFA devices on Amazon EKS", awsdocs/amazon-eks-user-guide
  latest/ug/ml/device-management-efa.adoc @43d79bdb; the older text this project first quoted,
  "EKS Auto Mode and Karpenter currently do not support placement groups", is gone, aws.md M1):
  "You can customize the per-device EFA configuration and use placement groups with EKS Auto
  Mode ... you pass configuration for each network interface through the NodeClass under
  advancedNetworking.networkInterfaces"; "This feature can be used with static capacity node
  pools". The project gives a dynamic EFA pool a cluster placement group
  (components/auto_mode_specs.wants_placement_group) and lets Auto Mode configure the
  interfaces of nodes whose pods ask for vpc.amazonaws.com/efa. It does not build
  networkInterfaces: with them "EKS Auto Mode does not attach additional IPs, prefixes, or ENIs
  after instance launch", so the pod IP budget would have to be sized by hand, untested here;
  a static pool, which has EFA only through networkInterfaces, stays refused for LIBFABRIC.
- Capacity reservations: NodeClass spec.capacityReservationSelectorTerms ({id} or {tags,
  owner}) selects ODCRs and Capacity Blocks for ML; their nodes are karpenter.sh/capacity-type
  "reserved"; once any NodeClass selects reservations, Auto Mode stops using open ODCRs for
  every NodeClass of the cluster (auto-odcr.adoc).
- Instance types: the families below appear in AWS's Auto Mode pages (automode-learn-
  instances.adoc "Supported instance reference": p5, p4d, g6e, m7i, c7i ...; auto-odcr.adoc's
  reserved NodePool: p4d, p4de, p5, p6-b200).
"""

from __future__ import annotations

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem
from stacks.config.schema import ComputeMode, NodeGroup, Provisioning, StackConfig, TransferBackend

EFA_SOURCE = ("EKS user guide, 'Manage EFA devices on Amazon EKS' (device-management-efa): "
              "a static pool has EFA only through the NodeClass's "
              "advancedNetworking.networkInterfaces, which this project does not build")
INSTANCES_SOURCE = ("EKS user guide automode-learn-instances.adoc 'Supported instance "
                    "reference' and auto-odcr.adoc")
# Instance families AWS's Auto Mode pages name (sources above); the catalogue's are all here.
SUPPORTED_FAMILIES = frozenset({
    "p4d", "p4de", "p5", "p6-b200", "g6e", "g6", "g5", "m7i", "m7a", "m6i", "c7i", "c6i",
    "r7i", "r6i"})

# A dynamic NodePool removes a node left empty this long after its last pod
# (spec.disruption.consolidateAfter, components/auto_mode_specs.py), unless the pool is parked
# (0 nodes: at once). The campaign forecast (stacks/plan/schedule.py) bills a released node until
# then.
EMPTY_NODE_GRACE_S = 1800

# Labels Auto Mode and Karpenter put on every node (sources in the module docstring).
COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"
INSTANCE_FAMILY_LABEL = "eks.amazonaws.com/instance-family"
INSTANCE_GPU_NAME_LABEL = "eks.amazonaws.com/instance-gpu-name"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"


def is_gpu_group(group: NodeGroup) -> bool:
    it = INSTANCE_TYPES.get(group.instance_type)
    return it is not None and it.gpu is not None


def provisioning(group: NodeGroup) -> Provisioning:
    """The group's NodePool mode: its own setting, else dynamic for GPU groups (EFA needs it,
    and an idle GPU node can go) and static for CPU groups (system pods always have room)."""
    if group.provisioning is not None:
        return group.provisioning
    return Provisioning.DYNAMIC if is_gpu_group(group) else Provisioning.STATIC


def has_efa(group: NodeGroup) -> bool:
    """Whether Auto Mode gives the group's nodes EFA interfaces when pods ask for them."""
    it = INSTANCE_TYPES.get(group.instance_type)
    return (it is not None and it.efa_interfaces > 0
            and provisioning(group) == Provisioning.DYNAMIC)


def _group_fields(stack: StackConfig) -> list[tuple[str, NodeGroup]]:
    return [(f"dynamo-bench:cluster.nodeGroups[{i}]", g)
            for i, g in enumerate(stack.cluster.node_groups)]


def check_auto_mode(stack: StackConfig, base: StackConfig | None, out: list[Problem]) -> None:
    """Refuse what Auto Mode cannot do for this stack, each with its source."""
    owner = base or stack
    if stack.target != "aws":
        return
    if owner.cluster.compute_mode != ComputeMode.AUTO:
        for where, g in _group_fields(stack):
            if g.provisioning is not None:
                out.append(Problem(f"{where}.provisioning", "only EKS Auto Mode NodePools have "
                                   f"a provisioning mode; this cluster is "
                                   f"{owner.cluster.compute_mode.value}",
                                   "remove it, or use computeMode: auto on the base"))
        return
    for where, g in _group_fields(stack):
        it = INSTANCE_TYPES.get(g.instance_type)
        if it is not None and it.family not in SUPPORTED_FAMILIES:
            out.append(Problem(f"{where}.instanceType", f"EKS Auto Mode does not list the "
                               f"{it.family} family ({INSTANCES_SOURCE})",
                               "use a listed type, or managed node groups (computeMode: "
                               "nodegroups)"))
    if stack.serving is None or stack.serving.transfer != TransferBackend.NIXL_LIBFABRIC:
        return
    groups = {g.name: g for g in [*owner.cluster.node_groups, *stack.cluster.node_groups]}
    for i, w in enumerate(stack.serving.workers):
        group = groups.get(w.node_group)
        if group is not None and provisioning(group) == Provisioning.STATIC:
            out.append(Problem(f"dynamo-bench:serving.workers[{i}].nodeGroup",
                               f"NIXL over LIBFABRIC needs EFA, and group '{group.name}' is a "
                               f"static-capacity Auto Mode NodePool ({EFA_SOURCE})",
                               "set provisioning: dynamic on that group, or use transfer: "
                               "nixl-ucx"))


def auto_mode_notes(stack: StackConfig, base: StackConfig | None) -> list[str]:
    """What an Auto Mode stack should know that is not a problem."""
    owner = base or stack
    if stack.target != "aws" or owner.cluster.compute_mode != ComputeMode.AUTO:
        return []
    notes = ["EKS Auto Mode chooses the node AMI and its NVIDIA driver (not pinned here); the "
             "run's attestation checks the driver the GPUs report against the image's CUDA"]
    if stack.serving is not None and stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC:
        notes.append("EFA on Auto Mode: the dynamic GPU pools get a cluster placement group as "
                     "node groups do, but Auto Mode, not the launch template, lays out the EFA "
                     "interfaces (all of type EFA): KV transfer times may differ from a "
                     "node-group base's")
    return notes
