// epso_host.cuh: host only (appended to epso.cu's text under -DISLES_HOST_EMU by
// isles.algorithms.pso.host_epoch, never part of a GPU source): whole EPSO generations of every
// island in one call, the islands on OpenMP threads (compiled with -fopenmp where the compiler has
// it; else one thread). Prepended by Python, after epso.cu: the problem's row code (EPSO_ROW 1,
// cuda_row: row_objective, row_constraint, ROW_M) or its fused objective (EPSO_ROW 0,
// cuda_objective: obj_init, obj_term, obj_final, obj_violation), EPSO_NEQ, EPSO_EQ_TOL and the
// constraint scales epso_scale[ROW_M] (row code), PENALTY where constraints.handling=penalty;
// with a fused objective, obj_fold.cuh (its fold in NumPy's order, np_order below).
//
// Plain PSO (algorithms/pso/pso.py, PSO.step) is this generation with no replicas and no third
// attractor (ncand = 1, use_c3 = 0): the same move, draws (r1, r2, COR) and bests in the same order.
//
// The generation is EPSO.step's generic order (algorithms/pso/epso.py, as epso_move_one), with
// one change of place: the normal draws' two transcendental calls are NumPy's own. The normals of
// a generation do not depend on the state, so epso_host_draws writes, for each normal element,
// A = -u1 and B = (2 pi) u2 (CounterRNG.normal's operands); Python takes np.log1p(A) and np.cos(B)
// (the very ufuncs of CounterRNG.normal: NumPy's SIMD log1p is not the C library's) and
// epso_host_epoch forms z = sqrt(-2 L) C. So the draws are the NumPy twin's bit for bit. Where
// the C library's cos is NumPy's (c_cos: the build compares them, epso_host_cos), the epoch
// computes C = cos(B) itself, on the islands' threads, and Python takes only np.log1p.
// The layout of one (generation, island) block of normals, R = ncand - 1 replicas:
//   [NW (N R)] [NC1 (N R)] [NC2 (N R)] [NC3 (N R), use_c3 only] [NG (N R D)]
// Each particle's weights are drawn once per candidate (not per coordinate as epso_move_one).
#ifndef ISLES_EPSO_HOST_CUH
#define ISLES_EPSO_HOST_CUH
#ifdef ISLES_HOST_EMU
#include <math.h>
#include <stdlib.h>
#include <string.h>

static long long epso_block_len(int npart, int ncand, int dim, int use_c3) {
    const long long nr = (long long)npart * (ncand - 1);
    return nr * (use_c3 ? 4 : 3) + nr * dim;
}

// A, B (B NULL: not written) of every normal element of n_gen generations (g0, g0 + 1, ...) of n_isl islands:
// (n_gen, n_isl, block) each, the block as above
void epso_host_draws(const int n_isl, const u64* keys, const u64 ctr0, const long long g0, const int n_gen,
                     const int npart, const int ncand, const int dim, const int use_c3, const T two_pi, T* A,
                     T* B) {
    const long long nr = (long long)npart * (ncand - 1), blk = epso_block_len(npart, ncand, dim, use_c3);
    const u64 ids[5] = {DRAW_NW, DRAW_NC1, DRAW_NC2, DRAW_NC3, DRAW_NG};
    for (int k = 0; k < n_gen; ++k) {
        const u64 gbase = ((u64)(g0 + k) << 16);
        for (int isl = 0; isl < n_isl; ++isl) {
            const u64 key = keys[isl];
            T* a = A + ((long long)k * n_isl + isl) * blk;
            T* b = B ? B + ((long long)k * n_isl + isl) * blk : (T*)0;  // B NULL: c_cos
            long long o = 0;
            for (int d = 0; d < 5; ++d) {
                if (d == 3 && !use_c3) continue;
                const long long m = d == 4 ? nr * dim : nr;
                const u64 sa = draw_stream(gbase, ids[d], ctr0), sb = draw_stream(gbase, ids[d] + ISLES_MAX_DRAWS, ctr0);
                for (long long e = 0; e < m; ++e) {
                    const u64 off = (u64)e * GOLDEN;
                    a[o + e] = -unifT(isles_mix64((key ^ sa) + off));
                    if (b) b[o + e] = mul_rn(two_pi, unifT(isles_mix64((key ^ sb) + off)));
                }
                o += m;
            }
        }
    }
}

// (f, v) of one candidate row x[0..dim) as the Evaluator makes them (problems/constraints.py):
// row code: g_i raw, equalities |h| - eq_tol, divided by the scale, max(0, .) summed in NumPy's
// order for a row (the first term, then the others folded from 0: add.reduce's pairwise sum
// below 8 terms); fused objective: its accumulators folded over the coordinates, in NumPy's
// order (obj_fold_row) where np_order (the build found it the array code's bit for bit),
// else left to right.
static int epso_eval_row(const T* x, const int dim, const int np_order, T* fo, T* vo) {
    T f, v;
#if EPSO_ROW
    (void)np_order;  // the row code has no fold
    f = row_objective(x);
    v = (T)0;
#if ROW_M > 0
    T rest = (T)0;
    for (int i = 0; i < ROW_M; ++i) {
        T g = row_constraint(x, i);
        if (i >= ROW_M - EPSO_NEQ) g = sub_rn(t_abs(g), (T)EPSO_EQ_TOL);
        g = div_rn(g, epso_scale[i]);
        const T m = (g != g) ? g : (g > (T)0 ? g : (T)0);   // numpy.maximum(g, 0): NaN propagates
        if (i == 0) v = m; else rest = add_rn(rest, m);
    }
    if (ROW_M > 1) v = add_rn(v, rest);
#endif
#else
    T acc[OBJ_NACC];
    if (np_order) {
        obj_fold_row(acc, x, dim);
    } else {
        obj_init(acc);
        for (int j = 0; j < dim; ++j) obj_term(acc, x[j], (OBJ_NEXT && j + 1 < dim) ? x[j + 1] : (T)0, j);
    }
#if OBJ_HAS_V
    v = obj_violation(acc, dim);
#else
    v = (T)0;
#endif
    f = obj_final(acc, dim);
#endif
    const int bad = isles_fix_fv(&f, &v);
    *fo = f;
    *vo = v;
    return bad;
}

// the schedules of the iterations k0 + 1 .. k0 + n (1-based): algorithms/pso/pso.py's inertia_weight
// and vmax_schedule (v_sched: its general case; else v_start) in double, operation for operation as
// Python's floats compute them (t's int division exact below 2^53; `**` is the C library's pow in
// CPython, as here); the epoch casts them to T as np.array(..., dtype) does
void epso_host_schedules(const long long k0, const int n, const long long i_max, const double w_max,
                         const double w_min, const int v_sched, const double v_start, const double v_final,
                         const double v_pow, double* w, double* vm) {
    for (int e = 0; e < n; ++e) {
        double t = 0.0;
        if (i_max > 1) {
            t = (double)(k0 + e) / (double)(i_max - 1);   // (k - 1) / (i_max - 1), k = k0 + 1 + e
            t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
        }
        w[e] = w_max - t * (w_max - w_min);
        vm[e] = v_sched ? v_start * pow(v_final / v_start, pow(t, v_pow)) : v_start;
    }
}

// the C library's cos of n values (the build compares it with np.cos: c_cos)
void epso_host_cos(const long long n, const T* a, T* out) {
    for (long long e = 0; e < n; ++e) out[e] = t_cos(a[e]);
}

// the Evaluator on n rows (the build's check of the C objective against the array code)
void epso_host_eval(const T* X, const long long n, const int dim, const int np_order, T* f, T* v) {
    for (long long r = 0; r < n; ++r) (void)epso_eval_row(X + r * dim, dim, np_order, f + r, v + r);
}

// n_gen generations of island isl, in place on its x, vel, pbest (N, D), pbest_f, pbest_v (N),
// gbest (D), gbest_f, gbest_v; L, C the normals' log1p and cos values of its blocks (stride
// n_isl blocks a generation); w, vmax the schedules of each generation; *nan its NaN count.
// 1: no memory.
static int epso_island(const int isl, const int n_isl, T* x, T* vel, T* pb, T* pf, T* pv, T* gb, T* gf, T* gv,
                       const T* attr, const T* attr_v, const T* lower, const T* upper, const u64 key, const u64 ctr0,
                       const long long g0, const int n_gen, const T* L, const T* Cs, const T* w, const T* vmax,
                       const epso_coef k0, const int c_cos, const int np_order, const T two_pi,
                       unsigned long long* nan) {
    const int N = k0.npart, C = k0.ncand, D = k0.dim, R = C - 1;
    const long long ncd = (long long)N * C * D, nd = (long long)N * D;
    const long long blk = epso_block_len(N, C, D, k0.use_c3), nr = (long long)N * R;
    T* buf = (T*)malloc(sizeof(T) * (size_t)(2 * ncd + 2 * (long long)N * C + 3 * nd + 2 * N + 4 * nr + (c_cos ? blk : 0) + 1));
    if (!buf) return 1;
    T *xc = buf, *vc_ = xc + ncd, *fc = vc_ + ncd, *vcv = fc + (long long)N * C, *x2 = vcv + (long long)N * C;
    T *v2 = x2 + nd, *pb2 = v2 + nd, *pf2 = pb2 + nd, *pv2 = pf2 + N, *zw = pv2 + N, *cw = zw + 4 * nr;
    T gb2[64];
    T* gbo = D <= 64 ? gb2 : (T*)malloc(sizeof(T) * (size_t)D);
    if (!gbo) { free(buf); return 1; }
    T s_key[1];
    int s_idx[1];
    long long nan_zero = 0, nan_dummy = 0;
    unsigned long long nans = 0;
    const T av = attr_v[0];
    const T on = ((av == av) && (av != T_INF) && (av != -T_INF)) ? (T)1 : (T)0;
    for (int k = 0; k < n_gen; ++k) {
        const u64 gbase = ((u64)(g0 + k) << 16);
        const u64 s1 = draw_stream(gbase, DRAW_R1, ctr0), s2 = draw_stream(gbase, DRAW_R2, ctr0);
        const u64 s3 = draw_stream(gbase, DRAW_R3, ctr0), scor = draw_stream(gbase, DRAW_COR, ctr0);
        const T* Lb = L + ((long long)k * n_isl + isl) * blk;
        const T* Cb = Cs + ((long long)k * n_isl + isl) * blk;
        if (c_cos) {  // C = cos((2 pi) u2) of every normal element, the draws of epso_host_draws
            const u64 ids[5] = {DRAW_NW, DRAW_NC1, DRAW_NC2, DRAW_NC3, DRAW_NG};
            long long o = 0;
            for (int d = 0; d < 5; ++d) {
                if (d == 3 && !k0.use_c3) continue;
                const long long m = d == 4 ? nr * D : nr;
                const u64 sb = draw_stream(gbase, ids[d] + ISLES_MAX_DRAWS, ctr0);
                for (long long e = 0; e < m; ++e)
                    cw[o + e] = t_cos(mul_rn(two_pi, unifT(isles_mix64((key ^ sb) + (u64)e * GOLDEN))));
                o += m;
            }
            Cb = cw;
        }
        // the normals z = sqrt(-2 L) C of the weights (N R each) and of b_g* (N R D)
        const long long nzw = nr * (k0.use_c3 ? 4 : 3);
        for (long long e = 0; e < nzw; ++e) zw[e] = mul_rn(t_sqrt(mul_rn((T)-2, Lb[e])), Cb[e]);
        const T* zg_l = Lb + nzw;
        const T* zg_c = Cb + nzw;
        const T wk = w[k];
        for (int n = 0; n < N; ++n) {
            const T* xr = x + (long long)n * D;
            const T* vr = vel + (long long)n * D;
            const T* pr = pb + (long long)n * D;
            for (int c = 0; c < C; ++c) {
                T ww = wk, w1 = k0.c1, w2 = k0.c2, w3 = k0.c3;
                const long long r = (long long)n * R + (c - 1);
                if (c > 0) {
                    ww = epso_mutate(wk, k0.sigma, zw[r]);
                    w1 = epso_mutate(k0.c1, k0.sigma, zw[nr + r]);
                    w2 = epso_mutate(k0.c2, k0.sigma, zw[2 * nr + r]);
                    if (k0.use_c3) w3 = epso_mutate(k0.c3, k0.sigma, zw[3 * nr + r]);
                }
                const long long row = (long long)n * C + c;
                for (int j = 0; j < D; ++j) {
                    const long long idx = row * D + j;
                    const u64 off = (u64)idx * GOLDEN;
                    const T lo = lower[j], hi = upper[j];
                    T bg = gb[j];
                    if (c > 0) {
                        const long long eg = r * D + j;
                        const T z = mul_rn(t_sqrt(mul_rn((T)-2, zg_l[eg])), zg_c[eg]);
                        bg = clip3(epso_mutate(bg, k0.sigma_g, z), lo, hi);
                    }
                    const T x0 = xr[j];
                    const T r1 = unifT(isles_mix64((key ^ s1) + off));
                    const T r2 = unifT(isles_mix64((key ^ s2) + off));
                    const T t1 = mul_rn(ww, vr[j]);
                    const T t2 = mul_rn(mul_rn(r1, w1), sub_rn(pr[j], x0));
                    const T t3 = mul_rn(mul_rn(r2, w2), sub_rn(bg, x0));
                    T v = add_rn(add_rn(t1, t2), t3);
                    if (k0.use_c3) {
                        const T r3 = unifT(isles_mix64((key ^ s3) + off));
                        v = add_rn(v, mul_rn(mul_rn(mul_rn(on, r3), w3), sub_rn(attr[j], x0)));
                    }
                    pso_finish(x0, v, lo, hi, vmax[k], k0.cor, k0.clamp, k0.mode, key, scor, off, xc + idx,
                               vc_ + idx);
                }
                nans += (unsigned long long)epso_eval_row(xc + row * D, D, np_order, fc + row, vcv + row);
            }
        }
        // selection and bests: pso.cu's bests_rows and bests_island on this island's arrays
        bests_rows(0, 1, xc, vc_, fc, vcv, C, pb, pf, pv, pb2, 1, x2, v2, D, nd);
        bests_island(0, 0, 1, s_key, s_idx, xc, fc, vcv, C, pb, pf, pv, gb, gf, gv, &nan_zero, &nan_zero, pf2, pv2,
                     gbo, gf, gv, &nan_dummy, N, D);
        memcpy(x, x2, sizeof(T) * (size_t)nd);
        memcpy(vel, v2, sizeof(T) * (size_t)nd);
        memcpy(pb, pb2, sizeof(T) * (size_t)nd);
        memcpy(pf, pf2, sizeof(T) * (size_t)N);
        memcpy(pv, pv2, sizeof(T) * (size_t)N);
        memcpy(gb, gbo, sizeof(T) * (size_t)D);
    }
    if (gbo != gb2) free(gbo);
    free(buf);
    *nan = nans;
    return 0;
}

// n_gen generations of every island, in place on the state's arrays (x, vel, pbest (I, N, D),
// pbest_f, pbest_v (I, N), gbest (I, D), gbest_f, gbest_v (I,)); attr (I, D), attr_v (I,): the
// attractor; the islands on n_threads OpenMP threads, each with its own scratch and NaN slot,
// summed in island order: any thread count gives the one-thread state bit for bit. 1: no memory.
int epso_host_epoch(const int n_threads, const int n_isl, T* x, T* vel, T* pb, T* pf, T* pv, T* gb, T* gf, T* gv,
                    const T* attr, const T* attr_v, const T* lower, const T* upper, const u64* keys, const u64 ctr0,
                    const long long g0, const int n_gen, const T* L, const T* Cs, const T* w, const T* vmax,
                    const T c1, const T c2, const T c3, const T sigma, const T sigma_g, const T cor, const int npart,
                    const int ncand, const int dim, const int clamp, const int mode, const int use_c3,
                    const int c_cos, const int np_order, const T two_pi, unsigned long long* nan_count) {
    unsigned long long* nans = (unsigned long long*)calloc((size_t)(n_isl > 0 ? n_isl : 1), sizeof(unsigned long long));
    if (!nans) return 1;
    const epso_coef k0 =
        epso_make_coef((T)0, (T)0, c1, c2, c3, sigma, sigma_g, (T)0, cor, npart, ncand, dim, clamp, mode, use_c3);
    const long long nd = (long long)npart * dim;
    int fail = 0;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1) reduction(| : fail)
    for (int b = 0; b < n_isl; ++b)
        fail |= epso_island(b, n_isl, x + b * nd, vel + b * nd, pb + b * nd, pf + (long long)b * npart,
                            pv + (long long)b * npart, gb + (long long)b * dim, gf + b, gv + b,
                            attr + (long long)b * dim, attr_v + b, lower, upper, keys[b], ctr0, g0, n_gen, L, Cs, w,
                            vmax, k0, c_cos, np_order, two_pi, &nans[b]);
    for (int b = 0; b < n_isl; ++b) *nan_count += nans[b];
    free(nans);
    return fail;
}
#endif
#endif  // ISLES_EPSO_HOST_CUH
