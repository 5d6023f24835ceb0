"""A local campaign on the real local Dynamo engine and real AIPerf: a round-robin stack then
its KV-router twin keep their mockers (the same processes) and only swap the frontend; no
step restarts the workers; the second run's prompts are re-seeded; the timeline measures the
mockers' billed time (one stretch over both runs) against the steps' load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from tests.engine_support import needs_engine, write_stack
from workloads.campaign.run import CampaignOptions, run_campaign

pytestmark = [pytest.mark.engine, needs_engine]

TINY = {"warmupRequests": 1, "errorRateThreshold": 0.0,
        "multiTurn": {"enabled": False}, "sequenceDistributions": {"enabled": False},
        "concurrencySweep": {"quick": {"concurrencies": [2], "durationS": 3, "isl": 512,
                                       "osl": 16}},
        "prefixCache": {"shares": [0.0, 1.0], "quick": {"requests": 8, "osl": 8,
                                                        "concurrency": 4}}}


def test_local_campaign_keeps_the_mockers_and_swaps_the_frontend(tmp_path):
    stacks = tmp_path / "stacks"
    workers = [{"role": "worker", "replicas": 2}]
    write_stack(stacks, "tiny-rr", workers=workers, router="round-robin", workloads=TINY)
    write_stack(stacks, "tiny-kv", workers=workers, router="kv", workloads=TINY)
    opts = CampaignOptions(base="local", variants=["tiny-kv", "tiny-rr"], scale="quick",
                           run_id="camp", runs_dir=tmp_path / "runs", stacks_dir=stacks,
                           hf_home=tmp_path / "hf", show_progress=False)
    result = run_campaign(opts, Console(file=open("/dev/null", "w")))  # noqa: SIM115
    assert result.status == "complete"
    state = json.loads(result.path.read_text())
    assert [s["name"] for s in result.plan["slots"]] == ["tiny-kv", "tiny-rr"]
    kept = state["slots"]["tiny-rr"]["kept_workers"]
    # the same two mocker processes served both runs
    assert kept["kept"] is True and len(kept["after"]) == 2
    assert kept["before"] == kept["after"]
    runs = tmp_path / "runs"
    kv = json.loads((runs / "tiny-kv" / "camp" / "manifest.json").read_text())
    rr = json.loads((runs / "tiny-rr" / "camp" / "manifest.json").read_text())
    pids = [{p["name"]: p["pid"] for p in m["attempts"][-1]["target"]["processes"]
             if p["name"].startswith("worker")} for m in (kv, rr)]
    assert pids[0] == pids[1] == {n: int(v) for n, v in kept["after"].items()}
    frontends = [[p for p in m["attempts"][-1]["target"]["processes"]
                  if p["name"].startswith("frontend")] for m in (kv, rr)]
    assert frontends[1][-1]["pid"] != frontends[0][0]["pid"]   # a new frontend ...
    assert rr["attempts"][-1]["target"]["router"] == "round-robin"   # ... with its router
    swap = next(e for e in state["events"] if e["kind"] == "deploy" and e["slot"] == "tiny-rr")
    assert swap["adopt"] is True and swap["swap"]["frontend"]["router"] == "round-robin"
    # no restarts; the kept workers got new prompts for the same datasets
    for step, rec in rr["steps"].items():
        assert rec["status"] == "complete" and rec["cold"] is False
        assert "cold_restart" not in rec
        assert rec["seed"] != kv["steps"][step]["seed"]
        assert rec["dataset"]["sha256"] == kv["steps"][step]["dataset"]["sha256"]
    assert rr["attempts"][-1]["campaign"] == {"id": "camp", "base": "local",
                                              "kept_from": "tiny-kv", "prompt_epoch": 1}
    # billed: one stretch of the imitated p4d over both runs (kept: no gap), loaded: steps
    billing = [e for e in state["events"] if e["kind"] == "billing"]
    assert [e["delta"] for e in billing] == [1, -1]
    m = state["measured"]["groups"]["p4d"]
    assert m["billed_gpu_hours"] > m["loaded_gpu_hours"] > 0
    # every process of the campaign is gone once it ends
    every = {p["pid"] for m in (kv, rr) for p in m["attempts"][-1]["target"]["processes"]}
    assert not [pid for pid in every if Path(f"/proc/{pid}").exists()
                and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]]
