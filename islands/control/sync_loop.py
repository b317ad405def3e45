"""The sync epoch loop: all island groups meet at each epoch boundary.

Every group runs spans of epochs itself (:meth:`isles.islands.group.IslandGroup.run_span`): in
Ray actors, or in this process, one thread per group (``use_ray=False``), emigrants from peer to
peer. The driver starts each span (its first epoch's migration from the emigrants of the span
before), books the epochs' summaries into records, keeps snapshots and writes checkpoints between
spans. Each group runs an identical replica of every plug-in (:mod:`isles.islands.plugin`).
"""

from __future__ import annotations

import logging
import pickle
import time
from dataclasses import dataclass, replace

from isles.islands.config.build import build_algorithm
from isles.islands.control import checkpoint
from isles.islands.control.books import Merged, book_epoch, merge_summaries
from isles.islands.control.placement import Balancer
from isles.islands.control.recovery import loop_copy
from isles.islands.migration.planner import group_plan, migration_edges
from isles.islands.mixed import layout_of
from isles.islands.records import LoopState, Plan, Route, SpanOrder
from isles.islands.results import RecordLog, migration_log, run_result
from isles.islands.transport.kinds import POSTS

log = logging.getLogger("isles.islands.coordinator")

#: seconds of epochs in one span, and the most epochs in one span
BATCH_S = 0.2
MAX_BATCH = 1000


@dataclass
class Span:
    """A span of epochs started in every group (:meth:`SyncLoop.start_span`)."""

    span: int  #: its id
    ks: list  #: generations of each epoch
    refs: list  #: the groups' calls (Ray object refs, or in-process futures)
    t0: float  #: when it started (``time.perf_counter()``)
    scheduled: int  #: the epoch of the last snapshot scheduled, up to this span


class Schedule:
    """What a run's schedule (:class:`SyncLoop`, :class:`isles.islands.control.async_loop.AsyncLoop`)
    takes from its coordinator.

    Args:
        co: the :class:`isles.islands.coordinator.Coordinator` (its run's sizes, ``topology``,
            ``executor``, ``recovery`` and ``resume_from``).
    """

    def __init__(self, co):
        self.co, self.ex, self.recovery = co, co.executor, co.recovery
        self.n, self.seed, self.topology = co.n, co.seed, co.topology
        #: the config's sections a schedule reads (typed: :mod:`isles.islands.config.schema`)
        self.isl, self.ck, self.algorithm = co.config.islands, co.config.checkpoint, co.config.algorithm
        self.generations, self.interval = co.generations, co.interval
        #: the run's epochs that end on the migration grid (every ``islands.migration_interval``
        #: generations): all of them, or all but a last one cut short by ``generations`` (or the budget's)
        self.whole_epochs = self.generations // self.interval

    def checkpoint_due(self, epoch: int) -> bool:
        """Whether a checkpoint is written after ``epoch``: every ``checkpoint.every`` epochs and after
        the run's last whole epoch (:attr:`whole_epochs`), never after a last epoch cut short. A run
        that resumes from a checkpoint inside an epoch would start its next epoch there, off the
        uninterrupted run's epochs and migrations; from the last whole epoch it runs the cut-short
        epoch again, whole or as far as its generations go, and is the uninterrupted run bit for bit."""
        every = int(self.ck.every or 0)
        return bool(every) and epoch <= self.whole_epochs and (epoch % every == 0 or epoch == self.whole_epochs)

    def prepare(self, placement) -> None:
        """What the schedule starts before the groups (``placement``: the run's
        :class:`isles.islands.control.placement.Placement`), so it starts while they do; nothing here."""


class SyncLoop(Schedule):
    """The sync schedule of a run: spans of epochs in every group, the books between them
    (constructed as :class:`Schedule`)."""

    def run(self, groups, placement):
        """The sync epoch loop, a generator: yields each epoch's record, returns the :class:`RunResult`.

        It continues from the checkpoint of ``checkpoint.resume`` (the coordinator's ``resume_from``),
        or the run starts afresh.

        **Lost actors.** At the start and every ``islands.snapshot_every`` epochs the loop keeps
        a snapshot in memory (every group's state as host arrays, and the loop's own variables;
        the recovery's ``last_snapshot``). When an actor dies during an epoch (SIGKILL, out of memory, a
        lost node), Ray restarts it (``islands.max_restarts``), every group is set back to the
        snapshot and the epochs since are run again: the counter-based random numbers make the
        result the same as without the failure. Records of epochs already yielded are not
        yielded again.
        """
        ck, resume, recovery = self.ck, self.co.resume_from, self.recovery
        if resume is not None:  # states are per island: any grouping (number of actors) resumes
            loop = loop_copy(resume)
            recovery.load(
                groups,
                self.regrouped(resume["states"], resume["groups"], placement.groups),
                loop.plugins,
            )
        else:
            loop = LoopState(0, 0, None, None, None, RecordLog(), migration_log())
        every = int(self.isl.snapshot_every)
        snapshot = recovery.snapshot(groups, placement, loop) if every else None
        if loop.epoch == self.whole_epochs and self.checkpoint_due(loop.epoch) and loop.done_gens < self.generations:
            # no whole epoch is left (a run shorter than one epoch): its final checkpoint is its start
            checkpoint.save(ck.path, snapshot or recovery.snapshot(groups, placement, loop))
        yielded, hits, epoch_s, span = loop.epoch, None, None, 0
        balancer = Balancer(self.ex, groups)  # islands spread over the actors by measured cost
        # spans: the one started ahead (_start_ahead) and the epoch of the last snapshot scheduled
        ahead, scheduled = None, snapshot["epoch"] if every else 0
        t0 = time.perf_counter()
        while loop.done_gens < self.generations:
            try:
                if ahead is None:  # none started ahead: start this one now
                    span += 1
                    ahead = self.start_span(
                        groups,
                        placement,
                        loop.epoch,
                        loop.done_gens,
                        loop.pending,
                        self.batch_len(loop, epoch_s),
                        span,
                        scheduled,
                    )
                started, ahead = ahead, None
                scheduled = started.scheduled
                # each epoch's summaries merged once (books.Merged), for its books and the span started ahead
                epochs = [(k, s, merge_summaries(self.n, s)) for k, s in self.end_span(groups, started)]
                epoch_s = (time.perf_counter() - started.t0) / len(epochs)
                spread = balancer.due(placement.groups, len(epochs))  # islands to move after the books
                # the next span starts before this one's books (the driver's, while the groups evolve)
                ahead = (
                    None if spread else self.start_ahead(groups, placement, loop, epochs, epoch_s, span + 1, scheduled)
                )
                span += ahead is not None
                # the epochs' books, snapshots and checkpoints: an actor found lost here (e.g. by
                # the snapshot's call) restarts like one lost during the epochs
                for j, (k, summaries, merged) in enumerate(epochs):
                    record, hits = self.epoch_done(loop, k, summaries, merged, t0), merged.hits
                    if record.epoch > yielded:
                        yielded = record.epoch
                        yield record
                    if merged.all_hit:  # every island reached the stop target
                        return run_result(loop.best, loop.history, loop.done_gens, t0, loop.migrations, hits)
                    # the next epoch's migration, kept per island; kept after the last whole epoch too,
                    # so that a resume with more generations goes on exactly
                    epoch = loop.epoch
                    loop.pending = (epoch, merged.emigrants)
                    # a snapshot once `every` epochs have passed: at the end of a span (the groups'
                    # states are those of its last epoch), or in a span after the epoch whose
                    # summaries carry the groups' states (IslandGroup._keep_snapshot); never after a
                    # last epoch cut short (checkpoint_due: an interrupt's checkpoint resumes exactly)
                    carried = [sm.snapshot for sm in summaries.values()]
                    carried = carried if all(c is not None for c in carried) else None
                    due = every and (j == len(epochs) - 1 or carried) and epoch - snapshot["epoch"] >= every
                    if due and epoch <= self.whole_epochs:
                        snapshot = recovery.snapshot(groups, placement, loop, carried)
                    if self.checkpoint_due(epoch):
                        fresh = (
                            snapshot
                            if snapshot is not None and snapshot["epoch"] == epoch
                            else recovery.snapshot(groups, placement, loop)
                        )
                        checkpoint.save(ck.path, fresh)
                if spread and loop.done_gens < self.generations:
                    got = self.ex.gather([self.ex.call(g, "state_dict") for g in groups])
                    balancer.move(placement, spread, [got[i] for i in range(len(groups))], self.regrouped)
                    log.info("islands spread over the actors by measured cost: %s", placement.groups)
                    if every:  # the snapshot a lost actor goes back to, in the new grouping
                        snapshot = recovery.snapshot(groups, placement, loop)
                        scheduled = snapshot["epoch"]
            except Exception as err:
                recovery.recover(err, snapshot)
                if ahead is not None:  # a span started ahead waits for the lost actor: abort it
                    self.ex.abort(groups, ahead.span)
                    ahead = None
                self.ex.link = None  # the communicator or channels are formed again with the restarted actor
                log.warning(
                    "an island-group actor died in epoch %d (%s); restored the snapshot of epoch %d (restart %d of %d)",
                    loop.epoch + 1,
                    type(err).__name__,
                    snapshot["epoch"],
                    recovery.restarts,
                    recovery.max_restarts,
                )
                loop = loop_copy(snapshot)
                recovery.restore(groups, list(range(len(groups))), snapshot["states"], loop.plugins)
                if balancer.moved:  # a restarted actor holds the islands it was started with: the snapshot's
                    groups_then = snapshot["groups"]
                    balancer.move(placement, groups_then, snapshot["states"], self.regrouped, loop.plugins, groups_then)
                scheduled = snapshot["epoch"]
                continue
        return run_result(loop.best, loop.history, loop.done_gens, t0, loop.migrations, hits)

    def regrouped(self, states: list, old: list, new: list) -> list:
        """A checkpoint's group ``states`` of the islands grouped as ``old``, grouped as ``new``
        (:meth:`isles.islands.mixed.Whole.regroup`: by the algorithm's ``island_axes``; a mixed batch each
        family's part by its own)."""
        return layout_of(build_algorithm(self.algorithm)).regroup(states, old, new)

    def epoch_done(self, loop: LoopState, k: int, summaries: dict, merged: Merged, t0: float):
        """Book one finished epoch of ``k`` generations, its ``summaries`` merged as ``merged``, into
        ``loop`` (the counters, then :func:`isles.islands.control.books.book_epoch`); returns its record."""
        loop.done_gens += k
        loop.epoch = epoch = loop.epoch + 1
        # by destination island: the same order however the islands are grouped (Balancer moves them)
        moved = sorted(((epoch, *e) for i in sorted(summaries) for e in summaries[i].migrations), key=lambda m: m[2])
        compute_s = max(s.compute_s for s in summaries.values())
        return book_epoch(
            loop, self.n, summaries, merged, t0, epoch, loop.done_gens, k, compute_s, moved, books=self.co.books
        )

    def start_span(
        self, groups, placement, epoch0: int, done_gens: int, pending, n_epochs: int, span: int, scheduled: int
    ) -> Span:
        """Start the next ``n_epochs`` epochs in every group (:meth:`IslandGroup.run_span`): the driver
        hands out the first epoch's migration (from ``pending``, the emigrants of the span before) and
        the epochs after which snapshots fall due (``islands.snapshot_every`` after ``scheduled``, the
        last one scheduled; those epochs' summaries bring the groups' states).

        Returns:
            the started :class:`Span`, for :meth:`end_span`."""
        ks, gens = [], done_gens
        for _ in range(n_epochs):
            ks.append(min(self.interval, self.generations - gens))
            gens += ks[-1]
        # several groups keep a snapshot inside the span (their summaries carry the states, so a span need
        # not end there); one group keeps it at the span's end only, so its replays run the whole span. The
        # summaries carry it in both cases: the span started ahead (start_ahead) is already changing the
        # state when the driver books these epochs, so a state asked for then would be a later epoch's
        every, end = int(self.isl.snapshot_every), epoch0 + n_epochs
        if not every:
            due = ()
        elif len(groups) > 1:  # none after a last epoch cut short (run's snapshot rule)
            due = tuple(range(max(scheduled + every, epoch0 + 1), min(end, self.whole_epochs) + 1, every))
        else:
            due = (end,) if end - scheduled >= every and end <= self.whole_epochs else ()
        if pending:
            edges = migration_edges(self.topology, self.n, self.seed, pending[0])
            first = [Plan(*group_plan(edges, ids, pending[1])) for ids in placement.groups]
        else:
            first = [Plan() for _ in groups]
        if self.ex.link is None and n_epochs > 1 and len(groups) > 1:
            self.ex.form_links(groups)
        route = Route(
            0,
            placement.groups,
            self.topology,
            self.n,
            self.seed,
            self.recovery.timeout_s,
            list(groups),
            self.ex.link or POSTS,
        )
        method = "run_span_packed" if self.ex.use_ray else "run_span"  # one bytes object through Ray
        refs = [
            self.ex.call(g, method, SpanOrder(span, ks, epoch0, replace(route, index=i), first[i], due))
            for i, g in enumerate(groups)
        ]
        return Span(span, ks, refs, time.perf_counter(), due[-1] if due else scheduled)

    def end_span(self, groups, started: Span) -> list:
        """The summaries of a span begun by :meth:`start_span`; a lost group aborts the span in the
        others (they stop waiting for its emigrants).

        Returns:
            ``[(generations, {group index: EpochSummary}), ...]``, one per epoch."""
        out = self.ex.gather(started.refs, on_error=lambda: self.ex.abort(groups, started.span))
        out = {i: pickle.loads(v) if isinstance(v, bytes) else v for i, v in out.items()}  # noqa: S301 (our actors')
        return [(k, {i: out[i][j] for i in range(len(groups))}) for j, k in enumerate(started.ks)]

    def start_ahead(self, groups, placement, loop: LoopState, epochs: list, epoch_s: float, span: int, scheduled: int):
        """Start the span after ``epochs`` (a span just ended, ``[(generations, summaries, Merged)]``, not yet booked in ``loop``) before the
        driver books them, so that the groups evolve while it does: its first migration comes from
        the last epoch's emigrants, as :meth:`epoch_done` would keep them. ``None`` (the next span
        starts after the books) where the run ends with these epochs, every island reached the
        stop target, or a checkpoint falls due at their end (it asks the idle groups for their state).
        Returns the started :class:`Span`, or ``None``."""
        epoch, gens, last = loop.epoch + len(epochs), loop.done_gens + sum(k for k, *_ in epochs), epochs[-1][2]
        if gens >= self.generations or last.all_hit or self.checkpoint_due(epoch):
            return None
        n = self.batch_len(replace(loop, epoch=epoch, done_gens=gens), epoch_s)
        return self.start_span(groups, placement, epoch, gens, (epoch, last.emigrants), n, span, scheduled)

    def batch_len(self, loop: LoopState, epoch_s: float | None) -> int:
        """Epochs in the next span: one first (it includes compilation and graph capture), then about
        :data:`BATCH_S` seconds' worth (at most :data:`MAX_BATCH`), ending at the run's end and at
        every checkpoint epoch (:meth:`checkpoint_due`; snapshots are taken at the end of the span in
        which they fall due)."""
        left = -(-(self.generations - loop.done_gens) // self.interval)
        n = 1 if epoch_s is None else int(BATCH_S / max(epoch_s, 1e-7))
        n = max(1, min(n, MAX_BATCH, left))
        period = int(self.ck.every or 0)
        if not period:
            return n
        n = min(n, period - loop.epoch % period)
        return min(n, self.whole_epochs - loop.epoch) if loop.epoch < self.whole_epochs else n
