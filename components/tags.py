"""Cost tags: what every AWS resource of a stack carries, and how they reach the resources that
controllers create later (EC2 instances and their volumes, EBS volumes, EFS access points).

The cost report and the teardown audit find a stack's spend and leftovers by these tags, so a
resource without them is invisible to both. Tags reach resources three ways:
- the AWS provider's `default_tags` (every resource the provider creates, even inside remote
  components such as pulumi-eks);
- explicit `tags=` on each taggable resource (visible to the policy pack, which sees inputs);
- controller settings: launch-template tag specifications, Auto Mode NodeClass `spec.tags`,
  the EBS CSI add-on's extra volume tags. EFS access points are created by the program itself
  (the EFS CSI add-on has no configuration key that tags the ones it would create).
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import cache
from typing import Any

from stacks.config.schema import StackConfig
from stacks.preflight.aws_checks import RESERVED_TAG_PREFIXES

REQUIRED_TAG_KEYS = ("project", "stack", "experiment")

# Tag keys AWS or Auto Mode reserve: a NodeClass refuses them, so they never come from a stack
# (pre-flight refuses them first: stacks.preflight.aws_checks).
_RESERVED_PREFIXES = RESERVED_TAG_PREFIXES


def stack_tags(stack: StackConfig) -> dict[str, str]:
    """The tags of every AWS resource of `stack`: project, stack, experiment and the extras."""
    tags = stack.resource_tags()
    bad = [k for k in tags if k.startswith(_RESERVED_PREFIXES)]
    if bad:
        raise ValueError(f"tags {bad} use a reserved prefix: rename them in tags.extra")
    return tags


def launch_template_tag_specifications(tags: dict[str, str]) -> list[dict]:
    """Tag what a node group's launch template starts: instances, their volumes and NICs."""
    return [{"resource_type": kind, "tags": dict(tags)}
            for kind in ("instance", "volume", "network-interface")]


def ebs_csi_addon_configuration(tags: dict[str, str]) -> str:
    """EKS add-on configuration for the EBS CSI driver: tags on every volume it provisions.
    `controller.extraVolumeTags` is a key of the add-on's own configuration schema (as
    `aws eks describe-addon-configuration --addon-name aws-ebs-csi-driver` prints it; excerpt
    vendored in tests/schemas/eks-addons/ with its source)."""
    return json.dumps({"controller": {"extraVolumeTags": dict(tags)}}, sort_keys=True)


def _resource_class(type_token: str) -> type[Any] | None:
    """`aws:ec2/vpc:Vpc` -> pulumi_aws.ec2.Vpc; `eks:index:Cluster` -> pulumi_eks.Cluster."""
    try:
        package, module_path, name = type_token.split(":")
    except ValueError:
        return None
    root = {"aws": "pulumi_aws", "eks": "pulumi_eks"}.get(package)
    if root is None:
        return None
    module = module_path.split("/")[0]
    try:
        mod = importlib.import_module(root if module == "index" else f"{root}.{module}")
    except ImportError:
        return None
    cls = getattr(mod, name, None)
    return cls if inspect.isclass(cls) else None


@cache
def is_taggable(type_token: str) -> bool:
    """Whether an AWS (or pulumi-eks) resource type takes a `tags` input.

    Found by introspecting the SDK class's constructor, so a new resource type is covered
    without anyone keeping a list.
    """
    cls = _resource_class(type_token)
    if cls is None:
        return False
    init = getattr(cls, "_internal_init", None) or cls.__init__
    return "tags" in inspect.signature(init).parameters

