"""The epoch body: the one place where an epoch of the island loop is written.

An epoch of a group (:class:`isles.islands.group.IslandGroup`) takes its immigrants (local sources
on the device, remote ones from the link to its peers, and the plug-ins' migrants), immigrates
them, evolves ``k`` generations, takes the islands' bests, selects the next emigrants and sends
them, and hands the plug-ins the epoch's bests of every island (gathered over the link when there
are peers). :meth:`IslandGroup.run_span` loops it; the span graph
(:class:`isles.islands.span_graph.SpanGraph`) captures this same function and replays it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from isles.islands.migration.moves import emigrants_of, immigrate
from isles.islands.migration.planner import group_plan
from isles.islands.plugin import source_id


@dataclass
class Row:
    """One epoch of a span as device values (copies where a replay would overwrite them): the
    islands' ``best`` (Population ``(I, 1)``) and phenotype ``best_x``, the counters of the state,
    the migration ``events`` (:func:`isles.islands.migration.moves.immigrate`), each plug-in's
    ``(best, metrics)`` (:class:`isles.islands.plugin.Plugin`), and the algorithm's own ``metrics``
    (:meth:`isles.algorithms.core.base.IslandAlgorithm.metrics`)."""

    best: Any
    best_x: Any
    generation: int
    evals: int
    pair_evals: int
    nan_evals: Any
    hit_generation: Any
    events: Any
    plugins: list = field(default_factory=list)
    snapshot: Any = None
    metrics: dict = field(default_factory=dict)  # the algorithm's (IslandAlgorithm.metrics), copies


@dataclass
class Rows:
    """Like epochs' rows stacked on a leading epoch axis: a block of a span's replays
    (:meth:`isles.islands.span_graph.SpanGraph.run`, written by the captured graph into device
    buffers) or one plain epoch's :class:`Row` (:meth:`of`). Device leaves have shape ``(m, ...)``;
    host counters are lists of ``m`` numbers.

    Attributes:
        best: ``{leaf: (m, I, 1, ...)}`` the islands' bests; best_x: ``(m, I, D)`` their phenotypes.
        generation, evals, pair_evals: ``m`` host ints each (the state's counters after each epoch).
        nan_evals: ``(m,)`` (or ``m`` host ints); hit_generation: ``(m, I)`` or ``None``.
        events: ``[(src_of, order (m, ...), accepted (m, ...), f (m, ...))]`` per population role, or ``None``.
        plugins: per plug-in ``(best leaves {leaf: (m, 1, 1, ...)} or None, metrics {name: (m,) or m numbers})``.
        metrics: the algorithm's own metrics ``{name: (m, I)}`` (:meth:`isles.algorithms.core.base.IslandAlgorithm.metrics`).
        snapshot: the :class:`isles.islands.records.GroupSnapshot` taken after the last epoch, if one fell due.
    """

    best: dict
    best_x: Any
    generation: list
    evals: list
    pair_evals: list
    nan_evals: Any
    hit_generation: Any
    events: Any
    plugins: list = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    snapshot: Any = None

    def __len__(self) -> int:
        return len(self.generation)

    @classmethod
    def of(cls, row: Row) -> Rows:
        """One epoch's :class:`Row` as a block of one (views, no copies)."""

        def one(v):
            return v[None] if hasattr(v, "shape") else [v]

        return cls(
            best={k: v[None] for k, v in row.best.leaves().items()},
            best_x=row.best_x[None],
            generation=[row.generation],
            evals=[row.evals],
            pair_evals=[row.pair_evals],
            nan_evals=one(row.nan_evals),
            hit_generation=None if row.hit_generation is None else row.hit_generation[None],
            events=None if row.events is None else [(s, o[None], a[None], f[None]) for s, o, a, f in row.events],
            plugins=[
                (
                    None if pb is None else {k: v[None] for k, v in pb.leaves().items()},
                    {k: one(v) for k, v in m.items()},
                )
                for pb, m in row.plugins
            ],
            metrics={k: v[None] for k, v in row.metrics.items()},
        )

    def last_events(self):
        """The last epoch's migration events ``[(src_of, order, accepted, f)]``, or ``None``."""
        return None if self.events is None else [(s, o[-1], a[-1], f[-1]) for s, o, a, f in self.events]


def with_migrants(plugins, n_local: int, inbound: dict, remote: dict) -> tuple:
    """``(inbound, remote)`` with every plug-in's migrants (:meth:`Plugin.migrants`) sent to each of
    the ``n_local`` islands, after the plan's sources (source ids :func:`isles.islands.plugin.source_id`)."""
    for j, p in enumerate(plugins):
        m = p.migrants()
        if m is None:
            continue
        inbound = {pos: list(srcs) for pos, srcs in inbound.items()}
        for pos in range(n_local):
            inbound.setdefault(pos, []).append(source_id(j))
        remote = {**remote, source_id(j): m}
    return inbound, remote


def run_epoch(g, k: int, epoch: int, plan, link, next_edges, captured: bool = False) -> tuple:
    """Epoch ``epoch`` (1-based: the run's epochs before it are ``epoch - 1``) of group ``g``.

    Args:
        g: the group (its ``state``, ``sent``, ``plugins``, ``algorithm``, ``ctx``, policies); changed in place.
        k: generations.
        plan: the epoch's :class:`isles.islands.records.Plan` (a span's first epoch, from the driver),
            or the edges ``[(src, dst)]`` of the migration after epoch ``epoch - 1``: the remote
            sources come from ``link.take``.
        link: :class:`isles.islands.transport.link.Alone`, ``Posts`` or ``Collective``.
        next_edges: the edges of the migration after this epoch (its emigrants are selected and sent;
            none where they are empty), or ``None`` after a span's last epoch (the span's end selects them).
        captured: inside a captured graph (the generations as plain steps).

    Returns:
        ``(best Population (I, 1), phenotype (I, D), migration events)``, device arrays.

    Raises:
        isles.islands.transport.link.Aborted, TimeoutError: a peer's message did not come (the link's).
    """
    a, ctx = g.algorithm, g.ctx
    g.epoch = epoch - 1  # the migration before this epoch is the one after epoch - 1 (the policies' context)
    if isinstance(plan, list):  # the local sources: g.emigrants(), this group's after the epoch before
        inbound, remote = group_plan(plan, g.island_ids, link.take(epoch - 1, g.emigrants, plan))
    else:
        inbound, remote = plan.inbound, plan.remote
    inbound, remote = with_migrants(g.plugins, len(g.island_ids), inbound, remote)
    events = None
    if inbound:
        context = g.policy_context("replace")
        state, events = immigrate(a, ctx, g.state, g.island_ids, g.emigrants(), inbound, remote, g.replacement, context)
        g.set_state(state, captured)
        events = events or None
    g.evolve(k, captured)
    g.epoch = epoch
    best = a.best(g.state)  # fresh arrays: a replayed graph reuses its buffers
    px = a.phenotype(best.genome[:, 0])
    # the next emigrants, where the next epoch's plan has edges (else selected when asked for)
    g.sent = emigrants_of(a, g.state, g.n_migrants, g.selection, g.policy_context("select")) if next_edges else None
    link.send(epoch, g.sent, next_edges, best if g.plugins else None)
    if g.plugins:
        bests = link.gather(epoch, best)
        px_all = a.phenotype(bests.genome[:, 0])
        for p in g.plugins:
            p.after_epoch(bests, px_all, k)
    return best, px, events
