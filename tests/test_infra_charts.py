"""Charts with Helm hooks are installed so that the hooks run (helm.v3.Release), never as a
helm.v4.Chart, which applies hook templates as ordinary, unordered resources
(pulumi/pulumi-kubernetes#555). Which pinned charts have hooks comes from their sources
(tests/schemas/helm-hooks.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pulumi_harness import aws_stacks, run

from components.charts import HOOK_FREE
from stacks.render.offline import HELM_RELEASE

INVENTORY = {(c["chart"], c["version"]): c for c in json.loads(
    (Path(__file__).parent / "schemas" / "helm-hooks.json").read_text())["charts"]}


@pytest.mark.parametrize("name", aws_stacks())
def test_every_chart_with_hooks_is_a_release(name: str) -> None:
    for chart, r in run(name).helm_charts().items():
        key = (chart, r.inputs["version"])
        assert key in INVENTORY, f"{key}: read the chart's templates for hooks and add it"
        if INVENTORY[key]["hooks"]:
            assert r.type == HELM_RELEASE, f"{name}: {chart} has hooks but is a {r.type}"


def test_the_base_installs_the_platform_and_monitoring_as_releases() -> None:
    charts = run("base-a100").helm_charts()
    assert charts["dynamo-platform"].type == HELM_RELEASE
    assert charts["kube-prometheus-stack"].type == HELM_RELEASE
    assert charts["dynamo-platform"].inputs["name"] == "dynamo-platform"
    assert charts["dcgm-exporter"].type != HELM_RELEASE   # no hooks: rendered resources


def test_hook_free_list_agrees_with_the_chart_sources() -> None:
    assert {key for key, c in INVENTORY.items() if not c["hooks"]} == HOOK_FREE
