// fep_epoch_threads.cuh: host only (appended to fep_epoch.cu's text under -DISLES_HOST_EMU by
// isles.algorithms.ep.cuda_host, never part of a GPU source): the islands of fep_epoch_host on
// OpenMP threads (-fopenmp where the compiler has it; else the islands in turn). Each island has
// its own histogram and NaN slot, summed in island order after the loop: the one-thread state
// bit for bit whatever the thread count.
#ifndef ISLES_FEP_EPOCH_THREADS_CUH
#define ISLES_FEP_EPOCH_THREADS_CUH
#ifdef ISLES_HOST_EMU
#include <stdlib.h>
int fep_epoch_host_threads(const int n_threads, T* X0, T* E0, T* f0, T* v0, T* X1, T* E1, T* f1, T* v1, int* src,
                           int* wins, const u64* keys, const long long gen0, const u64* rng_ctr, const int n_gen,
                           const int n_islands, unsigned long long* nan_count, long long* hit, const T target,
                           const int use_target, const T* lower, const T* upper, const T tau, const T taup,
                           const T eta_min)
{
    unsigned long long* nans = (unsigned long long*)calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof(unsigned long long));
    if (!nans) return 1;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1)
    for (int isl = 0; isl < n_islands; ++isl) {
        int hist[MAX_Q_HOST + 1];
        int hitk;
        fep_epoch_block(isl, 0, 1, hist, 0, 0, &hitk, X0, E0, f0, v0, X1, E1, f1, v1, src, wins, keys, gen0,
                        rng_ctr, n_gen, &nans[isl], hit, target, use_target, lower, upper, tau, taup, eta_min);
    }
    for (int isl = 0; isl < n_islands; ++isl) *nan_count += nans[isl];
    free(nans);
    return 0;
}
#endif
#endif  // ISLES_FEP_EPOCH_THREADS_CUH
