"""The DE epoch kernel's host build (:class:`HostEpochDE`): the CPU path of NumPy runs where
``algorithm.host_kernel`` allows it (:func:`host_plan`), and the CI tests' check of the kernel.

**A problem without a** ``cuda_objective`` (a user's array code) runs the same build with
``EXT_OBJ``: the operators compiled, the objective the problem's own. Each generation builds the
trial rows of every island in C (into a NumPy buffer ``(I, N, D)``), calls back into Python once
(:class:`ctypes.CFUNCTYPE`; the callback holds the GIL) to evaluate them with the context's
:class:`isles.problems.constraints.Evaluator` (the twin's call: the same ``(I, N, D)`` batch, ``f``,
``v`` and NaN count), then selects in C (``de_epoch_host_ext``: the islands in lockstep, the C
passes on the OpenMP threads, the callback on the calling thread). An error of the objective stops
the call and is raised as it is. The state is the twin's bit for bit
(tests/test_de_user_problem.py).

It needs both the kernel source of :mod:`isles.algorithms.de.cuda` and the epoch configuration of
:mod:`isles.algorithms.de.epoch`; living apart from both, it ties neither to the other (the
per-generation plan :class:`isles.algorithms.de.cuda.FusedDE` builds the epoch kernel
:class:`isles.algorithms.de.epoch.EpochDE`, and the epoch module imports nothing of the plan).
"""

from __future__ import annotations

import ctypes
import logging

import numpy as np
from isles.algorithms.core import cuda_lib, host_build
from isles.algorithms.core.threads import host_threads
from isles.algorithms.de.cuda_source import (
    EXTERNAL_OBJECTIVE,
    _cr_args,
    _objective_of,
    kernel_source,
    unsupported_reason,
)
from isles.algorithms.de.epoch import epoch_source

log = logging.getLogger(__name__)


class HostEpochDE:
    """The epoch kernel's block code compiled as C for the host (``-DISLES_HOST_EMU``: one thread
    per island, the fold sequential over coordinates), on NumPy states, for the CI tests: the
    same decisions, trial rows, NaN/penalty rule, selection and stop target as the CUDA kernel.

    Args:
        de: a :class:`isles.algorithms.de.de.DE` (rand/1, bin or nec).
        ctx: a NumPy :class:`isles.algorithms.core.base.Context`.
        external: the problem's own objective through the callback (module docstring); ``None``
            (default): where the problem has no usable ``cuda_objective``; ``False``: the fused one.

    Raises:
        ValueError: the configuration has no fused kernel (:func:`isles.algorithms.de.cuda_source.unsupported_reason` with ``device=False``).
        RuntimeError: no C compiler, or the source does not compile.
    """

    def __init__(self, de, ctx, external: bool | None = None):
        p = de.params
        if external is None:
            external = _objective_of(ctx)[1] is not None
        why = unsupported_reason(p, ctx, device=False, external=external)
        if why is not None:
            raise ValueError(f"DE epoch kernel: {why}")
        self.ctx, self.N, self.D, self.dtype = ctx, p.pop_size, int(ctx.dim), np.dtype(ctx.dtype)
        #: whether the objective is the problem's own (``EXT_OBJ``), called back once a generation with
        #: every island's rows
        self.external = bool(external)
        ev = ctx.evaluator
        penalty = float(ev.penalty) if getattr(ev, "handling", "feasibility") == "penalty" else None
        src = kernel_source(
            self.dtype,
            self.D,
            self.N,
            EXTERNAL_OBJECTIVE if external else ev.problem.cuda_objective,
            p.crossover,
            p.bound_handling,
            None if external else penalty,  # external: the Evaluator applies it
            tail="de_epoch.cu",
        )
        if external:  # the islands in lockstep around the callback (de_epoch_host_ext)
            text = "#define EXT_OBJ 1\n" + epoch_source(src, 1, 1)
        else:
            text = epoch_source(src, 1, 1) + cuda_lib.read("de_epoch_threads.cuh")
        self.lib = host_build.compile_host(text, ("-O3",), openmp=True, plain_arith=True)
        #: OpenMP threads over the islands (the results do not depend on it; with ``external`` the C
        #: passes', the objective on the calling thread): :func:`host_plan` sets the process's cores
        #: (:func:`isles.algorithms.core.threads.host_threads`)
        self.threads = 1
        self._T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        self._F = p.F
        self._CR, self._log_cr, self._cr_case = _cr_args(p, self.dtype)
        self._error = None  # the objective's error in the callback, raised after the call
        if external:  # every island's trial rows and their f, v (the callback's), (I, N, D) and (I, N)
            self._x = self._f = self._v = None
            self._cb = host_build.EXTERNAL_CALLBACK(self._evaluate)

    def _evaluate(self, n_islands: int, n: int) -> int:
        """The callback of ``EXT_OBJ`` (:func:`isles.algorithms.core.host_build.evaluate_external`)."""
        return host_build.evaluate_external(self, self._x, n_islands, n)

    def _install(self) -> None:
        """This plan's callback and buffers as the library's external objective (the calling
        thread's: the library is shared by the plans of the same source in the process)."""
        self.lib._isles_ext_owner = self
        self.lib.de_ext_set(
            self._cb,
            self._x.ctypes.data_as(ctypes.c_void_p),
            self._f.ctypes.data_as(ctypes.c_void_p),
            self._v.ctypes.data_as(ctypes.c_void_p),
        )

    def run(self, state: dict, n: int, target: float | None = None) -> dict:
        """``n`` generations of every island from the NumPy ``state`` (the context's RNG keys,
        device counter 0); a new state, with ``hit_generation`` when ``target`` is given.

        Raises:
            MemoryError: no memory for an island's two populations."""

        def ptr(a):
            return a.ctypes.data_as(ctypes.c_void_p)

        c = np.ascontiguousarray
        X, f, v = (np.array(state[k], dtype=self.dtype, order="C") for k in ("X", "f", "v"))
        I = X.shape[0]
        Xo, fo, vo = np.empty_like(X), np.empty_like(f), np.empty_like(v)
        keys = c(self.ctx.rng.keys, dtype=np.uint64)
        lo, hi = c(self.ctx.lower, dtype=self.dtype), c(self.ctx.upper, dtype=self.dtype)
        ctr = np.zeros(1, dtype=np.uint64)
        nan = np.zeros(1, dtype=np.uint64)
        hit = np.array(state.get("hit_generation", np.full(I, -1)), dtype=np.int64)
        T = self._T
        if self.external:
            if self._x is None or self._x.shape[0] != I:
                self._x = np.empty((I, self.N, self.D), dtype=self.dtype)
                self._f, self._v = np.empty((I, self.N), dtype=self.dtype), np.empty((I, self.N), dtype=self.dtype)
            self._error = None
            self._install()
            entry = self.lib.de_epoch_host_ext
        else:
            entry = self.lib.de_epoch_host_threads
        rc = entry(
            ctypes.c_int(int(self.threads)),
            ctypes.c_int(I),
            ptr(X),
            ptr(f),
            ptr(v),
            ptr(Xo),
            ptr(fo),
            ptr(vo),
            ptr(keys),
            ptr(lo),
            ptr(hi),
            ctypes.c_longlong(int(state["generation"])),
            ptr(ctr),
            ctypes.c_int(int(n)),
            ptr(nan),
            ptr(hit),
            T(0 if target is None else target),
            ctypes.c_int(target is not None),
            T(self._F),
            T(self._CR),
            ctypes.c_double(float(self._log_cr)),
            ctypes.c_int(int(self._cr_case)),
        )
        err, self._error = self._error, None
        if err is not None:
            raise err
        if rc == 1:
            raise MemoryError("DE epoch kernel (host): no memory for an island's two populations")
        s = dict(state)
        s["X"], s["f"], s["v"] = Xo, fo, vo
        if target is not None:
            s["hit_generation"] = hit
        s["generation"] = state["generation"] + int(n)
        s["evals"] = state["evals"] + int(n) * self.N
        s["nan_evals"] = np.asarray(state["nan_evals"]) + np.int64(nan[0])
        return s


def host_plan(de, ctx):
    """The :class:`HostEpochDE` of ``(de, ctx)`` on NumPy where ``algorithm.host_kernel`` allows it
    and it applies (:func:`isles.algorithms.de.cuda_source.unsupported_reason` with
    ``device=False``: rand/1, bin or nec), else ``None`` with the one log line
    (:func:`isles.algorithms.core.host_build.host_plan`). Its islands on
    :func:`isles.algorithms.core.threads.host_threads` OpenMP threads. With a ``cuda_objective``
    the objective is fused; without one (a user's array code) the problem's own objective is
    called back once a generation for every island (module docstring)."""

    def build():
        host = HostEpochDE(de, ctx)
        host.threads = host_threads(ctx.n_islands)
        return host

    return host_build.host_plan(
        de, ctx, "DE", lambda: unsupported_reason(de.params, ctx, device=False, external=True), build, log
    )


def host_run(de, ctx):
    """``(state, n) -> state``: ``n`` generations of every island in :func:`host_plan`'s build,
    the stop target tracked (``IslandAlgorithm.host_plan``, ``HOST_MODULE``); ``None`` where
    :func:`host_plan` gives none."""
    host = host_plan(de, ctx)
    return None if host is None else (lambda state, n: host.run(state, n, ctx.target))
