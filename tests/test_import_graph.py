"""The project's import graph, read from the source (ast, no import runs): no cycles among its
modules and dependencies pointing one way (stacks <- components; stacks <- workloads <- reports),
also between the rooms inside stacks/ and reports/ (docs/architecture.md).

Every import counts, also those inside functions and `if TYPE_CHECKING:` blocks: a lazy import
still ties the two modules' layers together.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("stacks", "components", "workloads", "reports")
# What each layer may import besides itself.
LAYERS = {"stacks": set(), "components": {"stacks"}, "workloads": {"stacks"},
          "reports": {"workloads", "stacks"}}
# The one exception: the stacks CLI's top modules may run the simulation of a plan
# (workloads/sim/: it replays the plan's datasets, which live in workloads/) for the commands
# that choose or price before anything runs (explore, predict, plan, check). No room of stacks/
# imports it: a room takes the simulated figures, or a function, as an argument.
CLI_SIMULATES = {"stacks.__main__", "stacks.forecast_cli"}


def allowed(module: str, dep: str) -> bool:
    """May `module` import `dep` across packages?"""
    here, there = module.split(".")[0], dep.split(".")[0]
    if there in LAYERS[here] | {here}:
        return True
    return module in CLI_SIMULATES and (dep == "workloads.sim" or dep.startswith("workloads.sim."))
# The rooms inside a package and what each may import of the package's other rooms. A module of
# the package outside every room (the CLI: stacks/__main__.py, stacks/cli.py; the pipeline and CLI
# at reports/ top level: build.py, __main__.py, bench.py) may import any room of its package.
ROOMS = {
    "stacks.catalog": set(),
    "stacks.config": {"stacks.catalog"},
    "stacks.conventions": {"stacks.catalog", "stacks.config"},
    "stacks.sizing": {"stacks.catalog", "stacks.config"},
    # the workers' and frontend's exact command lines, each flag with its stack field
    "stacks.engine_argv": {"stacks.catalog", "stacks.config", "stacks.conventions",
                           "stacks.sizing"},
    "stacks.preflight": {"stacks.catalog", "stacks.config", "stacks.conventions", "stacks.sizing",
                         "stacks.engine_argv"},
    "stacks.plan": {"stacks.catalog", "stacks.config", "stacks.conventions", "stacks.sizing",
                    "stacks.engine_argv", "stacks.preflight"},
    "stacks.render": {"stacks.config"},
    # predictions: the stack's steps and prices in, AIConfigurator's answers out (a subprocess)
    "stacks.predict": {"stacks.catalog", "stacks.config", "stacks.sizing"},
    # the explore: candidates through pre-flight, ranked on simulated figures it is handed (the
    # simulation itself is the CLI's to pass in: no room imports workloads/sim)
    "stacks.explore": {"stacks.catalog", "stacks.config", "stacks.conventions", "stacks.sizing",
                       "stacks.engine_argv", "stacks.preflight", "stacks.predict"},
    # accounting reads stacks/ (prices, the effective cluster), never the result tables
    "reports.accounting": set(),
    # reports/: run folders read into frames <- the plan's tables <- the comparisons and their
    # verdicts <- what a reader sees (report.md, index.html, the plots)
    "reports.records": set(),
    # cost_efficiency prices a step's window with accounting's node_hours
    "reports.tables": {"reports.records", "reports.accounting"},
    "reports.comparisons": {"reports.records", "reports.tables"},
    "reports.render": {"reports.records", "reports.tables", "reports.comparisons"},
}


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """{module: project modules it imports} (`from pkg import mod` counts as pkg.mod)."""
    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in mods.items():
        deps: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {owner(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods
                         else owner(node.module) for a in node.names}
        graph[mod] = {d for d in deps if d and d != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_among_project_modules():
    found = cycles(import_graph(project_modules()))
    assert not found, f"import cycles: {found}"


def test_dependencies_point_one_way():
    graph = import_graph(project_modules())
    wrong = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                   if not allowed(m, d))
    assert not wrong


def test_only_the_stacks_cli_may_run_the_simulation():
    """The exception is the CLI's, for workloads/sim only: a room of stacks/ importing the
    simulation, or the CLI importing the runner, is still refused."""
    assert allowed("stacks.__main__", "workloads.sim.plan_sim")
    assert not allowed("stacks.plan.forecast", "workloads.sim.plan_sim")
    assert not allowed("stacks.__main__", "workloads.runner")
    assert not allowed("stacks.forecast_cli", "reports.tables.tables")


def room_of(module: str) -> str:
    """The room a module lives in, or its package when it is in none (the package's top)."""
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            return room
    return module.split(".")[0]


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one room into another of the same package that ROOMS does not allow; a
    package's top-level modules sit above its rooms and no room may import them."""
    wrong = []
    for mod, deps in graph.items():
        here, pkg = room_of(mod), mod.split(".")[0]
        for dep in deps:
            there = room_of(dep)
            if dep.split(".")[0] != pkg or there == here:
                continue
            if here in ROOMS and there not in ROOMS[here]:
                wrong.append(f"{mod} -> {dep}")
    return sorted(wrong)


def test_rooms_import_only_the_rooms_below_them():
    assert not room_violations(import_graph(project_modules()))


def test_every_room_exists_and_says_what_it_holds():
    """Each room is a package whose docstring says what lives there and what it may import."""
    for room in ROOMS:
        init = ROOT.joinpath(*room.split("."), "__init__.py")
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 200 and "import" in doc.lower(), room


def test_package_tops_hold_only_the_cli_and_the_rooms():
    """stacks/ holds the CLI (its commands, its bad-input rule, the forecast's printing that
    `plan` and `check` share) and its rooms; reports/ holds the CLI, the pipeline that wires its
    rooms (build) and the report-building benchmark (bench)."""
    assert {p.name for p in (ROOT / "stacks").glob("*.py")} == {"__init__.py", "__main__.py",
                                                                 "cli.py", "forecast_cli.py"}
    assert {p.name for p in (ROOT / "reports").glob("*.py")} == {"__init__.py", "__main__.py",
                                                                  "build.py", "bench.py"}
    assert not list((ROOT / "workloads").glob("attest_*.py"))


def test_the_room_rules_catch_planted_wrong_imports(tmp_path):
    """A catalogue fact that imports config, config that imports pre-flight, accounting that
    imports a result table and a run record that imports the report's rendering are each found;
    a room importing one below it is not."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for room in ("catalog", "config", "preflight", "plan"):
        (tmp_path / "stacks" / room).mkdir()
        (tmp_path / "stacks" / room / "__init__.py").write_text("")
    for room in ("accounting", "records", "tables", "render"):
        (tmp_path / "reports" / room).mkdir()
        (tmp_path / "reports" / room / "__init__.py").write_text("")
    (tmp_path / "stacks" / "catalog" / "facts.py").write_text(
        "from stacks.config.schema import StackConfig\n")
    (tmp_path / "stacks" / "config" / "schema.py").write_text(
        "def f():\n    from stacks.preflight import rules\n")
    (tmp_path / "stacks" / "preflight" / "rules.py").write_text(
        "from stacks.catalog import facts\nfrom stacks import cli\n")
    (tmp_path / "stacks" / "plan" / "forecast.py").write_text(
        "from stacks.preflight import rules\n")
    (tmp_path / "stacks" / "cli.py").write_text("from stacks.plan import forecast\n")
    (tmp_path / "reports" / "tables" / "goodput.py").write_text("X = 1\n")
    (tmp_path / "reports" / "accounting" / "audit.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from reports.tables import goodput\n")
    (tmp_path / "reports" / "records" / "runs.py").write_text(
        "def f():\n    from reports.render.markdown import render\n")
    (tmp_path / "reports" / "render" / "markdown.py").write_text(
        "from reports.tables.goodput import X\nfrom reports.records import runs\n")
    graph = import_graph(project_modules(tmp_path))
    assert room_violations(graph) == [
        "reports.accounting.audit -> reports.tables.goodput",
        "reports.records.runs -> reports.render.markdown",
        "stacks.catalog.facts -> stacks.config.schema",
        "stacks.config.schema -> stacks.preflight.rules",
        "stacks.preflight.rules -> stacks.cli",
    ]


def test_the_scan_finds_a_planted_cycle(tmp_path):
    """A TYPE_CHECKING-only import back is a cycle too (components.cluster <-> nodegroups was
    one)."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "components" / "a.py").write_text("from components.b import B\n")
    (tmp_path / "components" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from components import a\n")
    (tmp_path / "reports" / "c.py").write_text("def f():\n    import components.a\n")
    graph = import_graph(project_modules(tmp_path))
    assert cycles(graph) == [["components.a", "components.b"]]
    assert graph["reports.c"] == {"components.a"}
