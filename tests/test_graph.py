"""What the DynamoGraphDeployment says for each kind of stack: topology flags, KV transfer, KV
router events, offload, GPUs, placement, image pinning."""

from __future__ import annotations

import re

import pytest
from graph_stacks import (
    NAMESPACE,
    components,
    env_of,
    flag,
    graph_of,
    json_flag,
    main,
    serving_stack_names,
    stack_and_cluster,
    variant,
)
from k8s_validation import validate_dgd, validate_pod_templates

from components import efa as efa_specs
from components import efa_userspace
from components.conventions import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    HF_TOKEN_KEY,
    HF_TOKEN_SECRET,
    MODEL_CACHE_MOUNT,
    MODEL_CACHE_PVC,
    NODE_GROUP_LABEL,
)
from components.graph import WORKER_BASE_MEMORY_GIB, build_graph_deployment, component_names
from stacks.config.loader import StackError, load_stack
from stacks.config.schema import RouterMode, Topology, TransferBackend
from stacks.preflight.run import effective_cluster

SERVING = serving_stack_names()
DISAGG = [n for n in SERVING if load_stack(n).serving.topology == Topology.DISAGGREGATED]
AGG = [n for n in SERVING if load_stack(n).serving.topology == Topology.AGGREGATED]
KV = [n for n in SERVING if load_stack(n).serving.router == RouterMode.KV]
# ... of which the router consumes KV events (not the approximate indexer of a frontend run
# with --no-router-kv-events and kvEvents: false, agg-b200-kexaone as its recipe)
KV_WITH_EVENTS = [n for n in KV if load_stack(n).serving.kv_events is not False]
KV_EVENTS = {"enable_kv_cache_events": True, "publisher": "zmq", "topic": "kv-events",
             "endpoint": "tcp://*:20080"}


def _workers(graph):
    return [c for c in graph["spec"]["components"] if c["type"] != "frontend"]


def _nixl(transfer: dict) -> dict:
    """The NIXL connector of a transfer config, alone or inside a Multi/PdConnector."""
    if transfer["kv_connector"] == "NixlConnector":
        return transfer
    children = transfer["kv_connector_extra_config"]["connectors"]
    return next(c for c in children if c["kv_connector"] == "NixlConnector")


def test_stack_sets_are_not_empty():
    assert len(DISAGG) >= 4 and len(AGG) >= 4 and len(KV) >= 3


@pytest.mark.parametrize("name", DISAGG)
def test_disaggregated_has_prefill_and_decode_with_nixl_and_gpus_equal_tp(name):
    stack, _ = stack_and_cluster(name)
    graph = graph_of(name)
    workers = _workers(graph)
    assert {c["type"] for c in workers} == {"prefill", "decode"}
    efa = stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
    for comp, group in zip(workers, stack.serving.workers, strict=True):
        c = main(comp)
        args = c["args"]
        assert comp["type"] == group.role.value
        assert flag(args, "--disaggregation-mode") == comp["type"]
        nixl = _nixl(json_flag(args, "--kv-transfer-config"))
        assert nixl["kv_role"] == "kv_both"
        tp = int(flag(args, "--tensor-parallel-size"))
        assert tp == group.tensor_parallel_size
        assert c["resources"]["limits"][GPU_RESOURCE] == str(tp)
        assert comp["replicas"] == group.replicas
        if efa:
            assert nixl["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
            assert "kv_buffer_device" not in nixl
            assert int(c["resources"]["limits"][EFA_RESOURCE]) >= 1
            assert c["securityContext"] == efa_specs.security_context()
            fabric = efa_userspace.for_worker(stack.serving, c["image"], 1)
            assert c["command"] == efa_specs.pinned_command(efa_specs.pin_gpus_script(
                library_path=fabric.library_path))
            assert env_of(c)["FI_PROVIDER"] == "efa"
            zone = comp["podTemplate"]["spec"]["affinity"]["podAffinity"]
            term = zone["requiredDuringSchedulingIgnoredDuringExecution"][0]
            assert term["topologyKey"] == "topology.kubernetes.io/zone"
        elif stack.serving.rdma is not None:  # UCX on InfiniBand (B200 recipes)
            assert nixl["kv_buffer_device"] == "cuda"
            assert nixl["kv_connector_extra_config"]["backends"] == ["UCX"]
            assert stack.serving.rdma.resource_name.value in c["resources"]["limits"]
            assert EFA_RESOURCE not in c["resources"]["limits"]
            assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
        else:
            assert nixl["kv_buffer_device"] == "cpu"
            assert EFA_RESOURCE not in c["resources"]["limits"]
            assert "securityContext" not in c


def test_libfabric_stacks_exist_and_ucx_stack_runs_without_rdma():
    assert {"disagg-a100", "disagg-a100-kv", "disagg-l40s-decode"} <= set(DISAGG)
    # g6e: no confirmed GPUDirect RDMA, so the L40S decode trial moves KV over UCX/TCP.
    assert load_stack("disagg-l40s-decode").serving.transfer == TransferBackend.NIXL_UCX
    ucx = [n for n in DISAGG if load_stack(n).serving.transfer == TransferBackend.NIXL_UCX]
    assert ucx  # local-disagg: exercised by the parametrised test's non-EFA branch


def _l40s_over_libfabric() -> dict:
    """disagg-l40s-decode as it was before g6e moved to UCX: p4d and g6e workers on EFA (the
    graph builds it; pre-flight refuses LIBFABRIC on g6e)."""
    stack = variant("disagg-l40s-decode", transfer="nixl-libfabric")
    cluster = effective_cluster(stack, load_stack("base-a100"))
    return build_graph_deployment(stack, namespace=NAMESPACE, efa=True, cluster=cluster)


def test_efa_devices_follow_the_node_share():
    comps = components(_l40s_over_libfabric())
    # p4d: 4 EFA interfaces / 8 GPUs -> a TP4 pod gets 2; g6e.12xlarge: 1 interface / 4 GPUs.
    assert main(comps["prefill-p4d"])["resources"]["limits"][EFA_RESOURCE] == "2"
    assert main(comps["decode-g6e"])["resources"]["limits"][EFA_RESOURCE] == "1"
    for name in ("prefill-p4d", "decode-g6e"):
        zone = comps[name]["podTemplate"]["spec"]["affinity"]["nodeAffinity"]
        term = zone["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
        assert term["matchExpressions"][0]["values"] == ["us-east-1a"]


@pytest.mark.parametrize("name", KV_WITH_EVENTS)
def test_kv_router_flag_and_kv_events_on_every_agg_and_prefill_worker(name):
    graph = graph_of(name)
    frontend = components(graph)["frontend"]
    assert frontend["type"] == "frontend"
    assert flag(main(frontend)["args"], "--router-mode") == "kv"
    for comp in _workers(graph):
        args = main(comp)["args"]
        if comp["type"] in ("worker", "prefill"):
            assert "--enable-prefix-caching" in args
            assert json_flag(args, "--kv-events-config") == KV_EVENTS
        else:
            assert "--kv-events-config" not in args


@pytest.mark.parametrize("name", [n for n in SERVING if n not in KV])
def test_non_kv_stacks_route_as_configured_and_publish_events_only_when_asked(name):
    stack = load_stack(name)
    graph = graph_of(name)
    assert flag(main(components(graph)["frontend"])["args"], "--router-mode") == \
        stack.serving.router.value
    # serving.kvEvents (agg-a100, disagg-a100): the same workers as their KV-router twins
    for comp in _workers(graph):
        args = main(comp)["args"]
        if stack.serving.kv_events and comp["type"] in ("worker", "prefill"):
            assert json_flag(args, "--kv-events-config") == KV_EVENTS
        else:
            assert "--kv-events-config" not in args


@pytest.mark.parametrize("name", AGG)
def test_aggregated_has_no_disaggregation_flags(name):
    graph = graph_of(name)
    for comp in _workers(graph):
        args = main(comp)["args"]
        assert comp["type"] == "worker"
        assert "--disaggregation-mode" not in args
        assert "--kv-transfer-config" not in args
        assert main(comp)["resources"]["limits"][GPU_RESOURCE] == \
            flag(args, "--tensor-parallel-size")


def test_offload_stack_native_offload_composed_with_nixl_and_memory_holds_the_cache():
    stack = load_stack("disagg-a100-kv-offload")
    cpu_gb = stack.serving.kv_offload.cpu_gb
    comps = components(graph_of("disagg-a100-kv-offload"))
    prefill = main(comps["prefill-p4d"])
    transfer = json_flag(prefill["args"], "--kv-transfer-config")
    # vLLM's --kv-offloading-size would replace NIXL; the connectors are composed instead.
    assert "--kv-offloading-size" not in prefill["args"]
    assert transfer["kv_connector"] == "MultiConnector"
    children = transfer["kv_connector_extra_config"]["connectors"]
    assert [c["kv_connector"] for c in children] == ["NixlConnector", "OffloadingConnector"]
    offload = children[1]["kv_connector_extra_config"]
    assert offload["cpu_bytes_to_use"] == int(cpu_gb * 2**30)
    assert offload["self_describing_kv_events"] is True  # the KV router must see the CPU tier
    memory = int(prefill["resources"]["requests"]["memory"].removesuffix("Gi"))
    assert memory >= cpu_gb + WORKER_BASE_MEMORY_GIB
    decode = main(comps["decode-p4d"])
    assert json_flag(decode["args"], "--kv-transfer-config")["kv_connector"] == "NixlConnector"
    assert int(decode["resources"]["requests"]["memory"].removesuffix("Gi")) < cpu_gb
    assert not any(k.startswith("DYN_KVBM") for k in env_of(prefill))


def _offload_variant(version: str, **offload):
    return variant("disagg-a100-kv-offload", dynamoVersion=version,
                   image=f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{version}",
                   kvOffload={"kind": "cpu", "cpuGb": 100, **offload})


def _build(stack, efa=True):
    base = load_stack(stack.cluster.attach_to) if stack.is_attached else None
    return build_graph_deployment(stack, namespace=NAMESPACE, efa=efa,
                                  cluster=effective_cluster(stack, base))


def test_offload_before_dynamo_1_6_uses_kvbm():
    graph = _build(_offload_variant("1.5.0", kind="disk", diskGb=500))
    validate_dgd(graph)
    validate_pod_templates(graph)
    comps = components(graph)
    prefill = main(comps["prefill-p4d"])
    env = env_of(prefill)
    assert env["DYN_KVBM_CPU_CACHE_GB"] == "100"
    assert env["DYN_KVBM_DISK_CACHE_GB"] == "500"
    transfer = json_flag(prefill["args"], "--kv-transfer-config")
    assert transfer["kv_connector"] == "PdConnector"
    names = [c["kv_connector"] for c in transfer["kv_connector_extra_config"]["connectors"]]
    assert names == ["DynamoConnector", "NixlConnector"]
    disk = {v["name"]: v for v in comps["prefill-p4d"]["podTemplate"]["spec"]["volumes"]}
    # Gi: pods.py packs diskGb as GiB, and a cache counting GiB must not outgrow its emptyDir
    assert disk["kvbm-disk"]["emptyDir"]["sizeLimit"] == "500Gi"
    assert prefill["resources"]["requests"]["ephemeral-storage"] == "500Gi"
    assert not any(k.startswith("DYN_KVBM") for k in env_of(main(comps["decode-p4d"])))


def test_disk_offload_on_native_path_is_refused_naming_the_field():
    with pytest.raises(StackError, match=r"serving\.kvOffload\.kind.*below 1\.6"):
        _build(_offload_variant("1.6.1", kind="disk", diskGb=500))


def test_libfabric_without_efa_is_refused_naming_the_field():
    with pytest.raises(StackError, match=r"serving\.transfer.*nixl-ucx"):
        _build(load_stack("disagg-a100"), efa=False)


def test_offload_too_big_for_the_node_is_refused():
    with pytest.raises(StackError, match=r"kvOffload\.cpuGb"):
        _build(_offload_variant("1.6.1", cpuGb=520))


def test_digest_image_sets_runtime_version_override_everywhere():
    # an EFA (LIBFABRIC) stack pins its -efa build by tag and digest: a bare digest says
    # nothing of the EFA userspace, and pre-flight refuses it (tests/test_kv_path.py)
    digest = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa@sha256:" + "a" * 64
    graph = _build(variant("disagg-a100-kv", image=digest))
    validate_dgd(graph)
    for comp in graph["spec"]["components"]:
        assert comp["runtimeVersionOverride"] == "1.6.1"
        assert main(comp)["image"] == digest
    tagged = graph_of("disagg-a100-kv")
    # Only a tag that is exactly the pinned version needs no override (the EFA workers' tag
    # 1.6.1-efa parses as another version, so they carry one).
    for c in tagged["spec"]["components"]:
        exact = main(c)["image"].endswith(":1.6.1")
        assert ("runtimeVersionOverride" not in c) == exact, c["name"]


def test_worker_pod_mounts_cache_reads_token_and_lands_on_its_gpu_group():
    stack, _ = stack_and_cluster("agg-a100")
    comp = components(graph_of("agg-a100"))["worker-p4d"]
    spec, c = comp["podTemplate"]["spec"], main(comp)
    assert c["command"] == ["python3", "-m", "dynamo.vllm"]
    assert flag(c["args"], "--model") == stack.model.id
    assert flag(c["args"], "--served-model-name") == stack.model.name
    assert flag(c["args"], "--max-model-len") == "32768"
    assert flag(c["args"], "--gpu-memory-utilization") == "0.9"
    assert spec["nodeSelector"] == {NODE_GROUP_LABEL: "p4d"}
    assert {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in \
        spec["tolerations"]
    assert {"name": MODEL_CACHE_PVC, "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC}} \
        in spec["volumes"]
    assert {"name": MODEL_CACHE_PVC, "mountPath": MODEL_CACHE_MOUNT} in c["volumeMounts"]
    env = env_of(c)
    assert env["HF_HOME"].startswith(MODEL_CACHE_MOUNT + "/")
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env[HF_TOKEN_KEY] == {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY}}
    graph_env = {e["name"]: e["value"] for e in graph_of("agg-a100")["spec"]["env"]}
    assert graph_env == {"DYN_REQUEST_PLANE": "tcp", "DYN_EVENT_PLANE": "zmq"}


def test_worker_options_extra_args_and_env_are_carried():
    raw_workers = [{"role": "worker", "replicas": 2, "tensorParallelSize": 4,
                    "nodeGroup": "p4d", "expertParallel": True,
                    "extraArgs": ["--enforce-eager"], "env": {"VLLM_LOGGING_LEVEL": "DEBUG",
                                                              "HF_HUB_OFFLINE": "0"}}]
    stack = variant("agg-a100", workers=raw_workers, kvCacheDtype="fp8")
    c = main(components(_build(stack))["worker-p4d"])
    assert "--enable-expert-parallel" in c["args"]
    assert flag(c["args"], "--kv-cache-dtype") == "fp8"
    assert c["args"][-1] == "--enforce-eager"
    env = env_of(c)
    assert env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert env["HF_HUB_OFFLINE"] == "0"  # the stack's own env wins
    assert len(c["env"]) == len(env)  # no duplicate names


def test_component_names_are_stable_dns_safe_and_unique():
    assert component_names(load_stack("disagg-l40s-decode").serving) == \
        ["prefill-p4d", "decode-g6e"]
    two = [{"role": "prefill", "tensorParallelSize": 4, "nodeGroup": "p4d"},
           {"role": "prefill", "tensorParallelSize": 2, "nodeGroup": "p4d"},
           {"role": "decode", "tensorParallelSize": 4, "nodeGroup": "p4d"}]
    names = component_names(variant("disagg-a100", workers=two).serving)
    assert names == ["prefill-p4d", "prefill-p4d-2", "decode-p4d"]
    for name in SERVING:
        graph = graph_of(name)
        names = [c["name"] for c in graph["spec"]["components"]]
        assert len(set(names)) == len(names)
        assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n) for n in names)
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", graph["metadata"]["name"])
        assert graph == graph_of(name)  # deterministic


def test_attached_variant_needs_the_base_cluster():
    stack = load_stack("disagg-a100")  # workers on the base's p4d group
    with pytest.raises(StackError, match=r"serving\.workers\[0\]\.nodeGroup"):
        build_graph_deployment(stack, namespace=NAMESPACE, efa=True)


def test_efa_groups_in_different_zones_are_refused():
    stack = variant("disagg-l40s-decode", transfer="nixl-libfabric")
    base = load_stack("base-a100")
    cluster = effective_cluster(stack, base)
    groups = [g.model_copy(update={"availability_zone": "us-east-1b"}) if g.name == "g6e"
              else g for g in cluster.node_groups]
    with pytest.raises(StackError, match="one AZ"):
        build_graph_deployment(stack, namespace=NAMESPACE, efa=True,
                               cluster=cluster.model_copy(update={"node_groups": groups}))
