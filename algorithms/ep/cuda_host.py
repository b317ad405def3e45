"""The fused FEP generation's C code run on the CPU (``-DISLES_HOST_EMU``), the CPU path of NumPy
runs where ``algorithm.host_kernel`` allows it (:func:`host_plan`) and the tests' check:
:class:`HostFEP`, the twin of :class:`isles.algorithms.ep.cuda.FusedFEP` on NumPy states (same
source, :func:`isles.algorithms.ep.cuda_source.kernel_source`; compiled by
:func:`isles.algorithms.ga.cuda_host.compile_host`)."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
from isles.algorithms.core import host_build
from isles.algorithms.core.population import Population
from isles.algorithms.core.threads import host_threads
from isles.algorithms.ep.cuda_source import _rates, kernel_source, unsupported_reason
from isles.algorithms.ga.cuda_host import host_compiler  # noqa: F401  (tests)

log = logging.getLogger(__name__)


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


class HostFEP:
    """The fused path's C code run on the CPU (``-DISLES_HOST_EMU``), for tests.

    Same draws, mutation, bounds, objective (lanes in order), NaN rule, opponents, threshold and
    tie rule as the CUDA kernels; works on NumPy states. ``fep.cu``'s host ``fep_slot`` and
    ``fep_select_block`` keep the device functions' contracts (one thread doing a warp's or a
    block's work), so :meth:`run` runs the epoch kernel's own block loop (``fep_epoch.cu``'s
    ``fep_epoch_block``: ping-pong union buffers, survivors as the next parents, the stop target)
    and :meth:`step` the three per-generation kernels' steps.

    Args:
        fep: the :class:`isles.algorithms.ep.fep.FEP`.
        ctx: a NumPy :class:`isles.algorithms.core.base.Context` whose problem has ``cuda_objective``.

    Raises:
        ValueError: no ``cuda_objective``; RuntimeError: no C compiler or a compile error.
    """

    def __init__(self, fep, ctx):
        self.fep, self.ctx = fep, ctx
        self.source, self.cfg = kernel_source(fep, ctx, tail=("fep_epoch.cu", "fep_epoch_threads.cuh"))
        self.lib = host_build.compile_host(self.source, ("-std=gnu11", "-O3"), openmp=True, plain_arith=True)
        #: OpenMP threads over the islands in :meth:`run` (the results do not depend on it)
        self.threads = 1
        self.dtype = np.dtype(ctx.dtype)
        self.T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        self.tau, self.taup, self.eta_min = _rates(fep, ctx, self.dtype)
        self.lower = np.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self.upper = np.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self.mu = int(fep.params.pop_size)

    def evaluate(self, X):
        """``(f, v, bad)`` of rows ``X (..., n)`` by the kernel's objective code and NaN rule."""
        A = np.ascontiguousarray(X, dtype=self.dtype).reshape(-1, self.cfg["FEP_N"])
        r = A.shape[0]
        f, v, bad = np.empty(r, self.dtype), np.empty(r, self.dtype), np.empty(r, np.int32)
        self.lib.fep_eval_host(_ptr(A), ctypes.c_int(r), _ptr(f), _ptr(v), _ptr(bad))
        sh = X.shape[:-1]
        return f.reshape(sh), v.reshape(sh), bad.reshape(sh)

    def _union(self, state):
        """Union buffers ``(X, eta, f, v)`` of shapes ``(I, 2 mu, n)`` and ``(I, 2 mu)``, the
        state's parents in the first half (``FusedFEP._load``)."""
        X = np.asarray(state["X"])
        I, mu, n = X.shape
        U = (
            np.zeros((I, 2 * mu, n), self.dtype),
            np.zeros((I, 2 * mu, n), self.dtype),
            np.zeros((I, 2 * mu), self.dtype),
            np.zeros((I, 2 * mu), self.dtype),
        )
        for dst, k in zip(U, ("X", "eta", "f", "v"), strict=False):
            dst[:, :mu] = np.asarray(state[k], dtype=self.dtype)
        return U

    def _common(self):
        return (_ptr(self.lower), _ptr(self.upper), self.T(self.tau), self.T(self.taup), self.T(self.eta_min))

    def offspring(self, state):
        """``(Xo, eta_o, fo, vo, n_nan)`` of generation ``state["generation"]`` (as
        :meth:`isles.algorithms.ep.fep.FEP.offspring`), by ``fep_generate``'s per-slot code."""
        A, B = self._union(state), self._union(state)
        I, mu = A[2].shape[0], self.mu
        nan = np.zeros(1, np.uint64)
        lo, hi, tau, taup, eta_min = self._common()
        self.lib.fep_generate_host(
            *map(_ptr, A),
            None,
            ctypes.c_int(0),
            *map(_ptr, B),
            _ptr(self.ctx.rng.keys),
            ctypes.c_longlong(int(state["generation"])),
            ctypes.c_int(I),
            lo,
            hi,
            tau,
            taup,
            eta_min,
            _ptr(nan),
        )
        return B[0][:, mu:], B[1][:, mu:], B[2][:, mu:], B[3][:, mu:], int(nan[0])

    def select(self, fu, vu, generation: int):
        """``(wins (I, 2 mu) int32, src (I, mu) int32)`` of the union ``fu, vu (I, 2 mu)``."""
        fu = np.ascontiguousarray(fu, dtype=self.dtype)
        vu = np.ascontiguousarray(vu, dtype=self.dtype)
        I = fu.shape[0]
        wins = np.empty(fu.shape, np.int32)
        src = np.empty((I, self.cfg["FEP_MU"]), np.int32)
        self.lib.fep_select_host(
            _ptr(fu),
            _ptr(vu),
            _ptr(wins),
            _ptr(src),
            _ptr(self.ctx.rng.keys),
            ctypes.c_longlong(int(generation)),
            ctypes.c_int(I),
        )
        return wins, src

    def _survivors(self, state, U, src, n: int, n_nan: int):
        """New state: the survivors ``src (I, mu)`` of union ``U`` (``FusedFEP._finish``)."""
        union = Population(U[0], U[2], U[3], {"eta": U[1]})
        new = union.take(np.asarray(src, dtype=np.int64))
        s = dict(state)
        s["X"], s["f"], s["v"], s["eta"] = new.genome, new.f, new.v, new.extras["eta"]
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * self.fep.evals_per_generation()
        s["nan_evals"] = np.asarray(state["nan_evals"]) + n_nan
        return s

    def step(self, state):
        """One generation as the per-generation kernels take it (``fep_generate``, ``fep_wins``,
        ``fep_select``); returns a new state (as :meth:`isles.algorithms.ep.fep.FEP.step`)."""
        Xo, Eo, fo, vo, n_nan = self.offspring(state)
        U = tuple(
            np.concatenate([np.asarray(state[k], dtype=self.dtype), o], 1)
            for k, o in zip(("X", "eta", "f", "v"), (Xo, Eo, fo, vo), strict=False)
        )
        _, src = self.select(U[2], U[3], state["generation"])
        return self._survivors(state, U, src, 1, n_nan)

    def run(self, state, n: int, target: float | None = None):
        """``n`` generations in one call of the epoch kernel's block loop (``fep_epoch_host``; ``n = 0``
        returns a copy of the state):
        the host twin of :meth:`FusedFEP.run` on both of its paths. With ``target``,
        ``hit_generation (I,)`` int64 records, per island not yet hit (-1), the generation count
        after the first generation whose survivors hold a feasible individual with ``f <= target``
        (``track.cu``'s rule).

        Raises:
            ValueError: ``n < 0``.
        """
        n = int(n)
        if n < 0:
            raise ValueError(f"HostFEP.run: n={n}: allowed values are integers >= 0")
        if n == 0:
            return dict(state)
        I = np.asarray(state["X"]).shape[0]
        bufs = (self._union(state), self._union(state))  # parents in buffer 1 (fep_epoch.cu)
        src = np.zeros((I, self.mu), np.int32)
        wins = np.zeros((I, 2 * self.mu), np.int32)
        nan = np.zeros(1, np.uint64)
        hit = np.array(state.get("hit_generation", np.full(I, -1)), dtype=np.int64)
        lo, hi, tau, taup, eta_min = self._common()
        rc = self.lib.fep_epoch_host_threads(
            ctypes.c_int(int(self.threads)),
            *map(_ptr, bufs[0]),
            *map(_ptr, bufs[1]),
            _ptr(src),
            _ptr(wins),
            _ptr(self.ctx.rng.keys),
            ctypes.c_longlong(int(state["generation"])),
            _ptr(self.ctx.rng.ctr),
            ctypes.c_int(n),
            ctypes.c_int(I),
            _ptr(nan),
            _ptr(hit),
            self.T(0 if target is None else target),
            ctypes.c_int(target is not None),
            lo,
            hi,
            tau,
            taup,
            eta_min,
        )
        if rc != 0:
            raise MemoryError("FEP epoch kernel (host): no memory for the islands' NaN counts")
        s = self._survivors(state, bufs[(n - 1) % 2], src, n, int(nan[0]))
        if target is not None:
            s["hit_generation"] = hit
        return s


def host_plan(fep, ctx):
    """The :class:`HostFEP` of ``(fep, ctx)`` on NumPy where ``algorithm.host_kernel`` allows it
    and it applies (:func:`isles.algorithms.ep.cuda_source.unsupported_reason` with
    ``device=False``: a real problem with a ``cuda_objective``, ``n`` and ``q`` within the
    kernel's limits), else ``None`` with the one log line
    (:func:`isles.algorithms.core.host_build.host_plan`)."""

    def build():
        host = HostFEP(fep, ctx)
        host.threads = host_threads(ctx.n_islands)
        return host

    return host_build.host_plan(fep, ctx, "FEP", lambda: unsupported_reason(fep, ctx, device=False), build, log)


def host_run(fep, ctx):
    """``(state, n) -> state``: ``n`` generations of every island in :func:`host_plan`'s build,
    the stop target tracked (``IslandAlgorithm.host_plan``, ``HOST_MODULE``); ``None`` where
    :func:`host_plan` gives none."""
    host = host_plan(fep, ctx)
    return None if host is None else (lambda state, n: host.run(state, n, ctx.target))
