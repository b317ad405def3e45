// ga_epoch.cu: the SM-resident GA epoch (algorithms/ga/epoch.py, issue 18): one thread block per
// island runs every generation of a call in one launch. Assembled after ga.cu (whose device
// functions it calls: ga_elite_block, ga_track, ga_decide, ga_slot; no copy of their code) with the
// defines GA_EPOCH_BLOCK (threads per block: whole warps, a multiple of GA_TPI <= 32) and
// GA_EPOCH_MINB (blocks one SM should hold).
//
// Generation k (draws of generation gen0 + ctr + k, as the per-generation kernels ga_select and
// ga_generation): the block searches the island's elite (ga_elite_block, ends with a barrier),
// thread 0 checks the stop target (ga_track), the threads draw the child slots' decisions
// c = tid, tid + EBLOCK, ... (ga_decide -> sel), BLOCK_SYNC, the groups of TPI threads build and
// evaluate the slots c = grp, grp + groups, ... (ga_slot: words to the next population and to the
// group's shared row, ga_group_fv), BLOCK_SYNC; the populations swap. After the last generation the
// elite search and target check run once more on the final population (what FusedGA.run's last
// ga_select does). The two populations ping-pong in global memory (an island's N W words are
// L2-resident); the rows being evaluated are in shared memory. Every draw is counter-based on
// (key, generation, draw id, index), so the states equal the per-generation kernels' bit for bit.
//
// Buffers: the state is in buffer 0; generation k reads buffer k % 2 and writes (k + 1) % 2; after
// n generations the population is in buffer n % 2.
//
// Under -DISLES_HOST_EMU the same block loop runs as C with one thread per block (block.cuh): ga.cu's
// host ga_elite_block and ga_slot keep the device functions' contracts, so ga_epoch_host is the CI
// twin of the kernel's loop (HostGA.run, tests/test_ga_epoch.py).
#include "block.cuh"

// island isl's n_gen generations by the block's thread tid of nthreads (module comment); rows
// (groups x GA_W words), red and esh in shared memory; elite (I, GA_NEK) and sel (I, N) global
ISLES_DEV void ga_epoch_block(
    const int isl, const int tid, const int nthreads, unsigned int* rows, T* red, GAEliteSh* esh,
    unsigned int* P0, T* f0, T* v0, unsigned int* P1, T* f1, T* v1, int* elite, GASel* sel, const u64* keys,
    const long long gen0, const u64* rng_ctr, const int n_gen, unsigned long long* nan_count, long long* hit,
    const int track, const T target, const u64* K, const T penalty, const double p_c, const double p_m)
{
    const int grp = tid / GA_TPI, t = tid - grp * GA_TPI;
    const int groups = nthreads >= GA_TPI ? nthreads / GA_TPI : 1;   // host: one thread, one group
    const u64 key = keys[isl];
    const long long g0 = gen0 + (long long)rng_ctr[0];               // CounterRNG: generation + ctr
    const ga_sz o = (ga_sz)isl * GA_N;
    int* el = elite + isl * GA_NEK;
    GASel* seli = sel + o;
    unsigned int* row = rows + grp * GA_W;
    for (int k = 0;; ++k) {
        const int odd = k & 1;
        const unsigned int* PA = (odd ? P1 : P0) + o * GA_W;
        const T* fA = (odd ? f1 : f0) + o;
        const T* vA = (odd ? v1 : v0) + o;
        const long long g = g0 + k;
        if (GA_NE > 0 || track) ga_elite_block(fA, vA, el, tid, nthreads, esh);   // uniform condition
        if (track && tid == 0) ga_track(fA, vA, el[0], hit + isl, target, g);
        if (k == n_gen) break;
        for (int c = tid; c < GA_N; c += nthreads)
            if (ga_kind(c) == 1) seli[c] = ga_decide(key, g, c, fA, vA, p_c, p_m);
        BLOCK_SYNC();   // sel complete
        for (int c = grp; c < GA_N; c += groups)
            ga_slot(c, t, row, red, PA, fA, vA, el, seli, (odd ? P0 : P1) + o * GA_W, (odd ? f0 : f1) + o,
                    (odd ? v0 : v1) + o, key, g, nan_count, K, penalty);
        BLOCK_SYNC();   // the next population complete
    }
}

#ifdef ISLES_HOST_EMU
// every island in turn, one thread (tests)
void ga_epoch_host(unsigned int* P0, T* f0, T* v0, unsigned int* P1, T* f1, T* v1, int* elite, GASel* sel,
                   const u64* keys, const long long gen0, const u64* rng_ctr, const int n_gen, const int n_islands,
                   unsigned long long* nan_count, long long* hit, const int track, const T target, const u64* K,
                   const T penalty, const double p_c, const double p_m)
{
    static unsigned int row[GA_W];
    for (int isl = 0; isl < n_islands; ++isl)
        ga_epoch_block(isl, 0, 1, row, 0, 0, P0, f0, v0, P1, f1, v1, elite, sel, keys, gen0, rng_ctr, n_gen,
                       nan_count, hit, track, target, K, penalty, p_c, p_m);
}
#else
extern "C" __global__ void __launch_bounds__(GA_EPOCH_BLOCK, GA_EPOCH_MINB)
ga_epoch(unsigned int* P0, T* f0, T* v0, unsigned int* P1, T* f1, T* v1, int* elite, GASel* sel,
         const u64* __restrict__ keys, const long long gen0, const u64* __restrict__ rng_ctr, const int n_gen,
         unsigned long long* nan_count, long long* hit, const int track, const T target,
         const u64* __restrict__ K, const T penalty, const double p_c, const double p_m)
{
    extern __shared__ unsigned int ga_rows[];   // GA_EPOCH_BLOCK / GA_TPI rows of GA_W words
    __shared__ T red[GA_NWARP * OBJ_NACC];
    __shared__ GAEliteSh esh;
    ga_epoch_block(blockIdx.x, threadIdx.x, GA_EPOCH_BLOCK, ga_rows, red, &esh, P0, f0, v0, P1, f1, v1, elite,
                   sel, keys, gen0, rng_ctr, n_gen, nan_count, hit, track, target, K, penalty, p_c, p_m);
}
#endif
