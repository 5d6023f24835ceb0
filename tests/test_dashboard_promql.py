"""The dashboards' PromQL, checked by Prometheus itself (promtool from the Debian package):
every query parses, and the hit-rate and quantile queries compute the right numbers from
known input series."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.dashboards import DASHBOARDS, promql_metric_names
from stacks.catalog import metrics as m
from workloads.promql import step_queries

pytestmark = pytest.mark.prometheus
PROMTOOL = shutil.which("promtool")


def _as_prometheus(expr: str, graph: str = ".*") -> str:
    """Grafana variables replaced by what Grafana would send ("All": the variables' allValue
    `.*`, or one graph picked)."""
    return (expr.replace("$__rate_interval", "1m").replace("$namespace", ".*")
            .replace("$graph", graph))


def _panels():
    for key, build in DASHBOARDS.items():
        for panel in build()["panels"]:
            for target in panel["targets"]:
                yield f"{key}: {panel['title']} {target['refId']}", _as_prometheus(target["expr"])


def _rules(exprs: list[str]) -> dict:
    return {"groups": [{"name": "dashboards", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]}]}


def _promtool(tmp_path, *args: str) -> subprocess.CompletedProcess:
    assert PROMTOOL, "promtool is missing: apt-get install prometheus (.ci/run does)"
    return subprocess.run([PROMTOOL, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)


def test_every_dashboard_query_parses(tmp_path):
    panels = list(_panels())
    assert len(panels) >= 20
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(_rules([e for _, e in panels])))
    result = _promtool(tmp_path, "check", "rules", "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(panels)} rules found" in result.stdout


def test_promtool_rejects_a_broken_query(tmp_path):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(_rules(["sum(rate(x[1m])"])))
    assert _promtool(tmp_path, "check", "rules", "rules.yml").returncode != 0


def _query(dashboard: str, title: str, ref: str = "A", graph: str = ".*") -> str:
    panel = next(p for p in DASHBOARDS[dashboard]()["panels"] if p["title"] == title)
    return _as_prometheus(next(t["expr"] for t in panel["targets"] if t["refId"] == ref),
                          graph)


def test_hit_rate_and_ttft_quantile_evaluate_to_the_expected_numbers(tmp_path):
    hit_rate = _query("kv-offload", "Offload-tier (KV connector) hit rate")
    ttft_p50 = _query("pareto", "Time to first token", "A")
    lbl = '{namespace="dynamo", pod="prefill-0"}'
    series = [
        # 600 of 1000 queried tokens per minute come from the offload tier -> 0.6
        {"series": f"{m.WORKER_EXTERNAL_PREFIX_CACHE_QUERIES}{lbl}", "values": "0+1000x10"},
        {"series": f"{m.WORKER_EXTERNAL_PREFIX_CACHE_HITS}{lbl}", "values": "0+600x10"},
        # every request's TTFT falls in (0.5, 1]: the median interpolates to 0.75 s
        {"series": f'{m.FRONTEND_TTFT}_bucket{{namespace="dynamo", le="0.5"}}',
         "values": "0+0x10"},
        {"series": f'{m.FRONTEND_TTFT}_bucket{{namespace="dynamo", le="1"}}',
         "values": "0+10x10"},
        {"series": f'{m.FRONTEND_TTFT}_bucket{{namespace="dynamo", le="+Inf"}}',
         "values": "0+10x10"},
    ]
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": hit_rate, "eval_time": "5m",
             "exp_samples": [{"labels": '{pod="prefill-0"}', "value": 0.6}]},
            {"expr": ttft_p50, "eval_time": "5m", "exp_samples": [{"labels": "{}",
                                                                   "value": 0.75}]},
        ]}],
    }
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(_rules([hit_rate, ttft_p50])))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(tests))
    result = _promtool(tmp_path, "test", "rules", "test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_picking_a_graph_shows_that_graph_alone(tmp_path):
    """Two graphs in one namespace (a campaign's side-by-side variants) and an idle GPU: with a
    graph picked, the TTFT panel and the GPU panel show that graph's alone; "All" shows every
    GPU, the idle one too."""
    ttft_p50 = _query("pareto", "Time to first token", "A", graph="agg-a100")
    gpu_util = _query("dcgm", "GPU utilisation", "A", graph="agg-a100")
    gpu_util_all = _query("dcgm", "GPU utilisation", "A")
    series = []
    for graph, fast in (("agg-a100", True), ("agg-l40s-fp8", False)):
        lbl = f'namespace="dynamo", pod="{graph}-frontend-0", dynamo_bench_io_graph="{graph}"'
        for le, count in (("0.1", 10 if fast else 0), ("4", 10), ("+Inf", 10)):
            series.append({"series": f'{m.FRONTEND_TTFT}_bucket{{{lbl}, le="{le}"}}',
                           "values": f"0+{count}x10"})
    exporter = 'namespace="monitoring", pod="dcgm-exporter-n1", Hostname="n1"'
    series += [
        {"series": f'{m.DCGM_GPU_UTIL}{{{exporter}, gpu="0", exported_namespace="dynamo", '
                   'exported_pod="agg-a100-worker-0", dynamo_bench_io_graph="agg-a100"}',
         "values": "80+0x10"},
        {"series": f'{m.DCGM_GPU_UTIL}{{{exporter}, gpu="1"}}', "values": "0+0x10"},
    ]
    tests = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": ttft_p50, "eval_time": "5m", "exp_samples": [{"labels": "{}",
                                                                   "value": 0.05}]},
            {"expr": gpu_util, "eval_time": "5m", "exp_samples": [
                {"labels": '{Hostname="n1", gpu="0"}', "value": 80}]},
            {"expr": gpu_util_all, "eval_time": "5m", "exp_samples": [
                {"labels": '{Hostname="n1", gpu="0"}', "value": 80},
                {"labels": '{Hostname="n1", gpu="1"}', "value": 0}]},
        ]}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(tests))
    result = _promtool(tmp_path, "test", "rules", "test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def _live_histograms() -> set[str]:
    """Names the live Dynamo 1.6.1 / vLLM exports (AIPerf's server_metrics_export.json of the
    fixture runs) type `histogram`: Prometheus stores only their _bucket, _sum, _count."""
    found = set()
    for export in Path(__file__).parent.glob("fixtures/runs/*/fixture/*/*/"
                                             "server_metrics_export.json"):
        for name, family in json.loads(export.read_text())["metrics"].items():
            if family.get("type") == "histogram":
                found.add(name)
    return found


def test_no_query_reads_a_histogram_by_its_bare_name():
    """A histogram's bare name selects nothing: the panel stays empty (issue 28, runner.md M1:
    the router's predicted hit rate)."""
    histograms = _live_histograms()
    assert m.ROUTER_KV_HIT_RATE in histograms and m.FRONTEND_TTFT in histograms
    exprs = [e for _, e in _panels()] + list(step_queries(60).values())
    for expr in exprs:
        for name in promql_metric_names(expr) & histograms:
            assert not re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr), (name, expr)


def test_the_router_hit_rate_panel_reads_the_histograms_mean(tmp_path):
    expr = _query("platform", "Prefix hits (share of input tokens served from cache)", "B")
    lbl = '{namespace="dynamo", dynamo_bench_io_graph="g"'
    series = [{"series": f"{m.ROUTER_KV_HIT_RATE}_sum{lbl}}}", "values": "0+30x10"},
              {"series": f"{m.ROUTER_KV_HIT_RATE}_count{lbl}}}", "values": "0+60x10"}]
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": [], "evaluation_interval": "1m", "tests": [{
            "interval": "1m", "input_series": series, "promql_expr_test": [
                {"expr": expr, "eval_time": "5m",
                 "exp_samples": [{"labels": "{}", "value": 0.5}]}]}]}))
    result = _promtool(tmp_path, "test", "rules", "test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
