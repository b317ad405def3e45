"""Particle swarm optimisation on a batch of islands: shared helpers and the plain PSO.

Seed 001 (Souza et al., CMEPSO-GPU), section 3.1, eqs. 1-5 and Algorithm 1, after Kennedy &
Eberhart (1995) and the linearly decreasing inertia weight of Eberhart & Shi (1998). Every array
carries the island axis first: positions ``x (I, N, D)``. Fitness is ranked with Deb's
feasibility rules on ``(f, v)`` (:mod:`problems.constraints`).

Two choices the seed leaves open, fixed here and used by every PSO variant of isles:

* **COR relative to the range.** Eq. 5 re-inserts an escaped coordinate at
  ``lower + Rnd*COR`` (``upper - Rnd*COR``) with an absolute ``COR = 0.22``. That exceeds the
  range of some variables (speed reducer x2 in [0.7, 0.8]) and would leave the box, so isles
  uses ``lower + Rnd*COR*(upper - lower)``: the same 0.22 read as a fraction of each variable's
  range. The result always stays in the box for ``0 <= COR <= 1``.
* **Velocity clamp** ``|vel_d| <= vmax_fraction*(upper_d - lower_d)`` (Eberhart & Shi, 2000). It is
  a standard addition that the seed does not have; ``vmax_fraction = 0`` disables it. Without it
  the seed's ``c1 = c2 = 2.05`` with ``w`` up to 0.9 lets velocities grow far beyond the box in
  the first iterations (the swarm only bounces off the walls), see ``benchmarks/cmepso_quality_local.py``.

Initial velocities follow SPSO 2011 (Clerc, 2011): ``vel ~ U(lower - x, upper - x)``, so that
``x + vel`` is in the box.
"""
from __future__ import annotations

from dataclasses import dataclass

from algorithms.base import Context, IslandAlgorithm, State, check_range
from problems.constraints import argbest, better

# draw ids (counter RNG): each call site of a generation has its own constant id
DRAW_INIT_X, DRAW_INIT_V = 0, 1
DRAW_R1, DRAW_R2, DRAW_R3, DRAW_COR = 10, 11, 12, 13


def inertia_weight(k: int, i_max: int, w_max: float, w_min: float) -> float:
    """Linearly decreasing inertia weight (seed 001 eq. 3; Eberhart & Shi 1998).

    ``w(k) = w_max - (k - 1)/(i_max - 1) * (w_max - w_min)``: ``w_max`` at ``k = 1`` and ``w_min``
    at ``k = i_max``; ``k`` is clamped to ``[1, i_max]`` (``w_min`` after the schedule ends;
    ``w_max`` when ``i_max = 1``). The seed prints eq. 3 garbled, as
    ``(k-1)/((I_MAX-1)(-W_MAX+W_MIN)+W_MAX)``, which does not give ``w_max`` at ``k = 1``; the
    formula above is the one of Eberhart & Shi that the seed cites.

    Args:
        k: iteration index (1-based, host int).
        i_max: schedule length ``I_MAX`` (>= 1).
        w_max, w_min: the end points.

    Returns:
        A host float.
    """
    if i_max <= 1:
        return float(w_max)
    t = (min(max(int(k), 1), int(i_max)) - 1) / (int(i_max) - 1)
    return float(w_max - t * (w_max - w_min))


def boundary_correction(ctx: Context, x, vel, u, cor: float):
    """Boundary condition with correction factor (seed 001 eqs. 4-5).

    Where ``x < lower``: ``vel = -vel`` and ``x = lower + u*COR*(upper - lower)``; where
    ``x > upper``: ``vel = -vel`` and ``x = upper - u*COR*(upper - lower)``; elsewhere unchanged.
    COR is relative to each variable's range (module docstring: the seed's absolute COR = 0.22
    would leave the box of the speed reducer's x2 in [0.7, 0.8]). NaN coordinates are left
    alone.

    Args:
        ctx: gives ``lower, upper (D,)``.
        x, vel: positions and velocities ``(..., D)``.
        u: uniforms in [0, 1) of the same shape (``Rnd_1`` of eq. 5).
        cor: correction factor in [0, 1]; the result stays in the box.

    Returns:
        ``(x, vel)`` corrected, same shapes.
    """
    xp = ctx.xp
    span = ctx.upper - ctx.lower
    lo = x < ctx.lower
    hi = x > ctx.upper
    out = lo | hi
    x = xp.where(lo, ctx.lower + u * cor * span, xp.where(hi, ctx.upper - u * cor * span, x))
    return x, xp.where(out, -vel, vel)


def clamp_velocity(ctx: Context, vel, vmax_fraction: float):
    """Clamp ``vel (..., D)`` to ``+-vmax_fraction*(upper - lower)`` (Eberhart & Shi 2000);
    unchanged when ``vmax_fraction == 0``."""
    if vmax_fraction <= 0:
        return vel
    vmax = vmax_fraction * (ctx.upper - ctx.lower)
    return ctx.xp.clip(vel, -vmax, vmax)


def update_bests(xp, state: State, x, f, v) -> State:
    """Personal bests (where ``(f, v)`` is strictly better under Deb's rules) and the island
    global bests (best of the old global best and the personal bests: never gets worse).

    Args:
        x ``(I, N, D)``, f, v ``(I, N)``: the new positions and their ranking pair.
    """
    s = dict(state)
    imp = better(f, v, s["pbest_f"], s["pbest_v"])
    s["pbest"] = xp.where(imp[..., None], x, s["pbest"])
    s["pbest_f"] = xp.where(imp, f, s["pbest_f"])
    s["pbest_v"] = xp.where(imp, v, s["pbest_v"])
    return update_gbest(xp, s)


def update_gbest(xp, state: State) -> State:
    """``gbest`` = better of the current ``gbest`` and the best ``pbest`` of each island."""
    s = dict(state)
    i = argbest(s["pbest_f"], s["pbest_v"], axis=1)[:, None]
    bx = xp.take_along_axis(s["pbest"], i[..., None], axis=1)[:, 0]
    bf = xp.take_along_axis(s["pbest_f"], i, axis=1)[:, 0]
    bv = xp.take_along_axis(s["pbest_v"], i, axis=1)[:, 0]
    imp = better(bf, bv, s["gbest_f"], s["gbest_v"])
    s["gbest"] = xp.where(imp[:, None], bx, s["gbest"])
    s["gbest_f"] = xp.where(imp, bf, s["gbest_f"])
    s["gbest_v"] = xp.where(imp, bv, s["gbest_v"])
    return s


@dataclass(frozen=True)
class PSOParams:
    """Parameters of :class:`PSO` (seed 001 section 6 defaults).

    Raises:
        ValueError: a field out of range, named ``algorithm.<field>``.
    """

    n_particles: int = 40
    w_max: float = 0.9
    w_min: float = 0.4
    c1: float = 2.05
    c2: float = 2.05
    cor: float = 0.22
    max_iterations: int = 1000
    vmax_fraction: float = 0.2

    def __post_init__(self):
        check_range("algorithm.n_particles", self.n_particles, 1, integer=True)
        check_range("algorithm.max_iterations", self.max_iterations, 1, integer=True)
        for name in ("w_max", "w_min", "c1", "c2", "vmax_fraction"):
            check_range(f"algorithm.{name}", getattr(self, name), 0)
        check_range("algorithm.cor", self.cor, 0, 1)


class PSO(IslandAlgorithm):
    """Classic PSO with inertia schedule and boundary correction (seed 001 Algorithm 1, eqs. 1-5).

    State (dict): ``x, vel, pbest (I, N, D)``, ``pbest_f, pbest_v (I, N)``, ``gbest (I, D)``,
    ``gbest_f, gbest_v (I,)``, ``generation`` and ``evals`` (host ints), ``nan_evals`` (0-d device).
    Generation ``g`` (0-based) uses the inertia weight of iteration ``k = g + 1``.
    """

    name = "pso"
    Params = PSOParams

    def population_size(self) -> int:
        """``N = n_particles``."""
        return self.params.n_particles

    def init(self, ctx: Context) -> State:
        """Uniform positions in the box, SPSO-2011 velocities, evaluated (``N`` evals per island)."""
        xp, n = ctx.xp, self.params.n_particles
        x = ctx.uniform_in_box(0, DRAW_INIT_X, n)
        y = ctx.uniform_in_box(0, DRAW_INIT_V, n)
        vel = clamp_velocity(ctx, y - x, self.params.vmax_fraction)
        f, v, n_nan = ctx.evaluator(x)
        I, D = ctx.n_islands, ctx.dim
        s = {
            "x": x, "vel": vel, "pbest": x, "pbest_f": f, "pbest_v": v,
            "gbest": xp.zeros((I, D), dtype=ctx.dtype),
            "gbest_f": xp.full((I,), xp.inf, dtype=ctx.dtype),
            "gbest_v": xp.full((I,), xp.inf, dtype=ctx.dtype),
            "generation": 0, "evals": n, "nan_evals": xp.asarray(n_nan, dtype=xp.int64),
        }
        return update_gbest(xp, s)

    def step(self, ctx: Context, state: State) -> State:
        """One PSO generation: eqs. 1-2 (velocity clamp), 4-5, evaluation, bests. No host sync."""
        p, xp, g = self.params, ctx.xp, state["generation"]
        w = inertia_weight(g + 1, p.max_iterations, p.w_max, p.w_min)
        x, shape = state["x"], state["x"].shape[1:]
        r1 = ctx.rng.uniform(g, DRAW_R1, shape, ctx.dtype)
        r2 = ctx.rng.uniform(g, DRAW_R2, shape, ctx.dtype)
        vel = (w * state["vel"] + r1 * p.c1 * (state["pbest"] - x)
               + r2 * p.c2 * (state["gbest"][:, None] - x))
        vel = clamp_velocity(ctx, vel, p.vmax_fraction)
        x, vel = boundary_correction(ctx, x + vel, vel, ctx.rng.uniform(g, DRAW_COR, shape, ctx.dtype), p.cor)
        f, v, n_nan = ctx.evaluator(x)
        s = update_bests(xp, state, x, f, v)
        s.update(x=x, vel=vel, generation=g + 1, evals=state["evals"] + p.n_particles,
                 nan_evals=state["nan_evals"] + n_nan)
        return s

    def population(self, state: State):
        """``(pbest (I, N, D), pbest_f (I, N), pbest_v (I, N))``: the personal bests."""
        return state["pbest"], state["pbest_f"], state["pbest_v"]

    def best(self, state: State):
        """``(gbest (I, D), gbest_f (I,), gbest_v (I,))``."""
        return state["gbest"], state["gbest_f"], state["gbest_v"]

    def replace(self, ctx: Context, state: State, idx, X, f, v) -> State:
        """Immigrants ``X (I, k, D)``, ``f, v (I, k)`` at particles ``idx (I, k)``: written into
        ``pbest`` and ``x``, velocity reset to 0; ``gbest`` recomputed (it never gets worse)."""
        xp = ctx.xp
        rows = xp.arange(X.shape[0])[:, None]
        s = dict(state)
        for key, val in (("pbest", X), ("x", X), ("pbest_f", f), ("pbest_v", v)):
            a = s[key].copy()
            a[rows, idx] = val
            s[key] = a
        vel = s["vel"].copy()
        vel[rows, idx] = 0
        s["vel"] = vel
        return update_gbest(xp, s)
