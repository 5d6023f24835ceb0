"""Evidence from a deployed graph's pods for the attestation (thin shell over the client):
per worker pod the GPUs its engine can use and their driver (exec of the GPU probe), the NIXL
backends and the engine config its log shows; every pod's own /metrics (exec, since the API
server proxies Services, not pod ports)."""

from __future__ import annotations

from stacks.conventions.k8s_names import EFA_USERSPACE_CONTAINER, LIBFABRIC_CHECK_CONTAINER
from workloads.attest import first_data
from workloads.attest.parse import engine_config, gpu_probe, nixl_backends
from workloads.targets.aws import k8s_cluster, k8s_graph, k8s_scripts
from workloads.targets.aws.attest_scripts import GPU_PROBE, LOADED_FABRIC, METRICS_GET
from workloads.targets.aws.k8s_client import Clock, Kube, KubeError

LOG_BYTES = 32 << 20
EXEC_TIMEOUT_S = 120.0


def _exec(kube: Kube, namespace: str, pod: str, script: str, *args: str) -> tuple[bytes, str]:
    """stdout of a probe, and an error text ('' when it ran)."""
    argv = k8s_scripts.python(script, *args, exe=k8s_scripts.RUNTIME_PYTHON)
    try:
        res = kube.exec(namespace, pod, argv, container=k8s_graph.MAIN_CONTAINER,
                        timeout_s=EXEC_TIMEOUT_S)
    except KubeError as exc:
        return b"", str(exc)[:300]
    if res.exit_code != 0:
        return res.stdout, f"exit {res.exit_code}: {res.stderr.decode(errors='replace')[-300:]}"
    return res.stdout, ""


def _efa_worker(pod: dict) -> bool:
    """A worker the graph gave the libfabric check (components/efa_userspace.py)."""
    inits = pod.get("spec", {}).get("initContainers") or []
    return any(c.get("name") == LIBFABRIC_CHECK_CONTAINER for c in inits)


def pod_evidence(kube: Kube, namespace: str, dgd: dict, pods: list[dict],
                 clock: Clock) -> dict[str, dict]:
    """{pod: {component, role, node, gpu_probe, nixl_backends, engine; EFA workers also
    libfabric_check, efa_userspace, libfabric_loaded}} for the graph's workers (frontends:
    component and role only)."""
    kinds = k8s_graph.components(dgd)
    out = {}
    for pod in pods:
        name, comp = pod["metadata"]["name"], k8s_graph.component_of(pod)
        role = kinds.get(comp, {}).get("type", "")
        rec: dict = {"component": comp, "role": role, "node": pod["spec"].get("nodeName")}
        if role in k8s_graph.WORKER_TYPES:
            stdout, error = _exec(kube, namespace, name, GPU_PROBE)
            rec["gpu_probe"] = {"error": error} if error else gpu_probe(stdout)
            log = k8s_cluster.read_log(kube, namespace, name, clock, LOG_BYTES)
            rec["nixl_backends"] = nixl_backends(log)
            rec["engine"] = engine_config(log)
            seen = k8s_graph.libfabric_check_seen(pod)
            if seen is not None:  # EFA workers: what their image's libfabric check saw
                rec["libfabric_check"] = seen
            donor = k8s_graph.libfabric_check_seen(pod, EFA_USERSPACE_CONTAINER)
            if donor is not None:  # and what a donor's EFA userspace copy provided
                rec["efa_userspace"] = donor
            if _efa_worker(pod):  # which libfabric the engine's processes really mapped
                stdout, error = _exec(kube, namespace, name, LOADED_FABRIC)
                rec["libfabric_loaded"] = {"error": error} if error else gpu_probe(stdout)
        out[name] = rec
    return out


def first_data_probe(kube: Kube, namespace: str, dgd: dict, pods: list[dict],
                     model: str) -> dict:
    """The first-data stall probe (workloads/attest/first_data.py) run inside one frontend pod
    against its own HTTP port: the frontend's sockets, with no API-server proxy in between."""
    kinds = k8s_graph.components(dgd)
    for pod in pods:
        url = k8s_graph.metrics_url(pod, "frontend") if kinds.get(
            k8s_graph.component_of(pod), {}).get("type", "") == "frontend" else None
        if not url:
            continue
        port = url.rsplit(":", 1)[1].split("/", 1)[0]
        stdout, error = _exec(kube, namespace, pod["metadata"]["name"], first_data.PROBE,
                              "127.0.0.1", port, model, str(first_data.PROBE_REQUESTS))
        return {"pod": pod["metadata"]["name"], **first_data.parse_probe(stdout, error)}
    return {"error": "no frontend pod with an HTTP port to probe"}


def scrape(kube: Kube, namespace: str, dgd: dict, pods: list[dict]) -> dict[str, tuple[str,
                                                                                     str]]:
    """{pod: (component kind, /metrics text)}; a pod that cannot be read gives ''."""
    kinds = k8s_graph.components(dgd)
    out = {}
    for pod in pods:
        kind = kinds.get(k8s_graph.component_of(pod), {}).get("type", "")
        url = k8s_graph.metrics_url(pod, kind)
        if not url:
            continue
        port = url.rsplit(":", 1)[1].split("/", 1)[0]
        stdout, error = _exec(kube, namespace, pod["metadata"]["name"], METRICS_GET, port)
        out[pod["metadata"]["name"]] = (kind, "" if error else stdout.decode(errors="replace"))
    return out
