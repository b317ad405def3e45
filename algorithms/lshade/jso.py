"""jSO: L-SHADE with iL-SHADE's and jSO's schedules (Brest, Maučec & Bošković, "Single objective
real-parameter optimization: algorithm jSO", Proc. IEEE CEC 2017, pp. 1311-1318; second at CEC 2017).

The same island algorithm as :class:`isles.algorithms.lshade.lshade.LSHADE` (state, LPSR, archive,
budget, migration, NumPy/CuPy), with these changes, as the authors' code for CEC 2017 has them
(``nfe``: evaluations per island so far, ``MAX_NFE`` the island's budget):

* ``N_init = round(25 ln(D) sqrt(D))``, ``H = 5``, ``r_arc = 1``, ``M_F = 0.3``, ``M_CR = 0.8`` at
  the start, and the last memory slot always gives ``M_F = M_CR = 0.9`` (never updated in effect);
* ``CR_i >= 0.7`` while ``nfe < 0.25 MAX_NFE``, ``>= 0.6`` while ``nfe < 0.5 MAX_NFE``;
  ``F_i <= 0.7`` while ``nfe < 0.6 MAX_NFE``;
* current-to-pBest-w/1: ``v = x + F_w (x_pbest - x) + F (x_r1 - x~_r2)`` with ``F_w = 0.7 F``
  (``nfe < 0.2 MAX_NFE``), ``0.8 F`` (``< 0.4 MAX_NFE``), ``1.2 F`` after; ``pbest`` among the
  ``max(round(p N_G), 2)`` best with ``p = 0.25 (1 - 0.5 nfe / MAX_NFE)``, and ``pbest != i`` while
  ``nfe < 0.5 MAX_NFE`` (iL-SHADE);
* a memory slot becomes the mean of its old value and the weighted Lehmer mean (iL-SHADE); ``M_CR``
  becomes terminal where every successful ``CR`` is 0 (the terminal value ``-1`` averaged too).

The schedules read ``nfe`` at the start of each L-SHADE generation (the authors' code updates ``p``
at each population reduction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from isles.algorithms.lshade.lshade import LSHADE, LSHADEParams
from isles.algorithms.lshade.operators import round_half_up


@dataclass(frozen=True)
class JSOParams(LSHADEParams):
    """Parameters of :class:`JSO`: :class:`LSHADEParams`' fields with jSO's defaults (``H = 5``,
    ``r_arc = 1``, ``p = 0.25``, the largest p-best fraction); ``pop_size`` ``None`` means
    ``round(25 ln(D) sqrt(D))`` (``r_N_init`` is not used).

    Raises:
        ValueError: as :class:`LSHADEParams`; ``algorithm.dim=1`` with ``pop_size`` null
            (``ln 1 = 0``).
    """

    r_arc: float = 1.0
    p: float = 0.25
    H: int = 5

    def __post_init__(self):
        super().__post_init__()
        if self.pop_size is None and round_half_up(25 * math.log(self.dim) * math.sqrt(self.dim)) < self.N_min:
            raise ValueError(
                f"algorithm.dim={self.dim}: allowed values are integers >= 2 with pop_size null "
                f"(N_init = round(25 ln(D) sqrt(D)) >= algorithm.N_min={self.N_min})"
            )

    @property
    def n_init(self) -> int:
        """``N_init``: ``pop_size``, or ``round(25 ln(D) sqrt(D))``."""
        if self.pop_size is not None:
            return self.pop_size
        return round_half_up(25 * math.log(self.dim) * math.sqrt(self.dim))


class JSO(LSHADE):
    """jSO (Brest et al., CEC 2017) on ``I`` islands in lockstep (module docstring); the state is
    :class:`LSHADE`'s."""

    name = "jso"
    Params = JSOParams
    M_F0, M_CR0 = 0.3, 0.8

    def _frac(self, nfe: int) -> float:
        return nfe / self.params.max_nfe

    def _slot_means(self, xp, mf, mcr, r):
        last = r == self.params.H - 1
        return xp.where(last, 0.9, mf).astype(mf.dtype), xp.where(last, 0.9, mcr).astype(mcr.dtype)

    def _repair(self, xp, F, CR, nfe: int):
        t = self._frac(nfe)
        if t < 0.25:
            CR = xp.maximum(CR, 0.7).astype(CR.dtype)
        elif t < 0.5:
            CR = xp.maximum(CR, 0.6).astype(CR.dtype)
        if t < 0.6:
            F = xp.minimum(F, 0.7).astype(F.dtype)
        return F, CR

    def _pbest_count(self, n: int, nfe: int) -> int:
        return max(round_half_up(self.params.p * (1 - 0.5 * self._frac(nfe)) * n), 2)

    def _pbest_not_self(self, nfe: int) -> bool:
        return self._frac(nfe) < 0.5

    def _pbest_weight(self, nfe: int) -> float:
        t = self._frac(nfe)
        return 0.7 if t < 0.2 else 0.8 if t < 0.4 else 1.2

    def _terminal(self, old_cr, max_cr):
        return max_cr == 0

    def _memory_value(self, xp, new, old):
        return (new + old) / 2
