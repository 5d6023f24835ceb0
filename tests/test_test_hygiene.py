"""The tests' own hygiene, read from their source (ast), so a test cannot pass for the wrong
reason:
- every test that starts the local engine or Prometheus carries its marker (`engine` /
  `prometheus`), so `-m "not engine"` really leaves them out and CI fails them when the engine
  or Prometheus is missing instead of letting them skip (conftest.py); every test that runs the
  runner on it carries `load`, so `make test` runs it in a load lane (conftest.py);
- nothing waits with a bare `time.sleep`: waiting for a scrape, for load or for a process
  polls with a deadline (engine_support.wait_for);
- no assert that cannot fail (`assert SomeClass`, an assert on a constant, a string or a tuple).
Each rule is also run on a planted offender, so the checks themselves are seen to fail.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# What starts the local engine: the helpers that start it or the runner on a local stack, and
# the engine environment's interpreter.
ENGINE_NAMES = {"start_local", "LocalTarget", "start_runner", "runner_cmd", "ENGINE_PYTHON"}
ENGINE_PATH = ".venv-engine"
PROMETHEUS_BINARIES = {"prometheus", "promtool"}
# What runs the runner (AIPerf load) on the local engine: its command, its start, its
# environment (engine_support).
LOAD_NAMES = {"runner_cmd", "start_runner", "runner_env"}
# The one place allowed to sleep: the poll loop with a deadline.
POLL_HELPERS = {("engine_support.py", "wait_for")}


def _sources() -> list[Path]:
    """Every test source but this file (whose planted offenders are data)."""
    return sorted(p for p in TESTS.rglob("*.py")
                  if "fixtures" not in p.parts and p.name != Path(__file__).name)


def _names(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names or
               isinstance(n, ast.Attribute) and n.attr in names for n in ast.walk(node))


def _starts_engine(node: ast.AST) -> bool:
    return _names(node, ENGINE_NAMES) or any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and ENGINE_PATH in n.value
        for n in ast.walk(node))


def _runs_load(node: ast.AST) -> bool:
    return _names(node, LOAD_NAMES)


def _starts_prometheus(node: ast.AST) -> bool:
    """A lookup of the prometheus / promtool binary (shutil.which), the way a test finds it."""
    for n in ast.walk(node):
        if (isinstance(n, ast.Call) and ast.unparse(n.func) in ("shutil.which", "which")
                and n.args and isinstance(n.args[0], ast.Constant)
                and n.args[0].value in PROMETHEUS_BINARIES):
            return True
    return False


STARTERS = {"engine": _starts_engine, "prometheus": _starts_prometheus, "load": _runs_load}


@dataclass
class Module:
    path: str
    tree: ast.Module
    defs: dict[str, ast.AST] = field(default_factory=dict)   # module-level name -> node

    @classmethod
    def parse(cls, path: str, source: str) -> Module:
        tree = ast.parse(source)
        m = cls(path, tree)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                m.defs[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        m.defs[t.id] = node
        return m

    def starting(self, kind: str) -> set[str]:
        """Module-level names whose code starts `kind`, directly or through another."""
        found = {n for n, node in self.defs.items() if STARTERS[kind](node)}
        while True:
            more = {n for n, node in self.defs.items() if n not in found and any(
                isinstance(x, ast.Name) and x.id in found for x in ast.walk(node))}
            if not more:
                return found
            found |= more


def _marked(module: Module, kind: str, *nodes: ast.AST) -> bool:
    """A decorator of the test (or its class) or the module's `pytestmark` names the marker
    (directly, or through a module-level alias such as `needs_engine = pytest.mark.engine`)."""
    aliases = {n for n, node in module.defs.items()
               if isinstance(node, ast.Assign) and f"mark.{kind}" in ast.unparse(node.value)}
    if kind == "engine" and "needs_engine" not in module.defs:
        aliases.add("needs_engine")   # imported: engine_support's alias of the marker

    def says(expr: ast.AST) -> bool:
        text = ast.unparse(expr)
        return f"mark.{kind}" in text or any(
            isinstance(x, ast.Name) and x.id in aliases for x in ast.walk(expr))

    pytestmark = module.defs.get("pytestmark")
    if isinstance(pytestmark, ast.Assign) and says(pytestmark.value):
        return True
    return any(says(d) for node in nodes for d in getattr(node, "decorator_list", []))


def _tests(tree: ast.Module):
    """(test function, its class or None) of a module."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name.startswith("test"):
            yield node, None
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        item.name.startswith("test"):
                    yield item, node


def unmarked_starters(path: str, source: str) -> list[str]:
    """Tests that start the engine or Prometheus (themselves, through a module-level helper or
    fixture) without the marker."""
    module = Module.parse(path, source)
    out = []
    for kind, starts in STARTERS.items():
        starting = module.starting(kind)
        for test, cls in _tests(module.tree):
            used = {x.id for x in ast.walk(test) if isinstance(x, ast.Name)}
            used |= {a.arg for a in test.args.args}            # fixtures by name
            if (starts(test) or used & starting) and not _marked(module, kind, test, cls):
                out.append(f"{path}::{test.name} starts {kind} without @pytest.mark.{kind}")
    return out


def bare_sleeps(path: str, source: str) -> list[str]:
    """`time.sleep` (or a `sleep` imported from time) outside the poll helper."""
    tree = ast.parse(source)
    enclosing: dict[ast.AST, str] = {}   # call -> name of the innermost function holding it
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(func):
                enclosing[n] = func.name   # inner functions are walked later and win
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and ast.unparse(n.func) in ("time.sleep", "sleep"):
            name = enclosing.get(n, "<module>")
            if (Path(path).name, name) not in POLL_HELPERS:
                out.append(f"{path}:{n.lineno} {name}() sleeps: poll with a deadline "
                           "(engine_support.wait_for)")
    return out


def dead_asserts(path: str, source: str) -> list[str]:
    """Asserts that hold whatever the code does."""
    module = Module.parse(path, source)
    imported = {(a.asname or a.name).split(".")[0] for node in ast.walk(module.tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    always_true = imported | {n for n, d in module.defs.items()
                              if isinstance(d, (ast.FunctionDef, ast.ClassDef))}
    out = []
    for func in ast.walk(module.tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local = {x.id for x in ast.walk(func) if isinstance(x, ast.Name)
                 and isinstance(x.ctx, ast.Store)} | {a.arg for a in func.args.args}
        for n in ast.walk(func):
            if not isinstance(n, ast.Assert):
                continue
            t = n.test
            why = None
            if isinstance(t, (ast.Constant, ast.JoinedStr)):
                why = "asserts a constant"
            elif isinstance(t, ast.Tuple) and t.elts:
                why = "asserts a tuple (always true)"
            elif isinstance(t, ast.Name) and t.id in always_true and t.id not in local:
                why = f"asserts '{t.id}', a class, function or import (always true)"
            elif isinstance(t, ast.Compare) and all(
                    isinstance(x, ast.Constant) for x in [t.left, *t.comparators]):
                why = "compares constants"
            if why:
                out.append(f"{path}:{n.lineno} {why}")
    return out


def _scan(check) -> list[str]:
    return [f for p in _sources() for f in check(str(p.relative_to(TESTS)), p.read_text())]


def test_every_engine_prometheus_or_load_test_carries_its_marker():
    assert _scan(unmarked_starters) == []


def test_no_test_waits_with_a_bare_sleep():
    assert _scan(bare_sleeps) == []


def test_no_assert_that_cannot_fail():
    assert _scan(dead_asserts) == []


# --- the checks fail on planted offenders -------------------------------------------------------

UNMARKED = '''
import shutil
import pytest
from engine_support import runner_env, start_local

PROMETHEUS = shutil.which("prometheus")

@pytest.fixture
def engine(tmp_path):
    return start_local(tmp_path, "t", workers=[])

def test_through_a_fixture(engine):
    assert engine.endpoints()

def test_directly(tmp_path):
    assert start_local(tmp_path, "t", workers=[])

def test_prometheus():
    assert PROMETHEUS.endswith("prometheus")

@pytest.mark.engine
def test_marked(engine):
    assert engine.endpoints()

@pytest.mark.engine
def test_runner(tmp_path):
    assert runner_env(tmp_path)
'''


def test_the_marker_check_finds_unmarked_starters():
    found = unmarked_starters("test_x.py", UNMARKED)
    assert found == ["test_x.py::test_through_a_fixture starts engine without "
                     "@pytest.mark.engine",
                     "test_x.py::test_directly starts engine without @pytest.mark.engine",
                     "test_x.py::test_prometheus starts prometheus without "
                     "@pytest.mark.prometheus",
                     "test_x.py::test_runner starts load without @pytest.mark.load"]
    marked = "pytestmark = [pytest.mark.engine, pytest.mark.prometheus, pytest.mark.load]\n" \
        + UNMARKED
    assert unmarked_starters("test_x.py", marked) == []
    # a local `needs_engine` that only skips is no marker
    skip_only = UNMARKED.replace("@pytest.mark.engine", "@needs_engine") + (
        "needs_engine = pytest.mark.skipif(True, reason='no engine')\n")
    assert "test_x.py::test_marked starts engine without @pytest.mark.engine" in \
        unmarked_starters("test_x.py", skip_only)


@pytest.mark.parametrize("source, expected", [
    ("import time\ndef test_x():\n    time.sleep(2)\n", 1),
    ("from time import sleep\ndef helper():\n    sleep(1)\n", 1),
    ("import time\ndef wait_for(p):\n    time.sleep(1)\n", 1),   # only engine_support's
    ("def test_x(clock):\n    clock.sleep(5)\n", 0),              # a fake clock's sleep
])
def test_the_sleep_check_finds_bare_sleeps(source, expected):
    assert len(bare_sleeps("test_x.py", source)) == expected


@pytest.mark.parametrize("source, expected", [
    ("from m import JobExecutor\ndef test_x():\n    assert JobExecutor\n", 1),
    ("class A: ...\ndef test_x():\n    assert A\n", 1),
    ("def test_x():\n    assert 'never empty'\n", 1),
    ("def test_x(v):\n    assert (v == 1, 'message')\n", 1),
    ("def test_x():\n    assert 2 > 1\n", 1),
    ("def test_x():\n    assert f'{1}'\n", 1),
    ("from m import f\ndef test_x():\n    assert f() == 1\n", 0),
    ("from m import make\ndef test_x():\n    make = make()\n    assert make\n", 0),
])
def test_the_dead_assert_check_finds_asserts_that_cannot_fail(source, expected):
    assert len(dead_asserts("test_x.py", source)) == expected
