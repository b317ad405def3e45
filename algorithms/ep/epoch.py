"""The SM-resident epoch kernel of FEP / CEP / IFEP: every generation of an epoch in one launch.

:class:`isles.algorithms.ep.cuda.FusedFEP` runs a generation as three launches (``fep_generate``,
``fep_wins``, ``fep_select``) replayed from a CUDA graph; on one H100 the launch floor of such a
generation is about 7.7 us, most of a small island's generation. Here one thread block per island
runs all ``n`` generations of a call in one launch (``algorithms/core/cuda/fep_epoch.cu``): the
block's warps build the island's offspring (``fep_slot``, the per-slot body ``fep_generate``
calls), ``__syncthreads``, its threads count the wins (``fep_wins_of``), ``__syncthreads``, the block
selects (``fep_select_block``, ``fep_select``'s body), ``__syncthreads``. The union buffers ping-pong
in global memory (L2-resident), as in the per-generation path.

**Same results.** The device functions are the per-generation kernels' own and every draw is
counter-based on ``(key, generation, draw id, index)``, so ``X, eta, f, v``, the survivors, the NaN
count and the stop target's ``hit_generation`` equal the per-generation path's bit for bit
(``tests/test_fep_epoch_gpu.py``). The host twin is :meth:`isles.algorithms.ep.cuda_host.HostFEP.run`:
the kernel's own block loop (``fep_epoch_block``) compiled as C with one thread per block
(``block.cuh``), over ``fep.cu``'s host ``fep_slot`` and ``fep_select_block``, which keep the device
functions' contracts (``tests/test_fep_epoch.py``, in CI).

**Who picks it.** :class:`~isles.algorithms.ep.cuda.FusedFEP` times both paths once when built
(CUDA events) and keeps the faster (:meth:`~isles.algorithms.ep.cuda.FusedFEP.choose`);
``algorithm.epoch=false`` keeps the per-generation kernels. The path is in the run summary
(``GPU path``) and the MLflow tag ``gpu_path``.
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.cuda_lib import defines
from isles.algorithms.core.epoch_layout import device_limits, epoch_block, epoch_min_blocks


def epoch_source(base_source: str, eblock: int, min_blocks: int = 1) -> str:
    """The epoch kernel's source: :func:`isles.algorithms.ep.cuda_source.kernel_source` with
    ``tail=("fep_epoch.cu",)`` (``base_source``) and the defines ``FEP_EBLOCK`` and ``FEP_EMINB``."""
    return defines({"FEP_EBLOCK": int(eblock), "FEP_EMINB": int(min_blocks)}) + base_source


class EpochFEP:
    """Launcher of ``fep_epoch`` for one :class:`~isles.algorithms.ep.cuda.FusedFEP` plan.

    The block is whole warps, one per parent slot up to 1024 threads, balanced over the passes and
    shared between the islands one SM holds (:func:`isles.algorithms.de.epoch.epoch_block` with 32
    threads per row); ``FEP_EMINB`` is :func:`isles.algorithms.de.epoch.epoch_min_blocks`.

    Args:
        plan: the :class:`FusedFEP` (configuration, buffers, keys, bounds, tracker).
        src: :func:`isles.algorithms.ep.cuda_source.kernel_source` with ``tail=("fep_epoch.cu",)``.
        eblock: threads per block (a multiple of 32, at most 1024); default as above.

    Raises:
        ValueError: ``eblock`` is not a multiple of 32 in ``[32, 1024]``.
    """

    def __init__(self, plan, src: str, eblock: int | None = None):
        from isles.algorithms.core.plan import module  # noqa: PLC0415

        cp = plan.cp
        self.plan, self.cp = plan, cp
        n_sm, per_sm, _ = device_limits(cp)
        self.smem = plan.hist_smem
        rows = self.smem + 1024  # + the block's reserve
        self.block = int(eblock) if eblock is not None else epoch_block(plan.mu, 32, plan.I, rows, n_sm, per_sm)
        if self.block % 32 or not 32 <= self.block <= 1024:
            raise ValueError(f"FEP epoch kernel: eblock={self.block}: allowed values are multiples of 32 in [32, 1024]")
        self.min_blocks = epoch_min_blocks(self.block, plan.I, rows, n_sm, per_sm)
        self.kernel = module(cp, epoch_source(src, self.block, self.min_blocks)).get_function("fep_epoch")

    def run(self, state: dict, n: int) -> dict:
        """``n >= 1`` generations of every island in one launch; no host sync. Returns a new state
        (fresh arrays, as :meth:`FusedFEP.run`)."""
        p = self.plan
        bufs = p._buffers()
        p._load(state, bufs[1])
        p._nan.fill(0)
        tr = p.tracker
        if tr is not None:
            tr.load(state)
        (X0, E0, f0, v0), (X1, E1, f1, v1) = bufs
        self.kernel(
            (p.I,),
            (self.block,),
            (
                X0,
                E0,
                f0,
                v0,
                X1,
                E1,
                f1,
                v1,
                p._src,
                p._wins,
                p._keys,
                np.int64(state["generation"]),
                p._ctr,
                np.int32(n),
                p._nan,
                tr.hit if tr is not None else p._zero,
                tr.target if tr is not None else p.dtype.type(0),
                np.int32(tr is not None),
                p._lower,
                p._upper,
                p.tau,
                p.taup,
                p.eta_min,
            ),
            shared_mem=self.smem,
        )
        s = p._finish(state, bufs[(n - 1) % 2], n, p._nan)
        if tr is not None:
            s["hit_generation"] = tr.hit.copy()
        return s
