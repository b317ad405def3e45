"""The launch layout of the SM-resident epoch kernels (one thread block per island, every
generation of an epoch in one launch: :mod:`isles.algorithms.de.epoch`,
:mod:`isles.algorithms.ep.epoch`): threads per block and blocks per SM, and the timed choice
between a plan's per-generation path and its epoch kernel (:func:`time_paths`)."""
from __future__ import annotations

import math

#: shared memory one block may opt in to where the device does not say (H100/H200: 227 KiB)
SMEM_OPTIN = 227 * 1024
#: shared memory of one SM where the device does not say (H100/H200: 228 KiB)
SMEM_PER_SM = 228 * 1024



def epoch_block(n: int, tpi: int, n_islands: int, smem_rows: int, n_sm: int,
                smem_per_sm: int = SMEM_PER_SM, max_threads_sm: int = 2048) -> int:
    """Threads per block (``EBLOCK``, a multiple of ``tpi``, the threads per row ``ETPI``, at
    most 1024).

    As many groups as the rows need, up to 1024 threads; fewer where several islands share an SM
    (``ceil(I / SMs)`` blocks, at most what the SM's shared memory holds, ``smem_rows`` bytes
    each): the SM's 2048 threads are split between them. The groups are balanced over the passes
    (N = 100 rows at up to 32 groups: 4 passes of 25 groups, not 3 of 32 and one of 4), and the
    block is whole warps (groups past the last row idle)."""
    per_sm = max(1, min(-(-int(n_islands) // max(1, int(n_sm))), int(smem_per_sm) // max(1, int(smem_rows))))
    cap = max(int(tpi), min(1024, int(max_threads_sm) // per_sm) // int(tpi) * int(tpi))
    most = max(1, cap // int(tpi))
    passes = -(-int(n) // most)
    groups = -(-int(n) // passes)
    return -(-groups * int(tpi) // 32) * 32  # whole warps (the shuffles and __syncwarp use full masks)


def epoch_min_blocks(eblock: int, n_islands: int, smem_block: int, n_sm: int,
                     smem_per_sm: int = SMEM_PER_SM, max_threads_sm: int = 2048) -> int:
    """Blocks one SM should hold at once (``EMINB`` of ``__launch_bounds__``, which caps the
    registers per thread): as many as the islands per SM, the SM's threads and its shared memory
    allow, at least 1."""
    return max(1, min(-(-int(n_islands) // max(1, int(n_sm))), int(max_threads_sm) // int(eblock),
                      int(smem_per_sm) // max(1, int(smem_block))))


def time_paths(cp, advances, state: dict, n: int, repeats: int = 3) -> tuple:
    """Microseconds per generation of each ``advance(state, n)`` in ``advances`` (CUDA events, best
    of ``repeats`` after a warm-up that compiles and captures); one host synchronisation each.
    The fused plans' ``choose()`` keeps the faster of their two paths with it."""
    times = []
    for advance in advances:
        advance(state, n)  # compilation, graph capture
        best = math.inf
        for _ in range(repeats):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            advance(state, n)
            b.record()
            b.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(a, b) * 1e3 / n)
        times.append(best)
    return tuple(times)
