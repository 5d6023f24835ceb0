"""Forecast arithmetic checked by hand against the A100 campaign's stack files."""

from __future__ import annotations

import datetime as dt

import pytest
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import load_stack, parse_config
from stacks.plan.forecast import base_campaign, plan_campaigns, standalone_campaign

# Inputs of the hand computation, asserted first so a changed stack file fails loudly here.
P4D, G6E, M7I = 21.957642, 10.49264, 0.8064          # catalogue $/h
EKS, EFS_200 = 0.10, 200 * 0.30 / 730                  # $/h
NAT = 0.045 + 0.005                                    # NAT gateway + its IPv4 address, $/h
GP3 = 0.08 / 730                                       # gp3 root volume, $ per GiB-hour
# Default workloads at full scale, assumed ITL 25 ms, +10 s AIPerf per step; a sweep step's
# warm-up is two request latencies (stacks/sizing/estimate.py WARMUP_REQUESTS):
SWEEP = 7 * (3 * 512 * 0.025 + 120 + 10)               # 7 x 168.4 = 1178.8 s
MULTI_TURN = 300 + 5 * 256 * 0.025 + 10                # 342 s
SEQ_DIST = 3 * (20 * (64 + 2048) / 2 * 0.025 + 10)     # 3 x 538 = 1614 s
PREFIX = 5 * (10 * 512 * 0.025 + 10)                   # 5 x 138 = 690 s
STEPS = SWEEP + MULTI_TURN + SEQ_DIST + PREFIX         # 3824.8 s
# BF16 Qwen3-30B-A3B: 61.0e9 bytes = 56.81 GiB at 0.5 GiB/s + 240 s engine start.
MODEL_LOAD = 30.5e9 * 2 / 1024**3 / 0.5 + 240          # 353.62 s
# prefixCache restarts the workers before each of its 5 shares (coldRestart every-step, the
# default); on aws every restart deletes the worker pods and loads the model again.
RESTARTS = 5 * MODEL_LOAD                              # 1768.11 s


# schedule assumptions (stacks/plan/schedule.py)
NODE_READY, RELEASE = 600.0, 120.0
P4D_NODE = P4D + 500 * GP3                             # one p4d node and its root volume, $/h
SHARED = 2 * M7I + 400 * GP3 + EKS + EFS_200 + NAT     # the base's fixed lines, $/h
VARIANT = 900 + STEPS                                  # setup 0.25 h (incl. the load) + steps


@pytest.fixture(scope="module")
def a100():
    base = load_stack("base-a100")
    variants = [load_stack("agg-a100"), load_stack("disagg-a100")]
    assert base.cost.setup_hours == 1.0
    assert [g.count for g in base.cluster.node_groups] == [2, 1, 2]  # p4d, g6e, m7i.4xlarge
    for v in variants:
        assert v.cost.setup_hours == 0.25 and v.workloads == type(v.workloads)()
    return base, variants


def test_base_campaign_by_hand(a100):
    base, variants = a100
    c = base_campaign(base, variants, on=dt.date(2026, 7, 1))
    for s in c.slots:
        assert s.load_window_s == pytest.approx(3824.8)
        assert (s.load_kind, s.load_s) == ("first", pytest.approx(353.62, abs=0.01))
        assert s.startup_s == pytest.approx(900 - 353.62, abs=0.01)
        # no cold restart: the deployment starts cold and every step has fresh hash ids; the
        # 5 prefix-cache restarts the policy names are kept as skipped
        assert s.skipped_restarts == 5
        assert s.wall_s == pytest.approx(VARIANT) and s.loaded_gpus == 16
        assert s.kept_from is None and s.prompt_epoch == 0
    agg, disagg = c.slots
    # the base starts with its GPU groups at zero; the p4d nodes are asked for when it is
    # ready and are Ready 10 min later; the variants share the p4d group, one after the other
    assert agg.start_s == 3600 + NODE_READY and disagg.start_s == pytest.approx(agg.end_s)
    end = 3600 + NODE_READY + 2 * VARIANT                        # 13,291.2 s
    assert c.wall_s == pytest.approx(end)
    p4d = c.schedule.groups["p4d"].intervals
    assert p4d == [[(3600, pytest.approx(end + RELEASE))]] * 2
    assert c.schedule.groups["g6e"].intervals == [[]]          # nobody uses it: never billed
    assert [(e.t_s, e.group, e.nodes) for e in c.schedule.events] == [
        (3600, "p4d", 2), (pytest.approx(end), "p4d", 0)]
    billed_node_s = 2 * (end + RELEASE - 3600)                 # node-seconds
    assert c.billed_gpu_hours == pytest.approx(8 * billed_node_s / 3600)   # 45.20
    assert c.loaded_gpu_hours == pytest.approx(2 * 16 * STEPS / 3600)      # 34.00
    assert c.billed_over_loaded == pytest.approx(8 * billed_node_s / (2 * 16 * STEPS), abs=1e-9)
    assert round(c.billed_over_loaded, 5) == 1.32943
    # every dollar: each variant its 2 p4d nodes for its turn, the base's fixed lines for the
    # whole campaign, and the nodes' lead and release as idle
    assert c.per_node["p4d"] == pytest.approx(P4D_NODE)
    assert c.shared.total == pytest.approx(SHARED)
    assert c.attributed_usd(agg) == pytest.approx(2 * P4D_NODE * VARIANT / 3600)
    assert c.idle_node_s("p4d") == pytest.approx(2 * (NODE_READY + RELEASE))
    assert c.cost_usd == pytest.approx(SHARED * end / 3600 + 2 * P4D_NODE * (
        2 * VARIANT + NODE_READY + RELEASE) / 3600) == pytest.approx(131.527, abs=1e-3)


def test_identical_workers_are_kept_and_only_the_frontend_is_replaced(a100):
    base, _ = a100
    agg, kv = load_stack("agg-a100"), load_stack("agg-a100-kv")
    c = base_campaign(base, [kv, load_stack("disagg-a100"), agg])
    names = [s.name for s in c.slots]
    # agg-a100-kv (named first) and agg-a100 share workers: they run back to back
    assert names == ["agg-a100-kv", "agg-a100", "disagg-a100"]
    first, kept = c.slots[0], c.slots[1]
    assert (first.hands_over_to, kept.kept_from) == ("agg-a100", "agg-a100-kv")
    assert (kept.load_kind, kept.load_s) == ("kept", 0.0)
    # the start-up assumption is not lowered for a frontend swap; a new prompt epoch
    assert kept.startup_s == first.startup_s and kept.prompt_epoch == 1
    assert kept.graph == first.graph == "agg-a100-kv"
    assert kept.start_s == pytest.approx(first.end_s)
    assert c.slots[2].load_kind == "first" and c.slots[2].prompt_epoch == 0


def test_variants_on_disjoint_groups_run_side_by_side_and_idle_groups_scale_down(a100):
    base, _ = a100
    names = ["agg-a100", "disagg-l40s-decode", "agg-l40s-fp8"]
    c = base_campaign(base, [load_stack(n) for n in names])
    s = {x.name: x for x in c.slots}
    # p4d-only and g6e-only start together; the variant on both groups waits for both
    assert s["agg-a100"].start_s == s["agg-l40s-fp8"].start_s == 3600 + NODE_READY
    assert s["disagg-l40s-decode"].start_s == pytest.approx(
        max(s["agg-a100"].end_s, s["agg-l40s-fp8"].end_s))
    assert s["disagg-l40s-decode"].nodes == {"p4d": 1, "g6e": 1}
    g6e = [(e.t_s, e.nodes) for e in c.schedule.events if e.group == "g6e"]
    p4d = [(e.t_s, e.nodes) for e in c.schedule.events if e.group == "p4d"]
    # the g6e runs the FP8 variant, then goes while the p4d finishes agg-a100 only if the gap
    # is longer than asking it back costs; here they end within a second of each other
    gap = s["disagg-l40s-decode"].start_s - s["agg-l40s-fp8"].end_s
    assert gap < NODE_READY + RELEASE and g6e == [(3600, 1), (pytest.approx(c.wall_s), 0)]
    # p4d: 2 nodes for agg-a100, 1 for the decode-on-L40S variant, none after
    assert p4d == [(3600, 2), (pytest.approx(s["disagg-l40s-decode"].start_s), 1),
                   (pytest.approx(c.wall_s), 0)]


def test_standalone_by_hand():
    s = load_stack("agg-a100-standalone")
    c = standalone_campaign(s)
    # setup 1 h (incl. the first model load) + steps + 5 restarts, one model load each
    wall_h = (3600 + STEPS + RESTARTS) / 3600            # 2.553585 h
    assert c.wall_s / 3600 == pytest.approx(wall_h)
    assert c.runs[0].startup_s == pytest.approx(3600 - MODEL_LOAD)
    assert c.cost_usd == pytest.approx(
        (2 * P4D + 2 * M7I + EKS + EFS_200 + NAT + 1400 * GP3) * wall_h)  # $117.24
    assert c.billed_gpu_hours == pytest.approx(16 * wall_h)          # 40.86
    assert c.loaded_gpu_hours == pytest.approx(16 * STEPS / 3600)    # 17.00
    assert c.billed_over_loaded == pytest.approx(wall_h / (STEPS / 3600))  # 1.99


def _variant(name: str, **cost) -> dict:
    return {"target": "aws", "cluster": {"attachTo": "base-a100"},
            "serving": {"workers": [{"role": "worker", "replicas": 1, "tensorParallelSize": 4,
                                     "nodeGroup": "p4d"}]},
            "workloads": {"multiTurn": {"enabled": False}, "sequenceDistributions":
                          {"enabled": False}, "prefixCache": {"enabled": False},
                          "concurrencySweep": {"concurrencies": [8], "durationS": 100}},
            "cost": {"setupHours": 0.25, **cost}}


def test_variant_extra_group_bills_during_its_turn_and_a_half_node_is_attributed(a100):
    base, _ = a100
    raw = _variant("extra")
    raw["cluster"]["nodeGroups"] = [{"name": "g6e-extra", "instanceType": "g6e.12xlarge",
                                     "count": 1}]
    v = parse_config("extra", raw)
    c = base_campaign(base, [v], on=dt.date(2026, 7, 1))
    (slot,) = c.slots
    step = 3 * 512 * 0.025 + 100 + 10                    # 148.4 s
    assert slot.steps_s == {"concurrency_sweep/c8": pytest.approx(step)}
    extra = G6E + 200 * GP3                              # the node and its 200 GiB root volume
    assert c.extras["extra"].total == pytest.approx(extra)
    # one TP4 worker fills half a p4d node: the whole node is its, the other p4d never comes up
    assert slot.nodes == {"p4d": 1} and slot.gpus == {"p4d": 4}
    assert c.attributed_usd(slot) == pytest.approx((P4D_NODE + extra) * slot.wall_s / 3600)
    assert c.billed_gpu_hours == pytest.approx(
        8 * (slot.wall_s + NODE_READY + RELEASE) / 3600 + 4 * slot.wall_s / 3600)
    assert c.loaded_gpu_hours == pytest.approx(4 * step / 3600)


def test_setup_shorter_than_model_load_is_flagged(a100):
    base, _ = a100
    v = parse_config("short", _variant("short", setupHours=0.05))  # 180 s < 353.6 s
    (slot,) = base_campaign(base, [v]).slots
    assert slot.startup_s == 0 and slot.load_s == pytest.approx(MODEL_LOAD)
    assert "cost.setupHours" in slot.warning and "raise it" in slot.warning


def test_a_repeat_load_of_the_same_configuration_is_shown_apart(a100):
    base, _ = a100
    # the same workers, not kept: another variant runs in between on the same group
    one = parse_config("one", _variant("one"))
    other = parse_config("other", {**_variant("other"), "serving": {"workers": [
        {"role": "worker", "replicas": 1, "tensorParallelSize": 2, "nodeGroup": "p4d"}]}})
    again = parse_config("again", {**_variant("again"), "workloads": {
        "multiTurn": {"enabled": False}, "sequenceDistributions": {"enabled": False},
        "prefixCache": {"enabled": False}, "concurrencySweep": {"concurrencies": [16]}}})
    c = base_campaign(base, [one, other, again], same=lambda a, b: False)
    kinds = {s.name: (s.load_kind, s.load_s) for s in c.slots}
    # the repeat reads the checkpoint again and its compile/autotune caches: an assumption
    read = 30.5e9 * 2 / 1024**3 / 0.5
    assert kinds == {"one": ("first", pytest.approx(MODEL_LOAD)),
                     "other": ("first", pytest.approx(MODEL_LOAD)),
                     "again": ("repeat", pytest.approx(read + 90))}
    # the start-up assumption stays whole
    assert [s.startup_s for s in c.slots] == [pytest.approx(900 - MODEL_LOAD)] * 3


def test_grouping_lone_base_brings_its_variants_and_standalones_stay_apart(a100):
    base, variants = a100
    standalone = load_stack("agg-a100-standalone")
    known = [*variants, standalone]
    got = plan_campaigns([base, standalone], {}, known)
    assert [(c.name, c.kind) for c in got] == [("base-a100", "base"),
                                              ("agg-a100-standalone", "standalone")]
    assert [s.name for s in got[0].slots] == ["agg-a100", "disagg-a100"]
    assert [r.stack for r in got[1].runs] == ["agg-a100-standalone"]
    got = plan_campaigns([variants[1]], {"base-a100": base}, known)
    assert [s.name for s in got[0].slots] == ["disagg-a100"]
    with pytest.raises(ValueError, match="attached to base-a100"):
        standalone_campaign(variants[0])


def test_plan_cli_prints_the_campaign_ratio_and_every_dollar():
    # EKS 1.35 in standard support that day: the $0.10/h control plane
    res = CliRunner().invoke(app, ["plan", "agg-a100", "disagg-a100", "--as-of", "2026-07-01",
                                   "--no-predict",    # every step at cost.assumedItlMs
                                   "--no-resolution"])   # no simulation (test_plan_resolution)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "campaign base-a100: wall 3.79 h, $131.53 billed" in out
    assert "GPU-hours billed 45.20 / under load 34.00 = 1.33x" in out
    assert "cold restarts: none of the 5 coldRestart names" in out
    assert "every dollar: $115.56 attributed to variants + $7.16 shared" in out
    assert "+ $8.80 idle GPU nodes = $131.53" in out
    bad = CliRunner().invoke(app, ["plan", "no-such-stack"])
    assert bad.exit_code == 2 and "no stack file" in bad.output
