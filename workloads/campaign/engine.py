"""The campaign loop: deploy, run and tear down every slot of the plan, in order, resumable.

- A slot starts when every earlier slot on its node groups is finished (local slots: every
  earlier slot, since they share the host's cores). On a cluster, slots on disjoint groups run
  side by side, each in its own thread; the main thread only orders, scales and waits.
- A slot whose predecessor handed its workers over takes them (`adopt`); the workers' identity
  (pod uids, process ids) is read before and after, and the record says whether they were
  really kept. A predecessor whose run did not complete is torn down whole: its successor
  deploys fresh workers (and its prompt epoch is 0 again).
- GPU groups are sized from the plan's scale events: before a slot starts, its groups hold at
  least its nodes; the scale-up is asked `node_ready_s` before the slot is expected to start
  (its predecessors' deploy time plus their forecast load windows), and a group shrinks when
  the slot it was kept for ends.
- Every action is timed in the record (workloads/campaign/state.py), with the billing changes
  timeline.py integrates: a node bills from the moment it is asked for until the platform sees
  it gone (the group's nodes, polled through the Kubernetes API: a managed group's removal, an
  Auto Mode pool's empty-node grace), a platform that cannot see nodes until its scale action
  ends; a local mocker set from its start to its stop. Once every slot is finished, the
  campaign waits (up to REMOVAL_WAIT_S) for the last nodes to go.
- Ctrl-C (or SIGTERM) stops every running slot at its next wait (their clocks raise), leaves
  the deployments as they are and the record valid; the same run id resumes: finished slots are
  skipped, a deployed slot runs again on its deployment with a new prompt epoch (its workers
  saw the interrupted step's prompts), the runner redoing only missing steps.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

from workloads.campaign.state import (
    DEPLOYED,
    DONE,
    FAILED,
    HANDED_OVER,
    INTERRUPTED,
    PENDING,
    RAN,
    CampaignState,
)

POLL_S = 10.0
# How long a finished campaign waits for the nodes it let go to leave (a managed group's
# termination; an Auto Mode pool lowered before it was parked keeps an empty node up to its
# grace): past it, the record bills them until it ends.
REMOVAL_WAIT_S = 2400.0
TERMINAL = (DONE, HANDED_OVER, FAILED)


class Platform(Protocol):
    kind: str

    def prepare(self, sizes: dict[str, int]) -> None: ...
    def scale(self, sizes: dict[str, int]) -> None: ...
    def is_deployed(self, slot: dict) -> bool: ...
    def can_adopt(self, slot: dict) -> bool: ...
    def nodes_up(self, group: str) -> int | None: ...   # None: cannot see nodes
    def deploy(self, slot: dict, adopt: bool) -> dict: ...
    def workers(self, slot: dict) -> dict[str, str]: ...
    def run(self, slot: dict, epoch: int, info: dict, clock: Any) -> Any: ...
    def teardown(self, slot: dict, hand_over: bool) -> dict: ...
    def close(self) -> None: ...


class StoppableClock:
    """The campaign clock seen by one slot: its waits raise KeyboardInterrupt once the
    campaign is stopping, so a slot in a thread stops like a run on Ctrl-C."""

    def __init__(self, clock: Any, stop: threading.Event):
        self.clock, self.stop = clock, stop

    def now(self) -> float:
        return self.clock.now()

    def wall(self) -> str:
        return self.clock.wall()

    def sleep(self, seconds: float) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt("campaign stopping")
        self.clock.sleep(seconds)


class Campaign:
    def __init__(self, plan: dict, state: CampaignState, platform: Platform, clock: Any,
                 report=print, parallel: bool = True):
        self.plan, self.state, self.platform, self.clock = plan, state, platform, clock
        self.report, self.parallel = report, parallel
        self.slots = plan["slots"]
        self.stop = threading.Event()
        self.deps = {s["name"]: [p["name"] for p in self.slots[:i] if self._shares(p, s)]
                     for i, s in enumerate(self.slots)}
        self.running: dict[str, Future] = {}
        self.lock = threading.Lock()          # one base `up` at a time

    def _shares(self, a: dict, b: dict) -> bool:
        return not self.parallel or bool(set(a["nodes"]) & set(b["nodes"]))

    # --- sizes and billing -----------------------------------------------------------------
    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.state.data["sizes"])

    def _scale(self, want: dict[str, int], why: str) -> None:
        if self.platform.kind == "local":   # no node groups: the mockers bill as they run
            return
        with self.lock:
            before = self.sizes
            after = {**before, **want}
            if after == before:
                return
            moves = ", ".join(f"{g} {before.get(g, 0)} -> {n}" for g, n in want.items()
                              if before.get(g, 0) != n)
            self.report(f"scale {moves} ({why})")
            grown = {g: n - before.get(g, 0) for g, n in after.items() if n > before.get(g, 0)}
            for g, n in grown.items():   # a node bills from the moment it is asked for
                self.state.event("billing", self.clock.now(), group=g, delta=n)
            with self.state.action("scale", self.clock, before=before, after=after, why=why):
                self.platform.scale(after)
            self.state.set_sizes(after)
        self._observe_removals()   # ... until it is gone

    def _observe_removals(self) -> list[str]:
        """Stop billing the let-go nodes the platform no longer sees (all of them when it
        cannot see nodes); the groups with some still up. Locally nothing is scaled: a mocker
        set bills while it runs."""
        if self.platform.kind == "local":
            return []
        waiting = []
        for g, level in self.state.billing_open().items():
            size = self.sizes.get(g, 0)
            if level <= size:
                continue
            try:
                up = self.platform.nodes_up(g)
            except Exception as exc:  # noqa: BLE001 - unseen nodes bill on; asked again
                self.report(f"cannot list the {g} nodes ({exc}): billing them until seen gone")
                up = level
            now_level = size if up is None else max(size, min(level, up))
            if now_level < level:
                self.state.event("billing", self.clock.now(), group=g, delta=now_level - level)
            if now_level > size:
                waiting.append(g)
        return waiting

    def _await_removals(self) -> None:
        deadline = self.clock.now() + REMOVAL_WAIT_S
        while (waiting := self._observe_removals()) and self.clock.now() < deadline:
            self.clock.sleep(POLL_S)
        if waiting:
            self.report(f"nodes of {', '.join(waiting)} are still up {REMOVAL_WAIT_S / 60:.0f} "
                        "min after the campaign let them go: the record bills them until it "
                        "ends; check the base (`python -m reports audit`)")

    def _expected_start(self, name: str) -> float | None:
        """When a slot should start: its running predecessors' deploy time plus their
        forecast load windows (None while one of them is not deployed yet)."""
        ends = []
        for d in self.deps[name]:
            st = self.state.slot(d)
            if st["status"] in TERMINAL:
                continue
            if st.get("deployed_at") is None:
                return None
            window = self._slot(d)["forecast"].get("load_window_s") or 0.0
            ends.append(st["deployed_at"] + window)
        return max(ends, default=self.clock.now())

    def _slot(self, name: str) -> dict:
        return next(s for s in self.slots if s["name"] == name)

    def _scale_ahead(self) -> None:
        ready = self.plan.get("node_ready_s", 0.0)
        for s in self.slots:
            if self.state.status(s["name"]) != PENDING or s["name"] in self.running:
                continue
            short = {g: n for g, n in s["scale_before"].items() if self.sizes.get(g, 0) < n}
            start = self._expected_start(s["name"])
            if short and start is not None and self.clock.now() >= start - ready:
                self._scale(short, f"ahead of {s['name']}")

    def _scale_after(self, s: dict) -> None:
        busy: dict[str, int] = {}
        for name in self.running:
            for g, n in self._slot(name)["nodes"].items():
                busy[g] = busy.get(g, 0) + n
        want = {g: max(n, busy.get(g, 0)) for g, n in s["scale_after"].items()
                if max(n, busy.get(g, 0)) < self.sizes.get(g, 0)}
        if want:
            self._scale(want, f"after {s['name']}: no scheduled variant needs it")

    # --- one slot ----------------------------------------------------------------------------
    def _adopts(self, s: dict) -> bool:
        return bool(s["kept_from"]) and self.state.status(s["kept_from"]) == HANDED_OVER

    def _billing(self, s: dict, sign: int) -> None:
        if self.platform.kind == "local":   # a mocker set bills while its processes live
            for g, n in s["nodes"].items():
                self.state.event("billing", self.clock.now(), group=g, delta=sign * n)

    def close(self) -> None:
        """Close the platform. Locally that stops every process, so whatever mocker set still
        bills (an interrupted slot's, or workers kept for a successor) stops billing now: a
        resumed campaign starts new ones and bills them from their start. On a cluster nothing
        stops: nodes and deployments bill on until the campaign resumes or is destroyed."""
        self.platform.close()
        if self.platform.kind == "local":
            for g, n in self.state.billing_open().items():
                if n:
                    self.state.event("billing", self.clock.now(), group=g, delta=-n)

    def _deploy(self, s: dict, clock: Any) -> bool:
        name, handed = s["name"], self._adopts(s)
        adopt = handed and self.platform.can_adopt(s)
        if handed and not adopt:
            # the workers it was to keep are gone (a local campaign resumed after Ctrl-C: they
            # stopped, and stopped billing, when the interrupted attempt closed)
            self.report(f"{name}: the workers of {s['kept_from']} are gone; deploying new ones")
        before = self.state.slot(s["kept_from"]).get("handed_workers", {}) if adopt else {}
        if not adopt:
            self._billing(s, +1)
        with self.state.action("deploy", clock, slot=name, adopt=adopt) as entry:
            entry.update(self.platform.deploy(s, adopt))
        after = self.platform.workers(s)
        kept = {"from": s["kept_from"], "before": before, "after": after,
                "kept": bool(before) and before == after} if adopt else None
        if kept is not None and not kept["kept"]:  # kept is a dict exactly when adopting
            self.report(f"{name}: the workers of {s['kept_from']} were NOT kept "
                        f"({before} -> {after}); its load counts as a new deployment")
        self.state.update_slot(name, status=DEPLOYED, deployed_at=clock.now(), adopted=adopt,
                               kept_workers=kept, epochs=[], workers=after)
        return adopt

    def _run_slot(self, s: dict) -> str:
        name = s["name"]
        clock = StoppableClock(self.clock, self.stop)
        st = self.state.slot(name)
        if st["status"] == PENDING or (st["status"] == DEPLOYED
                                       and not self.platform.is_deployed(s)):
            self._deploy(s, clock)
        st = self.state.slot(name)
        if st["status"] == DEPLOYED:
            # a new epoch for each run on the same workers: an interrupted attempt's prompts
            # (or the previous variant's, on kept workers) may be in their caches
            base = s["prompt_epoch"] if st.get("adopted") else 0
            epoch = max([base - 1, *st.get("epochs", [])]) + 1
            self.state.update_slot(name, epochs=[*st.get("epochs", []), epoch])
            info = {"id": self.state.path.parent.name, "base": self.plan["base"],
                    "kept_from": s["kept_from"] if st.get("adopted") else None}
            with self.state.action("run", clock, slot=name, prompt_epoch=epoch) as entry:
                result = self.platform.run(s, epoch, info, clock)
                entry.update(run_status=result.status, run_dir=str(result.run_dir))
            if result.status == INTERRUPTED:
                raise KeyboardInterrupt(f"{name}: run interrupted")
            self.state.update_slot(name, status=RAN, run_status=result.status,
                                   run_dir=str(result.run_dir))
        st = self.state.slot(name)
        successor = s["hands_over_to"]
        hand_over = successor is not None and st.get("run_status") == "complete" \
            and self.state.status(successor) == PENDING
        if hand_over:   # what the successor must find running (its kept-workers evidence)
            self.state.update_slot(name, handed_workers=self.platform.workers(s))
        with self.state.action("teardown", clock, slot=name, hand_over=hand_over) as entry:
            entry.update(self.platform.teardown(s, hand_over))
        if not hand_over:
            self._billing(s, -1)
        final = HANDED_OVER if hand_over else DONE
        self.state.update_slot(name, status=final)
        return final

    def _guarded(self, s: dict) -> str:
        try:
            return self._run_slot(s)
        except KeyboardInterrupt:
            self.stop.set()
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; the other slots go on
            self.report(f"{s['name']}: failed: {exc}")
            self.state.update_slot(s["name"], status=FAILED, error=f"{type(exc).__name__}: "
                                   f"{exc}"[:800])
            try:   # nothing of a failed slot may stay billing
                with self.state.action("teardown", self.clock, slot=s["name"], hand_over=False):
                    self.platform.teardown(s, False)
                self._billing(s, -1)
            except Exception as exc2:  # noqa: BLE001
                self.report(f"{s['name']}: teardown after the failure failed too: {exc2}")
            return FAILED

    # --- the loop ----------------------------------------------------------------------------
    def _startable(self) -> list[dict]:
        out = []
        for s in self.slots:
            name = s["name"]
            if self.state.status(name) in TERMINAL or name in self.running:
                continue
            if all(self.state.status(d) in TERMINAL for d in self.deps[name]):
                out.append(s)
        return out

    def execute(self) -> str:
        pool = ThreadPoolExecutor(max_workers=max(1, len(self.slots))) if self.parallel \
            else None
        try:
            while True:
                for name, fut in list(self.running.items()):
                    if fut.done():
                        del self.running[name]
                        fut.result()        # re-raises an interrupt from the slot
                        self._scale_after(self._slot(name))
                if all(self.state.status(s["name"]) in TERMINAL for s in self.slots):
                    self._await_removals()
                    break
                self._observe_removals()
                self._scale_ahead()
                started = False
                for s in self._startable():
                    self._scale({g: n for g, n in s["nodes"].items()
                                 if self.sizes.get(g, 0) < n}, f"for {s['name']}")
                    if pool is None:
                        self._guarded(s)
                        self._scale_after(s)
                    else:
                        self.running[s["name"]] = pool.submit(self._guarded, s)
                    started = True
                if not started and self.running:
                    # real time: the slots' own waits drive the clock (a test's fake one too)
                    wait(list(self.running.values()), timeout=POLL_S,
                         return_when=FIRST_COMPLETED)
                elif not started:
                    self.clock.sleep(POLL_S)
        except KeyboardInterrupt:
            self.stop.set()
            for fut in self.running.values():   # their clocks raise at their next wait
                with contextlib.suppress(BaseException):   # each slot recorded its own end
                    fut.result()
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        failed = [s["name"] for s in self.slots if self.state.status(s["name"]) == FAILED]
        runs = [self.state.slot(s["name"]).get("run_status") for s in self.slots]
        return "failed" if failed or any(r != "complete" for r in runs) else "complete"
