"""A deployed stack's Pulumi outputs: where they come from and what the runner reads in them.

Sources, first found wins: the file given with `--outputs FILE` (or DYNAMO_BENCH_STACK_OUTPUTS),
made with `pulumi stack output --json --show-secrets --stack <stack> > FILE`; otherwise the
Pulumi CLI itself when it is on PATH. The kubeconfig is a secret output: without
`--show-secrets` Pulumi prints "[secret]", which is refused with that fix. Everything else here
is pure: the in-cluster URLs of the frontend and of Prometheus.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from stacks.config.schema import StackConfig
from stacks.conventions.k8s_names import FRONTEND_PORT, MONITORING_NAMESPACE, PROMETHEUS_PORT
from workloads.targets.base import Endpoints, TargetError

REPO = Path(__file__).resolve().parents[1]
OUTPUTS_ENV = "DYNAMO_BENCH_STACK_OUTPUTS"
REQUIRED = ("kubeconfig", "dynamoNamespace", "graphName", "frontendService")
# The stack's secret outputs (components/program.py; tests/test_infra_security.py holds this
# list against what the program marks secret): never written to a run record.
SECRET_OUTPUTS = ("kubeconfig", "grafanaAdminPassword")


def _save_hint(stack: str) -> str:
    return (f"run `pulumi stack output --json --show-secrets --stack {stack} > outputs.json` "
            "and pass --outputs outputs.json")


def read_outputs(stack: StackConfig, outputs_file: Path | None = None,
                 runner=subprocess.run) -> dict:
    """The stack's outputs (file, env, or the Pulumi CLI), checked against the stack."""
    path = outputs_file or os.environ.get(OUTPUTS_ENV)
    if path:
        try:
            _private(Path(path))
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise TargetError(f"stack outputs file {path}: {exc}; {_save_hint(stack.name)}"
                              ) from None
    elif shutil.which("pulumi"):
        done = runner(["pulumi", "stack", "output", "--json", "--show-secrets", "--stack",
                       stack.name], cwd=REPO, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise TargetError(f"`pulumi stack output --stack {stack.name}` failed: "
                              f"{done.stderr.strip()[-300:]}; is the stack deployed?")
        data = json.loads(done.stdout)
    else:
        raise TargetError(f"stack '{stack.name}' is an aws stack and the Pulumi CLI is not "
                          f"installed here: {_save_hint(stack.name)}")
    check_outputs(data, stack)
    return data


def _private(path: Path) -> None:
    """The outputs file holds the cluster's kubeconfig and the Grafana password: refuse one
    that other users can read, as ssh refuses an open private key."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise TargetError(f"stack outputs file {path} is readable by other users (mode "
                          f"{mode:o}) and holds the cluster's credentials: `chmod 600 {path}` "
                          "(write it as `(umask 077; pulumi stack output --json --show-secrets "
                          "> outputs.json)`)")


def check_outputs(outputs: dict, stack: StackConfig) -> None:
    """Refuse outputs that cannot drive this stack (field named, fix given)."""
    missing = [k for k in REQUIRED if not outputs.get(k)]
    if missing:
        raise TargetError(f"stack outputs lack {missing}: is '{stack.name}' deployed with "
                          f"serving (`pulumi up`)? {_save_hint(stack.name)}")
    if outputs["kubeconfig"] == "[secret]":
        raise TargetError("stack output 'kubeconfig' is hidden ([secret]): "
                          + _save_hint(stack.name))
    assert stack.serving is not None
    if outputs["dynamoNamespace"] != stack.serving.namespace:
        raise TargetError(f"stack outputs name namespace '{outputs['dynamoNamespace']}' but "
                          f"dynamo-bench:serving.namespace of '{stack.name}' is "
                          f"'{stack.serving.namespace}': are these another stack's outputs? "
                          + _save_hint(stack.name))


def kubeconfig(outputs: dict) -> dict:
    """The kubeconfig output as a dict (Pulumi gives an object, or JSON/YAML text)."""
    value = outputs["kubeconfig"]
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)   # JSON is YAML
        except yaml.YAMLError as exc:
            raise TargetError(f"stack output 'kubeconfig' is not a kubeconfig: {exc}") from None
    if not isinstance(value, dict) or not value.get("clusters"):
        raise TargetError("stack output 'kubeconfig' has no clusters: re-run `pulumi up`")
    return value


def endpoints_from_outputs(outputs: dict, model: str) -> Endpoints:
    """In-cluster URLs of a deployed stack (pure)."""
    missing = [k for k in ("frontendService", "dynamoNamespace") if not outputs.get(k)]
    if missing:
        raise TargetError(f"stack outputs lack {missing}: is the stack deployed with serving?")
    ns = outputs["dynamoNamespace"]
    base = f"http://{outputs['frontendService']}.{ns}.svc.cluster.local:{FRONTEND_PORT}"
    return Endpoints(base_url=base, model=model, metrics={"frontend": f"{base}/metrics"})


def prometheus_url(outputs: dict) -> str | None:
    """`prometheusUrl` if the stack exports it, else the Service in the monitoring namespace."""
    if outputs.get("prometheusUrl"):
        return outputs["prometheusUrl"]
    svc = outputs.get("prometheusService")
    return (f"http://{svc}.{MONITORING_NAMESPACE}.svc.cluster.local:{PROMETHEUS_PORT}"
            if svc else None)


def public_outputs(outputs: dict) -> dict:
    """What the manifest may keep: everything but the secret outputs."""
    return {k: v for k, v in outputs.items() if k not in SECRET_OUTPUTS}
