// npsum.cuh: sums in NumPy's order, so that a kernel's sum equals the NumPy twin's bit for bit.
// numpy.add.reduce over a contiguous axis is a pairwise sum (numpy/_core/src/umath/
// loops_utils.h.src, pairwise_sum): fewer than 8 terms left to right; up to 128 terms in 8
// interleaved partial sums r[k] = a[k] + a[k+8] + ..., combined ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)),
// the n % 8 last terms then added left to right; more than 128 split at n2 = n/2 - (n/2) % 8 into two
// such sums. The 8 partial sums are independent chains (ILP), so this order is also the fast one
// for one thread. isles_np_sumsq(x, n): sum of x[j]^2 (n <= 8192).
#ifndef ISLES_NPSUM_CUH
#define ISLES_NPSUM_CUH
#include "arith.cuh"
ISLES_DEV T isles_np_sumsq_block(const T* a, int n) {
    if (n < 8) {
        T res = (T)0;
        for (int i = 0; i < n; ++i) res = add_rn(res, mul_rn(a[i], a[i]));
        return res;
    }
    T r[8];
    for (int k = 0; k < 8; ++k) r[k] = mul_rn(a[k], a[k]);
    int i = 8;
    for (; i < n - (n % 8); i += 8)
        for (int k = 0; k < 8; ++k) r[k] = add_rn(r[k], mul_rn(a[i + k], a[i + k]));
    T res = add_rn(add_rn(add_rn(r[0], r[1]), add_rn(r[2], r[3])), add_rn(add_rn(r[4], r[5]), add_rn(r[6], r[7])));
    for (; i < n; ++i) res = add_rn(res, mul_rn(a[i], a[i]));
    return res;
}
#define ISLES_NP_SPLIT(n) ((n) / 2 - ((n) / 2) % 8)
#define ISLES_NP_LEVEL(name, below, cap)                                                           \
    ISLES_DEV T name(const T* a, int n) {                                                          \
        if (n <= (cap) / 2) return below(a, n);                                                    \
        const int n2 = ISLES_NP_SPLIT(n);                                                          \
        return add_rn(below(a, n2), below(a + n2, n - n2));                                        \
    }
ISLES_NP_LEVEL(isles_np_sumsq_256, isles_np_sumsq_block, 256)
ISLES_NP_LEVEL(isles_np_sumsq_512, isles_np_sumsq_256, 512)
ISLES_NP_LEVEL(isles_np_sumsq_1k, isles_np_sumsq_512, 1024)
ISLES_NP_LEVEL(isles_np_sumsq_2k, isles_np_sumsq_1k, 2048)
ISLES_NP_LEVEL(isles_np_sumsq_4k, isles_np_sumsq_2k, 4096)
ISLES_NP_LEVEL(isles_np_sumsq, isles_np_sumsq_4k, 8192)
#endif  // ISLES_NPSUM_CUH
