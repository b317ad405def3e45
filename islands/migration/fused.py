"""Fused migration on the GPU: when :func:`isles.islands.migration.moves.emigrants_of` and
:func:`~isles.islands.migration.moves.immigrate` take the kernels of
:mod:`isles.algorithms.core.migration_kernels` (emigrant selection in one kernel; routing,
replacement, the write of every leaf and the events in another) instead of the generic array
code's ~30 small CuPy calls per exchange.

They do on CuPy when the policies are the built-in ones (:class:`~isles.islands.migration.policies.SelectBest`,
:class:`~isles.islands.migration.policies.FairReplace`, :class:`~isles.islands.migration.policies.ReplaceWorst`; the
exact classes, not subclasses) and every source is an island of the group (no remote island and
no plug-in immigrant); anything else, and ``ISLES_FUSED_MIGRATION=0``, runs the generic code,
which is the twin. States, emigrants and events equal the generic path's bit for bit
(``tests/test_fused_migration_gpu.py``; on the CPU the kernels' C text runs as host emulation,
``tests/test_fused_migration.py``).

Two write modes (:func:`write_mode`): ``full``, for an algorithm whose population and replace are
:class:`~isles.algorithms.core.base.IslandAlgorithm`'s, writes the new ``(I, N)`` leaves and puts
them in the state itself (one kernel for the whole exchange); ``slots``, for an algorithm with
its own ``replace`` (a swarm's global best, self-adaptive step sizes), writes the ``K`` slots and their
positions and calls :meth:`~isles.algorithms.core.base.IslandAlgorithm.replace_role`. An
algorithm that re-assesses its immigrants (``assess_immigrants``, a co-evolutionary min-max algorithm) or has
several populations runs the generic code.
"""

from __future__ import annotations

import os

from isles.algorithms.core import migration_kernels
from isles.algorithms.core.base import IslandAlgorithm
from isles.algorithms.core.population import Population
from isles.islands.migration.policies import FairReplace, ReplaceWorst

ENV = "ISLES_FUSED_MIGRATION"
"""Environment switch: ``0`` turns the fused path off (benchmarks, A/B checks)."""


def enabled() -> bool:
    """Whether the fused path may run (``ISLES_FUSED_MIGRATION`` is not ``0``)."""
    return os.environ.get(ENV, "1").strip() != "0"


def write_mode(algorithm) -> str | None:
    """How immigrants reach ``algorithm``'s state: ``"full"`` (its population and replace are
    the base class's: the kernel's new leaves go into the state), ``"slots"`` (its own replace:
    the kernel's slots go through ``replace_role``), ``None`` (it re-assesses immigrants or has
    several populations: the generic code)."""
    cls, base = type(algorithm), IslandAlgorithm
    if cls.assess_immigrants is not base.assess_immigrants or cls.populations is not base.populations:
        return None
    if all(getattr(cls, m) is getattr(base, m) for m in ("population", "replace", "replace_role")):
        return "full"
    return "slots"


def policy_kind(policy) -> int | None:
    """``1`` for :class:`ReplaceWorst`, ``0`` for :class:`FairReplace` (the kernel's ``worst``
    flag), ``None`` for any other policy (a user's, or a subclass: the generic code)."""
    return {ReplaceWorst: 1, FairReplace: 0}.get(type(policy))


def select_best(pop: Population, k: int) -> Population | None:
    """:func:`isles.algorithms.core.migration_kernels.select_best`: the ``k`` best of each island,
    every leaf, in one kernel, or ``None`` (an unsupported layout). The caller checks ``k``."""
    return migration_kernels.select_best(pop, k)


def immigrate_role(algorithm, ctx, state: dict, role, residents: Population, pool: Population, rows, valid, policy):
    """Immigrants of the group's own emigrants into ``role``'s islands, replaced by ``policy``
    (:class:`FairReplace` or :class:`ReplaceWorst`), in one kernel (module docstring;
    :func:`isles.algorithms.core.migration_kernels.replace`).

    Args:
        algorithm, ctx, state: the group's algorithm, context and state.
        role: the population role (``None``: the only one); residents: its population ``(I, N)``.
        pool: the group's emigrants ``(I, k)``, pool row ``r`` = island ``r // k``, emigrant ``r % k``.
        rows, valid: the route's plan ``(I, K)`` (host arrays, :func:`isles.islands.migration.moves.route`).
        policy: the replacement policy object.

    Returns:
        ``(state, order, accepted, f_new)`` as :func:`isles.islands.migration.moves.immigrate`'s event
        (device arrays ``(I, K)``), or ``None`` where the fused path does not apply (another
        policy, an algorithm without a write mode, an unsupported layout, or a pool whose leaves
        differ from the residents'): the caller runs the generic code.
    """
    worst, mode = policy_kind(policy), write_mode(algorithm)
    if worst is None or mode is None:
        return None
    done = migration_kernels.replace(residents, pool, rows, valid, bool(worst), mode == "slots")
    if done is None:
        return None
    new, idx, order, accepted, f_new = done
    if mode == "full":
        s, F = dict(state), algorithm.FIELDS
        s[F["genome"]], s[F["f"]], s[F["v"]] = new.genome, new.f, new.v
        for name, key in algorithm.EXTRAS.items():
            s[key] = new.extras[name]
    else:
        s = algorithm.replace_role(ctx, state, role, idx, new)
    return s, order, accepted, f_new
