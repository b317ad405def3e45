"""The typed records that cross the runtime's seams: what a group is built from (:class:`GroupSpec`),
what the driver orders it to run (:class:`SpanOrder`, with its :class:`Route` and first :class:`Plan`),
what an epoch hands back (:class:`EpochSummary`, with a :class:`GroupSnapshot` where one falls due)
and what the driver keeps between epochs (:class:`LoopState`). Dataclasses with named fields, no
string-keyed dicts or positional tuples across module boundaries; they pickle through Ray as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from isles.islands.transport.kinds import POSTS, Transport


@dataclass(frozen=True)
class GroupSpec:
    """What an :class:`isles.islands.group.IslandGroup` is built from.

    Attributes:
        problem, algorithm: config nodes with ``_target_``; constraints: ``{handling, penalty}`` or ``None``.
        island_ids: global ids of the group's islands; seed: the run's seed.
        device: ``auto|cpu|gpu``; dtype: ``float32|float64``.
        n_migrants: emigrants per island and epoch (``k``).
        replacement, selection: the migration policies (a name, ``{_target_: ...}`` or a policy object,
            :mod:`isles.islands.migration.policies`).
        target: the stop rule's ``stop.f_target + stop.tol``, or ``None``.
        cuda_graph: replay captured generations on CuPy; span_graph: ``auto|always|never``
            (:mod:`isles.islands.span_graph`).
        plugins: the loop's plug-in factories (the config's ``plugins`` objects, :mod:`isles.islands.plugin`).
        plugin_stream: the random stream of the first plug-in (the number of islands; plug-in ``j`` uses
            ``plugin_stream + j``).
    """

    problem: Any
    algorithm: Any
    island_ids: tuple
    constraints: Any = None
    seed: int = 0
    device: str = "auto"
    dtype: str = "float64"
    n_migrants: int = 1
    replacement: Any = "fair_replace"
    selection: Any = "select_best"
    target: float | None = None
    cuda_graph: bool = True
    span_graph: str = "auto"
    plugins: tuple = ()
    plugin_stream: int = 0


@dataclass
class Plan:
    """One group's migration of one epoch: ``inbound`` ``{destination position: [source ids]}`` and
    ``remote`` ``{source id: Population (1, k)}``, the emigrants of sources the group does not hold."""

    inbound: dict = field(default_factory=dict)
    remote: dict = field(default_factory=dict)


@dataclass
class Route:
    """Where a group stands among its peers during a span.

    Attributes:
        index: this group's index; groups: the island ids of every group.
        topology, n, seed: what the migration plans are made from (:mod:`isles.islands.migration.planner`).
        timeout_s: the longest wait for a peer's message, seconds.
        peers: every group's handle by index (Ray actors, or in-process groups), for posts.
        transport: how emigrants travel to the peers (:mod:`isles.islands.transport.kinds`: posts,
            shared-memory channels where formed, or the groups' NCCL communicator).
    """

    index: int
    groups: list
    topology: Any
    n: int
    seed: int
    timeout_s: float = 30.0
    peers: list = field(default_factory=list)
    transport: Transport = POSTS


@dataclass
class SpanOrder:
    """The driver's order of one span: run ``ks`` (generations of each epoch) after ``epoch0``
    epochs, the first epoch's migration ``first``, and keep a :class:`GroupSnapshot` after each
    epoch of ``snapshots``; ``span`` is its id (messages of other spans are ignored)."""

    span: int
    ks: list
    epoch0: int
    route: Route
    first: Plan = field(default_factory=Plan)
    snapshots: tuple = ()


@dataclass
class GroupSnapshot:
    """A group's state after an epoch: ``state`` (host arrays), ``plugins`` (each plug-in's
    ``state_dict()``), ``emigrants`` (Population ``(I, k)``, host) or ``None`` where the summary has them."""

    state: dict
    plugins: list
    emigrants: Any = None


@dataclass
class EpochSummary:
    """What a group hands back for one epoch (host values).

    Attributes:
        island_ids: the group's islands; best: Population ``(I, 1)`` of each island's best;
        best_x ``(I, D)``: its phenotype; best_f, best_v ``(I,)``.
        emigrants: Population ``(I, k)`` after the epoch (a span's last epoch, or a snapshot's), else ``None``.
        generation, payoff_evals: per island; evals, nan_evals: the whole group's.
        hit_generation: ``(I,)`` int (-1 = not yet), or ``None`` without a stop target.
        migrations: ``[(src, dst, accepted, best f moved)]``; compute_s: seconds; device: its name.
        plugins: each plug-in's ``(best, metrics)`` after the epoch: best a Population ``(1, 1)`` or
            ``None``, metrics ``{name: value}`` (:meth:`isles.islands.plugin.Plugin.metrics`).
        snapshot: the group's :class:`GroupSnapshot` where one fell due after this epoch.
        metrics: the algorithm's own metrics ``{name: (I,) host array}``
            (:meth:`isles.algorithms.core.base.IslandAlgorithm.metrics`).
    """

    island_ids: list
    best: Any
    best_x: Any
    best_f: Any
    best_v: Any
    emigrants: Any
    generation: int
    evals: int
    payoff_evals: int
    nan_evals: int
    hit_generation: Any
    migrations: list
    compute_s: float
    device: str
    plugins: list = field(default_factory=list)
    snapshot: GroupSnapshot | None = None
    metrics: dict = field(default_factory=dict)


@dataclass
class LoopState:
    """The sync driver's variables between epochs (what a snapshot holds besides the states).

    Attributes:
        done_gens: generations run per island; epoch: epochs run.
        best: the archipelago's best ``(x (1, D), f (1,), v (1,), genome (1, ...))`` or ``None``.
        plugins: each plug-in's state (``state_dict()``), or ``None`` before the first epoch.
        pending: ``(epoch, {island id: Population (1, k)})``, the emigrants of the last epoch, or ``None``.
        history, migrations: the run's :class:`isles.islands.results.RecordLog` s.
    """

    done_gens: int
    epoch: int
    best: Any
    plugins: list | None
    pending: Any
    history: Any
    migrations: Any
