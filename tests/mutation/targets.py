"""What `make mutate` mutates, and which tests it runs against each group of modules.

The modules are those whose output is a figure or a decision a user reads: SLO / goodput /
SLA verdicts, request and step classification and error counting, GPU memory and KV
arithmetic, cost estimate and forecast, cost tags and their guards, pre-flight's core checks,
the datasets' exact shares. Each group runs in its own mutmut work directory with a targeted
test selection: fast in-process unit tests (no engine, no Prometheus, no Pulumi program under
mocks, no sweep of every refusal through the CLI), so a group takes minutes on 2 cores. The
slower tests of the same code (tests/test_infra_tags.py, tests/test_preflight_refusals.py, ...)
still run in `make test`; the score says what the targeted tests alone catch.

mutmut forks each mutant's test run from the process that already ran the selection. Tests
under Pulumi mocks start a gRPC server a fork cannot copy: a forked child hangs until mutmut's
wall-clock limit and counts as a "timeout", i.e. killed, which is no kill. So no selection here
runs the Pulumi program (mutmut's `process_isolation = "forkserver"` would avoid the hang, at
the cost of re-running each test's setup in a fresh process).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    name: str
    modules: tuple[str, ...]   # repo-relative paths of the files mutmut mutates
    tests: tuple[str, ...]     # the pytest selection every mutant of the group runs against


GROUPS: tuple[Group, ...] = (
    Group("slo",
          ("reports/tables/goodput.py", "reports/tables/sla.py"),
          ("tests/test_mutation_slo.py", "tests/test_reports_units.py",
           "tests/test_reports_sla.py")),
    Group("outcomes",
          ("workloads/outcomes.py", "workloads/results.py", "reports/records/flags.py"),
          ("tests/test_mutation_outcomes.py", "tests/test_outcomes.py",
           "tests/test_runner_records.py", "tests/test_reports_decode_only.py")),
    Group("memory",
          ("stacks/sizing/memory.py",),
          ("tests/test_mutation_memory.py", "tests/test_memory.py",
           "tests/test_recipes_memory.py")),
    Group("cost",
          ("stacks/sizing/estimate.py", "stacks/plan/forecast.py"),
          ("tests/test_mutation_cost.py", "tests/test_estimate.py", "tests/test_forecast.py",
           "tests/test_step_itl.py")),
    Group("tags",
          ("components/tags.py", "stacks/preflight/aws_checks.py"),
          ("tests/test_mutation_tags.py",)),
    Group("preflight",
          ("stacks/preflight/run.py", "stacks/preflight/serving_checks.py",
           "stacks/preflight/worker_checks.py"),
          ("tests/test_mutation_preflight.py", "tests/test_mutation_preflight_workers.py",
           "tests/test_mutation_preflight_run.py", "tests/test_preflight.py",
           "tests/test_preflight_units.py")),
    Group("datasets",
          ("workloads/datasets.py",),
          ("tests/test_mutation_datasets.py", "tests/test_workloads_datasets.py",
           "tests/test_workloads_steps.py")),
)

# A module passes when at least this share of its non-equivalent mutants is killed.
MIN_SCORE = 0.90


def group(name: str) -> Group:
    for g in GROUPS:
        if g.name == name:
            return g
    raise KeyError(f"no mutation group '{name}': use one of {', '.join(g.name for g in GROUPS)}")
