"""An in-memory Kubernetes cluster at the runner's client boundary (workloads.k8s_client.Kube).

It implements exactly the CoreV1 / BatchV1 / CustomObjects calls, the pod exec and the
in-cluster HTTP the aws target uses, with small simulated controllers:
- the Dynamo operator keeps each component's pods (replacing deleted ones with new uids and
  IPs, Ready after the component's load time) and reports the graph's v1beta1 status;
- the Job controller schedules a Job's pod by its node affinity against the fake nodes (no
  match: Pending/Unschedulable), runs it, and on completion lets the test's `job_run` hook
  produce what AIPerf would (real exports copied from tests/fixtures/runs) on the fake results
  PVC (a temp directory);
- exec in the transfer pod runs the real in-pod scripts with this interpreter, the PVC mount
  mapped onto that directory; exec in a serving pod answers the versions probe as the image
  would;
- the frontend and Prometheus answer through an httpx.MockTransport.
Time is a FakeClock: every wait advances it, so no test waits on a real clock. Every object
the runner creates is validated with kubernetes_validate strict (1.33) on creation.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from kubernetes.client.exceptions import ApiException

from tests.k8s_validation import validate_builtin
from workloads import k8s_scripts
from workloads.k8s_client import ExecResult, Kube
from workloads.k8s_graph import OP_COMPONENT_LABEL, OP_GRAPH_LABEL
from workloads.k8s_jobs import RESULTS_MOUNT

BASE = datetime(2026, 12, 1, tzinfo=UTC)
JOB_LABEL = "batch.kubernetes.io/job-name"


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


def _not_found(kind: str, name: str) -> ApiException:
    return ApiException(status=404, reason=f"{kind} {name} not found")


def matches(labels: dict[str, str], selector: str | None) -> bool:
    """Kubernetes equality / set-based label selectors (`k=v`, `k!=v`, `k in (a,b)`, `k`)."""
    if not selector:
        return True
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", selector):
        term = term.strip()
        if m := re.fullmatch(r"(\S+)\s+in\s+\(([^)]*)\)", term):
            if labels.get(m[1]) not in [v.strip() for v in m[2].split(",")]:
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def node_fits(node: dict, pod_spec: dict) -> bool:
    """The scheduler's view of requiredDuringScheduling node affinity (In only)."""
    labels = node["metadata"]["labels"]
    req = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    return not terms or any(all(labels.get(e["key"]) in e["values"]
                                for e in t["matchExpressions"]) for t in terms)


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
        self.dgds: dict[tuple[str, str], dict] = {}
        self.components: dict[tuple[str, str], list[Component]] = {}
        self.created: list[dict] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.prom_queries: list[str] = []
        self.job_run = lambda cluster, job, pod: JobRun()
        self.job_seconds = 20.0
        self.start_delay_s = 4.0
        self._uid = 0
        self.versions = {"ai-dynamo": "1.6.1", "ai-dynamo-runtime": "1.6.1", "vllm": "0.11.0",
                         "nixl": "0.7.1", "nixl-cu12": None, "nixl-cu13": None,
                         "torch": "2.8.0", "ucx-py": None}
        self.core, self.batch, self.custom = _Core(self), _Batch(self), _Custom(self)

    # --- seeding -------------------------------------------------------------------------
    def uid(self) -> str:
        self._uid += 1
        return f"uid-{self._uid:04d}"

    def add_node(self, name: str, group: str, zone: str, instance_type: str) -> None:
        self.nodes[name] = {"metadata": {"name": name, "labels": {
            "dynamo-bench.io/node-group": group, "topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": instance_type,
            "eks.amazonaws.com/capacityType": "ON_DEMAND"}}}

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
        status: dict[str, Any] = {"observedGeneration": 1, "components": {}}
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
        if job is not None and "result" in job["_fake"]:
            code = job["_fake"]["result"].exit_code
            return {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
                {"name": "aiperf", "restartCount": 0,
                 "state": {"terminated": {"exitCode": code}}}]}
        return {"phase": "Running", "containerStatuses": [
            {"name": "aiperf", "restartCount": 0, "state": {"running": {}}}]}

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
            pod["_fake"]["log"] = fake["result"].log

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
        graph = next(iter(self.dgds))
        model = self.model_name
        if path == "/v1/models":
            data = [{"id": model, "object": "model"}] if self.workers_ready() else []
            return httpx.Response(200, json={"object": "list", "data": data})
        if path == "/v1/chat/completions":
            assert graph
            chunks = [{"choices": [{"delta": {"content": w}}]} for w in ("KV ", "blocks ")]
            chunks.append({"choices": [], "usage": {"prompt_tokens": 8,
                                                    "completion_tokens": 2}})
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return httpx.Response(200, text=body,
                                  headers={"content-type": "text/event-stream"})
        return httpx.Response(404, text="no route")

    model_name = "Qwen/Qwen3-30B-A3B"

    def kube(self) -> Kube:
        return Kube(core=self.core, batch=self.batch, custom=self.custom, exec=self.exec,
                    transport=httpx.MockTransport(self.handle_http))

    def record_create(self, obj: dict) -> None:
        validate_builtin(obj)   # strict 1.33: unknown fields or kinds fail the test
        self.created.append(copy.deepcopy(obj))


class _Core:
    def __init__(self, c: FakeCluster):
        self.c = c

    def list_namespaced_pod(self, namespace, label_selector=None):
        for job in list(self.c.jobs.values()):
            self.c.advance_job(job)
        return {"items": [self.c.pod_view(p) for (ns, _), p in sorted(self.c.pods.items())
                          if ns == namespace and matches(p["metadata"]["labels"],
                                                         label_selector)]}

    def read_namespaced_pod(self, name, namespace):
        pod = self.c.pods.get((namespace, name))
        if pod is None:
            raise _not_found("pod", name)
        return self.c.pod_view(pod)

    def create_namespaced_pod(self, namespace, body):
        assert body["metadata"]["namespace"] == namespace
        if (namespace, body["metadata"]["name"]) in self.c.pods:
            raise ApiException(status=409, reason="AlreadyExists")
        self.c.record_create(body)
        pod = copy.deepcopy(body)
        pod["metadata"]["uid"] = self.c.uid()
        pod["_fake"] = {"created": self.c.clock.t, "transfer": True}
        self.c.pods[(namespace, body["metadata"]["name"])] = pod
        return self.c.pod_view(pod)

    def delete_namespaced_pod(self, name, namespace, body=None, grace_period_seconds=None):
        pod = self.c.pods.get((namespace, name))
        if pod is None:
            raise _not_found("pod", name)
        want = ((body or {}).get("preconditions") or {}).get("uid")
        if want and want != pod["metadata"]["uid"]:
            raise ApiException(status=409, reason="Precondition failed: UID mismatch")
        del self.c.pods[(namespace, name)]
        self.c.deleted.append(("Pod", namespace, name))
        comp = pod["_fake"].get("comp")
        if comp is not None:   # the operator replaces it
            graph = pod["metadata"]["labels"][OP_GRAPH_LABEL]
            self.c._operator_pod(namespace, graph, comp, ready_now=False)
        return {"status": "Success"}

    def read_namespaced_pod_log(self, name, namespace, container=None, previous=False,
                                tail_lines=None, limit_bytes=None):
        pod = self.c.pods.get((namespace, name))
        if pod is None:
            raise _not_found("pod", name)
        fake = pod["_fake"]
        text = fake.get("log") or (fake["comp"].log if "comp" in fake else "")
        if tail_lines:
            text = "\n".join(text.splitlines()[-tail_lines:])
        return text[:limit_bytes] if limit_bytes else text

    def read_node(self, name):
        if name not in self.c.nodes:
            raise _not_found("node", name)
        return copy.deepcopy(self.c.nodes[name])

    def list_node(self, label_selector=None):
        return {"items": [copy.deepcopy(n) for n in self.c.nodes.values()
                          if matches(n["metadata"]["labels"], label_selector)]}

    def create_namespaced_config_map(self, namespace, body):
        assert body["metadata"]["namespace"] == namespace
        self.c.record_create(body)
        self.c.configmaps[(namespace, body["metadata"]["name"])] = copy.deepcopy(body)
        return body

    def delete_namespaced_config_map(self, name, namespace):
        if (namespace, name) not in self.c.configmaps:
            raise _not_found("configmap", name)
        del self.c.configmaps[(namespace, name)]
        self.c.deleted.append(("ConfigMap", namespace, name))

    def list_namespaced_config_map(self, namespace, label_selector=None):
        return {"items": [copy.deepcopy(c) for (ns, _), c in self.c.configmaps.items()
                          if ns == namespace and matches(c["metadata"].get("labels", {}),
                                                         label_selector)]}


class _Batch:
    def __init__(self, c: FakeCluster):
        self.c = c

    def create_namespaced_job(self, namespace, body):
        assert body["metadata"]["namespace"] == namespace
        key = (namespace, body["metadata"]["name"])
        if key in self.c.jobs:
            raise ApiException(status=409, reason="AlreadyExists")
        self.c.record_create(body)
        job = copy.deepcopy(body)
        job["_fake"] = {"created": self.c.clock.t}
        spec = job["spec"]["template"]["spec"]
        node = next((n for n in sorted(self.c.nodes) if node_fits(self.c.nodes[n], spec)),
                    None)
        pod_name = f"{body['metadata']['name']}-x7k2p"
        labels = {**job["spec"]["template"]["metadata"]["labels"],
                  JOB_LABEL: body["metadata"]["name"], "job-name": body["metadata"]["name"]}
        self.c.pods[(namespace, pod_name)] = {
            "metadata": {"name": pod_name, "namespace": namespace, "uid": self.c.uid(),
                         "labels": labels},
            "spec": {**copy.deepcopy(spec), "nodeName": node},
            "_fake": {"created": self.c.clock.t, "job": body["metadata"]["name"]}}
        job["_fake"]["pod"] = pod_name
        self.c.jobs[key] = job
        return body

    def read_namespaced_job_status(self, name, namespace):
        job = self.c.jobs.get((namespace, name))
        if job is None:
            raise _not_found("job", name)
        self.c.advance_job(job)
        out = {k: v for k, v in copy.deepcopy(job).items() if k != "_fake"}
        result = job["_fake"].get("result")
        if result is None:
            out["status"] = {"active": 1}
        elif result.exit_code == 0:
            out["status"] = {"succeeded": 1, "conditions": [
                {"type": "Complete", "status": "True"}]}
        else:
            out["status"] = {"failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"}]}
        return out

    def delete_namespaced_job(self, name, namespace, propagation_policy=None):
        if (namespace, name) not in self.c.jobs:
            raise _not_found("job", name)
        job = self.c.jobs.pop((namespace, name))
        self.c.deleted.append(("Job", namespace, name))
        assert propagation_policy in ("Background", "Foreground"), "orphaned pods"
        pod = job["_fake"].get("pod")
        if pod and (namespace, pod) in self.c.pods:
            del self.c.pods[(namespace, pod)]
            self.c.deleted.append(("Pod", namespace, pod))

    def list_namespaced_job(self, namespace, label_selector=None):
        return {"items": [{k: v for k, v in j.items() if k != "_fake"}
                          for (ns, _), j in self.c.jobs.items()
                          if ns == namespace and matches(j["metadata"].get("labels", {}),
                                                         label_selector)]}


class _Custom:
    def __init__(self, c: FakeCluster):
        self.c = c

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        assert (group, version, plural) == ("nvidia.com", "v1beta1", "dynamographdeployments")
        if (namespace, name) not in self.c.dgds:
            raise _not_found("dynamographdeployment", name)
        return self.c.graph_view(namespace, name)


# --- what a finished AIPerf Job leaves on the PVC ---------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs" / "local-agg" / "fixture"
EXPORTS = ("profile_export.jsonl", "profile_export_aiperf.json", "server_metrics_export.json")


def fixture_for(step_id: str) -> Path:
    workload, name = step_id.split("/")[:2]
    exact = FIXTURES / workload / name
    if exact.is_dir():
        return exact
    siblings = sorted(p for p in (FIXTURES / workload).glob("*") if p.is_dir()) \
        if (FIXTURES / workload).is_dir() else []
    return siblings[0] if siblings else FIXTURES / "concurrency_sweep" / "c4"


def aiperf_argv(job: dict) -> list[str]:
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    return command[command.index("--") + 1:]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def step_id_of(artifact_dir: str) -> str:
    """The step id inside k8s_jobs.remote_step_dir(...)/aiperf."""
    return "/".join(artifact_dir.split("/")[4:-2])


def produce_exports(cluster: FakeCluster, job: dict, pod: dict, *, exit_code: int = 0,
                    cores: float = 1.5) -> JobRun:
    """Copy a real AIPerf run's exports into the Job's artifact dir on the fake PVC, with the
    request timestamps moved to the fake clock (a Job makes its exports when it runs), and
    the CPU samples the in-pod wrapper would write. Checks the dataset reached the pod."""
    argv = aiperf_argv(job)
    input_file = flag(argv, "--input-file")
    if input_file.startswith(RESULTS_MOUNT):
        assert cluster.pvc_path(input_file).exists(), "dataset missing on the PVC"
    else:
        volumes = job["spec"]["template"]["spec"]["volumes"]
        cm = next(v["configMap"]["name"] for v in volumes if "configMap" in v)
        assert (job["metadata"]["namespace"], cm) in cluster.configmaps, "dataset ConfigMap"
    artifacts = flag(argv, "--artifact-dir")
    src = fixture_for(step_id_of(artifacts))
    dest = cluster.pvc_path(artifacts)
    dest.mkdir(parents=True, exist_ok=True)
    lines = [x for x in (src / "profile_export.jsonl").read_text().splitlines() if x.strip()]
    first = cluster.clock.ns() - int(cluster.job_seconds * 1e9)
    shift = first - min(json.loads(x)["metadata"]["request_start_ns"] for x in lines)
    with (dest / "profile_export.jsonl").open("w") as out:
        for line in lines:
            rec = json.loads(line)
            for k, v in list(rec["metadata"].items()):
                if k.endswith("_ns") and isinstance(v, int):
                    rec["metadata"][k] = v + shift
            out.write(json.dumps(rec) + "\n")
    for name in EXPORTS[1:]:
        shutil.copy(src / name, dest / name)
    (dest / "logs").mkdir(exist_ok=True)
    shutil.copy(src / "logs" / "aiperf.log", dest / "logs" / "aiperf.log")
    with (dest / k8s_scripts.CPU_SAMPLES).open("w") as out:
        out.write(json.dumps({"source": "cgroup-v2"}) + "\n")
        for i in range(int(cluster.job_seconds * 2)):
            out.write(json.dumps({"t_ns": first + i * 500_000_000, "cores": cores}) + "\n")
    return JobRun(exit_code, log=f"aiperf {' '.join(argv[:3])} ... exit {exit_code}\n")


# --- a deployed stack on the fake cluster -----------------------------------------------------

NAMESPACE = "dynamo"
PROMETHEUS = "http://prometheus-kube-prometheus-prometheus.monitoring.svc.cluster.local:9090"
KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "https://eks.invalid"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
              "users": [{"name": "u", "user": {"token": "unused"}}]}


@dataclass
class Deployed:
    cluster: FakeCluster
    stack: Any
    outputs: Path
    graph: str


def deploy(tmp: Path, stack_name: str, *, frontend_node: str = "cpu-a", load_s: float = 240.0,
           ready: bool = True, crash: str | None = None) -> Deployed:
    """The stack's real DynamoGraphDeployment (components/graph.py) running on fake nodes:
    p4d nodes and a CPU node in us-east-1a, another CPU node in us-east-1b."""
    from components.graph import build_graph_deployment, deployment_name
    from stacks.loader import load_stack
    from stacks.preflight import effective_cluster
    from stacks.schema import TransferBackend

    stack = load_stack(stack_name)
    base = load_stack(stack.cluster.attach_to) if stack.is_attached else None
    efa = stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
    dgd = build_graph_deployment(stack, namespace=NAMESPACE, efa=efa,
                                 cluster=effective_cluster(stack, base))
    cluster = FakeCluster(tmp)
    cluster.model_name = stack.model.name
    for name, group, zone, itype in (("p4d-0", "p4d", "us-east-1a", "p4d.24xlarge"),
                                     ("p4d-1", "p4d", "us-east-1a", "p4d.24xlarge"),
                                     ("cpu-a", "cpu", "us-east-1a", "m7i.4xlarge"),
                                     ("cpu-b", "cpu", "us-east-1b", "m7i.4xlarge"),
                                     ("cpu-c", "system", "us-east-1c", "m7i.2xlarge")):
        cluster.add_node(name, group, zone, itype)
    comps = []
    for i, c in enumerate(dgd["spec"]["components"]):
        backend = "LIBFABRIC" if efa else "UCX"
        log = ("INFO vllm starting\n" + (f"Backend {backend} was instantiated\n"
                                         if c["type"] in ("prefill", "decode") else "")
               + ("torch.OutOfMemoryError: CUDA out of memory\n" if c["name"] == crash else ""))
        comps.append(Component(c["name"], c["type"], c["replicas"],
                                frontend_node if c["type"] == "frontend" else f"p4d-{i % 2}",
                                load_s=load_s if c["type"] != "frontend" else 5.0,
                                crash=c["name"] == crash, log=log))
    if not ready:   # the graph was just applied: pods start from the current time
        cluster.clock.t = 0.0
    cluster.add_graph(dgd, comps)
    if not ready:
        for pod in cluster.pods.values():
            pod["_fake"]["created"] = cluster.clock.t
            pod["metadata"]["creationTimestamp"] = cluster.clock.iso()
    graph = deployment_name(stack)
    outputs = tmp / "outputs.json"
    outputs.write_text(json.dumps({
        "kubeconfig": KUBECONFIG, "dynamoNamespace": NAMESPACE, "graphName": graph,
        "frontendService": f"{graph}-frontend", "prometheusService":
        "prometheus-kube-prometheus-prometheus", "prometheusUrl": PROMETHEUS,
        "region": "us-east-1", "clusterName": "base-a100"}))
    cluster.job_run = produce_exports
    return Deployed(cluster, stack, outputs, graph)


def aws_target(d: Deployed, tmp: Path, run_id: str = "run-1", messages: list | None = None):
    from workloads.targets.aws import AwsTarget
    return AwsTarget(d.stack, tmp / "engine", run_id=run_id, outputs_file=d.outputs,
                     kube=d.cluster.kube(), clock=d.cluster.clock,
                     report=(messages.append if messages is not None else None))
