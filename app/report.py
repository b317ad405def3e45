"""The end-of-run report of the best solution, which never loses the result.

The report re-evaluates the run's best ``x`` in float64 on the host
(:func:`isles.problems.constraints.feasibility_report`). A problem may not be able to: a user's
min-max problem without a closed-form worst case (``objective_known = False``) raises
``NotImplementedError`` from ``objective``, and a user's objective may fail on one row. The
report then keeps ``x`` and the run's own ``best_f`` and ``best_v`` (the ranking pair the
algorithm compared), and says in one line what it could not compute and why (``not_computed``).
The record of ``best_solution.json`` (:func:`solution_record`) is built on it, once per run: the
job writes it into its output folder (:mod:`isles.app.run_files`), MLflow logs the same record
(:mod:`isles.app.tracking`), and the console summary (:mod:`isles.app.progress`) prints it.
"""

from __future__ import annotations

import traceback

import numpy as np
from isles.problems.constraints import FEASIBLE_TOL, feasibility_report


def end_report(problem, result) -> dict:
    """The float64 report of ``result.best_x`` (``x``, ``f``, ``g``, ``max_normalised_violation``,
    ``in_bounds``, ``feasible``), or, when the problem cannot evaluate it, ``x``, ``in_bounds``,
    the run's own ``run_best_f`` and ``run_best_v``, ``None`` for ``f``, ``g``,
    ``max_normalised_violation`` and ``feasible``, and ``not_computed``: one line naming what was
    not computed, the error, and the innermost frame of the problem's code that raised it.

    Args:
        problem: the run's :class:`isles.problems.base.Problem`.
        result: the :class:`isles.islands.coordinator.RunResult` (``best_x (D,)``, ``best_f``,
            ``best_v``).
    """
    try:
        return feasibility_report(problem, result.best_x)
    except Exception as err:  # noqa: BLE001  (whatever the problem raises, the result stays)
        x = np.asarray(result.best_x, dtype=np.float64).reshape(-1)
        in_bounds = bool(np.all(x >= problem.lower) and np.all(x <= problem.upper))
        message = str(err).strip().splitlines()[0] if str(err).strip() else ""
        frames = [f for f in traceback.extract_tb(err.__traceback__) if not is_library(f.filename)]
        where = (
            f" ({type(problem).__name__}.{frames[-1].name} at {frames[-1].filename}:{frames[-1].lineno})"
            if frames
            else ""
        )
        return {
            "x": x.tolist(),
            "f": None,
            "g": None,
            "max_normalised_violation": None,
            "in_bounds": in_bounds,
            "feasible": None,
            "run_best_f": float(result.best_f),
            "run_best_v": float(result.best_v),
            "not_computed": f"float64 f, g and feasibility of the best x: {type(err).__name__}: {message}{where}",
        }


def verdict(rep: dict) -> str:
    """The label of a computed report (:func:`end_report` with ``feasible`` not ``None``):

    * ``feasible``: inside the box, every constraint holds and ``f`` is finite;
    * ``f not finite``: inside the box and every constraint holds (or there are none), but ``f``
      is NaN or infinite: no objective value was finite, which is not a matter of constraints;
    * ``INFEASIBLE (f not finite)``: a constraint or the box is violated and ``f`` is not finite;
    * ``INFEASIBLE``: a constraint or the box is violated.
    """
    if rep["feasible"]:
        return "feasible"
    finite = rep["f"] is not None and bool(np.isfinite(rep["f"]))
    holds = (
        bool(rep["in_bounds"])
        and rep["max_normalised_violation"] is not None
        and rep["max_normalised_violation"] <= FEASIBLE_TOL
    )
    if not finite:
        return "f not finite" if holds else "INFEASIBLE (f not finite)"
    return "INFEASIBLE"


def is_library(path: str) -> bool:
    """Whether the source file ``path`` belongs to an installed package or the standard library
    (not to a user's code, nor to isles run from a checkout)."""
    return "site-packages" in path or "/lib/python" in path


def genome_report(result) -> dict:
    """The best genome for ``best_solution.json`` when it is not the phenotype itself: packed
    ``uint32`` words (a GA) as hexadecimal strings, word 0 first, bit 0 of a word its lowest."""
    g = result.best_genome
    if g is None or np.asarray(g).dtype != np.uint32:
        return {}
    return {"genome_words_hex": [f"{int(w):08x}" for w in np.asarray(g).reshape(-1)]}


def solution_record(problem, result, config: dict | None = None) -> dict:
    """The record of ``best_solution.json``, the one the run's output folder and MLflow hold:
    :func:`end_report` (``x`` (D,) at full precision, ``f``, ``g``, ``max_normalised_violation``,
    ``in_bounds``, ``feasible``; or, where the problem cannot re-evaluate x, ``None`` for those it
    could not compute, the run's ``run_best_f`` and ``run_best_v`` and ``not_computed``), the
    genome when it is not x (:func:`genome_report`), ``evaluations`` (objective evaluations of the
    run), ``generations`` (per island), ``seed`` and the run's resolved ``config`` (``None``
    without one). Never raises for what the problem cannot compute."""
    record = {
        **end_report(problem, result),
        **genome_report(result),
        "evaluations": int(result.evaluations),
        "generations": int(result.generations),
    }
    record["seed"] = None if config is None else config.get("seed")
    record["config"] = config
    return record
