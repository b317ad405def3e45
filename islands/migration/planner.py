"""The migration planner: which island sends its emigrants to which, epoch by epoch.

One planner for the sync and the async loop. The plan of an epoch depends only on the topology,
the number of islands, the run's seed and the epoch's number (:func:`migration_edges`), so every
party that knows these (the driver, or each island group itself) computes the same plan without
being told; :func:`group_plan` cuts it to what one group receives.
"""

from __future__ import annotations

import numpy as np

#: the salt of the migration stream of :func:`migration_edges` (apart from every other stream)
SALT = 0x15


def migration_edges(topology, n: int, seed: int, epoch: int) -> list:
    """The topology's edges sampled for the migration after epoch ``epoch``.

    Args:
        topology: a :class:`isles.islands.migration.topology.Topology`.
        n: islands of the archipelago; seed: the run's seed; epoch: the epoch just finished
            (sync loop) or the number of group epochs completed (async loop).

    Returns:
        ``[(src, dst), ...]`` global island ids, the same for every caller with the same arguments.
    """
    return topology.sample(n, np.random.default_rng([int(seed), int(epoch), SALT]))


def group_plan(edges, island_ids, emigrants: dict):
    """What one group receives: ``(inbound, remote)`` (a :class:`isles.islands.records.Plan`'s fields).

    Args:
        edges: :func:`migration_edges`.
        island_ids: the group's islands (global ids, in its order).
        emigrants: ``{island id: Population (1, k)}`` of islands elsewhere; an edge whose source is
            elsewhere and missing here (an async group that has not reported yet) is left out.

    Returns:
        ``inbound`` ``{local position of a destination: [source ids]}`` and ``remote``
        ``{source id: Population}`` (the emigrants the group does not hold itself).
    """
    pos = {gid: p for p, gid in enumerate(island_ids)}
    inbound, remote = {}, {}
    for src, dst in edges:
        if dst not in pos or (src not in pos and src not in emigrants):
            continue
        inbound.setdefault(pos[dst], []).append(src)
        if src not in pos:
            remote[src] = emigrants[src]
    return inbound, remote


def arrivals_plan(planned, arrived, island_ids, emigrants: dict):
    """What an async group immigrates before an epoch: ``(inbound, remote)`` as :func:`group_plan`,
    of the sources that ``planned`` (:func:`migration_edges` after the group's last epoch) names among
    its own islands or that have arrived (``arrived``, edges, with ``emigrants`` by source id), in the
    plan's order (a remote source as the sync run takes it, where it came), then the arrived sources
    that the plan does not name, in their order."""
    mine, got, named = set(island_ids), set(arrived), set(planned)
    ordered = [x for x in planned if x[0] in mine or x in got] + [x for x in arrived if x not in named]
    return group_plan(ordered, island_ids, emigrants)


def fixed_plan(topology, n: int) -> bool:
    """Whether every epoch's plan is the same: each edge of ``topology`` over ``n`` islands has
    probability 0 or 1 (ring, fully connected, star, free form, unconnected; not ``random``)."""
    W = np.asarray(topology.weights(int(n)))
    return bool(np.all((W == 0) | (W == 1)))
