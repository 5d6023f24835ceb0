"""Recipe pods' scratch space and frontend placement (dynamo.md F6, F10): /tmp on an emptyDir
and ephemeral-storage requests as the recipes give them, the Solar frontend on the GPU nodes
(its 128 GiB do not fit the CPU group), and pre-flight packing the frontend where it runs.

Recipes (ai-dynamo/dynamo): solar-open2-250b/vllm/{agg,disagg}-b200-chat/deploy.yaml@099afba4
(workers /tmp sizeLimit 100Gi + ephemeral-storage 64Gi, frontend /tmp 20Gi, 16 CPU / 128Gi,
GPU toleration); k-exaone-2.0/vllm/disagg-b200-chat/deploy-ib.yaml@0500a98a (workers 64Gi,
frontend 16Gi of ephemeral storage); ax-k2/vllm/agg-b200-chat/deploy.yaml@146bf3f1 and
disagg-b200-chat/deploy-generic.yaml@b6f7446b (workers /tmp on `emptyDir: {}`)."""

from __future__ import annotations

import pytest
from graph_stacks import components, graph_of, main
from preflight_probe import problems_of

from components.graph import FRONTEND_COMPONENT
from stacks.config.errors import StackError

# stack -> (worker /tmp emptyDir, worker ephemeral-storage, frontend /tmp, frontend storage)
RECIPE_SCRATCH = {
    "agg-b200-solar2": ({"sizeLimit": "100Gi"}, "64Gi", {"sizeLimit": "20Gi"}, None),
    "disagg-b200-solar2": ({"sizeLimit": "100Gi"}, "64Gi", {"sizeLimit": "20Gi"}, None),
    "disagg-b200-kexaone": (None, "64Gi", None, "16Gi"),
    "agg-b200-axk2": ({}, None, None, None),
    "disagg-b200-axk2": ({}, None, None, None),
    "agg-a100": (None, None, None, None),
}


def _tmp(container: dict, pod: dict) -> dict | None:
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    if "/tmp" not in mounts:
        return None
    (vol,) = [v for v in pod["volumes"] if v["name"] == mounts["/tmp"]]
    return vol["emptyDir"]


@pytest.mark.parametrize("name", sorted(RECIPE_SCRATCH))
def test_pods_get_the_recipes_scratch(name):
    w_tmp, w_storage, fe_tmp, fe_storage = RECIPE_SCRATCH[name]
    comps = components(graph_of(name))
    for cname, comp in comps.items():
        pod = comp["podTemplate"]["spec"]
        c = main(comp)
        tmp, storage = (fe_tmp, fe_storage) if cname == FRONTEND_COMPONENT else (w_tmp, w_storage)
        assert _tmp(c, pod) == tmp, cname
        assert c["resources"]["requests"].get("ephemeral-storage") == storage, cname


@pytest.mark.parametrize("name", ["agg-b200-solar2", "disagg-b200-solar2",
                                  "baseline-b200-solar2"])
def test_the_solar_frontend_runs_on_the_gpu_nodes_and_tolerates_them(name):
    pod = components(graph_of(name))[FRONTEND_COMPONENT]["podTemplate"]["spec"]
    assert pod["nodeSelector"] == {"dynamo-bench.io/node-group": "b200"}
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])


def test_a_frontend_too_big_for_the_cpu_nodes_is_refused():
    # the recipe's 128 GiB on the shared m7i.4xlarge group (64 GiB): never scheduled
    problems = problems_of("agg-b200-solar2", serving__frontend__nodeGroup=None)
    (p,) = [p for p in problems if p.field.startswith("dynamo-bench:serving.frontend")]
    assert p.field == "dynamo-bench:serving.frontend.memoryGib"
    assert "m7i.4xlarge" in p.message and "nodeGroup" in p.fix
    cpus = problems_of("agg-a100", serving__frontend={"cpu": 16})    # 90 % of 16 vCPUs
    assert [p.field for p in cpus if "frontend" in p.field] == ["dynamo-bench:serving.frontend.cpu"]


def test_a_frontend_on_the_gpu_nodes_is_packed_with_the_workers():
    # two p6-b200 hold 2 x 1843 GiB (90 %): the 2 x 544 GiB Solar workers and six 512 GiB
    # frontends (4160 GiB) do not fit them, though each pod alone would
    problems = problems_of("agg-b200-solar2", serving__frontend__memoryGib=512,
                           serving__frontend__replicas=6)
    assert "dynamo-bench:serving.frontend.memoryGib" in [p.field for p in problems]
    assert not [p for p in problems_of("agg-b200-solar2") if "frontend" in p.field]


def test_worker_scratch_counts_against_the_root_volume():
    # base-b200's diskGib 1000 (80 % usable): two 64 GiB pods fit, two 500 GiB pods do not
    problems = problems_of("agg-b200-solar2", serving__workers__0__scratch={
        "tmpDir": True, "ephemeralStorageGib": 500}, serving__workers__0__replicas=4)
    assert "dynamo-bench:serving.workers[0].scratch.ephemeralStorageGib" in [
        p.field for p in problems]


def test_a_tmp_size_limit_needs_the_tmp_dir():
    with pytest.raises(StackError, match="tmpSizeLimitGib"):
        problems_of("agg-a100", serving__workers__0__scratch={"tmpSizeLimitGib": 10})
