// pso.cu: the fused PSO generation (algorithms/pso/cuda.py) and the device functions that the fused
// EPSO generation (epso.cu, algorithms/pso/epso_cuda.py) shares with it: the schedules, the clamp,
// move and boundary correction (pso_finish), Deb's selection among a particle's candidates and
// the best updates (pso_bests). Prepended by Python: IS_F32 and the draw ids DRAW_R1 DRAW_R2
// DRAW_COR of algorithms/pso/draws.py.
#include "math.cuh"
#include "fitness.cuh"
#include "block.cuh"
#define BESTS_BLOCK 256
#define IDX_NONE 0x7fffffff

// cupy.clip: in1 > in2 ? in2 : (in0 < in1 ? in1 : (in0 > in2 ? in2 : in0))
ISLES_DEV T clip3(T a, T lo, T hi) { return lo > hi ? hi : (a < lo ? lo : (a > hi ? hi : a)); }

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

// The end of a move of one coordinate (PSO.step and EPSO.step after eq. 1/11/12, generic order):
//   vel = clip(vel, -vm, vm), vm = vmax * (upper - lower)              clamp_velocity (if clamp)
//   x = x + vel                                                        eq. 2
//   boundary_correction: d = upper - lower (range) or min(d, overshoot) (overshoot);
//   below: x = lower + (u*cor)*d; above: x = upper - (u*cor)*d; both: vel = -vel   eqs. 4-5
// u: the COR uniform of the coordinate, element `off` (= index * GOLDEN) of the stream scor.
ISLES_DEV void pso_finish(T x0, T v, T lo, T hi, T vmax, T cor, int clamp, int mode, u64 key, u64 scor, u64 off,
                          T* xo, T* vo) {
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
        const T u = unifT(isles_mix64((key ^ scor) + off));
        const T s = mul_rn(mul_rn(u, cor), d);
        xn = below ? add_rn(lo, s) : sub_rn(hi, s);
        v = -v;
    }
    *xo = xn;
    *vo = v;
}

// One coordinate i (flat over (I, N, D)) of PSO.step's move (seed 001 eqs. 1, 2, 4, 5), in the
// generic code's order:
//   vel = ((w*vel + (r1*c1)*(pbest - x)) + (r2*c2)*(gbest - x))        eq. 1
// then pso_finish (clamp, eq. 2, eqs. 4-5).
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
    const T t1 = mul_rn(w, vel[i]);
    const T t2 = mul_rn(mul_rn(r1, c1), sub_rn(pbest[i], x0));
    const T t3 = mul_rn(mul_rn(r2, c2), sub_rn(gbest[isl * dim + j], x0));
    pso_finish(x0, add_rn(add_rn(t1, t2), t3), lower[j], upper[j], vmax, cor, clamp, mode, key, s3, off, xo + i,
               vo + i);
}

// Deb's choice among the ncand candidates of particle p (rows p*ncand .. p*ncand + ncand - 1 of
// fc, vc): problems/constraints.py argbest along the candidate axis, i.e. vmin = min(v) (NaN
// propagates), key = where(v == vmin, f, inf), argmin(key) (first NaN, else the first minimum).
// Returns the row p*ncand + k of the chosen candidate (p itself when ncand == 1).
ISLES_DEV long long select_row(const T* fc, const T* vc, long long p, int ncand) {
    const long long b = p * ncand;
    if (ncand == 1) return b;
    T vmin = T_INF;
    for (int c = 0; c < ncand; ++c) vmin = nan_min(vmin, vc[b + c]);
    T kb = T_INF;
    int ib = IDX_NONE;
    for (int c = 0; c < ncand; ++c) {
        const T key = (vc[b + c] == vmin) ? fc[b + c] : T_INF;
        if (key_before(key, c, kb, ib)) { kb = key; ib = c; }
    }
    return b + ib;
}

// update_bests + update_gbest (algorithms/pso/pso.py) and nan_evals += n_nan, after the choice of
// each particle's new position among its ncand candidates (EPSO; PSO: ncand = 1):
//   xc (I, N, ncand, D), fc, vc (I, N*ncand): the evaluated candidates; velc their velocities;
//   the chosen row q = select_row(p): x = xc[q], vel = velc[q], (f, v) = (fc[q], vc[q]).
// bests_rows: coordinates e0, e0 + stride, ... of (I, N, D): pbest = where(imp, x, pbest), and
// (write_xv) the chosen x and vel into xo, vo (else velc, xo, vo are never touched).
ISLES_DEV void bests_rows(long long e0, long long stride, const T* xc, const T* velc, const T* fc, const T* vc,
                          int ncand, const T* pb, const T* pf, const T* pv, T* pb_o, int write_xv, T* xo, T* vo,
                          int dim, long long total) {
    for (long long e = e0; e < total; e += stride) {
        const long long p = e / dim;
        const long long q = select_row(fc, vc, p, ncand);
        const long long src = q * dim + (e - p * dim);
        const T xn = xc[src];
        if (write_xv) {
            xo[e] = xn;
            vo[e] = velc[src];
        }
        pb_o[e] = isles_better(fc[q], vc[q], pf[p], pv[p]) ? xn : pb[e];
    }
}

// bests_island: island isl's new pbest_f, pbest_v, its best personal best (argbest: NaN-propagating
// min of v, then the first smallest key) against its gbest, and (island 0) the NaN counter; run
// by the nth threads tid of one block (a power of 2; s_key, s_idx: nth shared slots), or by one
// thread (nth = 1) under the host emulation.
ISLES_DEV void bests_island(int isl, int tid, int nth, T* s_key, int* s_idx, const T* xc, const T* fc, const T* vc,
                            int ncand, const T* pb, const T* pf, const T* pv, const T* gb, const T* gf,
                            const T* gv, const long long* nan_old, const long long* nan_add, T* pf_o, T* pv_o,
                            T* gb_o, T* gf_o, T* gv_o, long long* nan_o, int npart, int dim) {
    const long long p0 = (long long)isl * npart;
    // pass 1: new personal-best (f, v) of every particle; NaN-propagating min of v (argbest)
    T vmin = T_INF;
    for (int n = tid; n < npart; n += nth) {
        const long long p = p0 + n;
        const long long q = select_row(fc, vc, p, ncand);
        const bool imp = isles_better(fc[q], vc[q], pf[p], pv[p]);
        const T nf = imp ? fc[q] : pf[p], nv = imp ? vc[q] : pv[p];
        pf_o[p] = nf;
        pv_o[p] = nv;
        vmin = nan_min(vmin, nv);
    }
    s_key[tid] = vmin;
    BLOCK_SYNC();
    for (int s = nth / 2; s > 0; s >>= 1) {
        if (tid < s) s_key[tid] = nan_min(s_key[tid], s_key[tid + s]);
        BLOCK_SYNC();
    }
    vmin = s_key[0];
    BLOCK_SYNC();
    // pass 2: argmin of key = where(v == vmin, f, inf)
    T kb = T_INF;
    int ib = IDX_NONE;
    for (int n = tid; n < npart; n += nth) {
        const long long p = p0 + n;
        const long long q = select_row(fc, vc, p, ncand);
        const bool imp = isles_better(fc[q], vc[q], pf[p], pv[p]);
        const T nf = imp ? fc[q] : pf[p], nv = imp ? vc[q] : pv[p];
        const T key = (nv == vmin) ? nf : T_INF;
        if (key_before(key, n, kb, ib)) { kb = key; ib = n; }
    }
    s_key[tid] = kb;
    s_idx[tid] = ib;
    BLOCK_SYNC();
    for (int s = nth / 2; s > 0; s >>= 1) {
        if (tid < s && key_before(s_key[tid + s], s_idx[tid + s], s_key[tid], s_idx[tid])) {
            s_key[tid] = s_key[tid + s];
            s_idx[tid] = s_idx[tid + s];
        }
        BLOCK_SYNC();
    }
    const long long pbst = p0 + s_idx[0];
    const long long qb = select_row(fc, vc, pbst, ncand);
    // the island's best personal best against its global best (never gets worse)
    const bool impb = isles_better(fc[qb], vc[qb], pf[pbst], pv[pbst]);
    const T bf = impb ? fc[qb] : pf[pbst], bv = impb ? vc[qb] : pv[pbst];
    const T gfi = gf[isl], gvi = gv[isl];
    const bool gimp = isles_better(bf, bv, gfi, gvi);
    const T* src = gimp ? (impb ? xc + qb * dim : pb + pbst * dim) : (gb + (long long)isl * dim);
    T* dst = gb_o + (long long)isl * dim;
    for (int j = tid; j < dim; j += nth) dst[j] = src[j];
    if (tid == 0) {
        gf_o[isl] = gimp ? bf : gfi;
        gv_o[isl] = gimp ? bv : gvi;
        if (isl == 0) nan_o[0] = nan_old[0] + nan_add[0];
    }
}

// pso_bests' parameters (one list for the kernel and its host emulation emu_pso_bests)
#define PSO_BESTS_PARAMS                                                                                   \
    const T* __restrict__ xc, const T* __restrict__ fc, const T* __restrict__ vc, const T* __restrict__ pb,    \
        const T* __restrict__ pf, const T* __restrict__ pv, const T* __restrict__ gb, const T* __restrict__ gf, \
        const T* __restrict__ gv, const long long* __restrict__ nan_old, const long long* __restrict__ nan_add, \
        T* __restrict__ pb_o, T* __restrict__ pf_o, T* __restrict__ pv_o, T* __restrict__ gb_o,                 \
        T* __restrict__ gf_o, T* __restrict__ gv_o, long long* __restrict__ nan_o, const int npart,            \
        const int dim, const long long total, const int n_row_blocks, const int ncand, const int write_xv,     \
        const T* __restrict__ velc, T* __restrict__ xo, T* __restrict__ vo

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
// pso_bests with its own arguments: the rows, then every island (one thread per block)
void emu_pso_bests(PSO_BESTS_PARAMS) {
    T s_key[1];
    int s_idx[1];
    const int n_isl = (int)(total / ((long long)npart * dim));
    (void)n_row_blocks;
    bests_rows(0, 1, xc, velc, fc, vc, ncand, pb, pf, pv, pb_o, write_xv, xo, vo, dim, total);
    for (int isl = 0; isl < n_isl; ++isl)
        bests_island(isl, 0, 1, s_key, s_idx, xc, fc, vc, ncand, pb, pf, pv, gb, gf, gv, nan_old, nan_add, pf_o,
                     pv_o, gb_o, gf_o, gv_o, nan_o, npart, dim);
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

// bests_rows and bests_island in one launch: blocks [0, n_row_blocks) the rows, block
// n_row_blocks + isl island isl.
ISLES_KERNEL void __launch_bounds__(BESTS_BLOCK) pso_bests(PSO_BESTS_PARAMS) {
    const int tid = threadIdx.x;
    if ((int)blockIdx.x < n_row_blocks) {
        bests_rows((long long)blockIdx.x * BESTS_BLOCK + tid, (long long)n_row_blocks * BESTS_BLOCK, xc, velc, fc,
                   vc, ncand, pb, pf, pv, pb_o, write_xv, xo, vo, dim, total);
        return;
    }
    __shared__ T s_key[BESTS_BLOCK];
    __shared__ int s_idx[BESTS_BLOCK];
    bests_island((int)blockIdx.x - n_row_blocks, tid, BESTS_BLOCK, s_key, s_idx, xc, fc, vc, ncand, pb, pf, pv, gb,
                 gf, gv, nan_old, nan_add, pf_o, pv_o, gb_o, gf_o, gv_o, nan_o, npart, dim);
}
#endif  // ISLES_HOST_EMU
