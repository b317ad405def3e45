"""The coordinator: the control plane of a run. It places and starts the island groups, orders
their spans of epochs, collects the epoch summaries for the callbacks, takes snapshots and
checkpoints between spans, and restarts lost actors; it is not in the per-epoch data path.

* ``islands.mode=sync``: every group runs spans of epochs itself
  (:meth:`isles.islands.group.IslandGroup.run_span`), one epoch body each
  (:func:`isles.islands.epoch.run_epoch`), computing each epoch's migration plan from the topology,
  the seed and the epoch (:mod:`isles.islands.migration.planner`) and exchanging emigrants with its peers
  directly (:mod:`isles.islands.transport.link`): one or several Ray actors, or in-process groups (one
  thread each). The plug-ins run as identical replicas in every group (:mod:`isles.islands.plugin`).
* ``islands.mode=async``: a group that finishes its interval immediately exchanges with the
  driver's migrant store (the latest emigrants of every island) and goes on, without waiting
  for slower groups (pagmo's archipelago semantics).

The coordinator is assembled from pieces named for what they do:

* :mod:`isles.islands.control.executor`: placement, start and release of the groups, calls to them;
* :mod:`isles.islands.control.sync_loop`, :mod:`isles.islands.control.async_loop`: the schedules of spans;
* :mod:`isles.islands.control.recovery`: snapshots, restarts, checkpoint compatibility;
* :mod:`isles.islands.records`: the typed records between them;
* :mod:`isles.islands.results`: the epoch records and the :class:`RunResult`;
* :mod:`isles.islands.control.callbacks`: ``on_start``/``on_epoch``/``on_restart``/``on_end`` (MLflow
  tracker, progress bar).
"""

from __future__ import annotations

import logging
import time

from isles.islands.config.schema import check_plugins, typed, validated
from isles.islands.control import checkpoint
from isles.islands.control.async_loop import AsyncLoop
from isles.islands.control.budget import budget_generations
from isles.islands.control.callbacks import Monitors
from isles.islands.control.executor import Executor
from isles.islands.control.recovery import (
    Recovery,
    RestartFailed,
    check_async_grouping,
    check_resumable,
    resumable_config,
)
from isles.islands.control.sync_loop import SyncLoop
from isles.islands.mixed import GroupBooks
from isles.islands.results import RunResult, island_nodes

__all__ = ["Coordinator", "RestartFailed", "RunResult", "stop_target"]

log = logging.getLogger(__name__)


class Coordinator:
    """Runs an archipelago described by a resolved config (plain dict), composed of an
    :class:`isles.islands.control.executor.Executor` (placement, groups, calls, links), a schedule
    (:class:`isles.islands.control.sync_loop.SyncLoop` or :class:`isles.islands.control.async_loop.AsyncLoop`), a
    :class:`isles.islands.control.recovery.Recovery` (snapshots, restarts) and the
    :class:`isles.islands.control.callbacks.Monitors` (callbacks).

    Args:
        cfg: the run config as a plain dict with keys ``problem``, ``constraints``,
            ``algorithm``, ``topology`` (instantiated object), ``islands`` (``n``, ``n_actors``,
            ``migration_interval``, ``n_migrants``, ``replacement``, ``mode``), ``generations``, ``seed``,
            ``device``, ``dtype``, and optionally ``checkpoint`` (``every`` epochs, ``path``,
            ``resume`` = path of a checkpoint to continue from; sync mode), ``stop``
            (``f_target``, ``tol``, ``max_evaluations``: turned into ``generations`` here,
            :func:`isles.islands.control.budget.budget_generations`).
        topology: a :class:`isles.islands.migration.topology.Topology`.
        plugins: the loop's plug-in factories (the config's ``plugins`` objects, :mod:`isles.islands.plugin`).
        callbacks: objects with optional ``on_start``, ``on_epoch``, ``on_restart`` (island
            groups restarted after a lost actor or node) and ``on_end`` methods.
        use_ray: start the groups as Ray actors (default) or in this process (tests, benchmarks).

    Raises:
        ValueError: bad values of the config's typed fields, named by field
            (:func:`isles.islands.config.schema.check_values`); plug-ins with ``islands.mode=async``;
            island ids of the topology outside ``islands.n``; a ``checkpoint.resume`` file that
            does not exist, of another version, or saved under another config
            (:func:`check_resumable`); ``stop.max_evaluations`` with an algorithm that does not
            declare its evaluations per generation.
    """

    def __init__(self, cfg: dict, topology, plugins=(), callbacks=(), use_ray: bool = True):
        cfg = validated(cfg)  # the schema's defaults and checks (islands/config/schema.py), before any actor starts
        plugins = list(plugins or ())
        # stop.max_evaluations: the generations that reach it, known before the run (islands/control/budget.py)
        cfg["generations"] = budget_generations(cfg, plugins)
        #: the typed config the runtime reads (:func:`isles.islands.config.schema.typed`); ``cfg``: the
        #: same as a plain dict, what a checkpoint's config is compared with (:func:`check_resumable`)
        self.config = config = typed(cfg)
        isl, ck = config.islands, config.checkpoint
        check_plugins(plugins, isl.mode)
        self.cfg, self.topology, self.use_ray = cfg, topology, use_ray
        self.n, self.seed, self.generations = int(isl.n), int(config.seed), int(config.generations)
        self.interval = int(isl.migration_interval)
        self.topology.weights(self.n)  # validates island ids now, before any actor starts
        # checkpoint.resume: read and checked here, once, before any actor starts
        self.resume_from = None
        if ck.resume:
            self.resume_from = checkpoint.load(ck.resume)
            check_resumable(self.resume_from, cfg, ck.resume)
        # the last epoch handed to the callbacks (a resumed run does not hand them those before)
        published = (
            0 if self.resume_from is None else self.resume_from.get("published_epoch", self.resume_from["epoch"])
        )
        self.monitors = Monitors(callbacks, published)
        self.books = GroupBooks.of(cfg)  # a mixed run's metrics per group (the records' group_metrics)
        self.executor = Executor(
            config, plugins, stop_target(config.stop), use_ray, lambda ids: self.recovery.restart_failed(ids)
        )
        self.recovery = Recovery(config, resumable_config(cfg), self.executor, self.monitors)
        self.schedule = (SyncLoop if isl.mode == "sync" else AsyncLoop)(self)

    @property
    def last_snapshot(self) -> dict | None:
        """The run's latest snapshot (what an interrupted job checkpoints), or ``None``."""
        return self.recovery.last_snapshot

    @property
    def published_epoch(self) -> int:
        """The last epoch handed to the callbacks."""
        return self.monitors.published_epoch

    def run(self) -> RunResult:
        """Start the groups, evolve ``generations`` generations, return the result.

        The groups are stopped at the end (actors killed), also when the run fails.

        Raises:
            RestartFailed: lost actors not restarted within ``islands.restart_timeout_s``
                (:attr:`last_snapshot` holds the run's last snapshot).
        """
        t_start = time.perf_counter()
        ex = self.executor
        placement = ex.placement()
        if self.resume_from is not None:  # on a cluster, the grouping is known once Ray is up
            check_async_grouping(self.resume_from, self.cfg, self.config.checkpoint.resume, placement.groups)
        self.schedule.prepare(placement)  # e.g. async mode's shared pool, started beside the groups
        groups = ex.start(placement)
        try:
            got = ex.gather([ex.call(g, "info") for g in groups])
            ex.infos = infos = [got[i] for i in range(len(groups))]
            info = {
                "groups": infos,
                "n_islands": self.n,
                "generations": self.generations,
                "max_evaluations": self.config.stop.max_evaluations,
            }  # generations is its limit then
            startup_s = self.monitors.started(info, t_start, self.use_ray)
            result = self.monitors.drive(self.schedule.run(groups, placement))
            result.startup_s = startup_s
            result.devices = {gid: infos[i]["device"] for i, ids in enumerate(placement.groups) for gid in ids}
            result.gpu_paths = {
                gid: infos[i].get("gpu_path", "") for i, ids in enumerate(placement.groups) for gid in ids
            }
            result.nodes = island_nodes(ex.infos)
        finally:
            ex.stop(groups)
        return self.monitors.ended(result)


def stop_target(stop) -> float | None:
    """The stop rule's target ``stop.f_target + stop.tol`` (``None`` when ``stop.f_target`` is null),
    of a checked ``stop`` section (:class:`isles.islands.config.schema.StopConfig`).

    An island reaches the target when its best individual is feasible with ``f <= target``; the
    run ends when every island has (or at ``generations``).
    """
    ft, tol = stop.f_target, stop.tol
    return None if ft is None else float(ft) + float(tol or 0.0)
