"""What one stack builds, in the design brief's install order (enforced with depends_on):
namespace, storage classes, HF token Secret -> nodes and device plugins (GPU check) ->
monitoring -> Dynamo platform -> model download to EFS -> serving.

- standalone (a cluster and serving): everything;
- base (a cluster, no serving): cluster (with the RDMA device plugin it declares), storage,
  monitoring, platform, the model download;
- attached variant: on its base's cluster (read through a StackReference), only its extra node
  groups, downloads of the checkpoints the base does not cache (its model, a draft model), its
  recipe ConfigMaps and its graph.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import Cluster, ClusterHandle
from components.downloads import planned_downloads
from components.dynamo import (
    DynamoGraph,
    DynamoNamespace,
    DynamoPlatform,
    GraphArgs,
    PlatformArgs,
    dynamo_namespace,
)
from components.monitoring import Monitoring, MonitoringArgs, prometheus_url
from components.network import StackOnAws
from components.nodegroups import NodeGroups, NodeGroupsArgs
from components.storage import ModelDownload, ModelDownloadArgs, Storage, StorageArgs
from components.tags import stack_tags
from stacks.catalog.node_images import NVIDIA_AMI
from stacks.config.api_access import ApiAccess, parse_api_access
from stacks.config.campaign_config import CampaignDeploy
from stacks.config.loader import PROJECT
from stacks.config.schema import ComputeMode, StackConfig
from stacks.conventions.efa_groups import uses_efa
from stacks.preflight.auto_mode import has_efa as auto_mode_has_efa
from stacks.preflight.run import effective_cluster


def aws_provider(stack: StackConfig, region: str, tags: dict[str, str]) -> aws.Provider:
    # default_tags reach every resource this provider creates, including those inside
    # pulumi-eks; explicit tags= on each resource keep them visible to the policy pack.
    return aws.Provider("aws", region=region, default_tags={"tags": tags})


def _worker_efa(stack: StackConfig, base: StackConfig | None, mode: ComputeMode) -> bool:
    """Whether every worker's nodes have EFA devices (owner of a group decides, see uses_efa)."""
    assert stack.serving is not None
    own = {g.name for g in stack.cluster.node_groups}
    cluster = effective_cluster(stack, base)
    for w in stack.serving.workers:
        group = cluster.group(w.node_group)
        if group is None:
            return False
        if mode == ComputeMode.AUTO:
            has = auto_mode_has_efa(group)  # dynamic pools only (stacks/preflight/auto_mode.py)
        else:
            has = uses_efa(group, stack if group.name in own or base is None else base)
        if not has:
            return False
    return True


def build(stack: StackConfig, base: StackConfig | None,
          hf_token: pulumi.Output[str] | None, api_access: str | None = None,
          campaign: CampaignDeploy | None = None,
          node_group_sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Create the stack's resources; returns the stack outputs. `hf_token` (a Pulumi secret)
    and `api_access` are needed by a stack that owns its storage and cluster; `campaign` and
    `node_group_sizes` are what a campaign asked (stacks/config/campaign_config.py)."""
    tags = stack_tags(stack)
    if base is not None:
        return _build_variant(stack, base, tags, campaign)
    access, problems = parse_api_access(api_access)
    assert hf_token is not None and access is not None and not problems, \
        ("pre-flight (stacks.preflight.deploy_checks) refuses a missing token or endpoint access "
         "first")
    return _build_owned(stack, tags, hf_token, access, node_group_sizes)


def _build_owned(stack: StackConfig, tags: dict[str, str], hf_token: pulumi.Output[str],
                 access: ApiAccess, sizes: dict[str, int] | None) -> dict:
    provider = aws_provider(stack, stack.cluster.region, tags)
    cluster = Cluster("cluster", StackOnAws(stack=stack, tags=tags, provider=provider,
                                            api_access=access, node_group_sizes=sizes),
                      opts=pulumi.ResourceOptions(providers=[provider]))
    h = cluster.handle
    opts = pulumi.ResourceOptions(providers=[provider, h.k8s_provider])
    namespace = dynamo_namespace(stack)
    dyn_ns = DynamoNamespace("dynamo-namespace", namespace, opts=opts)
    storage = Storage("storage", StorageArgs(
        stack=stack, tags=tags, cluster=h, namespace=namespace,
        hf_token=hf_token, depends_on=[dyn_ns.namespace]), opts=opts)
    gpu_ready = [*storage.ready, *h.node_resources]
    monitoring = None
    if stack.monitoring.enabled:
        monitoring = Monitoring("monitoring", MonitoringArgs(stack=stack, depends_on=gpu_ready),
                                opts=opts)
    platform = DynamoPlatform("dynamo-platform", PlatformArgs(
        stack=stack, namespace=namespace,
        prometheus_endpoint=prometheus_url() if monitoring else None,
        depends_on=[*dyn_ns.objects, *(monitoring.ready if monitoring else gpu_ready)]),
        opts=opts)
    download = ModelDownload("model-download", ModelDownloadArgs(
        stack=stack, namespace=namespace, cluster=stack.cluster,
        downloads=planned_downloads(stack, None),
        timeout_minutes=stack.storage.download_timeout_minutes,
        depends_on=[*storage.ready, platform.chart]), opts=opts)
    outputs: dict[str, Any] = {
        "clusterName": h.name,
        "kubeconfig": pulumi.Output.secret(h.kubeconfig),
        "region": stack.cluster.region,
        "computeMode": stack.cluster.compute_mode.value,
        "dynamoNamespace": namespace,
        "pvcNames": storage.pvc_names,
        "nodeGroupNames": cluster.node_groups.names,
        "modelId": stack.model.id,
        # What an attached variant reads to build on this cluster.
        "vpcId": h.vpc_id,
        "vpcCidr": h.vpc_cidr,
        "privateSubnetIds": h.private_subnet_ids,
        "subnetsByZone": h.subnets_by_zone,
        "clusterSecurityGroupId": h.security_group_id,
        "efsFileSystemId": storage.file_system_id,
        "efaDevicePlugin": h.efa_device_plugin,
    }
    if h.node_role_arn is not None:
        outputs["nodeRoleArn"] = h.node_role_arn
        # The node image every managed group runs (the run record keeps it beside the driver
        # the pods report).
        node = NVIDIA_AMI[stack.cluster.eks_version]
        outputs["nodeAmiRelease"] = node.release_version
        outputs["nodeNvidiaDriver"] = node.nvidia_driver
    if h.auto_mode_role_name is not None:
        outputs["autoModeNodeRoleName"] = h.auto_mode_role_name
    if monitoring:
        outputs["prometheusService"] = monitoring.prometheus_service
        if monitoring.grafana_admin_password is not None:   # a secret output
            outputs["grafanaAdminPassword"] = monitoring.grafana_admin_password
        # In-cluster URL; the runner reaches it through the API server's service proxy.
        outputs["prometheusUrl"] = prometheus_url()
    if stack.serving is not None:
        dgd = DynamoGraph("graph", GraphArgs(
            stack=stack, namespace=namespace, cluster=stack.cluster,
            efa=_worker_efa(stack, None, stack.cluster.compute_mode),
            depends_on=[*download.jobs, platform.chart, *dyn_ns.objects]), opts=opts)
        outputs |= {"graphName": dgd.name, "frontendService": dgd.frontend_service}
    return outputs


def base_stack_reference(base: StackConfig) -> pulumi.StackReference:
    return pulumi.StackReference(f"{pulumi.get_organization()}/{PROJECT}/{base.name}")


def handle_from_reference(ref: pulumi.StackReference, base: StackConfig,
                          adopt: bool = False) -> ClusterHandle:
    """The base's cluster as a ClusterHandle, from its stack outputs. `adopt`: the variant
    takes over objects a previous variant left running (a campaign's kept workers): since
    pulumi-kubernetes 4.29 a create of an existing object fails unless the provider upserts
    (`upsertExistingObjects`), and the previous owner's field manager still holds the fields
    (`enablePatchForce`) (pulumi/pulumi-kubernetes v4.29.0 release notes, #2926 and #2280;
    both are Provider arguments of the pinned 4.34.2)."""
    mode = base.cluster.compute_mode
    kubeconfig = ref.require_output("kubeconfig")
    takeover: dict[str, Any] = {"upsert_existing_objects": True, "enable_patch_force": True} \
        if adopt else {}
    return ClusterHandle(
        name=ref.require_output("clusterName"), compute_mode=mode, kubeconfig=kubeconfig,
        k8s_provider=k8s.Provider("base-k8s", kubeconfig=kubeconfig,
                                  enable_server_side_apply=True, **takeover),
        vpc_id=ref.require_output("vpcId"), vpc_cidr=ref.require_output("vpcCidr"),
        private_subnet_ids=ref.require_output("privateSubnetIds"),
        subnets_by_zone=ref.require_output("subnetsByZone"),
        security_group_id=ref.require_output("clusterSecurityGroupId"),
        node_role_arn=ref.get_output("nodeRoleArn") if mode == ComputeMode.NODEGROUPS else None,
        auto_mode_role_name=(ref.get_output("autoModeNodeRoleName")
                             if mode == ComputeMode.AUTO else None),
        efa_device_plugin=mode == ComputeMode.NODEGROUPS and any(
            uses_efa(g, base) for g in base.cluster.node_groups))


def _build_variant(stack: StackConfig, base: StackConfig, tags: dict[str, str],
                   campaign: CampaignDeploy | None) -> dict:
    assert stack.serving is not None
    provider = aws_provider(stack, base.cluster.region, tags)
    ref = base_stack_reference(base)
    h = handle_from_reference(ref, base, adopt=campaign is not None and campaign.adopt)
    opts = pulumi.ResourceOptions(providers=[provider, h.k8s_provider])
    namespace = dynamo_namespace(base)
    cluster = effective_cluster(stack, base)
    waits: list[pulumi.Resource] = []
    extra_names: list[str] = []
    if stack.cluster.node_groups:
        extra = NodeGroups("extra-nodes", NodeGroupsArgs(
            stack=stack, groups=list(stack.cluster.node_groups), cluster=h, tags=tags,
            install_device_plugins=False, eks_version=base.cluster.eks_version), opts=opts)
        waits += extra.resources
        extra_names = extra.names
    downloads = planned_downloads(stack, base)
    if downloads:
        # The base caches its own model; this variant's other checkpoints (its model, a draft
        # model) go next to it on the share, within the base's download budget.
        download = ModelDownload("model-download", ModelDownloadArgs(
            stack=stack, namespace=namespace, cluster=cluster, downloads=downloads,
            timeout_minutes=base.storage.download_timeout_minutes, depends_on=[]), opts=opts)
        waits += download.jobs
    dgd = DynamoGraph("graph", GraphArgs(
        stack=stack, namespace=namespace, cluster=cluster,
        efa=_worker_efa(stack, base, base.cluster.compute_mode), depends_on=waits,
        graph_name=campaign.graph_name if campaign else None,
        retain=campaign is not None and campaign.hand_over), opts=opts)
    return {
        "baseStack": base.name,
        "clusterName": h.name,
        "kubeconfig": pulumi.Output.secret(h.kubeconfig),
        "region": base.cluster.region,
        "dynamoNamespace": namespace,
        "graphName": dgd.name,
        "frontendService": dgd.frontend_service,
        "prometheusService": ref.get_output("prometheusService"),
        "prometheusUrl": ref.get_output("prometheusUrl"),
        "pvcNames": ref.get_output("pvcNames"),
        "nodeAmiRelease": ref.get_output("nodeAmiRelease"),
        "nodeNvidiaDriver": ref.get_output("nodeNvidiaDriver"),
        "nodeGroupNames": ref.require_output("nodeGroupNames").apply(
            lambda names: [*names, *extra_names]),
    }
