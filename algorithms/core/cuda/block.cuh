// block.cuh: the block-level primitives of the SM-resident epoch kernels (de_epoch.cu, cde_epoch.cu,
// fep_epoch.cu). Their block code is written as strided loops over the thread index between
// BLOCK_SYNC()s, so that under -DISLES_HOST_EMU the same body runs as C with one thread per block
// (the CI emulations): there a barrier is a no-op and an atomic a plain update.
#ifndef ISLES_BLOCK_CUH
#define ISLES_BLOCK_CUH
#ifdef ISLES_HOST_EMU
#define BLOCK_SYNC() ((void)0)
#define ISLES_ATOMIC_MIN(p, v) (*(p) = (*(p) < (v) ? *(p) : (v)))
#define ISLES_ATOMIC_ADD(p, v) (*(p) += (v))
#else
#define BLOCK_SYNC() __syncthreads()
#define ISLES_ATOMIC_MIN(p, v) atomicMin((p), (v))
#define ISLES_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#endif
#endif  // ISLES_BLOCK_CUH
