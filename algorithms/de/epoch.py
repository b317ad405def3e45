"""The SM-resident epoch kernel of DE: every generation of an epoch of every island in one launch.

:class:`isles.algorithms.de.cuda.FusedDE` runs a generation as one kernel launch replayed from a
CUDA graph. For small islands (Rosenbrock D = 50, N = 100) that launch, not the arithmetic, is the
cost: the kernel ends, the next begins, and each island's few thousand coordinates never fill
the GPU. Here one thread block per island keeps the island's two populations (current and next,
``2 N D`` elements) and their ``f, v`` in shared memory and runs all ``n`` generations of an epoch
in one launch (``algorithms/core/cuda/de_epoch.cu``), with one ``__syncthreads`` per generation.

**Same results.** The block's groups of ``TPI`` threads do per row exactly what the per-generation
kernel's groups do (same :func:`~isles.algorithms.de.cuda_source.layout`, same draws, same fold order
and merge of the problem's ``obj_term``), so ``X, f, v``, the NaN count and the stop target's
``hit_generation`` equal :meth:`FusedDE.run`'s per-generation path bit for bit (GPU tests), and
the trial rows equal the NumPy twin's (:mod:`isles.algorithms.de.de`) bit for bit.

**Who picks it.** :func:`epoch_unsupported_reason` says where it cannot run: the two populations
must fit one block's opt-in shared memory (227 KiB on an H100: float32 ``N D`` up to about 28,000).
Where it can, :class:`FusedDE` times both paths once when it is built (64 generations each, CUDA
events) and keeps the faster; the results are the same either way. ``algorithm.epoch=false``
keeps the per-generation kernel. The path is in the run summary (``GPU path``) and the MLflow tag
``gpu_path``.

:class:`isles.algorithms.de.host_epoch.HostEpochDE` compiles the same source as C with
``-DISLES_HOST_EMU`` (one thread per block, the fold sequential over coordinates) for the CI tests
on NumPy states.
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.cuda_lib import defines as c_defines
from isles.algorithms.core.epoch_layout import SMEM_OPTIN, device_limits, epoch_block, epoch_min_blocks


def epoch_smem_bytes(dtype, dim: int, n: int, tpi: int, nacc: int, groups: int) -> int:
    """Bytes of dynamic shared memory of one block: two populations ``(N, D)``, their ``f, v``
    and, for ``TPI > 32``, each group's merge scratch (``nacc * TPI / 32`` elements)."""
    red = groups * nacc * (tpi // 32) if tpi > 32 else 0
    return np.dtype(dtype).itemsize * (2 * int(n) * int(dim) + 4 * int(n) + red)


def epoch_unsupported_reason(dtype, dim: int, n: int, tpi: int, nacc: int, optin: int = SMEM_OPTIN) -> str | None:
    """Why the epoch kernel cannot run ``N x D`` (the smallest block's shared memory exceeds
    ``optin`` bytes), or ``None``."""
    need = epoch_smem_bytes(dtype, dim, n, tpi, nacc, 1)
    if need > optin:
        return f"N x D = {n} x {dim}: two populations need {need} bytes of shared memory, a block may have {optin}"
    return None


def epoch_tpi(dim: int, tpi: int, n_islands: int = 1, n_sm: int = 132) -> int:
    """Threads per row ``ETPI`` of the epoch kernel: ``TPI`` where the per-generation kernel's
    group is wider than a warp (``D > 128``); else the power of two nearest ``D / c`` in
    ``[1, 32]``, with ``c`` = 8 coordinates per thread where the islands leave SMs to spare (a
    generation's latency counts) and 16 from two islands per SM on (the work counts: fewer
    threads repeat each row's decisions). Rosenbrock D = 50 on an H100: 8 at 64 islands, 4 at
    1024 (``benchmarks/de_bench.py --etpi``, docs/de.md)."""
    if tpi > 32:
        return int(tpi)
    per = 8 if n_islands < 2 * n_sm else 16
    e = 1
    while e < 32 and e * per * 1.5 < dim:
        e *= 2
    return e


def epoch_source(base_source: str, eblock: int, etpi: int, min_blocks: int = 1) -> str:
    """The epoch kernel's source: the per-generation kernel's configuration, draws, ``de.cu`` and
    objective (``base_source``: :func:`isles.algorithms.de.cuda_source.kernel_source` with
    ``tail="de_epoch.cu"``) with ``EBLOCK``, ``ETPI`` and ``EMINB``."""
    return c_defines({"EBLOCK": int(eblock), "ETPI": int(etpi), "EMINB": int(min_blocks)}) + base_source


class EpochDE:
    """Launcher of ``de_epoch`` for one :class:`~isles.algorithms.de.cuda.FusedDE` plan.

    Args:
        plan: the :class:`FusedDE` (its configuration, keys, bounds, tracker).
        src: :func:`isles.algorithms.de.cuda_source.kernel_source` with ``tail="de_epoch.cu"``.
        etpi: threads per row (a power of two dividing ``TPI``, at most 32 when ``TPI = 32``);
            default :func:`epoch_tpi`.
        min_blocks: ``EMINB``; default :func:`epoch_min_blocks`.

    Raises:
        ValueError: :func:`epoch_unsupported_reason` gives a reason on this device.
    """

    def __init__(self, plan, src: str, etpi: int | None = None, min_blocks: int | None = None):
        from isles.algorithms.core.plan import module  # noqa: PLC0415

        cp = plan.cp
        self.plan, self.cp = plan, cp
        n_sm, per_sm, optin = device_limits(cp)
        nacc = int(plan.macros["OBJ_NACC"])
        why = epoch_unsupported_reason(plan.dtype, plan.D, plan.N, plan.tpi, nacc, optin)
        if why is not None:
            raise ValueError(f"DE epoch kernel: {why}")
        self.etpi = int(etpi) if etpi is not None else epoch_tpi(plan.D, plan.tpi, plan.I, n_sm)
        if self.etpi < 1 or plan.tpi % self.etpi or (plan.tpi > 32 and self.etpi != plan.tpi):
            raise ValueError(f"DE epoch kernel: ETPI={self.etpi} with TPI={plan.tpi}")
        rows = epoch_smem_bytes(plan.dtype, plan.D, plan.N, plan.tpi, nacc, 1) + 1024  # + the block's reserve
        e = self.etpi
        self.block = epoch_block(plan.N, e, plan.I, rows, n_sm, per_sm)
        self.smem = epoch_smem_bytes(plan.dtype, plan.D, plan.N, plan.tpi, nacc, self.block // e)
        while self.smem > optin and self.block > e:  # the merge scratch of fewer groups
            self.block -= e
            self.smem = epoch_smem_bytes(plan.dtype, plan.D, plan.N, plan.tpi, nacc, self.block // e)
        self.min_blocks = (
            int(min_blocks)
            if min_blocks is not None
            else epoch_min_blocks(self.block, plan.I, self.smem + 1024, n_sm, per_sm)
        )
        self.kernel = module(cp, epoch_source(src, self.block, e, self.min_blocks)).get_function("de_epoch")
        self.kernel.max_dynamic_shared_size_bytes = self.smem

    def run(self, state: dict, n: int) -> dict:
        """``n`` generations of every island in one launch; no host sync. Returns a new state."""
        cp, p = self.cp, self.plan
        X, f, v = p._arrays(state)
        Xo, fo, vo = cp.empty_like(X), cp.empty_like(f), cp.empty_like(v)
        nan = p._nan_counter(state)
        tr = p.tracker
        if tr is not None:
            tr.load(state)
        self.kernel(
            (p.I,),
            (self.block,),
            (
                X,
                f,
                v,
                Xo,
                fo,
                vo,
                p._keys,
                p._lower,
                p._upper,
                np.int64(state["generation"]),
                p._ctr,
                np.int32(n),
                nan,
                tr.hit if tr is not None else p._zero,
                tr.target if tr is not None else p.dtype.type(0),
                np.int32(tr is not None),
                p._F,
                p._CR,
                p._log_cr,
                p._cr_case,
            ),
            shared_mem=self.smem,
        )
        s = dict(state)
        s["X"], s["f"], s["v"] = Xo, fo, vo
        if tr is not None:
            s["hit_generation"] = tr.hit.copy()
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * p.N
        s["nan_evals"] = nan
        return s
