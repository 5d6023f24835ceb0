"""The target interface the runner talks to: where requests and metrics go (Endpoints),
what a target does (Target) and how it fails (TargetError). Both targets import this,
never the package that picks between them, so the layers have no cycle."""

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
        (workloads.attest.checks.Attestation); the runner refuses the run when one fails."""

    def problems(self) -> list[str]:
        """What is wrong right now (a process that exited, ...); empty when healthy."""

    def describe(self) -> dict:
        """What the manifest records about the target (processes, versions, settings)."""

    def stop(self) -> None:
        """Stop everything this target started; safe to call twice."""


class TargetError(RuntimeError):
    """The target could not start, became unhealthy, or cannot do what was asked."""
