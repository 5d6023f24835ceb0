"""A sweep step's slots open one request latency / c apart, not all at once (workloads/stagger.py,
issue 27): the steady state AIConfigurator's agg TPOT describes, checked against AIPerf 0.13.0's
own ramp and parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads import stagger
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.step_exec import StepContext, step_grace
from workloads.step_exec import step_ramp as _step_ramp
from workloads.steps import Step

PRED = {"database": {"aiconfigurator": "0.12.0", "backend": "vllm",
                     "systems": ["a100_sxm_40gb"], "backend_versions": {"a100_sxm_40gb": "0.14.0"}},
        "steps": {"concurrency_sweep/c16": {"request_latency_ms": 1184.42, "itl_ms": 8.59},
                  "prefix_cache/share050": {"request_latency_ms": 748.6, "itl_ms": 10.4}}}


def _step(step_id: str, concurrency: int) -> Step:
    workload, name = step_id.split("/")[:2]
    return Step(id=step_id, workload=workload, name=name, repeat=1, concurrency=concurrency,
                seed=1, rows=lambda: [], duration_s=12.0)


def _ctx(tmp_path: Path, predictions: dict | None) -> StepContext:
    return StepContext(run_dir=tmp_path, target=None, executor=None,  # type: ignore[arg-type]
                       tokenizer="t", error_rate_threshold=0.01, request_timeout_s=600.0,
                       expected_itl_ms=25.0, expected_itl_source="cost.assumedItlMs",
                       predictions=predictions)


def _rows(n: int, osl: int) -> list[dict]:
    return [{"input_length": 1024, "output_length": osl, "hash_ids": [i]} for i in range(n)]


def step_ramp(step: Step, rows: list[dict], ctx: StepContext) -> dict | None:
    """As run_step calls it: with the step's grace record."""
    return _step_ramp(step, step_grace(step, rows, ctx), ctx)


def test_a_sweep_step_is_spread_over_its_predicted_request_latency(tmp_path):
    ramp = step_ramp(_step("concurrency_sweep/c16", 16), _rows(4, 128), _ctx(tmp_path, PRED))
    assert ramp == {"concurrency_ramp_s": 1.11, "expected_request_s": 1.184,
                    "slot_spacing_s": 0.074,
                    "source": "predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)"}
    # a repeat stands on its step's prediction
    again = step_ramp(_step("concurrency_sweep/c16/r2", 16), _rows(4, 128), _ctx(tmp_path, PRED))
    assert again == ramp


def test_without_a_prediction_the_ramp_is_sized_as_the_grace_is(tmp_path):
    ramp = step_ramp(_step("concurrency_sweep/c4", 4), _rows(4, 512), _ctx(tmp_path, None))
    assert ramp is not None
    assert ramp["expected_request_s"] == pytest.approx(511 * 0.025)
    assert ramp["concurrency_ramp_s"] == pytest.approx(511 * 0.025 * 3 / 4, abs=1e-3)
    assert ramp["source"] == "cost.assumedItlMs"


def test_one_slot_and_the_other_workloads_start_as_aiperf_does(tmp_path):
    ctx = _ctx(tmp_path, PRED)
    assert step_ramp(_step("concurrency_sweep/c1", 1), _rows(2, 128), ctx) is None
    assert step_ramp(_step("prefix_cache/share050", 16), _rows(2, 64), ctx) is None
    assert stagger.ramp_s(16, 0.0) is None


def _open_times(concurrency: int, ramp: float) -> list[float]:
    """When AIPerf 0.13.0 opens each slot: its session-concurrency ramp, linear in stepped
    mode from 1 (aiperf/timing/phase/runner.py `_create_rampers`, timing/ramping.py)."""
    from aiperf.plugin.enums import RampType
    from aiperf.timing.ramping import LinearStrategy, RamperConfig
    s = LinearStrategy(RamperConfig(ramp_type=RampType.LINEAR, start=1, target=concurrency,
                                    duration_sec=ramp))
    times, value, t = [0.0], 1.0, 0.0
    while (nxt := s.next_step(value, t)) is not None:
        delay, value = nxt
        t += delay
        times.append(t)
    return times


def test_aiperfs_ramp_opens_the_slots_one_request_latency_over_c_apart():
    latency = 1.18442
    times = _open_times(16, stagger.ramp_s(16, latency) or 0.0)
    assert len(times) == 16
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps == pytest.approx([latency / 16] * 15, abs=1e-3)
    # the 16th slot opens one spacing before the first slot's request is expected to end,
    # so the first slot's replacement keeps the spacing
    assert latency - times[-1] == pytest.approx(latency / 16, abs=1e-3)


def test_the_command_line_carries_the_ramp_and_aiperf_plans_it(tmp_path):
    from aiperf.cli_commands.profile import app
    from aiperf.config.flags.resolver import resolve_config
    from aiperf.config.loader import build_benchmark_plan
    f = tmp_path / "d.jsonl"
    f.write_text('{"session_id":"req-000000","input_length":512,"output_length":8,'
                 '"hash_ids":[1]}\n')
    inv = AiperfInvocation(model="m", url="http://127.0.0.1:1", tokenizer="Qwen/Qwen3-30B-A3B",
                           input_file=f, request_count=1, concurrency=16, seed=1,
                           artifact_dir=tmp_path / "out", duration_s=12.0,
                           concurrency_ramp_s=1.11)
    args = profile_args(inv)
    assert args[args.index("--concurrency-ramp-duration") + 1] == "1.11"
    _, bound, _ = app.parse_args(args[1:], exit_on_error=False, print_error=False)
    plan = build_benchmark_plan(resolve_config(bound.kwargs["cli_config"], None))
    (profiling,) = [p for p in plan.configs[0].phases if p.kind == "profiling"]
    assert profiling.concurrency == 16
    assert profiling.concurrency_ramp.duration == pytest.approx(1.11)
    assert str(profiling.concurrency_ramp.strategy).lower().endswith("linear")
    # no ramp: every slot at the step's start, as before
    assert "--concurrency-ramp-duration" not in profile_args(
        AiperfInvocation(**{**inv.__dict__, "concurrency_ramp_s": None}))
