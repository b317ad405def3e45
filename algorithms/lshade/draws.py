"""Draw ids of the counter RNG (:mod:`isles.algorithms.core.random`) for L-SHADE
(:mod:`isles.algorithms.lshade.lshade`): each random call site of an L-SHADE generation has its own
constant id, and the generation counter of the draws is L-SHADE's own generation ``state["lgen"]``
(several of which may fall into one runtime generation, see the module docstring there).
"""

from __future__ import annotations

DRAW_INIT = 0  # initial population, uniform in the box, (N_init, D)
DRAW_INDIVIDUAL = 1  # the per-individual uniforms, (N, 8): columns COL_*
DRAW_CROSS = 2  # binomial crossover, (N, D)
DRAW_ARCHIVE = 3  # random keys of the archive's deletion, (N + archive capacity,)

# columns of the DRAW_INDIVIDUAL block (one draw instead of eight: NumPy's per-call cost)
COL_MEMORY = 0  # memory slot r_i
COL_F = 1  # scale factor F_i (inverse CDF of the truncated Cauchy)
COL_CR1, COL_CR2 = 2, 3  # crossover rate CR_i (Box-Muller, as CounterRNG.normal)
COL_PBEST = 4  # which of the p-best individuals
COL_R1 = 5  # r1 from the population
COL_R2 = 6  # r2 from population and archive
COL_JRAND = 7  # the coordinate always taken from the mutant
N_COLS = 8
