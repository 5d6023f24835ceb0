"""The PromQL the cluster runner evaluates over each step's window, built from
stacks/catalog/metrics.py.

Server-side facts (prefix hits, KV usage, preemptions, queueing, GPU use) come from Prometheus
on the cluster, never from client data. Each query is evaluated at the step's end with the
step's duration as its range, e.g. `step_queries(120, scope=Scope("dynamo", "agg-a100"))`; the
engine tests run the same set, unscoped, against a real Prometheus scraping the local engine.

One Prometheus scrapes the whole cluster: a campaign runs variants side by side in one
namespace, and the DCGM exporter reports every GPU node, idle ones included. On a cluster every
series a query reads is therefore scoped to the graph (`Scope`): Dynamo and vLLM series by the
Kubernetes `namespace` target label and the graph label Prometheus copies from the graph's
pods; DCGM series by the namespace and graph of the pod that holds the GPU
(components/monitoring_specs.py sets both up; the label sources are cited there).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from stacks.catalog import metrics as m
from stacks.conventions.k8s_names import GRAPH_METRIC_LABEL


@dataclass(frozen=True)
class Scope:
    """The series of one deployed graph: its Kubernetes namespace and its name."""
    namespace: str
    graph: str

    def matchers(self, metric: str) -> tuple[str, ...]:
        # A PodMonitor target carries its pod's `namespace` (prometheus-operator v0.86.2
        # pkg/prometheus/promcfg.go generatePodMonitorConfig: __meta_kubernetes_namespace ->
        # namespace). DCGM series carry the GPU holder's `namespace` / `pod` (dcgm-exporter
        # 4.5.3-4.8.2 internal/pkg/transformation/const.go), renamed `exported_namespace` by
        # the scrape because its ServiceMonitor keeps honorLabels false and the target has a
        # `namespace` of its own (the exporter's).
        ns = "exported_namespace" if metric in m.DCGM else "namespace"
        return (f"{ns}={json.dumps(self.namespace)}",
                f"{GRAPH_METRIC_LABEL}={json.dumps(self.graph)}")

    def apply(self, query: str, metrics: tuple[str, ...]) -> str:
        """`query` with this scope's matchers on every selector of `metrics` (a histogram's
        `_bucket` / `_sum` / `_count` series too), beside any matchers it has."""
        for metric in metrics:
            pattern = re.compile(rf"(?<![\w:])({re.escape(metric)}(?:_bucket|_sum|_count)?)"
                                 rf"(?![\w:])(?:\{{([^}}]*)\}})?")

            def scoped(found: re.Match, metric: str = metric) -> str:
                have = [x for x in (found.group(2) or "").split(",") if x.strip()]
                return f"{found.group(1)}{{{','.join([*have, *self.matchers(metric)])}}}"

            query = pattern.sub(scoped, query)
        return query


@dataclass(frozen=True)
class Query:
    name: str
    template: str              # {w} = range window, e.g. "120s"
    metrics: tuple[str, ...]   # catalogue names it reads
    engine: bool = True        # the local engine emits its inputs (DCGM needs real GPUs)

    def render(self, window_s: float, scope: Scope | None = None) -> str:
        text = self.template.format(w=f"{max(1, round(window_s))}s")
        return scope.apply(text, self.metrics) if scope else text


def _quantile(q: float, hist: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({hist}_bucket[{{w}}])))"


def _mean(hist: str) -> str:
    return f"sum(rate({hist}_sum[{{w}}])) / sum(rate({hist}_count[{{w}}]))"


def _increase(series: str, by: str | None = None) -> str:
    """Growth of a counter over the window, summed (per `by` label when given)."""
    return f"sum{f' by ({by})' if by else ''}(increase({series}[{{w}}]))"


QUERIES: tuple[Query, ...] = (
    Query("ttft_p50_s", _quantile(0.5, m.FRONTEND_TTFT), (m.FRONTEND_TTFT,)),
    Query("ttft_p99_s", _quantile(0.99, m.FRONTEND_TTFT), (m.FRONTEND_TTFT,)),
    Query("itl_p50_s", _quantile(0.5, m.FRONTEND_ITL), (m.FRONTEND_ITL,)),
    Query("itl_p99_s", _quantile(0.99, m.FRONTEND_ITL), (m.FRONTEND_ITL,)),
    Query("itl_mean_s", _mean(m.FRONTEND_ITL), (m.FRONTEND_ITL,)),
    Query("ttft_mean_s", _mean(m.FRONTEND_TTFT), (m.FRONTEND_TTFT,)),
    Query("request_duration_p50_s", _quantile(0.5, m.FRONTEND_REQUEST_DURATION),
          (m.FRONTEND_REQUEST_DURATION,)),
    Query("request_rate", f"sum(rate({m.FRONTEND_REQUESTS}[{{w}}]))", (m.FRONTEND_REQUESTS,)),
    Query("output_tokens_per_s", f"sum(rate({m.FRONTEND_OUTPUT_TOKENS}[{{w}}]))",
          (m.FRONTEND_OUTPUT_TOKENS,)),
    # Prefix hits: cached prompt tokens over all prompt tokens, as the frontend counted them.
    Query("prefix_hit_ratio",
          f"sum(rate({m.FRONTEND_CACHED_TOKENS}_sum[{{w}}])) / "
          f"sum(rate({m.FRONTEND_INPUT_SEQUENCE_TOKENS}_sum[{{w}}]))",
          (m.FRONTEND_CACHED_TOKENS, m.FRONTEND_INPUT_SEQUENCE_TOKENS)),
    Query("kv_blocks_total", f"max({m.FRONTEND_MODEL_TOTAL_KV_BLOCKS})",
          (m.FRONTEND_MODEL_TOTAL_KV_BLOCKS,)),
    Query("router_kv_hit_rate_mean", _mean(m.ROUTER_KV_HIT_RATE), (m.ROUTER_KV_HIT_RATE,)),
    Query("router_reused_tokens_per_s",
          f"sum(rate({m.ROUTER_KV_WORKER_REUSED_TOKENS}[{{w}}]))",
          (m.ROUTER_KV_WORKER_REUSED_TOKENS,)),
    Query("kv_usage_max", f"max(max_over_time({m.WORKER_KV_CACHE_USAGE}[{{w}}]))",
          (m.WORKER_KV_CACHE_USAGE,)),
    Query("kv_usage_mean", f"avg(avg_over_time({m.WORKER_KV_CACHE_USAGE}[{{w}}]))",
          (m.WORKER_KV_CACHE_USAGE,)),
    Query("preemptions", f"sum(increase({m.WORKER_PREEMPTIONS}[{{w}}]))",
          (m.WORKER_PREEMPTIONS,)),
    Query("requests_waiting_max", f"max(max_over_time({m.WORKER_REQUESTS_WAITING}[{{w}}]))",
          (m.WORKER_REQUESTS_WAITING,)),
    Query("requests_running_max", f"max(max_over_time({m.WORKER_REQUESTS_RUNNING}[{{w}}]))",
          (m.WORKER_REQUESTS_RUNNING,)),
    Query("worker_request_rate_by_component",
          f"sum by (dynamo_component) (rate({m.WORKER_REQUESTS}[{{w}}]))",
          (m.WORKER_REQUESTS,)),
    # Where requests went, per worker pod (the cluster's routing evidence beside the
    # frontend's request trace): requests each worker served and the prefix hits it had.
    Query("worker_requests_by_pod",
          _increase(f'{m.WORKER_REQUESTS}{{{{dynamo_endpoint="generate"}}}}', "pod"),
          (m.WORKER_REQUESTS,)),
    Query("worker_prefix_hits_by_pod", _increase(m.WORKER_PREFIX_CACHE_HITS, "pod"),
          (m.WORKER_PREFIX_CACHE_HITS,), engine=False),
    Query("worker_prefix_queries_by_pod", _increase(m.WORKER_PREFIX_CACHE_QUERIES, "pod"),
          (m.WORKER_PREFIX_CACHE_QUERIES,), engine=False),
    # KV moved between workers (NIXL) and to/from the offload tier: what disaggregation and
    # offload should move (reports.comparisons.ablation).
    Query("kv_transfers", _increase(f"{m.WORKER_NIXL_XFER_TIME}_count"),
          (m.WORKER_NIXL_XFER_TIME,), engine=False),
    Query("kv_transfer_bytes", _increase(f"{m.WORKER_NIXL_BYTES_TRANSFERRED}_sum"),
          (m.WORKER_NIXL_BYTES_TRANSFERRED,), engine=False),
    # offloaded bytes under either generation of vLLM's names (stacks.catalog.metrics): the flat
    # store / load counters, or the older one labelled by direction
    Query("kv_offload_store_bytes", _increase(m.WORKER_KV_OFFLOAD_STORE_BYTES[0]),
          (m.WORKER_KV_OFFLOAD_STORE_BYTES[0],), engine=False),
    Query("kv_offload_load_bytes", _increase(m.WORKER_KV_OFFLOAD_LOAD_BYTES[0]),
          (m.WORKER_KV_OFFLOAD_LOAD_BYTES[0],), engine=False),
    Query("kv_offload_bytes_by_direction",
          _increase(m.WORKER_KV_OFFLOAD_TOTAL_BYTES, "transfer_type"),
          (m.WORKER_KV_OFFLOAD_TOTAL_BYTES,), engine=False),
    Query("gpu_util_mean", f"avg(avg_over_time({m.DCGM_GPU_UTIL}[{{w}}]))",
          (m.DCGM_GPU_UTIL,), engine=False),
    Query("gpu_fb_used_max_mib", f"max(max_over_time({m.DCGM_FB_USED}[{{w}}]))",
          (m.DCGM_FB_USED,), engine=False),
    Query("gpu_power_mean_w", f"avg(avg_over_time({m.DCGM_POWER_USAGE}[{{w}}]))",
          (m.DCGM_POWER_USAGE,), engine=False),
)

BY_NAME = {q.name: q for q in QUERIES}


def step_queries(window_s: float, engine_only: bool = False,
                 scope: Scope | None = None) -> dict[str, str]:
    """name -> PromQL over the last `window_s` seconds (evaluate at the step's end), scoped to
    one graph on a cluster (`scope`); unscoped only where one graph is all Prometheus
    scrapes (the local engine)."""
    return {q.name: q.render(window_s, scope) for q in QUERIES
            if q.engine or not engine_only}
