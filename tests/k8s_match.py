"""How Kubernetes matches what rendered objects declare (test helpers, pure): label selectors,
a pod's node placement against a node's labels and taints, and the nodes a stack's node groups
make. Used by the chart render tests to ask "would this pod run there?" and "does this
selector pick that object?" of Helm's output.

Semantics, from the Kubernetes API reference (v1.35): a LabelSelector's matchLabels and
matchExpressions are ANDed, and an empty selector matches everything (metav1.LabelSelector);
required node affinity is an OR of nodeSelectorTerms, each an AND of its expressions, and an
empty term matches nothing (core/v1 NodeSelectorTerm); a pod stays off a node with a NoSchedule
or NoExecute taint it does not tolerate (an empty key with operator Exists tolerates all).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components import auto_mode_specs as auto
from components import node_specs as ns
from stacks.config.schema import ComputeMode, NodeGroup, StackConfig

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"   # "auto" on EKS Auto Mode nodes
# EKS's node group API spells taint effects its own way (eks CreateNodegroup, Taint.effect).
EKS_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute",
                     "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
_KEEPS_PODS_OFF = ("NoSchedule", "NoExecute")


def _expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if key not in labels:
            return False
        have, bound = int(labels[key]), int(values[0])
        return have > bound if op == "Gt" else have < bound
    raise ValueError(f"unknown selector operator {op!r} in {expr}")


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (present: callers decide what a missing one means)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression(e, labels) for e in selector.get("matchExpressions") or [])


def map_selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A plain map selector (a Service's spec.selector, a nodeSelector)."""
    return all(labels.get(k) == v for k, v in selector.items())


def _term(term: dict[str, Any], labels: dict[str, str]) -> bool:
    if term.get("matchFields"):
        raise ValueError(f"matchFields is not modelled here: {term}")
    expressions = term.get("matchExpressions") or []
    return bool(expressions) and all(_expression(e, labels) for e in expressions)


def _tolerates(toleration: dict[str, Any], taint: dict[str, str]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists"
    if toleration["key"] != taint["key"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")


@dataclass(frozen=True)
class Node:
    """A node a stack's node group brings up: the labels and taints the scheduler sees."""
    group: str
    instance_type: str
    gpu: bool
    labels: dict[str, str] = field(hash=False)
    taints: tuple[dict[str, str], ...] = field(hash=False)


def admits(pod_spec: dict[str, Any], node: Node) -> bool:
    """Would the scheduler place a pod with this spec (or a Prometheus resource's spec, which
    carries the same fields) on `node`: nodeSelector, required node affinity, taints."""
    if not map_selects(pod_spec.get("nodeSelector") or {}, node.labels):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not any(_term(t, node.labels)
                                        for t in required.get("nodeSelectorTerms") or []):
        return False
    tolerations = pod_spec.get("tolerations") or []
    return all(any(_tolerates(t, taint) for t in tolerations)
               for taint in node.taints if taint["effect"] in _KEEPS_PODS_OFF)


def _base_labels(group: NodeGroup) -> dict[str, str]:
    # what the kubelet sets on every node (well-known labels, kubernetes.io/docs/reference/
    # labels-annotations-taints)
    return {INSTANCE_TYPE_LABEL: group.instance_type, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64"}


def group_node(group: NodeGroup, mode: ComputeMode) -> Node:
    """The node of `group`, built from what components/ gives the group: managed node group
    labels and taints (components/node_specs.py) or the Auto Mode NodePool's template
    (components/auto_mode_specs.py), where EKS also labels the node compute-type auto."""
    labels = _base_labels(group)
    if mode == ComputeMode.AUTO:
        template = auto.node_pool(group, None)["spec"]["template"]
        labels |= template["metadata"]["labels"] | {COMPUTE_TYPE_LABEL: "auto"}
        taints = tuple(template["spec"].get("taints") or ())
    else:
        labels |= ns.node_labels(group)
        taints = tuple({**t, "effect": EKS_TAINT_EFFECTS[t["effect"]]}
                       for t in ns.node_group_taints(group))
    return Node(group.name, group.instance_type, ns.is_gpu(group), labels, taints)


def stack_nodes(stack: StackConfig) -> list[Node]:
    return [group_node(g, stack.cluster.compute_mode) for g in stack.cluster.node_groups]
