"""What CDE's array code (:mod:`isles.algorithms.coevolution.cde`) and its fused epoch
(:mod:`isles.algorithms.coevolution.epoch`) share: the draw id of y's initialisation, the counter
stride between the DE generations of one cycle, and the evaluations and pair payoffs one cycle
costs. One module that both import, so that neither imports the other for them."""

from __future__ import annotations

DRAW_INIT_Y = 5
COUNTER_STRIDE = 1 << 24  # counter distance between DE generations k and k + 1 of one cycle


def cycle_evaluations(params) -> int:
    """x rows whose objective and constraints (a min-max problem's x terms) are evaluated per
    island and cycle: ``Nx (1 + gens_x)``, the refresh of P1 and every trial of P1. P2's phase
    reuses P1's terms (x is frozen), and a y is no point of the problem's objective.
    ``params`` is a :class:`isles.algorithms.coevolution.cde.CDEParams`."""
    return params.pop_size * (1 + params.gens_x)


def cycle_payoffs(params) -> int:
    """Pair payoffs ``L(x, y)`` per island and cycle: ``(2 + gens_x + gens_y) Nx Ny`` (the two
    refreshes, and each trial against the whole opposing population). ``params`` is a
    :class:`isles.algorithms.coevolution.cde.CDEParams`."""
    return (2 + params.gens_x + params.gens_y) * params.pop_size * params.pop_size_y
