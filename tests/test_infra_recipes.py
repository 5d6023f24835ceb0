"""The B200 recipe stacks under the mocks harness: what the program really registers for them.

- every B200 stack builds, and is among the AWS stacks the tag, policy and validation tests run on;
- the recipe ConfigMaps (speculative config) exist and the graph depends on them; every
  ConfigMap key a graph reads resolves to an object the stack creates;
- every checkpoint a graph loads offline is downloaded by the stack or cached by its base (the
  EAGLE3 draft of A.X K2 included), one idempotent Job each, names unique across variants;
- base-b200 (p6-b200, EFA) declares no RDMA device plugin, and a disaggregated recipe asking for
  UCX over InfiniBand there registers nothing; on an InfiniBand twin of it the plugin is
  installed on the GPU group and the recipe's UCX/RDMA workers request what it advertises.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_harness import ProgramRun, aws_stacks, k8s_objects, raw_config, run, run_config
from recipe_stacks import (
    IB_B200,
    IB_PLUGIN,
    IB_RECIPE_EDITS,
    ib_base_raw,
    ib_recipe_raw,
    use_infiniband,
)

from components.graph import recipe_configmaps
from components.rdma_specs import efa_fabric_note
from components.recipe_specs import checkpoints_to_download
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.loader import StackError, load_stack, parse_config

B200 = [n for n in aws_stacks() if "b200" in n]
B200_SERVING = [n for n in B200 if load_stack(n).serving is not None]
VARIANTS = [n for n in aws_stacks() if load_stack(n).is_attached]
NAMESPACE = "dynamo"


def objects(result: ProgramRun, kind: str) -> list[tuple[Any, dict[str, Any]]]:
    return [(r, o) for r, o in k8s_objects(result) if o["kind"] == kind]


def the_dgd(result: ProgramRun) -> tuple[Any, dict[str, Any]]:
    (dgd,) = objects(result, "DynamoGraphDeployment")
    return dgd


def containers(dgd: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for comp in dgd["spec"]["components"]
            for c in comp["podTemplate"]["spec"]["containers"]]


def env_of(job: dict[str, Any]) -> dict[str, str]:
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in c["env"]}


def downloaded(result: ProgramRun) -> set[tuple[str, str | None]]:
    """(repo, revision) of every download Job the stack creates."""
    return {(env["MODEL_ID"], env["MODEL_REVISION"] or None)
            for env in (env_of(j) for _, j in objects(result, "Job"))}


def test_the_b200_campaign_is_among_the_aws_stacks() -> None:
    # The tag, policy and object-validation tests are parametrised over aws_stacks().
    assert "base-b200" in B200 and len(B200_SERVING) == 12


@pytest.mark.parametrize("name", B200)
def test_b200_stack_builds(name: str) -> None:
    result = run(name)
    assert result.error is None, f"{name}: {result.error}"
    assert result.resources


# --- recipe ConfigMaps ---------------------------------------------------------------------

@pytest.mark.parametrize("name", B200_SERVING)
def test_recipe_configmaps_are_created_before_the_graph(name: str) -> None:
    result = run(name)
    want = recipe_configmaps(load_stack(name), NAMESPACE)
    created = {o["metadata"]["name"]: (r, o) for r, o in objects(result, "ConfigMap")}
    dgd_record, _ = the_dgd(result)
    assert len(created) == len(want)
    for cm in want:
        record, obj = created[cm["metadata"]["name"]]
        assert obj == cm
        assert record.urn in dgd_record.depends_on, f"{name}: the graph does not wait for it"


@pytest.mark.parametrize("name", [n for n in aws_stacks() if load_stack(n).serving is not None])
def test_every_configmap_key_a_graph_reads_is_created_by_the_stack(name: str) -> None:
    result = run(name)
    created = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
               for _, o in objects(result, "ConfigMap")}
    _, dgd = the_dgd(result)
    refs = [e["valueFrom"]["configMapKeyRef"] for c in containers(dgd) for e in c.get("env", [])
            if "configMapKeyRef" in e.get("valueFrom", {})]
    for ref in refs:
        cm = created.get((dgd["metadata"]["namespace"], ref["name"]))
        assert cm is not None, f"{name}: ConfigMap {ref['name']} is read but never created"
        assert ref["key"] in cm["data"], f"{name}: {ref['name']} has no key {ref['key']}"
    speculative = load_stack(name).serving.speculative
    if speculative is not None and speculative.delivery == "configmap":
        assert refs, f"{name}: its speculative config is never read"


def test_synthetic_acceptance_reads_the_synthetic_key_from_the_created_configmap() -> None:
    raw = raw_config("agg-b200-axk2")
    raw["serving"]["speculative"]["acceptance"] = "synthetic"
    result = run_config("agg-b200-axk2-synthetic", raw)
    assert result.error is None, result.error
    (_, cm), = objects(result, "ConfigMap")
    _, dgd = the_dgd(result)
    (ref,) = {e["valueFrom"]["configMapKeyRef"]["key"] for c in containers(dgd)
              for e in c.get("env", []) if "configMapKeyRef" in e.get("valueFrom", {})}
    assert ref == "speculative-config-synthetic" and ref in cm["data"]
    assert '"synthetic_acceptance_length":2.12' in cm["data"][ref]


# --- checkpoints on the model cache ---------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in aws_stacks() if load_stack(n).serving is not None])
def test_every_checkpoint_the_graph_loads_is_downloaded(name: str) -> None:
    stack = load_stack(name)
    result = run(name)
    have = downloaded(result)
    if stack.is_attached:
        have |= downloaded(run(stack.cluster.attach_to))
    missing = set(checkpoints_to_download(stack)) - have
    assert not missing, f"{name}: workers run offline and nothing downloads {missing}"
    dgd_record, _ = the_dgd(result)
    for record, _ in objects(result, "Job"):
        assert record.urn in dgd_record.depends_on, f"{name}: the graph starts before {record}"


@pytest.mark.parametrize("name", ["agg-b200-axk2", "disagg-b200-axk2"])
def test_ax_k2_downloads_its_model_and_the_pinned_eagle3_draft(name: str) -> None:
    jobs = [j for _, j in objects(run(name), "Job")]
    assert downloaded(run(name)) == {
        ("skt/A.X-K2-NVFP4", "9e2e804e80f8d1b3afba5d7938173cec1ed46b49"),
        ("skt/A.X-K2-EAGLE3", "24958e91737d760908f73a8af4b6e06080fc5c1d")}
    names = [j["metadata"]["name"] for j in jobs]
    assert len(set(names)) == 2 and all(len(n) <= 63 and name in n for n in names)
    for job in jobs:
        # each Job records its own times and skips a complete snapshot (the shipped program)
        assert "DOWNLOAD_TIMING" in env_of(job)["DOWNLOAD_SCRIPT"]
        assert job["metadata"]["annotations"]["dynamo-bench.io/checkpoint"] == \
            f"{env_of(job)['MODEL_ID']}@{env_of(job)['MODEL_REVISION']}"
    # The baseline runs without speculation: no draft.
    assert downloaded(run("baseline-b200-axk2")) == {
        ("skt/A.X-K2-NVFP4", "9e2e804e80f8d1b3afba5d7938173cec1ed46b49")}


def test_variants_of_the_base_model_download_nothing() -> None:
    for name in ("agg-b200-kexaone", "disagg-b200-kexaone", "baseline-b200-kexaone"):
        assert not objects(run(name), "Job"), name
    assert downloaded(run("base-b200")) == {("LGAI-EXAONE/K-EXAONE-2.0-750B-A37B-NVFP4", None)}


def test_a_pinned_revision_of_the_base_model_is_another_snapshot_to_download() -> None:
    raw = raw_config("agg-b200-kexaone")
    raw["model"]["revision"] = "0123456789abcdef0123456789abcdef01234567"
    result = run_config("agg-b200-kexaone-pinned", raw)
    assert result.error is None, result.error
    assert downloaded(result) == {("LGAI-EXAONE/K-EXAONE-2.0-750B-A37B-NVFP4",
                                   "0123456789abcdef0123456789abcdef01234567")}


def test_download_jobs_never_collide_across_stacks_of_one_cluster() -> None:
    """Variants of one model each own their Job: a second create of one name would fail
    (AlreadyExists), and destroying one variant would delete the other's object."""
    for base in {load_stack(n).cluster.attach_to for n in VARIANTS}:
        names = [j["metadata"]["name"] for n in [base, *[v for v in VARIANTS
                 if load_stack(v).cluster.attach_to == base]]
                 for _, j in objects(run(n), "Job")]
        assert len(names) == len(set(names)), f"{base}: {sorted(names)}"


def test_variant_download_uses_the_base_download_budget() -> None:
    (_, job), *_ = objects(run("disagg-b200-solar2"), "Job")
    base = load_stack("base-b200")
    assert job["spec"]["activeDeadlineSeconds"] == base.storage.download_timeout_minutes * 60


# --- RDMA device plugin ----------------------------------------------------------------------

def rdma_plugin(result: ProgramRun) -> tuple[Any, dict[str, Any], Any, dict[str, Any]]:
    (cm_record, cm), = [(r, o) for r, o in objects(result, "ConfigMap")
                        if o["metadata"]["name"] == "rdma-shared-dev-plugin"]
    (ds_record, ds), = objects(result, "DaemonSet")
    return cm_record, json.loads(cm["data"]["config.json"]), ds_record, ds


def node_matches(affinity: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a node with `labels` satisfies a required node affinity (terms ORed,
    expressions ANDed; only the In operator is used here)."""
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    for term in terms:
        exprs = term["matchExpressions"]
        assert {e["operator"] for e in exprs} == {"In"}
        if all(labels.get(e["key"]) in e["values"] for e in exprs):
            return True
    return False


def b200_node(group: str = "b200", instance: str = "p6-b200.48xlarge") -> dict[str, str]:
    return {"dynamo-bench.io/node-group": group, "node.kubernetes.io/instance-type": instance}


def ib_standalone_raw(name: str) -> dict[str, Any]:
    """The recipe with its own UCX/RDMA settings on its own InfiniBand cluster (base-b200's
    nodes and plugin on the InfiniBand twin), as one standalone stack."""
    raw, recipe = ib_base_raw(), ib_recipe_raw(name)
    raw.update({k: recipe[k] for k in ("model", "serving", "workloads")})
    raw["cost"] = {**recipe["cost"], "budgetUsd": 5000}
    return raw


def test_base_b200_declares_no_rdma_plugin_on_efa_and_installs_the_efa_plugin() -> None:
    result = run("base-b200")
    assert not objects(result, "DaemonSet")
    assert not [o for _, o in objects(result, "ConfigMap")
                if o["metadata"]["name"] == "rdma-shared-dev-plugin"]
    charts = set(result.helm_charts())
    assert "aws-efa-k8s-device-plugin" in charts


def test_an_infiniband_base_installs_the_rdma_plugin_it_declares(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    result = run_config("base-b200-ib", ib_base_raw())
    assert result.error is None, result.error
    cm_record, config, ds_record, ds = rdma_plugin(result)
    (entry,) = config["configList"]
    assert f"{entry['resourcePrefix']}/{entry['resourceName']}" == "rdma/shared_ib" \
        == IB_PLUGIN["resourceName"]
    assert entry["rdmaHcaMax"] == IB_PLUGIN["perNode"] == 64
    # Mellanox HCAs and EFA devices, selected by vendor AND driver
    assert entry["selectors"] == {"vendors": ["15b3", "1d0f"], "drivers": ["mlx5_core", "efa"]}
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
    assert {v["name"]: v for v in pod["volumes"]}["config"]["configMap"]["name"] == \
        "rdma-shared-dev-plugin"
    assert {m["mountPath"] for m in c["volumeMounts"]} >= {
        "/var/lib/kubelet/device-plugins", "/k8s-rdma-shared-dev-plugin", "/dev/"}
    # Only on the declared GPU group, through its taint.
    assert node_matches(pod["affinity"], b200_node("b200", IB_B200))
    assert not node_matches(pod["affinity"], b200_node("cpu", "m7i.4xlarge"))
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        pod["tolerations"]
    # Ordered: config -> plugin after the GPU nodes -> monitoring (the GPU check phase).
    assert cm_record.urn in ds_record.depends_on
    assert any(d.endswith("ManagedNodeGroup::cluster-nodes-b200") for d in ds_record.depends_on)
    prometheus = next(r for r in result.resources
                      if r.name == "monitoring-kube-prometheus-stack")
    assert ds_record.urn in prometheus.depends_on


def test_the_plugin_follows_the_declared_name_units_and_groups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    raw = ib_base_raw({"cluster.rdma": {"resourceName": "rdma/ib", "perNode": 8,
                                        "nodeGroups": ["b200"]}})
    _, config, _, ds = rdma_plugin(run_config("base-b200-ib8", raw))
    (entry,) = config["configList"]
    assert (entry["resourcePrefix"], entry["resourceName"], entry["rdmaHcaMax"]) == \
        ("rdma", "ib", 8)
    before = rdma_plugin(run_config("base-b200-ib", ib_base_raw()))[3]
    # a new config rolls the plugin's pods (it reads its config once, at start)
    assert ds["spec"]["template"]["metadata"]["annotations"] != \
        before["spec"]["template"]["metadata"]["annotations"]


def test_no_plugin_where_none_is_declared() -> None:
    for name in ("base-a100", "base-b200", "agg-a100-standalone", *VARIANTS):
        assert not objects(run(name), "DaemonSet"), name


def test_auto_mode_refuses_the_infiniband_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    # The InfiniBand B200 twin is no AWS instance type, so no Auto Mode NodePool can launch it:
    # pre-flight refuses the pair before anything is created (stacks/preflight/auto_mode.py).
    use_infiniband(monkeypatch)
    result = run_config("base-b200-ib-auto", ib_base_raw({"cluster.computeMode": "auto"}))
    assert result.resources == []
    assert "EKS Auto Mode does not list the" in str(result.error)


@pytest.mark.parametrize("name", sorted(IB_RECIPE_EDITS))
def test_recipe_ucx_workers_request_what_an_infiniband_plugin_advertises(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    result = run_config(f"{name}-ib", ib_standalone_raw(name))
    assert result.error is None, result.error
    _, config, _, ds = rdma_plugin(result)
    (entry,) = config["configList"]
    advertised = f"{entry['resourcePrefix']}/{entry['resourceName']}"
    _, dgd = the_dgd(result)
    workers = [comp for comp in dgd["spec"]["components"] if comp["type"] != "frontend"]
    assert workers
    for comp in workers:
        spec = comp["podTemplate"]["spec"]
        (c,) = spec["containers"]
        rdma = {k: v for k, v in c["resources"]["limits"].items() if k.startswith("rdma/")}
        assert list(rdma) == [advertised], f"{name} {comp['name']}: {rdma}"
        assert int(rdma[advertised]) <= entry["rdmaHcaMax"]
        group = spec["nodeSelector"]["dynamo-bench.io/node-group"]
        assert node_matches(ds["spec"]["template"]["spec"]["affinity"],
                            b200_node(group, IB_B200))


@pytest.mark.parametrize("name", sorted(IB_RECIPE_EDITS))
def test_shipped_disagg_recipes_request_efa_and_no_rdma_device(name: str) -> None:
    _, dgd = the_dgd(run(name))
    for c in containers(dgd)[1:]:
        limits = c["resources"]["limits"]
        assert not [k for k in limits if k.startswith("rdma/")]
        assert int(limits["vpc.amazonaws.com/efa"]) >= 1


def test_deploy_warns_what_the_plugin_advertises_on_efa() -> None:
    raw = raw_config("base-b200")
    raw["cluster"]["rdma"] = dict(IB_PLUGIN)
    note = efa_fabric_note(parse_config("base-b200-rdma", raw).cluster)
    assert note and "p6-b200.48xlarge" in note and "0 rdma/shared_ib" in note
    assert efa_fabric_note(load_stack("base-a100").cluster) is None  # no plugin declared


# --- DCGM exporter placement -----------------------------------------------------------------

def dcgm_affinity(base: str) -> dict[str, Any]:
    chart = run(base).helm_charts()["dcgm-exporter"]
    return chart.inputs["values"]["affinity"]


@pytest.mark.parametrize("base", ["base-a100", "base-b200"])
def test_dcgm_runs_on_every_gpu_node_a_variant_may_add(base: str) -> None:
    affinity = dcgm_affinity(base)
    for group in load_stack(base).cluster.node_groups:
        labels = b200_node(group.name, group.instance_type)
        is_gpu = INSTANCE_TYPES[group.instance_type].gpu is not None
        assert node_matches(affinity, labels) == is_gpu, group.name
    # A variant's extra GPU group joins the running base under a name the base never saw.
    raw = raw_config("agg-a100")
    raw["cluster"]["nodeGroups"] = [{"name": "g6e-extra", "instanceType": "g6e.12xlarge",
                                     "count": 1}]
    variant = run_config("agg-a100-extra-gpu", raw)
    assert variant.error is None, variant.error
    (group,) = variant.of_type("aws:eks/nodeGroup:NodeGroup")
    labels = {**group.inputs["labels"], "node.kubernetes.io/instance-type": "g6e.12xlarge"}
    assert node_matches(dcgm_affinity("base-a100"), labels)


# --- refusals come before anything is created ------------------------------------------------

@pytest.mark.parametrize(("stack", "change", "field"), [
    ("disagg-b200-solar2", lambda raw: raw["serving"]["env"].pop("VLLM_SSM_CONV_STATE_LAYOUT"),
     "dynamo-bench:serving.workers[0].env"),
    ("agg-b200-kexaone", lambda raw: raw["serving"]["workers"][0].update(tensorParallelSize=2),
     "dynamo-bench:serving.workers[0].tensorParallelSize"),
    ("base-b200", lambda raw: raw["cluster"].update(rdma={**IB_PLUGIN, "nodeGroups": ["cpu"]}),
     "dynamo-bench:cluster.rdma.nodeGroups[0]"),
    ("disagg-b200-axk2", lambda raw: raw["serving"].update(
        transfer="nixl-ucx", rdma=IB_RECIPE_EDITS["disagg-b200-axk2"]["serving.rdma"]),
     "dynamo-bench:serving.rdma"),
], ids=["solar-disagg-without-conv-layout", "k-exaone-at-tp2", "rdma-plugin-on-cpu-group",
        "ucx-over-infiniband-on-efa"])
def test_invalid_recipe_stack_registers_nothing(stack: str, change, field: str) -> None:
    raw = raw_config(stack)
    change(raw)
    result = run_config(f"{stack}-broken", raw)
    assert isinstance(result.error, StackError), result.error
    assert any(p.field == field for p in result.error.problems), result.error.problems
    assert result.resources == []
