"""CUDA source shared by isles' fused kernels (``de_cuda.py``, ``pso_cuda.py``, ``random.py``).

* :data:`HASH`: the counter-based generator of :mod:`isles.algorithms.core.random` (SplitMix64 finaliser on a
  Weyl sequence, Steele, Lea & Flood, OOPSLA 2014), so that every kernel draws exactly the numbers
  of ``CounterRNG.uniform``: element ``idx`` of draw ``s`` of the stream with key ``key`` is
  ``isles_mix64((key ^ s) + idx * GOLDEN)``.
* :data:`ARITHMETIC`: the element type ``T`` (``IS_F32`` selects float or double), round-to-nearest
  operations without FMA contraction (``add_rn`` ...), so that kernels reproduce the NumPy twin's
  separately rounded operations bit for bit, ``unifT`` (CounterRNG's float conversion) and
  ``T_INF``.
* :data:`MATH`: math on ``T`` (``t_fmod``, ``t_cos``, ``t_sin``, ``t_sqrt``, ``t_exp``, ``t_log``,
  ``t_abs``: the float functions when ``IS_F32``, else the double ones) and ``t_popc`` (population
  count of a 32-bit word: ``__popc`` on the device, ``__builtin_popcount`` under
  ``ISLES_HOST_EMU``). Problems' fused objectives (``isles.problems.base.Problem.cuda_objective``) are
  included after ``HASH + ARITHMETIC + MATH`` and may use all of it.
* :data:`BOUNDS`: ``isles_bound``, the bound handling of :func:`isles.algorithms.de.de.apply_bounds`
  (clip, reflect, reinit) for one coordinate (used by ``algorithms/ep/cuda.py``; DE's kernel
  inlines the same code).

Compiled with ``-DISLES_HOST_EMU`` as C on the host, the same source serves CPU emulations in
tests (no GPU needed).
"""

HASH = r"""
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
"""

ARITHMETIC = r"""
#if IS_F32
typedef float T;
#ifdef ISLES_HOST_EMU
ISLES_DEV T add_rn(T a, T b) { volatile T r = a + b; return r; }
ISLES_DEV T sub_rn(T a, T b) { volatile T r = a - b; return r; }
ISLES_DEV T mul_rn(T a, T b) { volatile T r = a * b; return r; }
ISLES_DEV T div_rn(T a, T b) { volatile T r = a / b; return r; }
#define T_INF ((float)INFINITY)
#else
ISLES_DEV T add_rn(T a, T b) { return __fadd_rn(a, b); }
ISLES_DEV T sub_rn(T a, T b) { return __fsub_rn(a, b); }
ISLES_DEV T mul_rn(T a, T b) { return __fmul_rn(a, b); }
ISLES_DEV T div_rn(T a, T b) { return __fdiv_rn(a, b); }
#define T_INF __int_as_float(0x7f800000)
#endif
// CounterRNG.uniform, float32: 24 bits, (float)(z >> 40) * 2**-24 (exact)
ISLES_DEV T unifT(u64 z) { return (float)(z >> 40) * (1.0f / 16777216.0f); }
#else
typedef double T;
#ifdef ISLES_HOST_EMU
ISLES_DEV T add_rn(T a, T b) { volatile T r = a + b; return r; }
ISLES_DEV T sub_rn(T a, T b) { volatile T r = a - b; return r; }
ISLES_DEV T mul_rn(T a, T b) { volatile T r = a * b; return r; }
ISLES_DEV T div_rn(T a, T b) { volatile T r = a / b; return r; }
#define T_INF ((double)INFINITY)
#else
ISLES_DEV T add_rn(T a, T b) { return __dadd_rn(a, b); }
ISLES_DEV T sub_rn(T a, T b) { return __dsub_rn(a, b); }
ISLES_DEV T mul_rn(T a, T b) { return __dmul_rn(a, b); }
ISLES_DEV T div_rn(T a, T b) { return __ddiv_rn(a, b); }
#define T_INF __longlong_as_double(0x7ff0000000000000ll)
#endif
ISLES_DEV T unifT(u64 z) { return unif53(z); }
#endif
"""

MATH = r"""
#if IS_F32
ISLES_DEV T t_fmod(T a, T b) { return fmodf(a, b); }
ISLES_DEV T t_cos(T a) { return cosf(a); }
ISLES_DEV T t_sin(T a) { return sinf(a); }
ISLES_DEV T t_sqrt(T a) { return sqrtf(a); }
ISLES_DEV T t_exp(T a) { return expf(a); }
ISLES_DEV T t_log(T a) { return logf(a); }
ISLES_DEV T t_abs(T a) { return fabsf(a); }
#else
ISLES_DEV T t_fmod(T a, T b) { return fmod(a, b); }
ISLES_DEV T t_cos(T a) { return cos(a); }
ISLES_DEV T t_sin(T a) { return sin(a); }
ISLES_DEV T t_sqrt(T a) { return sqrt(a); }
ISLES_DEV T t_exp(T a) { return exp(a); }
ISLES_DEV T t_log(T a) { return log(a); }
ISLES_DEV T t_abs(T a) { return fabs(a); }
#endif
#ifdef ISLES_HOST_EMU
ISLES_DEV int t_popc(unsigned int w) { return __builtin_popcount(w); }
#else
ISLES_DEV int t_popc(unsigned int w) { return __popc(w); }
#endif
"""

BOUNDS = r"""
// Bound handling of one coordinate, exactly algorithms/de/de.py apply_bounds (kind 0 clip, 1 reflect,
// 2 reinit with u = CounterRNG.uniform at element idx of the draw whose seed is s_bound); needs
// HASH + ARITHMETIC + MATH. A coordinate inside [lo, hi] is returned unchanged.
ISLES_DEV T isles_bound(int kind, T v, T lo, T hi, u64 key, u64 s_bound, u64 idx) {
    if (!(v < lo || v > hi)) return v;
    if (kind == 0) return v < lo ? lo : hi;
    if (kind == 1) {
        const T w = sub_rn(hi, lo);
        const T w2 = add_rn(w, w);
        if (!(w2 > (T)0)) return lo;
        T y = t_fmod(sub_rn(v, lo), w2);
        if (y < (T)0) y = add_rn(y, w2);
        if (y > w) y = sub_rn(w2, y);
        const T z = add_rn(lo, y);
        return z < lo ? lo : (z > hi ? hi : z);
    }
    const T u = unifT(draw_bits(key, s_bound, idx));
    return add_rn(lo, mul_rn(u, sub_rn(hi, lo)));
}
"""
