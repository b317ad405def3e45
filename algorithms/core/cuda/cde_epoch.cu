// cde_epoch.cu: the epoch kernel of the co-evolutionary DE (algorithms/coevolution/epoch.py). One
// thread block per island runs whole cycles of seed 000's Algorithm 1 (refresh x, CDE_GX DE
// generations of x, refresh y, CDE_GY generations of y) in one launch, synchronising within the
// block between steps. Preceded by the configuration (IS_F32 XOVER BOUND PAY_DX PAY_DY CDE_NX
// CDE_NY CDE_GX CDE_GY CDE_NT CDE_SMEM_ROWS CDE_STRIDE), the draw ids of algorithms/de,
// objective.cuh, de.cu (decide_n, trial_coord_n: the DE's own draws), and the problem's pair_cuda
// (PAY_KX PAY_KY pay_pair) and pair_terms_cuda (pay_terms_x pay_terms_y PAY_TRUE pay_true).
//
// Block work is written as strided loops over the thread index (for e = CDE_TID; e < work;
// e += CDE_NTHR) between BLOCK_SYNC()s (block.cuh), so that under -DISLES_HOST_EMU the same body runs as C
// with one thread per block (the CI emulation). Values equal the array path's
// (algorithms/coevolution/cde.py) to rounding: trial rows bit for bit (decide_n/trial_coord_n),
// max/min exact, the terms summed left to right.
#include "deb.cuh"
#include "block.cuh"

#define CDE_NMAX (CDE_NX > CDE_NY ? CDE_NX : CDE_NY)
// a row's terms in parts (the term contract's optional PAY_TX_PARTS / PAY_TY_PARTS), spread over threads
#ifdef PAY_TX_PARTS
#define CDE_TERMS_X(x, tx, p) pay_terms_x_part((x), (tx), (p))
#else
#define PAY_TX_PARTS 1
#define CDE_TERMS_X(x, tx, p) pay_terms_x((x), (tx))
#endif
#ifdef PAY_TY_PARTS
#define CDE_TERMS_Y(y, ty, p) pay_terms_y_part((y), (ty), (p))
#else
#define PAY_TY_PARTS 1
#define CDE_TERMS_Y(y, ty, p) pay_terms_y((y), (ty))
#endif

// terms rows in shared memory: an odd stride, so that lanes reading different rows hit different banks
#define CDE_KXP (PAY_KX | 1)
#define CDE_KYP (PAY_KY | 1)
#define CDE_KMAX (CDE_KXP > CDE_KYP ? CDE_KXP : CDE_KYP)
#define CDE_RX (CDE_NX * PAY_DX)
#define CDE_RY (CDE_NY * PAY_DY)
#define CDE_RMAX (CDE_RX > CDE_RY ? CDE_RX : CDE_RY)
#define CDE_PART (CDE_NT > CDE_NMAX ? CDE_NT : CDE_NMAX)

#ifdef ISLES_HOST_EMU
#define CDE_ARCH_LANES 1
#define CDE_TID 0
#define CDE_NTHR 1
#else
#define CDE_ARCH_LANES 32
#define CDE_TID ((int)threadIdx.x)
#define CDE_NTHR CDE_NT
#endif

// the block's shared arrays (carved from one dynamic shared allocation, cde_carve)
typedef struct CdeShared {
    T *tx, *ty, *tu;            // terms of x (NX, KXP), y (NY, KYP), the trials (NMAX, KMAX)
    T *fx, *fy, *fu;            // fitness of x (max_y L), of y (-min_x L), of the trials
    T *part;                    // partial max/min of the pair reduction (CDE_PART)
    T *tf, *tv;                 // objective and violation of the x trials (PAY_TRUE)
    T *lox, *upx, *loy, *upy;   // the boxes
    T *bx, *bfv;                // the archive: best x, (bf, bv)
    int *pnan, *acc, *misc;     // NaN seen per partial, trial accepted, misc[0] NaN count, misc[1] row to archive
    Decisions* dec;             // per-individual DE decisions
    T *rows_a, *rows_u;         // the active population and its trials (CDE_SMEM_ROWS)
} CdeShared;

ISLES_DEV unsigned char* cde_take(unsigned char** p, unsigned long long bytes) {
    unsigned char* q = *p;
    *p += (bytes + 15ull) & ~15ull;
    return q;
}

// carve the shared arrays from `base`; returns the bytes used (epoch.py: smem_bytes mirrors it)
ISLES_DEV unsigned long long cde_carve(unsigned char* base, CdeShared* s) {
    unsigned char* p = base;
    const unsigned long long t = sizeof(T);
    s->tx = (T*)cde_take(&p, t * CDE_NX * CDE_KXP);
    s->ty = (T*)cde_take(&p, t * CDE_NY * CDE_KYP);
    s->tu = (T*)cde_take(&p, t * CDE_NMAX * CDE_KMAX);
    s->fx = (T*)cde_take(&p, t * CDE_NX);
    s->fy = (T*)cde_take(&p, t * CDE_NY);
    s->fu = (T*)cde_take(&p, t * CDE_NMAX);
    s->part = (T*)cde_take(&p, t * CDE_PART);
    s->tf = (T*)cde_take(&p, t * CDE_NX);
    s->tv = (T*)cde_take(&p, t * CDE_NX);
    s->lox = (T*)cde_take(&p, t * PAY_DX);
    s->upx = (T*)cde_take(&p, t * PAY_DX);
    s->loy = (T*)cde_take(&p, t * PAY_DY);
    s->upy = (T*)cde_take(&p, t * PAY_DY);
    s->bx = (T*)cde_take(&p, t * PAY_DX);
    s->bfv = (T*)cde_take(&p, t * 2);
    s->pnan = (int*)cde_take(&p, sizeof(int) * CDE_PART);
    s->acc = (int*)cde_take(&p, sizeof(int) * CDE_NMAX);
    s->misc = (int*)cde_take(&p, sizeof(int) * 4);
    s->dec = (Decisions*)cde_take(&p, sizeof(Decisions) * CDE_NMAX);
#if CDE_SMEM_ROWS
    s->rows_a = (T*)cde_take(&p, t * CDE_RMAX);
    s->rows_u = (T*)cde_take(&p, t * CDE_RMAX);
#else
    s->rows_a = (T*)0;
    s->rows_u = (T*)0;
#endif
    return (unsigned long long)(p - base);
}

#if PAY_TRUE
// The archive (x phase, PAY_TRUE): the best trial under Deb's rules (problems/constraints.py
// argbest: least violation, then least f among those, first index; an all-inf key gives row 0),
// taken when strictly better than the archive (better). Run by warp 0 (lanes scan strided rows,
// then shuffle-reduce (v) and (key, index)); under the host emulation by one thread, in order.
// Sets misc[1] = the row to copy, or -1. First the trials' (f, v) by pay_true (tf, tv).
ISLES_DEV void cde_archive(CdeShared* s, int lane) {
    for (int i = lane; i < CDE_NX; i += CDE_ARCH_LANES) {   // the trials' objective and violation
        T tf, tv;
        pay_true(s->tu + i * CDE_KXP, &tf, &tv);
        s->tv[i] = tv != tv ? T_INF : tv;   // the Evaluator's NaN rule
        s->tf[i] = tf != tf ? T_INF : tf;
    }
#ifndef ISLES_HOST_EMU
    __syncwarp();
#endif
#ifdef ISLES_HOST_EMU
    T vmin = s->tv[0];
    for (int i = 1; i < CDE_NX; ++i) vmin = s->tv[i] < vmin ? s->tv[i] : vmin;
    int bi = 0;
    T kbest = s->tv[0] == vmin ? s->tf[0] : T_INF;
    for (int i = 1; i < CDE_NX; ++i) {
        const T key = s->tv[i] == vmin ? s->tf[i] : T_INF;
        if (key < kbest) { kbest = key; bi = i; }
    }
#else
    T vmin = T_INF;
    for (int i = lane; i < CDE_NX; i += 32) vmin = s->tv[i] < vmin ? s->tv[i] : vmin;
    for (int o = 16; o > 0; o >>= 1) {
        const T w = __shfl_xor_sync(0xffffffffu, vmin, o);
        vmin = w < vmin ? w : vmin;
    }
    int bi = CDE_NX;   // no row yet
    T kbest = T_INF;
    for (int i = lane; i < CDE_NX; i += 32) {
        const T key = s->tv[i] == vmin ? s->tf[i] : T_INF;
        if (bi == CDE_NX || key < kbest) { kbest = key; bi = i; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const T k2 = __shfl_xor_sync(0xffffffffu, kbest, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
        if (k2 < kbest || (k2 == kbest && i2 < bi) || (bi == CDE_NX && i2 < CDE_NX)) { kbest = k2; bi = i2; }
    }
    if (lane != 0) return;
#endif
    const T cf = s->tf[bi], cv = s->tv[bi];
    if (ISLES_BETTER(cf, cv, s->bfv[0], s->bfv[1])) {
        s->bfv[0] = cf;
        s->bfv[1] = cv;
        s->misc[1] = bi;
    } else {
        s->misc[1] = -1;
    }
}
#else
#define cde_archive(s, lane) ((void)0)
#endif

// Lanes per output of the pair reduction: a power of two <= 32 and <= CDE_NT / nout (1 on the host).
#ifdef ISLES_HOST_EMU
#define CDE_LANES(nout) 1
#else
#define CDE_LANES(nout) ((CDE_NT / (nout)) >= 32 ? 32 : (CDE_NT / (nout)) >= 16 ? 16 : (CDE_NT / (nout)) >= 8 ? 8 : \
                         (CDE_NT / (nout)) >= 4 ? 4 : (CDE_NT / (nout)) >= 2 ? 2 : 1)
#endif

// Fitness from the pair payoffs (CDE.pair_fitness): role 0: out[k] = max_j pay(tx_k, ty_j) over the
// CDE_NY y rows; role 1: out[k] = -min_i pay(tx_i, ty_k) over the CDE_NX x rows. A group of
// CDE_LANES lanes (of one warp) per output splits the other population and merges by shuffles
// (max/min are exact: any split gives the same value). A NaN payoff gives +inf and counts once
// per output (misc[0]). With F (a generation), acc[k] = the trial is not strictly worse than the
// target (select: v = 0 on both sides). With `archive`, warp 0 first updates the archive from the
// x trials. The caller synchronises after.
ISLES_DEV void cde_fit(CdeShared* s, int role, const T* tx, const T* ty, T* out, const T* F, int archive) {
    const int nout = role == 0 ? CDE_NX : CDE_NY;
    const int nin = role == 0 ? CDE_NY : CDE_NX;
    const int S = role == 0 ? CDE_LANES(CDE_NX) : CDE_LANES(CDE_NY);
    const int per_pass = CDE_NTHR / S;
    if (archive && CDE_TID < 32) cde_archive(s, CDE_TID);
    for (int base = 0; base < nout; base += per_pass) {   // the same trip count in every thread
        const int k = base + CDE_TID / S, q = CDE_TID % S;
        T best = role == 0 ? -T_INF : T_INF;
        int seen = 0;
        if (k < nout) {
            for (int j = q; j < nin; j += S) {
                const T v = role == 0 ? pay_pair(tx + k * CDE_KXP, ty + j * CDE_KYP)
                                      : pay_pair(tx + j * CDE_KXP, ty + k * CDE_KYP);
                if (v != v) seen = 1;
                else if (role == 0 ? v > best : v < best) best = v;
            }
        }
#ifndef ISLES_HOST_EMU
        for (int o = S / 2; o > 0; o >>= 1) {
            const T b = __shfl_xor_sync(0xffffffffu, best, o);
            seen |= __shfl_xor_sync(0xffffffffu, seen, o);
            if (role == 0 ? b > best : b < best) best = b;
        }
#endif
        if (k < nout && q == 0) {
            const T v = seen ? T_INF : (role == 0 ? best : -best);
            if (seen) ISLES_ATOMIC_ADD(&s->misc[0], 1);
            out[k] = v;
            if (F) s->acc[k] = !(F[k] < v);
        }
    }
}

// Decisions of every individual of population `role` for the DE generation at draw counter g.
ISLES_DEV void cde_decide(CdeShared* s, int role, long long g, u64 key, double log_cr, int cr_case) {
    const int n = role == 0 ? CDE_NX : CDE_NY;
    const int dim = role == 0 ? PAY_DX : PAY_DY;
    for (int i = CDE_TID; i < n; i += CDE_NTHR) s->dec[i] = decide_n(key, g, i, n, dim, log_cr, cr_case);
}

// One DE generation of population `role` (0: x against the frozen y terms, 1: y against the frozen
// x terms) whose decisions are in s->dec (DE.trial, CDE._evolve, select); then the decisions of the
// next generation, at draw counter g_next, when `next`. A: the rows, AU: the trial rows. Four
// block synchronisations.
ISLES_DEV void cde_generation(CdeShared* s, int role, T* A, T* AU, u64 key, T Fw, T CRt, double log_cr,
                              int cr_case, int next, long long g_next) {
    const int n = role == 0 ? CDE_NX : CDE_NY;
    const int dim = role == 0 ? PAY_DX : PAY_DY;
    const int kk = role == 0 ? PAY_KX : PAY_KY;
    const int kp = role == 0 ? CDE_KXP : CDE_KYP;
    const T* lo = role == 0 ? s->lox : s->loy;
    const T* up = role == 0 ? s->upx : s->upy;
    T* TA = role == 0 ? s->tx : s->ty;
    T* F = role == 0 ? s->fx : s->fy;
    for (int e = CDE_TID; e < n * dim; e += CDE_NTHR) {
        const int i = e / dim, j = e - i * dim;
        AU[e] = trial_coord_n(A, 0, &s->dec[i], key, i, j, A[e], Fw, CRt, lo, up, dim);
    }
    BLOCK_SYNC();
    if (role == 0) {
        for (int e = CDE_TID; e < n * PAY_TX_PARTS; e += CDE_NTHR) {
            const int i = e / PAY_TX_PARTS;
            CDE_TERMS_X(AU + i * PAY_DX, s->tu + i * CDE_KXP, e - i * PAY_TX_PARTS);
        }
    } else {
        for (int e = CDE_TID; e < n * PAY_TY_PARTS; e += CDE_NTHR) {
            const int i = e / PAY_TY_PARTS;
            CDE_TERMS_Y(AU + i * PAY_DY, s->tu + i * CDE_KYP, e - i * PAY_TY_PARTS);
        }
    }
    BLOCK_SYNC();
    if (role == 0) cde_fit(s, 0, s->tu, s->ty, s->fu, F, PAY_TRUE);
    else cde_fit(s, 1, s->tx, s->tu, s->fu, F, 0);
    BLOCK_SYNC();
#if PAY_TRUE
    if (role == 0 && s->misc[1] >= 0) {
        const int bi = s->misc[1];
        for (int j = CDE_TID; j < PAY_DX; j += CDE_NTHR) s->bx[j] = AU[bi * PAY_DX + j];
    }
#endif
    for (int e = CDE_TID; e < n * dim; e += CDE_NTHR) {
        if (s->acc[e / dim]) A[e] = AU[e];
    }
    for (int i = CDE_TID; i < n; i += CDE_NTHR) {
        if (s->acc[i]) {
            F[i] = s->fu[i];
            for (int q = 0; q < kk; ++q) TA[i * kp + q] = s->tu[i * kp + q];
        }
    }
    if (next) cde_decide(s, role, g_next, key, log_cr, cr_case);
    BLOCK_SYNC();
}

#define CDE_PARAMS T* X, T* FXg, T* Y, T* FYg, T* BX, T* BF, T* BV, T* scratch_u, const u64* keys, \
    const T* lox, const T* upx, const T* loy, const T* upy, const long long gen, const u64* rng_ctr, \
    const int n_cycles, unsigned long long* nan_count, const T Fw, const T CRt, const double log_cr, \
    const int cr_case
#define CDE_ARGS X, FXg, Y, FYg, BX, BF, BV, scratch_u, keys, lox, upx, loy, upy, gen, rng_ctr, n_cycles, \
    nan_count, Fw, CRt, log_cr, cr_case

// `n_cycles` cycles of island `isl` (CDE.step each), in place on its rows X (NX, DX), Y (NY, DY),
// fitness FX, FY and archive BX, BF, BV. Draws: DE generation k of cycle c at counter
// 1 + gen + c + k * CDE_STRIDE + rng_ctr[0] (CDE's COUNTER_STRIDE).
ISLES_DEV void cde_block(int isl, unsigned char* smem, CDE_PARAMS) {
    CdeShared sh;
    CdeShared* s = &sh;
    cde_carve(smem, s);
    const int t = CDE_TID;
    const u64 key = keys[isl];
    T* Xg = X + (isz)isl * CDE_RX;
    T* Yg = Y + (isz)isl * CDE_RY;
    T* fxg = FXg + (isz)isl * CDE_NX;
    T* fyg = FYg + (isz)isl * CDE_NY;
#if CDE_SMEM_ROWS
    T* AU = s->rows_u;
#else
    T* AU = scratch_u + (isz)isl * CDE_RMAX;
#endif
    for (int j = t; j < PAY_DX; j += CDE_NTHR) { s->lox[j] = lox[j]; s->upx[j] = upx[j]; }
    for (int j = t; j < PAY_DY; j += CDE_NTHR) { s->loy[j] = loy[j]; s->upy[j] = upy[j]; }
#if PAY_TRUE
    for (int j = t; j < PAY_DX; j += CDE_NTHR) s->bx[j] = BX[(isz)isl * PAY_DX + j];
#endif
    if (t == 0) {
#if PAY_TRUE
        s->bfv[0] = BF[isl];
        s->bfv[1] = BV[isl];
#endif
        s->misc[0] = 0;
        s->misc[1] = -1;
    }
    const long long ctr = (long long)rng_ctr[0];
    BLOCK_SYNC();
    for (int c = 0; c < n_cycles; ++c) {
        const long long g0 = 1 + gen + c + ctr;
        // -- x phase: refresh x against the current y, then CDE_GX generations of x
#if CDE_SMEM_ROWS
        T* A = s->rows_a;
        for (int e = t; e < CDE_RX; e += CDE_NTHR) A[e] = Xg[e];
#else
        T* A = Xg;
#endif
        for (int j = t; j < CDE_NY; j += CDE_NTHR) pay_terms_y(Yg + j * PAY_DY, s->ty + j * CDE_KYP);
        cde_decide(s, 0, g0, key, log_cr, cr_case);
        BLOCK_SYNC();
        for (int i = t; i < CDE_NX; i += CDE_NTHR) pay_terms_x(A + i * PAY_DX, s->tx + i * CDE_KXP);
        BLOCK_SYNC();
        cde_fit(s, 0, s->tx, s->ty, s->fx, (const T*)0, 0);
        BLOCK_SYNC();
        for (int k = 0; k < CDE_GX; ++k)
            cde_generation(s, 0, A, AU, key, Fw, CRt, log_cr, cr_case, k + 1 < CDE_GX,
                           g0 + (long long)(k + 1) * CDE_STRIDE);
#if CDE_SMEM_ROWS
        for (int e = t; e < CDE_RX; e += CDE_NTHR) Xg[e] = A[e];
#endif
        for (int i = t; i < CDE_NX; i += CDE_NTHR) fxg[i] = s->fx[i];
        // -- y phase: refresh y against the new x, then CDE_GY generations of y
        cde_fit(s, 1, s->tx, s->ty, s->fy, (const T*)0, 0);
        cde_decide(s, 1, g0 + (long long)CDE_GX * CDE_STRIDE, key, log_cr, cr_case);
#if CDE_SMEM_ROWS
        for (int e = t; e < CDE_RY; e += CDE_NTHR) A[e] = Yg[e];
#else
        A = Yg;
#endif
        BLOCK_SYNC();
        for (int k = CDE_GX; k < CDE_GX + CDE_GY; ++k)
            cde_generation(s, 1, A, AU, key, Fw, CRt, log_cr, cr_case, k + 1 < CDE_GX + CDE_GY,
                           g0 + (long long)(k + 1) * CDE_STRIDE);
#if CDE_SMEM_ROWS
        for (int e = t; e < CDE_RY; e += CDE_NTHR) Yg[e] = A[e];
#endif
        for (int j = t; j < CDE_NY; j += CDE_NTHR) fyg[j] = s->fy[j];
        BLOCK_SYNC();
    }
#if PAY_TRUE
    for (int j = t; j < PAY_DX; j += CDE_NTHR) BX[(isz)isl * PAY_DX + j] = s->bx[j];
    if (t == 0) { BF[isl] = s->bfv[0]; BV[isl] = s->bfv[1]; }
#endif
    if (t == 0 && s->misc[0] > 0) ISLES_ATOMIC_ADD(nan_count, (unsigned long long)s->misc[0]);
}

// terms of rows (the self-check against pair_x / pair_y / the Evaluator): row r < nx of X -> TX,
// TF, TV (raw pay_true, PAY_TRUE); row r < ny of Y -> TY
ISLES_DEV void cde_terms_row(long long r, const T* X, long long nx, const T* Y, long long ny, T* TX, T* TY,
                             T* TF, T* TV) {
    if (r < nx) {
        pay_terms_x(X + r * PAY_DX, TX + r * PAY_KX);
#if PAY_TRUE
        pay_true(TX + r * PAY_KX, TF + r, TV + r);
#endif
    }
    if (r < ny) pay_terms_y(Y + r * PAY_DY, TY + r * PAY_KY);
}

#ifdef ISLES_HOST_EMU
unsigned long long cde_smem_bytes(void) {
    CdeShared s;
    return cde_carve((unsigned char*)0, &s);
}
void cde_epoch_host(int n_islands, unsigned char* smem, CDE_PARAMS) {
    for (int isl = 0; isl < n_islands; ++isl) cde_block(isl, smem, CDE_ARGS);
}
void cde_terms_host(const T* X, long long nx, const T* Y, long long ny, T* TX, T* TY, T* TF, T* TV) {
    const long long n = nx > ny ? nx : ny;
    for (long long r = 0; r < n; ++r) cde_terms_row(r, X, nx, Y, ny, TX, TY, TF, TV);
}
#else
extern "C" __global__ void __launch_bounds__(CDE_NT) cde_epoch(CDE_PARAMS) {
    extern __shared__ __align__(16) unsigned char cde_smem[];
    cde_block((int)blockIdx.x, cde_smem, CDE_ARGS);
}
extern "C" __global__ void cde_terms(const T* X, long long nx, const T* Y, long long ny, T* TX, T* TY, T* TF,
                                     T* TV) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    cde_terms_row(r, X, nx, Y, ny, TX, TY, TF, TV);
}
#endif
