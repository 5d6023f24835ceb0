"""Session-wide test settings.

The estimate date (EKS version support status, control-plane rate, which versions EKS offers)
is pinned for every in-process call and every subprocess the tests start, so no test changes
with the calendar: 2026-12-01, the EKS catalogue's date
(stacks.catalog.eks_versions.CATALOGUE_DATE). Tests that need another day pass `--as-of` / `on=`
explicitly.
"""

from __future__ import annotations

import os

import pytest

from stacks.catalog.eks_versions import AS_OF_ENV, CATALOGUE_DATE

os.environ[AS_OF_ENV] = CATALOGUE_DATE.isoformat()
# `stacks check` asks the engine's parsers (one process of ~10 s per new command line) only in
# the tests of that step (tests/test_engine_parse.py turn it on); the others vary stacks by the
# hundred and test the rules that need no engine.
os.environ.setdefault("DYNAMO_BENCH_ENGINE_PARSE", "off")
# Likewise the runner's and the forecasts' DynoSim simulation of a stack's plan (seconds per
# stack, workloads/sim/record.py): on only in the tests of that path (tests/test_sim_forecast.py
# and the others that set DYNAMO_BENCH_SIMULATE themselves); elsewhere the record says it was
# switched off and a forecast falls back to the predicted ITL, as it does without the engine.
os.environ.setdefault("DYNAMO_BENCH_SIMULATE", "off")


# --- what the `engine`, `prometheus` and `parsers` markers require ---------------------------
# A test that starts the local Dynamo engine carries `@pytest.mark.engine`, one that starts
# Prometheus (or runs promtool) `@pytest.mark.prometheus`, one that asks the engine's parsers
# (.venv-parsers) `@pytest.mark.parsers`, one that runs helm (`make helm`) `@pytest.mark.helm`;
# the marker alone says what it needs.
# Missing, a local run skips it with the fix; in CI (CI=true, which .ci/run sets) the run fails,
# so a machine without the engine or Prometheus never goes green on the tests that need them.
# tests/test_test_hygiene.py checks every test that starts one carries its marker.

def _missing_for(marker: str) -> str | None:
    from engine_support import (
        missing_engine,
        missing_parsers,
        missing_predictor,
        missing_prometheus,
    )
    from helm_install import missing_helm
    return {"engine": missing_engine, "prometheus": missing_prometheus,
            "parsers": missing_parsers, "predictor": missing_predictor,
            "helm": missing_helm}[marker]()


def pytest_runtest_setup(item) -> None:
    from engine_support import IN_CI

    for marker in ("engine", "prometheus", "parsers", "predictor", "helm"):
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
# The tests that run the runner on the local engine (`load`) start first, in two lanes named by
# their marker (`pytest.mark.load(1)`): a lane's tests run one after another on one worker, so
# no three engines run at once (they are CPU-heavy: AIPerf builds every step's prompts), and
# the third worker runs the rest meanwhile. The lanes are balanced by measured time: 1 = the
# routing pair, the runner's two fault runs and the simulated run (334 s in the run below),
# 2 = the runner's run of every workload, the rehearsal and the calibration's rehearsal (401 s;
# with the calibration in lane 1: 454 s against 281). Every other file stays whole on one
# worker, its module fixtures made once (as --dist loadfile would). The Makefile passes
# --no-loadscope-reorder, or xdist would queue the groups by test count and start the lanes
# (few, long tests) late.
# After the lanes, the longest files go first (longest-processing-time-first), so the run does
# not end with one worker alone on a long file: each file's seconds in the suite's run of
# 2026-12-06 (-n 3, cold AIPerf and predictor caches, a load average of 6-14 from other work
# beside it; files of 20 s or more, every other file keeps its place after them).
# Only the order depends on these figures.
FILE_SECONDS = {
    "test_campaign_fake.py": 360, "test_engine_parse.py": 279, "test_engine_parse_pod.py": 184,
    "test_explore_engine.py": 178, "test_stack_file.py": 176, "test_predict.py": 168,
    "test_plan_resolution.py": 80, "test_preflight_refusals.py": 72,
    "test_reports_cost_scope.py": 72, "test_infra_k8s_objects.py": 70,
    "test_predict_corrections.py": 61, "test_reports_client_provenance.py": 56,
    "test_infra_stability.py": 56, "test_sim_plan_rows.py": 48, "test_campaign_identity.py": 48,
    "test_aws_audit.py": 47, "test_engine_parse_program.py": 47, "test_trace_replay.py": 42,
    "test_reports_browser.py": 42, "test_attest_engine.py": 42, "test_explore_search.py": 39,
    "test_sim_vllm_defaults.py": 39, "test_aiperf_site.py": 38, "test_mutation_tags.py": 37,
    "test_recipes_graph.py": 35, "test_local_engine.py": 33, "test_preflight.py": 31,
    "test_docs_commands.py": 30, "test_attest_fake.py": 30, "test_reports_timing_words.py": 26,
    "test_reports_plots.py": 25, "test_aws_audit_rules.py": 25, "test_aws_target_run.py": 23,
    "test_sim_record.py": 22, "test_infra_recipes.py": 22, "test_aws_target_fake.py": 22,
    "test_simulated_vs_measured.py": 22, "test_reports_tables.py": 21,
    "test_promql_prometheus.py": 21, "test_k8s_specs.py": 21, "test_bands.py": 20,
    "test_reports_cli.py": 20, "test_reports_fault.py": 20,
}


def run_order(item, waiting: frozenset[str] = frozenset()) -> tuple[bool, bool, int]:
    """Load lanes first, then files by their measured seconds, longest first (a stable sort:
    collection order otherwise); the files in `waiting` (those with a `parsers` test: `make
    test` builds the parser environments while the tests run) last, whole."""
    path = item.nodeid.split("::")[0]
    return (item.get_closest_marker("load") is None, path in waiting,
            -FILE_SECONDS.get(path.rsplit("/", 1)[-1], 0))


def xdist_group_of(item) -> str:
    lane = item.get_closest_marker("load")
    if lane is None:
        return item.nodeid.split("::")[0]
    return f"load-{lane.args[0] if lane.args else 'default'}"


@pytest.hookimpl(tryfirst=True)    # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    waiting = frozenset(i.nodeid.split("::")[0] for i in items
                        if i.get_closest_marker("parsers") is not None)
    items.sort(key=lambda item: run_order(item, waiting))
    if not config.pluginmanager.hasplugin("xdist"):     # -p no:xdist: no groups to read
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))
