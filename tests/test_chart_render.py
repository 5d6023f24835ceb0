"""The charts the program installs, rendered by Helm 4.1.4 itself with the values each shipped
stack passes, every object validated strictly, and the facts the project relies on read from
the render rather than from our reading of the chart (tests/helm_render.py says how).

Stacks: every shipped stack that installs charts (bases and standalones; tests/helm_render.py
chart_stacks). Charts: kube-prometheus-stack 79.5.0, dcgm-exporter 4.8.2, nvidia-device-plugin
0.18.0 (kube-system), aws-efa-k8s-device-plugin v0.5.29; the dynamo-platform chart stays
checked against its values file (tests/test_platform_values.py).
"""

from __future__ import annotations

import json
import re

import pytest
from helm_render import (
    ARCHIVES,
    PLATFORM_CHART,
    chart_stacks,
    installs,
    namespace_labels,
    of_kind,
    one,
    program_installs,
    rendered,
    validate,
    validate_all,
)
from k8s_match import INSTANCE_TYPE_LABEL, Node, admits, map_selects, selects, stack_nodes
from k8s_validation import K8S_VERSION

from components import efa
from components.conventions import EBS_STORAGE_CLASS, GPU_TAINT_EFFECT, GPU_TAINT_KEY
from components.monitoring import PROMETHEUS_SERVICE
from components.monitoring_specs import (
    DASHBOARD_LABEL,
    DASHBOARD_LABEL_VALUE,
    GRAFANA_ADMIN_SECRET,
    GRAFANA_PASSWORD_KEY,
    GRAFANA_USER_KEY,
    dashboard_configmaps,
)
from components.placement import catalogue_gpu_types
from stacks.catalog import metrics as m
from stacks.config.loader import load_stack
from stacks.config.schema import ComputeMode, StackConfig
from stacks.conventions.efa_groups import uses_efa
from stacks.conventions.k8s_names import (
    GRAPH_LABEL,
    GRAPH_METRIC_LABEL,
    MONITORING_NAMESPACE,
    PROMETHEUS_PORT,
    dynamo_namespace,
    metric_label,
)
from workloads.promql import QUERIES, Scope

needs_helm = pytest.mark.helm
KPS, DCGM = "kube-prometheus-stack", "dcgm-exporter"
NVIDIA, EFA = "nvidia-device-plugin", "aws-efa-k8s-device-plugin"


def expected_charts(stack: StackConfig) -> set[str]:
    """What a base or standalone stack must install (components/program.py, monitoring.py,
    nodegroups.py): monitoring and DCGM as configured; the NVIDIA plugin and the EFA plugin only
    on managed node groups (Auto Mode ships both in its AMIs and a second must never run,
    stacks/preflight/auto_mode.py), the EFA one only where a group uses EFA."""
    mon, groups = stack.monitoring, stack.cluster.node_groups
    managed = stack.cluster.compute_mode == ComputeMode.NODEGROUPS
    gpu = any(n.gpu for n in stack_nodes(stack))
    return ({PLATFORM_CHART}
            | ({KPS} if mon.enabled else set())
            | ({DCGM} if mon.enabled and mon.dcgm_exporter else set())
            | ({NVIDIA} if managed and gpu else set())
            | ({EFA} if managed and any(uses_efa(g, stack) for g in groups) else set()))


def stacks_with(chart: str) -> list[str]:
    return [s for s in chart_stacks() if chart in expected_charts(load_stack(s))]


def render_of(stack: str, chart: str) -> tuple[dict, ...]:
    (install,) = [i for i in installs(stack) if i.chart == chart]
    return rendered(install)


def pod_spec(obj: dict) -> dict:
    """The pod spec of a workload (the Prometheus resource carries the same fields itself)."""
    return obj["spec"] if obj["kind"] == "Prometheus" else obj["spec"]["template"]["spec"]


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def container(workload: dict, name: str) -> dict:
    (found,) = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    return found


# --- what is rendered, and with what --------------------------------------------------------

def test_chart_stacks_are_the_bases_and_standalones_on_aws():
    """Every base and standalone is rendered (a variant only when it brings node groups)."""
    assert {"agg-a100-standalone", "base-a100", "base-a100-auto", "base-b200"} <= \
        set(chart_stacks())


@pytest.mark.parametrize("stack", chart_stacks())
def test_each_stack_installs_the_charts_it_should(stack):
    assert {i.chart for i in program_installs(stack)} == expected_charts(load_stack(stack))


@pytest.mark.parametrize("stack", chart_stacks())
def test_the_program_passes_each_chart_the_pure_functions_values(stack):
    """What is rendered here (helm_render.VALUES_OF, the functions components/ calls) is what
    the program handed each chart under the mocks, at a version an archive is pinned for."""
    for install in installs(stack):
        assert json.loads(install.recorded_values) == install.values, install.id
        assert (install.chart, install.version) in ARCHIVES, install.id


@needs_helm
@pytest.mark.parametrize("stack", chart_stacks())
def test_every_rendered_object_is_strictly_valid(stack):
    """Built-in kinds with kubernetes-validate (strict; an unknown kind raises), the
    monitoring.coreos.com kinds against the chart's own CRDs (closed schemas)."""
    eks = load_stack(stack).cluster.eks_version
    assert f"{eks}.0" == K8S_VERSION, f"{stack} runs Kubernetes {eks}: validate at its version"
    for install in installs(stack):
        objs = rendered(install)
        assert objs, f"{install.id}: helm rendered nothing"
        validate_all(objs)


def test_a_misspelled_field_of_a_monitoring_kind_is_refused():
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
               "metadata": {"name": "x", "namespace": "monitoring"},
               "spec": {"selector": {}, "endpoints": [{"port": "metrics", "honorLabel": False}]}}
    with pytest.raises(AssertionError, match="honorLabel"):
        validate(monitor)
    with pytest.raises(AssertionError, match="no CRD"):
        validate({**monitor, "kind": "ServiceMonitorz"})


@needs_helm
@pytest.mark.parametrize("stack", chart_stacks())
def test_every_service_stays_inside_the_cluster(stack):
    """No chart exposes a Service (the policy pack sees only the chart resource, not its
    objects): reach Prometheus and Grafana through the API server or a port-forward."""
    for install in installs(stack):
        for svc in of_kind(rendered(install), "Service"):
            assert svc["spec"].get("type", "ClusterIP") == "ClusterIP", (install.id, svc)


# --- kube-prometheus-stack: what the runner's PromQL needs ---------------------------------

def prometheus(stack: str) -> dict:
    return one(render_of(stack, KPS), "Prometheus")


def picks(prom: dict, kind: str, labels: dict, namespace: str, stack: str) -> bool:
    """Does the Prometheus resource select a `kind` monitor (podMonitor, serviceMonitor) with
    `labels` in a namespace the program creates for `stack`? A null selector selects no
    monitor, a null namespace selector only Prometheus's own namespace (the chart's CRD,
    prometheus-operator v0.86.2 crd-prometheuses.yaml, the descriptions of those fields)."""
    spec, ns_labels = prom["spec"], namespace_labels(stack, namespace)
    selector, ns_selector = spec.get(f"{kind}Selector"), spec.get(f"{kind}NamespaceSelector")
    if selector is None or not selects(selector, labels):
        return False
    if ns_selector is None:
        return namespace == prom["metadata"]["namespace"]
    return selects(ns_selector, ns_labels)


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_prometheus_copies_the_graph_label_onto_every_target(stack):
    """Every per-graph query matches on the graph label Prometheus copies from the scraped pod
    (workloads/promql.py Scope); without it the runner's figures mix graphs."""
    copied = {metric_label(label) for label in prometheus(stack)["spec"]["podTargetLabels"]}
    assert GRAPH_METRIC_LABEL in copied and metric_label(GRAPH_LABEL) == GRAPH_METRIC_LABEL
    scope = Scope(dynamo_namespace(load_stack(stack)), "graph")
    for query in QUERIES:
        labels = {matcher.split("=")[0] for metric in query.metrics
                  for matcher in scope.matchers(metric)}
        assert GRAPH_METRIC_LABEL in labels, query.name


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_prometheus_selects_the_operators_pod_monitors_and_the_dcgm_service_monitor(stack):
    """The Dynamo operator's PodMonitors carry no label of this Helm release and live in the
    Dynamo namespace; DCGM's ServiceMonitor lives in the monitoring namespace."""
    config, prom = load_stack(stack), prometheus(stack)
    assert picks(prom, "podMonitor", {}, dynamo_namespace(config), stack)
    if DCGM in expected_charts(config):
        monitor = one(render_of(stack, DCGM), "ServiceMonitor")
        assert picks(prom, "serviceMonitor", monitor["metadata"].get("labels") or {},
                     monitor["metadata"]["namespace"], stack)


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_the_runner_reaches_prometheus_at_the_service_it_is_given(stack):
    """components.monitoring.prometheus_url() names this Service and port; it selects the pods
    the operator makes of the Prometheus resource (prometheus-operator v0.86.2
    pkg/prometheus/server/operator.go makeSelectorLabels, the pod labels)."""
    prom = prometheus(stack)
    name = prom["metadata"]["name"]
    pod_labels = {"app.kubernetes.io/managed-by": "prometheus-operator",
                  "app.kubernetes.io/name": "prometheus", "app.kubernetes.io/instance": name,
                  "operator.prometheus.io/name": name, "prometheus": name}
    svc = one(render_of(stack, KPS), "Service", PROMETHEUS_SERVICE)
    assert svc["metadata"]["namespace"] == prom["metadata"]["namespace"] == MONITORING_NAMESPACE
    assert PROMETHEUS_PORT in {p["port"] for p in svc["spec"]["ports"]}
    assert map_selects(svc["spec"]["selector"], pod_labels)


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_prometheus_may_discover_pods_in_every_namespace(stack):
    objs, prom = render_of(stack, KPS), prometheus(stack)
    account = prom["spec"]["serviceAccountName"]
    roles = {b["roleRef"]["name"] for b in of_kind(objs, "ClusterRoleBinding")
             if {"kind": "ServiceAccount", "name": account,
                 "namespace": MONITORING_NAMESPACE} in b["subjects"]}
    granted = {(group, resource) for role in of_kind(objs, "ClusterRole")
               if role["metadata"]["name"] in roles for rule in role["rules"]
               if {"list", "watch"} <= set(rule.get("verbs") or [])
               for group in rule.get("apiGroups") or [] for resource in rule["resources"]}
    assert {("", "pods"), ("", "services"), ("", "endpoints"),
            ("discovery.k8s.io", "endpointslices")} <= granted


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_prometheus_scrapes_at_the_stacks_interval_onto_the_tagged_volume(stack):
    config, spec = load_stack(stack), prometheus(stack)["spec"]
    assert spec["scrapeInterval"] == f"{config.monitoring.scrape_interval_s}s"
    assert spec["storage"]["volumeClaimTemplate"]["spec"]["storageClassName"] == \
        EBS_STORAGE_CLASS
    assert spec["retentionSize"] and spec["retention"] == config.monitoring.retention
    assert not of_kind(render_of(stack, KPS), "Alertmanager")   # no alert routing to pay for


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_grafana_takes_its_admin_from_the_generated_secret_and_loads_the_dashboards(stack):
    objs = render_of(stack, KPS)
    grafanas = [d for d in of_kind(objs, "Deployment")
                if d["metadata"]["labels"].get("app.kubernetes.io/name") == "grafana"]
    if not load_stack(stack).monitoring.grafana:
        assert not grafanas
        return
    (grafana,) = grafanas
    env = {e["name"]: e.get("valueFrom") for e in container(grafana, "grafana")["env"]}
    for var, key in (("GF_SECURITY_ADMIN_USER", GRAFANA_USER_KEY),
                     ("GF_SECURITY_ADMIN_PASSWORD", GRAFANA_PASSWORD_KEY)):
        assert env[var] == {"secretKeyRef": {"name": GRAFANA_ADMIN_SECRET, "key": key}}
    # nor does the chart write a password of its own anywhere
    assert not [s for s in of_kind(objs, "Secret") if GRAFANA_PASSWORD_KEY in
                {**s.get("data", {}), **s.get("stringData", {})}]
    sidecar = env_of(container(grafana, "grafana-sc-dashboard"))
    assert sidecar["NAMESPACE"] == "ALL"
    for configmap in dashboard_configmaps(MONITORING_NAMESPACE):
        assert configmap["metadata"]["labels"][sidecar["LABEL"]] == sidecar["LABEL_VALUE"]
    assert (sidecar["LABEL"], sidecar["LABEL_VALUE"]) == (DASHBOARD_LABEL, DASHBOARD_LABEL_VALUE)


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(KPS))
def test_monitoring_runs_on_the_cpu_nodes_only(stack):
    objs, nodes = render_of(stack, KPS), stack_nodes(load_stack(stack))
    workloads = [*of_kind(objs, "Deployment"), *of_kind(objs, "Prometheus")]
    assert len(workloads) >= 3
    for workload in workloads:
        spec, name = pod_spec(workload), workload["metadata"]["name"]
        assert [n.group for n in nodes if admits(spec, n)] == \
            [n.group for n in nodes if not n.gpu], name


# --- the GPU nodes: DCGM exporter and the device plugins -----------------------------------

def daemonset(stack: str, chart: str, container_name: str) -> tuple[dict, dict]:
    """The chart's DaemonSet that runs `container_name`, and that container."""
    for ds in of_kind(render_of(stack, chart), "DaemonSet"):
        for c in pod_spec(ds)["containers"]:
            if c["name"] == container_name:
                return ds, c
    raise AssertionError(f"{stack}: no DaemonSet of {chart} runs {container_name}")


def any_gpu_node(instance_type: str) -> Node:
    """A node of a GPU group a variant adds later under a name the base never saw."""
    return Node("a-variants-group", instance_type, True,
                {INSTANCE_TYPE_LABEL: instance_type, "dynamo-bench.io/node-group": "extra"},
                ({"key": GPU_TAINT_KEY, "value": "true", "effect": GPU_TAINT_EFFECT},))


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(DCGM))
def test_dcgm_labels_each_gpu_series_with_the_graph_of_the_pod_holding_it(stack):
    """dcgm-exporter 4.5.3-4.8.2 pkg/cmd/app.go: `--kubernetes` and
    `--kubernetes-enable-pod-labels` (both default false) with the allowlist; the GPU -> pod map
    is read from the kubelet's pod-resources socket (default
    /var/lib/kubelet/pod-resources/kubelet.sock; internal/pkg/transformation/kubernetes.go
    getMappings returns no mapping, silently, when it is absent), keyed by GPU UUID (the
    `--kubernetes-gpu-id-type` default `uid`)."""
    ds, exporter = daemonset(stack, DCGM, "exporter")
    env = env_of(exporter)
    assert env["DCGM_EXPORTER_KUBERNETES"] == "true"
    assert env["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"] == "true"
    allow = env["DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"].split(",")
    assert any(re.search(p, GRAPH_LABEL) for p in allow)
    assert not any(re.search(p, "app.kubernetes.io/name") for p in allow)  # series stay lean
    assert env.get("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", "uid") == "uid"
    host = {v["name"]: v["hostPath"]["path"] for v in pod_spec(ds)["volumes"] if "hostPath" in v}
    mounts = {mnt["mountPath"]: host.get(mnt["name"]) for mnt in exporter["volumeMounts"]}
    assert mounts.get("/var/lib/kubelet/pod-resources") == "/var/lib/kubelet/pod-resources"


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(DCGM))
def test_prometheus_scrapes_dcgm_keeping_the_gpu_holders_namespace_apart(stack):
    """ServiceMonitor -> Service -> exporter pods, at the stack's interval; honorLabels false
    turns the series' own `namespace` (the GPU holder's) into `exported_namespace`, which the
    queries' DCGM scope matches (workloads/promql.py Scope)."""
    objs, config = render_of(stack, DCGM), load_stack(stack)
    monitor, svc = one(objs, "ServiceMonitor"), one(objs, "Service")
    ds, exporter = daemonset(stack, DCGM, "exporter")
    assert selects(monitor["spec"]["selector"], svc["metadata"]["labels"])
    assert svc["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    assert map_selects(svc["spec"]["selector"], ds["spec"]["template"]["metadata"]["labels"])
    ports = {p["name"]: p["targetPort"] for p in svc["spec"]["ports"]}
    served = {p["containerPort"] for p in exporter["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert ports[endpoint["port"]] in served
        assert endpoint["interval"] == f"{config.monitoring.scrape_interval_s}s"
        assert not endpoint.get("honorLabels", False)
    scope = Scope(dynamo_namespace(config), "graph").matchers(m.DCGM_GPU_UTIL)
    assert scope[0].startswith("exported_namespace=")


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(DCGM))
def test_dcgm_exports_every_gpu_metric_the_project_reads(stack):
    ds, exporter = daemonset(stack, DCGM, "exporter")
    (volume,) = [v for v in pod_spec(ds)["volumes"] if "configMap" in v]
    (item,) = volume["configMap"]["items"]
    counters = one(render_of(stack, DCGM), "ConfigMap", volume["configMap"]["name"])
    listed = {line.split(",")[0].strip() for line in counters["data"][item["key"]].splitlines()
              if line.strip() and not line.lstrip().startswith("#")}
    assert set(m.DCGM) <= listed
    assert any(a.endswith(item["path"]) for a in exporter["args"])


@needs_helm
@pytest.mark.parametrize("stack", sorted({*stacks_with(DCGM), *stacks_with(NVIDIA)}))
def test_gpu_daemons_run_on_every_gpu_node_and_no_cpu_node(stack):
    """DCGM and the NVIDIA plugin on the stack's GPU groups and on any catalogue GPU type (a
    variant's extra group joins the running cluster); neither on a CPU node."""
    config = load_stack(stack)
    nodes = [*stack_nodes(config), *(any_gpu_node(t) for t in catalogue_gpu_types())]
    for chart, name in ((DCGM, "exporter"), (NVIDIA, "nvidia-device-plugin-ctr")):
        if chart not in expected_charts(config):
            continue
        spec = pod_spec(daemonset(stack, chart, name)[0])
        assert [n for n in nodes if admits(spec, n)] == [n for n in nodes if n.gpu], chart


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(NVIDIA))
def test_the_device_plugin_passes_gpus_as_the_pinning_shell_and_dcgm_read_them(stack):
    """k8s-device-plugin v0.18.0 cmd/nvidia-device-plugin/main.go: --device-list-strategy
    (DEVICE_LIST_STRATEGY) defaults to envvar, --device-id-strategy (DEVICE_ID_STRATEGY) to uuid,
    a CONFIG_FILE may set both. So a pod's GPU UUIDs arrive in NVIDIA_VISIBLE_DEVICES
    (internal/plugin/server.go deviceListEnvVar), what components/efa.py's shell pins, and the
    kubelet's pod-resources lists UUIDs, what DCGM's `uid` id type matches."""
    ds, plugin = daemonset(stack, NVIDIA, "nvidia-device-plugin-ctr")
    env = env_of(plugin)
    assert env.get("DEVICE_LIST_STRATEGY", "envvar") == "envvar"
    assert env.get("DEVICE_ID_STRATEGY", "uuid") == "uuid"
    assert "CONFIG_FILE" not in env and not plugin.get("args")
    assert "NVIDIA_VISIBLE_DEVICES" in efa.PIN_GPUS_SCRIPT
    if DCGM in expected_charts(load_stack(stack)):
        _, exporter = daemonset(stack, DCGM, "exporter")
        assert env_of(exporter).get("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", "uid") == "uid"


@needs_helm
@pytest.mark.parametrize("stack", stacks_with(EFA))
def test_the_efa_plugin_runs_on_every_efa_node(stack):
    """`vpc.amazonaws.com/efa` is advertised on each node of a group with EFA interfaces (and on
    any EFA-capable catalogue GPU type: a variant's extra group relies on the base's plugin,
    components/nodegroups.py), never on a CPU node."""
    config = load_stack(stack)
    ds, _ = daemonset(stack, EFA, "aws-efa-k8s-device-plugin")
    spec = pod_spec(ds)
    by_group = {g.name: g for g in config.cluster.node_groups}
    for node in stack_nodes(config):
        assert admits(spec, node) == uses_efa(by_group[node.group], config), node.group
    for instance_type in catalogue_gpu_types(efa=True):
        assert admits(spec, any_gpu_node(instance_type)), instance_type
