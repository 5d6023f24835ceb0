"""What the cluster says about a deployed graph, read from API objects (pure: dicts in, facts out).

Objects are the camelCase dicts of `k8s_client.to_dict`. Facts used, all checked against the
Dynamo operator's sources and the vendored CRD (nvidia.com_dynamographdeployments.yaml, v1beta1):
- the operator labels every pod of a graph `nvidia.com/dynamo-graph-deployment-name=<graph>` and
  `nvidia.com/dynamo-component=<component name>`; the graph's `spec.components[]` give each
  component's `type` (frontend, worker, prefill, decode) and `replicas` (x `multinode.nodeCount`
  pods); the serving container is named `main`, its ports `http` (frontend, 8000) and `system`
  (workers' /metrics, 9090);
- DGD status: `state` (initializing|pending|successful|failed), `conditions[type=Ready]`,
  `observedGeneration`, and per component `components[name].readyReplicas`.
A pod's start-up is split from its timestamps: scheduled (PodScheduled), container started
(image pull and create before it), Ready (model load and engine start before it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stacks.conventions.k8s_names import (
    FRONTEND_PORT,
    INSTANCE_TYPE_LABEL,
    LIBFABRIC_CHECK_CONTAINER,
    LIBFABRIC_MISSING_EXIT,
    NODE_GROUP_LABEL,
    ZONE_LABEL,
)

OP_GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
OP_COMPONENT_LABEL = "nvidia.com/dynamo-component"
MAIN_CONTAINER = "main"
SYSTEM_PORT = 9090
WORKER_TYPES = ("worker", "prefill", "decode")
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
# Waiting reasons that never clear without a change to the spec: fail the wait at once.
FATAL_WAITING = ("InvalidImageName", "CreateContainerConfigError", "CreateContainerError")
# A container crash-looping this many times is reported as fatal (model load keeps failing).
CRASHLOOP_FATAL_RESTARTS = 3
# A pull that failed because the registry has no such tag never succeeds by waiting (a slow
# pull is waited for): the pinned image, e.g. the EFA build `vllm-runtime:<version>-efa`, is
# confirmed to exist at the first pull.
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff")
_MISSING_IMAGE = re.compile(r"not found|manifest unknown|does not exist", re.IGNORECASE)


def ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def components(dgd: dict) -> dict[str, dict]:
    """name -> {type, pods}: every component of the graph and the pods it should run."""
    out = {}
    for comp in dgd.get("spec", {}).get("components") or []:
        nodes = (comp.get("multinode") or {}).get("nodeCount") or 1
        out[comp["name"]] = {"type": comp.get("type", ""),
                             "pods": int(comp.get("replicas", 1)) * int(nodes)}
    return out


def worker_components(dgd: dict) -> list[str]:
    return sorted(n for n, c in components(dgd).items() if c["type"] in WORKER_TYPES)


def frontend_components(dgd: dict) -> list[str]:
    return sorted(n for n, c in components(dgd).items() if c["type"] == "frontend")


def graph_selector(graph: str) -> str:
    return f"{OP_GRAPH_LABEL}={graph}"


def component_selector(graph: str, names: list[str]) -> str:
    """Pods of these components of this graph only (never another stack's)."""
    if not names:
        raise ValueError(f"graph '{graph}' has no such components")
    return f"{graph_selector(graph)},{OP_COMPONENT_LABEL} in ({','.join(sorted(names))})"


def component_of(pod: dict) -> str:
    return (pod.get("metadata", {}).get("labels") or {}).get(OP_COMPONENT_LABEL, "")


def _condition(obj: dict, kind: str) -> dict:
    conds = obj.get("status", {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == kind), {})


def _main_status(pod: dict) -> dict:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == MAIN_CONTAINER),
                statuses[0] if statuses else {})


def refused_init(pod: dict) -> str | None:
    """What an init container that refused the pod (the EFA workers' libfabric check,
    components/libfabric_check.py) wrote as its termination message; None when none did.
    The image does not change by waiting: the caller stops at once."""
    for st in pod.get("status", {}).get("initContainerStatuses") or []:
        for state in (st.get("state") or {}, st.get("lastState") or {}):
            term = state.get("terminated") or {}
            if term.get("exitCode") == LIBFABRIC_MISSING_EXIT:
                return (f"init container {st.get('name')} refused the image (no loadable "
                        f"libfabric for NIXL LIBFABRIC): {term.get('message') or ''}").strip()
    return None


def _init_pull_failure(pod: dict) -> str | None:
    """An init container whose image the registry does not have (a donor -efa tag that was
    never published): the pod waits in Init forever, so the caller stops at once."""
    for st in pod.get("status", {}).get("initContainerStatuses") or []:
        waiting = (st.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in PULL_FAILURES and _MISSING_IMAGE.search(
                waiting.get("message") or ""):
            return f"init container {st.get('name')}: {waiting['reason']}: {waiting['message']}"
    return None


def libfabric_check_seen(pod: dict, container: str = LIBFABRIC_CHECK_CONTAINER) -> dict | None:
    """What an init container of the pod reported (its JSON termination message: the libfabric
    check's, or with `container` EFA_USERSPACE_CONTAINER the donor copy's), or None."""
    for st in pod.get("status", {}).get("initContainerStatuses") or []:
        if st.get("name") != container:
            continue
        term = (st.get("state") or {}).get("terminated") or \
            (st.get("lastState") or {}).get("terminated") or {}
        try:
            seen = json.loads(term.get("message") or "")
        except ValueError:
            return {"unreadable": (term.get("message") or "")[:300]}
        return seen if isinstance(seen, dict) else {"unreadable": str(seen)[:300]}
    return None


@dataclass(frozen=True)
class PodState:
    name: str
    component: str
    ready: bool
    terminating: bool
    restarts: int
    problem: str | None = None
    fatal: bool = False


def pod_state(pod: dict) -> PodState:
    """Readiness and the worst visible problem of one pod."""
    md, status = pod.get("metadata", {}), pod.get("status", {})
    main = _main_status(pod)
    restarts = int(main.get("restartCount") or 0)
    ready = _condition(pod, "Ready").get("status") == "True"
    problem, fatal = None, False
    waiting = (main.get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason")
    refusal = refused_init(pod) or _init_pull_failure(pod)
    if status.get("phase") == "Failed":
        problem, fatal = f"pod failed: {status.get('reason') or status.get('message')}", True
    elif refusal:
        problem, fatal = refusal, True
    elif reason == "CrashLoopBackOff":
        last = (main.get("lastState") or {}).get("terminated") or {}
        detail = f"last exit {last.get('exitCode')}" + (
            f" {last['reason']}" if last.get("reason") else "")
        problem = f"crash-looping ({restarts} restarts; {detail})"
        fatal = restarts >= CRASHLOOP_FATAL_RESTARTS
    elif reason:
        problem = f"{reason}: {waiting.get('message') or ''}".strip().rstrip(":")
        fatal = reason in FATAL_WAITING or (reason in PULL_FAILURES and bool(
            _MISSING_IMAGE.search(waiting.get("message") or "")))
    else:
        sched = _condition(pod, "PodScheduled")
        if sched.get("status") == "False":
            problem = f"unschedulable: {sched.get('message') or sched.get('reason')}"
    return PodState(md.get("name", "?"), component_of(pod), ready,
                    md.get("deletionTimestamp") is not None, restarts, problem, fatal)


@dataclass
class Readiness:
    ready: bool
    summary: str
    problems: list[str] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)
    fatal_pods: list[str] = field(default_factory=list)


def graph_readiness(dgd: dict, pods: list[dict]) -> Readiness:
    """Ready = the operator reports the graph successful and Ready for its current generation,
    and every component has its pods Ready (terminating pods do not count)."""
    status = dgd.get("status") or {}
    state = status.get("state", "initializing")
    cond = _condition(dgd, "Ready")
    generation = dgd.get("metadata", {}).get("generation")
    observed = status.get("observedGeneration")
    current = generation is None or observed is None or observed >= generation
    op_ready = state == "successful" and cond.get("status", "True") == "True" and current
    states = [pod_state(p) for p in pods]
    out = Readiness(False, "")
    parts, pods_ready = [f"graph {state}"], True
    for name, comp in components(dgd).items():
        mine = [s for s in states if s.component == name and not s.terminating]
        n_ready = sum(s.ready for s in mine)
        parts.append(f"{name} {n_ready}/{comp['pods']}")
        pods_ready &= n_ready >= comp["pods"]
        for s in mine:
            if s.problem:
                out.problems.append(f"{s.name}: {s.problem}")
                if s.fatal:
                    out.fatal.append(f"{s.name}: {s.problem}")
                    out.fatal_pods.append(s.name)
    if state == "failed":
        out.fatal.append(f"DynamoGraphDeployment state failed: {cond.get('message', '')}"
                         .strip())
    out.ready, out.summary = op_ready and pods_ready, ", ".join(parts)
    return out


def pod_ip(pod: dict) -> str | None:
    return pod.get("status", {}).get("podIP")


def metrics_url(pod: dict, kind: str) -> str | None:
    """The pod's /metrics URL: frontends on their `http` port, workers on `system`."""
    ip = pod_ip(pod)
    if not ip:
        return None
    name, default = ("http", FRONTEND_PORT) if kind == "frontend" else ("system", SYSTEM_PORT)
    containers = pod.get("spec", {}).get("containers") or []
    main: dict[str, Any] = next((c for c in containers if c.get("name") == MAIN_CONTAINER), {})
    port = next((p["containerPort"] for p in main.get("ports") or [] if p.get("name") == name),
                default)
    return f"http://{ip}:{port}/metrics"


def startup_times(pod: dict) -> dict:
    """Seconds from creation to scheduled, to container start (pull + create), to Ready
    (model load + engine start), and in total; None where a stage has not happened."""
    created = ts(pod.get("metadata", {}).get("creationTimestamp"))
    scheduled = ts(_condition(pod, "PodScheduled").get("lastTransitionTime"))
    started = ts(((_main_status(pod).get("state") or {}).get("running") or {}).get("startedAt"))
    ready_c = _condition(pod, "Ready")
    ready = ts(ready_c.get("lastTransitionTime")) if ready_c.get("status") == "True" else None

    def secs(a: datetime | None, b: datetime | None) -> float | None:
        return round((b - a).total_seconds(), 3) if a and b else None
    return {"created": pod.get("metadata", {}).get("creationTimestamp"),
            "schedule_s": secs(created, scheduled), "pull_and_start_s": secs(scheduled, started),
            "load_s": secs(started, ready), "total_s": secs(created, ready)}


def pod_record(pod: dict) -> dict:
    """What the manifest keeps about a serving pod: where it ran, what ran, how it started."""
    return {"name": pod["metadata"]["name"], "uid": pod["metadata"].get("uid"),
            "component": component_of(pod), "node": pod.get("spec", {}).get("nodeName"),
            "ip": pod_ip(pod), "restarts": pod_state(pod).restarts,
            "images": [{"container": s.get("name"), "image": s.get("image"),
                        "image_id": s.get("imageID")}
                       for s in pod.get("status", {}).get("containerStatuses") or []],
            "startup": startup_times(pod)}


def node_record(node: dict) -> dict:
    labels = node.get("metadata", {}).get("labels") or {}
    return {"node": node["metadata"]["name"], "instanceType": labels.get(INSTANCE_TYPE_LABEL),
            "zone": labels.get(ZONE_LABEL), "nodeGroup": labels.get(NODE_GROUP_LABEL),
            "capacityType": labels.get(CAPACITY_TYPE_LABEL)}


_NIXL_BACKEND = re.compile(r"Backend (\w+) was instantiated")


def kv_transfer_config(pod: dict) -> dict | None:
    """The worker's `--kv-transfer-config` JSON, as its container was started."""
    main: dict[str, Any] = next((c for c in pod.get("spec", {}).get("containers") or []
                 if c.get("name") == MAIN_CONTAINER), {})
    argv = [*(main.get("command") or []), *(main.get("args") or [])]
    text = " ".join(argv)
    flag = "--kv-transfer-config"
    if flag not in text:
        return None
    raw = text.split(flag, 1)[1].lstrip(" =")
    try:
        return json.JSONDecoder().raw_decode(raw.strip("'\""))[0]
    except ValueError:
        return {"unparsed": raw[:300]}


def kv_transfer_evidence(pod: dict, log_text: str) -> dict:
    """The KV transfer backend of one worker: what it was told (args, env) and what its log
    shows NIXL instantiated ("Backend <NAME> was instantiated", printed by nixl_agent)."""
    config = kv_transfer_config(pod)
    main: dict[str, Any] = next((c for c in pod.get("spec", {}).get("containers") or []
                 if c.get("name") == MAIN_CONTAINER), {})
    env = {e["name"]: e.get("value") for e in main.get("env") or []
           if e.get("name") in ("FI_PROVIDER", "UCX_TLS", "UCX_NET_DEVICES", "NIXL_BACKENDS")}
    observed = sorted(set(_NIXL_BACKEND.findall(log_text)))
    configured = None
    if config and "kv_connector" in config:
        extra = config.get("kv_connector_extra_config") or {}
        configured = {"connector": config["kv_connector"],
                      "backends": extra.get("backends") or (
                          ["UCX"] if config["kv_connector"] == "NixlConnector" else []),
                      "buffer_device": config.get("kv_buffer_device")}
    if observed:
        used = "+".join(observed)
    elif configured is None:
        used = "none (no KV transfer configured)"
    else:
        used = "not observed in the log"
    return {"pod": pod["metadata"]["name"], "component": component_of(pod),
            "configured": configured, "env": env, "log_backends": observed, "used": used}
