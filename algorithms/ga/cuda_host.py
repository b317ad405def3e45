"""The fused GA's C code run on the CPU (``-DISLES_HOST_EMU``): the host compiler
(:func:`host_compiler`, :func:`compile_host`, also EP's and EPSO's) and :class:`HostGA`, the twin of
:class:`isles.algorithms.ga.cuda.FusedGA` on NumPy states (same source,
:func:`isles.algorithms.ga.cuda_source.kernel_source`): the CPU path of NumPy runs where
``algorithm.host_kernel`` allows it (:func:`host_plan`), and the tests' check of the kernels."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
from isles.algorithms.core import host_build
from isles.algorithms.core.threads import host_threads
from isles.algorithms.ga.cuda_source import kernel_source, unsupported_reason
from isles.algorithms.ga.draws import flip_thresholds
from isles.problems.cuda_check import compiler

log = logging.getLogger(__name__)


def host_compiler() -> str | None:
    """The C compiler used for host emulation (:func:`isles.problems.cuda_check.compiler`), or ``None``."""
    return compiler()


def compile_host(source: str):
    """Compile ``source`` as C with ``-DISLES_HOST_EMU`` into a shared library (cached by source,
    for the process and on disk), through the one host compiler invocation
    (:func:`isles.algorithms.core.host_build.compile_host`: ``-O3 -ffp-contract=off -std=gnu11``).

    Raises:
        RuntimeError: no C compiler, or the compilation failed (its messages included).
    """
    return host_build.compile_host(source, ("-std=gnu11", "-O3"), plain_arith=True)


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


class HostGA:
    """The fused generation's C code run on the CPU (``-DISLES_HOST_EMU``), for tests.

    Same decisions, words, mutation, evaluation and elite search as the CUDA kernels; thread
    groups are emulated by loops (``obj_merge`` in thread order). Works on NumPy states.
    ``ga.cu``'s host ``ga_elite_block`` and ``ga_slot`` keep the device functions' contracts (one
    thread doing a block's or a group's work), so :meth:`run` runs the epoch kernel's own block
    loop (``ga_epoch.cu``'s ``ga_epoch_block``) and :meth:`step` the per-generation kernels' steps.

    Args:
        ga: the :class:`isles.algorithms.ga.ga.GA`.
        ctx: a NumPy :class:`isles.algorithms.core.base.Context` whose problem has ``cuda_objective``.
        tpi: threads per group (default: the CUDA layout's).

    Raises:
        ValueError: no ``cuda_objective``; RuntimeError: no C compiler / compile error.
    """

    def __init__(self, ga, ctx, tpi: int | None = None):
        self.ga, self.ctx = ga, ctx
        self.source, self.cfg = kernel_source(ga, ctx, tpi, tail=("ga_epoch.cu", "ga_epoch_threads.cuh"))
        self.lib = host_build.compile_host(self.source, ("-std=gnu11", "-O3"), openmp=True, plain_arith=True)
        #: OpenMP threads over the islands in :meth:`run` (the results do not depend on it)
        self.threads = 1
        self.dtype = np.dtype(ctx.dtype)
        self.T = ctypes.c_float if self.dtype == np.float32 else ctypes.c_double
        p = ga.params
        self.N, self.W, self.NEK = p.pop_size, self.cfg["GA_W"], self.cfg["GA_NEK"]
        self.K = flip_thresholds(p.mutation_probability(self.cfg["GA_L"]))
        self.p_c, self.p_m = float(p.p_c), float(p.mutation_probability(self.cfg["GA_L"]))
        self.penalty = float(getattr(ctx.evaluator, "penalty", 0.0))
        self.target = ctx.target
        self._row = np.zeros(self.W, dtype=np.uint32)

    def evaluate(self, genome):
        """``(f, v, bad)`` of genomes ``(..., W)`` by the kernel's objective code."""
        G = np.ascontiguousarray(genome, dtype=np.uint32).reshape(-1, self.W)
        n = G.shape[0]
        f, v = np.empty(n, self.dtype), np.empty(n, self.dtype)
        bad = np.empty(n, np.int32)
        self.lib.ga_eval_host(_ptr(G), ctypes.c_int(n), _ptr(f), _ptr(v), _ptr(bad), self.T(self.penalty))
        sh = genome.shape[:-1]
        return f.reshape(sh), v.reshape(sh), bad.reshape(sh)

    def select(self, state, track: bool = False, decide: bool = True):
        """``ga_select``'s work on the state's population: ``(elite (I, max(n_elite, 1)) int32,
        hit_generation (I,) int64, sel (I, N, 5) int32)`` (hit updated only with ``track`` and a
        target; ``sel``: the child slots' ``(parent 1, parent 2, a, b, mpos)``, see ga.cu)."""
        f = np.ascontiguousarray(state["f"], dtype=self.dtype)
        v = np.ascontiguousarray(state["v"], dtype=self.dtype)
        I = f.shape[0]
        el = np.empty((I, self.NEK), np.int32)
        sel = np.zeros((I, self.N, 5), np.int32)
        hit = np.array(state.get("hit_generation", np.full(I, -1)), dtype=np.int64)
        do = int(track and self.target is not None)
        tgt = self.dtype.type(self.target if self.target is not None else 0.0)
        self.lib.ga_select_host(
            _ptr(f),
            _ptr(v),
            _ptr(el),
            _ptr(hit),
            ctypes.c_int(do),
            self.T(tgt),
            ctypes.c_longlong(int(state["generation"])),
            ctypes.c_int(I),
            _ptr(sel) if decide else None,
            _ptr(self.ctx.rng.keys),
            ctypes.c_double(self.p_c),
            ctypes.c_double(self.p_m),
        )
        return el, hit, sel

    def step(self, state):
        """One generation (``ga_select``, then ``ga_generation``'s code); returns a new state."""
        G = np.ascontiguousarray(state["genome"], dtype=np.uint32)
        f = np.ascontiguousarray(state["f"], dtype=self.dtype)
        v = np.ascontiguousarray(state["v"], dtype=self.dtype)
        I = G.shape[0]
        el, _, sel = self.select(state)
        Gn, fn, vn = np.empty_like(G), np.empty_like(f), np.empty_like(v)
        nan = np.zeros(1, np.int64)
        self.lib.ga_generation_host(
            _ptr(G),
            _ptr(f),
            _ptr(v),
            _ptr(el),
            _ptr(sel),
            _ptr(Gn),
            _ptr(fn),
            _ptr(vn),
            _ptr(self.ctx.rng.keys),
            ctypes.c_longlong(int(state["generation"])),
            _ptr(nan),
            ctypes.c_int(I * self.N),
            _ptr(self.K),
            self.T(self.penalty),
            _ptr(self._row),
        )
        s = dict(state)
        s["genome"], s["f"], s["v"] = Gn, fn, vn
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + self.N - self.ga.params.n_elite
        s["nan_evals"] = np.asarray(state["nan_evals"]) + nan[0]
        return s

    def run(self, state, n_generations: int):
        """``n_generations`` generations in one call of the epoch kernel's block loop
        (``ga_epoch_host``), the host twin of :meth:`FusedGA.run` on both of its paths: with a stop
        target, ``hit_generation (I,)`` int64 records, per island not yet hit (-1), the first
        generation (the state's count) whose population's best is feasible with ``f <= target``,
        checked on every population of the call including the first and the last. ``n = 0``
        returns a copy of the state.

        Raises:
            ValueError: ``n_generations < 0``.
        """
        n = int(n_generations)
        if n < 0:
            raise ValueError(f"HostGA.run: n_generations={n}: allowed values are integers >= 0")
        if n == 0:
            return dict(state)
        G = np.ascontiguousarray(state["genome"], dtype=np.uint32)
        I = G.shape[0]
        bufs = [
            (G.copy(), np.array(state["f"], dtype=self.dtype), np.array(state["v"], dtype=self.dtype)),
            (np.empty_like(G), np.empty((I, self.N), self.dtype), np.empty((I, self.N), self.dtype)),
        ]
        el = np.zeros((I, self.NEK), np.int32)
        sel = np.zeros((I, self.N, 5), np.int32)
        nan = np.zeros(1, np.uint64)
        hit = np.array(state.get("hit_generation", np.full(I, -1)), dtype=np.int64)
        track = int(self.target is not None)
        tgt = self.dtype.type(self.target if track else 0.0)
        rc = self.lib.ga_epoch_host_threads(
            ctypes.c_int(int(self.threads)),
            *map(_ptr, bufs[0]),
            *map(_ptr, bufs[1]),
            _ptr(el),
            _ptr(sel),
            _ptr(self.ctx.rng.keys),
            ctypes.c_longlong(int(state["generation"])),
            _ptr(self.ctx.rng.ctr),
            ctypes.c_int(n),
            ctypes.c_int(I),
            _ptr(nan),
            _ptr(hit),
            ctypes.c_int(track),
            self.T(tgt),
            _ptr(self.K),
            self.T(self.penalty),
            ctypes.c_double(self.p_c),
            ctypes.c_double(self.p_m),
        )
        if rc != 0:
            raise MemoryError("GA epoch kernel (host): no memory for the islands' NaN counts")
        s = dict(state)
        s["genome"], s["f"], s["v"] = bufs[n % 2]
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * (self.N - self.ga.params.n_elite)
        s["nan_evals"] = np.asarray(state["nan_evals"]) + np.int64(nan[0])
        if track:
            s["hit_generation"] = hit
        return s


def host_plan(ga, ctx):
    """The :class:`HostGA` of ``(ga, ctx)`` on NumPy where ``algorithm.host_kernel`` allows it and
    it applies (:func:`isles.algorithms.ga.cuda_source.unsupported_reason` with ``device=False``: a
    problem with a ``cuda_objective`` for the GA's genome), else ``None`` with the one log line
    (:func:`isles.algorithms.core.host_build.host_plan`)."""

    def build():
        host = HostGA(ga, ctx)
        host.threads = host_threads(ctx.n_islands)
        return host

    return host_build.host_plan(ga, ctx, "GA", lambda: unsupported_reason(ga, ctx, device=False), build, log)


def host_run(ga, ctx):
    """``(state, n) -> state``: ``n`` generations of every island in :func:`host_plan`'s build,
    the stop target tracked (``IslandAlgorithm.host_plan``, ``HOST_MODULE``); ``None`` where
    :func:`host_plan` gives none."""
    host = host_plan(ga, ctx)
    return None if host is None else (lambda state, n: host.run(state, n))
