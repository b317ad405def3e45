"""The benchmarks import one another without a circle (issue 36 §4): what two of them share lives in
a module both import (e.g. benchmarks/cec_common.py for the CEC 2014 harness)."""

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def imports() -> dict:
    """``{module: {benchmark modules it imports}}``, read from the files (imports inside functions too)."""
    out = {}
    for path in sorted(BENCHMARKS.glob("*.py")):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
                found.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("benchmarks.")}
        out[path.stem] = found - {path.stem}  # a script importing its own module by name (pickles) is no circle
    return out


def test_no_benchmark_imports_itself_through_others():
    graph = imports()
    circles = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m == start:
                circles.append(start)
                break
            if m not in seen:
                seen.add(m)
                todo += graph.get(m, ())
    assert circles == []
