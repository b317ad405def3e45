"""The compiled CPU path of every family: its CUDA kernels' host build as the NumPy runs' engine.

Each family's kernels compile as C under ``-DISLES_HOST_EMU`` (one thread per block, the block's
loops run in order): DE's, the GA's, FEP's and CDE's epoch kernels, L-SHADE's and jSO's, and
EPSO's move and bests kernels. The tests check each against its NumPy twin bit for bit. On a
NumPy context, ``algorithm.host_kernel`` decides whether a run takes that host build:

========  =================================================================================
value     NumPy runs
========  =================================================================================
``auto``  (default) the host build where it applies (the family's conditions, e.g. a problem
          with a ``cuda_objective``, and a C compiler), else the NumPy array code with one
          INFO log line saying why
``true``  the same, the fallback logged as a warning
``false`` the NumPy array code (the reference twin)
========  =================================================================================

One mechanism for every family (:func:`host_plan`): the family's reason it does not apply, the
compiler's presence (:func:`isles.problems.cuda_check.compiler`), the build (compiled by
:func:`compile_host`: :func:`isles.problems.cuda_check.compile_c`, cached for the process and on
disk, keyed by compiler, flags and source), one plan per ``(algorithm, context)``, and the one
fallback line. A compiler that is missing or fails never fails a run.
"""

from __future__ import annotations

import ctypes
import logging
import weakref

import numpy as np

__all__ = ["HOST_KERNEL_VALUES", "check_host_kernel", "compile_host", "host_plan", "no_compiler_reason"]

#: the values of ``algorithm.host_kernel``
HOST_KERNEL_VALUES = ("auto", True, False)

_PLANS: dict = {}
#: host plans kept (a run uses one per island group and family; an evicted one is rebuilt from the
#: compiled library, which stays cached)
PLANS_KEPT = 16


def check_host_kernel(value, field: str = "algorithm.host_kernel"):
    """``value`` of ``algorithm.host_kernel`` checked: ``"auto"``, ``True`` or ``False``.

    Raises:
        ValueError: anything else, one line naming ``field`` and the allowed values."""
    if isinstance(value, bool) or (isinstance(value, str) and value == "auto"):
        return value
    raise ValueError(f"{field}={value}: allowed values are auto|true|false")


#: host only, inserted after ``arith.cuh`` (:func:`compile_host` with ``plain_arith``): the
#: separately rounded operations as plain C where there is no excess precision (FLT_EVAL_METHOD 0)
#: and, with HOST_FLAGS' ``-ffp-contract=off``, no contraction: each rounded once to its type, the
#: value of ``arith.cuh``'s volatile store and load, without them (L-SHADE's ``lshade_epoch.cu``
#: does the same for its own operations). The GPU's text is unchanged.
PLAIN_ARITH = """
#include <float.h>
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
static inline double isles_plain_dadd(double a, double b) { return a + b; }
static inline double isles_plain_dsub(double a, double b) { return a - b; }
static inline double isles_plain_dmul(double a, double b) { return a * b; }
static inline double isles_plain_ddiv(double a, double b) { return a / b; }
static inline T isles_plain_add(T a, T b) { return a + b; }
static inline T isles_plain_sub(T a, T b) { return a - b; }
static inline T isles_plain_mul(T a, T b) { return a * b; }
static inline T isles_plain_div(T a, T b) { return a / b; }
#define dadd_rn(a, b) isles_plain_dadd((a), (b))
#define dsub_rn(a, b) isles_plain_dsub((a), (b))
#define dmul_rn(a, b) isles_plain_dmul((a), (b))
#define ddiv_rn(a, b) isles_plain_ddiv((a), (b))
#define add_rn(a, b) isles_plain_add((a), (b))
#define sub_rn(a, b) isles_plain_sub((a), (b))
#define mul_rn(a, b) isles_plain_mul((a), (b))
#define div_rn(a, b) isles_plain_div((a), (b))
#endif
"""
_ARITH_END = "#endif  // ISLES_ARITH_CUH\n"


def compile_host(source: str, flags: tuple = (), openmp: bool = False, plain_arith: bool = False):
    """``source`` compiled as C with ``-DISLES_HOST_EMU`` into a loaded shared library, through the
    one host compiler invocation (:func:`isles.problems.cuda_check.compile_c`: ``-O2
    -ffp-contract=off`` and ``flags``; cached for the process and on disk). ``openmp``: with
    ``-fopenmp`` where the compiler takes it, else without (the pragmas ignored: one thread).
    ``plain_arith``: :data:`PLAIN_ARITH` after ``arith.cuh`` (the same values, faster).

    Raises:
        RuntimeError: no C compiler, or the compilation failed (its messages included).
    """
    from isles.problems.cuda_check import compile_c  # noqa: PLC0415

    if plain_arith and _ARITH_END in source:
        source = source.replace(_ARITH_END, _ARITH_END + PLAIN_ARITH, 1)
    text = "#define ISLES_HOST_EMU 1\n" + source
    if openmp:
        try:
            return compile_c(text, (*flags, "-fopenmp"))
        except RuntimeError as e:
            logging.getLogger(__name__).info("host build without OpenMP (%s)", str(e).splitlines()[0])
    return compile_c(text, tuple(flags))


def no_compiler_reason() -> str | None:
    """``"no C compiler (...)"`` where :func:`isles.problems.cuda_check.compiler` finds none, else ``None``."""
    from isles.problems import cuda_check  # noqa: PLC0415  (looked up at each call: tests replace it)

    return "no C compiler ($CC, cc, gcc or clang on PATH)" if cuda_check.compiler() is None else None


def host_plan(alg, ctx, family: str, reason, build, log: logging.Logger):
    """The host build of ``(alg, ctx)`` on NumPy, built once, where ``alg.params.host_kernel``
    allows it and it applies; else ``None`` (the caller runs the NumPy array code), the reason
    logged once on ``log``: at INFO level with ``host_kernel="auto"``, as a warning with ``True``,
    as ``"<family>: NumPy array code on the CPU, not the host kernel (<reason>)"``.

    Args:
        alg: the algorithm (its ``params.host_kernel``; a family without the field never applies).
        ctx: the :class:`isles.algorithms.core.base.Context`; CuPy never applies.
        family: the family's name in the log line (``"DE"``, ``"lshade"`` ...).
        reason: ``() -> str | None``, why the family's host build does not apply to ``(alg, ctx)``.
        build: ``() -> plan``, the host build (may raise ``RuntimeError``/``OSError``: a compiler
            that fails; ``ValueError``: a configuration it refuses; each logged as a reason).
        log: the family's logger.
    """
    mode = getattr(alg.params, "host_kernel", False)
    if mode is False or ctx.xp is not np:
        return None
    key = (family, id(alg), id(ctx))
    hit = _PLANS.get(key)
    if hit is not None and hit[0]() is alg and hit[1]() is ctx:
        return hit[2]
    why = reason()
    if why is None:
        why = no_compiler_reason()
    built = None
    if why is None:
        try:
            built = build()
        except (RuntimeError, OSError, ValueError) as e:  # never a failed run: the array code
            why = str(e).splitlines()[0]
    if why is not None:
        (log.warning if mode is True else log.info)(
            "%s: NumPy array code on the CPU, not the host kernel (%s)", family, why
        )
    _PLANS[key] = (weakref.ref(alg), weakref.ref(ctx), built)
    while len(_PLANS) > PLANS_KEPT:  # a plan holds its alg and ctx: keep the latest only
        _PLANS.pop(next(iter(_PLANS)))
    return built


#: the C signature of ``EXT_OBJ``'s objective callback: ``(islands, rows per island) -> NaN
#: evaluations, or -1 where the objective raised`` (:func:`evaluate_external`)
EXTERNAL_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_longlong, ctypes.c_int, ctypes.c_int)


def evaluate_external(plan, rows, n_islands: int, n: int) -> int:
    """The body of a host build's ``EXT_OBJ`` callback (DE's and L-SHADE's builds around a user's
    array-code objective, docs/cpu_speed.md): the first ``n`` trial rows of the first ``n_islands``
    islands of ``rows`` ``(I, N, D)`` evaluated by the plan's context's Evaluator in one call (the
    NumPy twin's function), ``f`` and ``v`` written into the plan's ``_f`` and ``_v`` ``(I, N)``
    that C reads.

    Returns:
        The NaN evaluations, or -1 where the objective raised: the error (a ``KeyboardInterrupt``
        too) is kept in ``plan._error`` for the plan to raise after the C call.

    Where the objective ran the same compiled build itself (a nested run), the plan's callback is
    put back (``plan._install()``) before C goes on."""
    try:
        f, v, n_nan = plan.ctx.evaluator(rows[:n_islands, :n])
        plan._f[:n_islands, :n] = f
        plan._v[:n_islands, :n] = v
        return int(n_nan)
    except BaseException as e:  # noqa: BLE001  (a KeyboardInterrupt too: raised after the call)
        plan._error = e
        return -1
    finally:
        if getattr(plan.lib, "_isles_ext_owner", None) is not plan:
            plan._install()
