"""The offline harness is stable: 20 fresh runs in a row (rotating over the AWS stacks) record
exactly what the first run recorded. A run that is flaky
(pulumi#6561 "attached to a different loop", a leaked root stack, leftover config) either
raises or records something else, and fails here."""

from __future__ import annotations

import json

import pytest
from pulumi_harness import ProgramRun, aws_stacks, fresh_run, run

RUNS = 20


def fingerprint(result: ProgramRun) -> list[str]:
    # Sorted: registration order follows asyncio scheduling and is not part of the contract.
    return sorted(json.dumps([r.type, r.name, r.inputs, sorted(r.secret_inputs),
                              sorted(r.depends_on)], sort_keys=True) for r in result.resources)


@pytest.mark.parametrize("i", range(RUNS))
def test_fresh_runs_record_the_same_resources(i: int) -> None:
    stacks = aws_stacks()
    name = stacks[i % len(stacks)]
    again = fresh_run(name)
    assert again.error is None, again.error
    assert fingerprint(again) == fingerprint(run(name))
    assert again.outputs == run(name).outputs
