"""Fused CUDA fast path of DE/rand/1/bin and DE/rand/1/nec for any problem with a fused objective.

A plain CuPy loop of the generic matrix-form DE (:mod:`isles.algorithms.de.de`, seed 004 Algorithm 2)
launches some forty small kernels per generation and is launch-bound (about 800 us per generation
for Ackley D=1000, N=500). Here a whole generation is **one kernel**:

* one *group* of ``TPI`` threads per individual (a warp for ``D <= 128``, else a block of up to
  1024 threads), each thread holding ``ITEMS = ceil(D/TPI) <= 32`` coordinates in registers;
* every thread re-derives the individual's indices ``r0, r1, r2``, ``j_rand`` and (NEC) ``L``
  from the counter-based hash (a few 64-bit multiplies; no shared-memory broadcast needed), builds
  its trial coordinates (crossover test, mutant, bound handling), folds them into its private
  accumulators with the problem's ``obj_term`` (registers), and the group merges the
  accumulators with ``obj_merge`` (warp shuffles, then shared memory across warps) before
  ``obj_final`` (and ``obj_violation``);
* the group applies greedy selection under Deb's rules and writes the *next* population into a
  second buffer (ping-pong: other groups still read the current one), plus ``f``, ``v`` and an
  atomic NaN count.

:meth:`FusedDE.run` captures ``GRAPH_GENERATIONS`` (64) such launches, ping-ponging between two
preallocated population buffers, plus one tiny kernel that advances a device-side generation
counter, into a **CUDA graph** and replays it; the generation number is read from device memory
so that one graph serves every block of 64 generations. Everything the graph touches is
preallocated and referenced by the plan (CuPy's memory pool is not used during capture). Neither
:meth:`FusedDE.step` nor :meth:`FusedDE.run` synchronises with the host.

**Same semantics as the NumPy path.** The kernel uses the counter-based generator of
:mod:`isles.algorithms.core.random` (SplitMix64 finaliser on ``(key ^ mix64(g << 16 | draw)) + index *
golden``, with ``g`` = generation + the generator's device counter ``rng.ctr``, as
:meth:`isles.algorithms.core.random.CounterRNG.uniform` does on CuPy) with the same draw ids, shapes and index layouts as :mod:`isles.algorithms.de.de` and
:mod:`isles.algorithms.de.crossover`, and the same arithmetic for the trial vector (mutation
``x_r0 + F (x_r1 - x_r2)`` with explicitly rounded multiply and add, so the compiler cannot fuse
them into an FMA; bound handling with the exact ``fmod``). What is therefore **bit-identical** to
the NumPy (and generic CuPy) path: the indices ``r0, r1, r2``, ``j_rand``, the binomial mask, the
mutant coordinates and the bound handling (``clip``, ``reflect``, ``reinit``), i.e. the whole
trial population; NEC's ``L = min(ceil(log U / log CR), D)`` uses the same float64 ``U`` and is
identical except when ``log U / log CR`` lies within an ulp of an integer (device ``log`` and the
host's may differ by an ulp; probability about 1e-15 per draw). What is **not** bit-identical is
the objective value: the kernel sums in a different order (tree over threads) and uses CUDA's
``cosf``/``expf``, so ``f`` agrees to rounding (about 1e-6 relative in float32) and a selection
decision between a trial and a target whose values tie to rounding can differ. The plan checks
its objective (and violation) against the problem's own ``objective`` (and ``constraints``) on
random points when it is built, and falls back to the generic path (with a warning) if they
disagree: a wrong ``cuda_objective`` never silently changes results.

**The objective comes from the problem.** The kernel source is ``defines + draw ids + objective.cuh +
de.cu + problem.cuda_objective + de_generation.cu`` (:mod:`isles.algorithms.core.cuda_lib`) (the contract is documented on
:class:`isles.problems.base.Problem`); the kernel never switches on a problem's name. Only when the
source sets ``OBJ_NEXT`` is the trial row staged in shared memory (``x_next``, Rosenbrock). With
``OBJ_HAS_V`` (a constrained problem) the trial's ``v`` is ``obj_violation`` and selection uses
Deb's rules on ``(f, v)`` (or the static penalty ``f + r v`` with ``constraints.handling=penalty``);
without it ``v = 0``.

Measured on one H100 80GB HBM3 (CuPy 14.2, float32, reflect, ``DE.run``, CUDA events, median of
5 x 2048 generations; ``python benchmarks/de_bench.py --all``): Ackley D=1000 N=500 bin 6.6 us
per generation, nec 5.9; Griewank D=500 N=300 bin 4.7, nec 4.4; Rosenbrock D=50 N=100 bin 2.45,
nec 2.8 (latency-bound: one warp per individual, 100 warps; NEC's float64 log is on the critical
path); unchanged (within 1 %, same register counts) since the objective comes from
``problem.cuda_objective`` (A/B against the name-switched kernel on the same H100, 2026-11-22); 64 islands of that Rosenbrock 5.7 / 6.6 us per batched generation, i.e. 0.09 / 0.10 us per
island-generation. For comparison, the generic CuPy path takes about 3 ms per generation on
Ackley, and a Python loop of single fused ``DE.step`` calls about 50-80 us (host-bound).

Supported: xp = CuPy; strategy ``rand/1``; crossover ``bin`` or ``nec``; any bound handling;
float32 or float64; any real-genome problem whose ``cuda_objective`` is not ``None`` (built in:
``sphere``, ``rastrigin``, ``ackley``, ``griewank``, ``rosenbrock``, ``schwefel_2_26``), with
``OBJ_HAS_V 1`` if it has constraints; ``D <= 32768`` (``OBJ_NEXT``: the trial rows of a block
must fit 48 KiB of shared memory). Anything else runs the generic path.

Files: the sources, their configuration macros, thread layout and limits in
:mod:`isles.algorithms.de.cuda_source`; the fused trial population for array-code problems
(:class:`~isles.algorithms.de.cuda_variation.DEVariation`) in :mod:`isles.algorithms.de.cuda_variation`;
the CuPy plan (:class:`FusedDE`) and the makers (:func:`make_plan`, :func:`make_variation`) here.
"""

from __future__ import annotations

import logging

import numpy as np
from isles.algorithms.core.epoch_layout import EpochPaths
from isles.algorithms.core.fused_check import real_objective_error
from isles.algorithms.core.graph import GRAPH_GENERATIONS, PingPongGraph
from isles.algorithms.core.plan import TargetTracker, counter_kernels, module, require_supported, verified_plan
from isles.algorithms.de.cuda_source import (
    _cr_args,
    _objective_of,
    kernel_source,
    layout,
    unsupported_reason,
    variation_unsupported_reason,
)
from isles.algorithms.de.cuda_variation import DEVariation

log = logging.getLogger(__name__)

VERIFY_RTOL = {np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-8}


def make_variation(de, ctx):
    """A :class:`DEVariation` for the DE algorithm ``de`` on ``ctx``, or ``None`` where it does not
    apply (logged at INFO level)."""
    reason = variation_unsupported_reason(de.params, ctx)
    if reason is not None:
        log.info("DE: array-code trial population (%s)", reason)
        return None
    return DEVariation(de.params, ctx)


class FusedDE(EpochPaths, PingPongGraph):
    """Compiled fused DE/rand/1/{bin,nec} for one ``(params, ctx)`` (see the module docstring).

    Args:
        params: :class:`isles.algorithms.de.de.DEParams` (rand/1, bin or nec).
        ctx: :class:`isles.algorithms.core.base.Context` on CuPy with a supported problem.

    Raises:
        ValueError: the configuration is unsupported (:func:`unsupported_reason`).
    """

    FAMILY = "DE"

    def __init__(self, params, ctx):
        cp = require_supported("fused DE", unsupported_reason(params, ctx))

        self.cp, self.params, self.ctx = cp, params, ctx
        self.problem = ctx.evaluator.problem
        self.I, self.N, self.D = ctx.n_islands, params.pop_size, int(ctx.dim)
        self.dtype = np.dtype(ctx.dtype)
        self.tpi, self.items, self.ipb, self.block = layout(self.D)
        self.total = self.I * self.N
        self.grid = -(-self.total // self.ipb)
        objective, _, self.macros = _objective_of(ctx)
        ev = ctx.evaluator
        self.penalty = float(ev.penalty) if getattr(ev, "handling", "feasibility") == "penalty" else None
        self.source = kernel_source(
            self.dtype, self.D, self.N, objective, params.crossover, params.bound_handling, self.penalty
        )
        mod = module(cp, self.source)
        self._k_gen = mod.get_function("de_generation")
        self._k_eval = mod.get_function("eval_rows")
        self._k_set, self._k_add = counter_kernels(cp)
        self._F = self.dtype.type(params.F)
        self._CR, self._log_cr, self._cr_case = _cr_args(params, self.dtype)
        self._keys = ctx.rng.keys
        ctr = getattr(ctx.rng, "ctr", None)  # CounterRNG's device generation offset (graph replay)
        self._ctr = ctr if ctr is not None else cp.zeros(1, dtype=np.uint64)
        self._lower = cp.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self._upper = cp.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self._zero = cp.zeros((), dtype=np.int64)  # generation offset source of step()
        self._gen = cp.zeros((), dtype=np.int64)  # device generation counter of run()
        self._nan = cp.zeros((), dtype=np.int64)  # NaN count of run()
        self._dummy = cp.empty((1,), dtype=self.dtype)
        self._bufs = None
        self._graph = None
        self.graph_generations = GRAPH_GENERATIONS
        self.tracker = TargetTracker(cp, ctx, self.dtype) if ctx.target is not None else None
        #: the SM-resident epoch kernel (:mod:`isles.algorithms.de.epoch`) where it applies, else
        #: ``None`` and :attr:`epoch_reason` says why; :meth:`choose` sets :attr:`use_epoch`
        self.epoch, self.epoch_reason, self.use_epoch, self.timings = None, None, False, None
        if not getattr(params, "epoch", True):
            self.epoch_reason = "algorithm.epoch=false"
        else:
            from isles.algorithms.de.epoch import EpochDE  # noqa: PLC0415

            #: the epoch kernel's source before its layout's defines (:class:`EpochDE`)
            self.epoch_src = kernel_source(
                self.dtype,
                self.D,
                self.N,
                objective,
                params.crossover,
                params.bound_handling,
                self.penalty,
                tail="de_epoch.cu",
            )
            try:
                self.epoch = EpochDE(self, self.epoch_src)
            except ValueError as exc:
                self.epoch_reason = str(exc)

    CHOOSE_N = 64  # EpochPaths.choose

    def _timing_state(self) -> dict:
        """A random population for :meth:`choose` (timing only: the run's draws are counter-based)."""
        rs = self.cp.random.RandomState(20261123)
        X = (self._lower + (self._upper - self._lower) * rs.random_sample((self.I, self.N, self.D))).astype(self.dtype)
        f, v = self.evaluate_fv(X)
        return {"X": X, "f": f, "v": v, "generation": 0, "evals": 0, "nan_evals": 0}

    # -- launches -------------------------------------------------------------------------------
    def _launch(self, src, dst, trial, ftrial, write, gen_dev, gen_off, nan):
        X, f, v = src
        Xn, fn, vn = dst
        self._k_gen(
            (self.grid,),
            (self.block,),
            (
                X,
                f,
                v,
                Xn,
                fn,
                vn,
                trial,
                ftrial,
                np.int32(write),
                self._keys,
                self._lower,
                self._upper,
                gen_dev,
                np.int64(gen_off),
                self._ctr,
                nan,
                np.int32(self.total),
                self._F,
                self._CR,
                self._log_cr,
                self._cr_case,
            ),
        )

    def _arrays(self, state):
        cp = self.cp
        X, f, v = state["X"], state["f"], state["v"]
        if X.shape != (self.I, self.N, self.D) or f.shape != (self.I, self.N) or v.shape != f.shape:
            raise ValueError(
                f"fused DE: state shapes X{X.shape} f{f.shape} v{v.shape} do not match "
                f"(I, N, D) = ({self.I}, {self.N}, {self.D})"
            )
        out = []
        for a in (X, f, v):
            if a.dtype != self.dtype or not a.flags.c_contiguous:
                a = cp.ascontiguousarray(a, dtype=self.dtype)
            out.append(a)
        return tuple(out)

    def evaluate_fv(self, X):
        """Objective and violation of ``X (..., D)`` by the kernel's own code (``obj_final``,
        ``obj_violation``; no NaN or penalty treatment).

        Returns:
            ``(f, v)`` of shape ``X.shape[:-1]`` (CuPy, the plan's dtype); ``v = 0`` without
            ``OBJ_HAS_V``.
        """
        cp = self.cp
        X = cp.ascontiguousarray(X, dtype=self.dtype)
        rows = int(np.prod(X.shape[:-1]))
        f = cp.empty((rows,), dtype=self.dtype)
        v = cp.empty((rows,), dtype=self.dtype)
        grid = max(1, -(-rows // self.ipb))
        self._k_eval((grid,), (self.block,), (X, f, v, np.int32(rows)))
        return f.reshape(X.shape[:-1]), v.reshape(X.shape[:-1])

    def evaluate(self, X):
        """Objective of ``X (..., D)`` by the kernel's own code (no NaN replacement).

        Returns:
            ``f`` of shape ``X.shape[:-1]`` (CuPy, the plan's dtype).
        """
        return self.evaluate_fv(X)[0]

    def verify(self, n_points: int = 16) -> float:
        """Largest ``|f_kernel - f_problem| / (1 + |f_problem|)`` on random points (host sync),
        and the same for the violation against :func:`isles.problems.constraints.total_violation` of
        ``problem.constraints`` when the objective has ``OBJ_HAS_V``.

        Points: uniform in the box, and the same scaled towards the box centre by 1e-3 (near the
        optimum of the centred functions). This protects against a wrong ``cuda_objective``.
        """
        return real_objective_error(
            self.cp, self.problem, self.evaluate_fv, self.dtype, bool(self.macros["OBJ_HAS_V"]), n_points, seed=20240611
        )

    # -- the algorithm ----------------------------------------------------------------------------
    def trial(self, state):
        """Trial population of generation ``state["generation"]`` and its objective.

        Returns:
            ``(U (I, N, D), f_U (I, N))``; ``U`` is bit-identical to
            :meth:`isles.algorithms.de.de.DE.trial` (module docstring).
        """
        cp = self.cp
        src = self._arrays(state)
        dst = tuple(cp.empty_like(a) for a in src)
        U, fU = cp.empty_like(src[0]), cp.empty_like(src[1])
        nan = cp.zeros((), dtype=np.int64)
        self._launch(src, dst, U, fU, 1, self._zero, state["generation"], nan)
        return U, fU

    def step(self, state):
        """One generation (one kernel launch, no host sync); returns a new state."""
        cp = self.cp
        src = self._arrays(state)
        dst = tuple(cp.empty_like(a) for a in src)
        nan = self._nan_counter(state)
        self._launch(src, dst, self._dummy, self._dummy, 0, self._zero, state["generation"], nan)
        s = dict(state)
        s["X"], s["f"], s["v"] = dst
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + self.N
        s["nan_evals"] = nan
        return s

    def _nan_counter(self, state):
        """A fresh int64 device counter holding ``state["nan_evals"]``, for a kernel to add the
        new NaN evaluations to (:meth:`step`, the epoch kernel)."""
        nan = state["nan_evals"]
        if isinstance(nan, self.cp.ndarray) and nan.dtype == np.int64:
            return nan.copy()
        return self.cp.array(nan, dtype=np.int64)

    def _step(self, src, dst, k):
        """One generation ``src -> dst`` with draws of generation ``gen + k`` (:class:`PingPongGraph`)."""
        self._launch(src, dst, self._dummy, self._dummy, 0, self._gen, k, self._nan)

    def _tracked(self, dst):
        """``(f, v, N, N, None)`` of buffer set ``dst`` (:meth:`PingPongGraph._track_target`)."""
        return dst[1], dst[2], self.N, self.N, None

    def _buffers(self):
        if self._bufs is None:
            cp = self.cp
            shapes = ((self.I, self.N, self.D), (self.I, self.N), (self.I, self.N))
            self._bufs = tuple(tuple(cp.empty(sh, dtype=self.dtype) for sh in shapes) for _ in range(2))
        return self._bufs

    def _run_generations(self, state, n: int):
        """``n >= 1`` generations by the per-generation kernel (graph replays); a new state."""
        self._start(self._arrays(state), state["generation"])
        self._nan.fill(0)
        if self.tracker is not None:
            self.tracker.load(state)
        fin, _ = self._advance(n)
        s = dict(state)
        s["X"], s["f"], s["v"] = (a.copy() for a in fin)
        if self.tracker is not None:  # tracked after every generation, inside the graph
            s["hit_generation"] = self.tracker.hit.copy()
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * self.N
        s["nan_evals"] = state["nan_evals"] + self._nan
        return s


def make_plan(de, ctx):
    """A verified :class:`FusedDE` for the DE algorithm ``de`` on ``ctx``, or ``None`` where it
    does not apply.

    Builds (compiles, cached by source) and self-checks the kernel's objective against
    ``problem.objective`` (:meth:`FusedDE.verify`, one host synchronisation). Returns ``None``
    with a log line when unsupported, and with a ``RuntimeWarning`` when the check fails.
    """
    return verified_plan(
        "DE",
        "generic",
        unsupported_reason(de.params, ctx),
        lambda: FusedDE(de.params, ctx),
        VERIFY_RTOL,
        lambda p: f"{p.problem.name}, D={p.D}, TPI={p.tpi}, ITEMS={p.items}",
    )
