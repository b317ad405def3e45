"""The epoch kernel of the co-evolutionary DE: whole cycles of every island in one launch.

A CDE cycle (seed 000 Algorithm 1 lines 3-12, :class:`isles.algorithms.coevolution.cde.CDE`) is
a refresh of x, ``gens_x`` DE generations of x, a refresh of y and ``gens_y`` generations of y:
on the array path, some hundred small kernels per generation, replayed from a CUDA graph and
bound by launches. Here **one thread block per island** runs the whole cycle (or ``n`` cycles)
in one launch (``algorithms/core/cuda/cde_epoch.cu``), synchronising within the block between
steps. The threads cover the work, not one individual each: the trial coordinates
(``N x D``), the rows' terms, and the pair payoffs (``Nx x Ny``, each output's max/min split over
``CDE_NT / N`` threads and combined). The active population and its trial rows sit in shared
memory when they fit (:func:`smem_bytes`), else in global memory (the same code with other
pointers; L2 keeps them close).

**What it needs of the problem**: the pair contract (``pair_cuda``) and the term contract
(``pair_terms_cuda``, :class:`isles.problems.minmax.MinMaxProblem`): the kernel computes each
row's terms itself. :class:`isles.problems.minmax.SaddleP1` writes it; an
:class:`isles.problems.minmax.AugmentedLagrangian` builds it from the wrapped problem's per-row
code (``cuda_row``, :class:`isles.problems.base.Problem`; g01, g07, g09, g10 and the spring carry
it). Anything else (a user's problem without ``cuda_row``, best/1, exp crossover) runs the
graph path of :mod:`isles.algorithms.core.graph`, and :meth:`CDE.gpu_path` says which ran.

**Same numbers as the array path**: the DE's own decisions and trial coordinates
(``decide_n``/``trial_coord_n`` of ``de.cu``, bit for bit) at CDE's draw counters (generation
``k`` of cycle ``c``: ``1 + c + k * 2**24`` plus the generator's device counter, so a captured
launch replays), NaN payoffs as ``+inf`` and counted, greedy selection under Deb's rules, the
archive under ``argbest``/``better``. The terms are summed left to right, so values agree with
NumPy's (pairwise) sums to rounding. :func:`make_epoch` checks the terms against the problem's
array code before use and refuses the kernel (with a warning) where they differ.

**Host emulation** (CI without a GPU): the block's work is written as strided loops between
``BLOCK_SYNC()``; :func:`host_epoch` compiles the same source as C (``-DISLES_HOST_EMU``) and runs
each block with one thread.
"""

from __future__ import annotations

import ctypes
import logging
import re
import warnings

import numpy as np
from isles.algorithms.coevolution.counts import COUNTER_STRIDE, cycle_evaluations, cycle_payoffs
from isles.algorithms.core import cuda_lib
from isles.algorithms.core.cuda_lib import defines as c_defines
from isles.algorithms.core.cuda_lib import draw_ids, source
from isles.algorithms.core.threads import host_threads
from isles.algorithms.de.crossover import DRAW_CROSS, DRAW_START
from isles.algorithms.de.cuda_source import BOUND_IDS, XOVER_IDS, _cr_args
from isles.algorithms.de.de import DRAW_BOUND, DRAW_INDEX

#: shared memory one block may opt in to (H100/H200: 227 KiB); rows beyond it stay in global memory
SMEM_MAX = 227 * 1024
DECISIONS_BYTES = 40  # sizeof(Decisions) in de.cu: 5 ints, padding, 2 u64
log = logging.getLogger(__name__)

CHECK_RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-9}


def unsupported_reason(params, problem) -> str | None:
    """Why the epoch kernel cannot run this configuration, or ``None``.

    Args:
        params: :class:`isles.algorithms.coevolution.cde.CDEParams`; problem: the min-max problem.
    """
    if params.strategy != "rand/1":
        return f"strategy {params.strategy} (the epoch kernel runs rand/1)"
    if params.crossover not in XOVER_IDS:
        return f"crossover {params.crossover} (the epoch kernel runs {'|'.join(XOVER_IDS)})"
    for attr in ("pair_cuda", "pair_terms_cuda"):
        if getattr(problem, attr, None) is None:
            return f"problem {getattr(problem, 'name', problem)!r} has no {attr}"
    true = re.search(r"#define\s+PAY_TRUE\s+1\b", problem.pair_terms_cuda) is not None
    if bool(getattr(problem, "objective_known", False)) != true:
        return "pair_terms_cuda: PAY_TRUE differs from objective_known"
    return None


def _align(n: int) -> int:
    return (int(n) + 15) & ~15


def layout(params, problem, dtype) -> dict:
    """The kernel's configuration: sizes, threads per block and where the rows live.

    Returns:
        ``{"nx", "ny", "dx", "dy", "kx", "ky", "nt", "smem_rows", "smem"}``: ``nt`` threads per
        block (128..1024, about one per trial coordinate), ``smem_rows`` whether the rows fit in
        shared memory, ``smem`` the bytes of dynamic shared memory (mirrors ``cde_carve``).
    """
    t = np.dtype(dtype).itemsize
    nx, ny = params.pop_size, params.pop_size_y
    dx, dy = int(problem.dim), int(problem.y_dim)
    kx, ky = _pay_k(problem)
    work = max(nx * dx, ny * dy, nx * ny * max(kx, ky) // 4)  # trial coordinates, pair terms
    nt = 128
    while nt < 1024 and nt < work // 4:
        nt *= 2
    kxp, kyp = kx | 1, ky | 1  # odd strides of the terms rows in shared memory (cde_epoch.cu)
    nmax, kmax, rmax = max(nx, ny), max(kxp, kyp), max(nx * dx, ny * dy)
    part = max(nt, nmax)
    small = sum(
        _align(b)
        for b in (
            t * nx * kxp,
            t * ny * kyp,
            t * nmax * kmax,
            t * nx,
            t * ny,
            t * nmax,
            t * part,
            t * nx,
            t * nx,
            t * dx,
            t * dx,
            t * dy,
            t * dy,
            t * dx,
            t * 2,
            4 * part,
            4 * nmax,
            16,
            DECISIONS_BYTES * nmax,
        )
    )
    rows = 2 * _align(t * rmax)
    smem_rows = small + rows <= SMEM_MAX
    return {
        "nx": nx,
        "ny": ny,
        "dx": dx,
        "dy": dy,
        "kx": kx,
        "ky": ky,
        "nt": nt,
        "smem_rows": smem_rows,
        "smem": small + (rows if smem_rows else 0),
        "rmax": rmax,
    }


def _pay_k(problem) -> tuple[int, int]:
    src = problem.pair_cuda
    kx = re.search(r"#define\s+PAY_KX\s+(\d+)", src)
    ky = re.search(r"#define\s+PAY_KY\s+(\d+)", src)
    if kx is None or ky is None:
        raise ValueError(f"{type(problem).__name__}.pair_cuda lacks #define PAY_KX/PAY_KY")
    return int(kx.group(1)), int(ky.group(1))


def kernel_source(params, problem, dtype, lay: dict) -> str:
    """Full source: configuration, draw ids, ``objective.cuh``, ``de.cu``, the problem's
    ``pair_cuda`` and ``pair_terms_cuda``, ``cde_epoch.cu`` (:mod:`isles.algorithms.core.cuda_lib`)."""
    d = {
        "IS_F32": int(np.dtype(dtype) == np.float32),
        "XOVER": XOVER_IDS[params.crossover],
        "BOUND": BOUND_IDS[params.bound_handling],
        "PAY_DX": lay["dx"],
        "PAY_DY": lay["dy"],
        "CDE_NX": lay["nx"],
        "CDE_NY": lay["ny"],
        "CDE_GX": params.gens_x,
        "CDE_GY": params.gens_y,
        "CDE_NT": lay["nt"],
        "CDE_SMEM_ROWS": int(lay["smem_rows"]),
        "CDE_STRIDE": f"{COUNTER_STRIDE}ll",
    }
    draws = draw_ids(DRAW_INDEX=DRAW_INDEX, DRAW_START=DRAW_START, DRAW_CROSS=DRAW_CROSS, DRAW_BOUND=DRAW_BOUND)
    return source(
        c_defines(d) + draws, "objective.cuh", "de.cu", problem.pair_cuda, problem.pair_terms_cuda, "cde_epoch.cu"
    )


class EpochCDE:
    """CuPy launcher of the epoch kernel for one CDE, problem, context.

    Args:
        algo: the :class:`isles.algorithms.coevolution.cde.CDE`; ctx: a CuPy
            :class:`isles.algorithms.core.base.Context`.

    Raises:
        ValueError: :func:`unsupported_reason` gives a reason.
    """

    def __init__(self, algo, ctx):
        import cupy as cp  # noqa: PLC0415

        p, prob = algo.params, algo.problem_of(ctx)
        why = unsupported_reason(p, prob)
        if why is not None:
            raise ValueError(f"CDE epoch kernel: {why}")
        self.cp, self.params, self.problem = cp, p, prob
        self.dtype = np.dtype(ctx.dtype)
        self.lay = layout(p, prob, self.dtype)
        self.src = kernel_source(p, prob, self.dtype, self.lay)
        from isles.algorithms.core.plan import module  # noqa: PLC0415

        mod = module(cp, self.src, ("--std=c++14", "-fmad=false"))
        self.kernel = mod.get_function("cde_epoch")
        self.terms_kernel = mod.get_function("cde_terms")
        if self.lay["smem"] > 48 * 1024:
            self.kernel.max_dynamic_shared_size_bytes = self.lay["smem"]
        self.I = ctx.n_islands
        self.keys, self.ctr = ctx.rng.keys, ctx.rng.ctr
        c = lambda a: cp.ascontiguousarray(cp.asarray(a, dtype=self.dtype))  # noqa: E731
        self.lox, self.upx = c(prob.lower), c(prob.upper)
        self.loy, self.upy = c(prob.y_lower), c(prob.y_upper)
        self.F = self.dtype.type(p.F)
        self.CR, self.log_cr, self.cr_case = _cr_args(p, self.dtype)
        self.scratch = cp.empty((1,) if self.lay["smem_rows"] else (self.I, self.lay["rmax"]), dtype=self.dtype)
        self.dummy = cp.zeros((self.I, max(1, self.lay["dx"])), dtype=self.dtype)
        self.has_true = bool(getattr(prob, "objective_known", False))

    def path(self) -> str:
        """``"epoch kernel (shared memory)"`` or ``"epoch kernel (global memory)"``."""
        return "epoch kernel (" + ("shared" if self.lay["smem_rows"] else "global") + " memory)"

    def terms(self, X, Y):
        """``(TX (I, Nx, KX), TY (I, Ny, KY), TF, TV)``: the kernel's terms of ``X``, ``Y`` and the raw
        true objective and violation of the x rows (the self-check)."""
        cp = self.cp
        X, Y = cp.ascontiguousarray(X, dtype=self.dtype), cp.ascontiguousarray(Y, dtype=self.dtype)
        lay = self.lay
        nx, ny = X.size // lay["dx"], Y.size // lay["dy"]
        TX = cp.zeros(X.shape[:-1] + (lay["kx"],), dtype=self.dtype)
        TY = cp.zeros(Y.shape[:-1] + (lay["ky"],), dtype=self.dtype)
        TF = cp.zeros(X.shape[:-1], dtype=self.dtype)
        TV = cp.zeros(X.shape[:-1], dtype=self.dtype)
        n = max(nx, ny)
        self.terms_kernel(((n + 127) // 128,), (128,), (X, np.int64(nx), Y, np.int64(ny), TX, TY, TF, TV))
        return TX, TY, TF, TV

    def step(self, state: dict, n_cycles: int = 1) -> dict:
        """``n_cycles`` cycles of every island in one launch; a new state (as ``n_cycles`` calls of
        :meth:`CDE.step`). No host synchronisation; capturable."""
        cp, lay = self.cp, self.lay
        s = dict(state)
        c = lambda a: cp.array(a, dtype=self.dtype, order="C", copy=True)  # noqa: E731
        X, Y, f, fy = c(state["X"]), c(state["Y"]), c(state["f"]), c(state["fy"])
        if self.has_true:
            bx, bf, bv = c(state["bx"]), c(state["bf"]), c(state["bv"])
        else:
            bx = bf = bv = self.dummy
        nan = cp.zeros((), dtype=np.uint64)
        self.kernel(
            (self.I,),
            (lay["nt"],),
            (
                X,
                f,
                Y,
                fy,
                bx,
                bf,
                bv,
                self.scratch,
                self.keys,
                self.lox,
                self.upx,
                self.loy,
                self.upy,
                np.int64(state["generation"]),
                self.ctr,
                np.int32(n_cycles),
                nan,
                self.F,
                self.CR,
                self.log_cr,
                self.cr_case,
            ),
            shared_mem=lay["smem"],
        )
        s["X"], s["Y"], s["f"], s["fy"] = X, Y, f, fy
        if self.has_true:
            s["bx"], s["bf"], s["bv"] = bx, bf, bv
        p = self.params
        s["generation"] = state["generation"] + n_cycles
        s["evals"] = state["evals"] + n_cycles * cycle_evaluations(p)
        s["pair_evals"] = state.get("pair_evals", 0) + n_cycles * cycle_payoffs(p)
        s["nan_evals"] = state["nan_evals"] + nan.astype(np.int64)
        return s


def terms_error(problem, kernel_terms, X, Y, xp) -> float:
    """Largest ``|a - b| / (1 + |b|)`` between the kernel's terms of ``X, Y`` (``kernel_terms(X, Y)
    -> (TX, TY, TF, TV)``) and the problem's array code (``pair_x``, ``pair_y``, and the objective
    and total violation where ``objective_known``); NaN counts as infinite."""
    from isles.problems.constraints import equalities, total_violation  # noqa: PLC0415

    TX, TY, TF, TV = kernel_terms(X, Y)
    pairs = [(TX, problem.pair_x(X)), (TY, problem.pair_y(Y))]
    if getattr(problem, "objective_known", False):
        f = problem.objective(X)
        g = problem.constraints(X) if problem.n_constraints else xp.zeros(X.shape[:-1] + (0,), dtype=X.dtype)
        scale = xp.asarray(problem.constraint_scale, dtype=X.dtype) if problem.n_constraints else None
        pairs += [(TF, f), (TV, total_violation(xp.asarray(g, dtype=X.dtype), scale, *equalities(problem)))]
    err = 0.0
    for a, b in pairs:
        a = xp.asarray(a, dtype=xp.float64)
        b = xp.asarray(b, dtype=xp.float64)
        e = xp.abs(a - b) / (1.0 + xp.abs(b))
        e = xp.where(xp.isnan(a) & xp.isnan(b), 0.0, e)
        err = max(err, float(xp.nan_to_num(e, nan=np.inf).max()))
    return err


def _check_points(problem, dtype, xp, seed: int = 7, n: int = 64):
    rs = np.random.default_rng(seed)
    X = problem.lower + rs.random((n, problem.dim)) * (problem.upper - problem.lower)
    Y = problem.y_lower + rs.random((n, problem.y_dim)) * (problem.y_upper - problem.y_lower)
    return xp.asarray(X, dtype=dtype), xp.asarray(Y, dtype=dtype)


def make_epoch(algo, ctx):
    """An :class:`EpochCDE` for ``algo`` on ``ctx``, checked against the problem's array code, or
    ``None`` (unsupported configuration; or terms that disagree: warned, the graph path runs)."""
    prob = algo.problem_of(ctx)
    if unsupported_reason(algo.params, prob) is not None:
        return None
    plan = EpochCDE(algo, ctx)
    X, Y = _check_points(prob, plan.dtype, plan.cp)
    err = terms_error(prob, plan.terms, X, Y, plan.cp)
    if not err <= CHECK_RTOL[plan.dtype]:
        warnings.warn(
            f"{type(prob).__name__}: pair_terms_cuda disagrees with the array code (relative error "
            f"{err:.3g}); CDE runs the graph path",
            stacklevel=2,
        )
        return None
    return plan


# -- host emulation ----------------------------------------------------------------------------------
def host_epoch(params, problem, dtype=np.float64):
    """The epoch kernel compiled as C (``-DISLES_HOST_EMU``), one thread per block: an object with
    ``step(state, keys, n_cycles=1) -> state`` on NumPy states (as :meth:`EpochCDE.step`, with the
    islands' RNG ``keys (I,)`` uint64 and device counter 0), ``terms(X, Y)``, and ``smem_bytes``
    (``cde_carve``'s count, which :func:`layout` must equal).

    Raises:
        ValueError: :func:`unsupported_reason` gives a reason.
        RuntimeError: no C compiler, or the source does not compile.
    """
    from isles.algorithms.core.host_build import compile_host  # noqa: PLC0415

    why = unsupported_reason(params, problem)
    if why is not None:
        raise ValueError(f"CDE epoch kernel: {why}")
    dtype = np.dtype(dtype)
    lay = layout(params, problem, dtype)
    text = kernel_source(params, problem, dtype, lay) + cuda_lib.read("cde_epoch_threads.cuh")
    lib = compile_host(text, ("-O3",), openmp=True, plain_arith=True)
    return _HostEpoch(lib, params, problem, dtype, lay)


def host_run(algo, ctx):
    """On NumPy, ``(state, n) -> state`` running ``n`` cycles of every island in the epoch kernel's
    host build (:func:`host_epoch`) where ``algorithm.host_kernel`` allows it and it applies
    (:func:`unsupported_reason`; the build's pair terms checked against the problem's array code
    as on the GPU), else ``None`` with the one log line
    (:func:`isles.algorithms.core.host_build.host_plan`). Without a stop target the ``n`` cycles
    are one call; with one, a call per cycle, the target tracked after each (as :meth:`CDE.run`)."""
    from isles.algorithms.core import host_build  # noqa: PLC0415

    prob = algo.problem_of(ctx)

    def build():
        host = host_epoch(algo.params, prob, ctx.dtype)
        err = terms_error(prob, host.terms, *_check_points(prob, host.dtype, np), np)
        if not err <= CHECK_RTOL[host.dtype]:
            raise ValueError(f"pair_terms_cuda disagrees with the array code (relative error {err:.3g})")
        host.threads = host_threads(ctx.n_islands)
        return host

    host = host_build.host_plan(algo, ctx, "CDE", lambda: unsupported_reason(algo.params, prob), build, log)
    if host is None:
        return None

    def run(state, n):
        if n <= 0:
            return state
        if ctx.target is None:
            return host.step(state, ctx.rng.keys, n)
        for _ in range(n):
            state = algo.track_target(ctx, host.step(state, ctx.rng.keys, 1))
        return state

    return run


class _HostEpoch:
    def __init__(self, lib, params, problem, dtype, lay):
        self.lib, self.params, self.problem, self.dtype, self.lay = lib, params, problem, dtype, lay
        self.T = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        lib.cde_smem_bytes.restype = ctypes.c_ulonglong
        self.smem_bytes = int(lib.cde_smem_bytes())
        #: OpenMP threads over the islands (the results do not depend on it; host_run sets the cores)
        self.threads = 1

    def _p(self, a):
        return a.ctypes.data_as(ctypes.c_void_p)

    def terms(self, X, Y):
        lay, dt = self.lay, self.dtype
        X, Y = np.ascontiguousarray(X, dtype=dt), np.ascontiguousarray(Y, dtype=dt)
        nx, ny = X.size // lay["dx"], Y.size // lay["dy"]
        TX = np.zeros(X.shape[:-1] + (lay["kx"],), dtype=dt)
        TY = np.zeros(Y.shape[:-1] + (lay["ky"],), dtype=dt)
        TF, TV = np.zeros(X.shape[:-1], dtype=dt), np.zeros(X.shape[:-1], dtype=dt)
        self.lib.cde_terms_host(
            self._p(X),
            ctypes.c_longlong(nx),
            self._p(Y),
            ctypes.c_longlong(ny),
            self._p(TX),
            self._p(TY),
            self._p(TF),
            self._p(TV),
        )
        return TX, TY, TF, TV

    def step(self, state: dict, keys, n_cycles: int = 1) -> dict:
        lay, dt, p, prob = self.lay, self.dtype, self.params, self.problem
        c = lambda a: np.array(a, dtype=dt, order="C", copy=True)  # noqa: E731
        X, Y, f, fy = c(state["X"]), c(state["Y"]), c(state["f"]), c(state["fy"])
        has_true = "bx" in state
        I = X.shape[0]
        bx, bf, bv = (
            (c(state["bx"]), c(state["bf"]), c(state["bv"]))
            if has_true
            else (np.zeros((I, lay["dx"]), dt), np.zeros(I, dt), np.zeros(I, dt))
        )
        scratch = np.zeros((I, lay["rmax"]), dtype=dt)
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        bounds = [np.ascontiguousarray(b, dtype=dt) for b in (prob.lower, prob.upper, prob.y_lower, prob.y_upper)]
        ctr = np.zeros(1, dtype=np.uint64)
        nan = np.zeros(1, dtype=np.uint64)
        cr, log_cr, cr_case = _cr_args(p, dt)
        rc = self.lib.cde_epoch_host_threads(
            ctypes.c_int(int(self.threads)),
            ctypes.c_int(I),
            ctypes.c_ulonglong(self.smem_bytes),
            self._p(X),
            self._p(f),
            self._p(Y),
            self._p(fy),
            self._p(bx),
            self._p(bf),
            self._p(bv),
            self._p(scratch),
            self._p(keys),
            *[self._p(b) for b in bounds],
            ctypes.c_longlong(state["generation"]),
            self._p(ctr),
            ctypes.c_int(n_cycles),
            self._p(nan),
            self.T(p.F),
            self.T(cr),
            ctypes.c_double(log_cr),
            ctypes.c_int(int(cr_case)),
        )
        if rc != 0:
            raise MemoryError("CDE epoch kernel (host): no memory for an island's block")
        s = dict(state)
        s["X"], s["Y"], s["f"], s["fy"] = X, Y, f, fy
        if has_true:
            s["bx"], s["bf"], s["bv"] = bx, bf, bv
        s["generation"] = state["generation"] + n_cycles
        s["evals"] = state["evals"] + n_cycles * cycle_evaluations(p)
        s["pair_evals"] = state.get("pair_evals", 0) + n_cycles * cycle_payoffs(p)
        s["nan_evals"] = state["nan_evals"] + np.int64(nan[0])
        return s
