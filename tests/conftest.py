"""Session-wide test settings.

The estimate date (EKS version support status, control-plane rate, which versions EKS offers)
is pinned for every in-process call and every subprocess the tests start, so no test changes
with the calendar: 2026-12-01, the EKS catalogue's date (stacks.eks_versions.CATALOGUE_DATE).
Tests that need another day pass `--as-of` / `on=` explicitly.
"""

from __future__ import annotations

import os

import pytest

from stacks.eks_versions import AS_OF_ENV, CATALOGUE_DATE

os.environ[AS_OF_ENV] = CATALOGUE_DATE.isoformat()


# --- what the `engine` and `prometheus` markers require ----------------------------------------
# A test that starts the local Dynamo engine carries `@pytest.mark.engine`, one that starts
# Prometheus (or runs promtool) `@pytest.mark.prometheus`; the marker alone says what it needs.
# Missing, a local run skips it with the fix; in CI (CI=true, which .ci/run sets) the run fails,
# so a machine without the engine or Prometheus never goes green on the tests that need them.
# tests/test_test_hygiene.py checks every test that starts one carries its marker.

def _missing_for(marker: str) -> str | None:
    from engine_support import missing_engine, missing_prometheus
    return {"engine": missing_engine, "prometheus": missing_prometheus}[marker]()


def pytest_runtest_setup(item) -> None:
    from engine_support import IN_CI

    for marker in ("engine", "prometheus"):
        if item.get_closest_marker(marker) is None:
            continue
        missing = _missing_for(marker)
        if missing is None:
            continue
        if IN_CI:
            pytest.fail(f"CI run: {missing}; a `{marker}` test must run in CI, not skip",
                        pytrace=False)
        pytest.skip(missing)


# --- which pytest-xdist worker runs what (`make test`: -n 3 --dist loadgroup) ------------------
# Every test that runs the runner on the local engine (`load`: AIPerf steps whose timings and
# hit rates are measurements) runs on one worker, one after another, first: no two measured
# runs overlap, and while they wait on real time (load steps, think time) the other workers run
# the rest. Every other file stays whole on one worker, its module fixtures made once (as
# --dist loadfile would). The Makefile passes --no-loadscope-reorder, or xdist would queue the
# groups by test count and start the load group (few, long tests) late.
LOAD_GROUP = "load"


def xdist_group_of(item) -> str:
    return LOAD_GROUP if item.get_closest_marker("load") else item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)    # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    items.sort(key=lambda item: xdist_group_of(item) != LOAD_GROUP)   # stable: load first
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))
