"""The SM-resident epoch kernel of the binary GA: every generation of a call in one launch.

:class:`isles.algorithms.ga.cuda.FusedGA` runs a generation as two launches (``ga_select``: elite
search, stop target, the child slots' decisions; ``ga_generation``: the words and the objective of
every slot) replayed from a CUDA graph. Here one thread block per island runs all ``n``
generations of a call in one launch (``algorithms/core/cuda/ga_epoch.cu``): the block searches
the island's elite (``ga_elite_block``, ``ga_select``'s body), checks the stop target
(``ga_track``), draws the decisions (``ga_decide``), ``__syncthreads``, its groups of ``TPI``
threads build and evaluate the slots (``ga_slot``, ``ga_generation``'s body: the same
:func:`~isles.algorithms.ga.cuda_source.layout`, words, mutation and fused objective), ``__syncthreads``.
The two populations ping-pong in global memory (L2-resident); the rows being evaluated are staged
in shared memory, as in the per-generation kernel.

**Same results.** The device functions are the per-generation kernels' own and every draw is
counter-based on ``(key, generation, draw id, index)``, so the genomes, ``f, v``, the NaN count and
the stop target's ``hit_generation`` equal the per-generation path's bit for bit
(``tests/test_ga_epoch_gpu.py``). The host twin is :meth:`isles.algorithms.ga.cuda_host.HostGA.run`:
the kernel's own block loop (``ga_epoch_block``) compiled as C with one thread per block
(``block.cuh``), over ``ga.cu``'s host ``ga_elite_block`` and ``ga_slot``, which keep the device
functions' contracts (``tests/test_ga_epoch.py``, in CI).

**Where it applies** (:func:`epoch_unsupported_reason`): slots of at most a warp (``TPI <= 32``,
genomes up to 1024 words, 32,768 bits). Longer genomes (trap-5 with 10^5 bits: ``TPI = 128``)
fill the GPU with one generation of one island; one block per island would run that island's
``N`` slots on one SM. **Who picks it.** :class:`~isles.algorithms.ga.cuda.FusedGA` times both
paths once when built (CUDA events) and keeps the faster
(:meth:`~isles.algorithms.ga.cuda.FusedGA.choose`); ``algorithm.epoch=false`` keeps the
per-generation kernels. The path is in the run summary (``GPU path``) and the MLflow tag
``gpu_path``. Source: the generational GA of seed 002 (the paper's GA, section 2).
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.cuda_lib import defines
from isles.algorithms.core.epoch_layout import device_limits, epoch_block, epoch_min_blocks

#: the largest slot group the epoch kernel runs (a group is at most one warp, so several share a block)
MAX_EPOCH_TPI = 32


def epoch_unsupported_reason(tpi: int, n_words: int) -> str | None:
    """Why the epoch kernel does not serve a plan whose slot group has ``tpi`` threads (``GA_TPI``)
    for rows of ``n_words`` 32-bit words, or ``None`` where it does."""
    if int(tpi) > MAX_EPOCH_TPI:
        return (
            f"TPI={tpi} > {MAX_EPOCH_TPI}: a genome of {n_words} words fills the GPU per generation; "
            f"one block per island would run an island's slots on one SM"
        )
    return None


def epoch_rows_bytes(block: int, tpi: int, n_words: int) -> int:
    """Dynamic shared memory of one block in bytes: one staged row of ``n_words`` words per group
    of ``tpi`` threads (``block // tpi`` groups)."""
    return max(4, (int(block) // int(tpi)) * int(n_words) * 4)


def epoch_source(base_source: str, eblock: int, min_blocks: int = 1) -> str:
    """The epoch kernel's source: :func:`isles.algorithms.ga.cuda_source.kernel_source` with
    ``tail=("ga_epoch.cu",)`` (``base_source``) and the defines ``GA_EPOCH_BLOCK`` and
    ``GA_EPOCH_MINB``."""
    return defines({"GA_EPOCH_BLOCK": int(eblock), "GA_EPOCH_MINB": int(min_blocks)}) + base_source


class EpochGA:
    """Launcher of ``ga_epoch`` for one :class:`~isles.algorithms.ga.cuda.FusedGA` plan.

    The block is whole warps of slot groups (``TPI`` threads each), up to 1024 threads, balanced
    over the passes and shared between the islands one SM holds
    (:func:`isles.algorithms.core.epoch_layout.epoch_block`, one staged row of ``W`` words per group
    in shared memory); ``GA_EPOCH_MINB`` is :func:`~isles.algorithms.core.epoch_layout.epoch_min_blocks`.

    Args:
        plan: the :class:`FusedGA` (configuration, buffers, keys, thresholds, target).
        src: :func:`isles.algorithms.ga.cuda_source.kernel_source` with ``tail=("ga_epoch.cu",)``.
        eblock: threads per block (a multiple of 32 in ``[32, 1024]``); default as above.

    Raises:
        ValueError: ``eblock`` is not a multiple of 32 in ``[32, 1024]``, or the plan's ``TPI`` is
            above :data:`MAX_EPOCH_TPI` (:func:`epoch_unsupported_reason`).
    """

    def __init__(self, plan, src: str, eblock: int | None = None):
        from isles.algorithms.core.plan import module  # noqa: PLC0415

        reason = epoch_unsupported_reason(plan.tpi, plan.W)
        if reason is not None:
            raise ValueError(f"GA epoch kernel: {reason}")
        cp = plan.cp
        self.plan, self.cp = plan, cp
        n_sm, per_sm, optin = device_limits(cp)
        optin -= 1024  # the block's static reserve
        tpi, W = plan.tpi, plan.W
        rows = epoch_rows_bytes(min(1024, plan.N * tpi), tpi, W) + 1024  # + the block's static reserve
        block = int(eblock) if eblock is not None else epoch_block(plan.N, tpi, plan.I, rows, n_sm, per_sm)
        if block % 32 or not 32 <= block <= 1024:
            raise ValueError(f"GA epoch kernel: eblock={block}: allowed values are multiples of 32 in [32, 1024]")
        while eblock is None and block > 32 and epoch_rows_bytes(block, tpi, W) > optin:
            block -= 32  # fewer groups where the staged rows do not fit one block
        self.block = block
        self.smem = epoch_rows_bytes(block, tpi, W)
        self.min_blocks = epoch_min_blocks(block, plan.I, self.smem + 1024, n_sm, per_sm)
        self.kernel = module(cp, epoch_source(src, block, self.min_blocks)).get_function("ga_epoch")
        if self.smem > 48 * 1024:
            self.kernel.max_dynamic_shared_size_bytes = self.smem

    def run(self, state: dict, n: int) -> dict:
        """``n >= 1`` generations of every island in one launch; no host sync. Returns a new state
        (fresh arrays, as :meth:`FusedGA.run`): ``genome (I, N, W)`` uint32, ``f, v (I, N)``,
        ``generation``/``evals`` advanced, ``nan_evals``, and ``hit_generation (I,)`` int64 with a
        stop target (checked on every population, the last included)."""
        p = self.plan
        cp = p.cp
        bufs = p._buffers()
        for dst, a in zip(bufs[0], p._arrays(state), strict=False):
            cp.copyto(dst, a)
        track = int(p._track)
        if track:
            p._load_hit(state)
        p._nan.fill(0)
        (P0, f0, v0), (P1, f1, v1) = bufs
        self.kernel(
            (p.I,),
            (self.block,),
            (
                P0,
                f0,
                v0,
                P1,
                f1,
                v1,
                p._elite,
                p._sel,
                p._keys,
                np.int64(state["generation"]),
                p._ctr,
                np.int32(n),
                p._nan,
                p._hit,
                np.int32(track),
                p._target,
                p._K,
                p._penalty,
                p._p_c,
                p._p_m,
            ),
            shared_mem=self.smem,
        )
        return p._finish(state, bufs[n % 2], n)
