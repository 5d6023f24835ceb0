"""Loaded by Python's `site` module in every AIPerf process the project starts: this folder is
first on AIPerf's PYTHONPATH (workloads/aiperf_site/__init__.py `aiperf_env` locally; on a
cluster the Job's client wrapper writes these files into the pod, k8s_scripts.CLIENT_WRAPPER).
AIPerf forks its services from the process that loaded it, so every service runs patched.

- aiperf_slot_wait: AIPerf's concurrency loop waits for a free slot instead of polling for one
  (every run).
- aiperf_quickack: the client ACKs at once (`make bench`'s diagnostic pass only, when its
  SWITCH_ENV is 1).

A failure to apply is printed and never stops AIPerf. Imported by name, not as a package:
inside AIPerf this folder is a plain entry of sys.path. Python loads one `sitecustomize`, the
first on sys.path, so the one this file shadows (an image's or a distribution's own) is run
after it."""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

# One line per file on stderr (AIPerf's log, which the runner keeps as the step's aiperf.log):
# `dynamo-bench: <name> <applied | already applied | not applied: why>`; the step record's
# `aiperf_patches` is read from it (workloads/aiperf_site/__init__.py `patch_status`).
for _name in ("aiperf_slot_wait", "aiperf_quickack"):
    try:
        _module = importlib.import_module(_name)
        _switch = getattr(_module, "SWITCH_ENV", None)
        if _switch is not None and os.environ.get(_switch) != "1":
            continue
        _status = _module.apply()
    except Exception as exc:  # noqa: BLE001 - never break the interpreter AIPerf runs in
        _status = f"not applied: {exc!r}"
    print(f"dynamo-bench: {_name} {_status}", file=sys.stderr)

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    try:
        _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
    except Exception as exc:  # noqa: BLE001 - as Python's own site module does
        print(f"dynamo-bench: the shadowed sitecustomize {_spec.origin} failed: {exc!r}",
              file=sys.stderr)
