"""`python -m workloads run` on an aws stack, end to end against the fake cluster: pre-flight,
readiness, smoke and warm-up through the API-server proxy, every quick step as a Job that leaves
real AIPerf exports (copied from tests/fixtures/runs), cold restarts, cleanup; then
`reports build` on the run folder, costed from the nodes the run recorded. And Ctrl-C."""

from __future__ import annotations

import json

import pytest

from reports.accounting.node_hours import usage_from_manifest
from reports.build import build_report
from tests.aws_target_deploy import NAMESPACE, connect_runner, deploy
from workloads.runner import RunOptions, run
from workloads.steps import plan
from workloads.targets.aws import k8s_jobs


@pytest.fixture
def deployed(tmp_path, monkeypatch):
    return connect_runner(monkeypatch, deploy(tmp_path, "agg-a100"))


def _opts(tmp_path, d, run_id="e2e") -> RunOptions:
    return RunOptions(stack="agg-a100", scale="quick", run_id=run_id,
                      runs_dir=tmp_path / "runs", outputs_file=d.outputs, show_progress=False)


def test_a_quick_run_on_the_cluster_builds_a_report(tmp_path, deployed):
    d = deployed
    result = run(_opts(tmp_path, d))
    steps = plan(d.stack, "quick")
    assert result.status == "complete", result.steps
    assert set(result.steps) == {s.id for s in steps}
    m = json.loads((result.run_dir / "manifest.json").read_text())
    assert m["target"] == "aws" and m["attempts"][-1]["versions"]["dynamo"] == "1.6.1"
    # the prices it was planned with travel with the record (base-a100's three groups)
    assert m["prices"] == {
        "g6e.12xlarge": {"usdPerHour": 10.49264, "source": "catalogue 2026-07-28",
                         "verified": True},
        "m7i.4xlarge": {"usdPerHour": 0.8064, "source": "catalogue 2025-01-01",
                        "verified": False},
        "p4d.24xlarge": {"usdPerHour": 21.957642, "source": "catalogue 2026-07-28",
                         "verified": True}}
    startup = next(p for p in m["attempts"][-1]["phases"] if p["name"] == "startup")
    assert startup["target_startup"]["worker_model_load_s_max"] == 240.0
    for s in steps:
        rec = m["steps"][s.id]
        assert rec["cold"] == s.cold and ("cold_restart" in rec) == s.cold
        assert (result.run_dir / s.id / "profile_export.jsonl").is_file()
    cold = [s for s in steps if s.cold]
    assert len(cold) == 3        # one per quick prefix share
    restart = m["steps"][cold[0].id]["cold_restart"]
    assert len(restart["deleted"]) == 4 and restart["wait"]["dgd_state"] == "successful"
    # every Job and ConfigMap went away, and the transfer pod with them
    assert not d.cluster.jobs and not d.cluster.configmaps
    assert not [p for p in d.cluster.pods.values() if "transfer" in p["_fake"]]
    jobs = [o for o in d.cluster.created if o["kind"] == "Job"]
    assert len(jobs) == len(steps)
    # node usage for the cost accounting (reports/accounting/node_hours.py)
    usage = usage_from_manifest(m)
    assert {u.instance_type for u in usage} == {"p4d.24xlarge", "m7i.4xlarge"}
    assert all(u.end is not None and u.end > u.start for u in usage)
    report = build_report([result.run_dir], tmp_path / "out", name="aws")
    assert (report.out_dir / "report.md").is_file()
    # the Job's AIPerf ran the project's slot wait, and the record and the report say so
    assert all(r["aiperf_patches"] == {"aiperf_slot_wait": "applied"}
               for r in m["steps"].values())
    assert "AIPerf 0.13.0 + slot wait" in (report.out_dir / "report.md").read_text()
    assert not report.steps["step_flag"].fillna("").str.contains("UNPATCHED").any()
    cost = report.tables["cost_efficiency"]
    assert len(cost) == len(steps)
    assert cost["cost_basis"].str.startswith("measured").all(), cost["cost_basis"].tolist()
    assert (cost["period_cost_usd"] > 0).all()
    assert (cost["unverified_prices"] == "m7i.4xlarge (catalogue 2025-01-01)").all()
    # the server series survive: the exports name the endpoints the step record names
    assert report.tables["fidelity"]["server_ttft_mean_ms"].notna().all()
    assert report.tables["prefix_cache"]["server_hit_rate"].notna().all()


def test_ctrl_c_mid_run_leaves_a_resumable_run_and_only_others_jobs(tmp_path, deployed):
    d = deployed
    c = d.cluster
    other = k8s_jobs.loadgen_job(
        name="aiperf-someone-else", namespace=NAMESPACE,
        labels=k8s_jobs.run_labels("agg-a100", "their-run"), step_id="x/y",
        image=k8s_jobs.AIPERF_IMAGE, aiperf_args=["profile"],
        artifact_dir="/results/a/b/x/y/j/aiperf", placement=k8s_jobs.Placement(("cpu",), None),
        cpu=4, deadline_s=60, dataset_configmap=None)
    c.seed_job(NAMESPACE, other)
    c.clock.interrupt_at = 90.0            # during the second step's Job
    graph_pods = {k for k, p in c.pods.items() if "comp" in p["_fake"]}
    result = run(_opts(tmp_path, d, run_id="stopped"))
    assert result.status == "interrupted"
    assert list(c.jobs) == [(NAMESPACE, "aiperf-someone-else")]
    assert not c.configmaps and graph_pods <= set(c.pods)
    m = json.loads((result.run_dir / "manifest.json").read_text())
    statuses = [s["status"] for s in m["steps"].values()]
    assert statuses[0] == "complete" and "interrupted" in statuses
    assert m["attempts"][-1]["status"] == "interrupted"
    # resuming the same run id finishes it without redoing the complete step
    resumed = run(_opts(tmp_path, d, run_id="stopped"))
    assert resumed.status == "complete"
    m = json.loads((resumed.run_dir / "manifest.json").read_text())
    first = plan(d.stack, "quick")[0].id
    assert len(m["steps"][first]["history"]) == 0
    assert len(m["attempts"]) == 2
    nodes = {n["node"]: n for n in m["nodes"]}     # one record per node over both attempts
    assert set(nodes) == {"cpu-a", "p4d-0", "p4d-1"}   # the frontend's and the workers' nodes
    assert all(n["end"] is not None and n["start"] < n["end"] for n in nodes.values())
