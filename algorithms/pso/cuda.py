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
   :data:`isles.algorithms.pso.pso.DRAW_R1`, ``DRAW_R2``, ``DRAW_COR``, same SplitMix64 counter hash, same
   element index within the island's ``(N, D)`` block, same float conversion), the velocity
   update (eq. 1), the clamp, the move (eq. 2) and :func:`isles.algorithms.pso.pso.boundary_correction` in
   both COR modes (eqs. 4-5);
3. ``ctx.evaluator(x)`` (unchanged, the problem's own array code);
4. :func:`fused_update_bests`: personal bests, island global bests under Deb's rules and the NaN
   counter in one kernel (blocks ``0..B-1`` copy the personal-best rows, one block per island
   reduces its swarm and writes the global best).

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
dtype (module-level cache).

Sources: seed 001 (Souza et al., CMEPSO-GPU) eqs. 1-5; Eberhart & Shi (1998, 2000) for the
inertia schedule and the velocity clamp; Salmon et al. (SC 2011) / Steele et al. (OOPSLA 2014)
for the counter-based generator.
"""
from __future__ import annotations

import numpy as np

from isles.algorithms.core.cuda_prelude import ARITHMETIC, HASH
from isles.algorithms.core.random import _MASK

BLOCK = 256  # threads per block of every kernel
MAX_GRID = 16384  # blocks of a grid-stride loop
COR_MODE_IDS = {"overshoot": 0, "range": 1}

KERNEL_SOURCE = r"""
// ---- isles fused PSO generation (algorithms/pso/cuda.py); IS_F32 and the prelude are prepended ----
#define DRAW_R1 10ull
#define DRAW_R2 11ull
#define DRAW_COR 13ull
#define BESTS_BLOCK 256
#define IDX_NONE 0x7fffffff

#if IS_F32
ISLES_DEV T t_pow(T a, T b) { return powf(a, b); }   // CuPy's power, 'ff->f'
#else
ISLES_DEV T t_pow(T a, T b) { return pow(a, b); }    // CuPy's power, 'dd->d'
#endif

// cupy.clip: in1 > in2 ? in2 : (in0 < in1 ? in1 : (in0 > in2 ? in2 : in0))
ISLES_DEV T clip3(T a, T lo, T hi) { return lo > hi ? hi : (a < lo ? lo : (a > hi ? hi : a)); }

// Deb's rules, problems/constraints.py better(): (va < vb) | ((va == vb) & (fa < fb))
ISLES_DEV bool deb_better(T fa, T va, T fb, T vb) { return (va < vb) || ((va == vb) && (fa < fb)); }

// NaN-propagating minimum (numpy.min / cupy.min)
ISLES_DEV T nan_min(T a, T b) { return (a != a) ? a : ((b != b) ? b : (b < a ? b : a)); }

// argmin order of numpy/cupy: the first NaN wins, then the smallest value, then the lowest index
ISLES_DEV bool key_before(T a, int ia, T b, int ib) {
    const bool an = (a != a), bn = (b != b);
    if (an || bn) return an && (!bn || ia < ib);
    return (a < b) || ((a == b) && (ia < ib));
}

// Inertia weight and clamp fraction of iteration k = ctr[0] + kbase (algorithms/pso/pso.py):
//   t = clip((k - 1) / (i_max - 1), 0, 1)                            schedule_fraction
//   w = w_max - t * (w_max - w_min)                                   inertia_weight (eq. 3)
//   vmax = start * (final/start) ** (t ** 3)                          vmax_schedule
// each operation in T and rounded once, as CuPy evaluates the 0-d expressions of pso.py.
ISLES_DEV void schedule_one(u64 ctr0, u64 kbase, int w_sched, T w_max, T w_span, int v_sched, T v_start,
                            T v_ratio, T v_pow, T denom, T* out) {
    T t = (T)0;
    if (w_sched || v_sched) {
        const T k = (T)(ctr0 + kbase);                 // generation_value(...).astype(T)
        t = clip3(div_rn(sub_rn(k, (T)1), denom), (T)0, (T)1);
    }
    out[0] = w_sched ? sub_rn(w_max, mul_rn(t, w_span)) : w_max;
    out[1] = v_sched ? mul_rn(v_start, t_pow(v_ratio, t_pow(t, v_pow))) : v_start;
}

// One coordinate i (flat over (I, N, D)) of PSO.step's move (seed 001 eqs. 1, 2, 4, 5), in the
// generic code's order:
//   vel = ((w*vel + (r1*c1)*(pbest - x)) + (r2*c2)*(gbest - x))        eq. 1
//   vel = clip(vel, -vm, vm), vm = vmax * (upper - lower)              clamp_velocity
//   x = x + vel                                                        eq. 2
//   boundary_correction: d = upper - lower (range) or min(d, overshoot) (overshoot);
//   below: x = lower + (u*cor)*d; above: x = upper - (u*cor)*d; both: vel = -vel   eqs. 4-5
ISLES_DEV void move_one(long long i, const T* x, const T* vel, const T* pbest, const T* gbest,
                        const T* lower, const T* upper, const u64* keys, u64 s1, u64 s2, u64 s3,
                        T w, T vmax, T c1, T c2, T cor, long long m, int dim, int clamp, int mode,
                        T* xo, T* vo) {
    const long long isl = i / m;
    const long long idx = i - isl * m;               // element index inside the island's (N, D) block
    const int j = (int)(idx % dim);
    const u64 key = keys[isl];
    const u64 off = (u64)idx * GOLDEN;
    const T r1 = unifT(isles_mix64((key ^ s1) + off));
    const T r2 = unifT(isles_mix64((key ^ s2) + off));
    const T x0 = x[i];
    const T lo = lower[j], hi = upper[j];
    const T t1 = mul_rn(w, vel[i]);
    const T t2 = mul_rn(mul_rn(r1, c1), sub_rn(pbest[i], x0));
    const T t3 = mul_rn(mul_rn(r2, c2), sub_rn(gbest[isl * dim + j], x0));
    T v = add_rn(add_rn(t1, t2), t3);
    const T span = sub_rn(hi, lo);
    if (clamp) {
        const T vm = mul_rn(vmax, span);
        v = clip3(v, -vm, vm);
    }
    T xn = add_rn(x0, v);
    const bool below = xn < lo, above = xn > hi;
    if (below || above) {
        T d = span;
        if (mode == 0) {
            const T o = below ? sub_rn(lo, xn) : sub_rn(xn, hi);
            d = (o != o) ? o : (o < d ? o : d);        // numpy.minimum(d, o), o is never NaN here
        }
        const T u = unifT(isles_mix64((key ^ s3) + off));
        const T s = mul_rn(mul_rn(u, cor), d);
        xn = below ? add_rn(lo, s) : sub_rn(hi, s);
        v = -v;
    }
    xo[i] = xn;
    vo[i] = v;
}

// the per-draw stream constant of CounterRNG.uniform: mix64(((g << 16) + draw) + (ctr[0] << 16))
ISLES_DEV u64 draw_stream(u64 gbase, u64 draw, u64 ctr0) { return isles_mix64(gbase + draw + (ctr0 << 16)); }

#ifdef ISLES_HOST_EMU
// ---- host emulation (CPU check of the arithmetic; not used at run time) ----
void emu_schedule(u64 ctr0, u64 kbase, int w_sched, T w_max, T w_span, int v_sched, T v_start, T v_ratio,
                  T v_pow, T denom, T* out) {
    schedule_one(ctr0, kbase, w_sched, w_max, w_span, v_sched, v_start, v_ratio, v_pow, denom, out);
}
void emu_move(const T* x, const T* vel, const T* pbest, const T* gbest, const T* lower, const T* upper,
              const u64* keys, u64 ctr0, u64 gbase, T w, T vmax, T c1, T c2, T cor, long long m, int dim,
              long long total, int clamp, int mode, T* xo, T* vo) {
    const u64 s1 = draw_stream(gbase, DRAW_R1, ctr0), s2 = draw_stream(gbase, DRAW_R2, ctr0);
    const u64 s3 = draw_stream(gbase, DRAW_COR, ctr0);
    for (long long i = 0; i < total; ++i)
        move_one(i, x, vel, pbest, gbest, lower, upper, keys, s1, s2, s3, w, vmax, c1, c2, cor, m, dim,
                 clamp, mode, xo, vo);
}
#else
// ---- kernels ----
ISLES_KERNEL void pso_schedule(const u64* __restrict__ ctr, const u64 kbase, T* __restrict__ out,
                               const int w_sched, const T w_max, const T w_span, const int v_sched,
                               const T v_start, const T v_ratio, const T v_pow, const T denom) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        schedule_one(ctr[0], kbase, w_sched, w_max, w_span, v_sched, v_start, v_ratio, v_pow, denom, out);
}

ISLES_KERNEL void pso_move(const T* __restrict__ x, const T* __restrict__ vel, const T* __restrict__ pbest,
                           const T* __restrict__ gbest, const T* __restrict__ lower,
                           const T* __restrict__ upper, const u64* __restrict__ keys,
                           const u64* __restrict__ ctr, const T* __restrict__ wp,
                           const T* __restrict__ vmaxp, T* __restrict__ xo, T* __restrict__ vo,
                           const u64 gbase, const T c1, const T c2, const T cor, const long long m,
                           const int dim, const long long total, const int clamp, const int mode) {
    const u64 ctr0 = ctr[0];
    const u64 s1 = draw_stream(gbase, DRAW_R1, ctr0), s2 = draw_stream(gbase, DRAW_R2, ctr0);
    const u64 s3 = draw_stream(gbase, DRAW_COR, ctr0);
    const T w = wp[0];
    const T vmax = clamp ? vmaxp[0] : (T)0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
        move_one(i, x, vel, pbest, gbest, lower, upper, keys, s1, s2, s3, w, vmax, c1, c2, cor, m, dim,
                 clamp, mode, xo, vo);
}

// update_bests + update_gbest (algorithms/pso/pso.py) and nan_evals += n_nan, in one launch.
// Blocks [0, n_row_blocks): pbest rows (where(imp, x, pbest)); block n_row_blocks + isl: island isl.
ISLES_KERNEL void __launch_bounds__(BESTS_BLOCK)
pso_bests(const T* __restrict__ x, const T* __restrict__ f, const T* __restrict__ v,
          const T* __restrict__ pb, const T* __restrict__ pf, const T* __restrict__ pv,
          const T* __restrict__ gb, const T* __restrict__ gf, const T* __restrict__ gv,
          const long long* __restrict__ nan_old, const long long* __restrict__ nan_add,
          T* __restrict__ pb_o, T* __restrict__ pf_o, T* __restrict__ pv_o,
          T* __restrict__ gb_o, T* __restrict__ gf_o, T* __restrict__ gv_o, long long* __restrict__ nan_o,
          const int npart, const int dim, const long long total, const int n_row_blocks) {
    const int tid = threadIdx.x;
    if ((int)blockIdx.x < n_row_blocks) {
        const long long stride = (long long)n_row_blocks * BESTS_BLOCK;
        for (long long e = (long long)blockIdx.x * BESTS_BLOCK + tid; e < total; e += stride) {
            const long long p = e / dim;
            pb_o[e] = deb_better(f[p], v[p], pf[p], pv[p]) ? x[e] : pb[e];
        }
        return;
    }
    __shared__ T s_key[BESTS_BLOCK];
    __shared__ int s_idx[BESTS_BLOCK];
    const int isl = (int)blockIdx.x - n_row_blocks;
    const long long p0 = (long long)isl * npart;
    // pass 1: new personal-best (f, v) of every particle; NaN-propagating min of v (argbest)
    T vmin = T_INF;
    for (int n = tid; n < npart; n += BESTS_BLOCK) {
        const long long p = p0 + n;
        const bool imp = deb_better(f[p], v[p], pf[p], pv[p]);
        const T nf = imp ? f[p] : pf[p], nv = imp ? v[p] : pv[p];
        pf_o[p] = nf;
        pv_o[p] = nv;
        vmin = nan_min(vmin, nv);
    }
    s_key[tid] = vmin;
    __syncthreads();
    for (int s = BESTS_BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) s_key[tid] = nan_min(s_key[tid], s_key[tid + s]);
        __syncthreads();
    }
    vmin = s_key[0];
    __syncthreads();
    // pass 2: argmin of key = where(v == vmin, f, inf)
    T kb = T_INF;
    int ib = IDX_NONE;
    for (int n = tid; n < npart; n += BESTS_BLOCK) {
        const long long p = p0 + n;
        const bool imp = deb_better(f[p], v[p], pf[p], pv[p]);
        const T nf = imp ? f[p] : pf[p], nv = imp ? v[p] : pv[p];
        const T key = (nv == vmin) ? nf : T_INF;
        if (key_before(key, n, kb, ib)) { kb = key; ib = n; }
    }
    s_key[tid] = kb;
    s_idx[tid] = ib;
    __syncthreads();
    for (int s = BESTS_BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s && key_before(s_key[tid + s], s_idx[tid + s], s_key[tid], s_idx[tid])) {
            s_key[tid] = s_key[tid + s];
            s_idx[tid] = s_idx[tid + s];
        }
        __syncthreads();
    }
    const long long pbst = p0 + s_idx[0];
    // the island's best personal best against its global best (never gets worse)
    const bool impb = deb_better(f[pbst], v[pbst], pf[pbst], pv[pbst]);
    const T bf = impb ? f[pbst] : pf[pbst], bv = impb ? v[pbst] : pv[pbst];
    const T gfi = gf[isl], gvi = gv[isl];
    const bool gimp = deb_better(bf, bv, gfi, gvi);
    const T* src = gimp ? ((impb ? x : pb) + pbst * dim) : (gb + (long long)isl * dim);
    T* dst = gb_o + (long long)isl * dim;
    for (int j = tid; j < dim; j += BESTS_BLOCK) dst[j] = src[j];
    if (tid == 0) {
        gf_o[isl] = gimp ? bf : gfi;
        gv_o[isl] = gimp ? bv : gvi;
        if (isl == 0) nan_o[0] = nan_old[0] + nan_add[0];
    }
}
#endif  // ISLES_HOST_EMU
"""


def kernel_source(dtype) -> str:
    """CUDA source for ``dtype`` (float32 or float64): ``#define IS_F32`` + :data:`KERNEL_SOURCE`.

    Compiling it with ``-DISLES_HOST_EMU`` as C on the host gives ``emu_schedule``/``emu_move``,
    the same arithmetic on the CPU (used to check the kernel against NumPy without a GPU).

    Raises:
        ValueError: another dtype.
    """
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"fused PSO: dtype {dt} (allowed: float32|float64)")
    return f"#define IS_F32 {int(dt == np.float32)}\n" + HASH + ARITHMETIC + KERNEL_SOURCE


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


_MODULES: dict = {}


def _kernel(cp, dtype, name: str):
    """Compiled kernel ``name`` for ``dtype`` on the current device (compiled once, cached)."""
    key = (cp.cuda.Device().id, np.dtype(dtype).str, name)
    fn = _MODULES.get(key)
    if fn is None:
        mkey = key[:2]
        mod = _MODULES.get(mkey)
        if mod is None:
            mod = cp.RawModule(code=kernel_source(dtype))
            _MODULES[mkey] = mod
        fn = mod.get_function(name)
        _MODULES[key] = fn
    return fn


def _scalar(cp, a, dtype):
    """A 0-d device value of ``dtype`` (no copy for a 0-d device array of that dtype; a host
    number is copied to the device, which a CUDA-graph capture does not allow)."""
    a = cp.asarray(a)
    if a.ndim != 0:
        a = a.reshape(())
    return a.astype(dtype, copy=False)


def _grid(n: int) -> int:
    return max(1, min(MAX_GRID, -(-int(n) // BLOCK)))


def schedule_values(ctx, k: int, i_max: int, w_max: float, w_min: float, vmax_start: float,
                    vmax_final: float, vmax_power: int = 3):
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
    t = dt.type
    i_max = int(i_max)
    w_sched = i_max > 1
    v_sched = not (vmax_start <= 0 or vmax_final >= vmax_start or i_max <= 1)
    out = cp.empty((2,), dtype=dt)
    ratio = vmax_final / vmax_start if v_sched else 1.0
    _kernel(cp, dt, "pso_schedule")(
        (1,), (1,),
        (ctx.rng.ctr, np.uint64(int(k) & _MASK), out, np.int32(w_sched), t(w_max), t(w_max - w_min),
         np.int32(v_sched), t(vmax_start), t(ratio), t(vmax_power), t(max(i_max - 1, 1))),
    )
    return out[0], out[1]


def fused_move(ctx, x, vel, pbest, gbest, generation: int, w, vmax, c1: float, c2: float, cor: float,
               cor_mode: str = "overshoot"):
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
        (_grid(total),), (BLOCK,),
        (*arrs, ctx.rng.keys, ctx.rng.ctr, w, vm, xo, vo, np.uint64((int(generation) << 16) & _MASK),
         t(c1), t(c2), t(cor), np.int64(N * D), np.int32(D), np.int64(total), np.int32(vmax is not None),
         np.int32(COR_MODE_IDS[cor_mode])),
    )
    return xo, vo


def fused_update_bests(ctx, state: dict, x, f, v, n_nan) -> dict:
    """Personal and island global bests under Deb's rules, and ``nan_evals``, in ONE kernel.

    Same result (bit-identical) as :func:`isles.algorithms.pso.pso.update_bests` ``(xp, state, x, f, v)``
    followed by ``nan_evals = state["nan_evals"] + n_nan``: ``pbest`` where ``(f, v)`` is
    strictly better, then ``gbest`` = better of the old ``gbest`` and the island's best personal
    best (first one on ties; NaN keys as NumPy's argmin).

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
    cp, dt = ctx.xp, np.dtype(ctx.dtype)
    I, N, D = x.shape
    if state["pbest"].shape != (I, N, D) or f.shape != (I, N) or v.shape != (I, N) \
            or state["gbest"].shape != (I, D):
        raise ValueError(f"fused PSO bests: shapes x{x.shape} f{f.shape} v{v.shape} "
                         f"pbest{state['pbest'].shape} gbest{state['gbest'].shape}")
    c = cp.ascontiguousarray
    ins = [c(a, dtype=dt) for a in (x, f, v, state["pbest"], state["pbest_f"], state["pbest_v"],
                                    state["gbest"], state["gbest_f"], state["gbest_v"])]
    nan_old = _scalar(cp, state["nan_evals"], np.int64)
    nan_add = _scalar(cp, n_nan, np.int64)
    pb_o = cp.empty((I, N, D), dtype=dt)
    pf_o = cp.empty((I, N), dtype=dt)
    pv_o = cp.empty((I, N), dtype=dt)
    gb_o = cp.empty((I, D), dtype=dt)
    gf_o = cp.empty((I,), dtype=dt)
    gv_o = cp.empty((I,), dtype=dt)
    nan_o = cp.empty((), dtype=np.int64)
    total = I * N * D
    rows = _grid(total)
    _kernel(cp, dt, "pso_bests")(
        (rows + I,), (BLOCK,),
        (*ins, nan_old, nan_add, pb_o, pf_o, pv_o, gb_o, gf_o, gv_o, nan_o, np.int32(N), np.int32(D),
         np.int64(total), np.int32(rows)),
    )
    s = dict(state)
    s.update(pbest=pb_o, pbest_f=pf_o, pbest_v=pv_o, gbest=gb_o, gbest_f=gf_o, gbest_v=gv_o, nan_evals=nan_o)
    return s
