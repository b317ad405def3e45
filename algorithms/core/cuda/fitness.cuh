// fitness.cuh: the ranking pair (f, v) of the fused kernels, as problems/constraints.py makes it.
//   isles_better: Deb's rules on T (deb.cuh);
//   isles_fix_fv: the Evaluator's rule: NaN f -> +inf, NaN v -> +inf, and the evaluation counts as
//   a NaN one (return 1) when f was NaN or v is infinite; with the static penalty (the macro
//   PENALTY, the factor r, defined by the family's Python only for constraints.handling=penalty)
//   f + r v is ranked with v = 0.
#ifndef ISLES_FITNESS_CUH
#define ISLES_FITNESS_CUH
#include "arith.cuh"
#include "deb.cuh"
ISLES_DEV int isles_better(T fa, T va, T fb, T vb) { return ISLES_BETTER(fa, va, fb, vb); }
ISLES_DEV int isles_fix_fv(T* f, T* v) {
    if (*v != *v) *v = T_INF;
    const int bad = (*f != *f) || (*v == T_INF);
    if (*f != *f) *f = T_INF;
#ifdef PENALTY
    *f = add_rn(*f, mul_rn((T)PENALTY, *v));
    *v = (T)0;
#endif
    return bad;
}
#endif  // ISLES_FITNESS_CUH
