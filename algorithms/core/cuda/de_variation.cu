#ifndef ISLES_HOST_EMU
// One warp per individual (4 per block); lane l writes coordinates l, l + 32, ... of its trial row.
extern "C" __global__ void __launch_bounds__(128)
de_variation(const T* __restrict__ X, T* __restrict__ U, const u64* __restrict__ keys,
             const T* __restrict__ lower, const T* __restrict__ upper, const long long gen,
             const u64* __restrict__ rng_ctr, const int total, const T Fw, const T CRt,
             const double log_cr, const int cr_case)
{
    const int gind = blockIdx.x * 4 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (gind >= total) return;
    const int isl = gind / NPOP;
    const int i = gind - isl * NPOP;
    const u64 key = keys[isl];
    const long long g = gen + (long long)rng_ctr[0];   // as CounterRNG: generation + ctr
    const Decisions d = decide(key, g, i, log_cr, cr_case);
    const isz base = (isz)isl * NPOP * DIM;
    const isz row = (isz)gind * DIM;
    for (int j = lane; j < DIM; j += 32) {
        U[row + j] = trial_coord(X, base, d, key, i, j, X[row + j], Fw, CRt, lower, upper);
    }
}
#endif
