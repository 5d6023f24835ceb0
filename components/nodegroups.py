"""A stack's node groups on a cluster: EKS managed node groups (AL2023 NVIDIA AMI, a launch
template with IMDSv2 required, cost tags on instances and volumes, EFA interfaces and a cluster
placement group when KV moves over LIBFABRIC), or EKS Auto Mode NodeClass/NodePool objects.

Used by the cluster (its own groups) and by an attached variant (its extra groups, on the base
cluster). Device plugins are installed only in node-group mode (Auto Mode ships the NVIDIA and
EFA plugins in its node AMIs, stacks/preflight/auto_mode.py: a second one must never run there): the
NVIDIA plugin once per cluster, the EFA plugin where EFA is used. Never any GPU Operator driver
or toolkit part: the GPU AMI already carries them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components import auto_mode_specs as auto
from components import node_specs as ns
from components.charts import ChartRef, install
from components.cluster_handle import ClusterHandle
from components.k8s import create_object
from components.tags import launch_template_tag_specifications
from stacks.catalog.node_images import NVIDIA_AMI
from stacks.config.schema import ComputeMode, NodeGroup, StackConfig

NVIDIA_DEVICE_PLUGIN = ChartRef("nvidia-device-plugin", "0.18.0",
                                "https://nvidia.github.io/k8s-device-plugin")
EFA_DEVICE_PLUGIN = ChartRef("aws-efa-k8s-device-plugin", "v0.5.29",
                             "https://aws.github.io/eks-charts")
SYSTEM_NAMESPACE = "kube-system"


@dataclass(frozen=True)
class NodeGroupsArgs:
    stack: StackConfig           # the stack that owns these groups (decides EFA use)
    groups: list[NodeGroup]
    cluster: ClusterHandle
    tags: dict[str, str]
    # The NVIDIA plugin runs on every catalogue GPU type, so only the cluster owner installs it.
    install_device_plugins: bool
    # The cluster's Kubernetes minor (the base's for a variant): picks the pinned AMI release.
    eks_version: str
    # Nodes each group runs now (a campaign scales idle GPU groups to zero); default: count.
    sizes: dict[str, int] | None = None

    def nodes(self, group: NodeGroup) -> int:
        return (self.sizes or {}).get(group.name, group.count)


class NodeGroups(pulumi.ComponentResource):
    names: list[str]
    resources: list[pulumi.Resource]
    efa_device_plugin_installed: bool

    def __init__(self, name: str, args: NodeGroupsArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:NodeGroups", name, None, opts)
        self._args = args
        self.names, self.resources = [], []
        self.efa_device_plugin_installed = args.cluster.efa_device_plugin
        # A base's subnets arrive as one Output (a variant reads them from the base's stack
        # outputs), so zone and subnet choices are made inside apply.
        self._by_zone = pulumi.Output.from_input(args.cluster.subnets_by_zone)
        auto = args.cluster.compute_mode == ComputeMode.AUTO
        for group in args.groups:
            def pinned(m: Mapping[str, Any], g: NodeGroup = group) -> str | None:
                return ns.pinned_zone(g, args.stack, list(m))
            zone = self._by_zone.apply(pinned)
            subnets = pulumi.Output.all(self._by_zone, zone).apply(
                lambda a: [a[0][a[1]]] if a[1] else list(a[0].values()))
            if auto:
                self._auto_mode_group(group, zone, subnets)
            else:
                self._managed_group(name, group, subnets)
            self.names.append(group.name)
        if not auto:
            self._device_plugins(name)
        self.register_outputs({"names": self.names})

    # --- managed node groups --------------------------------------------------------------

    def _managed_group(self, prefix: str, group: NodeGroup,
                       subnets: pulumi.Output[list[str]]) -> None:
        args, cluster = self._args, self._args.cluster
        child = pulumi.ResourceOptions(parent=self)
        inst = ns.instance_of(group)
        efa = ns.uses_efa(group, args.stack)
        lt_args: dict = {
            "metadata_options": ns.IMDSV2_REQUIRED,
            "block_device_mappings": ns.root_volume(group),
            "tag_specifications": launch_template_tag_specifications(args.tags),
            **ns.capacity_reservation_args(group),
        }
        if ns.needs_placement_group(group, args.stack):
            placement = aws.ec2.PlacementGroup(f"{prefix}-{group.name}", strategy="cluster",
                                               tags=args.tags, opts=child)
            lt_args["placement"] = {"group_name": placement.name}
        if efa:
            lt_args["network_interfaces"] = ns.efa_network_interfaces(
                inst, cluster.security_group_id)
        template = aws.ec2.LaunchTemplate(
            f"{prefix}-{group.name}", description=f"dynamo-bench node group {group.name}",
            update_default_version=True, tags=args.tags, opts=child, **lt_args)
        # the same arguments for either resource (each constructor types them its own way)
        common: dict[str, Any] = dict(
            node_group_name=group.name,
            node_role_arn=cluster.node_role_arn,
            subnet_ids=subnets,
            ami_type=ns.AMI_GPU if ns.is_gpu(group) else ns.AMI_CPU,
            # One pinned AMI release (and so one NVIDIA driver) per Kubernetes minor:
            # stacks/catalog/node_images.py, checked against the serving image by pre-flight.
            release_version=NVIDIA_AMI[args.eks_version].release_version,
            instance_types=ns.managed_instance_types(group),
            capacity_type=ns.managed_capacity_type(group),
            # Typed args, not dicts: a remote component's inputs are not key-translated.
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                **ns.scaling(group, args.nodes(group))),
            labels=ns.node_labels(group),
            taints=[aws.eks.NodeGroupTaintArgs(**t) for t in ns.node_group_taints(group)],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)),
            tags=args.tags,
        )
        node_group: pulumi.Resource
        if cluster.eks_cluster is not None:
            node_group = eks.ManagedNodeGroup(f"{prefix}-{group.name}",
                                              cluster=cluster.eks_cluster, opts=child, **common)
        else:
            # An attached variant has no pulumi-eks cluster object, only the base's name.
            node_group = aws.eks.NodeGroup(f"{prefix}-{group.name}", cluster_name=cluster.name,
                                           opts=child, **common)
        self.resources.append(node_group)

    def _device_plugins(self, prefix: str) -> None:
        args = self._args
        opts = pulumi.ResourceOptions(parent=self, depends_on=list(self.resources))
        if args.install_device_plugins and any(ns.is_gpu(g) for g in args.groups):
            self.resources.append(self._chart(f"{prefix}-nvidia-device-plugin",
                                              NVIDIA_DEVICE_PLUGIN,
                                              ns.nvidia_device_plugin_values(), opts))
        if not self.efa_device_plugin_installed and any(
                ns.uses_efa(g, args.stack) for g in args.groups):
            self.resources.append(self._chart(f"{prefix}-efa-device-plugin", EFA_DEVICE_PLUGIN,
                                              ns.efa_device_plugin_values(), opts))
            self.efa_device_plugin_installed = True

    @staticmethod
    def _chart(name: str, ref: ChartRef, values: dict,
               opts: pulumi.ResourceOptions) -> pulumi.Resource:
        return install(name, ref, namespace=SYSTEM_NAMESPACE, values=values, opts=opts)

    # --- EKS Auto Mode -------------------------------------------------------------------

    def _auto_mode_group(self, group: NodeGroup, zone: pulumi.Output[str | None],
                         subnets: pulumi.Output[list[str]]) -> None:
        cluster = self._args.cluster
        opts = pulumi.ResourceOptions(parent=self)
        placement = None
        if auto.wants_placement_group(group, self._args.stack):
            placement = aws.ec2.PlacementGroup(f"auto-{group.name}", strategy="cluster",
                                               tags=self._args.tags, opts=opts).name
        node_class = create_object(auto.node_class(
            group, role=cluster.auto_mode_role_name,
            subnet_terms=subnets.apply(auto.subnet_selector_terms),
            security_group_id=cluster.security_group_id, tags=self._args.tags,
            placement_group=placement), opts)
        # The pool's name and kind are fixed; only its requirements depend on the zone.
        nodes = self._args.nodes(group)
        pool = {**auto.node_pool(group, None, nodes),
                "spec": zone.apply(lambda z: auto.node_pool(group, z, nodes)["spec"])}
        pool_resource = create_object(pool, pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[node_class])))
        self.resources += [node_class, pool_resource]
