"""The KV router against round-robin on multi-turn, with the REAL AIPerF CLI and the REAL local
Dynamo engine, and the ablation check on the result.

1. The shipped `local-agg` and `local-agg-kv` run their quick multi-turn step (conversations
   with random think times, their count not a multiple of the 2 workers; 40 s instead of 20 s,
   for a tighter hit rate): the KV router keeps
   clearly more follow-up turns on the worker holding the conversation, and the frontend
   measures a clearly higher prefix hit rate. report.md shows both, and the ablation check
   reports the difference as a finding.
2. The same pair with the lockstep workload run on purpose (4 conversations over 2 workers,
   fixed lengths, no think time): round-robin returns every conversation to its worker by
   accident, the hit rates match, and the ablation check flags "no measurable difference"
   with that cause, in its table and in the summary's warnings.

Every routed request is checked against the frontend's own record of it (its request trace).

Each pair runs as a local campaign (`workloads campaign local local-agg local-agg-kv --only
multi_turn`), the path `make demo` takes: local-agg-kv keeps local-agg's mockers (the same
processes) and only swaps the frontend, with re-seeded prompts and no worker restart; the
timeline measures the mockers' billed time (one stretch over both runs) against the steps'
load. The shipped pair checks that too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from engine_support import REPO, needs_engine, read_manifest, runner_env

from reports.build import build_report
from reports.comparisons.ablation import AFFINITY_OVER_CHANCE, MIN_PLACEMENT_DELTA, NO_DIFFERENCE
from stacks.config.loader import STACKS_DIR
from stacks.config.workload_config import MultiTurn

pytestmark = [pytest.mark.engine, pytest.mark.load(1), needs_engine]
PAIR = ("local-agg", "local-agg-kv")
# The gaps the shipped quick workload must show (measured: ~8-10 points of hit rate, ~20-30
# points of same-worker share; 9.9 and 25.8 points in a 40 s step on an idle machine).
MIN_HIT_GAIN = 0.04
MIN_SAME_WORKER_GAIN = 0.15
# The shipped quick multi-turn, run twice as long: the standard error of the hit-rate gap
# falls from ~2.2 to ~1.6 points, so a true ~8.5-point gap passes 4 points all but always
# (2.9 standard errors of margin), while a router that does nothing (gap 0) passes it about
# once in 200 runs, and fails the same-worker check besides (the demo's 20 s step leaves it
# to the ablation check to say when it cannot tell).
SHIPPED = {**MultiTurn().quick, "durationS": 40}
# The workload the early demo ran: 4 conversations (a multiple of the 2 workers), equal
# lengths (64-token answers) and no think time; 10 s are dozens of turns per conversation
# without pauses.
LOCKSTEP = {**MultiTurn().quick, "conversations": 4, "osl": 64, "turnDelayMs": 0,
            "turnDelaySigma": 0, "durationS": 10}


def _run_pair(root: Path, quick: dict | None) -> tuple[dict[str, Path], object]:
    """Both stacks' multi-turn step (shipped files, or with these quick overrides) as one local
    campaign, and one report."""
    stacks = root / "stacks"
    stacks.mkdir(parents=True)
    for name in PAIR:
        doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{name}.yaml").read_text())
        if quick is not None:
            doc["config"]["dynamo-bench:workloads"] = {"multiTurn": {"quick": quick}}
        (stacks / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc))
    cmd = [sys.executable, "-m", "workloads", "campaign", "local", *PAIR, "--only", "multi_turn",
           "--scale", "quick", "--stacks-dir", str(stacks), "--runs-dir", str(root / "runs"),
           "--run-id", "r1", "--no-progress"]
    out = subprocess.run(cmd, env=runner_env(root / "hf"), capture_output=True, text=True,
                         timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = {name: root / "runs" / name / "r1" for name in PAIR}
    report = build_report(list(runs.values()), root / "out", name="pair", with_compare=True)
    return runs, report


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    return _run_pair(tmp_path_factory.mktemp("shipped"), SHIPPED)


@pytest.fixture(scope="module")
def lockstep(tmp_path_factory):
    return _run_pair(tmp_path_factory.mktemp("lockstep"), LOCKSTEP)


def _step(report, stack: str) -> pd.Series:
    st = report.steps
    return st[(st["stack"] == stack) & (st["workload"] == "multi_turn")].iloc[0]


def test_every_request_is_in_the_frontends_own_records(shipped):
    runs, report = shipped
    for name, run in runs.items():
        (step_id, rec), = read_manifest(run)["steps"].items()
        evidence = rec["routing_evidence"]
        assert evidence["records"] == evidence["expected"] == rec["counts"]["completed"] > 50
        st = _step(report, name)
        assert st["usable"], st["step_flag"]     # think time is no client-bound alarm
        assert st["traced_requests"] == rec["counts"]["completed"]
        assert st["prompt_workers"] == 2 and st["chance_same_worker"] == 0.5
        # the frontend's cached tokens in its records add up to its own histogram's rate
        assert st["trace_hit_rate"] == pytest.approx(st["server_hit_rate"], abs=0.01)
        workers = report.tables["routing"]
        mine = workers[workers["stack"] == name]
        assert set(mine["worker"]) == {"worker-0", "worker-1"}
        # each worker's own request counter agrees with the frontend's records of it
        assert (mine["prompts"] == mine["requests_counted"]).all()


def test_the_campaign_kept_the_mockers_and_swapped_the_frontend(shipped):
    runs, _ = shipped
    state = json.loads((runs[PAIR[0]].parents[1] / "campaigns" / "local" / "r1" /
                        "campaign.json").read_text())
    assert state["status"] == "complete"
    assert [s["name"] for s in state["plan"]["slots"]] == list(PAIR)
    assert [s["only"] for s in state["plan"]["slots"]] == [["multi_turn"]] * 2
    kept = state["slots"][PAIR[1]]["kept_workers"]
    # the same two mocker processes served both runs
    assert kept["kept"] is True and len(kept["after"]) == 2
    assert kept["before"] == kept["after"]
    rr, kv = (read_manifest(runs[s]) for s in PAIR)
    pids = [{p["name"]: p["pid"] for p in m["attempts"][-1]["target"]["processes"]
             if p["name"].startswith("worker")} for m in (rr, kv)]
    assert pids[0] == pids[1] == {n: int(v) for n, v in kept["after"].items()}
    frontends = [[p for p in m["attempts"][-1]["target"]["processes"]
                  if p["name"].startswith("frontend")] for m in (rr, kv)]
    assert frontends[1][-1]["pid"] != frontends[0][0]["pid"]   # a new frontend ...
    assert kv["attempts"][-1]["target"]["router"] == "kv"      # ... with its router
    swap = next(e for e in state["events"] if e["kind"] == "deploy" and e["slot"] == PAIR[1])
    assert swap["adopt"] is True and swap["swap"]["frontend"]["router"] == "kv"
    # the kept workers got new prompts for the same dataset, and only the selected workload
    assert list(kv["steps"]) == list(rr["steps"]) == ["multi_turn/conv5"]
    for step, rec in kv["steps"].items():
        assert rec["status"] == "complete" and rec["cold"] is False
        assert rec["seed"] != rr["steps"][step]["seed"]
        assert rec["dataset"]["sha256"] == rr["steps"][step]["dataset"]["sha256"]
    assert kv["attempts"][-1]["campaign"] == {"id": "r1", "base": "local",
                                              "kept_from": PAIR[0], "prompt_epoch": 1}
    # billed: one stretch of the imitated p4d over both runs (kept: no gap), loaded: steps
    billing = [e for e in state["events"] if e["kind"] == "billing"]
    assert [e["delta"] for e in billing] == [1, -1]
    m = state["measured"]["groups"]["p4d"]
    assert m["billed_gpu_hours"] > m["loaded_gpu_hours"] > 0
    # every process of the campaign is gone once it ends
    every = {p["pid"] for m in (rr, kv) for p in m["attempts"][-1]["target"]["processes"]}
    assert not [pid for pid in every if Path(f"/proc/{pid}").exists()
                and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]]


def test_the_kv_router_raises_hit_rate_and_same_worker_share(shipped):
    _, report = shipped
    rr, kv = (_step(report, s) for s in PAIR)
    assert kv["server_hit_rate"] - rr["server_hit_rate"] >= MIN_HIT_GAIN, (
        rr["server_hit_rate"], kv["server_hit_rate"])
    assert kv["same_worker_share"] - rr["same_worker_share"] >= MIN_SAME_WORKER_GAIN, (
        rr["same_worker_share"], kv["same_worker_share"])
    row = report.tables["ablation"].iloc[0]
    assert (row["setting"], row["baseline_stack"], row["changed_stack"]) == ("router", *PAIR)
    assert row["verdict"].startswith("raised by")
    md = (report.out_dir / "report.md").read_text()
    mt = report.tables["multi_turn"]
    for stack, st in zip(PAIR, (rr, kv), strict=True):
        row = mt[(mt["stack"] == stack) & (mt["turn"] == "all")].iloc[0]
        assert row["same_worker_share"] == pytest.approx(st["same_worker_share"])
        cells = f"| {row['server_hit_rate']:.3f} | {row['same_worker_share']:.3f} | 0.500 |"
        assert cells in md, cells
    assert "ablation: local-agg-kv vs local-agg (router)" in md


def test_a_lockstep_workload_is_flagged_not_reported(lockstep):
    """Lockstep is a matter of timing: on an idle machine the early demo's workload (4
    conversations, equal lengths, no pauses, 2 workers) moves in lockstep and round-robin keeps
    each conversation on its worker; on busy cores jitter breaks it. Either way the check must
    say what the placement shows: lockstep -> NO MEASURABLE DIFFERENCE with the cause, never a
    finding; lockstep broken -> the router's measured gain, with no affinity claimed."""
    _, report = lockstep
    rr, kv = (_step(report, s) for s in PAIR)
    row = report.tables["ablation"].iloc[0]
    seen = (rr["server_hit_rate"], kv["server_hit_rate"], rr["same_worker_share"],
            kv["same_worker_share"])
    lockstep_happened = rr["same_worker_share"] >= rr["chance_same_worker"] + \
        AFFINITY_OVER_CHANCE and rr["same_worker_share"] >= kv["same_worker_share"] - \
        MIN_PLACEMENT_DELTA
    md = (report.out_dir / "report.md").read_text()
    warnings = md.split("**Warnings**", 1)[1].split("## Stacks", 1)[0]
    if not lockstep_happened:
        assert "accidental session affinity" not in str(row["likely_cause"]), seen
        assert "accidental session affinity" not in warnings, seen
        return
    assert row["verdict"] == NO_DIFFERENCE, seen
    # round-robin kept conversations on their workers by accident, as much as the router did
    assert "accidental session affinity" in row["likely_cause"]
    assert "4 conversations are a multiple of the 2 workers" in row["likely_cause"]
    assert "no measurable difference" in warnings and "accidental session affinity" in warnings
