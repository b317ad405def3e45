// lshade_epoch.cu: the SM-resident L-SHADE / jSO epoch (algorithms/lshade/epoch.py): one thread block
// per island runs k whole L-SHADE generations in one launch, the population (current and trial rows),
// f, v, the memories and the archive's bookkeeping in shared memory; the archive's rows stay in global
// memory (a work copy Aw, read through the logical -> physical map amap); with XN_GLOBAL the trial
// rows Xn too (a scratch Xg, L2-resident), for islands whose two populations do not fit. Assembled
// after the defines (IS_F32 DIM CAP ACAP HMEM NMIN IS_JSO EVL EBLOCK ETPI XN_GLOBAL), the draw ids (DRAW_INDIVIDUAL
// DRAW_CROSS DRAW_ARCHIVE), objective.cuh and the problem's fused objective.
//
// One generation is the NumPy twin's (algorithms/lshade/lshade.py _start_generation and
// _end_generation), step for step, with the same draws and the same separately rounded operations:
//   P0  rank of the active rows by (v, f, index) (the twin's two stable argsorts), order and pos;
//   P1  per row, three threads (independent chains): the uniforms of DRAW_INDIVIDUAL, memory slot,
//       CR (Box-Muller in float64), F (the Cauchy conditioned on F > 0 by its inverse CDF), jSO's
//       repairs; pbest, r1, r2 (from population and archive), j_rand;
//   P2  per row, a group of ETPI threads: the trial row (current-to-pbest/1, halfway-back bounds,
//       binomial crossover with DRAW_CROSS in T) into Xn, the objective folded in EVL virtual lanes
//       (lane m: coordinates m, m + EVL, ...; merged by an xor butterfly, the same order on the
//       host, where one thread holds all lanes) so host and GPU get the same f bit for bit, the
//       NaN/penalty rule, Deb's selection, the success and its improvement;
//   P3  the sums of the weighted Lehmer means in NumPy's pairwise order (one thread each), max CR,
//       the successes; the archive's sort keys (DRAW_ARCHIVE); the population's rank if LPSR cuts;
//   P4  the memory update (thread 0); every archive candidate's place in the stable sort of the
//       keys (new successes, then old members, then the rest in index order), counted, not sorted
//       (the counts split over several threads per candidate, added atomically), then placed;
//   P5  kept parents take the physical rows freed by dropped old members (paired in order), their
//       rows copied to Aw; P6 the next population (rank order where LPSR cuts) back into Xc.
// The stop target (use_target): hit_eval[island] becomes the smallest evaluation count (1-based,
// the island's) of a feasible trial with f <= target, if below its value (epoch.py turns it into
// the runtime generation, as IslandAlgorithm.run's per-step tracking would).
// Under -DISLES_HOST_EMU the same block code runs as C with one thread per block (tests).
// EXT_OBJ (host only, with XN_GLOBAL): the problem's own objective instead of a fused one (a user's
// array code). lshade_epoch_host_ext runs the islands in lockstep, a generation at a time, in two
// calls of the block code per island (ls_ext_phase), each island's block memory kept between them:
// 0 runs P0, P1 and P2's trial rows into Xn (the global scratch Xg, a NumPy array) and returns; the
// callback lshade_ext_set installs evaluates every island's trial rows at once (host_epoch.py: the
// problem's Evaluator on the (I, N_G, D) rows, its f, v and NaN count); 1 selects row by row as the
// fused P2 does and runs P3-P6. The state is loaded once (ls_ext_load) and written once
// (ls_ext_store).
#include "fitness.cuh"
#include "block.cuh"
#ifdef ISLES_HOST_EMU
#include <float.h>
#include <stdlib.h>
#include <string.h>
#define LS_GROUP_SYNC() ((void)0)
#undef ETPI
#define ETPI 1
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
// This file's separately rounded operations as plain C: with no excess precision (FLT_EVAL_METHOD 0)
// and no contraction (HOST_FLAGS) each is rounded once to its type, the value arith.cuh's volatile
// stores give, without a store and a load per operation (about 13 % of the host build's run). The
// objective, included before this file, keeps arith.cuh's.
static inline double ls_dadd(double a, double b) { return a + b; }
static inline double ls_dsub(double a, double b) { return a - b; }
static inline double ls_dmul(double a, double b) { return a * b; }
static inline double ls_ddiv(double a, double b) { return a / b; }
static inline T ls_add(T a, T b) { return a + b; }
static inline T ls_sub(T a, T b) { return a - b; }
static inline T ls_mul(T a, T b) { return a * b; }
static inline T ls_div(T a, T b) { return a / b; }
#define dadd_rn(a, b) ls_dadd((a), (b))
#define dsub_rn(a, b) ls_dsub((a), (b))
#define dmul_rn(a, b) ls_dmul((a), (b))
#define ddiv_rn(a, b) ls_ddiv((a), (b))
#define add_rn(a, b) ls_add((a), (b))
#define sub_rn(a, b) ls_sub((a), (b))
#define mul_rn(a, b) ls_mul((a), (b))
#define div_rn(a, b) ls_div((a), (b))
#endif
#else
#include "reduce.cuh"
#define LS_GROUP_SYNC() __syncwarp()
#endif

#define LS_VL (EVL / ETPI)                 // virtual lanes per thread
#define LS_ITEMS ((DIM + EVL - 1) / EVL)   // coordinates per virtual lane
#define LS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LS_MAX(a, b) ((a) > (b) ? (a) : (b))
#define LS_PI 3.141592653589793
#define LS_NO_HIT (1ll << 62)   // hit_eval's "not reached"
#ifdef ISLES_HOST_EMU
#define LS_NOINLINE static
#else
#define LS_NOINLINE __device__ __noinline__
#endif

ISLES_DEV T ls_atan(T a) { return ISLES_LIBM(atan)(a); }

// the stream of draw `d` of L-SHADE generation g: CounterRNG.uniform's mix64(((g << 16) + d) + (ctr << 16))
ISLES_DEV u64 ls_stream(long long g, int d, u64 ctr) {
    return isles_mix64((((u64)g) << 16) + (u64)d + (ctr << 16));
}

// LPSR, eq. 10 (params.py population_at): round((N_min - N_init) / MAX_NFE nfe + N_init), >= N_min
ISLES_DEV int ls_population_at(long long nfe, long long max_nfe) {
    const long long num = (long long)CAP * max_nfe - (long long)(CAP - NMIN) * nfe;
    long long r = (2 * num + max_nfe) / (2 * max_nfe);
    return (int)(r < NMIN ? NMIN : r);
}

ISLES_DEV int ls_round_half_up(double x) { return (int)floor(dadd_rn(x, 0.5)); }

// element i of the Lehmer sums' arrays (operators.py lehmer_mean): which 0: where(succ, df S, 0) with
// S = F, 1: that times F, 2 and 3: the same with S = CR
ISLES_DEV T ls_elem(int which, int i, const T* Fv, const T* CRv, const T* dfv, const int* succ) {
    const T s = which < 2 ? Fv[i] : CRv[i];
    T e = succ[i] ? mul_rn(dfv[i], s) : (T)0;
    if (which & 1) e = mul_rn(e, s);
    return e;
}
// numpy.add.reduce's pairwise order over elements [a, a + n) (npsum.cuh), iteratively for n <= 128
LS_NOINLINE T ls_sum_block(int which, int a, int n, const T* Fv, const T* CRv, const T* dfv, const int* succ) {
    if (n < 8) {
        T res = (T)0;
        for (int i = 0; i < n; ++i) res = add_rn(res, ls_elem(which, a + i, Fv, CRv, dfv, succ));
        return res;
    }
    T r[8];
    for (int k = 0; k < 8; ++k) r[k] = ls_elem(which, a + k, Fv, CRv, dfv, succ);
    int i = 8;
    for (; i < n - (n % 8); i += 8)
        for (int k = 0; k < 8; ++k) r[k] = add_rn(r[k], ls_elem(which, a + i + k, Fv, CRv, dfv, succ));
    T res = add_rn(add_rn(add_rn(r[0], r[1]), add_rn(r[2], r[3])), add_rn(add_rn(r[4], r[5]), add_rn(r[6], r[7])));
    for (; i < n; ++i) res = add_rn(res, ls_elem(which, a + i, Fv, CRv, dfv, succ));
    return res;
}
// more than 128 terms: NumPy splits at n2 = n / 2 - (n / 2) % 8, recursively (one function per level)
#define LS_LEVEL(name, below, cap)                                                                   \
    LS_NOINLINE T name(int w, int a, int n, const T* Fv, const T* CRv, const T* dfv, const int* succ) {     \
        if (n <= (cap) / 2) return below(w, a, n, Fv, CRv, dfv, succ);                               \
        const int n2 = n / 2 - (n / 2) % 8;                                                          \
        return add_rn(below(w, a, n2, Fv, CRv, dfv, succ), below(w, a + n2, n - n2, Fv, CRv, dfv, succ)); \
    }
LS_LEVEL(ls_sum_256, ls_sum_block, 256)
LS_LEVEL(ls_sum_512, ls_sum_256, 512)
LS_LEVEL(ls_sum_1k, ls_sum_512, 1024)
LS_LEVEL(ls_sum_2k, ls_sum_1k, 2048)
LS_LEVEL(ls_sum_4k, ls_sum_2k, 4096)
LS_LEVEL(ls_sum_8k, ls_sum_4k, 8192)
LS_LEVEL(ls_sum_16k, ls_sum_8k, 16384)
ISLES_DEV T ls_sum(int w, int n, const T* Fv, const T* CRv, const T* dfv, const int* succ) {
    return ls_sum_16k(w, 0, n, Fv, CRv, dfv, succ);
}

// the butterfly merge of one row's EVL virtual lanes (module comment); the total in acc[0]
ISLES_DEV void ls_merge(T (*acc)[OBJ_NACC]) {
#pragma unroll
    for (int o = EVL / 2; o >= ETPI && o >= 1; o >>= 1) {
        const int mo = o / ETPI;
#pragma unroll
        for (int m = 0; m < LS_VL; ++m) {
            if (m & mo) continue;
            obj_merge(acc[m], acc[m | mo]);
            for (int s = 0; s < OBJ_NACC; ++s) acc[m | mo][s] = acc[m][s];
        }
    }
#if !defined(ISLES_HOST_EMU) && ETPI > 1
    isles_warp_merge(acc[0], FULL_MASK, ETPI);
#endif
}

// rows j in [j0, j1) before row i by (v, f, index), lexicographic (operators.py rank): summed over
// all j, row i's place
ISLES_DEV int ls_rank(int i, int j0, int j1, const T* f, const T* v) {
    const T fi = f[i], vi = v[i];
    int r = 0;
    for (int j = j0; j < j1; ++j) {
        const T fj = f[j], vj = v[j];
        r += (vj < vi) || (vj == vi && (fj < fi || (fj == fi && j < i)));
    }
    return r;
}

#ifdef ISLES_HOST_EMU
// The host build's places by sorting: one thread would spend O(m^2) on the block's counts (the
// archive's old members, |A| up to 2.6 N_init, dominated its run), a sort takes O(m log m). A stable
// merge sort of an index list by a strict weak order puts each index at its place among (key, list
// position), the number the counts give: the same places, the same state bit for bit.
// idx: the m indices to sort (in place), tmp: m ints of scratch; by key, else by (v, f), else
// (v null: every v equal) by f.
#define LS_HOST_BEFORE(y, x) \
    (key ? key[y] < key[x] : (v ? (v[y] < v[x] || (v[y] == v[x] && f[y] < f[x])) : f[y] < f[x]))
static void ls_host_merge_sort(const int m, int* idx, int* tmp, const double* key, const T* f, const T* v) {
    // runs of 8 by insertion (stable: an index moves left only past ones it is strictly before)
    for (int lo = 0; lo < m; lo += 8) {
        const int hi = LS_MIN(lo + 8, m);
        for (int i = lo + 1; i < hi; ++i) {
            const int y = idx[i];
            int j = i;
            while (j > lo && LS_HOST_BEFORE(y, idx[j - 1])) {
                idx[j] = idx[j - 1];
                --j;
            }
            idx[j] = y;
        }
    }
    int *src = idx, *dst = tmp;
    for (int w = 8; w < m; w *= 2) {
        for (int lo = 0; lo < m; lo += 2 * w) {
            const int mid = LS_MIN(lo + w, m), hi = LS_MIN(lo + 2 * w, m);
            int a = lo, b = mid, o = lo;
            if (mid < hi && !LS_HOST_BEFORE(src[mid], src[mid - 1])) a = b = hi;   // already in order
            while (a < mid && b < hi) {
                const int x = src[a], y = src[b];
                // y (the later) first only where strictly before x
                if (LS_HOST_BEFORE(y, x)) { dst[o++] = y; ++b; } else { dst[o++] = x; ++a; }
            }
            if (a == hi) for (int i = lo; i < hi; ++i) dst[i] = src[i];
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
        }
        int* t = src; src = dst; dst = t;
    }
    if (src != idx) memcpy(idx, src, (size_t)m * sizeof(int));
}
#undef LS_HOST_BEFORE

// ls_rank of every row i < n (its place by (v, f, index)) into out[i] by one sort; 0 (nothing
// written: the caller counts) where a NaN makes (v, f) no strict weak order. Rows already in
// order (the population after LPSR's cut, kept in rank order) take their index without a sort;
// where no row violates a constraint the sort compares f alone (the same order: v ties).
// scratch: 2 n ints.
static int ls_host_ranks(const int n, const T* f, const T* v, int* out, int* scratch) {
    int sorted = 1, feasible = 1;
    for (int i = 0; i < n; ++i) {
        if (f[i] != f[i] || v[i] != v[i]) return 0;
        feasible &= v[i] == (T)0;
        if (i > 0) sorted &= !(v[i] < v[i - 1] || (v[i] == v[i - 1] && f[i] < f[i - 1]));
    }
    if (sorted) {
        for (int i = 0; i < n; ++i) out[i] = i;
        return 1;
    }
    int* idx = scratch;
    for (int i = 0; i < n; ++i) idx[i] = i;
    ls_host_merge_sort(n, idx, scratch + n, (const double*)0, f, feasible ? (const T*)0 : v);
    for (int t = 0; t < n; ++t) out[idx[t]] = t;
    return 1;
}

// A stable sort of idx[0..m) by key[idx] for the archive's keys (uniform draws, finite): a stable
// counting sort into m buckets by where the key lies in [min, max], then one insertion pass, which
// moves each index only within its bucket (expected O(m); it alone decides the order, so the
// result is the stable sort whatever the buckets: equal keys share a bucket in list order).
// tmp: m ints, cnt: m + 1 ints.
static void ls_host_bucket_sort(const int m, int* idx, int* tmp, int* cnt, const double* key) {
    if (m < 2) return;
    double lo = key[idx[0]], hi = lo;
    for (int i = 1; i < m; ++i) {
        const double k = key[idx[i]];
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    if (!(hi > lo)) return;   // all keys equal: the list order is the stable order
    const double sc = (double)m / (hi - lo);
    for (int b = 0; b <= m; ++b) cnt[b] = 0;
    for (int i = 0; i < m; ++i) ++cnt[LS_MIN((int)((key[idx[i]] - lo) * sc), m - 1) + 1];
    for (int b = 0; b < m; ++b) cnt[b + 1] += cnt[b];
    for (int i = 0; i < m; ++i) tmp[cnt[LS_MIN((int)((key[idx[i]] - lo) * sc), m - 1)]++] = idx[i];
    for (int i = 1; i < m; ++i) {
        const int x = tmp[i];
        const double k = key[x];
        int j = i;
        while (j > 0 && k < key[tmp[j - 1]]) {
            tmp[j] = tmp[j - 1];
            --j;
        }
        tmp[j] = x;
    }
    memcpy(idx, tmp, (size_t)m * sizeof(int));
}

// P4a's counts of the archive's candidates (tnew, zero on entry) by sorting: a success its place
// among the successes by (key, index), any other parent the successes before it, an old member its
// place among the old members by (key, index). scratch: 3 (CAP + ACAP) + 1 ints.
static void ls_host_archive_counts(const int n, const int an, const double* akey, const int* succ, int* tnew,
                                   int* scratch) {
    int* idx = scratch;
    int* tmp = scratch + CAP + ACAP;
    int* cnt = tmp + CAP + ACAP;
    int S = 0;
    for (int c = 0; c < n; ++c) {
        if (succ[c]) idx[S++] = c;
        else tnew[c] = S;
    }
    ls_host_bucket_sort(S, idx, tmp, cnt, akey);
    for (int t = 0; t < S; ++t) tnew[idx[t]] = t;
    for (int l = 0; l < an; ++l) idx[l] = n + l;
    ls_host_bucket_sort(an, idx, tmp, cnt, akey);
    for (int t = 0; t < an; ++t) tnew[idx[t]] = t;
}

// the host's scratch past the block's smem_bytes: F's Cauchy CDF at 0 per memory slot (HMEM T,
// first: aligned), then the sorts' 3 (CAP + ACAP) + 1 ints
#define LS_HOST_SCRATCH ((size_t)8 + sizeof(T) * HMEM + sizeof(int) * (3 * (CAP + ACAP) + 1))
#endif

#if defined(ISLES_HOST_EMU) && EXT_OBJ
// The external objective (EXT_OBJ): fn(n_islands, n) evaluates the first n trial rows of every
// island (Xg, I x CAP x DIM, which Python owns) and writes their f and v into ls_ext_f, ls_ext_v
// (I x CAP); it returns the NaN evaluations, or -1 where the objective raised (Python keeps the
// error; the call stops). Per thread: a loaded library is shared by every plan of the same source
// in the process (lshade_epoch_host_ext hands them to its OpenMP threads).
typedef long long (*ls_ext_fn)(int n_islands, int n);
static __thread ls_ext_fn ls_ext_obj;
static __thread const T* ls_ext_f;
static __thread const T* ls_ext_v;
static __thread int ls_ext_phase;   // 0: P0, P1 and the trial rows; 1: the selection on
static __thread int ls_ext_load;    // the block loads the state (the first generation's phase 0)
static __thread int ls_ext_store;   // the block writes the state (the last generation's phase 1)
void lshade_ext_set(ls_ext_fn fn, const T* f, const T* v) {
    ls_ext_obj = fn;
    ls_ext_f = f;
    ls_ext_v = v;
}
#endif

ISLES_DEV void lshade_epoch_block(
    const int isl, const int tid, const int nth, unsigned char* smem,
    const T* X, const T* fx, const T* vx, const T* A, const long long* a_n, const T* MFi, const T* MCRi,
    const long long* kk, T* Xo, T* fo, T* vo, T* Ao, long long* a_no, T* MFo, T* MCRo, long long* ko, T* Aw, T* Xg,
    const u64* keys, const T* lower, const T* upper, const u64* rng_ctr, const long long lgen0, const int n0,
    const long long nfe0, const int n_gen, const long long max_nfe, const double p, const double r_arc,
    unsigned long long* nan_count, long long* hit_eval, const T target, const int use_target)
{
    // shared memory (epoch.py smem_bytes): doubles, then T, then ints
    double* akey = (double*)smem;                     // CAP + ACAP archive sort keys
    T* Xc = (T*)(akey + CAP + ACAP);                  // the population (CAP rows)
#if XN_GLOBAL
    T* Xn = Xg + (long long)isl * CAP * DIM;          // trial rows, then the selected rows (global: L2)
    T* fc = Xc + CAP * DIM;
#else
    T* Xn = Xc + CAP * DIM;                           // trial rows, then the selected rows
    T* fc = Xn + CAP * DIM;
#endif
    T* vc = fc + CAP;
    T* fn = vc + CAP;
    T* vn = fn + CAP;
    T* Fv = vn + CAP;
    T* CRv = Fv + CAP;
    T* dfv = CRv + CAP;
    T* MF = dfv + CAP;
    T* MCR = MF + HMEM;
    T* sums = MCR + HMEM;                             // 4 Lehmer sums, then max CR
    int* order = (int*)(sums + 5);
    int* pos = order + CAP;
    int* pbv = pos + CAP;
    int* r1v = pbv + CAP;
    int* r2v = r1v + CAP;
    int* jrv = r2v + CAP;
    int* succ = jrv + CAP;
    int* keep = succ + CAP;
    int* tnew = keep + CAP;                           // CAP + ACAP: each candidate's place
    int* amap = tnew + CAP + ACAP;                    // logical -> physical archive row
    int* amap2 = amap + ACAP;
    int* dropslot = amap2 + ACAP;                     // CAP: physical rows freed, in order
    int* iscal = dropslot + CAP;                      // 0: k, 1: |A|, 2: successes
#ifdef ISLES_HOST_EMU
    // past smem_bytes (LS_HOST_SCRATCH): the slots' c0, 8-byte aligned, then the sorts' ints
    T* hc0 = (T*)(((size_t)(iscal + 4) + 7) & ~(size_t)7);
    int* hscr = (int*)(hc0 + HMEM);
#endif

    const long long off = (long long)isl * CAP * DIM, aoff = (long long)isl * ACAP * DIM;
#if EXT_OBJ
    if (ls_ext_load) {   // else the block memory holds the island's state (lshade_epoch_host_ext)
#endif
    for (int e = tid; e < CAP * DIM; e += nth) Xc[e] = X[off + e];
    for (int r = tid; r < CAP; r += nth) {
        fc[r] = fx[(long long)isl * CAP + r];
        vc[r] = vx[(long long)isl * CAP + r];
    }
    for (int h = tid; h < HMEM; h += nth) {
        MF[h] = MFi[(long long)isl * HMEM + h];
        MCR[h] = MCRi[(long long)isl * HMEM + h];
    }
    for (int l = tid; l < ACAP; l += nth) amap[l] = l;
    for (int i = tid; i < CAP; i += nth) pos[i] = 0;
    for (long long e = tid; e < (long long)ACAP * DIM; e += nth) Aw[aoff + e] = A[aoff + e];
    if (tid == 0) {
        iscal[0] = (int)kk[isl];
        iscal[1] = (int)a_n[isl];
    }
#if EXT_OBJ
    }
#endif
    const u64 key = keys[isl];
    const u64 ctr = rng_ctr[0];
    const int grp = tid / ETPI, lane = tid - grp * ETPI, ngrp = nth / ETPI;
    unsigned long long nan_local = 0ull;
    long long hit_local = LS_NO_HIT;
    int n = n0;
    long long nfe = nfe0;
    BLOCK_SYNC();
    for (int gi = 0; gi < n_gen; ++gi) {
        const long long g = lgen0 + gi;
        const long long nfe_end = nfe + n;
        const int n_next = LS_MIN(n, ls_population_at(nfe_end, max_nfe));
        const double frac = ddiv_rn((double)nfe, (double)max_nfe);   // jSO's schedules
        (void)frac;
#if IS_JSO
        const int pnum = LS_MAX(ls_round_half_up(dmul_rn(dmul_rn(p, dsub_rn(1.0, dmul_rn(0.5, frac))), (double)n)), 2);
        const int not_self = frac < 0.5;
        const double wq = frac < 0.2 ? 0.7 : (frac < 0.4 ? 0.8 : 1.2);
#else
        const int pnum = LS_MAX(ls_round_half_up(dmul_rn(p, (double)n)), 2);
        const int not_self = 0;
        const double wq = 1.0;
#endif
        const int an = iscal[1];
#if EXT_OBJ
        if (ls_ext_phase == 0) {   // P0, P1 and the trial rows (module comment)
#endif
        // P0: ranks of the active rows, each counted by nch threads (pos is zero here)
#ifdef ISLES_HOST_EMU
        if (!ls_host_ranks(n, fc, vc, pos, hscr))
#endif
        {
            const int nch = LS_MAX(1, nth / n);
            for (int w = tid; w < n * nch; w += nth) {
                const int i = w / nch, ch = w - i * nch;
                const int r = ls_rank(i, (int)((long long)n * ch / nch), (int)((long long)n * (ch + 1) / nch), fc, vc);
                if (r) ISLES_ATOMIC_ADD(&pos[i], r);
            }
        }
        BLOCK_SYNC();
        for (int i = tid; i < n; i += nth) order[pos[i]] = i;
        BLOCK_SYNC();
        // P1: each row's parameters and indices, three independent chains per row on three threads
        // (role 0: the slot and CR, Box-Muller in float64; 1: the slot and F; 2: pbest, r1, r2, j_rand)
        {
            const u64 bind = key ^ ls_stream(g, DRAW_INDIVIDUAL, ctr);
#ifdef ISLES_HOST_EMU
            // c0 depends on the slot only: once per slot (the same function of the same value)
            for (int h = 0; h < HMEM; ++h) {
                T mf = MF[h];
#if IS_JSO
                if (h == HMEM - 1) mf = (T)0.9;
#endif
                hc0[h] = add_rn((T)0.5, div_rn(ls_atan(div_rn(-mf, (T)0.1)), (T)LS_PI));
            }
#endif
            for (int w = tid; w < 3 * n; w += nth) {
                const int i = w / 3, role = w - 3 * i;
#define LS_U(c) unif53(isles_mix64(bind + (u64)(i * 8 + (c)) * GOLDEN))
                if (role < 2) {
                    long long r = (long long)dmul_rn(LS_U(0), (double)HMEM);
                    r = LS_MIN(r, HMEM - 1);
                    T mf = MF[r], mcr = MCR[r];
#if IS_JSO
                    if (r == HMEM - 1) { mf = (T)0.9; mcr = (T)0.9; }
#endif
                    if (role == 0) {
                        const double z = dmul_rn(sqrt(dmul_rn(-2.0, log1p(-LS_U(2)))), cos(dmul_rn(2.0 * LS_PI, LS_U(3))));
                        T cr = add_rn(mcr, mul_rn((T)0.1, (T)z));
                        cr = cr < (T)0 ? (T)0 : (cr > (T)1 ? (T)1 : cr);
                        if (mcr < (T)0) cr = (T)0;
#if IS_JSO
                        if (frac < 0.25) cr = cr > (T)0.7 ? cr : (T)0.7;
                        else if (frac < 0.5) cr = cr > (T)0.6 ? cr : (T)0.6;
#endif
                        CRv[i] = cr;
                    } else {
                        (void)mcr;
#ifdef ISLES_HOST_EMU
                        const T c0 = hc0[r];
#else
                        const T c0 = add_rn((T)0.5, div_rn(ls_atan(div_rn(-mf, (T)0.1)), (T)LS_PI));
#endif
                        const T q = add_rn(c0, mul_rn((T)LS_U(1), sub_rn((T)1, c0)));
                        T F = add_rn(mf, mul_rn((T)0.1, t_tan(mul_rn((T)LS_PI, sub_rn(q, (T)0.5)))));
#if IS_F32
                        F = F > (T)1.17549435e-38f ? F : (T)1.17549435e-38f;
#else
                        F = F > (T)2.2250738585072014e-308 ? F : (T)2.2250738585072014e-308;
#endif
                        F = F < (T)1 ? F : (T)1;
#if IS_JSO
                        if (frac < 0.6) F = F < (T)0.7 ? F : (T)0.7;
#endif
                        Fv[i] = F;
                    }
                } else {
                    int pb;
                    if (!not_self) {
                        long long c = (long long)dmul_rn(LS_U(4), (double)pnum);
                        pb = order[LS_MIN(c, pnum - 1)];
                    } else {
                        const int own = pos[i] < pnum;
                        long long c = (long long)dmul_rn(LS_U(4), (double)(pnum - own));
                        c = LS_MIN(c, pnum - 1 - own);
                        pb = order[c + own * (c >= pos[i])];
                    }
                    pbv[i] = pb;
                    long long c1 = (long long)dmul_rn(LS_U(5), (double)(n - 1));
                    c1 = LS_MIN(c1, n - 2);
                    const int r1 = (int)(c1 + (c1 >= i));
                    const long long m2 = (long long)(n - 2 + an);
                    long long c2 = (long long)dmul_rn(LS_U(6), (double)m2);
                    c2 = LS_MIN(c2, m2 - 1);
                    const int lo = LS_MIN(i, r1), hi = LS_MAX(i, r1);
                    long long r2 = c2 + (c2 >= lo);
                    r2 = r2 + (r2 >= hi);
                    r1v[i] = r1;
                    r2v[i] = (int)r2;
                    long long jr = (long long)dmul_rn(LS_U(7), (double)DIM);
                    jrv[i] = (int)LS_MIN(jr, DIM - 1);
                }
#undef LS_U
            }
        }
        BLOCK_SYNC();
        // P2: trial rows, objective, selection
        {
            const u64 bcross = key ^ ls_stream(g, DRAW_CROSS, ctr);
            for (int rb = 0; rb < n; rb += ngrp) {
                const int row = rb + grp;
                const int act = row < n;
                const int i = act ? row : 0;
                const T F = Fv[i], CR = CRv[i];
                const T Fw = wq == 1.0 ? F : mul_rn(F, (T)wq);
                const int jr = jrv[i], r2 = r2v[i];
                const T* xc = Xc + i * DIM;
                const T* xpb = Xc + pbv[i] * DIM;
                const T* xr1 = Xc + r1v[i] * DIM;
                const T* xr2 = r2 < n ? Xc + r2 * DIM : Aw + aoff + (long long)amap[r2 - n] * DIM;
                T* un = Xn + i * DIM;
                // draw_bits(key, s_cross, i D + j) with the row's and the lane's parts of the counter
                // hoisted ((a + b) G = a G + b G mod 2^64): the rest a compile-time constant per item
                const u64 hrow = bcross + ((u64)i * (u64)DIM + (u64)lane) * GOLDEN;
                T u[LS_VL][LS_ITEMS];
#pragma unroll
                for (int m = 0; m < LS_VL; ++m) {
#pragma unroll
                    for (int q = 0; q < LS_ITEMS; ++q) {
                        const int j = lane + ETPI * m + EVL * q;
                        T uj = (T)0;
                        if (act && j < DIM) {
                            const T x = xc[j];
                            uj = x;
                            if (j == jr || unifT(isles_mix64(hrow + (u64)(ETPI * m + EVL * q) * GOLDEN)) < CR) {
                                T vj = add_rn(add_rn(x, mul_rn(Fw, sub_rn(xpb[j], x))), mul_rn(F, sub_rn(xr1[j], xr2[j])));
                                if (vj < lower[j]) vj = div_rn(add_rn(lower[j], x), (T)2);
                                else if (vj > upper[j]) vj = div_rn(add_rn(upper[j], x), (T)2);
                                uj = vj;
                            }
                            un[j] = uj;
                        }
                        u[m][q] = uj;
                    }
                }
#if EXT_OBJ
                (void)u;
            }
        }
        }
        // phase 0 ends here: lshade_epoch_host_ext evaluates every island's trial rows at once (the
        // Evaluator's rule, NaN and penalty, applied and counted there), then phase 1 selects
        if (ls_ext_phase == 0) return;
        {
            for (int i = 0; i < n; ++i) {
                const int act = 1;
                const T* xc = Xc + i * DIM;
                T* un = Xn + i * DIM;
                T f = ls_ext_f[(long long)isl * CAP + i], v = ls_ext_v[(long long)isl * CAP + i];
#else
#if OBJ_NEXT
                LS_GROUP_SYNC();
#endif
                T acc[LS_VL][OBJ_NACC];
#pragma unroll
                for (int m = 0; m < LS_VL; ++m) {
                    obj_init(acc[m]);
#pragma unroll
                    for (int q = 0; q < LS_ITEMS; ++q) {
                        const int j = lane + ETPI * m + EVL * q;
                        if (act && j < DIM) {
#if OBJ_NEXT
                            const T xnext = j + 1 < DIM ? un[j + 1] : (T)0;
#else
                            const T xnext = (T)0;
#endif
                            obj_term(acc[m], u[m][q], xnext, j);
                        }
                    }
                }
                ls_merge(acc);
                T v;
#if OBJ_HAS_V
                v = obj_violation(acc[0], DIM);
#else
                v = (T)0;
#endif
                T f = obj_final(acc[0], DIM);
                LS_GROUP_SYNC();
#endif
                if (act) {
#if EXT_OBJ
                    const int bad = 0;   // counted by the callback
#else
                    const int bad = isles_fix_fv(&f, &v);
#endif
                    const T ft = fc[i], vt = vc[i];
                    const int accept = !isles_better(ft, vt, f, v);
                    const int sc = isles_better(f, v, ft, vt);
                    if (!accept)
                        for (int j = lane; j < DIM; j += ETPI) un[j] = xc[j];
                    if (lane == 0) {
                        fn[i] = accept ? f : ft;
                        vn[i] = accept ? v : vt;
                        succ[i] = sc;
                        T df = vt == v ? t_abs(sub_rn(ft, f)) : t_abs(sub_rn(vt, v));
                        if (!(sc && df == df && df != T_INF)) df = (T)0;
                        dfv[i] = df;
                        nan_local += (unsigned long long)bad;
                        // the stop target: the first evaluation (count nfe + i + 1) of a feasible trial <= target
                        if (use_target && v <= (T)0 && f <= target && nfe + i + 1 < hit_local) hit_local = nfe + i + 1;
                    }
                }
            }
        }
        BLOCK_SYNC();
        // P3: the Lehmer sums, max CR and the successes; the archive's keys; LPSR's order
        for (int w = tid; w < 5; w += nth) {
            if (w < 4) {
                sums[w] = ls_sum(w, n, Fv, CRv, dfv, succ);
            } else {
                T mx = (T)0;
                int s = 0;
                for (int i = 0; i < n; ++i) {
                    const T c = succ[i] ? CRv[i] : (T)0;
                    mx = c > mx ? c : mx;
                    s += succ[i];
                }
                sums[4] = mx;
                iscal[2] = s;
            }
        }
        if (ACAP > 0) {
            const u64 barc = key ^ ls_stream(g, DRAW_ARCHIVE, ctr);
            for (int c = tid; c < n + ACAP; c += nth) {
#ifdef ISLES_HOST_EMU
                // the draw only where the key is one (a success, an old member): the same keys
                const int drawn = c < n ? succ[c] : (c - n) < an;
                const double u = drawn ? unif53(isles_mix64(barc + (u64)c * GOLDEN)) : 0.0;
#else
                const double u = unif53(isles_mix64(barc + (u64)c * GOLDEN));
#endif
                double kv;
                if (c < n) kv = succ[c] ? u : 3.0;
                else kv = (c - n) < an ? dadd_rn(1.0, u) : 3.0;
                akey[c] = kv;
                tnew[c] = 0;
            }
        }
        if (n_next < n)   // LPSR's ranks are counted in P4a into order (free after P1)
            for (int i = tid; i < n; i += nth) order[i] = 0;
        BLOCK_SYNC();
        // P4: the memory update; each archive candidate's place
        const int S = iscal[2];
        if (tid == 0) {
            const int k = iscal[0];
            const int okf = sums[0] > (T)0, okc = sums[2] > (T)0;
            T newf = okf ? div_rn(sums[1], sums[0]) : (T)0;
            T newc = okc ? div_rn(sums[3], sums[2]) : (T)0;
            const T oldcr = MCR[k], oldf = MF[k];
            (void)oldf;
#if IS_JSO
            const int term = sums[4] == (T)0;
#else
            const int term = oldcr < (T)0 || sums[4] == (T)0;
#endif
            if (term) newc = (T)-1;
#if IS_JSO
            newf = div_rn(add_rn(newf, oldf), (T)2);
            newc = div_rn(add_rn(newc, oldcr), (T)2);
#endif
            if (okf) {
                MF[k] = newf;
                if (okc || term) MCR[k] = newc;
                iscal[0] = (k + 1) % HMEM;
            }
        }
        if (n_next < n)
#ifdef ISLES_HOST_EMU
        if (!ls_host_ranks(n, fn, vn, order, hscr))
#endif
        {
            // P4a (LPSR): the selected rows' ranks by (v, f, index), counted by nch threads each
            const int nch = LS_MAX(1, nth / n);
            for (int w = tid; w < n * nch; w += nth) {
                const int i = w / nch, ch = w - i * nch;
                const int r = ls_rank(i, (int)((long long)n * ch / nch), (int)((long long)n * (ch + 1) / nch), fn, vn);
                if (r) ISLES_ATOMIC_ADD(&order[i], r);
            }
        }
#ifdef ISLES_HOST_EMU
        if (ACAP > 0) ls_host_archive_counts(n, an, akey, succ, tnew, hscr);
#else
        if (ACAP > 0) {
            // P4a: the counts behind each candidate's place, split over nch threads per candidate
            const int M = n + ACAP;
            const int nch = LS_MAX(1, nth / M);
            for (int w = tid; w < M * nch; w += nth) {
                const int c = w / nch, ch = w - c * nch;
                const double kc = akey[c];
                int cnt = 0;
                if (c < n && succ[c]) {   // successes before it in key order
                    const int j0 = (int)((long long)n * ch / nch), j1 = (int)((long long)n * (ch + 1) / nch);
                    for (int j = j0; j < j1; ++j) cnt += succ[j] && (akey[j] < kc || (akey[j] == kc && j < c));
                } else if (c < n) {       // successes before it in index order
                    const int j0 = (int)((long long)c * ch / nch), j1 = (int)((long long)c * (ch + 1) / nch);
                    for (int j = j0; j < j1; ++j) cnt += succ[j];
                } else if (c - n < an) {  // old members before it in key order
                    const int l = c - n;
                    const int j0 = (int)((long long)an * ch / nch), j1 = (int)((long long)an * (ch + 1) / nch);
                    for (int j = j0; j < j1; ++j) {
                        const double kj = akey[n + j];
                        cnt += kj < kc || (kj == kc && j < l);
                    }
                }
                if (cnt) ISLES_ATOMIC_ADD(&tnew[c], cnt);
            }
        }
#endif
        BLOCK_SYNC();
        if (n_next < n)
            for (int i = tid; i < n; i += nth)
                if (order[i] < n_next) keep[order[i]] = i;
        if (ACAP > 0) {
            // P4b: each candidate's place t in the stable sort; kept parents numbered, dropped old
            // members' physical rows listed in the same order, kept old members' rows mapped
            const int D1 = LS_MAX(0, S + an - ACAP);
            for (int c = tid; c < n + ACAP; c += nth) {
                const int cnt = tnew[c];
                int t;
                if (c < n) {
                    t = succ[c] ? cnt : S + an + (c - cnt);
                    tnew[c] = t < ACAP ? (t < S ? t : t - an) : -1;   // the kept parent's number among them
                } else {
                    const int l = c - n;
                    if (l < an) {
                        t = S + cnt;
                        if (t >= ACAP) dropslot[t - ACAP] = amap[l];
                    } else {
                        t = n + l;
                        if (t >= ACAP) dropslot[D1 + t - LS_MAX(ACAP, n + an)] = amap[l];
                    }
                    if (t < ACAP) amap2[t] = amap[l];
                }
            }
        }
        BLOCK_SYNC();
        // P5: the kept parents' rows into the freed physical rows
        if (ACAP > 0) {
            for (int c = tid; c < n; c += nth) {
                const int q = tnew[c];
                if (q >= 0) amap2[q < S ? q : q + an] = dropslot[q];
            }
#ifdef ISLES_HOST_EMU
            for (int c = 0; c < n; ++c) {   // row by row (no division per element)
                const int q = tnew[c];
                if (q >= 0) memcpy(Aw + aoff + (long long)dropslot[q] * DIM, Xc + c * DIM, sizeof(T) * DIM);
            }
#else
            for (int e = tid; e < n * DIM; e += nth) {
                const int c = e / DIM;
                const int q = tnew[c];
                if (q >= 0) Aw[aoff + (long long)dropslot[q] * DIM + (e - c * DIM)] = Xc[e];
            }
#endif
            if (tid == 0) iscal[1] = LS_MIN(an + S, LS_MIN(ACAP, ls_round_half_up(dmul_rn(r_arc, (double)n_next))));
        }
        BLOCK_SYNC();
        // P6: the next population
        if (n_next < n) {
            for (int e = tid; e < n_next * DIM; e += nth) {
                const int t = e / DIM;
                Xc[e] = Xn[keep[t] * DIM + (e - t * DIM)];
            }
            for (int t = tid; t < n_next; t += nth) {
                fc[t] = fn[keep[t]];
                vc[t] = vn[keep[t]];
            }
        } else {
            for (int e = tid; e < n * DIM; e += nth) Xc[e] = Xn[e];
            for (int t = tid; t < n; t += nth) {
                fc[t] = fn[t];
                vc[t] = vn[t];
            }
        }
        for (int l = tid; l < ACAP; l += nth) amap[l] = amap2[l];
        for (int i = tid; i < n; i += nth) pos[i] = 0;   // P0's counters of the next generation
        nfe = nfe_end;
        n = n_next;
        BLOCK_SYNC();
    }
#if EXT_OBJ
    if (ls_ext_store) {   // else the block memory keeps the island's state (lshade_epoch_host_ext)
#endif
    for (int e = tid; e < CAP * DIM; e += nth) Xo[off + e] = Xc[e];
    for (int r = tid; r < CAP; r += nth) {
        fo[(long long)isl * CAP + r] = fc[r];
        vo[(long long)isl * CAP + r] = vc[r];
    }
    for (int h = tid; h < HMEM; h += nth) {
        MFo[(long long)isl * HMEM + h] = MF[h];
        MCRo[(long long)isl * HMEM + h] = MCR[h];
    }
    for (long long e = tid; e < (long long)ACAP * DIM; e += nth) {
        const long long l = e / DIM;
        Ao[aoff + e] = Aw[aoff + (long long)amap[l] * DIM + (e - l * DIM)];
    }
    if (tid == 0) {
        ko[isl] = iscal[0];
        a_no[isl] = iscal[1];
    }
#if EXT_OBJ
    }
#endif
    if (nan_local) ISLES_ATOMIC_ADD(nan_count, nan_local);
    if (hit_local < LS_NO_HIT) ISLES_ATOMIC_MIN(&hit_eval[isl], hit_local);
}

#ifdef ISLES_HOST_EMU
// every island in turn, one thread (tests); smem_bytes: epoch.py smem_bytes; 1: no memory
int lshade_epoch_host(
    const int n_islands, const long long smem_bytes,
    const T* X, const T* fx, const T* vx, const T* A, const long long* a_n, const T* MFi, const T* MCRi,
    const long long* kk, T* Xo, T* fo, T* vo, T* Ao, long long* a_no, T* MFo, T* MCRo, long long* ko, T* Aw, T* Xg,
    const u64* keys, const T* lower, const T* upper, const u64* rng_ctr, const long long lgen0, const int n0,
    const long long nfe0, const int n_gen, const long long max_nfe, const double p, const double r_arc,
    unsigned long long* nan_count, long long* hit_eval, const T target, const int use_target)
{
    // the block's shared memory, then the sorts' scratch (hscr)
    unsigned char* smem = (unsigned char*)malloc((size_t)smem_bytes + LS_HOST_SCRATCH);
    if (!smem) return 1;
    for (int b = 0; b < n_islands; ++b)
        lshade_epoch_block(b, 0, 1, smem, X, fx, vx, A, a_n, MFi, MCRi, kk, Xo, fo, vo, Ao, a_no, MFo, MCRo, ko, Aw, Xg,
                           keys, lower, upper, rng_ctr, lgen0, n0, nfe0, n_gen, max_nfe, p, r_arc, nan_count,
                           hit_eval, target, use_target);
    free(smem);
    return 0;
}
#if EXT_OBJ
// EXT_OBJ: lshade_epoch_host's generations with the problem's own objective, the islands in
// lockstep (module comment): per generation every island's phase 0, one callback on the calling
// thread, every island's phase 1; each island its own block memory for the whole call. The
// islands of each pass on n_threads OpenMP threads (with -fopenmp; the callback's buffers handed to
// their thread-locals; the islands are independent, so any count gives the one-thread state bit
// for bit). 1: no memory; 2: the objective raised.
int lshade_epoch_host_ext(
    const int n_threads, const int n_islands, const long long smem_bytes,
    const T* X, const T* fx, const T* vx, const T* A, const long long* a_n, const T* MFi, const T* MCRi,
    const long long* kk, T* Xo, T* fo, T* vo, T* Ao, long long* a_no, T* MFo, T* MCRo, long long* ko, T* Aw, T* Xg,
    const u64* keys, const T* lower, const T* upper, const u64* rng_ctr, const long long lgen0, const int n0,
    const long long nfe0, const int n_gen, const long long max_nfe, const double p, const double r_arc,
    unsigned long long* nan_count, long long* hit_eval, const T target, const int use_target)
{
    const T* const ext_f = ls_ext_f;
    const T* const ext_v = ls_ext_v;
    unsigned char** mem = (unsigned char**)calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof(unsigned char*));
    int rc = mem ? 0 : 1;
    for (int b = 0; b < n_islands && rc == 0; ++b) {
        mem[b] = (unsigned char*)malloc((size_t)smem_bytes + LS_HOST_SCRATCH);
        if (!mem[b]) rc = 1;
    }
    int n = n0;
    long long nfe = nfe0;
    // n_gen 0: one pass that loads and writes the state (the block's generations none)
    for (int k = 0; k < (n_gen > 0 ? n_gen : 1) && rc == 0; ++k) {
        for (int phase = (n_gen > 0 ? 0 : 1); phase < 2 && rc == 0; ++phase) {
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1)
            for (int b = 0; b < n_islands; ++b) {
                ls_ext_f = ext_f;
                ls_ext_v = ext_v;
                ls_ext_phase = phase;
                ls_ext_load = k == 0 && (phase == 0 || n_gen <= 0);
                ls_ext_store = k == n_gen - 1 || n_gen <= 0 ? phase == 1 : 0;
                lshade_epoch_block(b, 0, 1, mem[b], X, fx, vx, A, a_n, MFi, MCRi, kk, Xo, fo, vo, Ao, a_no, MFo, MCRo, ko,
                                   Aw, Xg, keys, lower, upper, rng_ctr, lgen0 + k, n, nfe, n_gen > 0, max_nfe, p, r_arc,
                                   nan_count, hit_eval, target, use_target);
            }
            if (phase == 0) {
                const long long n_bad = ls_ext_obj(n_islands, n);
                if (n_bad < 0) rc = 2;
                else *nan_count += (unsigned long long)n_bad;
            }
        }
        nfe += n;
        n = LS_MIN(n, ls_population_at(nfe, max_nfe));
    }
    for (int b = 0; mem && b < n_islands; ++b) free(mem[b]);
    free(mem);
    return rc;
}
#endif
#else
extern "C" __global__ void __launch_bounds__(EBLOCK, 1)
lshade_epoch(const T* __restrict__ X, const T* __restrict__ fx, const T* __restrict__ vx, const T* __restrict__ A,
             const long long* __restrict__ a_n, const T* __restrict__ MFi, const T* __restrict__ MCRi,
             const long long* __restrict__ kk, T* __restrict__ Xo, T* __restrict__ fo, T* __restrict__ vo,
             T* __restrict__ Ao, long long* __restrict__ a_no, T* __restrict__ MFo, T* __restrict__ MCRo,
             long long* __restrict__ ko, T* __restrict__ Aw, T* __restrict__ Xg, const u64* __restrict__ keys,
             const T* __restrict__ lower, const T* __restrict__ upper, const u64* __restrict__ rng_ctr,
             const long long lgen0, const int n0, const long long nfe0, const int n_gen, const long long max_nfe,
             const double p, const double r_arc, unsigned long long* __restrict__ nan_count,
             long long* __restrict__ hit_eval, const T target, const int use_target)
{
    extern __shared__ __align__(16) unsigned char isles_smem[];
    lshade_epoch_block(blockIdx.x, threadIdx.x, blockDim.x, isles_smem, X, fx, vx, A, a_n, MFi, MCRi, kk, Xo, fo, vo,
                       Ao, a_no, MFo, MCRo, ko, Aw, Xg, keys, lower, upper, rng_ctr, lgen0, n0, nfe0, n_gen, max_nfe, p,
                       r_arc, nan_count, hit_eval, target, use_target);
}
#endif
