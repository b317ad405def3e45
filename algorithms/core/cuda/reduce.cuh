// reduce.cuh: merges of a fused objective's OBJ_NACC accumulators with its obj_merge (the contract
// of isles.problems.base.Problem; included after the objective). Device code only. obj_merge is
// associative and commutative: after a merge every participating thread holds the same values.
#ifndef ISLES_REDUCE_CUH
#define ISLES_REDUCE_CUH
#ifndef ISLES_HOST_EMU
#define FULL_MASK 0xffffffffu

// xor-shuffle merge over groups of `width` lanes (a power of two <= 32) of the lanes in `mask`
ISLES_DEV void isles_warp_merge(T* acc, unsigned int mask, int width) {
#pragma unroll
    for (int o = width / 2; o > 0; o >>= 1) {
        T other[OBJ_NACC];
#pragma unroll
        for (int s = 0; s < OBJ_NACC; ++s) other[s] = __shfl_xor_sync(mask, acc[s], o, width);
        obj_merge(acc, other);
    }
}
// merge across the `nwarp` warps of a group of threads, each warp merged already
// (isles_warp_merge), in warp order through shared memory `red` (OBJ_NACC * nwarp elements, one
// region per group); `w` is the thread's warp within its group. Every thread of the block calls it
// (one __syncthreads); every thread returns its group's total.
ISLES_DEV void isles_group_merge(T* acc, T* red, int nwarp, int w) {
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int s = 0; s < OBJ_NACC; ++s) red[s * nwarp + w] = acc[s];
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < OBJ_NACC; ++s) acc[s] = red[s * nwarp];
#pragma unroll
    for (int k = 1; k < nwarp; ++k) {
        T other[OBJ_NACC];
#pragma unroll
        for (int s = 0; s < OBJ_NACC; ++s) other[s] = red[s * nwarp + k];
        obj_merge(acc, other);
    }
}
// the same over the whole block as one group
ISLES_DEV void isles_block_merge(T* acc, T* red, int nwarp) { isles_group_merge(acc, red, nwarp, threadIdx.x >> 5); }
#endif  // ISLES_HOST_EMU
#endif  // ISLES_REDUCE_CUH
