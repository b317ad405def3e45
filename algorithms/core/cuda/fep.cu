// fep.cu: the fused FEP/CEP/IFEP generation (algorithms/ep/cuda.py). Prepended by Python: the
// configuration FEP_N FEP_MU FEP_Q FEP_MUT FEP_BOUND FEP_IPB FEP_SBLOCK MAX_Q_HOST (PENALTY),
// MAX_DRAWS FEP_PI FEP_TWO_PI, the draw ids DRAW_CAUCHY DRAW_ETA_IND DRAW_ETA DRAW_BOUND DRAW_GAUSS
// DRAW_OPP DRAW_TIE of algorithms/ep/fep.py, objective.cuh and the problem's fused objective.
#include "bounds.cuh"
#include "fitness.cuh"
typedef unsigned long long fep_sz;
#define FEP_U (2 * FEP_MU)                        // union size
#define FEP_ITEMS ((FEP_N + 31) / 32)             // coordinates per lane
#if IS_F32
#define FEP_BIG 3.4028234663852886e38f
#else
#define FEP_BIG 1.7976931348623157e308
#endif

// The seeds of generation g's draws (CounterRNG: isles_mix64((g << 16) + draw)).
typedef struct { u64 cauchy, eta_i1, eta_i2, eta1, eta2, bound, gauss1, gauss2, opp, tie; } FepSeeds;
ISLES_DEV FepSeeds fep_seeds(long long g) {
    const u64 gb = ((u64)g) << 16;
    FepSeeds s;
    s.cauchy = isles_mix64(gb + DRAW_CAUCHY);
    s.eta_i1 = isles_mix64(gb + DRAW_ETA_IND);
    s.eta_i2 = isles_mix64(gb + DRAW_ETA_IND + MAX_DRAWS);
    s.eta1 = isles_mix64(gb + DRAW_ETA);
    s.eta2 = isles_mix64(gb + DRAW_ETA + MAX_DRAWS);
    s.bound = isles_mix64(gb + DRAW_BOUND);
    s.gauss1 = isles_mix64(gb + DRAW_GAUSS);
    s.gauss2 = isles_mix64(gb + DRAW_GAUSS + MAX_DRAWS);
    s.opp = isles_mix64(gb + DRAW_OPP);
    s.tie = isles_mix64(gb + DRAW_TIE);
    return s;
}

// CounterRNG.normal: sqrt(-2 log1p(-u1)) cos(2 pi u2), u1 from draw d, u2 from d + MAX_DRAWS
ISLES_DEV T fep_normal(u64 key, u64 s1, u64 s2, u64 idx) {
    const T u1 = unifT(draw_bits(key, s1, idx));
    const T u2 = unifT(draw_bits(key, s2, idx));
    return mul_rn(t_sqrt(mul_rn((T)-2.0, t_log1p(-u1))), t_cos(mul_rn((T)FEP_TWO_PI, u2)));
}
// algorithms/ep/fep.py cauchy: tan(pi (u - 1/2))
ISLES_DEV T fep_cauchy(u64 key, u64 s, u64 idx) {
    const T u = unifT(draw_bits(key, s, idx));
    return t_tan(mul_rn((T)FEP_PI, sub_rn(u, (T)0.5)));
}
// eta' = min(max(eta exp(tau' N_i + tau N_ij), eta_min), BIG)
ISLES_DEV T fep_eta(T e, T Ni, T Nij, T tau, T taup, T eta_min) {
    T r = mul_rn(e, t_exp(add_rn(mul_rn(taup, Ni), mul_rn(tau, Nij))));
    if (eta_min > (T)0 && r < eta_min) r = eta_min;
    return r > (T)FEP_BIG ? (T)FEP_BIG : r;
}
// x' = bound(clip(x + eta delta, -BIG, BIG)); bidx: the reinit draw's index
ISLES_DEV T fep_move(T x, T e, T d, T lo, T hi, u64 key, u64 s_bound, u64 bidx) {
    T v = add_rn(x, mul_rn(e, d));
    v = v > (T)FEP_BIG ? (T)FEP_BIG : (v < -(T)FEP_BIG ? -(T)FEP_BIG : v);
    return isles_bound(FEP_BOUND, v, lo, hi, key, s_bound, bidx);
}
// opponent t of union individual k: uniform over the other 2 mu - 1 (DRAW_OPP, index k q + t)
ISLES_DEV int fep_opponent(u64 key, u64 s_opp, int k, int t) {
    const double u = unif53(draw_bits(key, s_opp, (u64)k * FEP_Q + (u64)t));
    int c = (int)(u * (double)(FEP_U - 1));
    c = c < FEP_U - 2 ? c : FEP_U - 2;
    return c + (c >= k ? 1 : 0);
}
ISLES_DEV int fep_wins_of(u64 key, u64 s_opp, int k, const T* f, const T* v) {
    const T fk = f[k], vk = v[k];
    int w = 0;
    for (int t = 0; t < FEP_Q; ++t) {
        const int o = fep_opponent(key, s_opp, k, t);
        w += isles_better(f[o], v[o], fk, vk) ? 0 : 1;
    }
    return w;
}
// threshold of the histogram: t = the largest win count with #{w >= t} >= mu; need = mu - #{w > t};
// m = #{w == t}; s = the tie offset (DRAW_TIE, index 0)
typedef struct { int t, need, m, s; } FepCut;
ISLES_DEV FepCut fep_cut(const int* hist, u64 key, u64 s_tie) {
    FepCut c;
    int cum = 0, b = FEP_Q;
    while (b > 0 && cum + hist[b] < FEP_MU) { cum += hist[b]; --b; }
    c.t = b;
    c.m = hist[b];
    c.need = FEP_MU - cum;
    const double u = unif53(draw_bits(key, s_tie, 0ull));
    int s = (int)(u * (double)c.m);
    c.s = s < c.m - 1 ? s : c.m - 1;
    return c;
}
// a tied individual with tie number r survives iff (r - s) mod m < need
ISLES_DEV int fep_tie_keep(int r, FepCut c) {
    int d = r - c.s;
    if (d < 0) d += c.m;
    return d < c.need;
}

#ifdef ISLES_HOST_EMU
// ---- host emulation: the kernels' per-element code run sequentially (tests) ----------------
// objective of one row by lanes 0..31 in order (lane t holds coordinates t, t + 32, ...)
static void fep_eval_row(const T* x, T* fo, T* vo, int* bad) {
    T tot[OBJ_NACC], acc[OBJ_NACC];
    for (int t = 0; t < 32; ++t) {
        obj_init(acc);
        for (int k = 0; k < FEP_ITEMS; ++k) {
            const int j = t + 32 * k;
            if (j < FEP_N) {
#if OBJ_NEXT
                const T xn = j + 1 < FEP_N ? x[j + 1] : (T)0;
#else
                const T xn = (T)0;
#endif
                obj_term(acc, x[j], xn, j);
            }
        }
        if (t == 0) { for (int s = 0; s < OBJ_NACC; ++s) tot[s] = acc[s]; }
        else obj_merge(tot, acc);
    }
    T f = obj_final(tot, FEP_N);
#if OBJ_HAS_V
    T v = obj_violation(tot, FEP_N);
#else
    T v = (T)0;
#endif
    *bad = isles_fix_fv(&f, &v);
    *fo = f;
    *vo = v;
}

void fep_eval_host(const T* X, int rows, T* f, T* v, int* bad) {
    for (int r = 0; r < rows; ++r) fep_eval_row(X + (fep_sz)r * FEP_N, f + r, v + r, bad + r);
}

// fep_slot's contract, one thread doing the 32 lanes' work (lane unused): parent row p of union
// buffer A copied to B's row i, its offspring to B's row mu + i
static void fep_slot(const int lane, const int isl, const int i, const int p, const FepSeeds s, const u64 key,
                     const T* XA, const T* EA, const T* fA, const T* vA, T* XB, T* EB, T* fB, T* vB,
                     unsigned long long* nan_count, const T* lower, const T* upper, const T tau, const T taup,
                     const T eta_min)
{
    (void)lane;
    const fep_sz ubase = (fep_sz)isl * FEP_U;
    const fep_sz prow = (ubase + (fep_sz)p) * FEP_N, irow = (ubase + (fep_sz)i) * FEP_N;
    const fep_sz orow = (ubase + (fep_sz)(FEP_MU + i)) * FEP_N;
    T xc[FEP_N], xg[FEP_N];
    const T Ni = fep_normal(key, s.eta_i1, s.eta_i2, (u64)i);
    for (int j = 0; j < FEP_N; ++j) {
        const u64 idx = (u64)i * FEP_N + (u64)j;
        const T x = XA[prow + j], e = EA[prow + j];
        XB[irow + j] = x;
        EB[irow + j] = e;
        EB[orow + j] = fep_eta(e, Ni, fep_normal(key, s.eta1, s.eta2, idx), tau, taup, eta_min);
#if FEP_MUT != 1
        xc[j] = fep_move(x, e, fep_cauchy(key, s.cauchy, idx), lower[j], upper[j], key, s.bound, idx);
#endif
#if FEP_MUT == 1
        xg[j] = fep_move(x, e, fep_normal(key, s.gauss1, s.gauss2, idx), lower[j], upper[j], key, s.bound, idx);
#elif FEP_MUT == 2
        xg[j] = fep_move(x, e, fep_normal(key, s.gauss1, s.gauss2, idx), lower[j], upper[j], key, s.bound,
                         idx + (u64)FEP_MU * FEP_N);
#endif
    }
    T f, v;
    int bad;
#if FEP_MUT == 1
    fep_eval_row(xg, &f, &v, &bad);
    for (int j = 0; j < FEP_N; ++j) XB[orow + j] = xg[j];
#else
    fep_eval_row(xc, &f, &v, &bad);
    *nan_count += bad;
    int use_g = 0;
#if FEP_MUT == 2
    T f2, v2;
    fep_eval_row(xg, &f2, &v2, &bad);
    use_g = isles_better(f2, v2, f, v);
    if (use_g) { f = f2; v = v2; }
#endif
    for (int j = 0; j < FEP_N; ++j) XB[orow + j] = use_g ? xg[j] : xc[j];
#endif
#if FEP_MUT != 0
    *nan_count += bad;   // the Gaussian offspring's evaluation (CEP, IFEP)
#endif
    fB[ubase + i] = fA[ubase + p];
    vB[ubase + i] = vA[ubase + p];
    fB[ubase + FEP_MU + i] = f;
    vB[ubase + FEP_MU + i] = v;
}

// fep_select_block's contract in one thread (sh, cut, tid, nthreads unused): the histogram of the
// win counts w (2 mu) in hist (q + 1), the threshold, the tie rule in the order of k -> out (mu)
static void fep_select_block(const int* w, int* out, int* hist, int* sh, FepCut* cut, const u64 key,
                             const u64 s_tie, const int tid, const int nthreads)
{
    (void)sh; (void)cut; (void)tid; (void)nthreads;
    for (int b = 0; b <= FEP_Q; ++b) hist[b] = 0;
    for (int k = 0; k < FEP_U; ++k) hist[w[k]] += 1;
    const FepCut c = fep_cut(hist, key, s_tie);
    int r = 0, slot = 0;
    for (int k = 0; k < FEP_U; ++k) {
        int keep = w[k] > c.t;
        if (w[k] == c.t) { keep = fep_tie_keep(r, c); ++r; }
        if (keep) out[slot++] = k;
    }
}

// fep_generate on the host: every island's parent slots, union buffer A -> B (parents src, or
// rows 0..mu-1 without use_src)
void fep_generate_host(const T* XA, const T* EA, const T* fA, const T* vA, const int* src, int use_src,
                       T* XB, T* EB, T* fB, T* vB, const u64* keys, long long g, int n_islands, const T* lower,
                       const T* upper, T tau, T taup, T eta_min, unsigned long long* nan_count) {
    const FepSeeds s = fep_seeds(g);
    for (int isl = 0; isl < n_islands; ++isl)
        for (int i = 0; i < FEP_MU; ++i)
            fep_slot(0, isl, i, use_src ? src[(fep_sz)isl * FEP_MU + i] : i, s, keys[isl], XA, EA, fA, vA, XB, EB,
                     fB, vB, nan_count, lower, upper, tau, taup, eta_min);
}

// wins and survivors of every island: f, v (I, 2 mu) -> wins (I, 2 mu), src (I, mu)
void fep_select_host(const T* f, const T* v, int* wins, int* src, const u64* keys, long long g, int n_islands) {
    const FepSeeds s = fep_seeds(g);
    static int hist[MAX_Q_HOST + 1];
    for (int isl = 0; isl < n_islands; ++isl) {
        int* wi = wins + (fep_sz)isl * FEP_U;
        for (int k = 0; k < FEP_U; ++k)
            wi[k] = fep_wins_of(keys[isl], s.opp, k, f + (fep_sz)isl * FEP_U, v + (fep_sz)isl * FEP_U);
        fep_select_block(wi, src + (fep_sz)isl * FEP_MU, hist, 0, 0, keys[isl], s.tie, 0, 1);
    }
}

#else
// ---- CUDA kernels --------------------------------------------------------------------------
#include "reduce.cuh"

// The body of one parent slot i of island isl (one warp; lane = its lane): parent row p of union
// buffer A copied to B's row i, its offspring to B's row mu + i (module docstring). Shared by
// fep_generate (one warp per slot) and fep_epoch.cu (the block's warps over the island's slots); no
// __restrict__ here: the epoch kernel writes in later generations what it reads now.
ISLES_DEV void fep_slot(const int lane, const int isl, const int i, const int p, const FepSeeds s, const u64 key,
                        const T* XA, const T* EA, const T* fA, const T* vA, T* XB, T* EB, T* fB, T* vB,
                        unsigned long long* nan_count, const T* lower, const T* upper, const T tau,
                        const T taup, const T eta_min)
{
    const fep_sz ubase = (fep_sz)isl * FEP_U;
    const fep_sz prow = (ubase + (fep_sz)p) * FEP_N, irow = (ubase + (fep_sz)i) * FEP_N;
    const fep_sz orow = (ubase + (fep_sz)(FEP_MU + i)) * FEP_N;
    const T Ni = fep_normal(key, s.eta_i1, s.eta_i2, (u64)i);
    T xc[FEP_ITEMS], xg[FEP_ITEMS];
    T acc[OBJ_NACC], acc2[OBJ_NACC];
    obj_init(acc);
    obj_init(acc2);
#pragma unroll
    for (int k = 0; k < FEP_ITEMS; ++k) {
        const int j = lane + 32 * k;
        xc[k] = (T)0; xg[k] = (T)0;
        if (j < FEP_N) {
            const u64 idx = (u64)i * FEP_N + (u64)j;
            const T x = XA[prow + j], e = EA[prow + j];
            XB[irow + j] = x;
            EB[irow + j] = e;
            EB[orow + j] = fep_eta(e, Ni, fep_normal(key, s.eta1, s.eta2, idx), tau, taup, eta_min);
            const T lo = lower[j], hi = upper[j];
#if FEP_MUT != 1
            xc[k] = fep_move(x, e, fep_cauchy(key, s.cauchy, idx), lo, hi, key, s.bound, idx);
#endif
#if FEP_MUT == 1
            xg[k] = fep_move(x, e, fep_normal(key, s.gauss1, s.gauss2, idx), lo, hi, key, s.bound, idx);
#elif FEP_MUT == 2
            xg[k] = fep_move(x, e, fep_normal(key, s.gauss1, s.gauss2, idx), lo, hi, key, s.bound,
                             idx + (u64)FEP_MU * FEP_N);
#endif
        }
    }
    // objective(s): obj_term per coordinate, x_next from lane + 1 (lane 31: lane 0's next item)
#pragma unroll
    for (int k = 0; k < FEP_ITEMS; ++k) {
        const int j = lane + 32 * k;
#if OBJ_NEXT
        T n1 = __shfl_down_sync(FULL_MASK, xc[k], 1);
        T n2 = __shfl_down_sync(FULL_MASK, xg[k], 1);
        const T w1 = __shfl_sync(FULL_MASK, k + 1 < FEP_ITEMS ? xc[k + 1 < FEP_ITEMS ? k + 1 : k] : (T)0, 0);
        const T w2 = __shfl_sync(FULL_MASK, k + 1 < FEP_ITEMS ? xg[k + 1 < FEP_ITEMS ? k + 1 : k] : (T)0, 0);
        if (lane == 31) { n1 = w1; n2 = w2; }
#else
        const T n1 = (T)0, n2 = (T)0;
#endif
        if (j < FEP_N) {
#if FEP_MUT != 1
            obj_term(acc, xc[k], n1, j);
#endif
#if FEP_MUT != 0
            obj_term(acc2, xg[k], n2, j);
#endif
        }
        (void)n1; (void)n2;
    }
#if FEP_MUT != 1
    isles_warp_merge(acc, FULL_MASK, 32);
#endif
#if FEP_MUT != 0
    isles_warp_merge(acc2, FULL_MASK, 32);
#endif
    T f = (T)0, v = (T)0;
    int bad = 0, use_g = 0;
#if FEP_MUT != 1
    f = obj_final(acc, FEP_N);
#if OBJ_HAS_V
    v = obj_violation(acc, FEP_N);
#endif
    bad += isles_fix_fv(&f, &v);
#endif
#if FEP_MUT != 0
    T f2 = obj_final(acc2, FEP_N), v2 = (T)0;
#if OBJ_HAS_V
    v2 = obj_violation(acc2, FEP_N);
#endif
    bad += isles_fix_fv(&f2, &v2);
    use_g = FEP_MUT == 1 ? 1 : isles_better(f2, v2, f, v);
    if (use_g) { f = f2; v = v2; }
#endif
#pragma unroll
    for (int k = 0; k < FEP_ITEMS; ++k) {
        const int j = lane + 32 * k;
        if (j < FEP_N) XB[orow + j] = use_g ? xg[k] : xc[k];
    }
    if (lane == 0) {
        fB[ubase + i] = fA[ubase + p];
        vB[ubase + i] = vA[ubase + p];
        fB[ubase + FEP_MU + i] = f;
        vB[ubase + FEP_MU + i] = v;
        if (bad) atomicAdd(nan_count, (unsigned long long)bad);
    }
}

// One warp per parent slot: parent copy A[src[i]] -> B[i], offspring -> B[mu + i] (module docstring).
extern "C" __global__ void __launch_bounds__(32 * FEP_IPB)
fep_generate(const T* __restrict__ XA, const T* __restrict__ EA, const T* __restrict__ fA,
             const T* __restrict__ vA, const int* __restrict__ src, const int use_src,
             T* __restrict__ XB, T* __restrict__ EB, T* __restrict__ fB, T* __restrict__ vB,
             const u64* __restrict__ keys, const long long* __restrict__ gen_dev, const long long gen_off,
             const u64* __restrict__ rng_ctr, unsigned long long* __restrict__ nan_count, const int total,
             const T* __restrict__ lower, const T* __restrict__ upper, const T tau, const T taup,
             const T eta_min)
{
    const int gind = blockIdx.x * FEP_IPB + (threadIdx.x >> 5);
    if (gind >= total) return;   // whole warps
    const int isl = gind / FEP_MU, i = gind - isl * FEP_MU;
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    fep_slot(threadIdx.x & 31, isl, i, use_src ? src[gind] : i, fep_seeds(g), keys[isl], XA, EA, fA, vA,
             XB, EB, fB, vB, nan_count, lower, upper, tau, taup, eta_min);
}

// One thread per union individual: its win count.
extern "C" __global__ void fep_wins(const T* __restrict__ f, const T* __restrict__ v, int* __restrict__ wins,
                                   const u64* __restrict__ keys, const long long* __restrict__ gen_dev,
                                   const long long gen_off, const u64* __restrict__ rng_ctr, const int total)
{
    const int gk = blockIdx.x * blockDim.x + threadIdx.x;
    if (gk >= total) return;
    const int isl = gk / FEP_U, k = gk - isl * FEP_U;
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    const FepSeeds s = fep_seeds(g);
    wins[gk] = fep_wins_of(keys[isl], s.opp, k, f + (fep_sz)isl * FEP_U, v + (fep_sz)isl * FEP_U);
}

// exclusive prefix sum over the block (threads tid of nthreads, whole warps, at most 1024); *total
// gets the block's sum
ISLES_DEV int fep_block_scan(int x, int* sh, int* total, const int tid, const int nthreads) {
    const int lane = tid & 31, wid = tid >> 5, nw = nthreads / 32;
    int y = x;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int z = __shfl_up_sync(FULL_MASK, y, o);
        if (lane >= o) y += z;
    }
    if (lane == 31) sh[wid] = y;
    __syncthreads();
    if (wid == 0) {
        int a = lane < nw ? sh[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int z = __shfl_up_sync(FULL_MASK, a, o);
            if (lane >= o) a += z;
        }
        sh[32 + lane] = a;   // inclusive warp sums
    }
    __syncthreads();
    const int before = (wid > 0 ? sh[32 + wid - 1] : 0) + y - x;
    *total = sh[32 + nw - 1];
    __syncthreads();
    return before;
}

// The selection of one island by a block (threads tid of nthreads, whole warps): the histogram of
// the win counts w (2 mu) in hist (q + 1, shared), the threshold and tie offset (thread 0, into
// *cut, shared), two block-wide prefix sums over contiguous chunks (tie numbers, survivor slots)
// and the survivors' positions out (mu). Shared by fep_select and fep_epoch.cu; the survivors do
// not depend on nthreads (the rule numbers ties and slots in the order of k).
ISLES_DEV void fep_select_block(const int* w, int* out, int* hist, int* sh, FepCut* cut, const u64 key,
                                const u64 s_tie, const int tid, const int nthreads)
{
    const int chunk = (FEP_U + nthreads - 1) / nthreads;
    const int k0 = tid * chunk < FEP_U ? tid * chunk : FEP_U;
    const int k1 = k0 + chunk < FEP_U ? k0 + chunk : FEP_U;
    for (int b = tid; b <= FEP_Q; b += nthreads) hist[b] = 0;
    __syncthreads();
#if FEP_Q < 32
    {
        int h[FEP_Q + 1];
#pragma unroll
        for (int b = 0; b <= FEP_Q; ++b) h[b] = 0;
        for (int k = k0; k < k1; ++k) {
            const int x = w[k];
#pragma unroll
            for (int b = 0; b <= FEP_Q; ++b) h[b] += (x == b);
        }
#pragma unroll
        for (int b = 0; b <= FEP_Q; ++b) {
            int y = h[b];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) y += __shfl_xor_sync(FULL_MASK, y, o);
            if ((tid & 31) == 0 && y) atomicAdd(&hist[b], y);
        }
    }
#else
    for (int k = k0; k < k1; ++k) atomicAdd(&hist[w[k]], 1);
#endif
    __syncthreads();
    if (tid == 0) *cut = fep_cut(hist, key, s_tie);
    __syncthreads();
    const FepCut c = *cut;
    int nt = 0;
    for (int k = k0; k < k1; ++k) nt += (w[k] == c.t);
    int tot;
    int r = fep_block_scan(nt, sh, &tot, tid, nthreads);
    int ns = 0;
    for (int k = k0; k < k1; ++k) {
        const int x = w[k];
        if (x > c.t) ++ns;
        else if (x == c.t) { ns += fep_tie_keep(r, c); ++r; }
    }
    int slot = fep_block_scan(ns, sh, &tot, tid, nthreads);
    r -= nt;
    for (int k = k0; k < k1; ++k) {
        const int x = w[k];
        int keep = x > c.t;
        if (x == c.t) { keep = fep_tie_keep(r, c); ++r; }
        if (keep) out[slot++] = k;
    }
}

// One block per island: histogram, threshold, tie numbers, survivor slots -> src (I, mu).
extern "C" __global__ void __launch_bounds__(FEP_SBLOCK)
fep_select(const int* __restrict__ wins, int* __restrict__ src, const u64* __restrict__ keys,
           const long long* __restrict__ gen_dev, const long long gen_off, const u64* __restrict__ rng_ctr)
{
    extern __shared__ int hist[];            // FEP_Q + 1
    __shared__ int sh[64];
    __shared__ FepCut cut;
    const int isl = blockIdx.x;
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    fep_select_block(wins + (fep_sz)isl * FEP_U, src + (fep_sz)isl * FEP_MU, hist, sh, &cut, keys[isl],
                     fep_seeds(g).tie, threadIdx.x, FEP_SBLOCK);
}

// Objective of `rows` rows (the generation kernel's code without the NaN rule; self-check).
extern "C" __global__ void __launch_bounds__(32 * FEP_IPB)
fep_eval_rows(const T* __restrict__ X, T* __restrict__ fo, T* __restrict__ vo, const int rows)
{
    const int lane = threadIdx.x & 31;
    const int gind = blockIdx.x * FEP_IPB + (threadIdx.x >> 5);
    if (gind >= rows) return;
    T x[FEP_ITEMS];
    T acc[OBJ_NACC];
    obj_init(acc);
#pragma unroll
    for (int k = 0; k < FEP_ITEMS; ++k) {
        const int j = lane + 32 * k;
        x[k] = j < FEP_N ? X[(fep_sz)gind * FEP_N + j] : (T)0;
    }
#pragma unroll
    for (int k = 0; k < FEP_ITEMS; ++k) {
        const int j = lane + 32 * k;
#if OBJ_NEXT
        T n1 = __shfl_down_sync(FULL_MASK, x[k], 1);
        const T w1 = __shfl_sync(FULL_MASK, k + 1 < FEP_ITEMS ? x[k + 1 < FEP_ITEMS ? k + 1 : k] : (T)0, 0);
        if (lane == 31) n1 = w1;
#else
        const T n1 = (T)0;
#endif
        if (j < FEP_N) obj_term(acc, x[k], n1, j);
    }
    isles_warp_merge(acc, FULL_MASK, 32);
    if (lane == 0) {
        fo[gind] = obj_final(acc, FEP_N);
#if OBJ_HAS_V
        vo[gind] = obj_violation(acc, FEP_N);
#else
        vo[gind] = (T)0;
#endif
    }
}

#endif  // ISLES_HOST_EMU
