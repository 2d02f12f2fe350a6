"""No module of the package takes part in an import cycle (lazy and TYPE_CHECKING imports count).

`lint-imports` (contracts in pyproject.toml) checks layers and cycles between sibling modules;
this also catches a cycle through a package's own `__init__` (a module importing its package,
which imports it back), which no sibling contract sees. Imports the `no-cycles` contract ignores
are ignored here too, so both checks agree.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = "artifactflow"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _ignored_imports() -> list[tuple[str, str]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "no-cycles")
    pairs = (line.split("->") for line in contract.get("ignore_imports", []))
    return [(a.strip(), b.strip()) for a, b in pairs]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_import_cycles():
    graph = grimp.build_graph(ROOT, include_external_packages=False)
    for importer, imported in _ignored_imports():
        graph.remove_import(importer=importer, imported=imported)
    assert _cycles(graph) == []


def test_the_check_sees_a_cycle():
    graph = grimp.build_graph(ROOT, include_external_packages=False)
    graph.add_import(importer=f"{ROOT}.errors", imported=f"{ROOT}.settings")
    assert [f"{ROOT}.errors", f"{ROOT}.settings"] in _cycles(graph)
