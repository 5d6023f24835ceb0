"""The `aws` target: a deployed stack, driven from this machine through its kubeconfig.

The Pulumi stack outputs (workloads/targets/aws/k8s_outputs.py) give the kubeconfig, the
namespace, the DynamoGraphDeployment and the frontend Service. With them the target
- waits for the graph and its pods to be ready, bounded by the stack's start-up budget
  (serving.startupBudgetMinutes, else twice the model-load estimate, plus time for scheduling
  and image pulls), and until the frontend lists the model; each pod's scheduling, pull and
  model-load times are recorded apart from the load that follows;
- records where the graph runs (nodes, instance types, zones), the image digests actually
  running, the Dynamo / vLLM / NIXL versions the pods report, and the KV transfer backend;
- runs every step as a Kubernetes Job on a CPU node group in the frontend's zone
  (workloads/targets/aws/k8s_step.py), with one transfer pod per run for the results PVC;
- restarts only this graph's worker pods for a cold-cache step (selector from the graph's own
  components) and waits until their replacements are ready;
- on stop (end, failure or Ctrl-C) deletes this run's Jobs, ConfigMaps and transfer pod, found
  by the run's labels in the stack's namespace, and leaves the deployment as it was.
"""

from __future__ import annotations

import functools
import secrets
from collections import Counter
from pathlib import Path

from stacks.catalog.node_images import image_cuda
from stacks.config.loader import STACKS_DIR, load_stack
from stacks.config.schema import ComputeMode, StackConfig
from stacks.conventions.k8s_names import NODE_GROUP_LABEL, ZONE_LABEL, cpu_node_groups
from stacks.preflight.run import effective_cluster
from stacks.sizing.estimate import model_load_seconds
from workloads.attest import probe as attest_probe
from workloads.attest.checks import Attestation, evaluate
from workloads.attest.parse import expected
from workloads.smoke import list_models
from workloads.targets.aws import attest_aws, k8s_cluster, k8s_graph, k8s_jobs
from workloads.targets.aws.k8s_client import (
    Clock,
    Kube,
    KubeError,
    connect,
    is_not_found,
    items,
    retrying,
)
from workloads.targets.aws.k8s_outputs import (
    check_outputs,
    endpoints_from_outputs,
    kubeconfig,
    prometheus_url,
    public_outputs,
    read_outputs,
)
from workloads.targets.aws.k8s_step import JobExecutor, JobSettings
from workloads.targets.aws.k8s_trace import FrontendTraces
from workloads.targets.aws.k8s_transfer import ResultsVolume
from workloads.targets.base import Endpoints, TargetError

# Scheduling, node start-up and image pulls (the vLLM runtime image is tens of GB) on top of
# the model load itself.
READY_MARGIN_S = 900.0
MODEL_LIST_POLL_S = 5.0


def ready_timeout_s(stack: StackConfig) -> float:
    """The start-up budget when the stack states one; otherwise twice the estimate."""
    load = model_load_seconds(stack)
    if stack.serving is None or stack.serving.startup_budget_minutes is None:
        load *= 2
    return load + READY_MARGIN_S


class AwsTarget:
    kind = "aws"

    def __init__(self, stack: StackConfig, workdir: Path, *, run_id: str | None = None,
                 stacks_dir: Path = STACKS_DIR, outputs_file: Path | None = None,
                 kube: Kube | None = None, clock: Clock | None = None, report=None,
                 kv_capacity_tokens: list[int] | None = None, outputs: dict | None = None,
                 **_ignored):
        if stack.serving is None:
            raise TargetError(f"stack '{stack.name}' serves nothing (no serving block)")
        self.stack, self.workdir = stack, Path(workdir)
        # a campaign hands over the outputs its Automation API `up` returned
        if outputs is not None:
            check_outputs(outputs, stack)
            self.outputs = outputs
        else:
            self.outputs = read_outputs(stack, outputs_file)
        self.namespace, self.graph = self.outputs["dynamoNamespace"], self.outputs["graphName"]
        self.run_id = run_id or "adhoc"
        base = load_stack(stack.cluster.attach_to, stacks_dir) \
            if stack.cluster.attach_to is not None else None  # is_attached
        self.cluster = effective_cluster(stack, base)
        self.kube = kube or connect(kubeconfig(self.outputs))
        self.clock = clock or Clock()
        self.report = report or (lambda message: None)
        self.prometheus = prometheus_url(self.outputs)
        self.service = endpoints_from_outputs(self.outputs, stack.model.name)
        self.timeout_s = ready_timeout_s(stack)
        self.token = secrets.token_hex(3)   # tells this attempt's Jobs from earlier ones
        self.image = k8s_jobs.aiperf_image()
        self.dgd: dict = {}
        self.pods: list[dict] = []
        self.restarts: dict[str, int] = {}   # pod uid -> restarts when last observed
        self.nodes: dict[str, dict] = {}     # node name -> usage record
        self.startup: dict = {}
        self.versions: dict = {}
        self.kv: dict = {}
        self.placement: k8s_jobs.Placement | None = None
        self.volume: ResultsVolume | None = None
        self.stopped: str | None = None
        self.stop_errors: list[str] = []
        self.traces = FrontendTraces(self.kube, self.namespace)
        # GPU KV capacity of the workers that offload (pre-flight), for the overflow probe.
        self.offload_capacity = sum(
            tokens * w.replicas for w, tokens in zip(stack.serving.workers,
                                                    kv_capacity_tokens or [], strict=False)
            if w.role.value in ("worker", "prefill"))
        self.attestations = 0
        self.gpu_drivers: list[str] = []

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        # A resumed run id first removes its own leftovers (an attempt killed hard): an old
        # Job still sending load would distort every step that follows.
        leftovers = self._delete_run_objects(transfer=False)
        if leftovers:
            self.report(f"deleted {len(leftovers)} leftover object(s) of run {self.run_id}: "
                        + ", ".join(leftovers))
        t0 = self.clock.now()
        wait = k8s_cluster.wait_ready(self.kube, self.namespace, self.graph, self.clock,
                                      self.timeout_s, self.report)
        self._wait_model_listed(t0 + self.timeout_s)
        self._observe()
        workers = self._pods_of(k8s_graph.worker_components(self.dgd))
        self.startup = {"wait": wait, "timeout_s": self.timeout_s,
                        "runner_wait_s": round(self.clock.now() - t0, 3),
                        "leftovers_deleted": leftovers,
                        **_load_summary(self.pods, workers)}
        self.versions = k8s_cluster.pod_versions(self.kube, self.namespace, self.pods)
        self.kv = k8s_cluster.kv_transfer(self.kube, self.namespace, workers, self.clock)
        self.placement = self._placement()
        self.volume = ResultsVolume(self.kube, k8s_jobs.transfer_pod(
            name=k8s_jobs.transfer_pod_name(self.stack.name, self.run_id),
            namespace=self.namespace, labels=k8s_jobs.run_labels(self.stack.name, self.run_id),
            image=self.image, placement=self.placement), self.clock)
        self.volume.ensure()

    def restart_workers(self) -> dict:
        """Delete this graph's worker pods (only those) and wait for their replacements."""
        names = k8s_graph.worker_components(self.dgd)
        selector = k8s_graph.component_selector(self.graph, names)
        old = items(retrying(self.clock, f"listing worker pods {selector}", lambda: (
            self.kube.core.list_namespaced_pod(self.namespace, label_selector=selector))))
        if not old:
            raise TargetError(f"no worker pods match {selector} in {self.namespace}")
        t0 = self.clock.now()
        for pod in old:
            retrying(self.clock, f"deleting worker pod {pod['metadata']['name']}",
                     functools.partial(self._delete_pod_once, pod))
        wait = k8s_cluster.wait_ready(self.kube, self.namespace, self.graph, self.clock,
                                      self.timeout_s, self.report,
                                      exclude_uids=frozenset(p["metadata"]["uid"] for p in old))
        self._wait_model_listed(t0 + self.timeout_s)
        self._observe()
        return {"selector": selector, "deleted": [p["metadata"]["name"] for p in old],
                "wait": wait, **_load_summary(self.pods, self._pods_of(names))}

    def _delete_pod_once(self, pod: dict) -> None:
        """Delete `pod` unless it is gone; the uid precondition never deletes a replacement
        by mistake (a retry after a lost answer finds the pod gone, or a 409 for the uid)."""
        try:
            self.kube.core.delete_namespaced_pod(
                pod["metadata"]["name"], self.namespace,
                body={"preconditions": {"uid": pod["metadata"]["uid"]}})
        except Exception as exc:  # noqa: BLE001
            if not (is_not_found(exc) or getattr(exc, "status", None) == 409):
                raise

    def attest(self, when: str) -> Attestation:
        """Evidence from the running pods and metrics, judged against the stack
        (workloads/attest/checks.py)."""
        serving = self.stack.serving
        assert serving is not None  # __init__ refuses a stack that serves nothing
        x = expected(self.stack, self.kind,
                     image_cuda(serving.image, serving.dynamo_version).min_driver)
        pods = self._pods_of([*k8s_graph.worker_components(self.dgd),
                              *k8s_graph.frontend_components(self.dgd)])
        self.attestations += 1
        with self.kube.http(timeout_s=300.0) as http:
            evidence = attest_probe.collect(
                x, base_url=self.service.base_url, client=http,
                scrape=lambda: attest_aws.scrape(self.kube, self.namespace, self.dgd, pods),
                tag=f"{self.run_id}-{self.token}-{self.attestations}",
                offload_capacity_tokens=self.offload_capacity, sleep=self.clock.sleep,
                now=self.clock.now)
        evidence["pods"] = attest_aws.pod_evidence(self.kube, self.namespace, self.dgd, pods,
                                                   self.clock)
        evidence["first_data"] = attest_aws.first_data_probe(
            self.kube, self.namespace, self.dgd, pods, self.service.model)
        evidence["node_image"] = {"ami_release": self.outputs.get("nodeAmiRelease"),
                                  "driver": self.outputs.get("nodeNvidiaDriver")}
        self.gpu_drivers = sorted({g["driver"] for p in evidence["pods"].values()
                                   for g in (p.get("gpu_probe") or {}).get("gpus") or []})
        return evaluate(x, evidence, when)

    def stop(self) -> None:
        """Delete this run's Jobs first, then its ConfigMaps and transfer pod. Idempotent."""
        self._delete_run_objects(transfer=True)
        if self.stopped is None and self.dgd:
            try:
                self._observe()
            except Exception as exc:  # noqa: BLE001
                self.stop_errors.append(f"final observation: {exc}"[:300])
            self.stopped = self.clock.wall()

    def _delete_run_objects(self, transfer: bool) -> list[str]:
        """Delete what this run created in the stack's namespace, found by the run's labels;
        failures are reported and the rest still cleaned. Returns the names deleted."""
        selector = k8s_jobs.run_selector(self.stack.name, self.run_id)
        core, batch, ns = self.kube.core, self.kube.batch, self.namespace
        kinds = [
            (lambda: items(batch.list_namespaced_job(ns, label_selector=selector)),
             lambda name: batch.delete_namespaced_job(name, ns,
                                                      propagation_policy="Background")),
            (lambda: items(core.list_namespaced_config_map(ns, label_selector=selector)),
             lambda name: core.delete_namespaced_config_map(name, ns)),
        ]
        if transfer:
            kinds.append((lambda: items(core.list_namespaced_pod(
                ns, label_selector=f"{selector},{k8s_jobs.ROLE_LABEL}=transfer")),
                lambda name: core.delete_namespaced_pod(name, ns, grace_period_seconds=5)))
        deleted = []
        for listing, delete in kinds:
            try:
                for obj in listing():
                    try:
                        delete(obj["metadata"]["name"])
                        deleted.append(obj["metadata"]["name"])
                    except Exception as exc:  # noqa: BLE001
                        if not is_not_found(exc):
                            raise
            except Exception as exc:  # noqa: BLE001 - report, keep cleaning the rest
                self.stop_errors.append(str(exc)[:300])
                self.report(f"cleanup in {ns} failed: {exc}")
        return deleted

    # --- what the runner reads ---------------------------------------------------------------
    def endpoints(self) -> Endpoints:
        """The frontend Service (what the Job sends to) and every ready pod's /metrics."""
        pods = [p for p in self._graph_pods()
                if k8s_graph.pod_state(p).ready and not k8s_graph.pod_state(p).terminating]
        kinds = k8s_graph.components(self.dgd)
        metrics: dict[str, str] = {}
        for comp in sorted(kinds):
            mine = sorted((p for p in pods if k8s_graph.component_of(p) == comp),
                          key=lambda p: p["metadata"]["name"])
            for i, pod in enumerate(mine):
                url = k8s_graph.metrics_url(pod, kinds[comp]["type"])
                if url:
                    metrics[comp if len(mine) == 1 else f"{comp}-{i}"] = url
        return Endpoints(base_url=self.service.base_url, model=self.service.model,
                         metrics=metrics)

    def problems(self) -> list[str]:
        dgd = retrying(self.clock, f"reading graph {self.graph}", lambda: (
            k8s_cluster.get_graph(self.kube, self.namespace, self.graph)))
        pods = self._graph_pods()
        state = k8s_graph.graph_readiness(dgd, pods)
        out = [] if state.ready else [f"graph not ready: {state.summary}", *state.problems]
        for pod in pods:
            uid, now = pod["metadata"].get("uid"), k8s_graph.pod_state(pod).restarts
            if uid in self.restarts and now > self.restarts[uid]:
                out.append(f"pod {pod['metadata']['name']} restarted during the step "
                           f"({self.restarts[uid]} -> {now})")
        return out

    def describe(self) -> dict:
        worker_images = {c.get("image") for p in self._pods_of(
            k8s_graph.worker_components(self.dgd)) for c in p["spec"].get("containers") or []}
        dynamo = next((v.get("ai-dynamo") for img, v in self.versions.items()
                       if img in worker_images and v.get("ai-dynamo")), None)
        return {
            "kind": self.kind, "dynamo_version": dynamo or "unknown",
            "namespace": self.namespace, "graph": self.graph,
            "outputs": public_outputs(self.outputs), "prometheus": self.prometheus,
            "startup": self.startup, "pods": [k8s_graph.pod_record(p) for p in self.pods],
            "versions": self.versions, "kv_transfer": self.kv,
            # the NVIDIA driver the workers' GPUs report (attestation), beside the node image
            "gpu_drivers": self.gpu_drivers,
            "node_image": {"ami_release": self.outputs.get("nodeAmiRelease"),
                           "driver": self.outputs.get("nodeNvidiaDriver")},
            "loadgen": {"image": self.image, "zone": self.placement and self.placement.zone,
                        "node_groups": list(self.placement.node_groups)
                        if self.placement else [],
                        "max_cpu": self.placement and self.placement.max_cpu},
            "nodes": [{**n, "end": self.stopped} for n in self.nodes.values()
                      if n.get("instanceType")],
            "cleanup_errors": self.stop_errors,
        }

    def request_trace(self, since_ms: float, until_ms: float) -> list[str]:
        """The frontend pods' records of the requests received within the window."""
        return self.traces.read(self._pods_of(k8s_graph.frontend_components(self.dgd)),
                                since_ms, until_ms)

    def step_executor(self) -> JobExecutor:
        if self.placement is None or self.volume is None:
            raise TargetError("the aws target was not started")
        return JobExecutor(self.kube, JobSettings(
            namespace=self.namespace, graph=self.graph, stack=self.stack.name,
            run_id=self.run_id,
            image=self.image, placement=self.placement, prometheus_url=self.prometheus),
            self.volume, self.clock, self.token)

    def http_client(self):
        """httpx client reaching in-cluster URLs (frontend, Prometheus) from this machine."""
        return self.kube.http()

    # --- internals ---------------------------------------------------------------------------
    def _graph_pods(self) -> list[dict]:
        return retrying(self.clock, f"listing the pods of graph {self.graph}", lambda: (
            k8s_cluster.graph_pods(self.kube, self.namespace, self.graph)))

    def _pods_of(self, components: list[str]) -> list[dict]:
        return [p for p in self.pods if k8s_graph.component_of(p) in components]

    def _observe(self) -> None:
        """Current pods of the graph, their restart counts and the nodes they run on."""
        self.dgd = k8s_cluster.get_graph(self.kube, self.namespace, self.graph)
        self.pods = [p for p in self._graph_pods() if not k8s_graph.pod_state(p).terminating]
        self.restarts = {p["metadata"]["uid"]: k8s_graph.pod_state(p).restarts
                         for p in self.pods}
        by_node: dict[str, set[str]] = {}
        for pod in self.pods:
            by_node.setdefault(pod.get("spec", {}).get("nodeName"), set()).add(
                k8s_graph.component_of(pod))
        new = {n for n in by_node if n and n not in self.nodes}
        for name, rec in k8s_cluster.node_records(self.kube, new).items():
            self.nodes[name] = {**rec, "start": self.clock.wall(), "note": ""}
        for name, comps in by_node.items():
            if name in self.nodes:
                old = set(filter(None, self.nodes[name]["note"].split(", ")))
                self.nodes[name]["note"] = ", ".join(sorted(old | comps))

    def _wait_model_listed(self, deadline: float) -> None:
        with self.kube.http(timeout_s=10.0) as http:
            while True:
                try:
                    if self.service.model in list_models(self.service.base_url, client=http):
                        return
                    seen = "not listed yet"
                except Exception as exc:  # noqa: BLE001 - the frontend may still start
                    seen = str(exc)[:200]
                if self.clock.now() > deadline:
                    raise TargetError(f"{self.service.base_url}/v1/models does not list "
                                      f"'{self.service.model}' ({seen})")
                self.clock.sleep(MODEL_LIST_POLL_S)

    def _placement(self) -> k8s_jobs.Placement:
        """A CPU node group in the frontend's zone (the most common one if frontends spread)."""
        groups = cpu_node_groups(self.cluster)
        if not groups:
            raise TargetError("dynamo-bench:cluster.nodeGroups: the cluster has no CPU node "
                              "group for the load generator -> add one (e.g. m7i.4xlarge)")
        frontends = self._pods_of(k8s_graph.frontend_components(self.dgd))
        zones = Counter(self.nodes.get(p["spec"].get("nodeName"), {}).get("zone")
                        for p in frontends)
        zones.pop(None, None)
        zone = sorted(zones.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if zones else None
        types = [g.instance_type for g in self.cluster.node_groups if g.name in groups]
        if self.cluster.compute_mode == ComputeMode.NODEGROUPS and zone:
            selector = f"{NODE_GROUP_LABEL} in ({','.join(sorted(groups))}),{ZONE_LABEL}={zone}"
            try:
                found = items(self.kube.core.list_node(label_selector=selector))
            except Exception as exc:  # noqa: BLE001
                raise KubeError(f"cannot list nodes ({selector}): {exc}") from exc
            if not found:
                raise TargetError(f"dynamo-bench:cluster.nodeGroups: no node of CPU group(s) "
                                  f"{groups} in {zone}, the frontend's zone; the load "
                                  "generator must share it -> let the CPU group span that zone")
        return k8s_jobs.Placement(tuple(groups), zone, k8s_jobs.max_loadgen_cpu(types))


def _load_summary(pods: list[dict], workers: list[dict]) -> dict:
    """Per-pod start-up times and the slowest worker's model load (steady state excluded)."""
    times = {p["metadata"]["name"]: k8s_graph.startup_times(p) for p in pods}
    loads = [times[p["metadata"]["name"]]["load_s"] for p in workers
             if times[p["metadata"]["name"]]["load_s"] is not None]
    return {"pods": times, "worker_model_load_s_max": max(loads) if loads else None}
