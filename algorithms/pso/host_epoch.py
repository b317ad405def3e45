"""The compiled CPU path of PSO and EPSO (:class:`HostEpochEPSO`): whole generations of every
island in one C call, the islands on OpenMP threads; the default of NumPy runs
(``algorithm.host_kernel``, as DE's, :mod:`isles.algorithms.core.host_build`). It serves CMEPSO's
slave swarms and its master swarm (both EPSO) and plain PSO (:class:`isles.algorithms.pso.pso.PSO`:
EPSO's generation with no replicas and no third attractor, ``R = 0``, ``c3 = 0``, which is
:meth:`PSO.step`'s move, draws and bests in its order; ``tests/test_pso_host_epoch.py``).

The C code is ``epso.cu`` (with ``pso.cu``'s ``pso_finish``, ``bests_rows`` and
``bests_island``) plus the host-only driver ``epso_host.cuh`` and the problem's objective in C: its
per-row code (``cuda_row``, e.g. the welded beam) or its fused objective (``cuda_objective``, e.g.
Rastrigin). A generation is :meth:`isles.algorithms.pso.epso.EPSO.step`'s generic code in its
order. The normal draws take their ``log1p`` and ``cos`` from NumPy (``epso_host.cuh`` says why),
so the populations are the NumPy twin's bit for bit (``tests/test_epso_host_epoch.py``); the
objective in C agrees with the array code to its rounding (a ``pow`` is the C library's, not
NumPy's), checked on random points when the build is made (a row code that disagrees is not used).
A fused objective is folded in NumPy's pairwise order (``obj_fold.cuh``) where that gives the array
code's ``f`` bit for bit on those points (Rastrigin, Sphere and Griewank at any ``D`` where the C
library's ``cos`` is NumPy's), else left to right.
"""

from __future__ import annotations

import ctypes
import logging

import numpy as np
from isles.algorithms.core import cuda_lib, host_build
from isles.algorithms.core.threads import host_threads
from isles.algorithms.pso.cuda import COR_MODE_IDS
from isles.algorithms.pso.epso_cuda import TWO_PI, kernel_source
from isles.algorithms.pso.pso import VMAX_POWER
from isles.problems.constraints import equalities

log = logging.getLogger(__name__)

#: normal elements of one chunk of generations drawn at once (memory: two arrays of this many)
CHUNK_ELEMENTS = 1 << 20


def swarm_fields(params) -> tuple:
    """``(n_replicas, c3, sigma, sigma_g)`` of an EPSO's or a PSO's ``params`` (a PSO: ``(0, 0.0,
    0.0, 0.0)``, EPSO's generation without replicas and third attractor)."""
    return tuple(getattr(params, k, d) for k, d in (("n_replicas", 0), ("c3", 0.0), ("sigma", 0.0), ("sigma_g", 0.0)))


def unsupported_reason(epso, ctx) -> str | None:
    """Why the host build cannot run ``(epso, ctx)`` (an EPSO or a PSO), or ``None``:
    float32/float64, a real problem with a ``cuda_row`` or a ``cuda_objective``, feasibility or
    penalty handling, a :class:`isles.algorithms.core.random.CounterRNG`."""
    dt = np.dtype(ctx.dtype)
    if dt not in (np.float32, np.float64):
        return f"dtype {dt} (allowed: float32|float64)"
    ev = ctx.evaluator
    prob = getattr(ev, "problem", None)
    if prob is None or getattr(prob, "genome", "real") != "real":
        return "the problem is not a real-coded isles problem"
    if getattr(ev, "handling", "feasibility") not in ("feasibility", "penalty"):
        return f"constraints.handling={ev.handling} (allowed: feasibility|penalty)"
    if getattr(prob, "cuda_row", None) is None and getattr(prob, "cuda_objective", None) is None:
        return f"problem {prob.name} has no cuda_row or cuda_objective (its objective is array code only)"
    if not hasattr(ctx.rng, "keys") or not hasattr(ctx.rng, "ctr"):
        return "the generator is not a CounterRNG"
    return None


def _objective_text(prob, dt) -> str:
    """The problem's objective in C for ``epso_host.cuh``: its row code with the scales and
    equalities, else its fused objective and its fold in NumPy's order (``obj_fold.cuh``)."""
    row = getattr(prob, "cuda_row", None)
    if row is None:
        head = "#define EPSO_ROW 0\n#define EPSO_NEQ 0\n#define EPSO_EQ_TOL 0.0\n"
        return head + prob.cuda_objective + "\n" + cuda_lib.read("obj_fold.cuh")
    n_eq, eq_tol = equalities(prob)
    scale = np.asarray(prob.constraint_scale, dtype=dt).astype(np.float64)
    vals = ", ".join(f"(T){float(s)!r}" for s in scale) or "(T)1"
    return (
        f"#define EPSO_ROW 1\n#define EPSO_NEQ {int(n_eq)}\n#define EPSO_EQ_TOL {float(eq_tol)!r}\n"
        + row
        + f"\nstatic const T epso_scale[{max(1, scale.size)}] = {{{vals}}};\n"
    )


class HostEpochEPSO:
    """EPSO (and PSO) generations of every island compiled as C (module docstring), on NumPy states.

    Args:
        epso: the :class:`isles.algorithms.pso.epso.EPSO`, or a :class:`isles.algorithms.pso.pso.PSO`
            (:func:`swarm_fields`; its state has no attractor).
        ctx: a NumPy :class:`isles.algorithms.core.base.Context` (:func:`unsupported_reason`).

    Raises:
        ValueError: the configuration does not apply, or the C objective disagrees with the array
            code on random points; RuntimeError: no C compiler or a compile error.
    """

    def __init__(self, epso, ctx):
        why = unsupported_reason(epso, ctx)
        if why is not None:
            raise ValueError(f"{epso.name.upper()} host build: {why}")
        self.epso, self.ctx, self.dtype = epso, ctx, np.dtype(ctx.dtype)
        ev = ctx.evaluator
        text = kernel_source(self.dtype)
        if getattr(ev, "handling", "feasibility") == "penalty":
            text = f"#define PENALTY {float(ev.penalty)!r}\n" + text
        text += "\n" + _objective_text(ev.problem, self.dtype) + "\n" + cuda_lib.read("epso_host.cuh")
        self.lib = host_build.compile_host(text, ("-O3",), openmp=True, plain_arith=True)
        self.T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        self.lower = np.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self.upper = np.ascontiguousarray(ctx.upper, dtype=self.dtype)
        #: OpenMP threads over the islands (the results do not depend on it)
        self.threads = 1
        #: 1: the fused objective folded in NumPy's order (the array code's f bit for bit), 0: left to right
        self.np_order = 0
        self._check_objective()
        #: the C library's cos is NumPy's (checked on 4096 points): the epoch computes it itself
        self.c_cos = self._same_cos()
        self._epoch = self.lib.epso_host_epoch
        self._epoch.restype = ctypes.c_int
        vp, ci, T = ctypes.c_void_p, ctypes.c_int, self.T
        self._epoch.argtypes = [ci, ci, *[vp] * 12, vp, ctypes.c_ulonglong, ctypes.c_longlong, ci, *[vp] * 4]
        self._epoch.argtypes += [*[T] * 6, *[ci] * 8, T, vp]
        self._sched = self.lib.epso_host_schedules
        self._sched.restype = None
        dd, ll = ctypes.c_double, ctypes.c_longlong
        dptr = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
        self._sched.argtypes = [ll, ci, ll, dd, dd, ci, dd, dd, dd, dptr, dptr]
        self._draws = self.lib.epso_host_draws
        self._draws.restype = None
        self._draws.argtypes = [ci, vp, ctypes.c_ulonglong, ctypes.c_longlong, *[ci] * 5, T, vp, vp]
        p = epso.params
        #: ``(n_replicas, c3, sigma, sigma_g)``: :func:`swarm_fields`
        self.swarm = R, c3, sigma, sigma_g = swarm_fields(p)
        #: the arguments that do not change between calls: the box, the keys, the coefficients
        self._fixed = (self.lower.ctypes.data, self.upper.ctypes.data, ctx.rng.keys.ctypes.data)
        self._coef = (p.c1, p.c2, c3, sigma, sigma_g, p.cor, int(p.n_particles), 1 + int(R))
        self._coef += (int(ctx.dim), int(p.vmax_fraction > 0), COR_MODE_IDS[p.cor_mode], int(c3 > 0))
        self._coef += (int(self.c_cos), int(self.np_order), TWO_PI)

    def _same_cos(self) -> bool:
        """Whether the C library's ``cos`` gives ``np.cos``'s values on 4096 points of ``[0, 2 pi)``
        in the dtype (NumPy's float64 ``cos`` is the C library's on x86-64 Linux; its float32 one
        is its own)."""
        b = (np.random.default_rng(7).random(4096) * TWO_PI).astype(self.dtype)
        out = np.empty_like(b)
        self.lib.epso_host_cos(ctypes.c_longlong(b.size), self._ptr(b), self._ptr(out))
        return out.tobytes() == np.cos(b).tobytes()

    def _check_objective(self) -> None:
        """The C objective against the Evaluator on 128 points of the box (64 uniform, 64 in boxes
        of 1e-6 to 1 times its size around its centre and random points, where a swarm converges):
        a fused objective folded in NumPy's order where that gives ``f`` and ``v`` bit for bit
        (:attr:`np_order`), else left to right; ``f`` and ``v`` to the dtype's rounding, the same
        NaN rows.

        Raises:
            ValueError: they disagree (the run takes the array code, the reason logged)."""
        D = int(self.ctx.dim)
        rng = np.random.default_rng(12345)
        span = self.upper - self.lower
        u = rng.random((128, D))
        centre = np.where(np.arange(128)[:, None] < 96, 0.5, rng.random((128, D)))
        scale = np.where(np.arange(128)[:, None] < 64, 1.0, 10.0 ** rng.uniform(-6, 0, (128, 1)))
        u = np.clip(centre + (u - 0.5) * scale, 0.0, 1.0)
        X = np.ascontiguousarray(self.lower + u * span, dtype=self.dtype)
        fw, vw, _ = self.ctx.evaluator(X[None])
        f, v = self.evaluate(X, 1)
        self.np_order = int(getattr(self.ctx.evaluator.problem, "cuda_row", None) is None)
        if not (self.np_order and f.tobytes() == fw[0].tobytes() and v.tobytes() == vw[0].tobytes()):
            self.np_order = 0
            f, v = self.evaluate(X, 0)
        rtol = 1e-4 if self.dtype == np.float32 else 1e-9
        if not (np.allclose(f, fw[0], rtol=rtol, atol=0, equal_nan=True) and np.allclose(v, vw[0], rtol=rtol)):
            raise ValueError(f"the C objective of {self.ctx.evaluator.problem.name} disagrees with its array code")

    def evaluate(self, X, np_order=None):
        """``(f, v)``, each ``(n,)`` in the dtype, of the rows ``X (n, D)`` by the C objective, as a
        generation evaluates them (``np_order``: the fold's order, default :attr:`np_order`)."""
        X = np.ascontiguousarray(X, dtype=self.dtype)
        n, D = X.shape
        f, v = np.empty(n, self.dtype), np.empty(n, self.dtype)
        order = self.np_order if np_order is None else np_order
        self.lib.epso_host_eval(
            self._ptr(X), ctypes.c_longlong(n), ctypes.c_int(D), int(order), self._ptr(f), self._ptr(v)
        )
        return f, v

    def schedules(self, g0: int, n: int) -> tuple:
        """``(w, vmax)``, each ``(n,)`` in the dtype: :func:`isles.algorithms.pso.pso.inertia_weight`
        and :func:`~isles.algorithms.pso.pso.vmax_schedule` of the iterations ``g0 + 1 .. g0 + n``
        (generations ``g0 ..``), computed in C as Python computes them (``epso_host_schedules``;
        ``vmax`` zeros without the clamp)."""
        p = self.epso.params
        w, vm = np.empty(n), np.empty(n)
        start, final, i_max = float(p.vmax_fraction), float(p.vmax_final), int(p.max_iterations)
        general = int(not (start <= 0 or final >= start or i_max <= 1))  # vmax_schedule's general case
        self._sched(g0, n, i_max, float(p.w_max), float(p.w_min), general, start, final, float(VMAX_POWER), w, vm)
        if not p.vmax_fraction > 0:
            vm[:] = 0.0
        return w.astype(self.dtype), vm.astype(self.dtype)

    @staticmethod
    def _ptr(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    def normals(self, g0: int, n: int, n_isl: int):
        """``(L, C)``: NumPy's ``log1p`` and ``cos`` of the normal draws' operands of generations
        ``g0 .. g0 + n - 1`` (``epso_host.cuh``'s layout), each ``(n, n_isl, block)``; where
        :attr:`c_cos`, ``C`` is a placeholder (the epoch computes it)."""
        p, rng = self.epso.params, self.ctx.rng
        R, c3 = self.swarm[:2]
        N, C, D = int(p.n_particles), 1 + int(R), int(self.ctx.dim)
        nr = N * (C - 1)
        blk = nr * (4 if c3 > 0 else 3) + nr * D
        A = np.empty((n, n_isl, blk), self.dtype)
        B = None if self.c_cos else np.empty((n, n_isl, blk), self.dtype)
        if blk:
            self._draws(
                n_isl,
                rng.keys.ctypes.data,
                int(rng.ctr[0]),
                int(g0),
                n,
                N,
                C,
                D,
                int(c3 > 0),
                TWO_PI,
                A.ctypes.data,
                None if B is None else B.ctypes.data,
            )
        return np.log1p(A), (A if B is None else np.cos(B))

    def run(self, state: dict, n: int) -> dict:
        """``n`` generations of every island from the NumPy ``state``: a new state (as ``n``
        :meth:`EPSO.step` or :meth:`PSO.step` calls; a PSO's state has no attractor: none is used).

        Raises:
            MemoryError: no memory for an island's scratch."""
        rng, dt = self.ctx.rng, self.dtype
        s = dict(state)
        names = ("x", "vel", "pbest", "pbest_f", "pbest_v", "gbest", "gbest_f", "gbest_v")
        a = {k: np.array(state[k], dtype=dt, order="C") for k in names}
        I, N, D = a["x"].shape
        if "attractor" in state:
            attr = np.ascontiguousarray(state["attractor"], dtype=dt)
            attr_v = np.ascontiguousarray(state["attractor_v"], dtype=dt)
        else:  # PSO: c3 = 0, the attractor unset
            attr, attr_v = np.zeros((I, D), dt), np.full(I, np.inf, dt)
        R, c3 = self.swarm[:2]
        C = 1 + int(R)
        nr = N * (C - 1)
        per_gen = max(1, I * (nr * (4 if c3 > 0 else 3) + nr * D))
        chunk = max(1, CHUNK_ELEMENTS // per_gen)
        nan = np.zeros(1, np.uint64)
        g, done = int(state["generation"]), 0
        while done < n:
            k = min(chunk, int(n) - done)
            L, Cs = self.normals(g + done, k, I)
            w, vm = self.schedules(g + done, k)
            rc = self._epoch(
                int(self.threads),
                I,
                *(a[k2].ctypes.data for k2 in names),
                attr.ctypes.data,
                attr_v.ctypes.data,
                *self._fixed,
                int(rng.ctr[0]),
                g + done,
                k,
                L.ctypes.data,
                Cs.ctypes.data,
                w.ctypes.data,
                vm.ctypes.data,
                *self._coef,
                nan.ctypes.data,
            )
            if rc != 0:
                raise MemoryError(f"{self.epso.name.upper()} host build: no memory for an island's scratch")
            done += k
        s.update(a)
        s["generation"] = g + int(n)
        s["evals"] = state["evals"] + int(n) * N * C
        s["nan_evals"] = np.asarray(state["nan_evals"]) + np.int64(nan[0])
        return s


def host_plan(epso, ctx):
    """The :class:`HostEpochEPSO` of ``(epso, ctx)`` (an EPSO or a PSO) on NumPy where
    ``algorithm.host_kernel`` allows it and it applies (:func:`unsupported_reason`), else ``None``
    with the one log line, ``"EPSO: ..."`` or ``"PSO: ..."``
    (:func:`isles.algorithms.core.host_build.host_plan`); its islands on
    :func:`isles.algorithms.core.threads.host_threads` OpenMP threads."""

    def build():
        host = HostEpochEPSO(epso, ctx)
        host.threads = host_threads(ctx.n_islands)
        return host

    family = epso.name.upper()
    return host_build.host_plan(epso, ctx, family, lambda: unsupported_reason(epso, ctx), build, log)


def host_run(epso, ctx):
    """``(state, n) -> state``: ``n`` generations in :func:`host_plan`'s build, the stop target
    tracked after each as :meth:`IslandAlgorithm.run` does; ``None`` where there is no build."""
    host = host_plan(epso, ctx)
    if host is None:
        return None
    if ctx.target is None:
        return host.run

    def run(state, n):
        for _ in range(int(n)):
            state = epso.track_target(ctx, host.run(state, 1))
        return state

    return run
