"""Where pods go (pure): node-group affinities shared by the platform, monitoring and jobs."""

from __future__ import annotations

from typing import Any

from components.conventions import NODE_GROUP_LABEL
from stacks.catalog import INSTANCE_TYPES
from stacks.schema import ClusterConfig


def _groups(cluster: ClusterConfig, gpu: bool) -> list[str]:
    return [g.name for g in cluster.node_groups if g.instance_type in INSTANCE_TYPES
            and (INSTANCE_TYPES[g.instance_type].gpu is not None) == gpu]


def cpu_node_groups(cluster: ClusterConfig) -> list[str]:
    return _groups(cluster, gpu=False)


def gpu_node_groups(cluster: ClusterConfig) -> list[str]:
    return _groups(cluster, gpu=True)


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
