"""Kubernetes names both sides of the project must agree on: the infrastructure that creates the
objects (components/) and the cluster runner that finds and uses them (workloads/).

Labels, well-known object names, ports and the DynamoGraphDeployment's API coordinates live here
once; components/conventions.py and components/graph.py re-export them, workloads import them
from here (workloads never import components).
"""

from __future__ import annotations

import re

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import ClusterConfig, ServingConfig, StackConfig

PART_OF = {"app.kubernetes.io/part-of": "dynamo-bench"}

# Node labels. Every node a stack node group creates carries NODE_GROUP_LABEL with the group's
# name (managed node groups and Auto Mode NodePools alike); the other two are set by the kubelet.
NODE_GROUP_LABEL = "dynamo-bench.io/node-group"
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# Pod label the graph's pod templates carry (value: the graph's name).
GRAPH_LABEL = "dynamo-bench.io/graph"


def metric_label(pod_label: str) -> str:
    """The Prometheus label a pod label becomes when copied onto series: every character
    outside [a-zA-Z0-9_] turned into '_', as both copiers do (prometheus-operator v0.86.2,
    the version kube-prometheus-stack 79.5.0 ships, pkg/prometheus/promcfg.go
    sanitizeLabelName for `podTargetLabels`; dcgm-exporter 4.5.3-4.8.2
    internal/pkg/utils/utils.go SanitizeLabelName for its pod labels)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", pod_label)


# The graph label on every series scraped from the graph's pods (Prometheus `podTargetLabels`)
# and on every DCGM series of a GPU they hold (dcgm-exporter pod labels): what scopes the
# runner's PromQL and the dashboards to one graph (components/monitoring_specs.py).
GRAPH_METRIC_LABEL = metric_label(GRAPH_LABEL)

# Objects in the Dynamo namespace.
MODEL_CACHE_PVC = "model-cache"
RESULTS_PVC = "benchmark-results"
MODEL_CACHE_MOUNT = "/models"
# The EFA worker pods' init container that checks the image can load NIXL's LIBFABRIC plugin
# (components/libfabric_check.py), and its exit code when it cannot (EX_CONFIG, sysexits.h):
# the runner stops at once on it (workloads/targets/aws/k8s_graph.py).
LIBFABRIC_CHECK_CONTAINER = "libfabric-check"
LIBFABRIC_MISSING_EXIT = 78
# The init container that copies a donor -efa runtime's EFA userspace into an EFA worker pod
# whose image has none (components/efa_userspace.py); it exits LIBFABRIC_MISSING_EXIT too.
EFA_USERSPACE_CONTAINER = "efa-userspace"
HF_HOME = f"{MODEL_CACHE_MOUNT}/hf"
LOADGEN_SERVICE_ACCOUNT = "dynamo-bench-loadgen"

MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_PORT = 9090

# The DynamoGraphDeployment custom resource and its frontend.
DGD_GROUP = "nvidia.com"
DGD_VERSION = "v1beta1"
DGD_API_VERSION = f"{DGD_GROUP}/{DGD_VERSION}"
DGD_KIND = "DynamoGraphDeployment"
DGD_PLURAL = "dynamographdeployments"
FRONTEND_COMPONENT = "frontend"
FRONTEND_PORT = 8000


def _groups(cluster: ClusterConfig, gpu: bool) -> list[str]:
    return [g.name for g in cluster.node_groups if g.instance_type in INSTANCE_TYPES
            and (INSTANCE_TYPES[g.instance_type].gpu is not None) == gpu]


def cpu_node_groups(cluster: ClusterConfig) -> list[str]:
    """Node groups without GPUs (system pods, the frontend, the load generator)."""
    return _groups(cluster, gpu=False)


def gpu_node_groups(cluster: ClusterConfig) -> list[str]:
    return _groups(cluster, gpu=True)


def deployment_name(stack: StackConfig) -> str:
    """serving.deploymentName, or the stack name made DNS-safe (short: the operator prefixes
    child object names with it)."""
    assert stack.serving is not None
    if stack.serving.deployment_name:
        return stack.serving.deployment_name
    slug = re.sub(r"[^a-z0-9-]+", "-", stack.name.lower()).strip("-")[:40].strip("-")
    return slug or "dynamo-bench"


def component_names(serving: ServingConfig) -> list[str]:
    """One stable, DNS-safe name per worker group: `<role>-<nodeGroup>`, numbered on repeats."""
    names: list[str] = []
    for w in serving.workers:
        base = f"{w.role.value}-{w.node_group}"[:60].strip("-")
        name, n = base, 2
        while name in names or name == FRONTEND_COMPONENT:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def dynamo_namespace(stack: StackConfig) -> str:
    """Where the platform, the claims, the token Secret, the graphs and the load generator
    live: serving.namespace, or the schema default for a base stack (its variants use it)."""
    if stack.serving is not None:
        return stack.serving.namespace
    return ServingConfig.model_fields["namespace"].default

# The EFA workers' GPU-pinning start shell (components/efa.py) and the attestation's GPU probe
# (workloads/targets/aws/attest_scripts.py) agree on these: where the NVIDIA device plugin's
# volume-mounts strategy lists the allocated GPUs, the env that carries the pod's GPU request
# to the shell, and the env in which the shell says how it pinned (one of GPU_PINNED_BY).
DEVICE_LIST_DIR = "/var/run/nvidia-container-devices"
GPU_COUNT_ENV = "DYNAMO_BENCH_GPUS"
GPU_SOURCE_ENV = "DYNAMO_BENCH_GPU_SOURCE"
GPU_PINNED_BY = ("envvar", "volume-mounts", "whole-node")
