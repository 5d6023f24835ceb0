"""What each kind of stack builds, in which order, what it exports; invalid stacks build
nothing; `python -m stacks render` writes what would be created."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pulumi_harness import (
    PLACEHOLDER_TOKEN,
    ProgramRun,
    aws_stacks,
    k8s_objects,
    raw_config,
    run,
    run_config,
)
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import StackError, load_stack
from stacks.preflight.run import effective_cluster

OWNED_ONLY = {"aws:ec2/vpc:Vpc", "eks:index:Cluster", "aws:efs/fileSystem:FileSystem",
              "aws:efs/mountTarget:MountTarget", "eks:index:ManagedNodeGroup"}
VARIANTS = [n for n in aws_stacks() if load_stack(n).is_attached]


def types(result: ProgramRun) -> set[str]:
    return {r.type for r in result.resources}


def charts(result: ProgramRun) -> dict[str, dict]:
    return {c: r.inputs for c, r in result.helm_charts().items()}


def kinds(result: ProgramRun) -> list[str]:
    return [o["kind"] for _, o in k8s_objects(result)]


def test_every_aws_stack_runs() -> None:
    for name in aws_stacks():
        assert run(name).error is None, f"{name}: {run(name).error}"


def test_standalone_builds_everything() -> None:
    result = run("agg-a100-standalone")
    assert types(result) >= OWNED_ONLY
    assert {"kube-prometheus-stack", "dcgm-exporter", "dynamo-platform",
            "nvidia-device-plugin"} <= set(charts(result))
    # UCX/none transfer: no EFA interfaces, no placement group, no EFA plugin.
    assert "aws-efa-k8s-device-plugin" not in charts(result)
    assert not result.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert {"DynamoGraphDeployment", "Job", "Secret", "PersistentVolumeClaim",
            "StorageClass"} <= set(kinds(result))
    assert len(result.of_type("aws:efs/mountTarget:MountTarget")) == 3


def test_base_builds_the_cluster_and_serves_nothing() -> None:
    result = run("base-a100")
    assert types(result) >= OWNED_ONLY
    assert "DynamoGraphDeployment" not in kinds(result)
    assert kinds(result).count("Job") == 1  # the model download
    assert {"dynamo-platform", "nvidia-device-plugin", "aws-efa-k8s-device-plugin"} <= set(
        charts(result))
    # EFA-capable GPU groups get EFA interfaces and a cluster placement group in one AZ.
    groups = {g.inputs["nodeGroupName"]: g.inputs for g in
              result.of_type("eks:index:ManagedNodeGroup")}
    # The CPU group (frontends, load generators) joins their zone (aws.md S1, runner.md R5).
    assert len(groups["p4d"]["subnetIds"]) == 1
    assert groups["cpu"]["subnetIds"] == groups["p4d"]["subnetIds"]
    assert groups["cpu"]["taints"] == [] and groups["p4d"]["taints"][0]["key"] == "nvidia.com/gpu"
    assert groups["p4d"]["amiType"] == "AL2023_x86_64_NVIDIA"
    assert groups["p4d"]["labels"] == {"dynamo-bench.io/node-group": "p4d"}
    assert len(result.of_type("aws:ec2/placementGroup:PlacementGroup")) == 2


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_builds_only_its_graph_on_the_base(name: str) -> None:
    result = run(name)
    assert not types(result) & OWNED_ONLY
    assert not charts(result)
    assert not result.of_type("kubernetes:core/v1:Secret")
    base_name = load_stack(name).cluster.attach_to
    refs = result.of_type("pulumi:pulumi:StackReference")
    assert [r.inputs["name"] for r in refs] == [f"organization/dynamo-bench/{base_name}"]
    assert kinds(result).count("DynamoGraphDeployment") == 1
    base = run(base_name).outputs
    assert result.outputs["clusterName"] == base["clusterName"]
    # Every Kubernetes object goes through the provider built from the base's kubeconfig.
    provider = next(r for r in result.resources if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == base["kubeconfig"]
    for record, _ in k8s_objects(result):
        assert record.provider and record.provider.startswith(provider.urn)


def test_variant_with_another_model_downloads_it_beside_the_base_model() -> None:
    jobs = [o for _, o in k8s_objects(run("agg-l40s-fp8")) if o["kind"] == "Job"]
    # Named after the variant too: another variant of the same model owns its own Job.
    (name,) = [j["metadata"]["name"] for j in jobs]
    assert name.startswith("model-download-agg-l40s-fp8-qwen-qwen3-30b-a3b-fp8-")
    env = {e["name"]: e.get("value") for e in jobs[0]["spec"]["template"]["spec"]["containers"][0]
           ["env"]}
    assert env["MODEL_ID"] == "Qwen/Qwen3-30B-A3B-FP8"
    assert not [o for _, o in k8s_objects(run("agg-a100")) if o["kind"] == "Job"]


def test_variant_extra_node_group_joins_the_base_cluster() -> None:
    raw = raw_config("agg-a100")
    raw["cluster"]["nodeGroups"] = [{"name": "p4d-extra", "instanceType": "p4d.24xlarge",
                                     "count": 1, "availabilityZone": "us-east-1a"}]
    result = run_config("agg-a100-extra", raw)
    assert result.error is None, result.error
    group = result.of_type("aws:eks/nodeGroup:NodeGroup")[0].inputs
    base = run("base-a100").outputs
    assert group["clusterName"] == base["clusterName"]
    assert group["nodeRoleArn"] == base["nodeRoleArn"]
    assert group["subnetIds"] == [base["subnetsByZone"]["us-east-1a"]]
    assert not types(result) & OWNED_ONLY
    assert "nvidia-device-plugin" not in charts(result)  # the base's plugin covers it


@pytest.mark.parametrize(("change", "field"), [
    (lambda raw: raw["serving"]["workers"][0].update(tensorParallelSize=3),
     "dynamo-bench:serving.workers[0].tensorParallelSize"),
    (lambda raw: raw["cluster"]["nodeGroups"][0].update(instanceType="p3.16xlarge"),
     "dynamo-bench:cluster.nodeGroups[0].instanceType"),
    (lambda raw: raw["serving"].update(topologie="aggregated"), "dynamo-bench:serving.topologie"),
    (lambda raw: raw.update(target="local"), "dynamo-bench:target"),
])
def test_invalid_stack_registers_nothing(change, field: str) -> None:
    raw = raw_config("agg-a100-standalone")
    change(raw)
    result = run_config("broken", raw)
    assert isinstance(result.error, StackError)
    assert any(p.field == field for p in result.error.problems), result.error.problems
    assert result.resources == []


def test_invalid_variant_lists_every_problem_and_registers_nothing() -> None:
    raw = raw_config("disagg-a100")
    raw["serving"]["workers"][0]["nodeGroup"] = "nope"
    raw["serving"]["namespace"] = "elsewhere"
    result = run_config("broken-variant", raw)
    assert isinstance(result.error, StackError)
    fields = {p.field for p in result.error.problems}
    assert {"dynamo-bench:serving.workers[0].nodeGroup", "dynamo-bench:serving.namespace"} <= fields
    assert result.resources == []


@pytest.mark.parametrize(("token", "secret", "says"), [
    (None, True, "is not set"), ("hf_plain", False, "plain text")])
def test_hf_token_must_be_a_pulumi_secret(token: str | None, secret: bool, says: str) -> None:
    result = run_config("no-token", raw_config("base-a100"), hf_token=token,
                        token_is_secret=secret)
    assert isinstance(result.error, StackError)
    problem = next(p for p in result.error.problems if p.field == "dynamo-bench:hfToken")
    assert says in problem.message and "--secret" in problem.fix
    assert result.resources == []
    # A variant writes no Secret: it needs no token.
    assert run_config("agg-a100-no-token", raw_config("agg-a100"), hf_token=None).error is None


def _after(result: ProgramRun, later: str, earlier: str) -> bool:
    """`later` depends on `earlier` (by resource name suffix), directly."""
    rec = next(r for r in result.resources if r.name == later)
    return any(d.endswith(f"::{earlier}") for d in rec.depends_on)


def test_install_order_follows_the_design_brief() -> None:
    result = run("agg-a100-standalone")
    # namespace, storage class, HF token Secret -> nodes (GPU check) -> monitoring
    assert _after(result, "secret-dynamo-hf-token", "namespace-dynamo")
    assert _after(result, "monitoring-kube-prometheus-stack", "storageclass-ebs-tagged")
    assert _after(result, "monitoring-kube-prometheus-stack", "secret-dynamo-hf-token")
    assert _after(result, "monitoring-kube-prometheus-stack", "cluster-nodes-p4d")
    assert _after(result, "monitoring-kube-prometheus-stack", "cluster-nodes-nvidia-device-plugin")
    # -> Dynamo platform -> model download -> serving
    assert _after(result, "dynamo-platform-chart", "monitoring-kube-prometheus-stack")
    assert _after(result, "job-dynamo-model-download", "dynamo-platform-chart")
    assert _after(result, "job-dynamo-model-download", "persistentvolumeclaim-dynamo-model-cache")
    assert _after(result, "dynamographdeployment-dynamo-agg-a100-standalone",
                  "job-dynamo-model-download")


@pytest.mark.parametrize("name", aws_stacks())
def test_stack_outputs(name: str) -> None:
    result = run(name)
    out = result.outputs
    for key in ("clusterName", "kubeconfig", "dynamoNamespace", "pvcNames", "nodeGroupNames",
                "region"):
        assert out.get(key), f"{name}: output {key} missing"
    assert "kubeconfig" in result.secret_outputs
    assert out["pvcNames"] == ["model-cache", "benchmark-results"]
    assert out["prometheusService"] == "prometheus-kube-prometheus-prometheus"
    if load_stack(name).serving is not None:
        assert out["frontendService"] == f"{out['graphName']}-frontend"
    stack = load_stack(name)
    base = load_stack(stack.cluster.attach_to) if stack.is_attached else None
    assert out["nodeGroupNames"] == [g.name for g in effective_cluster(stack, base).node_groups]


def test_render_writes_objects_and_aws_resources(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["render", "agg-a100-standalone", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "agg-a100-standalone"
    objects = list(yaml.safe_load_all((folder / "kubernetes.yaml").read_text()))
    assert sorted(o["kind"] for o in objects) == sorted(kinds(run("agg-a100-standalone")))
    aws = yaml.safe_load((folder / "aws-resources.yaml").read_text())
    assert {"aws:ec2/vpc:Vpc", "eks:index:Cluster"} <= {r["type"] for r in aws}
    releases = yaml.safe_load((folder / "helm-releases.yaml").read_text())
    assert all(r["version"] and r["repository"] for r in releases)
    text = "".join(p.read_text() for p in folder.iterdir())
    assert PLACEHOLDER_TOKEN not in text and "get-token" not in text  # secrets redacted
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert secret["stringData"] == "[secret]"


def test_render_of_an_invalid_stack_lists_the_problems_and_exits_2(tmp_path: Path,
                                                                    monkeypatch) -> None:
    raw = raw_config("agg-a100-standalone")
    raw["serving"]["workers"][0]["tensorParallelSize"] = 3
    error = run_config("agg-a100-standalone", raw).error
    assert isinstance(error, StackError)
    # The CLI renders shipped stack files; hand it the planted run instead of the file's.
    monkeypatch.setattr("stacks.render.write.run_stack", lambda name: run_config(name, raw))
    result = CliRunner().invoke(app, ["render", "agg-a100-standalone", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "dynamo-bench:serving.workers[0].tensorParallelSize" in result.output
    assert not (tmp_path / "agg-a100-standalone").exists()
