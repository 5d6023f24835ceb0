"""What the benchmark runner's own identity may do in the cluster (pure; runner.md M3).

Every Kubernetes call of a run is made by the runner on the deployer's machine, with the
stack's kubeconfig (workloads/targets/aws/k8s_client.py); the AIPerf Job's pods mount no token
and AIPerf calls no API (k8s_jobs: automountServiceAccountToken false). So the RBAC that matters
is the runner's. The cluster's creator has it already (pulumi-eks sets
bootstrapClusterCreatorAdminPermissions); these roles let anyone else run benchmarks without
being a cluster admin: give their IAM principal an EKS access entry (type STANDARD) with
`kubernetesGroups: [dynamo-bench:runners]` (EKS user guide, access-entries.adoc: "the
Kubernetes groups ... that you reference in Kubernetes role-based authorization"); docs/aws-runs.md.

The verbs are the ones the runner's calls map to (Kubernetes API docs, "Request verbs": GET
of one object = get, of a collection = list, POST = create, DELETE = delete; reading
jobs/status, pods/log and services/proxy are subresources of their own). tests/
test_runner_rbac.py runs a full run on the fake cluster and checks each call against these.
Exec (pods/exec) is asked over a websocket, which the API server authorises as `get` before
Kubernetes 1.35 and as `create` from 1.35 on (KEP-4006, feature gate
AuthorizePodWebsocketUpgradeCreatePermission): both, so either cluster version works.
"""

from __future__ import annotations

from typing import Any

from stacks.conventions.k8s_names import MONITORING_NAMESPACE, PROMETHEUS_PORT

RUNNER_GROUP = "dynamo-bench:runners"
RUNNER_ROLE = "dynamo-bench-runner"
RUNNER_NODES_ROLE = "dynamo-bench-runner-nodes"
RUNNER_PROMETHEUS_ROLE = "dynamo-bench-runner-prometheus"
_RBAC = "rbac.authorization.k8s.io"
_PART_OF = {"app.kubernetes.io/part-of": "dynamo-bench"}


def runner_rules() -> list[dict[str, Any]]:
    """In the graph's namespace: the step Jobs and their inputs, the graph and its pods (cold
    restarts delete worker pods), logs and exec for attestation and results, the transfer
    pod, and the frontend through the service proxy (smoke test and warm-up POST to it)."""
    return [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list",
                                                                  "delete"]},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list",
                                                             "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "list", "delete"]},
        {"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get", "create"]},
        {"apiGroups": ["nvidia.com"], "resources": ["dynamographdeployments"],
         "verbs": ["get"]},
    ]


def prometheus_rules(service: str) -> list[dict[str, Any]]:
    """In the monitoring namespace: Prometheus' HTTP API through the service proxy only (the
    proxied object's name is the path segment `<service>:<port>`; bare `<service>` is the
    default port's)."""
    return [{"apiGroups": [""], "resources": ["services/proxy"],
             "resourceNames": [f"{service}:{PROMETHEUS_PORT}", service],
             "verbs": ["get", "create"]}]


def node_rules() -> list[dict[str, Any]]:
    """Cluster scope: nodes only (placement and attestation read zones and instance types)."""
    return [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(_PART_OF)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _binding(kind: str, name: str, role_kind: str, namespace: str | None) -> dict[str, Any]:
    return {"apiVersion": f"{_RBAC}/v1", "kind": kind, "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": _RBAC, "kind": role_kind, "name": name},
            "subjects": [{"kind": "Group", "apiGroup": _RBAC, "name": RUNNER_GROUP}]}


def runner_rbac(namespace: str) -> list[dict[str, Any]]:
    """The graph namespace's Role and the nodes ClusterRole, each bound to RUNNER_GROUP."""
    return [
        {"apiVersion": f"{_RBAC}/v1", "kind": "Role", "metadata": _meta(RUNNER_ROLE, namespace),
         "rules": runner_rules()},
        _binding("RoleBinding", RUNNER_ROLE, "Role", namespace),
        {"apiVersion": f"{_RBAC}/v1", "kind": "ClusterRole",
         "metadata": _meta(RUNNER_NODES_ROLE), "rules": node_rules()},
        _binding("ClusterRoleBinding", RUNNER_NODES_ROLE, "ClusterRole", None),
    ]


def prometheus_rbac(service: str) -> list[dict[str, Any]]:
    """The monitoring namespace's Role for the Prometheus proxy, bound to RUNNER_GROUP."""
    return [
        {"apiVersion": f"{_RBAC}/v1", "kind": "Role",
         "metadata": _meta(RUNNER_PROMETHEUS_ROLE, MONITORING_NAMESPACE),
         "rules": prometheus_rules(service)},
        _binding("RoleBinding", RUNNER_PROMETHEUS_ROLE, "Role", MONITORING_NAMESPACE),
    ]
