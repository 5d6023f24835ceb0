"""Monitoring values and dashboards: open selectors, config-driven intervals, ClusterIP only,
and every metric a dashboard queries comes from the catalogue."""

from __future__ import annotations

import json
import re

import pytest

from components.conventions import EBS_STORAGE_CLASS, GPU_TAINT_KEY, NODE_GROUP_LABEL
from components.dashboards import (
    DASHBOARDS,
    catalogue_names,
    dashboard_metric_names,
    promql_metric_names,
)
from components.monitoring_specs import (
    dashboard_configmaps,
    dcgm_exporter_values,
    kube_prometheus_values,
)
from stacks.catalog import metrics as m
from stacks.config.loader import load_stack, parse_config, read_stack_file, stack_file


def _base(**monitoring):
    raw = read_stack_file(stack_file("base-a100"))
    raw["monitoring"] = {**raw.get("monitoring", {}), **monitoring}
    return parse_config("base-a100", raw)


def _walk(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}.{k}", v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


def test_dashboards_use_only_catalogue_metric_names():
    used = dashboard_metric_names()
    assert used - catalogue_names() == set()
    assert len(used) >= 20


def test_metric_name_reader_catches_a_planted_name():
    expr = ('histogram_quantile(0.99, sum by (le, pod) (rate(made_up_seconds_bucket'
            '{namespace=~"$namespace", le!="+Inf"}[$__rate_interval]))) / clamp_min('
            'sum without (instance) (vllm:kv_cache_usage_perc offset 5m), 1e-9) > bool 0.5')
    assert promql_metric_names(expr) == {"made_up_seconds_bucket", "vllm:kv_cache_usage_perc"}
    planted = {"panels": [{"targets": [{"expr": "sum(rate(not_in_catalogue_total[5m]))"}]}],
               "templating": {"list": []}}
    assert dashboard_metric_names([planted]) - catalogue_names() == {"not_in_catalogue_total"}


@pytest.mark.parametrize("dashboard, required", [
    ("pareto", {m.FRONTEND_TTFT, m.FRONTEND_OUTPUT_TOKENS}),
    ("dcgm", set(m.DCGM)),
    ("platform", {m.SCRAPE_UP, m.FRONTEND_REQUESTS, m.WORKER_KV_CACHE_USAGE,
                  m.FRONTEND_CACHED_TOKENS}),
    ("kv-offload", {m.WORKER_EXTERNAL_PREFIX_CACHE_HITS, m.WORKER_EXTERNAL_PREFIX_CACHE_QUERIES,
                    m.WORKER_KV_CACHE_USAGE}),
])
def test_each_dashboard_shows_what_it_is_for(dashboard, required):
    assert required <= dashboard_metric_names([DASHBOARDS[dashboard]()])


def test_pareto_panel_plots_ttft_against_throughput():
    pareto = DASHBOARDS["pareto"]()["panels"][0]
    assert pareto["type"] == "xychart"
    exprs = [t["expr"] for t in pareto["targets"]]
    assert m.FRONTEND_OUTPUT_TOKENS in exprs[0]
    assert all(m.FRONTEND_TTFT in e for e in exprs[1:])


def test_dashboard_configmaps_are_labelled_for_the_grafana_sidecar():
    cms = dashboard_configmaps("monitoring")
    assert len(cms) == len(DASHBOARDS) == 4
    uids = set()
    for cm in cms:
        assert cm["metadata"]["namespace"] == "monitoring"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        (body,) = cm["data"].values()
        dash = json.loads(body)
        uids.add(dash["uid"])
        assert dash["panels"] and all(p["targets"] for p in dash["panels"])
    assert len(uids) == len(cms)
    values = kube_prometheus_values(load_stack("base-a100"))
    sidecar = values["grafana"]["sidecar"]["dashboards"]
    assert (sidecar["label"], sidecar["labelValue"]) == ("grafana_dashboard", "1")


def test_prometheus_selects_every_monitor_in_every_namespace():
    spec = kube_prometheus_values(load_stack("base-a100"))["prometheus"]["prometheusSpec"]
    for kind in ("podMonitor", "serviceMonitor"):
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
        assert spec[f"{kind}Selector"] == {}
        assert spec[f"{kind}NamespaceSelector"] == {}


def test_retention_and_scrape_interval_come_from_config():
    stack = _base(retention="3d", scrapeIntervalS=5)
    spec = kube_prometheus_values(stack)["prometheus"]["prometheusSpec"]
    assert (spec["retention"], spec["scrapeInterval"]) == ("3d", "5s")
    assert dcgm_exporter_values(stack)["serviceMonitor"]["interval"] == "5s"
    default = kube_prometheus_values(load_stack("base-a100"))["prometheus"]["prometheusSpec"]
    assert (default["retention"], default["scrapeInterval"]) == ("15d", "15s")


@pytest.mark.parametrize("build", [kube_prometheus_values, dcgm_exporter_values])
def test_no_service_is_exposed_outside_the_cluster(build):
    types = [v for path, v in _walk(build(load_stack("base-a100")))
             if path.endswith(".type") and ".service" in path]
    assert types and set(types) == {"ClusterIP"}


def test_grafana_off_when_config_says_so():
    assert kube_prometheus_values(_base(grafana=False))["grafana"] == {"enabled": False}


def test_monitoring_runs_on_cpu_nodes_and_dcgm_on_gpu_nodes():
    stack = load_stack("base-a100")
    spec = kube_prometheus_values(stack)["prometheus"]["prometheusSpec"]
    cpu = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert cpu["nodeSelectorTerms"][0]["matchExpressions"][0] == {
        "key": NODE_GROUP_LABEL, "operator": "In", "values": ["cpu"]}
    dcgm = dcgm_exporter_values(stack)
    gpu = dcgm["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert gpu["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["g6e", "p4d"]
    assert any(t["key"] == GPU_TAINT_KEY and t["operator"] == "Exists"
               for t in dcgm["tolerations"])


def test_prometheus_volume_uses_the_tagged_ebs_class():
    spec = kube_prometheus_values(load_stack("base-a100"))["prometheus"]["prometheusSpec"]
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == EBS_STORAGE_CLASS


def test_shipped_dashboards_take_the_datasource_as_a_variable():
    """The JSON in the ConfigMaps names no data source uid of its own: a `datasource` variable
    of type datasource (Prometheus sources) and every panel, target and query variable
    pointing at `${datasource}`, as kube-prometheus-stack's own dashboards do."""
    for cm in dashboard_configmaps("monitoring"):
        (body,) = cm["data"].values()
        dash = json.loads(body)
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        ds = variables["datasource"]
        assert (ds["type"], ds["query"]) == ("datasource", "prometheus"), cm["metadata"]["name"]
        wanted = {"type": "prometheus", "uid": "${datasource}"}
        refs = [v for path, v in _walk(dash) if path.endswith(".datasource")]
        users = [*dash["panels"], *(t for p in dash["panels"] for t in p["targets"]),
                 *(v for v in dash["templating"]["list"] if v["type"] == "query")]
        assert all(u.get("datasource") == wanted for u in users), cm["metadata"]["name"]
        assert len(refs) == len(users) and all(r == wanted for r in refs)


def test_series_carry_the_graph_they_came_from():
    """What the runner's scoped PromQL and the dashboards select on (workloads/promql.py
    Scope): Prometheus copies the graph pod label onto every target, the DCGM exporter the
    GPU holder's graph label onto its series, and its namespace arrives as
    `exported_namespace` (honorLabels false)."""
    from components.graph import GRAPH_LABEL
    from workloads.promql import Scope
    stack = load_stack("base-a100")
    spec = kube_prometheus_values(stack)["prometheus"]["prometheusSpec"]
    assert spec["podTargetLabels"] == [GRAPH_LABEL]
    dcgm = dcgm_exporter_values(stack)
    assert dcgm["serviceMonitor"]["honorLabels"] is False
    assert dcgm["kubernetes"]["enablePodLabels"] is True
    (allow,) = dcgm["kubernetes"]["podLabelAllowlistRegex"]
    assert "," not in allow   # the chart joins the list with commas into one variable
    assert re.fullmatch(allow, GRAPH_LABEL) and not re.fullmatch(allow, "dynamo-bench-io/graph")
    assert Scope("dynamo", "g").matchers(m.DCGM_GPU_UTIL)[0].startswith("exported_namespace=")


def test_every_dashboard_selector_is_scoped_to_the_picked_graph():
    for key, build in DASHBOARDS.items():
        dashboard = build()
        assert [v["name"] for v in dashboard["templating"]["list"]] == [
            "datasource", "namespace", "graph"], key
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                names = promql_metric_names(expr)
                for name in names:
                    found = re.findall(rf"(?<![\w:]){re.escape(name)}\{{([^}}]*)\}}", expr)
                    bare = re.findall(rf"(?<![\w:]){re.escape(name)}(?![\w:{{])", expr)
                    ns = "exported_namespace" if name in m.DCGM else "namespace"
                    want = {f'{ns}=~"$namespace"', 'dynamo_bench_io_graph=~"$graph"'}
                    assert found and not bare and all(want <= set(f.split(",")) for f in found), (
                        key, panel["title"], expr)


def test_prometheus_blocks_are_bounded_below_the_volume_size():
    """Time retention alone lets a long campaign fill the volume and stop ingestion (issue 28,
    runner.md M6): the size bound leaves room for the WAL and a compaction."""
    spec = kube_prometheus_values(load_stack("base-a100"))["prometheus"]["prometheusSpec"]
    size = spec["retentionSize"]
    assert re.fullmatch(r"\d+GiB", size)   # the chart's unit format, e.g. "50GiB"
    volume = spec["storageSpec"]["volumeClaimTemplate"]["spec"]["resources"]["requests"][
        "storage"]
    assert int(size.removesuffix("GiB")) <= 0.85 * int(volume.removesuffix("Gi"))
