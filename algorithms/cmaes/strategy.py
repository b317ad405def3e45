"""CMA-ES's default strategy parameters (Hansen, "The CMA Evolution Strategy: A Tutorial",
arXiv:1604.00772, 2016, Table 1 and eqs. (49)-(58)), as array code over a batch of populations.

For a population size ``lambda`` (one per island: restarts change it) and dimension ``n``:

* ``mu = floor(lambda / 2)``;
* raw weights ``w'_i = ln((lambda + 1) / 2) - ln i``, ``i = 1..lambda`` (eq. 49);
* ``mu_eff = (sum_{i<=mu} w'_i)^2 / sum_{i<=mu} w'_i^2`` and ``mu_eff^-`` likewise over
  ``i > mu`` (eq. 8);
* ``c_1 = alpha_cov / ((n + 1.3)^2 + mu_eff)`` with ``alpha_cov = 2`` (eq. 57);
* ``c_mu = min(1 - c_1, alpha_cov (mu_eff - 2 + 1/mu_eff) / ((n + 2)^2 + alpha_cov mu_eff / 2))``
  (eq. 58, the 2016 version; the tutorial's 2023 revision adds 1/4 to the numerator's bracket);
* negative weights (active CMA, eq. 53): ``w_i = w'_i / sum |w'^+|`` for ``w'_i >= 0``, else
  ``min(alpha_mu^-, alpha_mueff^-, alpha_posdef^-) w'_i / sum |w'^-|`` with
  ``alpha_mu^- = 1 + c_1/c_mu`` (eq. 50), ``alpha_mueff^- = 1 + 2 mu_eff^- / (mu_eff + 2)``
  (eq. 51), ``alpha_posdef^- = (1 - c_1 - c_mu) / (n c_mu)`` (eq. 52);
* ``c_sigma = (mu_eff + 2) / (n + mu_eff + 5)``,
  ``d_sigma = 1 + 2 max(0, sqrt((mu_eff - 1)/(n + 1)) - 1) + c_sigma`` (eq. 55);
* ``c_c = (4 + mu_eff/n) / (n + 4 + 2 mu_eff/n)`` (eq. 56);
* ``E||N(0, I)|| ~ sqrt(n) (1 - 1/(4n) + 1/(21 n^2))`` (p. 28).

``lambda >= 4`` (with ``mu = 1`` the tutorial's ``c_mu`` is 0 and the negative weights are
undefined).
"""

from __future__ import annotations

import functools
import math

import numpy as np


@functools.lru_cache(maxsize=64)
def default_pop_size(n: int) -> int:
    """The tutorial's default population size ``lambda = 4 + floor(3 ln n)`` (Table 1)."""
    return 4 + int(math.floor(3.0 * math.log(n)))


def expected_norm(n: int) -> float:
    """``E||N(0, I_n)|| ~ sqrt(n) (1 - 1/(4n) + 1/(21 n^2))`` (tutorial p. 28)."""
    return math.sqrt(n) * (1.0 - 1.0 / (4.0 * n) + 1.0 / (21.0 * n * n))


def clip_bound(n: int) -> float:
    """Hansen 2011's bound ``c_y = sqrt(n) + 2n / (n + 2)`` on the Mahalanobis norm
    ``||C^{-1/2} y||`` of an injected step (arXiv:1110.4181, eq. (4))."""
    return math.sqrt(n) + 2.0 * n / (n + 2.0)


def strategy_parameters(xp, n: int, lam, lam_cap: int, dtype=np.float64) -> dict:
    """The 2016 default parameters of a batch of CMA-ES instances (module docstring). On NumPy the
    result of each ``(n, lam, lam_cap, dtype)`` is kept (read-only arrays): ``lam`` changes only at
    a restart, and the update asks every iteration (about 40 NumPy calls saved a generation).

    Args:
        xp: ``numpy`` or ``cupy``.
        n: the dimension.
        lam: population sizes ``(I,)`` (integer array, every entry in ``[4, lam_cap]``).
        lam_cap: the largest population the arrays hold (the weight rows' length).
        dtype: float dtype of the results.

    Returns:
        ``{"w": (I, lam_cap)`` weights by rank (0 beyond ``lambda``), and ``(I,)`` arrays
        ``mu_eff``, ``c1``, ``c_mu``, ``c_sigma``, ``d_sigma``, ``c_c``, ``sum_w`` (the sum of all
        ``lambda`` weights, in the covariance update, eq. 47)``}``. No host synchronisation.
    """
    if xp is np:
        lam = np.asarray(lam, dtype=np.int64)
        return _numpy_parameters(int(n), lam.tobytes(), int(lam_cap), np.dtype(dtype).str)
    return _parameters(xp, n, lam, lam_cap, dtype)


@functools.lru_cache(maxsize=64)
def _numpy_parameters(n: int, lam: bytes, lam_cap: int, dtype: str) -> dict:
    """:func:`strategy_parameters` on NumPy, kept per key; its arrays read-only."""
    out = _parameters(np, n, np.frombuffer(lam, dtype=np.int64), lam_cap, np.dtype(dtype))
    for a in out.values():
        a.flags.writeable = False
    return out


def _parameters(xp, n: int, lam, lam_cap: int, dtype) -> dict:
    """:func:`strategy_parameters`' arithmetic."""
    lamf = xp.asarray(lam).astype(dtype)[:, None]
    i = xp.arange(1, lam_cap + 1, dtype=dtype)[None, :]
    wp = xp.log((lamf + 1.0) / 2.0) - xp.log(i)
    mu = xp.floor(lamf / 2.0)
    pos = i <= mu
    neg = (i > mu) & (i <= lamf)
    wpos = xp.where(pos, wp, 0.0)
    wneg = xp.where(neg, wp, 0.0)
    spos, sneg = wpos.sum(axis=1), wneg.sum(axis=1)
    mu_eff = spos**2 / (wpos**2).sum(axis=1)
    mu_eff_neg = sneg**2 / (wneg**2).sum(axis=1)
    c1 = 2.0 / ((n + 1.3) ** 2 + mu_eff)
    c_mu = xp.minimum(1.0 - c1, 2.0 * (mu_eff - 2.0 + 1.0 / mu_eff) / ((n + 2.0) ** 2 + mu_eff))
    alpha_mu = 1.0 + c1 / c_mu
    alpha_mueff = 1.0 + 2.0 * mu_eff_neg / (mu_eff + 2.0)
    alpha_posdef = (1.0 - c1 - c_mu) / (n * c_mu)
    scale_neg = xp.minimum(xp.minimum(alpha_mu, alpha_mueff), alpha_posdef) / -sneg
    w = xp.where(pos, wpos / spos[:, None], xp.where(neg, wneg * scale_neg[:, None], 0.0))
    c_sigma = (mu_eff + 2.0) / (n + mu_eff + 5.0)
    d_sigma = 1.0 + 2.0 * xp.maximum(0.0, xp.sqrt((mu_eff - 1.0) / (n + 1.0)) - 1.0) + c_sigma
    c_c = (4.0 + mu_eff / n) / (n + 4.0 + 2.0 * mu_eff / n)
    return {
        "w": w.astype(dtype),
        "mu_eff": mu_eff.astype(dtype),
        "c1": c1.astype(dtype),
        "c_mu": c_mu.astype(dtype),
        "c_sigma": c_sigma.astype(dtype),
        "d_sigma": d_sigma.astype(dtype),
        "c_c": c_c.astype(dtype),
        "sum_w": w.sum(axis=1).astype(dtype),
    }


def box_scale_of(xp, lower, upper, sigma0):
    """``(s (D,), sigma_0)`` of the box ``lower, upper (D,)`` (:meth:`isles.algorithms.cmaes.cmaes.CMAES.box_scale`);
    on NumPy kept per box (asked at every update's termination check and restart), its array
    read-only."""
    if xp is np:
        lo, hi = np.asarray(lower), np.asarray(upper)
        return _numpy_box_scale(lo.tobytes(), hi.tobytes(), lo.dtype.str, float(sigma0))
    return _box_scale(xp, lower, upper, sigma0)


def _box_scale(xp, lower, upper, sigma0):
    """:func:`box_scale_of`'s arithmetic."""
    w = upper - lower
    w = xp.where(xp.isfinite(w) & (w > 0), w, 1.0)
    rms = xp.sqrt((w * w).mean())
    return w / rms, sigma0 * rms


@functools.lru_cache(maxsize=16)
def _numpy_box_scale(lower: bytes, upper: bytes, dtype: str, sigma0: float):
    """:func:`box_scale_of` on NumPy, kept per box; its array read-only."""
    lo, hi = np.frombuffer(lower, dtype=dtype), np.frombuffer(upper, dtype=dtype)
    s, sig = _box_scale(np, lo, hi, sigma0)
    s.flags.writeable = False
    return s, sig
