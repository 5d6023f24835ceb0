"""The AIPerf command line of a step, checked by AIPerf 0.13.0's own parser and planner."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.aiperf_args import AiperfInvocation, profile_args


def _inv(tmp_path: Path, **kw) -> AiperfInvocation:
    f = tmp_path / "d.jsonl"
    f.write_text('{"session_id":"req-000000","input_length":512,"output_length":8,'
                 '"hash_ids":[1]}\n')
    base = dict(model="Qwen/Qwen3-30B-A3B", url="http://127.0.0.1:20001",
                tokenizer="Qwen/Qwen3-30B-A3B", input_file=f, request_count=1, concurrency=4,
                seed=11, artifact_dir=tmp_path / "out",
                server_metrics=("http://127.0.0.1:20001/metrics",
                                "http://127.0.0.1:20002/metrics"))
    return AiperfInvocation(**{**base, **kw})


def _parse(args: list[str]):
    """What `aiperf profile ARGS` would run with, without running it."""
    from aiperf.cli_commands.profile import app
    from aiperf.config.flags.resolver import resolve_config
    from aiperf.config.loader import build_benchmark_plan

    _, bound, _ = app.parse_args(args[1:], exit_on_error=False, print_error=False)
    cli = bound.kwargs["cli_config"]
    build_benchmark_plan(resolve_config(cli, None))  # raises on an invalid combination
    return cli


def _flag(args: list[str], name: str) -> list[str]:
    i = args.index(name)
    out = []
    for a in args[i + 1:]:
        if a.startswith("--"):
            break
        out.append(a)
    return out


def test_duration_step_args_are_accepted_by_aiperf(tmp_path):
    args = profile_args(_inv(tmp_path, duration_s=120, request_count=7424))
    cli = _parse(args)
    assert args[0] == "profile"
    assert cli.request_count == 7424 and cli.benchmark_duration == 120
    assert cli.concurrency == 4 and cli.random_seed == 11
    assert str(cli.custom_dataset_type).replace("-", "_").endswith("mooncake_trace")
    assert cli.use_server_token_count and cli.streaming
    assert _flag(args, "--extra-inputs") == ["ignore_eos:true"]
    assert _flag(args, "--server-metrics") == ["http://127.0.0.1:20001/metrics",
                                               "http://127.0.0.1:20002/metrics"]
    assert _flag(args, "--ui") == ["none"] and "--no-gpu-telemetry" in args
    assert _flag(args, "--artifact-dir") == [str(tmp_path / "out")]


def test_count_step_has_no_duration_and_is_accepted(tmp_path):
    args = profile_args(_inv(tmp_path, duration_s=None, request_count=32, block_size=64))
    cli = _parse(args)
    assert "--benchmark-duration" not in args and "--benchmark-grace-period" not in args
    assert cli.request_count == 32
    assert _flag(args, "--isl-block-size") == ["64"]


def test_aiperf_parser_rejects_an_unknown_flag(tmp_path):
    """The check above can fail: a misspelt flag does not parse."""
    args = profile_args(_inv(tmp_path)) + ["--server-metric", "x"]
    with pytest.raises(Exception) as err:  # noqa: B017 - cyclopts raises its own error types
        _parse(args)
    assert "server-metric" in str(err.value)


def test_replay_step_runs_on_aiperfs_fixed_schedule_with_the_cap_on_in_flight(tmp_path):
    """A replayed trace: AIPerf's own plan is a fixed-schedule phase (rows sent at their
    timestamps, the first at 0) of exactly the file's rows, capped at the step's concurrency."""
    from aiperf.cli_commands.profile import app
    from aiperf.config.flags.resolver import resolve_config
    from aiperf.config.loader import build_benchmark_plan

    f = tmp_path / "d.jsonl"
    f.write_text('{"hash_ids":[1],"input_length":100,"output_length":8,"session_id":"req-0",'
                 '"timestamp":0}\n{"hash_ids":[1,2],"input_length":200,"output_length":8,'
                 '"session_id":"req-1","timestamp":250}\n')
    args = profile_args(_inv(tmp_path, input_file=f, request_count=2, concurrency=6,
                             block_size=128, fixed_schedule=True))
    assert "--fixed-schedule" in args and "--fixed-schedule-auto-offset" in args
    _, bound, _ = app.parse_args(args[1:], exit_on_error=False, print_error=False)
    plan = build_benchmark_plan(resolve_config(bound.kwargs["cli_config"], None))
    (profiling,) = [p for p in plan.configs[0].phases if p.kind == "profiling"]
    assert str(profiling.type).endswith("fixed_schedule")
    assert (profiling.requests, profiling.concurrency, profiling.auto_offset) == (2, 6, True)
    assert plan.configs[0].get_default_dataset().block_size == 128
    # the generated workloads (no timestamps) keep their concurrency-driven phase
    assert "--fixed-schedule" not in profile_args(_inv(tmp_path))


def test_a_warmed_step_runs_one_warmup_request_per_slot_before_its_profiled_rows(tmp_path):
    """AIPerf's own plan of a sweep step with its connection warm-up (workloads/step_warmup.py):
    a warm-up phase of `warmup_requests` at the step's concurrency, then the profiling phase of
    the rows after them; a step without one has no warm-up phase."""
    from aiperf.cli_commands.profile import app
    from aiperf.config.flags.resolver import resolve_config
    from aiperf.config.loader import build_benchmark_plan

    args = profile_args(_inv(tmp_path, duration_s=15, request_count=60, warmup_requests=4,
                             concurrency_ramp_s=1.5))
    _, bound, _ = app.parse_args(args[1:], exit_on_error=False, print_error=False)
    plan = build_benchmark_plan(resolve_config(bound.kwargs["cli_config"], None))
    phases = plan.configs[0].phases
    kinds = {str(p.kind): p for p in phases}
    assert list(kinds) == ["warmup", "profiling"]
    assert (kinds["warmup"].requests, kinds["warmup"].concurrency) == (4, 4)
    assert kinds["profiling"].requests == 60
    cold = build_benchmark_plan(resolve_config(_parse(profile_args(_inv(tmp_path))), None))
    assert [str(p.kind) for p in cold.configs[0].phases] == ["profiling"]


def test_only_the_sweep_warms_up_and_never_past_half_its_rows():
    from workloads.step_warmup import warmup_requests

    assert warmup_requests("concurrency_sweep", 16, 480) == 16
    assert warmup_requests("concurrency_sweep", 16, 31) == 0   # too few rows to spare
    for workload in ("prefix_cache", "multi_turn", "trace_replay", "sequence_distributions"):
        assert warmup_requests(workload, 4, 400) == 0
