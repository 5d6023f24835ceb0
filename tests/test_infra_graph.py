"""The DynamoGraphDeployment that arrives in each serving stack's program (the pure builder is
tested in test_graph.py; here: the program passes it the right stack, cluster, namespace and
EFA setting, and the flags the experiments depend on are really in what Pulumi would create)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_harness import aws_stacks, k8s_objects, run

from components.graph import build_graph_deployment
from stacks.config.loader import load_stack
from stacks.config.schema import Role, RouterMode, Topology, TransferBackend
from stacks.preflight.run import effective_cluster

SERVING = [n for n in aws_stacks() if load_stack(n).serving is not None]
DISAGG = [n for n in SERVING if load_stack(n).serving.topology == Topology.DISAGGREGATED]
KV = [n for n in SERVING if load_stack(n).serving.router == RouterMode.KV]
# ... of which the router consumes KV events (not the approximate indexer of a frontend run
# with --no-router-kv-events and kvEvents: false, agg-b200-kexaone as its recipe)
KV_WITH_EVENTS = [n for n in KV if load_stack(n).serving.kv_events is not False]


def dgd_of(name: str) -> dict[str, Any]:
    dgds = [o for _, o in k8s_objects(run(name)) if o["kind"] == "DynamoGraphDeployment"]
    assert len(dgds) == 1, f"{name}: {len(dgds)} graphs"
    return dgds[0]


def components(name: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in dgd_of(name)["spec"]["components"]}


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def main_container(comp: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in comp["podTemplate"]["spec"]["containers"] if c["name"] == "main")


def test_the_three_kinds_of_stacks_are_covered() -> None:
    assert DISAGG and KV and len(SERVING) >= 5


@pytest.mark.parametrize("name", SERVING)
def test_recorded_graph_is_the_builders(name: str) -> None:
    stack = load_stack(name)
    base = load_stack(stack.cluster.attach_to) if stack.is_attached else None
    expected = build_graph_deployment(
        stack, namespace="dynamo", cluster=effective_cluster(stack, base),
        efa=stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC)
    assert dgd_of(name) == expected


@pytest.mark.parametrize("name", DISAGG)
def test_disaggregated_stacks_have_prefill_and_decode(name: str) -> None:
    stack = load_stack(name)
    comps = components(name)
    roles = {c["type"] for c in comps.values()}
    assert {"frontend", "prefill", "decode"} <= roles and "worker" not in roles
    for w in stack.serving.workers:
        comp = next(c for c in comps.values() if c["type"] == w.role.value
                    and c["podTemplate"]["spec"]["nodeSelector"]
                    ["dynamo-bench.io/node-group"] == w.node_group)
        main = main_container(comp)
        args = main["args"]
        assert flag(args, "--disaggregation-mode") == w.role.value
        tp = int(flag(args, "--tensor-parallel-size"))
        assert tp == w.tensor_parallel_size
        assert main["resources"]["limits"]["nvidia.com/gpu"] == str(tp)
        transfer = json.loads(flag(args, "--kv-transfer-config"))
        nixl = transfer if transfer["kv_connector"] == "NixlConnector" else next(
            c for c in transfer["kv_connector_extra_config"]["connectors"]
            if c["kv_connector"] == "NixlConnector")
        assert nixl["kv_role"] == "kv_both"
        if stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC:
            assert nixl["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
            assert int(main["resources"]["limits"]["vpc.amazonaws.com/efa"]) >= 1
            assert main["securityContext"]["privileged"] is True
            env = {e["name"]: e.get("value") for e in main["env"]}
            assert env["FI_PROVIDER"] == "efa"
        rdma = [r for r in main["resources"]["limits"]
                if r == "vpc.amazonaws.com/efa" or r.startswith("rdma/")]
        if not rdma:  # no RDMA device in the pod: KV is staged through host memory
            assert nixl["kv_buffer_device"] == "cpu"


@pytest.mark.parametrize("name", KV_WITH_EVENTS)
def test_kv_router_stacks_publish_kv_events(name: str) -> None:
    comps = components(name)
    frontend = main_container(comps["frontend"])
    assert flag(frontend["args"], "--router-mode") == "kv"
    scored = [c for c in comps.values() if c["type"] in (Role.WORKER.value, Role.PREFILL.value)]
    assert scored
    for comp in scored:
        args = main_container(comp)["args"]
        assert "--enable-prefix-caching" in args
        events = json.loads(flag(args, "--kv-events-config"))
        assert events["enable_kv_cache_events"] is True and events["publisher"] == "zmq"


@pytest.mark.parametrize("name", SERVING)
def test_workers_read_the_shared_cache_and_the_token_secret(name: str) -> None:
    for comp in components(name).values():
        if comp["type"] == "frontend":
            continue
        main = main_container(comp)
        claims = {v["persistentVolumeClaim"]["claimName"]
                  for v in comp["podTemplate"]["spec"]["volumes"] if "persistentVolumeClaim" in v}
        assert "model-cache" in claims
        token = next(e for e in main["env"] if e["name"] == "HF_TOKEN")
        assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": "hf-token", "key": "HF_TOKEN"}}}
        tolerations = comp["podTemplate"]["spec"]["tolerations"]
        assert {"key": "nvidia.com/gpu", "operator": "Exists",
                "effect": "NoSchedule"} in tolerations
