"""Monitoring of a base or standalone stack: kube-prometheus-stack (Prometheus + Grafana, every
Service ClusterIP), the DCGM exporter where the node setup does not provide one, and the Grafana
dashboards as ConfigMaps. Values come from components/monitoring_specs.py."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_random as random

from components import monitoring_specs as specs
from components.charts import ChartRef, install
from components.conventions import MONITORING_NAMESPACE
from components.k8s import create_object, create_objects
from components.runner_rbac import prometheus_rbac
from stacks.config.schema import StackConfig
from stacks.conventions.k8s_names import PROMETHEUS_PORT

PROMETHEUS_COMMUNITY_REPO = "https://prometheus-community.github.io/helm-charts"
DCGM_EXPORTER_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
# Helm release name; kube-prometheus-stack names its Prometheus Service
# "<fullname>-prometheus", fullname = "<release>-kube-prometheus" (truncated to 26 chars).
PROMETHEUS_RELEASE = "prometheus"
PROMETHEUS_SERVICE = f"{PROMETHEUS_RELEASE}-kube-prometheus-prometheus"


def prometheus_url() -> str:
    return f"http://{PROMETHEUS_SERVICE}.{MONITORING_NAMESPACE}.svc.cluster.local:{PROMETHEUS_PORT}"


@dataclass(frozen=True)
class MonitoringArgs:
    stack: StackConfig
    depends_on: list[pulumi.Resource]   # nodes and the tagged EBS class (Prometheus volume)


class Monitoring(pulumi.ComponentResource):
    prometheus_service: str
    ready: list[pulumi.Resource]
    grafana_admin_password: pulumi.Output[str] | None = None

    def __init__(self, name: str, args: MonitoringArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("dynamo-bench:infra:Monitoring", name, None, opts)
        stack = args.stack
        namespace = create_object(
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": MONITORING_NAMESPACE,
                          "labels": {"app.kubernetes.io/part-of": "dynamo-bench"}}},
            pulumi.ResourceOptions(parent=self))
        after_ns = pulumi.ResourceOptions(parent=self, depends_on=[namespace, *args.depends_on])
        admin = self._grafana_admin(name, after_ns) if stack.monitoring.grafana else []
        # Its admission webhook certificate comes from hook Jobs: a Release (charts.py).
        prometheus = install(
            f"{name}-kube-prometheus-stack",
            ChartRef(specs.KUBE_PROMETHEUS_CHART, stack.monitoring.kube_prometheus_stack_version,
                     PROMETHEUS_COMMUNITY_REPO),
            release=PROMETHEUS_RELEASE, namespace=MONITORING_NAMESPACE,
            values=specs.kube_prometheus_values(stack), opts=pulumi.ResourceOptions.merge(
                after_ns, pulumi.ResourceOptions(depends_on=admin)))
        self.ready = [prometheus]
        if stack.monitoring.dcgm_exporter:
            # Its ServiceMonitor needs the Prometheus operator's CRDs.
            self.ready.append(install(
                f"{name}-dcgm-exporter", ChartRef(specs.DCGM_EXPORTER_CHART,
                                                  specs.DCGM_EXPORTER_CHART_VERSION,
                                                  DCGM_EXPORTER_REPO),
                release="dcgm-exporter", namespace=MONITORING_NAMESPACE,
                values=specs.dcgm_exporter_values(stack), opts=pulumi.ResourceOptions.merge(
                    after_ns, pulumi.ResourceOptions(depends_on=[prometheus]))))
        if stack.monitoring.grafana:
            self.ready += create_objects(specs.dashboard_configmaps(MONITORING_NAMESPACE),
                                         after_ns)
        # the runner's own access to Prometheus, for a non-admin identity (runner_rbac.py)
        self.ready += create_objects(prometheus_rbac(PROMETHEUS_SERVICE), after_ns)
        self.prometheus_service = PROMETHEUS_SERVICE
        self.register_outputs({"prometheusService": PROMETHEUS_SERVICE})

    def _grafana_admin(self, name: str, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """A generated admin password, kept in the stack state as a secret, in the Secret the
        chart reads (grafana.admin.existingSecret), never the chart's default."""
        password = random.RandomPassword(f"{name}-grafana-admin", length=32, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        self.grafana_admin_password = pulumi.Output.secret(password.result)
        shape = specs.grafana_admin_secret(MONITORING_NAMESPACE, "placeholder")
        secret = {**shape, "stringData": self.grafana_admin_password.apply(
            lambda p: specs.grafana_admin_secret(MONITORING_NAMESPACE, p)["stringData"])}
        return [password, create_object(secret, opts)]
