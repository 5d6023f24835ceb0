"""NIXL's host staging buffers in the pod memory model (dynamo.md F11): a disaggregated worker
that moves KV with `kv_buffer_device: cpu` holds a host copy of its whole GPU KV cache on every
rank (vLLM 0.31.0 nixl/base_worker.py `initialize_host_xfer_buffer`), so its pod asks for it,
the node packing counts it, and a stack's own request below it is refused."""

from __future__ import annotations

from graph_stacks import components, graph_of, main
from preflight_probe import problems_of, worker_check

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.loader import load_stack
from stacks.preflight.pods import (
    WORKER_BASE_MEMORY_GIB,
    WORKER_MEMORY_GIB_PER_GPU,
    WORKER_SHM_GIB,
    check_node_packing,
)
from stacks.preflight.run import effective_cluster


def _memory_gi(comp: dict) -> int:
    return int(main(comp)["resources"]["requests"]["memory"].removesuffix("Gi"))


def _kv_pool_gib(stack_name: str, worker: int) -> float:
    """The KV pool of one GPU, from the memory table pre-flight prints (budget - weights -
    runtime overhead), computed here from its columns, not by the code under test."""
    _, table = worker_check(stack_name, effective_cluster(load_stack(stack_name),
                                                          load_stack("base-a100")))
    row = table[worker]
    return row.budget_gib - row.weights_gib_per_gpu - row.overhead_gib


def test_a_tcp_staged_disagg_pod_asks_for_its_kv_cache_in_host_memory():
    stack = load_stack("disagg-l40s-decode")
    graph = components(graph_of("disagg-l40s-decode"))
    for i, w in enumerate(stack.serving.workers):
        engine = (WORKER_BASE_MEMORY_GIB + WORKER_MEMORY_GIB_PER_GPU * w.gpus_per_pod
                  + WORKER_SHM_GIB)
        staging = w.gpus_per_pod * _kv_pool_gib("disagg-l40s-decode", i)
        assert staging > 60                     # ~18 (A100 40 GB) / ~22 (L40S) GiB x TP4
        (comp,) = [c for c in graph.values() if c.get("subComponentType") == w.role.value
                   or c["name"].lower().startswith(w.role.value)]
        assert _memory_gi(comp) >= engine + staging, (w.role, _memory_gi(comp))
        assert _memory_gi(comp) <= engine + staging + 1


def test_gpu_buffers_stage_nothing_on_the_host():
    # nixl-libfabric on EFA registers GPU memory: no host copy, the engine's request only
    stack = load_stack("disagg-a100")
    w = stack.serving.workers[0]
    engine = WORKER_BASE_MEMORY_GIB + WORKER_MEMORY_GIB_PER_GPU * w.gpus_per_pod + WORKER_SHM_GIB
    assert all(_memory_gi(c) == engine for c in components(graph_of("disagg-a100")).values()
               if c["type"] != "frontend")


def test_an_own_request_below_the_staging_is_refused():
    problems = problems_of("disagg-l40s-decode", serving__workers__1__hostMemoryGib=64)
    staged = [p for p in problems if "kv_buffer_device cpu" in p.message]
    assert [p.field for p in staged] == ["dynamo-bench:serving.workers[1].hostMemoryGib"]
    assert "raise hostMemoryGib above" in staged[0].fix
    # enough for the staging: no refusal of that kind
    assert not [p for p in problems_of("disagg-l40s-decode",
                                       serving__workers__1__hostMemoryGib=200)
                if "kv_buffer_device cpu" in p.message]


def test_a_limit_below_the_staging_is_refused():
    # a limit below the staging is an OOM kill when vLLM allocates the buffers at start-up
    problems = problems_of("disagg-l40s-decode", serving__workers__0__hostMemoryGib=60,
                           serving__workers__0__hostMemoryLimitGib=64)
    assert [p.field for p in problems if "kv_buffer_device cpu" in p.message] == [
        "dynamo-bench:serving.workers[0].hostMemoryLimitGib",
        "dynamo-bench:serving.workers[0].hostMemoryGib"]


def test_the_packing_counts_the_staging():
    # the decode pod (64 GiB of engine) fits a g6e.12xlarge (90 % of 384 GiB) alone, and no
    # longer with 300 GiB of staging beside it
    stack = load_stack("disagg-l40s-decode")
    cluster = effective_cluster(stack, load_stack("base-a100"))
    assert INSTANCE_TYPES["g6e.12xlarge"].memory_gib == 384
    fits: list = []
    check_node_packing(stack.serving, cluster, fits, {1: 0.0})
    assert fits == []
    over: list = []
    check_node_packing(stack.serving, cluster, over, {1: 300.0})
    assert [p.field for p in over] == ["dynamo-bench:serving.workers[1].replicas"]
    assert "364 GiB" in over[0].message          # 64 + 300, the request the graph would make


def test_a_nixl_connector_nested_beside_an_offload_still_stages():
    # with a CPU offload tier the prefill worker's NixlConnector sits inside a MultiConnector
    from preflight_probe import stack_with

    from stacks.engine_argv.kv import kv_transfer_config
    from stacks.preflight.host_staging import stages_kv_on_host
    stack = stack_with("disagg-l40s-decode", serving__kvOffload={"kind": "cpu", "cpuGb": 10})
    role = stack.serving.workers[0].role                 # prefill: the offloading side
    assert kv_transfer_config(stack.serving, role, rdma=False)["kv_connector"] != "NixlConnector"
    assert stages_kv_on_host(stack, role, rdma=False)
    assert not stages_kv_on_host(stack, role, rdma=True)
