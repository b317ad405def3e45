"""The problem interface: bounds, constraint count and a batched evaluation.

A problem evaluates a whole population at once. ``X`` has shape ``(..., D)`` (for example
``(N, D)`` or ``islands x N x D``) and lives on the CPU (NumPy) or the GPU (CuPy); the results
live in the same array module:

* ``objective(X) -> f`` of shape ``(...)``;
* ``constraints(X) -> g`` of shape ``(..., m)``, feasible where every ``g <= 0``.

Bounds are closed boxes ``lower <= x <= upper`` (host NumPy arrays of shape ``(D,)``). This is
pygmo's user-defined-problem interface, batched. A user's own problem subclasses :class:`Problem`
(or provides the same attributes) and plugs in through the config with
``problem._target_=my_module.MyProblem``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from algorithms.core.backend import array_module


class Problem:
    """Base class of every problem (minimisation).

    Attributes:
        name: short id, e.g. ``"welded_beam"``.
        dim: number of decision variables ``D``.
        n_constraints: number of inequality constraints ``m`` (bounds not counted).
        lower, upper: float64 arrays of shape ``(D,)``, the closed box.
        f_star: known optimum value, or ``None``.
        constraint_scale: float64 array ``(m,)`` dividing ``g`` before violations are summed
            (normalisation, ``shared/problems.md`` section 0), or ones.

    Raises:
        ValueError: the bounds do not match ``dim`` (field ``problem.lower``/``problem.upper``),
            or ``lower > upper`` somewhere, or ``dim < 1``.
    """

    name: str = "problem"
    n_constraints: int = 0

    def __init__(
        self,
        dim: int,
        lower: Sequence[float] | float,
        upper: Sequence[float] | float,
        f_star: float | None = None,
        constraint_scale: Sequence[float] | None = None,
    ):
        dim = int(dim)
        if dim < 1:
            raise ValueError(f"problem.dim={dim}: must be an integer >= 1")
        self.dim = dim
        self.lower = _bound_vector("lower", lower, dim)
        self.upper = _bound_vector("upper", upper, dim)
        bad = np.nonzero(self.lower > self.upper)[0]
        if bad.size:
            raise ValueError(
                f"problem.lower > problem.upper at variable(s) {bad.tolist()}: bounds must satisfy lower <= upper"
            )
        self.f_star = None if f_star is None else float(f_star)
        m = self.n_constraints
        scale = np.ones(m) if constraint_scale is None else np.asarray(constraint_scale, dtype=np.float64)
        if scale.shape != (m,):
            raise ValueError(
                f"problem.constraint_scale has {scale.size} entries: must have n_constraints={m}"
            )
        self.constraint_scale = scale

    # -- to override ---------------------------------------------------------------------------
    def objective(self, X):
        """Objective values ``f`` of shape ``X.shape[:-1]`` (to override)."""
        raise NotImplementedError

    def constraints(self, X):
        """Constraint values ``g`` of shape ``X.shape[:-1] + (m,)``; ``g <= 0`` is feasible."""
        xp = array_module(X)
        return xp.zeros(X.shape[:-1] + (0,), dtype=X.dtype)

    # -- provided ------------------------------------------------------------------------------
    def evaluate(self, X):
        """Return ``(f, g)`` for a batch ``X`` of shape ``(..., D)``.

        Raises:
            ValueError: ``X.shape[-1] != dim``.
        """
        if X.shape[-1] != self.dim:
            raise ValueError(
                f"{self.name}: population has {X.shape[-1]} variables, problem.dim is {self.dim}"
            )
        return self.objective(X), self.constraints(X)

    def describe(self) -> dict:
        """Plain-data description for logs: name, dim, m, bounds, f*."""
        return {
            "name": self.name,
            "dim": self.dim,
            "n_constraints": self.n_constraints,
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "f_star": self.f_star,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, m={self.n_constraints})"


def _bound_vector(field: str, value, dim: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(dim, float(arr))
    arr = arr.reshape(-1)
    if arr.size != dim:
        raise ValueError(
            f"problem.{field} has {arr.size} entries but problem.dim={dim}: "
            f"give one bound per variable or a single number"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"problem.{field} must be finite numbers")
    return arr


class ScalableProblem(Problem):
    """An unconstrained problem of any dimension with the same bounds on every coordinate.

    Args:
        dim: dimension ``D``.
        lower, upper: per-coordinate bound(s), a number or ``D`` numbers.
    """

    default_bounds: tuple[float, float] = (-100.0, 100.0)

    def __init__(self, dim: int = 30, lower=None, upper=None, f_star: float | None = 0.0):
        lo, hi = self.default_bounds
        super().__init__(dim, lo if lower is None else lower, hi if upper is None else upper, f_star)
