"""Forecast arithmetic checked by hand against the A100 campaign's stack files."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.forecast import base_campaign, plan_campaigns, standalone_campaign
from stacks.loader import load_stack, parse_config

# Inputs of the hand computation, asserted first so a changed stack file fails loudly here.
P4D, G6E, M7I = 21.957642, 10.49264, 0.8064          # catalogue $/h
EKS, EFS_200 = 0.10, 200 * 0.30 / 730                  # $/h
NAT = 0.045 + 0.005                                    # NAT gateway + its IPv4 address, $/h
GP3 = 0.08 / 730                                       # gp3 root volume, $ per GiB-hour
# Default workloads at full scale, assumed ITL 25 ms, +10 s AIPerf per step:
SWEEP = 7 * (120 + 512 * 0.025 + 10)                   # 7 x 142.8 = 999.6 s
MULTI_TURN = 300 + 5 * 256 * 0.025 + 10                # 342 s
SEQ_DIST = 3 * (20 * (64 + 2048) / 2 * 0.025 + 10)     # 3 x 538 = 1614 s
PREFIX = 5 * (10 * 512 * 0.025 + 10)                   # 5 x 138 = 690 s
STEPS = SWEEP + MULTI_TURN + SEQ_DIST + PREFIX         # 3645.6 s
# BF16 Qwen3-30B-A3B: 61.0e9 bytes = 56.81 GiB at 0.5 GiB/s + 240 s engine start.
MODEL_LOAD = 30.5e9 * 2 / 1024**3 / 0.5 + 240          # 353.62 s
# prefixCache restarts the workers before each of its 5 shares (coldRestart every-step, the
# default); on aws every restart deletes the worker pods and loads the model again.
RESTARTS = 5 * MODEL_LOAD                              # 1768.11 s
VARIANT = 900 + STEPS + RESTARTS                       # setup 0.25 h + steps + restarts: 6313.71 s


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
    c = base_campaign(base, variants)
    for run in c.runs:
        assert run.load_s == pytest.approx(3645.6)
        assert run.model_load_s == pytest.approx(353.62, abs=0.01)
        assert run.startup_s == pytest.approx(900 - 353.62, abs=0.01)
        assert (run.restarts, run.restart_s) == (5, pytest.approx(MODEL_LOAD))
        assert run.wall_s == pytest.approx(VARIANT) == pytest.approx(6313.71, abs=0.01)
        assert run.gpus_loaded == 16  # 4 x TP4 and 2 + 2 x TP4
    wall_h = (3600 + 2 * VARIANT) / 3600               # 4.507615 h
    # the g6e bills too; root volumes: 2 x 500 (p4d) + 500 (g6e) + 2 x 200 (cpu) GiB
    base_per_h = 2 * P4D + G6E + 2 * M7I + EKS + EFS_200 + NAT + 1900 * GP3   # 56.461135 $/h
    assert c.wall_s / 3600 == pytest.approx(wall_h)
    assert c.hourly.total == pytest.approx(56.461135, abs=1e-6)
    assert c.cost_usd == pytest.approx(base_per_h * wall_h) == pytest.approx(254.505, abs=1e-3)
    assert c.billed_gpu_hours == pytest.approx(20 * wall_h) == pytest.approx(90.1523, abs=1e-4)
    assert c.loaded_gpu_hours == pytest.approx(2 * 16 * STEPS / 3600)  # 32.4053
    assert c.billed_over_loaded == pytest.approx(2.78202, abs=1e-5)
    # What one variant is charged for its own turn: the 2 p4d it fills + CPU group + fees.
    agg = c.runs[0]
    assert agg.hourly.total == pytest.approx(2 * P4D + 2 * M7I + EKS + EFS_200 + NAT
                                             + 1400 * GP3)
    assert agg.attributed_usd == pytest.approx(45.913700 * VARIANT / 3600)  # $80.52


def test_standalone_by_hand():
    s = load_stack("agg-a100-standalone")
    c = standalone_campaign(s)
    # setup 1 h (incl. the first model load) + steps + 5 restarts, one model load each
    wall_h = (3600 + STEPS + RESTARTS) / 3600            # 2.503807 h
    assert c.wall_s / 3600 == pytest.approx(wall_h)
    assert c.runs[0].startup_s == pytest.approx(3600 - MODEL_LOAD)
    assert c.cost_usd == pytest.approx(
        (2 * P4D + 2 * M7I + EKS + EFS_200 + NAT + 1400 * GP3) * wall_h)  # $114.96
    assert c.billed_gpu_hours == pytest.approx(16 * wall_h)          # 32.20
    assert c.loaded_gpu_hours == pytest.approx(16 * STEPS / 3600)    # 16.20
    assert c.billed_over_loaded == pytest.approx(wall_h / (STEPS / 3600))  # 1.99


def _variant(name: str, **cost) -> dict:
    return {"target": "aws", "cluster": {"attachTo": "base-a100"},
            "serving": {"workers": [{"role": "worker", "replicas": 1, "tensorParallelSize": 4,
                                     "nodeGroup": "p4d"}]},
            "workloads": {"multiTurn": {"enabled": False}, "sequenceDistributions":
                          {"enabled": False}, "prefixCache": {"enabled": False},
                          "concurrencySweep": {"concurrencies": [8], "durationS": 100}},
            "cost": {"setupHours": 0.25, **cost}}


def test_variant_extra_group_bills_on_top_and_half_node_counts_as_idle(a100):
    base, _ = a100
    raw = _variant("extra")
    raw["cluster"]["nodeGroups"] = [{"name": "g6e-extra", "instanceType": "g6e.12xlarge",
                                     "count": 1}]
    v = parse_config("extra", raw)
    c = base_campaign(base, [v])
    run = c.runs[0]
    step = 100 + 512 * 0.025 + 10                        # 122.8 s
    assert run.load_s == pytest.approx(step)
    extra = G6E + 200 * GP3                              # the node and its 200 GiB root volume
    assert run.extra_gpus == 4 and run.extra_usd_per_hour == pytest.approx(extra)
    wall_h = (3600 + 900 + step) / 3600
    assert c.cost_usd == pytest.approx(c.hourly.total * wall_h + extra * run.wall_s / 3600)
    assert c.billed_gpu_hours == pytest.approx(20 * wall_h + 4 * run.wall_s / 3600)
    # One TP4 worker loads 4 of the 20 + 4 billed GPUs.
    assert c.loaded_gpu_hours == pytest.approx(4 * step / 3600)


def test_setup_shorter_than_model_load_is_flagged(a100):
    base, _ = a100
    v = parse_config("short", _variant("short", setupHours=0.05))  # 180 s < 353.6 s
    run = base_campaign(base, [v]).runs[0]
    assert run.startup_s == 0 and run.model_load_s == pytest.approx(MODEL_LOAD)
    assert "cost.setupHours" in run.warning and "raise it" in run.warning


def test_grouping_lone_base_brings_its_variants_and_standalones_stay_apart(a100):
    base, variants = a100
    standalone = load_stack("agg-a100-standalone")
    known = [*variants, standalone]
    got = plan_campaigns([base, standalone], {}, known)
    assert [(c.name, c.kind, [r.stack for r in c.runs]) for c in got] == [
        ("base-a100", "base", ["agg-a100", "disagg-a100"]),
        ("agg-a100-standalone", "standalone", ["agg-a100-standalone"])]
    got = plan_campaigns([variants[1]], {"base-a100": base}, known)
    assert [r.stack for r in got[0].runs] == ["disagg-a100"]
    with pytest.raises(ValueError, match="attached to base-a100"):
        standalone_campaign(variants[0])


def test_plan_cli_prints_the_campaign_ratio():
    # EKS 1.35 in standard support that day: the $0.10/h control plane
    res = CliRunner().invoke(app, ["plan", "agg-a100", "disagg-a100", "--as-of", "2026-07-01"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "campaign base-a100: wall 4.51 h, $254.51 billed" in out
    assert "GPU-hours billed 90.15 / under load 32.41 = 2.78x" in out
    assert "cold restarts (5 x 5.9 min) │ 29.5 min" in out
    bad = CliRunner().invoke(app, ["plan", "no-such-stack"])
    assert bad.exit_code == 2 and "no stack file" in bad.output
