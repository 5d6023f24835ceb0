"""Where pods go (pure): node-group affinities shared by the platform, monitoring and jobs, and
the instance-type match that finds GPU nodes of any group (a variant's extra groups included)."""

from __future__ import annotations

from typing import Any

from components.conventions import NODE_GROUP_LABEL
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import ClusterConfig
from stacks.conventions.k8s_names import (  # noqa: F401 - shared with the cluster runner
    INSTANCE_TYPE_LABEL,
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
