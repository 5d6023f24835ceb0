"""What every component built on a cluster needs from it (names, network, roles, providers),
apart from the Cluster component that makes one: node groups take a handle without importing
the cluster module (no import cycle), and an attached variant builds the same handle from its
base stack's outputs (components/program.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from stacks.config.schema import ComputeMode


@dataclass
class ClusterHandle:
    """Everything built on top of a cluster needs: names, network, roles, providers."""

    name: pulumi.Input[str]
    compute_mode: ComputeMode
    kubeconfig: pulumi.Output
    k8s_provider: k8s.Provider
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    # {zone: private subnet id}; an Output of the dict when read from a base's outputs.
    subnets_by_zone: Mapping[str, pulumi.Input[str]] | pulumi.Output[dict[str, str]]
    security_group_id: pulumi.Input[str]
    node_role_arn: pulumi.Input[str] | None = None
    auto_mode_role_name: pulumi.Input[str] | None = None
    # The pulumi-eks cluster when this stack owns it (managed node groups attach to it).
    eks_cluster: eks.Cluster | None = None
    # Installed already on this cluster (a variant must not install them a second time).
    efa_device_plugin: bool = False
    # Resources whose readiness means "nodes exist" (add-ons and charts wait for them).
    node_resources: list[pulumi.Resource] = field(default_factory=list)
