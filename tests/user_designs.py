"""Held-out user problems, written from the README's "your own problem" recipe as a new user would
(issue 16): plugged in with ``problem._target_=tests.user_designs.PressureVessel``, and variants
with the mistakes a user makes on day one (wrong constraint count, wrong objective shape, NaN)."""

import math

import numpy as np
from array_api_compat import array_namespace
from isles.problems.base import Problem

from tests.user_problems import PressureVessel  # noqa: F401  (problem._target_=tests.user_designs.PressureVessel)


def _stack_like(X, cols):
    return array_namespace(X).stack(cols, axis=-1)


class ThreeBarTruss(Problem):
    """Three-bar truss (Ray & Saini 2001): cross sections ``x1, x2`` in ``[0, 1]``; 3 stress
    constraints; best known f ~ 263.9."""

    name = "three_bar_truss"
    n_constraints = 3

    def __init__(self):
        super().__init__(2, 1e-3, 1.0)

    def objective(self, X):
        return (2.0 * math.sqrt(2.0) * X[..., 0] + X[..., 1]) * 100.0

    def constraints(self, X):
        x1, x2 = X[..., 0], X[..., 1]
        s2 = math.sqrt(2.0)
        den = s2 * x1**2 + 2.0 * x1 * x2
        return _stack_like(
            X, [(s2 * x1 + x2) / den * 2.0 - 2.0, x2 / den * 2.0 - 2.0, 1.0 / (x1 + s2 * x2) * 2.0 - 2.0]
        )


class TrussFourColumns(ThreeBarTruss):
    """Declares ``n_constraints = 3`` but returns 4 columns (a constraint added, the count forgotten)."""

    def constraints(self, X):
        g = super().constraints(X)
        return _stack_like(X, [g[..., 0], g[..., 1], g[..., 2], X[..., 0] - 1.0])


class TrussColumnObjective(ThreeBarTruss):
    """An objective of shape ``(..., 1)`` (``keepdims=True``) instead of ``(...)``."""

    def objective(self, X):
        return super().objective(X)[..., None]


class TrussNaN(ThreeBarTruss):
    """An objective that is NaN everywhere (a unit slip: ``0 * inf``)."""

    def objective(self, X):
        return super().objective(X) * 0.0 * math.inf


class TrussEqualityNaN(ThreeBarTruss):
    """Its stress limits and one equality ``h = 0`` (the last column, ``n_eq = 1``) that is NaN
    everywhere (a unit slip, ``0 * inf``): the objective stays finite, no point can be feasible."""

    n_constraints = 4
    n_eq = 1

    def constraints(self, X):
        g = super().constraints(X)
        return _stack_like(X, [g[..., 0], g[..., 1], g[..., 2], X[..., 0] * math.nan])


class SegmentedCantilever(Problem):
    """Cantilever beam of ``dim`` hollow square segments (Fleury & Braibant 1986 for ``dim = 5``):
    widths ``x`` in ``[0.01, 100]``, weight ``0.0624 sum x``, one deflection constraint
    ``sum_i c_i / x_i^3 <= 1`` with ``c_i = (dim - i)^3 - (dim - i - 1)^3`` (61, 37, 19, 7, 1).
    The number of segments has no default: the user must give ``problem.dim``."""

    name = "segmented_cantilever"
    n_constraints = 1

    def __init__(self, dim, lower=0.01, upper=100.0):
        super().__init__(dim, lower, upper)
        k = dim - np.arange(dim, dtype=np.float64)
        self.c = k**3 - (k - 1.0) ** 3

    def objective(self, X):
        return 0.0624 * X.sum(axis=-1)

    def constraints(self, X):
        xp = array_namespace(X)
        c = xp.asarray(self.c, dtype=X.dtype)
        return (c / X**3).sum(axis=-1)[..., None] - 1.0


class TrussComplex(ThreeBarTruss):
    """An objective of a complex dtype (a square root of a negative number taken as complex)."""

    def objective(self, X):
        return super().objective(X) + 0j
