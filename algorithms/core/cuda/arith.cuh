// arith.cuh: the element type T (IS_F32 selects float or double) and round-to-nearest operations
// without FMA contraction, so that kernels reproduce the NumPy twin's separately rounded
// operations bit for bit; dadd_rn, dmul_rn, ddiv_rn: the float64 ones whatever T is.
#ifndef ISLES_ARITH_CUH
#define ISLES_ARITH_CUH
#include "rng.cuh"
#ifdef ISLES_HOST_EMU
ISLES_DEV double dadd_rn(double a, double b) { volatile double r = a + b; return r; }
ISLES_DEV double dsub_rn(double a, double b) { volatile double r = a - b; return r; }
ISLES_DEV double dmul_rn(double a, double b) { volatile double r = a * b; return r; }
ISLES_DEV double ddiv_rn(double a, double b) { volatile double r = a / b; return r; }
#else
ISLES_DEV double dadd_rn(double a, double b) { return __dadd_rn(a, b); }
ISLES_DEV double dsub_rn(double a, double b) { return __dsub_rn(a, b); }
ISLES_DEV double dmul_rn(double a, double b) { return __dmul_rn(a, b); }
ISLES_DEV double ddiv_rn(double a, double b) { return __ddiv_rn(a, b); }
#endif
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
// CounterRNG.uniform in T
ISLES_DEV T unifT(u64 z) { return unif24(z); }
#else
typedef double T;
ISLES_DEV T add_rn(T a, T b) { return dadd_rn(a, b); }
ISLES_DEV T sub_rn(T a, T b) { return dsub_rn(a, b); }
ISLES_DEV T mul_rn(T a, T b) { return dmul_rn(a, b); }
ISLES_DEV T div_rn(T a, T b) { return ddiv_rn(a, b); }
#ifdef ISLES_HOST_EMU
#define T_INF ((double)INFINITY)
#else
#define T_INF __longlong_as_double(0x7ff0000000000000ll)
#endif
ISLES_DEV T unifT(u64 z) { return unif53(z); }
#endif
#endif  // ISLES_ARITH_CUH
