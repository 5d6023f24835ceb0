"""One step through DynoSim: the replays that rebuild AIPerf's sending, in order (pure but for
the `replay` function it is given).

1. A replayed trace (fixed schedule): every request at its timestamp, one replay.
2. A closed loop: which slot sends which request (round-robin for one-length single turns, else
   a first closed-loop replay, dispatch.chains), then the slots as sessions with their ramp or
   burst offsets and the client's turnaround (dispatch.session_plan); a duration-bounded step is
   replayed once more with only the requests sent before its end (dispatch.sent_before).
3. A warm pass (a trace step replayed right after its cold step, workloads/steps.py): the cold
   pass as in 2, then the same requests again from the moment it ended, in one replay, so the
   warm pass meets the cache the cold one left; only the warm requests are kept.
The last replay runs `runs` times when the KV router breaks ties at random (Dynamo 1.6.1
dynamo/replay/api.py: equal-cost workers are picked at random even at temperature 0): the
first run's requests are the step's records, every run's figures its spread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.sim import dispatch as d
from workloads.sim.engine_setup import SimSetup

Replay = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _runs(answer: dict[str, Any], plan: d.Plan) -> list[list[dict]]:
    """Each run's requests, every one named by its (session, turn)."""
    return [d.attribute(plan, run["requests"]) for run in answer["runs"]]

# How AIPerf's client turns around and starts, as the live rehearsal's frontend saw it (run
# local-agg gt1, 2026-12-06, quick scale, every closed-loop step): a slot's next request reached
# the frontend a median 5.2-6.3 ms after its previous one ended (c1 5.2, c4 6.0, c16 6.0), and
# requests AIPerf starts together reached it spread out (13 of 16 within 2 ms, the last at 31 ms).
TURNAROUND_MS = 6.0
BURST_SPACING_MS = 0.5


@dataclass
class StepSimulation:
    plan: d.Plan
    runs: list[list[dict]]                 # the last replay's requests, per run
    cut_ms: float | None                   # when the step cancels what still runs
    replays: int = 0
    keep: set[str] = field(default_factory=set)    # sessions whose requests are the step's
    block_size: int = 0                    # the engine's KV block (the hashes' size)

    @property
    def requests(self) -> list[dict]:
        """The step's requests (the first run), without a warm pass's cold part."""
        return [r for r in self.runs[0] if not self.keep or r["session_id"] in self.keep]


def job(plan: d.Plan, setup: SimSetup, runs: int = 1,
        until_ms: float | None = None) -> dict[str, Any]:
    return {"trace": plan.rows, "trace_block_size": setup.block_size,
            "roles": setup.job_roles(), "router_mode": setup.router_mode, "router_config": None,
            "replay_concurrency": plan.replay_concurrency, "runs": runs,
            "max_sim_time_ms": until_ms}


def _slots(requests: list[d.Request], pattern: d.SendPattern, setup: SimSetup,
           replay: Replay) -> tuple[list[list[str]], int]:
    single = len(d.conversations(requests)) == len(requests)
    if single and len({(r.input_length, r.output_length) for r in requests}) == 1:
        return d.round_robin(requests, pattern.concurrency), 0
    first = d.closed_loop_plan(requests)
    first.replay_concurrency = pattern.concurrency
    # only who sends what before the step ends matters: the replay may stop there
    until = (pattern.duration_s + pattern.grace_s) * 1000 if pattern.duration_s else None
    (answer,) = replay([job(first, setup, until_ms=until)])
    return d.chains(_runs(answer, first)[0], first, pattern.concurrency), 1


# A replayed trace's cap: at most this many replays to move requests that met every slot taken
# (each replay moves the first such request; a trace step holds tens of requests).
CAP_REPLAYS = 200


def _timed(requests: list[d.Request], pattern: d.SendPattern, setup: SimSetup,
           replay: Replay, turnaround_ms: float) -> tuple[d.Plan, int]:
    """A replayed trace's plan: every request at its timestamp, held back while `concurrency`
    requests are in flight (dispatch.capped), and the replays it took."""
    plan = d.timed_plan(requests)
    for n in range(1, CAP_REPLAYS + 1):
        (answer,) = replay([job(plan, setup)])
        moved = d.capped(plan, _runs(answer, plan)[0], pattern.concurrency, turnaround_ms)
        if moved is None:
            return plan, n
        plan = moved
    raise ValueError(f"the trace step still exceeds its cap of {pattern.concurrency} requests "
                     f"in flight after {CAP_REPLAYS} replays")


Requests = Callable[[int | None], list[d.Request]]


def _first_guess(requests: Requests, total: int, pattern: d.SendPattern, setup: SimSetup,
                 replay: Replay, turnaround_ms: float, burst_ms: float) -> int:
    """How many of a duration-bounded step's conversations its duration may send: its dataset
    is sized for the fastest engine imaginable (workloads/steps.py rows_for_duration), far
    more than a real one gets through. Two conversations a slot are replayed; their pace,
    taken with half again, gives the count (simulate doubles it if a slot still runs out)."""
    assert pattern.duration_s is not None
    c = pattern.concurrency
    k = min(total, 2 * c)
    if k >= total:
        return total
    probe = requests(k)
    plan = d.session_plan(probe, d.round_robin(probe, c), pattern, turnaround_ms, burst_ms)
    (answer,) = replay([job(plan, setup)])
    per_slot_ms = max(r["terminal_time_ms"] for r in _runs(answer, plan)[0]) / 2
    return min(total, c * (math.ceil(1.5 * pattern.duration_s * 1000 / max(per_slot_ms, 1.0))
                           + 2))


def ran_out(plan: d.Plan, replayed: list[dict]) -> bool:
    """Did a slot finish everything it was given before the replay stopped (so a longer step
    would have sent it more)?"""
    planned: dict[str, int] = {}
    for row in plan.rows:
        planned[row["session_id"]] = planned.get(row["session_id"], 0) + 1
    done: dict[str, int] = {}
    for r in replayed:
        done[r["session_id"]] = done.get(r["session_id"], 0) + 1
    return any(done.get(s) == n for s, n in planned.items())


def simulate(requests: list[d.Request] | Requests, pattern: d.SendPattern, setup: SimSetup,
             replay: Replay, runs: int = 1, warm: bool = False,
             turnaround_ms: float = TURNAROUND_MS, burst_ms: float = BURST_SPACING_MS,
             conversations: int | None = None) -> StepSimulation:
    """`requests`: the step's requests, or a function giving those of its first k
    conversations (`conversations` of them in all), so a duration-bounded step lays out only
    what its duration sends."""
    replays = 0
    provide = requests if callable(requests) else (lambda k, every=requests: every)
    total = conversations or getattr(requests, "conversations", None) or len(
        d.conversations(provide(None)))
    duration = pattern.duration_s
    if duration is not None and not pattern.fixed_schedule and not warm:
        k = _first_guess(provide, total, pattern, setup, replay, turnaround_ms, burst_ms)
        replays += 1 if k < total else 0
        while True:   # the step's sending, replayed to its end, with enough conversations
            chosen = provide(k)
            slots, first = _slots(chosen, pattern, setup, replay)
            plan = d.session_plan(chosen, slots, pattern, turnaround_ms, burst_ms)
            (answer,) = replay([job(plan, setup, until_ms=duration * 1000)])
            replays += first + 1
            sent = _runs(answer, plan)[0]
            if k >= total or not ran_out(plan, sent):
                break
            k = min(total, 2 * k)
        plan = d.sent_before(plan, sent, duration * 1000)
        (answer,) = replay([job(plan, setup, runs)])
        return StepSimulation(plan, _runs(answer, plan),
                              (duration + pattern.grace_s) * 1000, replays + 1,
                              block_size=setup.block_size)
    requests = provide(None)
    if pattern.fixed_schedule:
        plan, timed = _timed(requests, pattern, setup, replay, turnaround_ms)
        replays += timed
    else:
        slots, first = _slots(requests, pattern, setup, replay)
        replays += first
        plan = d.session_plan(requests, slots, pattern, turnaround_ms, burst_ms)
    if warm:   # the same requests again, once the cold pass has ended
        (answer,) = replay([job(plan, setup)])
        ended = max(r["terminal_time_ms"] for r in _runs(answer, plan)[0])
        plan, keep = d.after(plan, plan, ended + turnaround_ms)
        (answer,) = replay([job(plan, setup, runs)])
        return StepSimulation(plan, _runs(answer, plan), None, replays + 2, keep,
                              setup.block_size)
    (answer,) = replay([job(plan, setup, runs)])
    return StepSimulation(plan, _runs(answer, plan), None, replays + 1,
                          block_size=setup.block_size)
