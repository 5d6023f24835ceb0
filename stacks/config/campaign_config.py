"""What a campaign (`python -m workloads campaign`) asks of a stack's `pulumi up` (pure).

Two deployer keys, set in the stack's own config by the campaign through Pulumi's Automation API
(`stack.set_config`), never part of the experiment's typed config:

- `dynamo-bench:campaign` on a variant: the graph name it deploys under, whether the next variant
  keeps its workers (`handOver`: its serving objects are retained when it is destroyed) and
  whether it takes over the running workers of the previous one (`adopt`: the Kubernetes
  provider updates the existing objects instead of refusing them). The campaign removes the key
  once the variant is destroyed.
- `dynamo-bench:nodeGroupSizes` on a base (or standalone) stack: nodes each of its node groups
  runs now ({"p4d": 0, "g6e": 1}); a group it does not name runs its `count`. The campaign
  scales GPU groups no scheduled variant uses down to zero, and back up ahead of need, by
  setting this key and running `up` on the base; `count` stays the capacity the forecast prices.

Both arrive as JSON text (Pulumi hands structured values to the program as JSON); a malformed
value is a Problem naming the key and the fix, like every other config error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, StrictBool, ValidationError

from stacks.config.errors import Problem
from stacks.config.schema import Schema, StackConfig
from stacks.config.stack_file import CAMPAIGN_KEY, NODE_GROUP_SIZES_KEY, PROJECT

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class CampaignDeploy(Schema):
    graph_name: Annotated[str, Field(pattern=DNS_LABEL, max_length=40)]
    hand_over: StrictBool = False
    adopt: StrictBool = False


def _json(value: str | None, key: str) -> tuple[Any, list[Problem]]:
    if value is None:
        return None, []
    try:
        return json.loads(value), []
    except json.JSONDecodeError as exc:
        return None, [Problem(f"{PROJECT}:{key}", f"is not JSON ({exc.msg})",
                              "let `python -m workloads campaign` set it, or remove it")]


def parse_campaign(value: str | None) -> tuple[CampaignDeploy | None, list[Problem]]:
    raw, problems = _json(value, CAMPAIGN_KEY)
    if raw is None:
        return None, problems
    try:
        return CampaignDeploy.model_validate(raw), []
    except ValidationError as exc:
        return None, [Problem(f"{PROJECT}:{CAMPAIGN_KEY}.{'.'.join(map(str, e['loc']))}",
                              e["msg"], "let `python -m workloads campaign` set it, or "
                              f"`pulumi config rm {PROJECT}:{CAMPAIGN_KEY}`")
                      for e in exc.errors()]


def parse_node_group_sizes(value: str | None) -> tuple[dict[str, int] | None, list[Problem]]:
    raw, problems = _json(value, NODE_GROUP_SIZES_KEY)
    if raw is None:
        return None, problems
    field = f"{PROJECT}:{NODE_GROUP_SIZES_KEY}"
    if not isinstance(raw, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in raw.items()):
        return None, [Problem(field, "must map node group names to whole node counts",
                              'write {"<group>": <nodes>, ...}')]
    return dict(raw), []


def sizes_problems(stack: StackConfig, sizes: dict[str, int]) -> list[Problem]:
    """Every named group must be one of the stack's own, sized within 0..count."""
    field = f"{PROJECT}:{NODE_GROUP_SIZES_KEY}"
    own = {g.name: g for g in stack.cluster.node_groups}
    out = []
    for name, nodes in sizes.items():
        group = own.get(name)
        if group is None:
            out.append(Problem(f"{field}.{name}", f"'{name}' is not a node group of this stack "
                               f"({', '.join(own) or 'none'})", "name one of its own groups"))
        elif not 0 <= nodes <= group.count:
            out.append(Problem(f"{field}.{name}", f"{nodes} nodes is outside 0..{group.count} "
                               "(cluster.nodeGroups[].count is the group's capacity)",
                               f"use 0 to {group.count}"))
    return out


def campaign_problems(stack: StackConfig, campaign: CampaignDeploy) -> list[Problem]:
    if not stack.is_attached or stack.serving is None:
        return [Problem(f"{PROJECT}:{CAMPAIGN_KEY}", "only a variant attached to a base is "
                        "deployed by a campaign", f"`pulumi config rm {PROJECT}:{CAMPAIGN_KEY}`")]
    return []


def group_sizes(stack: StackConfig, sizes: dict[str, int] | None) -> dict[str, int]:
    """Nodes each own group runs now: the campaign's size, else its count."""
    sizes = sizes or {}
    return {g.name: sizes.get(g.name, g.count) for g in stack.cluster.node_groups}
