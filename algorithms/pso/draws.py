"""The draw ids of the PSO family's counter RNG (:mod:`isles.algorithms.core.random`): each call
site of a generation has its own constant id. One module that the NumPy code
(:mod:`isles.algorithms.pso.pso`, :mod:`isles.algorithms.pso.epso`) and the fused kernels
(:mod:`isles.algorithms.pso.cuda`, :mod:`isles.algorithms.pso.epso_cuda`) both import, so that
neither imports the other for them."""

from __future__ import annotations

DRAW_INIT_X, DRAW_INIT_V = 0, 1
DRAW_R1, DRAW_R2, DRAW_R3, DRAW_COR = 10, 11, 12, 13
# EPSO's normal draws (CounterRNG.normal also uses draw + MAX_DRAWS): the mutated w, c1, c2, c3
# per (particle, replica) and the mutated global best per (particle, replica, coordinate)
DRAW_NW, DRAW_NC1, DRAW_NC2, DRAW_NC3, DRAW_NG = 20, 21, 22, 23, 24
