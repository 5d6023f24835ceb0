"""An in-memory Kubernetes cluster at the runner's client boundary
(workloads.targets.aws.k8s_client.Kube).

It implements exactly the CoreV1 / BatchV1 / CustomObjects calls, the pod exec and the
in-cluster HTTP the aws target uses, with small simulated controllers:
- the Dynamo operator keeps each component's pods (replacing deleted ones with new uids and
  IPs, Ready after the component's load time) and reports the graph's v1beta1 status;
- the Job controller schedules a Job's pod by its node affinity against the fake nodes (no
  match: Pending/Unschedulable), runs it, and on completion lets the test's `job_run` hook
  produce what AIPerf would (real exports copied from tests/fixtures/runs) on the fake results
  PVC (a temp directory);
- exec in the transfer pod runs the real in-pod scripts with this interpreter, the PVC mount
  mapped onto that directory; exec in a serving pod answers the versions, GPU and metrics
  probes as the image would, and the request-trace read runs the real script on the frontend
  pod's trace file;
- the frontend and Prometheus answer through an httpx.MockTransport.
Time is a FakeClock: every wait advances it, so no test waits on a real clock. Every object
the runner creates is validated with kubernetes_validate strict (K8S_VERSION) on creation.
The API methods themselves are in tests/aws_target_fake_api.py; a stack deployed on this
cluster (and the exports its Jobs leave) in tests/aws_target_deploy.py.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from stacks.conventions.frontend_trace import REQUEST_TRACE_POD_PATH
from tests.aws_target_fake_api import FakeBatchV1, FakeCoreV1, FakeCustomObjects, _not_found
from tests.aws_target_fake_serving import FakeServing
from tests.k8s_validation import validate_builtin
from workloads.attest import first_data
from workloads.targets.aws import k8s_scripts
from workloads.targets.aws.attest_scripts import GPU_PROBE, LOADED_FABRIC, METRICS_GET
from workloads.targets.aws.k8s_client import ExecResult, Kube
from workloads.targets.aws.k8s_graph import OP_COMPONENT_LABEL, OP_GRAPH_LABEL
from workloads.targets.aws.k8s_jobs import RESULTS_MOUNT

BASE = datetime(2026, 12, 1, tzinfo=UTC)


class FakeClock:
    def __init__(self):
        self.t = 0.0
        self.interrupt_at: float | None = None   # raise KeyboardInterrupt once past this time

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        if self.interrupt_at is not None and self.t >= self.interrupt_at:
            self.interrupt_at = None
            raise KeyboardInterrupt("Ctrl-C (test)")

    def at(self, t: float | None = None) -> datetime:
        return BASE + timedelta(seconds=self.t if t is None else t)

    def iso(self, t: float | None = None) -> str:
        return self.at(t).isoformat().replace("+00:00", "Z")

    def wall(self) -> str:
        return self.at().isoformat(timespec="milliseconds")

    def ns(self) -> int:
        return int(self.at().timestamp() * 1e9)


class Serialised:
    """An API object whose every method call holds `lock`."""

    def __init__(self, api: Any, lock: threading.RLock):
        self._api, self._lock = api, lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            with self._lock:
                return attr(*args, **kwargs)
        return call


@dataclass
class Component:
    name: str
    type: str
    replicas: int
    node: str
    load_s: float = 60.0
    crash: bool = False          # the main container keeps crashing (CrashLoopBackOff)
    log: str = ""
    spec: dict = field(default_factory=dict)


@dataclass
class JobRun:
    """What the test's hook says a finished Job did."""
    exit_code: int = 0
    log: str = "aiperf finished\n"


class FakeCluster:
    def __init__(self, tmp: Path, clock: FakeClock | None = None):
        self.clock = clock or FakeClock()
        self.pvc = tmp / "results-pvc"
        self.pvc.mkdir(parents=True, exist_ok=True)
        self.pods: dict[tuple[str, str], dict] = {}
        self.jobs: dict[tuple[str, str], dict] = {}
        self.configmaps: dict[tuple[str, str], dict] = {}
        self.nodes: dict[str, dict] = {}
        # node -> fake time it leaves (an Auto Mode pool's empty node, after its grace)
        self.node_expiry: dict[str, float] = {}
        self.dgds: dict[tuple[str, str], dict] = {}
        self.components: dict[tuple[str, str], list[Component]] = {}
        self.created: list[dict] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.prom_queries: list[str] = []
        self.job_run = lambda cluster, job, pod: JobRun()
        self.job_seconds = 20.0
        self.start_delay_s = 4.0
        # how long after its pod ends a Job takes to carry its terminal condition (the Job
        # controller writes it after it observes the pod; 0: at once)
        self.job_condition_lag_s = 0.0
        self._uid = 0
        # What the frontend pod's first-data probe prints (workloads/attest/first_data.py): a
        # frontend that sets TCP_NODELAY, by default.
        self.first_data = {"requests": 8, "quickack_supported": True, "stall_ms": 0.4,
                           "plain": {"first_data_p50_ms": 21.0, "frontend_ttft_mean_ms": 20.1},
                           "quickack": {"first_data_p50_ms": 20.6,
                                        "frontend_ttft_mean_ms": 20.0}}
        self.first_data_probes: list[list[str]] = []
        self.versions = {"ai-dynamo": "1.6.1", "ai-dynamo-runtime": "1.6.1", "vllm": "0.11.0",
                         "nixl": "0.7.1", "nixl-cu12": None, "nixl-cu13": None,
                         "torch": "2.8.0", "ucx-py": None}
        self.serving = FakeServing()
        self.lock = threading.RLock()
        self.core, self.batch = FakeCoreV1(self), FakeBatchV1(self)
        self.custom = FakeCustomObjects(self)

    # --- seeding -------------------------------------------------------------------------
    def uid(self) -> str:
        self._uid += 1
        return f"uid-{self._uid:04d}"

    def add_node(self, name: str, group: str, zone: str, instance_type: str) -> None:
        self.nodes[name] = {"metadata": {"name": name, "labels": {
            "dynamo-bench.io/node-group": group, "topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": instance_type,
            "eks.amazonaws.com/capacityType": "ON_DEMAND"}}}

    def expire_nodes(self) -> None:
        for name, t in list(self.node_expiry.items()):
            if self.clock.t >= t:
                self.nodes.pop(name, None)
                del self.node_expiry[name]

    def add_graph(self, dgd: dict, comps: list[Component]) -> None:
        ns, name = dgd["metadata"]["namespace"], dgd["metadata"]["name"]
        dgd = copy.deepcopy(dgd)
        dgd["metadata"].update(generation=1, uid=self.uid())
        self.dgds[(ns, name)] = dgd
        specs = {c["name"]: c for c in dgd["spec"]["components"]}
        for comp in comps:
            comp.spec = specs[comp.name]
        self.components[(ns, name)] = comps
        for comp in comps:
            for _ in range(comp.replicas):
                self._operator_pod(ns, name, comp, ready_now=True)

    def _operator_pod(self, ns: str, graph: str, comp: Component, ready_now: bool) -> dict:
        """A pod as the Dynamo operator makes it from the component's podTemplate."""
        uid = self.uid()
        tmpl = copy.deepcopy(comp.spec["podTemplate"])
        main = tmpl["spec"]["containers"][0]
        port = ("http", 8000) if comp.type == "frontend" else ("system", 9090)
        main["ports"] = [{"name": port[0], "containerPort": port[1]}]
        t0 = self.clock.t - (comp.load_s + 30 if ready_now else 0)
        pod = {"metadata": {"name": f"{graph}-{comp.name}-{uid[-4:]}", "namespace": ns,
                            "uid": uid, "creationTimestamp": self.clock.iso(t0),
                            "labels": {**tmpl["metadata"].get("labels", {}),
                                       OP_GRAPH_LABEL: graph, OP_COMPONENT_LABEL: comp.name}},
               "spec": {**tmpl["spec"], "nodeName": comp.node},
               "_fake": {"created": t0, "comp": comp, "ip": f"10.0.{self._uid // 250}."
                                                             f"{self._uid % 250 + 1}"}}
        if comp.type != "frontend":   # scheduled where the device plugin has free GPUs
            gpu_nodes = [comp.node, *sorted(n for n in self.nodes if n != comp.node
                                            and n.startswith(comp.node.split("-")[0]))]
            pod["spec"]["nodeName"] = self.serving.allocate(pod, gpu_nodes)
        self.pods[(ns, pod["metadata"]["name"])] = pod
        return pod

    # --- simulated status ------------------------------------------------------------------
    def pod_view(self, pod: dict) -> dict:
        out = {k: v for k, v in copy.deepcopy(pod).items() if k != "_fake"}
        fake = pod["_fake"]
        if "job" in fake:
            out["status"] = self._job_pod_status(pod)
            return out
        if "transfer" in fake:
            started = self.clock.t >= fake["created"] + self.start_delay_s
            out["status"] = {"phase": "Running" if started else "Pending",
                             "conditions": [{"type": "Ready",
                                             "status": "True" if started else "False"}],
                             "containerStatuses": [{"name": "transfer", "restartCount": 0,
                                                    "state": {"running": {}} if started else
                                                    {"waiting": {"reason":
                                                                 "ContainerCreating"}}}]}
            return out
        comp: Component = fake["comp"]
        t0 = fake["created"]
        scheduled, started, ready_at = t0 + 1, t0 + 20, t0 + 20 + comp.load_s
        image = comp.spec["podTemplate"]["spec"]["containers"][0]["image"]
        main = {"name": "main", "image": image,
                "imageID": f"{image.split(':')[0]}@sha256:{'ab' * 32}", "restartCount": 0}
        conds = [{"type": "PodScheduled", "status": "True",
                  "lastTransitionTime": self.clock.iso(scheduled)}]
        if comp.crash and self.clock.t >= started:
            restarts = 1 + int((self.clock.t - started) // 30)
            main |= {"restartCount": restarts,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                     "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
            conds.append({"type": "Ready", "status": "False"})
        elif self.clock.t >= started:
            main["state"] = {"running": {"startedAt": self.clock.iso(started)}}
            ready = self.clock.t >= ready_at
            conds.append({"type": "Ready", "status": "True" if ready else "False",
                          "lastTransitionTime": self.clock.iso(ready_at if ready else started)})
        else:
            main["state"] = {"waiting": {"reason": "ContainerCreating"}}
            conds.append({"type": "Ready", "status": "False"})
        out["status"] = {"phase": "Running" if self.clock.t >= started else "Pending",
                         "podIP": fake["ip"], "conditions": conds, "containerStatuses": [main]}
        return out

    def graph_view(self, ns: str, name: str) -> dict:
        dgd = copy.deepcopy(self.dgds[(ns, name)])
        # the operator has seen the current spec (a campaign's adoption bumps the generation)
        status: dict[str, Any] = {"observedGeneration": dgd["metadata"].get("generation", 1),
                                  "components": {}}
        all_ready = True
        for comp in self.components[(ns, name)]:
            pods = [self.pod_view(p) for p in self.pods.values()
                    if p["_fake"].get("comp") is comp]
            ready = sum(any(c["type"] == "Ready" and c["status"] == "True"
                            for c in p["status"]["conditions"]) for p in pods)
            status["components"][comp.name] = {"componentKind": "Deployment",
                                               "replicas": len(pods), "updatedReplicas":
                                               len(pods), "readyReplicas": ready}
            all_ready &= ready >= comp.replicas
        status["state"] = "successful" if all_ready else "pending"
        status["conditions"] = [{"type": "Ready", "status": "True" if all_ready else "False",
                                 "reason": "AllReady" if all_ready else "NotReady",
                                 "message": "", "lastTransitionTime": self.clock.iso()}]
        dgd["status"] = status
        return dgd

    def workers_ready(self) -> bool:
        return all(self.graph_view(*key)["status"]["state"] == "successful"
                   for key in self.dgds)

    # --- Jobs ------------------------------------------------------------------------------
    def _job_pod_status(self, pod: dict) -> dict:
        fake = pod["_fake"]
        job = self.jobs.get((pod["metadata"]["namespace"], fake["job"]))
        if not pod["spec"].get("nodeName"):
            return {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/4 nodes are available: node affinity mismatch"}]}
        t = self.clock.t - fake["created"]
        if t < self.start_delay_s:
            return {"phase": "Pending", "containerStatuses": [
                {"name": "aiperf", "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        # a started container reports the image it runs and its digest, as the kubelet does
        image = pod["spec"]["containers"][0]["image"]
        pulled = {"image": image, "imageID": f"{image.split(':')[0]}@sha256:{'cd' * 32}"}
        if job is not None and "result" in job["_fake"]:
            code = job["_fake"]["result"].exit_code
            return {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
                {"name": "aiperf", "restartCount": 0, **pulled,
                 "state": {"terminated": {"exitCode": code}}}]}
        return {"phase": "Running", "containerStatuses": [
            {"name": "aiperf", "restartCount": 0, **pulled, "state": {"running": {}}}]}

    def seed_job(self, namespace: str, body: dict) -> None:
        """Someone else's Job, running all along (never finishes while the test looks)."""
        self.batch.create_namespaced_job(namespace, body)
        self.jobs[(namespace, body["metadata"]["name"])]["_fake"]["foreign"] = True

    def advance_job(self, job: dict) -> None:
        fake = job["_fake"]
        if "result" in fake or fake.get("pod") is None or fake.get("foreign"):
            return
        pod = self.pods.get((job["metadata"]["namespace"], fake["pod"]))
        if pod is None or not pod["spec"].get("nodeName"):
            return
        if self.clock.t - fake["created"] >= self.start_delay_s + self.job_seconds:
            fake["result"] = self.job_run(self, job, pod)
            fake["result_at"] = self.clock.t
            pod["_fake"]["log"] = fake["result"].log

    def trace_file(self, pod: str) -> Path:
        """Where the frontend pod `pod` keeps its request trace (its /tmp, here a folder)."""
        return self.pvc.parent / "frontend-traces" / f"{pod}.jsonl"

    def frontend_pods(self) -> list[str]:
        return sorted(name for (_, name), p in self.pods.items()
                      if p["_fake"].get("comp") and p["_fake"]["comp"].type == "frontend")

    def pvc_path(self, remote: str) -> Path:
        assert remote.startswith(RESULTS_MOUNT + "/"), remote
        return self.pvc / remote[len(RESULTS_MOUNT) + 1:]

    # --- the client boundary ---------------------------------------------------------------
    def exec(self, namespace: str, pod: str, argv: list[str], container: str | None = None,
             stdin: bytes | None = None, timeout_s: float = 600.0) -> ExecResult:
        obj = self.pods.get((namespace, pod))
        if obj is None:
            raise _not_found("pod", pod)
        if "transfer" in obj["_fake"]:
            assert self.pod_view(obj)["status"]["phase"] == "Running", "exec before running"
            assert argv[0] == k8s_scripts.AIPERF_PYTHON and argv[1] == "-c"
            args = [str(self.pvc_path(a)) if a.startswith(RESULTS_MOUNT) else a
                    for a in argv[3:]]
            done = subprocess.run([sys.executable, "-c", argv[2], *args], input=stdin or b"",
                                  capture_output=True, timeout=60)
            return ExecResult(done.stdout, done.stderr, done.returncode)
        if argv[:3] == [k8s_scripts.RUNTIME_PYTHON, "-c", k8s_scripts.VERSIONS]:
            return ExecResult(json.dumps(self.versions).encode(), b"", 0)
        if argv[:3] == [k8s_scripts.RUNTIME_PYTHON, "-c", k8s_scripts.READ_TRACE]:
            assert argv[3] == REQUEST_TRACE_POD_PATH, argv   # the path the graph configured
            done = subprocess.run([sys.executable, "-c", argv[2], str(self.trace_file(pod)),
                                   *argv[4:]], capture_output=True, timeout=60)
            return ExecResult(done.stdout, done.stderr, done.returncode)
        if argv[:3] == [k8s_scripts.RUNTIME_PYTHON, "-c", first_data.PROBE]:
            self.first_data_probes.append(argv[3:])
            return ExecResult(json.dumps(self.first_data).encode(), b"", 0)
        if argv[:3] == [k8s_scripts.RUNTIME_PYTHON, "-c", GPU_PROBE]:
            return ExecResult(self.serving.probe(obj), b"", 0)
        if argv[:3] == [k8s_scripts.RUNTIME_PYTHON, "-c", LOADED_FABRIC]:
            return ExecResult(self.serving.loaded_fabric(obj), b"", 0)
        if argv[:3] == [k8s_scripts.RUNTIME_PYTHON, "-c", METRICS_GET]:
            comp = obj["_fake"]["comp"]
            graph = obj["metadata"]["labels"][OP_GRAPH_LABEL]
            first = min(n for (_, n), p in self.pods.items() if p["_fake"].get("comp") is comp)
            kind_first = comp is next(c for c in self.components[(namespace, graph)]
                                      if c.type == comp.type)
            return ExecResult(self.serving.metrics(graph, comp.type, kind_first
                                                   and obj["metadata"]["name"] == first),
                              b"", 0)
        return ExecResult(b"", f"{argv[0]}: not found".encode(), 127)

    def handle_http(self, request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        if host.startswith("prometheus"):
            query = request.url.params["query"]
            self.prom_queries.append(query)
            return httpx.Response(200, json={"status": "success", "data": {
                "resultType": "vector",
                "result": [{"metric": {}, "value": [float(request.url.params["time"]),
                                                    "0.5"]}]}})
        # the frontend Service of graph G is G-frontend (components/graph.py), reached as
        # http://G-frontend.<namespace>.svc.cluster.local (k8s_outputs.frontend_url)
        name, namespace = host.split(".")[:2]
        graph = name.removesuffix("-frontend")
        if (namespace, graph) not in self.dgds:
            raise httpx.ConnectError(f"no Service {name} in {namespace}", request=request)
        serving = self.serving.graph(graph)
        if path == "/v1/models":
            ready = self.graph_view(namespace, graph)["status"]["state"] == "successful"
            data = [{"id": serving.model, "object": "model"}] if ready else []
            return httpx.Response(200, json={"object": "list", "data": data})
        if path == "/v1/chat/completions" and not json.loads(request.content).get("stream"):
            body = json.loads(request.content)
            usage = self.serving.chat(graph, body["messages"][-1]["content"])
            return httpx.Response(200, json={"object": "chat.completion", "usage": usage,
                                             "choices": [{"index": 0, "message": {
                                                 "role": "assistant", "content": "KV"}}]})
        if path == "/v1/chat/completions":
            chunks = [{"choices": [{"delta": {"content": w}}]} for w in ("KV ", "blocks ")]
            chunks.append({"choices": [], "usage": {"prompt_tokens": 8,
                                                    "completion_tokens": 2}})
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return httpx.Response(200, text=body,
                                  headers={"content-type": "text/event-stream"})
        return httpx.Response(404, text="no route")

    def kube(self) -> Kube:
        """The client boundary, each call under the cluster's lock: a campaign runs
        side-by-side variants in threads over this one in-memory cluster."""
        return Kube(core=Serialised(self.core, self.lock), batch=Serialised(self.batch, self.lock),
                    custom=Serialised(self.custom, self.lock), exec=self.locked(self.exec),
                    transport=httpx.MockTransport(self.locked(self.handle_http)))

    def locked(self, fn):
        def call(*args, **kwargs):
            with self.lock:
                return fn(*args, **kwargs)
        return call

    def record_create(self, obj: dict) -> None:
        validate_builtin(obj)   # strict (K8S_VERSION): unknown fields or kinds fail the test
        self.created.append(copy.deepcopy(obj))
