"""What the GA's array code (:mod:`isles.algorithms.ga.ga`) and its fused kernels
(:mod:`isles.algorithms.ga.cuda`) share: the draw ids of the counter RNG (each call site of a
generation has its own constant id), the crossover names (a name's index is the kernels'
``GA_XOVER``) and the per-bit mutation's integer thresholds. One module that both import, so that
neither imports the other for them."""

from __future__ import annotations

import math

import numpy as np

CROSSOVERS = ("one_point", "two_point", "uniform")

DRAW_INIT = 0
DRAW_SELECT = 1
DRAW_XOVER = 2
DRAW_CUT = 3
DRAW_XMASK = 4
DRAW_MUTATE = 5
DRAW_RENEW = 6


def flip_thresholds(p_m: float) -> np.ndarray:
    """The per-bit mutation's integer thresholds ``K (33,)`` uint64: ``K_m = ceil((1 - q_m) 2^53)``
    with ``q_m = (1 - p_m)^m`` in float64 (``m = 0..32``), computed exactly (rationals). A draw
    ``z`` says "the gap is at least ``m``" iff ``(z >> 11) >= K_m``, i.e. iff
    ``1 - u <= q_m`` for its uniform ``u``. Computed on the host once, shared by NumPy, CuPy and
    the CUDA kernel."""
    from fractions import Fraction  # noqa: PLC0415

    a = 1.0 - float(p_m)
    out = []
    for m in range(33):
        q = Fraction(a**m)
        out.append(math.ceil((1 - q) * (1 << 53)))
    return np.array(out, dtype=np.uint64)
