// de_epoch_threads.cuh: host only (appended to de_epoch.cu's text under -DISLES_HOST_EMU by
// isles.algorithms.de.host_epoch, never part of a GPU source): the islands of de_epoch_host on
// OpenMP threads (compiled with -fopenmp where the compiler has it; else the pragma is ignored and
// the islands run in turn). Islands are independent (their own rows, keys, hit entry); each
// counts its NaN evaluations in its own slot, summed in island order after the loop, so the
// result is the one-thread loop's bit for bit whatever the thread count. 1: no memory.
#ifndef ISLES_DE_EPOCH_THREADS_CUH
#define ISLES_DE_EPOCH_THREADS_CUH
#ifdef ISLES_HOST_EMU
#include <stdlib.h>
int de_epoch_host_threads(
    const int n_threads, const int n_islands, const T* X, const T* fx, const T* vx, T* Xo, T* fo, T* vo,
    const u64* keys, const T* lower, const T* upper, const long long gen0, const u64* rng_ctr, const int n_gen,
    unsigned long long* nan_count, long long* hit, const T target, const int use_target,
    const T Fw, const T CRt, const double log_cr, const int cr_case)
{
    unsigned long long* nans = (unsigned long long*)calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof(unsigned long long));
    if (!nans) return 1;
    int fail = 0;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1) reduction(| : fail)
    for (int b = 0; b < n_islands; ++b) {
        T* smem = (T*)malloc(sizeof(T) * ((size_t)2 * NPOP * DIM + 4 * NPOP));
        if (!smem) {
            fail |= 1;
            continue;
        }
        int hitk = 0;
        de_epoch_block(b, 0, 1, smem, &hitk, X, fx, vx, Xo, fo, vo, keys, lower, upper, gen0, rng_ctr, n_gen,
                       &nans[b], hit, target, use_target, Fw, CRt, log_cr, cr_case);
        free(smem);
    }
    for (int b = 0; b < n_islands; ++b) *nan_count += nans[b];
    free(nans);
    return fail;
}
#endif
#endif  // ISLES_DE_EPOCH_THREADS_CUH
