"""The Kubernetes objects the cluster runner creates (pure: plain values in, object dicts out).

- a Job per AIPerf step, in the stack's namespace, under the load generator's ServiceAccount
  (no API token mounted: AIPerf only talks HTTP), pinned to the CPU node group in the
  frontend's zone, requesting the CPU that keeps the client from being the bottleneck, with
  no CPU limit (a limit throttles AIPerf's bursts: runner.md R3; memory stays limited); AIPerf runs
  under k8s_scripts.CLIENT_WRAPPER (container CPU samples for the saturation guard) and writes
  its artifacts on the results PVC; the tokenizer comes read-only from the model cache PVC
  (offline, the same files the workers load);
- a ConfigMap with a step's dataset when it fits, otherwise the dataset goes to the results PVC;
- one transfer pod per run that mounts the results PVC: datasets are written and artifacts read
  through it (exec), and it is deleted with the run's Jobs.
Every object carries the run's labels, so stopping deletes exactly this run's objects.
The image is AIPerf's own release image, pinned to the version the project uses (AIPerf 0.13.0
pins `nvcr.io/nvidia/aiperf:<its version>` for its direct Kubernetes deployments,
aiperf/cli_commands/kube/_kube_common.py); DYNAMO_BENCH_AIPERF_IMAGE overrides it, e.g. with a
digest or a mirror.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.conventions.k8s_names import (
    HF_HOME,
    LOADGEN_SERVICE_ACCOUNT,
    MODEL_CACHE_MOUNT,
    MODEL_CACHE_PVC,
    NODE_GROUP_LABEL,
    PART_OF,
    RESULTS_PVC,
    ZONE_LABEL,
)
from workloads.targets.aws import k8s_scripts

AIPERF_VERSION = "0.13.0"
AIPERF_IMAGE = f"nvcr.io/nvidia/aiperf:{AIPERF_VERSION}"
IMAGE_ENV = "DYNAMO_BENCH_AIPERF_IMAGE"

STACK_LABEL = "dynamo-bench.io/stack"
RUN_LABEL = "dynamo-bench.io/run"
STEP_LABEL = "dynamo-bench.io/step"
ROLE_LABEL = "dynamo-bench.io/role"

RESULTS_MOUNT = "/results"
INPUTS_MOUNT = "/inputs"
DATASET_KEY = "dataset.jsonl"
# A ConfigMap holds at most 1 MiB including its metadata; larger datasets go to the PVC.
CONFIGMAP_MAX_BYTES = 900 * 1024
# Client sizing (stated, not measured on a cluster): AIPerf's streaming parser used ~1.2 cores
# at 20k tok/s on the local engine; a core per 16 concurrent streams plus two for AIPerf's own
# services leaves it far from saturation at the plan's loads. Capped at half a CPU node so the
# frontend and the system pods keep room.
LOADGEN_MIN_CPU = 4
LOADGEN_STREAMS_PER_CPU = 16
LOADGEN_GIB_PER_CPU = 2
LOADGEN_MIN_GIB = 8
DEFAULT_MAX_CPU = 8
# Time for scheduling and the image pull on top of the step's own time limit.
START_SLACK_S = 600
TRANSFER_POD_DEADLINE_S = 48 * 3600
_RUN_USER = 1000

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def aiperf_image() -> str:
    return os.environ.get(IMAGE_ENV) or AIPERF_IMAGE


def _digest(*parts: object, n: int = 8) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:n]


def label_value(text: str) -> str:
    """`text` if it is a valid label value, else a readable prefix plus a hash of it."""
    if _LABEL_VALUE.match(text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")[:50].strip("-_.")
    return f"{slug}-{_digest(text)}" if slug else _digest(text, n=16)


def _slug(text: str, n: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:n].strip("-") or "x"


def run_labels(stack: str, run_id: str) -> dict[str, str]:
    return {**PART_OF, STACK_LABEL: label_value(stack), RUN_LABEL: label_value(run_id)}


def run_selector(stack: str, run_id: str) -> str:
    """Selects this run's objects only (stack AND run: run ids repeat across stacks)."""
    labels = run_labels(stack, run_id)
    return f"{STACK_LABEL}={labels[STACK_LABEL]},{RUN_LABEL}={labels[RUN_LABEL]}"


def job_name(stack: str, run_id: str, step_id: str, attempt: str) -> str:
    """A DNS-safe, short (pod names add a suffix) and unique name per step attempt (`attempt`:
    the target's token of this attempt)."""
    return f"aiperf-{_slug(step_id, 32)}-{_digest(stack, run_id, step_id, attempt)}"


def transfer_pod_name(stack: str, run_id: str) -> str:
    return f"dynamo-bench-results-{_digest(stack, run_id, n=10)}"


def remote_step_dir(stack: str, run_id: str, step_id: str, job: str) -> str:
    """Where a step attempt's artifacts live on the results PVC (mounted at RESULTS_MOUNT)."""
    return f"{RESULTS_MOUNT}/{label_value(stack)}/{label_value(run_id)}/{step_id}/{job}"


@dataclass(frozen=True)
class Placement:
    """Where the load generator runs: a CPU node group in the frontend's zone."""

    node_groups: tuple[str, ...]
    zone: str | None
    max_cpu: int = DEFAULT_MAX_CPU


def max_loadgen_cpu(instance_types: list[str]) -> int:
    """Half the smallest CPU node the load generator may land on (at least 2 cores)."""
    vcpus = [INSTANCE_TYPES[t].vcpus for t in instance_types if t in INSTANCE_TYPES]
    return max(2, min(vcpus) // 2) if vcpus else DEFAULT_MAX_CPU


def loadgen_cpu(concurrency: int, max_cpu: int) -> int:
    want = max(LOADGEN_MIN_CPU, 2 + math.ceil(concurrency / LOADGEN_STREAMS_PER_CPU))
    return min(want, max_cpu)


def aiperf_workers(cpu: int, concurrency: int) -> int:
    """AIPerf's own default (75 % of the cores minus one, at most the concurrency), computed
    from the CPU request: inside a container AIPerf sees the node's cores, not its share."""
    return max(1, min(int(cpu * 0.75) - 1, concurrency))


def node_affinity(placement: Placement) -> dict[str, Any]:
    """Required: one of the CPU node groups, and the frontend's zone (same-AZ traffic)."""
    if not placement.node_groups:
        raise ValueError("the cluster has no CPU node group for the load generator: add one "
                         "to dynamo-bench:cluster.nodeGroups (e.g. m7i.4xlarge)")
    exprs = [{"key": NODE_GROUP_LABEL, "operator": "In",
              "values": sorted(placement.node_groups)}]
    if placement.zone:
        exprs.append({"key": ZONE_LABEL, "operator": "In", "values": [placement.zone]})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": exprs}]}}}


# The Dynamo operator labels every component pod with its type: consts
# `KubeLabelDynamoComponentType = "nvidia.com/dynamo-component-type"`, set in the DCD workload
# renderer's pod labels (`podLabels[commonconsts.KubeLabelDynamoComponentType] =
# componentType`; ai-dynamo/dynamo deploy/operator, the 1.x operator the platform chart runs).
FRONTEND_POD_SELECTOR = {"nvidia.com/dynamo-component-type": "frontend"}


def frontend_anti_affinity() -> dict[str, Any]:
    """Preferred: not on a node that runs a frontend (any graph's: side-by-side variants live
    in other namespaces). The load generator's bursts would otherwise take the CPU the frontend's
    tokenizer and chat processor need, and TTFT would include that queueing (dynamo.md F6).
    Preferred, not required: a cluster with one CPU node still runs its steps."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {"labelSelector": {"matchLabels": dict(FRONTEND_POD_SELECTOR)},
                            "namespaceSelector": {},
                            "topologyKey": "kubernetes.io/hostname"}}]}}


def _security() -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod, container) security contexts: AIPerf's own hardened baseline."""
    pod = {"runAsNonRoot": True, "runAsUser": _RUN_USER, "runAsGroup": _RUN_USER,
           "fsGroup": _RUN_USER, "seccompProfile": {"type": "RuntimeDefault"}}
    container = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                 "capabilities": {"drop": ["ALL"]}}
    return pod, container


def _meta(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(labels)}


def dataset_configmap(name: str, namespace: str, labels: dict[str, str],
                      text: str) -> dict[str, Any]:
    if len(text.encode()) > CONFIGMAP_MAX_BYTES:
        raise ValueError(f"dataset of {len(text.encode())} bytes exceeds the ConfigMap budget "
                         f"({CONFIGMAP_MAX_BYTES}): deliver it on the results PVC")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(name, namespace, {**labels, ROLE_LABEL: "dataset"}),
            "data": {DATASET_KEY: text}}


AIPERF_K8S_GATE = "KUBERNETES_SERVICE_HOST"


def _env() -> list[dict[str, str]]:
    return [{"name": "HOME", "value": "/tmp"}, {"name": "HF_HOME", "value": HF_HOME},
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            {"name": "HF_MODULES_CACHE", "value": "/tmp/hf_modules"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            # AIPerf 0.13.0 adds every `nvidia.com/metrics-enabled=true` pod of its namespace
            # to --server-metrics when it believes it runs in a cluster (discovery mode
            # `auto`, aiperf/config/server_metrics.py; aiperf/server_metrics/manager.py
            # _run_metrics_discovery): the other graph's pods in a side-by-side campaign. Its
            # only gate is this variable (aiperf/server_metrics/discovery/__init__.py
            # is_running_in_kubernetes: `bool(os.environ.get("KUBERNETES_SERVICE_HOST"))`);
            # `aiperf profile` has no flag for the mode (config/flags/cli_config.py: only
            # --server-metrics, --no-server-metrics, --server-metrics-formats). A container's
            # own env overrides the service variables the kubelet injects, so discovery stays
            # off on purpose, not only because no token or AIPERF_NAMESPACE is mounted.
            {"name": AIPERF_K8S_GATE, "value": ""}]


def loadgen_resources(cpu: int, memory: str) -> dict[str, Any]:
    """CPU requested, never limited; memory requested and limited.

    A CFS quota throttles AIPerf's ~12 processes (and its start-up tokenizer pool) in 100 ms
    periods while their mean stays under the limit, delaying request timestamps where the
    saturation guard's mean-cores check cannot see it (runner.md R3). AIPerf's own Kubernetes
    runs request CPU without a limit: resource_mode "burstable" (its default) "emits requests
    only (no limits)" (ai-dynamo/aiperf aiperf/config/deployment.py, resource_mode). The
    request still reserves the cores on the node (the scheduler packs by requests), and the
    guard compares the client's mean cores with it (step_exec host_cores = this request), so a
    client that needs more than it reserved is still flagged. Memory keeps its limit: it is not
    compressible, and an unbounded client could starve the node's other pods.
    """
    return {"requests": {"cpu": str(cpu), "memory": memory}, "limits": {"memory": memory}}


AIPERF_CONTAINER = "aiperf"   # the step record reads its exit code and image digest


def loadgen_job(*, name: str, namespace: str, labels: dict[str, str], step_id: str,
                image: str, aiperf_args: list[str], artifact_dir: str, placement: Placement,
                cpu: int, deadline_s: float, dataset_configmap: str | None) -> dict[str, Any]:
    """The Job that runs one AIPerf step (`aiperf_args`: everything after `aiperf`)."""
    job_labels = {**labels, ROLE_LABEL: "loadgen", STEP_LABEL: label_value(step_id)}
    memory = f"{max(LOADGEN_MIN_GIB, LOADGEN_GIB_PER_CPU * cpu)}Gi"
    pod_sc, container_sc = _security()
    mounts = [{"name": "results", "mountPath": RESULTS_MOUNT},
              {"name": "model-cache", "mountPath": MODEL_CACHE_MOUNT, "readOnly": True},
              {"name": "tmp", "mountPath": "/tmp"}, {"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [
        {"name": "results", "persistentVolumeClaim": {"claimName": RESULTS_PVC}},
        {"name": "model-cache",
         "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC, "readOnly": True}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    if dataset_configmap:
        mounts.append({"name": "dataset", "mountPath": INPUTS_MOUNT, "readOnly": True})
        volumes.append({"name": "dataset", "configMap": {"name": dataset_configmap}})
    container = {
        "name": AIPERF_CONTAINER, "image": image, "imagePullPolicy": "IfNotPresent",
        "command": k8s_scripts.python(k8s_scripts.CLIENT_WRAPPER, artifact_dir, "--",
                                      "aiperf", *aiperf_args),
        "workingDir": "/tmp", "env": _env(),
        "resources": loadgen_resources(cpu, memory),
        "volumeMounts": mounts, "securityContext": container_sc,
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": _meta(name, namespace, job_labels),
        "spec": {
            # A failed AIPerf is a failed step: never re-run the load behind the runner's back.
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(math.ceil(deadline_s)) + START_SLACK_S,
            # The runner deletes the Job once its artifacts are copied; this is the net.
            "ttlSecondsAfterFinished": 24 * 3600,
            "template": {
                "metadata": {"labels": job_labels},
                "spec": {"restartPolicy": "Never",
                         "serviceAccountName": LOADGEN_SERVICE_ACCOUNT,
                         "automountServiceAccountToken": False,
                         "affinity": {**node_affinity(placement),
                                      **frontend_anti_affinity()},
                         "securityContext": pod_sc,
                         "terminationGracePeriodSeconds": 30,
                         "containers": [container], "volumes": volumes}},
        },
    }


def transfer_pod(*, name: str, namespace: str, labels: dict[str, str], image: str,
                 placement: Placement) -> dict[str, Any]:
    """A small pod mounting the results PVC, for exec-based copies in and out."""
    pod_sc, container_sc = _security()
    wait = "import signal, sys; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); " \
           "signal.pause()"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": _meta(name, namespace, {**labels, ROLE_LABEL: "transfer"}),
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": TRANSFER_POD_DEADLINE_S,
            "serviceAccountName": LOADGEN_SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "affinity": node_affinity(Placement(placement.node_groups, None)),
            "securityContext": pod_sc,
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "transfer", "image": image, "imagePullPolicy": "IfNotPresent",
                "command": [k8s_scripts.AIPERF_PYTHON, "-c", wait],
                "env": [{"name": "HOME", "value": "/tmp"}],
                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                              "limits": {"cpu": "1", "memory": "1Gi"}},
                "volumeMounts": [{"name": "results", "mountPath": RESULTS_MOUNT},
                                 {"name": "tmp", "mountPath": "/tmp"}],
                "securityContext": container_sc}],
            "volumes": [{"name": "results",
                         "persistentVolumeClaim": {"claimName": RESULTS_PVC}},
                        {"name": "tmp", "emptyDir": {}}],
        },
    }
