"""Termination criteria and IPOP/BIPOP restarts of the batched CMA-ES (:mod:`isles.algorithms.cmaes.cmaes`).

Checked per island at the generation that completes an iteration, as masks (no host
synchronisation). The subset of Hansen's criteria (tutorial arXiv:1604.00772, B.3; Auger & Hansen
2005, sec. 3) implemented, each a restart trigger:

* **TolFun**: the best values of the last ``10 + ceil(30 n / lambda)`` iterations of this run and
  all values of the current one lie within ``tol_fun`` (only once the run has that many
  iterations; objective values, infeasible samples included);
* **TolX**: ``sigma |p_c|`` and ``sigma sqrt(C_ii)`` all below ``tol_x sigma_0``;
* **NoEffectAxis**: adding ``0.1 sigma d_i b_i`` (axis ``i = iteration mod n``) leaves the mean
  unchanged;
* **NoEffectCoord**: adding ``0.2 sigma sqrt(C_ii)`` leaves some coordinate of the mean unchanged;
* **ConditionCov**: ``cond(C) = (max d / min d)^2 > 1e14``;
* **TolUpSigma** (pycma's): ``sigma / sigma_run > 1e20 max d``;
* any non-finite ``m``, ``sigma``, ``d`` or ``C``.

With ``restarts=none`` a run that meets a criterion is frozen (:func:`restart`).

Not implemented: Stagnation (the median of the last 20 % of the best and median values not
improving) and MaxIter; BIPOP's cap on a small-regime run's evaluations.

**IPOP** (Auger & Hansen 2005): each restart doubles ``lambda`` (up to ``lambda_cap``, then keeps
it), draws a new mean uniformly in the box and restarts ``sigma = sigma_0``, ``C = C_0``,
``p_sigma = p_c = 0``.

**BIPOP** (Hansen 2009, "Benchmarking a BI-population CMA-ES on the BBOB-2009 function testbed"):
two regimes share the evaluations. The first run (``lambda_start``) counts for the *large*
regime. At each restart the regime that has used fewer evaluations so far runs next: *large*:
IPOP's next doubling ``lambda_l = lambda_start 2^i`` with ``sigma_0``; *small*:
``lambda_s = lambda_start floor((lambda_l / (2 lambda_start))^{u_1^2})`` (Hansen's
``floor(lambda_def (lambda_l / (2 lambda_def))^{U^2})`` rounded down to a multiple of
``lambda_start``, at least ``lambda_start``: the block scheme's granularity) with ``sigma_0
10^{-2 u_2}``, ``u_1, u_2`` uniform (``DRAW_RESTART_U``), ``lambda_l`` the last large population.
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.cmaes.draws import DRAW_RESTART_MEAN, DRAW_RESTART_U

#: ConditionCov's limit and TolUpSigma's factor (Hansen's and pycma's defaults)
MAX_CONDITION = 1e14
TOL_UP_SIGMA = 1e20


def terminated(alg, ctx, s, f_range):
    """``(I,)`` bool: the islands whose run meets a termination criterion (module docstring), from
    the state ``s`` after the update. Evaluated for every island; :func:`restart` masks it with the
    islands that completed an iteration."""
    xp, n = ctx.xp, ctx.dim
    p = alg.params
    I = s["lam"].shape[0]
    r = xp.arange(I)
    m, sigma, C, B, d, pc, it = s["mean"], s["sigma"], s["C"], s["B"], s["d"], s["p_c"], s["it"]
    _, sigma0 = alg.box_scale(ctx)
    diag = xp.diagonal(C, axis1=1, axis2=2)
    sd = sigma[:, None]
    hist = s["hist"]
    H = hist.shape[1]
    L = 10 + (30 * n + s["lam"] - 1) // s["lam"]
    win = xp.arange(H)[None, :] >= (H - L)[:, None]
    h_range = xp.where(win, hist, -xp.inf).max(axis=1) - xp.where(win, hist, xp.inf).min(axis=1)
    tol_fun = (it >= L) & (h_range < p.tol_fun) & (f_range < p.tol_fun)
    thr = p.tol_x * sigma0
    tol_x = (xp.abs(sd * pc) < thr).all(axis=1) & (sd * xp.sqrt(xp.abs(diag)) < thr).all(axis=1)
    axis = it % n
    no_axis = (m == m + 0.1 * sd * d[r, axis][:, None] * B[r, :, axis]).all(axis=1)
    no_coord = (m == m + 0.2 * sd * xp.sqrt(xp.abs(diag))).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cond = (d.max(axis=1) / d.min(axis=1)) ** 2 > MAX_CONDITION
        up = sigma / s["sigma_start"] > TOL_UP_SIGMA * d.max(axis=1)
    finite = (
        xp.isfinite(m).all(axis=1) & xp.isfinite(sigma) & xp.isfinite(d).all(axis=1) & xp.isfinite(C).all(axis=(1, 2))
    )
    return tol_fun | tol_x | no_axis | no_coord | cond | up | ~finite


#: the distribution's state that ``restarts=none`` freezes in a terminated run
FROZEN = ("mean", "sigma", "C", "B", "d", "p_sigma", "p_c")


def restart(alg, ctx, s, done, f_range, before):
    """Count the completed iterations' evaluations to their BIPOP regime, and restart the islands
    where ``done (I,)`` and :func:`terminated` (IPOP or BIPOP, module docstring). With
    ``restarts=none`` a terminated run is frozen instead: its distribution stays that of
    ``before`` (the state before this generation's update), so that it keeps sampling (the budget
    is counted per generation) without degenerating (sigma under the precision, then overflows).
    No host synchronisation."""
    p = alg.params
    if p.restarts == "none":
        stop = done & terminated(alg, ctx, s, f_range)
        out = dict(s)
        for k in FROZEN:
            a = s[k]
            out[k] = ctx.xp.where(stop.reshape((-1,) + (1,) * (a.ndim - 1)), before[k], a)
        return out
    xp, n, dt, g = ctx.xp, ctx.dim, ctx.dtype, s["generation"]
    lam0, K = alg.lam0, p.max_doublings
    out = dict(s)
    lam = s["lam"]
    small_run = s["regime"] == 1
    out["evals_large"] = s["evals_large"] + xp.where(done & ~small_run, lam, 0)
    out["evals_small"] = s["evals_small"] + xp.where(done & small_run, lam, 0)
    stop = done & terminated(alg, ctx, s, f_range)
    if xp is np and not stop.any():  # NumPy: nothing restarts (CuPy runs the masks, unchanged)
        return out
    scale, sigma0 = alg.box_scale(ctx)
    n_large = s["n_large"]
    go_small = xp.zeros_like(stop) if p.restarts == "ipop" else out["evals_small"] < out["evals_large"]
    new_large = n_large + xp.where(go_small, 0, 1)
    lam_large = lam0 * (2 ** xp.minimum(new_large, K))
    u = ctx.rng.uniform(g, DRAW_RESTART_U, 2, dt)
    half = 2.0 ** (xp.minimum(n_large, K) - 1).astype(dt)  # lambda_l / (2 lambda_start), lambda_l the last large
    m_small = xp.maximum(1, xp.floor(half ** (u[:, 0] ** 2)).astype(np.int64))
    lam_new = xp.where(go_small, lam0 * m_small, lam_large)
    sigma_new = xp.where(go_small, sigma0 * 10.0 ** (-2.0 * u[:, 1]), sigma0).astype(dt)
    mean_new = ctx.uniform_in_box(g, DRAW_RESTART_MEAN, 1)[:, 0]
    I = lam.shape[0]
    eye = xp.broadcast_to(xp.eye(n, dtype=dt), (I, n, n))
    st, st2, st3 = stop[:, None], stop[:, None, None], stop
    out["lam"] = xp.where(st3, lam_new, lam)
    out["n_large"] = xp.where(st3, new_large, n_large)
    out["regime"] = xp.where(st3, go_small.astype(np.int64), s["regime"])
    out["runs"] = s["runs"] + stop.astype(np.int64)
    out["sigma"] = xp.where(st3, sigma_new, s["sigma"])
    out["sigma_start"] = xp.where(st3, sigma_new, s["sigma_start"])
    out["mean"] = xp.where(st, mean_new, s["mean"])
    out["C"] = xp.where(st2, eye * (scale * scale)[None, None, :], s["C"])
    out["B"] = xp.where(st2, eye, s["B"])
    out["d"] = xp.where(st, scale[None, :], s["d"])
    out["p_sigma"] = xp.where(st, 0.0, s["p_sigma"])
    out["p_c"] = xp.where(st, 0.0, s["p_c"])
    out["it"] = xp.where(st3, 0, s["it"])
    out["hist"] = xp.where(st, xp.nan, s["hist"])
    return out
