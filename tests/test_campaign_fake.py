"""`python -m workloads campaign` on the fake Automation workspace and the fake Kubernetes API
(tests/campaign_fake.py, tests/aws_target_fake*.py): it runs, keeps workers where it said it
would, scales groups as planned, and resumes after an interruption without redoing finished
variants."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from rich.console import Console

from reports.render.campaign import write
from stacks.config.loader import load_stack
from stacks.preflight.auto_mode import EMPTY_NODE_GRACE_S
from tests.campaign_fake import FakeWorkspace, fake_cluster
from workloads.campaign.run import CampaignOptions, run_campaign
from workloads.campaign.state import DEPLOYED, DONE, HANDED_OVER

VARIANTS = ["disagg-a100", "agg-a100-kv", "agg-a100"]


@pytest.fixture
def world(tmp_path, monkeypatch):
    cluster = fake_cluster(tmp_path)
    monkeypatch.setattr("workloads.targets.aws.target.connect", lambda cfg: cluster.kube())
    ws = FakeWorkspace(cluster)
    return cluster, ws


def _run(tmp_path, ws, cluster, run_id="c1"):
    opts = CampaignOptions(base="base-a100", variants=VARIANTS, scale="quick", run_id=run_id,
                           runs_dir=tmp_path / "runs", show_progress=False)
    return run_campaign(opts, Console(file=open("/dev/null", "w")), stacks=ws,  # noqa: SIM115
                        clock=cluster.clock)


def _worker_uids(cluster) -> set[str]:
    return {p["metadata"]["uid"] for p in cluster.pods.values()
            if "comp" in p["_fake"] and p["_fake"]["comp"].type != "frontend"}


def test_campaign_keeps_workers_scales_groups_and_records_it(tmp_path, world):
    cluster, ws = world
    result = _run(tmp_path, ws, cluster)
    assert result.status == "complete", result.plan
    state = json.loads(result.path.read_text())
    order = [s["name"] for s in result.plan["slots"]]
    # agg-a100-kv (named before agg-a100) and agg-a100 share their workers: back to back
    assert order == ["disagg-a100", "agg-a100-kv", "agg-a100"]
    slots = state["slots"]
    assert {n: s["status"] for n, s in slots.items()} == {
        "disagg-a100": DONE, "agg-a100-kv": HANDED_OVER, "agg-a100": DONE}
    kept = slots["agg-a100"]["kept_workers"]
    assert kept["from"] == "agg-a100-kv" and kept["kept"] is True
    assert kept["before"] == kept["after"] and len(kept["after"]) == 4   # 4 worker pods
    # deploys through the Automation API: handed over, adopted under the first's graph name
    campaign_keys = {(s, json.loads(v)["graphName"], json.loads(v)["handOver"],
                      json.loads(v)["adopt"])
                     for s, op, k, v in ws.calls if op == "set_config" and "campaign" in k}
    assert campaign_keys == {("disagg-a100", "disagg-a100", False, False),
                             ("agg-a100-kv", "agg-a100-kv", True, False),
                             ("agg-a100", "agg-a100-kv", False, True)}
    assert [(s, v) for s, op, _, v in ws.ops("destroy")] == [
        ("disagg-a100", ""), ("agg-a100-kv", "retained"), ("agg-a100", "")]
    # the campaign key is removed once a variant is destroyed; the base keeps its sizes
    assert all("dynamo-bench:campaign" not in ws.select(n).config for n in VARIANTS)
    assert json.loads(ws.select("base-a100").config["dynamo-bench:nodeGroupSizes"]) == {
        "p4d": 0, "g6e": 0}
    # scaled as planned: GPU groups at zero, p4d up for the first variant, down after the
    # last; the g6e no scheduled variant uses never comes up
    sizes = [json.loads(v) for s, op, _, v in ws.calls if s == "base-a100" and op == "up"]
    assert sizes == [{"p4d": 0, "g6e": 0}, {"p4d": 2, "g6e": 0}, {"p4d": 0, "g6e": 0}]
    assert not [n for n in cluster.nodes if n.startswith(("p4d", "g6e"))]
    # no cold restart anywhere: no serving pod was deleted but by a destroy, except the
    # frontend the adoption replaced
    serving = [d[2] for d in cluster.deleted
               if d[0] == "Pod" and d[2].startswith(("disagg-a100-", "agg-a100-kv-"))]
    assert len(serving) == 1 and serving[0].startswith("agg-a100-kv-frontend-")
    # prompts re-seeded on the kept workers: the same datasets, other AIPerf seeds
    runs = tmp_path / "runs"
    kv = json.loads((runs / "agg-a100-kv" / "c1" / "manifest.json").read_text())
    agg = json.loads((runs / "agg-a100" / "c1" / "manifest.json").read_text())
    assert agg["attempts"][-1]["campaign"]["prompt_epoch"] == 1
    assert agg["attempts"][-1]["campaign"]["kept_from"] == "agg-a100-kv"
    for step, rec in agg["steps"].items():
        assert rec["seed"] != kv["steps"][step]["seed"]
        assert rec["dataset"]["sha256"] == kv["steps"][step]["dataset"]["sha256"]
        assert rec["cold"] is False
    assert agg["steps"]["prefix_cache/share000"]["params"]["restart_skipped"]
    # the timeline measured billed and loaded GPU-hours of the p4d group, and the report
    # puts them beside the forecast
    m = state["measured"]["groups"]["p4d"]
    assert m["billed_gpu_hours"] > m["loaded_gpu_hours"] > 0
    write(state, tmp_path / "out")
    groups = pd.read_csv(tmp_path / "out" / "campaign_groups.csv").set_index("group")
    assert groups.loc["p4d", "forecast_billed_gpu_h"] == \
        state["plan"]["groups"]["p4d"]["billed_gpu_hours"] > 0
    assert groups.loc["p4d", "measured_ratio"] == m["billed_over_loaded"]
    assert groups.loc["g6e", "measured_billed_gpu_h"] == 0      # never up, never billed
    rows = pd.read_csv(tmp_path / "out" / "campaign_slots.csv").set_index("stack")
    assert rows.loc["agg-a100", "workers_really_kept"] and \
        rows.loc["agg-a100", "workers"] == "kept from agg-a100-kv"
    assert (rows["cold_restarts_skipped"] == 3).all()     # one per quick prefix share
    assert "Campaign base-a100 (quick scale): complete" in (
        tmp_path / "out" / "campaign.md").read_text()


def test_an_interrupted_campaign_resumes_without_redoing_finished_variants(tmp_path, world):
    cluster, ws = world
    # stop during agg-a100's run, on the workers agg-a100-kv handed over
    ws_up = ws.up_variant

    def up_then_arm(fs, stack):
        out = ws_up(fs, stack)
        if stack.name == "agg-a100":
            cluster.clock.interrupt_at = cluster.clock.t + 150
        return out
    ws.up_variant = up_then_arm
    first = _run(tmp_path, ws, cluster, run_id="c2")
    assert first.status == "interrupted"
    state = json.loads(first.path.read_text())
    assert state["slots"]["agg-a100"]["status"] == DEPLOYED
    assert state["slots"]["agg-a100-kv"]["status"] == HANDED_OVER
    m = json.loads((tmp_path / "runs" / "agg-a100" / "c2" / "manifest.json").read_text())
    finished = {s for s, r in m["steps"].items() if r["status"] == "complete"}
    assert finished and len(finished) < len(m["steps"])
    workers = _worker_uids(cluster)
    calls = len(ws.calls)
    second = _run(tmp_path, ws, cluster, run_id="c2")
    assert second.status == "complete"
    state = json.loads(second.path.read_text())
    assert state["resumed"] == 1
    later = ws.calls[calls:]
    # nothing finished is deployed or destroyed again: agg-a100 runs on its deployment (no
    # `up`), then goes; its workers stayed until then
    assert [c[:2] for c in later if c[1] in ("up", "destroy") and c[0] != "base-a100"] == [
        ("agg-a100", "destroy")]
    assert state["slots"]["agg-a100"]["workers"] == state["slots"]["agg-a100"]["kept_workers"][
        "after"] and set(state["slots"]["agg-a100"]["workers"].values()) == workers
    # a new prompt epoch for the resumed run: the interrupted step's prompts reached them
    assert state["slots"]["agg-a100"]["epochs"] == [1, 2]
    m = json.loads((tmp_path / "runs" / "agg-a100" / "c2" / "manifest.json").read_text())
    assert [a["campaign"]["prompt_epoch"] for a in m["attempts"]] == [1, 2]
    # the steps complete before the interruption were not redone
    assert all(not m["steps"][s]["history"] for s in finished)
    assert all(r["status"] == "complete" for r in m["steps"].values())


def test_an_auto_mode_campaign_scales_node_pools_and_bills_the_empty_node_grace(tmp_path, world):
    """base-a100-auto: the same campaign through the NodePools (the base's nodeGroupSizes, which
    the program turns into pool limits: tests/test_campaign_identity.py), on derived variants;
    the p4d pool lowered to 1 of 2 keeps its empty node until the grace ends or the pool is
    parked, and the record bills it until the Kubernetes API no longer lists it."""
    cluster, ws = world
    base = "base-a100-auto"
    variants = [f"{v}.{base}" for v in ("agg-a100-kv", "agg-a100", "disagg-l40s-decode")]
    opts = CampaignOptions(base=base, variants=variants, scale="quick", run_id="auto",
                           runs_dir=tmp_path / "runs", show_progress=False)
    result = run_campaign(opts, Console(file=open("/dev/null", "w")), stacks=ws,  # noqa: SIM115
                          clock=cluster.clock)
    assert result.status == "complete"
    state = json.loads(result.path.read_text())
    assert [s["name"] for s in result.plan["slots"]] == variants
    kept = state["slots"][variants[1]]["kept_workers"]
    assert kept["from"] == variants[0] and kept["kept"] is True
    moves: dict[str, list[int]] = {"p4d": [], "g6e": []}
    last = {"p4d": 0, "g6e": 0}
    for s, op, _, v in ws.calls:
        if s == base and op == "up":
            for g, n in json.loads(v).items():
                if n != last[g]:
                    moves[g].append(n)
                    last[g] = n
    assert moves == {"p4d": [2, 1, 0], "g6e": [1, 0]}
    # the lowered p4d pool's empty node billed on after the scale, until it was gone
    lowered = next(e for e in state["events"] if e["kind"] == "scale"
                   and e["before"]["p4d"] == 2 and e["after"]["p4d"] == 1)
    parked = next(e for e in state["events"] if e["kind"] == "scale"
                  and e["before"]["p4d"] == 1 and e["after"]["p4d"] == 0)
    gone = [e for e in state["events"] if e["kind"] == "billing" and e["group"] == "p4d"
            and e["delta"] < 0]
    assert gone[0]["t"] >= min(lowered["end"] + EMPTY_NODE_GRACE_S, parked["end"])
    assert gone[0]["t"] > lowered["end"] + 60 and sum(e["delta"] for e in gone) == -2
    levels = {g: sum(e["delta"] for e in state["events"]
                     if e["kind"] == "billing" and e["group"] == g) for g in ("p4d", "g6e")}
    assert levels == {"p4d": 0, "g6e": 0}
    assert not [n for n in cluster.nodes if n.startswith(("p4d", "g6e"))]


def test_a_full_base_a100_campaign_runs_every_variant_side_by_side_where_groups_allow(
        tmp_path, world):
    """Every variant attached to base-a100 (issue 28): the g6e-only agg-l40s-fp8 runs beside
    the p4d variants, each variant measured on its own graph (its model at the frontend, its
    cache counters, its Prometheus selector), and nothing is left running or billing."""
    cluster, ws = world
    opts = CampaignOptions(base="base-a100", scale="quick", run_id="full",
                           runs_dir=tmp_path / "runs", show_progress=False)
    result = run_campaign(opts, Console(file=open("/dev/null", "w")), stacks=ws,  # noqa: SIM115
                          clock=cluster.clock)
    state = json.loads(result.path.read_text())
    names = [s["name"] for s in result.plan["slots"]]
    assert sorted(names) == ["agg-a100", "agg-a100-kv", "agg-l40s-fp8", "disagg-a100",
                             "disagg-a100-kv", "disagg-a100-kv-offload", "disagg-l40s-decode"]
    assert result.status == "complete", {n: s.get("error") for n, s in state["slots"].items()}
    assert {s["run_status"] for s in state["slots"].values()} == {"complete"}
    runs = {e["slot"]: (e["start"], e["end"]) for e in state["events"] if e["kind"] == "run"}
    l40s = runs["agg-l40s-fp8"]
    beside = [n for n, (a, b) in runs.items() if n != "agg-l40s-fp8" and a < l40s[1]
              and b > l40s[0]]
    assert beside and all(result.plan["slots"][names.index(n)]["nodes"] == {"p4d": 2}
                          for n in beside)
    # each variant's attestation saw its own graph: the FP8 model, its own cached tokens
    for name in names:
        m = json.loads((tmp_path / "runs" / name / "full" / "manifest.json").read_text())
        att = m["attestations"][-1]
        assert att["ok"], (name, att["line"])
        model = next(c for c in att["checks"] if c["name"] == "model")["evidence"]["models"]
        assert model == [load_stack(name).model.name]
    # every per-step Prometheus figure is scoped to the graph that served it
    graphs = {q.split('dynamo_bench_io_graph="')[1].split('"')[0]
              for q in cluster.prom_queries if "dynamo_bench_io_graph" in q}
    assert graphs == {"agg-a100", "agg-l40s-fp8", "disagg-a100", "disagg-a100-kv-offload",
                      "disagg-l40s-decode"}   # the -kv variants adopt their sibling's graph
    assert not cluster.dgds and not cluster.serving.allocated
    assert not [n for n in cluster.nodes if n.startswith(("p4d", "g6e"))]
    levels = {g: sum(e["delta"] for e in state["events"]
                     if e["kind"] == "billing" and e["group"] == g) for g in ("p4d", "g6e")}
    assert levels == {"p4d": 0, "g6e": 0}


def test_a_base_scale_that_fails_mid_campaign_stops_it_recorded_and_a_resume_finishes(
        tmp_path, world):
    """The base's `up` failing in the loop (a scale after a slot) ends the campaign as failed
    with its record written, not with a traceback; the same run id then completes it."""
    cluster, ws = world
    up_base, calls = ws.up_base, []

    def flaky(fs):
        calls.append(fs.name)
        if len(calls) == 3:    # prepare, scale up for the first slot, then this one fails
            raise RuntimeError("error: the EKS API said Throttling (test)")
        return up_base(fs)
    ws.up_base = flaky
    first = _run(tmp_path, ws, cluster, run_id="flaky")
    assert first.status == "failed"
    state = json.loads(first.path.read_text())
    assert state["status"] == "failed" and state["slots"]["disagg-a100"]["status"] == DONE
    second = _run(tmp_path, ws, cluster, run_id="flaky")
    assert second.status == "complete"
    assert json.loads(second.path.read_text())["slots"]["disagg-a100"]["status"] == DONE
