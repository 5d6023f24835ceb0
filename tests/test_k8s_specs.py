"""Every object the spec builders produce is valid: graphs against the CRD (unknown fields
rejected), built-in kinds against the Kubernetes schema of K8S_VERSION (unknown kinds are
failures)."""

from __future__ import annotations

import copy

import pytest
from graph_stacks import graph_of, serving_stack_names, stack_and_cluster
from k8s_validation import (
    crd_schema,
    dgd_errors,
    strict_schema,
    validate_builtin,
    validate_dgd,
    validate_pod_templates,
)
from kubernetes_validate import SchemaNotFoundError

from components.loadgen_specs import (
    efs_persistent_volume,
    hf_token_secret,
    loadgen_rbac,
    model_download_job,
    pvcs,
    storage_classes,
)
from components.monitoring_specs import dashboard_configmaps
from components.placement import cpu_node_affinity
from stacks.config.loader import all_stack_names, load_stack

SERVING = serving_stack_names()


def test_every_shipped_serving_stack_is_covered():
    # The graph tests below are parametrised over this list; make sure it is the real set.
    assert {"agg-a100", "disagg-a100-kv-offload", "disagg-l40s-decode", "local-disagg"} <= \
        set(SERVING)
    assert "base-a100" not in SERVING


@pytest.mark.parametrize("name", SERVING)
def test_graph_matches_crd_with_unknown_fields_rejected(name):
    graph = graph_of(name)
    validate_dgd(graph)
    validate_pod_templates(graph)


def test_strict_schema_catches_planted_unknown_fields_the_crd_alone_accepts():
    graph = graph_of("disagg-a100-kv")
    planted = copy.deepcopy(graph)
    planted["spec"]["components"][1]["sharedMemorySise"] = "16Gi"       # typo of a CRD field
    planted["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["argz"] = []
    planted["spec"]["backendFrameworks"] = "vllm"
    loose = dgd_errors(planted, strict=False)
    strict = dgd_errors(planted, strict=True)
    assert loose == []  # the CRD as shipped lets all three through
    assert len(strict) == 3
    assert any("sharedMemorySise" in e for e in strict)
    assert any("argz" in e for e in strict)
    assert any("backendFrameworks" in e for e in strict)


def test_strict_schema_keeps_preserve_unknown_fields_open():
    schema = {"type": "object", "properties": {
        "open": {"type": "object", "properties": {"a": {"type": "string"}},
                 "x-kubernetes-preserve-unknown-fields": True},
        "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
        "list": {"type": "array", "items": {"type": "object",
                                             "properties": {"a": {"type": "string"}}}}}}
    strict = strict_schema(schema)
    assert "additionalProperties" not in strict["properties"]["open"]
    assert strict["properties"]["closed"]["additionalProperties"] is False
    assert strict["properties"]["list"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["closed"]  # input untouched


def test_crd_rejects_wrong_values_not_only_names():
    graph = graph_of("agg-a100")
    bad = copy.deepcopy(graph)
    bad["spec"]["components"][1]["type"] = "aggregated"          # not in the enum
    bad["spec"]["components"][1]["multinode"] = {"nodeCount": 1}  # minimum 2
    errors = dgd_errors(bad)
    assert any("'aggregated' is not one of" in e for e in errors)
    assert any("nodeCount" in e for e in errors)
    assert crd_schema()["properties"]["spec"]["properties"]["components"]


def _builtin_objects() -> list[dict]:
    stack = load_stack("base-a100")
    objs = [*loadgen_rbac("bench"),
            *storage_classes(tags=stack.resource_tags()),
            *storage_classes(tags=stack.resource_tags(), auto_mode=True),
            efs_persistent_volume("dynamo", "model-cache", 200, file_system_id="fs-0123456789a",
                                  access_point_id="fsap-0123456789abcdef0"),
            *pvcs("dynamo", model_cache_gib=200, results_gib=20),
            hf_token_secret("dynamo", "hf_dummy"),
            model_download_job("dynamo", model_id="Qwen/Qwen3-30B-A3B", revision=None,
                               timeout_minutes=90, affinity=cpu_node_affinity(stack.cluster)),
            *dashboard_configmaps("monitoring")]
    return objs


@pytest.mark.parametrize("obj", _builtin_objects(),
                         ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_builtin_objects_pass_kubernetes_schema_strictly(obj):
    validate_builtin(obj)


def test_builtin_validation_fails_on_unknown_kinds_and_fields():
    with pytest.raises(SchemaNotFoundError):
        validate_builtin(graph_of("agg-a100"))
    job = model_download_job("dynamo", model_id="Qwen/Qwen3-30B-A3B", revision=None,
                             timeout_minutes=90)
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(Exception, match="resource"):
        validate_builtin(job)


@pytest.mark.parametrize("name", [n for n in all_stack_names() if load_stack(n).is_attached])
def test_attached_stacks_build_on_their_base_cluster(name):
    stack, cluster = stack_and_cluster(name)
    own = {g.name for g in stack.cluster.node_groups}
    used = {w.node_group for w in stack.serving.workers}
    assert used - own, "an attached stack's workers should run on base node groups"
    assert used <= {g.name for g in cluster.node_groups}
    validate_dgd(graph_of(name))
