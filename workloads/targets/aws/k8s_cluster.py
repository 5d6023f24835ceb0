"""Reading a deployed graph through the client (thin shell over k8s_graph's pure functions).

- `wait_ready`: the bounded, reported wait for the DynamoGraphDeployment and its pods; a pod
  that can never start (bad image, missing config, crash loop past the limit) ends the wait at
  once with its reason and the tail of its previous log;
- versions reported by the pods themselves: `python3 -c` importlib.metadata in the main
  container of one pod per distinct image (k8s_scripts.VERSIONS);
- the KV transfer backend: each worker's `--kv-transfer-config` and NIXL's "Backend <X> was
  instantiated" lines in its log (k8s_graph.kv_transfer_evidence);
- node records (instance type, zone, node group) from node labels.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from stacks.conventions.k8s_names import DGD_GROUP, DGD_PLURAL, DGD_VERSION
from workloads.targets.aws import k8s_graph, k8s_scripts
from workloads.targets.aws.k8s_client import (
    Clock,
    Kube,
    KubeError,
    is_not_found,
    items,
    retrying,
    to_dict,
)
from workloads.targets.base import TargetError

POLL_S = 5.0
REPORT_EVERY_S = 30.0
LOG_HEAD_BYTES = 16 << 20
Report = Callable[[str], None]


def get_graph(kube: Kube, namespace: str, graph: str) -> dict:
    try:
        return to_dict(kube.custom.get_namespaced_custom_object(
            DGD_GROUP, DGD_VERSION, namespace, DGD_PLURAL, graph))
    except Exception as exc:  # noqa: BLE001
        if is_not_found(exc):
            raise TargetError(f"DynamoGraphDeployment {namespace}/{graph} does not exist: is "
                              "the stack deployed (`pulumi up`)?") from None
        raise


def graph_pods(kube: Kube, namespace: str, graph: str) -> list[dict]:
    return items(kube.core.list_namespaced_pod(
        namespace, label_selector=k8s_graph.graph_selector(graph)))


def read_log(kube: Kube, namespace: str, pod: str, clock: Clock, limit_bytes: int,
             container: str = k8s_graph.MAIN_CONTAINER) -> str:
    """The head of a pod's log, a blip retried (runner.md R4: an unread worker log fails the
    NIXL check and refuses the run); still unreadable, the text says so (the evidence keeps
    it)."""
    try:
        return str(retrying(clock, f"reading the log of pod {pod}",
                            lambda: kube.core.read_namespaced_pod_log(
                                pod, namespace, container=container,
                                limit_bytes=limit_bytes)) or "")
    except KubeError as exc:
        return f"(log unavailable: {exc})"


def log_tail(kube: Kube, namespace: str, pod: str, lines: int = 20) -> str:
    """The last lines of the main container's previous run (why it crashed), or its current."""
    for previous in (True, False):
        try:
            text = kube.core.read_namespaced_pod_log(
                pod, namespace, container=k8s_graph.MAIN_CONTAINER, previous=previous,
                tail_lines=lines)
            if text:
                return str(text)
        except Exception:  # noqa: BLE001, S112 - no previous run: try the current one
            continue
    return ""


def wait_ready(kube: Kube, namespace: str, graph: str, clock: Clock, timeout_s: float,
               report: Report, exclude_uids: frozenset[str] = frozenset()) -> dict:
    """Wait until the graph and all its pods are ready (pods in `exclude_uids`, e.g. the ones
    just deleted, never count). Returns what the wait saw; raises TargetError on timeout or a
    pod that cannot start, with the reason."""
    t0 = clock.now()
    last_summary, last_report, seen = "", -REPORT_EVERY_S, []
    while True:
        dgd = retrying(clock, f"reading graph {graph}", lambda: get_graph(kube, namespace, graph))
        pods = [p for p in retrying(clock, f"listing the pods of graph {graph}",
                                    lambda: graph_pods(kube, namespace, graph))
                if p["metadata"].get("uid") not in exclude_uids]
        state = k8s_graph.graph_readiness(dgd, pods)
        elapsed = clock.now() - t0
        for problem in state.problems:
            if problem not in seen:
                seen.append(problem)
        if state.fatal:
            tails = [f"--- {name} ---\n{log_tail(kube, namespace, name)}"
                     for name in state.fatal_pods]
            raise TargetError(f"graph {namespace}/{graph} cannot become ready: "
                              + "; ".join(state.fatal) + "\n" + "\n".join(tails))
        if state.ready:
            report(f"graph {graph} ready after {elapsed:.0f} s ({state.summary})")
            return {"waited_s": round(elapsed, 3), "summary": state.summary,
                    "problems_seen": seen, "dgd_state": (dgd.get("status") or {}).get("state")}
        if elapsed > timeout_s:
            raise TargetError(f"graph {namespace}/{graph} not ready after {timeout_s:.0f} s: "
                              f"{state.summary}" + ("; " + "; ".join(state.problems)
                                                    if state.problems else ""))
        if state.summary != last_summary or elapsed - last_report >= REPORT_EVERY_S:
            extra = f" [{'; '.join(state.problems)}]" if state.problems else ""
            report(f"waiting for graph {graph}: {state.summary}{extra} "
                   f"({elapsed:.0f}/{timeout_s:.0f} s)")
            last_summary, last_report = state.summary, elapsed
        clock.sleep(POLL_S)


def node_records(kube: Kube, names: set[str]) -> dict[str, dict]:
    out = {}
    for name in sorted(n for n in names if n):
        try:
            out[name] = k8s_graph.node_record(to_dict(kube.core.read_node(name)))
        except Exception as exc:  # noqa: BLE001 - a node that left the cluster
            out[name] = {"node": name, "instanceType": None, "error": str(exc)[:200]}
    return out


def pod_versions(kube: Kube, namespace: str, pods: list[dict]) -> dict:
    """{image: {distribution: version}} asked of one running pod per distinct image."""
    out: dict[str, dict] = {}
    for pod in pods:
        main = next((c for c in pod.get("spec", {}).get("containers") or []
                     if c.get("name") == k8s_graph.MAIN_CONTAINER), None)
        if main is None or main.get("image") in out:
            continue
        argv = k8s_scripts.python(k8s_scripts.VERSIONS, exe=k8s_scripts.RUNTIME_PYTHON)
        try:
            res = kube.exec(namespace, pod["metadata"]["name"], argv,
                            container=k8s_graph.MAIN_CONTAINER, timeout_s=120)
            versions = json.loads(res.check("the versions probe"))
        except (KubeError, ValueError) as exc:
            versions = {"error": str(exc)[:300]}
        out[main["image"]] = {"pod": pod["metadata"]["name"], **versions}
    return out


def kv_transfer(kube: Kube, namespace: str, pods: list[dict], clock: Clock) -> dict:
    """Evidence of the KV transfer backend from every worker pod; `used` merges them."""
    evidence = []
    for pod in pods:
        log = read_log(kube, namespace, pod["metadata"]["name"], clock, LOG_HEAD_BYTES)
        evidence.append(k8s_graph.kv_transfer_evidence(pod, log))
    used = sorted({e["used"] for e in evidence})
    return {"used": used[0] if len(used) == 1 else used, "pods": evidence,
            "evidence": "worker args (--kv-transfer-config), env (FI_PROVIDER, UCX_*), and "
                        "NIXL's 'Backend <X> was instantiated' lines in each worker's log"}
