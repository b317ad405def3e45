// de_epoch.cu: the SM-resident DE epoch (algorithms/de/epoch.py, issue 18 section 2): one thread
// block per island runs every generation of an epoch in one launch, the island's two populations
// (current and next) and their f, v in shared memory. Assembled after de.cu and the problem's fused
// objective, like de_generation.cu, plus the defines EBLOCK (threads per block), EMINB (blocks one
// SM should hold: the registers per thread follow) and ETPI (threads per row: a power of two <= 32
// when TPI == 32, else TPI).
//
// A generation: each group of ETPI threads takes a row (rows grp, grp + groups, ...), re-derives its
// Decisions with decide() (same draws, generation gen0 + ctr + k), builds the trial row with
// trial_coord() reading the current population in shared memory, folds it with obj_term, applies
// the NaN/penalty rule and Deb's selection, and writes the next population's row. One
// __syncthreads ends the generation (the populations swap).
//
// The fold is the per-generation kernel's, emulated: de_generation.cu's group has TPI lanes, lane
// v folding coordinates v, v + TPI, ... and the lanes merging by an xor butterfly over each warp
// (offsets 16 ... 1), then across the warps in warp order. Here thread p of a group holds the
// accumulators of the "virtual lanes" v = p + ETPI m (m < E_VL = TPI / ETPI), folds each in the
// same order, does the butterfly's offsets >= ETPI in registers and the rest by shuffles over ETPI
// lanes (obj_merge is commutative: both ends of a butterfly pair hold the same value). So f, v and
// every selection equal the per-generation kernel's bit for bit, with fewer threads per row (less
// repeated work per row: D = 50 needs 8 threads, not 32).
//
// The stop target: the first generation k after which some individual is feasible with
// f <= target goes to hit[island] (plan.py TargetTracker's rule), when use_target is set.
//
// Under -DISLES_HOST_EMU the same block code runs as C on the host with one thread per block
// (ETPI 1: every virtual lane in registers, the whole merge emulated), block syncs no-ops
// (tests/test_de_epoch.py).
//
// EXT_OBJ (host only): the problem's own objective instead of a fused one (a user's array code).
// de_epoch_host_ext runs the islands in lockstep, a generation at a time, in two passes of the
// block code (de_ext_phase): 0 builds every island's trial rows into de_ext_x (a NumPy buffer,
// I x NPOP x DIM) and returns; the callback de_ext_set installs evaluates them all at once
// (host_epoch.py: the problem's Evaluator on the (I, N, D) batch, as the NumPy twin's generation
// calls it: its f, v and NaN count); 1 selects row by row as the fused generation does.
#include "fitness.cuh"
#include "block.cuh"
#ifdef ISLES_HOST_EMU
#include <stdlib.h>
#define EGROUP_SYNC() ((void)0)
#define E_TPI 1
#undef ETPI
#define ETPI 1
#else
#include "reduce.cuh"
#if ETPI <= 32
#define EGROUP_SYNC() __syncwarp()
#else
#define EGROUP_SYNC() __syncthreads()
#endif
#define E_TPI ETPI
#endif

#if defined(ISLES_HOST_EMU) && EXT_OBJ
// The external objective (EXT_OBJ): fn(n_islands, n) evaluates the trial rows in de_ext_x
// (n_islands x n x DIM) and writes their f and v into de_ext_f, de_ext_v (n_islands x n); it returns
// the NaN evaluations, or -1 where the objective raised (Python keeps the error; the call stops).
// Per calling thread: a loaded library is shared by every plan of the same source in the process.
typedef long long (*de_ext_fn)(int n_islands, int n);
static __thread de_ext_fn de_ext_obj;
static __thread T* de_ext_x;
static __thread const T* de_ext_f;
static __thread const T* de_ext_v;
static __thread int de_ext_phase;   // 0: the trial rows; 1: the selection (module comment)
void de_ext_set(de_ext_fn fn, T* x, const T* f, const T* v) {
    de_ext_obj = fn;
    de_ext_x = x;
    de_ext_f = f;
    de_ext_v = v;
}
#endif

// virtual lanes per thread (module comment); the group merges' scratch (ETPI > 32), in T
#define E_VL (TPI / E_TPI)
#define E_RED (OBJ_NACC * NWARP)

// the per-generation kernel's group merge of the E_VL virtual lanes' accumulators acc (module
// comment); the total in acc[0] of every thread of the group
ISLES_DEV void de_epoch_merge(T (*acc)[OBJ_NACC], T* red, const int lane) {
    (void)red; (void)lane;
    // butterfly offsets >= ETPI within each warp: virtual lanes m and m ^ (o / ETPI) are local
#pragma unroll
    for (int o = 16; o >= E_TPI && o >= 1; o >>= 1) {
        const int mo = o / E_TPI;
#pragma unroll
        for (int m = 0; m < E_VL; ++m) {
            if (m & mo) continue;
            obj_merge(acc[m], acc[m | mo]);
            for (int s = 0; s < OBJ_NACC; ++s) acc[m | mo][s] = acc[m][s];
        }
    }
#ifdef ISLES_HOST_EMU
    // across the warps in warp order (de_generation.cu's isles_block_merge): warp w's total sits in
    // virtual lane 32 w
    for (int w = 1; w < NWARP; ++w) obj_merge(acc[0], acc[w * 32]);
#else
#if ETPI > 1
    // the offsets < ETPI: shuffles over the group's lanes (whole warps when ETPI >= 32)
    isles_warp_merge(acc[0], FULL_MASK, E_TPI < 32 ? E_TPI : 32);
#endif
#if TPI > 32
    isles_group_merge(acc[0], red, NWARP, lane >> 5);
#endif
#endif
}

ISLES_DEV void de_epoch_block(
    const int isl, const int tid, const int nthreads, T* smem, int* hitk,
    const T* X, const T* fx, const T* vx, T* Xo, T* fo, T* vo, const u64* keys,
    const T* lower, const T* upper, const long long gen0, const u64* rng_ctr, const int n_gen,
    unsigned long long* nan_count, long long* hit, const T target, const int use_target,
    const T Fw, const T CRt, const double log_cr, const int cr_case)
{
    T* Xc = smem;
    T* Xn = Xc + NPOP * DIM;
    T* fc = Xn + NPOP * DIM;
    T* vc = fc + NPOP;
    T* fn = vc + NPOP;
    T* vn = fn + NPOP;
    const int grp = tid / E_TPI, lane = tid - grp * E_TPI, ngrp = nthreads / E_TPI;
#if !defined(ISLES_HOST_EMU) && TPI > 32
    T* red = vn + NPOP + grp * E_RED;   // TPI > 32: ETPI == TPI, one group merge scratch per group
#endif
    const isz off = (isz)isl * NPOP * DIM;
    for (int e = tid; e < NPOP * DIM; e += nthreads) Xc[e] = X[off + e];
    for (int r = tid; r < NPOP; r += nthreads) {
        fc[r] = fx[(isz)isl * NPOP + r];
        vc[r] = vx[(isz)isl * NPOP + r];
    }
    if (tid == 0) *hitk = n_gen;
    const u64 key = keys[isl];
    const long long g0 = gen0 + (long long)rng_ctr[0];   // CounterRNG: generation + ctr
    unsigned long long nan_local = 0ull;
    BLOCK_SYNC();
    for (int k = 0; k < n_gen; ++k) {
        const long long g = g0 + k;
        // every group iterates the same number of times (the syncs inside are block-wide for TPI > 32)
#if EXT_OBJ
        if (de_ext_phase == 0)
#endif
        for (int rb = 0; rb < NPOP; rb += ngrp) {
            const int row = rb + grp;
            const int act = row < NPOP;
            const int i = act ? row : 0;
            const Decisions d = decide(key, g, i, log_cr, cr_case);
            const T* xc = Xc + (isz)i * DIM;
            T* un = Xn + (isz)i * DIM;
            // the trial coordinates of this thread's virtual lanes m (coordinates lane + ETPI m + TPI q),
            // in registers, unrolled (independent hash chains)
            T u[E_VL][ITEMS];
#if XOVER == 0
            // draw_bits(key, s_cross, i D + j) with the row's part of the counter hoisted: (a + b) G
            // = a G + b G modulo 2^64, and the coordinate's part a compile-time constant
            const u64 hrow = (key ^ d.s_cross) + ((u64)i * (u64)DIM + (u64)lane) * GOLDEN;
#endif
#pragma unroll
            for (int m = 0; m < E_VL; ++m) {
#pragma unroll
                for (int q = 0; q < ITEMS; ++q) {
                    const int j = lane + E_TPI * m + TPI * q;
                    T uj = (T)0;
                    if (act && j < DIM) {
                        // the target's coordinate is read only where the crossover keeps it
#if XOVER == 0
                        const bool take = (j == d.j0)
                            || (unifT(isles_mix64(hrow + (u64)(E_TPI * m + TPI * q) * GOLDEN)) < CRt);
#else
                        const bool take = takes_mutant(&d, key, i, j, CRt, DIM);
#endif
                        uj = take ? mutant_coord(Xc, 0, &d, key, i, j, Fw, lower, upper, DIM) : xc[j];
#if OBJ_NEXT
                        un[j] = uj;
#endif
#if EXT_OBJ
                        de_ext_x[((isz)isl * NPOP + i) * DIM + j] = uj;
#endif
                    }
                    u[m][q] = uj;
                }
            }
#if EXT_OBJ
            (void)u;
        }
        // phase 0 ends here: de_epoch_host_ext evaluates every island's trial rows at once (the
        // Evaluator's rule, NaN and penalty, applied and counted there), then phase 1 selects
        if (de_ext_phase == 0) return;
        for (int i = 0; i < NPOP; ++i) {
            const int act = 1;
            const T* xc = Xc + (isz)i * DIM;
            T* un = Xn + (isz)i * DIM;
            T f = de_ext_f[(isz)isl * NPOP + i], v = de_ext_v[(isz)isl * NPOP + i];
#else
#if OBJ_NEXT
            EGROUP_SYNC();   // the fold reads the neighbours' coordinates
#endif
            T acc[E_VL][OBJ_NACC];
#pragma unroll
            for (int m = 0; m < E_VL; ++m) {
                obj_init(acc[m]);
#pragma unroll
                for (int q = 0; q < ITEMS; ++q) {
                    const int j = lane + E_TPI * m + TPI * q;
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
#if !defined(ISLES_HOST_EMU) && TPI > 32
            de_epoch_merge(acc, red, lane);
#else
            de_epoch_merge(acc, (T*)0, lane);
#endif
            T v;
#if OBJ_HAS_V
            v = obj_violation(acc[0], DIM);
#else
            v = (T)0;
#endif
            T f = obj_final(acc[0], DIM);
#if OBJ_NEXT || TPI > 32
            EGROUP_SYNC();   // every thread of the group has read the trial row (and the merge scratch)
#endif
#endif
            if (act) {
#if EXT_OBJ
                const int bad = 0;   // counted by the callback
#else
                const int bad = isles_fix_fv(&f, &v);   // NaN = worst (fitness.cuh)
#endif
                const T ft = fc[i], vt = vc[i];
                // the trial replaces the target unless the target is strictly better (Deb's rules)
                const int accept = !isles_better(ft, vt, f, v);
#if EXT_OBJ
                const T* ux = de_ext_x + ((isz)isl * NPOP + i) * DIM;
                for (int j = 0; j < DIM; ++j) un[j] = accept ? ux[j] : xc[j];
#else
#pragma unroll
                for (int m = 0; m < E_VL; ++m) {
#pragma unroll
                    for (int q = 0; q < ITEMS; ++q) {
                        const int j = lane + E_TPI * m + TPI * q;
#if OBJ_NEXT
                        if (j < DIM && !accept) un[j] = xc[j];   // the trial row is there already
#else
                        if (j < DIM) un[j] = accept ? u[m][q] : xc[j];
#endif
                    }
                }
#endif
                if (lane == 0) {
                    const T fr = accept ? f : ft, vr = accept ? v : vt;
                    fn[i] = fr;
                    vn[i] = vr;
                    nan_local += (unsigned long long)bad;
                    if (use_target && vr <= (T)0 && fr <= target) ISLES_ATOMIC_MIN(hitk, k);
                }
            }
        }
        BLOCK_SYNC();
        T* t;
        t = Xc; Xc = Xn; Xn = t;
        t = fc; fc = fn; fn = t;
        t = vc; vc = vn; vn = t;
    }
    for (int e = tid; e < NPOP * DIM; e += nthreads) Xo[off + e] = Xc[e];
    for (int r = tid; r < NPOP; r += nthreads) {
        fo[(isz)isl * NPOP + r] = fc[r];
        vo[(isz)isl * NPOP + r] = vc[r];
    }
    if (nan_local) ISLES_ATOMIC_ADD(nan_count, nan_local);
    // the generation just finished counts one more (track.cu's rule)
    if (tid == 0 && use_target && *hitk < n_gen && hit[isl] < 0) hit[isl] = g0 + *hitk + 1;
}

#ifdef ISLES_HOST_EMU
// every island in turn, one thread (tests); 1: no memory
int de_epoch_host(
    const int n_islands, const T* X, const T* fx, const T* vx, T* Xo, T* fo, T* vo, const u64* keys,
    const T* lower, const T* upper, const long long gen0, const u64* rng_ctr, const int n_gen,
    unsigned long long* nan_count, long long* hit, const T target, const int use_target,
    const T Fw, const T CRt, const double log_cr, const int cr_case)
{
    T* smem = (T*)malloc(sizeof(T) * ((size_t)2 * NPOP * DIM + 4 * NPOP));
    if (!smem) return 1;
    int hitk = 0;
    for (int b = 0; b < n_islands; ++b)
        de_epoch_block(b, 0, 1, smem, &hitk, X, fx, vx, Xo, fo, vo, keys, lower, upper, gen0, rng_ctr, n_gen,
                       nan_count, hit, target, use_target, Fw, CRt, log_cr, cr_case);
    free(smem);
    return 0;
}
#if EXT_OBJ
// EXT_OBJ: de_epoch_host's generations with the problem's own objective, the islands in lockstep
// (module comment): per generation every island's trial rows, one callback on the calling thread,
// every island's selection, each island's state carried in Xo, fo, vo. The islands of each pass
// on n_threads OpenMP threads (with -fopenmp; each its own block memory, the callback's buffers
// handed to its thread-locals; the islands are independent, so any count gives the one-thread
// state bit for bit). 1: no memory; 2: the objective raised.
int de_epoch_host_ext(
    const int n_threads, const int n_islands, const T* X, const T* fx, const T* vx, T* Xo, T* fo, T* vo,
    const u64* keys, const T* lower, const T* upper, const long long gen0, const u64* rng_ctr, const int n_gen,
    unsigned long long* nan_count, long long* hit, const T target, const int use_target,
    const T Fw, const T CRt, const double log_cr, const int cr_case)
{
    T* const ext_x = de_ext_x;
    const T* const ext_f = de_ext_f;
    const T* const ext_v = de_ext_v;
    for (isz e = 0; e < (isz)n_islands * NPOP * DIM; ++e) Xo[e] = X[e];
    for (isz r = 0; r < (isz)n_islands * NPOP; ++r) {
        fo[r] = fx[r];
        vo[r] = vx[r];
    }
    int fail = 0;
    for (int k = 0; k < n_gen && !fail; ++k) {
        for (int phase = 0; phase < 2 && !fail; ++phase) {
#pragma omp parallel num_threads(n_threads > 0 ? n_threads : 1) reduction(| : fail)
            {
                de_ext_x = ext_x;
                de_ext_f = ext_f;
                de_ext_v = ext_v;
                de_ext_phase = phase;
                T* smem = (T*)malloc(sizeof(T) * ((size_t)2 * NPOP * DIM + 4 * NPOP));
                fail |= !smem;
                int hitk = 0;
#pragma omp for schedule(dynamic, 1)
                for (int b = 0; b < n_islands; ++b)
                    if (smem)
                        de_epoch_block(b, 0, 1, smem, &hitk, Xo, fo, vo, Xo, fo, vo, keys, lower, upper, gen0 + k,
                                       rng_ctr, 1, nan_count, hit, target, use_target, Fw, CRt, log_cr, cr_case);
                free(smem);
            }
            if (phase == 0 && !fail) {
                const long long n_bad = de_ext_obj(n_islands, NPOP);
                if (n_bad < 0) return 2;
                *nan_count += (unsigned long long)n_bad;
            }
        }
    }
    return fail;
}
#endif
#else
// one block of EBLOCK threads per island; dynamic shared memory (2 N D + 4 N + groups * E_RED) T
extern "C" __global__ void __launch_bounds__(EBLOCK, EMINB)
de_epoch(const T* __restrict__ X, const T* __restrict__ fx, const T* __restrict__ vx,
         T* __restrict__ Xo, T* __restrict__ fo, T* __restrict__ vo, const u64* __restrict__ keys,
         const T* __restrict__ lower, const T* __restrict__ upper, const long long gen0,
         const u64* __restrict__ rng_ctr, const int n_gen, unsigned long long* __restrict__ nan_count,
         long long* __restrict__ hit, const T target, const int use_target,
         const T Fw, const T CRt, const double log_cr, const int cr_case)
{
    extern __shared__ __align__(16) unsigned char isles_smem[];
    __shared__ int hitk;
    de_epoch_block(blockIdx.x, threadIdx.x, blockDim.x, (T*)isles_smem, &hitk, X, fx, vx, Xo, fo, vo, keys,
                   lower, upper, gen0, rng_ctr, n_gen, nan_count, hit, target, use_target, Fw, CRt, log_cr,
                   cr_case);
}
#endif
