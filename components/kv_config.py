"""vLLM KV settings for one Dynamo worker (pure): the pod env beside the KV flags.

The flags themselves (connector, KV events, offload) are built in stacks.engine_argv.kv, where
pre-flight parses them too; they are re-exported here for the graph.

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

from typing import Any

from stacks.config.schema import Role, ServingConfig, Topology, TransferBackend
from stacks.conventions.worker_identity import (
    publishes_kv_events,  # noqa: F401 - one rule, re-exported
)
from stacks.engine_argv.kv import (  # noqa: F401 - re-exported: the flags live with the argv
    KV_EVENTS_PORT,
    KVBM_MODULE,
    NATIVE_OFFLOAD_SINCE,
    kv_args,
    kv_events_config,
    kv_transfer_config,
    kvbm_connector,
    native_offload_connector,
    nixl_connector,
    offloads,
    uses_infiniband,
    uses_kvbm,
    uses_rdma,
    version_tuple,
)

# Where KVBM's disk tier lives inside the worker pod (an emptyDir sized to diskGb).
KVBM_DISK_DIR = "/kvbm-disk"


# Dynamo 1.6.1 sets the NIXL side-channel host only when the configured connector is a
# NixlConnector or a PdConnector holding one (dynamo/vllm/args.py `_uses_nixl_connector`,
# ai-dynamo 1.6.1), not inside a MultiConnector (NIXL + native offload): vLLM then advertises
# localhost and the decode worker cannot reach the prefill worker (ai-dynamo/dynamo#11219).
# Every NIXL worker gets its pod IP from the downward API, as the operator itself does for
# multinode workers (deploy/operator/internal/dynamo/backend_vllm.go).
SIDE_CHANNEL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"


def uses_nixl(serving: ServingConfig) -> bool:
    """Do this stack's workers move KV with NIXL (every prefill and decode worker does)?"""
    return serving.topology == Topology.DISAGGREGATED and serving.transfer != \
        TransferBackend.NONE


def side_channel_env(serving: ServingConfig, role: Role) -> list[dict[str, Any]]:
    if not uses_nixl(serving) or role == Role.WORKER:
        return []
    return [{"name": SIDE_CHANNEL_HOST_ENV,
             "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


def kvbm_env(serving: ServingConfig, role: Role) -> dict[str, str]:
    """KVBM sizing env (Dynamo < 1.6 only); empty for every other worker."""
    if not (uses_kvbm(serving) and offloads(serving, role)):
        return {}
    off = serving.kv_offload
    env = {"DYN_KVBM_CPU_CACHE_GB": _number(off.cpu_gb)}
    if off.kind == "disk":
        env["DYN_KVBM_DISK_CACHE_GB"] = _number(off.disk_gb)
        env["DYN_KVBM_DISK_CACHE_DIR"] = KVBM_DISK_DIR
    return env


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
