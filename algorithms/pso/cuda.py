"""Fused CUDA kernels of one PSO generation (:class:`isles.algorithms.pso.pso.PSO` on CuPy).

The generic array code of :meth:`isles.algorithms.pso.pso.PSO.step` issues about 60 small CuPy kernels per
generation (three random draws, the velocity update of seed 001 eq. 1, the velocity clamp, the
boundary correction of eqs. 4-5 with its many ``where``, the inertia and clamp schedules of
eq. 3, the personal and global best updates), plus the evaluation. Even replayed as a CUDA graph
(:mod:`isles.algorithms.core.graph`) each of them costs a launch slot (about 1.5 us on an H100), so a step of
EvoX's benchmark workload (100 particles, sphere D = 500) took 154 us. Here the same generation is
three kernels around the (generic) evaluation:

1. :func:`schedule_values` (one thread): the inertia weight ``w(k)`` (eq. 3,
   :func:`isles.algorithms.pso.pso.inertia_weight`) and the clamp fraction ``vmax(k)``
   (:func:`isles.algorithms.pso.pso.vmax_schedule`) for ``k = generation + 1 + rng.ctr``, written to device
   memory, so that a CUDA-graph replay sees the right iteration (the counter ``ctr`` of
   :class:`isles.algorithms.core.random.CounterRNG` advances on the device at each replay);
2. :func:`fused_move` (one thread per coordinate): the random factors ``R1, R2`` (eq. 1) and the
   COR uniforms (eq. 5), drawn exactly as ``CounterRNG.uniform`` would (draw ids
   :data:`isles.algorithms.pso.draws.DRAW_R1`, ``DRAW_R2``, ``DRAW_COR``, same SplitMix64 counter hash, same
   element index within the island's ``(N, D)`` block, same float conversion), the velocity
   update (eq. 1), the clamp, the move (eq. 2) and :func:`isles.algorithms.pso.pso.boundary_correction` in
   both COR modes (eqs. 4-5);
3. ``ctx.evaluator(x)`` (unchanged, the problem's own array code);
4. :func:`fused_update_bests`: personal bests, island global bests under Deb's rules and the NaN
   counter in one kernel (blocks ``0..B-1`` copy the personal-best rows, one block per island
   reduces its swarm and writes the global best).

``pso.cu`` is also the fused EPSO generation's base (:mod:`isles.algorithms.pso.epso_cuda`): its
schedules (``schedule_one``), the clamp, move and boundary correction (``pso_finish``) and the
best-update kernel ``pso_bests``, which takes ``C`` candidates per particle and first picks each
particle's best under Deb's rules (:func:`fused_select_bests`; PSO: ``C = 1``).

**What is bit-identical.** The float operations of (1) and (2) are the generic code's, in the
same order, each rounded once (explicit ``__fmul_rn``/``__fadd_rn``/``__fsub_rn``/``__fdiv_rn``
and their double twins, which the compiler never contracts into an FMA; ``powf``/``pow`` are the
same CUDA library calls as CuPy's ``power`` ufunc; the clip is CuPy's ``clip`` formula), and (4)
only selects. So, given the same state, the fused path gives **bit-identical** ``x``, ``vel``,
``pbest*``, ``gbest*`` and ``nan_evals`` to the generic CuPy path (``PSOParams(fused=False)``),
in float32 and float64, in both COR modes, with or without the clamp, for any number of islands
and any value of the RNG counter (CUDA-graph replay included). Against the NumPy twin: the random
numbers and every operation of the move are the same, but the schedules are not computed alike
(NumPy evaluates ``w(k)`` and ``vmax(k)`` on host floats, in double, then rounds them to the
array dtype; CuPy evaluates them in the array dtype on the device, with CUDA's ``pow``). In
float64 ``w`` agrees exactly, so the move is bit-identical to NumPy where ``vmax`` agrees too:
without the clamp, with a constant clamp, and at ``k = 1``; elsewhere ``vmax`` may differ in the
last bit (host vs CUDA ``pow``) and results agree to ~1e-15 relative. In float32 ``w`` may differ
by one ulp, so NumPy and CuPy agree to float32 rounding. The evaluation (a CuPy reduction) sums
in another order than NumPy, as on the generic CuPy path. NaN semantics follow NumPy (the
argbest of an island takes its first NaN key); signed zeros may differ from NumPy's ``clip``
where a variable's range is 0.

Measured on one H100 80GB HBM3 (CuPy 14, ``python benchmarks/cmepso_bench.py pso-step --device
gpu``: PSO, N = 100, sphere D = 500, one island, CUDA-graph replay, CUDA events over 2000 steps):
35.7-36.0 us per step in float32 and 36.0-36.3 us in float64 over two runs (generic code:
153.7 us). The rest of the step is the generic evaluator (about 9 small kernels for the sphere)
and the graph's copies of the state into its buffers; a plain, non-captured step is host-bound
(350-480 us of host time).

Supported: CuPy, float32 or float64, ``x (I, N, D)`` with ``I * N * D < 2**62``; anything else
runs the generic code (:func:`unsupported_reason`). Kernels are compiled once per device and
dtype (:func:`isles.algorithms.core.plan.function`).

Sources: seed 001 (Souza et al., CMEPSO-GPU) eqs. 1-5; Eberhart & Shi (1998, 2000) for the
inertia schedule and the velocity clamp; Salmon et al. (SC 2011) / Steele et al. (OOPSLA 2014)
for the counter-based generator.
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.cuda_lib import draw_ids, source
from isles.algorithms.core.plan import function
from isles.algorithms.core.random import _MASK
from isles.algorithms.pso.draws import DRAW_COR, DRAW_R1, DRAW_R2

BLOCK = 256  # threads per block of every kernel
MAX_GRID = 16384  # blocks of a grid-stride loop
COR_MODE_IDS = {"overshoot": 0, "range": 1}

#: the draw ids of the counter RNG (algorithms/pso/draws.py), injected into the kernels
DRAWS = draw_ids(DRAW_R1=DRAW_R1, DRAW_R2=DRAW_R2, DRAW_COR=DRAW_COR)


def kernel_source(dtype) -> str:
    """CUDA source for ``dtype`` (float32 or float64): ``#define IS_F32``, :data:`DRAWS` and
    ``pso.cu`` (:mod:`isles.algorithms.core.cuda_lib`).

    Compiling it with ``-DISLES_HOST_EMU`` as C on the host gives ``emu_schedule``/``emu_move``/
    ``emu_pso_bests``, the same arithmetic on the CPU (used to check the kernels against NumPy
    without a GPU: ``tests/test_epso_host.py``).

    Raises:
        ValueError: another dtype.
    """
    return typed_source(dtype, "fused PSO", DRAWS, "pso.cu")


def typed_source(dtype, what: str, draws: str, name: str) -> str:
    """``#define IS_F32`` for ``dtype``, the ``draws`` defines and the CUDA library file ``name``
    assembled (:func:`isles.algorithms.core.cuda_lib.source`): the PSO and EPSO kernels' source.

    Raises:
        ValueError: ``dtype`` is neither float32 nor float64 (the message names ``what``).
    """
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"{what}: dtype {dt} (allowed: float32|float64)")
    return source(f"#define IS_F32 {int(dt == np.float32)}\n" + draws, name)


def unsupported_reason(ctx, x=None) -> str | None:
    """Why the fused kernels cannot run ``ctx`` (and positions ``x``), or ``None`` if they can.

    Args:
        ctx: :class:`isles.algorithms.core.base.Context`.
        x: optional positions ``(I, N, D)``.
    """
    if getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if np.dtype(ctx.dtype) not in (np.float32, np.float64):
        return f"dtype {np.dtype(ctx.dtype)} (fused: float32|float64)"
    if not hasattr(ctx.rng, "keys") or not hasattr(ctx.rng, "ctr"):
        return "the generator is not a CounterRNG"
    if x is not None:
        if x.ndim != 3 or x.shape[0] != ctx.n_islands or x.shape[2] != ctx.dim:
            return f"positions of shape {x.shape} (fused: (I, N, D))"
        if x.size >= 2**62 or x.shape[1] >= 2**31 or x.shape[2] >= 2**31:
            return "too many coordinates"
    return None


def _kernel(cp, dtype, name: str):
    """Compiled kernel ``name`` for ``dtype`` on the current device (compiled once per device and
    source: :func:`isles.algorithms.core.plan.function`)."""
    return function(cp, kernel_source(dtype), name)


def _scalar(cp, a, dtype):
    """A 0-d device value of ``dtype`` (no copy for a 0-d device array of that dtype; a host
    number is copied to the device, which a CUDA-graph capture does not allow)."""
    a = cp.asarray(a)
    if a.ndim != 0:
        a = a.reshape(())
    return a.astype(dtype, copy=False)


def _grid(n: int) -> int:
    return max(1, min(MAX_GRID, -(-int(n) // BLOCK)))


def schedule_args(dtype, i_max: int, w_max: float, w_min: float, vmax_start: float, vmax_final: float, vmax_power):
    """The host arguments of ``pso.cu``'s ``schedule_one`` after ``(ctr0, kbase)``: ``(w_sched, w_max,
    w_span, v_sched, v_start, v_ratio, v_pow, denom)`` as kernel scalars of ``dtype``, with the
    host constants of :func:`isles.algorithms.pso.pso.inertia_weight` and ``vmax_schedule``
    (``w_span = w_max - w_min`` and ``final/start`` in double, then rounded, as CuPy rounds those
    Python scalars); shared by :func:`schedule_values` and the fused EPSO move."""
    t = np.dtype(dtype).type
    i_max = int(i_max)
    w_sched = i_max > 1
    v_sched = not (vmax_start <= 0 or vmax_final >= vmax_start or i_max <= 1)
    ratio = vmax_final / vmax_start if v_sched else 1.0
    return (
        np.int32(w_sched),
        t(w_max),
        t(w_max - w_min),
        np.int32(v_sched),
        t(vmax_start),
        t(ratio),
        t(vmax_power),
        t(max(i_max - 1, 1)),
    )


def schedule_values(
    ctx, k: int, i_max: int, w_max: float, w_min: float, vmax_start: float, vmax_final: float, vmax_power: int = 3
):
    """Inertia weight and clamp fraction of iteration ``k + ctr`` as two 0-d device values (one launch).

    Bit-identical to ``inertia_weight(ctx.generation_value(k), i_max, w_max, w_min)`` (seed 001
    eq. 3) and ``vmax_schedule(ctx.generation_value(k), i_max, vmax_start, vmax_final)`` of
    :mod:`isles.algorithms.pso.pso` evaluated on CuPy, where ``ctx.generation_value(k) = k + rng.ctr[0]``
    (so a CUDA-graph replay sees its own iteration). Host constants of those functions (``i_max
    <= 1``, a disabled or constant clamp) come out as the same values rounded to the dtype.

    Args:
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy (float32 or float64).
        k: the 1-based iteration index on the host (``generation + 1``).
        i_max: schedule length; ``w_max, w_min``: eq. 3's end points; ``vmax_start,
            vmax_final, vmax_power``: see :func:`isles.algorithms.pso.pso.vmax_schedule`.

    Returns:
        ``(w, vmax)``: 0-d views of one ``(2,)`` device array of ``ctx.dtype``.

    Raises:
        ValueError: an unsupported dtype.
    """
    cp = ctx.xp
    dt = np.dtype(ctx.dtype)
    out = cp.empty((2,), dtype=dt)
    _kernel(cp, dt, "pso_schedule")(
        (1,),
        (1,),
        (
            ctx.rng.ctr,
            np.uint64(int(k) & _MASK),
            out,
            *schedule_args(dt, i_max, w_max, w_min, vmax_start, vmax_final, vmax_power),
        ),
    )
    return out[0], out[1]


def fused_move(
    ctx, x, vel, pbest, gbest, generation: int, w, vmax, c1: float, c2: float, cor: float, cor_mode: str = "overshoot"
):
    """One PSO move of every particle of every island in ONE kernel (seed 001 eqs. 1, 2, 4, 5).

    Computes what :meth:`isles.algorithms.pso.pso.PSO.step` computes before the evaluation: ``R1, R2,
    COR`` uniforms of generation ``generation`` (plus the device counter ``ctx.rng.ctr``), eq. 1
    with ``w``, the clamp ``|vel_d| <= vmax (upper_d - lower_d)`` (skipped when ``vmax`` is
    ``None``), eq. 2 and :func:`isles.algorithms.pso.pso.boundary_correction`; bit-identical to the generic
    CuPy code (module docstring).

    Args:
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy, float32 or float64.
        x, vel, pbest: ``(I, N, D)`` positions, velocities, personal bests.
        gbest: ``(I, D)`` island global bests.
        generation: host generation counter ``g`` (the draws of generation ``g + ctr``).
        w: inertia weight, 0-d device array of ``ctx.dtype`` (e.g. from :func:`schedule_values`).
        vmax: clamp fraction, 0-d device array, or ``None`` for no clamp.
        c1, c2: acceleration constants; cor: correction factor in [0, 1].
        cor_mode: ``"overshoot"`` or ``"range"``.

    Returns:
        ``(x, vel)``: new ``(I, N, D)`` arrays of ``ctx.dtype``.

    Raises:
        ValueError: unknown ``cor_mode``, unsupported context or shapes.
    """
    if cor_mode not in COR_MODE_IDS:
        raise ValueError(f"algorithm.cor_mode={cor_mode!r}: allowed values are {'|'.join(COR_MODE_IDS)}")
    reason = unsupported_reason(ctx, x)
    if reason is not None:
        raise ValueError(f"fused PSO unavailable: {reason}")
    cp, dt = ctx.xp, np.dtype(ctx.dtype)
    t = dt.type
    I, N, D = x.shape
    if vel.shape != x.shape or pbest.shape != x.shape or gbest.shape != (I, D):
        raise ValueError(f"fused PSO: shapes x{x.shape} vel{vel.shape} pbest{pbest.shape} gbest{gbest.shape}")
    arrs = [cp.ascontiguousarray(a, dtype=dt) for a in (x, vel, pbest, gbest, ctx.lower, ctx.upper)]
    w = _scalar(cp, w, dt)
    vm = w if vmax is None else _scalar(cp, vmax, dt)
    xo = cp.empty((I, N, D), dtype=dt)
    vo = cp.empty((I, N, D), dtype=dt)
    total = I * N * D
    _kernel(cp, dt, "pso_move")(
        (_grid(total),),
        (BLOCK,),
        (
            *arrs,
            ctx.rng.keys,
            ctx.rng.ctr,
            w,
            vm,
            xo,
            vo,
            np.uint64((int(generation) << 16) & _MASK),
            t(c1),
            t(c2),
            t(cor),
            np.int64(N * D),
            np.int32(D),
            np.int64(total),
            np.int32(vmax is not None),
            np.int32(COR_MODE_IDS[cor_mode]),
        ),
    )
    return xo, vo


def fused_update_bests(ctx, state: dict, x, f, v, n_nan) -> dict:
    """Personal and island global bests under Deb's rules, and ``nan_evals``, in ONE kernel.

    Same result (bit-identical) as :func:`isles.algorithms.pso.pso.update_bests` ``(xp, state, x, f, v)``
    followed by ``nan_evals = state["nan_evals"] + n_nan``: ``pbest`` where ``(f, v)`` is
    strictly better, then ``gbest`` = better of the old ``gbest`` and the island's best personal
    best (first one on ties; NaN keys as NumPy's argmin). :func:`fused_select_bests` with one
    candidate per particle.

    Args:
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy.
        state: PSO state with ``pbest (I, N, D)``, ``pbest_f, pbest_v (I, N)``, ``gbest (I, D)``,
            ``gbest_f, gbest_v (I,)``, ``nan_evals`` (0-d int64).
        x: new positions ``(I, N, D)``; f, v: their ranking pair ``(I, N)``; n_nan: 0-d count.

    Returns:
        A new dict: ``state`` with new ``pbest*``, ``gbest*`` and ``nan_evals`` arrays.

    Raises:
        ValueError: shapes that do not match.
    """
    return fused_select_bests(ctx, state, x, None, f, v, n_nan)


def fused_select_bests(ctx, state: dict, xc, velc, f, v, n_nan, src: str | None = None) -> dict:
    """Each particle's best candidate under Deb's rules, then the personal and island global bests
    and ``nan_evals``, in ONE kernel (``pso.cu``'s ``pso_bests``).

    With ``C`` candidates per particle (EPSO: the original move and ``R`` replicas), bit-identical to
    the generic code of :meth:`isles.algorithms.pso.epso.EPSO.step` after the evaluation: ``k =
    argbest(f, v, axis=2)`` (:func:`isles.problems.constraints.argbest`: the NaN-propagating
    minimum of ``v``, then the first smallest ``f`` among those), ``x, vel, f, v`` of candidate
    ``k``, :func:`isles.algorithms.pso.pso.update_bests` and ``nan_evals += n_nan``: the kernel only
    compares and copies.

    Args:
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy.
        state: PSO/EPSO state (``pbest (I, N, D)``, ``pbest_f, pbest_v (I, N)``, ``gbest (I, D)``,
            ``gbest_f, gbest_v (I,)``, ``nan_evals``).
        xc: candidates ``(I, N, C, D)`` (or ``(I, N, D)``: ``C = 1``); velc: their velocities of
            the same shape, or ``None`` (PSO: ``x`` and ``vel`` are not written).
        f, v: the candidates' ranking pair ``(I, N * C)`` (or ``(I, N, C)``); n_nan: 0-d count.
        src: the source to take ``pso_bests`` from (default :func:`kernel_source`; EPSO passes its
            own, which includes ``pso.cu``, so that a run compiles one module).

    Returns:
        A new dict: ``state`` with new ``pbest*``, ``gbest*`` and ``nan_evals``, and (``velc`` given)
        the chosen ``x, vel (I, N, D)``.

    Raises:
        ValueError: shapes that do not match.
    """
    cp, dt = ctx.xp, np.dtype(ctx.dtype)
    I, N, D = state["pbest"].shape
    C = 1 if xc.ndim == 3 else xc.shape[2]
    if (
        xc.shape not in ((I, N, D), (I, N, C, D))
        or (velc is not None and velc.shape != xc.shape)
        or f.size != I * N * C
        or v.size != I * N * C
        or f.shape[0] != I
        or v.shape != f.shape
        or state["gbest"].shape != (I, D)
    ):
        raise ValueError(
            f"fused PSO bests: shapes x{xc.shape} f{f.shape} v{v.shape} "
            f"pbest{state['pbest'].shape} gbest{state['gbest'].shape}"
        )
    c = cp.ascontiguousarray
    xc, f, v = (c(a, dtype=dt) for a in (xc, f, v))
    ins = [c(state[k], dtype=dt) for k in ("pbest", "pbest_f", "pbest_v", "gbest", "gbest_f", "gbest_v")]
    nan_old = _scalar(cp, state["nan_evals"], np.int64)
    nan_add = _scalar(cp, n_nan, np.int64)
    pb_o = cp.empty((I, N, D), dtype=dt)
    pf_o = cp.empty((I, N), dtype=dt)
    pv_o = cp.empty((I, N), dtype=dt)
    gb_o = cp.empty((I, D), dtype=dt)
    gf_o = cp.empty((I,), dtype=dt)
    gv_o = cp.empty((I,), dtype=dt)
    nan_o = cp.empty((), dtype=np.int64)
    if velc is None:  # not read, not written
        vc_in, x_o, vel_o = xc, pb_o, pb_o
    else:
        vc_in, x_o, vel_o = c(velc, dtype=dt), cp.empty((I, N, D), dtype=dt), cp.empty((I, N, D), dtype=dt)
    total = I * N * D
    rows = _grid(total)
    (_kernel(cp, dt, "pso_bests") if src is None else function(cp, src, "pso_bests"))(
        (rows + I,),
        (BLOCK,),
        (
            xc,
            f,
            v,
            *ins,
            nan_old,
            nan_add,
            pb_o,
            pf_o,
            pv_o,
            gb_o,
            gf_o,
            gv_o,
            nan_o,
            np.int32(N),
            np.int32(D),
            np.int64(total),
            np.int32(rows),
            np.int32(C),
            np.int32(velc is not None),
            vc_in,
            x_o,
            vel_o,
        ),
    )
    s = dict(state)
    s.update(pbest=pb_o, pbest_f=pf_o, pbest_v=pv_o, gbest=gb_o, gbest_f=gf_o, gbest_v=gv_o, nan_evals=nan_o)
    if velc is not None:
        s.update(x=x_o, vel=vel_o)
    return s
