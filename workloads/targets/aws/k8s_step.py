"""A step on a deployed stack: AIPerf as a Kubernetes Job, artifacts copied back, Prometheus read.

For each step the executor delivers the dataset (a ConfigMap when it fits, else a file on the
results PVC), creates the Job (k8s_jobs.loadgen_job), follows it to its end (a pod that cannot
start is a failed step with the reason, never a silent wait; a pod that has ended, Failed or
Succeeded, ends the step even before its Job says so), saves the pod's log as
`aiperf.log`, copies the artifacts into the step's directory (the same files a local run
leaves), reads the container's CPU samples for the saturation guard, evaluates the PromQL set
of workloads/promql.py at the end of the load window (`prometheus.json`), and deletes the Job
and its ConfigMap. Ctrl-C or any error while the Job runs deletes the Job first, then re-raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from workloads import promql, results
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.saturation import CpuSampler
from workloads.step_exec import Execution, hung_limit_s
from workloads.steps import Step
from workloads.targets.aws import k8s_cluster, k8s_jobs
from workloads.targets.aws.k8s_client import (
    Clock,
    Kube,
    KubeError,
    creating,
    is_not_found,
    items,
    retrying,
    to_dict,
)
from workloads.targets.aws.k8s_graph import pod_state
from workloads.targets.aws.k8s_scripts import CPU_SAMPLES
from workloads.targets.aws.k8s_transfer import ResultsVolume

POLL_S = 2.0
# A Job's terminal condition comes after its pod ends: the Job controller writes it once it has
# observed the pod's final status (since v1.31 a failing Job first carries `FailureTarget`;
# "When all of the Job Pods are terminated, the Job controller adds the `Failed` condition",
# kubernetes/website content/en/docs/concepts/workloads/controllers/job.md, "Terminal Job
# conditions", PR #46808). The pod's end is the step's end; the condition is waited for this
# long, for its reason, then the step ends on the pod's own status.
JOB_CONDITION_WAIT_S = 60.0
# The Job controller's pod label (Kubernetes >= 1.27).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LOG_LIMIT_BYTES = 32 << 20


@dataclass(frozen=True)
class JobSettings:
    namespace: str
    graph: str          # the DynamoGraphDeployment: scopes the step's PromQL to its series
    stack: str
    run_id: str
    image: str
    placement: k8s_jobs.Placement
    prometheus_url: str | None


def read_cpu_samples(path: Path) -> CpuSampler:
    """The container's CPU samples as a (never started) CpuSampler, so the judge summarises
    them over the load window exactly as it does the local client's."""
    sampler = CpuSampler(pid=0)
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            if "t_ns" in row:
                sampler.samples.append((int(row["t_ns"]), float(row["cores"])))
    return sampler


def evaluate_promql(http, prometheus_url: str, window_ns: tuple[int, int],
                    scope: promql.Scope) -> dict:
    """Every query of promql.step_queries over the load window, evaluated at its end and
    scoped to this graph's series (one Prometheus scrapes every graph and GPU of the
    cluster)."""
    start_s, end_s = window_ns[0] / 1e9, window_ns[1] / 1e9
    window = max(1.0, end_s - start_s)
    out: dict[str, Any] = {"prometheus": prometheus_url, "time": round(end_s, 3),
                           "window_s": round(window, 3),
                           "scope": {"namespace": scope.namespace, "graph": scope.graph},
                           "results": {}}
    for name, query in promql.step_queries(window, scope=scope).items():
        try:
            r = http.get(f"{prometheus_url}/api/v1/query",
                         params={"query": query, "time": f"{end_s:.3f}"})
            body = r.json()
            out["results"][name] = {"query": query, "status": body.get("status"),
                                    "result": (body.get("data") or {}).get("result"),
                                    "error": body.get("error")}
        except Exception as exc:  # noqa: BLE001 - record it; the step's own data stands
            out["results"][name] = {"query": query, "status": "error", "error": str(exc)}
    return out


class JobExecutor:
    """StepExecutor of the aws target (see the module docstring)."""

    def __init__(self, kube: Kube, settings: JobSettings, volume: ResultsVolume, clock: Clock,
                 attempt: str):
        self.kube, self.s, self.volume, self.clock = kube, settings, volume, clock
        self.attempt = attempt
        self.labels = k8s_jobs.run_labels(settings.stack, settings.run_id)

    def run(self, step: Step, inv: AiperfInvocation, work: Path, on_tick, note) -> Execution:
        s = self.s
        name = k8s_jobs.job_name(s.stack, s.run_id, step.id, self.attempt)
        remote = k8s_jobs.remote_step_dir(s.stack, s.run_id, step.id, name)
        artifacts = f"{remote}/aiperf"
        cpu = k8s_jobs.loadgen_cpu(step.concurrency, s.placement.max_cpu)
        data = Path(inv.input_file).read_bytes()
        configmap = None
        if len(data) <= k8s_jobs.CONFIGMAP_MAX_BYTES:
            configmap = k8s_jobs.dataset_configmap(name, s.namespace, self.labels, data.decode())
            input_file = f"{k8s_jobs.INPUTS_MOUNT}/{k8s_jobs.DATASET_KEY}"
        else:
            input_file = f"{remote}/{k8s_jobs.DATASET_KEY}"
            self.volume.write(input_file, data)
        remote_inv = replace(inv, input_file=PurePosixPath(input_file),
                             artifact_dir=PurePosixPath(artifacts),
                             workers_max=k8s_jobs.aiperf_workers(cpu, step.concurrency))
        args = profile_args(remote_inv)
        limit_s = hung_limit_s(step, inv)
        job = k8s_jobs.loadgen_job(
            name=name, namespace=s.namespace, labels=self.labels, step_id=step.id,
            image=s.image, aiperf_args=args, artifact_dir=artifacts, placement=s.placement,
            cpu=cpu, deadline_s=limit_s, dataset_configmap=name if configmap else None)
        command = ["aiperf", *args]
        loadgen = {"job": name, "image": s.image, "cpu": cpu, "zone": s.placement.zone,
                   "node_groups": list(s.placement.node_groups), "remote_dir": remote,
                   "dataset_delivery": "configmap" if configmap else "results-pvc"}
        note(command=command, loadgen=loadgen)
        t0 = self.clock.now()
        try:
            # a transient API failure (429, 5xx, a dropped connection) is retried; a refusal
            # ends the step with the API's reason
            if configmap:
                creating(self.clock, f"cannot create ConfigMap {s.namespace}/{name}",
                         lambda: self.kube.core.create_namespaced_config_map(s.namespace,
                                                                             configmap))
            creating(self.clock, f"cannot create Job {s.namespace}/{name}",
                     lambda: self.kube.batch.create_namespaced_job(s.namespace, job))
            on_tick(0.0)
            exit_code, failure, pod = self._follow(name, limit_s, on_tick)
        except BaseException:
            self.delete(name)   # the load stops first, whatever happened
            raise
        wall = self.clock.now() - t0
        loadgen.update(pod=pod and pod["metadata"]["name"],
                       node=pod and pod.get("spec", {}).get("nodeName"),
                       image_id=image_id(pod))
        failure = self._collect(name, pod, artifacts, work, failure)
        self.delete(name)
        prom = self._prometheus(work)
        if prom:
            loadgen["prometheus"] = prom
        return Execution(exit_code, read_cpu_samples(work / CPU_SAMPLES), wall, command, cpu,
                         failure, {"loadgen": loadgen})

    # --- the Job's life ----------------------------------------------------------------------
    def _follow(self, name: str, limit_s: float, on_tick) -> tuple[int | None, str | None,
                                                                  dict | None]:
        """Wait for the Job to end: (AIPerf's exit code, why it failed, its pod)."""
        ns = self.s.namespace
        t0 = self.clock.now()
        pod: dict | None = None
        pod_ended_at: float | None = None
        while True:
            job = to_dict(retrying(self.clock, f"reading Job {ns}/{name}", lambda: (
                self.kube.batch.read_namespaced_job_status(name, ns))))
            pods = items(retrying(self.clock, f"listing the pods of Job {name}", lambda: (
                self.kube.core.list_namespaced_pod(
                    ns, label_selector=f"{JOB_NAME_LABEL}={name}"))))
            pod = pods[-1] if pods else pod
            conds = {c["type"]: c for c in job.get("status", {}).get("conditions") or []
                     if c.get("status") == "True"}
            if "Complete" in conds or "Failed" in conds:
                code = _exit_code(pod)
                failed = conds.get("Failed")
                why = (f"Job {name} failed: {failed.get('reason')}: {failed.get('message')}"
                       if failed else None)
                return code, why, pod
            state = pod_state(pod) if pod else None
            elapsed = self.clock.now() - t0
            phase = (pod or {}).get("status", {}).get("phase")
            if pod is not None and phase in ("Succeeded", "Failed"):
                # AIPerf has exited (or the pod was evicted): a failed step with what it left,
                # never an aborted run; the Job's condition, when it comes, gives the reason.
                pod_ended_at = self.clock.now() if pod_ended_at is None else pod_ended_at
                if self.clock.now() - pod_ended_at >= JOB_CONDITION_WAIT_S:
                    code = _exit_code(pod)
                    status = pod.get("status", {})
                    why = None if phase == "Succeeded" and code == 0 else (
                        f"load generator pod of Job {name} {phase} "
                        f"({status.get('reason') or status.get('message') or f'exit {code}'}); "
                        f"the Job carried no terminal condition within "
                        f"{JOB_CONDITION_WAIT_S:.0f} s")
                    return code, why, pod
            elif state and state.fatal:
                raise KubeError(f"load generator pod of Job {name}: {state.problem}")
            started = bool(pod and pod.get("status", {}).get("phase") in ("Running",
                                                                          "Succeeded",
                                                                          "Failed"))
            if not started and elapsed > k8s_jobs.START_SLACK_S:
                raise KubeError(f"Job {name} did not start within {k8s_jobs.START_SLACK_S} s: "
                                f"{(state and state.problem) or 'no pod created'}")
            if elapsed > limit_s + k8s_jobs.START_SLACK_S:
                raise KubeError(f"Job {name} ran past its {limit_s:.0f} s limit")
            on_tick(elapsed)
            self.clock.sleep(POLL_S)

    def _collect(self, name: str, pod: dict | None, artifacts: str, work: Path,
                 failure: str | None) -> str | None:
        """The pod's log and the artifacts into `work`; returns the failure, amended."""
        ns = self.s.namespace
        if pod is not None:
            # still unreadable after its retries, the file says so: the artifacts matter more
            (work / "aiperf.log").write_text(k8s_cluster.read_log(
                self.kube, ns, pod["metadata"]["name"], self.clock, LOG_LIMIT_BYTES,
                container="aiperf"))
        try:
            self.volume.fetch_dir(artifacts, work)
        except KubeError as exc:
            note = f"artifacts of Job {name} not copied: {exc}"
            failure = f"{failure}; {note}" if failure else note
        return failure

    def _prometheus(self, work: Path) -> str | None:
        window = results.load_window_ns(results.read_records(work))
        if not self.s.prometheus_url or window is None:
            return None
        with self.kube.http() as http:
            doc = evaluate_promql(http, self.s.prometheus_url, window,
                                  promql.Scope(self.s.namespace, self.s.graph))
        (work / "prometheus.json").write_text(json.dumps(doc, indent=2))
        return "prometheus.json"

    def delete(self, name: str) -> None:
        """Delete a step's Job (with its pod) and dataset ConfigMap; absent ones are fine."""
        ns = self.s.namespace
        for call in (lambda: self.kube.batch.delete_namespaced_job(
                         name, ns, propagation_policy="Background"),
                     lambda: self.kube.core.delete_namespaced_config_map(name, ns)):
            try:
                call()
            except Exception as exc:  # noqa: BLE001
                if not is_not_found(exc):
                    raise


def image_id(pod: dict | None) -> str | None:
    """The digest the load generator's container really ran (`status.containerStatuses[].
    imageID`, `<repo>@sha256:...`: the tag `nvcr.io/nvidia/aiperf:<version>` is mutable and
    pulled IfNotPresent; runner.md M5), or None where the cluster reported none (a pod that
    never started; the kubelet leaves it empty until the container runs)."""
    for status in (pod or {}).get("status", {}).get("containerStatuses") or []:
        if status.get("name") == k8s_jobs.AIPERF_CONTAINER and status.get("imageID"):
            return str(status["imageID"])
    return None


def _exit_code(pod: dict | None) -> int | None:
    for status in (pod or {}).get("status", {}).get("containerStatuses") or []:
        if status.get("name") == k8s_jobs.AIPERF_CONTAINER:
            term = (status.get("state") or {}).get("terminated") or {}
            return term.get("exitCode")
    return None
