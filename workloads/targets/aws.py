"""The `aws` target: a deployed stack, reached from inside its cluster.

This issue defines the target; the in-cluster runner Job that uses it comes later (issue 6).
What exists: endpoints built from the stack's Pulumi outputs (`frontendService`,
`dynamoNamespace`, `prometheusService`), saved with `pulumi stack output --json > FILE` and
named by DYNAMO_BENCH_STACK_OUTPUTS; start() waits until the frontend lists the model. Worker
metrics are read through Prometheus (workloads/promql.py), not scraped per pod, because pods
come and go. Restarting workers needs the Kubernetes API, which the Job will have.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from stacks.schema import StackConfig
from workloads.smoke import list_models
from workloads.targets import Endpoints, TargetError

FRONTEND_PORT = 8000         # the Dynamo frontend's HTTP port in the graph
PROMETHEUS_PORT = 9090
MONITORING_NAMESPACE = "monitoring"
READY_TIMEOUT_S = 900.0


def endpoints_from_outputs(outputs: dict, model: str) -> Endpoints:
    """In-cluster URLs of a deployed stack (pure)."""
    missing = [k for k in ("frontendService", "dynamoNamespace") if not outputs.get(k)]
    if missing:
        raise TargetError(f"stack outputs lack {missing}: is the stack deployed with serving?")
    ns = outputs["dynamoNamespace"]
    base = f"http://{outputs['frontendService']}.{ns}.svc.cluster.local:{FRONTEND_PORT}"
    return Endpoints(base_url=base, model=model, metrics={"frontend": f"{base}/metrics"})


def prometheus_url(outputs: dict) -> str | None:
    """`prometheusUrl` if the stack exports it, else the Service in the monitoring namespace
    (the project's convention; workloads never import components to read it)."""
    if outputs.get("prometheusUrl"):
        return outputs["prometheusUrl"]
    svc = outputs.get("prometheusService")
    return (f"http://{svc}.{MONITORING_NAMESPACE}.svc.cluster.local:{PROMETHEUS_PORT}"
            if svc else None)


class AwsTarget:
    kind = "aws"

    def __init__(self, stack: StackConfig, workdir: Path, *, outputs_file: Path | None = None,
                 **_ignored):
        self.stack = stack
        self.workdir = Path(workdir)
        path = outputs_file or os.environ.get("DYNAMO_BENCH_STACK_OUTPUTS")
        if not path:
            raise TargetError(f"stack '{stack.name}' is an aws stack: save its outputs with "
                              "`pulumi stack output --json > outputs.json` and set "
                              "DYNAMO_BENCH_STACK_OUTPUTS=outputs.json (the in-cluster runner "
                              "Job of issue 6 does this for you)")
        self.outputs = json.loads(Path(path).read_text())
        self._endpoints = endpoints_from_outputs(self.outputs, stack.model.name)
        self.prometheus = prometheus_url(self.outputs)

    def start(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self.stack.model.name in list_models(self._endpoints.base_url):
                    return
            except Exception:  # noqa: BLE001 - not reachable yet
                pass
            time.sleep(5)
        raise TargetError(f"{self._endpoints.base_url} did not list {self.stack.model.name}")

    def endpoints(self) -> Endpoints:
        return self._endpoints

    def restart_workers(self) -> None:
        raise TargetError("restarting workers of a deployed stack needs the Kubernetes API "
                          "of the in-cluster runner Job (issue 6)")

    def problems(self) -> list[str]:
        return []

    def describe(self) -> dict:
        return {"kind": self.kind, "outputs": {k: v for k, v in self.outputs.items()
                                               if k != "kubeconfig"}}

    def stop(self) -> None:
        """The deployment belongs to Pulumi; the runner stops only its own load."""
