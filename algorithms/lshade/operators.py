"""The array operators of L-SHADE and jSO (:mod:`isles.algorithms.lshade.lshade`): rounding as the
authors' code, the weighted Lehmer mean of the memory update, Deb's-rules ranking, p-best sampling
and row gathers. Array code over ``xp`` (NumPy or CuPy), no host synchronisation."""

from __future__ import annotations

import math

import numpy as np


def round_half_up(x: float) -> int:
    """``round`` as the paper's C++ code (half away from zero, for ``x >= 0``)."""
    return int(math.floor(x + 0.5))


def lehmer_mean(xp, S, w, mask):
    """Weighted Lehmer mean (eqs. 7-9) per island: ``Σ w S² / Σ w S`` over ``mask``.

    Args:
        S: values ``(I, N)``; w: weights ``(I, N)`` (any positive scale: normalising them to
            ``Σ w = 1``, eq. 9, cancels in the ratio); mask: ``(I, N)`` bool, the successes.

    Returns:
        ``(mean (I,), ok (I,))``: ``ok`` where ``Σ w S > 0`` (else ``mean`` is 0).
    """
    wS = xp.where(mask, w * S, 0)
    den = wS.sum(axis=1)
    num = (wS * S).sum(axis=1)
    ok = den > 0
    return xp.where(ok, num / xp.where(ok, den, 1), 0), ok


def rank(xp, f, v):
    """Indices ``(I, N)`` sorting each island best first under Deb's rules (stable, lexicographic
    ``(v, f)``; NaN ``f`` is ``+inf`` already, the evaluator's rule). On NumPy, where no
    individual violates a constraint, one sort by ``f`` gives the same order (a host check,
    which NumPy may do: it is no device synchronisation)."""
    by_f = xp.argsort(f, axis=1, kind="stable")
    if xp is np and not v.any():
        return by_f
    rows = xp.arange(f.shape[0])[:, None]
    by_v = xp.argsort(v[rows, by_f], axis=1, kind="stable")
    return by_f[rows, by_v]


def pbest_indices(xp, order, u, pnum: int, not_self: bool):
    """``pbest (I, N)``: for each ``i``, an individual uniform among the ``pnum`` best (``order (I,
    N)``, best first), other than ``i`` itself where ``not_self`` (jSO's early phase); exact, one
    uniform ``u (I, N)`` each (an index shifted past ``i``'s rank where ``i`` is among them). It
    raises nothing: ``pnum >= 2`` is the caller's (``max(round(p N), 2)``).
    """
    rows = xp.arange(order.shape[0])[:, None]
    if not not_self:
        return order[rows, xp.minimum((u * pnum).astype(np.int64), pnum - 1)]
    pos = xp.empty_like(order)
    pos[rows, order] = xp.arange(order.shape[1], dtype=order.dtype)  # each individual's rank
    own = (pos < pnum).astype(np.int64)
    pb = xp.minimum((u * (pnum - own)).astype(np.int64), pnum - 1 - own)
    return order[rows, pb + own * (pb >= pos)]


def take_rows(xp, a, idx):
    """``a[i, idx[i, j]]`` for ``a (I, M, ...)`` and ``idx (I, K)``: ``(I, K, ...)``."""
    return a[xp.arange(a.shape[0])[:, None], idx]
