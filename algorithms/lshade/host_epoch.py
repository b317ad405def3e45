"""The L-SHADE/jSO epoch kernel's host build (:mod:`isles.algorithms.lshade.epoch`, module
docstring): the kernel's block code compiled as C (``-DISLES_HOST_EMU``, one thread per island) and
run on NumPy states, the CPU path of NumPy runs where ``algorithm.host_kernel`` allows it, and the
CI's check of the GPU kernel (tests/test_lshade_epoch.py).

**A problem without a** ``cuda_objective`` (a user's array code) runs the same build with
``EXT_OBJ``: the operators compiled, the objective the problem's own. Each L-SHADE generation
builds the trial rows of every island in C (into the NumPy scratch ``(I, N_init, D)``), calls back
into Python once (:class:`ctypes.CFUNCTYPE`; the callback holds the GIL) to evaluate the ``(I,
N_G, D)`` rows with the context's :class:`isles.problems.constraints.Evaluator` (the twin's ``f``,
``v`` and NaN count: the same function, the same rule), then selects and updates in C
(``lshade_epoch_host_ext``: the islands in lockstep, the C passes on the OpenMP threads, the
callback on the calling thread). An error of the objective stops the call and is raised as it is
(the state unchanged: :meth:`isles.algorithms.lshade.epoch._Epoch.run` returns a new one). The
state is the twin's bit for bit wherever a row's value does not depend on the other rows of its
batch (the twin evaluates ``(I, k, D)`` chunks of ``E`` evaluations, the callback whole L-SHADE
generations) and the math library agrees (tests/test_lshade_user_problem.py)."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
from isles.algorithms.core import cuda_lib, host_build
from isles.algorithms.core.threads import host_threads
from isles.algorithms.lshade.epoch import _Epoch, _objective, kernel_source, unsupported_reason

log = logging.getLogger("isles.algorithms.lshade.epoch")


class HostEpochLSHADE(_Epoch):
    """The kernel's block code compiled as C for the host (``-DISLES_HOST_EMU``: one thread per
    island, every virtual lane in registers), on NumPy states: the CI's check of the kernel.

    Args:
        alg: an :class:`isles.algorithms.lshade.lshade.LSHADE` (or jSO).
        ctx: a NumPy :class:`isles.algorithms.core.base.Context`.
        xn_global: the trial rows in a global scratch (the GPU's layout where the island is too
            large for two populations in shared memory; always with ``external``).
        external: the problem's own objective through the callback (module docstring); ``None``
            (default): where the problem has no usable ``cuda_objective``; ``False``: the fused one.

    Raises:
        ValueError: :func:`unsupported_reason` (``device=False``) gives a reason.
        RuntimeError: no C compiler, or the source does not compile.
    """

    def __init__(self, alg, ctx, xn_global: bool = False, external: bool | None = None):
        if external is None:
            external = _objective(ctx)[1] is not None
        why = unsupported_reason(alg, ctx, device=False, optin=1 << 40, external=external)
        if why is not None:
            raise ValueError(f"lshade epoch kernel: {why}")
        super().__init__(alg, ctx, xn_global or external)
        #: whether the objective is the problem's own (``EXT_OBJ``), called back once a generation
        self.external = bool(external)
        # -O3 (no -march: the same code on every x86-64), after HOST_FLAGS' -O2; values as -O2's
        text = kernel_source(alg, ctx, 1, 1, self.xn_global, external)
        if not external:  # external: lshade_epoch_host_ext, in the kernel's text
            text += cuda_lib.read("lshade_epoch_threads.cuh")
        self.lib = host_build.compile_host(text, ("-O3",), openmp=True)
        #: OpenMP threads over the islands (the results do not depend on it; with ``external`` the C
        #: passes', the objective on the calling thread): :func:`host_plan` sets the process's cores
        #: (:func:`isles.algorithms.core.threads.host_threads`)
        self.threads = 1
        self._T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        if external:
            self._f = self._v = None  # the callback's f, v of every island's rows, (I, N_init)
            self._xg = None  # the trial rows of the launch (its global scratch, (I, N_init, D))
            self._error = None
            self._cb = host_build.EXTERNAL_CALLBACK(self._evaluate)

    def _evaluate(self, n_islands: int, n: int) -> int:
        """The callback of ``EXT_OBJ`` (:func:`isles.algorithms.core.host_build.evaluate_external`)."""
        return host_build.evaluate_external(self, self._xg, n_islands, n)

    def _install(self) -> None:
        """This plan's callback and buffers as the library's external objective (the calling
        thread's: the library is shared by the plans of the same source in the process)."""
        self.lib._isles_ext_owner = self
        self.lib.lshade_ext_set(
            self._cb, self._f.ctypes.data_as(ctypes.c_void_p), self._v.ctypes.data_as(ctypes.c_void_p)
        )

    def _launch(self, ins, outs, work, nan, lgen0, n0, nfe0, k, hit, target):
        def ptr(a):
            return a.ctypes.data_as(ctypes.c_void_p)

        ctx = self.ctx
        keys = np.ascontiguousarray(ctx.rng.keys, dtype=np.uint64)
        lo = np.ascontiguousarray(ctx.lower, dtype=self.dtype)
        hi = np.ascontiguousarray(ctx.upper, dtype=self.dtype)
        ctr = np.ascontiguousarray(ctx.rng.ctr, dtype=np.uint64)
        lgen0, n0, nfe0, k, max_nfe, p, r_arc = self._scalars(lgen0, n0, nfe0, k)
        if self.external:
            I = ins[0].shape[0]
            if self._f is None or self._f.shape[0] != I:
                self._f, self._v = np.empty((I, self.cap), dtype=self.dtype), np.empty((I, self.cap), dtype=self.dtype)
            self._xg, self._error = work[1], None
            self._install()
            entry = self.lib.lshade_epoch_host_ext
        else:
            entry = self.lib.lshade_epoch_host_threads
        rc = entry(
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
        if self.external:
            self._xg, err, self._error = None, self._error, None
            if err is not None:
                raise err
        if rc == 1:
            raise MemoryError("lshade epoch kernel (host): no memory for an island's block")


def host_plan(alg, ctx):
    """The :class:`HostEpochLSHADE` of ``(alg, ctx)`` on NumPy, built once, where
    ``algorithm.host_kernel`` (:class:`isles.algorithms.lshade.params.LSHADEParams`) allows it and it
    applies; else ``None`` (the caller runs the NumPy array code), the reason logged once
    (:func:`isles.algorithms.core.host_build.host_plan`, every family's one mechanism: no C
    compiler, ...). The compiled library is cached on disk
    (:func:`isles.problems.cuda_check.compile_c`). Its islands on
    :func:`isles.algorithms.core.threads.host_threads` OpenMP threads. With a ``cuda_objective``
    the objective is fused; without one (a user's array code) the problem's own objective is
    called back once a generation for every island (module docstring)."""

    def build():
        host = HostEpochLSHADE(alg, ctx)
        host.threads = host_threads(ctx.n_islands)
        return host

    return host_build.host_plan(
        alg, ctx, "lshade", lambda: unsupported_reason(alg, ctx, device=False, optin=1 << 40, external=True), build, log
    )
