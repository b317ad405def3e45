"""The fused EPSO generation's C code run on the CPU (``-DISLES_HOST_EMU``), for tests:
:class:`HostEPSO`, the twin of the fused path of :meth:`isles.algorithms.pso.epso.EPSO.step` on
NumPy states (same source, :func:`isles.algorithms.pso.epso_cuda.kernel_source`, which includes
PSO's ``pso.cu``; compiled by :func:`isles.algorithms.ga.cuda_host.compile_host`)."""

from __future__ import annotations

import ctypes
import math

import numpy as np
from isles.algorithms.core.random import _MASK
from isles.algorithms.ga.cuda_host import compile_host
from isles.algorithms.pso.cuda import COR_MODE_IDS
from isles.algorithms.pso.epso_cuda import TWO_PI, kernel_source
from isles.algorithms.pso.pso import inertia_weight, vmax_schedule


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


class HostEPSO:
    """The fused EPSO path's C code (``epso.cu``'s ``epso_move_one``, ``pso.cu``'s ``bests_rows`` and
    ``bests_island``) run on the CPU, one thread per block, on NumPy states.

    The schedules are not the kernel's: :meth:`step` takes ``w`` and ``vmax`` as the NumPy path
    computes them (host floats rounded to the dtype), so that a step compares with the NumPy
    generic step bit for bit; the device's ``schedule_one`` is checked against CuPy by the GPU
    tests.

    Args:
        epso: the :class:`isles.algorithms.pso.epso.EPSO`.
        ctx: a NumPy :class:`isles.algorithms.core.base.Context` (float32 or float64).

    Raises:
        ValueError: another dtype; RuntimeError: no C compiler or a compile error.
    """

    def __init__(self, epso, ctx):
        self.epso, self.ctx = epso, ctx
        self.dtype = np.dtype(ctx.dtype)
        self.lib = compile_host(kernel_source(self.dtype))
        self.T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        self.lower = np.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self.upper = np.ascontiguousarray(ctx.upper, dtype=self.dtype)

    def _c(self, a):
        return np.ascontiguousarray(a, dtype=self.dtype)

    def normal(self, generation: int, draw: int, shape, dtype=None):
        """``CounterRNG.normal(generation, draw, shape)`` computed by the kernel's ``epso_normal``
        (the C library's ``log1p``/``sqrt``/``cos``): ``(I, *shape)`` of the context's dtype."""
        shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        rng = self.ctx.rng
        m = max(1, math.prod(shape))
        out = np.empty((rng.n_streams, m), dtype=self.dtype)
        self.lib.emu_normal(
            _ptr(rng.keys),
            ctypes.c_ulonglong(int(rng.ctr[0])),
            ctypes.c_ulonglong((int(generation) << 16) & _MASK),
            ctypes.c_ulonglong(int(draw)),
            ctypes.c_int(rng.n_streams),
            ctypes.c_longlong(m),
            self.T(TWO_PI),
            _ptr(out),
        )
        return out.reshape((rng.n_streams, *shape))

    def move(self, state, w: float, vmax: float):
        """``(xc, velc)`` ``(I, N, C, D)``: the candidates of generation ``state["generation"]``
        (``epso_move_one`` for every coordinate) with inertia ``w`` and clamp fraction ``vmax``."""
        p, rng = self.epso.params, self.ctx.rng
        x = self._c(state["x"])
        I, N, D = x.shape
        C = 1 + int(p.n_replicas)
        xo = np.empty((I, N, C, D), dtype=self.dtype)
        vo = np.empty((I, N, C, D), dtype=self.dtype)
        arrs = [self._c(state[k]) for k in ("vel", "pbest", "gbest", "attractor", "attractor_v")]
        T = self.T
        self.lib.emu_epso_move(
            _ptr(x),
            *map(_ptr, arrs),
            _ptr(self.lower),
            _ptr(self.upper),
            _ptr(rng.keys),
            ctypes.c_ulonglong(int(rng.ctr[0])),
            ctypes.c_ulonglong((int(state["generation"]) << 16) & _MASK),
            T(w),
            T(vmax),
            T(p.c1),
            T(p.c2),
            T(p.c3),
            T(p.sigma),
            T(p.sigma_g),
            T(TWO_PI),
            T(p.cor),
            ctypes.c_int(N),
            ctypes.c_int(C),
            ctypes.c_int(D),
            ctypes.c_longlong(xo.size),
            ctypes.c_int(p.vmax_fraction > 0),
            ctypes.c_int(COR_MODE_IDS[p.cor_mode]),
            ctypes.c_int(p.c3 > 0),
            _ptr(xo),
            _ptr(vo),
        )
        return xo, vo

    def select_bests(self, state, xc, velc, f, v, n_nan) -> dict:
        """``pso_bests``' work (``emu_pso_bests``, the kernel's parameters): each particle's best candidate of ``xc, velc (I, N, C,
        D)``, ``f, v (I, N C)``, then the bests and ``nan_evals``; a new state (as
        :func:`isles.algorithms.pso.cuda.fused_select_bests`)."""
        I, N, C, D = xc.shape
        xc, velc, f, v = (self._c(a) for a in (xc, velc, f, v))
        ins = [self._c(state[k]) for k in ("pbest", "pbest_f", "pbest_v", "gbest", "gbest_f", "gbest_v")]
        nan_old = np.asarray(state["nan_evals"], dtype=np.int64).reshape(1).copy()
        nan_add = np.asarray(n_nan, dtype=np.int64).reshape(1).copy()
        outs = [np.empty(a.shape, self.dtype) for a in ins]
        nan_o = np.empty(1, np.int64)
        x_o, vel_o = np.empty((I, N, D), self.dtype), np.empty((I, N, D), self.dtype)
        self.lib.emu_pso_bests(
            _ptr(xc),
            _ptr(f),
            _ptr(v),
            *map(_ptr, ins),
            _ptr(nan_old),
            _ptr(nan_add),
            *map(_ptr, outs),
            _ptr(nan_o),
            ctypes.c_int(N),
            ctypes.c_int(D),
            ctypes.c_longlong(I * N * D),
            ctypes.c_int(1),
            ctypes.c_int(C),
            ctypes.c_int(1),
            _ptr(velc),
            _ptr(x_o),
            _ptr(vel_o),
        )
        s = dict(state)
        s.update(zip(("pbest", "pbest_f", "pbest_v", "gbest", "gbest_f", "gbest_v"), outs, strict=False))
        s.update(x=x_o, vel=vel_o, nan_evals=nan_o.reshape(()))
        return s

    def step(self, state) -> dict:
        """One generation: :meth:`move` with the NumPy path's schedules, ``ctx.evaluator`` on the
        ``(I, N C, D)`` candidates, :meth:`select_bests`; a new state (as ``EPSO.step``). The
        candidates stay in ``self.candidates`` (``(xc, velc)``)."""
        p, g = self.epso.params, int(state["generation"])
        w = inertia_weight(g + 1, p.max_iterations, p.w_max, p.w_min)
        vmax = vmax_schedule(g + 1, p.max_iterations, p.vmax_fraction, p.vmax_final) if p.vmax_fraction > 0 else 0.0
        xc, velc = self.move(state, w, vmax)
        self.candidates = (xc, velc)  # for tests: the last step's candidates
        I, N, C, D = xc.shape
        f, v, n_nan = self.ctx.evaluator(xc.reshape(I, N * C, D))
        s = self.select_bests(state, xc, velc, f, v, n_nan)
        s.update(generation=g + 1, evals=state["evals"] + N * C)
        return s
