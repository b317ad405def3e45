"""Fused CUDA kernels of one EPSO generation (:class:`isles.algorithms.pso.epso.EPSO` on CuPy).

The generic array code of :meth:`isles.algorithms.pso.epso.EPSO.step` issues a few hundred small
CuPy kernels per generation: five normal draws (each two uniforms, ``log1p``, ``sqrt``, ``cos``
and their products), the mutated weights and global bests with their concatenations, four
uniform draws, the velocity of eqs. 1/11-13, the clamp, the boundary correction with its many
``where``, then Deb's selection among each particle's ``1 + R`` candidates (``argbest``, four
``take_along_axis``) and the best updates. Replayed as a CUDA graph each still costs a launch
slot; the CMEPSO main job (10 slave swarms and the master swarm, both EPSO) spent 874 us of GPU
time per epoch on one H100. Here one generation is two kernels around the (generic) evaluation:

1. ``epso_move`` (``epso.cu``; one thread per coordinate of every candidate, ``(I, N, C, D)``,
   ``C = 1 + R``): the inertia and clamp schedules of iteration ``generation + 1 + rng.ctr`` (the
   PSO kernels' ``schedule_one``, in every thread: no separate launch), the normal draws of the
   mutated ``w, c1, c2, c3`` (eqs. 7-9, 14; :data:`isles.algorithms.pso.draws.DRAW_NW` ...) and
   of ``b_g*`` (eq. 10, clipped to the box), the uniforms ``R1, R2, R3, COR``, the velocity of
   eq. 1 (original) or eq. 11 (replicas), plus eqs. 12-13's third term when ``c3 > 0``, the
   clamp, eq. 2 and the boundary correction of eqs. 4-5 (``pso.cu``'s ``pso_finish``, shared
   with PSO);
2. ``ctx.evaluator`` on the ``(I, N C, D)`` candidates (unchanged);
3. ``pso_bests`` (:func:`isles.algorithms.pso.cuda.fused_select_bests`, PSO's best-update kernel
   with ``C`` candidates): each particle's best candidate under Deb's rules, its ``x`` and
   ``vel``, the personal and global bests and the NaN counter.

**What is bit-identical.** The random numbers are CounterRNG's (same SplitMix64 counter hash,
same element index inside each draw's island block: ``(N, C, D)`` for the uniforms, ``(N, R, 1)``
for the weights' normals, ``(N, R, D)`` for ``b_g*``'s; the normal is :meth:`CounterRNG.normal`'s
transform ``sqrt(-2 log1p(-u1)) cos(2 pi u2)`` with the same CUDA library calls as CuPy's
ufuncs, ``log1pf``/``sqrtf``/``cosf`` or their double twins). Every float operation is the
generic code's, in the same order and association, each rounded once (explicit
``__fmul_rn``/``__fadd_rn``... of ``arith.cuh``, never contracted into an FMA); the schedules are
``schedule_one`` of :func:`isles.algorithms.pso.cuda.schedule_values` (bit-identical to the 0-d
CuPy expressions); the weights of the original (``base * ones``) are ``base`` itself (a product
by 1 is exact); clips are CuPy's ``clip`` formula; the selection and the best updates only
compare and copy, with ``argbest``'s NaN and tie semantics (first index). So, given the same
state, the fused step gives **bit-identical** ``x``, ``vel``, ``pbest*``, ``gbest*``,
``nan_evals`` to the generic CuPy path (``EPSOParams(fused=False)``), in float32 and float64,
with ``c3`` on or off (the master swarm, with or without its attractor), ``n_replicas = 0`` or
more, with or without the clamp, in both COR modes and for any value of the RNG counter
(CUDA-graph replay). Against NumPy the same caveats as for PSO apply (host schedules, NumPy's
own ``log1p``/``cos``, the evaluator's summation order): agreement to the dtype's rounding.

The kernel text is checked on the CPU as well: compiled as C with ``-DISLES_HOST_EMU``
(:mod:`isles.algorithms.pso.cuda_host`), it reproduces the NumPy generic step bit for bit once
both use the same math library (``tests/test_epso_host.py``).

Supported: what :func:`isles.algorithms.pso.cuda.unsupported_reason` allows, with ``N C < 2**31``
and ``I N C D < 2**62``; anything else runs the generic code.

Sources: seed 001 (Souza et al., CMEPSO-GPU) eqs. 1-14; Miranda & Fonseca (2002) for EPSO;
Salmon et al. (SC 2011) / Steele et al. (OOPSLA 2014) for the counter-based generator.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from isles.algorithms.core.cuda_lib import defines, draw_ids
from isles.algorithms.core.plan import function
from isles.algorithms.core.random import _MASK, MAX_DRAWS
from isles.algorithms.pso import cuda as pso_cuda
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
from isles.algorithms.pso.pso import VMAX_POWER

#: the draw ids of the counter RNG (algorithms/pso/draws.py) and MAX_DRAWS, injected into the kernels
DRAWS = draw_ids(
    DRAW_R1=DRAW_R1,
    DRAW_R2=DRAW_R2,
    DRAW_R3=DRAW_R3,
    DRAW_COR=DRAW_COR,
    DRAW_NW=DRAW_NW,
    DRAW_NC1=DRAW_NC1,
    DRAW_NC2=DRAW_NC2,
    DRAW_NC3=DRAW_NC3,
    DRAW_NG=DRAW_NG,
) + defines({"ISLES_MAX_DRAWS": f"{MAX_DRAWS}ull"})

TWO_PI = 2.0 * math.pi  # CounterRNG.normal's Python scalar, rounded to the dtype as CuPy rounds it


@functools.cache
def kernel_source(dtype) -> str:
    """CUDA source for ``dtype`` (float32 or float64): ``#define IS_F32``, :data:`DRAWS` and
    ``epso.cu`` (which includes ``pso.cu``; :mod:`isles.algorithms.core.cuda_lib`).

    Compiled with ``-DISLES_HOST_EMU`` as C on the host it gives ``emu_epso_move``,
    ``emu_normal``, ``emu_epso_move_kernel`` and ``emu_pso_bests`` (:mod:`isles.algorithms.pso.cuda_host`).
    Cached: the same string object at every launch.

    Raises:
        ValueError: another dtype.
    """
    return pso_cuda.typed_source(dtype, "fused EPSO", DRAWS, "epso.cu")


def unsupported_reason(ctx, x=None, n_candidates: int = 1) -> str | None:
    """Why the fused EPSO kernels cannot run ``ctx`` (positions ``x (I, N, D)``, ``n_candidates``
    ``C = 1 + R`` per particle), or ``None`` if they can.

    Args:
        ctx: :class:`isles.algorithms.core.base.Context`.
        x: optional positions ``(I, N, D)``.
        n_candidates: ``1 + n_replicas``.
    """
    reason = pso_cuda.unsupported_reason(ctx, x)
    if reason is None and x is not None and (x.shape[1] * n_candidates >= 2**31 or x.size * n_candidates >= 2**62):
        return "too many candidates"
    return reason


def fused_move(ctx, state: dict, params):
    """The candidates of one EPSO generation in ONE kernel (module docstring, step 1).

    Computes what :meth:`isles.algorithms.pso.epso.EPSO.step` computes before the evaluation, for
    generation ``state["generation"]`` (plus the device counter ``ctx.rng.ctr``); bit-identical to
    the generic CuPy code.

    Args:
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy, float32 or float64.
        state: EPSO state (``x, vel, pbest (I, N, D)``, ``gbest (I, D)``, ``attractor (I, D)``,
            ``attractor_v (I,)``, ``generation``).
        params: :class:`isles.algorithms.pso.epso.EPSOParams`.

    Returns:
        ``(xc, velc)``: the candidates' positions and velocities, ``(I, N, C, D)`` arrays of
        ``ctx.dtype`` (``C = 1 + n_replicas``; candidate 0 is the original's move).

    Raises:
        ValueError: unknown ``cor_mode``, unsupported context or shapes.
    """
    p = params
    if p.cor_mode not in pso_cuda.COR_MODE_IDS:
        raise ValueError(f"algorithm.cor_mode={p.cor_mode!r}: allowed values are {'|'.join(pso_cuda.COR_MODE_IDS)}")
    x = state["x"]
    C = 1 + int(p.n_replicas)
    reason = unsupported_reason(ctx, x, C)
    if reason is not None:
        raise ValueError(f"fused EPSO unavailable: {reason}")
    cp, dt = ctx.xp, np.dtype(ctx.dtype)
    t = dt.type
    I, N, D = x.shape
    use_c3 = p.c3 > 0
    attr, attr_v = (state["attractor"], state["attractor_v"]) if use_c3 else (state["gbest"], state["gbest_f"])
    if state["vel"].shape != x.shape or state["pbest"].shape != x.shape or state["gbest"].shape != (I, D):
        raise ValueError(f"fused EPSO: shapes x{x.shape} vel{state['vel'].shape} gbest{state['gbest'].shape}")
    if attr.shape != (I, D) or attr_v.shape != (I,):
        raise ValueError(f"fused EPSO: shapes attractor{attr.shape} attractor_v{attr_v.shape}")
    arrs = [
        cp.ascontiguousarray(a, dtype=dt)
        for a in (x, state["vel"], state["pbest"], state["gbest"], attr, attr_v, ctx.lower, ctx.upper)
    ]
    xo = cp.empty((I, N, C, D), dtype=dt)
    vo = cp.empty((I, N, C, D), dtype=dt)
    g = int(state["generation"])
    total = I * N * C * D
    function(cp, kernel_source(dt), "epso_move")(
        (pso_cuda._grid(total),),
        (pso_cuda.BLOCK,),
        (
            *arrs,
            ctx.rng.keys,
            ctx.rng.ctr,
            xo,
            vo,
            np.uint64((g << 16) & _MASK),
            np.uint64((g + 1) & _MASK),
            *pso_cuda.schedule_args(dt, p.max_iterations, p.w_max, p.w_min, p.vmax_fraction, p.vmax_final, VMAX_POWER),
            t(p.c1),
            t(p.c2),
            t(p.c3),
            t(p.sigma),
            t(p.sigma_g),
            t(TWO_PI),
            t(p.cor),
            np.int32(N),
            np.int32(C),
            np.int32(D),
            np.int64(total),
            np.int32(p.vmax_fraction > 0),
            np.int32(pso_cuda.COR_MODE_IDS[p.cor_mode]),
            np.int32(use_c3),
        ),
    )
    return xo, vo
