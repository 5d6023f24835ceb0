"""dynamo-bench Pulumi program: one stack = one experiment variant.

Reads the stack's typed config (`dynamo-bench:<key>`), runs pre-flight BEFORE creating anything
(an invalid stack registers no resource and every problem is listed with its fix), then builds
the components (components/program.py) and exports the outputs the runner and variants read.
Pre-flight is `stacks.preflight.run.run_preflight` and `consult_engine` (every command line
through the image's own Dynamo/vLLM parsers, cached), the same functions `python -m stacks check`
runs; here it also gets what only Pulumi knows (every config key, provider config, whether the
Hugging Face token is a secret) and that the stack is being deployed. Without the parser
environments the program warns once (under CI it refuses).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, is_config_secret

from components.program import build
from stacks.config.api_access import CONFIG_KEY as API_ACCESS_KEY
from stacks.config.campaign_config import parse_campaign, parse_node_group_sizes
from stacks.config.loader import PROJECT, StackError, load_stack_file, parse_config
from stacks.config.schema import CONFIG_KEYS
from stacks.config.stack_file import CAMPAIGN_KEY, NODE_GROUP_SIZES_KEY, PROVIDER_NAMESPACES
from stacks.preflight.deploy_checks import DeployFacts
from stacks.preflight.run import (
    consult_engine,
    engine_problem,
    first_time,
    load_base,
    run_preflight,
)


def read_config(cfg: pulumi.Config) -> dict[str, Any]:
    """Structured values arrive as JSON text; plain strings (target) stay strings."""
    raw: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        value = cfg.get(key)
        if value is None:
            continue
        try:
            raw[key] = json.loads(value)
        except json.JSONDecodeError:
            raw[key] = value
    return raw


def hf_token_state(cfg: pulumi.Config) -> str:
    """How the token is set: "secret" (`pulumi config set --secret`), "plain", "empty" or
    "unset"."""
    value = cfg.get("hfToken")
    if value is None:
        return "unset"
    if not value.strip():
        return "empty"
    return "secret" if is_config_secret(cfg.full_key("hfToken")) else "plain"


def deploy_facts(cfg: pulumi.Config) -> DeployFacts:
    """What Pulumi passes beyond the typed config: every key, the providers' own config."""
    config = CONFIG.get()
    providers = {k: v for k, v in config.items()
                 if k.partition(":")[0] in PROVIDER_NAMESPACES}
    return DeployFacts(hf_token=hf_token_state(cfg), provider_config=providers,
                       config_keys=tuple(config), deploying=True,
                       api_access=cfg.get(API_ACCESS_KEY), campaign=cfg.get(CAMPAIGN_KEY),
                       node_group_sizes=cfg.get(NODE_GROUP_SIZES_KEY))


def main() -> None:
    cfg = pulumi.Config(PROJECT)
    raw = read_config(cfg)
    if not raw:
        # A derived stack `<variant>.<base>` has no config of its own: its variant's file,
        # attached to <base> (stacks/config/loader.py); any other stack without config fails below.
        try:
            raw = load_stack_file(pulumi.get_stack()).config
        except StackError:
            raw = {}
    stack = parse_config(pulumi.get_stack(), raw)
    base = load_base(stack)
    report = run_preflight(stack, base, facts=deploy_facts(cfg))
    # the engine's own parsers, as `stacks check` asks them (one cached step): the image's
    # parser refuses a command line here, not in its pod after the GPU nodes are up
    verdict = consult_engine([report])
    if verdict.fatal:
        report.problems.append(engine_problem(verdict))
    elif verdict.note and first_time(verdict.note):
        pulumi.log.warn(verdict.note)
    if report.problems:
        raise StackError(stack.name, report.problems)
    token = cfg.require_secret("hfToken") if base is None else None
    # pre-flight refused malformed values already (stacks.preflight.deploy_checks)
    campaign = parse_campaign(cfg.get(CAMPAIGN_KEY))[0]
    sizes = parse_node_group_sizes(cfg.get(NODE_GROUP_SIZES_KEY))[0]
    for key, value in build(stack, base, token, cfg.get(API_ACCESS_KEY), campaign,
                            sizes).items():
        pulumi.export(key, value)


main()
