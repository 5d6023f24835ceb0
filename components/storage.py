"""Storage of a base or standalone stack: an encrypted, elastic-throughput EFS file system with a
mount target in the private subnet of every AZ (EFS allows one per AZ; nodes in any subnet of
that AZ use it), NFS 2049 from the VPC only, one tagged EFS access point per claim with its
statically bound PersistentVolume (components/loadgen_specs.py says why), the EFS CSI add-on
(and the EBS CSI add-on on node groups; Auto Mode has its own EBS driver) with Pod Identity
roles, the storage classes, the RWX claims and the Hugging Face token Secret. `ModelDownload`
holds the Jobs that fill the model cache once (components/downloads.py plans them).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import loadgen_specs as specs
from components.cluster import ClusterHandle
from components.downloads import Download, download_job
from components.iam_specs import efs_csi_static_policy, managed_policy_arn
from components.k8s import create_object, create_objects
from components.placement import cpu_node_affinity
from components.tags import ebs_csi_addon_configuration
from stacks.config.schema import ClusterConfig, ComputeMode, StackConfig

NFS_PORT = 2049
# Add-on service accounts (their names are fixed by the add-ons).
EFS_CSI_SERVICE_ACCOUNT = "efs-csi-controller-sa"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"


@dataclass(frozen=True)
class StorageArgs:
    stack: StackConfig
    tags: dict[str, str]
    cluster: ClusterHandle
    namespace: str
    hf_token: pulumi.Output[str]       # a Pulumi secret, never plain text
    depends_on: list[pulumi.Resource]  # the namespace (claims and Secret live in it)


class Storage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    pvc_names: list[str]
    ready: list[pulumi.CustomResource]  # classes, claims and Secret: what consumers wait for

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:Storage", name, None, opts)
        self._args = args
        child = pulumi.ResourceOptions(parent=self)
        cluster, tags = args.cluster, args.tags
        group = aws.ec2.SecurityGroup(
            f"{name}-efs", description="NFS to the model cache from inside the VPC only",
            vpc_id=cluster.vpc_id,
            ingress=[{"protocol": "tcp", "from_port": NFS_PORT, "to_port": NFS_PORT,
                      "cidr_blocks": [cluster.vpc_cidr], "description": "NFS from the VPC"}],
            tags={**tags, "Name": f"{name}-efs"}, opts=child)
        fs = aws.efs.FileSystem(
            f"{name}-efs", encrypted=True, performance_mode="generalPurpose",
            throughput_mode=args.stack.storage.efs_throughput_mode,
            tags={**tags, "Name": f"{name}-model-cache"}, opts=child)
        # only the stack that owns the cluster builds Storage (program._build_owned): its
        # handle has the subnets as a dict (a variant's handle reads one Output of them)
        assert not isinstance(cluster.subnets_by_zone, pulumi.Output)
        mounts = [aws.efs.MountTarget(f"{name}-efs-{zone}", file_system_id=fs.id,
                                      subnet_id=subnet, security_groups=[group.id], opts=child)
                  for zone, subnet in cluster.subnets_by_zone.items()]
        # No configuration: the add-on's schema has no key that tags access points
        # (aws/containers-roadmap#2755); the access points below are tagged by Pulumi.
        addons = [self._csi_addon(name, "aws-efs-csi-driver", EFS_CSI_SERVICE_ACCOUNT,
                                  efs_csi_static_policy(), None)]
        auto = cluster.compute_mode == ComputeMode.AUTO
        if not auto:
            addons.append(self._csi_addon(name, "aws-ebs-csi-driver", EBS_CSI_SERVICE_ACCOUNT,
                                          "service-role/AmazonEBSCSIDriverPolicy",
                                          ebs_csi_addon_configuration(tags)))
        k8s_opts = pulumi.ResourceOptions(parent=self,
                                          depends_on=[*args.depends_on, *mounts, *addons])
        self.ready = create_objects(specs.storage_classes(tags=tags, auto_mode=auto), k8s_opts)
        sizes = specs.efs_claim_sizes(model_cache_gib=args.stack.storage.model_cache_gib,
                                      results_gib=args.stack.storage.results_gib)
        volume_opts = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=list(self.ready)))
        volumes = [self._efs_volume(name, fs, claim, gib, volume_opts)
                   for claim, gib in sizes.items()]
        claims = specs.pvcs(args.namespace, model_cache_gib=args.stack.storage.model_cache_gib,
                            results_gib=args.stack.storage.results_gib)
        claim_opts = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=[*self.ready, *volumes]))
        self.ready += [*volumes, *create_objects(claims, claim_opts)]
        self.ready.append(self._token_secret(k8s_opts))
        self.file_system_id = fs.id
        self.pvc_names = [c["metadata"]["name"] for c in claims]
        self.register_outputs({"fileSystemId": fs.id, "pvcNames": self.pvc_names})

    def _efs_volume(self, name: str, fs: aws.efs.FileSystem, claim: str, gib: int,
                    opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        """A tagged access point for `claim` and the PersistentVolume mounting it."""
        args = self._args
        ident = specs.EFS_POSIX_ID
        point = aws.efs.AccessPoint(
            f"{name}-efs-{claim}", file_system_id=fs.id,
            posix_user={"uid": ident, "gid": ident},
            root_directory={"path": specs.efs_access_point_path(claim), "creation_info": {
                "owner_uid": ident, "owner_gid": ident, "permissions": "0750"}},
            tags={**args.tags, "Name": f"{name}-{claim}"}, opts=pulumi.ResourceOptions(
                parent=self))
        # Name and kind do not depend on the ids, so they come from a placeholder build.
        shape = specs.efs_persistent_volume(args.namespace, claim, gib,
                                            file_system_id="fs-0", access_point_id="fsap-0")
        spec = pulumi.Output.all(fs.id, point.id).apply(
            lambda ids: specs.efs_persistent_volume(
                args.namespace, claim, gib, file_system_id=ids[0],
                access_point_id=ids[1])["spec"])
        return create_object({**shape, "spec": spec}, opts)

    def _token_secret(self, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        shape = specs.hf_token_secret(self._args.namespace, "placeholder")
        token: pulumi.Output[str] = pulumi.Output.secret(self._args.hf_token)
        secret = {**shape, "stringData": token.apply(
            lambda t: specs.hf_token_secret(self._args.namespace, t)["stringData"])}
        return create_object(secret, opts)

    def _csi_addon(self, name: str, addon: str, service_account: str, policy: str | dict,
                   configuration: str | None) -> aws.eks.Addon:
        """The add-on with a Pod Identity role: `policy` a managed policy's name, or an
        inline policy document (least privilege where the managed one grants more)."""
        args = self._args
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-{addon}",
            assume_role_policy=pulumi.Output.json_dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"],
                               "Principal": {"Service": "pods.eks.amazonaws.com"}}]}),
            tags=args.tags, opts=child)
        attachment: pulumi.CustomResource
        if isinstance(policy, dict):
            attachment = aws.iam.RolePolicy(f"{name}-{addon}", role=role.id,
                                            policy=pulumi.Output.json_dumps(policy), opts=child)
        else:
            # the partition of the stack's region (aws-cn, aws-us-gov have their own ARNs)
            partition = aws.get_partition(opts=pulumi.InvokeOptions(parent=self)).partition
            attachment = aws.iam.RolePolicyAttachment(
                f"{name}-{addon}", role=role.name,
                policy_arn=managed_policy_arn(partition, policy), opts=child)
        return aws.eks.Addon(
            f"{name}-{addon}", cluster_name=args.cluster.name, addon_name=addon,
            configuration_values=configuration,
            pod_identity_associations=[{"role_arn": role.arn,
                                        "service_account": service_account}],
            resolve_conflicts_on_create="OVERWRITE", tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[
                attachment, *args.cluster.node_resources]))


@dataclass(frozen=True)
class ModelDownloadArgs:
    stack: StackConfig                 # names the Jobs (their owner)
    namespace: str
    cluster: ClusterConfig             # the effective cluster: the Jobs run on its CPU nodes
    downloads: list[Download]          # components.downloads.planned_downloads
    timeout_minutes: int               # of the storage owner (the base for a variant)
    depends_on: list[pulumi.Resource]


class ModelDownload(pulumi.ComponentResource):
    """One Job per checkpoint that fills the model cache; Pulumi waits for each to complete
    (bounded by storage.downloadTimeoutMinutes) so serving only starts on a full cache."""

    jobs: list[pulumi.CustomResource]

    def __init__(self, name: str, args: ModelDownloadArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:ModelDownload", name, None, opts)
        timeout = args.timeout_minutes
        job_opts = pulumi.ResourceOptions(
            parent=self, depends_on=args.depends_on,
            custom_timeouts=pulumi.CustomTimeouts(create=f"{timeout + 5}m",
                                                  update=f"{timeout + 5}m"))
        affinity = cpu_node_affinity(args.cluster) or None
        job_objs = [download_job(d, args.namespace, stack_name=args.stack.name,
                                 timeout_minutes=timeout, affinity=affinity)
                    for d in args.downloads]
        self.jobs = create_objects(job_objs, job_opts)
        self.register_outputs({"jobs": [j["metadata"]["name"] for j in job_objs]})
