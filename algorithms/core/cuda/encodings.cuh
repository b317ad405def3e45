#ifndef ISLES_ENC_DOUBLE_OPS
#define ISLES_ENC_DOUBLE_OPS
#ifdef ISLES_HOST_EMU
ISLES_DEV double enc_dadd(double a, double b) { volatile double r = a + b; return r; }
ISLES_DEV double enc_dmul(double a, double b) { volatile double r = a * b; return r; }
ISLES_DEV double enc_ddiv(double a, double b) { volatile double r = a / b; return r; }
#else
ISLES_DEV double enc_dadd(double a, double b) { return __dadd_rn(a, b); }
ISLES_DEV double enc_dmul(double a, double b) { return __dmul_rn(a, b); }
ISLES_DEV double enc_ddiv(double a, double b) { return __ddiv_rn(a, b); }
#endif
#endif

ISLES_DEV u64 enc_field(const unsigned int* row, int s, int nb) {
    const int w = s >> 5, o = s & 31;
    u64 k = (u64)row[w];
    if (w + 1 < ENC_W) k |= ((u64)row[w + 1]) << 32;
    k >>= o;
    if (nb > 64 - o && w + 2 < ENC_W) k |= ((u64)row[w + 2]) << (64 - o);
    return k & ((1ull << nb) - 1ull);
}
