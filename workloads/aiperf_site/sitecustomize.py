"""Loaded by Python's `site` module in every AIPerf process the project starts: this folder is
first on AIPerf's PYTHONPATH (workloads/aiperf_site/__init__.py `aiperf_env` locally; on a
cluster the Job's client wrapper writes these files into the pod, k8s_scripts.CLIENT_WRAPPER).
AIPerf forks its services from the process that loaded it, so every service runs patched.

- aiperf_slot_wait: AIPerf's concurrency loop waits for a free slot instead of polling for one
  (every run).
- aiperf_quickack: the client ACKs at once (`make bench`'s diagnostic pass only, when
  DYNAMO_BENCH_AIPERF_QUICKACK=1).

A failure to apply is printed and never stops AIPerf. Imported by name, not as a package:
inside AIPerf this folder is a plain entry of sys.path."""

import importlib
import os
import sys

for _name, _env in (("aiperf_slot_wait", None),
                    ("aiperf_quickack", "DYNAMO_BENCH_AIPERF_QUICKACK")):
    if _env is not None and os.environ.get(_env) != "1":
        continue
    try:
        _status = importlib.import_module(_name).apply()
        if _status.startswith("not applied"):
            print(f"dynamo-bench: {_name} {_status}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - never break the interpreter AIPerf runs in
        print(f"dynamo-bench: {_name} not applied: {exc!r}", file=sys.stderr)
