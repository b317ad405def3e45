"""Fused CUDA fast path of DE/rand/1/bin and DE/rand/1/nec for any problem with a fused objective.

A plain CuPy loop of the generic matrix-form DE (:mod:`isles.algorithms.de.de`, seed 004 Algorithm 2)
launches some forty small kernels per generation and is launch-bound (about 800 us per generation
for Ackley D=1000, N=500). Here a whole generation is **one kernel**:

* one *group* of ``TPI`` threads per individual (a warp for ``D <= 128``, else a block of up to
  1024 threads), each thread holding ``ITEMS = ceil(D/TPI) <= 32`` coordinates in registers;
* every thread re-derives the individual's indices ``r0, r1, r2``, ``j_rand`` and (NEC) ``L``
  from the counter-based hash (a few 64-bit multiplies; no shared-memory broadcast needed), builds
  its trial coordinates (crossover test, mutant, bound handling), folds them into its private
  accumulators with the problem's ``obj_term`` (registers), and the group merges the
  accumulators with ``obj_merge`` (warp shuffles, then shared memory across warps) before
  ``obj_final`` (and ``obj_violation``);
* the group applies greedy selection under Deb's rules and writes the *next* population into a
  second buffer (ping-pong: other groups still read the current one), plus ``f``, ``v`` and an
  atomic NaN count.

:meth:`FusedDE.run` captures ``GRAPH_GENERATIONS`` (64) such launches, ping-ponging between two
preallocated population buffers, plus one tiny kernel that advances a device-side generation
counter, into a **CUDA graph** and replays it; the generation number is read from device memory
so that one graph serves every block of 64 generations. Everything the graph touches is
preallocated and referenced by the plan (CuPy's memory pool is not used during capture). Neither
:meth:`FusedDE.step` nor :meth:`FusedDE.run` synchronises with the host.

**Same semantics as the NumPy path.** The kernel uses the counter-based generator of
:mod:`isles.algorithms.core.random` (SplitMix64 finaliser on ``(key ^ mix64(g << 16 | draw)) + index *
golden``, with ``g`` = generation + the generator's device counter ``rng.ctr``, as
:meth:`isles.algorithms.core.random.CounterRNG.uniform` does on CuPy) with the same draw ids, shapes and index layouts as :mod:`isles.algorithms.de.de` and
:mod:`isles.algorithms.de.crossover`, and the same arithmetic for the trial vector (mutation
``x_r0 + F (x_r1 - x_r2)`` with explicitly rounded multiply and add, so the compiler cannot fuse
them into an FMA; bound handling with the exact ``fmod``). What is therefore **bit-identical** to
the NumPy (and generic CuPy) path: the indices ``r0, r1, r2``, ``j_rand``, the binomial mask, the
mutant coordinates and the bound handling (``clip``, ``reflect``, ``reinit``), i.e. the whole
trial population; NEC's ``L = min(ceil(log U / log CR), D)`` uses the same float64 ``U`` and is
identical except when ``log U / log CR`` lies within an ulp of an integer (device ``log`` and the
host's may differ by an ulp; probability about 1e-15 per draw). What is **not** bit-identical is
the objective value: the kernel sums in a different order (tree over threads) and uses CUDA's
``cosf``/``expf``, so ``f`` agrees to rounding (about 1e-6 relative in float32) and a selection
decision between a trial and a target whose values tie to rounding can differ. The plan checks
its objective (and violation) against the problem's own ``objective`` (and ``constraints``) on
random points when it is built, and falls back to the generic path (with a warning) if they
disagree: a wrong ``cuda_objective`` never silently changes results.

**The objective comes from the problem.** The kernel source is ``defines + HASH + ARITHMETIC +
MATH + problem.cuda_objective + KERNEL_SOURCE`` (the contract is documented on
:class:`isles.problems.base.Problem`); the kernel never switches on a problem's name. Only when the
source sets ``OBJ_NEXT`` is the trial row staged in shared memory (``x_next``, Rosenbrock). With
``OBJ_HAS_V`` (a constrained problem) the trial's ``v`` is ``obj_violation`` and selection uses
Deb's rules on ``(f, v)`` (or the static penalty ``f + r v`` with ``constraints.handling=penalty``);
without it ``v = 0``.

Measured on one H100 80GB HBM3 (CuPy 14.2, float32, reflect, ``DE.run``, CUDA events, median of
5 x 2048 generations; ``python benchmarks/de_bench.py --all``): Ackley D=1000 N=500 bin 6.6 us
per generation, nec 5.9; Griewank D=500 N=300 bin 4.7, nec 4.4; Rosenbrock D=50 N=100 bin 2.45,
nec 2.8 (latency-bound: one warp per individual, 100 warps; NEC's float64 log is on the critical
path); unchanged (within 1 %, same register counts) since the objective comes from
``problem.cuda_objective`` (A/B against the name-switched kernel on the same H100, 2026-11-22); 64 islands of that Rosenbrock 5.7 / 6.6 us per batched generation, i.e. 0.09 / 0.10 us per
island-generation. For comparison, the generic CuPy path takes about 3 ms per generation on
Ackley, and a Python loop of single fused ``DE.step`` calls about 50-80 us (host-bound).

Supported: xp = CuPy; strategy ``rand/1``; crossover ``bin`` or ``nec``; any bound handling;
float32 or float64; any real-genome problem whose ``cuda_objective`` is not ``None`` (built in:
``sphere``, ``rastrigin``, ``ackley``, ``griewank``, ``rosenbrock``, ``schwefel_2_26``), with
``OBJ_HAS_V 1`` if it has constraints; ``D <= 32768`` (``OBJ_NEXT``: the trial rows of a block
must fit 48 KiB of shared memory). Anything else runs the generic path.
"""
from __future__ import annotations

import logging
import math
import warnings

import numpy as np

from isles.algorithms.core.cuda_prelude import ARITHMETIC, HASH, MATH
from isles.algorithms.core.fused_check import real_objective_error
from isles.algorithms.core.graph import PingPongGraph
from isles.algorithms.core.plan import TargetTracker, module, require_supported
from isles.problems.base import objective_macros

log = logging.getLogger(__name__)

XOVER_IDS = {"bin": 0, "nec": 1}
BOUND_IDS = {"clip": 0, "reflect": 1, "reinit": 2}
GRAPH_GENERATIONS = 64  # generations per captured CUDA graph (even: ping-pong ends where it began)
MAX_ITEMS = 32  # coordinates per thread held in registers
SMEM_LIMIT = 48 * 1024  # static shared memory of one block
VERIFY_RTOL = {np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-8}

DECISIONS_SOURCE = r"""
// ---- isles fused DE generation (algorithms/de/cuda.py); configuration macros are prepended ----
// IS_F32 DIM NPOP TPI ITEMS IPB BLOCK XOVER BOUND PENALTY (+ HASH ARITHMETIC MATH and the problem's
// fused objective: OBJ_NACC OBJ_HAS_V OBJ_NEXT obj_init obj_merge obj_term obj_final obj_violation)
typedef unsigned long long isz;   // index type (no size_t needed under NVRTC)

#define DRAW_INDEX 1ull
#define DRAW_START 2ull
#define DRAW_CROSS 3ull
#define DRAW_BOUND 4ull
#define NWARP ((TPI) >= 32 ? (TPI) / 32 : 1)

// Per-individual random decisions (algorithms/de/de.py sample_indices, algorithms/de/crossover.py).
struct Decisions {
    int r0, r1, r2;   // distinct, != i
    int j0;           // j_rand / start of the exponential segment
    int L;            // NEC length (XOVER == 1)
    u64 s_cross, s_bound;
};

ISLES_DEV Decisions decide(u64 key, long long g, int i, double log_cr, int cr_case) {
    Decisions d;
    const u64 gb = ((u64)g) << 16;
    const u64 s_index = isles_mix64(gb + DRAW_INDEX);
    const u64 s_start = isles_mix64(gb + DRAW_START);
    d.s_cross = isles_mix64(gb + DRAW_CROSS);
    d.s_bound = isles_mix64(gb + DRAW_BOUND);
    // c_m = floor(u_m (N-1-m)), u from uniform(g, DRAW_INDEX, (N, 3), float64)
    const double u0 = unif53(draw_bits(key, s_index, (u64)i * 3ull + 0ull));
    const double u1 = unif53(draw_bits(key, s_index, (u64)i * 3ull + 1ull));
    const double u2 = unif53(draw_bits(key, s_index, (u64)i * 3ull + 2ull));
    int c0 = (int)(u0 * (double)(NPOP - 1)); c0 = c0 < NPOP - 2 ? c0 : NPOP - 2;
    int c1 = (int)(u1 * (double)(NPOP - 2)); c1 = c1 < NPOP - 3 ? c1 : NPOP - 3;
    int c2 = (int)(u2 * (double)(NPOP - 3)); c2 = c2 < NPOP - 4 ? c2 : NPOP - 4;
    // r0: random offset past i (seed 004 Algorithm 4, one offset per individual)
    const int r0 = (i + 1 + c0) % NPOP;
    // r1: shift past the sorted excluded set {i, r0}
    const int e0 = i < r0 ? i : r0, e1 = i < r0 ? r0 : i;
    int r1 = c1;
    r1 += (r1 >= e0) ? 1 : 0;
    r1 += (r1 >= e1) ? 1 : 0;
    // r2: shift past the sorted excluded set {i, r0, r1}
    int f0, f1, f2;
    if (r1 < e0) { f0 = r1; f1 = e0; f2 = e1; }
    else if (r1 < e1) { f0 = e0; f1 = r1; f2 = e1; }
    else { f0 = e0; f1 = e1; f2 = r1; }
    int r2 = c2;
    r2 += (r2 >= f0) ? 1 : 0;
    r2 += (r2 >= f1) ? 1 : 0;
    r2 += (r2 >= f2) ? 1 : 0;
    d.r0 = r0; d.r1 = r1; d.r2 = r2;
    // j_rand = integers(g, DRAW_START, (N,), D)
    int j0 = (int)(unif53(draw_bits(key, s_start, (u64)i)) * (double)DIM);
    d.j0 = j0 < DIM - 1 ? j0 : DIM - 1;
    // NEC length, seed 004 eq. 9, U = uniform(g, DRAW_CROSS, (N,), float64)
    d.L = DIM;
#if XOVER == 1
    if (cr_case == 0) {
        d.L = 1;
    } else if (cr_case == 1) {
        const double u = unif53(draw_bits(key, d.s_cross, (u64)i));
        double x = ceil(log(u) / log_cr);
        x = x < (double)DIM ? x : (double)DIM;   // also maps +inf (u = 0) to D
        int L = (int)x;
        d.L = L < 1 ? 1 : L;
    }
#endif
    return d;
}

// Trial coordinate j of individual i (island row offset `base`): crossover test, mutant, bounds.
ISLES_DEV T trial_coord(const T* X, isz base, const Decisions& d, u64 key, int i, int j,
                        T xij, T Fw, T CRt, const T* lower, const T* upper) {
#if XOVER == 0
    const bool take = (j == d.j0) || (unifT(draw_bits(key, d.s_cross, (u64)i * (u64)DIM + (u64)j)) < CRt);
#else
    int off = j - d.j0;
    off += off < 0 ? DIM : 0;
    const bool take = off < d.L;
#endif
    if (!take) return xij;
    const T a = X[base + (isz)d.r0 * DIM + j];
    const T b = X[base + (isz)d.r1 * DIM + j];
    const T c = X[base + (isz)d.r2 * DIM + j];
    T v = add_rn(a, mul_rn(Fw, sub_rn(b, c)));
    const T lo = lower[j], hi = upper[j];
    if (v < lo || v > hi) {
#if BOUND == 0
        v = v < lo ? lo : hi;
#elif BOUND == 1
        const T w = sub_rn(hi, lo);
        const T w2 = add_rn(w, w);
        if (w2 > (T)0) {
            T y = t_fmod(sub_rn(v, lo), w2);
            if (y < (T)0) y = add_rn(y, w2);
            if (y > w) y = sub_rn(w2, y);
            v = add_rn(lo, y);
            v = v < lo ? lo : (v > hi ? hi : v);
        } else {
            v = lo;
        }
#else
        const T u = unifT(draw_bits(key, d.s_bound, (u64)i * (u64)DIM + (u64)j));
        v = add_rn(lo, mul_rn(u, sub_rn(hi, lo)));
#endif
    }
    return v;
}
"""

GENERATION_SOURCE = r"""
#ifndef ISLES_HOST_EMU
#define FULL_MASK 0xffffffffu

#if TPI == 32
#define GROUP_SYNC() __syncwarp()
#else
#define GROUP_SYNC() __syncthreads()
#endif

// Merge the OBJ_NACC accumulators of the group's threads with obj_merge (warp shuffles, then
// shared memory across warps); afterwards every thread of the group holds the merged values.
ISLES_DEV void group_merge(T* acc, T* red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        T other[OBJ_NACC];
#pragma unroll
        for (int s = 0; s < OBJ_NACC; ++s) other[s] = __shfl_xor_sync(FULL_MASK, acc[s], o);
        obj_merge(acc, other);   // associative and commutative: every lane gets the same value
    }
#if TPI > 32
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int s = 0; s < OBJ_NACC; ++s) red[s * NWARP + w] = acc[s];
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < OBJ_NACC; ++s) acc[s] = red[s * NWARP];
#pragma unroll
    for (int k = 1; k < NWARP; ++k) {
        T other[OBJ_NACC];
#pragma unroll
        for (int s = 0; s < OBJ_NACC; ++s) other[s] = red[s * NWARP + k];
        obj_merge(acc, other);
    }
#endif
}

// Objective (and, with OBJ_HAS_V, violation *v) of the group's row u (thread t holds coordinates
// t, t + TPI, ...), by the problem's fused objective (isles.problems.base.Problem contract): every
// thread folds its coordinates with obj_term into registers, the group merges. Every thread of
// the group returns the same value. srow: DIM + 1 shared elements (OBJ_NEXT), red: OBJ_NACC * NWARP.
ISLES_DEV T group_objective(const T (&u)[ITEMS], int t, T* srow, T* red, T* v) {
    T acc[OBJ_NACC];
    obj_init(acc);
#if OBJ_NEXT
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) { const int j = t + k * TPI; if (j < DIM) srow[j] = u[k]; }
    if (t == 0) srow[DIM] = (T)0;   // x_next of j = D - 1 (a padded row: no select in the loop)
    GROUP_SYNC();
#endif
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int j = t + k * TPI;
        if (j < DIM) {
#if OBJ_NEXT
            const T xn = srow[j + 1];
#else
            const T xn = (T)0;
#endif
            obj_term(acc, u[k], xn, j);
        }
    }
    group_merge(acc, red);
#if OBJ_HAS_V
    *v = obj_violation(acc, DIM);
#else
    *v = (T)0;
#endif
    return obj_final(acc, DIM);
}

#if OBJ_NEXT
#define SROW_DECL __shared__ T srow_all[IPB * (DIM + 1)]; T* srow = srow_all + (threadIdx.x / TPI) * (DIM + 1);
#else
#define SROW_DECL T* srow = (T*)0;
#endif

// Evaluator semantics (problems/constraints.py): NaN f -> +inf, NaN v -> +inf, either counts as a
// NaN evaluation (as does v = inf); PENALTY (static penalty r): f + r v ranked with v = 0.
ISLES_DEV bool fix_fv(T* f, T* v) {
    if (*v != *v) *v = T_INF;
    const bool bad = (*f != *f) || (*v == T_INF);
    if (*f != *f) *f = T_INF;
#ifdef PENALTY
    *f = add_rn(*f, mul_rn((T)PENALTY, *v));
    *v = (T)0;
#endif
    return bad;
}

// One DE/rand/1 generation of every individual of every island (seed 004 Algorithm 2 lines 5-14).
extern "C" __global__ void __launch_bounds__(BLOCK)
de_generation(const T* __restrict__ X, const T* __restrict__ fx, const T* __restrict__ vx,
              T* __restrict__ Xn, T* __restrict__ fn, T* __restrict__ vn,
              T* __restrict__ trial, T* __restrict__ ftrial, const int write_trial,
              const u64* __restrict__ keys, const T* __restrict__ lower, const T* __restrict__ upper,
              const long long* __restrict__ gen_dev, const long long gen_off,
              const u64* __restrict__ rng_ctr,
              unsigned long long* __restrict__ nan_count,
              const int total, const T Fw, const T CRt, const double log_cr, const int cr_case)
{
    __shared__ T red[OBJ_NACC * NWARP];
    SROW_DECL
    const int grp = threadIdx.x / TPI;
    const int t = threadIdx.x - grp * TPI;
    const int gind = blockIdx.x * IPB + grp;
    if (gind >= total) return;   // whole groups only; block mode (TPI > 32) has no partial block
    const int isl = gind / NPOP;
    const int i = gind - isl * NPOP;
    const u64 key = keys[isl];
    // generation of the draws: CounterRNG uses generation + ctr[0] (ctr: its device counter)
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    const Decisions d = decide(key, g, i, log_cr, cr_case);
    const isz base = (isz)isl * NPOP * DIM;
    const isz row = (isz)gind * DIM;
    T u[ITEMS], xt[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int j = t + k * TPI;
        T xv = (T)0, uv = (T)0;
        if (j < DIM) {
            xv = X[row + j];
            uv = trial_coord(X, base, d, key, i, j, xv, Fw, CRt, lower, upper);
        }
        u[k] = uv;
        xt[k] = xv;
    }
    T vu;
    T f = group_objective(u, t, srow, red, &vu);
    const bool bad = fix_fv(&f, &vu);   // NaN = worst (problems/constraints.py)
    const T ft = fx[gind], vt = vx[gind];
    // trial (f, vu) replaces the target unless the target is strictly better (Deb's rules);
    // without OBJ_HAS_V, vu = 0
    const bool accept = !((vt < vu) || ((vt == vu) && (ft < f)));
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int j = t + k * TPI;
        if (j < DIM) {
            Xn[row + j] = accept ? u[k] : xt[k];
            if (write_trial) trial[row + j] = u[k];
        }
    }
    if (t == 0) {
        fn[gind] = accept ? f : ft;
        vn[gind] = accept ? vu : vt;
        if (bad) atomicAdd(nan_count, 1ull);
        if (write_trial) ftrial[gind] = f;
    }
}

// Objective and violation of `rows` rows of X (the generation kernel's code, before the NaN and
// penalty treatment; used by the self-check).
extern "C" __global__ void __launch_bounds__(BLOCK)
eval_rows(const T* __restrict__ X, T* __restrict__ fout, T* __restrict__ vout, const int rows)
{
    __shared__ T red[OBJ_NACC * NWARP];
    SROW_DECL
    const int grp = threadIdx.x / TPI;
    const int t = threadIdx.x - grp * TPI;
    const int gind = blockIdx.x * IPB + grp;
    if (gind >= rows) return;
    T u[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int j = t + k * TPI;
        u[k] = j < DIM ? X[(isz)gind * DIM + j] : (T)0;
    }
    T v;
    const T f = group_objective(u, t, srow, red, &v);
    if (t == 0) { fout[gind] = f; vout[gind] = v; }
}

extern "C" __global__ void set_i64(long long* p, const long long v) { *p = v; }
extern "C" __global__ void add_i64(long long* p, const long long v) { *p += v; }
#endif  // ISLES_HOST_EMU
"""

#: the fully fused generation: per-individual decisions and trial coordinates, then the objective
KERNEL_SOURCE = DECISIONS_SOURCE + GENERATION_SOURCE

#: the trial population alone (no objective), for a problem evaluated as array code
#: (:class:`DEVariation`): the same ``decide``/``trial_coord`` as the fused generation
VARIATION_KERNEL = r"""
#ifndef ISLES_HOST_EMU
// One warp per individual (4 per block); lane l writes coordinates l, l + 32, ... of its trial row.
extern "C" __global__ void __launch_bounds__(128)
de_variation(const T* __restrict__ X, T* __restrict__ U, const u64* __restrict__ keys,
             const T* __restrict__ lower, const T* __restrict__ upper, const long long gen,
             const u64* __restrict__ rng_ctr, const int total, const T Fw, const T CRt,
             const double log_cr, const int cr_case)
{
    const int gind = blockIdx.x * 4 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (gind >= total) return;
    const int isl = gind / NPOP;
    const int i = gind - isl * NPOP;
    const u64 key = keys[isl];
    const long long g = gen + (long long)rng_ctr[0];   // as CounterRNG: generation + ctr
    const Decisions d = decide(key, g, i, log_cr, cr_case);
    const isz base = (isz)isl * NPOP * DIM;
    const isz row = (isz)gind * DIM;
    for (int j = lane; j < DIM; j += 32) {
        U[row + j] = trial_coord(X, base, d, key, i, j, X[row + j], Fw, CRt, lower, upper);
    }
}
#endif
"""


def layout(dim: int) -> tuple[int, int, int, int]:
    """Thread layout for dimension ``D``: ``(TPI, ITEMS, IPB, BLOCK)``.

    ``TPI`` threads per individual (a power of two in [32, 1024], about ``D/4``), ``ITEMS =
    ceil(D/TPI)`` coordinates per thread, ``IPB`` individuals per block (4 warps when ``TPI =
    32``, else 1) and ``BLOCK = TPI * IPB`` threads.
    """
    tpi = 32
    while tpi < 1024 and tpi * 4 < dim:
        tpi *= 2
    items = -(-int(dim) // tpi)
    ipb = 4 if tpi == 32 else 1
    return tpi, items, ipb, tpi * ipb


def kernel_source(dtype, dim: int, n: int, objective: str, crossover: str, bound_handling: str,
                  penalty: float | None = None) -> str:
    """CUDA source of one configuration: ``defines + HASH + ARITHMETIC + MATH + objective +
    KERNEL_SOURCE``.

    Args:
        dtype: float32 or float64 (``IS_F32``).
        dim, n: ``D`` and the population size ``N``.
        objective: the problem's fused objective (``problem.cuda_objective``, the contract of
            :class:`isles.problems.base.Problem`, real genome); the kernel never looks at its name.
        crossover, bound_handling: keys of :data:`XOVER_IDS`, :data:`BOUND_IDS`.
        penalty: the static penalty factor ``r`` (``constraints.handling=penalty``), used only
            when the objective has ``OBJ_HAS_V 1``; ``None`` for Deb's rules.

    Raises:
        KeyError: an unsupported crossover or bound handling name.
        ValueError: the objective lacks a required macro (:func:`isles.problems.base.objective_macros`).
    """
    macros = objective_macros(objective, "real")
    tpi, items, ipb, block = layout(dim)
    defines = {
        "IS_F32": int(np.dtype(dtype) == np.float32), "DIM": int(dim), "NPOP": int(n),
        "TPI": tpi, "ITEMS": items, "IPB": ipb, "BLOCK": block,
        "XOVER": XOVER_IDS[crossover], "BOUND": BOUND_IDS[bound_handling],
    }
    if penalty is not None and macros["OBJ_HAS_V"]:
        defines["PENALTY"] = repr(float(penalty))
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return (head + HASH + ARITHMETIC + MATH + "\n// ---- the problem's fused objective ----\n" + objective
            + KERNEL_SOURCE)


def _objective_of(ctx) -> tuple[str | None, str | None, dict | None]:
    """``(source, reason, macros)`` of the context's problem: its ``cuda_objective`` and macros,
    or a reason why it has none usable."""
    prob = ctx.evaluator.problem
    genome = getattr(prob, "genome", "real")
    if genome != "real":
        return None, f"problem genome {genome!r} (fused: real)", None
    src = getattr(prob, "cuda_objective", None)
    if src is None:
        return None, "problem has no cuda_objective", None
    try:
        macros = objective_macros(src, "real")
    except ValueError as exc:
        return None, str(exc), None
    if getattr(prob, "n_constraints", 0) != 0 and not macros["OBJ_HAS_V"]:
        return None, "the problem has constraints but its cuda_objective has OBJ_HAS_V 0", None
    return src, None, macros


def unsupported_reason(params, ctx) -> str | None:
    """Why ``(params, ctx)`` cannot use the fused path, or ``None`` if it can.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`.
        ctx: :class:`isles.algorithms.core.base.Context`.
    """
    reason = variation_unsupported_reason(params, ctx)
    if reason is not None:
        return reason
    dtype = np.dtype(ctx.dtype)
    _, reason, macros = _objective_of(ctx)
    if reason is not None:
        return reason
    dim = int(ctx.dim)
    pdim = getattr(ctx.evaluator.problem, "dim", dim)
    if pdim != dim:
        return f"context D={dim} differs from problem.dim={pdim}"
    tpi, items, ipb, _ = layout(dim)
    if items > MAX_ITEMS:
        return f"D={dim} > {MAX_ITEMS * 1024}"
    nwarp = max(1, tpi // 32)
    smem = (ipb * (dim + 1) * int(macros["OBJ_NEXT"]) + macros["OBJ_NACC"] * nwarp) * dtype.itemsize
    if smem > SMEM_LIMIT:
        return f"OBJ_NEXT rows of D={dim} do not fit {SMEM_LIMIT} bytes of shared memory"
    return None


def variation_unsupported_reason(params, ctx) -> str | None:
    """Why ``(params, ctx)`` cannot build its trial population with the fused kernels (whether
    or not the problem has a ``cuda_objective``), or ``None`` if it can.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`.
        ctx: :class:`isles.algorithms.core.base.Context`.
    """
    if getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if not params.fused:
        return "fused=False"
    if params.strategy != "rand/1":
        return f"strategy {params.strategy} (fused: rand/1)"
    if params.crossover not in XOVER_IDS:
        return f"crossover {params.crossover} (fused: bin|nec)"
    dtype = np.dtype(ctx.dtype)
    if dtype not in (np.float32, np.float64):
        return f"dtype {dtype} (fused: float32|float64)"
    if ctx.n_islands * params.pop_size >= 2**31:
        return "more than 2**31 individuals"
    return None


def variation_source(dtype, dim: int, n: int, crossover: str, bound_handling: str) -> str:
    """CUDA source of the trial-population kernel ``de_variation`` of one configuration:
    ``defines + HASH + ARITHMETIC + MATH + DECISIONS_SOURCE + VARIATION_KERNEL`` (no objective).

    Raises:
        KeyError: an unsupported crossover or bound handling name.
    """
    defines = {"IS_F32": int(np.dtype(dtype) == np.float32), "DIM": int(dim), "NPOP": int(n),
               "XOVER": XOVER_IDS[crossover], "BOUND": BOUND_IDS[bound_handling]}
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return head + HASH + ARITHMETIC + MATH + DECISIONS_SOURCE + VARIATION_KERNEL


def _cr_args(params, dtype) -> tuple:
    """Kernel arguments of the crossover rate: ``(CR in dtype, log CR, case)`` (0: CR <= 0,
    1: 0 < CR < 1, 2: CR >= 1)."""
    cr = float(params.CR)
    return (np.dtype(dtype).type(cr), np.float64(math.log(cr) if 0.0 < cr < 1.0 else 0.0),
            np.int32(0 if cr <= 0.0 else (2 if cr >= 1.0 else 1)))


class DEVariation:
    """The fused trial population of DE/rand/1/{bin,nec} for a problem evaluated as array code:
    one kernel (``de_variation``) that writes ``U`` bit-identical to
    :meth:`isles.algorithms.de.de.DE.trial`'s array code (same ``decide``/``trial_coord`` as the
    fused generation, module docstring). No host synchronisation; capturable.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`; ctx: a CuPy context.

    Raises:
        ValueError: :func:`variation_unsupported_reason` gives a reason.
    """

    def __init__(self, params, ctx):
        cp = require_supported("fused DE variation", variation_unsupported_reason(params, ctx))

        self.cp, self.I, self.N, self.D = cp, ctx.n_islands, params.pop_size, int(ctx.dim)
        self.dtype = np.dtype(ctx.dtype)
        src = variation_source(self.dtype, self.D, self.N, params.crossover, params.bound_handling)
        self._k = module(cp, src).get_function("de_variation")
        self._F = self.dtype.type(params.F)
        self._CR, self._log_cr, self._cr_case = _cr_args(params, self.dtype)
        self._keys = ctx.rng.keys
        self._ctr = ctx.rng.ctr
        self._lower = cp.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self._upper = cp.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self._select = _select_kernels(cp)

    def trial(self, X, generation: int):
        """Trial population ``U (I, N, D)`` of ``generation`` (host int; the draws use
        ``generation + rng.ctr`` as :class:`isles.algorithms.core.random.CounterRNG` does).

        Raises:
            ValueError: ``X`` is not ``(I, N, D)`` in the plan's dtype.
        """
        cp = self.cp
        if X.shape != (self.I, self.N, self.D) or X.dtype != self.dtype:
            raise ValueError(f"fused DE variation: X{X.shape} {X.dtype} is not "
                             f"({self.I}, {self.N}, {self.D}) {self.dtype}")
        X = cp.ascontiguousarray(X)
        U = cp.empty_like(X)
        total = self.I * self.N
        self._k((-(-total // 4),), (128,),
                (X, U, self._keys, self._lower, self._upper, np.int64(generation), self._ctr,
                 np.int32(total), self._F, self._CR, self._log_cr, self._cr_case))
        return U

    def select(self, state, U, fu, vu, n_nan):
        """:func:`isles.algorithms.de.de.select` in two elementwise kernels (same rule, same new
        state); no host synchronisation."""
        cp = self.cp
        rows, fv = self._select
        X, f, v = state["X"], state["f"], state["v"]
        c = cp.ascontiguousarray
        s = dict(state)
        Xn = rows(c(X), c(U), c(f), c(v), c(fu), c(vu), np.int64(X.shape[-1]), size=X.size)
        fn, vn = fv(c(f), c(v), c(fu), c(vu), size=f.size)
        s["X"], s["f"], s["v"] = Xn.reshape(X.shape), fn.reshape(f.shape), vn.reshape(v.shape)
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + X.shape[1]
        s["nan_evals"] = state["nan_evals"] + n_nan
        return s


_SELECT_KERNELS: dict = {}


def _select_kernels(cp):
    """Greedy one-to-one selection as two elementwise kernels (compiled once per process):
    ``isles_de_select_rows`` writes the next population ``(I, N, D)``, ``isles_de_select_fv`` its
    ``f, v``. The rule is :func:`isles.problems.constraints.better` (the trial wins unless the target
    is strictly better under Deb's rules), as in :func:`isles.algorithms.de.de.select`."""
    ks = _SELECT_KERNELS.get(cp.cuda.Device().id)
    if ks is None:
        keep = "((v[r] < vu[r]) || ((v[r] == vu[r]) && (f[r] < fu[r])))"
        rows = cp.ElementwiseKernel(
            "raw T X, raw T U, raw F f, raw F v, raw F fu, raw F vu, int64 D", "T out",
            f"const long long r = i / D; out = {keep} ? X[i] : U[i];", "isles_de_select_rows")
        fv = cp.ElementwiseKernel(
            "raw F f, raw F v, raw F fu, raw F vu", "F fo, F vo",
            f"const long long r = i; const bool k = {keep}; fo = k ? f[r] : fu[r]; vo = k ? v[r] : vu[r];",
            "isles_de_select_fv")
        ks = _SELECT_KERNELS[cp.cuda.Device().id] = (rows, fv)
    return ks


def make_variation(de, ctx):
    """A :class:`DEVariation` for the DE algorithm ``de`` on ``ctx``, or ``None`` where it does not
    apply (logged at INFO level)."""
    reason = variation_unsupported_reason(de.params, ctx)
    if reason is not None:
        log.info("DE: array-code trial population (%s)", reason)
        return None
    return DEVariation(de.params, ctx)


class FusedDE(PingPongGraph):
    """Compiled fused DE/rand/1/{bin,nec} for one ``(params, ctx)`` (see the module docstring).

    Args:
        params: :class:`isles.algorithms.de.de.DEParams` (rand/1, bin or nec).
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy with a supported problem.

    Raises:
        ValueError: the configuration is unsupported (:func:`unsupported_reason`).
    """

    def __init__(self, params, ctx):
        reason = unsupported_reason(params, ctx)
        if reason is not None:
            raise ValueError(f"fused DE unavailable: {reason}")
        import cupy as cp  # noqa: PLC0415

        self.cp, self.params, self.ctx = cp, params, ctx
        self.problem = ctx.evaluator.problem
        self.I, self.N, self.D = ctx.n_islands, params.pop_size, int(ctx.dim)
        self.dtype = np.dtype(ctx.dtype)
        self.tpi, self.items, self.ipb, self.block = layout(self.D)
        self.total = self.I * self.N
        self.grid = -(-self.total // self.ipb)
        objective, _, self.macros = _objective_of(ctx)
        ev = ctx.evaluator
        self.penalty = float(ev.penalty) if getattr(ev, "handling", "feasibility") == "penalty" else None
        self.source = kernel_source(
            self.dtype, self.D, self.N, objective, params.crossover, params.bound_handling, self.penalty
        )
        mod = module(cp, self.source)
        self._k_gen = mod.get_function("de_generation")
        self._k_eval = mod.get_function("eval_rows")
        self._k_set = mod.get_function("set_i64")
        self._k_add = mod.get_function("add_i64")
        self._F = self.dtype.type(params.F)
        self._CR, self._log_cr, self._cr_case = _cr_args(params, self.dtype)
        self._keys = ctx.rng.keys
        ctr = getattr(ctx.rng, "ctr", None)  # CounterRNG's device generation offset (graph replay)
        self._ctr = ctr if ctr is not None else cp.zeros(1, dtype=np.uint64)
        self._lower = cp.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self._upper = cp.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self._zero = cp.zeros((), dtype=np.int64)  # generation offset source of step()
        self._gen = cp.zeros((), dtype=np.int64)  # device generation counter of run()
        self._nan = cp.zeros((), dtype=np.int64)  # NaN count of run()
        self._dummy = cp.empty((1,), dtype=self.dtype)
        self._bufs = None
        self._graph = None
        self.graph_generations = GRAPH_GENERATIONS
        self.tracker = TargetTracker(cp, ctx, self.dtype) if ctx.target is not None else None

    # -- launches -------------------------------------------------------------------------------
    def _launch(self, src, dst, trial, ftrial, write, gen_dev, gen_off, nan):
        X, f, v = src
        Xn, fn, vn = dst
        self._k_gen(
            (self.grid,), (self.block,),
            (X, f, v, Xn, fn, vn, trial, ftrial, np.int32(write), self._keys, self._lower,
             self._upper, gen_dev, np.int64(gen_off), self._ctr, nan, np.int32(self.total), self._F,
             self._CR, self._log_cr, self._cr_case),
        )

    def _arrays(self, state):
        cp = self.cp
        X, f, v = state["X"], state["f"], state["v"]
        if X.shape != (self.I, self.N, self.D) or f.shape != (self.I, self.N) or v.shape != f.shape:
            raise ValueError(
                f"fused DE: state shapes X{X.shape} f{f.shape} v{v.shape} do not match "
                f"(I, N, D) = ({self.I}, {self.N}, {self.D})"
            )
        out = []
        for a in (X, f, v):
            if a.dtype != self.dtype or not a.flags.c_contiguous:
                a = cp.ascontiguousarray(a, dtype=self.dtype)
            out.append(a)
        return tuple(out)

    def evaluate_fv(self, X):
        """Objective and violation of ``X (..., D)`` by the kernel's own code (``obj_final``,
        ``obj_violation``; no NaN or penalty treatment).

        Returns:
            ``(f, v)`` of shape ``X.shape[:-1]`` (CuPy, the plan's dtype); ``v = 0`` without
            ``OBJ_HAS_V``.
        """
        cp = self.cp
        X = cp.ascontiguousarray(X, dtype=self.dtype)
        rows = int(np.prod(X.shape[:-1]))
        f = cp.empty((rows,), dtype=self.dtype)
        v = cp.empty((rows,), dtype=self.dtype)
        grid = max(1, -(-rows // self.ipb))
        self._k_eval((grid,), (self.block,), (X, f, v, np.int32(rows)))
        return f.reshape(X.shape[:-1]), v.reshape(X.shape[:-1])

    def evaluate(self, X):
        """Objective of ``X (..., D)`` by the kernel's own code (no NaN replacement).

        Returns:
            ``f`` of shape ``X.shape[:-1]`` (CuPy, the plan's dtype).
        """
        return self.evaluate_fv(X)[0]

    def verify(self, n_points: int = 16) -> float:
        """Largest ``|f_kernel - f_problem| / (1 + |f_problem|)`` on random points (host sync),
        and the same for the violation against :func:`isles.problems.constraints.total_violation` of
        ``problem.constraints`` when the objective has ``OBJ_HAS_V``.

        Points: uniform in the box, and the same scaled towards the box centre by 1e-3 (near the
        optimum of the centred functions). This protects against a wrong ``cuda_objective``.
        """
        return real_objective_error(self.cp, self.problem, self.evaluate_fv, self.dtype,
                                    bool(self.macros["OBJ_HAS_V"]), n_points, seed=20240611)

    # -- the algorithm ----------------------------------------------------------------------------
    def trial(self, state):
        """Trial population of generation ``state["generation"]`` and its objective.

        Returns:
            ``(U (I, N, D), f_U (I, N))``; ``U`` is bit-identical to
            :meth:`isles.algorithms.de.de.DE.trial` (module docstring).
        """
        cp = self.cp
        src = self._arrays(state)
        dst = tuple(cp.empty_like(a) for a in src)
        U, fU = cp.empty_like(src[0]), cp.empty_like(src[1])
        nan = cp.zeros((), dtype=np.int64)
        self._launch(src, dst, U, fU, 1, self._zero, state["generation"], nan)
        return U, fU

    def step(self, state):
        """One generation (one kernel launch, no host sync); returns a new state."""
        cp = self.cp
        src = self._arrays(state)
        dst = tuple(cp.empty_like(a) for a in src)
        nan = state["nan_evals"]
        if isinstance(nan, cp.ndarray) and nan.dtype == np.int64:
            nan = nan.copy()
        else:
            nan = cp.array(nan, dtype=np.int64)
        self._launch(src, dst, self._dummy, self._dummy, 0, self._zero, state["generation"], nan)
        s = dict(state)
        s["X"], s["f"], s["v"] = dst
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + self.N
        s["nan_evals"] = nan
        return s

    def _step(self, src, dst, k):
        """One generation ``src -> dst`` with draws of generation ``gen + k`` (:class:`PingPongGraph`)."""
        self._launch(src, dst, self._dummy, self._dummy, 0, self._gen, k, self._nan)

    def _tracked(self, dst):
        """``(f, v, N, N, None)`` of buffer set ``dst`` (:meth:`PingPongGraph._track_target`)."""
        return dst[1], dst[2], self.N, self.N, None

    def _buffers(self):
        if self._bufs is None:
            cp = self.cp
            shapes = ((self.I, self.N, self.D), (self.I, self.N), (self.I, self.N))
            self._bufs = tuple(tuple(cp.empty(sh, dtype=self.dtype) for sh in shapes) for _ in range(2))
        return self._bufs


    def run(self, state, n_generations: int):
        """``n_generations`` generations: CUDA-graph replays plus single launches; no host sync.
        With a stop target, ``hit_generation`` is recorded after every generation (exact).

        Returns:
            A new state (fresh arrays; the plan's ping-pong buffers are internal).
        """
        cp = self.cp
        n = int(n_generations)
        if n <= 0:
            return dict(state)
        X, f, v = self._arrays(state)
        bufs = self._buffers()
        for dst, src in zip(bufs[0], (X, f, v)):
            cp.copyto(dst, src)
        self._k_set((1,), (1,), (self._gen, np.int64(state["generation"])))
        self._nan.fill(0)
        if self.tracker is not None:
            self.tracker.load(state)
        fin, _ = self._advance(n)
        s = dict(state)
        s["X"], s["f"], s["v"] = (a.copy() for a in fin)
        if self.tracker is not None:  # tracked after every generation, inside the graph
            s["hit_generation"] = self.tracker.hit.copy()
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * self.N
        s["nan_evals"] = state["nan_evals"] + self._nan
        return s


def make_plan(de, ctx):
    """A verified :class:`FusedDE` for the DE algorithm ``de`` on ``ctx``, or ``None`` where it
    does not apply.

    Builds (compiles, cached by source) and self-checks the kernel's objective against
    ``problem.objective`` (:meth:`FusedDE.verify`, one host synchronisation). Returns ``None``
    with a log line when unsupported, and with a ``RuntimeWarning`` when the check fails.
    """
    params = de.params
    reason = unsupported_reason(params, ctx)
    if reason is not None:
        log.info("DE: generic path (%s)", reason)
        return None
    plan = FusedDE(params, ctx)
    err = plan.verify()
    tol = VERIFY_RTOL[plan.dtype]
    if not err <= tol:
        warnings.warn(
            f"fused DE disabled: the cuda_objective of {plan.problem.name} differs from the problem's "
            f"objective by {err:.3g} (relative, tolerance {tol:g}); using the generic path",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    log.info("DE: fused CUDA path (%s, D=%d, TPI=%d, ITEMS=%d)", plan.problem.name, plan.D, plan.tpi,
             plan.items)
    return plan
