"""Kept workers and what a campaign asks of `pulumi up`, on the real program under mocks.

- The typed rule the forecast uses (stacks/conventions/worker_identity.py) and the rendered worker
  specs the campaign compares byte for byte (workloads/campaign/identity.py) give the same answer
  for every pair of shipped variants of a base.
- `dynamo-bench:campaign`: the graph under the shared name, its objects retained on destroy
  when handed over, the provider upserting and forcing fields when adopting; a variant that
  asks for neither is exactly what `pulumi up` builds without a campaign.
- `dynamo-bench:nodeGroupSizes`: a managed node group's desired (and minimum) size, its
  maximum staying the group's count; an Auto Mode NodePool's limits (components/
  auto_mode_specs.pool_capacity).
"""

from __future__ import annotations

import itertools
import json

import pytest

from stacks.config.loader import all_stack_names, load_stack, read_stack_file, stack_file
from stacks.conventions.worker_identity import compile_cache_dir, same_workers
from stacks.preflight.run import check_stack, effective_cluster
from stacks.render.offline import PLACEHOLDER_TOKEN, config_strings, run_program, run_stack
from workloads.campaign.identity import rendered_objects, worker_bytes

CACHE: dict = {}


def _variants(base: str) -> list[str]:
    return [n for n in all_stack_names() if load_stack(n).cluster.attach_to == base]


@pytest.mark.parametrize("base", ["base-a100", "base-b200"])
def test_typed_rule_and_rendered_specs_agree_on_every_shipped_pair(base):
    b = load_stack(base)
    names = _variants(base)
    rendered = {n: worker_bytes(rendered_objects(n, "shared-graph", CACHE)) for n in names}
    kept = set()
    for x, y in itertools.combinations(names, 2):
        sx, sy = load_stack(x), load_stack(y)
        typed = same_workers(sx, sy, effective_cluster(sx, b), effective_cluster(sy, b))
        assert typed == (rendered[x] == rendered[y]), (x, y)
        if typed:
            kept.add((x, y))
    assert kept == ({("agg-a100", "agg-a100-kv"), ("disagg-a100", "disagg-a100-kv")}
                    if base == "base-a100" else set())


def _program(name: str, **keys: object):
    raw = read_stack_file(stack_file(name))
    config = config_strings(raw, PLACEHOLDER_TOKEN)
    config |= {f"dynamo-bench:{k}": json.dumps(v) for k, v in keys.items()}
    outputs = {}
    attach = (raw.get("cluster") or {}).get("attachTo")
    if attach:
        base = run_stack(attach, cache=CACHE)
        outputs = {attach: (base.outputs, base.secret_outputs)}
    run = run_program(name, config, region="us-east-1", stack_outputs=outputs)
    assert run.error is None, run.error
    return run


def _serving(run):
    return [r for r in run.resources if r.type.startswith("kubernetes:")
            and r.inputs.get("kind") in ("DynamoGraphDeployment", "ConfigMap")]


def test_a_handed_over_graph_is_retained_and_the_next_variant_adopts_it():
    plain = _program("agg-a100-kv")
    handing = _program("agg-a100-kv", campaign={"graphName": "agg-a100-kv", "handOver": True})
    adopting = _program("agg-a100", campaign={"graphName": "agg-a100-kv", "adopt": True})
    # handing over changes only the retain option: the same objects as a plain `up`
    assert [r.inputs for r in _serving(handing)] == [r.inputs for r in _serving(plain)]
    assert all(r.retain_on_delete for r in _serving(handing))
    assert not any(r.retain_on_delete for r in _serving(plain) + _serving(adopting))
    dgd = next(r for r in _serving(adopting) if r.inputs["kind"] == "DynamoGraphDeployment")
    assert dgd.inputs["metadata"]["name"] == "agg-a100-kv"
    assert adopting.outputs["graphName"] == "agg-a100-kv"
    assert adopting.outputs["frontendService"] == "agg-a100-kv-frontend"

    def provider(run):
        return next(r for r in run.resources if r.type == "pulumi:providers:kubernetes")
    assert provider(adopting).inputs.get("upsertExistingObjects") == "true"
    assert provider(adopting).inputs.get("enablePatchForce") == "true"
    assert "upsertExistingObjects" not in provider(handing).inputs


def test_node_group_sizes_set_desired_size_under_the_groups_count():
    run = _program("base-a100", nodeGroupSizes={"p4d": 0, "g6e": 1})
    scaling = {r.name.rsplit("-", 1)[-1]: r.inputs["scalingConfig"] for r in run.resources
               if r.type == "eks:index:ManagedNodeGroup"}
    assert scaling == {"p4d": {"minSize": 0, "desiredSize": 0, "maxSize": 2},
                       "g6e": {"minSize": 1, "desiredSize": 1, "maxSize": 1},
                       "cpu": {"minSize": 2, "desiredSize": 2, "maxSize": 2}}


def test_node_group_sizes_set_auto_mode_node_pool_capacity():
    """On Auto Mode the same key sizes the NodePools through their limits (issue 17's
    pool_capacity): a parked GPU pool holds nothing and lets its empty nodes go at once, a
    sized one holds that many nodes (empty ones go after the grace), a group the key does not
    name keeps its count; every pool still valid against Karpenter's CRD."""
    from test_infra_k8s_objects import validate_object

    from components.auto_mode_specs import pool_capacity

    base = load_stack("base-a100-auto")
    run = _program("base-a100-auto", nodeGroupSizes={"p4d": 0, "g6e": 1})
    pools = {r.inputs["metadata"]["name"]: r.inputs for r in run.resources
             if r.type == "kubernetes:karpenter.sh/v1:NodePool"}
    assert set(pools) == {"dynamo-bench-p4d", "dynamo-bench-g6e", "dynamo-bench-cpu"}
    for name, nodes in (("p4d", 0), ("g6e", 1), ("cpu", 2)):
        spec = pools[f"dynamo-bench-{name}"]["spec"]
        want = pool_capacity(base.cluster.group(name), nodes)
        assert {k: spec.get(k) for k in want} == want, name
        validate_object(pools[f"dynamo-bench-{name}"], "1.35.0")
    assert pools["dynamo-bench-p4d"]["spec"]["limits"] == {"nodes": "0", "nvidia.com/gpu": "0"}
    assert pools["dynamo-bench-p4d"]["spec"]["disruption"]["consolidateAfter"] == "0s"
    assert pools["dynamo-bench-g6e"]["spec"]["limits"] == {"nodes": "1", "nvidia.com/gpu": "4"}
    assert pools["dynamo-bench-cpu"]["spec"]["replicas"] == 2
    assert not run.of_type("eks:index:ManagedNodeGroup")


@pytest.mark.parametrize(("keys", "field"), [
    ({"nodeGroupSizes": {"p4d": 3}}, "dynamo-bench:nodeGroupSizes.p4d"),
    ({"nodeGroupSizes": {"nope": 0}}, "dynamo-bench:nodeGroupSizes.nope"),
    ({"nodeGroupSizes": [1]}, "dynamo-bench:nodeGroupSizes"),
    ({"campaign": {"graphName": "agg"}}, "dynamo-bench:campaign"),
])
def test_campaign_keys_that_do_not_fit_the_stack_are_refused(tmp_path, keys, field):
    # (a base is never deployed by a campaign: `campaign` on it is refused too)
    path = tmp_path / "Pulumi.base-a100.yaml"
    path.write_text(stack_file("base-a100").read_text())
    path.write_text(path.read_text() + "".join(
        f"  dynamo-bench:{k}: '{json.dumps(v)}'\n" for k, v in keys.items()))
    problems = check_stack("base-a100", tmp_path).problems
    assert [p.field for p in problems] == [field], problems


def test_compile_caches_are_keyed_by_model_image_and_layout():
    base = load_stack("base-a100")
    agg, kv, disagg = (load_stack(n) for n in ("agg-a100", "agg-a100-kv", "disagg-a100"))
    key = [compile_cache_dir(s, effective_cluster(s, base), 0) for s in (agg, kv, disagg)]
    # kept workers share a key (the router is not the layout); a prefill worker does not
    assert key[0] == key[1] != key[2]
    assert key[0].startswith("/models/compile-cache/Qwen--Qwen3-30B-A3B/vllm-runtime--1.6.1/"
                             "worker-tp4-")
    env = {e["name"]: e.get("value") for e in next(
        c for c in rendered_objects("agg-a100", "agg-a100", CACHE)
        if c["kind"] == "DynamoGraphDeployment")["spec"]["components"][1][
            "podTemplate"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_CACHE_ROOT"] == f"{key[0]}/vllm"
    assert env["FLASHINFER_WORKSPACE_BASE"] == f"{key[0]}/flashinfer"
