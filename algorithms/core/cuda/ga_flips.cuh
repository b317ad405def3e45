// ga_flips.cuh: the GA's per-bit mutation of one word (nb genome bits): geometric gaps by
// inversion through the integer thresholds K[m] = ceil((1 - (1 - p_m)^m) 2^53): the gap is >= m iff (z >> 11) >= K[m]; draw k
// of the word at index base + k (algorithms/ga/ga.py). k53: the first draw's z >> 11 (< K[nb]).
#ifndef ISLES_GA_FLIPS_CUH
#define ISLES_GA_FLIPS_CUH
#include "rng.cuh"
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
#endif  // ISLES_GA_FLIPS_CUH
