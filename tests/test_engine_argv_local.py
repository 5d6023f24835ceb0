"""The local engine's command lines (stacks/engine_argv/local.py): the runner starts what
pre-flight parses, a worker group's extraArgs reach its mockers and the frontend's the frontend,
each token with its stack field."""

from __future__ import annotations

from pathlib import Path

from stacks.config.loader import load_stack
from stacks.engine_argv.argv import tokens
from stacks.engine_argv.local import (
    STAND_IN_MODEL_PATH,
    local_frontend_argv,
    local_mocker_argvs,
)
from workloads.targets.local import frontend_argv, mocker_argv, worker_specs

PY = Path("/engine/bin/python")


def _with_extra_args(name: str):
    stack = load_stack(name)
    s = stack.serving
    assert s is not None
    workers = [w.model_copy(update={"extra_args": [f"--stagger-delay={i}"]})
               for i, w in enumerate(s.workers)]
    frontend = s.frontend.model_copy(update={"extra_args": ["--kv-cache-block-size", "64"]})
    return stack.model_copy(update={"serving": s.model_copy(
        update={"workers": workers, "frontend": frontend})})


def test_the_runner_starts_the_argv_preflight_parses_extra_args_last():
    stack = _with_extra_args("local-disagg")
    specs = worker_specs(stack, [100, 100])
    parsed = local_mocker_argvs(stack)
    for spec in specs:
        run = mocker_argv(PY, stack, spec, Path(STAND_IN_MODEL_PATH))
        assert run[:3] == [str(PY), "-m", "dynamo.mocker"]
        assert run[-1] == f"--stagger-delay={spec.group}"
        # the same builder: only the KV blocks (pre-flight's memory fit) are a stand-in
        want = tokens(parsed[spec.group])
        at = want.index("--num-gpu-blocks-override") + 1
        assert run[3:] == [*want[:at], "100", *want[at + 1:]]
    fe = frontend_argv(PY, stack, 8000)
    assert fe[3:] == tokens(local_frontend_argv(stack))
    assert fe[-2:] == ["--kv-cache-block-size", "64"]


def test_every_token_names_its_field():
    stack = _with_extra_args("local-disagg")
    fields = {a.token: a.field for a in local_mocker_argvs(stack)[1]}
    assert fields["--stagger-delay=1"] == "serving.workers[1].extraArgs[0]"
    assert fields["--speedup-ratio"] == "serving.mocker.speedupRatio"
    assert fields["--disaggregation-mode"] == "serving.workers[1].role"
    fe = {a.token: a.field for a in local_frontend_argv(stack)}
    assert fe["--enforce-disagg"] == "serving.topology"
    assert fe["--kv-cache-block-size"] == "serving.frontend.extraArgs[0]"
