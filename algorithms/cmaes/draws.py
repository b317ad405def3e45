"""The draw ids of the CMA-ES family's counter RNG (:mod:`isles.algorithms.core.random`): each call
site of a generation has its own constant id (``normal`` also uses ``id + MAX_DRAWS``)."""

from __future__ import annotations

DRAW_INIT_MEAN = 0  # the first mean, uniform in the box (init)
DRAW_Z = 1  # the standard normal vectors z of a block, (lambda_start, D)
DRAW_RESTART_MEAN = 2  # a restart's mean, uniform in the box, (D,)
DRAW_RESTART_U = 3  # BIPOP's two uniforms of a small-regime restart, (2,)
DRAW_BOUND = 4  # bound_handling=reinit (isles.algorithms.de.de.apply_bounds)
