"""Grafana dashboards (JSON models, pure) and the metric names their queries use.

Every metric a query names comes from the catalogue `stacks.catalog.metrics`;
`dashboard_metric_names` reads the names back out of the PromQL so a test can hold them against the
catalogue (a typo in a query shows up there, not as an empty panel on a cluster). Dashboards filter
by namespace and graph (variables `namespace` and `graph`): the Kubernetes namespace label the
Prometheus operator adds to every PodMonitor target, and the graph label Prometheus and the DCGM
exporter copy from the graph's pods (components/monitoring_specs.py). One Prometheus scrapes every
graph of the cluster, so side-by-side variants would otherwise blend into one line.
"""

from __future__ import annotations

import re
from typing import Any

from stacks.catalog import metrics as m
from stacks.conventions.k8s_names import GRAPH_METRIC_LABEL

# Panels, targets and the namespace query name their data source through the dashboard's
# `datasource` variable (a data-source-type variable listing Prometheus sources, "default"
# selected), as kube-prometheus-stack's own dashboards do (prometheus-community/helm-charts,
# charts/kube-prometheus-stack/templates/grafana/dashboards-1.14/pod-total.yaml, commit
# 000811b3): the same JSON works with whatever uid the Grafana it is loaded into gave its
# Prometheus, and the user can point it at another one.
DATASOURCE_VARIABLE = "datasource"
DATASOURCE = {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
RATE = "[$__rate_interval]"
GRAPH = f'{GRAPH_METRIC_LABEL}=~"$graph"'
NS = f'namespace=~"$namespace",{GRAPH}'
# DCGM series carry the GPU holder's namespace as `exported_namespace` (workloads/promql.py)
GPU_NS = f'exported_namespace=~"$namespace",{GRAPH}'
# "All" matches every value and none: idle GPUs, which no graph pod holds, stay on the DCGM
# dashboard until a graph is picked.
ALL = ".*"


def _quantile(q: float, histogram: str, by: str = "") -> str:
    group = f"le, {by}" if by else "le"
    return (f"histogram_quantile({q}, sum by ({group}) "
            f"(rate({histogram}_bucket{{{NS}}}{RATE})))")


def _ratio(num: str, den: str, by: str = "") -> str:
    grouping = f" by ({by})" if by else ""
    return (f"sum{grouping} (rate({num}{{{NS}}}{RATE})) / "
            f"clamp_min(sum{grouping} (rate({den}{{{NS}}}{RATE})), 1e-9)")


def _panel(title: str, targets: list[tuple[str, str]], unit: str = "short",
           kind: str = "timeseries") -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                     "datasource": DATASOURCE}
                    for i, (expr, legend) in enumerate(targets)],
    }


def _datasource_variable() -> dict[str, Any]:
    return {"name": DATASOURCE_VARIABLE, "label": "Data source", "type": "datasource",
            "query": "prometheus", "regex": "", "hide": 0,
            "current": {"selected": True, "text": "default", "value": "default"}}


def _query_variable(name: str, query: str) -> dict[str, Any]:
    return {"name": name, "type": "query", "datasource": DATASOURCE, "query": query,
            "includeAll": True, "allValue": ALL, "multi": True, "refresh": 2}


def _scope_variables() -> list[dict[str, Any]]:
    return [_query_variable("namespace", f"label_values({m.FRONTEND_REQUESTS}, namespace)"),
            _query_variable("graph", f'label_values({m.FRONTEND_REQUESTS}'
                                     f'{{namespace=~"$namespace"}}, {GRAPH_METRIC_LABEL})')]


def _dashboard(uid: str, title: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    laid_out = []
    for i, panel in enumerate(panels):  # two panels per row, 8 units high
        laid_out.append({**panel, "id": i + 1,
                         "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}})
    return {
        "uid": uid, "title": title, "tags": ["dynamo-bench"], "schemaVersion": 39,
        "editable": False, "refresh": "30s", "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [_datasource_variable(), *_scope_variables()]},
        "panels": laid_out,
    }


def pareto_dashboard() -> dict[str, Any]:
    """TTFT against output throughput: one point per scrape window, the load sweep traces the
    Pareto front."""
    throughput = f"sum(rate({m.FRONTEND_OUTPUT_TOKENS}{{{NS}}}{RATE}))"
    ttft_p50, ttft_p99 = _quantile(0.5, m.FRONTEND_TTFT), _quantile(0.99, m.FRONTEND_TTFT)
    pareto = _panel("TTFT vs output throughput", [(throughput, "output tok/s"),
                                                  (ttft_p50, "TTFT p50"),
                                                  (ttft_p99, "TTFT p99")], "s", "xychart")
    pareto["transformations"] = [{"id": "joinByField", "options": {"byField": "Time",
                                                                   "mode": "outer"}}]
    pareto["options"] = {"seriesMapping": "auto", "dims": {"x": "output tok/s"}}
    return _dashboard("dynamo-bench-pareto", "dynamo-bench: Pareto (TTFT vs throughput)", [
        pareto,
        _panel("Output throughput", [(throughput, "output tok/s")], "short"),
        _panel("Time to first token", [(ttft_p50, "p50"), (ttft_p99, "p99")], "s"),
        _panel("Inter-token latency", [(_quantile(0.5, m.FRONTEND_ITL), "p50"),
                                       (_quantile(0.99, m.FRONTEND_ITL), "p99")], "s"),
        _panel("Request latency", [(_quantile(0.5, m.FRONTEND_REQUEST_DURATION), "p50"),
                                   (_quantile(0.99, m.FRONTEND_REQUEST_DURATION), "p99")], "s"),
    ])


def dcgm_dashboard() -> dict[str, Any]:
    by_gpu = "{{Hostname}} GPU {{gpu}}"

    def gpu(agg: str, metric: str) -> str:
        return f"{agg} by (Hostname, gpu) ({metric}{{{GPU_NS}}})"

    return _dashboard("dynamo-bench-dcgm", "dynamo-bench: GPUs (DCGM)", [
        _panel("GPU utilisation", [(gpu("avg", m.DCGM_GPU_UTIL), by_gpu)], "percent"),
        _panel("GPU memory used", [(gpu("max", m.DCGM_FB_USED), by_gpu)], "decmbytes"),
        _panel("GPU memory free", [(gpu("min", m.DCGM_FB_FREE), by_gpu)], "decmbytes"),
        _panel("GPU temperature", [(gpu("max", m.DCGM_GPU_TEMP), by_gpu)], "celsius"),
        _panel("GPU power", [(gpu("avg", m.DCGM_POWER_USAGE), by_gpu)], "watt"),
    ])


def platform_dashboard() -> dict[str, Any]:
    per_pod = "{{pod}}"
    return _dashboard("dynamo-bench-platform", "dynamo-bench: Dynamo platform", [
        _panel("Scrape targets up (worker health)",
               [(f"max by (pod) ({m.SCRAPE_UP}{{{NS}}})", per_pod)]),
        _panel("Frontend request rate",
               [(f"sum(rate({m.FRONTEND_REQUESTS}{{{NS}}}{RATE}))", "req/s")], "reqps"),
        _panel("Worker request rate",
               [(f"sum by (pod) (rate({m.WORKER_REQUESTS}{{{NS}}}{RATE}))", per_pod)],
               "reqps"),
        _panel("KV cache usage", [(f"max by (pod) ({m.WORKER_KV_CACHE_USAGE}{{{NS}}})",
                                   per_pod)], "percentunit"),
        _panel("Requests running / waiting",
               [(f"sum by (pod) ({m.WORKER_REQUESTS_RUNNING}{{{NS}}})", "running {{pod}}"),
                (f"sum by (pod) ({m.WORKER_REQUESTS_WAITING}{{{NS}}})", "waiting {{pod}}")]),
        _panel("Preemptions", [(f"sum by (pod) (rate({m.WORKER_PREEMPTIONS}{{{NS}}}{RATE}))",
                                per_pod)], "ops"),
        _panel("Prefix hits (share of input tokens served from cache)",
               [(_ratio(f"{m.FRONTEND_CACHED_TOKENS}_sum",
                        f"{m.FRONTEND_INPUT_SEQUENCE_TOKENS}_sum"), "frontend cached tokens"),
                # a histogram in Dynamo 1.6.1 (only its _sum / _count / _bucket series exist):
                # the mean predicted hit rate over the window
                (_ratio(f"{m.ROUTER_KV_HIT_RATE}_sum", f"{m.ROUTER_KV_HIT_RATE}_count"),
                 "router predicted hit rate")],
               "percentunit"),
    ])


def kv_offload_dashboard() -> dict[str, Any]:
    return _dashboard("dynamo-bench-kv-offload", "dynamo-bench: KV offload", [
        _panel("GPU prefix-cache hit rate",
               [(_ratio(m.WORKER_PREFIX_CACHE_HITS, m.WORKER_PREFIX_CACHE_QUERIES, "pod"),
                 "{{pod}}")], "percentunit"),
        _panel("Offload-tier (KV connector) hit rate",
               [(_ratio(m.WORKER_EXTERNAL_PREFIX_CACHE_HITS,
                        m.WORKER_EXTERNAL_PREFIX_CACHE_QUERIES, "pod"), "{{pod}}")],
               "percentunit"),
        _panel("Tokens served from the offload tier",
               [(f"sum by (pod) (rate({m.WORKER_EXTERNAL_PREFIX_CACHE_HITS}{{{NS}}}{RATE}))",
                 "{{pod}}")], "short"),
        _panel("GPU KV cache usage", [(f"max by (pod) ({m.WORKER_KV_CACHE_USAGE}{{{NS}}})",
                                       "{{pod}}")], "percentunit"),
        _panel("Preemptions (recomputation pressure)",
               [(f"sum by (pod) (rate({m.WORKER_PREEMPTIONS}{{{NS}}}{RATE}))", "{{pod}}")],
               "ops"),
        _panel("Time to first token", [(_quantile(0.5, m.FRONTEND_TTFT), "p50"),
                                       (_quantile(0.99, m.FRONTEND_TTFT), "p99")], "s"),
    ])


DASHBOARDS = {
    "pareto": pareto_dashboard,
    "dcgm": dcgm_dashboard,
    "platform": platform_dashboard,
    "kv-offload": kv_offload_dashboard,
}

# --- reading metric names back out of PromQL ---------------------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "inf", "nan"}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def promql_metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (label matchers, ranges, groupings, function calls
    and numbers removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)            # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)                     # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)                    # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word, rest = match.group(), text[match.end():].lstrip()
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue  # a function or aggregation, or a keyword
        if re.match(r"\d", text[match.start() - 1:match.start()] or " "):
            continue  # the exponent of a number such as 1e-9
        names.add(word)
    return names


def _queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for var in dashboard["templating"]["list"]:
        found = re.match(r"label_values\(([^,)]+)", var.get("query", ""))
        if found:
            exprs.append(found.group(1))
    return exprs


def dashboard_metric_names(dashboards: list[dict[str, Any]] | None = None) -> set[str]:
    """Every metric the dashboards query, histogram series folded to their family name."""
    dashboards = dashboards if dashboards is not None else [f() for f in DASHBOARDS.values()]
    names = set()
    for d in dashboards:
        for expr in _queries(d):
            for name in promql_metric_names(expr):
                for suffix in _HISTOGRAM_SUFFIXES:
                    if name.endswith(suffix):
                        name = name[: -len(suffix)]
                        break
                names.add(name)
    return names


def catalogue_names() -> set[str]:
    """All metric names stacks.catalog.metrics defines."""
    return {v for k, v in vars(m).items() if k.isupper() and isinstance(v, str)}
