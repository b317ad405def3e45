"""The launch layout of the SM-resident epoch kernels (one thread block per island, every
generation of an epoch in one launch: :mod:`isles.algorithms.de.epoch`,
:mod:`isles.algorithms.ep.epoch`): threads per block and blocks per SM, and the timed choice
between a plan's per-generation path and its epoch kernel (:func:`time_paths`, :class:`EpochPaths`)."""

from __future__ import annotations

import logging
import math

log = logging.getLogger(__name__)

#: shared memory one block may opt in to where the device does not say (H100/H200: 227 KiB)
SMEM_OPTIN = 227 * 1024
#: shared memory of one SM where the device does not say (H100/H200: 228 KiB)
SMEM_PER_SM = 228 * 1024


def device_limits(cp) -> tuple[int, int, int]:
    """``(SMs, shared memory of one SM, shared memory one block may opt in to)`` of the current
    device in bytes (the H100/H200 values where the device does not say): what the epoch
    launchers size their blocks by."""
    attrs = cp.cuda.Device().attributes
    return (
        int(attrs.get("MultiProcessorCount", 132)),
        int(attrs.get("MaxSharedMemoryPerMultiprocessor", SMEM_PER_SM)),
        int(attrs.get("MaxSharedMemoryPerBlockOptin", SMEM_OPTIN)),
    )


def epoch_block(
    n: int,
    tpi: int,
    n_islands: int,
    smem_rows: int,
    n_sm: int,
    smem_per_sm: int = SMEM_PER_SM,
    max_threads_sm: int = 2048,
) -> int:
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


def epoch_min_blocks(
    eblock: int, n_islands: int, smem_block: int, n_sm: int, smem_per_sm: int = SMEM_PER_SM, max_threads_sm: int = 2048
) -> int:
    """Blocks one SM should hold at once (``EMINB`` of ``__launch_bounds__``, which caps the
    registers per thread): as many as the islands per SM, the SM's threads and its shared memory
    allow, at least 1."""
    return max(
        1,
        min(
            -(-int(n_islands) // max(1, int(n_sm))),
            int(max_threads_sm) // int(eblock),
            int(smem_per_sm) // max(1, int(smem_block)),
        ),
    )


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


class EpochPaths:
    """The two paths of a fused plan that has an epoch kernel (DE's :class:`~isles.algorithms.de.cuda.FusedDE`,
    FEP's :class:`~isles.algorithms.ep.cuda.FusedFEP`): :meth:`run` takes the epoch kernel
    (``self.epoch.run``) where :attr:`use_epoch` says so, else the plan's ``_run_generations``;
    :meth:`keep_faster` times both and sets :attr:`use_epoch`. The plan sets ``epoch`` (or
    ``None``), ``use_epoch = False`` and ``timings = None`` when it is built, and its family name
    in ``FAMILY``."""

    FAMILY = "fused"

    @property
    def gpu_path(self) -> str:
        """Which kernels :meth:`run` uses, in words (the run summary, the MLflow tag ``gpu_path``):
        ``"epoch kernel"`` (one launch per call) or ``"fused kernel"`` (the per-generation
        kernels, replayed from a CUDA graph)."""
        return "epoch kernel" if self.use_epoch else "fused kernel"

    #: generations :meth:`choose` times by default (``None``: one graph replay plus one single
    #: generation, ``graph_generations + 1``, :meth:`run`'s shape for a long call)
    CHOOSE_N = None

    def choose(self, n: int | None = None, repeats: int = 3) -> None:
        """Time ``n`` generations of both paths on a random population (the plan's
        ``_timing_state()``; CUDA events, best of ``repeats`` after a warm-up that compiles and
        captures) and keep the faster in :attr:`use_epoch` (:meth:`keep_faster`). Both paths give
        the same results, so the choice changes only the speed. One host sync. A no-op without an
        epoch kernel."""
        if self.epoch is None:
            return
        if n is None:
            n = self.CHOOSE_N if self.CHOOSE_N is not None else self.graph_generations + 1
        self.keep_faster(self._timing_state(), int(n), repeats)

    def keep_faster(self, state: dict, n: int, repeats: int) -> None:
        """Time ``n`` generations of both paths from ``state`` (:func:`time_paths`) and keep the
        faster in :attr:`use_epoch`; :attr:`timings` holds ``(per-generation, epoch)`` in us per
        generation. Both paths give the same results, so the choice changes only the speed."""
        self.timings = time_paths(self.cp, (self._run_generations, self.epoch.run), state, n, repeats)
        self.use_epoch = self.timings[1] < self.timings[0]
        log.info(
            "%s: %s (per generation %.3f us, epoch kernel %.3f us per generation)",
            self.FAMILY,
            self.gpu_path,
            *self.timings,
        )

    def run(self, state, n_generations: int):
        """``n_generations`` generations, no host sync: one launch of the epoch kernel
        (:attr:`use_epoch`), else the plan's per-generation kernels (``_run_generations``: CUDA-graph
        replays plus single launches); the same results either way. With a stop target,
        ``hit_generation`` is recorded after every generation (exact).

        Returns:
            A new state (fresh arrays; the plan's buffers are internal).
        """
        n = int(n_generations)
        if n <= 0:
            return dict(state)
        if self.use_epoch:
            return self.epoch.run(state, n)
        return self._run_generations(state, n)
