"""Fused CUDA generation of the GA (:mod:`isles.algorithms.ga.ga`), and its host emulation.

A plain CuPy loop of the array code launches dozens of kernels per generation and, for long
genomes, writes and re-reads the whole child population several times (crossover, mutation,
unpacking for the objective). Here one generation is **two kernel launches**:

* ``ga_select`` -- blocks ``[0, I)``, one per island: the island's ``n_elite`` best individuals
  in rank order (Deb's rules on ``(v, f)``, ties to the lower index: ``n_elite`` block-wide
  minimum searches, each over the keys greater than the previous winner's) and the stop target
  (island ``i``'s ``hit_generation`` is set to the current generation when its best is feasible
  with ``f <= target``, what :meth:`isles.algorithms.core.base.IslandAlgorithm.track_target` records);
  the other blocks, one thread per slot: the child slots' decisions from the counter hash
  (tournaments over ``(f, v)``, crossover flag and cuts, seed mutation), 20 bytes per slot;
* ``ga_generation`` -- one *group* of ``TPI`` threads per slot of the next population (``IPB``
  groups per block for short genomes, one block of up to 256 threads for long ones): each thread
  builds its words ``w = t, t + TPI, ...``: it issues the reads of only the parent words it needs
  (coalesced; crossover by word masks), draws the words' per-bit mutation masks meanwhile
  (geometric gaps: about one hash per word, no random number per bit) or the renewal words, and
  writes the words to the next population **and** to a shared-memory row; the group then
  evaluates the row from shared memory through the problem's *fused objective* (strided
  ``obj_term``/``obj_unit``, ``obj_merge`` by warp shuffles and shared memory,
  ``obj_final``/``obj_violation``), applies the evaluator's NaN rule (and the static penalty when
  configured) and writes ``f``, ``v`` and an atomic NaN count. The child is never re-read from
  global memory.

:meth:`FusedGA.run` captures ``GRAPH_GENERATIONS`` (64) generations, ping-ponging between two
preallocated populations, plus a kernel that advances a device-side generation counter, into a
**CUDA graph** and replays it (as :class:`isles.algorithms.de.cuda.FusedDE`); the generation of the
draws is ``gen_off + gen_dev + rng.ctr``. Neither :meth:`FusedGA.step` nor :meth:`FusedGA.run`
synchronises with the host.

**Same individuals as the NumPy twin.** Draw ids, index layouts and integer arithmetic are those
of :mod:`isles.algorithms.ga.ga` (float64 uniforms, ``floor(u N)``, the same integer mutation thresholds,
masks by words), so under the same seed the fused path builds bit-identical genomes as long as the
objective values agree: exactly for integer-valued objectives (OneMax, trap-k, knapsack with
integer data), up to the rounding of the objective's sum order and CUDA's ``cos``/``exp`` for
real ones (a tournament between two individuals whose ``f`` tie to rounding may then go either
way). The plan checks its objective against the problem's own on random genomes when it is
built, and falls back to the array code (with a warning) if they disagree.

**Host emulation.** The whole generation except the launch scaffolding (decisions, words,
mutation, evaluation, NaN rule, elite search) is plain C as well: compiled with
``-DISLES_HOST_EMU`` by the system C compiler, :class:`HostGA` runs the kernel's code on the CPU
(groups emulated by loops; ``obj_merge`` in thread order), so CI tests it against NumPy without
a GPU (``tests/test_ga.py``).

Supported: CuPy; a problem with ``cuda_objective`` (the fused-objective contract: ``OBJ_NACC``,
``OBJ_HAS_V``, ``obj_init``/``obj_merge``/``obj_final`` [``obj_violation``] and, for real problems,
``OBJ_NEXT``/``obj_term`` with the encoding's ``enc_decode``, for bit problems
``obj_units``/``obj_unit``); float32 or float64; ``I N < 2^31``; a row that fits the device's
shared memory per block (227 KiB on an H100: about 1.8 million bits). Anything else runs the
array code.

Measured on one H100 80GB HBM3 (CuPy 14.2, ``GA.run`` with graph replay, CUDA events, best of
3 x 256 generations, population 4096, one island, float32): trap-5 with 10^5 bits 101 us per
generation (float64 106), of which the trap objective's 20,000 units per individual take about
40 us (the generation without evaluation: 60 us; without evaluation and mutation: 47 us; reading
one parent and writing the child, 102 MB, is about 35 us at the copy bandwidth); OneMax 10^5 bits
65 us; knapsack 10^4 items (strongly correlated) 32 us. Seed 002's workload (Rastrigin, 2
variables, 64 bits, population 640): 7.8 us per generation for one island, 11.5 us for 100
islands in one batch (0.12 us per island-generation).
"""
from __future__ import annotations

import ctypes
import logging
import warnings

import numpy as np

from isles.algorithms.core.backend import device_constant
from isles.algorithms.core.cuda_prelude import ARITHMETIC, HASH, MATH
from isles.algorithms.core.graph import PingPongGraph
from isles.algorithms.core.plan import kernels
from isles.algorithms.ga.ga import (
    CROSSOVERS,
    DRAW_CUT,
    DRAW_MUTATE,
    DRAW_RENEW,
    DRAW_SELECT,
    DRAW_XMASK,
    DRAW_XOVER,
    flip_thresholds,
)
from isles.problems.base import objective_macros
from isles.problems.cuda_check import compile_c, compiler

log = logging.getLogger(__name__)

GRAPH_GENERATIONS = 64  # generations per captured CUDA graph (even: ping-pong ends where it began)
MAX_TPI = 256
VERIFY_RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}

GA_SOURCE = r"""
// ---- isles fused GA generation (algorithms/ga/cuda.py); configuration macros are prepended ----
// GA_N GA_W GA_L GA_NE GA_NEK GA_NR GA_S GA_XOVER GA_MUT GA_REAL GA_D GA_TPI GA_IPB GA_BLOCK
// GA_EBLOCK GA_PENALTY; the problem's fused objective (obj_*) and, for real problems, enc_decode
// precede.
typedef unsigned long long ga_sz;
""" + f"""
#define DRAW_SELECT {DRAW_SELECT}ull
#define DRAW_XOVER {DRAW_XOVER}ull
#define DRAW_CUT {DRAW_CUT}ull
#define DRAW_XMASK {DRAW_XMASK}ull
#define DRAW_MUTATE {DRAW_MUTATE}ull
#define DRAW_RENEW {DRAW_RENEW}ull
""" + r"""
#define GA_NWARP ((GA_TPI) > 32 ? (GA_TPI) / 32 : 1)
#define GA_ITEMS ((GA_W + GA_TPI - 1) / GA_TPI)   // words per thread
#ifndef GA_MAX_ITEMS
#define GA_MAX_ITEMS 32                           // up to this many held in registers
#endif
#ifndef GA_MINB
#define GA_MINB 1                                 // __launch_bounds__ minimum blocks per SM
#endif

// Deb's rules: a strictly better than b (problems/constraints.py better)
ISLES_DEV int ga_better(T fa, T va, T fb, T vb) { return (va < vb) || ((va == vb) && (fa < fb)); }
// rank order of the elite search: (v, f, index) lexicographic
ISLES_DEV int ga_key_less(T fa, T va, int ia, T fb, T vb, int ib) {
    return (va < vb) || ((va == vb) && ((fa < fb) || ((fa == fb) && (ia < ib))));
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
        if (t == 0 || ga_better(fi, vi, fw, vw)) { win = i; fw = fi; vw = vi; }
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

// Per-bit mutation of one word (nb genome bits): geometric gaps by inversion through the integer
// thresholds K[m] = ceil((1 - (1 - p_m)^m) 2^53): the gap is >= m iff (z >> 11) >= K[m]; draw k
// of the word at index base + k (algorithms/ga/ga.py). k53: the first draw's z >> 11 (< K[nb]).
#ifdef ISLES_HOST_EMU
#define GA_NOINLINE static
#else
#define GA_NOINLINE __device__ __noinline__
#endif
GA_NOINLINE unsigned int ga_flips_rest(u64 key, u64 s_mut, u64 base, int nb, const u64* K, u64 k53) {
    unsigned int m = 0u;
    int pos = -1;
    for (int k = 0; k < nb; ++k) {
        const int r = nb - 1 - pos;           // bits left after pos
        if (k > 0) {
            k53 = draw_bits(key, s_mut, base + (u64)k) >> 11;
            if (k53 >= K[r]) break;           // gap >= r: no further flip in this word
        }
        int lo = 0, hi = r;                   // k53 >= K[lo], k53 < K[hi]: gap = lo
        while (hi - lo > 1) {
            const int mid = (lo + hi) >> 1;
            if (k53 >= K[mid]) lo = mid; else hi = mid;
        }
        pos += lo + 1;
        m |= 1u << pos;
        if (pos >= nb - 1) break;
    }
    return m;
}
// hx = (key ^ s_mut) + base * GOLDEN: the first draw's hash input; kfirst = K[nb]
ISLES_DEV unsigned int ga_flips(u64 key, u64 s_mut, u64 hx, u64 base, int nb, const u64* K, u64 kfirst) {
    const u64 k53 = isles_mix64(hx) >> 11;
    if (k53 >= kfirst) return 0u;             // the common case: no flip in this word
    return ga_flips_rest(key, s_mut, base, nb, K, k53);
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

// f, v from the merged accumulator with the evaluator's rules (problems/constraints.py):
// NaN f -> +inf, NaN v -> +inf, counted when f was NaN or v is infinite; static penalty.
ISLES_DEV int ga_finish(const T* acc, T penalty, T* fo, T* vo) {
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
    if (v != v) v = T_INF;
    const int bad = (f != f) || (v == T_INF);
    if (f != f) f = T_INF;
#if GA_PENALTY
    f = add_rn(f, mul_rn(penalty, v));
    v = (T)0;
#endif
    *fo = f;
    *vo = v;
    return bad;
}

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

// ga_select's work: elite search (and target), then the child slots' decisions
void ga_select_host(const T* f, const T* v, int* elite, long long* hit, int track, T target,
                    long long g, int n_islands, GASel* sel, const u64* keys, double p_c, double p_m) {
    for (int isl = 0; isl < n_islands; ++isl) {
        const T* fi = f + (ga_sz)isl * GA_N;
        const T* vi = v + (ga_sz)isl * GA_N;
        T pf = (T)0, pv = (T)0; int pi = -1;
        for (int e = 0; e < GA_NEK; ++e) {
            T bf = (T)0, bv = (T)0; int bi = -1;
            for (int i = 0; i < GA_N; ++i) {
                if (e > 0 && !ga_key_less(pf, pv, pi, fi[i], vi[i], i)) continue;
                if (bi < 0 || ga_key_less(fi[i], vi[i], i, bf, bv, bi)) { bf = fi[i]; bv = vi[i]; bi = i; }
            }
            elite[isl * GA_NEK + e] = bi;
            pf = bf; pv = bv; pi = bi;
        }
        if (track) {
            const int b = elite[isl * GA_NEK];
            if (hit[isl] < 0 && vi[b] <= (T)0 && fi[b] <= target) hit[isl] = g;
        }
        if (sel)
            for (int c = 0; c < GA_N; ++c)
                if (ga_kind(c) == 1) sel[(ga_sz)isl * GA_N + c] = ga_decide(keys[isl], g, c, fi, vi, p_c, p_m);
    }
}

void ga_generation_host(const unsigned int* P, const T* f, const T* v, const int* elite, const GASel* sel,
                        unsigned int* Pn, T* fn, T* vn, const u64* keys, long long g,
                        long long* nan_count, int total, const u64* K, T penalty, unsigned int* row) {
    const u64 kfull = K[32], klast = K[ga_word_bits(GA_W - 1)];
    const u64 gb = ((u64)g) << 16;
    const u64 s_mut = isles_mix64(gb + DRAW_MUTATE), s_renew = isles_mix64(gb + DRAW_RENEW);
    const u64 s_xmask = isles_mix64(gb + DRAW_XMASK);
    for (int gind = 0; gind < total; ++gind) {
        const int isl = gind / GA_N, c = gind - isl * GA_N;
        const u64 key = keys[isl];
        const T* fi = f + (ga_sz)isl * GA_N;
        const T* vi = v + (ga_sz)isl * GA_N;
        const int kind = ga_kind(c);
        GASel d = {0, 0, 0, 0, -1};
        if (kind == 0) d.src = elite[isl * GA_NEK + c];
        if (kind == 1) d = sel[gind];
        const unsigned int* Pi = P + (ga_sz)isl * GA_N * GA_W;
        const unsigned int* p1 = Pi + (ga_sz)d.src * GA_W;
        const unsigned int* p2 = Pi + (ga_sz)d.p2 * GA_W;
        unsigned int* out = Pn + (ga_sz)gind * GA_W;
        for (int t = 0; t < GA_TPI; ++t)
            for (int w = t; w < GA_W; w += GA_TPI) {
                const u64 iw = (u64)c * GA_W + (u64)w;
                unsigned int x = ga_base_word(kind, &d, p1, p2, w, (key ^ s_xmask) + iw * GOLDEN,
                                              (key ^ s_renew) + iw * GOLDEN);
                if (kind == 1) x ^= ga_mut_word(&d, key, s_mut, (key ^ s_mut) + 32ull * iw * GOLDEN, c, w, K, kfull, klast);
                out[w] = x;
                row[w] = x;
            }
        if (kind == 0) { fn[gind] = fi[d.src]; vn[gind] = vi[d.src]; continue; }
        int bad = 0;
        ga_group_eval(row, penalty, fn + gind, vn + gind, &bad);
        if (bad) *nan_count += 1;
    }
}

void ga_eval_host(const unsigned int* rows, int n, T* fo, T* vo, int* bad, T penalty) {
    for (int r = 0; r < n; ++r) ga_group_eval(rows + (ga_sz)r * GA_W, penalty, fo + r, vo + r, bad + r);
}

#else
// ---- CUDA kernels --------------------------------------------------------------------------
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

// Merge the group's accumulators; thread t == 0 of the group returns the total.
ISLES_DEV void ga_group_merge(T* acc, T* red) {
#pragma unroll
    for (int o = (GA_TPI < 32 ? GA_TPI : 32) / 2; o > 0; o >>= 1) {
        T other[OBJ_NACC];
#pragma unroll
        for (int k = 0; k < OBJ_NACC; ++k) other[k] = __shfl_xor_sync(GA_GROUP_MASK, acc[k], o, (GA_TPI < 32 ? GA_TPI : 32));
        obj_merge(acc, other);
    }
#if GA_TPI > 32
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int k = 0; k < OBJ_NACC; ++k) red[w * OBJ_NACC + k] = acc[k];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 0; k < OBJ_NACC; ++k) acc[k] = red[k];
        for (int ww = 1; ww < GA_NWARP; ++ww) obj_merge(acc, red + ww * OBJ_NACC);
    }
#endif
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

// Selection of a generation. Blocks [0, I): the island's elite in rank order (n_elite searches
// for the least (v, f, index) key above the previous one) and the stop target. Blocks I...: one
// thread per slot, the child slots' decisions (tournaments, crossover, seed mutation).
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
    __shared__ T sf[32], sv[32];
    __shared__ int si[32];
    __shared__ T pf, pv;
    __shared__ int pi;
    const int isl = blockIdx.x;
    const T* fi = f + (ga_sz)isl * GA_N;
    const T* vi = v + (ga_sz)isl * GA_N;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = GA_EBLOCK / 32;
    for (int e = 0; e < GA_NEK; ++e) {
        T bf = (T)0, bv = (T)0; int bi = -1;
#pragma unroll 4
        for (int i = threadIdx.x; i < GA_N; i += GA_EBLOCK) {
            const T fx = fi[i], vx = vi[i];
            if (e > 0 && !ga_key_less(pf, pv, pi, fx, vx, i)) continue;
            if (bi < 0 || ga_key_less(fx, vx, i, bf, bv, bi)) { bf = fx; bv = vx; bi = i; }
        }
        ga_warp_min(&bf, &bv, &bi);
        if (lane == 0) { sf[wid] = bf; sv[wid] = bv; si[wid] = bi; }
        __syncthreads();
        if (wid == 0) {
            bi = lane < nw ? si[lane] : -1;
            bf = lane < nw ? sf[lane] : (T)0;
            bv = lane < nw ? sv[lane] : (T)0;
            ga_warp_min(&bf, &bv, &bi);
            if (lane == 0) { elite[isl * GA_NEK + e] = bi; pf = bf; pv = bv; pi = bi; }
        }
        __syncthreads();
    }
    if (track && threadIdx.x == 0) {
        const int b = elite[isl * GA_NEK];
        if (hit[isl] < 0 && vi[b] <= (T)0 && fi[b] <= target) hit[isl] = g;
    }
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
    const int kind = ga_kind(c);
    GASel d;
    d.src = 0; d.p2 = 0; d.a = 0; d.b = 0; d.mpos = -1;
    if (kind == 0) d.src = elite[isl * GA_NEK + c];
    else if (kind == 1) d = sel[gind];
    const u64 key = keys[isl];
    const long long g = gen_off + gen_dev[0] + (long long)rng_ctr[0];
    const unsigned int* Pi = P + (ga_sz)isl * GA_N * GA_W;
    const unsigned int* p1 = Pi + (ga_sz)d.src * GA_W;
    const unsigned int* p2 = Pi + (ga_sz)d.p2 * GA_W;
    unsigned int* out = Pn + (ga_sz)gind * GA_W;
    unsigned int* row = ga_rows + grp * GA_W;
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
        x[k] = (w < GA_W) ? ga_base_word(kind, &d, p1, p2, w, hx0 + (u64)k * hstep, hr0 + (u64)k * hstep) : 0u;
    }
    if (kind == 1) {
#pragma unroll
        for (int k = 0; k < GA_ITEMS; ++k) {  // ... while the mutation masks are drawn
            const int w = t + k * GA_TPI;
            if (w < GA_W) x[k] ^= ga_mut_word(&d, key, s_mut, hm0 + 32ull * (u64)k * hstep, c, w, K, kfull, klast);
        }
    }
#pragma unroll
    for (int k = 0; k < GA_ITEMS; ++k) {
        const int w = t + k * GA_TPI;
        if (w < GA_W) { out[w] = x[k]; row[w] = x[k]; }
    }
#else
    for (int w = t, k = 0; w < GA_W; w += GA_TPI, ++k) {
        unsigned int xw = ga_base_word(kind, &d, p1, p2, w, hx0 + (u64)k * hstep, hr0 + (u64)k * hstep);
        if (kind == 1) xw ^= ga_mut_word(&d, key, s_mut, hm0 + 32ull * (u64)k * hstep, c, w, K, kfull, klast);
        out[w] = xw;
        row[w] = xw;
    }
#endif
    if (kind == 0) {   // elite copy: keeps its (f, v); uniform over the group
        if (t == 0) { fn[gind] = f[(ga_sz)isl * GA_N + d.src]; vn[gind] = v[(ga_sz)isl * GA_N + d.src]; }
        return;
    }
    GA_GROUP_SYNC();
    T acc[OBJ_NACC];
    ga_eval_part(acc, row, t);
    ga_group_merge(acc, red);
    if (t == 0) {
        T fo, vo;
        if (ga_finish(acc, penalty, &fo, &vo)) atomicAdd(nan_count, 1ull);
        fn[gind] = fo;
        vn[gind] = vo;
    }
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
    GA_GROUP_SYNC();
    T acc[OBJ_NACC];
    ga_eval_part(acc, row, t);
    ga_group_merge(acc, red);
    if (t == 0) {
        T f1, v1;
        bad[gind] = ga_finish(acc, penalty, &f1, &v1);
        fo[gind] = f1;
        vo[gind] = v1;
    }
}

extern "C" __global__ void ga_set_i64(long long* p, const long long v) { *p = v; }
extern "C" __global__ void ga_add_i64(long long* p, const long long v) { *p += v; }
#endif  // ISLES_HOST_EMU
"""

# Per-bit mutation masks as one elementwise kernel (the CuPy array path of algorithms/ga/ga.py).
_FLIPS_SOURCE = r"""
ISLES_DEV unsigned int ga_flips_k(u64 key, u64 s_mut, u64 base, int nb, const unsigned long long* K) {
    unsigned int m = 0u;
    int pos = -1;
    for (int k = 0; k < nb; ++k) {
        const int r = nb - 1 - pos;
        const u64 k53 = draw_bits(key, s_mut, base + (u64)k) >> 11;
        if (k53 >= K[r]) break;
        int lo = 0, hi = r;
        while (hi - lo > 1) { const int mid = (lo + hi) >> 1; if (k53 >= K[mid]) lo = mid; else hi = mid; }
        pos += lo + 1;
        m |= 1u << pos;
        if (pos >= nb - 1) break;
    }
    return m;
}
"""
_KERNELS: dict = {}


def per_bit_flips_cupy(rng, generation: int, start: int, stop: int, n_bits: int, K: np.ndarray):
    """CuPy twin of :func:`isles.algorithms.ga.ga.per_bit_flips` (same draws, same thresholds ``K``): one
    elementwise kernel over ``(I, M, W)`` words, no host synchronisation."""
    cp = rng.xp
    if "flips" not in _KERNELS:
        _KERNELS["flips"] = cp.ElementwiseKernel(
            "raw uint64 keys, raw uint64 ctr, uint64 gd, raw uint64 K, int64 M, int64 W, int64 start, int64 L",
            "uint32 m",
            r"""
            const long long w = i % W;
            const long long rest = i / W;
            const long long c = start + rest % M;
            const long long isl = rest / M;
            const u64 s = isles_mix64(gd + (ctr[0] << 16));
            const int nb = (w == W - 1) ? (int)(L - 32 * (W - 1)) : 32;
            m = ga_flips_k(keys[isl], s, ((u64)c * (u64)W + (u64)w) * 32ull, nb, &K[0]);
            """,
            "isles_ga_flips",
            preamble=HASH + _FLIPS_SOURCE,
        )
    W = (int(n_bits) + 31) // 32
    M = stop - start
    out = cp.empty((rng.n_streams, M, W), dtype=np.uint32)
    gd = ((int(generation) << 16) + DRAW_MUTATE) & ((1 << 64) - 1)
    Kd = device_constant(cp, np.asarray(K, dtype=np.uint64))  # uploaded once: capturable
    _KERNELS["flips"](rng.keys, rng.ctr, np.uint64(gd), Kd, np.int64(M), np.int64(W), np.int64(start),
                      np.int64(n_bits), out)
    return out


# ---- configuration ------------------------------------------------------------------------------

def layout(n_words: int, n_work: int, tpi: int | None = None) -> tuple[int, int, int]:
    """Thread layout ``(TPI, IPB, BLOCK)``: ``TPI`` threads per slot (the smallest power of two
    with at most 32 words or coordinates per thread, at least 2 where there are 2, a warp from 64
    on, at most 256; 10^5 bits: 128, measured best on an H100), ``IPB`` slots per block (128 threads per block
    while ``TPI <= 32``, else 1) and ``BLOCK = TPI * IPB``.

    Raises:
        ValueError: ``tpi`` given and not a power of two in ``[1, 1024]``.
    """
    if tpi is None:
        items = max(int(n_words), int(n_work), 1)
        tpi = 1
        while tpi < MAX_TPI and tpi * 32 < items:
            tpi *= 2
        tpi = max(tpi, min(2, items), 32 if items >= 64 else 1)
    elif tpi < 1 or tpi > 1024 or (tpi & (tpi - 1)):
        raise ValueError(f"fused GA: tpi={tpi}: allowed values are powers of two 1..1024")
    ipb = max(1, 128 // tpi) if tpi <= 32 else 1
    return tpi, ipb, tpi * ipb


def elite_block(n: int) -> int:
    """Threads of a ``ga_select`` block: a power of two about ``N / 4``, in ``[32, 1024]``."""
    b = 32
    while b < 1024 and b * 4 < int(n):
        b *= 2
    return b


def kernel_source(ga, ctx, tpi: int | None = None, extra: dict | None = None) -> tuple[str, dict]:
    """CUDA/C source of the fused generation for ``(ga, ctx)`` and its configuration macros.

    Order: configuration, ``HASH + ARITHMETIC + MATH`` (:mod:`isles.algorithms.core.cuda_prelude`), the
    problem's ``cuda_objective``, the encoding's ``cuda_decode`` (real problems), then
    :data:`GA_SOURCE`.

    ``extra`` adds or overrides macros (tuning: ``GA_MAX_ITEMS``, words per thread held in
    registers, 0 = all through shared memory; ``GA_MINB``, ``__launch_bounds__``'s minimum blocks).

    Raises:
        ValueError: the problem has no ``cuda_objective``.
    """
    p = ga.params
    enc = ga.setup(ctx)
    prob = ctx.evaluator.problem
    obj = getattr(prob, "cuda_objective", None)
    if not obj:
        raise ValueError(f"problem {getattr(prob, 'name', prob)!r} has no cuda_objective")
    real = enc.genome == "real"
    L, W = enc.n_bits, enc.n_words
    tpi, ipb, block = layout(W, enc.dim if real else W, tpi)
    pm = p.mutation_probability(L)
    mut = 0 if pm <= 0.0 else (1 if p.mutation == "per_bit" else 2)
    cfg = {
        "IS_F32": int(np.dtype(ctx.dtype) == np.float32), "GA_N": p.pop_size, "GA_W": W, "GA_L": L,
        "GA_NE": p.n_elite, "GA_NEK": max(p.n_elite, 1), "GA_NR": p.n_renew, "GA_S": p.group_size,
        "GA_XOVER": CROSSOVERS.index(p.crossover), "GA_MUT": mut, "GA_REAL": int(real),
        "GA_D": enc.dim, "GA_TPI": tpi, "GA_IPB": ipb, "GA_BLOCK": block, "GA_EBLOCK": elite_block(p.pop_size),
        "GA_PENALTY": int(getattr(ctx.evaluator, "handling", "feasibility") == "penalty"),
        # block mode: registers for >= 1024 resident threads per SM (latency hiding, measured)
        "GA_MINB": 1024 // block if tpi > 32 else 1,
    }
    cfg.update(extra or {})
    head = "".join(f"#define {k} {v}\n" for k, v in cfg.items())
    src = head + HASH + ARITHMETIC + MATH + "\n" + obj + "\n"
    if real:
        src += enc.cuda_decode + "\n"
    return src + GA_SOURCE, cfg


def unsupported_reason(ga, ctx) -> str | None:
    """Why ``(ga, ctx)`` cannot use the fused path, or ``None`` if it can (CuPy checks included
    only when ``ctx.xp`` is CuPy)."""
    if getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if not ga.params.fused:
        return "fused=False"
    prob = ctx.evaluator.problem
    if not getattr(prob, "cuda_objective", None):
        return f"problem {getattr(prob, 'name', type(prob).__name__)!r} has no cuda_objective"
    enc = ga.setup(ctx)
    try:
        objective_macros(prob.cuda_objective, enc.genome)
    except ValueError as err:
        return str(err)
    if np.dtype(ctx.dtype) not in (np.float32, np.float64):
        return f"dtype {np.dtype(ctx.dtype)} (fused: float32|float64)"
    if ctx.n_islands * ga.params.pop_size >= 2**31:
        return "more than 2**31 individuals"
    tpi, ipb, _ = layout(enc.n_words, enc.dim if enc.genome == "real" else enc.n_words)
    smem = ipb * enc.n_words * 4
    limit = _smem_limit(ctx.xp)
    if smem > limit:
        return f"a row of {enc.n_bits} bits ({smem} bytes) does not fit {limit} bytes of shared memory"
    return None


def _smem_limit(cp) -> int:
    try:
        dev = cp.cuda.Device()
        return int(dev.attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024)) - 1024
    except Exception:  # pragma: no cover - attribute names differ across CuPy versions
        return 48 * 1024 - 1024


# ---- host emulation (tests) ---------------------------------------------------------------------

def host_compiler() -> str | None:
    """The C compiler used for host emulation (:func:`isles.problems.cuda_check.compiler`), or ``None``."""
    return compiler()


def compile_host(source: str):
    """Compile ``source`` as C with ``-DISLES_HOST_EMU`` into a shared library (cached by source),
    through the one host compiler invocation (:func:`isles.problems.cuda_check.compile_c`:
    ``-O2 -ffp-contract=off``).

    Raises:
        RuntimeError: no C compiler, or the compilation failed (its messages included).
    """
    return compile_c("#define ISLES_HOST_EMU 1\n" + source, ("-std=gnu11",))


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


class HostGA:
    """The fused generation's C code run on the CPU (``-DISLES_HOST_EMU``), for tests.

    Same decisions, words, mutation, evaluation and elite search as the CUDA kernels; thread
    groups are emulated by loops (``obj_merge`` in thread order). Works on NumPy states.

    Args:
        ga: the :class:`isles.algorithms.ga.ga.GA`.
        ctx: a NumPy :class:`isles.algorithms.core.base.Context` whose problem has ``cuda_objective``.
        tpi: threads per group (default: the CUDA layout's).

    Raises:
        ValueError: no ``cuda_objective``; RuntimeError: no C compiler / compile error.
    """

    def __init__(self, ga, ctx, tpi: int | None = None):
        self.ga, self.ctx = ga, ctx
        self.source, self.cfg = kernel_source(ga, ctx, tpi)
        self.lib = compile_host(self.source)
        self.dtype = np.dtype(ctx.dtype)
        self.T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        p = ga.params
        self.N, self.W, self.NEK = p.pop_size, self.cfg["GA_W"], self.cfg["GA_NEK"]
        self.K = flip_thresholds(p.mutation_probability(self.cfg["GA_L"]))
        self.p_c, self.p_m = float(p.p_c), float(p.mutation_probability(self.cfg["GA_L"]))
        self.penalty = float(getattr(ctx.evaluator, "penalty", 0.0))
        self.target = ctx.target
        self._row = np.zeros(self.W, dtype=np.uint32)

    def evaluate(self, genome):
        """``(f, v, bad)`` of genomes ``(..., W)`` by the kernel's objective code."""
        G = np.ascontiguousarray(genome, dtype=np.uint32).reshape(-1, self.W)
        n = G.shape[0]
        f, v = np.empty(n, self.dtype), np.empty(n, self.dtype)
        bad = np.empty(n, np.int32)
        self.lib.ga_eval_host(_ptr(G), ctypes.c_int(n), _ptr(f), _ptr(v), _ptr(bad), self.T(self.penalty))
        sh = genome.shape[:-1]
        return f.reshape(sh), v.reshape(sh), bad.reshape(sh)

    def select(self, state, track: bool = False, decide: bool = True):
        """``ga_select``'s work on the state's population: ``(elite (I, max(n_elite, 1)) int32,
        hit_generation (I,) int64, sel (I, N, 5) int32)`` (hit updated only with ``track`` and a
        target; ``sel``: the child slots' ``(parent 1, parent 2, a, b, mpos)``, see GA_SOURCE)."""
        f = np.ascontiguousarray(state["f"], dtype=self.dtype)
        v = np.ascontiguousarray(state["v"], dtype=self.dtype)
        I = f.shape[0]
        el = np.empty((I, self.NEK), np.int32)
        sel = np.zeros((I, self.N, 5), np.int32)
        hit = np.array(state.get("hit_generation", np.full(I, -1)), dtype=np.int64)
        do = int(track and self.target is not None)
        tgt = self.dtype.type(self.target if self.target is not None else 0.0)
        self.lib.ga_select_host(_ptr(f), _ptr(v), _ptr(el), _ptr(hit), ctypes.c_int(do), self.T(tgt),
                                ctypes.c_longlong(int(state["generation"])), ctypes.c_int(I),
                                _ptr(sel) if decide else None, _ptr(self.ctx.rng.keys),
                                ctypes.c_double(self.p_c), ctypes.c_double(self.p_m))
        return el, hit, sel

    def step(self, state):
        """One generation (``ga_select``, then ``ga_generation``'s code); returns a new state."""
        G = np.ascontiguousarray(state["genome"], dtype=np.uint32)
        f = np.ascontiguousarray(state["f"], dtype=self.dtype)
        v = np.ascontiguousarray(state["v"], dtype=self.dtype)
        I = G.shape[0]
        el, _, sel = self.select(state)
        Gn, fn, vn = np.empty_like(G), np.empty_like(f), np.empty_like(v)
        nan = np.zeros(1, np.int64)
        self.lib.ga_generation_host(
            _ptr(G), _ptr(f), _ptr(v), _ptr(el), _ptr(sel), _ptr(Gn), _ptr(fn), _ptr(vn),
            _ptr(self.ctx.rng.keys), ctypes.c_longlong(int(state["generation"])), _ptr(nan),
            ctypes.c_int(I * self.N), _ptr(self.K), self.T(self.penalty), _ptr(self._row))
        s = dict(state)
        s["genome"], s["f"], s["v"] = Gn, fn, vn
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + self.N - self.ga.params.n_elite
        s["nan_evals"] = np.asarray(state["nan_evals"]) + nan[0]
        return s

    def run(self, state, n_generations: int):
        """``n_generations`` steps, tracking the target after each (as :meth:`FusedGA.run`)."""
        for _ in range(int(n_generations)):
            state = self.step(state)
            if self.target is not None:
                _, hit, _ = self.select(state, track=True, decide=False)
                state = dict(state)
                state["hit_generation"] = hit
        return state


# ---- the CuPy plan ------------------------------------------------------------------------------

def _kernels(cp, source: str):
    # compiled once per device and source (algorithms/core/plan.py)
    return kernels(cp, source, ("ga_select", "ga_generation", "ga_eval_rows", "ga_set_i64", "ga_add_i64"))


class FusedGA(PingPongGraph):
    """Compiled fused GA generation for one ``(ga, ctx)`` (see the module docstring).

    Args:
        ga: the :class:`isles.algorithms.ga.ga.GA`.
        ctx: a CuPy :class:`isles.algorithms.core.base.Context` whose problem has ``cuda_objective``.
        tpi: threads per slot (default :func:`layout`'s choice; benchmarks).
        extra: macro overrides (:func:`kernel_source`; benchmarks).

    Raises:
        ValueError: the configuration is unsupported (:func:`unsupported_reason`).
    """

    def __init__(self, ga, ctx, tpi: int | None = None, extra: dict | None = None):
        reason = unsupported_reason(ga, ctx)
        if reason is not None:
            raise ValueError(f"fused GA unavailable: {reason}")
        import cupy as cp  # noqa: PLC0415

        self.cp, self.ga, self.ctx, self.params = cp, ga, ctx, ga.params
        self.problem = ctx.evaluator.problem
        self.source, self.cfg = kernel_source(ga, ctx, tpi, extra)
        self.I, self.N, self.W = ctx.n_islands, self.params.pop_size, self.cfg["GA_W"]
        self.L = self.cfg["GA_L"]
        self.NEK = self.cfg["GA_NEK"]
        self.tpi, self.ipb, self.block = self.cfg["GA_TPI"], self.cfg["GA_IPB"], self.cfg["GA_BLOCK"]
        self.dtype = np.dtype(ctx.dtype)
        self.total = self.I * self.N
        self.grid = -(-self.total // self.ipb)
        self.smem = max(4, self.ipb * self.W * 4)
        ks = _kernels(cp, self.source)
        self._k_select, self._k_gen, self._k_eval = ks["ga_select"], ks["ga_generation"], ks["ga_eval_rows"]
        self._k_set, self._k_add = ks["ga_set_i64"], ks["ga_add_i64"]
        if self.smem > 48 * 1024:
            for k in (self._k_gen, self._k_eval):
                k.max_dynamic_shared_size_bytes = self.smem
        t = self.dtype.type
        pm = self.params.mutation_probability(self.L)
        self._p_c, self._p_m = np.float64(self.params.p_c), np.float64(pm)
        self._K = cp.asarray(flip_thresholds(pm))
        self._penalty = t(getattr(ctx.evaluator, "penalty", 0.0)
                          if getattr(ctx.evaluator, "handling", "feasibility") == "penalty" else 0.0)
        self._target = t(ctx.target if ctx.target is not None else 0.0)
        self._track = np.int32(ctx.target is not None)
        self._keys = ctx.rng.keys
        self._ctr = ctx.rng.ctr
        self._zero = cp.zeros((), dtype=np.int64)
        self._gen = cp.zeros((), dtype=np.int64)
        self._nan = cp.zeros((), dtype=np.int64)
        self._elite = cp.zeros((self.I, self.NEK), dtype=np.int32)
        self._sel = cp.zeros((self.I, self.N, 5), dtype=np.int32)  # child slots' decisions (GASel)
        self._hit = cp.full((self.I,), -1, dtype=np.int64)
        self._bufs = None
        self._graph = None
        self.graph_generations = GRAPH_GENERATIONS

    # -- launches -------------------------------------------------------------------------------
    def _launch_select(self, src, gen_dev, gen_off, track, decide=True):
        _, f, v = src
        eb = self.cfg["GA_EBLOCK"]
        grid = self.I + (-(-self.total // eb) if decide else 0)
        self._k_select((grid,), (eb,),
                       (f, v, self._elite, self._hit, np.int32(track), self._target, gen_dev,
                        np.int64(gen_off), self._ctr, self._sel, self._keys, np.int32(self.I), self._p_c,
                        self._p_m))

    def _launch_gen(self, src, dst, gen_dev, gen_off, nan):
        G, f, v = src
        Gn, fn, vn = dst
        self._k_gen((self.grid,), (self.block,),
                    (G, f, v, self._elite, self._sel, Gn, fn, vn, self._keys, gen_dev, np.int64(gen_off),
                     self._ctr, nan, np.int32(self.total), self._K, self._penalty),
                    shared_mem=self.smem)

    def _generation(self, src, dst, gen_dev, gen_off, nan, track):
        self._launch_select(src, gen_dev, gen_off, track)
        self._launch_gen(src, dst, gen_dev, gen_off, nan)

    def _arrays(self, state):
        cp = self.cp
        G, f, v = state["genome"], state["f"], state["v"]
        if G.shape != (self.I, self.N, self.W) or f.shape != (self.I, self.N) or v.shape != f.shape:
            raise ValueError(
                f"fused GA: state shapes genome{G.shape} f{f.shape} v{v.shape} do not match "
                f"(I, N, W) = ({self.I}, {self.N}, {self.W})"
            )
        G = cp.ascontiguousarray(G, dtype=np.uint32)
        f = cp.ascontiguousarray(f, dtype=self.dtype)
        v = cp.ascontiguousarray(v, dtype=self.dtype)
        return G, f, v

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate(self, genome):
        """``(f, v, bad)`` of genomes ``(..., W)`` by the kernel's own objective code (CuPy)."""
        cp = self.cp
        G = cp.ascontiguousarray(genome, dtype=np.uint32).reshape(-1, self.W)
        n = G.shape[0]
        f, v = cp.empty(n, self.dtype), cp.empty(n, self.dtype)
        bad = cp.empty(n, np.int32)
        grid = max(1, -(-n // self.ipb))
        self._k_eval((grid,), (self.block,), (G, f, v, bad, np.int32(n), self._penalty), shared_mem=self.smem)
        sh = genome.shape[:-1]
        return f.reshape(sh), v.reshape(sh), bad.reshape(sh)

    def verify(self, n_rows: int = 64) -> float:
        """Largest relative difference ``|f_k - f_p| / (1 + |f_p|)`` (and the same for ``v``)
        between the kernel's objective and the array path's (decode + evaluator) on random
        genomes, all-zero and all-one genomes (one host synchronisation)."""
        cp = self.cp
        rs = np.random.default_rng(20261122)
        enc = self.ga.setup(self.ctx)
        G = rs.integers(0, 2**32, size=(n_rows, self.W), dtype=np.uint64).astype(np.uint32)
        G[0] = 0
        G[1] = 0xFFFFFFFF
        G &= enc.valid_mask()
        Gd = cp.asarray(G)
        fk, vk, _ = self.evaluate(Gd)
        fp, vp, _ = self.ga.evaluate_genomes(self.ctx, Gd)
        if getattr(self.ctx.evaluator, "handling", "feasibility") == "penalty":
            pass  # the evaluator applied the penalty already, as the kernel did
        err = 0.0
        for a, b in ((fk, fp), (vk, vp)):
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            same = (a64 == b64)  # infinities agree
            e = cp.where(same, 0.0, cp.abs(a64 - b64) / (1.0 + cp.abs(b64)))
            err = max(err, float(cp.nan_to_num(e, nan=np.inf).max()))
        return err

    # -- the algorithm ----------------------------------------------------------------------------
    def step(self, state):
        """One generation (two kernel launches, no host sync); returns a new state."""
        cp = self.cp
        src = self._arrays(state)
        dst = tuple(cp.empty_like(a) for a in src)
        nan = cp.zeros((), dtype=np.int64)
        self._generation(src, dst, self._zero, int(state["generation"]), nan, 0)
        s = dict(state)
        s["genome"], s["f"], s["v"] = dst
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + self.N - self.params.n_elite
        s["nan_evals"] = state["nan_evals"] + nan
        return s

    def _step(self, src, dst, k):
        """One generation ``src -> dst`` with draws of generation ``gen + k`` (:class:`PingPongGraph`)."""
        self._generation(src, dst, self._gen, k, self._nan, int(self._track))

    def _buffers(self):
        if self._bufs is None:
            cp = self.cp
            self._bufs = tuple(
                (cp.empty((self.I, self.N, self.W), np.uint32), cp.empty((self.I, self.N), self.dtype),
                 cp.empty((self.I, self.N), self.dtype))
                for _ in range(2))
        return self._bufs


    def run(self, state, n_generations: int):
        """``n_generations`` generations: CUDA-graph replays plus single launches, tracking the
        target every generation; no host sync. Returns a new state (fresh arrays)."""
        cp = self.cp
        n = int(n_generations)
        if n <= 0:
            return dict(state)
        G, f, v = self._arrays(state)
        bufs = self._buffers()
        for dst, src in zip(bufs[0], (G, f, v)):
            cp.copyto(dst, src)
        track = int(self._track)
        if track:
            hg = state.get("hit_generation")
            if hg is None:
                self._hit.fill(-1)
            else:
                cp.copyto(self._hit, cp.asarray(hg, dtype=np.int64))
        self._k_set((1,), (1,), (self._gen, np.int64(state["generation"])))
        self._nan.fill(0)
        fin, rem = self._advance(n)
        if track:  # the last population
            self._launch_select(fin, self._gen, rem, 1, decide=False)
        s = dict(state)
        s["genome"], s["f"], s["v"] = (a.copy() for a in fin)
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * (self.N - self.params.n_elite)
        s["nan_evals"] = state["nan_evals"] + self._nan
        if track:
            s["hit_generation"] = self._hit.copy()
        return s


def make_plan(ga, ctx):
    """A verified :class:`FusedGA` for ``(ga, ctx)``, or ``None`` where it does not apply.

    Builds (compiles, cached by source) and self-checks the kernel's objective against the array
    path (:meth:`FusedGA.verify`, one host synchronisation). Returns ``None`` with a log line when
    unsupported, and with a ``RuntimeWarning`` when the check fails.
    """
    reason = unsupported_reason(ga, ctx)
    if reason is not None:
        log.info("GA: array path (%s)", reason)
        return None
    plan = FusedGA(ga, ctx)
    err = plan.verify()
    tol = VERIFY_RTOL[plan.dtype]
    if not err <= tol:
        name = getattr(plan.problem, "name", type(plan.problem).__name__)
        warnings.warn(
            f"fused GA disabled: the cuda_objective of {name} differs from its objective by {err:.3g} "
            f"(relative, tolerance {tol:g}); using the array path",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    log.info("GA: fused CUDA path (L=%d, W=%d, TPI=%d, IPB=%d)", plan.L, plan.W, plan.tpi, plan.ipb)
    return plan
