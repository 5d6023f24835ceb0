"""The trace workload's long tail, the context-limit fit and the warm replay (pure parts).

- rows beyond the smallest worker maxModelLen are dropped (prompt too long) or clipped (output
  too long), counted, and the count lands in the step's dataset record;
- the trace's lognormal input lengths keep block ids consistent with the lengths, and sigma 0
  gives the same bytes as the fixed-length trace always did;
- a warm step replays its cold step's rows with the cold step's AIPerf seed (same prompts) and
  does not restart the workers.
"""

from __future__ import annotations

import hashlib
import math
import statistics

import pytest

from stacks.config.loader import load_stack, parse_config, read_stack_file, stack_file
from workloads import datasets as ds
from workloads.step_exec import step_dataset
from workloads.steps import plan


def row(isl: int, osl: int, i: int = 0) -> dict:
    return {"session_id": f"req-{i:06d}", "input_length": isl, "output_length": osl,
            "hash_ids": list(range(ds.blocks_for(isl, 512)))}


def test_fit_drops_prompts_over_the_limit_and_clips_outputs_by_hand() -> None:
    # limit 1000, margin 32 -> budget 968 tokens for prompt + output
    rows = [row(100, 50, 0), row(968, 10, 1), row(967, 10, 2), row(900, 68, 3),
            row(900, 69, 4), row(5000, 10, 5)]
    kept, fit = ds.fit_context(rows, 1000, margin=32)
    assert [r["session_id"] for r in kept] == ["req-000000", "req-000002", "req-000003",
                                               "req-000004"]
    # 967 + 10 > 968: 1 token of output left; 900 + 68 = 968 fits; 900 + 69 clipped to 68
    assert [r["output_length"] for r in kept] == [50, 1, 68, 68]
    assert (fit.requested_rows, fit.dropped, fit.clipped) == (6, 2, 2)
    assert fit.as_dict() == {"max_model_len": 1000, "margin": 32, "requested_rows": 6,
                             "dropped": 2, "clipped": 2}
    assert rows[4]["output_length"] == 69  # the input rows are not modified


def test_sigma_zero_trace_is_byte_identical_to_the_fixed_length_trace() -> None:
    rows = ds.trace_rows(200, 8192, 1024, 0.7, 512, seed=20261130, id_base=7)
    # sha256 of the same call before input lengths could vary (commit d11355e)
    assert hashlib.sha256(ds.jsonl_bytes(rows)).hexdigest() == \
        "7eed7ed53c4d0ca12f0808352e307ed116f00c64923ebc0325fbea8c9f5cd8b7"
    assert {r["input_length"] for r in rows} == {8192}


def test_lognormal_trace_lengths_tail_and_consistent_block_ids() -> None:
    rows = ds.trace_rows(400, 2048, 64, 0.7, 512, seed=5, id_base=0, isl_sigma=0.8)
    lengths = [r["input_length"] for r in rows]
    assert statistics.median(lengths) == pytest.approx(2048, rel=0.15)
    assert max(lengths) > 3 * 2048 and min(lengths) < 2048 / 3
    for r in rows:
        assert len(r["hash_ids"]) == math.ceil(r["input_length"] / 512)
    # re-use still comes from shared context prefixes: earlier ids, never a later row's
    assert 0.4 < ds.block_reuse(rows) < 0.8
    again = ds.trace_rows(400, 2048, 64, 0.7, 512, seed=5, id_base=0, isl_sigma=0.8)
    assert ds.jsonl_bytes(again) == ds.jsonl_bytes(rows)


def trace_stack(**trace: object):
    raw = read_stack_file(stack_file("local-agg"))
    raw["workloads"] = {"concurrencySweep": {"enabled": False},
                        "multiTurn": {"enabled": False},
                        "sequenceDistributions": {"enabled": False},
                        "prefixCache": {"enabled": False},
                        "traceReplay": {"enabled": True, "concurrencies": [4, 8], **trace}}
    return parse_config("local-agg-trace", raw)


def test_warm_pass_replays_the_cold_rows_with_the_cold_seed_and_no_restart() -> None:
    steps = plan(trace_stack(warmPass=True, islSigma=0.5), "quick")
    assert [s.id for s in steps] == ["trace_replay/c4", "trace_replay/c4-warm",
                                     "trace_replay/c8", "trace_replay/c8-warm"]
    cold, warm = steps[0], steps[1]
    assert (cold.cold, warm.cold) == (True, False)
    assert (cold.params["cache"], warm.params["cache"]) == ("cold", "warm")
    assert warm.params["warm_after"] == "c4"
    assert warm.seed == cold.seed != steps[2].seed
    assert ds.jsonl_bytes(warm.rows()) == ds.jsonl_bytes(cold.rows())
    assert [s.id for s in plan(trace_stack(), "quick")] == ["trace_replay/c4",
                                                            "trace_replay/c8"]


def test_step_dataset_records_what_the_limit_dropped_and_the_rows_reuse() -> None:
    stack = trace_stack(islSigma=1.2, requests=200)
    (step, _) = plan(stack, "full")
    assert step.max_model_len == min(w.max_model_len for w in stack.serving.workers) == 32768
    rows, record = step_dataset(step)
    requested = step.rows()
    over = [r for r in requested if r["input_length"] >= 32768 - ds.TEMPLATE_MARGIN]
    assert over, "sigma 1.2 around 8192 should put some rows over 32768"
    assert record["context_limit"]["dropped"] == len(over)
    assert record["context_limit"]["requested_rows"] == len(requested) == 200
    assert len(rows) == 200 - len(over)
    assert all(r["input_length"] + r["output_length"] <= 32768 - ds.TEMPLATE_MARGIN
               for r in rows)
    assert record["block_reuse"] == pytest.approx(ds.block_reuse(rows), abs=1e-6)


def test_workloads_without_a_reuse_target_record_only_the_limit() -> None:
    (step, *_) = plan(load_stack("local-agg"), "quick", only=["concurrency_sweep"])
    _, record = step_dataset(step)
    assert set(record) == {"context_limit"}
    assert record["context_limit"]["dropped"] == record["context_limit"]["clipped"] == 0


@pytest.mark.parametrize(("isl", "sigma"), [(4096, 0.8), (1000, 0.5), (1000, 0.0)])
def test_every_hash_id_keeps_one_block_size(isl: int, sigma: float) -> None:
    # AIPerf refuses a trace where one id is a full block in one row and partial in another
    rows = ds.trace_rows(300, isl, 64, 0.9, 512, seed=11, id_base=0, isl_sigma=sigma)
    size: dict[int, int] = {}
    for r in rows:
        ids, n = r["hash_ids"], r["input_length"]
        for j, h in enumerate(ids):
            block = 512 if j < len(ids) - 1 else n - 512 * (len(ids) - 1)
            assert size.setdefault(h, block) == block, (h, size[h], block)
    assert ds.block_reuse(rows) > 0.3
