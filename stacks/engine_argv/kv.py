"""vLLM KV flags of one Dynamo worker (pure): transfer connector, KV events, offloading.

Facts these follow (Dynamo 1.6.1 `dynamo.vllm` sources and Dynamo's vLLM docs):
- Prefill and decode workers move KV with NIXL: `--kv-transfer-config` with
  `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`. On EFA the NIXL backend must be
  LIBFABRIC (UCX has no EFA transport and silently falls back to TCP); without RDMA the KV is
  staged through host memory (`"kv_buffer_device":"cpu"`). With an InfiniBand RDMA device
  (`serving.rdma`, the B200 recipes) NIXL runs UCX on GPU buffers (`"kv_buffer_device":"cuda"`,
  backends ["UCX"], optionally `num_threads`), as the recipes' NixlConnector configs do.
- The KV router only sees a worker's cache if that worker publishes KV events
  (`--kv-events-config`, ZMQ); prefix caching must be on for events to exist.
- KV offload before Dynamo 1.6 is KVBM (`DynamoConnector`, sized by `DYN_KVBM_*` env); from 1.6
  on it is vLLM's native `OffloadingConnector` (sized by `cpu_bytes_to_use`). vLLM's shorthand
  `--kv-offloading-size/--kv-offloading-backend native` REPLACES the configured connector with
  OffloadingConnector, which would drop NIXL on a disaggregated worker, so the connector is
  always written out in full and composed with NIXL through MultiConnector (KVBM: PdConnector).
- Offload is placed where prefills run and prefixes are reused: aggregated and prefill workers
  (Dynamo's disaggregated KVBM recipes do the same); decode workers keep plain NIXL.
"""

from __future__ import annotations

import json
import re
from typing import Any

from stacks.config.schema import Role, ServingConfig, Topology, TransferBackend
from stacks.conventions.worker_identity import publishes_kv_events
from stacks.sizing.memory import GIB

KV_EVENTS_PORT = 20080
KVBM_MODULE = "kvbm.vllm_integration.connector"
# Dynamo's native-offload guide: KVBM is deprecated since 1.5 and vLLM's native offloading is
# the path from 1.6 on (it has no disk tier in Dynamo yet).
NATIVE_OFFLOAD_SINCE = (1, 6, 0)


def version_tuple(version: str) -> tuple[int, int, int]:
    """'1.6.1' or '1.6.1-rc2' -> (1, 6, 1)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"'{version}' is not a MAJOR.MINOR.PATCH version")
    return int(m[1]), int(m[2]), int(m[3])


def uses_kvbm(serving: ServingConfig) -> bool:
    return (serving.kv_offload.kind != "none"
            and version_tuple(serving.dynamo_version) < NATIVE_OFFLOAD_SINCE)


def offloads(serving: ServingConfig, role: Role) -> bool:
    """Does a worker of this role carry the KV offload tier? Prefill-side workers do: that is
    where prefixes are computed and re-used (decode workers keep plain NIXL)."""
    return serving.kv_offload.kind != "none" and role in (Role.WORKER, Role.PREFILL)


def uses_rdma(serving: ServingConfig, efa: bool) -> bool:
    return serving.transfer == TransferBackend.NIXL_LIBFABRIC and efa


def uses_infiniband(serving: ServingConfig) -> bool:
    """NIXL over UCX with an RDMA device requested (InfiniBand HCAs mounted in the pod)."""
    return serving.transfer == TransferBackend.NIXL_UCX and serving.rdma is not None


def nixl_connector(rdma: bool, serving: ServingConfig | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    if rdma:
        cfg["kv_connector_extra_config"] = {"backends": ["LIBFABRIC"]}
    elif serving is not None and uses_infiniband(serving):
        assert serving.rdma is not None
        cfg["kv_buffer_device"] = "cuda"
        extra: dict[str, Any] = {"backends": ["UCX"]}
        if serving.rdma.nixl_threads:
            extra["num_threads"] = serving.rdma.nixl_threads
        cfg["kv_connector_extra_config"] = extra
    else:
        cfg["kv_buffer_device"] = "cpu"
    return cfg


def kvbm_connector() -> dict[str, Any]:
    return {"kv_connector": "DynamoConnector", "kv_connector_module_path": KVBM_MODULE,
            "kv_role": "kv_both"}


def native_offload_connector(serving: ServingConfig, role: Role) -> dict[str, Any]:
    extra: dict[str, Any] = {"cpu_bytes_to_use": int(serving.kv_offload.cpu_gb * GIB)}
    if publishes_kv_events(serving, role):
        # Without self-describing events the router treats CPU-resident prefixes as misses.
        extra["self_describing_kv_events"] = True
    return {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": extra}


def kv_transfer_config(serving: ServingConfig, role: Role, *, rdma: bool) -> dict | None:
    """The `--kv-transfer-config` of one worker, or None when it needs none."""
    disagg = serving.topology == Topology.DISAGGREGATED
    nixl = nixl_connector(rdma, serving) if disagg else None
    if not offloads(serving, role):
        return nixl
    if uses_kvbm(serving):
        if nixl is None:
            return kvbm_connector()
        return {"kv_connector": "PdConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"connectors": [kvbm_connector(), nixl]},
                "kv_connector_module_path": KVBM_MODULE}
    offload = native_offload_connector(serving, role)
    if nixl is None:
        return offload
    return {"kv_connector": "MultiConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": [nixl, offload]}}


def kv_events_config() -> dict[str, Any]:
    # Every pod has its own network namespace, so one fixed port serves all workers.
    return {"enable_kv_cache_events": True, "publisher": "zmq", "topic": "kv-events",
            "endpoint": f"tcp://*:{KV_EVENTS_PORT}"}


def kv_arg_sections(serving: ServingConfig, role: Role, *,
                    rdma: bool) -> list[tuple[str, list[str]]]:
    """The worker flags for prefix caching, KV events, the KV connector and the KV cache dtype,
    each with the serving field (as the stack file spells it) that decides it."""
    out = [("serving.prefixCaching", ["--enable-prefix-caching" if serving.prefix_caching
                                      else "--no-enable-prefix-caching"])]
    if publishes_kv_events(serving, role):
        field = "serving.kvEvents" if serving.kv_events is not None else "serving.router"
        out.append((field, ["--kv-events-config", _json(kv_events_config())]))
    transfer = kv_transfer_config(serving, role, rdma=rdma)
    if transfer is not None:
        field = "serving.kvOffload" if offloads(serving, role) else "serving.transfer"
        out.append((field, ["--kv-transfer-config", _json(transfer)]))
    if serving.kv_cache_dtype == "fp8":
        out.append(("serving.kvCacheDtype", ["--kv-cache-dtype", "fp8"]))
    return out


def kv_args(serving: ServingConfig, role: Role, *, rdma: bool) -> list[str]:
    """The worker flags for prefix caching, KV events and the KV connector."""
    return [tok for _, toks in kv_arg_sections(serving, role, rdma=rdma) for tok in toks]


def _json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))
