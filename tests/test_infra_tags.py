"""Cost tags on everything a stack pays for.

Which resources must carry tags is found by introspection: a recorded AWS (or pulumi-eks)
resource type is taggable when its SDK class's constructor takes `tags` (this test's own check,
independent of components/tags.py). Each must end up with project, stack and experiment (+ the
stack's extras): through its explicit `tags` AND (for AWS) its provider's default tags. Things
created later by controllers are covered through their settings: launch-template tag
specifications (instances, volumes), the EBS StorageClass, the CSI add-ons, Auto Mode NodeClass.
"""

from __future__ import annotations

import importlib
import inspect
import json

import pytest
from pulumi_harness import (
    aws_stacks,
    k8s_objects,
    provider_default_tags,
    raw_config,
    run,
    run_config,
)

from stacks.config.loader import load_stack


def _sdk_takes_tags(type_token: str) -> bool:
    package, module, name = type_token.split(":")
    root = {"aws": "pulumi_aws", "eks": "pulumi_eks"}[package]
    mod = module.split("/")[0]
    cls = getattr(importlib.import_module(root if mod == "index" else f"{root}.{mod}"), name)
    return "tags" in inspect.signature(cls._internal_init).parameters


def required_tags(name: str) -> dict[str, str]:
    stack = load_stack(name)
    return {"project": "dynamo-bench", "stack": name, "experiment": stack.tags.experiment,
            **stack.tags.extra}


def _assert_has(tags: dict | None, want: dict[str, str], where: str) -> None:
    tags = tags or {}
    missing = {k: v for k, v in want.items() if tags.get(k) != v}
    assert not missing, f"{where}: missing or wrong tags {missing} (has {tags})"


@pytest.mark.parametrize("name", aws_stacks())
def test_every_taggable_resource_is_tagged(name: str) -> None:
    result = run(name)
    want = required_tags(name)
    checked = 0
    for r in result.resources:
        if r.type.split(":")[0] not in ("aws", "eks"):
            continue
        if not _sdk_takes_tags(r.type):
            continue
        checked += 1
        _assert_has(r.inputs.get("tags"), want, f"{r.type} {r.name} (explicit tags)")
        if r.type.startswith("aws:"):
            effective = {**provider_default_tags(result, r), **(r.inputs.get("tags") or {})}
            _assert_has(effective, want, f"{r.type} {r.name} (default + explicit)")
            _assert_has(provider_default_tags(result, r), want,
                        f"{r.type} {r.name} (provider default tags)")
    stack = load_stack(name)
    # Auto Mode clusters have no launch templates, node groups or node role of their own
    floor = 0 if stack.is_attached else 15 if stack.cluster.compute_mode.value == "auto" else 20
    assert checked >= floor, f"only {checked} taggable resources checked"


def test_providers_carry_default_tags() -> None:
    for name in aws_stacks():
        for p in run(name).of_type("pulumi:providers:aws"):
            tags = json.loads(p.inputs["defaultTags"])["tags"]
            _assert_has(tags, required_tags(name), f"{name} aws provider default_tags")


@pytest.mark.parametrize("name", ["base-a100", "agg-a100-standalone"])
def test_controller_created_resources_are_tagged(name: str) -> None:
    result, want = run(name), required_tags(name)
    templates = result.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(templates) == len(load_stack(name).cluster.node_groups)
    for lt in templates:
        specs = {s["resourceType"]: s["tags"] for s in lt.inputs["tagSpecifications"]}
        for kind in ("instance", "volume", "network-interface"):
            _assert_has(specs.get(kind), want, f"{lt.name} tagSpecifications[{kind}]")
    ebs = next(o for _, o in k8s_objects(result)
               if o["kind"] == "StorageClass" and o["provisioner"].startswith("ebs."))
    ebs_tags = dict(v.split("=", 1) for k, v in ebs["parameters"].items()
                    if k.startswith("tagSpecification_"))
    _assert_has(ebs_tags, want, "EBS StorageClass tagSpecification_N")
    addons = {a.inputs["addonName"]: json.loads(a.inputs["configurationValues"])
              for a in result.of_type("aws:eks/addon:Addon") if "configurationValues" in a.inputs}
    _assert_has(addons["aws-ebs-csi-driver"]["controller"]["extraVolumeTags"], want,
                "EBS CSI volumes")
    # EFS access points are the program's own (the add-on cannot tag the ones it creates).
    points = result.of_type("aws:efs/accessPoint:AccessPoint")
    assert len(points) == 2
    for ap in points:
        _assert_has(ap.inputs["tags"], want, f"EFS access point {ap.name}")


def test_auto_mode_node_classes_tag_instances() -> None:
    raw = raw_config("base-a100")
    raw["cluster"]["computeMode"] = "auto"
    raw["tags"]["extra"] = {"team": "inference"}
    result = run_config("base-auto", raw)
    assert result.error is None, result.error
    want = {"project": "dynamo-bench", "stack": "base-auto", "experiment": "a100-campaign",
            "team": "inference"}
    classes = [o for _, o in k8s_objects(result) if o["kind"] == "NodeClass"]
    assert classes
    for c in classes:
        _assert_has(c["spec"]["tags"], want, f"NodeClass {c['metadata']['name']}")


def test_variant_extra_node_groups_carry_the_variant_tags() -> None:
    raw = raw_config("disagg-l40s-decode")
    raw["cluster"]["nodeGroups"] = [{"name": "g6e-extra", "instanceType": "g6e.12xlarge",
                                     "count": 1, "availabilityZone": "us-east-1a"}]
    raw["serving"]["workers"][1]["nodeGroup"] = "g6e-extra"
    result = run_config("disagg-l40s-extra", raw)
    assert result.error is None, result.error
    want = {"project": "dynamo-bench", "stack": "disagg-l40s-extra",
            "experiment": "a100-campaign"}
    groups = result.of_type("aws:eks/nodeGroup:NodeGroup")
    assert [g.inputs["nodeGroupName"] for g in groups] == ["g6e-extra"]
    _assert_has(groups[0].inputs["tags"], want, "extra node group")
    lt = result.of_type("aws:ec2/launchTemplate:LaunchTemplate")[0]
    for spec in lt.inputs["tagSpecifications"]:
        _assert_has(spec["tags"], want, f"extra group {spec['resourceType']}")
