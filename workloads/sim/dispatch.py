"""How AIPerf sends a step, rebuilt as DynoSim sessions (pure).

DynoSim replays a Mooncake trace on a virtual clock; a row with a `session_id` waits for the
session's previous row to end plus its `delay` (ms), and a session's first row starts at its
`timestamp` (Dynamo 1.6.1 dynamo.replay; checked here: tests/test_sim_dispatch.py). AIPerf 0.13.0
sends a step as a closed loop of `concurrency` slots: a slot sends its next request when its last
one ends; a conversation's turns follow each other after the row's think time (`delay`); with a
ramp (`--concurrency-ramp-duration`, a sweep step: workloads/stagger.py) slot k of c opens at
R x (k - 1) / (c - 1); a duration-bounded step issues nothing after its duration and cancels
what is still running one grace period later; a replayed trace sends each row at its timestamp.

So a step becomes one session per slot, each session the chain of requests that slot sends, in
order. Which slot sends which request is AIPerf's dispatch: the next row goes to the slot that
frees first. With rows of one length and no conversation that is round-robin; otherwise a first
closed-loop replay (DynoSim's own `replay_concurrency`, which dispatches exactly so: next row on
the first completion, counting conversations as AIPerf does) gives the order, and `chains` reads
it off. Between two requests of a slot the client turns around in `gap_ms` (the live loop's end
of one request to the frontend's receipt of the next: workloads/sim/calibration.py measures it).

A sweep step's warm-up rows (workloads/step_warmup.py) are not replayed: they share no block with
the profiled rows and AIPerf's profiling phase starts only once they have all ended (seen in its
records: the phase barrier), on an idle engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SendPattern:
    """How AIPerf sends one step (from the step's AIPerf invocation)."""
    concurrency: int
    warmup: int = 0                  # rows of the warm-up phase, not replayed
    ramp_s: float | None = None
    duration_s: float | None = None  # None: bounded by the rows
    grace_s: float = 0.0
    fixed_schedule: bool = False     # rows carry timestamps (ms) and are sent at them


@dataclass(frozen=True)
class Request:
    """One request of the step: its row, and its conversation and turn as AIPerf names them."""
    index: int                 # row index in the step's dataset
    conversation: str
    turn: int
    input_length: int          # tokens the engine sees (prompt_layout)
    output_length: int
    hash_ids: tuple[int, ...]
    think_ms: float = 0.0      # a later turn's pause after the previous answer
    timestamp_ms: float | None = None


@dataclass
class Plan:
    """DynoSim's input for one replay, and where each of its rows came from."""
    rows: list[dict]
    origin: dict[tuple[str, int], Request] = field(default_factory=dict)  # (session, turn)
    replay_concurrency: int | None = None


def _row(req: Request, session: str, first_at: float | None, delay: float | None) -> dict:
    row: dict = {"session_id": session, "input_length": req.input_length,
                 "output_length": req.output_length, "hash_ids": list(req.hash_ids)}
    if first_at is not None:
        row["timestamp"] = round(first_at, 3)
    if delay is not None:
        row["delay"] = round(delay, 3)
    return row


def conversations(requests: list[Request]) -> list[list[Request]]:
    """The requests grouped by conversation, in first-appearance order."""
    out: dict[str, list[Request]] = {}
    for r in requests:
        out.setdefault(r.conversation, []).append(r)
    return list(out.values())


def closed_loop_plan(requests: list[Request]) -> Plan:
    """The first replay of a closed-loop step: DynoSim dispatches the rows itself, in order, at
    most `concurrency` conversations at once (set by the caller), with no ramp or turnaround."""
    plan = Plan([])
    for conv in conversations(requests):
        for turn, req in enumerate(conv):
            session = f"c-{req.conversation}"
            plan.rows.append(_row(req, session, 0.0 if turn == 0 else None,
                                  None if turn == 0 else req.think_ms))
            plan.origin[session, turn] = req
    return plan


def chains(replayed: list[dict], plan: Plan, concurrency: int) -> list[list[str]]:
    """Conversation ids per slot, in the order each slot sent them, read from a closed-loop
    replay's requests (DynoSim's per-request arrival and terminal times): the first
    `concurrency` conversations start at once; each later one takes the slot whose conversation
    ended last at or before its start (DynoSim dispatches on the completion itself)."""
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for r in replayed:
        conv = plan.origin[r["session_id"], r["turn_index"]].conversation
        start[conv] = min(start.get(conv, r["arrival_time_ms"]), r["arrival_time_ms"])
        end[conv] = max(end.get(conv, r["terminal_time_ms"]), r["terminal_time_ms"])
    first_row = {req.conversation: req.index for req in reversed(list(plan.origin.values()))}
    slots: list[list[str]] = []
    busy: list[tuple[float, int]] = []      # (end time, slot) of each slot's latest conversation
    for conv in sorted(start, key=lambda c: (start[c], first_row[c])):
        if len(slots) < concurrency:
            slot = len(slots)
            slots.append([conv])
        else:
            free = [b for b in busy if b[0] <= start[conv] + 1e-6]
            taken = max(free) if free else min(busy)
            busy.remove(taken)
            slot = taken[1]
            slots[slot].append(conv)
        busy.append((end[conv], slot))
    return slots


def round_robin(requests: list[Request], concurrency: int) -> list[list[str]]:
    """Conversation ids per slot when every request takes as long as every other (one length,
    single turns): slot k sends requests k, k + c, k + 2c, ..."""
    convs = [c[0].conversation for c in conversations(requests)]
    return [convs[k::concurrency] for k in range(min(concurrency, len(convs)))]


def slot_offsets_ms(pattern: SendPattern, slots: int, burst_ms: float) -> list[float]:
    """When each slot sends its first request: spread over the ramp; else together, which
    reaches the engine `burst_ms` apart, one after another."""
    if not pattern.ramp_s or slots <= 1:
        return [burst_ms * k for k in range(slots)]
    return [pattern.ramp_s * 1000.0 * k / (pattern.concurrency - 1) for k in range(slots)]


def session_plan(requests: list[Request], slots: list[list[str]], pattern: SendPattern,
                 gap_ms: float, burst_ms: float = 0.0) -> Plan:
    """The step as one DynoSim session per slot: the slot's conversations one after another, a
    request `gap_ms` after its predecessor ends (plus a turn's think time)."""
    by_conv = {c[0].conversation: c for c in conversations(requests)}
    plan = Plan([])
    offsets = slot_offsets_ms(pattern, len(slots), burst_ms)
    for k, (convs, offset) in enumerate(zip(slots, offsets, strict=True)):
        session, turn = f"slot-{k:04d}", 0
        for conv in convs:
            for j, req in enumerate(by_conv[conv]):
                delay = None if turn == 0 else gap_ms + (req.think_ms if j else 0.0)
                plan.rows.append(_row(req, session, offset if turn == 0 else None, delay))
                plan.origin[session, turn] = req
                turn += 1
    return plan


def sent_before(plan: Plan, replayed: list[dict], cutoff_ms: float) -> Plan:
    """`plan` without the requests a duration-bounded step never sends: those starting at or
    after `cutoff_ms`. `replayed` is a replay of `plan` stopped at the cutoff (DynoSim's
    `max_sim_time_ms` reports the requests completed by then). A session keeps its turns in
    order while each started before the cutoff: a reported turn by its own arrival, the next
    one by its predecessor's end plus its delay; a kept turn that was not reported was still
    in flight, so the turns after it start later. Re-replayed, every kept request starts as
    before: nothing sent earlier depends on what is sent later."""
    done: dict[tuple[str, int], dict] = {(r["session_id"], r["turn_index"]): r
                                         for r in replayed}
    sessions: dict[str, list[dict]] = {}
    for row in plan.rows:
        sessions.setdefault(row["session_id"], []).append(row)
    kept = Plan([], replay_concurrency=plan.replay_concurrency)
    for session, rows in sessions.items():
        for turn, row in enumerate(rows):
            reported, before = done.get((session, turn)), done.get((session, turn - 1))
            if reported is not None:
                start = reported["arrival_time_ms"]
            elif turn == 0:
                start = row.get("timestamp", 0.0)
            elif before is not None:
                start = before["terminal_time_ms"] + row.get("delay", 0.0)
            else:
                break
            if start >= cutoff_ms:
                break
            kept.rows.append(row)
            kept.origin[session, turn] = plan.origin[session, turn]
            if reported is None:
                break
    return kept


def timed_plan(requests: list[Request]) -> Plan:
    """A replayed trace: every request on its own, sent at its timestamp (ms, from the first
    request's: DynoSim's clock starts there)."""
    plan = Plan([])
    start = min((float(r.timestamp_ms or 0.0) for r in requests), default=0.0)
    for req in requests:
        session = f"t-{req.index:06d}"
        plan.rows.append(_row(req, session, float(req.timestamp_ms or 0.0) - start, None))
        plan.origin[session, 0] = req
    return plan


def after(first: Plan, second: Plan, offset_ms: float) -> tuple[Plan, set[str]]:
    """`first`, then `second` with every session started `offset_ms` later (a warm pass after
    its cold pass), as one plan; and the sessions of `second`."""
    plan = Plan(list(first.rows), dict(first.origin))
    keep = set()
    for row in second.rows:
        session = f"{row['session_id']}-warm"
        moved = {**row, "session_id": session}
        if "timestamp" in moved:
            moved["timestamp"] = round(moved["timestamp"] + offset_ms, 3)
        plan.rows.append(moved)
        keep.add(session)
    for (session, turn), req in second.origin.items():
        plan.origin[f"{session}-warm", turn] = req
    return plan, keep


def attribute(plan: Plan, replayed: list[dict]) -> list[dict]:
    """`replayed` with every request named by its (session, turn). DynoSim drops the session
    of a session that has one row (it replays it as a lone request at its timestamp: seen in
    Dynamo 1.6.1, tests/test_sim_engine.py), so such a request is matched to the one-row
    session that starts at its arrival with its lengths (in plan order where two do; DynoSim's
    clock starts at the trace's first timestamp, which every plan puts at 0)."""
    turns: dict[str, int] = {}
    for row in plan.rows:
        turns[row["session_id"]] = turns.get(row["session_id"], 0) + 1
    lone: dict[tuple, list[str]] = {}
    for row in plan.rows:
        if turns[row["session_id"]] == 1:
            key = (round(row.get("timestamp", 0.0), 3), row["input_length"],
                   row["output_length"])
            lone.setdefault(key, []).append(row["session_id"])
    out = []
    for r in sorted(replayed, key=lambda r: (r["arrival_time_ms"], r["first_admit_ms"] or 0.0)):
        if r["session_id"] is None:
            key = (round(r["arrival_time_ms"], 3), r["input_length"],
                   r["requested_output_length"])
            if not lone.get(key):
                raise ValueError(f"DynoSim returned a request without its session that no "
                                 f"one-row session of the plan matches: {key}")
            r = {**r, "session_id": lone[key].pop(0), "turn_index": 0}
        out.append(r)
    return out


def capped(plan: Plan, replayed: list[dict], concurrency: int, gap_ms: float) -> Plan | None:
    """A timed plan whose requests wait for a free slot: AIPerf sends a replayed trace's row at
    its timestamp unless `concurrency` requests are in flight, then when one ends (its
    --concurrency caps a fixed schedule). From a replay of `plan`, every request that started
    with all slots taken is moved to when one frees (plus the client's turnaround), taking the
    replay's durations for the requests moved; None when none did (the plan obeys the cap).
    Called again on each new plan's replay until it returns None: the last replay is exact."""
    ends: list[float] = []           # end times of the requests sent so far
    moved: dict[str, float] = {}
    for r in sorted(replayed, key=lambda r: r["arrival_time_ms"]):
        start = r["arrival_time_ms"]
        busy = sorted(e for e in ends if e > start + 1e-6)
        if len(busy) >= concurrency:
            start = busy[len(busy) - concurrency] + gap_ms
            moved[r["session_id"]] = start
        ends.append(start + r["terminal_time_ms"] - r["arrival_time_ms"])
    if not moved:
        return None
    out = Plan([], dict(plan.origin), plan.replay_concurrency)
    for row in plan.rows:
        if row["session_id"] in moved:
            row = {**row, "timestamp": round(moved[row["session_id"]], 3)}
        out.rows.append(row)
    return out
