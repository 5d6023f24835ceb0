"""`python -m stacks render <stack>`: write what `pulumi up` would create, for review first.

The stack's program runs offline (stacks/render/offline.py: Pulumi mocks, no cloud) and the recorded
resources are written to `<out>/<stack>/`:
- kubernetes.yaml      every Kubernetes object, one YAML document each, in apply order;
- helm-releases.yaml   every Helm chart: repository, chart, pinned version, namespace, values;
- aws-resources.yaml   every AWS / EKS resource: type, name and inputs;
- outputs.yaml         the stack outputs.
Secret inputs and outputs (the HF token, the kubeconfig) are written as "[secret]".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stacks.render.offline import HELM_RELEASE, HELM_TYPES, ProgramRun, Recorded, run_stack

REDACTED = "[secret]"


def is_kubernetes_object(r: Recorded) -> bool:
    return (r.custom and r.type.startswith("kubernetes:") and r.type not in HELM_TYPES
            and not r.type.startswith("pulumi:providers:"))


def _redacted(r: Recorded) -> dict[str, Any]:
    return {k: (REDACTED if k in r.secret_inputs else v) for k, v in r.inputs.items()}


def kubernetes_object(r: Recorded, *, redact: bool = True) -> dict[str, Any]:
    """The object a Kubernetes resource stands for (apiVersion and kind first)."""
    inputs = _redacted(r) if redact else dict(r.inputs)
    return {"apiVersion": inputs.pop("apiVersion"), "kind": inputs.pop("kind"), **inputs}


# Apply order for a reader (and `kubectl apply -f`): namespaces and cluster-wide objects first.
_KIND_ORDER = ("Namespace", "StorageClass", "ServiceAccount", "Role", "RoleBinding", "Secret",
               "ConfigMap", "PersistentVolumeClaim", "NodeClass", "NodePool", "Job")


def _apply_order(obj: dict[str, Any]) -> tuple[int, str, str]:
    kind = obj["kind"]
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
    meta = obj.get("metadata") or {}
    return rank, meta.get("namespace", ""), meta.get("name", "")


def kubernetes_objects(run: ProgramRun, *, redact: bool = True) -> list[dict[str, Any]]:
    """Every Kubernetes object, in a stable apply order (registration order is not stable)."""
    objs = [kubernetes_object(r, redact=redact) for r in run.resources if is_kubernetes_object(r)]
    return sorted(objs, key=_apply_order)


def helm_releases(run: ProgramRun) -> list[dict[str, Any]]:
    return sorted(({"release": r.inputs.get("name", r.name), "chart": r.inputs.get("chart"),
             "version": r.inputs.get("version"),
             "repository": (r.inputs.get("repositoryOpts") or {}).get("repo"),
             "namespace": r.inputs.get("namespace"), "values": r.inputs.get("values", {}),
             "installed_as": "helm.v3.Release (runs hooks)" if r.type == HELM_RELEASE
             else "helm.v4.Chart"}
            for r in run.resources if r.type in HELM_TYPES), key=lambda r: r["release"])


def aws_resources(run: ProgramRun) -> list[dict[str, Any]]:
    return sorted(({"type": r.type, "name": r.name, "inputs": _redacted(r)}
                   for r in run.resources if r.type.split(":")[0] in ("aws", "eks")),
                  key=lambda r: (r["type"], r["name"]))


def type_counts(run: ProgramRun) -> Counter[str]:
    """Resources by type (providers and the program's own components left out)."""
    return Counter(r.type for r in run.resources
                   if not r.type.startswith(("pulumi:providers:", "dynamo-bench:")))


@dataclass(frozen=True)
class Rendered:
    folder: Path
    run: ProgramRun


def _dump(path: Path, docs: list[Any] | Any, *, many: bool = False) -> None:
    with path.open("w") as f:
        if many:
            yaml.safe_dump_all(docs, f, sort_keys=True, width=100)
        else:
            yaml.safe_dump(docs, f, sort_keys=True, width=100)


def render_stack(name: str, out: Path) -> Rendered:
    """Run `name` offline and write its resources under `out/name/`.

    Raises the program's error (a StackError lists every pre-flight problem) unchanged.
    """
    run = run_stack(name)
    if run.error is not None:
        raise run.error
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    _dump(folder / "kubernetes.yaml", kubernetes_objects(run), many=True)
    _dump(folder / "helm-releases.yaml", helm_releases(run))
    _dump(folder / "aws-resources.yaml", aws_resources(run))
    _dump(folder / "outputs.yaml", {k: (REDACTED if k in run.secret_outputs else v)
                                    for k, v in run.outputs.items()})
    return Rendered(folder=folder, run=run)
