"""The fused DE's CUDA sources and configuration (:mod:`isles.algorithms.de.cuda` runs them, its
docstring describes the kernels; :mod:`isles.algorithms.de.host_epoch` runs the epoch kernel's on
the CPU): the thread layout (:func:`layout`), the sources with their configuration macros
(:func:`kernel_source`, :func:`variation_source`), the crossover rate's kernel arguments, and why a
configuration cannot be fused (:func:`unsupported_reason`, :func:`variation_unsupported_reason`)."""

from __future__ import annotations

import math

import numpy as np
from isles.algorithms.core.cuda_lib import defines as c_defines
from isles.algorithms.core.cuda_lib import draw_ids, source
from isles.algorithms.de.crossover import DRAW_CROSS, DRAW_START
from isles.algorithms.de.de import DRAW_BOUND, DRAW_INDEX
from isles.problems.base import objective_macros

XOVER_IDS = {"bin": 0, "nec": 1}
BOUND_IDS = {"clip": 0, "reflect": 1, "reinit": 2}
MAX_ITEMS = 32  # coordinates per thread held in registers
SMEM_LIMIT = 48 * 1024  # static shared memory of one block

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


def kernel_source(
    dtype,
    dim: int,
    n: int,
    objective: str,
    crossover: str,
    bound_handling: str,
    penalty: float | None = None,
    tail: str = "de_generation.cu",
) -> str:
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
        "IS_F32": int(np.dtype(dtype) == np.float32),
        "DIM": int(dim),
        "NPOP": int(n),
        "TPI": tpi,
        "ITEMS": items,
        "IPB": ipb,
        "BLOCK": block,
        "XOVER": XOVER_IDS[crossover],
        "BOUND": BOUND_IDS[bound_handling],
    }
    if penalty is not None and macros["OBJ_HAS_V"]:
        defines["PENALTY"] = repr(float(penalty))
    return source(
        c_defines(defines) + DRAWS,
        "objective.cuh",
        "de.cu",
        "// ---- the problem's fused objective ----\n" + objective,
        tail,
    )


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


#: the objective part of an ``EXT_OBJ`` host build (:class:`isles.algorithms.de.host_epoch.HostEpochDE`
#: with the problem's own objective): no fused terms; the fold's merge is compiled, never called
EXTERNAL_OBJECTIVE = r"""#define OBJ_NACC 1
#define OBJ_HAS_V 0
#define OBJ_NEXT 0
ISLES_DEV void obj_merge(T* acc, const T* o) { (void)acc; (void)o; }
"""


def unsupported_reason(params, ctx, device: bool = True, external: bool = False) -> str | None:
    """Why ``(params, ctx)`` cannot use the fused path, or ``None`` if it can.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`.
        ctx: :class:`isles.algorithms.core.base.Context`.
        device: ``False`` asks only about the configuration (not whether ``ctx`` is on CuPy): the
            host emulations of the kernels (:class:`isles.algorithms.de.host_epoch.HostEpochDE`).
        external: the host build with the problem's own objective (``EXT_OBJ``): a
            ``cuda_objective`` is not needed.
    """
    reason = variation_unsupported_reason(params, ctx, device)
    if reason is not None:
        return reason
    dtype = np.dtype(ctx.dtype)
    if external:
        genome = getattr(ctx.evaluator.problem, "genome", "real")
        reason = None if genome == "real" else f"problem genome {genome!r} (fused: real)"
        macros = objective_macros(EXTERNAL_OBJECTIVE, "real")
    else:
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
    defines = {
        "IS_F32": int(np.dtype(dtype) == np.float32),
        "DIM": int(dim),
        "NPOP": int(n),
        "XOVER": XOVER_IDS[crossover],
        "BOUND": BOUND_IDS[bound_handling],
    }
    return source(c_defines(defines) + DRAWS, "de.cu", "de_variation.cu")


def _cr_args(params, dtype) -> tuple:
    """Kernel arguments of the crossover rate: ``(CR in dtype, log CR, case)`` (0: CR <= 0,
    1: 0 < CR < 1, 2: CR >= 1)."""
    cr = float(params.CR)
    return (
        np.dtype(dtype).type(cr),
        np.float64(math.log(cr) if 0.0 < cr < 1.0 else 0.0),
        np.int32(0 if cr <= 0.0 else (2 if cr >= 1.0 else 1)),
    )
