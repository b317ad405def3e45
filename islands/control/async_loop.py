"""The async schedule (``islands.mode=async``): no island group waits for another.

Each group runs its epochs back to back in its actor (one Ray streaming call of
:meth:`isles.islands.group.IslandGroup.run_async`), as pagmo's archipelago does: after each
epoch it posts its emigrants to the inboxes of the groups that the plan of its own epoch sends
them to (fire and forget), and before each epoch it immigrates whatever has arrived
(:class:`isles.islands.transport.link.Arrivals`) and, between its own islands, what the plan of its
last epoch sends them (:mod:`isles.islands.migration.planner`). The driver only reads: it collects
the groups' epoch summaries as they come (``ray.wait`` over the streams), books one record per
completed group epoch (progress, MLflow and the final summary as in sync mode) and keeps every
group's latest snapshot, carried in its summaries (the driver never calls a running group).

**The budget** (``islands.async_budget``). The run's work is ``n_islands x generations``
island-generations (``generations``, or those that ``stop.max_evaluations`` buys). ``shared`` (the
default): one pool of them (:class:`isles.islands.control.pool.SharedBudget`, a tiny Ray actor) that
each group draws its next epoch from (up to ``migration_interval`` generations) while any is left,
so the groups whose islands are cheaper run more generations and every actor works to about the
end (with fixed shares the fast actors idled while the slowest worked); grants keep the last
island-generation spendable, so the total is exact. ``island``: each island runs ``generations``
itself. The run ends when the pool is spent (``island``: every group has run its generations) or
every island has reached the stop target.

**Reproducible**: the random numbers (every draw from (seed, island, generation, draw), on any
actor); the run's total island-generations and evaluations (the budget, exactly); with
``island`` also each island's counters (generations, evaluations); and the result on one actor
(the sync run's bit for bit, either budget: a lone group draws the sync run's epochs) or, with
``island``, where no migrant crosses actors (a topology whose edges stay inside the groups, e.g.
unconnected). **Not reproducible**: which emigrants of other actors have arrived when a group
starts an epoch (the actors' relative speed), hence the trajectories and the best found when
migrants cross actors; with ``shared`` also each island's generations (its actor's share of the
pool); a resumed or restarted async run is not the uninterrupted one either, its total counters
are (a group restarted from its snapshot gives back to the pool what it claimed since: nothing is
lost or spent twice).
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import time
from dataclasses import dataclass, fields, replace
from typing import Any

from isles.islands.control import checkpoint
from isles.islands.control.books import book_epoch, merge_summaries
from isles.islands.control.pool import Claims, SharedBudget, shares_itself
from isles.islands.control.sync_loop import Schedule
from isles.islands.records import EpochSummary, Plan, Route, SpanOrder
from isles.islands.results import RecordLog, migration_log, run_result

log = logging.getLogger("isles.islands.coordinator")

SETTLE_S = 5.0
"""How long a run that ends with groups still running waits for their streams to end (:func:`settle`), in seconds."""


@dataclass
class Part:
    """A group's latest snapshot in an async run: its ``state`` (host arrays), its generations per
    island ``gens`` and epochs ``epochs`` then, and its ``summary`` of that epoch (``None`` at the start)."""

    state: dict
    gens: int = 0
    epochs: int = 0
    summary: EpochSummary | None = None


@dataclass
class AsyncState:
    """The async driver's variables between completions (what its snapshot holds besides the states).

    Attributes:
        summaries: each group's latest :class:`isles.islands.records.EpochSummary` ``{group index: summary}``.
        gens, epochs: each group's generations per island and epochs done.
        history, migrations: the run's :class:`isles.islands.results.RecordLog` s.
        best: the archipelago's best (:func:`isles.islands.results.best_of`) or ``None``.
        completions: the group epochs completed (the records' ``epoch``).
    """

    summaries: dict
    gens: list
    epochs: list
    history: Any
    migrations: Any
    best: Any = None
    completions: int = 0

    @classmethod
    def fresh(cls, n_groups: int) -> AsyncState:
        """The state of a run that starts: ``n_groups`` groups, nothing done."""
        return cls({}, [0] * n_groups, [0] * n_groups, RecordLog(), migration_log())

    @classmethod
    def of(cls, saved: dict) -> AsyncState:
        """The state of a checkpoint's ``async`` section (:meth:`saved`), copied (its ``done`` left out)."""
        got = cls(**{f.name: saved[f.name] for f in fields(cls)})
        got.summaries, got.gens, got.epochs = dict(got.summaries), list(got.gens), list(got.epochs)
        got.history = RecordLog.of(got.history)  # a list: a checkpoint of before the logs
        got.migrations = migration_log(got.migrations)
        return got

    def saved(self, parts: list, done: int | None) -> dict:
        """A snapshot's ``async`` section (what a checkpoint holds, a plain dict): every group's
        latest :class:`Part` with the loop's variables, and ``done`` (the shared pool's spent
        generations per island, :func:`isles.islands.control.checkpoint.generations_done`) where not ``None``."""
        out = {
            "summaries": {i: p.summary for i, p in enumerate(parts) if p.summary is not None},
            "gens": [p.gens for p in parts],
            "epochs": [p.epochs for p in parts],
            "history": self.history.copy(),
            "migrations": self.migrations.copy(),
            "best": self.best,
            "completions": self.completions,
        }
        return out if done is None else {**out, "done": done}


def settle(streams, timeout_s: float = SETTLE_S) -> None:
    """Read and drop what the groups' streams ``streams`` (the Ray ``ObjectRefGenerator`` objects of
    :meth:`isles.islands.group.IslandGroup.run_async`, their actors stopped) still hold, until each
    has ended or ``timeout_s`` seconds have passed.

    A stream dropped with an error in it that was never read (another group's failure when one
    group's failed the run: both ran the same user problem; or a claim on the pool, killed after
    the run) makes Ray print that error's traceback as an ``Unhandled error`` when the stream is
    garbage-collected; the run's own error line is all a user should see. Errors that come after a
    stream was dropped, and an actor's death, Ray does not print: the streams of stopped actors
    end at once with it (Ray 2.60, ``CoreWorkerMemoryStore``)."""
    import ray  # noqa: PLC0415

    deadline, pending = time.monotonic() + timeout_s, list(streams)
    while pending:
        left = deadline - time.monotonic()
        ready, _ = ray.wait(pending, num_returns=1, timeout=max(0.0, left)) if left > 0 else ([], None)
        if not ready:
            return
        try:
            ray.get(next(ready[0]), timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001  (StopIteration: the stream ended; an error ends it too)
            pending.remove(ready[0])


class AsyncLoop(Schedule):
    """The async schedule of a run: each group's epochs back to back in its actor, the driver
    collecting (constructed as :class:`isles.islands.control.sync_loop.Schedule`)."""

    pool = None  #: the shared pool's actor (:meth:`prepare`), or ``None``

    def prepare(self, placement) -> None:
        """Start the shared pool's actor (``islands.async_budget=shared``,
        :class:`isles.islands.control.pool.SharedBudget`) on the driver's node, before the groups: a
        Ray actor takes about half a second to start, which it then does while they start (started in
        :meth:`run`, it stalled the groups' second epochs). Runs whose families share the budget per
        island themselves (:func:`isles.islands.control.pool.shares_itself`), in-process groups, and
        ``islands.async_budget=island`` have none."""
        self.pool = None
        if self.isl.async_budget != "shared" or shares_itself(self.co.cfg) or not self.ex.use_ray:
            return
        import ray  # noqa: PLC0415
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

        sizes = [len(ids) for ids in placement.groups]
        saved = self.co.resume_from  # a resumed run's pool holds what its groups had not run
        done = list(saved["async"]["gens"]) if saved is not None else [0] * len(sizes)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.pool = (
            ray.remote(SharedBudget)
            .options(num_cpus=0, max_restarts=0, scheduling_strategy=here)
            .remote(sizes, done, self.n * self.generations)
        )

    def run(self, groups, placement):
        """The async loop, a generator like :meth:`isles.islands.control.sync_loop.SyncLoop.run`: yields a
        record per completed group epoch (``epoch``: completions so far; ``generation``: the slowest
        group's), returns the :class:`isles.islands.results.RunResult`.

        **Snapshots and lost actors.** Each group's state is taken at the start, then carried in its
        summaries after every ``islands.snapshot_every``-th of its epochs (``checkpoint.every`` where
        that is 0) and after its last one: nothing stops. The recovery's ``last_snapshot`` holds every
        group's latest state with the loop's variables (what a checkpoint saves, every
        ``checkpoint.every`` completions and at the end, and ``checkpoint.resume`` continues with the
        same grouping). A group whose actor dies is restarted by Ray and goes back to its own last
        state alone (with the shared pool, what it had claimed since returns to the pool); the other
        groups go on. A resumed run's pool holds what the checkpoint's groups had not run.

        Raises:
            ValueError: without Ray actors (``use_ray=False``).
        """
        import ray  # noqa: PLC0415

        if not self.ex.use_ray:
            raise ValueError("islands.mode=async needs Ray actors")
        if self.pool is None:  # not prepared (the schedule run by hand): started now
            self.prepare(placement)
        run, hits = AsyncRun(self, groups, placement), None
        run.publish()
        streams = {
            run.start(i): i for i in range(len(groups)) if run.pool is not None or run.loop.gens[i] < self.generations
        }
        try:  # the pool goes with the run
            while streams:
                ready, _ = ray.wait(list(streams), num_returns=1)
                i = streams[ready[0]]
                try:
                    s = pickle.loads(ray.get(next(ready[0])))  # noqa: S301  (our actors')
                except StopIteration:
                    del streams[ready[0]]
                    continue
                except Exception as err:
                    del streams[ready[0]]
                    streams[run.restart(i, err)] = i
                    continue
                record, merged = run.completed(i, s)
                hits = merged.hits
                yield record
                if merged.all_hit:  # every island reached the stop target
                    break
                run.checkpoint()
            return run_result(run.loop.best, run.loop.history, run.done(), run.t0, run.loop.migrations, hits)
        finally:
            if streams and ray.is_initialized():  # groups still running (a failure, an interrupt, the target met)
                self.ex.stop(groups)  # before the pool: a group whose claim fails sends that error too
                settle(streams)
            if self.pool is not None and ray.is_initialized():  # a generator closed late (an interrupt) may outlive Ray
                with contextlib.suppress(ray.exceptions.ActorHandleNotFoundError):  # ... or its Ray session
                    ray.kill(self.pool)
            self.pool = None


class AsyncRun:
    """The driver's side of one async run of ``schedule`` (:class:`AsyncLoop`) over ``groups``
    placed as ``placement``: the loop's variables (:class:`AsyncState`, from ``checkpoint.resume`` or
    fresh), each group's latest :class:`Part` (``None`` until it has one: no snapshots), the
    shared pool (``schedule.pool``, or ``None``) and the groups' starts (:meth:`start`)."""

    def __init__(self, schedule: AsyncLoop, groups: list, placement):
        self.s, self.groups, self.placement, self.pool = schedule, groups, placement, schedule.pool
        self.every, n_groups = int(schedule.isl.snapshot_every) or int(schedule.ck.every or 0), len(groups)
        self.sizes = [len(ids) for ids in placement.groups]
        self.attempts = [0] * n_groups  # each group's starts (its claims on the pool name them)
        resume = schedule.co.resume_from
        if resume is not None:
            schedule.recovery.load(groups, resume["states"])
            self.loop = loop = AsyncState.of(resume["async"])
            self.parts = [
                Part(st, g, e, loop.summaries.get(i))
                for i, (st, g, e) in enumerate(zip(resume["states"], loop.gens, loop.epochs, strict=False))
            ]
        else:
            self.loop, self.parts = AsyncState.fresh(n_groups), [None] * n_groups
            if self.every:  # the start: what an interrupt or a lost actor goes back to at worst
                got = schedule.ex.gather([schedule.ex.call(g, "state_dict") for g in groups])
                self.parts = [Part(got[i]) for i in range(n_groups)]
        self.t0 = time.perf_counter()

    def done(self, counts: list | None = None) -> int:
        """Generations per island done of the groups' ``counts`` (default: the loop's): the slowest
        group's, or with the shared pool its spent share per island."""
        counts = self.loop.gens if counts is None else counts
        return (
            min(counts)
            if self.pool is None
            else sum(s * g for s, g in zip(self.sizes, counts, strict=False)) // self.s.n
        )

    def publish(self) -> None:
        """Every group's latest part, with the loop's variables, as the run's snapshot (the
        recovery's ``last_snapshot``), once every group has one."""
        if any(p is None for p in self.parts):
            return
        done = None if self.pool is None else self.done([p.gens for p in self.parts])  # checkpoint.generations_done
        recovery = self.s.recovery
        recovery.last_snapshot = recovery.of(
            self.placement,
            [p.state for p in self.parts],
            mode="async",
            epoch=self.loop.completions,
            **{"async": self.loop.saved(self.parts, done)},
        )

    def start(self, i: int):
        """Group ``i``'s remaining epochs (fixed, or drawn from the pool), one streaming call
        (:meth:`isles.islands.group.IslandGroup.run_async`); its stream."""
        s, ks, claims = self.s, [], None
        g = self.loop.gens[i]
        while self.pool is None and g < s.generations:
            ks.append(min(s.interval, s.generations - g))
            g += ks[-1]
        # snapshots every `every` epochs and after the last whole one (none after a last epoch cut
        # short: a checkpoint there would resume off the uninterrupted run's epochs, SyncLoop.checkpoint_due)
        e0 = self.loop.epochs[i]
        last, every = e0 + sum(k == s.interval for k in ks), self.every
        due = tuple(e for e in range(e0 + 1, last + 1) if every and (e % every == 0 or e == last))
        if self.pool is not None:
            claims = Claims(self.pool, i, s.interval, self.attempts[i], every)
        groups = self.groups
        route = Route(i, self.placement.groups, s.topology, s.n, s.seed, s.recovery.timeout_s, list(groups))
        order = SpanOrder(0, ks, e0, route, Plan(), due)
        return groups[i].run_async.options(num_returns="streaming").remote(order, claims)

    def restart(self, i: int, err: BaseException):
        """Group ``i`` failed with ``err``: where its actor was lost (and restarts are left), set it back
        to its own last :class:`Part` (with the pool, what it claimed since returns to it) and start it
        again; the other groups go on. Returns its new stream.

        Raises:
            ``err``: not a lost actor, no part to go back to, or ``islands.max_restarts`` spent."""
        import ray  # noqa: PLC0415

        recovery, loop = self.s.recovery, self.loop
        recovery.recover(err, self.parts[i])
        part = self.parts[i]
        log.warning(
            "island group %d died (%s); restored its own state of generation %d, the other groups go "
            "on (restart %d of %d)",
            i,
            type(err).__name__,
            part.gens,
            recovery.restarts,
            recovery.max_restarts,
        )
        recovery.restore(self.groups, [i], [part.state])
        loop.gens[i], loop.epochs[i] = part.gens, part.epochs
        if self.pool is not None:  # what it claimed since its snapshot goes back to the pool
            self.attempts[i] += 1
            ray.get(self.pool.restart.remote(i, loop.gens[i], self.attempts[i]))
        loop.summaries.pop(i, None)
        if part.summary is not None:
            loop.summaries[i] = part.summary
        return self.start(i)

    def completed(self, i: int, s: EpochSummary) -> tuple:
        """Book group ``i``'s completed epoch, its summary ``s``, with the other groups' latest
        (:func:`isles.islands.control.books.book_epoch`), and keep its snapshot where ``s`` carries one.

        Returns:
            ``(record, merged)``: the :class:`isles.islands.results.EpochRecord` and the
            :class:`isles.islands.control.books.Merged` summaries."""
        loop = self.loop
        prev_gen = loop.summaries[i].generation if i in loop.summaries else 0
        loop.summaries[i] = s if s.snapshot is None else replace(s, snapshot=None)
        loop.gens[i], loop.epochs[i] = s.generation, loop.epochs[i] + 1
        loop.completions += 1
        merged = merge_summaries(self.s.n, loop.summaries)
        epoch, moved = loop.completions, [(loop.completions, *m) for m in s.migrations]
        k = s.generation - prev_gen
        record = book_epoch(
            loop,
            self.s.n,
            loop.summaries,
            merged,
            self.t0,
            epoch,
            self.done(),
            k,
            s.compute_s,
            moved,
            books=self.s.co.books,
        )
        if s.snapshot is not None:
            self.parts[i] = Part(s.snapshot.state, loop.gens[i], loop.epochs[i], loop.summaries[i])
            self.publish()
        return record, merged

    def checkpoint(self) -> None:
        """Save the run's snapshot every ``checkpoint.every`` completions and once the run's
        generations are done (``checkpoint.path``)."""
        ck, recovery = self.s.ck, self.s.recovery
        due = ck.every and (self.loop.completions % int(ck.every) == 0 or self.done() >= self.s.generations)
        if due and recovery.last_snapshot is not None:
            checkpoint.save(ck.path, recovery.last_snapshot)
