// ga_epoch_threads.cuh: host only (appended to ga_epoch.cu's text under -DISLES_HOST_EMU by
// isles.algorithms.ga.cuda_host, never part of a GPU source): the islands of ga_epoch_host on
// OpenMP threads (-fopenmp where the compiler has it; else the islands in turn). Each island has
// its own row scratch and NaN slot, summed in island order after the loop: the one-thread state
// bit for bit whatever the thread count.
#ifndef ISLES_GA_EPOCH_THREADS_CUH
#define ISLES_GA_EPOCH_THREADS_CUH
#ifdef ISLES_HOST_EMU
#include <stdlib.h>
int ga_epoch_host_threads(const int n_threads, unsigned int* P0, T* f0, T* v0, unsigned int* P1, T* f1, T* v1,
                          int* elite, GASel* sel, const u64* keys, const long long gen0, const u64* rng_ctr,
                          const int n_gen, const int n_islands, unsigned long long* nan_count, long long* hit,
                          const int track, const T target, const u64* K, const T penalty, const double p_c,
                          const double p_m)
{
    unsigned long long* nans = (unsigned long long*)calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof(unsigned long long));
    if (!nans) return 1;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1)
    for (int isl = 0; isl < n_islands; ++isl) {
        unsigned int row[GA_W];
        ga_epoch_block(isl, 0, 1, row, 0, 0, P0, f0, v0, P1, f1, v1, elite, sel, keys, gen0, rng_ctr, n_gen,
                       &nans[isl], hit, track, target, K, penalty, p_c, p_m);
    }
    for (int isl = 0; isl < n_islands; ++isl) *nan_count += nans[isl];
    free(nans);
    return 0;
}
#endif
#endif  // ISLES_GA_EPOCH_THREADS_CUH
