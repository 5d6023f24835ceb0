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

# --- run-time attestation (workloads/attest/parse.py) --------------------------------------
# KV events the KV router applied to its index, on the frontend (seen live on the local engine,
# labels event_type=stored|removed|cleared and status=ok|...; ai-dynamo 1.6.1
# prometheus_names.kvrouter.KV_CACHE_EVENTS_APPLIED).
ROUTER_KV_EVENTS_APPLIED = "dynamo_component_kv_cache_events_applied"
# vLLM's NIXL connector metrics (vLLM metrics docs "NIXL KV Connector Metrics";
# vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py NixlPromMetrics): a histogram of
# bytes per transfer, observed where the KV is pulled (the decode worker), and a counter of
# failed transfers. Dynamo's EKS EFA guide reads the same pair to verify a transfer ("published
# to vLLM's own metrics endpoint (typically DYN_SYSTEM_PORT)", eks/efa.md Verification 4).
WORKER_NIXL_BYTES_TRANSFERRED = "vllm:nixl_bytes_transferred"
WORKER_NIXL_FAILED_TRANSFERS = "vllm:nixl_num_failed_transfers_total"
# vLLM's native KV offloading (OffloadingConnector) counts bytes stored from GPU to CPU. The
# name changed across vLLM versions: the flat counters vllm:kv_offload_store_bytes (load: _load_)
# and, before them, vllm:kv_offload_total_bytes{transfer_type="GPU_to_CPU"} (still exported as
# deprecated in the versions that have both; vllm/.../offloading/metrics.py). Either counts.
WORKER_KV_OFFLOAD_STORE_BYTES = ("vllm:kv_offload_store_bytes_total",
                                 "vllm:kv_offload_store_bytes")
WORKER_KV_OFFLOAD_LOAD_BYTES = ("vllm:kv_offload_load_bytes_total",
                                "vllm:kv_offload_load_bytes")
WORKER_KV_OFFLOAD_TOTAL_BYTES = "vllm:kv_offload_total_bytes_total"  # by transfer_type
# Transfer time of the same NIXL transfers (histogram; its count is the number of transfers),
# NixlPromMetrics as above: what the ablation check counts for a disaggregated stack.
WORKER_NIXL_XFER_TIME = "vllm:nixl_xfer_time_seconds"

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
                    WORKER_NIXL_BYTES_TRANSFERRED, WORKER_NIXL_FAILED_TRANSFERS,
                    WORKER_NIXL_XFER_TIME, WORKER_KV_OFFLOAD_TOTAL_BYTES,
                    *WORKER_KV_OFFLOAD_STORE_BYTES, *WORKER_KV_OFFLOAD_LOAD_BYTES)

