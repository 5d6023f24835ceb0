"""What the B200 recipe stacks' DynamoGraphDeployments and ConfigMaps say: every model-specific
setting on the object the operator (or kubelet) reads, and schema validity of both."""

from __future__ import annotations

import json
from typing import Any

import pytest
from graph_stacks import NAMESPACE, components, env_of, flag, graph_of, json_flag, main
from k8s_validation import validate_builtin, validate_dgd, validate_pod_templates
from recipe_stacks import IB_RECIPE_EDITS, RECIPES, changed, ib_base, ib_recipe, use_infiniband

from components import efa
from components.graph import build_graph_deployment, recipe_configmaps
from components.recipe_specs import ACCEPTANCE_LABEL, checkpoints_to_download
from stacks.catalog.model_catalog import SERVING_RULES
from stacks.config.loader import load_stack
from stacks.conventions.kv_path import DONOR_HOME
from stacks.preflight.run import effective_cluster

AXK2_REV = "9e2e804e80f8d1b3afba5d7938173cec1ed46b49"
EAGLE3_REV = "24958e91737d760908f73a8af4b6e06080fc5c1d"
SOLAR_IMAGE = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-solar-open2-250b-post.1@sha256:"
               "42fd3ed0607aa19b7d4c1b0a8f8aaaefefc8ec6292294ea2b5e6757353891f49")
MOTIF_IMAGE = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-motif-3-dev.1@sha256:"
               "76e2612108f820640ff1d5a00542b41c909a0e6a473ed02b700c817b34f65878")


def workers(graph: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in graph["spec"]["components"] if c["type"] != "frontend"]


def frontend_args(graph: dict[str, Any]) -> list[str]:
    return main(components(graph)["frontend"])["args"]


def spec_env(graph: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in graph["spec"]["env"]}


def configmap(name: str) -> dict[str, Any]:
    (cm,) = recipe_configmaps(load_stack(name), NAMESPACE)
    return cm


def graph_with(name: str, edits: dict[str, Any]) -> dict[str, Any]:
    stack = changed(name, edits)
    return build_graph_deployment(stack, namespace=NAMESPACE, efa=False,
                                  cluster=effective_cluster(stack, load_stack("base-b200")))


def ib_graph(name: str) -> dict[str, Any]:
    """The recipe's own UCX-over-InfiniBand graph on the InfiniBand twin of base-b200."""
    stack = ib_recipe(name)
    return build_graph_deployment(stack, namespace=NAMESPACE, efa=False,
                                  cluster=effective_cluster(stack, ib_base()))


@pytest.mark.parametrize("name", RECIPES)
def test_graph_and_configmaps_validate_strictly(name: str) -> None:
    graph = graph_of(name)
    validate_dgd(graph)           # the vendored CRD, unknown fields rejected
    validate_pod_templates(graph)  # probes, quantities, capabilities as core types
    for cm in recipe_configmaps(load_stack(name), NAMESPACE):
        validate_builtin(cm)
        assert cm["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("name", RECIPES)
def test_frontend_never_gets_dynamo_parser_flags(name: str) -> None:
    # ai-dynamo 1.6.1's frontend exits on --dyn-tool-call-parser (tests/test_recipes_config.py)
    args = frontend_args(graph_of(name))
    assert not {"--dyn-tool-call-parser", "--dyn-reasoning-parser"} & set(args)


@pytest.mark.parametrize("name", RECIPES)
def test_every_worker_has_the_recipe_image_budget_probe_and_fp8_kv(name: str) -> None:
    stack = load_stack(name)
    graph = graph_of(name)
    for comp in workers(graph):
        c = main(comp)
        assert c["image"] == stack.serving.image
        assert flag(c["args"], "--kv-cache-dtype") == "fp8"
        probe = c["startupProbe"]
        assert probe["httpGet"] == {"path": "/live", "port": 9090}
        assert probe["periodSeconds"] * probe["failureThreshold"] == \
            stack.serving.startup_budget_minutes * 60
        assert comp["runtimeVersionOverride"] == stack.serving.dynamo_version


def test_ax_k2_speculative_configmap_real_and_synthetic_keys() -> None:
    cm = configmap("agg-b200-axk2")
    real = json.loads(cm["data"]["speculative-config"])
    assert real == {"method": "eagle3", "model": "skt/A.X-K2-EAGLE3", "revision": EAGLE3_REV,
                    "num_speculative_tokens": 3}
    synthetic = json.loads(cm["data"]["speculative-config-synthetic"])
    assert synthetic == {**real, "rejection_sample_method": "synthetic",
                         "synthetic_acceptance_length": 2.12}
    assert cm["metadata"]["labels"][ACCEPTANCE_LABEL] == "real"
    assert "not real acceptance" in cm["metadata"]["annotations"][
        "dynamo-bench.io/speculative-config-synthetic"]


def test_ax_k2_workers_read_the_real_key_unless_synthetic_is_chosen() -> None:
    graph = graph_of("agg-b200-axk2")
    (comp,) = workers(graph)
    c = main(comp)
    assert "--speculative-config=$(SPECULATIVE_CONFIG)" in c["args"]
    ref = env_of(c)["SPECULATIVE_CONFIG"]["configMapKeyRef"]
    assert ref == {"name": configmap("agg-b200-axk2")["metadata"]["name"],
                   "key": "speculative-config"}
    assert comp["podTemplate"]["metadata"]["labels"][ACCEPTANCE_LABEL] == "real"
    synthetic = graph_with("agg-b200-axk2", {"serving.speculative.acceptance": "synthetic"})
    (comp,) = workers(synthetic)
    assert env_of(main(comp))["SPECULATIVE_CONFIG"]["configMapKeyRef"]["key"] == \
        "speculative-config-synthetic"
    assert synthetic["metadata"]["labels"][ACCEPTANCE_LABEL] == "synthetic"


def test_ax_k2_kernels_parsers_memory_and_block_size() -> None:
    graph = graph_of("agg-b200-axk2")
    (comp,) = workers(graph)
    c, args = main(comp), main(comp)["args"]
    assert flag(args, "--attention-backend") == "FLASHINFER_MLA_SPARSE"
    assert json_flag(args, "--kernel-config") == {"enable_flashinfer_autotune": False}
    assert flag(args, "--dyn-tool-call-parser") == "hermes"
    assert flag(args, "--dyn-reasoning-parser") == "deepseek_v3"
    assert flag(args, "--reasoning-parser") == "deepseek_v3"
    assert (flag(args, "--revision"), flag(args, "--tokenizer-revision")) == (AXK2_REV,) * 2
    assert c["resources"]["requests"]["memory"] == "400Gi"
    assert comp["sharedMemorySize"] == "64Gi"
    # the router hashes the workers' blocks: the two sizes must agree
    assert flag(args, "--block-size") == flag(frontend_args(graph), "--kv-cache-block-size") \
        == "64"
    assert flag(frontend_args(graph), "--router-mode") == "kv"


@pytest.mark.parametrize("name", sorted(IB_RECIPE_EDITS))
def test_shipped_disagg_moves_kv_with_nixl_libfabric_over_efa(name: str) -> None:
    graph = graph_of(name)
    assert not [k for k in spec_env(graph) if k.startswith("UCX_")]
    for comp in workers(graph):
        c = main(comp)
        gpus = int(c["resources"]["limits"]["nvidia.com/gpu"])
        # p6-b200: 8 EFA interfaces for 8 GPUs, shared by the pods on a node
        assert c["resources"]["requests"]["vpc.amazonaws.com/efa"] == str(gpus)
        assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(gpus)
        assert not [k for k in c["resources"]["limits"] if k.startswith("rdma/")]
        nixl = json_flag(c["args"], "--kv-transfer-config")
        assert nixl["kv_connector"] == "NixlConnector"
        assert nixl["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
        assert env_of(c)["FI_PROVIDER"] == "efa"
        assert c["securityContext"] == efa.security_context()
        # privileged: GPUs pinned to the plugin's; the donor's EFA userspace first on the path
        assert c["command"] == efa.pinned_command(efa.pin_gpus_script(
            library_path=f"{DONOR_HOME}/lib:{efa.EFA_LIBRARY_PATH}"))


def test_ax_k2_disagg_identical_speculation_on_both_roles() -> None:
    graph = graph_of("disagg-b200-axk2")
    by_role = {c["type"]: main(c) for c in workers(graph)}
    assert set(by_role) == {"prefill", "decode"}
    for key in ("--speculative-config=$(SPECULATIVE_CONFIG)",):
        assert all(key in c["args"] for c in by_role.values())
    assert len({flag(c["args"], "--block-size") for c in by_role.values()}) == 1
    assert len({json.dumps(env_of(c)["SPECULATIVE_CONFIG"]) for c in by_role.values()}) == 1
    assert "--no-async-scheduling" in by_role["prefill"]["args"]
    assert "--kv-events-config" not in by_role["decode"]["args"]


def test_ax_k2_recipe_ucx_over_infiniband_still_builds_on_an_ib_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    graph = ib_graph("disagg-b200-axk2")
    validate_dgd(graph)
    validate_pod_templates(graph)
    for comp in workers(graph):
        c = main(comp)
        assert c["resources"]["requests"]["rdma/shared_ib"] == "1"
        assert c["resources"]["limits"]["rdma/shared_ib"] == "1"
        assert "vpc.amazonaws.com/efa" not in c["resources"]["limits"]
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK", "SYS_RESOURCE"]
        nixl = json_flag(c["args"], "--kv-transfer-config")
        assert nixl["kv_buffer_device"] == "cuda"
        assert nixl["kv_connector_extra_config"] == {"backends": ["UCX"], "num_threads": 8}
    assert spec_env(graph)["UCX_TLS"] == "rc_x,rc,cuda_copy,cuda_ipc"


def test_draft_model_is_downloaded_beside_the_checkpoint() -> None:
    assert checkpoints_to_download(load_stack("agg-b200-axk2")) == [
        ("skt/A.X-K2-NVFP4", AXK2_REV), ("skt/A.X-K2-EAGLE3", EAGLE3_REV)]
    assert checkpoints_to_download(load_stack("agg-b200-kexaone")) == [
        ("LGAI-EXAONE/K-EXAONE-2.0-750B-A37B-NVFP4", None)]


def test_k_exaone_moe_pin_mtp_frontend_image_memory_and_budget() -> None:
    graph = graph_of("agg-b200-kexaone")
    (comp,) = workers(graph)
    c = main(comp)
    assert json_flag(c["args"], "--kernel-config") == {"moe_backend": "flashinfer_cutlass"}
    assert json.loads(configmap("agg-b200-kexaone")["data"]["speculative-config"]) == {
        "method": "exaone_moe_mtp", "num_speculative_tokens": 2}
    assert "speculative-config-synthetic" not in configmap("agg-b200-kexaone")["data"]
    assert (flag(c["args"], "--dyn-reasoning-parser"),
            flag(c["args"], "--dyn-tool-call-parser")) == ("qwen3", "qwen3_coder")
    fe = main(components(graph)["frontend"])
    # digest-pinned as the recipe (deploy-ib.yaml@0500a98a; dynamo.md F9)
    assert fe["image"] == ("nvcr.io/nvidia/ai-dynamo/dynamo-frontend:1.4.1@sha256:"
                           "7a54b0d601b7b2c50d41c6e683ddc8b6d2b4fa2b17262db1fa2e84ab7ebaf7e2")
    assert c["resources"]["requests"]["memory"] == "200Gi"
    assert c["resources"]["limits"]["memory"] == "480Gi"
    assert c["startupProbe"]["failureThreshold"] == 120
    assert spec_env(graph)["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"


def test_k_exaone_flag_delivery_renders_the_recipe_verbatim_without_a_configmap() -> None:
    stack = changed("agg-b200-kexaone", {"serving.speculative.delivery": "flags"})
    assert recipe_configmaps(stack, NAMESPACE) == []
    (comp,) = workers(graph_with("agg-b200-kexaone", {"serving.speculative.delivery": "flags"}))
    c = main(comp)
    assert (flag(c["args"], "--spec-method"), flag(c["args"], "--spec-tokens")) == \
        ("exaone_moe_mtp", "2")
    assert "SPECULATIVE_CONFIG" not in env_of(c)


def test_k_exaone_disagg_side_channel_ports_and_decode_sequences() -> None:
    by_role = {c["type"]: main(c) for c in workers(graph_of("disagg-b200-kexaone"))}
    assert {r: c["resources"]["limits"]["vpc.amazonaws.com/efa"] for r, c in by_role.items()} \
        == {"prefill": "4", "decode": "4"}
    assert {r: env_of(c)["VLLM_NIXL_SIDE_CHANNEL_PORT"] for r, c in by_role.items()} == \
        {"prefill": "5560", "decode": "5558"}
    assert flag(by_role["decode"]["args"], "--max-num-seqs") == "256"


def test_k_exaone_recipe_four_rdma_devices_on_an_ib_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    by_role = {c["type"]: main(c) for c in workers(ib_graph("disagg-b200-kexaone"))}
    assert {r: c["resources"]["limits"]["rdma/shared_ib"] for r, c in by_role.items()} == \
        {"prefill": "4", "decode": "4"}


def test_solar_kernel_flags_vllm_parsers_on_the_frontend_and_no_speculation() -> None:
    graph = graph_of("agg-b200-solar2")
    for comp in workers(graph):
        args = main(comp)["args"]
        assert flag(args, "--moe-backend") == "flashinfer_trtllm"
        assert "--enable-flashinfer-autotune" in args
        assert not {"--kernel-config", "--attention-backend"} & set(args)
        assert flag(args, "--reasoning-parser") == "solar_open2"
        assert not {"--dyn-tool-call-parser", "--dyn-reasoning-parser"} & set(args)
        assert not [a for a in args if a.startswith("--speculative-config")]
        assert main(comp)["resources"]["requests"]["memory"] == "544Gi"
        assert main(comp)["image"] == SOLAR_IMAGE
    fe = frontend_args(graph)
    assert flag(fe, "--dyn-chat-processor") == "vllm"
    assert (flag(fe, "--tool-call-parser"), flag(fe, "--reasoning-parser")) == \
        ("solar_open2", "solar_open2")
    assert "--enable-auto-tool-choice" in fe and "--max-model-len=1048576" in fe
    assert recipe_configmaps(load_stack("agg-b200-solar2"), NAMESPACE) == []


def test_solar_disagg_conv_layout_and_expert_parallel_prefill() -> None:
    graph = graph_of("disagg-b200-solar2")
    assert spec_env(graph)["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"
    for comp in workers(graph):
        c = main(comp)
        assert ("--enable-expert-parallel" in c["args"]) == (comp["type"] == "prefill")
        assert flag(c["args"], "--block-size") == "16"
    memory = {c["type"]: main(c)["resources"]["requests"]["memory"] for c in workers(graph)}
    assert memory == {"prefill": "640Gi", "decode": "320Gi"}
    assert flag(frontend_args(graph), "--router-mode") == "round-robin"
    assert "--kv-cache-block-size" not in frontend_args(graph)


def test_solar_recipe_one_rdma_device_per_gpu_on_an_ib_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    for comp in workers(ib_graph("disagg-b200-solar2")):
        c = main(comp)
        tp = flag(c["args"], "--tensor-parallel-size")
        assert c["resources"]["limits"]["rdma/shared_ib"] == tp


@pytest.mark.parametrize("name", ["agg-b200-motif3", "disagg-b200-motif3",
                                  "baseline-b200-motif3"])
def test_motif_keeps_its_image_everywhere_and_loads_its_own_code(name: str) -> None:
    graph = graph_of(name)
    for comp in graph["spec"]["components"]:
        assert main(comp)["image"] == MOTIF_IMAGE
        assert "--trust-remote-code" in main(comp)["args"]
        assert comp["runtimeVersionOverride"] == "1.5.0"


def test_motif_mtp_structural_tag_parsers_and_disagg_roles() -> None:
    cm = configmap("agg-b200-motif3")
    assert json.loads(cm["data"]["speculative-config"]) == {"method": "mtp",
                                                            "num_speculative_tokens": 2}
    assert json.loads(cm["data"]["speculative-config-synthetic"])[
        "synthetic_acceptance_length"] == 2.13
    agg = graph_of("agg-b200-motif3")
    (comp,) = workers(agg)
    args = main(comp)["args"]
    assert "--dyn-enable-structural-tag" in args and "--enable-expert-parallel" in args
    assert spec_env(agg)["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    fe = frontend_args(agg)
    assert (flag(fe, "--tool-call-parser"), flag(fe, "--reasoning-parser")) == ("motif", "motif")
    disagg = graph_of("disagg-b200-motif3")
    health = {c["type"]: env_of(main(c)).get("DYN_HEALTH_CHECK_ENABLED")
              for c in workers(disagg)}
    assert health == {"prefill": "false", "decode": None}
    assert flag(frontend_args(disagg), "--kv-cache-block-size") == "128"
    assert spec_env(disagg)["NCCL_NET_PLUGIN"] == "none"


@pytest.mark.parametrize("name", [n for n in RECIPES if n.startswith("baseline")])
def test_baselines_carry_no_speculation_and_no_pins(name: str) -> None:
    graph = graph_of(name)
    assert recipe_configmaps(load_stack(name), NAMESPACE) == []
    assert ACCEPTANCE_LABEL not in graph["metadata"]["labels"]
    for comp in workers(graph):
        args = main(comp)["args"]
        assert not [a for a in args if a.startswith(("--speculative-config", "--spec-"))]
        assert "--block-size" not in args
        # only the attention backend a checkpoint cannot run without (A.X K2: sparse MLA)
        required = SERVING_RULES[load_stack(name).model.id].required_attention_backends
        backend = args[args.index("--attention-backend") + 1] if required else None
        assert ("--attention-backend" in args) == bool(required)
        assert backend is None or backend in {b.value for b in required}


def test_k_exaone_agg_publishes_no_kv_events_its_frontend_ignores() -> None:
    # the recipe's frontend runs --no-router-kv-events (approximate indexer) and its worker
    # publishes none (dynamo.md F12); the attestation then does not wait for applied events
    from workloads.attest.checks import NOT_CONFIGURED, evaluate
    from workloads.attest.parse import expected
    graph = graph_of("agg-b200-kexaone")
    assert "--no-router-kv-events" in frontend_args(graph)
    for comp in workers(graph):
        assert "--kv-events-config" not in main(comp)["args"]
    x = expected(load_stack("agg-b200-kexaone"), "aws")
    (kv_events,) = [c for c in evaluate(x, {}, "test").checks if c.name == "kv_events"]
    assert kv_events.status == NOT_CONFIGURED


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_workers_give_the_startup_probe_the_recipes_20_s(name: str) -> None:
    # ai-dynamo/dynamo recipes/ax-k2/vllm/agg-b200-chat/deploy.yaml@146bf3f1 (dynamo.md F10)
    for comp in workers(graph_of(name)):
        assert main(comp)["startupProbe"]["timeoutSeconds"] >= 20


# ai-dynamo/dynamo recipes/ax-k2/vllm/agg-b200-chat/deploy.yaml@146bf3f1 (cpu 4, 16Gi),
# recipes/k-exaone-2.0/vllm/disagg-b200-chat/deploy-ib.yaml@0500a98a (cpu 8, 16Gi) and
# recipes/solar-open2-250b/vllm/*/deploy.yaml@099afba4 (cpu 16, 128Gi) (dynamo.md F6)
@pytest.mark.parametrize("name, cpu, memory", [
    ("agg-b200-axk2", "4", "16Gi"), ("disagg-b200-axk2", "4", "16Gi"),
    ("baseline-b200-axk2", "4", "16Gi"),
    ("agg-b200-kexaone", "8", "16Gi"), ("baseline-b200-kexaone", "8", "16Gi"),
    ("disagg-b200-kexaone", "8", "16Gi"), ("agg-a100", "2", "4Gi"),
    ("agg-b200-solar2", "16", "128Gi"), ("disagg-b200-solar2", "16", "128Gi"),
    ("baseline-b200-solar2", "16", "128Gi")])
def test_frontend_requests_the_recipes_cpu_and_memory(name: str, cpu: str, memory: str) -> None:
    from components.graph import FRONTEND_COMPONENT
    requests = main(components(graph_of(name))[FRONTEND_COMPONENT])["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == (cpu, memory)


@pytest.mark.parametrize("name", ["agg-b200-kexaone", "baseline-b200-kexaone",
                                  "disagg-b200-kexaone", "agg-b200-solar2"])
def test_recipe_images_are_pinned_by_digest_where_the_recipe_pins_one(name: str) -> None:
    """K-EXAONE's recipe (deploy-ib.yaml@0500a98a) and Solar's pin runtime and frontend by
    digest; a tag alone may be re-pushed under the compile-cache key (dynamo.md F9)."""
    for comp in graph_of(name)["spec"]["components"]:
        for c in comp["podTemplate"]["spec"]["containers"]:
            assert "@sha256:" in c["image"], (comp["name"], c["image"])
