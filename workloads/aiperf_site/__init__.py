"""The Python start-up files every AIPerf process the project runs loads (sitecustomize.py):
AIPerf 0.13.0 with its concurrency loop waiting for free slots instead of polling
(aiperf_slot_wait.py), and, in `make bench`'s diagnostic pass only, a client that ACKs at once
(aiperf_quickack.py). This module puts them in AIPerf's environment (local runs) and hands
their source to the cluster Job's client wrapper (workloads/targets/aws/k8s_scripts.py)."""

from __future__ import annotations

import os
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
# What a run puts in AIPerf's interpreter: the files the cluster wrapper writes into the pod.
RUN_FILES = ("sitecustomize.py", "aiperf_slot_wait.py")
QUICKACK_ENV = "DYNAMO_BENCH_AIPERF_QUICKACK"
# The run record's words for what AIPerf ran with (each step's `aiperf_patches`).
PATCHES = ("slot wait: the concurrency loop awaits a free slot instead of polling "
           "(workloads/aiperf_site/aiperf_slot_wait.py)",)


def aiperf_env(env: dict[str, str], *, quickack: bool = False) -> dict[str, str]:
    """`env` with the site folder first on PYTHONPATH (and the quick-ACK switch when asked)."""
    out = {**env, "PYTHONPATH": os.pathsep.join(
        [str(SITE_DIR), *filter(None, [env.get("PYTHONPATH")])])}
    if quickack:
        out[QUICKACK_ENV] = "1"
    else:
        out.pop(QUICKACK_ENV, None)
    return out


def run_sources() -> dict[str, str]:
    """{file name: source} of the files a run's AIPerf loads (RUN_FILES)."""
    return {name: (SITE_DIR / name).read_text() for name in RUN_FILES}
