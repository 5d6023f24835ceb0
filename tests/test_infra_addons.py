"""Every EKS add-on the program creates passes its add-on's own configuration schema (vendored
excerpts in tests/schemas/eks-addons/, sources in their README): EKS refuses unknown keys
(aws/containers-roadmap#2642), so a Helm-chart value passed as add-on configuration fails
`pulumi up` of the base (the EFS CSI driver's `controller.tags`, containers-roadmap#2755)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pulumi_harness import aws_stacks, run

from stacks.config.loader import load_stack

SCHEMAS = Path(__file__).parent / "schemas" / "eks-addons"


def _schema(addon: str) -> dict | None:
    path = SCHEMAS / f"{addon}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _errors(addon: str, values: dict) -> list[str]:
    validator = jsonschema.Draft201909Validator(_schema(addon))
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(values)]


@pytest.mark.parametrize("name", [n for n in aws_stacks() if not load_stack(n).is_attached])
def test_every_addon_configuration_passes_its_published_schema(name: str) -> None:
    result = run(name)
    addons = result.of_type("aws:eks/addon:Addon")
    assert addons, f"{name} creates no add-on"
    for addon in addons:
        values = addon.inputs.get("configurationValues")
        if not values:
            continue
        addon_name = addon.inputs["addonName"]
        assert _schema(addon_name) is not None, (
            f"{addon_name} is configured but no schema of it is vendored: confirm its keys "
            "with `aws eks describe-addon-configuration` (tests/schemas/eks-addons/README.md)")
        assert _errors(addon_name, json.loads(values)) == [], addon.name


def test_the_efs_schema_refuses_the_helm_charts_access_point_tags() -> None:
    # What the base stack used to pass: a Helm chart value, not an add-on key.
    old = {"controller": {"tags": {"project": "dynamo-bench", "stack": "base-a100"}}}
    assert any("tags" in e for e in _errors("aws-efs-csi-driver", old))
    assert _errors("aws-efs-csi-driver", {"controller": {"deleteAccessPointRootDir": True}}) == []


def test_the_ebs_schema_takes_extra_volume_tags_and_checks_their_values() -> None:
    assert _errors("aws-ebs-csi-driver", {"controller": {"extraVolumeTags": {"a": "b"}}}) == []
    assert _errors("aws-ebs-csi-driver", {"controller": {"extraVolumeTags": {"a": "{{x}}"}}})
    assert _errors("aws-ebs-csi-driver", {"controller": {"tags": {"a": "b"}}})
