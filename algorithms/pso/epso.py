"""Evolutionary PSO (EPSO) on a batch of islands: the slave swarms of CMEPSO.

Seed 001 (Souza et al., CMEPSO-GPU), section 3.1 (eqs. 6-10), section 5.1.1 (eq. 11) and
section 5.1.2 (eqs. 12-14), in the canonical structure of Miranda & Fonseca, "EPSO: evolutionary
particle swarm optimization, a new algorithm with applications in power systems", IEEE/PES T&D
Asia Pacific 2002. Each generation, for every particle:

1. **Replication**: ``R = n_replicas`` copies of the particle (its current ``x``, ``vel``).
2. **Mutation** of the strategic parameters of every replica:
   ``w* = w (1 + sigma N(0,1))``, ``c1* = c1 (1 + sigma N(0,1))``, ``c2*``, ``c3*`` likewise, and
   of the global best, per coordinate: ``b_g* = b_g (1 + sigma_g N(0,1))`` (clipped to the box).
   The seed prints eqs. 7-10 and 14 as ``w + (1 + sigma N(0,1))``, which would add about 1 to
   every weight at every step; this is a misprint of the multiplicative form of Miranda &
   Fonseca (e.g. Miranda, Keko & Duque, "Stochastic star communication topology in EPSO",
   IJCIR 2008: ``w* = w (1 + sigma N(0,1))``), which is what isles implements.
3. **Reproduction**: the original moves with eq. 1 (schedule ``w`` of eq. 3, ``c1``, ``c2``,
   uniform factors), plus ``Rnd3 c3 (b_g^S - x)`` when ``c3 > 0`` (eq. 13); each replica moves
   with eq. 11 (eq. 12 when ``c3 > 0``) with its mutated weights and ``b_g*``; then eq. 2, the
   velocity clamp and the boundary correction (eqs. 4-5) of :mod:`isles.algorithms.pso.pso`.
4. **Evaluation** of all ``1 + R`` candidates of all particles in ONE batched call of shape
   ``(I, N (1 + R), D)`` (one kernel launch per array operation on the GPU).
5. **Selection**: the best candidate under Deb's rules becomes the particle (``x``, ``vel``);
   then personal and island global bests are updated with Deb's rules.

``b_g^S`` (``state["attractor"]``) is an external best, set by :meth:`EPSO.set_attractor` (the
CMEPSO master swarm sets it to the best slave best); while it is unset (``attractor_v = inf``)
the ``c3`` term is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from isles.algorithms.core.base import Context, State, check_range
from isles.algorithms.pso.draws import (
    DRAW_COR,
    DRAW_NC1,
    DRAW_NC2,
    DRAW_NC3,
    DRAW_NG,
    DRAW_NW,
    DRAW_R1,
    DRAW_R2,
    DRAW_R3,
)
from isles.algorithms.pso.pso import (
    PSO,
    PSOParams,
    boundary_correction,
    clamp_velocity,
    inertia_weight,
    update_bests,
    vmax_schedule,
)
from isles.problems.constraints import argbest


def select_candidates(xp, xc, vel, f, v):
    """Each particle's best candidate under Deb's rules (selection, step 5 of the module docstring).

    Args:
        xc, vel: candidates' positions and velocities ``(I, N, C, D)``; f, v: their ranking pair
            ``(I, N, C)``.

    Returns:
        ``(x, vel, f, v)`` of the chosen candidates: ``(I, N, D)``, ``(I, N, D)``, ``(I, N)``,
        ``(I, N)`` (:func:`isles.problems.constraints.argbest`: first index on ties).
    """
    k = argbest(f, v, axis=2)[:, :, None]  # (I, N, 1)
    x_new = xp.take_along_axis(xc, k[..., None], axis=2)[:, :, 0]
    vel_new = xp.take_along_axis(vel, k[..., None], axis=2)[:, :, 0]
    return x_new, vel_new, xp.take_along_axis(f, k, axis=2)[:, :, 0], xp.take_along_axis(v, k, axis=2)[:, :, 0]


@dataclass(frozen=True)
class EPSOParams(PSOParams):
    """Parameters of :class:`EPSO`: those of :class:`isles.algorithms.pso.pso.PSOParams` (seed 001 section 6
    defaults, the velocity clamp and COR mode tuned with ``benchmarks/cmepso_quality_local.py``)
    plus the replication and mutation fields.

    ``n_replicas`` R copies per particle; ``c3`` the third attractor (eqs. 12-14), 0 for the slaves
    and 2.02 for the master swarm; ``sigma`` the mutation strength of w, c1, c2, c3 (eqs. 7-9,
    14); ``sigma_g`` that of the global best (eq. 10). ``fused``: on CuPy, EPSO's step runs the fused
    kernels of :mod:`isles.algorithms.pso.epso_cuda` (same results, bit for bit); ``False`` forces
    the generic array code. ``host_kernel``: on NumPy, run generations in the host build
    (:class:`isles.algorithms.pso.host_epoch.HostEpochEPSO`; a problem with a ``cuda_row`` or
    ``cuda_objective``): ``"auto"`` (default), ``True`` or ``False``
    (:mod:`isles.algorithms.core.host_build`); the same populations as the array code.

    Raises:
        ValueError: a field out of range, named ``algorithm.<field>``.
    """

    n_replicas: int = 5
    c3: float = 0.0
    sigma: float = 0.22
    sigma_g: float = 0.005

    def __post_init__(self):
        super().__post_init__()
        check_range("algorithm.n_replicas", self.n_replicas, 0, integer=True)
        for name in ("c3", "sigma", "sigma_g"):
            check_range(f"algorithm.{name}", getattr(self, name), 0)


class EPSO(PSO):
    """EPSO island algorithm (seed 001 eqs. 1-14, Algorithm 2; Miranda & Fonseca 2002).

    State (dict): as :class:`isles.algorithms.pso.pso.PSO` (``x, vel, pbest (I, N, D)``, ``pbest_f,
    pbest_v (I, N)``, ``gbest (I, D)``, ``gbest_f, gbest_v (I,)``, ``generation``, ``evals``,
    ``nan_evals``) plus ``attractor (I, D)``, ``attractor_f, attractor_v (I,)`` (``b_g^S``; inf
    when unset). ``evals`` grows by ``N (1 + R)`` per generation.
    """

    name = "epso"
    Params = EPSOParams
    HOST_MODULE = "isles.algorithms.pso.host_epoch"  # the host build, NumPy runs' CPU path (algorithm.host_kernel)

    def evaluations_per_generation(self) -> int:
        """``N (1 + R)``: each particle's original move and its ``R`` replicas."""
        return int(self.params.n_particles * (1 + self.params.n_replicas))

    def init(self, ctx: Context) -> State:
        """Initial swarm (:meth:`PSO.init`, ``N`` evals per island) with an unset attractor."""
        s = super().init(ctx)
        xp, I = ctx.xp, ctx.n_islands
        s["attractor"] = xp.zeros((I, ctx.dim), dtype=ctx.dtype)
        s["attractor_f"] = xp.full((I,), xp.inf, dtype=ctx.dtype)
        s["attractor_v"] = xp.full((I,), xp.inf, dtype=ctx.dtype)
        return s

    @staticmethod
    def set_attractor(state: State, x, f, v) -> State:
        """Return ``state`` with the external best ``b_g^S``: ``x (I, D)``, ``f, v (I,)``."""
        return {**state, "attractor": x, "attractor_f": f, "attractor_v": v}

    def step(self, ctx: Context, state: State) -> State:
        """One EPSO generation for every island (module docstring); no host synchronisation.

        On CuPy (``params.fused``, float32/float64) the fused kernels of
        :mod:`isles.algorithms.pso.epso_cuda` run instead of the array code below, with bit-identical
        results (:meth:`_fused_step`); on NumPy the host build where ``host_kernel`` allows it
        (:mod:`isles.algorithms.pso.host_epoch`, the same populations).
        """
        if self._fused_ok(ctx, state):
            return self._fused_step(ctx, state)
        host = self.host_plan(ctx) if ctx.xp is np else None
        if host is not None:  # NumPy: the host build, as run's (algorithm.host_kernel)
            return host(state, 1)
        p, xp, rng, g, dt = self.params, ctx.xp, ctx.rng, state["generation"], ctx.dtype
        I, N, D = state["x"].shape
        C = 1 + p.n_replicas  # candidates per particle: the original then R replicas
        kg = ctx.generation_value(g + 1)  # device counter on CuPy: CUDA-graph safe
        w = inertia_weight(kg, p.max_iterations, p.w_max, p.w_min)
        one = xp.ones((I, N, 1, 1), dtype=dt)

        def weights(base, draw):  # (I, N, C, 1): unmutated for the original, eq. 7-9/14 for replicas
            if p.n_replicas == 0:
                return base * one
            mut = base * (1 + p.sigma * rng.normal(g, draw, (N, p.n_replicas, 1), dt))
            return xp.concatenate([base * one, mut], axis=2)

        x = state["x"][:, :, None]  # (I, N, 1, D)
        bg = state["gbest"][:, None, None]  # (I, 1, 1, D)
        if p.n_replicas:
            bgm = bg * (1 + p.sigma_g * rng.normal(g, DRAW_NG, (N, p.n_replicas, D), dt))
            bgm = xp.clip(bgm, ctx.lower, ctx.upper)  # eq. 10, b_g* per replica and coordinate
            bg = xp.concatenate([xp.broadcast_to(bg, (I, N, 1, D)), bgm], axis=2)
        vel = (
            weights(w, DRAW_NW) * state["vel"][:, :, None]
            + rng.uniform(g, DRAW_R1, (N, C, D), dt) * weights(p.c1, DRAW_NC1) * (state["pbest"][:, :, None] - x)
            + rng.uniform(g, DRAW_R2, (N, C, D), dt) * weights(p.c2, DRAW_NC2) * (bg - x)
        )
        if p.c3 > 0:  # eqs. 12-13: third attractor b_g^S, zero while unset
            on = xp.isfinite(state["attractor_v"]).astype(dt)[:, None, None, None]
            vel = vel + (
                on
                * rng.uniform(g, DRAW_R3, (N, C, D), dt)
                * weights(p.c3, DRAW_NC3)
                * (state["attractor"][:, None, None] - x)
            )
        if p.vmax_fraction > 0:
            vel = clamp_velocity(ctx, vel, vmax_schedule(kg, p.max_iterations, p.vmax_fraction, p.vmax_final))
        u = rng.uniform(g, DRAW_COR, (N, C, D), dt)
        xc, vel = boundary_correction(ctx, x + vel, vel, u, p.cor, p.cor_mode)
        f, v, n_nan = ctx.evaluator(xc.reshape(I, N * C, D))
        f, v = f.reshape(I, N, C), v.reshape(I, N, C)
        x_new, vel_new, f_new, v_new = select_candidates(xp, xc, vel, f, v)
        s = update_bests(xp, state, x_new, f_new, v_new)
        s.update(
            x=x_new, vel=vel_new, generation=g + 1, evals=state["evals"] + N * C, nan_evals=state["nan_evals"] + n_nan
        )
        return s

    def _fused_ok(self, ctx: Context, state: State) -> bool:
        """Whether :meth:`step` can take the fused CUDA path (CuPy, float32/float64, (I, N, D))."""
        if not getattr(self.params, "fused", False) or getattr(ctx.xp, "__name__", "") != "cupy":
            return False
        from isles.algorithms.pso.epso_cuda import unsupported_reason  # noqa: PLC0415

        return unsupported_reason(ctx, state["x"], 1 + self.params.n_replicas) is None

    def _fused_step(self, ctx: Context, state: State) -> State:
        """:meth:`step` on CuPy with :mod:`isles.algorithms.pso.epso_cuda`: the candidates' move with
        its schedules and draws (1 launch), ``ctx.evaluator`` on the ``(I, N C, D)`` candidates,
        then the selection, best updates and NaN count (1 launch,
        :func:`isles.algorithms.pso.cuda.fused_select_bests`). Bit-identical to the generic code;
        no host synchronisation."""
        from isles.algorithms.pso import cuda as pso_cuda  # noqa: PLC0415
        from isles.algorithms.pso import epso_cuda  # noqa: PLC0415

        g = state["generation"]
        xc, velc = epso_cuda.fused_move(ctx, state, self.params)
        I, N, C, D = xc.shape
        f, v, n_nan = ctx.evaluator(xc.reshape(I, N * C, D))
        src = epso_cuda.kernel_source(ctx.dtype)  # one module: epso.cu includes pso.cu's pso_bests
        s = pso_cuda.fused_select_bests(ctx, state, xc, velc, f, v, n_nan, src)
        s.update(generation=g + 1, evals=state["evals"] + N * C)
        return s
