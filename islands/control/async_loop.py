"""The async epoch loop: a group that finishes its interval exchanges with the migrant store (the
latest emigrants of every island) and goes on, without waiting for slower groups (pagmo's
archipelago semantics). Each group's epoch is a span of one epoch
(:meth:`isles.islands.group.IslandGroup.run_span`) whose plan comes from the migrant store, made
by the same planner as the sync loop (:mod:`isles.islands.migration.planner`)."""

from __future__ import annotations

import logging
import time

from isles.islands.control import checkpoint
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

log = logging.getLogger("isles.islands.coordinator")


class AsyncLoop:
    """The async schedule of a run: each group's spans of one epoch, planned from the migrant store.

    Args:
        co: the :class:`isles.islands.coordinator.Coordinator` (its run's sizes, ``topology``,
            ``executor``, ``recovery`` and ``resume_from``).
    """

    def __init__(self, co):
        self.co, self.ex, self.recovery = co, co.executor, co.recovery
        self.cfg, self.n, self.seed, self.topology = co.cfg, co.n, co.seed, co.topology
        self.generations, self.interval = co.generations, co.interval

    def run(self, groups, placement):
        """The async epoch loop, a generator like :meth:`isles.islands.control.sync_loop.SyncLoop.run`.

        **Snapshots and lost actors.** Each group's state is taken between two of its epochs,
        at its start and then every ``islands.snapshot_every`` of its epochs (and at every
        ``checkpoint.every``-th completion), without stopping anything: the ``state_dict`` call
        is queued on the group's actor before its next epoch. A group whose actor dies is
        restarted by Ray and goes back to its own last state alone; the other groups go on.
        The recovery's ``last_snapshot`` holds every group's latest state with the loop's variables (what a
        checkpoint saves and ``checkpoint.resume`` continues, with the same grouping). Async
        results depend on timing, so a resumed or restarted run is not the uninterrupted one
        bit for bit; its counters (generations and evaluations per island) are.
        """
        import ray  # noqa: PLC0415

        if not self.ex.use_ray:
            raise ValueError("islands.mode=async needs Ray actors")
        recovery = self.recovery
        every = int(self.cfg["islands"]["snapshot_every"])
        ck = self.cfg["checkpoint"]
        snapshots = bool(every or ck["every"])
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
                {"state": st, "gens": g, "summary": loop["summaries"].get(i)}
                for i, (st, g) in enumerate(zip(resume["states"], loop["gens"]))
            ]
        else:
            loop = {
                "summaries": {},
                "store": {},
                "gens": [0] * len(groups),
                "history": RecordLog(),
                "migrations": migration_log(),
                "best": None,
                "completions": 0,
                "epochs": [0] * len(groups),
            }
            parts = [None] * len(groups)
        summaries, store, gens = loop["summaries"], loop["store"], loop["gens"]
        history, migrations = loop["history"], loop["migrations"]
        t0 = time.perf_counter()
        hits = None

        def snapshot_due(i) -> bool:
            return bool(every) and loop["epochs"][i] % every == 0

        taking = {}  # group -> its state being taken: {"state": ObjectRef, "gens", "summary"}

        def take(i):  # group i's state now, between two of its epochs (queued before its next one)
            taking[i] = {"state": groups[i].state_dict.remote(), "gens": gens[i], "summary": summaries.get(i)}

        def settle(wait: bool = False):  # the states that have arrived become the groups' parts
            for i, part in list(taking.items()):
                ready, _ = ray.wait([part["state"]], timeout=None if wait else 0)
                if ready:
                    del taking[i]
                    try:
                        parts[i] = {**part, "state": ray.get(ready[0])}
                    except Exception:  # noqa: BLE001  (its actor died first: the older part stays)
                        pass

        def submit(i, plan=None):
            k = min(self.interval, self.generations - gens[i])
            gens[i] += k
            loop["spans"] = loop.get("spans", 0) + 1  # a span of one epoch, alone (no peers)
            route = Route(0, [placement.groups[i]], self.topology, self.n, self.seed, recovery.timeout_s)
            return groups[i].run_span.remote(SpanOrder(loop["spans"], [k], loop["epochs"][i], route, plan or Plan()))

        def publish_snapshot():
            settle(wait=True)
            if any(p is None for p in parts):
                return recovery.last_snapshot
            loop_now = {
                **loop,
                "gens": [p["gens"] for p in parts],
                "summaries": {i: p["summary"] for i, p in enumerate(parts) if p["summary"] is not None},
                "store": dict(store),
                "history": history.copy(),
                "migrations": migrations.copy(),
            }
            recovery.last_snapshot = recovery.of(
                placement, [p["state"] for p in parts], mode="async", epoch=loop["completions"], **{"async": loop_now}
            )
            return recovery.last_snapshot

        if snapshots:
            for i in range(len(groups)):
                if parts[i] is None:
                    take(i)
            publish_snapshot()  # the start: what an interrupt or a lost actor goes back to at worst
        pending = {submit(i): i for i in range(len(groups)) if gens[i] < self.generations}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(done[0])
            try:
                s = ray.get(done[0])[0]
            except Exception as err:
                settle(wait=True)
                recovery.recover(err, parts[i])
                log.warning(
                    "island group %d died (%s); restored its own state of generation %d, the other groups go "
                    "on (restart %d of %d)",
                    i,
                    type(err).__name__,
                    parts[i]["gens"],
                    recovery.restarts,
                    recovery.max_restarts,
                )
                recovery.restore(groups, [i], [parts[i]["state"]])
                gens[i] = parts[i]["gens"]
                summaries.pop(i, None)
                if parts[i]["summary"] is not None:
                    summaries[i] = parts[i]["summary"]
                pending[submit(i)] = i
                continue
            prev_gen = summaries[i].generation if i in summaries else 0
            summaries[i] = s
            loop["completions"] += 1
            loop["epochs"][i] += 1
            completions = loop["completions"]
            for p, gid in enumerate(s.island_ids):
                store[gid] = s.emigrants.island(p)
            moved = [(completions, *e) for e in s.migrations]
            migrations.extend(moved)
            bx, bf, bv, bg, _, evals, nan, hits = merge_summaries(self.n, summaries)
            best = loop["best"] = best_of([(bx, bf, bv, bg)] + ([loop["best"]] if loop["best"] else []))
            done_gen = min(summaries[j].generation if j in summaries else 0 for j in range(len(groups)))
            record = epoch_record(
                epoch=completions,
                generation=done_gen,
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
            )
            history.append(record)
            yield record
            settle()
            if snapshots and (snapshot_due(i) or gens[i] >= self.generations):
                take(i)  # and at the group's last epoch, for a checkpoint that goes on with more generations
            if ck["every"] and (completions % int(ck["every"]) == 0 or not pending and gens[i] >= self.generations):
                if i not in taking:
                    take(i)
                snap = publish_snapshot()
                if snap is not None:
                    checkpoint.save(ck["path"], snap)
            elif snapshot_due(i):
                publish_snapshot()
            if gens[i] < self.generations:
                edges = migration_edges(self.topology, self.n, self.seed, completions)
                pending[submit(i, Plan(*group_plan(edges, placement.groups[i], store)))] = i
        return run_result(loop["best"], history, min(gens), t0, migrations, hits)
