"""The one catalogue of metric names used by dashboards, the runner and the reports.

Dynamo names were seen live on the local engine (frontend, router, mocker system port) and are
checked again by the engine tests against a live /metrics. DCGM names are the dcgm-exporter
defaults. Nothing else in the project spells a metric name.
"""

from __future__ import annotations

# --- Dynamo frontend (HTTP service) ------------------------------------------------------------
FRONTEND_TTFT = "dynamo_frontend_time_to_first_token_seconds"            # histogram
FRONTEND_ITL = "dynamo_frontend_inter_token_latency_seconds"             # histogram
FRONTEND_REQUEST_DURATION = "dynamo_frontend_request_duration_seconds"   # histogram
FRONTEND_REQUESTS = "dynamo_frontend_requests_total"                     # counter
# counter; started - succeeded - failed = requests the frontend never finished (a cut stream),
# seen in AIPerf's server-metrics export of a run with a worker killed mid-step
FRONTEND_REQUESTS_STARTED = "dynamo_frontend_requests_started_total"
FRONTEND_OUTPUT_TOKENS = "dynamo_frontend_output_tokens_total"           # counter
FRONTEND_CACHED_TOKENS = "dynamo_frontend_cached_tokens"                 # histogram (prefix hits)
FRONTEND_INPUT_SEQUENCE_TOKENS = "dynamo_frontend_input_sequence_tokens"  # histogram
FRONTEND_MODEL_TOTAL_KV_BLOCKS = "dynamo_frontend_model_total_kv_blocks"
FRONTEND_WORKER_ACTIVE_DECODE_BLOCKS = "dynamo_frontend_worker_active_decode_blocks"
FRONTEND_WORKER_ACTIVE_PREFILL_TOKENS = "dynamo_frontend_worker_active_prefill_tokens"

# --- KV router -----------------------------------------------------------------------------
ROUTER_KV_HIT_RATE = "dynamo_component_router_kv_hit_rate"
ROUTER_KV_WORKER_REUSED_TOKENS = "dynamo_component_router_kv_worker_reused_tokens_total"

# --- workers (system port) -----------------------------------------------------------------
WORKER_REQUESTS = "dynamo_component_requests_total"
WORKER_KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
WORKER_PREEMPTIONS = "vllm:num_preemptions_total"
WORKER_REQUESTS_WAITING = "vllm:num_requests_waiting"
WORKER_REQUESTS_RUNNING = "vllm:num_requests_running"

# --- vLLM workers, real engine only ----------------------------------------------------------
# The mocker exports none of these, so the engine tests cannot see them live; names are from
# vLLM's Prometheus logger (vllm/v1/metrics/loggers.py: counters vllm:prefix_cache_queries,
# vllm:prefix_cache_hits and, for hits served by a KV connector such as CPU offload,
# vllm:external_prefix_cache_queries / _hits; the client library adds _total).
WORKER_PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
WORKER_PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
WORKER_EXTERNAL_PREFIX_CACHE_QUERIES = "vllm:external_prefix_cache_queries_total"
WORKER_EXTERNAL_PREFIX_CACHE_HITS = "vllm:external_prefix_cache_hits_total"

# KV moved between workers (disaggregated NIXL transfer) and to/from the offload tier, real
# vLLM only: vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py NixlPromMetrics
# (histograms vllm:nixl_xfer_time_seconds, vllm:nixl_bytes_transferred) and
# offloading_connector.py OffloadPromMetrics (counter vllm:kv_offload_total_bytes, labelled
# transfer_type GPU_to_CPU / CPU_to_GPU; exposed with _total). Read on vLLM's main branch, not
# at the 0.31.0 tag ai-dynamo 1.6.1 pins: the reports say "not exported" when a run lacks them.
# KVBM (Dynamo < 1.6) serves its kvbm_* counters on a port of its own, not scraped here.
WORKER_NIXL_XFER_TIME = "vllm:nixl_xfer_time_seconds"        # histogram
WORKER_NIXL_BYTES = "vllm:nixl_bytes_transferred"            # histogram
WORKER_KV_OFFLOAD_BYTES = "vllm:kv_offload_total_bytes_total"  # counter

# --- Prometheus itself -------------------------------------------------------------------------
SCRAPE_UP = "up"  # 1 while a scrape target (a pod of a PodMonitor) answers

# --- DCGM exporter (GPU nodes) ---------------------------------------------------------------
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
DCGM_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"

DCGM = (DCGM_GPU_UTIL, DCGM_FB_USED, DCGM_FB_FREE, DCGM_GPU_TEMP, DCGM_POWER_USAGE)
VLLM_ENGINE_ONLY = (WORKER_PREFIX_CACHE_QUERIES, WORKER_PREFIX_CACHE_HITS,
                    WORKER_EXTERNAL_PREFIX_CACHE_QUERIES, WORKER_EXTERNAL_PREFIX_CACHE_HITS,
                    WORKER_NIXL_XFER_TIME, WORKER_NIXL_BYTES, WORKER_KV_OFFLOAD_BYTES)


# --- the frontend's per-request records (its request trace) --------------------------------------
# Dynamo's frontend writes one JSON line per finished request (worker, cached tokens, prompt
# block hashes) when DYN_REQUEST_TRACE is on (ai-dynamo/dynamo lib/llm/src/request_trace/
# config.rs, sink.rs; the variable names checked in the installed ai-dynamo-runtime 1.6.1 and
# on its local engine). The reports read it as routing evidence (workloads.routing_evidence).
# On a cluster the file stays in the frontend pod, under /tmp as Dynamo's own default path.
REQUEST_TRACE_POD_PATH = "/tmp/dynamo-request-trace.jsonl"
REQUEST_TRACE_FLUSH_MS = 200     # the jsonl sink's flush interval (Dynamo's default: 1000 ms)


def request_trace_env(path: str) -> dict[str, str]:
    """Env of a frontend that records every finished request to `path` (JSON lines)."""
    return {"DYN_REQUEST_TRACE": "1", "DYN_REQUEST_TRACE_SINKS": "jsonl",
            "DYN_REQUEST_TRACE_OUTPUT_PATH": path,
            "DYN_REQUEST_TRACE_JSONL_FLUSH_INTERVAL_MS": str(REQUEST_TRACE_FLUSH_MS)}
