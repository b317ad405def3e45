// cde_epoch_threads.cuh: host only (appended to cde_epoch.cu's text under -DISLES_HOST_EMU by
// isles.algorithms.coevolution.epoch, never part of a GPU source): the islands of cde_epoch_host
// on OpenMP threads (compiled with -fopenmp where the compiler has it; else the pragma is ignored
// and the islands run in turn), as de_epoch_threads.cuh does for DE. Islands are independent (their
// own rows, fitness, archive, keys and scratch_u row); each has its own block memory (smem_bytes,
// cde_smem_bytes) and counts its NaN evaluations in its own slot, summed in island order after the
// loop, so the result is the one-thread loop's bit for bit whatever the thread count. 1: no memory.
#ifndef ISLES_CDE_EPOCH_THREADS_CUH
#define ISLES_CDE_EPOCH_THREADS_CUH
#ifdef ISLES_HOST_EMU
#include <stdlib.h>
int cde_epoch_host_threads(const int n_threads, const int n_islands, const unsigned long long smem_bytes, CDE_PARAMS) {
    unsigned long long* nans = (unsigned long long*)calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof(unsigned long long));
    if (!nans) return 1;
    int fail = 0;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1) reduction(| : fail)
    for (int b = 0; b < n_islands; ++b) {
        // 16 bytes of slack, as the one-thread caller's buffer (epoch.py's _HostEpoch.smem)
        unsigned char* smem = (unsigned char*)calloc((size_t)smem_bytes + 16, 1);
        if (!smem) {
            fail |= 1;
            continue;
        }
        cde_block(b, smem, X, FXg, Y, FYg, BX, BF, BV, scratch_u, keys, lox, upx, loy, upy, gen, rng_ctr, n_cycles,
                  &nans[b], Fw, CRt, log_cr, cr_case);
        free(smem);
    }
    for (int b = 0; b < n_islands; ++b) *nan_count += nans[b];
    free(nans);
    return fail;
}
#endif
#endif  // ISLES_CDE_EPOCH_THREADS_CUH
