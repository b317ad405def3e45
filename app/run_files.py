"""What a run writes into its output folder (Hydra's ``outputs/DATE/TIME``), with or without MLflow:

* ``history.csv``: every epoch's record, one row each, appended as the epochs are made
  (:class:`HistoryFiles`; the loops keep only a bounded log of them in memory,
  :class:`isles.islands.results.RecordLog`);
* ``migrations.csv``: every migration, ``epoch,src,dst,accepted,best_f_moved``, appended likewise;
* ``best_solution.json``: the best solution at the end (:class:`SolutionFile`; the record of
  :func:`isles.app.report.solution_record`, which MLflow's artifact of the same name is too).

``python -m isles show PATH`` prints a ``best_solution.json`` (:mod:`isles.show`).
"""

from __future__ import annotations

import json
import os
import sys
import time

from isles.islands.control.callbacks import Callback
from isles.islands.results import CSV, EpochRecord

MIGRATION_HEADER = "epoch,src,dst,accepted,best_f_moved"
SOLUTION_FILE = "best_solution.json"


def history_header(record: EpochRecord) -> list[str]:
    """The columns of ``history.csv`` for records like ``record``: its ``history.csv`` metrics
    (:meth:`isles.islands.results.EpochRecord.metrics`, ``"csv"``), e.g. ``epoch, generation,
    wall_s, ..., island_00_best_f, ...``."""
    return list(record.metrics(CSV))


def history_row(record: EpochRecord, header: list[str]) -> str:
    """One ``history.csv`` line (no newline) of ``record``: its values of the columns ``header``
    (``repr``: every float at full precision; ``None`` where the record lacks one)."""
    values = record.metrics(CSV)
    return ",".join(repr(values.get(k)) for k in header)


def migration_row(migration: tuple) -> str:
    """One ``migrations.csv`` line (no newline) of ``(epoch, src, dst, accepted, best f moved)``."""
    return ",".join("" if v is None else str(v) for v in migration)


class HistoryFiles(Callback):
    """Callback: appends every epoch's record to ``history.csv`` and its migrations to
    ``migrations.csv`` in ``folder`` as the epochs are made (buffered, written out every
    ``flush_s`` seconds and at the end), so that the driver keeps no epoch it has handed on.
    ``migrations.csv`` is made at the first migration. A resumed run appends to the files it finds.

    ``on_end`` closes them and names them in the result (``history_path``, ``migrations_path``);
    ``on_exit`` (:meth:`close`) closes them after a failure or an interrupt (what was made is on disk).
    """

    def __init__(self, folder: str, resumed: bool = False, flush_s: float = 1.0):
        self.folder, self.flush_s = folder, flush_s
        self.mode = "a" if resumed else "w"
        self.history = self.migrations = None
        self._keys, self._last_flush = None, time.monotonic()

    def _open(self, name: str, header: str):
        path = os.path.join(self.folder, name)
        fh = open(path, self.mode, encoding="utf-8")  # noqa: SIM115  (closed by close())
        if fh.tell() == 0:
            fh.write(header + "\n")
        return fh

    def on_epoch(self, rec: EpochRecord) -> None:
        """Append the epoch's row and its migrations."""
        if self.history is None:
            os.makedirs(self.folder, exist_ok=True)
            self._keys = history_header(rec)
            self.history = self._open("history.csv", ",".join(self._keys))
        self.history.write(history_row(rec, self._keys) + "\n")
        if rec.migrations and self.migrations is None:
            self.migrations = self._open("migrations.csv", MIGRATION_HEADER)
        for m in rec.migrations:
            self.migrations.write(migration_row(m) + "\n")
        if time.monotonic() - self._last_flush > self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Write out what is buffered."""
        for fh in (self.history, self.migrations):
            if fh is not None:
                fh.flush()
        self._last_flush = time.monotonic()

    def on_end(self, result) -> None:
        """Close the files; name them in ``result`` (``history_path``, ``migrations_path``)."""
        self.close()
        if self.history is not None:
            result.history_path = self.history.name
        if self.migrations is not None:
            result.migrations_path = self.migrations.name

    def on_exit(self) -> None:
        """Close the files after the run, whatever ended it (:meth:`close`)."""
        self.close()

    def close(self) -> None:
        """Close the files (again: nothing)."""
        for fh in (self.history, self.migrations):
            if fh is not None and not fh.closed:
                fh.close()


class SolutionFile(Callback):
    """Callback: at the end, the record of the best solution
    (:func:`isles.app.report.solution_record`: x, f, g, feasible, evaluations, seed, config;
    what the problem could not re-evaluate is marked ``not_computed``) kept in the result
    (``solution``, which MLflow's ``best_solution.json`` is too) and written to
    ``best_solution.json`` in ``folder`` (``solution_path``). It never fails the run: a file that
    cannot be written is one warning line on stderr. A callback placed before the MLflow tracker.

    Args:
        problem: the run's problem.
        config: the run's resolved config (plain dict), kept in the record.
        folder: the run's output folder, or ``None`` (the record is kept, no file written).
    """

    def __init__(self, problem, config: dict, folder: str | None):
        self.problem, self.config, self.folder = problem, config, folder

    def on_end(self, result) -> None:
        """Make the record, keep it in ``result.solution``, write it (``result.solution_path``)."""
        from isles.app.report import solution_record  # noqa: PLC0415

        result.solution = solution_record(self.problem, result, self.config)
        if self.folder is None:
            return
        try:
            result.solution_path = write_solution(result.solution, self.folder)
        except (OSError, TypeError, ValueError) as err:
            print(
                f"isles: warning: {SOLUTION_FILE} not written in {self.folder}: {type(err).__name__}: {err}",
                file=sys.stderr,
                flush=True,
            )


def write_solution(record: dict, folder: str) -> str:
    """Write ``record`` as ``folder/best_solution.json`` (atomically: a temporary file, then a
    rename; floats at full precision); return its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, SOLUTION_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def read_solution(path: str) -> tuple[str, dict]:
    """``(file, record)`` of ``path``: a ``best_solution.json``, or a run's output folder that holds one.

    Raises:
        ValueError: one line: no such file or folder, no ``best_solution.json`` in the folder,
            a file that is not a JSON object with ``x``, or a field of the wrong type
            (:func:`check_solution`: ``x`` the string ``"abc"``, ``f`` a string, ...).
    """
    file = os.path.join(path, SOLUTION_FILE) if os.path.isdir(path) else path
    if not os.path.isfile(file):
        where = (
            f"the folder {path!r} holds no {SOLUTION_FILE}"
            if os.path.isdir(path)
            else f"no such file or folder: {path!r}"
        )
        raise ValueError(f"show {path}: {where}; give a run's {SOLUTION_FILE} or its output folder (outputs/DATE/TIME)")
    try:
        with open(file, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"show {path}: {file} is not a readable {SOLUTION_FILE} ({type(err).__name__})") from None
    if not isinstance(record, dict) or "x" not in record:
        raise ValueError(f"show {path}: {file} is not a {SOLUTION_FILE} of isles (no 'x')")
    problem = check_solution(record)
    if problem:
        raise ValueError(f"show {path}: {file} is not a {SOLUTION_FILE} of isles: {problem}")
    return file, record


def _number(v) -> bool:
    """Whether ``v`` is a JSON number (an ``int`` or ``float``, NaN and infinities included; not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: the fields of a ``best_solution.json`` (:func:`isles.app.report.solution_record`) that
#: :func:`check_solution` checks, each with its test and the allowed values as a line says them
#: (``null`` is allowed for every field but ``x``)
SOLUTION_FIELDS = {
    "x": (lambda v: isinstance(v, list) and v and all(map(_number, v)), "a non-empty list of numbers"),
    "g": (lambda v: isinstance(v, list) and all(map(_number, v)), "a list of numbers"),
    "g_type": (
        lambda v: isinstance(v, list) and all(t in ("inequality", "equality") for t in v),
        "a list of inequality|equality",
    ),
    "genome_words_hex": (lambda v: isinstance(v, list) and all(isinstance(w, str) for w in v), "a list of strings"),
    **dict.fromkeys(("f", "max_normalised_violation", "run_best_f", "run_best_v", "eq_tol"), (_number, "a number")),
    **dict.fromkeys(("feasible", "in_bounds"), (lambda v: isinstance(v, bool), "true|false")),
    **dict.fromkeys(
        ("evaluations", "generations", "seed"), (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
    ),
    "not_computed": (lambda v: isinstance(v, str), "a string"),
    "config": (lambda v: isinstance(v, dict), "a mapping"),
}


def check_solution(record: dict) -> str | None:
    """What is wrong with the fields of a ``best_solution.json`` record (:data:`SOLUTION_FIELDS`),
    as ``FIELD=VALUE (allowed: ...)`` for the first wrong one, or ``None``; other keys are left alone."""
    for name, (ok, allowed) in SOLUTION_FIELDS.items():
        value = record.get(name)
        if (value is not None or name == "x") and not ok(value):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            return f"{name}={shown} (allowed: {allowed})"
    return None
