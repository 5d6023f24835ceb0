"""The aws target's pure parts: Job / ConfigMap / pod / RBAC objects (strict K8S_VERSION
schema), the in-pod scripts (run for real), graph readiness and evidence from API objects,
stack outputs (file, Pulumi CLI, refusals, the prometheusUrl output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from components.loadgen_specs import loadgen_rbac
from stacks.config.loader import load_stack
from stacks.conventions.k8s_names import LOADGEN_SERVICE_ACCOUNT, NODE_GROUP_LABEL, ZONE_LABEL
from tests.aws_target_deploy import KUBECONFIG
from tests.k8s_validation import validate_builtin
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.targets.aws import k8s_graph, k8s_jobs, k8s_scripts
from workloads.targets.aws.k8s_outputs import kubeconfig, read_outputs
from workloads.targets.base import TargetError

REPO = Path(__file__).resolve().parents[1]
PLACEMENT = k8s_jobs.Placement(("cpu",), "us-east-1b", max_cpu=8)
LABELS = k8s_jobs.run_labels("agg-a100", "20261201T000000Z")


def _job(concurrency: int = 16, configmap: str | None = "cm") -> dict:
    inv = AiperfInvocation(model="Qwen/Qwen3-30B-A3B", url="http://f.dynamo.svc:8000",
                           tokenizer="Qwen/Qwen3-30B-A3B",
                           input_file=PurePosixPath("/inputs/dataset.jsonl"), request_count=32,
                           concurrency=concurrency, seed=1,
                           artifact_dir=PurePosixPath("/results/s/r/x/j/aiperf"),
                           workers_max=k8s_jobs.aiperf_workers(
                               k8s_jobs.loadgen_cpu(concurrency, 8), concurrency))
    return k8s_jobs.loadgen_job(
        name=k8s_jobs.job_name("agg-a100", "r", "prefix_cache/share050", "abc"),
        namespace="dynamo", labels=LABELS, step_id="prefix_cache/share050",
        image=k8s_jobs.AIPERF_IMAGE, aiperf_args=profile_args(inv),
        artifact_dir="/results/s/r/x/j/aiperf", placement=PLACEMENT,
        cpu=k8s_jobs.loadgen_cpu(concurrency, 8), deadline_s=300, dataset_configmap=configmap)


# --- objects the runner creates ----------------------------------------------------------------

def test_loadgen_job_is_valid_and_placed_on_the_cpu_group_in_the_frontend_zone():
    job = _job()
    validate_builtin(job)
    pod = job["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    exprs = {e["key"]: e["values"] for e in terms["nodeSelectorTerms"][0]["matchExpressions"]}
    assert exprs == {NODE_GROUP_LABEL: ["cpu"], ZONE_LABEL: ["us-east-1b"]}
    assert pod["serviceAccountName"] == LOADGEN_SERVICE_ACCOUNT
    assert pod["automountServiceAccountToken"] is False      # AIPerf never calls the API
    res = pod["containers"][0]["resources"]
    # CPU requested but never limited: a CFS quota throttles AIPerf's bursts unseen
    # (runner.md R3); memory stays limited at its request
    assert res["requests"]["cpu"] == "4" and "cpu" not in res["limits"]
    assert res["limits"]["memory"] == res["requests"]["memory"]
    assert job["spec"]["backoffLimit"] == 0   # a failed step is never silently re-run
    assert job["metadata"]["labels"][k8s_jobs.RUN_LABEL] == "20261201T000000Z"
    command = pod["containers"][0]["command"]
    assert command[:3] == ["python", "-c", k8s_scripts.CLIENT_WRAPPER]
    argv = command[command.index("--") + 1:]
    assert argv[:2] == ["aiperf", "profile"] and "--workers-max" in argv
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/models"]["readOnly"] and "/inputs" in mounts and "/results" in mounts


def test_the_load_generator_avoids_every_frontends_node():
    # dynamo.md F6: AIPerf's bursts beside a frontend would put frontend CPU queueing into TTFT;
    # the operator labels frontend pods nvidia.com/dynamo-component-type=frontend, and other
    # variants' frontends live in other namespaces (namespaceSelector {} = all of them)
    pod = _job()["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    t = term["podAffinityTerm"]
    assert t["labelSelector"] == {"matchLabels": {"nvidia.com/dynamo-component-type": "frontend"}}
    assert t["namespaceSelector"] == {} and t["topologyKey"] == "kubernetes.io/hostname"
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"][
        "podAntiAffinity"]                         # preferred: one CPU node still runs steps


def test_aiperf_in_cluster_discovery_is_off_by_design(monkeypatch):
    """AIPerf 0.13.0 would add every metrics-enabled pod of its namespace (the other graph's
    too, side by side) to its server metrics (issue 28, runner.md M4). Its own gate, fed the
    pod's environment as the kubelet builds it (service variables, then the container's env
    over them), says it is not in a cluster; no token and no AIPERF_NAMESPACE either."""
    from aiperf.server_metrics.discovery import is_running_in_kubernetes
    pod = _job()["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    kubelet = {"KUBERNETES_SERVICE_HOST": "10.100.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    for name, value in {**kubelet, **env}.items():
        monkeypatch.setenv(name, value)
    assert not is_running_in_kubernetes()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", kubelet["KUBERNETES_SERVICE_HOST"])
    assert is_running_in_kubernetes()    # what the gate would say without the override
    assert pod["automountServiceAccountToken"] is False and "AIPERF_NAMESPACE" not in env


def test_loadgen_cpu_grows_with_concurrency_up_to_half_a_cpu_node():
    assert k8s_jobs.loadgen_cpu(1, 8) == 4
    assert k8s_jobs.loadgen_cpu(64, 8) == 6
    assert k8s_jobs.loadgen_cpu(512, 8) == 8
    assert k8s_jobs.max_loadgen_cpu(["m7i.4xlarge"]) == 8
    assert k8s_jobs.max_loadgen_cpu(["m7i.2xlarge", "m7i.4xlarge"]) == 4
    assert k8s_jobs.aiperf_workers(6, 64) == 3 and k8s_jobs.aiperf_workers(4, 1) == 1


def test_job_without_a_configmap_reads_its_dataset_from_the_pvc():
    job = _job(configmap=None)
    validate_builtin(job)
    assert not any("configMap" in v for v in job["spec"]["template"]["spec"]["volumes"])


def test_no_cpu_group_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="CPU node group"):
        k8s_jobs.node_affinity(k8s_jobs.Placement((), "us-east-1a"))


def test_dataset_configmap_and_transfer_pod_are_valid():
    cm = k8s_jobs.dataset_configmap("aiperf-x", "dynamo", LABELS, '{"input_length": 8}\n')
    validate_builtin(cm)
    with pytest.raises(ValueError, match="results PVC"):
        k8s_jobs.dataset_configmap("aiperf-x", "dynamo", LABELS,
                                   "x" * (k8s_jobs.CONFIGMAP_MAX_BYTES + 1))
    pod = k8s_jobs.transfer_pod(name=k8s_jobs.transfer_pod_name("agg-a100", "r"),
                                namespace="dynamo", labels=LABELS, image=k8s_jobs.AIPERF_IMAGE,
                                placement=PLACEMENT)
    validate_builtin(pod)
    exprs = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"]
    assert [e["key"] for e in exprs] == [NODE_GROUP_LABEL]   # EFS mounts from any zone


def test_loadgen_rbac_objects_are_valid():
    objs = loadgen_rbac("dynamo")
    for obj in objs:
        validate_builtin(obj)
    sa = next(o for o in objs if o["kind"] == "ServiceAccount")
    assert sa["metadata"]["name"] == LOADGEN_SERVICE_ACCOUNT


def test_names_and_labels_are_valid_and_distinct():
    assert k8s_jobs.label_value("20261201T000000Z") == "20261201T000000Z"
    odd = k8s_jobs.label_value("my run/#1")
    assert odd.startswith("my-run-1-") and len(odd) <= 63
    assert k8s_jobs.label_value("my run/#1") != k8s_jobs.label_value("my run/#2")
    names = {k8s_jobs.job_name("s", "r", step, "t") for step in
             ("concurrency_sweep/c1", "concurrency_sweep/c16", "multi_turn/conv8/r1")}
    assert len(names) == 3 and all(len(n) <= 52 for n in names)
    assert k8s_jobs.job_name("s", "r", "a/b", "t1") != k8s_jobs.job_name("s", "r", "a/b", "t2")
    assert k8s_jobs.run_selector("agg-a100", "r1") == (
        "dynamo-bench.io/stack=agg-a100,dynamo-bench.io/run=r1")


def test_cluster_job_flags_are_accepted_by_aiperf(tmp_path):
    from tests.test_workloads_aiperf_args import _inv, _parse
    args = profile_args(_inv(tmp_path, tokenizer_revision="abc123",
                             tokenizer_trust_remote_code=True, workers_max=3))
    cli = _parse(args)
    assert args[args.index("--workers-max") + 1] == "3"
    assert args[args.index("--tokenizer-revision") + 1] == "abc123"
    assert "--tokenizer-trust-remote-code" in args and cli.request_count == 1


# --- in-pod scripts, run for real ---------------------------------------------------------------

def test_client_wrapper_forwards_exit_code_and_writes_cpu_samples(tmp_path):
    busy = "import time\nt=time.process_time()\nwhile time.process_time()-t<1.2: pass\n" \
           "raise SystemExit(3)"
    done = subprocess.run([sys.executable, "-c", k8s_scripts.CLIENT_WRAPPER, str(tmp_path),
                           "--", sys.executable, "-c", busy], timeout=60)
    assert done.returncode == 3
    rows = [json.loads(x) for x in (tmp_path / k8s_scripts.CPU_SAMPLES).read_text().split("\n")
            if x]
    assert rows[0]["source"] in ("cgroup-v2", "cgroup-v1", "proc")
    samples = [r for r in rows[1:]]
    assert samples and max(r["cores"] for r in samples) > 0.2


def test_write_and_pack_scripts_round_trip(tmp_path):
    data = b"".join(b'{"i": %d}\n' % i for i in range(50_000))
    target = tmp_path / "pvc" / "stack" / "run" / "dataset.jsonl"
    done = subprocess.run([sys.executable, "-c", k8s_scripts.WRITE_FILE, str(target),
                           str(len(data))], input=data + b"trailing", capture_output=True)
    assert done.returncode == 0 and target.read_bytes() == data
    short = subprocess.run([sys.executable, "-c", k8s_scripts.WRITE_FILE, str(target) + "2",
                            str(len(data) + 10)], input=data, capture_output=True)
    assert short.returncode != 0 and not Path(str(target) + "2").exists()
    packed = subprocess.run([sys.executable, "-c", k8s_scripts.PACK_DIR, str(target.parent)],
                            capture_output=True)
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(packed.stdout), mode="r:gz") as tar:
        assert tar.getnames() == ["dataset.jsonl"]


def test_read_trace_script_returns_whole_new_lines_from_an_offset(tmp_path):
    """Only whole lines (the sink may be mid-write), from where the last read stopped; a file
    shorter than the offset (the pod restarted) is read from its start; no file: nothing."""
    trace = tmp_path / "trace.jsonl"

    def read(offset: int) -> tuple[dict, bytes]:
        out = subprocess.run([sys.executable, "-c", k8s_scripts.READ_TRACE, str(trace),
                              str(offset)], capture_output=True, check=True).stdout
        head, _, body = out.partition(b"\n")
        return json.loads(head), body

    assert read(0) == ({"end": 0, "size": 0}, b"")
    trace.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c"')
    head, body = read(0)
    assert head == {"end": 18, "size": 22} and body == b'{"a": 1}\n{"b": 2}\n'
    trace.write_bytes(trace.read_bytes() + b': 3}\n')
    assert read(18) == ({"end": 27, "size": 27}, b'{"c": 3}\n')
    trace.write_bytes(b'{"d": 4}\n')
    assert read(27) == ({"end": 9, "size": 9}, b'{"d": 4}\n')


@pytest.mark.engine   # runs the engine environment's Python (conftest.py: fails in CI if absent)
def test_versions_script_reports_the_engine_venv():
    engine = REPO / ".venv-engine" / "bin" / "python"
    out = subprocess.run([str(engine), "-c", k8s_scripts.VERSIONS], capture_output=True,
                         text=True, timeout=120)
    versions = json.loads(out.stdout)
    assert versions["ai-dynamo"] == "1.6.1" and versions["vllm"] is None


# --- reading the graph --------------------------------------------------------------------------

def _pod(name: str, comp: str, *, ready=True, waiting=None, restarts=0, terminating=False):
    main = {"name": "main", "restartCount": restarts,
            "state": {"waiting": {"reason": waiting}} if waiting else
            {"running": {"startedAt": "2026-12-01T00:01:00Z"}}}
    md = {"name": name, "uid": name, "creationTimestamp": "2026-12-01T00:00:00Z",
          "labels": {k8s_graph.OP_COMPONENT_LABEL: comp}}
    if terminating:
        md["deletionTimestamp"] = "2026-12-01T00:09:00Z"
    return {"metadata": md, "spec": {"containers": [{"name": "main"}]},
            "status": {"phase": "Running", "containerStatuses": [main], "conditions": [
                {"type": "PodScheduled", "status": "True",
                 "lastTransitionTime": "2026-12-01T00:00:05Z"},
                {"type": "Ready", "status": "True" if ready else "False",
                 "lastTransitionTime": "2026-12-01T00:05:00Z"}]}}


DGD = {"metadata": {"generation": 2},
       "spec": {"components": [{"name": "frontend", "type": "frontend", "replicas": 1},
                               {"name": "prefill-p4d", "type": "prefill", "replicas": 2}]},
       "status": {"state": "successful", "observedGeneration": 2,
                  "conditions": [{"type": "Ready", "status": "True"}]}}


def test_readiness_needs_the_operator_and_every_pod():
    pods = [_pod("fe", "frontend"), _pod("p1", "prefill-p4d"), _pod("p2", "prefill-p4d")]
    assert k8s_graph.graph_readiness(DGD, pods).ready
    r = k8s_graph.graph_readiness(DGD, [*pods[:2], _pod("p2", "prefill-p4d", ready=False)])
    assert not r.ready and "prefill-p4d 1/2" in r.summary
    stale = {**DGD, "metadata": {"generation": 3}}
    assert not k8s_graph.graph_readiness(stale, pods).ready     # old generation's status
    going = [*pods[:2], _pod("p2", "prefill-p4d", terminating=True)]
    assert not k8s_graph.graph_readiness(DGD, going).ready      # terminating never counts


def test_crash_loop_and_bad_image_are_fatal_unschedulable_is_not():
    crash = _pod("p2", "prefill-p4d", ready=False, waiting="CrashLoopBackOff", restarts=3)
    r = k8s_graph.graph_readiness(DGD, [_pod("fe", "frontend"), crash])
    assert r.fatal_pods == ["p2"] and "crash-looping (3 restarts" in r.fatal[0]
    assert not k8s_graph.pod_state(_pod("x", "w", ready=False, waiting="CrashLoopBackOff",
                                        restarts=1)).fatal
    assert k8s_graph.pod_state(_pod("x", "w", ready=False,
                                    waiting="CreateContainerConfigError")).fatal
    missing = _pod("x", "w", ready=False, waiting="ErrImagePull")
    missing["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = (
        'failed to pull image "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa": '
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa: not found")
    assert k8s_graph.pod_state(missing).fatal            # the tag does not exist
    slow = _pod("x", "w", ready=False, waiting="ImagePullBackOff")
    slow["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = "i/o timeout"
    assert not k8s_graph.pod_state(slow).fatal           # a registry blip is waited for
    pending = _pod("x", "w", ready=False)
    pending["status"]["conditions"][0] = {"type": "PodScheduled", "status": "False",
                                          "message": "0/3 nodes have nvidia.com/gpu"}
    state = k8s_graph.pod_state(pending)
    assert state.problem.startswith("unschedulable") and not state.fatal


def test_startup_times_split_pull_from_model_load():
    t = k8s_graph.startup_times(_pod("p", "prefill-p4d"))
    assert (t["schedule_s"], t["pull_and_start_s"], t["load_s"], t["total_s"]) == (
        5.0, 55.0, 240.0, 300.0)


def test_kv_transfer_evidence_from_args_and_log():
    cfg = {"kv_connector": "NixlConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"backends": ["LIBFABRIC"]}}
    pod = _pod("p1", "prefill-p4d")
    pod["spec"]["containers"][0].update(
        args=["--model", "m", "--kv-transfer-config", json.dumps(cfg)],
        env=[{"name": "FI_PROVIDER", "value": "efa"}, {"name": "HF_HOME", "value": "/m"}])
    ev = k8s_graph.kv_transfer_evidence(pod, "x\nBackend LIBFABRIC was instantiated\n")
    assert ev["configured"]["backends"] == ["LIBFABRIC"] and ev["used"] == "LIBFABRIC"
    assert ev["env"] == {"FI_PROVIDER": "efa"}
    silent = k8s_graph.kv_transfer_evidence(pod, "no nixl lines")
    assert silent["used"] == "not observed in the log"
    agg = k8s_graph.kv_transfer_evidence(_pod("w", "worker-p4d"), "")
    assert agg["used"].startswith("none")


def test_worker_selector_names_only_this_graphs_components():
    sel = k8s_graph.component_selector("agg-a100", ["worker-p4d"])
    assert sel == ("nvidia.com/dynamo-graph-deployment-name=agg-a100,"
                   "nvidia.com/dynamo-component in (worker-p4d)")
    assert k8s_graph.worker_components(DGD) == ["prefill-p4d"]


# --- stack outputs ------------------------------------------------------------------------------



def _outputs(**kw) -> dict:
    return {"kubeconfig": KUBECONFIG, "dynamoNamespace": "dynamo", "graphName": "agg-a100",
            "frontendService": "agg-a100-frontend", **kw}


def test_outputs_from_a_file_and_their_refusals(tmp_path, monkeypatch):
    monkeypatch.delenv("DYNAMO_BENCH_STACK_OUTPUTS", raising=False)
    stack = load_stack("agg-a100")
    f = tmp_path / "o.json"
    f.write_text(json.dumps(_outputs()))
    with pytest.raises(TargetError, match="chmod 600"):   # others could read the kubeconfig
        read_outputs(stack, f.chmod(0o644) or f)
    f.chmod(0o600)
    assert read_outputs(stack, f)["graphName"] == "agg-a100"
    for bad, match in ((_outputs(kubeconfig="[secret]"), "--show-secrets"),
                       (_outputs(dynamoNamespace="other"), "serving.namespace"),
                       ({"kubeconfig": KUBECONFIG}, "graphName")):
        f.write_text(json.dumps(bad))
        with pytest.raises(TargetError, match=match):
            read_outputs(stack, f)
    assert kubeconfig({"kubeconfig": json.dumps(KUBECONFIG)})["clusters"]
    with pytest.raises(TargetError, match="no clusters"):
        kubeconfig({"kubeconfig": "{}"})


def test_outputs_from_the_pulumi_cli(monkeypatch):
    monkeypatch.delenv("DYNAMO_BENCH_STACK_OUTPUTS", raising=False)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/pulumi")
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, json.dumps(_outputs()), "")
    out = read_outputs(load_stack("agg-a100"), runner=fake_run)
    assert out["frontendService"] == "agg-a100-frontend"
    assert calls == [["pulumi", "stack", "output", "--json", "--show-secrets", "--stack",
                      "agg-a100"]]


def test_stack_outputs_carry_the_prometheus_url():
    from tests.pulumi_harness import run
    owned = run("agg-a100-standalone").outputs
    assert owned["prometheusUrl"] == ("http://prometheus-kube-prometheus-prometheus."
                                      "monitoring.svc.cluster.local:9090")
    assert run("agg-a100").outputs["prometheusUrl"] == owned["prometheusUrl"]
