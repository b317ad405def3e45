"""The async schedule (``islands.mode=async``): no island group waits for another.

Each group runs its epochs back to back in its actor (:func:`group_epochs`, one Ray streaming
call of :meth:`isles.islands.group.IslandGroup.run_async`), as pagmo's archipelago does: after each
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
from dataclasses import replace

import numpy as np

from isles.islands.control import checkpoint
from isles.islands.control.pool import Claims, SharedBudget, shares_itself
from isles.islands.control.sync_loop import Schedule
from isles.islands.epoch import Rows, run_epoch
from isles.islands.migration.planner import group_plan, migration_edges
from isles.islands.records import Plan, Route, SpanOrder
from isles.islands.results import (
    RecordLog,
    best_of,
    epoch_record,
    island_metrics,
    merge_summaries,
    migration_log,
    payoff_total,
    run_result,
)
from isles.islands.transport.link import ActorTransport, Alone, Arrivals

log = logging.getLogger("isles.islands.coordinator")

SETTLE_S = 5.0
"""How long a run that ends with groups still running waits for their streams to end (:func:`settle`), in seconds."""


def group_epochs(g, order: SpanOrder, claims: Claims | None = None):
    """The epochs of group ``g`` after its ``order.epoch0`` epochs, back to back: ``order.ks``
    (generations each; ``islands.async_budget=island``), or as many as the run's shared pool grants
    it (``claims``, :class:`isles.islands.control.pool.Claims`: each epoch's generations drawn when the
    epoch before ends); the actor's half of the async loop (:meth:`isles.islands.group.IslandGroup.run_async`).

    Before its epoch ``e`` the group immigrates, into each island, the sources that the plan after
    its epoch ``e - 1`` (:func:`migration_edges`) names among its own islands and those that the
    peers have posted since its last epoch (:meth:`Arrivals.arrived`), in the plan's order (the
    sources it does not name after them, in id order); after the epoch it posts its emigrants by
    the plan after ``e`` and goes on at once.

    Yields:
        each epoch's :class:`isles.islands.records.EpochSummary`, pickled (bytes), with the group's
        :class:`isles.islands.records.GroupSnapshot` after the epochs in ``order.snapshots`` (with
        ``claims``: as :meth:`isles.islands.control.pool.Claims.due` says).
    """
    r = order.route
    link = Arrivals(r, ActorTransport(r.peers, r.index, g.inbox)) if len(r.groups) > 1 else Alone(g.island_ids)
    mine = set(g.island_ids)
    ks = iter(order.ks) if claims is None else claims
    k, e = next(ks, 0), order.epoch0
    while k:
        e += 1
        with g._state_lock:
            t0 = time.perf_counter()
            planned = migration_edges(r.topology, r.n, r.seed, e - 1) if e > 1 else []
            edges, emigrants = link.arrived() if isinstance(link, Arrivals) else ([], {})
            # in the plan's order (a remote source as the sync run takes it, where it came), then the rest
            arrived, named = set(edges), set(planned)
            ordered = [x for x in planned if x[0] in mine or x in arrived] + [x for x in edges if x not in named]
            plan = Plan(*group_plan(ordered, g.island_ids, emigrants))
            best, px, events = run_epoch(g, k, e, plan, link, migration_edges(r.topology, r.n, r.seed, e))
            k = next(ks, 0)  # the next epoch's generations (0: this was the last)
            rows = [Rows.of(g.row(best, px, events))]
            due = e in order.snapshots if claims is None else claims.due(e, k, rows[0].generation[0])
            g._keep_snapshot(rows, due, False)
            summary = g._summaries(rows, t0)[0]
        yield pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)


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
        if self.cfg["islands"]["async_budget"] != "shared" or shares_itself(self.cfg) or not self.ex.use_ray:
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
        recovery, ck, n_groups = self.recovery, self.cfg["checkpoint"], len(groups)
        every = int(self.cfg["islands"]["snapshot_every"]) or int(ck["every"] or 0)
        resume = self.co.resume_from
        if resume is not None:
            recovery.load(groups, resume["states"])
            loop = {
                k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                for k, v in resume["async"].items()
            }
            loop["history"] = RecordLog.of(resume["async"]["history"])  # a list: a checkpoint of before the logs
            loop["migrations"] = migration_log(resume["async"]["migrations"])
            parts = [
                {"state": st, "gens": g, "epochs": e, "summary": loop["summaries"].get(i)}
                for i, (st, g, e) in enumerate(zip(resume["states"], loop["gens"], loop["epochs"]))
            ]
        else:
            loop = {
                "summaries": {},
                "gens": [0] * n_groups,
                "epochs": [0] * n_groups,
                "history": RecordLog(),
                "migrations": migration_log(),
                "best": None,
                "completions": 0,
            }
            parts = [None] * n_groups
            if every:  # the start: what an interrupt or a lost actor goes back to at worst
                got = self.ex.gather([self.ex.call(g, "state_dict") for g in groups])
                parts = [{"state": got[i], "gens": 0, "epochs": 0, "summary": None} for i in range(n_groups)]
        summaries, gens, epochs = loop["summaries"], loop["gens"], loop["epochs"]
        history, migrations = loop["history"], loop["migrations"]
        t0, hits = time.perf_counter(), None
        sizes = [len(ids) for ids in placement.groups]
        # islands.async_budget=shared: one pool of island-generations that every group draws from (islands/control/pool.py)
        if self.pool is None:  # not prepared (the schedule run by hand): started now
            self.prepare(placement)
        pool = self.pool
        attempts = [0] * n_groups

        def done(counts):  # generations per island done: the slowest group's, or the pool's spent share per island
            return min(counts) if pool is None else sum(s * g for s, g in zip(sizes, counts)) // self.n

        def publish():  # every group's latest part, with the loop's variables, as the run's snapshot
            if any(p is None for p in parts):
                return
            now = {
                **loop,
                **({} if pool is None else {"done": done([p["gens"] for p in parts])}),  # checkpoint.generations_done
                "gens": [p["gens"] for p in parts],
                "epochs": [p["epochs"] for p in parts],
                "summaries": {i: p["summary"] for i, p in enumerate(parts) if p["summary"] is not None},
                "history": history.copy(),
                "migrations": migrations.copy(),
            }
            recovery.last_snapshot = recovery.of(
                placement, [p["state"] for p in parts], mode="async", epoch=loop["completions"], **{"async": now}
            )

        def start(i):  # group i's remaining epochs (fixed, or drawn from the pool), one streaming call
            ks, g, claims = [], gens[i], None
            while pool is None and g < self.generations:
                ks.append(min(self.interval, self.generations - g))
                g += ks[-1]
            # snapshots every `every` epochs and after the last whole one (none after a last epoch cut
            # short: a checkpoint there would resume off the uninterrupted run's epochs, SyncLoop.checkpoint_due)
            e0, last = epochs[i], epochs[i] + sum(k == self.interval for k in ks)
            due = tuple(e for e in range(e0 + 1, last + 1) if every and (e % every == 0 or e == last))
            if pool is not None:
                claims = Claims(pool, i, self.interval, attempts[i], every)
            route = Route(i, placement.groups, self.topology, self.n, self.seed, recovery.timeout_s, list(groups))
            order = SpanOrder(0, ks, e0, route, Plan(), due)
            return groups[i].run_async.options(num_returns="streaming").remote(order, claims)

        publish()
        streams = {start(i): i for i in range(n_groups) if pool is not None or gens[i] < self.generations}
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
                    recovery.recover(err, parts[i])
                    part = parts[i]
                    log.warning(
                        "island group %d died (%s); restored its own state of generation %d, the other groups go "
                        "on (restart %d of %d)",
                        i,
                        type(err).__name__,
                        part["gens"],
                        recovery.restarts,
                        recovery.max_restarts,
                    )
                    recovery.restore(groups, [i], [part["state"]])
                    gens[i], epochs[i] = part["gens"], part["epochs"]
                    if pool is not None:  # what it claimed since its snapshot goes back to the pool
                        attempts[i] += 1
                        ray.get(pool.restart.remote(i, gens[i], attempts[i]))
                    summaries.pop(i, None)
                    if part["summary"] is not None:
                        summaries[i] = part["summary"]
                    streams[start(i)] = i
                    continue
                prev_gen = summaries[i].generation if i in summaries else 0
                summaries[i] = s if s.snapshot is None else replace(s, snapshot=None)
                gens[i], epochs[i] = s.generation, epochs[i] + 1
                loop["completions"] += 1
                completions = loop["completions"]
                moved = [(completions, *m) for m in s.migrations]
                migrations.extend(moved)
                bx, bf, bv, bg, _, evals, nan, hits = merge_summaries(self.n, summaries)
                best = loop["best"] = best_of([(bx, bf, bv, bg)] + ([loop["best"]] if loop["best"] else []))
                record = epoch_record(
                    epoch=completions,
                    generation=done(gens),
                    t0=t0,
                    evaluations=evals,
                    nan_evaluations=nan,
                    best_f=best[1][0],
                    best_v=best[2][0],
                    island_best_f=bf,
                    island_best_v=bv,
                    compute_s=s.compute_s,
                    epoch_generations=s.generation - prev_gen,
                    hits=hits,
                    payoff_evaluations=payoff_total(summaries),
                    migrations=moved,
                    algorithm_metrics=island_metrics(self.n, summaries),
                    books=self.co.books,
                )
                history.append(record)
                if s.snapshot is not None:
                    parts[i] = {
                        "state": s.snapshot.state,
                        "gens": gens[i],
                        "epochs": epochs[i],
                        "summary": summaries[i],
                    }
                    publish()
                yield record
                if hits is not None and np.all(hits >= 0):  # every island reached the stop target
                    break
                if ck["every"] and (completions % int(ck["every"]) == 0 or done(gens) >= self.generations):
                    if recovery.last_snapshot is not None:
                        checkpoint.save(ck["path"], recovery.last_snapshot)
            return run_result(loop["best"], history, done(gens), t0, migrations, hits)
        finally:
            if streams and ray.is_initialized():  # groups still running (a failure, an interrupt, the target met)
                self.ex.stop(groups)  # before the pool: a group whose claim fails sends that error too
                settle(streams)
            if pool is not None and ray.is_initialized():  # a generator closed late (an interrupt) may outlive Ray
                with contextlib.suppress(ray.exceptions.ActorHandleNotFoundError):  # ... or its Ray session
                    ray.kill(pool)
            self.pool = None
