"""How each Helm chart is installed: `kubernetes.helm.v3.Release` where the chart has hooks,
`kubernetes.helm.v4.Chart` only where its pinned version is known to have none.

`helm.v4.Chart` renders the templates (`helm template`) and applies them as ordinary resources:
it does not run Helm hooks (pulumi/pulumi-kubernetes#555): hook Jobs run unordered, at the
same time as what they prepare, their delete policies are ignored and a second `pulumi up`
finds completed Jobs it cannot update. `helm.v3.Release` installs through Helm itself, which
runs the hooks in their phase and weight order. A chart whose pinned version is not in
`HOOK_FREE` is installed as a Release, so a version bump never silently drops its hooks.

Hooks, read in each chart's sources at the pinned version (test inventory:
tests/schemas/helm-hooks.json):
- dynamo-platform (ai-dynamo/dynamo deploy/helm/charts/platform/components/operator/
  templates/): upgrade-crd.yaml (pre-install,pre-upgrade Job applying the CRDs),
  webhook-cert-gen-job.yaml (pre-install,pre-upgrade: the webhook certificate Secret),
  webhook-ca-inject-job.yaml (post-install,post-upgrade: CA bundle into the webhook
  configurations). Read on the repository's main line; its 1.6.1 tag could not be fetched
  here (the snapshot is over the size limit), so the chart is installed as a Release either way.
- kube-prometheus-stack 79.5.0 (prometheus-community/helm-charts tag
  kube-prometheus-stack-79.5.0): templates/prometheus-operator/admission-webhooks/job-patch/*
  (pre-install admission-create Job, post-install admission-patch Job and their RBAC) and
  charts/crds/templates/upgrade/* (pre-install, only with crds.upgradeJob.enabled).
- none in nvidia-device-plugin 0.18.0 (NVIDIA/k8s-device-plugin v0.18.0
  deployments/helm/nvidia-device-plugin/templates), aws-efa-k8s-device-plugin v0.5.29
  (aws/eks-charts stable/aws-efa-k8s-device-plugin/templates at 2a58b2d) and dcgm-exporter
  4.8.2 (NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 deployment/templates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# (chart, version) pairs whose templates carry no helm.sh/hook annotation.
HOOK_FREE = {("nvidia-device-plugin", "0.18.0"), ("aws-efa-k8s-device-plugin", "v0.5.29"),
             ("dcgm-exporter", "4.8.2")}
# Helm waits this long for a Release's resources and hooks (the platform's CRD and certificate
# Jobs pull images on a fresh node).
RELEASE_TIMEOUT_S = 900


@dataclass(frozen=True)
class ChartRef:
    chart: str
    version: str
    repo: str


def has_hooks(ref: ChartRef) -> bool:
    """True unless the pinned version is known to carry no hooks."""
    return (ref.chart, ref.version) not in HOOK_FREE


def install(name: str, ref: ChartRef, *, namespace: str, values: dict[str, Any],
            opts: pulumi.ResourceOptions, release: str | None = None) -> pulumi.Resource:
    """One chart installation, as a Release when it has hooks."""
    if has_hooks(ref):
        return k8s.helm.v3.Release(
            name, name=release, chart=ref.chart, version=ref.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=ref.repo),
            namespace=namespace, values=values, timeout=RELEASE_TIMEOUT_S, opts=opts)
    return k8s.helm.v4.Chart(name, name=release, chart=ref.chart, version=ref.version,
                             repository_opts={"repo": ref.repo}, namespace=namespace,
                             values=values, opts=opts)
