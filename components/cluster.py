"""The EKS cluster of a standalone or base stack: network, control plane (pulumi-eks, pinned
Kubernetes version), the node IAM role, the compute (managed node groups or Auto Mode pools,
see components/nodegroups.py), the RDMA device plugin it declares (components/rdma.py) and a
Kubernetes provider from the cluster's kubeconfig.

`ClusterHandle` (components/cluster_handle.py) is what later components need from a cluster;
an attached variant builds the same handle from its base stack's outputs, so its extra node
groups and its graph are built by the same code on the base's cluster.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.api_access import eks_endpoint_args
from components.cluster_handle import ClusterHandle
from components.iam_specs import (
    AUTO_MODE_CLUSTER_POLICIES,
    auto_mode_tag_policy,
    cluster_role_trust,
    managed_policy_arn,
)
from components.network import Network, StackOnAws
from components.nodegroups import NodeGroups, NodeGroupsArgs
from components.rdma import RdmaDevicePlugin, RdmaPluginArgs
from stacks.config.schema import ComputeMode, StackConfig
from stacks.preflight.aws_checks import eks_cluster_name

# Managed policies of a managed node group's instance role (EKS user guide,
# create-node-role.adoc: AmazonEKSWorkerNodePolicy, and for ECR "such as provided by the
# AmazonEC2ContainerRegistryPullOnly policy", which ReadOnly exceeds; the VPC CNI's policy
# stays here because the vpc-cni add-on pulumi-eks installs has no role of its own). EKS allows
# both places ("You can attach the policy to the Amazon EKS node IAM role, or to a separate IAM
# role ... We recommend that you assign it to a separate role", EKS user guide cni-iam-role):
# a separate role (pulumi-eks 4.4.0 VpcCniOptions.serviceAccountRoleArn, IRSA) would change how
# every node's pod networking gets credentials at bootstrap, which no mock can check: kept on
# the node role on purpose (aws.md M5).
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                 "AmazonEC2ContainerRegistryPullOnly")


def cluster_name(stack: StackConfig) -> str:
    # pre-flight refuses a name EKS would refuse (stacks.preflight.aws_checks), so nothing is
    # truncated
    return eks_cluster_name(stack)


class Cluster(pulumi.ComponentResource):
    handle: ClusterHandle
    node_groups: NodeGroups

    def __init__(self, name: str, args: StackOnAws, opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:Cluster", name, None, opts)
        stack, tags, provider = args.stack, args.tags, args.provider
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        auto = stack.cluster.compute_mode == ComputeMode.AUTO
        network = Network(f"{name}-net", args, opts=pulumi.ResourceOptions(parent=self))
        node_role = None if auto else self._node_role(name, tags, child)
        eks_args: dict = {}
        role_ready: list[pulumi.Resource] = []
        if auto:
            # Auto Mode owns the nodes' driver, device plugin, EBS CSI, pod identity and EFA
            # support; pulumi-eks creates the Auto Mode node role. The cluster role is ours:
            # it must be allowed to tag what the NodeClasses and StorageClass tag
            # (components/iam_specs.py).
            eks_args["auto_mode"] = eks.AutoModeOptionsArgs(enabled=True)
            eks_args["service_role"], role_ready = self._auto_mode_cluster_role(
                name, tags, child)
        else:
            eks_args["instance_roles"] = [node_role]
        cluster = eks.Cluster(
            f"{name}-eks",
            name=cluster_name(stack),
            version=stack.cluster.eks_version,
            vpc_id=network.vpc_id,
            private_subnet_ids=network.private_subnet_ids,
            public_subnet_ids=network.public_subnet_ids or None,
            node_associate_public_ip_address=False,
            # Only the deployer's CIDRs reach the public endpoint, or none (api_access.py).
            **eks_endpoint_args(args.api_access),
            authentication_mode=eks.AuthenticationMode.API,
            skip_default_node_group=True,
            # Nodes use the EKS-created cluster security group (EFA needs all traffic between
            # members, which that group allows).
            skip_default_security_groups=True,
            create_oidc_provider=False,  # add-ons use EKS Pod Identity
            tags=tags,
            cluster_tags=tags,
            opts=pulumi.ResourceOptions(parent=self, providers={"aws": provider},
                                        depends_on=role_ready),
            **eks_args,
        )
        k8s_provider = k8s.Provider(f"{name}-k8s", kubeconfig=cluster.kubeconfig_json,
                                    enable_server_side_apply=True,
                                    opts=pulumi.ResourceOptions(parent=self))
        self.handle = ClusterHandle(
            name=cluster_name(stack), compute_mode=stack.cluster.compute_mode,
            kubeconfig=cluster.kubeconfig_json, k8s_provider=k8s_provider,
            vpc_id=network.vpc_id, vpc_cidr=network.vpc_cidr,
            private_subnet_ids=network.private_subnet_ids,
            subnets_by_zone=network.subnets_by_zone,
            security_group_id=cluster.cluster_security_group_id,
            node_role_arn=node_role.arn if node_role else None,
            auto_mode_role_name=cluster.auto_mode_node_role_name if auto else None,
            eks_cluster=cluster)
        if not auto:
            # Pod Identity gives the CSI drivers their IAM roles (Auto Mode has it built in).
            agent = aws.eks.Addon(f"{name}-pod-identity", cluster_name=cluster_name(stack),
                                  addon_name="eks-pod-identity-agent", tags=tags,
                                  opts=pulumi.ResourceOptions.merge(
                                      child, pulumi.ResourceOptions(depends_on=[cluster])))
            self.handle.node_resources.append(agent)
        self.node_groups = NodeGroups(
            f"{name}-nodes",
            NodeGroupsArgs(stack=stack, groups=list(stack.cluster.node_groups),
                           cluster=self.handle, tags=tags, install_device_plugins=True,
                           eks_version=stack.cluster.eks_version,
                           sizes=args.node_group_sizes),
            opts=pulumi.ResourceOptions(parent=self, providers=[provider, k8s_provider]))
        self.handle.node_resources += self.node_groups.resources
        if stack.cluster.rdma is not None:
            rdma = RdmaDevicePlugin(f"{name}-rdma", RdmaPluginArgs(
                cluster=stack.cluster, depends_on=list(self.node_groups.resources)),
                opts=pulumi.ResourceOptions(parent=self, providers=[provider, k8s_provider]))
            self.handle.node_resources += rdma.resources
        self.handle.efa_device_plugin = self.node_groups.efa_device_plugin_installed
        self.register_outputs({"clusterName": self.handle.name,
                               "nodeGroupNames": self.node_groups.names})

    def _auto_mode_cluster_role(self, name: str, tags: dict[str, str],
                                child: pulumi.ResourceOptions,
                                ) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        """The Auto Mode cluster role and what must exist before the cluster uses it (its
        policies: EKS starts launching nodes as soon as the cluster is active)."""
        role = aws.iam.Role(f"{name}-cluster-role",
                            assume_role_policy=pulumi.Output.json_dumps(cluster_role_trust()),
                            tags=tags, opts=child)
        partition = _partition(child)
        ready: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(f"{name}-cluster-{policy}", role=role.name,
                                         policy_arn=managed_policy_arn(partition, policy),
                                         opts=child)
            for policy in AUTO_MODE_CLUSTER_POLICIES]
        ready.append(aws.iam.RolePolicy(
            f"{name}-cluster-auto-tags", role=role.name,
            policy=pulumi.Output.json_dumps(auto_mode_tag_policy(partition)), opts=child))
        return role, ready

    def _node_role(self, name: str, tags: dict[str, str],
                   child: pulumi.ResourceOptions) -> aws.iam.Role:
        role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=pulumi.Output.json_dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                               "Principal": {"Service": "ec2.amazonaws.com"}}]}),
            tags=tags, opts=child)
        partition = _partition(child)
        for policy in NODE_POLICIES:
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}", role=role.name,
                policy_arn=managed_policy_arn(partition, policy), opts=child)
        return role


def _partition(opts: pulumi.ResourceOptions) -> str:
    """aws, aws-cn or aws-us-gov: managed policy ARNs differ by partition."""
    return aws.get_partition(opts=pulumi.InvokeOptions(provider=opts.provider)).partition
