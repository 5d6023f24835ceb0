"""Checks of what Pulumi knows beyond the typed config (pure), shared by `stacks check` and the
Pulumi program through `stacks.preflight.run_preflight`.

`DeployFacts` carries them: every config key (full `<namespace>:<key>`), the providers' own
config, how the Hugging Face token is stored, and who may reach the cluster's API endpoint
(`dynamo-bench:apiAccessCidrs`, stacks/api_access.py). The program reads them from Pulumi's
config; `stacks check` from the stack file, which is where `pulumi config set --secret` writes
(Pulumi.yaml sets `stackConfigDir: stacks`). In the file the token may still be missing (it is
set just before `pulumi up`), so the CLI checks it, and the endpoint access, only when they are
there; the program requires both for a stack that owns its cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stacks.api_access import parse_api_access
from stacks.errors import Problem
from stacks.k8s_names import dynamo_namespace
from stacks.schema import CONFIG_KEYS, StackConfig
from stacks.stack_file import PROJECT, config_key_problems

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
        out += parse_api_access(facts.api_access)[1]
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
