"""The project's import graph, read from the source (ast, no import runs): no cycles among its
modules and dependencies pointing one way (stacks <- components; stacks <- workloads <- reports).

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
                   if d.split(".")[0] not in LAYERS[m.split(".")[0]] | {m.split(".")[0]})
    assert not wrong


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
