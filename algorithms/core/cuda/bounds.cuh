// bounds.cuh: bound handling of one coordinate, exactly algorithms/de/de.py apply_bounds (kind 0
// clip, 1 reflect, 2 reinit with u = CounterRNG.uniform at element idx of the draw whose seed is
// s_bound). A coordinate inside [lo, hi] is returned unchanged.
#ifndef ISLES_BOUNDS_CUH
#define ISLES_BOUNDS_CUH
#include "math.cuh"
ISLES_DEV T isles_bound(int kind, T v, T lo, T hi, u64 key, u64 s_bound, u64 idx) {
    if (!(v < lo || v > hi)) return v;
    if (kind == 0) return v < lo ? lo : hi;
    if (kind == 1) {
        const T w = sub_rn(hi, lo);
        const T w2 = add_rn(w, w);
        if (!(w2 > (T)0)) return lo;
        T y = sub_rn(v, lo);
        if (!(t_abs(y) < w2)) y = t_fmod(y, w2);   // fmod(y, w2) is y itself when |y| < w2 (exact)
        if (y < (T)0) y = add_rn(y, w2);
        if (y > w) y = sub_rn(w2, y);
        const T z = add_rn(lo, y);
        return z < lo ? lo : (z > hi ? hi : z);
    }
    const T u = unifT(draw_bits(key, s_bound, idx));
    return add_rn(lo, mul_rn(u, sub_rn(hi, lo)));
}
#endif  // ISLES_BOUNDS_CUH
