// ga.cu: the fused GA generation (algorithms/ga/cuda.py). Prepended by Python: the configuration
// GA_N GA_W GA_L GA_NE GA_NEK GA_NR GA_S GA_XOVER GA_MUT GA_REAL GA_D GA_TPI GA_IPB GA_BLOCK
// GA_EBLOCK (PENALTY), the draw ids DRAW_SELECT DRAW_XOVER DRAW_CUT DRAW_XMASK DRAW_MUTATE
// DRAW_RENEW of algorithms/ga/ga.py, objective.cuh, the problem's fused objective (obj_*) and, for real
// problems, the encoding's enc_decode (encodings.cuh).
#include "fitness.cuh"
#include "ga_flips.cuh"
#include "block.cuh"
typedef unsigned long long ga_sz;

#define GA_NWARP ((GA_TPI) > 32 ? (GA_TPI) / 32 : 1)
#define GA_ITEMS ((GA_W + GA_TPI - 1) / GA_TPI)   // words per thread
#ifndef GA_MAX_ITEMS
#define GA_MAX_ITEMS 32                           // up to this many held in registers
#endif
#ifndef GA_MINB
#define GA_MINB 1                                 // __launch_bounds__ minimum blocks per SM
#endif

// rank order of the elite search: (v, f, index) lexicographic (Deb's rules, then the index)
ISLES_DEV int ga_key_less(T fa, T va, int ia, T fb, T vb, int ib) {
    return ISLES_BETTER(fa, va, fb, vb) || ((va == vb) && (fa == fb) && (ia < ib));
}
// genome bits of word w, and their mask (padding bits of the last word stay 0)
ISLES_DEV int ga_word_bits(int w) { return w == GA_W - 1 ? GA_L - 32 * (GA_W - 1) : 32; }
ISLES_DEV unsigned int ga_valid(int w) {
    const int nb = ga_word_bits(w);
    return nb >= 32 ? 0xffffffffu : ((1u << nb) - 1u);
}
// the min(max(a, 0), 32) lowest bits
ISLES_DEV unsigned int ga_low(int a) { return a <= 0 ? 0u : (a >= 32 ? 0xffffffffu : ((1u << a) - 1u)); }

// slot kinds: 0 elite copy, 1 child, 2 renewal
ISLES_DEV int ga_kind(int c) { return c < GA_NE ? 0 : (c >= GA_N - GA_NR ? 2 : 1); }

// Decisions of child slot c (algorithms/ga/ga.py), drawn by ga_select:
//   one_point: bits [0, a) from parent 1, [a, L) from parent 2 (a = L: no crossover);
//   two_point: bits [a, b) from parent 2 (a = b = 0: no crossover);
//   uniform:   a = 1 crossover, 0 none; mpos: the seed mutation's bit, or -1.
typedef struct { int src, p2, a, b, mpos; } GASel;

// tournament of GA_S candidates for parent p of slot c (DRAW_SELECT, index (2c + p) S + t)
ISLES_DEV int ga_tour(u64 key, u64 s_sel, int c, int p, const T* f, const T* v) {
    int win = 0;
    T fw = (T)0, vw = (T)0;
#pragma unroll
    for (int t = 0; t < GA_S; ++t) {
        const double u = unif53(draw_bits(key, s_sel, ((ga_sz)(2 * (ga_sz)c + (ga_sz)p)) * GA_S + (ga_sz)t));
        int i = (int)(u * (double)GA_N);
        i = i < GA_N - 1 ? i : GA_N - 1;
        const T fi = f[i], vi = v[i];
        if (t == 0 || isles_better(fi, vi, fw, vw)) { win = i; fw = fi; vw = vi; }
    }
    return win;
}

ISLES_DEV GASel ga_decide(u64 key, long long g, int c, const T* f, const T* v, double p_c, double p_m) {
    GASel d;
    const u64 gb = ((u64)g) << 16;
    const u64 s_sel = isles_mix64(gb + DRAW_SELECT);
    d.src = ga_tour(key, s_sel, c, 0, f, v);
    d.p2 = ga_tour(key, s_sel, c, 1, f, v);
    const int do_x = unif53(draw_bits(key, isles_mix64(gb + DRAW_XOVER), (u64)c)) < p_c;
    const u64 s_cut = isles_mix64(gb + DRAW_CUT);
    d.a = 0; d.b = 0; d.mpos = -1;
#if GA_XOVER == 0
    {
        int k = 1;
        if (GA_L >= 2) {
            const double u = unif53(draw_bits(key, s_cut, 2ull * (u64)c));
            k = (int)(u * (double)(GA_L - 1));
            k = (k < GA_L - 2 ? k : GA_L - 2) + 1;
        }
        d.a = do_x ? k : GA_L;
    }
#elif GA_XOVER == 1
    if (do_x) {
        const double u0 = unif53(draw_bits(key, s_cut, 2ull * (u64)c));
        const double u1 = unif53(draw_bits(key, s_cut, 2ull * (u64)c + 1ull));
        int c0 = (int)(u0 * (double)(GA_L + 1)); c0 = c0 < GA_L ? c0 : GA_L;
        int c1 = (int)(u1 * (double)(GA_L + 1)); c1 = c1 < GA_L ? c1 : GA_L;
        d.a = c0 < c1 ? c0 : c1;
        d.b = c0 < c1 ? c1 : c0;
    }
#else
    d.a = do_x;
#endif
#if GA_MUT == 2
    {
        const u64 s_mut = isles_mix64(gb + DRAW_MUTATE);
        const double u0 = unif53(draw_bits(key, s_mut, 2ull * (u64)c));
        const double u1 = unif53(draw_bits(key, s_mut, 2ull * (u64)c + 1ull));
        if (u0 < p_m) {
            int pos = (int)(u1 * (double)GA_L);
            d.mpos = pos < GA_L - 1 ? pos : GA_L - 1;
        }
    }
#endif
    return d;
}

// Word w of slot c before mutation: the elite row's word, the crossover of the parents' words
// (reading only the parent words it needs), or a renewal word; hx/hr: uniform-mask/renewal hash
// inputs (key ^ s) + (c W + w) GOLDEN.
ISLES_DEV unsigned int ga_base_word(int kind, const GASel* d, const unsigned int* p1,
                                    const unsigned int* p2, int w, u64 hx, u64 hr) {
    if (kind == 0) return p1[w];
    if (kind == 2) return (unsigned int)(isles_mix64(hr) >> 32) & ga_valid(w);
#if GA_XOVER == 0
    const unsigned int m1 = ga_low(d->a - 32 * w);
    return m1 == 0xffffffffu ? p1[w] : (m1 == 0u ? p2[w] : ((p1[w] & m1) | (p2[w] & ~m1)));
#elif GA_XOVER == 1
    const unsigned int m2 = ga_low(d->b - 32 * w) & ~ga_low(d->a - 32 * w);
    return m2 == 0u ? p1[w] : (m2 == 0xffffffffu ? p2[w] : ((p1[w] & ~m2) | (p2[w] & m2)));
#else
    if (!d->a) return p1[w];
    const unsigned int m2 = (unsigned int)(isles_mix64(hx) >> 32);
    return (p1[w] & ~m2) | (p2[w] & m2);
#endif
    (void)hx;
}

// The mutation of word w of a child slot (hm = (key ^ s_mut) + 32 (c W + w) GOLDEN).
ISLES_DEV unsigned int ga_mut_word(const GASel* d, u64 key, u64 s_mut, u64 hm, int c, int w,
                                   const u64* K, u64 kfull, u64 klast) {
#if GA_MUT == 1
    return ga_flips(key, s_mut, hm, ((u64)c * GA_W + (u64)w) * 32ull, ga_word_bits(w), K,
                    w == GA_W - 1 ? klast : kfull);
#elif GA_MUT == 2
    return (d->mpos >= 0 && (d->mpos >> 5) == w) ? (1u << (d->mpos & 31)) : 0u;
#else
    return 0u;
#endif
}

// Thread t's part of the objective of a packed row (the fused-objective contract).
ISLES_DEV void ga_eval_part(T* acc, const unsigned int* row, int t) {
    obj_init(acc);
#if GA_REAL
#pragma unroll 2
    for (int j = t; j < GA_D; j += GA_TPI) {
        const T x = enc_decode(row, j);
#if OBJ_NEXT
        const T xn = (j + 1 < GA_D) ? enc_decode(row, j + 1) : (T)0;
#else
        const T xn = (T)0;
#endif
        obj_term(acc, x, xn, j);
    }
#else
    const int nu = obj_units(GA_L);
#pragma unroll 8
    for (int u = t; u < nu; u += GA_TPI) obj_unit(acc, row, u, GA_L);
#endif
}

// f, v from the merged accumulator with the evaluator's rules (isles_fix_fv, fitness.cuh); the
// static penalty's factor is the macro PENALTY (the argument `penalty` is the same number).
ISLES_DEV int ga_finish(const T* acc, T penalty, T* fo, T* vo) {
    (void)penalty;
#if GA_REAL
    T f = obj_final(acc, GA_D);
#else
    T f = obj_final(acc, GA_L);
#endif
#if OBJ_HAS_V
#if GA_REAL
    T v = obj_violation(acc, GA_D);
#else
    T v = obj_violation(acc, GA_L);
#endif
#else
    T v = (T)0;
#endif
    const int bad = isles_fix_fv(&f, &v);
    *fo = f;
    *vo = v;
    return bad;
}

// The decisions of slot c of an island: an elite copy's row (el: the island's elite), a child's
// (seli: the island's GASel rows, drawn by ga_decide), none for a renewal.
ISLES_DEV GASel ga_slot_sel(int kind, int c, const int* el, const GASel* seli) {
    GASel d;
    d.src = 0; d.p2 = 0; d.a = 0; d.b = 0; d.mpos = -1;
    if (kind == 0) d.src = el[c];
    else if (kind == 1) d = seli[c];
    return d;
}

// Thread t's words w = t, t + TPI, ... of slot c in generation g (crossover or copy or renewal,
// then the mutation of a child): to out (the next population's row) and row (the group's staged
// row). p1, p2: the rows of d->src and d->p2.
ISLES_DEV void ga_slot_words(int t, int kind, const GASel* d, u64 key, long long g, int c,
                             const unsigned int* p1, const unsigned int* p2, unsigned int* out,
                             unsigned int* row, const u64* K) {
    const u64 gb = ((u64)g) << 16;
    const u64 s_mut = isles_mix64(gb + DRAW_MUTATE);
    const u64 kfull = K[32], klast = K[ga_word_bits(GA_W - 1)];
    const u64 iw0 = (u64)c * GA_W + (u64)t;                       // hash index of word t
    const u64 hx0 = (key ^ isles_mix64(gb + DRAW_XMASK)) + iw0 * GOLDEN;
    const u64 hr0 = (key ^ isles_mix64(gb + DRAW_RENEW)) + iw0 * GOLDEN;
    const u64 hm0 = (key ^ s_mut) + 32ull * iw0 * GOLDEN;
    const u64 hstep = (u64)GA_TPI * GOLDEN;
#if GA_ITEMS <= GA_MAX_ITEMS
    unsigned int x[GA_ITEMS];
#pragma unroll
    for (int k = 0; k < GA_ITEMS; ++k) {      // parent words first (loads in flight) ...
        const int w = t + k * GA_TPI;
        x[k] = (w < GA_W) ? ga_base_word(kind, d, p1, p2, w, hx0 + (u64)k * hstep, hr0 + (u64)k * hstep) : 0u;
    }
    if (kind == 1) {
#pragma unroll
        for (int k = 0; k < GA_ITEMS; ++k) {  // ... while the mutation masks are drawn
            const int w = t + k * GA_TPI;
            if (w < GA_W) x[k] ^= ga_mut_word(d, key, s_mut, hm0 + 32ull * (u64)k * hstep, c, w, K, kfull, klast);
        }
    }
#pragma unroll
    for (int k = 0; k < GA_ITEMS; ++k) {
        const int w = t + k * GA_TPI;
        if (w < GA_W) { out[w] = x[k]; row[w] = x[k]; }
    }
#else
    for (int w = t, k = 0; w < GA_W; w += GA_TPI, ++k) {
        unsigned int xw = ga_base_word(kind, d, p1, p2, w, hx0 + (u64)k * hstep, hr0 + (u64)k * hstep);
        if (kind == 1) xw ^= ga_mut_word(d, key, s_mut, hm0 + 32ull * (u64)k * hstep, c, w, K, kfull, klast);
        out[w] = xw;
        row[w] = xw;
    }
#endif
}

// The stop target of an island whose best (rank 0 of the elite search) is b: hit = g the first
// time it is feasible with f <= target (IslandAlgorithm.track_target's rule)
ISLES_DEV void ga_track(const T* fi, const T* vi, int b, long long* hit, T target, long long g) {
    if (*hit < 0 && vi[b] <= (T)0 && fi[b] <= target) *hit = g;
}

// shared scratch of the block-wide elite search (ga_elite_block)
typedef struct { T sf[32], sv[32]; int si[32]; T pf, pv; int pi; } GAEliteSh;

#ifdef ISLES_HOST_EMU
// ---- host emulation: the kernels' code run sequentially (tests) ----------------------------
static void ga_group_eval(const unsigned int* row, T penalty, T* fo, T* vo, int* bad) {
    T tot[OBJ_NACC], acc[OBJ_NACC];
    for (int t = 0; t < GA_TPI; ++t) {
        ga_eval_part(acc, row, t);
        if (t == 0) { for (int k = 0; k < OBJ_NACC; ++k) tot[k] = acc[k]; }
        else obj_merge(tot, acc);
    }
    *bad = ga_finish(tot, penalty, fo, vo);
}

// The island's elite in rank order into el[0, GA_NEK) (n_elite searches for the least (v, f, index)
// key above the previous one): the device ga_elite_block's contract, one thread.
static void ga_elite_block(const T* fi, const T* vi, int* el, int tid, int nthreads, GAEliteSh* sh) {
    (void)tid; (void)nthreads; (void)sh;
    T pf = (T)0, pv = (T)0; int pi = -1;
    for (int e = 0; e < GA_NEK; ++e) {
        T bf = (T)0, bv = (T)0; int bi = -1;
        for (int i = 0; i < GA_N; ++i) {
            if (e > 0 && !ga_key_less(pf, pv, pi, fi[i], vi[i], i)) continue;
            if (bi < 0 || ga_key_less(fi[i], vi[i], i, bf, bv, bi)) { bf = fi[i]; bv = vi[i]; bi = i; }
        }
        el[e] = bi;
        pf = bf; pv = bv; pi = bi;
    }
}

// Slot c of the next population (the device ga_slot's contract: one thread does the group's work,
// threads t = 0 .. TPI - 1 in turn, obj_merge in thread order)
static void ga_slot(int c, int t, unsigned int* row, T* red, const unsigned int* Pi, const T* fi, const T* vi,
                    const int* el, const GASel* seli, unsigned int* Pni, T* fni, T* vni, u64 key, long long g,
                    unsigned long long* nan_count, const u64* K, T penalty) {
    (void)t; (void)red;
    const int kind = ga_kind(c);
    const GASel d = ga_slot_sel(kind, c, el, seli);
    for (int tt = 0; tt < GA_TPI; ++tt)
        ga_slot_words(tt, kind, &d, key, g, c, Pi + (ga_sz)d.src * GA_W, Pi + (ga_sz)d.p2 * GA_W,
                      Pni + (ga_sz)c * GA_W, row, K);
    if (kind == 0) { fni[c] = fi[d.src]; vni[c] = vi[d.src]; return; }
    int bad = 0;
    ga_group_eval(row, penalty, fni + c, vni + c, &bad);
    if (bad) *nan_count += 1;
}

// ga_select's work: elite search (and target), then the child slots' decisions
void ga_select_host(const T* f, const T* v, int* elite, long long* hit, int track, T target,
                    long long g, int n_islands, GASel* sel, const u64* keys, double p_c, double p_m) {
    for (int isl = 0; isl < n_islands; ++isl) {
        const T* fi = f + (ga_sz)isl * GA_N;
        const T* vi = v + (ga_sz)isl * GA_N;
        ga_elite_block(fi, vi, elite + isl * GA_NEK, 0, 1, 0);
        if (track) ga_track(fi, vi, elite[isl * GA_NEK], hit + isl, target, g);
        if (sel)
            for (int c = 0; c < GA_N; ++c)
                if (ga_kind(c) == 1) sel[(ga_sz)isl * GA_N + c] = ga_decide(keys[isl], g, c, fi, vi, p_c, p_m);
    }
}

void ga_generation_host(const unsigned int* P, const T* f, const T* v, const int* elite, const GASel* sel,
                        unsigned int* Pn, T* fn, T* vn, const u64* keys, long long g,
                        unsigned long long* nan_count, int total, const u64* K, T penalty, unsigned int* row) {
    for (int gind = 0; gind < total; ++gind) {
        const int isl = gind / GA_N, c = gind - isl * GA_N;
        const ga_sz o = (ga_sz)isl * GA_N;
        ga_slot(c, 0, row, 0, P + o * GA_W, f + o, v + o, elite + isl * GA_NEK, sel + o, Pn + o * GA_W, fn + o,
                vn + o, keys[isl], g, nan_count, K, penalty);
    }
}

void ga_eval_host(const unsigned int* rows, int n, T* fo, T* vo, int* bad, T penalty) {
    for (int r = 0; r < n; ++r) ga_group_eval(rows + (ga_sz)r * GA_W, penalty, fo + r, vo + r, bad + r);
}

#else
// ---- CUDA kernels --------------------------------------------------------------------------
#include "reduce.cuh"
#if GA_TPI >= 32
#define GA_GROUP_MASK 0xffffffffu
#else
#define GA_GROUP_MASK ((((1u << GA_TPI) - 1u)) << ((threadIdx.x & 31) & ~(GA_TPI - 1)))
#endif
#if GA_TPI > 32
#define GA_GROUP_SYNC() __syncthreads()
#else
#define GA_GROUP_SYNC() __syncwarp(GA_GROUP_MASK)
#endif

// Merge the group's accumulators (reduce.cuh); thread t == 0 of the group holds the total.
ISLES_DEV void ga_group_merge(T* acc, T* red) {
    isles_warp_merge(acc, GA_GROUP_MASK, GA_TPI < 32 ? GA_TPI : 32);
#if GA_TPI > 32
    isles_block_merge(acc, red, GA_NWARP);
#endif
}

// (f, v) of the group's row staged in shared memory (every thread its part, the group merges,
// ga_finish); thread t == 0 gets the result and the NaN flag, the others 0
ISLES_DEV int ga_group_fv(const unsigned int* row, int t, T* red, T penalty, T* fo, T* vo) {
    GA_GROUP_SYNC();
    T acc[OBJ_NACC];
    ga_eval_part(acc, row, t);
    ga_group_merge(acc, red);
    return t == 0 ? ga_finish(acc, penalty, fo, vo) : 0;
}

// the (v, f, index)-least of the warp's candidates (bi < 0: none), in lane 0
ISLES_DEV void ga_warp_min(T* bf, T* bv, int* bi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const T of = __shfl_down_sync(0xffffffffu, *bf, o);
        const T ov = __shfl_down_sync(0xffffffffu, *bv, o);
        const int oi = __shfl_down_sync(0xffffffffu, *bi, o);
        if (oi >= 0 && (*bi < 0 || ga_key_less(of, ov, oi, *bf, *bv, *bi))) { *bf = of; *bv = ov; *bi = oi; }
    }
}

// The island's elite in rank order into el[0, GA_NEK): n_elite block-wide searches for the least
// (v, f, index) key above the previous one, by the block's nthreads threads (whole warps, at most
// 1024) of index tid; every thread of the block calls it; el is complete for all of them on return.
ISLES_DEV void ga_elite_block(const T* fi, const T* vi, int* el, int tid, int nthreads, GAEliteSh* sh) {
    const int lane = tid & 31, wid = tid >> 5;
    const int nw = nthreads >> 5;
    for (int e = 0; e < GA_NEK; ++e) {
        T bf = (T)0, bv = (T)0; int bi = -1;
#pragma unroll 4
        for (int i = tid; i < GA_N; i += nthreads) {
            const T fx = fi[i], vx = vi[i];
            if (e > 0 && !ga_key_less(sh->pf, sh->pv, sh->pi, fx, vx, i)) continue;
            if (bi < 0 || ga_key_less(fx, vx, i, bf, bv, bi)) { bf = fx; bv = vx; bi = i; }
        }
        ga_warp_min(&bf, &bv, &bi);
        if (lane == 0) { sh->sf[wid] = bf; sh->sv[wid] = bv; sh->si[wid] = bi; }
        __syncthreads();
        if (wid == 0) {
            bi = lane < nw ? sh->si[lane] : -1;
            bf = lane < nw ? sh->sf[lane] : (T)0;
            bv = lane < nw ? sh->sv[lane] : (T)0;
            ga_warp_min(&bf, &bv, &bi);
            if (lane == 0) { el[e] = bi; sh->pf = bf; sh->pv = bv; sh->pi = bi; }
        }
        __syncthreads();
    }
}

// Slot c of the next population by the TPI threads t of its group (row: the group's shared row,
// red: the merge's shared scratch): words (ga_slot_words), then an elite copy keeps its (f, v),
// another slot is evaluated (ga_group_fv) and a NaN counted; island-offset arrays (Pi, fi, vi, el,
// seli: this generation; Pni, fni, vni: the next). Every thread of the group calls it (for TPI > 32
// the group is the block).
ISLES_DEV void ga_slot(int c, int t, unsigned int* row, T* red, const unsigned int* Pi, const T* fi, const T* vi,
                       const int* el, const GASel* seli, unsigned int* Pni, T* fni, T* vni, u64 key, long long g,
                       unsigned long long* nan_count, const u64* K, T penalty) {
    const int kind = ga_kind(c);
    const GASel d = ga_slot_sel(kind, c, el, seli);
    ga_slot_words(t, kind, &d, key, g, c, Pi + (ga_sz)d.src * GA_W, Pi + (ga_sz)d.p2 * GA_W,
                  Pni + (ga_sz)c * GA_W, row, K);
    if (kind == 0) {   // elite copy: keeps its (f, v); uniform over the group
        if (t == 0) { fni[c] = fi[d.src]; vni[c] = vi[d.src]; }
        return;
    }
    T fo, vo;
    const int bad = ga_group_fv(row, t, red, penalty, &fo, &vo);
    if (t == 0) {
        if (bad) ISLES_ATOMIC_ADD(nan_count, 1ull);
        fni[c] = fo;
        vni[c] = vo;
    }
}

// Selection of a generation. Blocks [0, I): the island's elite in rank order (ga_elite_block) and
// the stop target (ga_track). Blocks I...: one thread per slot, the child slots' decisions
// (tournaments, crossover, seed mutation).
extern "C" __global__ void __launch_bounds__(GA_EBLOCK)
ga_select(const T* __restrict__ f, const T* __restrict__ v, int* __restrict__ elite,
          long long* __restrict__ hit, const int track, const T target,
          const long long* __restrict__ gen_dev, const long long gen_off, const u64* __restrict__ rng_ctr,
          GASel* __restrict__ sel, const u64* __restrict__ keys, const int n_islands, const double p_c,
          const double p_m)
{
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    if ((int)blockIdx.x >= n_islands) {
        const long long gind = (long long)(blockIdx.x - n_islands) * GA_EBLOCK + threadIdx.x;
        if (gind >= (long long)n_islands * GA_N) return;
        const int isl = (int)(gind / GA_N), c = (int)(gind - (long long)isl * GA_N);
        if (ga_kind(c) != 1) return;
        sel[gind] = ga_decide(keys[isl], g, c, f + (ga_sz)isl * GA_N, v + (ga_sz)isl * GA_N, p_c, p_m);
        return;
    }
    __shared__ GAEliteSh sh;
    const int isl = blockIdx.x;
    const T* fi = f + (ga_sz)isl * GA_N;
    const T* vi = v + (ga_sz)isl * GA_N;
    ga_elite_block(fi, vi, elite + isl * GA_NEK, threadIdx.x, GA_EBLOCK, &sh);
    if (track && threadIdx.x == 0) ga_track(fi, vi, elite[isl * GA_NEK], hit + isl, target, g);
}

// One generation of every slot of every island (module docstring): words, then the objective.
extern "C" __global__ void __launch_bounds__(GA_BLOCK, GA_MINB)
ga_generation(const unsigned int* __restrict__ P, const T* __restrict__ f, const T* __restrict__ v,
              const int* __restrict__ elite, const GASel* __restrict__ sel, unsigned int* __restrict__ Pn,
              T* __restrict__ fn, T* __restrict__ vn, const u64* __restrict__ keys,
              const long long* __restrict__ gen_dev, const long long gen_off, const u64* __restrict__ rng_ctr,
              unsigned long long* __restrict__ nan_count, const int total, const u64* __restrict__ K,
              const T penalty)
{
    extern __shared__ unsigned int ga_rows[];
    __shared__ T red[GA_NWARP * OBJ_NACC];
    const int grp = threadIdx.x / GA_TPI;
    const int t = threadIdx.x - grp * GA_TPI;
    const int gind = blockIdx.x * GA_IPB + grp;
    if (gind >= total) return;   // whole groups (block mode has no partial block)
    const int isl = gind / GA_N, c = gind - isl * GA_N;
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    const ga_sz o = (ga_sz)isl * GA_N;
    ga_slot(c, t, ga_rows + grp * GA_W, red, P + o * GA_W, f + o, v + o, elite + isl * GA_NEK, sel + o,
            Pn + o * GA_W, fn + o, vn + o, keys[isl], g, nan_count, K, penalty);
}

// Objective of `rows` packed rows (the generation kernel's code; self-check and tests).
extern "C" __global__ void __launch_bounds__(GA_BLOCK)
ga_eval_rows(const unsigned int* __restrict__ rows_in, T* __restrict__ fo, T* __restrict__ vo,
             int* __restrict__ bad, const int rows, const T penalty)
{
    extern __shared__ unsigned int ga_rows[];
    __shared__ T red[GA_NWARP * OBJ_NACC];
    const int grp = threadIdx.x / GA_TPI;
    const int t = threadIdx.x - grp * GA_TPI;
    const int gind = blockIdx.x * GA_IPB + grp;
    if (gind >= rows) return;
    unsigned int* row = ga_rows + grp * GA_W;
    for (int w = t; w < GA_W; w += GA_TPI) row[w] = rows_in[(ga_sz)gind * GA_W + w];
    T f1, v1;
    const int b = ga_group_fv(row, t, red, penalty, &f1, &v1);
    if (t == 0) {
        bad[gind] = b;
        fo[gind] = f1;
        vo[gind] = v1;
    }
}

#endif  // ISLES_HOST_EMU
