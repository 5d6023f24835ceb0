"""The RDMA device plugin a base cluster declares in `cluster.rdma` (pure): the ConfigMap and
DaemonSet of the Mellanox k8s-rdma-shared-dev-plugin, the plugin the B200 recipes' resource
names (`rdma/ib`, `rdma/shared_ib`) come from.

Facts, from the plugin's sources at the pinned tag (Mellanox/k8s-rdma-shared-dev-plugin v1.5.3:
deployment/k8s/base/{configmap,daemonset}.yaml, pkg/resources, pkg/types):
- config `/k8s-rdma-shared-dev-plugin/config.json`: {periodicUpdateInterval, configList: [{
  resourceName (^[a-zA-Z0-9_]+$), resourcePrefix (default "rdma"), rdmaHcaMax, selectors:
  {vendors, deviceIDs, drivers, ifNames, linkTypes}}]}; selectors OR within a list and AND
  across lists. The resource is `<resourcePrefix>/<resourceName>`.
- it looks at PCI network controllers (class 0x02) and keeps a device only when it has the
  RDMA character devices rdma_cm, umad and uverbs; when it keeps at least one, it advertises
  rdmaHcaMax units per node, and every pod holding a unit gets all kept devices (shared HCAs).
  With none kept it advertises 0 units ("no Rdma Devices were found").
- it runs privileged on the host network with the kubelet's device-plugins and plugins_registry
  directories and /dev mounted.

What it exposes on AWS (p6-b200, and every EFA instance of the catalogue): the fabric is EFA, not
InfiniBand. EFA devices (vendor 1d0f, driver efa) are verbs devices (uverbs) but their ports have
no MAD capability (the efa driver sets no core capability flags), so the kernel creates no umad
device for them; the plugin drops them ("missing RDMA device spec ... umad") and advertises ZERO
units. A worker that requests the resource there stays Pending. `efa_fabric_note` states this at
deploy time; on EFA the working path is NIXL over LIBFABRIC with `vpc.amazonaws.com/efa` (the EFA
device plugin, installed beside this one). The selector below still lists EFA beside Mellanox
HCAs, so the plugin reports what it found and dropped in its log, and picks EFA up should a
release stop requiring umad.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.conventions import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from components.placement import node_group_affinity
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.recipe_config import RdmaDevicePlugin
from stacks.config.schema import ClusterConfig

IMAGE = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
NAMESPACE = "kube-system"
NAME = "rdma-shared-dev-plugin"
CONFIG_DIR = "/k8s-rdma-shared-dev-plugin"
CONFIG_FILE = "config.json"
CONFIG_HASH_ANNOTATION = "dynamo-bench.io/config-sha256"
# Rescan host devices every 5 minutes (the upstream example's value).
PERIODIC_UPDATE_S = 300
# PCI vendor ids and kernel drivers of the RDMA devices it may find: Mellanox/NVIDIA ConnectX
# HCAs (InfiniBand or RoCE, the recipes' home clusters) and AWS EFA.
VENDORS = {"mellanox": "15b3", "amazon": "1d0f"}
DRIVERS = ["mlx5_core", "efa"]
_LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "dynamo-bench"}


def plugin_config(rdma: RdmaDevicePlugin) -> dict[str, Any]:
    """The plugin's config.json for the declared resource name and units per node."""
    prefix, _, name = rdma.resource_name.value.partition("/")
    return {"periodicUpdateInterval": PERIODIC_UPDATE_S,
            "configList": [{"resourceName": name, "resourcePrefix": prefix,
                            "rdmaHcaMax": rdma.per_node,
                            "selectors": {"vendors": sorted(VENDORS.values()),
                                          "drivers": list(DRIVERS)}}]}


def _volume(name: str, host_path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": host_path}}


def rdma_device_plugin(cluster: ClusterConfig) -> list[dict[str, Any]]:
    """The ConfigMap and the DaemonSet (on the declared node groups, tolerating the GPU taint);
    [] when the cluster declares no plugin."""
    rdma = cluster.rdma
    if rdma is None:
        return []
    config = json.dumps(plugin_config(rdma), indent=1, sort_keys=True)
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(_LABELS)},
                 "data": {CONFIG_FILE: config}}
    kubelet = "/var/lib/kubelet"
    container = {
        "name": "rdma-shared-dp",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"memory": "128Mi"}},
        "volumeMounts": [
            {"name": "device-plugin", "mountPath": f"{kubelet}/device-plugins"},
            {"name": "plugins-registry", "mountPath": f"{kubelet}/plugins_registry"},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "devs", "mountPath": "/dev/"}],
    }
    pod = {
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "affinity": node_group_affinity(list(rdma.node_groups)),
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists",
                         "effect": GPU_TAINT_EFFECT}],
        "containers": [container],
        "volumes": [
            _volume("device-plugin", f"{kubelet}/device-plugins"),
            _volume("plugins-registry", f"{kubelet}/plugins_registry"),
            {"name": "config", "configMap": {"name": NAME, "items": [
                {"key": CONFIG_FILE, "path": CONFIG_FILE}]}},
            _volume("devs", "/dev/")],
    }
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(_LABELS)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                # The plugin reads its config once at start: a new config rolls the pods.
                "metadata": {"labels": dict(_LABELS), "annotations": {
                    CONFIG_HASH_ANNOTATION: hashlib.sha256(config.encode()).hexdigest()}},
                "spec": pod},
        },
    }
    return [configmap, daemonset]


def efa_fabric_note(cluster: ClusterConfig) -> str | None:
    """What the plugin will advertise on the declared groups whose RDMA devices are EFA."""
    rdma = cluster.rdma
    if rdma is None:
        return None
    efa = sorted({g.instance_type for g in cluster.node_groups if g.name in rdma.node_groups
                  and INSTANCE_TYPES[g.instance_type].efa_interfaces > 0})
    if not efa:
        return None
    return (f"cluster.rdma: the RDMA devices of {', '.join(efa)} are EFA, which has no umad "
            f"device; the k8s-rdma-shared-dev-plugin keeps no EFA device and advertises 0 "
            f"{rdma.resource_name.value}, so workers requesting it stay Pending. Check with "
            f"`kubectl describe node` (Allocatable); on EFA move KV with transfer "
            f"nixl-libfabric (vpc.amazonaws.com/efa) instead")
