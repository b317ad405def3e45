"""The self-check of a fused kernel's objective against the problem's own (real genomes).

A problem's ``cuda_objective`` (``problems/base.py``) is user-written CUDA: a wrong one must not
change results silently. Every fused plan over real genomes (DE, FEP) evaluates the same points
with its kernel and with ``problem.objective``/``problem.constraints`` before it is used, and
falls back to the array path when they differ (the plans' ``make_plan``).
"""

from __future__ import annotations

import numpy as np


def real_objective_error(cp, problem, evaluate_fv, dtype, has_v: bool, n_points: int, seed: int) -> float:
    """Largest ``|f_kernel - f_problem| / (1 + |f_problem|)``, and the same for the violation
    against :func:`isles.problems.constraints.total_violation` of ``problem.constraints`` (its
    equalities as ``|h| - eq_tol``) when the objective has ``OBJ_HAS_V``; NaN on one side counts as infinite, on both as agreement (one
    host synchronisation).

    Points: ``n_points`` uniform in the box (``numpy.random.default_rng(seed)``), and the same
    scaled towards the box centre by 1e-3 (near the optimum of the centred functions).

    Args:
        cp: CuPy.
        problem: the problem (``lower``, ``upper`` ``(D,)``, ``objective``, ``constraints``,
            ``constraint_scale``).
        evaluate_fv: the kernel's evaluation, ``X (P, D) -> (f (P,), v (P,))``.
        dtype: the plan's float dtype.
        has_v: whether the kernel computes the violation.
    """
    from isles.problems.constraints import equalities, total_violation  # noqa: PLC0415

    rs = np.random.default_rng(seed)
    lo, hi = problem.lower, problem.upper
    P = lo + rs.random((n_points, len(lo))) * (hi - lo)
    mid = 0.5 * (lo + hi)
    P = np.concatenate([P, mid + 1e-3 * (P - mid)])
    X = cp.asarray(P, dtype=dtype)
    fk, vk = evaluate_fv(X)
    fp = cp.asarray(problem.objective(X)).astype(np.float64)
    err = _rel_error(cp, fk.astype(np.float64), fp)
    if has_v:
        g = cp.asarray(problem.constraints(X), dtype=dtype)
        vp = total_violation(g, cp.asarray(problem.constraint_scale, dtype=dtype), *equalities(problem)).astype(
            np.float64
        )
        err = cp.maximum(err, _rel_error(cp, vk.astype(np.float64), vp))
    return float(err.max())


def _rel_error(cp, kernel, ref):
    """``|kernel - ref| / (1 + |ref|)``; NaN on one side only counts as infinite, NaN on both
    sides as agreement (a problem may be undefined in part of its box: both then treat the point
    as the worst, :mod:`isles.problems.constraints`)."""
    err = cp.abs(kernel - ref) / (1.0 + cp.abs(ref))
    return cp.where(cp.isnan(kernel) & cp.isnan(ref), 0.0, cp.nan_to_num(err, nan=np.inf))
