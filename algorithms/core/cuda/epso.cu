// epso.cu: the fused EPSO generation's move (algorithms/pso/epso_cuda.py); its selection and best
// updates are pso.cu's pso_bests with ncand = 1 + R candidates. Prepended by Python: IS_F32,
// ISLES_MAX_DRAWS and the draw ids DRAW_R1 DRAW_R2 DRAW_R3 DRAW_COR DRAW_NW DRAW_NC1 DRAW_NC2
// DRAW_NC3 DRAW_NG of algorithms/pso/draws.py.
#include "pso.cu"

// the streams of one generation's draws (draw_stream of pso.cu); a normal draw d uses d and
// d + ISLES_MAX_DRAWS (CounterRNG.normal)
#define EPSO_NS 14
ISLES_DEV void epso_streams(u64 gbase, u64 ctr0, u64* st) {
    const u64 ids[EPSO_NS] = {DRAW_R1, DRAW_R2, DRAW_R3, DRAW_COR, DRAW_NW, DRAW_NW + ISLES_MAX_DRAWS,
                              DRAW_NC1, DRAW_NC1 + ISLES_MAX_DRAWS, DRAW_NC2, DRAW_NC2 + ISLES_MAX_DRAWS,
                              DRAW_NC3, DRAW_NC3 + ISLES_MAX_DRAWS, DRAW_NG, DRAW_NG + ISLES_MAX_DRAWS};
    for (int k = 0; k < EPSO_NS; ++k) st[k] = draw_stream(gbase, ids[k], ctr0);
}

// CounterRNG.normal at element `off` (= index * GOLDEN) of the streams sa (draw d) and sb (draw
// d + MAX_DRAWS): sqrt(-2 * log1p(-u1)) * cos((2 pi) * u2), each CuPy ufunc of the generic code
// one operation in T rounded once (the same CUDA library calls: log1pf/sqrtf/cosf or the double
// ones); two_pi = T(2 pi) as CuPy rounds the Python scalar.
ISLES_DEV T epso_normal(u64 key, u64 sa, u64 sb, u64 off, T two_pi) {
    const T u1 = unifT(isles_mix64((key ^ sa) + off));
    const T u2 = unifT(isles_mix64((key ^ sb) + off));
    return mul_rn(t_sqrt(mul_rn((T)-2, t_log1p(-u1))), t_cos(mul_rn(two_pi, u2)));
}

// base * (1 + sigma * z): a mutated strategic parameter (seed 001 eqs. 7-9, 14) or b_g* (eq. 10)
ISLES_DEV T epso_mutate(T base, T sigma, T z) { return mul_rn(base, add_rn((T)1, mul_rn(sigma, z))); }

// the scalars of one EPSO move
typedef struct {
    T w, vmax, c1, c2, c3, sigma, sigma_g, two_pi, cor;
    int npart, ncand, dim, clamp, mode, use_c3;
} epso_coef;

// One coordinate i of one candidate, flat over (I, N, C, D), C = 1 + R (candidate 0: the
// particle's own move, eq. 1 (+ eq. 13); candidate c >= 1: replica c - 1, eq. 11 (eq. 12)), in
// EPSO.step's generic order (algorithms/pso/epso.py):
//   W_w, W_1, W_2, W_3 = w, c1, c2, c3 for c = 0, else base * (1 + sigma * N) with the normal of
//     element (n, c - 1) of the (N, R, 1) draws DRAW_NW, DRAW_NC1, DRAW_NC2, DRAW_NC3
//   bg = gbest for c = 0, else clip(gbest * (1 + sigma_g * N), lower, upper) with the normal of
//     element (n, c - 1, j) of the (N, R, D) draw DRAW_NG
//   vel = ((W_w*vel + (r1*W_1)*(pbest - x)) + (r2*W_2)*(bg - x))
//   (use_c3) vel = vel + ((on*r3)*W_3)*(attractor - x), on = isfinite(attractor_v)
// with r1, r2, r3 element (n, c, j) of the (N, C, D) uniforms DRAW_R1, DRAW_R2, DRAW_R3; then
// pso_finish (clamp, eq. 2, eqs. 4-5 with the (N, C, D) uniform DRAW_COR).
ISLES_DEV void epso_move_one(long long i, const T* x, const T* vel, const T* pbest, const T* gbest, const T* attr,
                             const T* attr_v, const T* lower, const T* upper, const u64* keys, const u64* st,
                             epso_coef k, T* xo, T* vo) {
    const long long m = (long long)k.npart * k.ncand * k.dim;
    const long long isl = i / m;
    const long long idx = i - isl * m;  // element index inside the island's (N, C, D) block
    const long long nc = idx / k.dim;
    const int j = (int)(idx - nc * k.dim);
    const long long n = nc / k.ncand;
    const int c = (int)(nc - n * k.ncand);
    const u64 key = keys[isl];
    const u64 off = (u64)idx * GOLDEN;
    const long long pi = (isl * k.npart + n) * k.dim + j;  // the particle's coordinate in (I, N, D)
    const T lo = lower[j], hi = upper[j];
    T ww = k.w, w1 = k.c1, w2 = k.c2, w3 = k.c3;  // base * ones for the original (exact)
    T bg = gbest[isl * k.dim + j];
    if (c > 0) {
        const long long r = n * (k.ncand - 1) + (c - 1);  // element (n, c - 1) of (N, R, 1)
        const u64 ow = (u64)r * GOLDEN;
        ww = epso_mutate(k.w, k.sigma, epso_normal(key, st[4], st[5], ow, k.two_pi));
        w1 = epso_mutate(k.c1, k.sigma, epso_normal(key, st[6], st[7], ow, k.two_pi));
        w2 = epso_mutate(k.c2, k.sigma, epso_normal(key, st[8], st[9], ow, k.two_pi));
        if (k.use_c3) w3 = epso_mutate(k.c3, k.sigma, epso_normal(key, st[10], st[11], ow, k.two_pi));
        const u64 og = (u64)(r * k.dim + j) * GOLDEN;  // element (n, c - 1, j) of (N, R, D)
        bg = clip3(epso_mutate(bg, k.sigma_g, epso_normal(key, st[12], st[13], og, k.two_pi)), lo, hi);
    }
    const T x0 = x[pi];
    const T r1 = unifT(isles_mix64((key ^ st[0]) + off));
    const T r2 = unifT(isles_mix64((key ^ st[1]) + off));
    const T t1 = mul_rn(ww, vel[pi]);
    const T t2 = mul_rn(mul_rn(r1, w1), sub_rn(pbest[pi], x0));
    const T t3 = mul_rn(mul_rn(r2, w2), sub_rn(bg, x0));
    T v = add_rn(add_rn(t1, t2), t3);
    if (k.use_c3) {
        const T av = attr_v[isl];
        const T on = ((av == av) && (av != T_INF) && (av != -T_INF)) ? (T)1 : (T)0;
        const T r3 = unifT(isles_mix64((key ^ st[2]) + off));
        v = add_rn(v, mul_rn(mul_rn(mul_rn(on, r3), w3), sub_rn(attr[isl * k.dim + j], x0)));
    }
    pso_finish(x0, v, lo, hi, k.vmax, k.cor, k.clamp, k.mode, key, st[3], off, xo + i, vo + i);
}

ISLES_DEV epso_coef epso_make_coef(T w, T vmax, T c1, T c2, T c3, T sigma, T sigma_g, T two_pi, T cor, int npart,
                                   int ncand, int dim, int clamp, int mode, int use_c3) {
    epso_coef k;
    k.w = w; k.vmax = vmax; k.c1 = c1; k.c2 = c2; k.c3 = c3; k.sigma = sigma; k.sigma_g = sigma_g;
    k.two_pi = two_pi; k.cor = cor; k.npart = npart; k.ncand = ncand; k.dim = dim; k.clamp = clamp;
    k.mode = mode; k.use_c3 = use_c3;
    return k;
}

#ifdef ISLES_HOST_EMU
// ---- host emulation (CPU check of the arithmetic; not used at run time) ----
// CounterRNG.normal(generation, draw, (m,)) of n_isl streams into out (n_isl, m)
void emu_normal(const u64* keys, u64 ctr0, u64 gbase, u64 draw, int n_isl, long long m, T two_pi, T* out) {
    const u64 sa = draw_stream(gbase, draw, ctr0), sb = draw_stream(gbase, draw + ISLES_MAX_DRAWS, ctr0);
    for (int isl = 0; isl < n_isl; ++isl)
        for (long long e = 0; e < m; ++e) out[isl * m + e] = epso_normal(keys[isl], sa, sb, (u64)e * GOLDEN, two_pi);
}
// the move of every candidate, with the schedules' values w, vmax given
void emu_epso_move(const T* x, const T* vel, const T* pbest, const T* gbest, const T* attr, const T* attr_v,
                   const T* lower, const T* upper, const u64* keys, u64 ctr0, u64 gbase, T w, T vmax, T c1, T c2,
                   T c3, T sigma, T sigma_g, T two_pi, T cor, int npart, int ncand, int dim, long long total,
                   int clamp, int mode, int use_c3, T* xo, T* vo) {
    u64 st[EPSO_NS];
    epso_streams(gbase, ctr0, st);
    const epso_coef k =
        epso_make_coef(w, vmax, c1, c2, c3, sigma, sigma_g, two_pi, cor, npart, ncand, dim, clamp, mode, use_c3);
    for (long long i = 0; i < total; ++i)
        epso_move_one(i, x, vel, pbest, gbest, attr, attr_v, lower, upper, keys, st, k, xo, vo);
}
#endif  // ISLES_HOST_EMU

// ---- the kernel (under ISLES_HOST_EMU: emu_epso_move_kernel, the same code run by one thread) ----
#ifdef ISLES_HOST_EMU
#define EPSO_MOVE_ENTRY void emu_epso_move_kernel
#define EPSO_FIRST 0
#define EPSO_STRIDE 1
#else
#define EPSO_MOVE_ENTRY ISLES_KERNEL void epso_move
#define EPSO_FIRST ((long long)blockIdx.x * blockDim.x + threadIdx.x)
#define EPSO_STRIDE ((long long)gridDim.x * blockDim.x)
#endif
// The schedules of iteration kbase + ctr[0] (pso.cu's schedule_one, in every thread: no separate
// launch), then epso_move_one for every coordinate of every candidate.
EPSO_MOVE_ENTRY(const T* __restrict__ x, const T* __restrict__ vel, const T* __restrict__ pbest,
                const T* __restrict__ gbest, const T* __restrict__ attr, const T* __restrict__ attr_v,
                const T* __restrict__ lower, const T* __restrict__ upper, const u64* __restrict__ keys,
                const u64* __restrict__ ctr, T* __restrict__ xo, T* __restrict__ vo, const u64 gbase,
                const u64 kbase, const int w_sched, const T w_max, const T w_span, const int v_sched,
                const T v_start, const T v_ratio, const T v_pow, const T denom, const T c1, const T c2, const T c3,
                const T sigma, const T sigma_g, const T two_pi, const T cor, const int npart, const int ncand,
                const int dim, const long long total, const int clamp, const int mode, const int use_c3) {
    const u64 ctr0 = ctr[0];
    u64 st[EPSO_NS];
    epso_streams(gbase, ctr0, st);
    T sched[2];
    schedule_one(ctr0, kbase, w_sched, w_max, w_span, v_sched, v_start, v_ratio, v_pow, denom, sched);
    const epso_coef k = epso_make_coef(sched[0], clamp ? sched[1] : (T)0, c1, c2, c3, sigma, sigma_g, two_pi, cor,
                                       npart, ncand, dim, clamp, mode, use_c3);
    for (long long i = EPSO_FIRST; i < total; i += EPSO_STRIDE)
        epso_move_one(i, x, vel, pbest, gbest, attr, attr_v, lower, upper, keys, st, k, xo, vo);
}
