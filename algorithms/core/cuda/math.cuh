// math.cuh: math on T (the float functions when IS_F32, else the double ones) and t_popc, the
// population count of a 32-bit word. Problems' fused objectives may use all of rng, arith, math.
#ifndef ISLES_MATH_CUH
#define ISLES_MATH_CUH
#include "arith.cuh"
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
#endif  // ISLES_MATH_CUH
