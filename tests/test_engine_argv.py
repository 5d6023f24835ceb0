"""The workers' and frontend's command lines (stacks.engine_argv): the graph starts exactly these
tokens, and each token carries the stack field that produced it (pre-flight names it when the
engine's parser refuses the flag)."""

from __future__ import annotations

import re

import pytest
from graph_stacks import components, efa_for, graph_of, main, serving_stack_names

from stacks.config.loader import load_stack
from stacks.engine_argv.argv import FIXED, frontend_argv, tokens, worker_argv
from stacks.engine_argv.kv import uses_rdma

# every field an Arg names is a stack-file path (camelCase, optional [i]) or FIXED
FIELD = re.compile(r"^(model|serving)(\.[a-z][A-Za-z]*(\[\d+\])?)+$")


@pytest.mark.parametrize("name", [n for n in serving_stack_names()
                                  if load_stack(n).target == "aws"])
def test_the_graph_starts_exactly_the_argv_and_every_token_has_a_field(name):
    stack = load_stack(name)
    assert stack.serving is not None
    comps = list(components(graph_of(name)).values())
    assert main(comps[0])["args"] == tokens(frontend_argv(stack))
    rdma = uses_rdma(stack.serving, efa_for(stack))
    for i, comp in enumerate(comps[1:]):
        args = worker_argv(stack, i, rdma=rdma)
        assert main(comp)["args"] == tokens(args)
        assert all(a.field == FIXED or FIELD.match(a.field) for a in args), args


def test_extra_args_are_last_and_named_by_their_index():
    stack = load_stack("disagg-a100")
    assert stack.serving is not None
    w = stack.serving.workers[1]
    stack = stack.model_copy(update={"serving": stack.serving.model_copy(update={
        "workers": [stack.serving.workers[0],
                    w.model_copy(update={"extra_args": ["--max-num-seqs", "8", "--bogus"]})]})})
    args = worker_argv(stack, 1, rdma=False)
    assert [(a.token, a.field) for a in args[-3:]] == [
        ("--max-num-seqs", "serving.workers[1].extraArgs[0]"),
        ("8", "serving.workers[1].extraArgs[1]"),
        ("--bogus", "serving.workers[1].extraArgs[2]")]
    fields = {a.token: a.field for a in args}
    assert fields["--tensor-parallel-size"] == "serving.workers[1].tensorParallelSize"
    assert fields["--kv-transfer-config"] == "serving.transfer"
    assert fields["--model"] == "model.id"
