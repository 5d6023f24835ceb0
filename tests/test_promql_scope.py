"""The runner's per-step PromQL reads one graph, not the cluster (issue 28, runner.md S1).

One Prometheus scrapes every graph of the cluster (a campaign runs variants side by side in one
namespace) and the DCGM exporter reports every GPU node, idle ones included. The scoped queries
are checked twice: every selector carries the graph's matchers, and promtool evaluates them over
series of two graphs and idle GPUs, labelled as the scrape labels them on the cluster
(components/monitoring_specs.py), expecting this graph's own numbers.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from stacks.catalog import metrics as m
from stacks.conventions.k8s_names import GRAPH_LABEL, GRAPH_METRIC_LABEL, metric_label
from workloads.promql import QUERIES, Scope, step_queries

SCOPE = Scope("dynamo", "agg-a100")
CATALOGUE = sorted({n for q in QUERIES for n in q.metrics}, key=len, reverse=True)


def _selectors(query: str) -> list[tuple[str, str]]:
    """(series, matchers) of every catalogue selector in `query`."""
    names = "|".join(re.escape(n) for n in CATALOGUE)
    return [(f.group(1), f.group(2) or "") for f in re.finditer(
        rf"(?<![\w:])((?:{names})(?:_bucket|_sum|_count)?)(?![\w:])(?:\{{([^}}]*)\}})?", query)]


def test_the_graph_label_is_the_pod_label_as_prometheus_and_dcgm_spell_it():
    assert GRAPH_METRIC_LABEL == "dynamo_bench_io_graph" == metric_label(GRAPH_LABEL)
    assert metric_label("nvidia.com/dynamo-graph-deployment-name") == \
        "nvidia_com_dynamo_graph_deployment_name"


def test_every_selector_of_every_query_is_scoped_to_the_graph():
    for name, query in step_queries(120, scope=SCOPE).items():
        found = _selectors(query)
        assert found, name
        for series, matchers in found:
            ns = "exported_namespace" if series in m.DCGM else "namespace"
            assert f'{ns}="dynamo"' in matchers.split(","), (name, series, matchers)
            assert 'dynamo_bench_io_graph="agg-a100"' in matchers.split(","), (name, series)
    # matchers a query has of its own are kept beside the scope's
    assert 'dynamo_endpoint="generate",namespace="dynamo"' in \
        step_queries(120, scope=SCOPE)["worker_requests_by_pod"]


def test_unscoped_queries_are_the_local_engines_and_unchanged():
    for q in QUERIES:
        assert q.render(60) == q.template.format(w="60s")
        assert "namespace" not in q.render(60) and GRAPH_METRIC_LABEL not in q.render(60)


PROMTOOL = shutil.which("promtool")

FRONTEND = {"agg-a100": ("agg-a100-frontend-6c9f-x", "0.1"),
            "agg-l40s-fp8": ("agg-l40s-fp8-frontend-77d4-y", "4")}


def _cluster_series() -> list[dict]:
    """Two graphs in namespace `dynamo`, each at 100 output tokens/s; agg-a100's TTFT all
    under 0.1 s, agg-l40s-fp8's in (1, 4] s. GPUs: 16 of agg-a100 at 80 %, 4 of agg-l40s-fp8
    at 40 %, 4 idle ones no pod holds, as Prometheus stores them after the scrape."""
    out = []
    for graph, (pod, bucket) in FRONTEND.items():
        lbl = (f'namespace="dynamo", pod="{pod}", container="main", endpoint="http", '
               f'{GRAPH_METRIC_LABEL}="{graph}", model="Qwen/Qwen3-30B-A3B"')
        out.append({"series": f"{m.FRONTEND_OUTPUT_TOKENS}{{{lbl}}}", "values": "0+6000x10"})
        for le, count in (("0.1", "10" if bucket == "0.1" else "0"),
                          ("1", "10" if bucket == "0.1" else "0"), ("4", "10"), ("+Inf", "10")):
            out.append({"series": f'{m.FRONTEND_TTFT}_bucket{{{lbl}, le="{le}"}}',
                        "values": f"0+{count}x10"})

    def gpu(node: str, index: int, util: int, holder: tuple[str, str] | None) -> dict:
        lbl = (f'namespace="monitoring", pod="dcgm-exporter-{node}", Hostname="{node}", '
               f'gpu="{index}"')
        if holder:
            lbl += (f', exported_namespace="dynamo", exported_pod="{holder[1]}", '
                    f'exported_container="main", {GRAPH_METRIC_LABEL}="{holder[0]}"')
        return {"series": f"{m.DCGM_GPU_UTIL}{{{lbl}}}", "values": f"{util}+0x10"}

    for i in range(16):
        out.append(gpu(f"p4d-{i // 8}", i % 8, 80, ("agg-a100", f"agg-a100-worker-{i // 8}")))
    for i in range(4):
        out.append(gpu("g6e-0", i, 40, ("agg-l40s-fp8", "agg-l40s-fp8-worker-0")))
        out.append(gpu("g6e-1", i, 0, None))
    return out


@pytest.mark.prometheus
def test_scoped_queries_read_this_graphs_numbers_in_a_shared_prometheus(tmp_path):
    assert PROMTOOL, "promtool is missing: apt-get install prometheus (.ci/run does)"
    names = ("output_tokens_per_s", "ttft_p50_s", "gpu_util_mean")
    scoped = step_queries(120, scope=SCOPE)
    cluster_wide = step_queries(120)
    expected = {"output_tokens_per_s": 100, "ttft_p50_s": 0.05, "gpu_util_mean": 80}
    # cluster-wide, as before the fix: both frontends, every GPU (idle ones too)
    blended = {"output_tokens_per_s": 200, "ttft_p50_s": 0.1,
               "gpu_util_mean": (16 * 80 + 4 * 40) / 24}
    # rounded: Prometheus sums series in no fixed order, so a mean can differ in its last bit
    tests = [{"expr": f"round({q[n]}, 0.001)", "eval_time": "5m",
              "exp_samples": [{"labels": "{}", "value": v[n]}]}
             for q, v in ((scoped, expected), (cluster_wide, blended)) for n in names]
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": [], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": _cluster_series(),
                   "promql_expr_test": tests}]}))
    result = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
