"""The fused GA's CUDA source and configuration (:mod:`isles.algorithms.ga.cuda` runs it, its
docstring describes the kernels; :mod:`isles.algorithms.ga.cuda_host` runs the same source on the
CPU): the thread layout (:func:`layout`, :func:`elite_block`), the source with its configuration
macros (:func:`kernel_source`) and why a configuration cannot be fused (:func:`unsupported_reason`)."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.cuda_lib import defines, draw_ids, source
from isles.algorithms.ga.draws import (
    CROSSOVERS,
    DRAW_CUT,
    DRAW_MUTATE,
    DRAW_RENEW,
    DRAW_SELECT,
    DRAW_XMASK,
    DRAW_XOVER,
)
from isles.problems.base import objective_macros

MAX_TPI = 256

#: the draw ids of the counter RNG (algorithms/ga/draws.py), injected into the kernels
DRAWS = draw_ids(
    DRAW_SELECT=DRAW_SELECT,
    DRAW_XOVER=DRAW_XOVER,
    DRAW_CUT=DRAW_CUT,
    DRAW_XMASK=DRAW_XMASK,
    DRAW_MUTATE=DRAW_MUTATE,
    DRAW_RENEW=DRAW_RENEW,
)


# ---- configuration ------------------------------------------------------------------------------


def layout(n_words: int, n_work: int, tpi: int | None = None) -> tuple[int, int, int]:
    """Thread layout ``(TPI, IPB, BLOCK)``: ``TPI`` threads per slot (the smallest power of two
    with at most 32 words or coordinates per thread, at least 2 where there are 2, a warp from 64
    on, at most 256; 10^5 bits: 128, measured best on an H100), ``IPB`` slots per block (128 threads per block
    while ``TPI <= 32``, else 1) and ``BLOCK = TPI * IPB``.

    Raises:
        ValueError: ``tpi`` given and not a power of two in ``[1, 1024]``.
    """
    if tpi is None:
        items = max(int(n_words), int(n_work), 1)
        tpi = 1
        while tpi < MAX_TPI and tpi * 32 < items:
            tpi *= 2
        tpi = max(tpi, min(2, items), 32 if items >= 64 else 1)
    elif tpi < 1 or tpi > 1024 or (tpi & (tpi - 1)):
        raise ValueError(f"fused GA: tpi={tpi}: allowed values are powers of two 1..1024")
    ipb = max(1, 128 // tpi) if tpi <= 32 else 1
    return tpi, ipb, tpi * ipb


def elite_block(n: int) -> int:
    """Threads of a ``ga_select`` block: a power of two about ``N / 4``, in ``[32, 1024]``."""
    b = 32
    while b < 1024 and b * 4 < int(n):
        b *= 2
    return b


def kernel_source(ga, ctx, tpi: int | None = None, extra: dict | None = None, tail: tuple = ()) -> tuple[str, dict]:
    """CUDA/C source of the fused generation for ``(ga, ctx)`` and its configuration macros.

    Order: configuration (with ``PENALTY``, the static penalty's factor, under
    ``constraints.handling=penalty``), :data:`DRAWS`, ``objective.cuh``, the problem's
    ``cuda_objective``, the encoding's ``cuda_decode`` (real problems), then ``ga.cu`` and the
    library files ``tail`` (``("ga_epoch.cu",)``: :mod:`isles.algorithms.ga.epoch`)
    (:mod:`isles.algorithms.core.cuda_lib`).

    ``extra`` adds or overrides macros (tuning: ``GA_MAX_ITEMS``, words per thread held in
    registers, 0 = all through shared memory; ``GA_MINB``, ``__launch_bounds__``'s minimum blocks).

    Raises:
        ValueError: the problem has no ``cuda_objective``.
    """
    p = ga.params
    enc = ga.setup(ctx)
    prob = ctx.evaluator.problem
    obj = getattr(prob, "cuda_objective", None)
    if not obj:
        raise ValueError(f"problem {getattr(prob, 'name', prob)!r} has no cuda_objective")
    real = enc.genome == "real"
    L, W = enc.n_bits, enc.n_words
    tpi, ipb, block = layout(W, enc.dim if real else W, tpi)
    pm = p.mutation_probability(L)
    mut = 0 if pm <= 0.0 else (1 if p.mutation == "per_bit" else 2)
    cfg = {
        "IS_F32": int(np.dtype(ctx.dtype) == np.float32),
        "GA_N": p.pop_size,
        "GA_W": W,
        "GA_L": L,
        "GA_NE": p.n_elite,
        "GA_NEK": max(p.n_elite, 1),
        "GA_NR": p.n_renew,
        "GA_S": p.group_size,
        "GA_XOVER": CROSSOVERS.index(p.crossover),
        "GA_MUT": mut,
        "GA_REAL": int(real),
        "GA_D": enc.dim,
        "GA_TPI": tpi,
        "GA_IPB": ipb,
        "GA_BLOCK": block,
        "GA_EBLOCK": elite_block(p.pop_size),
        "GA_PENALTY": int(getattr(ctx.evaluator, "handling", "feasibility") == "penalty"),
        # block mode: registers for >= 1024 resident threads per SM (latency hiding, measured)
        "GA_MINB": 1024 // block if tpi > 32 else 1,
    }
    if cfg["GA_PENALTY"]:
        cfg["PENALTY"] = repr(float(ctx.evaluator.penalty))
    cfg.update(extra or {})
    parts = [defines(cfg) + DRAWS, "objective.cuh", obj]
    if real:
        parts.append(enc.cuda_decode)
    return source(*parts, "ga.cu", *tail), cfg


def unsupported_reason(ga, ctx, device: bool = True) -> str | None:
    """Why ``(ga, ctx)`` cannot use the fused path, or ``None`` if it can (CuPy checks included
    only when ``ctx.xp`` is CuPy). ``device=False`` asks only about the configuration and the
    problem (not CuPy, ``fused`` or shared memory): the host build
    (:func:`isles.algorithms.ga.cuda_host.host_plan`)."""
    if device and getattr(ctx.xp, "__name__", "") != "cupy":
        return "the array module is not CuPy"
    if device and not ga.params.fused:
        return "fused=False"
    prob = ctx.evaluator.problem
    if not getattr(prob, "cuda_objective", None):
        return f"problem {getattr(prob, 'name', type(prob).__name__)!r} has no cuda_objective"
    enc = ga.setup(ctx)
    try:
        objective_macros(prob.cuda_objective, enc.genome)
    except ValueError as err:
        return str(err)
    if np.dtype(ctx.dtype) not in (np.float32, np.float64):
        return f"dtype {np.dtype(ctx.dtype)} (fused: float32|float64)"
    if ctx.n_islands * ga.params.pop_size >= 2**31:
        return "more than 2**31 individuals"
    tpi, ipb, _ = layout(enc.n_words, enc.dim if enc.genome == "real" else enc.n_words)
    smem = ipb * enc.n_words * 4
    limit = _smem_limit(ctx.xp) if device else smem
    if smem > limit:
        return f"a row of {enc.n_bits} bits ({smem} bytes) does not fit {limit} bytes of shared memory"
    return None


def _smem_limit(cp) -> int:
    try:
        dev = cp.cuda.Device()
        return int(dev.attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024)) - 1024
    except Exception:  # pragma: no cover - attribute names differ across CuPy versions
        return 48 * 1024 - 1024
