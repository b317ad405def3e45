"""Particle swarm optimisation on a batch of islands: shared helpers and the plain PSO.

Seed 001 (Souza et al., CMEPSO-GPU), section 3.1, eqs. 1-5 and Algorithm 1, after Kennedy &
Eberhart (1995) and the linearly decreasing inertia weight of Eberhart & Shi (1998). Every array
carries the island axis first: positions ``x (I, N, D)``. Fitness is ranked with Deb's
feasibility rules on ``(f, v)`` (:mod:`isles.problems.constraints`).

Two choices the seed leaves open, fixed here for every PSO variant of isles and tuned with
``benchmarks/cmepso_quality_local.py`` (CMEPSO, seed defaults, welded beam / spring / speed reducer):

* **COR made relative.** Eq. 5 re-inserts an escaped coordinate at ``lower + Rnd*COR``
  (``upper - Rnd*COR``) with an absolute ``COR = 0.22``, which exceeds the range of some
  variables (speed reducer x2 in [0.7, 0.8]) and would leave the box. isles scales COR by a
  per-variable distance ``d``: the range (``cor_mode="range"``) or, by default, the overshoot
  capped at the range (``cor_mode="overshoot"``), see :func:`boundary_correction`. With
  ``"range"`` the speed reducer (optimum on four bounds) stalls 6e-4 (best of 20 seeds) to 1e-3
  (median) above f*; plain clipping (COR = 0) hurts the spring instead (x1* = 0.0517 lies next to
  its bound 0.05: median 2e-4 to 2e-3 above f* in 6-seed trials); ``"overshoot"`` serves both.
* **Velocity clamp** ``|vel_d| <= vmax(k)*(upper_d - lower_d)``, a standard addition that the seed
  does not have (Eberhart & Shi, 2000), decreasing from ``vmax_fraction = 0.5`` to
  ``vmax_final = 1e-6`` (:func:`vmax_schedule`); ``vmax_fraction = 0`` disables it. A constant
  clamp (0.01 to 0.5, or none) leaves CMEPSO 1e-4 to 2e-4 above f* on the welded beam, because
  the EPSO replicas' ``b_g*`` noise (0.5 % of each coordinate) never shrinks; the decreasing clamp
  gets it to about 2e-6.

Initial velocities follow SPSO 2011 (Clerc, 2011): ``vel ~ U(lower - x, upper - x)``, so that
``x + vel`` is in the box.

On CuPy (float32/float64), :meth:`PSO.step` runs the fused kernels of :mod:`isles.algorithms.pso.cuda`
(schedules, move and best updates: three launches around the evaluation instead of about 60),
bit-identical to the generic array code below, which ``PSOParams(fused=False)`` runs. On NumPy,
whole generations of every island run in one C call (``algorithm.host_kernel``, the host build of
:mod:`isles.algorithms.pso.host_epoch`, shared with EPSO) where it applies, the array code's
populations bit for bit; else, and with ``host_kernel=false``, the array code below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from isles.algorithms.core.base import Context, IslandAlgorithm, State, check_bool, check_range
from isles.algorithms.core.host_build import check_host_kernel
from isles.algorithms.pso.draws import DRAW_COR, DRAW_INIT_V, DRAW_INIT_X, DRAW_R1, DRAW_R2
from isles.problems.constraints import argbest, better


def inertia_weight(k: int, i_max: int, w_max: float, w_min: float) -> float:
    """Linearly decreasing inertia weight (seed 001 eq. 3; Eberhart & Shi 1998).

    ``w(k) = w_max - (k - 1)/(i_max - 1) * (w_max - w_min)``: ``w_max`` at ``k = 1`` and ``w_min``
    at ``k = i_max``; ``k`` is clamped to ``[1, i_max]`` (``w_min`` after the schedule ends;
    ``w_max`` when ``i_max = 1``). The seed prints eq. 3 garbled, as
    ``(k-1)/((I_MAX-1)(-W_MAX+W_MIN)+W_MAX)``, which does not give ``w_max`` at ``k = 1``; the
    formula above is the one of Eberhart & Shi that the seed cites.

    Args:
        k: iteration index (1-based): a host int, or a 0-d device array (see
            :func:`schedule_fraction`).
        i_max: schedule length ``I_MAX`` (>= 1).
        w_max, w_min: the end points.

    Returns:
        A host float, or a 0-d device array for a device ``k``.
    """
    return w_max - schedule_fraction(k, i_max) * (w_max - w_min)


def schedule_fraction(k, i_max: int):
    """``t = (k - 1)/(i_max - 1)`` clamped to [0, 1] (0 when ``i_max <= 1``).

    ``k`` is a host int (NumPy path) or a 0-d device array from
    :meth:`isles.algorithms.core.base.Context.generation_value` (CuPy path, CUDA-graph safe); the result has
    the same kind.
    """
    if i_max <= 1:
        return 0.0
    t = (k - 1) / (int(i_max) - 1)
    if isinstance(t, (int, float)):
        return min(max(t, 0.0), 1.0)
    return t.clip(0.0, 1.0)


COR_MODES = ("overshoot", "range")
VMAX_POWER = 3  # exponent of the clamp schedule (see vmax_schedule)


def boundary_correction(ctx: Context, x, vel, u, cor: float, mode: str = "overshoot"):
    """Boundary condition with correction factor (seed 001 eqs. 4-5), COR made relative.

    Where ``x < lower``: ``vel = -vel`` (eq. 4) and ``x = lower + u*COR*d`` (eq. 5); where
    ``x > upper``: ``vel = -vel`` and ``x = upper - u*COR*d``; elsewhere unchanged. The seed's
    ``d = 1`` (absolute COR = 0.22) would leave the box of the speed reducer's x2 in [0.7, 0.8],
    so ``d`` is relative (module docstring):

    * ``mode="range"``: ``d = upper - lower`` (COR as a fraction of each variable's range);
    * ``mode="overshoot"`` (default): ``d = min(upper - lower, distance the move went past the
      bound)``, a damped random reflection (cf. Helwig, Branke & Mostaghim, IEEE TEVC 17(2),
      2013): large escapes are thrown back as far as with ``"range"``, while small overshoots
      land near the bound, where many optima lie (speed reducer: four variables at bounds).

    Both keep the result in the box for ``0 <= COR <= 1``. NaN coordinates are left alone.

    Args:
        ctx: gives ``lower, upper (D,)``.
        x, vel: positions (after eq. 2) and velocities ``(..., D)``.
        u: uniforms in [0, 1) of the same shape (``Rnd_1`` of eq. 5).
        cor: correction factor in [0, 1].
        mode: ``"overshoot"`` or ``"range"``.

    Returns:
        ``(x, vel)`` corrected, same shapes.

    Raises:
        ValueError: unknown ``mode``.
    """
    if mode not in COR_MODES:
        raise ValueError(f"algorithm.cor_mode={mode!r}: allowed values are {'|'.join(COR_MODES)}")
    xp = ctx.xp
    lo = x < ctx.lower
    hi = x > ctx.upper
    d = ctx.upper - ctx.lower
    if mode == "overshoot":
        d = xp.minimum(d, xp.where(lo, ctx.lower - x, x - ctx.upper))
    x = xp.where(lo, ctx.lower + u * cor * d, xp.where(hi, ctx.upper - u * cor * d, x))
    return x, xp.where(lo | hi, -vel, vel)


def vmax_schedule(k: int, i_max: int, start: float, final: float) -> float:
    """Velocity clamp (fraction of the range) at iteration ``k`` (1-based): ``start`` at ``k = 1``,
    ``final`` at ``k = i_max`` (clamped after), log-interpolated with weight ``t**3``,
    ``t = (k - 1)/(i_max - 1)``: ``start * (final/start)**(t**3)``.

    A decreasing Vmax (Fan & Shi, "Study on Vmax of particle swarm optimization", 2001); the
    shape is isles' own tuning: the clamp stays wide during the first half (exploration; 0.1 at
    ``t = 0.5`` for 0.5 -> 1e-6) and then shrinks by decades, which damps the replicas' mutated
    ``b_g*`` noise (a fixed 0.5 % of each coordinate) so that the swarm can converge to better than
    1e-5 relative. ``start = 0`` disables the clamp; ``final >= start`` keeps it constant.
    """
    if start <= 0 or final >= start or i_max <= 1:
        return float(start)
    return start * (final / start) ** (schedule_fraction(k, i_max) ** VMAX_POWER)


def clamp_velocity(ctx: Context, vel, vmax_fraction):
    """Clamp ``vel (..., D)`` to ``+-vmax_fraction*(upper - lower)`` (Eberhart & Shi 2000).

    ``vmax_fraction`` is a host float or a 0-d device array; callers skip the clamp when the
    parameter ``vmax_fraction`` is 0 (disabled)."""
    vmax = vmax_fraction * (ctx.upper - ctx.lower)
    return ctx.xp.clip(vel, -vmax, vmax)


def check_common(p) -> None:
    """Validate the fields shared by the PSO-family parameter dataclasses.

    Raises:
        ValueError: naming the field, e.g. ``"algorithm.n_particles=0: allowed values are
            integers >= 1"``.
    """
    check_range("algorithm.n_particles", p.n_particles, 1, integer=True)
    check_range("algorithm.max_iterations", p.max_iterations, 1, integer=True)
    for name in ("w_max", "w_min", "c1", "c2", "vmax_fraction", "vmax_final"):
        check_range(f"algorithm.{name}", getattr(p, name), 0)
    check_range("algorithm.cor", p.cor, 0, 1)
    if p.cor_mode not in COR_MODES:
        raise ValueError(f"algorithm.cor_mode={p.cor_mode!r}: allowed values are {'|'.join(COR_MODES)}")


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
    """Parameters of :class:`PSO` (seed 001 section 6 defaults; ``w_max``/``w_min`` are Shi &
    Eberhart's usual values, not given in the seed). ``vmax_fraction``/``vmax_final``: the
    decreasing velocity clamp of :func:`vmax_schedule` (not in the seed); ``cor_mode``: see
    :func:`boundary_correction`; ``fused``: on CuPy, use the fused CUDA kernels of
    :mod:`isles.algorithms.pso.cuda` (same results, bit for bit); ``False`` forces the generic array code.
    ``host_kernel``: on NumPy, run generations in the host build
    (:class:`isles.algorithms.pso.host_epoch.HostEpochEPSO`; a real problem with a ``cuda_row`` or
    ``cuda_objective``): ``"auto"`` (default), ``True`` or ``False``
    (:mod:`isles.algorithms.core.host_build`); the same populations as the array code.

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
    vmax_fraction: float = 0.5
    vmax_final: float = 1e-6
    cor_mode: str = "overshoot"
    fused: bool = True
    host_kernel: bool | str = "auto"

    def __post_init__(self):
        check_common(self)
        object.__setattr__(self, "fused", check_bool("algorithm.fused", self.fused))
        check_host_kernel(self.host_kernel)


class PSO(IslandAlgorithm):
    """Classic PSO with inertia schedule and boundary correction (seed 001 Algorithm 1, eqs. 1-5).

    State (dict): ``x, vel, pbest (I, N, D)``, ``pbest_f, pbest_v (I, N)``, ``gbest (I, D)``,
    ``gbest_f, gbest_v (I,)``, ``generation`` and ``evals`` (host ints), ``nan_evals`` (0-d device).
    Generation ``g`` (0-based) uses the inertia weight of iteration ``k = g + 1``.
    """

    graph_safe = True
    FIELDS = {"genome": "pbest", "f": "pbest_f", "v": "pbest_v"}
    EXTRAS = {"x": "x", "vel": "vel"}

    name = "pso"
    Params = PSOParams
    HOST_MODULE = "isles.algorithms.pso.host_epoch"  # the host build, NumPy runs' CPU path (algorithm.host_kernel)

    def evaluations_per_generation(self) -> int:
        """``n_particles``: every particle's new position is evaluated once."""
        return int(self.params.n_particles)

    def population_size(self) -> int:
        """``N = n_particles``."""
        return self.params.n_particles

    def init(self, ctx: Context) -> State:
        """Uniform positions in the box, SPSO-2011 velocities, evaluated (``N`` evals per island)."""
        xp, n = ctx.xp, self.params.n_particles
        x = ctx.uniform_in_box(0, DRAW_INIT_X, n)
        y = ctx.uniform_in_box(0, DRAW_INIT_V, n)
        vel = y - x
        if self.params.vmax_fraction > 0:  # the clamp at k = 1; 0 = no clamp
            vel = clamp_velocity(ctx, vel, self.params.vmax_fraction)
        f, v, n_nan = ctx.evaluator(x)
        I, D = ctx.n_islands, ctx.dim
        s = {
            "x": x,
            "vel": vel,
            "pbest": x,
            "pbest_f": f,
            "pbest_v": v,
            "gbest": xp.zeros((I, D), dtype=ctx.dtype),
            "gbest_f": xp.full((I,), xp.inf, dtype=ctx.dtype),
            "gbest_v": xp.full((I,), xp.inf, dtype=ctx.dtype),
            "generation": 0,
            "evals": n,
            "nan_evals": xp.asarray(n_nan, dtype=xp.int64),
        }
        return update_gbest(xp, s)

    def step(self, ctx: Context, state: State) -> State:
        """One PSO generation: eqs. 1-2 (velocity clamp), 4-5, evaluation, bests. No host sync.

        On CuPy (``params.fused``, float32/float64) the fused kernels of :mod:`isles.algorithms.pso.cuda`
        run instead of the array code below, with bit-identical results (:meth:`_fused_step`); on
        NumPy the host build where ``host_kernel`` allows it (:mod:`isles.algorithms.pso.host_epoch`,
        the same populations).
        """
        if self._fused_ok(ctx, state):
            return self._fused_step(ctx, state)
        host = self.host_plan(ctx) if ctx.xp is np else None
        if host is not None:  # NumPy: the host build, as run's (algorithm.host_kernel)
            return host(state, 1)
        p, xp, g = self.params, ctx.xp, state["generation"]
        k = ctx.generation_value(g + 1)
        w = inertia_weight(k, p.max_iterations, p.w_max, p.w_min)
        x, shape = state["x"], state["x"].shape[1:]
        r1 = ctx.rng.uniform(g, DRAW_R1, shape, ctx.dtype)
        r2 = ctx.rng.uniform(g, DRAW_R2, shape, ctx.dtype)
        vel = w * state["vel"] + r1 * p.c1 * (state["pbest"] - x) + r2 * p.c2 * (state["gbest"][:, None] - x)
        if p.vmax_fraction > 0:
            vel = clamp_velocity(ctx, vel, vmax_schedule(k, p.max_iterations, p.vmax_fraction, p.vmax_final))
        u = ctx.rng.uniform(g, DRAW_COR, shape, ctx.dtype)
        x, vel = boundary_correction(ctx, x + vel, vel, u, p.cor, p.cor_mode)
        f, v, n_nan = ctx.evaluator(x)
        s = update_bests(xp, state, x, f, v)
        s.update(
            x=x, vel=vel, generation=g + 1, evals=state["evals"] + p.n_particles, nan_evals=state["nan_evals"] + n_nan
        )
        return s

    def _fused_ok(self, ctx: Context, state: State) -> bool:
        """Whether :meth:`step` can take the fused CUDA path (CuPy, float32/float64, (I, N, D))."""
        if not getattr(self.params, "fused", False) or getattr(ctx.xp, "__name__", "") != "cupy":
            return False
        from isles.algorithms.pso.cuda import unsupported_reason  # noqa: PLC0415

        return unsupported_reason(ctx, state["x"]) is None

    def _fused_step(self, ctx: Context, state: State) -> State:
        """:meth:`step` on CuPy with :mod:`isles.algorithms.pso.cuda`: the schedules (1 launch), the
        move with its three draws (1 launch), ``ctx.evaluator`` and the best updates plus the NaN
        count (1 launch). Bit-identical to the generic code; no host synchronisation."""
        from isles.algorithms.pso import cuda as pso_cuda  # noqa: PLC0415

        p, g = self.params, state["generation"]
        w, vmax = pso_cuda.schedule_values(
            ctx, g + 1, p.max_iterations, p.w_max, p.w_min, p.vmax_fraction, p.vmax_final, VMAX_POWER
        )
        x, vel = pso_cuda.fused_move(
            ctx,
            state["x"],
            state["vel"],
            state["pbest"],
            state["gbest"],
            g,
            w,
            vmax if p.vmax_fraction > 0 else None,
            p.c1,
            p.c2,
            p.cor,
            p.cor_mode,
        )
        f, v, n_nan = ctx.evaluator(x)
        s = pso_cuda.fused_update_bests(ctx, state, x, f, v, n_nan)
        s.update(x=x, vel=vel, generation=g + 1, evals=state["evals"] + p.n_particles)
        return s

    def adopt(self, ctx: Context, state: State, immigrants, valid):
        """PSO's arrival rule in a mixed archipelago (:meth:`IslandAlgorithm.adopt`): the immigrant
        becomes a particle at rest on its own best: personal best = current position ``x`` = the
        immigrant's ``x`` (with its ``f``, ``v``), velocity 0, whatever the family it comes from;
        :meth:`replace` then updates the swarm's best."""
        imm = immigrants.conform(self.population(state))
        vel = ctx.xp.zeros_like(imm.extras["vel"])
        return state, type(imm)(imm.genome, imm.f, imm.v, {"x": imm.genome, "vel": vel})

    def replace(self, ctx: Context, state: State, idx, immigrants) -> State:
        """Immigrants ``(I, k)`` at particles ``idx (I, k)``: personal best (the genome), fitness,
        violation, and the extras current position ``x`` and velocity ``vel``, so an immigrant
        keeps moving as it did at home. ``immigrants`` has this swarm's leaves
        (:meth:`isles.algorithms.core.population.Population.conform` gives zeros to an immigrant that
        carries no extras, e.g. the master swarm's best). ``gbest`` is recomputed (it never gets
        worse)."""
        return update_gbest(ctx.xp, super().replace(ctx, state, idx, immigrants))
