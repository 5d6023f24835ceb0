"""Where the load goes: a Target serves one stack's model on an OpenAI-compatible endpoint.

The runner only talks to this interface. `local` starts the Dynamo frontend and mocker workers
on loopback; `aws` attaches to a deployed stack through its kubeconfig (targets/aws.py).

A target whose load generator does not run on this machine also offers `step_executor()` (the
StepExecutor that runs each AIPerf step, e.g. as a Kubernetes Job) and `http_client()` (an
httpx client that reaches its in-cluster URLs from here); the local target needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Endpoints:
    base_url: str                  # http://host:port, the OpenAI API root (no /v1)
    model: str                     # the served model name
    # Prometheus endpoints by component ("frontend", "worker-0", "prefill-0", ...).
    metrics: dict[str, str] = field(default_factory=dict)

    @property
    def metrics_urls(self) -> list[str]:
        return list(self.metrics.values())


class Target(Protocol):
    """A serving deployment the runner can start, probe, load and stop."""

    kind: str

    def start(self) -> None:
        """Bring the deployment up (or attach to it) and return once it is ready."""

    def endpoints(self) -> Endpoints:
        """Where to send requests and where every component's /metrics is."""

    def restart_workers(self) -> dict | None:
        """Restart every worker (empty KV caches: a cold-cache step), ready on return; may
        return what the restart did, for the step's record."""

    def attest(self, when: str):
        """Evidence that the deployment is what the stack says, judged check by check
        (workloads.attest_checks.Attestation); the runner refuses the run when one fails."""

    def problems(self) -> list[str]:
        """What is wrong right now (a process that exited, ...); empty when healthy."""

    def describe(self) -> dict:
        """What the manifest records about the target (processes, versions, settings)."""

    def stop(self) -> None:
        """Stop everything this target started; safe to call twice."""


class TargetError(RuntimeError):
    """The target could not start, became unhealthy, or cannot do what was asked."""


def make_target(stack, workdir, **kwargs) -> Target:
    """The target for `stack.target` ("local" or "aws")."""
    if stack.target == "local":
        from workloads.targets.local import LocalTarget
        return LocalTarget(stack, workdir, **kwargs)
    from workloads.targets.aws import AwsTarget
    return AwsTarget(stack, workdir, **kwargs)
