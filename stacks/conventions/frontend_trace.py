"""The Dynamo frontend's per-request records (its request trace): how a frontend is told to
write them, and where a cluster's frontend pods keep them.

Dynamo's frontend writes one JSON line per finished request (worker, cached tokens, prompt
block hashes) when DYN_REQUEST_TRACE is on (ai-dynamo/dynamo lib/llm/src/request_trace/
config.rs, sink.rs; the variable names checked in the installed ai-dynamo-runtime 1.6.1 and on
its local engine). The reports read it as routing evidence (workloads.routing_evidence). Kept
apart from stacks.catalog.metrics: these are settings and a path, not metric names.
"""

from __future__ import annotations

# On a cluster the file stays in the frontend pod, under /tmp as Dynamo's own default path.
REQUEST_TRACE_POD_PATH = "/tmp/dynamo-request-trace.jsonl"
REQUEST_TRACE_FLUSH_MS = 200     # the jsonl sink's flush interval (Dynamo's default: 1000 ms)


def request_trace_env(path: str) -> dict[str, str]:
    """Env of a frontend that records every finished request to `path` (JSON lines)."""
    return {"DYN_REQUEST_TRACE": "1", "DYN_REQUEST_TRACE_SINKS": "jsonl",
            "DYN_REQUEST_TRACE_OUTPUT_PATH": path,
            "DYN_REQUEST_TRACE_JSONL_FLUSH_INTERVAL_MS": str(REQUEST_TRACE_FLUSH_MS)}
