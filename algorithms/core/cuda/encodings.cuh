// encodings.cuh: the decoders of algorithms/core/encodings.py: enc_decode(row, j), variable j of a
// packed row (words of 32 bits, bit b at bit b & 31 of word b >> 5), bit-identical to
// Encoding.decode (integer extraction, float64 operations rounded to nearest without FMA, then a
// cast to T). Prepended by Python: ENC_CODE (1 binary or gray: ENC_W ENC_B ENC_M ENC_LO(j)
// ENC_WID(j) ENC_GRAY; 2 seed002: ENC_W ENC_NVDEC ENC_NVBIN ENC_MI ENC_SCALE; 3 bits: ENC_W).
#ifndef ISLES_ENCODINGS_CUH
#define ISLES_ENCODINGS_CUH
#include "arith.cuh"
// nb (<= 52) bits of a packed row starting at bit s; ENC_W words in the row
ISLES_DEV u64 enc_field(const unsigned int* row, int s, int nb) {
    const int w = s >> 5, o = s & 31;
    u64 k = (u64)row[w];
    if (w + 1 < ENC_W) k |= ((u64)row[w + 1]) << 32;
    k >>= o;
    if (nb > 64 - o && w + 2 < ENC_W) k |= ((u64)row[w + 2]) << (64 - o);
    return k & ((1ull << nb) - 1ull);
}
#if ENC_CODE == 1
// binary and gray: k by word extraction (gray: k = g ^ (g >> 1) ^ (g >> 2) ^ ...), then
// lower_j + (k / m) * width_j
ISLES_DEV T enc_decode(const unsigned int* row, int j) {
    u64 k = enc_field(row, j * ENC_B, ENC_B);
#if ENC_GRAY
    k ^= k >> 1; k ^= k >> 2; k ^= k >> 4; k ^= k >> 8; k ^= k >> 16; k ^= k >> 32;
#endif
    const double x = dadd_rn(ENC_LO(j), dmul_rn(ddiv_rn((double)k, ENC_M), ENC_WID(j)));
    return (T)x;
}
#elif ENC_CODE == 2
// seed 002's decimal digits: integer digits, K, one division, the sign digit
ISLES_DEV T enc_decode(const unsigned int* row, int j) {
    const int s = j * ENC_NVDEC * ENC_NVBIN;
    const u64 sb = enc_field(row, s, ENC_NVBIN);
    u64 K = 0;
    for (int d = 1; d < ENC_NVDEC; ++d) {
        const u64 bd = enc_field(row, s + d * ENC_NVBIN, ENC_NVBIN);
        K = K * 10ull + (18ull * bd + ENC_MI) / (2ull * ENC_MI);
    }
    double x = ddiv_rn((double)K, ENC_SCALE);
    if (2ull * sb < ENC_MI) x = -x;
    return (T)x;
}
#elif ENC_CODE == 3
// natively binary problems: bit j as T (their kernels read the packed row through obj_unit)
ISLES_DEV T enc_decode(const unsigned int* row, int j) { return (T)((row[j >> 5] >> (j & 31)) & 1u); }
#endif
#endif  // ISLES_ENCODINGS_CUH
