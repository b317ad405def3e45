"""Fused CUDA generation of FEP / CEP / IFEP (:mod:`isles.algorithms.ep.fep`), and its host emulation.

The islands' parents and offspring live in *union* buffers ``(I, 2 mu, n)`` (``X`` and ``eta``)
and ``(I, 2 mu)`` (``f``, ``v``): parents at positions ``[0, mu)``, offspring at ``[mu, 2 mu)``,
the layout of the array code's union. One generation is **three kernel launches**, ping-ponging
between two union buffers A and B:

* ``fep_generate`` -- one warp per parent slot ``i`` (``FEP_ITEMS = ceil(n / 32)`` coordinates per
  lane, in registers): the parent is row ``src[i]`` of A (the survivors of the previous
  generation's selection; row ``i`` in the first generation), copied to B's row ``i``; the lane
  draws ``N_i`` (the same hash in every lane), ``N_ij`` and the Cauchy or normal ``delta_ij`` in
  the kernel from the counter-based hash, updates ``eta`` and ``x`` (seed 003 step 3, Yao et al.
  eqs. 1-2, 4), applies the bound handling (``isles_bound`` of the
  CUDA library's ``bounds.cuh``, :func:`isles.algorithms.de.de.apply_bounds`), evaluates the
  offspring with the problem's fused objective (``obj_term`` per coordinate, ``obj_merge`` by
  warp shuffles, ``obj_final``; ``x_next`` from the neighbour lane), applies the evaluator's NaN
  rule and writes B's row ``mu + i``. IFEP builds both offspring and keeps the better one;
* ``fep_wins`` -- one thread per union individual ``k``: ``q`` opponents from the hash and the win
  count (Deb's rules on ``(f, v)``);
* ``fep_select`` -- one block per island: the histogram of the ``q + 1`` win counts (per-thread
  counts in registers for ``q < 32``, else shared-memory atomics), the threshold and the tie
  offset (thread 0), then two block-wide prefix sums over contiguous chunks (tie numbers, then
  survivor slots) and the survivors' positions ``src (I, mu)``. No sort.

**Epoch kernel.** Where timed faster when the plan is built (:meth:`FusedFEP.choose`), a call's
generations run instead as one launch of ``fep_epoch`` (one block per island calling the same
device functions ``fep_slot``, ``fep_wins_of`` and ``fep_select_block`` between block barriers;
:mod:`isles.algorithms.ep.epoch`), with the same results bit for bit. ``algorithm.epoch=false``
keeps the three launches.

:meth:`FusedFEP.run` captures ``GRAPH_GENERATIONS`` (64) generations plus a kernel that advances a
device-side generation counter into a **CUDA graph** and replays it (as
:class:`isles.algorithms.de.cuda.FusedDE`); the generation of the draws is ``gen_off + gen_dev +
rng.ctr``. At the end the survivors are gathered once into a fresh state. Neither
:meth:`FusedFEP.step` nor :meth:`FusedFEP.run` synchronises with the host.

**Same individuals as the NumPy twin.** Draw ids, index layouts, the order of the rounded
operations (``add_rn``/``mul_rn``, no FMA) and the selection rule are those of
:mod:`isles.algorithms.ep.fep`, so under the same seed the offspring agree to the last bit where the
math library's ``tan``/``exp``/``log1p``/``cos`` do (CUDA's and NumPy's may differ by an ulp),
and the objective values to rounding (the sum order differs). Selection then picks the same
individuals unless two fitness values tie to rounding. The plan checks its objective against the
problem's own on random points when built, and falls back to the array code (with a warning) if
they disagree.

**Host emulation.** The per-coordinate and per-individual code (draws, mutation, bounds, objective
in lane order, NaN rule, opponents, threshold, tie rule) is plain C as well: compiled with
``-DISLES_HOST_EMU`` by the system C compiler (:func:`isles.algorithms.ga.cuda_host.compile_host`),
:class:`~isles.algorithms.ep.cuda_host.HostFEP` runs it on the CPU so CI checks it against NumPy without a GPU
(``tests/test_fep.py``), and the epoch kernel's block loop with it (``tests/test_fep_epoch.py``);
the block-parallel scan of ``fep_select_block`` is checked on a GPU (``tests/test_fep_gpu.py``).

Supported: CuPy; a real-genome problem with ``cuda_objective`` (``OBJ_HAS_V 1`` if constrained);
float32 or float64; ``n <= 1024``; ``q + 1 <= 4096``; ``I 2 mu < 2^31``. Anything else runs the
array code.

Files: the source, its configuration macros and limits in :mod:`isles.algorithms.ep.cuda_source`;
the host emulation (:class:`~isles.algorithms.ep.cuda_host.HostFEP`) in :mod:`isles.algorithms.ep.cuda_host`;
the CuPy plans (:class:`FusedFEP`, :class:`FEPSelection`, their makers) here.
"""

from __future__ import annotations

import logging

import numpy as np
from isles.algorithms.core.epoch_layout import EpochPaths
from isles.algorithms.core.fused_check import real_objective_error
from isles.algorithms.core.graph import GRAPH_GENERATIONS, PingPongGraph
from isles.algorithms.core.plan import TargetTracker, counter_kernels, kernels, require_supported, verified_plan
from isles.algorithms.core.population import Population
from isles.algorithms.ep.cuda_source import _rates, kernel_source, selection_unsupported_reason, unsupported_reason

log = logging.getLogger(__name__)

VERIFY_RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


# ---- the CuPy plan ------------------------------------------------------------------------------

_NAMES = ("fep_generate", "fep_wins", "fep_select", "fep_eval_rows")


def _kernels(cp, source: str):
    return kernels(cp, source, _NAMES)  # compiled once per device and source (algorithms/core/plan.py)


class FusedFEP(EpochPaths, PingPongGraph):
    """Compiled fused FEP generation for one ``(fep, ctx)`` (see the module docstring).

    Args:
        fep: the :class:`isles.algorithms.ep.fep.FEP`.
        ctx: a CuPy :class:`isles.algorithms.core.base.Context` whose problem has ``cuda_objective``.

    Raises:
        ValueError: the configuration is unsupported (:func:`unsupported_reason`).
    """

    FAMILY = "FEP"

    def __init__(self, fep, ctx):
        cp = require_supported("fused FEP", unsupported_reason(fep, ctx))

        self.cp, self.fep, self.ctx, self.params = cp, fep, ctx, fep.params
        self.problem = ctx.evaluator.problem
        self.source, self.cfg = kernel_source(fep, ctx)
        self.I, self.mu, self.n = ctx.n_islands, self.params.pop_size, int(ctx.dim)
        self.dtype = np.dtype(ctx.dtype)
        ks = _kernels(cp, self.source)
        self._k_gen, self._k_wins, self._k_sel = ks["fep_generate"], ks["fep_wins"], ks["fep_select"]
        self._k_eval = ks["fep_eval_rows"]
        self._k_set, self._k_add = counter_kernels(cp)
        self.ipb, self.sblock = self.cfg["FEP_IPB"], self.cfg["FEP_SBLOCK"]
        self.total = self.I * self.mu
        self.grid = -(-self.total // self.ipb)
        self.wblock = 128
        self.wgrid = -(-(2 * self.total) // self.wblock)
        self.hist_smem = 4 * (self.params.q + 1)
        self.tau, self.taup, self.eta_min = _rates(fep, ctx, self.dtype)
        self._keys, self._ctr = ctx.rng.keys, ctx.rng.ctr
        self._lower = cp.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self._upper = cp.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self._zero = cp.zeros((), dtype=np.int64)
        self._gen = cp.zeros((), dtype=np.int64)
        self._nan = cp.zeros((), dtype=np.int64)
        self._wins = cp.zeros((self.I, 2 * self.mu), dtype=np.int32)
        self._src = cp.zeros((self.I, self.mu), dtype=np.int32)
        self._bufs = None
        self._graph = None
        self.graph_generations = GRAPH_GENERATIONS
        self.tracker = TargetTracker(cp, ctx, self.dtype) if ctx.target is not None else None
        #: the SM-resident epoch kernel (:mod:`isles.algorithms.ep.epoch`) where it applies, else
        #: ``None`` and :attr:`epoch_reason` says why; :meth:`choose` sets :attr:`use_epoch`
        self.epoch, self.epoch_reason, self.use_epoch, self.timings = None, None, False, None
        if not getattr(self.params, "epoch", True):
            self.epoch_reason = "algorithm.epoch=false"
        else:
            from isles.algorithms.ep.epoch import EpochFEP  # noqa: PLC0415

            #: the epoch kernel's source before its block's defines (:class:`EpochFEP`)
            self.epoch_src = kernel_source(fep, ctx, tail=("fep_epoch.cu",))[0]
            self.epoch = EpochFEP(self, self.epoch_src)

    def _timing_state(self) -> dict:
        """A random population for :meth:`choose` (timing only: the run's draws are counter-based)."""
        cp = self.cp
        rs = cp.random.RandomState(20261123)
        shape = (self.I, self.mu, self.n)
        X = (self._lower + (self._upper - self._lower) * rs.random_sample(shape)).astype(self.dtype)
        f, v = self.evaluate_fv(X)
        return {
            "X": X,
            "eta": cp.full(shape, self.params.eta_init, dtype=self.dtype),
            "f": f,
            "v": v,
            "generation": 0,
            "evals": 0,
            "nan_evals": 0,
        }

    def _union(self):
        cp, I, M2, n = self.cp, self.I, 2 * self.mu, self.n
        return (
            cp.empty((I, M2, n), self.dtype),
            cp.empty((I, M2, n), self.dtype),
            cp.empty((I, M2), self.dtype),
            cp.empty((I, M2), self.dtype),
        )

    # -- launches -------------------------------------------------------------------------------
    def _generation(self, A, B, use_src, gen_dev, gen_off, nan):
        XA, EA, fA, vA = A
        XB, EB, fB, vB = B
        self._k_gen(
            (self.grid,),
            (32 * self.ipb,),
            (
                XA,
                EA,
                fA,
                vA,
                self._src,
                np.int32(use_src),
                XB,
                EB,
                fB,
                vB,
                self._keys,
                gen_dev,
                np.int64(gen_off),
                self._ctr,
                nan,
                np.int32(self.total),
                self._lower,
                self._upper,
                self.tau,
                self.taup,
                self.eta_min,
            ),
        )
        self._k_wins(
            (self.wgrid,),
            (self.wblock,),
            (fB, vB, self._wins, self._keys, gen_dev, np.int64(gen_off), self._ctr, np.int32(2 * self.total)),
        )
        self._k_sel(
            (self.I,),
            (self.sblock,),
            (self._wins, self._src, self._keys, gen_dev, np.int64(gen_off), self._ctr),
            shared_mem=self.hist_smem,
        )

    def _load(self, state, A):
        """Parents of ``state`` into the parent half of union buffer ``A``."""
        cp = self.cp
        X, E, f, v = state["X"], state["eta"], state["f"], state["v"]
        if X.shape != (self.I, self.mu, self.n) or E.shape != X.shape or f.shape != (self.I, self.mu):
            raise ValueError(
                f"fused FEP: state shapes X{X.shape} eta{E.shape} f{f.shape} do not match "
                f"(I, mu, n) = ({self.I}, {self.mu}, {self.n})"
            )
        for dst, a in zip(A, (X, E, f, v), strict=False):
            dst[:, : self.mu] = cp.asarray(a, dtype=self.dtype)

    def _finish(self, state, U, n: int, nan):
        """New state: the survivors ``src`` of union ``U``, gathered into fresh arrays."""
        union = Population(U[0], U[2], U[3], {"eta": U[1]})
        new = union.take(self._src.astype(np.int64))
        s = dict(state)
        s["X"], s["f"], s["v"], s["eta"] = new.genome, new.f, new.v, new.extras["eta"]
        s["generation"] = state["generation"] + n
        s["evals"] = state["evals"] + n * self.fep.evals_per_generation()
        s["nan_evals"] = state["nan_evals"] + nan
        return s

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate_fv(self, X):
        """``(f, v)`` of rows ``X (..., n)`` by the kernel's objective code (CuPy; no NaN rule)."""
        cp = self.cp
        A = cp.ascontiguousarray(X, dtype=self.dtype)
        rows = int(np.prod(A.shape[:-1]))
        f, v = cp.empty(rows, self.dtype), cp.empty(rows, self.dtype)
        self._k_eval((max(1, -(-rows // self.ipb)),), (32 * self.ipb,), (A, f, v, np.int32(rows)))
        return f.reshape(A.shape[:-1]), v.reshape(A.shape[:-1])

    def verify(self, n_points: int = 32) -> float:
        """Largest ``|f_kernel - f_problem| / (1 + |f_problem|)`` (and the same for ``v``) on random
        points of the box and points near its centre (one host synchronisation)."""
        return real_objective_error(
            self.cp,
            self.problem,
            self.evaluate_fv,
            self.dtype,
            bool(getattr(self.problem, "n_constraints", 0)),
            n_points,
            seed=20261123,
        )

    # -- the algorithm ----------------------------------------------------------------------------
    def step(self, state):
        """One generation (three launches, no host sync); returns a new state."""
        cp = self.cp
        A, B = self._union(), self._union()
        self._load(state, A)
        nan = cp.zeros((), dtype=np.int64)
        self._generation(A, B, 0, self._zero, int(state["generation"]), nan)
        return self._finish(state, B, 1, nan)

    def _step(self, src, dst, k):
        """One generation ``src -> dst`` (parents in ``src``'s first half) with draws of generation
        ``gen + k`` (:class:`PingPongGraph`)."""
        self._generation(src, dst, 1, self._gen, k, self._nan)

    def _tracked(self, dst):
        """The survivors ``src`` of union buffer ``dst`` (:meth:`PingPongGraph._track_target`)."""
        return dst[2], dst[3], self.mu, 2 * self.mu, self._src

    def _buffers(self):
        if self._bufs is None:
            self._bufs = (self._union(), self._union())
        return self._bufs

    def _run_generations(self, state, n: int):
        """``n >= 1`` generations by the per-generation kernels (graph replays); a new state."""
        bufs = self._buffers()
        # generation 0 of this call: parents from the state (buffer 1) -> union in buffer 0
        self._load(state, bufs[1])
        self._k_set((1,), (1,), (self._gen, np.int64(state["generation"])))
        self._nan.fill(0)
        if self.tracker is not None:
            self.tracker.load(state)
        self._generation(bufs[1], bufs[0], 0, self._gen, 0, self._nan)
        self._track_target(bufs[0], 0)
        self._k_add((1,), (1,), (self._gen, np.int64(1)))
        s = self._finish(state, self._advance(n - 1)[0], n, self._nan)
        if self.tracker is not None:  # tracked after every generation, inside the graph
            s["hit_generation"] = self.tracker.hit.copy()
        return s


class FEPSelection:
    """The fused tournament (``fep_wins``) and selection without sorting (``fep_select``) for a
    problem evaluated as array code: the same survivors as
    :func:`isles.algorithms.ep.fep.tournament_wins` + :func:`isles.algorithms.ep.fep.select_survivors`
    (same draws and rule), in two launches instead of some forty array operations. Neither kernel
    evaluates anything: the module is compiled with the sphere's ``cuda_objective`` as a
    placeholder in the objective slot. No host synchronisation; capturable.

    Raises:
        ValueError: :func:`selection_unsupported_reason` gives a reason.
    """

    def __init__(self, fep, ctx):
        cp = require_supported("fused FEP selection", selection_unsupported_reason(fep, ctx))

        from isles.problems.benchmarks import Sphere  # noqa: PLC0415

        self.cp, self.I, self.mu = cp, ctx.n_islands, fep.params.pop_size
        source, cfg = kernel_source(fep, ctx, objective=Sphere(int(ctx.dim)).cuda_objective)
        ks = _kernels(cp, source)
        self._k_wins, self._k_sel = ks["fep_wins"], ks["fep_select"]
        self.sblock, self.hist_smem = cfg["FEP_SBLOCK"], 4 * (fep.params.q + 1)
        self.wblock = 128
        self.wgrid = -(-(2 * self.I * self.mu) // self.wblock)
        self._keys, self._ctr = ctx.rng.keys, ctx.rng.ctr
        self._zero = cp.zeros((), dtype=np.int64)
        self.dtype = np.dtype(ctx.dtype)

    def survivors(self, fu, vu, generation: int):
        """Union positions ``src (I, mu)`` int64 of the survivors of union ``fu, vu (I, 2 mu)`` in
        generation ``generation`` (host int; draws at ``generation + rng.ctr``)."""
        cp = self.cp
        fu = cp.ascontiguousarray(fu, dtype=self.dtype)
        vu = cp.ascontiguousarray(vu, dtype=self.dtype)
        wins = cp.empty((self.I, 2 * self.mu), dtype=np.int32)
        src = cp.empty((self.I, self.mu), dtype=np.int32)
        g = np.int64(generation)
        self._k_wins(
            (self.wgrid,),
            (self.wblock,),
            (fu, vu, wins, self._keys, self._zero, g, self._ctr, np.int32(2 * self.I * self.mu)),
        )
        self._k_sel(
            (self.I,), (self.sblock,), (wins, src, self._keys, self._zero, g, self._ctr), shared_mem=self.hist_smem
        )
        return src.astype(np.int64)


def make_selection(fep, ctx):
    """A :class:`FEPSelection` for ``(fep, ctx)``, or ``None`` where it does not apply (logged)."""
    reason = selection_unsupported_reason(fep, ctx)
    if reason is not None:
        log.info("FEP: array-code selection (%s)", reason)
        return None
    return FEPSelection(fep, ctx)


def make_plan(fep, ctx):
    """A verified :class:`FusedFEP` for ``(fep, ctx)``, or ``None`` where it does not apply.

    Builds (compiles, cached by source) and self-checks the kernel's objective
    (:meth:`FusedFEP.verify`, one host synchronisation), then times the per-generation and the
    epoch kernels and keeps the faster (:meth:`FusedFEP.choose`). Returns ``None`` with a log line when
    unsupported, and with a ``RuntimeWarning`` when the check fails.
    """
    return verified_plan(
        "FEP",
        "array",
        unsupported_reason(fep, ctx),
        lambda: FusedFEP(fep, ctx),
        VERIFY_RTOL,
        lambda p: f"n={p.n}, mu={p.mu}, q={p.params.q}",
    )
