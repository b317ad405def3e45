"""The L-SHADE/jSO epoch kernel's host build (:mod:`isles.algorithms.lshade.epoch`, module
docstring): the kernel's block code compiled as C (``-DISLES_HOST_EMU``, one thread per island) and
run on NumPy states, the CPU path of NumPy runs where ``algorithm.host_kernel`` allows it, and the
CI's check of the GPU kernel (tests/test_lshade_epoch.py)."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
from isles.algorithms.core import cuda_lib, host_build
from isles.algorithms.core.threads import host_threads
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
        # -O3 (no -march: the same code on every x86-64), after HOST_FLAGS' -O2; values as -O2's
        text = kernel_source(alg, ctx, 1, 1, xn_global) + cuda_lib.read("lshade_epoch_threads.cuh")
        self.lib = host_build.compile_host(text, ("-O3",), openmp=True)
        #: OpenMP threads over the islands (the results do not depend on it): :func:`host_plan` sets
        #: the process's cores (:func:`isles.algorithms.core.threads.host_threads`)
        self.threads = 1
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
        rc = self.lib.lshade_epoch_host_threads(
            ctypes.c_int(int(self.threads)),
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


def host_plan(alg, ctx):
    """The :class:`HostEpochLSHADE` of ``(alg, ctx)`` on NumPy, built once, where
    ``algorithm.host_kernel`` (:class:`isles.algorithms.lshade.params.LSHADEParams`) allows it and it
    applies; else ``None`` (the caller runs the NumPy array code), the reason logged once
    (:func:`isles.algorithms.core.host_build.host_plan`, every family's one mechanism: a problem
    without a ``cuda_objective``, no C compiler, ...). The compiled library is cached on disk
    (:func:`isles.problems.cuda_check.compile_c`). Its islands on
    :func:`isles.algorithms.core.threads.host_threads` OpenMP threads."""

    def build():
        host = HostEpochLSHADE(alg, ctx)
        host.threads = host_threads(ctx.n_islands)
        return host

    return host_build.host_plan(
        alg, ctx, "lshade", lambda: unsupported_reason(alg, ctx, device=False, optin=1 << 40), build, log
    )
