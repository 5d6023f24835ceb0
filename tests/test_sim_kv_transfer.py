"""The KV transfer a disaggregated stack is charged (stacks/catalog/kv_transfer.py,
interconnects.py; stacks/engine_argv/local.py transfer_plan): the catalogue covers every GPU and
instance type, each path's arithmetic, the path each shipped stack takes, and what DynoSim itself
charges for it (ai-dynamo 1.6.1, .venv-engine): bytes / bandwidth, read from the prefill worker,
on the tokens the decode worker lacks."""

from __future__ import annotations

import pytest

from components.graph import _Worker
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.catalog.interconnects import GPU_LINKS, INSTANCE_NETWORK
from stacks.catalog.kv_transfer import (
    Endpoint,
    Placement,
    efa_link,
    efa_rails,
    tcp_link,
    transfer_ms,
)
from stacks.config.loader import load_stack
from stacks.engine_argv.argv import tokens
from stacks.engine_argv.local import kv_bytes_per_token, kv_transfer_args, transfer_plan
from stacks.preflight.run import effective_cluster, load_base
from workloads.sim.replay import Replayer

P4D_TP4 = Endpoint("p4d.24xlarge", 4, 4)
G6E_TP4 = Endpoint("g6e.12xlarge", 4, 4)


def test_every_gpu_and_gpu_instance_type_has_its_links():
    gpus = {i.gpu.name for i in INSTANCE_TYPES.values() if i.gpu is not None}
    assert gpus == set(GPU_LINKS)
    for name, inst in INSTANCE_TYPES.items():
        if inst.gpu is None:
            continue
        assert INSTANCE_NETWORK[name].efa_interfaces == inst.efa_interfaces, name
    assert GPU_LINKS["L40S"].nvlink_gb_s is None
    assert GPU_LINKS["A100-SXM4-40GB"].host_gb_s_one_way == 32.0
    assert GPU_LINKS["H100-SXM5-80GB"].host_gb_s_one_way == 64.0


@pytest.mark.parametrize("name", ["disagg-a100", "disagg-a100-kv-offload", "disagg-b200-axk2",
                                  "disagg-b200-motif3"])
def test_a_pods_efa_rails_are_the_ones_the_graph_requests(name):
    stack = load_stack(name)
    cluster = effective_cluster(stack, load_base(stack))
    assert stack.serving is not None
    for i, w in enumerate(stack.serving.workers):
        pod = _Worker(stack, i, cluster, True, "g")
        assert efa_rails(pod.group.instance_type, w.gpus_per_pod) == pod.efa_devices()


def test_efa_runs_at_the_smaller_pods_rails():
    # p4d: a TP4 pod gets 2 of 4 x 100 Gbps = 25 GB/s; p5: 16 of 32 x 100 Gbps = 200 GB/s
    assert efa_link(P4D_TP4, P4D_TP4).gb_s == 25.0
    assert efa_link(Endpoint("p5.48xlarge", 4, 4), P4D_TP4).gb_s == 25.0
    assert efa_link(Endpoint("p5.48xlarge", 8, 8), Endpoint("p5.48xlarge", 8, 8)).gb_s == 400.0
    assert efa_link(Endpoint("p6-b200.48xlarge", 2, 2),
                    Endpoint("p6-b200.48xlarge", 2, 2)).gb_s == 100.0


def test_tcp_is_held_to_ec2s_flow_limit_and_the_pods_network_share():
    # 4 rank streams x 5 Gbps across placement groups, 10 Gbps inside one
    assert tcp_link(P4D_TP4, G6E_TP4, Placement.APART).gb_s == 2.5
    assert tcp_link(P4D_TP4, P4D_TP4, Placement.SAME_PLACEMENT_GROUP).gb_s == 5.0
    # a 1-GPU g6e.4xlarge pod has 20 Gbps: 8 streams x 10 Gbps are cut to it
    small = Endpoint("g6e.4xlarge", 1, 1)
    assert tcp_link(Endpoint("p4d.24xlarge", 8, 8), small,
                    Placement.SAME_PLACEMENT_GROUP).gb_s == 2.5
    same = tcp_link(P4D_TP4, P4D_TP4, Placement.SAME_NODE)
    assert same.gb_s == 5.0 and any("ASSUMED" in a for a in same.assumptions)


@pytest.mark.parametrize(("name", "gb_s", "path", "placement"), [
    ("disagg-a100", 25.0, "EFA", Placement.SAME_PLACEMENT_GROUP),
    ("disagg-a100-kv-offload", 25.0, "EFA", Placement.SAME_PLACEMENT_GROUP),
    ("disagg-l40s-decode", 2.5, "TCP", Placement.APART),
    ("local-disagg", 5.0, "TCP", Placement.SAME_NODE),
])
def test_each_shipped_disaggregated_stack_takes_its_path(name, gb_s, path, placement):
    stack = load_stack(name)
    base = load_base(stack)
    plan = transfer_plan(stack, 0, effective_cluster(stack, base), base)
    assert plan is not None
    assert (plan.link.gb_s, plan.link.path.split()[0], plan.placement) == (gb_s, path, placement)


def test_the_prefill_mocker_carries_the_transfer_and_the_decode_none():
    stack = load_stack("disagg-l40s-decode")
    base = load_base(stack)
    cluster = effective_cluster(stack, base)
    assert tokens(kv_transfer_args(stack, 0, cluster, base)) == [
        "--kv-transfer-bandwidth", "2.5", "--kv-bytes-per-token", "98304",
        "--kv-transfer-timing-mode", "destination_missing"]
    assert kv_transfer_args(stack, 1, cluster, base) == []
    # Qwen3-30B-A3B, BF16 KV: 48 layers x 4 KV heads x (128 + 128) x 2 B
    assert kv_bytes_per_token(stack, 0) == 48 * 4 * 256 * 2


def test_a_decode_worker_with_more_kv_per_token_slows_the_bandwidth_given_to_the_mocker():
    """TP8 replicates Qwen's 4 KV heads: the decode worker pulls 2x the prefill's own bytes,
    and the mocker has one bytes-per-token (the prefill's, also its offload's)."""
    stack = load_stack("disagg-a100")
    base = load_base(stack)
    assert stack.serving is not None
    decode = stack.serving.workers[1].model_copy(update={"tensor_parallel_size": 8,
                                                         "replicas": 1})
    wide = stack.model_copy(update={"serving": stack.serving.model_copy(
        update={"workers": [stack.serving.workers[0], decode]})})
    assert kv_bytes_per_token(wide, 1) == 2 * kv_bytes_per_token(wide, 0)
    args = tokens(kv_transfer_args(wide, 0, effective_cluster(wide, base), base))
    # the TP8 pod's 4 rails and the TP4 pod's 2: 25 GB/s, halved for twice the bytes
    assert args[1] == "12.5"


def test_transfer_time_is_tokens_times_bytes_over_decimal_bandwidth():
    assert transfer_ms(4096, 98304, 10.0) == pytest.approx(40.2653184)


# --- what DynoSim itself charges (ai-dynamo 1.6.1) ------------------------------------------

BLOCK = 16
BASE = ["--model-path", "", "--block-size", str(BLOCK), "--num-gpu-blocks-override", "100000"]
XFER = ["--kv-transfer-bandwidth", "10", "--kv-bytes-per-token", "98304",
        "--kv-transfer-timing-mode", "destination_missing"]


def _handoffs(prefill: list[str], decode: list[str]) -> list[float]:
    """Two requests, the second sharing 3 of 4 prompt blocks of 1024 tokens with the first:
    the time from each one's prefill end to its decode start."""
    rows = [{"session_id": "a", "timestamp": 0.0, "input_length": 4096, "output_length": 4,
             "hash_ids": [0, 1, 2, 3]},
            {"session_id": "b", "timestamp": 1000.0, "input_length": 4096, "output_length": 4,
             "hash_ids": [0, 1, 2, 9]}]
    job = {"trace": rows, "trace_block_size": 1024, "router_mode": "round_robin",
           "router_config": None, "replay_concurrency": None, "runs": 1,
           "roles": {"prefill": {"argv": [*BASE, *prefill, "--disaggregation-mode", "prefill"],
                                 "count": 1},
                     "decode": {"argv": [*BASE, *decode, "--disaggregation-mode", "decode"],
                                "count": 1}}}
    replayer = Replayer()
    try:
        (answer,) = replayer([job])
    finally:
        replayer.close()
    reqs = sorted(answer["runs"][0]["requests"], key=lambda r: r["arrival_time_ms"])
    return [r["destination_activated_ms"] - r["source_held_ms"] for r in reqs]


@pytest.mark.engine
def test_dynosim_charges_the_tokens_the_decode_worker_lacks_at_the_prefills_bandwidth():
    full, missing = transfer_ms(4096, 98304, 10.0), transfer_ms(1024, 98304, 10.0)
    assert _handoffs(XFER, []) == pytest.approx([full, missing])
    # the decode worker's own flags charge nothing: the source's are read
    assert _handoffs([], XFER) == pytest.approx([0.0, 0.0])
    # a decode worker without prefix caching lacks every token
    assert _handoffs(XFER, ["--no-enable-prefix-caching"]) == pytest.approx([full, full])
