// migration.cu: the fused migration of one island group (algorithms/core/migration_kernels.py), the same
// decisions and bytes as the generic array code of islands/migration.py and islands/policies.py:
//
// * isles_emigrate: the k best residents of each island under Deb's rules, best first
//   (policies.SelectBest: rank_order, a stable argsort by f then a stable argsort by v), every
//   leaf of each (genome of any dtype, f, v, extras) gathered into the emigrant arrays (I, k, ...);
// * isles_immigrate: the immigrants of each island (rows of the group's emigrant pool, the route's
//   plan), sorted best first, against the K worst residents, worst first (policies.worst_first),
//   accepted where the policy says (fair_replace: a better immigrant, Deb's rules; replace_worst:
//   every real one), and every leaf written: either the whole new population (I, N, ...) (`full`),
//   or the K written slots and their positions (I, K) for an algorithm's own replace; plus the
//   events (order, accepted, f written) of policies.Replacement.replace.
//
// The order is NumPy's sort order: lexicographic (v, f, position), NaN after every number (NaNs
// equal among themselves, -0 equal to 0), ties by position (a stable sort). Ranks are counted, not
// sorted: a resident's rank among the worst K is the number of residents after it, counted until
// K (so the scan of a good resident stops early; scanned from the end, so that ties stop early too).
//
// A leaf is moved as bytes (rows of `rb` bytes, in units of `un` = 1, 2, 4 or 8 bytes that divide
// the row and align every pointer): any dtype, bit for bit. Leaf 1 is f (F_T), leaf 2 is v (V_T).
// The block code is strided loops over the thread index between BLOCK_SYNC()s, so that under
// -DISLES_HOST_EMU the same text runs as C with one thread per block (tests/test_fused_migration.py).
#include "rng.cuh"
#include "deb.cuh"
#include "block.cuh"

#ifndef MIG_MAX_LEAVES
#define MIG_MAX_LEAVES 8
#endif

typedef struct {
    u64 res;        // the residents' leaf (I, N, ...), or the emigrants' source
    u64 pool;       // the emigrant pool's leaf (I * k rows), immigrate only
    u64 out;        // the output leaf: (I, N, ...) full, (I, K, ...) slots, (I, k, ...) emigrants
    long long rb;   // bytes of one individual's row of this leaf
    int un;         // copy unit in bytes (1, 2, 4, 8)
} IslesLeaf;

#ifdef ISLES_HOST_EMU
#define MIG_INF INFINITY
#else
#define MIG_INF __longlong_as_double(0x7ff0000000000000ll)
#endif
// NumPy's sort order of one key: a < b, NaN last (x != x: x is NaN)
#define MIG_LT(a, b) ((a) < (b) || ((a) == (a) && (b) != (b)))
#define MIG_EQ(a, b) (!MIG_LT(a, b) && !MIG_LT(b, a))
// individual a = (fa, va, position ia) comes before b in rank_order
#define MIG_BEFORE(fa, va, ia, fb, vb, ib) \
    (MIG_LT(va, vb) || (MIG_EQ(va, vb) && (MIG_LT(fa, fb) || (MIG_EQ(fa, fb) && (ia) < (ib)))))

// copy unit `u` of a row: dst[u] = src[u]
ISLES_DEV void mig_copy(u64 dst, u64 src, long long u, int unit) {
    switch (unit) {
        case 8: ((u64*)dst)[u] = ((const u64*)src)[u]; break;
        case 4: ((unsigned int*)dst)[u] = ((const unsigned int*)src)[u]; break;
        case 2: ((unsigned short*)dst)[u] = ((const unsigned short*)src)[u]; break;
        default: ((unsigned char*)dst)[u] = ((const unsigned char*)src)[u]; break;
    }
}

// island i: its k best residents (best first) into the emigrant leaves (out, (I, k, ...));
// sidx: k ints of shared memory
ISLES_DEV void mig_emigrate_block(int i, int tid, int nt, int* sidx, const IslesLeaf* L, int n_leaves, int N, int k) {
    const F_T* f = (const F_T*)L[1].res + (long long)i * N;
    const V_T* v = (const V_T*)L[2].res + (long long)i * N;
    for (int n = tid; n < N; n += nt) {
        F_T fn = f[n];
        V_T vn = v[n];
        int ahead = 0;  // residents before n, counted up to k
        for (int m = 0; m < N && ahead < k; ++m)
            if (m != n && MIG_BEFORE(f[m], v[m], m, fn, vn, n)) ++ahead;
        if (ahead < k) sidx[ahead] = n;
    }
    BLOCK_SYNC();
    for (int l = 0; l < n_leaves; ++l) {
        long long rb = L[l].rb, units = rb / L[l].un;
        for (long long t = tid; t < (long long)k * units; t += nt) {
            long long p = t / units, u = t - p * units;
            mig_copy(L[l].out + ((long long)i * k + p) * rb, L[l].res + ((long long)i * N + sidx[p]) * rb, u, L[l].un);
        }
    }
}

// island i, chunk c (residents c*R .. c*R+R-1; full mode: the rows this block writes; slot mode:
// one chunk of R = N). rows, valid: the plan (I, K); worst: replace_worst (else fair_replace).
// Events (I, K): order (immigrant of slot p, best first), acc (accepted), fnew (f written at slot p);
// slot mode also writes idx (I, K) (the resident of slot p, worst first) and the slot leaves.
// smem: 3 K ints, + R in full mode.
ISLES_DEV void mig_immigrate_block(int i, int c, int tid, int nt, int* smem, const IslesLeaf* L, int n_leaves,
                                   int N, int K, int R, const long long* rows, const unsigned char* valid,
                                   int worst, int full, long long* order, unsigned char* acc, F_T* fnew,
                                   long long* idx) {
    int* imm = smem;             // K: immigrant of slot p (best first)
    int* slot_res = smem + K;    // K: resident of slot p (slot mode)
    int* slot_src = smem + 2 * K;  // K: pool row written at slot p, or -1 (slot mode)
    int* row_src = smem + 3 * K;   // R (full mode): pool row written at resident c*R + t, or -1
    const F_T* fr = (const F_T*)L[1].res + (long long)i * N;
    const V_T* vr = (const V_T*)L[2].res + (long long)i * N;
    const F_T* fp = (const F_T*)L[1].pool;
    const V_T* vp = (const V_T*)L[2].pool;
    const long long* ri = rows + (long long)i * K;
    const unsigned char* va = valid + (long long)i * K;
    const int n0 = c * R, n1 = (n0 + R < N) ? n0 + R : N;
    // the immigrants best first; padding keys are (inf, inf), as worst_first's
    for (int t = tid; t < K; t += nt) {
        F_T ft = va[t] ? fp[ri[t]] : (F_T)MIG_INF;
        V_T vt = va[t] ? vp[ri[t]] : (V_T)MIG_INF;
        int ahead = 0;
        for (int s = 0; s < K; ++s) {
            F_T fs = va[s] ? fp[ri[s]] : (F_T)MIG_INF;
            V_T vs = va[s] ? vp[ri[s]] : (V_T)MIG_INF;
            if (s != t && MIG_BEFORE(fs, vs, s, ft, vt, t)) ++ahead;
        }
        imm[ahead] = t;
    }
    if (full)
        for (int t = tid; t < n1 - n0; t += nt) row_src[t] = -1;
    BLOCK_SYNC();
    // the K worst residents: slot p = the number of residents after it
    for (int n = n0 + tid; n < n1; n += nt) {
        F_T fn = fr[n];
        V_T vn = vr[n];
        int after = 0;  // scanned from the last position: among ties, those after n come first
        for (int m = N - 1; m >= 0 && after < K; --m)
            if (m != n && MIG_BEFORE(fn, vn, n, fr[m], vr[m], m)) ++after;
        if (after < K) {
            const int p = after, j = imm[p];
            const long long src = ri[j];
            const F_T fj = fp[src];
            const V_T vj = vp[src];
            const int a = va[j] && (worst || ISLES_BETTER(fj, vj, fn, vn));
            const long long e = (long long)i * K + p;
            order[e] = j;
            acc[e] = (unsigned char)a;
            fnew[e] = a ? fj : fn;
            if (full) {
                row_src[n - n0] = a ? (int)src : -1;
            } else {
                idx[e] = n;
                slot_res[p] = n;
                slot_src[p] = a ? (int)src : -1;
            }
        }
    }
    BLOCK_SYNC();
    for (int l = 0; l < n_leaves; ++l) {
        const long long rb = L[l].rb, units = rb / L[l].un;
        if (full) {
            for (long long t = tid; t < (long long)(n1 - n0) * units; t += nt) {
                long long r = t / units, u = t - r * units;
                const int s = row_src[r];
                const long long dst = ((long long)i * N + n0 + r) * rb;
                mig_copy(L[l].out + dst, s >= 0 ? L[l].pool + (long long)s * rb : L[l].res + dst, u, L[l].un);
            }
        } else {
            for (long long t = tid; t < (long long)K * units; t += nt) {
                long long p = t / units, u = t - p * units;
                const int s = slot_src[p];
                mig_copy(L[l].out + ((long long)i * K + p) * rb,
                         s >= 0 ? L[l].pool + (long long)s * rb : L[l].res + ((long long)i * N + slot_res[p]) * rb,
                         u, L[l].un);
            }
        }
    }
}

#ifdef ISLES_HOST_EMU
#include <stdlib.h>
static void mig_leaves(IslesLeaf* L, int n_leaves, const u64* res, const u64* pool, const u64* out,
                       const long long* rb, const int* un) {
    for (int l = 0; l < n_leaves; ++l) {
        L[l].res = res[l]; L[l].pool = pool[l]; L[l].out = out[l]; L[l].rb = rb[l]; L[l].un = un[l];
    }
}

int isles_emigrate_host(int I, const u64* res, const u64* out, const long long* rb, const int* un, int n_leaves,
                        int N, int k) {
    IslesLeaf L[MIG_MAX_LEAVES];
    int* smem = (int*)malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    if (!smem || n_leaves > MIG_MAX_LEAVES) { free(smem); return 1; }
    mig_leaves(L, n_leaves, res, res, out, rb, un);
    for (int i = 0; i < I; ++i) mig_emigrate_block(i, 0, 1, smem, L, n_leaves, N, k);
    free(smem);
    return 0;
}

int isles_immigrate_host(int I, int n_chunks, const u64* res, const u64* pool, const u64* out, const long long* rb,
                         const int* un, int n_leaves, int N, int K, int R, const long long* rows,
                         const unsigned char* valid, int worst, int full, long long* order, unsigned char* acc,
                         F_T* fnew, long long* idx) {
    IslesLeaf L[MIG_MAX_LEAVES];
    int* smem = (int*)malloc(sizeof(int) * (size_t)(3 * K + R + 1));
    if (!smem || n_leaves > MIG_MAX_LEAVES) { free(smem); return 1; }
    mig_leaves(L, n_leaves, res, pool, out, rb, un);
    for (int i = 0; i < I; ++i)
        for (int c = 0; c < n_chunks; ++c)
            mig_immigrate_block(i, c, 0, 1, smem, L, n_leaves, N, K, R, rows, valid, worst, full, order, acc, fnew,
                                idx);
    free(smem);
    return 0;
}
#else
// the leaves as kernel parameters (a launch passes MIG_MAX_LEAVES of them; unused ones are 0)
#define MIG_LEAF_ARGS(l) const u64 res##l, const u64 pool##l, const u64 out##l, const long long rb##l, const int un##l
#define MIG_LEAF(l) {res##l, pool##l, out##l, rb##l, un##l}
#define MIG_ALL_ARGS MIG_LEAF_ARGS(0), MIG_LEAF_ARGS(1), MIG_LEAF_ARGS(2), MIG_LEAF_ARGS(3), \
    MIG_LEAF_ARGS(4), MIG_LEAF_ARGS(5), MIG_LEAF_ARGS(6), MIG_LEAF_ARGS(7)
#define MIG_ALL {MIG_LEAF(0), MIG_LEAF(1), MIG_LEAF(2), MIG_LEAF(3), MIG_LEAF(4), MIG_LEAF(5), MIG_LEAF(6), MIG_LEAF(7)}

// grid (I), block nt; dynamic shared memory k ints
extern "C" __global__ void isles_emigrate(MIG_ALL_ARGS, const int n_leaves, const int N, const int k) {
    extern __shared__ int mig_smem[];
    const IslesLeaf L[MIG_MAX_LEAVES] = MIG_ALL;
    mig_emigrate_block(blockIdx.x, threadIdx.x, blockDim.x, mig_smem, L, n_leaves, N, k);
}

// grid (chunks, I), block nt; dynamic shared memory 3 K ints, + R in full mode
extern "C" __global__ void isles_immigrate(MIG_ALL_ARGS, const int n_leaves, const int N, const int K, const int R,
                                           const long long* rows, const unsigned char* valid, const int worst,
                                           const int full, long long* order, unsigned char* acc, F_T* fnew,
                                           long long* idx) {
    extern __shared__ int mig_smem[];
    const IslesLeaf L[MIG_MAX_LEAVES] = MIG_ALL;
    mig_immigrate_block(blockIdx.y, blockIdx.x, threadIdx.x, blockDim.x, mig_smem, L, n_leaves, N, K, R, rows, valid,
                        worst, full, order, acc, fnew, idx);
}
#endif
