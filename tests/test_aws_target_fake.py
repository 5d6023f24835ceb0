"""The aws target against an in-memory cluster at the client boundary (tests/aws_target_fake.py):
readiness wait, Job lifecycle, artifact copy into the run layout, dataset delivery, cold
restarts of this graph's workers only, and cleanup of this run's objects only."""

from __future__ import annotations

import json

import pytest

from stacks.conventions.frontend_trace import REQUEST_TRACE_POD_PATH
from tests.aws_target_deploy import NAMESPACE, aws_target, deploy, produce_exports
from tests.aws_target_fake import JobRun
from workloads import promql, step_exec
from workloads.manifest import COMPLETE, FAILED, Manifest
from workloads.request_trace import STEP_FILE
from workloads.steps import plan
from workloads.targets.aws import k8s_jobs, k8s_step
from workloads.targets.aws.k8s_client import KubeError
from workloads.targets.aws.k8s_step import JobExecutor
from workloads.targets.base import TargetError


def _started(tmp_path, stack="disagg-a100", **kw):
    d = deploy(tmp_path, stack, **kw)
    messages: list[str] = []
    target = aws_target(d, tmp_path, messages=messages)
    target.start()
    return d, target, messages


def _run_one(tmp_path, d, target, step_index=0):
    steps = plan(d.stack, "quick")
    step = steps[step_index]
    run_dir = tmp_path / "runs" / d.stack.name / "run-1"
    manifest = Manifest.open(run_dir / "manifest.json", stack=d.stack, run_id="run-1",
                             scale="quick")
    manifest.begin_attempt(command=["test"])
    ctx = step_exec.StepContext(run_dir=run_dir, target=target,
                                executor=target.step_executor(), tokenizer=d.stack.model.id,
                                error_rate_threshold=0.01, request_timeout_s=600)
    ticks: list[float] = []
    rec = step_exec.run_step(step, ctx, manifest, ticks.append)
    return step, rec, run_dir, ticks


# --- readiness ---------------------------------------------------------------------------------

def test_start_on_a_ready_graph_records_where_and_what_runs(tmp_path):
    d, target, _ = _started(tmp_path)
    info = target.describe()
    assert info["dynamo_version"] == "1.6.1"
    # one probe per distinct image: the frontend's and the EFA workers' (components/efa.py)
    assert set(info["versions"]) == {d.stack.serving.image, d.stack.serving.image + "-efa"}
    assert info["versions"][d.stack.serving.image + "-efa"]["vllm"] == "0.11.0"
    assert info["kv_transfer"]["used"] == "LIBFABRIC"          # seen in the workers' logs
    configured = info["kv_transfer"]["pods"][0]["configured"]
    assert configured["connector"] == "NixlConnector" and configured["backends"] == ["LIBFABRIC"]
    pods = {p["component"]: p for p in info["pods"]}
    assert pods["prefill-p4d"]["images"][0]["image_id"].endswith("@sha256:" + "ab" * 32)
    assert pods["prefill-p4d"]["startup"]["load_s"] == 240.0      # model load, apart
    assert info["startup"]["worker_model_load_s_max"] == 240.0
    nodes = {n["node"]: n for n in info["nodes"]}
    assert set(nodes) == {"cpu-a", "p4d-0", "p4d-1"}
    assert nodes["p4d-0"]["instanceType"] == "p4d.24xlarge"
    assert nodes["p4d-0"]["zone"] == "us-east-1a" and nodes["cpu-a"]["note"] == "frontend"
    assert info["loadgen"]["zone"] == "us-east-1a" and info["loadgen"]["node_groups"] == ["cpu"]
    transfer = [o for o in d.cluster.created if o["kind"] == "Pod"]
    assert len(transfer) == 1 and transfer[0]["metadata"]["namespace"] == NAMESPACE


def test_start_waits_for_a_starting_graph_and_reports_progress(tmp_path):
    d, target, messages = _started(tmp_path, ready=False, load_s=600.0)
    assert d.cluster.clock.now() >= 620.0          # 20 s to start + 600 s model load
    assert any("waiting for graph" in m and "0/2" in m for m in messages)
    assert messages[-1].startswith(f"graph {d.graph} ready")
    wait = target.describe()["startup"]["wait"]
    assert 620.0 <= wait["waited_s"] <= 630.0 and wait["dgd_state"] == "successful"


def test_start_times_out_with_what_is_missing(tmp_path):
    d = deploy(tmp_path, "disagg-a100", ready=False, load_s=10 * 3600.0)
    target = aws_target(d, tmp_path)
    with pytest.raises(TargetError, match=r"not ready after \d+ s: graph pending.*0/2"):
        target.start()
    assert d.cluster.clock.now() >= target.timeout_s


def test_crash_looping_worker_ends_the_wait_with_its_log(tmp_path):
    d = deploy(tmp_path, "disagg-a100", ready=False, crash="decode-p4d")
    target = aws_target(d, tmp_path)
    with pytest.raises(TargetError) as exc:
        target.start()
    text = str(exc.value)
    assert "crash-looping (3 restarts; last exit 137 OOMKilled)" in text
    assert f"{d.graph}-decode-p4d" in text and "CUDA out of memory" in text
    assert d.cluster.clock.now() < target.timeout_s    # did not wait for the timeout


def test_no_cpu_node_in_the_frontends_zone_is_refused(tmp_path):
    d = deploy(tmp_path, "disagg-a100", frontend_node="cpu-c")   # us-east-1c
    with pytest.raises(TargetError, match="no node of CPU group.*us-east-1c"):
        aws_target(d, tmp_path).start()


# --- Job lifecycle -----------------------------------------------------------------------------

def test_step_job_runs_in_the_frontend_zone_and_lands_in_the_local_layout(tmp_path):
    d, target, _ = _started(tmp_path, frontend_node="cpu-b")      # frontend in us-east-1b
    step, rec, run_dir, ticks = _run_one(tmp_path, d, target)
    assert rec["status"] == COMPLETE, rec["failure_reasons"]
    out = run_dir / step.id
    for name in ("profile_export.jsonl", "profile_export_aiperf.json",
                 "server_metrics_export.json", "logs/aiperf.log", "aiperf.log", "step.json",
                 "requests.jsonl", "client_cpu.jsonl", "prometheus.json"):
        assert (out / name).is_file(), name
    job = next(o for o in d.cluster.created if o["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"][1] == {"key": "topology.kubernetes.io/zone", "operator": "In",
                                   "values": ["us-east-1b"]}
    loadgen = rec["loadgen"]
    assert loadgen["node"] == "cpu-b" and loadgen["dataset_delivery"] == "configmap"
    # the digest the pod really ran, as the kubelet reported it, beside the mutable tag
    assert loadgen["image"] == "nvcr.io/nvidia/aiperf:0.13.0"
    assert loadgen["image_id"] == f"nvcr.io/nvidia/aiperf@sha256:{'cd' * 32}"
    assert rec["client"]["host_cores"] == loadgen["cpu"] == 4
    assert rec["client"]["cpu"]["mean_cores"] == 1.5 and not rec["client"]["client_bound"]
    assert ticks[0] == 0.0 and max(ticks) >= 20.0
    # the Job, its pod and its ConfigMap are gone once the artifacts are home
    assert ("Job", NAMESPACE, job["metadata"]["name"]) in d.cluster.deleted
    assert not d.cluster.jobs and not d.cluster.configmaps
    prom = json.loads((out / "prometheus.json").read_text())
    assert set(prom["results"]) == set(promql.BY_NAME)
    # this graph only: one Prometheus scrapes every graph and GPU of the cluster
    assert prom["scope"] == {"namespace": NAMESPACE, "graph": target.graph}
    assert all(f'dynamo_bench_io_graph="{target.graph}"' in q["query"]
               for q in prom["results"].values())
    assert sorted(d.cluster.prom_queries) == sorted(q["query"] for q in prom["results"].values())
    assert prom["results"]["kv_usage_max"]["result"][0]["value"][1] == "0.5"
    record = json.loads((out / "step.json").read_text())
    assert record["command"][:2] == ["aiperf", "profile"] and record["loadgen"]["job"]


def test_routing_evidence_comes_from_the_frontend_pods_trace(tmp_path):
    """The graph turns the frontend's request trace on; after each step the target reads the
    frontend pod's new lines by exec (from where it stopped) and the step keeps its own."""
    d, target, _ = _started(tmp_path)
    dgd = next(iter(d.cluster.dgds.values()))
    frontend = next(c for c in dgd["spec"]["components"] if c["type"] == "frontend")
    env = {e["name"]: e["value"] for e in frontend["podTemplate"]["spec"]["containers"][0]["env"]}
    assert env["DYN_REQUEST_TRACE"] == "1" and env["DYN_REQUEST_TRACE_SINKS"] == "jsonl"
    assert env["DYN_REQUEST_TRACE_OUTPUT_PATH"] == REQUEST_TRACE_POD_PATH
    seen = []
    for i in (0, 1):
        step, rec, run_dir, _ = _run_one(tmp_path, d, target, step_index=i)
        evidence = rec["routing_evidence"]
        assert evidence["records"] == evidence["expected"] == rec["counts"]["completed"] > 0
        lines = (run_dir / step.id / STEP_FILE).read_text().splitlines()
        assert len(lines) == evidence["records"]
        seen.append(set(lines))
    assert not seen[0] & seen[1]                       # each step only its own requests
    (pod,) = d.cluster.frontend_pods()
    assert target.traces.offsets[pod] == d.cluster.trace_file(pod).stat().st_size


def test_failed_job_fails_the_step_with_the_reason(tmp_path):
    d, target, _ = _started(tmp_path)
    d.cluster.job_run = lambda c, job, pod: produce_exports(c, job, pod, exit_code=2)
    _, rec, _, _ = _run_one(tmp_path, d, target)
    assert rec["status"] == FAILED
    assert rec["aiperf_exit_code"] == 2
    assert any("BackoffLimitExceeded" in r for r in rec["failure_reasons"])
    assert "aiperf exited with code 2" in rec["failure_reasons"]
    assert not d.cluster.jobs


@pytest.mark.parametrize("lag_s", [5.0, 1e9])
def test_pod_failed_before_the_job_says_so_is_a_failed_step_with_its_artifacts(tmp_path,
                                                                               lag_s):
    """The Job controller writes a Job's end after it sees the pod end (issue 28, runner.md
    R1): the pod reads Failed for a poll or more while the Job does not. The step is then a
    failed step with AIPerf's exit code, its log and artifacts copied, not an aborted run; a
    condition that never comes ends the wait after JOB_CONDITION_WAIT_S."""
    d, target, _ = _started(tmp_path)
    d.cluster.job_condition_lag_s = lag_s
    d.cluster.job_run = lambda c, job, pod: produce_exports(c, job, pod, exit_code=2)
    step, rec, run_dir, _ = _run_one(tmp_path, d, target)
    assert rec["status"] == FAILED and rec["aiperf_exit_code"] == 2
    assert "aiperf exited with code 2" in rec["failure_reasons"]
    assert (run_dir / step.id / "profile_export.jsonl").is_file()
    assert (run_dir / step.id / "aiperf.log").is_file()
    if lag_s > k8s_step.JOB_CONDITION_WAIT_S:
        assert any("no terminal condition" in r for r in rec["failure_reasons"])
    else:
        assert any("BackoffLimitExceeded" in r for r in rec["failure_reasons"])
    assert not d.cluster.jobs


def test_job_that_leaves_no_artifacts_is_a_failed_step(tmp_path):
    d, target, _ = _started(tmp_path)
    d.cluster.job_run = lambda c, job, pod: JobRun(exit_code=1, log="Traceback: tokenizer\n")
    step, rec, run_dir, _ = _run_one(tmp_path, d, target)
    assert rec["status"] == FAILED and "no request records" in rec["failure_reasons"]
    assert any("not copied" in r for r in rec["failure_reasons"])
    assert "Traceback: tokenizer" in (run_dir / step.id / "aiperf.log").read_text()


def test_unschedulable_job_is_deleted_and_named(tmp_path):
    d, target, _ = _started(tmp_path)
    for name in ("cpu-a", "cpu-b"):          # the CPU nodes went away after start-up
        del d.cluster.nodes[name]
    with pytest.raises(KubeError, match="did not start within 600 s: unschedulable"):
        _run_one(tmp_path, d, target)
    assert not d.cluster.jobs and not d.cluster.configmaps


def test_large_dataset_goes_through_the_results_pvc(tmp_path, monkeypatch):
    monkeypatch.setattr(k8s_jobs, "CONFIGMAP_MAX_BYTES", 100)
    d, target, _ = _started(tmp_path)
    step, rec, run_dir, _ = _run_one(tmp_path, d, target)
    assert rec["status"] == COMPLETE and rec["loadgen"]["dataset_delivery"] == "results-pvc"
    remote = rec["loadgen"]["remote_dir"] + "/" + k8s_jobs.DATASET_KEY
    dataset = json.loads((run_dir / step.id / "step.json").read_text())["dataset"]
    local = run_dir / dataset["path"]
    assert d.cluster.pvc_path(remote).read_bytes() == local.read_bytes()
    assert not any(o["kind"] == "ConfigMap" for o in d.cluster.created)


# --- cold restarts -----------------------------------------------------------------------------

def test_cold_restart_deletes_only_this_graphs_worker_pods(tmp_path):
    d, target, _ = _started(tmp_path, stack="agg-a100")
    other = deploy(tmp_path / "other", "agg-a100-kv")   # another stack, same namespace,
    for extra in ("p4d-2", "p4d-3"):                     # on two more p4d nodes,
        d.cluster.add_node(extra, "p4d", "us-east-1a", "p4d.24xlarge")
    for key, dgd in other.cluster.dgds.items():          # same component names
        d.cluster.add_graph(dgd, other.cluster.components[key])
    before = {k: p["metadata"]["uid"] for k, p in d.cluster.pods.items()}
    old_metrics = target.endpoints().metrics
    t0 = d.cluster.clock.now()
    record = target.restart_workers()
    deleted = {name for kind, _, name in d.cluster.deleted if kind == "Pod"}
    ours = {name for (_, name), p in before.items() if name.startswith(f"{d.graph}-worker")}
    assert deleted == ours and len(ours) == 4
    assert set(record["deleted"]) == ours
    assert record["selector"].endswith("nvidia.com/dynamo-component in (worker-p4d)")
    untouched = {name for (_, name) in before} - ours
    assert untouched <= {name for (_, name) in d.cluster.pods}   # frontend, other graph
    assert d.cluster.clock.now() - t0 >= 260.0      # waited for the replacements' load
    assert record["worker_model_load_s_max"] == 240.0
    new = target.endpoints().metrics
    assert new["frontend"] == old_metrics["frontend"]
    assert set(new.values()) - set(old_metrics.values())       # workers have new pod IPs
    assert all(url.endswith(":9090/metrics") for k, url in new.items() if k != "frontend")
    assert target.problems() == []


def test_problems_name_a_worker_that_broke_during_a_step(tmp_path):
    d, target, _ = _started(tmp_path)
    comp = next(c for c in d.cluster.components[(NAMESPACE, d.graph)] if c.type == "decode")
    comp.crash = True
    problems = target.problems()
    assert problems[0].startswith("graph not ready")
    assert any("crash-looping" in p for p in problems)


# --- stopping ----------------------------------------------------------------------------------

def test_ctrl_c_deletes_this_runs_jobs_and_nothing_else(tmp_path):
    d, target, _ = _started(tmp_path)
    c = d.cluster
    mine = k8s_jobs.run_labels(d.stack.name, "run-1")
    other_run = k8s_jobs.run_labels(d.stack.name, "run-0")
    for ns, name, labels in ((NAMESPACE, "aiperf-other-run", other_run),
                             ("elsewhere", "aiperf-same-labels", mine)):
        c.seed_job(ns, _job_like(ns, name, labels))
    c.clock.interrupt_at = c.clock.now() + 10.0          # Ctrl-C while the step's Job runs
    graph_pods = {k for k, p in c.pods.items() if "comp" in p["_fake"]}
    with pytest.raises(KeyboardInterrupt):
        _run_one(tmp_path, d, target)
    target.stop()
    target.stop()                                        # idempotent
    assert set(c.jobs) == {(NAMESPACE, "aiperf-other-run"), ("elsewhere", "aiperf-same-labels")}
    assert not c.configmaps
    assert graph_pods <= set(c.pods)                     # the deployment is as it was
    assert all(kind != "Pod" or not name.startswith(d.graph) for kind, _, name in c.deleted)
    assert all(ns == NAMESPACE for _, ns, _ in c.deleted)
    transfer = k8s_jobs.transfer_pod_name(d.stack.name, "run-1")
    assert ("Pod", NAMESPACE, transfer) in c.deleted
    assert target.describe()["nodes"][0]["end"] is not None


def _job_like(ns: str, name: str, labels: dict) -> dict:
    job = k8s_jobs.loadgen_job(
        name=name, namespace=ns, labels=labels, step_id="x/y", image=k8s_jobs.AIPERF_IMAGE,
        aiperf_args=["profile", "--artifact-dir", "/results/a/b/x/y/j/aiperf",
                     "--input-file", "/inputs/dataset.jsonl"],
        artifact_dir="/results/a/b/x/y/j/aiperf", placement=k8s_jobs.Placement(("cpu",), None),
        cpu=4, deadline_s=60, dataset_configmap=None)
    return job


def test_a_resumed_run_first_deletes_its_own_leftover_jobs(tmp_path):
    d = deploy(tmp_path, "disagg-a100")
    c = d.cluster
    c.seed_job(NAMESPACE, _job_like(NAMESPACE, "aiperf-killed-attempt",
                                    k8s_jobs.run_labels(d.stack.name, "run-1")))
    c.seed_job(NAMESPACE, _job_like(NAMESPACE, "aiperf-other-run",
                                    k8s_jobs.run_labels(d.stack.name, "run-0")))
    messages: list[str] = []
    target = aws_target(d, tmp_path, messages=messages)
    target.start()
    assert list(c.jobs) == [(NAMESPACE, "aiperf-other-run")]
    assert target.describe()["startup"]["leftovers_deleted"] == ["aiperf-killed-attempt"]
    assert any("leftover" in m for m in messages)


def test_api_blips_are_retried_during_a_wait(tmp_path):
    from kubernetes.client.exceptions import ApiException
    d = deploy(tmp_path, "disagg-a100", ready=False, load_s=60.0)
    real = d.cluster.core.list_namespaced_pod
    failures = iter([ApiException(status=500), ApiException(status=503)])

    def flaky(*a, **k):
        exc = next(failures, None)
        if exc is not None:
            raise exc
        return real(*a, **k)
    d.cluster.core.list_namespaced_pod = flaky
    target = aws_target(d, tmp_path)
    target.start()
    assert next(failures, None) is None and target.describe()["startup"]["wait"]["waited_s"]


def test_executor_needs_a_started_target(tmp_path):
    d = deploy(tmp_path, "agg-a100")
    with pytest.raises(TargetError, match="not started"):
        aws_target(d, tmp_path).step_executor()
    started = aws_target(d, tmp_path)
    started.start()
    executor = started.step_executor()
    # the executor runs this run's Jobs on the placement and volume the start found
    assert isinstance(executor, JobExecutor)
    assert (executor.s.stack, executor.s.run_id) == ("agg-a100", "run-1")
    assert executor.volume is started.volume and executor.s.placement == started.placement


def test_the_graph_status_the_target_reads_is_the_crds(tmp_path):
    """The readiness wait reads v1beta1 status fields; the fake's status (ready and not) must
    pass the vendored CRD's status schema, made strict, so a misnamed field fails here."""
    import jsonschema

    from tests.k8s_validation import crd_schema, strict_schema
    schema = strict_schema(crd_schema()["properties"]["status"])
    d = deploy(tmp_path, "disagg-a100", ready=False, load_s=60.0)
    starting = d.cluster.graph_view(NAMESPACE, d.graph)
    d.cluster.clock.t = 120.0
    ready = d.cluster.graph_view(NAMESPACE, d.graph)
    for view in (starting, ready):
        jsonschema.Draft7Validator(schema).validate(view["status"])
    assert starting["status"]["state"] == "pending" and ready["status"]["state"] == "successful"


def test_the_image_digest_is_none_where_the_cluster_reports_none() -> None:
    from workloads.targets.aws.k8s_step import image_id

    waiting = {"status": {"containerStatuses": [{"name": "aiperf", "imageID": "",
                                                 "state": {"waiting": {}}}]}}
    assert image_id(None) is None and image_id(waiting) is None
    ran = {"status": {"containerStatuses": [
        {"name": "other", "imageID": "x@sha256:1"},
        {"name": "aiperf", "imageID": "docker.io/aiperf@sha256:2"}]}}
    assert image_id(ran) == "docker.io/aiperf@sha256:2"
