"""The Python start-up files every AIPerf process the project runs loads (sitecustomize.py):
AIPerf 0.13.0 with its concurrency loop waiting for free slots instead of polling
(aiperf_slot_wait.py), and, in `make bench`'s diagnostic pass only, a client that ACKs at once
(aiperf_quickack.py). This module puts them in AIPerf's environment (local runs) and hands
their source to the cluster Job's client wrapper (workloads/targets/aws/k8s_scripts.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from workloads.aiperf_site import aiperf_quickack

SITE_DIR = Path(__file__).resolve().parent
# What a run puts in AIPerf's interpreter: the files the cluster wrapper writes into the pod.
RUN_FILES = ("sitecustomize.py", "aiperf_slot_wait.py", "aiperf_quickack.py")
SLOT_WAIT, QUICKACK = "aiperf_slot_wait", "aiperf_quickack"
APPLIED = frozenset({"applied", "already applied"})
# What an AIPerf log without any status line means: its interpreter never loaded this folder's
# sitecustomize.py (PYTHONPATH dropped or overridden by a launcher or an image's entrypoint), or
# the log itself was not read (a cluster pod's log unavailable): either way nothing proves the
# patch ran.
NO_SITE = ("not applied: AIPerf's log has no status line (its interpreter did not load the "
           "project's sitecustomize, PYTHONPATH dropped or overridden, or its log was not read)")
_STATUS = re.compile(r"^dynamo-bench: (aiperf_\w+) (applied|already applied|not applied: .*)$")


def aiperf_env(env: dict[str, str], *, quickack: bool = False) -> dict[str, str]:
    """`env` with the site folder first on PYTHONPATH (and the quick-ACK switch when asked)."""
    out = {**env, "PYTHONPATH": os.pathsep.join(
        [str(SITE_DIR), *filter(None, [env.get("PYTHONPATH")])])}
    if quickack:
        out[aiperf_quickack.SWITCH_ENV] = "1"
    else:
        out.pop(aiperf_quickack.SWITCH_ENV, None)
    return out


def run_sources() -> dict[str, str]:
    """{file name: source} of the files a run's AIPerf loads (RUN_FILES)."""
    return {name: (SITE_DIR / name).read_text() for name in RUN_FILES}


def patch_problems(status: dict[str, str], *, quickack: bool = False) -> list[str]:
    """What is wrong with one AIPerf process's patches (`patch_status` of its log) for its
    pass (pure): the slot wait must have applied in every pass; the quick-ACK client must have
    applied in `make bench`'s diagnostic pass (`quickack`) and must be absent from any other,
    where the client is AIPerf's own. Empty when the process ran as it should."""
    out = []
    slot = status.get(SLOT_WAIT, NO_SITE)
    if slot not in APPLIED:
        out.append(f"slot wait {slot}")
    ack = status.get(QUICKACK)
    if quickack and ack not in APPLIED:
        out.append(f"quick-ACK client {ack or NO_SITE}")
    elif not quickack and ack is not None:
        out.append(f"quick-ACK client {ack}: the bench's diagnostic client ran, not AIPerf's own")
    return out


def patch_status(aiperf_log: str) -> dict[str, str]:
    """{file: what sitecustomize said of it} from an AIPerf log: what the step really ran
    with. Empty when AIPerf never started the site (then nothing was applied)."""
    out: dict[str, str] = {}
    for line in aiperf_log.splitlines():
        m = _STATUS.match(line.strip())
        if m:
            out.setdefault(m[1], m[2])
    return out
