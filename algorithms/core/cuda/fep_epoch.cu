// fep_epoch.cu: the SM-resident FEP epoch (algorithms/ep/epoch.py, issue 18 section 2): one thread
// block per island runs every generation of an epoch in one launch. Assembled after fep.cu (whose
// device functions it calls: fep_slot, fep_wins_of, fep_select_block; no copy of their code) with
// the defines FEP_EBLOCK (threads per block, whole warps) and FEP_EMINB (blocks one SM should hold).
//
// Generation k (draws of generation gen0 + ctr + k, as the per-generation kernels): the block's
// warps take the island's parent slots i = warp, warp + warps, ... (fep_slot: parent src[i] of union
// buffer A, row i in generation 0, -> B's rows i and mu + i), __syncthreads, the threads take the
// union individuals k = tid, tid + EBLOCK, ... (fep_wins_of -> wins), __syncthreads, the block
// selects (fep_select_block -> src), __syncthreads; A and B swap. The union buffers stay in global
// memory (an island's 2 x 2 mu n coordinates are L2-resident); the histogram in shared memory.
// Every draw is counter-based on (key, generation, draw id, index), so the states equal the
// per-generation kernels' bit for bit.
//
// Buffers: the parents are in buffer 1's first half; generation k writes buffer k % 2; after n
// generations the union is in buffer (n - 1) % 2 and the survivors' positions in src.
//
// The stop target: the first generation k after which some survivor is feasible with f <= target
// goes to hit[island] as gen0 + ctr + k + 1 (track.cu's rule), when use_target is set.
//
// Under -DISLES_HOST_EMU the same block loop runs as C with one thread per block (block.cuh): fep.cu's
// host fep_slot and fep_select_block keep the device functions' contracts, so fep_epoch_host is the
// CI twin of the kernel's loop (HostFEP.run, tests/test_fep_epoch.py).
#include "block.cuh"

// island isl's n_gen generations by the block's thread tid of nthreads (module comment); hist
// (FEP_Q + 1), sh (64), cut and hitk in shared memory
ISLES_DEV void fep_epoch_block(
    const int isl, const int tid, const int nthreads, int* hist, int* sh, FepCut* cut, int* hitk,
    T* X0, T* E0, T* f0, T* v0, T* X1, T* E1, T* f1, T* v1, int* src, int* wins, const u64* keys,
    const long long gen0, const u64* rng_ctr, const int n_gen, unsigned long long* nan_count, long long* hit,
    const T target, const int use_target, const T* lower, const T* upper, const T tau, const T taup,
    const T eta_min)
{
    const int lane = tid & 31, wid = tid >> 5;
    const int nwarps = nthreads >= 32 ? nthreads / 32 : 1;
    const u64 key = keys[isl];
    const long long g0 = gen0 + (long long)rng_ctr[0];   // CounterRNG: generation + ctr
    const fep_sz ubase = (fep_sz)isl * FEP_U;
    int* srci = src + (fep_sz)isl * FEP_MU;
    int* wi = wins + ubase;
    if (tid == 0) *hitk = n_gen;
    for (int k = 0; k < n_gen; ++k) {
        const FepSeeds s = fep_seeds(g0 + k);
        const int odd = k & 1;
        T* XA = odd ? X0 : X1; T* EA = odd ? E0 : E1; T* fA = odd ? f0 : f1; T* vA = odd ? v0 : v1;
        T* XB = odd ? X1 : X0; T* EB = odd ? E1 : E0; T* fB = odd ? f1 : f0; T* vB = odd ? v1 : v0;
        for (int i = wid; i < FEP_MU; i += nwarps)
            fep_slot(lane, isl, i, k ? srci[i] : i, s, key, XA, EA, fA, vA, XB, EB, fB, vB, nan_count, lower,
                     upper, tau, taup, eta_min);
        BLOCK_SYNC();
        for (int u = tid; u < FEP_U; u += nthreads) wi[u] = fep_wins_of(key, s.opp, u, fB + ubase, vB + ubase);
        BLOCK_SYNC();
        fep_select_block(wi, srci, hist, sh, cut, key, s.tie, tid, nthreads);
        BLOCK_SYNC();   // src complete: the target check below and the next generation's parents
        if (use_target) {   // the same for every thread: no barrier inside, hitk keeps the smallest k
            int any = 0;
            for (int i = tid; i < FEP_MU; i += nthreads) {
                const int p = srci[i];
                any |= (vB[ubase + p] <= (T)0) && (fB[ubase + p] <= target);
            }
            if (any) ISLES_ATOMIC_MIN(hitk, k);
        }
    }
    BLOCK_SYNC();   // hitk
    // the generation just finished counts one more (track.cu's rule)
    if (tid == 0 && use_target && *hitk < n_gen && hit[isl] < 0) hit[isl] = g0 + *hitk + 1;
}

#ifdef ISLES_HOST_EMU
// every island in turn, one thread (tests)
void fep_epoch_host(T* X0, T* E0, T* f0, T* v0, T* X1, T* E1, T* f1, T* v1, int* src, int* wins,
                    const u64* keys, const long long gen0, const u64* rng_ctr, const int n_gen, const int n_islands,
                    unsigned long long* nan_count, long long* hit, const T target, const int use_target,
                    const T* lower, const T* upper, const T tau, const T taup, const T eta_min)
{
    static int hist[MAX_Q_HOST + 1];
    int hitk;
    for (int isl = 0; isl < n_islands; ++isl)
        fep_epoch_block(isl, 0, 1, hist, 0, 0, &hitk, X0, E0, f0, v0, X1, E1, f1, v1, src, wins, keys, gen0,
                        rng_ctr, n_gen, nan_count, hit, target, use_target, lower, upper, tau, taup, eta_min);
}
#else
extern "C" __global__ void __launch_bounds__(FEP_EBLOCK, FEP_EMINB)
fep_epoch(T* X0, T* E0, T* f0, T* v0, T* X1, T* E1, T* f1, T* v1, int* src, int* wins,
          const u64* __restrict__ keys, const long long gen0, const u64* __restrict__ rng_ctr, const int n_gen,
          unsigned long long* nan_count, long long* hit, const T target, const int use_target,
          const T* __restrict__ lower, const T* __restrict__ upper, const T tau, const T taup, const T eta_min)
{
    extern __shared__ int hist[];            // FEP_Q + 1
    __shared__ int sh[64];
    __shared__ FepCut cut;
    __shared__ int hitk;
    fep_epoch_block(blockIdx.x, threadIdx.x, FEP_EBLOCK, hist, sh, &cut, &hitk, X0, E0, f0, v0, X1, E1, f1, v1,
                    src, wins, keys, gen0, rng_ctr, n_gen, nan_count, hit, target, use_target, lower, upper, tau,
                    taup, eta_min);
}
#endif
