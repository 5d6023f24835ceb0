"""Security defaults of what `pulumi up` builds: the Kubernetes API endpoint reachable only from
the deployer's CIDRs (or private), never 0.0.0.0/0 by default; the Grafana admin password a
generated Pulumi secret, never the chart default; IMDS out of pods' reach (hop limit 1)."""

from __future__ import annotations

import pytest
from pulumi_harness import PLACEHOLDER_TOKEN, k8s_objects, raw_config, run

from components.monitoring_specs import GRAFANA_ADMIN_SECRET, GRAFANA_PASSWORD_KEY
from stacks.render.offline import (
    PLACEHOLDER_API_ACCESS,
    SECRET_KEYS,
    ProgramRun,
    config_strings,
    run_program,
)
from workloads.targets.aws.k8s_outputs import SECRET_OUTPUTS, public_outputs

OWNERS = ["base-a100", "base-b200", "agg-a100-standalone"]


# A VPC the deployer's machine is inside (a private endpoint is reachable only from there);
# the offline answers put the first subnet in us-east-1a, where base-a100 pins its p4d group.
EXISTING_VPC = {"id": "vpc-0123456789abcdef0",
                "privateSubnetIds": ["subnet-0123456789abcde01", "subnet-0123456789abcde00"]}


def _run_with_access(access: str | None, vpc: dict | None = None) -> ProgramRun:
    raw = raw_config("base-a100")
    if vpc is not None:
        raw["cluster"]["vpc"] = vpc
    return run_program("base-access", config_strings(raw, PLACEHOLDER_TOKEN, access),
                       region="us-east-1", secret_keys=SECRET_KEYS)


@pytest.mark.parametrize("name", OWNERS)
def test_the_api_endpoint_is_open_only_to_the_configured_cidrs(name: str) -> None:
    (cluster,) = run(name).of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is True
    assert cluster.inputs["publicAccessCidrs"] == ["198.51.100.0/24"]  # the offline placeholder
    assert cluster.inputs["endpointPrivateAccess"] is True
    assert PLACEHOLDER_API_ACCESS == '["198.51.100.0/24"]'


def test_a_private_endpoint_has_no_public_access() -> None:
    result = _run_with_access("private", EXISTING_VPC)
    assert result.error is None, result.error
    (cluster,) = result.of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in cluster.inputs


@pytest.mark.parametrize(("access", "says"), [
    (None, "never defaulted"), ('["0.0.0.0/0"]', "whole internet"),
    ('["::/0"]', "whole internet"), ('["10.0.0.300/32"]', "not a CIDR"), ("[]", "empty"),
])
def test_missing_or_open_endpoint_access_is_refused_before_anything_is_created(
        access: str | None, says: str) -> None:
    result = _run_with_access(access)
    assert result.error is not None and not result.resources
    problem = next(p for p in result.error.problems
                   if p.field == "dynamo-bench:apiAccessCidrs")
    assert says in problem.message and "pulumi config set" in problem.fix


def test_a_variant_needs_no_endpoint_access() -> None:
    raw = raw_config("agg-a100")
    base = run("base-a100")
    result = run_program("agg-access", config_strings(raw, None, None), region="us-east-1",
                         stack_outputs={"base-a100": (base.outputs, base.secret_outputs)})
    assert result.error is None, result.error


@pytest.mark.parametrize("name", OWNERS)
def test_grafana_admin_password_is_a_generated_pulumi_secret(name: str) -> None:
    result = run(name)
    values = result.helm_charts()["kube-prometheus-stack"].inputs["values"]["grafana"]
    assert "adminPassword" not in values               # never the chart default, never inline
    assert values["admin"]["existingSecret"] == GRAFANA_ADMIN_SECRET
    (password,) = result.of_type("random:index/randomPassword:RandomPassword")
    assert password.inputs["length"] >= 32
    (record, secret) = next((r, o) for r, o in k8s_objects(result)
                            if o["kind"] == "Secret" and o["metadata"]["name"]
                            == GRAFANA_ADMIN_SECRET)
    assert secret["metadata"]["namespace"] == "monitoring"
    assert secret["stringData"][GRAFANA_PASSWORD_KEY].startswith("offline-")
    assert "stringData" in record.secret_inputs        # a Pulumi secret in the state
    assert "grafanaAdminPassword" in result.secret_outputs
    # every secret output is one the runner keeps out of its run records
    assert set(result.secret_outputs) <= set(SECRET_OUTPUTS)
    assert not set(public_outputs(result.outputs)) & set(result.secret_outputs)


@pytest.mark.parametrize("name", OWNERS)
def test_node_launch_templates_keep_imds_away_from_pods(name: str) -> None:
    for lt in run(name).of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        options = lt.inputs["metadataOptions"]
        assert options["httpTokens"] == "required"
        assert options["httpPutResponseHopLimit"] == 1, lt.name


def test_a_private_endpoint_on_a_vpc_the_stack_creates_is_refused_before_anything_is_created(
        ) -> None:
    # nothing outside the new VPC could reach the API (aws.md R4)
    result = _run_with_access("private")
    assert result.error is not None and not result.resources
    (problem,) = [p for p in result.error.problems if p.field == "dynamo-bench:apiAccessCidrs"]
    assert "cluster.vpc.id" in problem.fix

