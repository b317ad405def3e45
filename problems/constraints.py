"""Constraint handling: Deb's feasibility rules (default) or a static penalty.

Every algorithm ranks individuals by a pair ``(f, v)``: ``f`` the objective and ``v >= 0`` the
total normalised constraint violation ``sum_i max(0, g_i / scale_i)``. The comparison is
lexicographic in ``(v, f)``, which is exactly Deb's feasibility rules (K. Deb, "An efficient
constraint handling method for genetic algorithms", CMAME 186, 2000):

1. a feasible individual (``v = 0``) beats an infeasible one;
2. of two feasible individuals, the lower ``f`` wins;
3. of two infeasible individuals, the lower total violation wins.

The static penalty (``handling="penalty"``) ranks by ``f + r * v`` with ``v`` reported as 0 to the
algorithm, so the same lexicographic comparison serves both. ``handling="augmented_lagrangian"``
ranks like ``feasibility``: the problem itself is turned into the min-max problem of its augmented
Lagrangian (:class:`isles.problems.minmax.AugmentedLagrangian`, built by ``islands/config/build.py``), which only
a min-max algorithm (the co-evolutionary DE) solves; ``(f, v)`` stay the real objective and
violation, on which its result is chosen.

NaN treatment (documented behaviour): an objective value that is NaN is replaced by ``+inf`` (the
worst fitness) and a NaN constraint value counts as infinite violation; the number of such
evaluations is returned so that the runtime can log it as the metric ``nan_evaluations``.
"""

from __future__ import annotations

import numpy as np
from array_api_compat import array_namespace
from isles.problems.base import first_evaluation

HANDLINGS = ("feasibility", "penalty", "augmented_lagrangian")
#: the largest normalised violation that the float64 report counts as feasible
FEASIBLE_TOL = 1e-6
#: the default tolerance of an equality constraint ``|h| <= eq_tol`` (``constraints.eq_tol``; CEC 2006/2010)
EQ_TOL = 1e-4


def as_inequalities(g, n_eq: int = 0, eq_tol: float = EQ_TOL):
    """Constraint values ``g (..., m)`` as inequalities ``<= 0``: the last ``n_eq`` columns are
    equalities ``h = 0`` and become ``|h| - eq_tol`` (the CEC 2006/2010 convention), the others
    are returned as they are. The one place where an equality is turned into an inequality: the
    violation (:func:`total_violation`), the float64 report (:func:`feasibility_report`) and the
    augmented Lagrangian (:class:`isles.problems.minmax.AugmentedLagrangian`, also its CUDA terms)
    all go through it or its CUDA twin. No host synchronisation (a copy and a slice assignment on
    CuPy); ``g`` itself is returned when ``n_eq == 0``.
    """
    n_eq = int(n_eq)
    if n_eq == 0 or g.shape[-1] == 0:
        return g
    xp = array_namespace(g)
    m = g.shape[-1]
    out = xp.asarray(g, copy=True)
    out[..., m - n_eq :] = xp.abs(g[..., m - n_eq :]) - eq_tol
    return out


def equalities(problem) -> tuple[int, float]:
    """``(n_eq, eq_tol)`` of ``problem``: its number of equality constraints (the last ``n_eq``
    of its ``n_constraints``; 0 for a problem that declares none) and their tolerance
    (``constraints.eq_tol``, :data:`EQ_TOL` by default)."""
    return int(getattr(problem, "n_eq", 0) or 0), float(getattr(problem, "eq_tol", EQ_TOL))


def total_violation(g, scale=None, n_eq: int = 0, eq_tol: float = EQ_TOL):
    """Total normalised violation ``v = sum_i max(0, g_i/scale_i)`` of shape ``g.shape[:-1]``,
    where the last ``n_eq`` columns are equalities and count as ``g_i = |h_i| - eq_tol``
    (:func:`as_inequalities`).

    NaN constraint values give ``v = inf``. With no constraints (``m = 0``) ``v = 0``.
    """
    xp = array_namespace(g)
    if g.shape[-1] == 0:
        return xp.zeros(g.shape[:-1], dtype=g.dtype)
    g = as_inequalities(g, n_eq, eq_tol)
    if scale is not None:
        g = g / xp.asarray(scale, dtype=g.dtype)
    v = xp.maximum(g, 0).sum(axis=-1)
    return xp.where(xp.isnan(v), xp.inf, v)


def better(fa, va, fb, vb):
    """Elementwise ``a`` strictly better than ``b`` under Deb's rules (lexicographic ``(v, f)``)."""
    return (va < vb) | ((va == vb) & (fa < fb))


def argbest(f, v, axis: int = -1):
    """Index of the best individual along ``axis`` under Deb's rules (no host synchronisation)."""
    xp = array_namespace(f)
    vmin = v.min(axis=axis, keepdims=True)
    key = xp.where(v == vmin, f, xp.inf)
    return key.argmin(axis=axis)


def best_row(x, f, v):
    """Best row under Deb's rules of ``x (k, D)``, ``f, v (k,)``: ``(x (1, D), f (1,), v (1,))``,
    as device arrays on CuPy (no host synchronisation)."""
    xp = array_namespace(f)
    i = xp.reshape(argbest(f, v, axis=0), (1,))
    return x[i], f[i], v[i]


def check_handling(handling, penalty) -> None:
    """Validate ``constraints.handling`` and ``constraints.penalty``.

    Raises:
        ValueError: ``constraints.handling='x': allowed values are feasibility|penalty``, or
            ``constraints.penalty=0: allowed values are numbers > 0``.
    """
    if handling not in HANDLINGS:
        raise ValueError(f"constraints.handling={handling!r}: allowed values are {'|'.join(HANDLINGS)}")
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not penalty > 0:
        raise ValueError(f"constraints.penalty={penalty!r}: allowed values are numbers > 0")


class Evaluator:
    """Evaluates a population and returns the ranking pair ``(f, v)`` and a NaN count.

    Args:
        problem: a :class:`isles.problems.base.Problem`.
        handling: ``"feasibility"`` (Deb's rules, default), ``"penalty"`` (static penalty) or
            ``"augmented_lagrangian"`` (Deb's rules on ``(f, v)``; see the module docstring).
        penalty: the static penalty factor ``r`` (> 0), used with ``handling="penalty"``.

    Raises:
        ValueError: unknown ``handling`` or ``penalty <= 0``.
    """

    def __init__(self, problem, handling: str = "feasibility", penalty: float = 1e6):
        check_handling(handling, penalty)
        self.problem = problem
        self.handling = handling
        self.penalty = float(penalty)
        self._scales: dict = {}  # constraint scales on each (module, dtype): no copies inside a generation
        self._checked = False  # the first batch is checked against the interface (first_evaluation)

    def _scale(self, xp, dtype):
        key = (xp.__name__, str(dtype))
        if key not in self._scales:
            self._scales[key] = xp.asarray(self.problem.constraint_scale, dtype=dtype)
        return self._scales[key]

    def __call__(self, X, dtype=None):
        """Evaluate ``X (..., D)`` (bit problems: unpacked bits ``(..., L)``, uint8 0/1).

        Args:
            X: the population, NumPy or CuPy.
            dtype: dtype of the returned ``f`` and ``v``. ``None``: ``X.dtype`` when ``X`` is a
                real floating array, else float64 (a bit genome decoded to uint8 0/1 must not
                give uint8 fitness). The objective and constraints are cast to it before the
                violation is summed, so ``f``/``v`` are computed as a problem written in that
                dtype would.

        Returns:
            ``(f, v, n_nan)``: ``f`` and ``v`` of shape ``X.shape[:-1]`` (``X``'s module, the
            dtype above), ``n_nan`` a 0-d integer array counting individuals with a NaN
            objective or constraint.

        Raises:
            ValueError: on the first call, results of the wrong shape or dtype, or an
                ``IndexError`` of the problem (:func:`isles.problems.base.first_evaluation`).
        """
        xp = array_namespace(X)
        if dtype is None:
            dtype = X.dtype if xp.isdtype(X.dtype, "real floating") else xp.float64
        if self._checked:
            f, g = self.problem.evaluate(X)
        else:  # shapes and dtypes only: host metadata, no synchronisation
            f, g = first_evaluation(self.problem, X)
            self._checked = True
        f = xp.asarray(f, dtype=dtype)
        g = xp.asarray(g, dtype=dtype)
        n_eq, eq_tol = equalities(self.problem)
        v = total_violation(g, self._scale(xp, g.dtype) if g.shape[-1] else None, n_eq, eq_tol)
        nan = xp.isnan(f) | xp.isinf(v)
        f = xp.where(xp.isnan(f), xp.inf, f)
        if self.handling == "penalty":
            f = f + self.penalty * v
            v = xp.zeros_like(v)
        # an int64 count, not a bool sum: the same number, and on CuPy a reduction it ships
        # compiled (CuPy jit-compiles a bool sum, 3 s per shape on a fresh machine)
        return f, v, nan.astype(xp.int64).sum()


def feasibility_report(problem, x, tol: float = FEASIBLE_TOL) -> dict:
    """Float64 host check of one solution ``x (D,)`` (``shared/problems.md`` section 0).

    Returns a dict with ``f``, ``g`` (list: the raw constraint values, equalities as ``h``),
    ``g_type`` (per constraint ``"inequality"`` for ``g <= 0`` or ``"equality"`` for ``h = 0``),
    ``eq_tol`` (only where the problem has equalities), ``max_normalised_violation``
    (``max(0, g_i/scale_i)`` over ``i``, an equality counting as ``g_i = |h_i| - eq_tol``
    (:func:`as_inequalities`): 0 where every constraint holds, NaN where a ``g_i`` is NaN),
    ``in_bounds`` and ``feasible`` (every ``g_i/scale_i <= tol``, inside the box, and a finite ``f``).
    """
    x = np.asarray(x, dtype=np.float64).reshape(1, -1)
    f, g = problem.evaluate(x)
    f = float(np.asarray(f).reshape(-1)[0])
    g = np.asarray(g, dtype=np.float64).reshape(-1)
    n_eq, eq_tol = equalities(problem)
    gn = as_inequalities(g, n_eq, eq_tol) / problem.constraint_scale if g.size else g
    max_v = float(np.maximum(gn.max(), 0.0)) if g.size else 0.0  # a violation: 0 where every g <= 0, NaN stays
    in_bounds = bool(np.all(x[0] >= problem.lower) and np.all(x[0] <= problem.upper))
    rep = {
        "x": x[0].tolist(),
        "f": f,
        "g": g.tolist(),
        "g_type": ["inequality"] * (g.size - n_eq) + ["equality"] * n_eq,
        "max_normalised_violation": max_v,
        "in_bounds": in_bounds,
        "feasible": bool(in_bounds and max_v <= tol and np.isfinite(f)),
    }
    if n_eq:
        rep["eq_tol"] = eq_tol
    return rep
