"""The AIPerf start-up files every run loads (workloads/aiperf_site): the slot wait that
replaces AIPerf 0.13.0's busy poll, and the bench's quick-ACK pass."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from workloads import aiperf_site
from workloads.aiperf_site import aiperf_slot_wait as slot_wait


def _run(coro):
    """Run `coro` on a loop of its own: asyncio.run would leave the main thread without a
    current event loop, which the Pulumi mock tests after this file need."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


class _NoSlot:
    """An issuer whose slots are all taken: try_issue_credit always returns None."""

    def __init__(self) -> None:
        self.calls = 0

    async def try_issue_credit(self, turn):
        self.calls += 1
        return None


async def _poll(try_issue, issuer, seconds: float) -> int:
    """AIPerf's RequestRateStrategy loop with every slot taken: try, yield, try again."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert await try_issue(issuer, None) is None
        await asyncio.sleep(0)
    return issuer.calls


def test_without_a_free_slot_the_loop_waits_instead_of_polling():
    spins = _run(_poll(_NoSlot.try_issue_credit, _NoSlot(), 0.2))
    waits = _run(_poll(slot_wait.waiting(_NoSlot.try_issue_credit, 0.01), _NoSlot(),
                              0.2))
    assert spins > 500             # AIPerf's own loop: thousands of tries in 0.2 s
    assert waits <= 0.2 / 0.01 + 5  # at most one try per safety wake-up


def test_a_released_slot_wakes_the_waiting_loop_at_once():
    released = []
    release = slot_wait.notifying(lambda self: released.append(self))

    async def scenario(notify: bool) -> None:
        wrapped = slot_wait.waiting(_NoSlot.try_issue_credit, safety_wake_s=30)
        if notify:
            asyncio.get_running_loop().call_later(0.01, release, "slot")
        await asyncio.wait_for(wrapped(_NoSlot(), None), 5)

    _run(scenario(notify=True))
    assert released == ["slot"]
    with pytest.raises(asyncio.TimeoutError):   # no release: it really waits
        _run(scenario(notify=False))


def test_a_queued_turn_wakes_the_loop_and_its_own_roll_back_does_not():
    """A conversation's next turn (multi-turn) frees no slot but lets the loop issue: queueing
    it wakes the wait. A release inside the failed try itself (AIPerf gives a session slot back
    when no prefill slot is free) does not, else the poll is back."""
    release = slot_wait.notifying(lambda self: None)

    class RollsBack:
        async def try_issue_credit(self, turn):
            release(self)
            return None

    async def queued() -> None:
        turns = slot_wait.NotifyingQueue()
        wrapped = slot_wait.waiting(_NoSlot.try_issue_credit, safety_wake_s=30)
        asyncio.get_running_loop().call_later(0.01, turns.put_nowait, "turn 2")
        await asyncio.wait_for(wrapped(_NoSlot(), None), 5)
        assert turns.get_nowait() == "turn 2"

    async def rolled_back() -> None:
        wrapped = slot_wait.waiting(RollsBack.try_issue_credit, safety_wake_s=30)
        await asyncio.wait_for(wrapped(RollsBack(), None), 0.2)

    _run(queued())
    with pytest.raises(asyncio.TimeoutError):
        _run(rolled_back())


def test_a_free_slot_is_issued_without_waiting():
    class Free:
        async def try_issue_credit(self, turn):
            return True

    async def scenario() -> bool:
        return await asyncio.wait_for(
            slot_wait.waiting(Free.try_issue_credit, safety_wake_s=30)(Free(), None), 1)

    assert _run(scenario()) is True


def test_another_aiperf_version_runs_unpatched(monkeypatch):
    monkeypatch.setattr(slot_wait.metadata, "version", lambda name: "0.14.0")
    assert slot_wait.apply() == "not applied: aiperf 0.14.0, the patch was read against 0.13.0"


def _in_aiperf_env(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=aiperf_site.aiperf_env({}, **kw), timeout=120, check=True)


CHECK = ("from aiperf.credit.issuer import CreditIssuer\n"
         "from aiperf.timing.strategies.request_rate import RequestRateStrategy as S\n"
         "from aiperf.timing.concurrency import DynamicConcurrencyLimit as L\n"
         "from aiohttp import client_proto\n"
         "m = '" + slot_wait.MARK + "'\n"
         "print(getattr(CreditIssuer.try_issue_credit, m, False),"
         " getattr(L.release, m, False) and getattr(L.set_limit, m, False)"
         " and getattr(S.__init__, m, False),"
         " client_proto.ResponseHandler.data_received.__module__)")


def test_every_aiperf_process_the_project_starts_runs_the_installed_aiperf_patched():
    """sitecustomize applies the slot wait to the installed AIPerf (0.13.0) in any interpreter
    started with aiperf_env; the quick-ACK client only in the bench's diagnostic pass."""
    plain = _in_aiperf_env(CHECK)
    assert plain.stdout.split()[:2] == ["True", "True"]
    assert plain.stdout.split()[2] == "aiohttp.client_proto"
    # what the runner records as the step's `aiperf_patches`, from the same interpreter
    assert aiperf_site.patch_status(plain.stderr) == {"aiperf_slot_wait": "applied"}
    quick = _in_aiperf_env(CHECK, quickack=True)
    assert quick.stdout.split()[2] == "aiperf_quickack"
    assert aiperf_site.patch_status(quick.stderr) == {"aiperf_slot_wait": "applied",
                                                      "aiperf_quickack": "applied"}


def test_the_record_says_not_applied_when_aiperf_did_not_take_it():
    log = ("2026-12-04 INFO starting\n"
           "dynamo-bench: aiperf_slot_wait not applied: aiperf 0.14.0, the patch was read "
           "against 0.13.0\ndynamo-bench: aiperf_slot_wait applied\n")
    assert aiperf_site.patch_status(log) == {
        "aiperf_slot_wait": "not applied: aiperf 0.14.0, the patch was read against 0.13.0"}
    assert aiperf_site.patch_status("AIPerf without the site\n") == {}


def test_the_sitecustomize_it_shadows_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.IMAGE_SITE = 1\n")
    env = aiperf_site.aiperf_env({"PYTHONPATH": str(tmp_path)})
    done = subprocess.run([sys.executable, "-c", "import builtins; print(builtins.IMAGE_SITE)"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr


def test_the_cluster_client_wrapper_gives_aiperf_the_same_files(tmp_path):
    from workloads.targets.aws import k8s_scripts

    child = ("import aiperf_slot_wait, os, sys; print(os.path.dirname(aiperf_slot_wait.__file__));"
             "print(sys.modules.get('sitecustomize').__file__)")
    done = subprocess.run([sys.executable, "-c", k8s_scripts.CLIENT_WRAPPER, str(tmp_path), "--",
                           sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    site, custom = done.stdout.split()
    assert site == k8s_scripts.SITE_DIR and custom.startswith(k8s_scripts.SITE_DIR)
    for name, text in aiperf_site.run_sources().items():
        with open(f"{site}/{name}") as f:
            assert f.read() == text
    assert "dynamo-bench: aiperf_slot_wait" in done.stderr   # the pod log says what it applied
