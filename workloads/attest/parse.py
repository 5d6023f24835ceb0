"""Reading the evidence the attestation collects (pure): Prometheus text, a worker's log, the
in-pod GPU probe, and what a stack says it deploys.

Metric names come from stacks/catalog/metrics.py (the one catalogue). Log lines, with their sources:
- NIXL prints "Backend <NAME> was instantiated" when its agent creates a backend (the line
  Dynamo's EKS EFA guide greps for: docs/kubernetes/cloud-providers/eks/efa.md, Verification);
- vLLM logs its engine config once at start ("Initializing a V1 LLM engine (v0.31.0) with
  config: model='...', ..., revision=..., ..., dtype=torch.bfloat16, ..., quantization=...,
  ..."; vllm/config/vllm.py VllmConfig.__str__).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from stacks.catalog import metrics as m
from stacks.config.schema import Role, RouterMode, StackConfig, Topology, TransferBackend
from stacks.conventions.kv_path import libfabric_home

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_NIXL_BACKEND = re.compile(r"Backend (\w+) was instantiated")
_ENGINE_CONFIG = re.compile(r"with config: (model=.*)$", re.MULTILINE)
_CONFIG_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|[^,]*)")


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text exposition as (name, labels, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        try:
            value = float(match[3])
        except ValueError:
            continue
        out.append((match[1], dict(_LABEL.findall(match[2] or "")), value))
    return out


def metric_sum(samples: list[tuple[str, dict[str, str], float]], names: tuple[str, ...],
               **labels: str) -> float | None:
    """The sum of every sample of the first of `names` present (labels must match); None
    when none of them is exported."""
    for name in names:
        hits = [v for n, lab, v in samples if n == name
                and all(lab.get(k) == want for k, want in labels.items())]
        if hits:
            return sum(hits)
    return None


# (evidence key, component kinds scraped, metric names (first present wins), label filter)
TOTALS: tuple[tuple[str, tuple[str, ...], tuple[str, ...], dict[str, str]], ...] = (
    ("frontend_cached_tokens", ("frontend",), (f"{m.FRONTEND_CACHED_TOKENS}_sum",), {}),
    ("router_kv_events_stored", ("frontend",), (m.ROUTER_KV_EVENTS_APPLIED,),
     {"event_type": "stored", "status": "ok"}),
    ("nixl_bytes_transferred", ("decode",), (f"{m.WORKER_NIXL_BYTES_TRANSFERRED}_sum",), {}),
    ("nixl_failed_transfers", ("prefill", "decode"), (m.WORKER_NIXL_FAILED_TRANSFERS,), {}),
    ("offload_store_bytes", ("worker", "prefill"), m.WORKER_KV_OFFLOAD_STORE_BYTES, {}),
    ("offload_store_bytes_by_type", ("worker", "prefill"), (m.WORKER_KV_OFFLOAD_TOTAL_BYTES,),
     {"transfer_type": "GPU_to_CPU"}),
)


def metric_totals(scrapes: dict[str, tuple[str, str]]) -> dict[str, float | None]:
    """{evidence key: summed value or None} over scrapes {endpoint: (component kind, text)}."""
    parsed = {key: (kind, parse_prometheus(text)) for key, (kind, text) in scrapes.items()}
    out: dict[str, float | None] = {}
    for key, kinds, names, labels in TOTALS:
        values = [metric_sum(samples, names, **labels) for kind, samples in parsed.values()
                  if kind in kinds]
        present = [v for v in values if v is not None]
        out[key] = sum(present) if present else None
    # Either name of vLLM's offload store counter (stacks/catalog/metrics.py): one signal.
    by_type = out.pop("offload_store_bytes_by_type")
    if out["offload_store_bytes"] is None:
        out["offload_store_bytes"] = by_type
    return out


def nixl_backends(log: str) -> list[str]:
    return sorted(set(_NIXL_BACKEND.findall(log)))


def engine_config(log: str) -> dict[str, str] | None:
    """The fields of vLLM's engine-config line (the last one, after a restart), or None."""
    found = _ENGINE_CONFIG.findall(log)
    if not found:
        return None
    fields: dict[str, str] = {}
    for key, raw in _CONFIG_FIELD.findall(found[-1]):
        fields.setdefault(key, raw.strip().strip("'"))
    return fields


def gpu_probe(stdout: bytes | str) -> dict:
    """The JSON an in-pod probe prints (workloads/targets/aws/attest_scripts.py: the GPU probe,
    the loaded-libfabric probe)."""
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
    try:
        out = json.loads(text)
    except ValueError:
        return {"error": f"unreadable probe output: {text[:200]!r}"}
    return out if isinstance(out, dict) else {"error": f"unexpected probe output: {out!r}"}


# --- what the stack says ----------------------------------------------------------------------

@dataclass(frozen=True)
class Expected:
    """What the attestation holds the deployment to, from the stack's config."""

    target: str
    model_name: str
    model_id: str
    revision: str | None
    precision: str
    kv_cache_dtype: str
    nixl_backend: str | None          # "LIBFABRIC" | "UCX" | None (no KV transfer)
    prefix_caching: bool
    kv_router: bool                   # the KV router consumes the workers' KV events
    kv_offload: bool
    prefix_workers: int               # workers a prompt can land on (agg or prefill)
    gpus: dict[str, int] = field(default_factory=dict)   # "<role>-<nodeGroup>" -> GPUs/pod
    min_driver: int = 0
    # LIBFABRIC: the directory the workers must map libfabric from, the image's own EFA
    # userspace or a donor's copy (stacks/conventions/kv_path.py `libfabric_home`)
    libfabric_home: str | None = None


def _pipeline_size(extra_args: list[str]) -> int:
    for i, arg in enumerate(extra_args):
        for flag in ("--pipeline-parallel-size", "-pp"):
            if arg == flag and i + 1 < len(extra_args):
                return int(extra_args[i + 1])
            if arg.startswith(flag + "="):
                return int(arg.split("=", 1)[1])
    return 1


def expected(stack: StackConfig, target: str, min_driver: int = 0) -> Expected:
    s = stack.serving
    assert s is not None
    disagg = s.topology == Topology.DISAGGREGATED
    backend = {TransferBackend.NIXL_LIBFABRIC: "LIBFABRIC",
               TransferBackend.NIXL_UCX: "UCX"}.get(s.transfer) if disagg else None
    prefix_roles = (Role.PREFILL,) if disagg else (Role.WORKER,)
    return Expected(
        target=target, model_name=stack.model.name, model_id=stack.model.id,
        revision=stack.model.revision, precision=stack.model.precision.value,
        kv_cache_dtype=s.kv_cache_dtype, nixl_backend=backend,
        prefix_caching=s.prefix_caching,
        kv_router=s.router == RouterMode.KV and s.kv_events is not False,
        kv_offload=s.kv_offload.kind != "none",
        prefix_workers=sum(w.replicas for w in s.workers if w.role in prefix_roles),
        gpus={f"{w.role.value}-{w.node_group}": w.gpus_per_pod * _pipeline_size(w.extra_args)
              for w in s.workers},
        min_driver=min_driver,
        libfabric_home=libfabric_home(s) if backend == "LIBFABRIC" else None)


def expected_gpus(expect: Expected, component: str) -> int | None:
    """GPUs per pod of a worker component (`<role>-<nodeGroup>[-n]`, components/graph.py)."""
    matches = [n for key, n in expect.gpus.items()
               if component == key or component.startswith(key + "-")]
    return max(matches) if matches else None
