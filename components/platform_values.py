"""Helm values for the `dynamo-platform` chart (the Dynamo operator and its CRDs), pure.

Every key written here exists in the chart's own values.yaml (checked by the tests against
../shared/reference/helm/dynamo-platform/values.yaml). Choices:
- etcd and NATS are not installed: discovery is Kubernetes-native (`discoveryBackend:
  kubernetes`), requests go over TCP and KV events over ZMQ (the graph sets DYN_REQUEST_PLANE /
  DYN_EVENT_PLANE on every pod, see stacks.conventions.pod_env.RUNTIME_ENV). The reference chart
  (1.3.0) still installs NATS by default, so it is turned off explicitly.
- Grove (gang scheduling of multinode workers) only when the cluster allows multinode workers.
- The operator runs on the CPU node group, never on a GPU node.
"""

from __future__ import annotations

from typing import Any

from components.placement import cpu_node_affinity
from stacks.config.schema import ServingConfig, StackConfig

CHART = "dynamo-platform"


def platform_chart_version(stack: StackConfig) -> str:
    """serving.platformChartVersion; a base stack (no serving) installs the schema default."""
    if stack.serving is not None:
        return stack.serving.platform_chart_version
    return ServingConfig.model_fields["platform_chart_version"].default


def platform_values(stack: StackConfig, *, prometheus_endpoint: str | None = None
                    ) -> dict[str, Any]:
    """Values for the dynamo-platform chart of `stack` (a base or standalone stack).

    `prometheus_endpoint` (e.g. http://<prometheus service>.monitoring.svc:9090) lets the
    operator inject PROMETHEUS_ENDPOINT into the pods it manages.
    """
    multinode = stack.cluster.allow_multinode
    operator: dict[str, Any] = {
        "enabled": True,
        "discoveryBackend": "kubernetes",
        "controllerManager": {"affinity": cpu_node_affinity(stack.cluster)},
    }
    if prometheus_endpoint:
        operator["dynamo"] = {"metrics": {"prometheusEndpoint": prometheus_endpoint}}
    return {
        "global": {
            "etcd": {"install": False},
            "nats": {"install": False},
            "grove": {"install": multinode, "enabled": multinode},
            "kai-scheduler": {"install": False, "enabled": False},
            "lws": {"install": False, "enabled": False},
        },
        "dynamo-operator": operator,
    }
