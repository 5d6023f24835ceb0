"""EKS Auto Mode objects of a stack's node groups (pure): one NodeClass and one NodePool per
group, and the NodePool change that scales a group (what a campaign scheduler patches).

Fields, checked against the published definitions vendored in tests/schemas/ (sources in its
README): NodeClass `eks.amazonaws.com/v1` spec.role, subnetSelectorTerms [{id}],
securityGroupSelectorTerms [{id}], ephemeralStorage.size, tags, capacityReservationSelectorTerms
[{id}] (EKS user guide create-node-class.adoc, auto-odcr.adoc); NodePool `karpenter.sh/v1`
spec.template.metadata.labels, spec.template.spec.{nodeClassRef {group, kind, name},
requirements, taints}, spec.limits, spec.disruption {consolidationPolicy, consolidateAfter,
budgets [{nodes, reasons}]} and spec.replicas (Karpenter v1.14.1 karpenter.sh_nodepools.yaml;
static capacity: EKS user guide auto-static-capacity.adoc). What Auto Mode does with them, and
why GPU groups are dynamic and CPU groups static: stacks/preflight/auto_mode.py.
"""

from __future__ import annotations

from components.conventions import GPU_RESOURCE, GPU_TAINT_EFFECT, GPU_TAINT_KEY, GPU_TAINT_VALUE
from components.node_specs import instance_of, needs_placement_group, node_labels
from components.placement import INSTANCE_TYPE_LABEL
from stacks.config.schema import CapacityType, NodeGroup, Provisioning, StackConfig
from stacks.preflight.auto_mode import (
    CAPACITY_TYPE_LABEL,
    EMPTY_NODE_GRACE_S,
    INSTANCE_FAMILY_LABEL,
    has_efa,
    provisioning,
)

NODECLASS_API = "eks.amazonaws.com/v1"
NODEPOOL_API = "karpenter.sh/v1"
# Karpenter's capacity-type values (labels.go): reservations and capacity blocks are "reserved".
KARPENTER_CAPACITY = {CapacityType.ON_DEMAND: "on-demand", CapacityType.SPOT: "spot",
                      CapacityType.RESERVATION: "reserved",
                      CapacityType.CAPACITY_BLOCK: "reserved"}
# An empty dynamic GPU node goes this long after its last pod (a variant's destroy); a node
# that runs pods is never drifted or consolidated away (budget 0 for those reasons).
EMPTY_NODE_GRACE = f"{EMPTY_NODE_GRACE_S // 60}m"
NO_VOLUNTARY_DISRUPTION = [{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}]


def auto_mode_name(group: NodeGroup) -> str:
    # "default" is reserved for the built-in NodeClass.
    return f"dynamo-bench-{group.name}"


def subnet_selector_terms(subnet_ids: list[str]) -> list[dict[str, str]]:
    return [{"id": s} for s in subnet_ids]


def wants_placement_group(group: NodeGroup, stack: StackConfig) -> bool:
    """A dynamic EFA pool gets a cluster placement group, as a managed node group does
    (node_specs.needs_placement_group: not inside a reservation). The EKS user guide
    (awsdocs/amazon-eks-user-guide latest/ug/ml/device-management-efa.adoc @43d79bdb): "You can
    customize the per-device EFA configuration and use placement groups with EKS Auto Mode",
    its example NodeClass carrying `placementGroupSelector: {name: ...}` (aws.md M1; the older
    "EKS Auto Mode ... do[es] not support placement groups" is gone from the page). The pool is
    pinned to one zone (EFA), which a cluster placement group needs."""
    return has_efa(group) and needs_placement_group(group, stack)


def node_class(group: NodeGroup, *, role: object, subnet_terms: object,
               security_group_id: object, tags: dict[str, str],
               placement_group: object | None = None) -> dict:
    """`role`, `subnet_terms`, `security_group_id` and `placement_group` (a placement group's
    name) may be Pulumi Outputs (they come from the cluster, or from the base stack's outputs)."""
    spec: dict = {
        "role": role,
        "subnetSelectorTerms": subnet_terms,
        "securityGroupSelectorTerms": [{"id": security_group_id}],
        "ephemeralStorage": {"size": f"{group.disk_gib}Gi"},
        "tags": dict(tags),
    }
    if group.capacity_reservation_id:
        spec["capacityReservationSelectorTerms"] = [{"id": group.capacity_reservation_id}]
    if placement_group is not None:
        spec["placementGroupSelector"] = {"name": placement_group}
    return {"apiVersion": NODECLASS_API, "kind": "NodeClass",
            "metadata": {"name": auto_mode_name(group)}, "spec": spec}


def pool_limits(group: NodeGroup, nodes: int) -> dict[str, str]:
    """The pool never holds more than `nodes` nodes (and their GPUs): cost stays what pre-flight
    priced. A static pool may state only limits.nodes (Karpenter's CEL rule on replicas)."""
    limits = {"nodes": str(nodes)}
    inst = instance_of(group)
    if inst.gpu is not None and provisioning(group) == Provisioning.DYNAMIC:
        limits[GPU_RESOURCE] = str(inst.gpus_per_node * nodes)
    return limits


def pool_capacity(group: NodeGroup, nodes: int) -> dict:
    """The NodePool spec fields that size a group to `nodes` (0 parks it): a JSON merge patch of
    `spec` for a scheduler, and what node_pool builds from the stack's count.

    Static pool: spec.replicas (Auto Mode adds or removes nodes to match). Dynamic pool:
    spec.limits (no node beyond them) and spec.disruption (empty nodes go after
    EMPTY_NODE_GRACE, or at once when parked: consolidateAfter 0s); a scheduler parks a dynamic
    group by deleting its pods first, since limits never evict a running node."""
    if provisioning(group) == Provisioning.STATIC:
        # consolidateAfter is required in disruption and ignored with replicas (the CRD).
        # One node of headroom over the replicas, so a drifted or expired node is replaced
        # before it goes (auto-static-capacity.adoc, Best practices: "Set `limits.nodes`
        # higher than `replicas` to allow for temporary scaling during node replacement
        # operations"); a parked pool (0 replicas) keeps none.
        return {"replicas": nodes, "limits": pool_limits(group, nodes + 1 if nodes else 0),
                "disruption": {"consolidateAfter": "Never",
                               "budgets": NO_VOLUNTARY_DISRUPTION}}
    return {"limits": pool_limits(group, nodes),
            "disruption": {"consolidationPolicy": "WhenEmpty",
                           "consolidateAfter": EMPTY_NODE_GRACE if nodes else "0s",
                           "budgets": NO_VOLUNTARY_DISRUPTION}}


def node_pool(group: NodeGroup, zone: str | None, nodes: int | None = None) -> dict:
    """`nodes`: what the pool runs now (default the group's count); a campaign lowers it
    through the base's dynamo-bench:nodeGroupSizes, to 0 when no scheduled variant uses the
    group (pool_capacity)."""
    inst = instance_of(group)
    requirements = [
        {"key": INSTANCE_FAMILY_LABEL, "operator": "In", "values": [inst.family]},
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [inst.name]},
        {"key": CAPACITY_TYPE_LABEL, "operator": "In",
         "values": [KARPENTER_CAPACITY[group.capacity_type]]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    if zone:
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In",
                             "values": [zone]})
    template_spec: dict = {
        "nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass",
                         "name": auto_mode_name(group)},
        "requirements": requirements,
    }
    if inst.gpu is not None:
        # Auto Mode does not taint GPU nodes: the pool does (auto-odcr.adoc does the same).
        template_spec["taints"] = [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE,
                                    "effect": GPU_TAINT_EFFECT}]
    return {
        "apiVersion": NODEPOOL_API, "kind": "NodePool",
        "metadata": {"name": auto_mode_name(group)},
        "spec": {"template": {"metadata": {"labels": node_labels(group)},
                              "spec": template_spec},
                 **pool_capacity(group, group.count if nodes is None else nodes)},
    }
