"""A local stack's extraArgs reach its mockers and frontend (stacks/engine_argv/local.py), so they
may not override what a typed field or the runner sets there (stacks/preflight/engine_flags.py
MOCKER_RULES, LOCAL_FRONTEND_RULES); a flag stating exactly the typed value is accepted."""

from __future__ import annotations

import pytest
from stack_variants import check, copy_shipped, variant_config, write_stack

F = "dynamo-bench:"


def _local(tmp_path, name, workers0=(), frontend=()):
    stacks_dir = copy_shipped(tmp_path)
    config = variant_config("local-disagg", lambda c: None)
    config["serving"]["workers"][0]["extraArgs"] = list(workers0)
    config["serving"].setdefault("frontend", {})["extraArgs"] = list(frontend)
    write_stack(stacks_dir, name, config)
    return check(stacks_dir, name)


@pytest.mark.parametrize(("args", "owner"), [
    (["--num-gpu-blocks-override", "99"], "serving.mocker.numGpuBlocks"),
    (["--speedup-ratio=5"], "serving.mocker.speedupRatio"),
    (["--block-size", "32"], "serving.mocker.blockSize"),
    (["--disaggregation-mode", "decode"], "serving.workers[0].role"),
    (["--no-enable-prefix-caching"], "serving.prefixCaching"),
])
def test_a_mocker_flag_that_overrides_a_typed_field_is_refused(tmp_path, args, owner):
    code, out = _local(tmp_path, "lf-mocker", workers0=args)
    flat = " ".join(out.split())
    assert code == 2, out
    assert f"{F}serving.workers[0].extraArgs[0]: " in flat and f"set {owner} instead" in flat


def test_a_mocker_flag_stating_the_typed_value_and_other_flags_pass(tmp_path):
    code, out = _local(tmp_path, "lf-same", workers0=["--speedup-ratio", "1.0",
                                                      "--block-size=64", "--stagger-delay", "0"])
    assert code == 0, out


def test_the_local_frontend_keeps_loopback_and_the_runners_port(tmp_path):
    code, out = _local(tmp_path, "lf-host", frontend=["--http-host", "0.0.0.0"])
    flat = " ".join(out.split())
    assert code == 2 and f"{F}serving.frontend.extraArgs[0]: " in flat, out
    code, out = _local(tmp_path, "lf-port", frontend=["--http-port=8000"])
    assert code == 2 and "the loopback port the runner picks" in " ".join(out.split()), out
