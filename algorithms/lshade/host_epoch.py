"""The L-SHADE/jSO epoch kernel's host build (:mod:`isles.algorithms.lshade.epoch`, module
docstring): the kernel's block code compiled as C (``-DISLES_HOST_EMU``, one thread per island) and
run on NumPy states, the CPU path of NumPy runs where ``algorithm.host_kernel`` allows it, and the
CI's check of the GPU kernel (tests/test_lshade_epoch.py)."""

from __future__ import annotations

import ctypes
import logging
import weakref

import numpy as np

from isles.algorithms.lshade.epoch import _Epoch, kernel_source, unsupported_reason

log = logging.getLogger("isles.algorithms.lshade.epoch")


class HostEpochLSHADE(_Epoch):
    """The kernel's block code compiled as C for the host (``-DISLES_HOST_EMU``: one thread per
    island, every virtual lane in registers), on NumPy states: the CI's check of the kernel.

    Args:
        alg: an :class:`isles.algorithms.lshade.lshade.LSHADE` (or jSO).
        ctx: a NumPy :class:`isles.algorithms.core.base.Context` whose problem has a usable
            ``cuda_objective``.
        xn_global: the trial rows in a global scratch (the GPU's layout where the island is too
            large for two populations in shared memory).

    Raises:
        ValueError: :func:`unsupported_reason` (``device=False``) gives a reason.
        RuntimeError: no C compiler, or the source does not compile.
    """

    def __init__(self, alg, ctx, xn_global: bool = False):
        why = unsupported_reason(alg, ctx, device=False, optin=1 << 40)
        if why is not None:
            raise ValueError(f"lshade epoch kernel: {why}")
        super().__init__(alg, ctx, xn_global)
        from isles.problems.cuda_check import compile_c  # noqa: PLC0415

        # -O3 (no -march: the same code on every x86-64), after HOST_FLAGS' -O2; values as -O2's
        self.lib = compile_c("#define ISLES_HOST_EMU 1\n" + kernel_source(alg, ctx, 1, 1, xn_global), ("-O3",))
        self._T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double

    def _launch(self, ins, outs, work, nan, lgen0, n0, nfe0, k, hit, target):
        def ptr(a):
            return a.ctypes.data_as(ctypes.c_void_p)

        ctx = self.ctx
        keys = np.ascontiguousarray(ctx.rng.keys, dtype=np.uint64)
        lo = np.ascontiguousarray(ctx.lower, dtype=self.dtype)
        hi = np.ascontiguousarray(ctx.upper, dtype=self.dtype)
        ctr = np.ascontiguousarray(ctx.rng.ctr, dtype=np.uint64)
        lgen0, n0, nfe0, k, max_nfe, p, r_arc = self._scalars(lgen0, n0, nfe0, k)
        rc = self.lib.lshade_epoch_host(
            ctypes.c_int(ins[0].shape[0]),
            ctypes.c_longlong(self.smem),
            *(ptr(a) for a in ins),
            *(ptr(a) for a in outs),
            ptr(work[0]),
            ptr(work[1]),
            ptr(keys),
            ptr(lo),
            ptr(hi),
            ptr(ctr),
            ctypes.c_longlong(lgen0),
            ctypes.c_int(n0),
            ctypes.c_longlong(nfe0),
            ctypes.c_int(k),
            ctypes.c_longlong(max_nfe),
            ctypes.c_double(p),
            ctypes.c_double(r_arc),
            ptr(nan),
            ptr(hit),
            self._T(0 if target is None else target),
            ctypes.c_int(target is not None),
        )
        if rc != 0:
            raise MemoryError("lshade epoch kernel (host): no memory for an island's block")


_HOST_PLANS: dict = {}
#: host plans kept (a run uses one per island group; an evicted one is rebuilt from the compiled library)
_HOST_PLANS_KEPT = 16


def host_plan(alg, ctx):
    """The :class:`HostEpochLSHADE` of ``(alg, ctx)`` on NumPy, built once, where
    ``algorithm.host_kernel`` (:class:`isles.algorithms.lshade.params.LSHADEParams`) allows it and it
    applies; else ``None`` (the caller runs the NumPy array code), the reason logged once: at INFO
    level with ``host_kernel="auto"`` (a problem without a ``cuda_objective``, no C compiler, ...),
    as a warning with ``host_kernel=True``. Not cached across processes: each process compiles
    the kernel once (about 1 s at D = 10, ``gcc -O3``)."""
    mode = getattr(alg.params, "host_kernel", False)
    if mode is False or ctx.xp is not np:
        return None
    key = (id(alg), id(ctx))
    hit = _HOST_PLANS.get(key)
    if hit is not None and hit[0]() is alg and hit[1]() is ctx:
        return hit[2]
    from isles.problems.cuda_check import compiler  # noqa: PLC0415

    why = unsupported_reason(alg, ctx, device=False, optin=1 << 40)
    if why is None and compiler() is None:
        why = "no C compiler ($CC, cc, gcc or clang on PATH)"
    built = None
    if why is None:
        try:
            built = HostEpochLSHADE(alg, ctx)
        except (RuntimeError, OSError) as e:  # a compiler that fails: the array code, never a failed run
            why = str(e).splitlines()[0]
    if why is not None:
        (log.warning if mode is True else log.info)(
            "lshade: NumPy array code on the CPU, not the host kernel (%s)", why
        )
    _HOST_PLANS[key] = (weakref.ref(alg), weakref.ref(ctx), built)
    while len(_HOST_PLANS) > _HOST_PLANS_KEPT:  # a plan holds its alg and ctx: keep the latest only
        _HOST_PLANS.pop(next(iter(_HOST_PLANS)))
    return built
