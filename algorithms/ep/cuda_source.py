"""The fused FEP generation's CUDA source and configuration (:mod:`isles.algorithms.ep.cuda` runs
it, its docstring describes the kernels; :mod:`isles.algorithms.ep.cuda_host` runs the same source
on the CPU): the source with its configuration macros (:func:`kernel_source`), the learning rates
the kernels take, and why a configuration cannot be fused (:func:`unsupported_reason`,
:func:`selection_unsupported_reason`)."""

from __future__ import annotations

import math

import numpy as np
from isles.algorithms.core.cuda_lib import defines, draw_ids, source
from isles.algorithms.core.random import MAX_DRAWS
from isles.algorithms.de.de import BOUND_HANDLINGS
from isles.algorithms.ep.fep import (
    DRAW_BOUND,
    DRAW_CAUCHY,
    DRAW_ETA,
    DRAW_ETA_IND,
    DRAW_GAUSS,
    DRAW_OPP,
    DRAW_TIE,
    MUTATIONS,
    learning_rates,
)
from isles.problems.base import objective_macros

MAX_DIM = 1024
MAX_Q = 4095

#: the draw ids of the counter RNG (algorithms/ep/fep.py) and the generator's constants, injected
#: into the kernels
DRAWS = draw_ids(
    DRAW_CAUCHY=DRAW_CAUCHY,
    DRAW_ETA_IND=DRAW_ETA_IND,
    DRAW_ETA=DRAW_ETA,
    DRAW_BOUND=DRAW_BOUND,
    DRAW_GAUSS=DRAW_GAUSS,
    DRAW_OPP=DRAW_OPP,
    DRAW_TIE=DRAW_TIE,
) + defines({"MAX_DRAWS": f"{MAX_DRAWS}ull", "FEP_PI": repr(math.pi), "FEP_TWO_PI": repr(2.0 * math.pi)})


# ---- configuration ------------------------------------------------------------------------------


def select_block(n_union: int) -> int:
    """Threads of a ``fep_select`` block: a power of two about ``2 mu / 8``, in ``[32, 1024]``."""
    b = 32
    while b < 1024 and b * 8 < int(n_union):
        b *= 2
    return b


def kernel_source(fep, ctx, objective: str | None = None, tail: tuple = ()) -> tuple[str, dict]:
    """CUDA/C source of the fused FEP generation for ``(fep, ctx)`` and its configuration macros.

    Order: configuration, :data:`DRAWS`, ``objective.cuh``, the problem's ``cuda_objective`` (or
    ``objective``, e.g. a placeholder for the selection kernels alone, :class:`FEPSelection`), then
    ``fep.cu`` and the library files ``tail`` (``("fep_epoch.cu",)``: :mod:`isles.algorithms.ep.epoch`)
    (:mod:`isles.algorithms.core.cuda_lib`); the kernel never looks at the problem's name.

    Raises:
        ValueError: the problem has no ``cuda_objective`` or it lacks a required macro.
    """
    p = fep.params
    prob = ctx.evaluator.problem
    obj = objective if objective is not None else getattr(prob, "cuda_objective", None)
    if not obj:
        raise ValueError(f"problem {getattr(prob, 'name', prob)!r} has no cuda_objective")
    macros = objective_macros(obj, "real")
    cfg = {
        "IS_F32": int(np.dtype(ctx.dtype) == np.float32),
        "FEP_N": int(ctx.dim),
        "FEP_MU": p.pop_size,
        "FEP_Q": p.q,
        "FEP_MUT": MUTATIONS.index(p.mutation),
        "FEP_BOUND": BOUND_HANDLINGS.index(p.bound_handling),
        "FEP_IPB": 4,
        "FEP_SBLOCK": select_block(2 * p.pop_size),
        "MAX_Q_HOST": MAX_Q,
    }
    if getattr(ctx.evaluator, "handling", "feasibility") == "penalty" and macros["OBJ_HAS_V"]:
        cfg["PENALTY"] = repr(float(ctx.evaluator.penalty))
    return source(defines(cfg) + DRAWS, "objective.cuh", obj, "fep.cu", *tail), cfg


def unsupported_reason(fep, ctx, device: bool = True) -> str | None:
    """Why ``(fep, ctx)`` cannot use the fused path, or ``None`` if it can: the selection's
    limits (:func:`selection_unsupported_reason`), then the problem's ``cuda_objective``.
    ``device=False``: not whether ``ctx`` is on CuPy nor ``fused`` (the host build,
    :func:`isles.algorithms.ep.cuda_host.host_plan`)."""
    reason = selection_unsupported_reason(fep, ctx, device)
    if reason is not None:
        return reason
    prob = ctx.evaluator.problem
    if getattr(prob, "genome", "real") != "real":
        return f"problem genome {prob.genome!r} (fused: real)"
    src = getattr(prob, "cuda_objective", None)
    if not src:
        return f"problem {getattr(prob, 'name', type(prob).__name__)!r} has no cuda_objective"
    try:
        macros = objective_macros(src, "real")
    except ValueError as err:
        return str(err)
    if getattr(prob, "n_constraints", 0) and not macros["OBJ_HAS_V"]:
        return "the problem has constraints but its cuda_objective has OBJ_HAS_V 0"
    if ctx.n_islands * 2 * fep.params.pop_size * max(int(ctx.dim), 1) >= 2**31:
        return "more than 2**31 union coordinates"
    return None


def _rates(fep, ctx, dtype):
    tau, taup = learning_rates(int(ctx.dim))
    t = np.dtype(dtype).type
    return t(tau), t(taup), t(fep.params.eta_min)


def selection_unsupported_reason(fep, ctx, device: bool = True) -> str | None:
    """Why the fused tournament and selection (:class:`FEPSelection`) cannot serve ``(fep, ctx)``
    whatever its problem, or ``None`` (``device=False``: CuPy and ``fused`` not asked)."""
    if device and getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if device and not fep.params.fused:
        return "fused=False"
    if np.dtype(ctx.dtype) not in (np.float32, np.float64):
        return f"dtype {np.dtype(ctx.dtype)} (fused: float32|float64)"
    if int(ctx.dim) > MAX_DIM:
        return f"n={ctx.dim} > {MAX_DIM}"
    if fep.params.q > MAX_Q:
        return f"q={fep.params.q} > {MAX_Q}"
    if ctx.n_islands * 2 * fep.params.pop_size >= 2**31:
        return "more than 2**31 union individuals"
    return None
