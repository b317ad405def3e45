// lshade_epoch_threads.cuh: host only (appended to lshade_epoch.cu's text under -DISLES_HOST_EMU by
// isles.algorithms.lshade.host_epoch, never part of a GPU source): the islands of lshade_epoch_host
// on OpenMP threads (compiled with -fopenmp where the compiler has it; else the pragma is ignored
// and the islands run in turn), as de_epoch_threads.cuh does for DE. Islands are independent (their
// own rows of every array, keys, hit entry; Aw and Xg at the island's offsets); each has its own
// block memory and counts its NaN evaluations in its own slot, summed in island order after the
// loop, so the result is the one-thread loop's bit for bit whatever the thread count. 1: no memory.
#ifndef ISLES_LSHADE_EPOCH_THREADS_CUH
#define ISLES_LSHADE_EPOCH_THREADS_CUH
#ifdef ISLES_HOST_EMU
#include <stdlib.h>
int lshade_epoch_host_threads(
    const int n_threads, const int n_islands, const long long smem_bytes,
    const T* X, const T* fx, const T* vx, const T* A, const long long* a_n, const T* MFi, const T* MCRi,
    const long long* kk, T* Xo, T* fo, T* vo, T* Ao, long long* a_no, T* MFo, T* MCRo, long long* ko, T* Aw, T* Xg,
    const u64* keys, const T* lower, const T* upper, const u64* rng_ctr, const long long lgen0, const int n0,
    const long long nfe0, const int n_gen, const long long max_nfe, const double p, const double r_arc,
    unsigned long long* nan_count, long long* hit_eval, const T target, const int use_target)
{
    unsigned long long* nans = (unsigned long long*)calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof(unsigned long long));
    if (!nans) return 1;
    int fail = 0;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1) reduction(| : fail)
    for (int b = 0; b < n_islands; ++b) {
        unsigned char* smem = (unsigned char*)malloc((size_t)smem_bytes + LS_HOST_SCRATCH);
        if (!smem) {
            fail |= 1;
            continue;
        }
        lshade_epoch_block(b, 0, 1, smem, X, fx, vx, A, a_n, MFi, MCRi, kk, Xo, fo, vo, Ao, a_no, MFo, MCRo, ko, Aw, Xg,
                           keys, lower, upper, rng_ctr, lgen0, n0, nfe0, n_gen, max_nfe, p, r_arc, &nans[b],
                           hit_eval, target, use_target);
        free(smem);
    }
    for (int b = 0; b < n_islands; ++b) *nan_count += nans[b];
    free(nans);
    return fail;
}
#endif
#endif  // ISLES_LSHADE_EPOCH_THREADS_CUH
