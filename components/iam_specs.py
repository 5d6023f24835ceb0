"""IAM documents of the EKS cluster role on Auto Mode (pure).

On Auto Mode the project makes the cluster role itself (and hands it to pulumi-eks as
`serviceRole`), because pulumi-eks's own role has only the five managed policies
(pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, createCore: "EKS auto mode requires additional
managed policies": AmazonEKSClusterPolicy, ...ComputePolicy, ...BlockStoragePolicy,
...LoadBalancingPolicy, ...NetworkingPolicy, trust with sts:AssumeRole and sts:TagSession), and
those do not let Auto Mode tag what it creates. The project's NodeClasses carry the cost tags
(components/auto_mode_specs.node_class) and so does the Auto Mode StorageClass
(components/loadgen_specs.storage_classes, tagSpecification_N). The EKS user guide
(awsdocs/amazon-eks-user-guide latest/ug/automode/auto-learn-iam.adoc, "Custom AWS tags for
EKS Auto resources", the auto-tag-policy example): "By default, the managed policies related to
EKS Auto Mode do not permit applying user defined tags to Auto Mode provisioned AWS resources.
If you want to apply user defined tags ... you must attach additional permissions to the
Cluster IAM Role"; auto-troubleshoot.adoc, "Node not joining cluster": "Error getting launch
template configs. You may receive this error if you are setting custom tags in the NodeClass
with the default cluster IAM role permissions"; create-storage-class.adoc: "You will need to
update the Cluster IAM Role for custom tags."

The tag policy is the guide's example, limited to what this project asks for: Compute
(instances, fleets, launch templates of the NodeClasses), Storage (node and StorageClass
volumes) and Networking (node interfaces); no load balancer or Shield statement, since no
Service here is a load balancer (components/policies.no_exposed_services).
"""

from __future__ import annotations

from typing import Any

# auto-learn-iam.adoc, "Cluster IAM role": the suggested managed policies.
AUTO_MODE_CLUSTER_POLICIES = ("AmazonEKSClusterPolicy", "AmazonEKSComputePolicy",
                              "AmazonEKSBlockStoragePolicy", "AmazonEKSLoadBalancingPolicy",
                              "AmazonEKSNetworkingPolicy")
# Auto Mode tags each request with the cluster's name; the condition keeps the extra
# permission to this cluster's own requests (the guide's example condition).
CLUSTER_NAME_TAG = "aws:RequestTag/eks:eks-cluster-name"
CLUSTER_NAME_OF_SESSION = "${aws:PrincipalTag/eks:eks-cluster-name}"
TAG_COMPUTE_ACTIONS = ("ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate")
TAG_STORAGE_ACTIONS = ("ec2:CreateVolume", "ec2:CreateSnapshot")
TAG_NETWORK_ACTIONS = ("ec2:CreateNetworkInterface",)


def managed_policy_arn(partition: str, policy: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{policy}"


def cluster_role_trust() -> dict[str, Any]:
    """EKS assumes the role; Auto Mode also needs sts:TagSession (the session carries the
    eks:eks-cluster-name tag the tag policy's condition reads)."""
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"],
                           "Principal": {"Service": "eks.amazonaws.com"}}]}


def auto_mode_tag_policy(partition: str) -> dict[str, Any]:
    """The guide's auto-tag-policy statements Compute, Storage and Networking."""
    own_cluster = {"StringEquals": {CLUSTER_NAME_TAG: CLUSTER_NAME_OF_SESSION}}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Compute", "Effect": "Allow", "Action": list(TAG_COMPUTE_ACTIONS),
         "Resource": "*",
         "Condition": {**own_cluster, "StringLike": {
             "aws:RequestTag/eks:kubernetes-node-class-name": "*",
             "aws:RequestTag/eks:kubernetes-node-pool-name": "*"}}},
        {"Sid": "Storage", "Effect": "Allow", "Action": list(TAG_STORAGE_ACTIONS),
         "Resource": [f"arn:{partition}:ec2:*:*:volume/*",
                      f"arn:{partition}:ec2:*:*:snapshot/*"],
         "Condition": own_cluster},
        {"Sid": "Networking", "Effect": "Allow", "Action": list(TAG_NETWORK_ACTIONS),
         "Resource": "*",
         "Condition": {**own_cluster, "StringLike": {
             "aws:RequestTag/eks:kubernetes-cni-node-name": "*"}}},
    ]}


# The EFS CSI controller's read-only statement (kubernetes-sigs/aws-efs-csi-driver
# docs/iam-policy-example.json @8ea8b9d3, its first statement): the project provisions EFS
# statically (its own access points, `volumeHandle <fs>::<fsap>`, a StorageClass without
# `provisioningMode`, PVs Retain), so the controller never creates or deletes an access point,
# the two write statements of that example and of the managed AmazonEFSCSIDriverPolicy
# (aws.md M5). The describes stay, so a driver that looks its volumes up still can.
EFS_CSI_READ_ACTIONS = ("elasticfilesystem:DescribeAccessPoints",
                        "elasticfilesystem:DescribeFileSystems",
                        "elasticfilesystem:DescribeMountTargets",
                        "ec2:DescribeAvailabilityZones")


def efs_csi_static_policy() -> dict[str, Any]:
    """What the EFS CSI controller may do when every volume is provisioned statically."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Describe", "Effect": "Allow", "Action": list(EFS_CSI_READ_ACTIONS),
         "Resource": "*"}]}
