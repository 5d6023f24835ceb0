"""A disaggregated step with zero KV transfers measured aggregated serving (dynamo.md F5): the
frontend "Uses decode-only routing when no prefill service is registered" (Dynamo 1.6 router
docs). The reports flag it and leave it out of best points; NaN (no NIXL metrics) is not
judged."""

from __future__ import annotations

import math

import pandas as pd

from reports.records.flags import decode_only_reason, judge_steps, mark_decode_only


def _step(**kw) -> pd.Series:
    row = {"stack": "d", "attempted": 10, "completed": 10, "failed": 0, "truncated": 0,
           "cancelled": 0, "recorded_status": "complete", "recorded_reasons": None,
           "concurrency": 4, "host_cores": 2, "achieved_concurrency": 4.0,
           "client_cpu_cores_mean": 0.5, "server_kv_transfers": 120.0}
    return pd.Series({**row, **kw})


def test_zero_transfers_is_decode_only_and_any_transfer_or_no_metric_is_not() -> None:
    assert decode_only_reason(_step(server_kv_transfers=0.0)) == (
        "DECODE-ONLY: a disaggregated step with zero NIXL KV transfers (no prefill worker "
        "served it: the router falls back to decode-only routing)")
    assert decode_only_reason(_step(server_kv_transfers=1.0)) == ""
    assert decode_only_reason(_step(server_kv_transfers=math.nan)) == ""
    assert decode_only_reason(_step(server_kv_transfers=None)) == ""
    assert decode_only_reason(pd.Series({"stack": "d"})) == ""


def test_the_flag_joins_an_existing_one_and_makes_the_step_unusable() -> None:
    row = {"usable": True, "step_flag": ""}
    assert mark_decode_only(row, _step()) is row
    out = mark_decode_only(row, _step(server_kv_transfers=0.0))
    assert out["usable"] is False and out["step_flag"].startswith("DECODE-ONLY")
    both = mark_decode_only({"usable": False, "step_flag": "FAILED"},
                            _step(server_kv_transfers=0.0))
    assert both["step_flag"].startswith("FAILED; DECODE-ONLY")


def test_only_disaggregated_stacks_steps_are_judged_for_transfers() -> None:
    steps = pd.DataFrame([_step(stack="d", server_kv_transfers=0.0),
                          _step(stack="d", server_kv_transfers=50.0),
                          _step(stack="a", server_kv_transfers=0.0)], index=[3, 4, 5])
    judged = judge_steps(steps, {}, frozenset({"d"}))
    assert list(judged["usable"]) == [False, True, True]
    assert judged.loc[3, "step_flag"].startswith("DECODE-ONLY")
    assert list(judged["status"]) == ["complete"] * 3      # the run's status is its own
    assert list(judge_steps(steps, {})["usable"]) == [True, True, True]

