"""Pre-flight checks of the serving block as a whole (pure): topology, router, transfer, KV
offload support, the EFA zone, the runtime image tag.
"""

from __future__ import annotations

import re

from stacks.config.errors import Problem
from stacks.config.schema import (
    ClusterConfig,
    Role,
    RouterMode,
    ServingConfig,
    Topology,
    TransferBackend,
)
from stacks.config.stack_file import PROJECT
from stacks.preflight.pods import uses_kvbm

P = f"{PROJECT}:"


# The frontend flag that turns the KV router to its approximate indexer (no events consumed).
NO_ROUTER_KV_EVENTS = "--no-router-kv-events"

def _check_topology(s: ServingConfig, out: list[Problem]) -> None:
    prefill, decode, agg = s.by_role(Role.PREFILL), s.by_role(Role.DECODE), s.by_role(Role.WORKER)
    if s.topology == Topology.DISAGGREGATED:
        if not prefill:
            out.append(Problem(f"{P}serving.workers", "disaggregated needs a prefill worker",
                               "add a worker with role: prefill"))
        if not decode:
            out.append(Problem(f"{P}serving.workers", "disaggregated needs a decode worker",
                               "add a worker with role: decode"))
        if agg:
            out.append(Problem(f"{P}serving.workers", "disaggregated has aggregated "
                               "(role: worker) workers", "use roles prefill and decode"))
        if s.transfer == TransferBackend.NONE:
            out.append(Problem(f"{P}serving.transfer", "disaggregated needs a KV transfer "
                               "backend", "set transfer: nixl-ucx or nixl-libfabric"))
    else:
        if prefill or decode:
            out.append(Problem(f"{P}serving.workers", "aggregated has prefill/decode workers",
                               "use role: worker, or topology: disaggregated"))
        if s.transfer != TransferBackend.NONE:
            out.append(Problem(f"{P}serving.transfer", "aggregated moves no KV between "
                               "workers", "set transfer: none"))
    # With `--no-router-kv-events` the frontend subscribes to no events and routes on its own
    # predictions (Dynamo router docs: "When disabled with this flag, uses ApproxKvIndexer"),
    # as the K-EXAONE aggregated recipe runs: workers then publish nothing (dynamo.md F12).
    if s.router == RouterMode.KV and s.kv_events is False and \
            NO_ROUTER_KV_EVENTS not in s.frontend.extra_args:
        out.append(Problem(f"{P}serving.kvEvents", "the KV router scores workers from their KV "
                           "events; without them it routes blind",
                           "remove kvEvents: false or use router: round-robin"))
    if s.kv_events and not s.prefix_caching:
        out.append(Problem(f"{P}serving.kvEvents", "KV events exist only with prefix caching",
                           "set prefixCaching: true or remove kvEvents"))
    if s.router == RouterMode.KV and not s.prefix_caching:
        out.append(Problem(f"{P}serving.prefixCaching", "the KV router needs prefix caching "
                           "(and the workers' KV events) to route on cache hits",
                           "set prefixCaching: true or router: round-robin"))


def _check_image(s: ServingConfig, out: list[Problem]) -> None:
    """A version tag on the runtime (and frontend) image must be the pinned Dynamo version."""
    for field_name, image in (("image", s.image), ("frontend.image", s.frontend.image)):
        if image is None or "@sha256:" in image:
            continue
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        version = re.match(r"\d+\.\d+\.\d+", tag)
        if version and version.group() != s.dynamo_version:
            out.append(Problem(f"{P}serving.{field_name}", f"image tag {tag} is not the pinned "
                               f"dynamoVersion {s.dynamo_version}",
                               "use the image of that version, or change dynamoVersion"))


def _check_offload_support(s: ServingConfig, out: list[Problem]) -> None:
    """Dynamo 1.6 moved KV offload to vLLM's native connector, which has no disk tier in
    Dynamo yet; disk offload needs KVBM (Dynamo below 1.6). The graph builder refuses it too."""
    if s.kv_offload.kind == "disk" and not uses_kvbm(s):
        out.append(Problem(f"{P}serving.kvOffload.kind", "disk offload needs KVBM, and "
                           f"dynamoVersion {s.dynamo_version} uses vLLM's native offloading, "
                           "which has no disk tier in Dynamo yet",
                           "use kind: cpu, or a dynamoVersion (and image) below 1.6"))


def _check_efa_zone(s: ServingConfig, cluster: ClusterConfig, out: list[Problem]) -> None:
    """EFA traffic does not cross AZs: NIXL-over-EFA workers must share one zone."""
    if s.transfer != TransferBackend.NIXL_LIBFABRIC:
        return
    zones: dict[str, str] = {}
    for w in s.workers:
        group = cluster.group(w.node_group)
        if group is not None and group.availability_zone:
            zones.setdefault(group.availability_zone, group.name)
    if len(zones) > 1:
        out.append(Problem(f"{P}serving.transfer", "nixl-libfabric workers sit in node groups "
                           f"pinned to different zones ({', '.join(sorted(zones))}); EFA "
                           "traffic stays in one AZ",
                           "pin those groups to one zone, or use nixl-ucx"))


def check_serving(s: ServingConfig, cluster: ClusterConfig, out: list[Problem]) -> None:
    _check_topology(s, out)
    _check_image(s, out)
    _check_offload_support(s, out)
    _check_efa_zone(s, cluster, out)
