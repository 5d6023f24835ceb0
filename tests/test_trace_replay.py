"""Replaying a real trace: block mapping, reuse bounds, the schedule and the AIPerf input.

- the mapping of 512-token trace blocks onto the engine's blocks keeps every shared prefix
  shared, token for token, and invents no sharing (checked on both real files), and gives each
  id one size, as AIPerf requires;
- the token reuse bound, by hand;
- a step's rows: the window on the trace's clock / speed-up, the context fit counted, bounds of
  what is sent, fresh ids per step, the warm replay identical;
- the AIPerf input built from a window is byte-stable (pinned sha256) and AIPerf 0.13.0's own
  loader turns it into prompts of exactly the asked lengths, on the schedule, with the shared
  prefixes shared in AIPerf's own token sequences.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stacks.catalog.trace_files import load_trace
from stacks.config.loader import STACKS_DIR, load_stack
from stacks.config.workload_config import TraceReplay
from workloads import datasets as ds
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.model_folder import build_model_folder
from workloads.step_exec import step_dataset
from workloads.steps import plan
from workloads.trace_replay import (
    aiperf_block_size,
    block_reuse_bound,
    remap_blocks,
    scheduled_rows,
    token_reuse_bound,
)

REHEARSAL = "local-recipe-motif3"


def trace_rows(name: str) -> list[dict]:
    return list(load_trace(TraceReplay(enabled=True, source=name)).rows)


def trace_sizes(row: dict) -> list[int]:
    return [min(512, row["input_length"] - 512 * i) for i in range(len(row["hash_ids"]))]


def aiperf_sizes(row: dict, g: int) -> list[int]:
    """Tokens per id as AIPerf lays a row out (prompt.py _build_token_sequence): whole blocks,
    the last one partial when the ids overshoot the input."""
    m, isl = len(row["hash_ids"]), row["input_length"]
    return [g] * (m - 1) + [isl - (m - 1) * g if m * g > isl else g]


def shared_tokens(a: list[int], a_sizes: list[int], b: list[int], b_sizes: list[int]) -> int:
    n = 0
    for x, sx, y, sy in zip(a, a_sizes, b, b_sizes, strict=False):
        if x != y or sx != sy:
            break
        n += sx
    return n


@pytest.mark.parametrize(("name", "engine_block"), [("mooncake-conversation", 128),
                                                     ("mooncake-conversation", 64),
                                                     ("mooncake-synthetic", 16)])
def test_mapping_keeps_every_shared_prefix_shared_on_the_real_file(name, engine_block) -> None:
    rows = trace_rows(name)
    g = aiperf_block_size(engine_block)
    mapped = remap_blocks(rows, engine_block, id_base=1000)
    size_of: dict[int, int] = {}
    sub_of: dict[int, tuple] = {}
    owner: dict[int, int] = {}
    for row, out in zip(rows, mapped, strict=True):
        sizes = aiperf_sizes(out, g)
        assert sum(sizes) == row["input_length"] and 0 < sizes[-1] <= g
        for h, s in zip(out["hash_ids"], sizes, strict=True):   # AIPerf: one size per id
            assert size_of.setdefault(h, s) == s
        # each trace block becomes the same run of ids wherever it appears, and no id belongs
        # to two trace blocks: shared trace prefixes are shared engine prefixes, and only they
        pos = 0
        for h, t in zip(row["hash_ids"], trace_sizes(row), strict=True):
            k = -(-t // g)
            run = tuple(out["hash_ids"][pos:pos + k])
            pos += k
            assert sub_of.setdefault(h, run) == run
            for x in run:
                assert owner.setdefault(x, h) == h
        assert pos == len(out["hash_ids"])
    # and, token for token, on pairs: each row against the latest earlier row that starts with
    # the same block (a conversation's previous turn, a shared system prompt), and against a
    # random earlier row
    rng, latest = random.Random(7), {}
    for i, (row, out) in enumerate(zip(rows, mapped, strict=True)):
        others = [latest.get(row["hash_ids"][0]), rng.randrange(i) if i else None]
        for j in filter(lambda j: j is not None, others):
            assert shared_tokens(row["hash_ids"], trace_sizes(row), rows[j]["hash_ids"],
                                 trace_sizes(rows[j])) == \
                shared_tokens(out["hash_ids"], aiperf_sizes(out, g), mapped[j]["hash_ids"],
                              aiperf_sizes(mapped[j], g))
        latest[row["hash_ids"][0]] = i


def test_mapping_and_token_bound_by_hand() -> None:
    # engine blocks of 128: A = blocks 1 (512) + 2 (488 = 3 x 128 + 104); B repeats block 1 and
    # a 300-token block 3 (2 x 128 + 44); C repeats A exactly
    a = {"input_length": 1000, "hash_ids": [1, 2]}
    b = {"input_length": 812, "hash_ids": [1, 3]}
    rows = remap_blocks([a, b, dict(a)], 128, id_base=0)
    assert rows[0]["hash_ids"] == [0, 1, 2, 3, 4, 5, 6, 7]          # 4 + 3 whole + 1 partial
    assert rows[1]["hash_ids"] == [0, 1, 2, 3, 8, 9, 10]
    assert rows[2]["hash_ids"] == rows[0]["hash_ids"]
    # hits: A 0; B its first 512; C its 7 whole blocks (896), never the partial one
    assert token_reuse_bound(rows, 128) == pytest.approx((512 + 896) / (1000 + 812 + 1000))
    # warm: everything whole was cached by the pass before
    assert token_reuse_bound(rows, 128, warm=True) == pytest.approx(
        (896 + 768 + 896) / (1000 + 812 + 1000))
    # the trace's own (block) bound: B re-uses 1 of 2 blocks, C 2 of 2
    assert block_reuse_bound([a, b, a]) == pytest.approx(3 / 6)
    assert block_reuse_bound([a, b, a], warm=True) == 1.0
    # an engine block that does not divide 512: gcd blocks keep trace blocks whole
    assert aiperf_block_size(48) == 16 and aiperf_block_size(128) == 128


def test_schedule_is_the_trace_clock_from_the_window_start_over_the_speed_up() -> None:
    rows = [{"timestamp": t, "input_length": 10, "output_length": 2, "hash_ids": [t]}
            for t in (60_000, 60_250, 61_001)]
    out = scheduled_rows(rows, 60.0, 4.0)
    assert [r["timestamp"] for r in out] == [0, 62, 250]
    assert [r["session_id"] for r in out] == ["req-000000", "req-000001", "req-000002"]
    assert rows[0]["timestamp"] == 60_000   # the shared trace rows are not modified


def rehearsal_stack(tmp_path: Path, **trace) -> object:
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{REHEARSAL}.yaml").read_text())
    doc["config"]["dynamo-bench:workloads"]["traceReplay"].update(trace)
    (tmp_path / f"Pulumi.{REHEARSAL}.yaml").write_text(yaml.safe_dump(doc))
    return load_stack(REHEARSAL, tmp_path)


def test_replay_steps_fit_map_and_record_what_is_sent(tmp_path) -> None:
    stack = rehearsal_stack(tmp_path, quick={"maxRequests": 24, "concurrencies": [6, 11]})
    steps = plan(stack, "quick")
    assert [s.id for s in steps] == ["trace_replay/c6", "trace_replay/c6-warm",
                                     "trace_replay/c11", "trace_replay/c11-warm"]
    first = {s.id: step_dataset(s) for s in steps}
    c6, c6_record = first["trace_replay/c6"]
    window = load_trace(stack.workloads.trace_replay).rows[:24]
    fitted, fit = ds.fit_context(scheduled_rows(list(window), 0.0, 1.0), 16384)
    # the runner's context fit, counted: rows over maxModelLen 16384 never sent
    assert c6_record["context_limit"] == fit.as_dict() and fit.dropped == 7
    assert [r["session_id"] for r in c6] == [r["session_id"] for r in fitted]
    assert [r["input_length"] for r in c6] == [r["input_length"] for r in fitted]
    trace = c6_record["trace"]
    assert trace["sha256"] == stack_sha(stack) and trace["sent"] == 17
    assert trace["requests_in_window"] == 24
    assert trace["block_mapping"] == {"trace_block": 512, "engine_block": 128,
                                      "aiperf_block": 128, "ids": trace["block_mapping"]["ids"]}
    # bounds of the rows really sent (after the fit), not of the window
    assert trace["reuse_upper_bound_blocks"] == pytest.approx(block_reuse_bound(fitted),
                                                              abs=1e-6)
    assert c6_record["block_reuse"] == trace["reuse_upper_bound_blocks"]
    assert trace["reuse_upper_bound_tokens"] == pytest.approx(
        token_reuse_bound(remap_blocks(fitted, 128, 0), 128), abs=1e-6)
    # the warm replay sends the same bytes with the same AIPerf seed; the next cap's step
    # starts from fresh ids (nothing the earlier steps cached)
    warm, warm_record = first["trace_replay/c6-warm"]
    assert ds.jsonl_bytes(warm) == ds.jsonl_bytes(c6)
    assert steps[0].seed == steps[1].seed and steps[0].seed != steps[2].seed
    assert warm_record["trace"]["reuse_upper_bound_blocks"] == 1.0
    c11, _ = first["trace_replay/c11"]
    assert not {h for r in c11 for h in r["hash_ids"]} & {h for r in c6 for h in r["hash_ids"]}
    # the plan knows the schedule: rows, mean output, replay length, fixed schedule
    assert steps[0].params["schedule"] == "fixed" and steps[0].params["in_flight_cap"] == 6
    assert steps[0].params["block_size"] == 128 and steps[0].params["rows"] == 24
    assert steps[0].eta_s >= 10 + steps[0].params["replay_s"]


def stack_sha(stack) -> str:
    return load_trace(stack.workloads.trace_replay).sha256


# sha256 of the first step's AIPerf input of the rehearsal at quick scale (the trace's first 24
# requests, fitted to 16,384 tokens, mapped onto 128-token blocks). A change here changes what
# every rehearsal sends: it must be deliberate.
WINDOW_SHA256 = "cccbbf516827b4fc07df8b5e2032b2b168e63c0a70a70afda970a0bd00bdf416"


def test_the_aiperf_input_of_a_window_is_byte_stable() -> None:
    (step, *_), (again, *_) = plan(load_stack(REHEARSAL), "quick"), plan(load_stack(REHEARSAL),
                                                                         "quick")
    data = ds.jsonl_bytes(step_dataset(step)[0])
    assert data == ds.jsonl_bytes(step_dataset(again)[0])
    assert hashlib.sha256(data).hexdigest() == WINDOW_SHA256


def test_aiperfs_own_loader_accepts_the_window_and_keeps_its_prefixes(tmp_path) -> None:
    """AIPerf 0.13.0's CustomDatasetComposer, on the command line the runner builds, turns the
    window's file into one conversation per row: the prompt has exactly the row's input
    tokens, the turn its timestamp and output length, and AIPerf's own token sequences of two
    consecutive rows share exactly the whole engine blocks their trace blocks share."""
    stack = load_stack(REHEARSAL)
    model = build_model_folder(tmp_path / "hf", stack.model.id, stack.model.arch)
    step = plan(stack, "quick")[0]
    rows, _ = step_dataset(step)
    data = ds.write_jsonl(rows, tmp_path / "window.jsonl")
    args = profile_args(AiperfInvocation(
        model=stack.model.id, url="http://127.0.0.1:9", tokenizer=stack.model.id,
        input_file=data.path, request_count=data.rows, concurrency=6, seed=step.seed,
        artifact_dir=tmp_path / "out", block_size=step.params["block_size"],
        fixed_schedule=True, tokenizer_trust_remote_code=True))
    probe = subprocess.run([sys.executable, str(Path(__file__).with_name(
        "aiperf_dataset_probe.py")), json.dumps(args)], capture_output=True, text=True,
        timeout=300, env={**os.environ, **model.env, "TOKENIZERS_PARALLELISM": "false"})
    assert probe.returncode == 0, probe.stderr[-3000:]
    made = json.loads(probe.stdout.strip().splitlines()[-1])
    assert made["block_size"] == 128
    got = made["conversations"]
    assert [c["session_id"] for c in got] == [r["session_id"] for r in rows]
    assert [c["timestamp"] for c in got] == [r["timestamp"] for r in rows]
    assert [c["max_tokens"] for c in got] == [r["output_length"] for r in rows]
    assert [c["prompt_tokens"] for c in got] == [r["input_length"] for r in rows]
    assert [c["sequence_tokens"] for c in got] == [r["input_length"] for r in rows]
    window = {r["session_id"]: r for r in scheduled_rows(
        list(load_trace(stack.workloads.trace_replay).rows[:24]), 0.0, 1.0)}
    shared = [shared_tokens(a["hash_ids"], trace_sizes(a), b["hash_ids"], trace_sizes(b))
              for a, b in ((window[x["session_id"]], window[y["session_id"]])
                           for x, y in zip(rows[1:], rows, strict=False))]
    assert any(shared)   # the window does share prefixes (its first rows a system prompt)
    for want, conv in zip(shared, got[1:], strict=True):
        # a different block may start with the same sampled token by chance, never a block
        assert want <= conv["shared_with_previous"] < want + 128


class _IdleClient:
    def summary(self, window_ns):
        return {"mean_cores": 0.5}


def test_a_replay_is_not_client_bound_for_staying_under_its_cap(tmp_path) -> None:
    """A replayed trace's concurrency is a cap, not a target: the trace's arrivals decide how
    many are in flight, so staying well under it is no sign of a saturated client (the same
    records from a concurrency-driven step are flagged)."""
    from workloads.step_exec import Execution, judge
    from workloads.steps import Step

    fixture = Path(__file__).parent / "fixtures" / "trace-runs" / REHEARSAL / "fixture"
    work = tmp_path / "c6"
    shutil.copytree(fixture / "trace_replay" / "c6", work)
    rows = [json.loads(x) for x in (fixture / "datasets" / "trace_replay" / "c6.jsonl")
            .read_text().splitlines()]
    step = Step(id="trace_replay/c6", workload="trace_replay", name="c6", repeat=1,
                concurrency=16, seed=1, rows=lambda: rows, params={"schedule": "fixed"})
    ex = Execution(exit_code=0, cpu=_IdleClient(), wall_s=1.0, command=[], host_cores=2)
    replay = judge(work, rows, step, ex, 0.01)["client"]
    assert replay["achieved_concurrency"] < 0.9 * 16 and not replay["client_bound"]
    driven = judge(work, rows, dataclasses.replace(step, params={}), ex, 0.01)["client"]
    assert driven["client_bound"] and "achieved concurrency" in driven["reasons"][0]
