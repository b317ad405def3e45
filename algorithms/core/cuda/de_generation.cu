// de_generation.cu: the fused DE generation's kernels (algorithms/de/cuda.py): de.cu, the problem's
// fused objective, then this file.
#ifndef ISLES_HOST_EMU
#include "fitness.cuh"
#include "reduce.cuh"

#if TPI == 32
#define GROUP_SYNC() __syncwarp()
#else
#define GROUP_SYNC() __syncthreads()
#endif

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
    isles_warp_merge(acc, FULL_MASK, 32);
#if TPI > 32
    isles_block_merge(acc, red, NWARP);
#endif
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
    const bool bad = isles_fix_fv(&f, &vu);   // NaN = worst (fitness.cuh)
    const T ft = fx[gind], vt = vx[gind];
    // trial (f, vu) replaces the target unless the target is strictly better (Deb's rules);
    // without OBJ_HAS_V, vu = 0
    const bool accept = !isles_better(ft, vt, f, vu);
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

#endif  // ISLES_HOST_EMU
