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
"""
from __future__ import annotations

import logging
import math

import numpy as np

from isles.algorithms.core.epoch_layout import EpochPaths
from isles.algorithms.core.cuda_lib import defines as c_defines
from isles.algorithms.core.cuda_lib import draw_ids, source
from isles.algorithms.core.fused_check import real_objective_error
from isles.algorithms.core.graph import GRAPH_GENERATIONS, PingPongGraph
from isles.algorithms.core.plan import (TargetTracker, counter_kernels, elementwise, module, require_supported,
                                        verified_plan)
from isles.algorithms.de.crossover import DRAW_CROSS, DRAW_START
from isles.algorithms.de.de import DRAW_BOUND, DRAW_INDEX
from isles.problems.base import objective_macros

log = logging.getLogger(__name__)

XOVER_IDS = {"bin": 0, "nec": 1}
BOUND_IDS = {"clip": 0, "reflect": 1, "reinit": 2}
MAX_ITEMS = 32  # coordinates per thread held in registers
SMEM_LIMIT = 48 * 1024  # static shared memory of one block
VERIFY_RTOL = {np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-8}

#: the draw ids of the counter RNG (algorithms/de/de.py, algorithms/de/crossover.py), injected into
#: the kernels (the CUDA never writes a draw id itself)
DRAWS = draw_ids(DRAW_INDEX=DRAW_INDEX, DRAW_START=DRAW_START, DRAW_CROSS=DRAW_CROSS, DRAW_BOUND=DRAW_BOUND)


def layout(dim: int) -> tuple[int, int, int, int]:
    """Thread layout for dimension ``D``: ``(TPI, ITEMS, IPB, BLOCK)``.

    ``TPI`` threads per individual (a power of two in [32, 1024], about ``D/4``), ``ITEMS =
    ceil(D/TPI)`` coordinates per thread, ``IPB`` individuals per block (4 warps when ``TPI =
    32``, else 1) and ``BLOCK = TPI * IPB`` threads.
    """
    tpi = 32
    while tpi < 1024 and tpi * 4 < dim:
        tpi *= 2
    items = -(-int(dim) // tpi)
    ipb = 4 if tpi == 32 else 1
    return tpi, items, ipb, tpi * ipb


def kernel_source(dtype, dim: int, n: int, objective: str, crossover: str, bound_handling: str,
                  penalty: float | None = None, tail: str = "de_generation.cu") -> str:
    """CUDA source of one configuration: ``defines + DRAWS + objective.cuh + de.cu + objective +
    tail`` (:mod:`isles.algorithms.core.cuda_lib`); ``tail`` is ``de_generation.cu`` (the
    per-generation kernels) or ``de_epoch.cu`` (:mod:`isles.algorithms.de.epoch`).

    Args:
        dtype: float32 or float64 (``IS_F32``).
        dim, n: ``D`` and the population size ``N``.
        objective: the problem's fused objective (``problem.cuda_objective``, the contract of
            :class:`isles.problems.base.Problem`, real genome); the kernel never looks at its name.
        crossover, bound_handling: keys of :data:`XOVER_IDS`, :data:`BOUND_IDS`.
        penalty: the static penalty factor ``r`` (``constraints.handling=penalty``), used only
            when the objective has ``OBJ_HAS_V 1``; ``None`` for Deb's rules.

    Raises:
        KeyError: an unsupported crossover or bound handling name.
        ValueError: the objective lacks a required macro (:func:`isles.problems.base.objective_macros`).
    """
    macros = objective_macros(objective, "real")
    tpi, items, ipb, block = layout(dim)
    defines = {
        "IS_F32": int(np.dtype(dtype) == np.float32), "DIM": int(dim), "NPOP": int(n),
        "TPI": tpi, "ITEMS": items, "IPB": ipb, "BLOCK": block,
        "XOVER": XOVER_IDS[crossover], "BOUND": BOUND_IDS[bound_handling],
    }
    if penalty is not None and macros["OBJ_HAS_V"]:
        defines["PENALTY"] = repr(float(penalty))
    return source(c_defines(defines) + DRAWS, "objective.cuh", "de.cu",
                  "// ---- the problem's fused objective ----\n" + objective, tail)


def _objective_of(ctx) -> tuple[str | None, str | None, dict | None]:
    """``(source, reason, macros)`` of the context's problem: its ``cuda_objective`` and macros,
    or a reason why it has none usable."""
    prob = ctx.evaluator.problem
    genome = getattr(prob, "genome", "real")
    if genome != "real":
        return None, f"problem genome {genome!r} (fused: real)", None
    src = getattr(prob, "cuda_objective", None)
    if src is None:
        return None, "problem has no cuda_objective", None
    try:
        macros = objective_macros(src, "real")
    except ValueError as exc:
        return None, str(exc), None
    if getattr(prob, "n_constraints", 0) != 0 and not macros["OBJ_HAS_V"]:
        return None, "the problem has constraints but its cuda_objective has OBJ_HAS_V 0", None
    return src, None, macros


def unsupported_reason(params, ctx, device: bool = True) -> str | None:
    """Why ``(params, ctx)`` cannot use the fused path, or ``None`` if it can.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`.
        ctx: :class:`isles.algorithms.core.base.Context`.
        device: ``False`` asks only about the configuration (not whether ``ctx`` is on CuPy): the
            host emulations of the kernels (:class:`isles.algorithms.de.host_epoch.HostEpochDE`).
    """
    reason = variation_unsupported_reason(params, ctx, device)
    if reason is not None:
        return reason
    dtype = np.dtype(ctx.dtype)
    _, reason, macros = _objective_of(ctx)
    if reason is not None:
        return reason
    dim = int(ctx.dim)
    pdim = getattr(ctx.evaluator.problem, "dim", dim)
    if pdim != dim:
        return f"context D={dim} differs from problem.dim={pdim}"
    tpi, items, ipb, _ = layout(dim)
    if items > MAX_ITEMS:
        return f"D={dim} > {MAX_ITEMS * 1024}"
    nwarp = max(1, tpi // 32)
    smem = (ipb * (dim + 1) * int(macros["OBJ_NEXT"]) + macros["OBJ_NACC"] * nwarp) * dtype.itemsize
    if smem > SMEM_LIMIT:
        return f"OBJ_NEXT rows of D={dim} do not fit {SMEM_LIMIT} bytes of shared memory"
    return None


def variation_unsupported_reason(params, ctx, device: bool = True) -> str | None:
    """Why ``(params, ctx)`` cannot build its trial population with the fused kernels (whether
    or not the problem has a ``cuda_objective``), or ``None`` if it can.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`.
        ctx: :class:`isles.algorithms.core.base.Context`.
        device: ``False``: whether ``ctx`` is on CuPy is not asked (:func:`unsupported_reason`).
    """
    if device and getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if not params.fused:
        return "fused=False"
    if params.strategy != "rand/1":
        return f"strategy {params.strategy} (fused: rand/1)"
    if params.crossover not in XOVER_IDS:
        return f"crossover {params.crossover} (fused: bin|nec)"
    dtype = np.dtype(ctx.dtype)
    if dtype not in (np.float32, np.float64):
        return f"dtype {dtype} (fused: float32|float64)"
    if ctx.n_islands * params.pop_size >= 2**31:
        return "more than 2**31 individuals"
    return None


def variation_source(dtype, dim: int, n: int, crossover: str, bound_handling: str) -> str:
    """CUDA source of the trial-population kernel ``de_variation`` of one configuration:
    ``defines + DRAWS + de.cu + de_variation.cu`` (no objective).

    Raises:
        KeyError: an unsupported crossover or bound handling name.
    """
    defines = {"IS_F32": int(np.dtype(dtype) == np.float32), "DIM": int(dim), "NPOP": int(n),
               "XOVER": XOVER_IDS[crossover], "BOUND": BOUND_IDS[bound_handling]}
    return source(c_defines(defines) + DRAWS, "de.cu", "de_variation.cu")


def _cr_args(params, dtype) -> tuple:
    """Kernel arguments of the crossover rate: ``(CR in dtype, log CR, case)`` (0: CR <= 0,
    1: 0 < CR < 1, 2: CR >= 1)."""
    cr = float(params.CR)
    return (np.dtype(dtype).type(cr), np.float64(math.log(cr) if 0.0 < cr < 1.0 else 0.0),
            np.int32(0 if cr <= 0.0 else (2 if cr >= 1.0 else 1)))


class DEVariation:
    """The fused trial population of DE/rand/1/{bin,nec} for a problem evaluated as array code:
    one kernel (``de_variation``) that writes ``U`` bit-identical to
    :meth:`isles.algorithms.de.de.DE.trial`'s array code (same ``decide``/``trial_coord`` as the
    fused generation, module docstring). No host synchronisation; capturable.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`; ctx: a CuPy context.

    Raises:
        ValueError: :func:`variation_unsupported_reason` gives a reason.
    """

    def __init__(self, params, ctx):
        cp = require_supported("fused DE variation", variation_unsupported_reason(params, ctx))

        self.cp, self.I, self.N, self.D = cp, ctx.n_islands, params.pop_size, int(ctx.dim)
        self.dtype = np.dtype(ctx.dtype)
        src = variation_source(self.dtype, self.D, self.N, params.crossover, params.bound_handling)
        self._k = module(cp, src).get_function("de_variation")
        self._F = self.dtype.type(params.F)
        self._CR, self._log_cr, self._cr_case = _cr_args(params, self.dtype)
        self._keys = ctx.rng.keys
        self._ctr = ctx.rng.ctr
        self._lower = cp.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self._upper = cp.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self._select = _select_kernels(cp)

    def trial(self, X, generation: int):
        """Trial population ``U (I, N, D)`` of ``generation`` (host int; the draws use
        ``generation + rng.ctr`` as :class:`isles.algorithms.core.random.CounterRNG` does).

        Raises:
            ValueError: ``X`` is not ``(I, N, D)`` in the plan's dtype.
        """
        cp = self.cp
        if X.shape != (self.I, self.N, self.D) or X.dtype != self.dtype:
            raise ValueError(f"fused DE variation: X{X.shape} {X.dtype} is not "
                             f"({self.I}, {self.N}, {self.D}) {self.dtype}")
        X = cp.ascontiguousarray(X)
        U = cp.empty_like(X)
        total = self.I * self.N
        self._k((-(-total // 4),), (128,),
                (X, U, self._keys, self._lower, self._upper, np.int64(generation), self._ctr,
                 np.int32(total), self._F, self._CR, self._log_cr, self._cr_case))
        return U

    def select(self, state, U, fu, vu, n_nan):
        """:func:`isles.algorithms.de.de.select` in two elementwise kernels (same rule, same new
        state); no host synchronisation."""
        cp = self.cp
        rows, fv = self._select
        X, f, v = state["X"], state["f"], state["v"]
        c = cp.ascontiguousarray
        s = dict(state)
        Xn = rows(c(X), c(U), c(f), c(v), c(fu), c(vu), np.int64(X.shape[-1]), size=X.size)
        fn, vn = fv(c(f), c(v), c(fu), c(vu), size=f.size)
        s["X"], s["f"], s["v"] = Xn.reshape(X.shape), fn.reshape(f.shape), vn.reshape(v.shape)
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + X.shape[1]
        s["nan_evals"] = state["nan_evals"] + n_nan
        return s


def _select_kernels(cp):
    """Greedy one-to-one selection as two elementwise kernels (:func:`isles.algorithms.core.plan.elementwise`):
    ``isles_de_select_rows`` writes the next population ``(I, N, D)``, ``isles_de_select_fv`` its
    ``f, v``. The rule is Deb's (``deb.cuh``, :func:`isles.problems.constraints.better`: the trial
    wins unless the target is strictly better), as in :func:`isles.algorithms.de.de.select`."""
    keep = "ISLES_BETTER(f[r], v[r], fu[r], vu[r])"
    deb = source("deb.cuh")
    rows = elementwise(cp, "raw T X, raw T U, raw F f, raw F v, raw F fu, raw F vu, int64 D", "T out",
                       f"const long long r = i / D; out = {keep} ? X[i] : U[i];", "isles_de_select_rows", deb)
    fv = elementwise(cp, "raw F f, raw F v, raw F fu, raw F vu", "F fo, F vo",
                     f"const long long r = i; const bool k = {keep}; fo = k ? f[r] : fu[r]; vo = k ? v[r] : vu[r];",
                     "isles_de_select_fv", deb)
    return rows, fv


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
            self.epoch_src = kernel_source(self.dtype, self.D, self.N, objective, params.crossover,
                                           params.bound_handling, self.penalty, tail="de_epoch.cu")
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
            (self.grid,), (self.block,),
            (X, f, v, Xn, fn, vn, trial, ftrial, np.int32(write), self._keys, self._lower,
             self._upper, gen_dev, np.int64(gen_off), self._ctr, nan, np.int32(self.total), self._F,
             self._CR, self._log_cr, self._cr_case),
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
        return real_objective_error(self.cp, self.problem, self.evaluate_fv, self.dtype,
                                    bool(self.macros["OBJ_HAS_V"]), n_points, seed=20240611)

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
    return verified_plan("DE", "generic", unsupported_reason(de.params, ctx), lambda: FusedDE(de.params, ctx),
                         VERIFY_RTOL, lambda p: f"{p.problem.name}, D={p.D}, TPI={p.tpi}, ITEMS={p.items}")
