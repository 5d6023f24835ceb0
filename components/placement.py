"""Where pods go (pure): node-group affinities shared by the platform, monitoring and jobs, and
the instance-type match that finds GPU nodes of any group (a variant's extra groups included)."""

from __future__ import annotations

from typing import Any

from components.conventions import NODE_GROUP_LABEL
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import ClusterConfig, StackConfig
from stacks.conventions.k8s_names import (  # noqa: F401 - shared with the cluster runner
    INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
    cpu_node_groups,
    gpu_node_groups,
)


def node_group_affinity(groups: list[str]) -> dict[str, Any]:
    """Required node affinity to any of `groups` ({} for none: schedule anywhere)."""
    if not groups:
        return {}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": NODE_GROUP_LABEL, "operator": "In", "values": sorted(groups)}]}]}}}


def cpu_node_affinity(cluster: ClusterConfig) -> dict[str, Any]:
    """System pods (operator, monitoring, load generator) stay off the GPU nodes."""
    return node_group_affinity(cpu_node_groups(cluster))


def catalogue_gpu_types(*, efa: bool = False) -> list[str]:
    """Every GPU instance type of the catalogue (with EFA interfaces only, when `efa`)."""
    return sorted(n for n, i in INSTANCE_TYPES.items()
                  if i.gpu is not None and (i.efa_interfaces > 0 or not efa))


def gpu_instance_type_term() -> dict[str, Any]:
    """A node selector term matching any catalogue GPU instance type."""
    return {"matchExpressions": [{"key": INSTANCE_TYPE_LABEL, "operator": "In",
                                  "values": catalogue_gpu_types()}]}


def gpu_node_affinity(cluster: ClusterConfig) -> dict[str, Any]:
    """The cluster's GPU groups, or any node of a catalogue GPU type (terms are ORed): a
    variant's extra GPU group joins a running base cluster under a name the base never saw."""
    by_group = node_group_affinity(gpu_node_groups(cluster))
    terms = (by_group["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"] if by_group else [])
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [*terms, gpu_instance_type_term()]}}}


def workers_zone(stack: StackConfig, cluster: ClusterConfig) -> str | None:
    """The one zone the stack's worker groups are pinned to in its config, else None.

    The frontend and the load generator join it (aws.md S1): a request that crosses AZs between
    client, frontend and workers adds 0-2 inter-AZ round trips that differ from run to run and
    variant to variant, and EFA workers are single-AZ by design (EC2 placement groups,
    awsdocs/amazon-eks-user-guide latest/ug/ml/node-efa.adoc). A zone chosen only at deploy time
    (the first of the account's zones) is not known here; the CPU group follows the GPU groups'
    zone then (components.node_specs.pinned_zone), which puts the frontend there too.
    """
    if stack.serving is None:
        return None
    hosts = {w.node_group for w in stack.serving.workers}
    zones = {g.availability_zone for g in cluster.node_groups if g.name in hosts}
    return zones.pop() if len(zones) == 1 else None


def zone_affinity(zone: str | None) -> dict[str, Any]:
    """Required node affinity to one zone ({} for None)."""
    if zone is None:
        return {}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}}}
