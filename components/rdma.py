"""The RDMA device plugin a base or standalone cluster declares (`cluster.rdma`): what the
disaggregated B200 recipes' workers request for NIXL over UCX (`rdma/ib`, `rdma/shared_ib`).

Installed in both compute modes: neither the EKS GPU AMI nor Auto Mode ships it (they ship the
NVIDIA and EFA plugins). Objects come from components/rdma_specs.py, which also says what the
plugin exposes on AWS's EFA fabric; that note is logged as a warning at `pulumi up`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import rdma_specs as specs
from components.k8s import create_object
from stacks.config.schema import ClusterConfig


@dataclass(frozen=True)
class RdmaPluginArgs:
    cluster: ClusterConfig
    depends_on: list[pulumi.Resource]    # the node groups (the DaemonSet rolls out on them)


class RdmaDevicePlugin(pulumi.ComponentResource):
    resources: list[pulumi.Resource]

    def __init__(self, name: str, args: RdmaPluginArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:RdmaDevicePlugin", name, None, opts)
        rdma = args.cluster.rdma
        assert rdma is not None, "only built for a cluster that declares cluster.rdma"
        configmap, daemonset = specs.rdma_device_plugin(args.cluster)
        config = create_object(configmap, pulumi.ResourceOptions(parent=self))
        plugin = create_object(daemonset, pulumi.ResourceOptions(
            parent=self, depends_on=[config, *args.depends_on]))
        self.resources = [config, plugin]
        note = specs.efa_fabric_note(args.cluster)
        if note:
            pulumi.log.warn(note, resource=self)
        self.register_outputs({"resourceName": rdma.resource_name.value,
                               "nodeGroups": list(rdma.node_groups)})
