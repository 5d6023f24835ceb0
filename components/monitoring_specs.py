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
- Series carry the graph they came from, so the runner's per-step PromQL (workloads/promql.py)
  and the dashboards read one graph, not the cluster: Prometheus copies the graph label of the
  scraped pod onto every target (`podTargetLabels`), and the DCGM exporter adds the label of
  the pod holding each GPU (`kubernetes.enablePodLabels`, allowlisted to that one label).
"""

from __future__ import annotations

import json
from typing import Any

from components.conventions import EBS_STORAGE_CLASS, GPU_TAINT_EFFECT, GPU_TAINT_KEY
from components.dashboards import DASHBOARDS
from components.placement import cpu_node_affinity, gpu_node_affinity
from stacks.config.schema import StackConfig
from stacks.conventions.k8s_names import GRAPH_LABEL

KUBE_PROMETHEUS_CHART = "kube-prometheus-stack"
DCGM_EXPORTER_CHART = "dcgm-exporter"
DCGM_EXPORTER_CHART_VERSION = "4.8.2"
DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"
PROMETHEUS_VOLUME_GIB = 50
# What the TSDB's blocks may fill before the oldest are deleted, whatever `retention` says: a
# multi-day campaign of 5 s scrapes of vLLM/Dynamo histograms can outgrow the volume within
# 15 days, and a full volume stops ingestion (the WAL cannot be written). Blocks only: the
# WAL, the head chunks and a compaction's output need room beside them ("allow for space for
# the WAL and one maximum size block", robustperception.io, configuring-prometheus-storage-
# retention), hence 80 % of the volume.
PROMETHEUS_RETENTION_SIZE_GIB = PROMETHEUS_VOLUME_GIB * 4 // 5
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
        # kube-prometheus-stack 79.5.0 values.yaml `prometheusSpec.retentionSize` ("Maximum size
        # of metrics", "in the form of "50GiB""; unset by default), rendered into the
        # Prometheus resource's `retentionSize` (templates/prometheus/prometheus.yaml)
        "retentionSize": f"{PROMETHEUS_RETENTION_SIZE_GIB}GiB",
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
        # The graph label of each scraped pod onto its targets, as `dynamo_bench_io_graph`
        # (kube-prometheus-stack 79.5.0 values.yaml `prometheusSpec.podTargetLabels`: "appended
        # to the spec.podTargetLabels field of all PodMonitor and ServiceMonitor objects";
        # prometheus-operator v0.86.2 pkg/prometheus/promcfg.go relabels
        # __meta_kubernetes_pod_label_<sanitized> -> <sanitized>, only when the pod has it).
        # The Dynamo 1.6.1 frontend and vLLM series carry no graph of their own (only `model`,
        # shared by two graphs of one model), so this label is what tells graphs apart.
        "podTargetLabels": [GRAPH_LABEL],
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
        # honorLabels false (the chart's default, stated so the queries can rely on it): the
        # series' own `namespace` / `pod` (the GPU holder's) arrive as `exported_namespace` /
        # `exported_pod` beside the exporter's target labels (workloads/promql.py Scope).
        "serviceMonitor": {"enabled": True, "interval": f"{stack.monitoring.scrape_interval_s}s",
                           "honorLabels": False},
        # The graph label of the pod holding each GPU on its series (dcgm-exporter
        # 4.5.3-4.8.2 deployment/values.yaml `kubernetes.enablePodLabels` and
        # `podLabelAllowlistRegex`; internal/pkg/transformation/kubernetes.go createPodInfo
        # sanitises the key to `dynamo_bench_io_graph`; the chart creates the pod-read RBAC,
        # `kubernetes.rbac.create: true`). A GPU no graph pod holds carries no such label, so
        # a graph's GPU figures leave idle GPUs and other graphs' GPUs out.
        "kubernetes": {"enablePodLabels": True,
                       # an RE2 pattern (Go regexp): only the dots need escaping
                       "podLabelAllowlistRegex": [
                           "^" + GRAPH_LABEL.replace(".", "\\.") + "$"]},
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
