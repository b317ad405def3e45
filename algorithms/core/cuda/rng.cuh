// rng.cuh: platform macros and the counter-based generator of algorithms/core/random.py
// (SplitMix64 finaliser on a Weyl sequence, Steele, Lea & Flood, OOPSLA 2014): element `idx` of
// draw `s` of the stream with key `key` is isles_mix64((key ^ s) + idx * GOLDEN). Compiled with
// -DISLES_HOST_EMU as C on the host, the same text serves the CPU emulations of the tests.
#ifndef ISLES_RNG_CUH
#define ISLES_RNG_CUH
typedef unsigned long long u64;
#define GOLDEN 0x9E3779B97F4A7C15ull
#ifdef ISLES_HOST_EMU
#include <math.h>
#include <stdbool.h>
#define ISLES_DEV static inline
#define ISLES_KERNEL static
#else
#define ISLES_DEV __device__ __forceinline__
#define ISLES_KERNEL extern "C" __global__
#endif

// SplitMix64 finaliser: identical to algorithms/core/random.py (_mix64_np and mix64_int)
ISLES_DEV u64 isles_mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// element `idx` of draw `s` of the stream with key `key` (CounterRNG.uniform's layout)
ISLES_DEV u64 draw_bits(u64 key, u64 s, u64 idx) { return isles_mix64((key ^ s) + idx * GOLDEN); }
// CounterRNG.uniform, float64: 53 bits, (double)(z >> 11) * 2**-53 (exact)
ISLES_DEV double unif53(u64 z) { return (double)(z >> 11) * (1.0 / 9007199254740992.0); }
// CounterRNG.uniform, float32: 24 bits, (float)(z >> 40) * 2**-24 (exact)
ISLES_DEV float unif24(u64 z) { return (float)(z >> 40) * (1.0f / 16777216.0f); }
#endif  // ISLES_RNG_CUH
