"""Who may reach the cluster's Kubernetes API endpoint (pure; checked by pre-flight through
`stacks.preflight.deploy_checks`, used by `components.api_access`).

The deployer says it with the Pulumi config key `dynamo-bench:apiAccessCidrs`, set like the HF
token (it is about who deploys, not about the experiment, so it lives in no shipped stack file):
a JSON list of CIDRs that may reach the public endpoint (the machine running `pulumi up` and the
runner, e.g. `["203.0.113.7/32"]`), or `"private"` for a private endpoint only (Pulumi and the
runner then run inside the VPC). It is required: no default opens the endpoint, and a /0 range is
refused (EKS's own default for a public endpoint is 0.0.0.0/0; pulumi-eks Cluster
`publicAccessCidrs` / `endpointPublicAccess`; the private endpoint stays on either way).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

from stacks.config.errors import Problem
from stacks.config.stack_file import API_ACCESS_KEY, PROJECT

CONFIG_KEY = API_ACCESS_KEY
PRIVATE = "private"
FIX = (f"pulumi config set {PROJECT}:{CONFIG_KEY} '[\"<your IP>/32\"]' (the machine running "
       f"pulumi and the runner), or pulumi config set {PROJECT}:{CONFIG_KEY} {PRIVATE}")


@dataclass(frozen=True)
class ApiAccess:
    public_cidrs: tuple[str, ...]     # empty: the endpoint is private only


def parse_api_access(raw: str | None) -> tuple[ApiAccess | None, list[Problem]]:
    """The access the config value asks for, or the problems with it."""
    field = f"{PROJECT}:{CONFIG_KEY}"
    if raw is None or not raw.strip():
        return None, [Problem(field, "not set: who may reach the cluster's Kubernetes API "
                              "endpoint is never defaulted (EKS would open it to 0.0.0.0/0)",
                              FIX)]
    if raw.strip() == PRIVATE:
        return ApiAccess(()), []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    cidrs = value if isinstance(value, list) else [value]
    problems = []
    for cidr in cidrs:
        try:
            net = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            problems.append(Problem(field, f"'{cidr}' is not a CIDR", FIX))
            continue
        if net.prefixlen == 0:
            problems.append(Problem(field, f"'{cidr}' opens the Kubernetes API endpoint to the "
                                    "whole internet", FIX))
    if not cidrs:
        problems.append(Problem(field, "an empty list", FIX))
    return (None if problems else ApiAccess(tuple(str(c) for c in cidrs))), problems
