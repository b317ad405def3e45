"""Problem registry: id -> class, and :func:`make_problem` for the config's ``problem.name``.

Ids and formulations follow ``shared/problems.md`` (sections 3, 4 and 5); the binary problems
(``onemax``, ``trap5``, ``knapsack``) are in :mod:`isles.problems.binary`.
"""

from __future__ import annotations

from isles.problems.base import Problem
from isles.problems.benchmarks import Ackley, Griewank, Rastrigin, Rosenbrock, Schwefel12, Schwefel226, Sphere
from isles.problems.binary import Knapsack, OneMax, Trap
from isles.problems.cec2006 import G01, G07, G09, G10
from isles.problems.engineering import (
    SpeedReducer,
    SpeedReducerB,
    SpeedReducerC,
    Spring,
    WeldedBeam,
    WeldedBeamJ4,
)

#: Every built-in problem class, keyed by its ``name``.
PROBLEMS: dict[str, type] = {
    cls.name: cls
    for cls in (
        WeldedBeam,
        WeldedBeamJ4,
        Spring,
        G01,
        G07,
        G09,
        G10,
        SpeedReducer,
        SpeedReducerB,
        SpeedReducerC,
        Sphere,
        Rastrigin,
        Ackley,
        Griewank,
        Rosenbrock,
        Schwefel226,
        Schwefel12,
        OneMax,
        Trap,
        Knapsack,
    )
}


def make_problem(name: str, **kwargs) -> Problem:
    """Instantiate the built-in problem ``name`` with ``kwargs`` (e.g. ``dim``, ``lower``, ``upper``
    for the scalable functions; ``n_bits`` for ``onemax``/``trap5``; ``n_items``, ``kind``, ...
    for ``knapsack``; none for the engineering problems).

    Raises:
        ValueError: ``name`` is not a key of :data:`PROBLEMS` (the message lists the allowed
            values, sorted), or the class rejects the bounds/dimension.
        TypeError: a keyword the class does not accept (e.g. ``dim`` for ``welded_beam``).
    """
    try:
        cls = PROBLEMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"problem={name!r}: allowed values are {'|'.join(sorted(PROBLEMS))}") from None
    return cls(**kwargs)
