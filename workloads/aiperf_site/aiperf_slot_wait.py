"""AIPerf 0.13.0's concurrency loop waits for a free slot instead of polling for one.

Why: with `--concurrency` and no request rate, AIPerf's timing manager issues credits in
CONCURRENCY_BURST mode (interval 0, aiperf/timing/config.py) through
`RequestRateStrategy.execute_phase` (aiperf/timing/strategies/request_rate.py). When every slot
is taken, `CreditIssuer.try_issue_credit` (aiperf/credit/issuer.py) returns None and the loop
only yields to the event loop (`yield_to_event_loop`, aiperf/common/utils.py) before trying
again: a busy poll that keeps the timing_manager process at ~100 % of a core for the whole
step (measured with top and py-spy on this project's 2-core host, 2026-12-04: 98.9 % at c4,
every sample in request_rate.py's `case None` branch). On a shared host that core is taken
from the engine and from AIPerf's own worker, and the client's TTFT carries the wait
(docs/testing.md, "What is left without the stall"); on a cluster it is a core of the load
generator's CPU that the saturation guard counts as client load.

What changes: after a `None` (no slot) the wrapped `try_issue_credit` awaits whatever lets the
loop issue again, or SAFETY_WAKE_S, whichever is first, then returns the same `None`: a slot
release or limit change (`DynamicConcurrencyLimit.release` / `set_limit`, aiperf/timing/
concurrency.py: every session and prefill slot, and the concurrency ramp's steps, go through
them) or a conversation's next turn queued for the loop (`RequestRateStrategy.
handle_credit_return` puts it on `_continuation_turns`, an asyncio.Queue, at once or after
its think time: both end in the queue's `put_nowait`, which the strategy's queue here
notifies from). The event is cleared after the `None`: the `None` paths of
`try_issue_credit` never await, and their own roll-back releases (a session slot given back
when no prefill slot is free) must not count as a wake-up. The strategy's loop,
its stop checks and the credits it issues are AIPerf's own; a freed slot is taken on the next
turn of the event loop, as before. Applied only to the AIPerf version it was read against
(AIPERF_VERSION); any other version runs unpatched and `apply()` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from importlib import metadata

AIPERF_VERSION = "0.13.0"
# Upper bound on one wait with no release seen (a stop condition, a phase end): the loop then
# runs AIPerf's own checks again. 200 wake-ups a second at most instead of a busy poll.
SAFETY_WAKE_S = 0.005
MARK = "_dynamo_bench_slot_wait"

_events: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def slot_event() -> asyncio.Event:
    """The running loop's 'a slot may be free' event (one per event loop)."""
    loop = asyncio.get_running_loop()
    ev = _events.get(loop)
    if ev is None:
        ev = _events[loop] = asyncio.Event()
    return ev


def notify_slot() -> None:
    """A slot was released or a limit changed: wake the waiting credit loop, if any."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    ev = _events.get(loop)
    if ev is not None:
        ev.set()


def notifying(fn):
    """`fn` (a slot release or limit change), then wake the credit loop."""
    def wrapper(self, *args, **kwargs):
        result = fn(self, *args, **kwargs)
        notify_slot()
        return result
    setattr(wrapper, MARK, True)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


class NotifyingQueue(asyncio.Queue):
    """The strategy's continuation-turn queue: a queued turn wakes the waiting loop."""

    def put_nowait(self, item) -> None:   # asyncio.Queue.put ends here too
        super().put_nowait(item)
        notify_slot()


def notifying_queue(init):
    """RequestRateStrategy.__init__, whose `_continuation_turns` then notifies."""
    def wrapper(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if type(self._continuation_turns) is asyncio.Queue and self._continuation_turns.empty():
            self._continuation_turns = NotifyingQueue()
    setattr(wrapper, MARK, True)
    wrapper.__wrapped__ = init  # type: ignore[attr-defined]
    return wrapper


def waiting(fn, safety_wake_s: float = SAFETY_WAKE_S):
    """`try_issue_credit` that, when no slot was free (None), waits for a release first."""
    async def wrapper(self, turn):
        result = await fn(self, turn)
        if result is None:
            ev = slot_event()
            ev.clear()   # no await since fn's checks: only what comes next wakes it
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(ev.wait(), safety_wake_s)
        return result
    setattr(wrapper, MARK, True)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def apply() -> str:
    """Patch the installed AIPerf; returns "applied", "already applied" or why not."""
    try:
        version = metadata.version("aiperf")
    except metadata.PackageNotFoundError:
        return "not applied: aiperf is not installed"
    if version != AIPERF_VERSION:
        return f"not applied: aiperf {version}, the patch was read against {AIPERF_VERSION}"
    from aiperf.credit.issuer import CreditIssuer
    from aiperf.timing.concurrency import DynamicConcurrencyLimit
    from aiperf.timing.strategies.request_rate import RequestRateStrategy
    if getattr(CreditIssuer.try_issue_credit, MARK, False):
        return "already applied"
    DynamicConcurrencyLimit.release = notifying(DynamicConcurrencyLimit.release)
    DynamicConcurrencyLimit.set_limit = notifying(DynamicConcurrencyLimit.set_limit)
    RequestRateStrategy.__init__ = notifying_queue(RequestRateStrategy.__init__)
    CreditIssuer.try_issue_credit = waiting(CreditIssuer.try_issue_credit)
    return "applied"
