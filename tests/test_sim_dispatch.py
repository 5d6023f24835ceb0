"""AIPerf's sending rebuilt as DynoSim sessions (workloads/sim/dispatch.py, pure)."""

from __future__ import annotations

import pytest

from workloads.sim import dispatch as d


def _req(i: int, conv: str | None = None, turn: int = 0, isl: int = 100,
         think: float = 0.0) -> d.Request:
    return d.Request(index=i, conversation=conv or f"req-{i:06d}", turn=turn,
                     input_length=isl, output_length=10, hash_ids=(i,), think_ms=think)


def test_a_ramp_opens_slot_k_at_r_times_k_over_c_minus_1():
    """AIPerf's stepped ramp (aiperf/timing/ramping.py): slot k of c at R (k - 1) / (c - 1)."""
    pattern = d.SendPattern(concurrency=4, ramp_s=1.5)
    assert d.slot_offsets_ms(pattern, 4, burst_ms=0.5) == [0.0, 500.0, 1000.0, 1500.0]
    together = d.SendPattern(concurrency=4)
    assert d.slot_offsets_ms(together, 4, burst_ms=0.5) == [0.0, 0.5, 1.0, 1.5]


def test_round_robin_slots_send_every_cth_request():
    reqs = [_req(i) for i in range(7)]
    assert d.round_robin(reqs, 3) == [["req-000000", "req-000003", "req-000006"],
                                      ["req-000001", "req-000004"],
                                      ["req-000002", "req-000005"]]


def test_a_session_per_slot_chains_its_requests_with_the_turnaround_and_think_time():
    reqs = [_req(0, "a", 0), _req(1, "a", 1, think=250.0), _req(2, "b", 0)]
    plan = d.session_plan(reqs, [["a", "b"]], d.SendPattern(concurrency=1), gap_ms=6.0)
    assert [r["session_id"] for r in plan.rows] == ["slot-0000"] * 3
    assert plan.rows[0]["timestamp"] == 0.0 and "delay" not in plan.rows[0]
    assert plan.rows[1]["delay"] == 256.0       # the turnaround plus the turn's think time
    assert plan.rows[2]["delay"] == 6.0         # the next conversation: the turnaround only
    assert plan.origin["slot-0000", 2].conversation == "b"


def test_chains_follow_closed_loop_dispatch():
    """The next conversation takes the slot that ended last at or before its start."""
    reqs = [_req(i) for i in range(4)]
    first = d.closed_loop_plan(reqs)
    replayed = [  # c = 2: 0 and 1 start together; 1 ends first, 2 takes its slot; then 3
        {"session_id": "c-req-000000", "turn_index": 0, "arrival_time_ms": 0.0,
         "terminal_time_ms": 300.0},
        {"session_id": "c-req-000001", "turn_index": 0, "arrival_time_ms": 0.0,
         "terminal_time_ms": 100.0},
        {"session_id": "c-req-000002", "turn_index": 0, "arrival_time_ms": 100.0,
         "terminal_time_ms": 500.0},
        {"session_id": "c-req-000003", "turn_index": 0, "arrival_time_ms": 300.0,
         "terminal_time_ms": 400.0}]
    assert d.chains(replayed, first, 2) == [["req-000000", "req-000003"],
                                            ["req-000001", "req-000002"]]


def test_a_duration_cut_keeps_what_started_before_it():
    reqs = [_req(i) for i in range(6)]
    plan = d.session_plan(reqs, [["req-000000", "req-000001", "req-000002"],
                                 ["req-000003", "req-000004", "req-000005"]],
                          d.SendPattern(concurrency=2, duration_s=1.0), gap_ms=0.0)
    replayed = [  # a replay stopped at 1,000 ms reports the requests completed by then
        {"session_id": "slot-0000", "turn_index": 0, "arrival_time_ms": 0.0,
         "terminal_time_ms": 600.0},
        {"session_id": "slot-0001", "turn_index": 0, "arrival_time_ms": 0.0,
         "terminal_time_ms": 999.0}]
    kept = d.sent_before(plan, replayed, 1000.0)
    # slot 0: turn 1 started at 600 (still running at the cut), turn 2 would start after it;
    # slot 1: turn 1 starts at 999 (+0 turnaround), before the cut
    assert sorted(kept.origin) == [("slot-0000", 0), ("slot-0000", 1), ("slot-0001", 0),
                                   ("slot-0001", 1)]
    late = d.sent_before(plan, replayed, 999.0)
    assert ("slot-0001", 1) not in late.origin


@pytest.mark.parametrize("offset", [0.0, 250.0])
def test_a_warm_pass_follows_its_cold_pass(offset):
    reqs = [_req(0), _req(1)]
    cold = d.session_plan(reqs, [["req-000000"], ["req-000001"]], d.SendPattern(2), 0.0)
    plan, keep = d.after(cold, cold, offset)
    assert keep == {"slot-0000-warm", "slot-0001-warm"}
    warm_rows = [r for r in plan.rows if r["session_id"] in keep]
    assert [r["timestamp"] for r in warm_rows] == [offset, offset]
    assert plan.origin["slot-0000-warm", 0] == plan.origin["slot-0000", 0]


def test_a_replayed_traces_cap_holds_a_request_until_a_slot_frees():
    """AIPerf's --concurrency caps a fixed schedule: with 1 slot, a row due while another runs
    starts when it ends (plus the turnaround); a plan that obeys the cap is left alone."""
    reqs = [d.Request(index=i, conversation=f"req-{i:06d}", turn=0, input_length=100,
                      output_length=10, hash_ids=(i,), timestamp_ms=t)
            for i, t in enumerate([0.0, 50.0, 500.0])]
    plan = d.timed_plan(reqs)
    replayed = [{"session_id": "t-000000", "turn_index": 0, "arrival_time_ms": 0.0,
                 "terminal_time_ms": 200.0},
                {"session_id": "t-000001", "turn_index": 0, "arrival_time_ms": 50.0,
                 "terminal_time_ms": 250.0},
                {"session_id": "t-000002", "turn_index": 0, "arrival_time_ms": 500.0,
                 "terminal_time_ms": 700.0}]
    moved = d.capped(plan, replayed, 1, gap_ms=6.0)
    assert moved is not None
    assert [r["timestamp"] for r in moved.rows] == [0.0, 206.0, 500.0]
    assert d.capped(plan, replayed, 2, gap_ms=6.0) is None
