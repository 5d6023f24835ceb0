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


def patch_status(aiperf_log: str) -> dict[str, str]:
    """{file: what sitecustomize said of it} from an AIPerf log: what the step really ran
    with. Empty when AIPerf never started the site (then nothing was applied)."""
    out: dict[str, str] = {}
    for line in aiperf_log.splitlines():
        m = _STATUS.match(line.strip())
        if m:
            out.setdefault(m[1], m[2])
    return out
