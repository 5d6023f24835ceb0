"""Where requests went, from the frontend's request-trace lines (pure): linking each turn to the
previous one by its prompt's block hashes, the same-worker share, handoffs, worker names."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reports.records.routing import step_routing, worker_names
from workloads import request_trace
from workloads import routing_evidence as rev

BLOCK = 64


def line(rid: str, t_ms: int, hashes: list[int], prompt: int, cached: int, worker: int,
         decode: int | None = None, **extra) -> str:
    """One finished-request line as Dynamo 1.6.1's frontend writes it (seen live)."""
    req = {"request_id": rid, "input_tokens": prompt, "output_tokens": 8,
           "cached_tokens": cached, "request_received_ms": t_ms, "ttft_ms": 40.0,
           "worker": {"prefill_worker_id": worker, "prefill_dp_rank": 0,
                      "decode_worker_id": decode if decode is not None else worker,
                      "decode_dp_rank": 0},
           "replay": {"trace_block_size": BLOCK, "input_length": prompt,
                      "input_sequence_hashes": hashes}, **extra}
    return json.dumps({"timestamp": t_ms, "event": {
        "schema": "dynamo.request.trace.v1", "event_type": "request_end",
        "event_time_unix_ms": t_ms + 90, "request": req}})


def conversation(conv: int, workers: list[int], t0: int) -> list[str]:
    """Turns of one conversation: each prompt is the previous one (with its partial last
    block completed) plus new blocks; `workers[k]` processed turn k."""
    out, history = [], []
    for k, w in enumerate(workers):
        history = history[:-1] + [conv * 1000 + len(history) + i for i in range(3)]
        prompt = len(history) * BLOCK - 20          # the last block is partial
        out.append(line(f"c{conv}-t{k}", t0 + 1000 * k, list(history), prompt, 0, w))
    return out


def test_turns_link_to_the_previous_turn_and_count_same_worker():
    lines = conversation(1, [11, 11, 22, 22], 0) + conversation(2, [22, 11, 11, 22], 10)
    reqs = {r["request_id"]: r for r in rev.requests(lines)}
    assert reqs["c1-t0"]["follows"] is None and reqs["c2-t0"]["follows"] is None
    assert [reqs[f"c1-t{k}"]["follows"] for k in (1, 2, 3)] == ["c1-t0", "c1-t1", "c1-t2"]
    assert [reqs[f"c1-t{k}"]["same_worker"] for k in (1, 2, 3)] == [True, False, True]
    assert [reqs[f"c2-t{k}"]["same_worker"] for k in (1, 2, 3)] == [False, True, False]
    s = rev.summary(list(reqs.values()))
    assert (s["follow_ups"], s["prompt_workers"]) == (6, 2)
    assert s["same_worker_share"] == pytest.approx(3 / 6) and s["chance_same_worker"] == 0.5
    assert s["handoff_share"] == 0


def test_a_prompt_that_only_shares_its_first_blocks_is_not_a_follow_up():
    """Another conversation with the same opening (a system prompt) but its own turn is not a
    continuation: only a request whose whole earlier prompt is a prefix is."""
    a = line("a", 0, [1, 2, 3], 3 * BLOCK, 0, 11)
    b = line("b", 10, [1, 2, 9, 10], 4 * BLOCK, 128, 22)
    c = line("c", 20, [1, 2, 3, 4, 5], 5 * BLOCK, 192, 11)
    reqs = {r["request_id"]: r for r in rev.requests([a, b, c])}
    assert reqs["b"]["follows"] is None
    assert reqs["c"]["follows"] == "a" and reqs["c"]["same_worker"] is True


def test_disaggregated_handoffs_and_unreadable_lines():
    lines = [line("p", 0, [1, 2], 128, 0, 5, decode=6,
                  kv_transfer_estimated_latency_ms=7.5),
             line("q", 5, [3, 4], 128, 0, 5, decode=6, kv_transfer_estimated_latency_ms=6.5),
             '{"timestamp": 1, "event": {"schema": "dynamo.request.trace.v1", "event_type": '
             '"request_start"}}', '{"timestamp": 2, "event": {"sch']   # half-written
    s = rev.summary(rev.requests(lines))
    assert s["traced_requests"] == 2 and s["handoff_share"] == 1.0
    assert s["kv_transfer_est_ms_mean"] == pytest.approx(7.0)
    assert (s["prompt_workers"], s["decode_workers"]) == (1, 1)


def test_lines_in_window_keep_only_the_steps_requests():
    lines = [line("early", 999, [1], 64, 0, 1), line("in", 1500, [2], 64, 0, 1),
             line("late", 2001, [3], 64, 0, 1), "not json"]
    kept = request_trace.lines_in_window(lines, 1000, 2000)
    assert [json.loads(x)["event"]["request"]["request_id"] for x in kept] == ["in"]


def _srv(rows: list[tuple[str, str, dict, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"metric": m, "type": "counter", "endpoint": url,
                          "labels": json.dumps(labels, sort_keys=True), "stat": "total",
                          "value": v} for m, url, labels, v in rows])


def test_workers_are_named_as_the_runner_named_their_metrics(tmp_path):
    """The trace's decimal instance id is the hex `worker_id` label of that worker's /metrics;
    per worker the table shows the trace's prompts beside the worker's own request count."""
    named = {"frontend": "http://127.0.0.1:9000/metrics",
             "worker-0": "http://127.0.0.1:9001/metrics",
             "worker-1": "http://127.0.0.1:9002/metrics"}
    w0, w1 = 0xF9F671D0A70843E, 0x40B0EDE85C0F7705
    srv = _srv([("dynamo_component_requests", named["worker-0"],
                 {"worker_id": f"{w0:x}", "dynamo_endpoint": "generate"}, 3.0),
                ("dynamo_component_requests", named["worker-1"],
                 {"worker_id": f"{w1:x}", "dynamo_endpoint": "generate"}, 1.0),
                ("dynamo_component_requests", named["worker-1"],
                 {"worker_id": f"{w1:x}", "dynamo_endpoint": "worker_kv_query"}, 5.0)])
    assert worker_names(srv, named) == {str(w0): "worker-0", str(w1): "worker-1"}
    lines = conversation(1, [w0, w0, w1], 0) + [line("x", 50, [77], 64, 0, w0)]
    (tmp_path / request_trace.STEP_FILE).write_text("\n".join(lines) + "\n")
    figures, rows = step_routing(tmp_path, srv, named, {"routing_evidence": {"expected": 4}})
    by = {r["worker"]: r for r in rows}
    assert (by["worker-0"]["prompts"], by["worker-0"]["requests_counted"]) == (3, 3.0)
    assert (by["worker-1"]["prompts"], by["worker-1"]["requests_counted"]) == (1, 1.0)
    assert by["worker-0"]["same_worker_follow_ups"] == 1 and by["worker-1"]["follow_ups"] == 1
    assert figures["requests_per_worker"] == "worker-0 3, worker-1 1"
    assert figures["routing_evidence"] == "frontend request trace"
    short, _ = step_routing(tmp_path, srv, named, {"routing_evidence": {"expected": 9}})
    assert short["routing_evidence"] == "4 of 9 requests traced"
    none, rows = step_routing(tmp_path / "missing", srv, named, {})
    assert rows == [] and none["routing_evidence"].startswith("none:")


def test_a_target_without_a_trace_is_recorded_as_such(tmp_path):
    class NoTrace:
        kind = "aws-fake"

    rec = request_trace.save_step_trace(NoTrace(), tmp_path, 0, 1, expected=3)
    assert rec["source"] is None and "keeps no request trace" in rec["reason"]

    class Trace:
        kind = "local"

        def request_trace(self, since_ms, until_ms):
            return [line("a", 5, [1, 2], 128, 0, 1), line("b", 6, [1, 2, 3], 192, 128, 1)]

    rec = request_trace.save_step_trace(Trace(), tmp_path, 0, 10, expected=2)
    assert (rec["records"], rec["follow_ups"], rec["same_worker_share"]) == (2, 1, 1.0)
    assert len((tmp_path / request_trace.STEP_FILE).read_text().splitlines()) == 2


def test_hit_rate_error_leaves_out_the_turn_mix():
    """First turns never hit, later ones do: that mix is the same in compared stacks, so it is
    no error. Only what varies within a turn position (where the turn landed) is."""
    def reqs(cached_second: list[int]) -> list[dict]:
        out = []
        for i, c in enumerate(cached_second):
            out.append({"request_id": f"a{i}", "input_tokens": 100.0, "cached_tokens": 0.0,
                        "turn": 0})
            out.append({"request_id": f"b{i}", "input_tokens": 200.0, "cached_tokens": c,
                        "turn": 1})
        return out

    steady = rev.hit_rate_se(reqs([100.0] * 20))
    assert steady == pytest.approx(0.0, abs=1e-12)
    mixed = rev.hit_rate_se(reqs([100.0, 0.0] * 10))
    assert mixed > 0.03 and rev.hit_rate_se(reqs([100.0, 0.0] * 40)) < mixed / 1.9
