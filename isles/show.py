"""``python -m isles show PATH`` (and ``isles show PATH``): print a run's ``best_solution.json``.

``PATH`` is the file, or the run's output folder that holds it (``outputs/DATE/TIME``; the result
line names the file). Every variable of x is printed at full precision (Python's shortest
round-trip form of the float), with f, the constraints, feasibility, evaluations and seed; what
the run's end-of-run report could not compute is printed as it was marked (``not_computed``).
Exit status: 0, or 2 with one line when PATH holds no ``best_solution.json``, or one whose fields
are not what isles writes (``x`` not a list of numbers, ...: :func:`isles.app.run_files.check_solution`).
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from isles.app.run_files import read_solution

USAGE = "usage: python -m isles show PATH  (a best_solution.json, or a run's output folder)"


def _value(v) -> str:
    """A value at full precision: floats by ``repr`` (round-trip), ``None`` as ``null``."""
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(e) for e in v) + "]"
    return str(v)


def solution_table(file: str, record: dict) -> Table:
    """The record of ``best_solution.json`` (:func:`isles.app.report.solution_record`) as a rich
    table: the scalar fields first (``f``, ``feasible``, ..., ``not_computed``), then ``g`` (an
    equality constraint's row marked ``h = 0``), then ``x1``..``xD`` at full precision."""
    table = Table(title=f"best solution: {file}", show_header=True)
    table.add_column("field")
    table.add_column("value", justify="right", overflow="fold")
    config = record.get("config") or {}
    problem = (config.get("problem") or {}).get("_target_") if isinstance(config, dict) else None
    if problem:
        table.add_row("problem", str(problem))
    for key in (
        "f",
        "feasible",
        "max_normalised_violation",
        "in_bounds",
        "run_best_f",
        "run_best_v",
        "eq_tol",
        "evaluations",
        "generations",
        "seed",
        "not_computed",
    ):
        if key in record and (record[key] is not None or key in ("f", "feasible")):
            table.add_row(key, _value(record[key]))
    types = record.get("g_type") or []
    for i, g in enumerate(record.get("g") or []):  # an equality's value is h (feasible: |h| <= eq_tol)
        eq = i < len(types) and types[i] == "equality"
        table.add_row(f"g{i + 1} (h = 0)" if eq else f"g{i + 1}", _value(g))
    if record.get("genome_words_hex"):
        table.add_row("genome (hex words)", " ".join(record["genome_words_hex"]))
    for i, x in enumerate(record["x"]):
        table.add_row(f"x{i + 1}", _value(x))
    return table


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Print the ``best_solution.json`` that ``argv`` (``[PATH]``) names; return the exit status
    (0, or 2 with one ``isles: error:`` line on stderr)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if argv[:1] not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    try:
        file, record = read_solution(argv[0])
    except ValueError as err:
        print(f"isles: error: {err}", file=sys.stderr)
        return 2
    console = console or Console(soft_wrap=False)
    console.print(solution_table(file, record))
    return 0
