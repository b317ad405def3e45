// track.cu: the per-generation stop target of the fused plans (algorithms/core/plan.py TargetTracker).
#include "arith.cuh"
typedef unsigned long long isz;
// Per-generation stop target (IslandAlgorithm.track_target): island b's best is feasible with
// f <= target iff some individual is (Deb's rules rank every feasible one above the infeasible);
// the first generation at which that holds goes to hit[b]. One block per island; row i of island
// b is position idx[b n + i] (use_idx) or i of its stride-long row of f and v.
extern "C" __global__ void isles_track_hit(const T* __restrict__ f, const T* __restrict__ v,
                                           const int* __restrict__ idx, const int use_idx, const int n,
                                           const int stride, long long* __restrict__ hit, const T target,
                                           const long long* __restrict__ gen_dev, const long long gen_off,
                                           const u64* __restrict__ rng_ctr)
{
    __shared__ int found;
    const int b = blockIdx.x;
    if (hit[b] >= 0) return;   // the same for every thread of the block
    if (threadIdx.x == 0) found = 0;
    __syncthreads();
    int any = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int p = use_idx ? idx[(isz)b * n + i] : i;
        const T fi = f[(isz)b * stride + p], vi = v[(isz)b * stride + p];
        any |= (vi <= (T)0) && (fi <= target);
    }
    if (any) found = 1;
    __syncthreads();
    // the generation just finished: its draws used gen_off + gen + ctr; the state now counts one more
    if (threadIdx.x == 0 && found) hit[b] = gen_off + gen_dev[0] + (long long)rng_ctr[0] + 1;
}
