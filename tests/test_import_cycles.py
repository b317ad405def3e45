"""No import circles anywhere in the package (issue 26 §7).

The import graph is built from the source with :mod:`ast`, not by importing: every ``import`` and
``from ... import`` of an ``isles.*`` module counts, at module level and inside functions (a lazy
import in a function still ties the two modules together), relative imports included. Module
names map to the repository's folders through ``[tool.setuptools] package-dir`` of
``pyproject.toml`` (``isles.algorithms`` -> ``algorithms/``, ...)."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, Path]:
    """``{package name: folder}`` from ``pyproject.toml``'s package-dir mapping, e.g.
    ``{"isles.algorithms": ROOT / "algorithms", ...}``."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: ROOT / folder for name, folder in setup["package-dir"].items()}


def modules() -> dict[str, Path]:
    """``{dotted module name: source file}`` for every ``.py`` file of the package; a package's
    ``__init__.py`` carries the package's own name."""
    found: dict[str, Path] = {}
    for top, folder in package_dirs().items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            name = ".".join((top, *rel))
            # a folder mapped by its own entry (isles.algorithms under isles/) belongs to that entry
            found.setdefault(name, path)
    return found


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name a (possibly relative) ``from`` import refers to."""
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def import_graph() -> dict[str, set[str]]:
    """``{module: {isles modules it imports}}``, from every import statement in the file (module
    level and in functions). ``from pkg import name`` counts as an import of ``pkg.name`` when that
    is a module, else of ``pkg`` (its ``__init__``)."""
    mods = modules()
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in mods else base)
            for target in targets:
                # ``import isles.a.b`` names isles.a.b; keep the longest known module prefix
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: for each strongly connected component of more than one module (Tarjan),
    a shortest circle through each of its modules, e.g. ``[a, b, a]``, without repeats (a circle
    found from another of its modules is the same circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for comp in sorted(comps):
        for start in comp:
            circle = _circle(graph, start, set(comp))
            if frozenset(circle) not in seen:
                seen.add(frozenset(circle))
                found.append(circle)
    return found


def _circle(graph: dict[str, set[str]], start: str, inside: set[str]) -> list[str]:
    """A shortest circle from ``start`` back to itself through the modules ``inside`` (breadth
    first)."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & inside):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return [start]  # unreachable inside a strongly connected component


def test_the_graph_sees_the_package():
    """The scan finds the package's modules and their imports (else the next test passes vacuously)."""
    graph = import_graph()
    assert "isles.islands.coordinator" in graph and "isles.algorithms.de.cuda" in graph
    assert "isles.cli" in graph and "isles.app.job" in graph
    assert sum(len(targets) for targets in graph.values()) > 100


def test_cycles_finds_a_circle():
    """The cycle finder reports a circle of three and ignores a chain."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"b"}}  # two circles through b
    assert cycles(graph) == [["a", "b", "a"], ["c", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """No module imports itself through others, counting imports inside functions."""
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)
