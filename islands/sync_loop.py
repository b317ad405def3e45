"""The sync epoch loop: all island groups meet at each epoch boundary.

Each epoch, every group runs ``islands.migration_interval`` generations and returns a small
summary; the loop merges them (:mod:`isles.islands.results`), runs the master plug-in on the
slaves' bests when it runs beside the loop, and plans the next migration
(:mod:`isles.islands.planner`). With one in-process group the epochs run in batches on the
device (:meth:`isles.islands.group.IslandGroup.run_epochs`), one host synchronisation per batch.
Several Ray actors run spans of epochs themselves (:meth:`IslandGroup.run_span`); with a plug-in,
each hosts an identical replica of it (:mod:`isles.islands.replica`).
"""
from __future__ import annotations

import logging
import pickle
import time
from typing import NamedTuple

import numpy as np

from isles.algorithms.core.population import Population
from isles.islands import checkpoint
from isles.islands.build import build_algorithm, build_evaluator
from isles.islands.executor import Local
from isles.islands.planner import group_plan, migration_edges
from isles.islands.plugin import plugin_stream
from isles.islands.recovery import actor_died, loop_copy
from isles.islands.results import (RecordLog, best_of, epoch_record, merge_summaries, migration_log, payoff_total,
                                         run_result)

log = logging.getLogger("isles.islands.coordinator")

#: seconds of epochs in one batch of an in-process group (:meth:`IslandGroup.run_epochs`), and the
#: most epochs in one batch
BATCH_S = 0.2
MAX_BATCH = 1000


class Span(NamedTuple):
    """A span of epochs started in every group's actor (:meth:`SyncLoop._start_span`)."""

    span: int  #: its id
    ks: list  #: generations of each epoch
    refs: list  #: the groups' calls (Ray object refs, or in-process results)
    t0: float  #: when it started (``time.perf_counter()``)
    scheduled: int  #: the epoch of the last snapshot scheduled, up to this span


class SyncLoop:
    """The sync loop of :class:`isles.islands.coordinator.Coordinator` (a mix-in)."""

    def _host_plugin(self):
        """The loop's plug-in (the config's ``master``) on the host, beside this loop: for several
        groups, whose bests meet here (one in-process group hosts it itself, :meth:`IslandGroup.attach`)."""
        evaluator = build_evaluator(self.cfg["problem"], self.cfg["constraints"])
        return self.master.plugin(np, np.dtype(self.cfg["dtype"]), evaluator, self.seed,
                                  plugin_stream(self.n))

    def _hosts_plugin(self, groups) -> bool:
        """Whether the groups host the loop's plug-in rather than the driver: one in-process group
        (beside its islands, :meth:`IslandGroup.run_epochs`), or several Ray actors (an identical
        replica in each, :mod:`isles.islands.replica`). ``False`` without a plug-in."""
        local = len(groups) == 1 and isinstance(groups[0], Local)
        return self.master is not None and (local or self.use_ray)

    def _attach(self, groups, state: dict | None) -> None:
        """Attach the plug-in to every group (:meth:`IslandGroup.attach`), from ``state`` (the
        loop's ``master_state``): the same factory, seed, stream and state in each."""
        self._gather([self._call(g, "attach", self.master, self.seed, plugin_stream(self.n), state) for g in groups])

    def _plan_migration(self, epoch: int, emigrants: dict, master_best, placement):
        """Per group: ``(inbound, remote)`` for the next epoch (see :meth:`IslandGroup.run_epoch`).

        ``emigrants``: ``{island id: Population (1, k)}``; ``master_best``: the master swarm's
        best as a Population ``(1, 1)``, or ``None`` when the one group hosts the master."""
        edges = migration_edges(self.topology, self.n, self.seed, epoch)
        send_master = self.master is not None and self.cfg["islands"]["master_sends_best"]
        return [group_plan(edges, ids, emigrants, master_best, send_master) for ids in placement.groups]

    def _run_sync(self, groups, placement, resume: dict | None = None):
        """The sync epoch loop, a generator: yields each epoch's record, returns the
        :class:`RunResult` (driven by :meth:`_drive`, or in an actor by :class:`Archipelago`).

        ``resume``: a snapshot (:meth:`_snapshot`) to continue from; without it, the checkpoint
        of ``checkpoint.resume`` (:attr:`resume_from`), or the run starts afresh.

        **Lost actors.** At the start and every ``islands.snapshot_every`` epochs the loop keeps
        a snapshot in memory (every group's state as host arrays, and the loop's own variables;
        :attr:`last_snapshot`). When an actor dies during an epoch (SIGKILL, out of memory, a
        lost node), Ray restarts it (``islands.max_restarts``), every group is set back to the
        snapshot and the epochs since are run again: the counter-based random numbers make the
        result the same as without the failure. Records of epochs already yielded are not
        yielded again.
        """
        ck = self.cfg["checkpoint"]
        resume = resume if resume is not None else self.resume_from
        if resume is not None:  # states are per island: any grouping (number of actors) resumes
            axes = build_algorithm(self.cfg["algorithm"]).island_axes  # where each state field has its islands
            self._load_groups(groups, checkpoint.regroup(resume["states"], resume["groups"], placement.groups, axes))
            loop = loop_copy(resume)
        else:
            loop = {"done_gens": 0, "epoch": 0, "best": None, "master_state": None,
                    "pending": None, "history": RecordLog(), "migrations": migration_log()}
        every = int(self.cfg["islands"]["snapshot_every"])
        local = len(groups) == 1 and isinstance(groups[0], Local)  # every island, in this process
        hosted = self._hosts_plugin(groups)
        plugin = self._host_plugin() if self.master is not None and not hosted else None  # else the groups'
        if hosted:  # the plug-in lives beside the islands, on their device (a replica in each actor)
            self._attach(groups, loop["master_state"])
        snapshot = self.last_snapshot = self._snapshot(groups, placement, loop) if every else None
        restarts, yielded, hits, epoch_s, span = 0, loop["epoch"], None, None, 0
        # spans: the one started ahead (_start_ahead) and the epoch of the last snapshot scheduled
        ahead, scheduled = None, snapshot["epoch"] if every else 0
        # several Ray actors: each runs the epochs itself (run_span), a plug-in replicated in each
        spmd = self.use_ray and not local
        t0 = time.perf_counter()
        while loop["done_gens"] < self.generations:
            try:
                if local:  # a batch of epochs on the device, one host synchronisation
                    t_batch = time.perf_counter()
                    plans = self._local_plans(loop, self._batch_len(loop, epoch_s, ck), placement)
                    epochs = [(p[0], {0: s}) for p, s in zip(plans, groups[0].run_epochs(plans))]
                    epoch_s = (time.perf_counter() - t_batch) / len(plans)
                elif spmd:  # a span of epochs in every actor, emigrants from peer to peer
                    if ahead is None:  # none started ahead: start this one now
                        span += 1
                        ahead = self._start_span(groups, placement, loop["epoch"], loop["done_gens"], loop["pending"],
                                                 self._batch_len(loop, epoch_s, ck), span, scheduled)
                    started, ahead = ahead, None
                    scheduled = started.scheduled
                    epochs = self._end_span(groups, started)
                    epoch_s = (time.perf_counter() - started.t0) / len(epochs)
                    # the next span starts before this one's books (the driver's, while the actors evolve)
                    ahead = self._start_ahead(groups, placement, loop, epochs, epoch_s, span + 1, scheduled)
                    span += ahead is not None
                else:
                    k = min(self.interval, self.generations - loop["done_gens"])
                    migration = (self._plan_migration(*loop["pending"], placement) if loop["pending"]
                                 else [({}, {}) for _ in groups])
                    epochs = [(k, self._gather([self._call(g, "run_epoch", k, *migration[i])
                                                for i, g in enumerate(groups)]))]
                # the epochs' books, snapshots and checkpoints: an actor found lost here (e.g. by
                # the snapshot's call) restarts like one lost during the epochs
                for j, (k, summaries) in enumerate(epochs):
                    record, emigrants, master_pop, hits = self._epoch_done(loop, k, summaries, plugin, t0)
                    if record.epoch > yielded:
                        yielded = record.epoch
                        yield record
                    if hits is not None and np.all(hits >= 0):  # every island reached the stop target
                        return run_result(loop["best"], loop["history"], loop["done_gens"], t0,
                                          loop["migrations"], hits)
                    # the next epoch's migration, kept per island (the plan per group is made from it); kept
                    # after the last epoch too, so that a resume with more generations goes on exactly
                    epoch = loop["epoch"]
                    loop["pending"] = (epoch, emigrants, master_pop)
                    last = loop["done_gens"] >= self.generations
                    # a snapshot once `every` epochs have passed: at the end of a batch (the groups'
                    # states are those of its last epoch), or in a span after the epoch whose
                    # summaries carry the groups' states (IslandGroup._keep_snapshot)
                    carried = {i: sm["snapshot"] for i, sm in summaries.items() if "snapshot" in sm}
                    carried = carried if len(carried) == len(groups) else None
                    if every and (j == len(epochs) - 1 or carried) and epoch - snapshot["epoch"] >= every:
                        snapshot = self.last_snapshot = self._snapshot(groups, placement, loop, carried)
                    if ck["every"] and (epoch % int(ck["every"]) == 0 or last):
                        fresh = snapshot if snapshot is not None and snapshot["epoch"] == epoch else \
                            self._snapshot(groups, placement, loop)
                        checkpoint.save(ck["path"], fresh)
            except Exception as err:
                if snapshot is None or not actor_died(err) or restarts >= self.max_restarts:
                    raise
                restarts += 1
                if ahead is not None:  # a span started ahead waits for the lost actor: abort it
                    self._abort(groups, ahead.span)
                    ahead = None
                self._link = None  # the communicator or channels are formed again with the restarted actor
                log.warning("an island-group actor died in epoch %d (%s); restored the snapshot of epoch %d "
                            "(restart %d of %d)", loop["epoch"] + 1, type(err).__name__, snapshot["epoch"],
                            restarts, self.max_restarts)
                self._load_groups(groups, snapshot["states"])
                if self.use_ray:
                    infos = self._gather([self._call(g, "info") for g in groups])
                    self._relocated([infos[i] for i in range(len(groups))])
                loop = loop_copy(snapshot)
                scheduled = snapshot["epoch"]
                if hosted:  # every replica (the restarted one afresh) from the snapshot's state
                    self._attach(groups, loop["master_state"])
                continue
        return run_result(loop["best"], loop["history"], loop["done_gens"], t0, loop["migrations"], hits)

    def _epoch_done(self, loop: dict, k: int, summaries: dict, plugin, t0: float):
        """Book one finished epoch of ``k`` generations into ``loop`` (counters, migrations, the
        master swarm's epoch when it runs here, the archipelago's best, the record).

        Returns:
            ``(record, emigrants by island (None inside a batch), master best as a Population
            (1, 1) or None, stop-target generations or None)``.
        """
        loop["done_gens"] += k
        loop["epoch"] = epoch = loop["epoch"] + 1
        bx, bf, bv, bg, emigrants, evals, nan, hits = merge_summaries(self.n, summaries)
        D = bx.shape[1]
        moved = [(epoch, *e) for i in sorted(summaries) for e in summaries[i]["migrations"]]
        loop["migrations"].extend(moved)
        master_best, master_pop, master_evals = None, None, 0
        if self.master is not None:
            hosted = summaries[0].get("master")  # every replica's is the same: group 0's is booked
            if hosted is not None:  # run by the group(s), on their device (run_epochs, run_span)
                mx, mf, mv, master_evals, master_nan = hosted
            else:  # the host plug-in, its state kept in the loop's variables (snapshots, restarts)
                plugin.load_state_dict(loop["master_state"])
                plugin.after_epoch(bx, bf, bv, k)
                loop["master_state"] = plugin.state_dict()
                mx, mf, mv = plugin.best()
                master_evals, master_nan = plugin.counters()
                master_nan = int(master_nan)
            master_best = (np.asarray(mx).reshape(1, D), np.asarray(mf).reshape(1), np.asarray(mv).reshape(1))
            master_pop = Population(master_best[0][None], master_best[1][None], master_best[2][None])
            nan += master_nan
        best = loop["best"]
        cand = ([(bx, bf, bv, bg)] + ([(*master_best, master_best[0])] if master_best else [])
                + ([best] if best else []))
        best = loop["best"] = best_of(cand)
        record = epoch_record(epoch=epoch, generation=loop["done_gens"], t0=t0, evaluations=evals + master_evals,
                              nan_evaluations=nan, best_f=best[1][0], best_v=best[2][0], island_best_f=bf,
                              island_best_v=bv, compute_s=max(s["compute_s"] for s in summaries.values()),
                              epoch_generations=k, hits=hits, payoff_evaluations=payoff_total(summaries),
                              migrations=moved,
                              plugin_metrics=None if master_best is None else {"master_best_f": master_best[1][0]})
        loop["history"].append(record)
        return record, emigrants, master_pop, hits

    def _start_span(self, groups, placement, epoch0: int, done_gens: int, pending, n_epochs: int, span: int,
                    scheduled: int) -> "Span":
        """Start the next ``n_epochs`` epochs in every group's actor (:meth:`IslandGroup.run_span`):
        the driver hands out the first epoch's migration (from ``pending``, the emigrants of the
        span before) and the epochs after which snapshots fall due (``islands.snapshot_every`` after
        ``scheduled``, the last one scheduled; those epochs' summaries bring the groups' states).

        Returns:
            the started :class:`Span`, for :meth:`_end_span`."""
        ks, gens = [], done_gens
        for _ in range(n_epochs):
            ks.append(min(self.interval, self.generations - gens))
            gens += ks[-1]
        every = int(self.cfg["islands"]["snapshot_every"])
        due = list(range(max(scheduled + every, epoch0 + 1), epoch0 + n_epochs + 1, every)) if every else []
        # a plug-in's best is each actor's own replica's (MASTER_ID: None, islands/replica.py)
        first = (self._plan_migration(*pending[:2], None, placement) if pending else [({}, {}) for _ in groups])
        if self._link is None and n_epochs > 1:
            self._link = self._form_links(groups)
        route = {"peers": list(groups), "groups": placement.groups, "topology": self.topology, "n": self.n,
                 "seed": self.seed, "timeout_s": self.restart_timeout_s, "nccl": self._link == "nccl",
                 "channels": self._link == "channel", "snapshots": due,
                 "send_master": self.master is not None and bool(self.cfg["islands"]["master_sends_best"])}
        method = "run_span_packed" if self.use_ray else "run_span"  # one bytes object through Ray
        refs = [self._call(g, method, span, first[i], ks, epoch0, {**route, "index": i}) for i, g in enumerate(groups)]
        return Span(span, ks, refs, time.perf_counter(), due[-1] if due else scheduled)

    def _end_span(self, groups, started: "Span") -> list:
        """The summaries of a span begun by :meth:`_start_span`; a lost actor aborts the span in the
        others (they stop waiting for its emigrants).

        Returns:
            ``[(generations, {group index: summary}), ...]``, one per epoch."""
        span, ks = started.span, started.ks
        out = self._gather(started.refs, on_error=lambda: self._abort(groups, span))
        out = {i: pickle.loads(v) if isinstance(v, bytes) else v for i, v in out.items()}  # noqa: S301 (our actors')
        return [(k, {i: out[i][j] for i in range(len(groups))}) for j, k in enumerate(ks)]

    def _start_ahead(self, groups, placement, loop: dict, epochs: list, epoch_s: float, span: int, scheduled: int):
        """Start the span after ``epochs`` (a span just ended, not yet booked in ``loop``) before the
        driver books them, so that the actors evolve while it does: its first migration comes from
        the last epoch's emigrants, as :meth:`_epoch_done` would keep them. ``None`` (the next span
        starts after the books) where the run ends with these epochs, every island reached the
        stop target, or a checkpoint falls due at their end (it asks the idle groups for their state).
        Returns the started :class:`Span`, or ``None``."""
        epoch, gens = loop["epoch"] + len(epochs), loop["done_gens"] + sum(k for k, _ in epochs)
        every_ck = int(self.cfg["checkpoint"]["every"] or 0)
        *_, emigrants, _, _, hits = merge_summaries(self.n, epochs[-1][1])  # as _epoch_done reads them
        if gens >= self.generations or (hits is not None and np.all(hits >= 0)) or (every_ck and epoch % every_ck == 0):
            return None
        n = self._batch_len({**loop, "epoch": epoch, "done_gens": gens}, epoch_s, self.cfg["checkpoint"])
        return self._start_span(groups, placement, epoch, gens, (epoch, emigrants), n, span, scheduled)

    def _form_links(self, groups) -> str:
        """Form the groups' links for the sync spans, by ``islands.transport``: ``"nccl"`` (auto or
        nccl: the groups' NCCL communicator where every group can join one,
        :mod:`isles.islands.exchange`), ``"channel"`` (auto or channel: shared-memory channels
        between the groups on one node, :mod:`isles.islands.channels`; posts between nodes),
        ``""`` (ray, or no two groups on one node: posts to the actors' inboxes only).

        Raises:
            ValueError: ``islands.transport=nccl`` and a group cannot use NCCL."""
        if self.transport in ("auto", "nccl"):
            uid = self._gather([self._call(groups[0], "nccl_unique_id")])[0]
            if uid is not None:
                self._gather([self._call(g, "nccl_join", uid, len(groups), i) for i, g in enumerate(groups)])
                log.info("emigrants between the %d actors' GPUs over NCCL", len(groups))
                return "nccl"
            if self.transport == "nccl":
                raise ValueError("islands.transport=nccl: the island groups cannot use NCCL (device=cpu, or CuPy "
                                 "without NCCL); allowed values here are auto|ray|channel")
        if self.transport in ("auto", "channel") and self._form_channels(groups):
            return "channel"
        return ""

    def _form_channels(self, groups) -> bool:
        """Shared-memory channels between every two groups on one node: each group creates those it
        writes (:meth:`IslandGroup.channels_make`), then each reads its own
        (:meth:`IslandGroup.channels_join`). ``False`` where no two groups share a node."""
        nodes = [info.get("node_id") for info in self.group_infos]  # where each runs now (_started, _relocated)
        readers = [{j: (groups[j], nodes[j]) for j in range(len(groups)) if j != i and nodes[j] == nodes[i]}
                   for i in range(len(groups))]
        if None in nodes or not any(readers):
            return False
        made = self._gather([self._call(g, "channels_make", readers[i]) for i, g in enumerate(groups)])
        self._gather([self._call(g, "channels_join", {i: made[i][j] for i in range(len(groups)) if j in made[i]})
                      for j, g in enumerate(groups)])
        log.info("emigrants between the %d actors through shared-memory channels (%d pairs on one node)",
                 len(groups), sum(map(len, readers)))
        return True

    def _abort(self, groups, span: int) -> None:
        """Abort ``span`` in every group that is still there (a peer was lost)."""
        import ray  # noqa: PLC0415

        for ref in [g.abort.remote(span) for g in groups]:
            try:
                ray.get(ref, timeout=5)
            except Exception:  # noqa: BLE001, S110  (the lost group)
                pass

    def _batch_len(self, loop: dict, epoch_s: float | None, ck: dict) -> int:
        """Epochs in the next batch of an in-process group: one first (it includes compilation and
        graph capture), then about :data:`BATCH_S` seconds' worth (at most :data:`MAX_BATCH`),
        ending at the run's end and at every checkpoint epoch (snapshots are taken at the end of
        the batch in which they fall due)."""
        left = -(-(self.generations - loop["done_gens"]) // self.interval)
        n = 1 if epoch_s is None else int(BATCH_S / max(epoch_s, 1e-7))
        n = max(1, min(n, MAX_BATCH, left))
        period = int(ck["every"] or 0)
        return min(n, period - loop["epoch"] % period) if period else n

    def _local_plans(self, loop: dict, n_epochs: int, placement) -> list:
        """``(generations, inbound, remote)`` of the next ``n_epochs`` epochs of the one group
        (:meth:`IslandGroup.run_epochs`): the same topology samples as epoch by epoch; every
        source is an island of the group, and the master's best is the group's own."""
        plans, gens, pending = [], loop["done_gens"], loop["pending"]
        for j in range(n_epochs):
            k = min(self.interval, self.generations - gens)
            if j == 0 and pending is None:
                plans.append((k, {}, {}))
            else:
                ((inbound, remote),) = self._plan_migration(loop["epoch"] + j, pending[1] if j == 0 else {},
                                                            None, placement)
                plans.append((k, inbound, remote))
            gens += k
        return plans

