"""Monitoring specs (pure): kube-prometheus-stack and DCGM exporter Helm values, and the Grafana
dashboards as ConfigMaps.

Keys were checked against the charts' own values.yaml: kube-prometheus-stack 79.5.0 (the
schema's pinned default) and dcgm-exporter 4.8.2. Choices:
- Prometheus picks up every PodMonitor/ServiceMonitor in every namespace (`*NilUsesHelmValues:
  false` + empty selectors): the Dynamo operator creates PodMonitors without the Helm release
  label, and DCGM's ServiceMonitor lives in another namespace.
- Every Service stays ClusterIP (reach Grafana/Prometheus with `kubectl port-forward`).
- Prometheus data sits on the tagged EBS class, so its volume is in the cost tags too.
- Grafana's sidecar loads dashboards from ConfigMaps labelled `grafana_dashboard: "1"`.
"""

from __future__ import annotations

import json
from typing import Any

from components.conventions import EBS_STORAGE_CLASS, GPU_TAINT_EFFECT, GPU_TAINT_KEY
from components.dashboards import DASHBOARDS
from components.placement import cpu_node_affinity, gpu_node_affinity
from stacks.config.schema import StackConfig

KUBE_PROMETHEUS_CHART = "kube-prometheus-stack"
DCGM_EXPORTER_CHART = "dcgm-exporter"
DCGM_EXPORTER_CHART_VERSION = "4.8.2"
DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"
PROMETHEUS_VOLUME_GIB = 50
GRAFANA_ADMIN_SECRET = "grafana-admin"
GRAFANA_ADMIN_USER = "admin"
GRAFANA_USER_KEY = "admin-user"           # the chart's default key names
GRAFANA_PASSWORD_KEY = "admin-password"


def _cluster_ip() -> dict[str, str]:
    return {"type": "ClusterIP"}


def kube_prometheus_values(stack: StackConfig) -> dict[str, Any]:
    """Values for kube-prometheus-stack (version: stack.monitoring.kubePrometheusStackVersion)."""
    mon = stack.monitoring
    interval = f"{mon.scrape_interval_s}s"
    cpu = cpu_node_affinity(stack.cluster)
    prometheus_spec: dict[str, Any] = {
        "retention": mon.retention,
        "scrapeInterval": interval,
        "evaluationInterval": interval,
        "podMonitorSelectorNilUsesHelmValues": False,
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "probeSelectorNilUsesHelmValues": False,
        "podMonitorSelector": {},
        "podMonitorNamespaceSelector": {},
        "serviceMonitorSelector": {},
        "serviceMonitorNamespaceSelector": {},
        "affinity": cpu,
        "storageSpec": {"volumeClaimTemplate": {"spec": {
            "storageClassName": EBS_STORAGE_CLASS,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{PROMETHEUS_VOLUME_GIB}Gi"}}}}},
    }
    grafana: dict[str, Any] = {"enabled": mon.grafana}
    if mon.grafana:
        grafana.update({
            # The generated password's Secret (grafana chart 10.1.4 values.yaml `admin`), so
            # neither the chart default nor the password itself is in the values.
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": GRAFANA_USER_KEY,
                      "passwordKey": GRAFANA_PASSWORD_KEY},
            "service": _cluster_ip(),
            "affinity": cpu,
            "sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL,
                                       "labelValue": DASHBOARD_LABEL_VALUE,
                                       "searchNamespace": "ALL"}},
        })
    return {
        "prometheus": {"service": _cluster_ip(), "prometheusSpec": prometheus_spec},
        # Benchmarks need no alert routing; one fewer stateful pod to pay for.
        "alertmanager": {"enabled": False},
        "grafana": grafana,
        "prometheusOperator": {"affinity": cpu},
        "kube-state-metrics": {"affinity": cpu},
    }


def grafana_admin_secret(namespace: str, password: str) -> dict[str, Any]:
    """The Secret Grafana reads its admin user and password from."""
    if not password:
        raise ValueError("the Grafana admin password is empty")
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": GRAFANA_ADMIN_SECRET, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "dynamo-bench"}},
            "stringData": {GRAFANA_USER_KEY: GRAFANA_ADMIN_USER, GRAFANA_PASSWORD_KEY: password}}


def dcgm_exporter_values(stack: StackConfig) -> dict[str, Any]:
    """Values for the dcgm-exporter chart: one exporter per GPU node, scraped through its
    ServiceMonitor at the stack's scrape interval."""
    values: dict[str, Any] = {
        "service": {"enable": True, "type": "ClusterIP"},
        "serviceMonitor": {"enabled": True, "interval": f"{stack.monitoring.scrape_interval_s}s"},
        # GPU nodes are tainted; the exporter must run there and nowhere else.
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}],
    }
    # The base's GPU groups, and any node of a catalogue GPU type: a variant's extra GPU group
    # (attached later, on this cluster) is covered too, without reinstalling the chart.
    values["affinity"] = gpu_node_affinity(stack.cluster)
    return values


def dashboard_configmaps(namespace: str) -> list[dict[str, Any]]:
    """One ConfigMap per dashboard, labelled for Grafana's sidecar."""
    out = []
    for name, build in DASHBOARDS.items():
        out.append({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"dynamo-bench-dashboard-{name}", "namespace": namespace,
                         "labels": {DASHBOARD_LABEL: DASHBOARD_LABEL_VALUE,
                                    "app.kubernetes.io/part-of": "dynamo-bench"}},
            "data": {f"dynamo-bench-{name}.json": json.dumps(build(), indent=1)},
        })
    return out
