"""A stack deployed on the fake cluster, and what its AIPerf Jobs leave behind: the stack's
real DynamoGraphDeployment (components/graph.py) on fake nodes, its Pulumi outputs file, and a
Job hook that copies real AIPerf exports from tests/fixtures/runs onto the fake results PVC."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.aws_target_fake import Component, FakeCluster, JobRun
from tests.aws_target_fake_serving import engine_log, serving_of
from workloads.targets.aws import k8s_scripts
from workloads.targets.aws.k8s_jobs import RESULTS_MOUNT

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


def flags(argv: list[str], name: str) -> list[str]:
    """Every value after `name` up to the next flag (`--server-metrics URL...`)."""
    if name not in argv:
        return []
    rest = argv[argv.index(name) + 1:]
    return rest[:next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


def fixture_endpoints(src: Path) -> dict[str, str]:
    """{component: /metrics URL} the fixture step scraped: its step.json `server_metrics`, or
    (runs recorded before steps named them) the run's startup-phase endpoints."""
    named = json.loads((src / "step.json").read_text()).get("server_metrics")
    if named:
        return named
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    startup = next(p for a in manifest["attempts"] for p in a["phases"]
                   if p["name"] == "startup" and p.get("endpoints"))
    return startup["endpoints"]


def endpoint_rewrites(cluster: FakeCluster, src: Path, urls: list[str]) -> dict[str, str]:
    """Fixture URL -> the URL this Job's `--server-metrics` names for the same kind of
    component (the frontend's to the frontend's, workers' to workers' in order), so the copied
    server_metrics_export.json names the endpoints the aws step record names."""
    kind_of = {p["_fake"]["ip"]: p["_fake"]["comp"].type for p in cluster.pods.values()
               if "comp" in p["_fake"]}
    remote = {"frontend": [u for u in urls if kind_of.get(urlsplit(u).hostname) == "frontend"]}
    remote["worker"] = [u for u in urls if u not in remote["frontend"]]
    local = fixture_endpoints(src)
    out, used = {}, {"frontend": 0, "worker": 0}
    for comp, url in local.items():
        kind = "frontend" if comp.split("-")[0] == "frontend" else "worker"
        if remote[kind]:
            out[url] = remote[kind][used[kind] % len(remote[kind])]
            used[kind] += 1
    return out


def step_id_of(artifact_dir: str) -> str:
    """The step id inside k8s_jobs.remote_step_dir(...)/aiperf."""
    return "/".join(artifact_dir.split("/")[4:-2])


def _dataset_text(cluster: FakeCluster, job: dict, input_file: str) -> str:
    """The dataset the Job's AIPerf reads: from the results PVC or its ConfigMap."""
    if input_file.startswith(RESULTS_MOUNT):
        assert cluster.pvc_path(input_file).exists(), "dataset missing on the PVC"
        return cluster.pvc_path(input_file).read_text()
    volumes = job["spec"]["template"]["spec"]["volumes"]
    cm = next(v["configMap"]["name"] for v in volumes if "configMap" in v)
    assert (job["metadata"]["namespace"], cm) in cluster.configmaps, "dataset ConfigMap"
    data = cluster.configmaps[(job["metadata"]["namespace"], cm)].get("data") or {}
    return data.get(Path(input_file).name) or next(iter(data.values()), "")


def _as_asked(rec: dict, asked: dict[str, int]) -> None:
    """A finished record's server counts as the dataset this Job sent asked for: with
    ignore_eos the server produces exactly the requested output (the fixture's own run asked
    for other lengths; a record without a usage block stays without one)."""
    want = asked.get(rec["metadata"].get("conversation_id"))
    metrics = rec.get("metrics") or {}
    if want is None or "usage_completion_tokens" not in metrics:
        return
    for name in ("usage_completion_tokens", "output_sequence_length"):
        if name in metrics:
            metrics[name]["value"] = want


def produce_exports(cluster: FakeCluster, job: dict, pod: dict, *, exit_code: int = 0,
                    cores: float = 1.5) -> JobRun:
    """Copy a real AIPerf run's exports into the Job's artifact dir on the fake PVC, with the
    request timestamps moved to the fake clock (a Job makes its exports when it runs), the
    output counts of the dataset the Job got, and the CPU samples the in-pod wrapper would
    write. Checks the dataset reached the pod."""
    argv = aiperf_argv(job)
    input_file = flag(argv, "--input-file")
    asked = {r["session_id"]: r["output_length"]
             for r in map(json.loads, _dataset_text(cluster, job, input_file).splitlines())
             if r.get("session_id")}
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
            _as_asked(rec, asked)
            out.write(json.dumps(rec) + "\n")
    shutil.copy(src / EXPORTS[1], dest / EXPORTS[1])
    server = (src / EXPORTS[2]).read_text()
    for local, remote in endpoint_rewrites(cluster, src, flags(argv, "--server-metrics")).items():
        server = server.replace(local, remote)
    (dest / EXPORTS[2]).write_text(server)
    (dest / "logs").mkdir(exist_ok=True)
    shutil.copy(src / "logs" / "aiperf.log", dest / "logs" / "aiperf.log")
    _frontend_trace(cluster, [json.loads(x) for x in lines])
    with (dest / k8s_scripts.CPU_SAMPLES).open("w") as out:
        out.write(json.dumps({"source": "cgroup-v2"}) + "\n")
        for i in range(int(cluster.job_seconds * 2)):
            out.write(json.dumps({"t_ns": first + i * 500_000_000, "cores": cores}) + "\n")
    # what the pod's AIPerf prints at start-up when the client wrapper gave it the project's
    # site files (workloads/aiperf_site/sitecustomize.py, on AIPerf 0.13.0 as in the image):
    # the runner records it as the step's `aiperf_patches`
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    site = ("dynamo-bench: aiperf_slot_wait applied\n"
            if k8s_scripts.CLIENT_WRAPPER in command else "")
    return JobRun(exit_code, log=f"{site}aiperf {' '.join(argv[:3])} ... exit {exit_code}\n")


def _frontend_trace(cluster: FakeCluster, records: list[dict]) -> None:
    """The frontend pod's request-trace lines for the Job's served requests, as Dynamo 1.6.1
    writes them, received now (the pod's clock): two workers, conversations' turns linked by
    their block hashes."""
    pods = cluster.frontend_pods()
    if not pods:
        return
    path = cluster.trace_file(pods[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    now_ms = time.time() * 1000
    with path.open("a") as out:
        for i, rec in enumerate(r for r in records if "error" not in r):
            md = rec["metadata"]
            turn, conv = md.get("turn_index") or 0, str(md.get("conversation_id"))
            hashes = [hash((conv, b)) & (2**63 - 1) for b in range(2 * turn + 2)]
            worker = 1001 + (i % 2)
            out.write(json.dumps({"timestamp": i, "event": {
                "schema": "dynamo.request.trace.v1", "event_type": "request_end",
                "event_time_unix_ms": now_ms, "request": {
                    "request_id": f"r{i}", "input_tokens": 128 * (turn + 1),
                    "output_tokens": 8, "cached_tokens": 0, "request_received_ms": now_ms,
                    "worker": {"prefill_worker_id": worker, "decode_worker_id": worker},
                    "replay": {"trace_block_size": 64, "input_length": 128 * (turn + 1),
                               "input_sequence_hashes": hashes}}}}) + "\n")


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
    from stacks.config.loader import load_stack
    from stacks.config.schema import TransferBackend
    from stacks.preflight.run import effective_cluster

    stack = load_stack(stack_name)
    base = load_stack(stack.cluster.attach_to) if stack.is_attached else None
    efa = stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
    dgd = build_graph_deployment(stack, namespace=NAMESPACE, efa=efa,
                                 cluster=effective_cluster(stack, base))
    cluster = FakeCluster(tmp)
    for name, group, zone, itype in (("p4d-0", "p4d", "us-east-1a", "p4d.24xlarge"),
                                     ("p4d-1", "p4d", "us-east-1a", "p4d.24xlarge"),
                                     ("cpu-a", "cpu", "us-east-1a", "m7i.4xlarge"),
                                     ("cpu-b", "cpu", "us-east-1b", "m7i.4xlarge"),
                                     ("cpu-c", "system", "us-east-1c", "m7i.2xlarge")):
        cluster.add_node(name, group, zone, itype)
    comps = []
    cluster.serving.graphs[dgd["metadata"]["name"]] = serving_of(stack)
    quantization = {"bf16": None, "fp8": "fp8", "nvfp4": "modelopt_fp4"}[
        stack.model.precision.value]
    for i, c in enumerate(dgd["spec"]["components"]):
        backend = "LIBFABRIC" if efa else "UCX"
        worker = c["type"] != "frontend"
        log = ("INFO vllm starting\n"
               + (engine_log(stack.model.id, revision=stack.model.revision,
                             quantization=quantization) if worker else "")
               + (f"Backend {backend} was instantiated\n"
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
    outputs.chmod(0o600)   # the runner refuses credentials other users can read
    cluster.job_run = produce_exports
    return Deployed(cluster, stack, outputs, graph)


def aws_target(d: Deployed, tmp: Path, run_id: str = "run-1", messages: list | None = None,
               kv_capacity_tokens: list[int] | None = None):
    from workloads.targets.aws.target import AwsTarget
    return AwsTarget(d.stack, tmp / "engine", run_id=run_id, outputs_file=d.outputs,
                     kube=d.cluster.kube(), clock=d.cluster.clock,
                     report=(messages.append if messages is not None else None),
                     kv_capacity_tokens=kv_capacity_tokens)


def connect_runner(monkeypatch, d: Deployed) -> Deployed:
    """The client boundary for `python -m workloads run`: the aws target connects to the fake
    cluster (and its clock) instead of a real API server."""
    monkeypatch.setattr("workloads.targets.aws.target.connect", lambda cfg: d.cluster.kube())
    monkeypatch.setattr("workloads.targets.aws.target.Clock", lambda: d.cluster.clock)
    return d
