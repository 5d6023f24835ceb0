"""Where the load goes: a Target serves one stack's model on an OpenAI-compatible endpoint.

The runner only talks to this interface. `local` starts the Dynamo frontend and mocker workers
on loopback; `aws` attaches to a deployed stack through its kubeconfig (the targets/aws/
package: its Kubernetes client, jobs, transfer, graph and attestation code). Both implement
targets/base.py.

A target whose load generator does not run on this machine also offers `step_executor()` (the
StepExecutor that runs each AIPerf step, e.g. as a Kubernetes Job) and `http_client()` (an
httpx client that reaches its in-cluster URLs from here); the local target needs neither.
"""

from __future__ import annotations

from workloads.targets.base import Target


def make_target(stack, workdir, **kwargs) -> Target:
    """The target for `stack.target` ("local" or "aws")."""
    if stack.target == "local":
        from workloads.targets.local import LocalTarget
        return LocalTarget(stack, workdir, **kwargs)
    from workloads.targets.aws.target import AwsTarget
    return AwsTarget(stack, workdir, **kwargs)
