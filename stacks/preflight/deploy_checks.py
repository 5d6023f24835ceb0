"""Checks of what Pulumi knows beyond the typed config (pure), shared by `stacks check` and the
Pulumi program through `stacks.preflight.run.run_preflight`.

`DeployFacts` carries them: every config key (full `<namespace>:<key>`), the providers' own
config, how the Hugging Face token is stored, and who may reach the cluster's API endpoint
(`dynamo-bench:apiAccessCidrs`, stacks/config/api_access.py). The program reads them from Pulumi's
config; `stacks check` from the stack file, which is where `pulumi config set --secret` writes
(Pulumi.yaml sets `stackConfigDir: stacks`). In the file the token may still be missing (it is
set just before `pulumi up`), so the CLI checks it, and the endpoint access, only when they are
there; the program requires both for a stack that owns its cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stacks.config.api_access import PRIVATE, ApiAccess, parse_api_access
from stacks.config.campaign_config import (
    campaign_problems,
    parse_campaign,
    parse_node_group_sizes,
    sizes_problems,
)
from stacks.config.errors import Problem
from stacks.config.schema import CONFIG_KEYS, StackConfig
from stacks.config.stack_file import API_ACCESS_KEY, PROJECT, config_key_problems
from stacks.conventions.k8s_names import dynamo_namespace

P = f"{PROJECT}:"
HF_TOKEN_FIX = f"pulumi config set --secret {PROJECT}:hfToken <token>"


@dataclass(frozen=True)
class DeployFacts:
    # "secret", "plain", "empty", "unset" (Pulumi has no token), or None (not known: the CLI,
    # no token in the file yet)
    hf_token: str | None = None
    provider_config: dict[str, Any] = field(default_factory=dict)
    config_keys: tuple[str, ...] = ()
    # The Pulumi program itself: the stack must be one `pulumi up` can build.
    deploying: bool = False
    # dynamo-bench:apiAccessCidrs as Pulumi reads it (None: not set)
    api_access: str | None = None
    # dynamo-bench:campaign and :nodeGroupSizes as Pulumi reads them
    # (stacks/config/campaign_config.py)
    campaign: str | None = None
    node_group_sizes: str | None = None


def deploy_problems(stack: StackConfig, base: StackConfig | None,
                    facts: DeployFacts) -> list[Problem]:
    out = config_key_problems(list(facts.config_keys), CONFIG_KEYS)
    owns_storage = base is None and not stack.is_attached
    if owns_storage and stack.target == "aws" and facts.hf_token in ("plain", "unset", "empty"):
        state = {"plain": "is stored in plain text", "unset": "is not set",
                 "empty": "is empty"}[facts.hf_token]
        out.append(Problem(f"{P}hfToken", f"the Hugging Face token {state}; the model download "
                           "and the workers read it from a Secret", HF_TOKEN_FIX))
    owns_cluster = base is None and not stack.is_attached and stack.target == "aws"
    if owns_cluster and (facts.deploying or facts.api_access is not None):
        access, problems = parse_api_access(facts.api_access)
        out += problems
        out += private_endpoint_problems(stack, access)
    out += campaign_key_problems(stack, facts)
    if facts.deploying and stack.target != "aws":
        out.append(Problem(f"{P}target", f"target is {stack.target}: it runs on the local "
                           "engine and has no infrastructure", "use `python -m workloads run`, "
                           "or target: aws"))
    if base is not None and stack.serving is not None \
            and stack.serving.namespace != dynamo_namespace(base):
        out.append(Problem(f"{P}serving.namespace", f"'{stack.serving.namespace}' is not the "
                           f"namespace of base '{base.name}' ('{dynamo_namespace(base)}'), where "
                           "the model cache claim and the token Secret live",
                           f"set namespace: {dynamo_namespace(base)} or remove it"))
    return out


def private_endpoint_problems(stack: StackConfig, access: ApiAccess | None) -> list[Problem]:
    """A private-only endpoint on a VPC this same `pulumi up` creates cannot be reached.

    pulumi-eks builds the Kubernetes provider from the cluster's kubeconfig, whose server is the
    cluster endpoint (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, createCore); with public
    access disabled "All traffic to your cluster API server must come from within your
    cluster's VPC or a connected network" (awsdocs/amazon-eks-user-guide
    latest/ug/clusters/cluster-endpoint.adoc @0ce90ef1, table row public Disabled / private
    Enabled). A VPC made by this stack did not
    exist when the deployer started, so the deployer cannot be inside it: the VPC, cluster and
    node groups would be created and billed, then the first Kubernetes object times out.
    """
    if access is None or access.public_cidrs or stack.cluster.vpc.id is not None:
        return []
    return [Problem(f"{P}{API_ACCESS_KEY}", f"'{PRIVATE}' makes the Kubernetes API reachable "
                    "only from inside the cluster's VPC, and this stack creates that VPC "
                    "(cluster.vpc.id is not set): pulumi up runs outside it and cannot create "
                    "the cluster's Kubernetes objects",
                    f"allow this machine's address (pulumi config set {PROJECT}:"
                    f"{API_ACCESS_KEY} '[\"<your IP>/32\"]'), or set cluster.vpc.id (with "
                    "privateSubnetIds) to a VPC this machine is inside")]


def campaign_key_problems(stack: StackConfig, facts: DeployFacts) -> list[Problem]:
    """The campaign's deployer keys, when set, must be well formed and fit the stack."""
    campaign, out = parse_campaign(facts.campaign)
    if campaign is not None:
        out += campaign_problems(stack, campaign)
    sizes, problems = parse_node_group_sizes(facts.node_group_sizes)
    out += problems
    if sizes is not None:
        out += sizes_problems(stack, sizes)
    return out
