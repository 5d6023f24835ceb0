"""The campaign loop on a recording platform (no cluster): variants on disjoint groups run at
the same time, groups are scaled in the planned order, a scale-up is asked ahead of need, a
failed variant is recorded and torn down while the others go on; and the timeline's
arithmetic by hand."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from stacks.config.loader import all_stack_names, load_stack
from stacks.plan.campaign_cost import base_campaign
from stacks.sizing.estimate import LOCAL_RESTART_S, workload_steps_seconds
from workloads.campaign.engine import Campaign
from workloads.campaign.plan import aws_plan, local_plan
from workloads.campaign.state import DONE, FAILED, CampaignState
from workloads.campaign.timeline import measure


class Clock:
    def __init__(self):
        self.t, self.lock = 0.0, threading.Lock()

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        with self.lock:
            self.t += s

    def wall(self) -> str:
        return str(self.t)


class Recorder:
    kind = "aws"

    def __init__(self, clock: Clock, meet: set[str], fail: str | None = None):
        self.clock, self.calls, self.fail = clock, [], fail
        self.barrier = threading.Barrier(len(meet), timeout=20) if meet else None
        self.meet = meet

    def prepare(self, sizes):
        self.calls.append(("prepare", dict(sizes)))

    def scale(self, sizes):
        self.calls.append(("scale", dict(sizes)))

    def is_deployed(self, slot):
        return True

    def nodes_up(self, group):
        return None

    def can_adopt(self, slot):
        return True

    def deploy(self, slot, adopt):
        self.calls.append(("deploy", slot["name"], adopt))
        return {}

    def workers(self, slot):
        return {"worker-0": "uid-of-the-first"}

    def run(self, slot, epoch, info, clock):
        self.calls.append(("run", slot["name"], epoch))
        if slot["name"] in self.meet:   # both must be running at once to pass
            self.barrier.wait()
        if slot["name"] == self.fail:
            raise RuntimeError("pulumi up failed (test)")
        clock.sleep(slot["forecast"].get("load_window_s", 60.0))
        return SimpleNamespace(status="complete", run_dir="runs/x")

    def teardown(self, slot, hand_over):
        self.calls.append(("teardown", slot["name"], hand_over))
        return {}

    def close(self):
        pass


def _plan():
    base = load_stack("base-a100")
    variants = [load_stack(n) for n in all_stack_names()
                if load_stack(n).cluster.attach_to == "base-a100"]
    return aws_plan(base_campaign(base, variants), "full")


def _loop(tmp_path, platform, clock):
    plan = _plan()
    state = CampaignState.open(tmp_path / "campaign.json", plan)
    state.set_sizes({"p4d": 0, "g6e": 0})
    return Campaign(plan, state, platform, clock, report=lambda *a: None), state


def test_disjoint_groups_run_together_and_groups_scale_in_plan_order(tmp_path):
    clock = Clock()
    rec = Recorder(clock, meet={"agg-a100", "agg-l40s-fp8"})
    loop, state = _loop(tmp_path, rec, clock)
    assert loop.execute() == "complete"
    sizes, per_group = {"p4d": 0, "g6e": 0}, {"p4d": [], "g6e": []}
    for call in rec.calls:
        if call[0] == "scale":
            for g, n in call[1].items():
                if n != sizes[g]:
                    per_group[g].append(n)
            sizes = call[1]
    assert per_group == {"p4d": [2, 1, 0], "g6e": [1, 0, 1, 0]}
    # kept workers adopted, with the kept-workers evidence and their epoch
    assert ("deploy", "agg-a100-kv", True) in rec.calls
    assert ("run", "agg-a100-kv", 1) in rec.calls and ("run", "agg-a100", 0) in rec.calls
    assert state.slot("agg-a100-kv")["kept_workers"]["kept"] is True
    assert all(state.status(n) in (DONE, "handed over") for n in state.data["slots"])


def test_a_scale_up_is_asked_ahead_of_need(tmp_path):
    clock = Clock()
    loop, state = _loop(tmp_path, Recorder(clock, meet=set()), clock)
    for s in loop.slots:   # everything but the last two is finished
        if s["name"] not in ("disagg-a100-kv-offload", "disagg-l40s-decode"):
            state.update_slot(s["name"], status=DONE)
    window = loop._slot("disagg-a100-kv-offload")["forecast"]["load_window_s"]
    state.update_slot("disagg-a100-kv-offload", status="deployed", deployed_at=100.0)
    state.set_sizes({"p4d": 2, "g6e": 0})
    loop.running["disagg-a100-kv-offload"] = None   # type: ignore[assignment]
    clock.t = 100.0 + window - 600 - 1            # 10 min 1 s before it is expected to end
    loop._scale_ahead()
    assert state.data["sizes"] == {"p4d": 2, "g6e": 0}
    clock.t += 2
    loop._scale_ahead()                           # the g6e is asked for 10 min ahead
    assert state.data["sizes"] == {"p4d": 2, "g6e": 1}


def test_a_failed_variant_is_recorded_torn_down_and_the_rest_go_on(tmp_path):
    clock = Clock()
    rec = Recorder(clock, meet=set(), fail="agg-l40s-fp8")
    loop, state = _loop(tmp_path, rec, clock)
    assert loop.execute() == "failed"
    assert state.status("agg-l40s-fp8") == FAILED
    assert "pulumi up failed" in state.slot("agg-l40s-fp8")["error"]
    assert ("teardown", "agg-l40s-fp8", False) in rec.calls
    assert state.status("disagg-l40s-decode") == DONE   # it ran after all


def test_timeline_by_hand():
    t0 = datetime(2026, 12, 1, tzinfo=UTC)

    def at(s: float) -> str:
        return (t0 + timedelta(seconds=s)).isoformat()
    data = {"plan": {"slots": [{"name": "a", "gpus": {"p4d": 16}}],
                     "groups": {"p4d": {"gpus_per_node": 8}}},
            "slots": {"a": {"status": DONE, "run_status": "complete"}},
            "events": [{"kind": "billing", "group": "p4d", "delta": 2, "wall": at(0)},
                       {"kind": "deploy", "slot": "a", "wall": at(600), "end_wall": at(900)},
                       {"kind": "run", "slot": "a", "wall": at(900), "end_wall": at(1700)},
                       {"kind": "teardown", "slot": "a", "wall": at(1700),
                        "end_wall": at(1800)},
                       {"kind": "billing", "group": "p4d", "delta": -2, "wall": at(1900)}]}
    manifest = {"attempts": [{"phases": [
        {"name": "smoke", "start": at(950), "end": at(960)},
        {"name": "step:concurrency_sweep/c1", "start": at(1000), "end": at(1300)},
        {"name": "step:prefix_cache/share000", "start": at(1300), "end": at(1600)}]}]}
    m = measure(data, {"a": manifest})
    # billed: 2 nodes x 8 GPUs x 1,900 s; loaded: 16 GPUs x 600 s of steps
    assert m["groups"]["p4d"] == {"billed_gpu_hours": pytest.approx(2 * 8 * 1900 / 3600),
                                  "loaded_gpu_hours": pytest.approx(16 * 600 / 3600),
                                  "billed_over_loaded": round(1900 * 2 * 8 / (16 * 600), 3)}
    assert m["slots"]["a"]["wall_s"] == 1200 and m["slots"]["a"]["load_window_s"] == 600


class LocalRecorder(Recorder):
    """A local platform's contract: its workers live only while this platform does."""

    kind = "local"

    def __init__(self, clock: Clock, interrupt: str | None = None):
        super().__init__(clock, meet=set())
        self.interrupt, self.alive = interrupt, None

    def is_deployed(self, slot):
        return self.alive == slot["name"]

    def can_adopt(self, slot):
        return self.alive == slot["kept_from"]

    def deploy(self, slot, adopt):
        self.alive = slot["name"]
        return super().deploy(slot, adopt)

    def run(self, slot, epoch, info, clock):
        if slot["name"] == self.interrupt:
            self.interrupt = None
            raise KeyboardInterrupt("Ctrl-C (test)")
        return super().run(slot, epoch, info, clock)

    def teardown(self, slot, hand_over):
        self.alive = self.alive if hand_over else None
        return super().teardown(slot, hand_over)

    def close(self):
        self.alive = None


def _billing_level(state) -> list[int]:
    level, out = 0, []
    for e in state.data["events"]:
        if e["kind"] == "billing":
            level += e["delta"]
            out.append(level)
    return out


@pytest.mark.parametrize("interrupt", ["local-agg", "local-agg-kv"])
def test_a_local_campaign_resumed_after_ctrl_c_bills_each_mocker_set_once(tmp_path, interrupt):
    """Ctrl-C stops the mockers: the record stops billing them then, and the resumed campaign
    bills the new ones from their start (never two sets at once), deploying fresh workers
    where the kept ones are gone."""
    stacks = [load_stack(n) for n in ("local-agg-kv", "local-agg")]
    plan = local_plan(stacks, lambda a, b: True, "quick")
    assert [(s["name"], s["kept_from"]) for s in plan["slots"]] == [
        ("local-agg-kv", None), ("local-agg", "local-agg-kv")]
    clock = Clock()
    state = CampaignState.open(tmp_path / "campaign.json", plan)
    first = Campaign(plan, state, LocalRecorder(clock, interrupt), clock,
                     report=lambda *a: None, parallel=False)
    with pytest.raises(KeyboardInterrupt):
        first.execute()
    first.close()
    assert _billing_level(state)[-1] == 0           # stopped with its processes
    state = CampaignState.open(tmp_path / "campaign.json", plan)
    rec = LocalRecorder(clock)
    again = Campaign(plan, state, rec, clock, report=lambda *a: None, parallel=False)
    assert again.execute() == "complete"
    again.close()
    levels = _billing_level(state)
    assert max(levels) == 1 and levels[-1] == 0     # one mocker set at a time, none left
    done = [c for c in rec.calls if c[0] in ("deploy", "run")]
    if interrupt == "local-agg":   # its kept workers were gone: new ones, epoch 0 again
        assert done == [("deploy", "local-agg", False), ("run", "local-agg", 0)]
        assert state.slot("local-agg")["adopted"] is False
    else:                          # nothing had finished: all again, keeping as planned
        assert done == [("deploy", "local-agg-kv", False), ("run", "local-agg-kv", 0),
                        ("deploy", "local-agg", True), ("run", "local-agg", 1)]


def test_a_local_plan_forecasts_the_mockers_like_a_cluster_without_a_model_load():
    """Kept mockers start nothing; a new set starts in about a second; each step as `stacks
    check` estimates it; billed GPU-hours are the imitated nodes' while the mockers run."""
    stacks = [load_stack(n) for n in ("local-agg", "local-agg-kv", "local-disagg")]
    same = {("local-agg", "local-agg-kv")}
    plan = local_plan(stacks, lambda a, b: (a.name, b.name) in same, "quick")
    f = {s["name"]: s["forecast"] for s in plan["slots"]}
    steps = {s.name: sum(workload_steps_seconds(s, "quick").values()) for s in stacks}
    assert f["local-agg"]["wall_s"] == pytest.approx(LOCAL_RESTART_S + steps["local-agg"])
    assert f["local-agg-kv"]["wall_s"] == pytest.approx(steps["local-agg-kv"])   # kept
    assert f["local-agg-kv"]["start_s"] == f["local-agg"]["wall_s"]
    billed = sum(s["nodes"]["p4d"] * 8 * s["forecast"]["wall_s"] for s in plan["slots"]) / 3600
    loaded = sum(s["gpus"]["p4d"] * s["forecast"]["load_window_s"]
                 for s in plan["slots"]) / 3600
    assert plan["groups"]["p4d"]["billed_gpu_hours"] == pytest.approx(billed, abs=1e-3)
    assert plan["forecast"]["billed_over_loaded"] == pytest.approx(billed / loaded, abs=1e-3)
    assert "cost_usd" not in plan["forecast"]                     # nothing local bills
