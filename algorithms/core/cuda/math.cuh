// math.cuh: math on T (the float functions when IS_F32, else the double ones) and t_popc, the
// population count of a 32-bit word (t_fmod t_cos t_sin t_sqrt t_exp t_log t_abs t_tan t_log1p
// t_pow). Problems' fused objectives may use all of rng, arith, math.
#ifndef ISLES_MATH_CUH
#define ISLES_MATH_CUH
#include "arith.cuh"
#if IS_F32
#define ISLES_LIBM(fn) fn##f   // the float function: cosf ...
#else
#define ISLES_LIBM(fn) fn      // the double function: cos ...
#endif
ISLES_DEV T t_fmod(T a, T b) { return ISLES_LIBM(fmod)(a, b); }
ISLES_DEV T t_cos(T a) { return ISLES_LIBM(cos)(a); }
ISLES_DEV T t_sin(T a) { return ISLES_LIBM(sin)(a); }
ISLES_DEV T t_sqrt(T a) { return ISLES_LIBM(sqrt)(a); }
ISLES_DEV T t_exp(T a) { return ISLES_LIBM(exp)(a); }
ISLES_DEV T t_log(T a) { return ISLES_LIBM(log)(a); }
ISLES_DEV T t_abs(T a) { return ISLES_LIBM(fabs)(a); }
ISLES_DEV T t_tan(T a) { return ISLES_LIBM(tan)(a); }
ISLES_DEV T t_log1p(T a) { return ISLES_LIBM(log1p)(a); }
ISLES_DEV T t_pow(T a, T b) { return ISLES_LIBM(pow)(a, b); }   // CuPy's power ('ff->f', 'dd->d')
#ifdef ISLES_HOST_EMU
ISLES_DEV int t_popc(unsigned int w) { return __builtin_popcount(w); }
#else
ISLES_DEV int t_popc(unsigned int w) { return __popc(w); }
#endif
#endif  // ISLES_MATH_CUH
