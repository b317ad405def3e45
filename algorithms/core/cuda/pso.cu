// pso.cu: the fused PSO generation (algorithms/pso/cuda.py). Prepended by Python: IS_F32 and the
// draw ids DRAW_R1 DRAW_R2 DRAW_COR of algorithms/pso/pso.py.
#include "math.cuh"
#include "fitness.cuh"
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
            pb_o[e] = isles_better(f[p], v[p], pf[p], pv[p]) ? x[e] : pb[e];
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
        const bool imp = isles_better(f[p], v[p], pf[p], pv[p]);
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
        const bool imp = isles_better(f[p], v[p], pf[p], pv[p]);
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
    const bool impb = isles_better(f[pbst], v[pbst], pf[pbst], pv[pbst]);
    const T bf = impb ? f[pbst] : pf[pbst], bv = impb ? v[pbst] : pv[pbst];
    const T gfi = gf[isl], gvi = gv[isl];
    const bool gimp = isles_better(bf, bv, gfi, gvi);
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
