// de.cu: the fused DE/rand/1/{bin,nec} generation (algorithms/de/cuda.py). Prepended by Python:
// the configuration IS_F32 DIM NPOP TPI ITEMS IPB BLOCK XOVER BOUND (PENALTY), the draw ids
// DRAW_INDEX DRAW_START DRAW_CROSS DRAW_BOUND of algorithms/de (and, for the generation,
// objective.cuh). This file: the per-individual decisions and trial coordinates (also
// de_variation.cu's); the generation follows in de_generation.cu, after the problem's objective.
#include "bounds.cuh"
typedef unsigned long long isz;   // index type (no size_t needed under NVRTC)

#define NWARP ((TPI) >= 32 ? (TPI) / 32 : 1)

// Per-individual random decisions (algorithms/de/de.py sample_indices, algorithms/de/crossover.py).
typedef struct Decisions {
    int r0, r1, r2;   // distinct, != i
    int j0;           // j_rand / start of the exponential segment
    int L;            // NEC length (XOVER == 1)
    u64 s_cross, s_bound;
} Decisions;

// npop, dim: the population's N and D (DE passes NPOP and DIM through decide(); the co-evolutionary
// DE's epoch kernel passes each population's own)
ISLES_DEV Decisions decide_n(u64 key, long long g, int i, int npop, int dim, double log_cr, int cr_case) {
    Decisions d;
    const u64 gb = ((u64)g) << 16;
    const u64 s_index = isles_mix64(gb + DRAW_INDEX);
    const u64 s_start = isles_mix64(gb + DRAW_START);
    d.s_cross = isles_mix64(gb + DRAW_CROSS);
    d.s_bound = isles_mix64(gb + DRAW_BOUND);
    // c_m = floor(u_m (N-1-m)), u from uniform(g, DRAW_INDEX, (N, 3), float64)
    const double u0 = unif53(draw_bits(key, s_index, (u64)i * 3ull + 0ull));
    const double u1 = unif53(draw_bits(key, s_index, (u64)i * 3ull + 1ull));
    const double u2 = unif53(draw_bits(key, s_index, (u64)i * 3ull + 2ull));
    int c0 = (int)(u0 * (double)(npop - 1)); c0 = c0 < npop - 2 ? c0 : npop - 2;
    int c1 = (int)(u1 * (double)(npop - 2)); c1 = c1 < npop - 3 ? c1 : npop - 3;
    int c2 = (int)(u2 * (double)(npop - 3)); c2 = c2 < npop - 4 ? c2 : npop - 4;
    // r0: random offset past i (seed 004 Algorithm 4, one offset per individual)
    const int r0 = (i + 1 + c0) % npop;
    // r1: shift past the sorted excluded set {i, r0}
    const int e0 = i < r0 ? i : r0, e1 = i < r0 ? r0 : i;
    int r1 = c1;
    r1 += (r1 >= e0) ? 1 : 0;
    r1 += (r1 >= e1) ? 1 : 0;
    // r2: shift past the sorted excluded set {i, r0, r1}
    int f0, f1, f2;
    if (r1 < e0) { f0 = r1; f1 = e0; f2 = e1; }
    else if (r1 < e1) { f0 = e0; f1 = r1; f2 = e1; }
    else { f0 = e0; f1 = e1; f2 = r1; }
    int r2 = c2;
    r2 += (r2 >= f0) ? 1 : 0;
    r2 += (r2 >= f1) ? 1 : 0;
    r2 += (r2 >= f2) ? 1 : 0;
    d.r0 = r0; d.r1 = r1; d.r2 = r2;
    // j_rand = integers(g, DRAW_START, (N,), D)
    int j0 = (int)(unif53(draw_bits(key, s_start, (u64)i)) * (double)dim);
    d.j0 = j0 < dim - 1 ? j0 : dim - 1;
    // NEC length, seed 004 eq. 9, U = uniform(g, DRAW_CROSS, (N,), float64)
    d.L = dim;
#if XOVER == 1
    if (cr_case == 0) {
        d.L = 1;
    } else if (cr_case == 1) {
        const double u = unif53(draw_bits(key, d.s_cross, (u64)i));
        double x = ceil(log(u) / log_cr);
        x = x < (double)dim ? x : (double)dim;   // also maps +inf (u = 0) to D
        int L = (int)x;
        d.L = L < 1 ? 1 : L;
    }
#endif
    return d;
}

// Whether trial coordinate j of individual i takes the mutant (the crossover test).
ISLES_DEV bool takes_mutant(const Decisions* d, u64 key, int i, int j, T CRt, int dim) {
#if XOVER == 0
    return (j == d->j0) || (unifT(draw_bits(key, d->s_cross, (u64)i * (u64)dim + (u64)j)) < CRt);
#else
    (void)key; (void)i; (void)CRt;
    int off = j - d->j0;
    off += off < 0 ? dim : 0;
    return off < d->L;
#endif
}

// Mutant coordinate j of individual i (island row offset `base`), in the box.
ISLES_DEV T mutant_coord(const T* X, isz base, const Decisions* d, u64 key, int i, int j,
                         T Fw, const T* lower, const T* upper, int dim) {
    const T a = X[base + (isz)d->r0 * dim + j];
    const T b = X[base + (isz)d->r1 * dim + j];
    const T c = X[base + (isz)d->r2 * dim + j];
    T v = add_rn(a, mul_rn(Fw, sub_rn(b, c)));
    return isles_bound(BOUND, v, lower[j], upper[j], key, d->s_bound, (u64)i * (u64)dim + (u64)j);
}

// Trial coordinate j of individual i: crossover test, mutant, bounds.
ISLES_DEV T trial_coord_n(const T* X, isz base, const Decisions* d, u64 key, int i, int j,
                          T xij, T Fw, T CRt, const T* lower, const T* upper, int dim) {
    if (!takes_mutant(d, key, i, j, CRt, dim)) return xij;
    return mutant_coord(X, base, d, key, i, j, Fw, lower, upper, dim);
}
#define decide(key, g, i, log_cr, cr_case) decide_n((key), (g), (i), NPOP, DIM, (log_cr), (cr_case))
#define trial_coord(X, base, d, key, i, j, xij, Fw, CRt, lower, upper) \
    trial_coord_n((X), (base), &(d), (key), (i), (j), (xij), (Fw), (CRt), (lower), (upper), DIM)
