"""Fused pair evaluation of the co-evolutionary DE: payoffs and their max/min in one kernel.

The hot loop of CDE (seed 000 section 5) is the fitness of one population against the whole
other: ``f1(x_i) = max_j L(x_i, y_j)`` (x phase) or ``-min_i L(x_i, y_j)`` (y phase). The generic
path (:meth:`isles.algorithms.coevolution.cde.CDE.pair_fitness`) writes the ``(I, Nx, Ny)`` payoff
matrix (and, for the augmented Lagrangian, an ``(I, Nx, Ny, m)`` temporary) to global memory and
reduces it in a second pass. Here one kernel over islands x outputs computes each payoff in
registers and keeps the running max (or min); no pair matrix is ever written.

**Pair contract** (a min-max problem opts in; kernels never switch on a problem's name):

* ``pair_x(X (..., Nx, Dx)) -> TX (..., Nx, KX)`` and ``pair_y(Y (..., Ny, Dy)) -> TY (..., Ny,
  KY)``: per-individual terms computed by array code, once per population and generation (the
  augmented Lagrangian: ``(f, g_1/s_1, .., g_m/s_m)`` and ``mu``; P1: ``sum x^2`` and ``sum y^2``);
* ``pair_cuda``: CUDA source, included after ``objective.cuh`` of the CUDA library
  (:mod:`isles.algorithms.core.cuda_lib`, so it may use ``T``, ``ISLES_DEV``, ``add_rn`` ...),
  defining ``#define PAY_KX n``, ``#define PAY_KY n`` and
  ``ISLES_DEV T pay_pair(const T* tx, const T* ty)``: the payoff of one pair from its terms.
  Instance data (``r``) is baked into the text. It is valid C under ``-DISLES_HOST_EMU``.

Semantics equal the generic path's: NaN payoffs count as ``+inf`` fitness and are counted; the
value agrees with the array code to rounding (the kernel sums the penalty terms left to right;
NumPy may sum in another order). :class:`FusedPairs` checks the kernel against the generic path
on the populations of the first call and refuses to fuse (with a warning) where they disagree.

**Host emulation** (CI without a GPU): :func:`host_pairs` compiles the same source with
``gcc -DISLES_HOST_EMU`` and runs the kernel body for every thread index in a C loop.
"""

from __future__ import annotations

import ctypes
import warnings

import numpy as np
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.plan import module
from isles.problems.cuda_check import compile_c, compiler  # noqa: F401  (compiler: tests)

BLOCK = 128


def kernel_source(problem, dtype) -> str:
    """Full source: ``IS_F32``, ``objective.cuh``, ``problem.pair_cuda`` and ``cde_pairs.cu``
    (:mod:`isles.algorithms.core.cuda_lib`)."""
    f32 = np.dtype(dtype) == np.float32
    return source(f"#define IS_F32 {int(f32)}\n", "objective.cuh", problem.pair_cuda, "cde_pairs.cu")


def supports(problem) -> bool:
    """Whether ``problem`` carries the pair contract (``pair_cuda``, ``pair_x``, ``pair_y``)."""
    return all(getattr(problem, a, None) is not None for a in ("pair_cuda", "pair_x", "pair_y"))


class FusedPairs:
    """CuPy launcher of the fused pair reduction for one problem and dtype.

    Args:
        cp: the ``cupy`` module.
        problem: a min-max problem with the pair contract (:func:`supports`).
        dtype: float32 or float64.
    """

    def __init__(self, cp, problem, dtype):
        self.cp, self.problem, self.dtype = cp, problem, np.dtype(dtype)
        opts = ("--std=c++14", "-fmad=false")
        # compiled once per device, source and options (algorithms/core/plan.py)
        self.kernel = module(cp, kernel_source(problem, dtype), opts).get_function("isles_pairs")

    def __call__(self, X, Y, role: str, TX=None):
        """Fitness of ``role`` (``"x"``: ``(I, Nx)``, ``"y"``: ``(I, Ny)``) and the 0-d NaN count,
        as :meth:`isles.algorithms.coevolution.cde.CDE.pair_fitness`; ``TX``: ``pair_x(X)`` if already
        computed (a frozen P1). No host synchronisation."""
        cp, p = self.cp, self.problem
        TX = cp.ascontiguousarray(p.pair_x(X) if TX is None else TX, dtype=self.dtype)
        TY = cp.ascontiguousarray(p.pair_y(Y), dtype=self.dtype)
        I, nx, ny = X.shape[0], X.shape[1], Y.shape[1]
        nout = nx if role == "x" else ny
        out = cp.empty((I, nout), dtype=self.dtype)
        nan = cp.zeros((), dtype=np.uint64)
        total = I * nout
        grid = ((total + BLOCK - 1) // BLOCK,)
        self.kernel(
            grid,
            (BLOCK,),
            (TX, TY, out, nan, np.int64(total), np.int32(nx), np.int32(ny), np.int32(0 if role == "x" else 1)),
        )
        return out, nan.astype(np.int64)


def make_fused(cp, problem, dtype, X, Y, generic):
    """A :class:`FusedPairs` checked against ``generic(X, Y, role)`` on ``X, Y``, or ``None``
    (no pair contract, or a disagreement beyond rounding: warned, the generic path runs)."""
    if not supports(problem):
        return None
    fused = FusedPairs(cp, problem, dtype)
    rtol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    for role in ("x", "y"):
        a = cp.asnumpy(fused(X, Y, role)[0])
        b = cp.asnumpy(generic(X, Y, role)[0])
        if not np.allclose(a, b, rtol=rtol, atol=rtol * (1.0 + np.abs(b[np.isfinite(b)]).max(initial=0.0))):
            warnings.warn(
                f"{type(problem).__name__}.pair_cuda disagrees with payoff(); CDE runs the generic path", stacklevel=2
            )
            return None
    return fused


# -- host emulation -------------------------------------------------------------------------------
def host_pairs(problem, dtype=np.float64):
    """The kernel compiled as C (``-DISLES_HOST_EMU``): a function ``(X, Y, role) -> (fit, n_nan)``
    on NumPy arrays with :class:`FusedPairs`' semantics, running every thread index in a loop.

    Raises:
        RuntimeError: no C compiler, or the source does not compile.
    """
    src = "#define ISLES_HOST_EMU 1\n" + kernel_source(problem, dtype)
    fn = compile_c(src).isles_pairs
    T = ctypes.c_float if np.dtype(dtype) == np.float32 else ctypes.c_double
    P = ctypes.POINTER(T)
    fn.argtypes = [
        P,
        P,
        P,
        ctypes.POINTER(ctypes.c_ulonglong),
        ctypes.c_longlong,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
    ]

    def run(X, Y, role: str):
        TX = np.ascontiguousarray(problem.pair_x(X), dtype=dtype)
        TY = np.ascontiguousarray(problem.pair_y(Y), dtype=dtype)
        I, nx, ny = X.shape[0], X.shape[1], Y.shape[1]
        out = np.empty((I, nx if role == "x" else ny), dtype=dtype)
        nan = ctypes.c_ulonglong(0)
        fn(
            TX.ctypes.data_as(P),
            TY.ctypes.data_as(P),
            out.ctypes.data_as(P),
            ctypes.byref(nan),
            out.size,
            nx,
            ny,
            0 if role == "x" else 1,
        )
        return out, np.int64(nan.value)

    return run
