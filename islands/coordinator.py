"""The migration coordinator: starts the island-group actors, runs epochs, migrates, and runs the
optional master swarm.

The coordinator lives in the driver process (where the user watches progress and where MLflow
writes). Each epoch, every group runs ``islands.migration_interval`` generations on its device and
returns a small summary; the coordinator collects the summaries with ``ray.wait`` as they come in,
updates the archipelago's best, runs the master swarm (CMEPSO) on the slaves' bests, samples the
topology's edges for the next migration and sends each group only the emigrants it needs.

* ``islands.mode=sync``: all groups meet at each epoch boundary (the paper's per-iteration
  exchange of CMEPSO is ``migration_interval=1``).
* ``islands.mode=async``: a group that finishes its interval immediately exchanges with the
  coordinator's migrant store (the latest emigrants of every island) and goes on, without waiting
  for slower groups (pagmo's archipelago semantics).

Logging lives outside: the coordinator calls ``on_start(info)``, ``on_epoch(record)``,
``on_restart(info)`` and ``on_end(result)`` of its callbacks (MLflow tracker, progress bar).
"""
from __future__ import annotations

import logging
import math
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from isles.algorithms.core.base import Context, check_range
from isles.algorithms.core.random import CounterRNG
from isles.islands import checkpoint
from isles.islands.build import build_evaluator
from isles.islands.group import MASTER_ID, IslandGroup
from isles.islands.placement import actor_options, cluster_nodes, local_resources, plan, plan_nodes, reserve, where
from isles.algorithms.core.population import Population
from isles.problems.constraints import argbest

MODES = ("sync", "async")

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What a finished run hands back (host values).

    Attributes:
        best_x (D,), best_f, best_v: best solution under Deb's rules (ranking pair).
        evaluations: objective evaluations of all islands and the master swarm.
        generations: generations per island.
        wall_s: wall time of the evolution (actors already started), seconds.
        startup_s: actor start-up time, seconds.
        history: one dict per epoch (the records given to ``on_epoch``).
        devices: ``{island id: device name}``.
        nodes: ``{island id: Ray node id}`` where each island ran at the end (after a lost node,
            its islands' new node); ``None`` values outside Ray.
        nan_evals: evaluations with a NaN objective or constraint.
        migrations: ``(epoch, src, dst, accepted, best f moved)`` tuples.
        best_genome: the best individual's genome (e.g. the GA's packed ``uint32`` words), of
            which ``best_x`` is the phenotype.
        hit_generations: ``(n_islands,)`` int, the generation at which each island first reached
            the stop target (``stop.f_target + stop.tol``), -1 if it never did; ``None`` without
            a target.
        steady_evals_per_s: evaluations per second after the first epoch (which includes kernel
            compilation and CUDA-graph capture on GPUs); the overall rate with one epoch.
    """

    best_x: np.ndarray
    best_f: float
    best_v: float
    evaluations: int
    generations: int
    wall_s: float
    startup_s: float
    history: list = field(default_factory=list)
    devices: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    nan_evals: int = 0
    migrations: list = field(default_factory=list)
    best_genome: np.ndarray | None = None
    hit_generations: np.ndarray | None = None

    @property
    def warnings(self) -> list[str]:
        """What the result cannot show by itself, one line each (printed after the result): the
        best individual has no finite objective (NaN counts as ``+inf``), and whether every
        evaluation of the run gave NaN."""
        if np.isfinite(self.best_f):
            return []
        if self.evaluations and self.nan_evals >= self.evaluations:
            return [f"no individual ever had a finite objective: all {self.evaluations} evaluations gave NaN "
                    "(objective or constraints; NaN counts as +inf, the worst fitness)"]
        return [f"the best individual has no finite objective (f={self.best_f}); {self.nan_evals} of "
                f"{self.evaluations} evaluations gave NaN (counted as +inf, the worst fitness)"]

    @property
    def steady_evals_per_s(self) -> float:
        """Evaluations per second over all epochs but the first (see the class docstring)."""
        h = self.history
        if len(h) < 2 or h[-1]["wall_s"] <= h[0]["wall_s"]:
            return self.evaluations / max(self.wall_s, 1e-12)
        return (h[-1]["evaluations"] - h[0]["evaluations"]) / (h[-1]["wall_s"] - h[0]["wall_s"])


class RestartFailed(RuntimeError):
    """Lost island groups whose actors Ray did not restart within ``islands.restart_timeout_s``
    (e.g. a lost node whose bundles no other node has room for). The coordinator's
    :attr:`Coordinator.last_snapshot` still holds the run's last snapshot, for a checkpoint."""


class Coordinator:
    """Runs an archipelago described by a resolved config (plain dict).

    Args:
        cfg: the run config as a plain dict with keys ``problem``, ``constraints``,
            ``algorithm``, ``topology`` (instantiated object), ``master`` (object or ``None``),
            ``islands`` (``n``, ``n_actors``, ``migration_interval``, ``n_migrants``,
            ``replacement``, ``mode``, ``master_sends_best``), ``generations``, ``seed``,
            ``device``, ``dtype``, and optionally ``checkpoint`` (``every`` epochs, ``path``,
            ``resume`` = path of a checkpoint to continue from; sync mode).
        topology: a :class:`isles.islands.topology.Topology`.
        master: a master swarm (:class:`isles.algorithms.pso.cmepso.MasterSwarm`) or ``None``.
        callbacks: objects with optional ``on_start``, ``on_epoch``, ``on_restart`` (island
            groups restarted after a lost actor or node) and ``on_end`` methods.
        use_ray: start the groups as Ray actors (default) or in this process (tests, benchmarks).

    Raises:
        ValueError: bad values in ``islands``/``generations``, named by field; a
            ``checkpoint.resume`` file that does not exist, of another version, or saved under
            another config (:func:`check_resumable`).
    """

    def __init__(self, cfg: dict, topology, master=None, callbacks=(), use_ray: bool = True):
        isl = cfg["islands"]
        self.cfg = cfg
        self.n = check_range("islands.n", isl["n"], 1, integer=True)
        self.generations = check_range("generations", cfg["generations"], 1, integer=True)
        self.interval = check_range("islands.migration_interval", isl["migration_interval"], 1, integer=True)
        self.n_migrants = check_range("islands.n_migrants", isl.get("n_migrants", 1), 1, integer=True)
        self.mode = isl.get("mode", "sync")
        if self.mode not in MODES:
            raise ValueError(f"islands.mode={self.mode!r}: allowed values are {'|'.join(MODES)}")
        if master is not None and self.mode != "sync":
            raise ValueError("islands.mode=async: a master swarm needs islands.mode=sync")
        ck = cfg.get("checkpoint") or {}
        if ck.get("every"):
            check_range("checkpoint.every", ck["every"], 0, integer=True)
            if not ck.get("path"):
                raise ValueError("checkpoint.path: give a file path for checkpoint.every > 0")
        self.topology = topology
        self.topology.weights(self.n)  # validates island ids now, before any actor starts
        self.master = master
        self.callbacks = list(callbacks)
        self.use_ray = use_ray
        self.seed = int(cfg.get("seed", 0))
        self.target = stop_target(cfg.get("stop") or {})
        check_range("islands.snapshot_every", isl.get("snapshot_every") or 0, 0, integer=True)
        self.max_restarts = check_range("islands.max_restarts", isl.get("max_restarts", 3), 0, integer=True)
        self.restart_timeout_s = float(check_range("islands.restart_timeout_s", isl.get("restart_timeout_s", 120.0),
                                                   0, lo_open=True))
        self.last_snapshot = None  # the latest in-memory snapshot (sync mode), see _run_sync
        self.group_infos = []  # each group's info (IslandGroup.info): where it runs now
        self._reserved = None  # the Ray placement group of the actors (placement.reserve)
        # checkpoint.resume: read and checked here, once, before any actor starts
        self.resume_from = None
        if ck.get("resume"):
            self.resume_from = checkpoint.load(ck["resume"])
            check_resumable(self.resume_from, cfg, ck["resume"])
        # the last epoch handed to the callbacks (a resumed run does not hand them those before)
        self.published_epoch = (0 if self.resume_from is None
                                else self.resume_from.get("published_epoch", self.resume_from["epoch"]))

    # ------------------------------------------------------------------------------------------
    def _spec(self, island_ids, device) -> dict:
        c = self.cfg
        return {
            "problem": c["problem"],
            "constraints": c.get("constraints"),
            "algorithm": c["algorithm"],
            "island_ids": island_ids,
            "seed": self.seed,
            "device": device,
            "dtype": c.get("dtype", "float64"),
            "n_migrants": self.n_migrants,
            "replacement": c["islands"].get("replacement", "fair_replace"),
            "target": self.target,
            "cuda_graph": c.get("cuda_graph", True),
        }

    def _placement(self):
        """The actors to start on Ray's nodes (:func:`isles.islands.placement.plan_nodes`), or
        in-process on this machine (one device: a local GPU when CuPy sees one)."""
        isl = self.cfg["islands"]
        if self.use_ray:
            return plan_nodes(self.n, self.cfg.get("device", "auto"), isl, cluster_nodes())
        device = self.cfg.get("device", "auto")
        resources = {"CPU": 1, "GPU": min(1, local_resources(device=device)["GPU"])}  # one device: this one
        return plan(self.n, device, isl.get("n_actors"), resources)

    def _start_groups(self, p):
        """One island group per block of ``p.groups``: Ray actors, each in its bundle of the
        placement group reserved for them (:func:`isles.islands.placement.reserve`), or in-process
        stand-ins."""
        if not self.use_ray:
            return [_Local(IslandGroup(self._spec(ids, p.device))) for ids in p.groups]
        import ray  # noqa: PLC0415

        actor = ray.remote(IslandGroup)
        self._reserved = reserve(p)
        return [actor.options(**actor_options(p, self._reserved, i, self.max_restarts)).remote(self._spec(ids, p.device))
                for i, ids in enumerate(p.groups)]

    def _release(self) -> None:
        """Give the placement group back to Ray (after the actors are killed)."""
        if self._reserved is not None:
            from ray.util.placement_group import remove_placement_group  # noqa: PLC0415

            remove_placement_group(self._reserved)
            self._reserved = None

    def _relocated(self, infos: list) -> None:
        """After a restart: keep where each group runs now (:attr:`group_infos`), log each group
        that was restarted (another process, maybe another node), and hand the callbacks'
        ``on_restart`` the restarted groups (``{"groups": {group index: info}}``)."""
        moved = {}
        for i, (old, new) in enumerate(zip(self.group_infos, infos)):
            if (new["node_id"], new["pid"]) != (old["node_id"], old["pid"]):
                ids = new["island_ids"]
                log.warning("island group %d (islands %d..%d) restarted on %s", i, ids[0], ids[-1], where(new))
                moved[i] = new
        self.group_infos = list(infos)
        for cb in self.callbacks if moved else ():
            if hasattr(cb, "on_restart"):
                cb.on_restart({"groups": moved})

    def _gather(self, calls: list, deadline: float | None = None) -> dict:
        """``{i: result}`` of the calls ``[ObjectRef, ...]``, collected with ``ray.wait`` as they finish.

        Raises:
            RestartFailed: ``deadline`` (``time.monotonic()`` seconds) passed with calls unfinished
                (their actors were not restarted in time).
        """
        if not self.use_ray:
            return dict(enumerate(calls))
        import ray  # noqa: PLC0415

        refs = {ref: i for i, ref in enumerate(calls)}
        out, pending = {}, list(refs)
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not done:
                raise self._restart_failed(sorted(refs[r] for r in pending))
            try:
                out[refs[done[0]]] = ray.get(done[0])
            except Exception:
                # the other groups' results (or errors) are read and dropped, so that Ray does
                # not print each failed task again as an unhandled error
                for ref in pending:
                    try:
                        ray.get(ref, timeout=5)
                    except Exception:  # noqa: BLE001, S110
                        pass
                raise
        return out

    def _call(self, group, method: str, *args):
        return getattr(group, method).remote(*args) if self.use_ray else getattr(group, method)(*args)

    # ------------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Start the actors, evolve ``generations`` generations, return the result.

        Actors are killed at the end, also when the run fails.

        Raises:
            RestartFailed: lost actors not restarted within ``islands.restart_timeout_s``
                (:attr:`last_snapshot` holds the run's last snapshot).
        """
        t_start = time.perf_counter()
        placement = self._placement()
        saved = self.resume_from
        if saved is not None and saved.get("mode") == "async" and \
                [list(g) for g in saved["groups"]] != [list(g) for g in placement.groups]:
            raise ValueError(f"checkpoint.resume: an async run resumes with the grouping it was saved with: "
                             f"islands.n_actors={len(saved['groups'])} (now {len(placement.groups)})")
        if self.use_ray and self.mode == "sync" and len(placement.groups) == 1:
            return self._run_in_actor(placement, t_start)
        groups = self._start_groups(placement)
        try:
            infos = self._gather([self._call(g, "info") for g in groups])
            startup_s = self._started([infos[i] for i in range(len(groups))], t_start)
            epochs = (self._run_sync if self.mode == "sync" else self._run_async)(groups, placement)
            result = self._drive(epochs)
            result.startup_s = startup_s
            result.devices = {gid: infos[i]["device"] for i, ids in enumerate(placement.groups) for gid in ids}
            result.nodes = _island_nodes(self.group_infos)
        finally:
            if self.use_ray:
                import ray  # noqa: PLC0415

                for g in groups:
                    ray.kill(g)
                self._release()
        return self._ended(result)

    def _ended(self, result: RunResult) -> RunResult:
        """Hand the result to the callbacks' ``on_end``; return it."""
        for cb in self.callbacks:
            if hasattr(cb, "on_end"):
                cb.on_end(result)
        return result

    def _started(self, infos: list, t_start: float) -> float:
        """Hand the groups' ``info`` to the callbacks' ``on_start`` (with Ray's cluster resources,
        ``None`` outside Ray); return the start-up seconds."""
        startup_s = time.perf_counter() - t_start
        self.group_infos = list(infos)
        info = {"groups": infos, "startup_s": startup_s, "n_islands": self.n, "generations": self.generations,
                "cluster_resources": _cluster_resources() if self.use_ray else None}
        for cb in self.callbacks:
            if hasattr(cb, "on_start"):
                cb.on_start(info)
        return startup_s

    def _drive(self, epochs) -> RunResult:
        """Run the epoch generator ``epochs`` to its end, handing each record to the callbacks;
        return its :class:`RunResult`."""
        while True:
            try:
                record = next(epochs)
            except StopIteration as stop:
                return stop.value
            self._publish(record)

    def _run_in_actor(self, placement, t_start: float) -> RunResult:
        """Every island in one actor (sync mode): the epoch loop itself runs in that actor
        (:class:`Archipelago`), beside the islands and the master swarm, so a per-generation
        exchange costs no Ray round trip; the records come back in batches every
        ``REPORT_S`` seconds for the callbacks (progress, MLflow)."""
        import ray  # noqa: PLC0415

        self._reserved = reserve(placement)
        actor = ray.remote(Archipelago).options(**actor_options(placement, self._reserved, 0, self.max_restarts)).remote(
            self.cfg, self.topology, self.master, placement.device, self.resume_from)
        try:
            infos = ray.get(actor.info.remote())
            startup_s = self._started(infos, t_start)
            result, restarts = None, 0
            while result is None:
                try:
                    records, result, error, snapshot = ray.get(actor.advance.remote(REPORT_S))
                except Exception as err:
                    if self.last_snapshot is None or not _actor_died(err) or restarts >= self.max_restarts:
                        raise
                    restarts += 1
                    log.warning("the archipelago's actor died (%s); restarting from the snapshot of epoch %d "
                                "(restart %d of %d)", type(err).__name__, self.last_snapshot["epoch"], restarts,
                                self.max_restarts)
                    self._resume_archipelago(actor)
                    self._relocated(ray.get(actor.info.remote()))
                    continue
                if snapshot is not None:
                    self.last_snapshot = snapshot
                for record in records:  # the epochs before a failure are logged too
                    self._publish(record)
                if error is not None:
                    raise error
        finally:
            ray.kill(actor)
            self._release()
        result.startup_s = startup_s
        result.devices = {gid: infos[0]["device"] for gid in placement.groups[0]}
        result.nodes = _island_nodes(self.group_infos)
        return self._ended(result)

    def _resume_archipelago(self, actor) -> None:
        """Set the restarted :class:`Archipelago` actor back to :attr:`last_snapshot`, waiting up
        to ``islands.restart_timeout_s`` seconds for it.

        Raises:
            RestartFailed: the actor did not come back in time."""
        import ray  # noqa: PLC0415
        from ray.exceptions import GetTimeoutError  # noqa: PLC0415

        deadline = time.monotonic() + self.restart_timeout_s

        def resume():
            try:
                return ray.get(actor.resume.remote(self.last_snapshot),
                               timeout=max(0.0, deadline - time.monotonic()))
            except GetTimeoutError:
                raise self._restart_failed([0]) from None

        _while_restarting(resume, self.restart_timeout_s)

    # ------------------------------------------------------------------------------------------
    def _master_context(self, evaluator):
        return Context(xp=np, dtype=np.dtype(self.cfg.get("dtype", "float64")), evaluator=evaluator,
                       rng=CounterRNG(np, self.seed, [self.n]))

    def _plan_migration(self, epoch: int, emigrants: dict, master_best, placement):
        """Per group: ``(inbound, remote)`` for the next epoch (see :meth:`IslandGroup.run_epoch`).

        ``emigrants``: ``{island id: Population (1, k)}``; ``master_best``: the master swarm's
        best as a Population ``(1, 1)``, or ``None`` when the one group hosts the master."""
        rng = np.random.default_rng([self.seed, epoch, 0x15])
        edges = self.topology.sample(self.n, rng)
        send_master = self.master is not None and self.cfg["islands"].get("master_sends_best", False)
        out = []
        for ids in placement.groups:
            pos = {gid: p for p, gid in enumerate(ids)}
            inbound, remote = {}, {}
            for src, dst in edges:
                if dst in pos:
                    inbound.setdefault(pos[dst], []).append(src)
                    if src not in pos:
                        remote[src] = emigrants[src]
            if send_master:
                for p in range(len(ids)):
                    inbound.setdefault(p, []).append(MASTER_ID)
                remote[MASTER_ID] = master_best
            out.append((inbound, remote))
        return out

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
        evaluator = build_evaluator(self.cfg["problem"], self.cfg.get("constraints")) if self.master else None
        mctx = self._master_context(evaluator) if self.master else None
        ck = self.cfg.get("checkpoint") or {}
        resume = resume if resume is not None else self.resume_from
        if resume is not None:  # states are per island: any grouping (number of actors) resumes
            self._load_groups(groups, checkpoint.regroup(resume["states"], resume["groups"], placement.groups))
            loop = _loop_copy(resume)
        else:
            loop = {"done_gens": 0, "epoch": 0, "best": None, "master_state": None,
                    "pending": None, "history": [], "migrations": []}
        every = int(self.cfg["islands"].get("snapshot_every") or 0)
        local = len(groups) == 1 and isinstance(groups[0], _Local)  # every island, in this process
        if local and self.master is not None:  # the master swarm lives beside the slaves, on their device
            groups[0].attach_master(self.master, self.seed, self.n, loop["master_state"])
        snapshot = self.last_snapshot = self._snapshot(groups, placement, loop) if every else None
        restarts, yielded, hits, epoch_s = 0, loop["epoch"], None, None
        t0 = time.perf_counter()
        while loop["done_gens"] < self.generations:
            try:
                if local:  # a batch of epochs on the device, one host synchronisation
                    t_batch = time.perf_counter()
                    plans = self._local_plans(loop, self._batch_len(loop, epoch_s, ck), placement)
                    epochs = [(p[0], {0: s}) for p, s in zip(plans, groups[0].run_epochs(plans))]
                    epoch_s = (time.perf_counter() - t_batch) / len(plans)
                else:
                    k = min(self.interval, self.generations - loop["done_gens"])
                    migration = (self._plan_migration(*loop["pending"], placement) if loop["pending"]
                                 else [({}, {}) for _ in groups])
                    epochs = [(k, self._gather([self._call(g, "run_epoch", k, *migration[i])
                                                for i, g in enumerate(groups)]))]
            except Exception as err:
                if snapshot is None or not _actor_died(err) or restarts >= self.max_restarts:
                    raise
                restarts += 1
                log.warning("an island-group actor died in epoch %d (%s); restored the snapshot of epoch %d "
                            "(restart %d of %d)", loop["epoch"] + 1, type(err).__name__, snapshot["epoch"],
                            restarts, self.max_restarts)
                self._load_groups(groups, snapshot["states"])
                if self.use_ray:
                    infos = self._gather([self._call(g, "info") for g in groups])
                    self._relocated([infos[i] for i in range(len(groups))])
                loop = _loop_copy(snapshot)
                continue
            for j, (k, summaries) in enumerate(epochs):
                record, emigrants, master_pop, hits = self._epoch_done(loop, k, summaries, placement, mctx, t0)
                if record["epoch"] > yielded:
                    yielded = record["epoch"]
                    yield record
                if hits is not None and np.all(hits >= 0):  # every island reached the stop target
                    return self._result(loop["best"], loop["history"], loop["done_gens"], t0,
                                        loop["migrations"], hits)
                # the next epoch's migration, kept per island (the plan per group is made from it); kept
                # after the last epoch too, so that a resume with more generations goes on exactly
                epoch = loop["epoch"]
                loop["pending"] = (epoch, emigrants, master_pop)
                last = loop["done_gens"] >= self.generations
                # a snapshot once `every` epochs have passed, at the end of a batch (the groups'
                # states are those of its last epoch)
                if every and j == len(epochs) - 1 and epoch - snapshot["epoch"] >= every:
                    snapshot = self.last_snapshot = self._snapshot(groups, placement, loop)
                if ck.get("every") and (epoch % int(ck["every"]) == 0 or last):
                    fresh = snapshot if snapshot is not None and snapshot["epoch"] == epoch else \
                        self._snapshot(groups, placement, loop)
                    checkpoint.save(ck["path"], fresh)
        return self._result(loop["best"], loop["history"], loop["done_gens"], t0, loop["migrations"], hits)

    def _epoch_done(self, loop: dict, k: int, summaries: dict, placement, mctx, t0: float):
        """Book one finished epoch of ``k`` generations into ``loop`` (counters, migrations, the
        master swarm's epoch when it runs here, the archipelago's best, the record).

        Returns:
            ``(record, emigrants by island (None inside a batch), master best as a Population
            (1, 1) or None, stop-target generations or None)``.
        """
        loop["done_gens"] += k
        loop["epoch"] = epoch = loop["epoch"] + 1
        bx, bf, bv, bg, emigrants, evals, nan, hits = self._merge(summaries, placement)
        D = bx.shape[1]
        for i in sorted(summaries):
            loop["migrations"].extend((epoch, *e) for e in summaries[i]["migrations"])
        master_best, master_pop, master_evals = None, None, 0
        if self.master is not None:
            hosted = summaries[0].get("master") if len(summaries) == 1 else None
            if hosted is not None:  # run by the group, on its device (run_epochs)
                mx, mf, mv, master_evals, master_nan = hosted
            else:
                mstate = loop["master_state"]
                if mstate is None:
                    mstate = self.master.init(mctx, bx, bf, bv)
                mstate = loop["master_state"] = self.master.run_epoch(mctx, mstate, bx, bf, bv, k)
                mx, mf, mv = self.master.best(mstate)
                master_evals, master_nan = int(mstate["evals"]), int(mstate["nan_evals"])
            master_best = (np.asarray(mx).reshape(1, D), np.asarray(mf).reshape(1), np.asarray(mv).reshape(1))
            master_pop = Population(master_best[0][None], master_best[1][None], master_best[2][None])
            nan += master_nan
        best = loop["best"]
        cand = ([(bx, bf, bv, bg)] + ([(*master_best, master_best[0])] if master_best else [])
                + ([best] if best else []))
        best = loop["best"] = _best_of(cand)
        record = self._record(epoch, loop["done_gens"], t0, evals + master_evals, nan, best, bf, bv,
                              master_best, list(summaries.values()), k, hits)
        loop["history"].append(record)
        return record, emigrants, master_pop, hits

    def _batch_len(self, loop: dict, epoch_s: float | None, ck: dict) -> int:
        """Epochs in the next batch of an in-process group: one first (it includes compilation and
        graph capture), then about :data:`BATCH_S` seconds' worth (at most :data:`MAX_BATCH`),
        ending at the run's end and at every checkpoint epoch (snapshots are taken at the end of
        the batch in which they fall due)."""
        left = -(-(self.generations - loop["done_gens"]) // self.interval)
        n = 1 if epoch_s is None else int(BATCH_S / max(epoch_s, 1e-7))
        n = max(1, min(n, MAX_BATCH, left))
        period = int(ck.get("every") or 0)
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

    def _snapshot(self, groups, placement, loop: dict) -> dict:
        """Everything needed to continue from the end of ``loop["epoch"]``: every group's state
        (host arrays), the loop's variables, the seed, the grouping and the config (what
        :func:`check_resumable` compares). Histories are copied as lists (records are never
        changed after they are made)."""
        if self.master is not None and len(groups) == 1 and isinstance(groups[0], _Local):
            loop["master_state"] = groups[0].master_state_dict()  # hosted by the group (run_epochs)
        states = self._gather([self._call(g, "state_dict") for g in groups])
        return {"seed": self.seed, "groups": placement.groups, "states": [states[i] for i in range(len(groups))],
                "config": resumable_config(self.cfg), **_loop_copy(loop)}

    def _load_groups(self, groups, states: list) -> None:
        """Set every group's state (host arrays from a snapshot), waiting for restarting actors
        up to ``islands.restart_timeout_s`` seconds.

        Raises:
            RestartFailed: a group's actor did not come back in time."""
        deadline = time.monotonic() + self.restart_timeout_s
        _while_restarting(lambda: self._gather([self._call(g, "load_state_dict", st) for g, st in zip(groups, states)],
                                               deadline), self.restart_timeout_s)

    def _restart_failed(self, group_ids: list) -> "RestartFailed":
        """The error of island groups ``group_ids`` not restarted within ``islands.restart_timeout_s``."""
        placement = self.cfg["islands"].get("placement", "spread")
        epoch = self.last_snapshot["epoch"] if self.last_snapshot else 0
        return RestartFailed(
            f"islands.restart_timeout_s={self.restart_timeout_s:g}: island group(s) {', '.join(map(str, group_ids))} "
            f"lost and not restarted within {self.restart_timeout_s:g} s (no Ray node has room for their bundles "
            f"under islands.placement={placement}); the run stops at its last snapshot, epoch {epoch}")

    def _run_async(self, groups, placement):
        """The async epoch loop, a generator like :meth:`_run_sync`.

        **Snapshots and lost actors.** Each group's state is taken between two of its epochs,
        at its start and then every ``islands.snapshot_every`` of its epochs (and at every
        ``checkpoint.every``-th completion), without stopping anything: the ``state_dict`` call
        is queued on the group's actor before its next epoch. A group whose actor dies is
        restarted by Ray and goes back to its own last state alone; the other groups go on.
        :attr:`last_snapshot` holds every group's latest state with the loop's variables (what a
        checkpoint saves and ``checkpoint.resume`` continues, with the same grouping). Async
        results depend on timing, so a resumed or restarted run is not the uninterrupted one
        bit for bit; its counters (generations and evaluations per island) are.
        """
        import ray  # noqa: PLC0415

        if not self.use_ray:
            raise ValueError("islands.mode=async needs Ray actors")
        every = int(self.cfg["islands"].get("snapshot_every") or 0)
        ck = self.cfg.get("checkpoint") or {}
        snapshots = bool(every or ck.get("every"))
        resume = self.resume_from
        if resume is not None:
            self._load_groups(groups, resume["states"])
            loop = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                    for k, v in resume["async"].items()}
            parts = [{"state": st, "gens": g, "summary": loop["summaries"].get(i)}
                     for i, (st, g) in enumerate(zip(resume["states"], loop["gens"]))]
        else:
            loop = {"summaries": {}, "store": {}, "gens": [0] * len(groups), "history": [], "migrations": [],
                    "best": None, "completions": 0, "epochs": [0] * len(groups)}
            parts = [None] * len(groups)
        summaries, store, gens = loop["summaries"], loop["store"], loop["gens"]
        history, migrations = loop["history"], loop["migrations"]
        t0 = time.perf_counter()
        hits, restarts = None, 0

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

        def submit(i, inbound=None, remote=None):
            k = min(self.interval, self.generations - gens[i])
            gens[i] += k
            return groups[i].run_epoch.remote(k, inbound or {}, remote or {})

        def publish_snapshot():
            settle(wait=True)
            if any(p is None for p in parts):
                return self.last_snapshot
            loop_now = {**loop, "gens": [p["gens"] for p in parts],
                        "summaries": {i: p["summary"] for i, p in enumerate(parts) if p["summary"] is not None},
                        "store": dict(store), "history": list(history), "migrations": list(migrations)}
            self.last_snapshot = {"seed": self.seed, "groups": placement.groups, "mode": "async",
                                  "states": [p["state"] for p in parts], "config": resumable_config(self.cfg),
                                  "epoch": loop["completions"], "async": loop_now}
            return self.last_snapshot

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
                s = ray.get(done[0])
            except Exception as err:
                settle(wait=True)
                if parts[i] is None or not _actor_died(err) or restarts >= self.max_restarts:
                    raise
                restarts += 1
                log.warning("island group %d died (%s); restored its own state of generation %d, the other groups go "
                            "on (restart %d of %d)", i, type(err).__name__, parts[i]["gens"], restarts,
                            self.max_restarts)
                self._load_groups([groups[i]], [parts[i]["state"]])
                self._relocated([*self.group_infos[:i], ray.get(groups[i].info.remote()), *self.group_infos[i + 1:]])
                gens[i] = parts[i]["gens"]
                summaries.pop(i, None)
                if parts[i]["summary"] is not None:
                    summaries[i] = parts[i]["summary"]
                pending[submit(i)] = i
                continue
            prev_gen = summaries[i]["generation"] if i in summaries else 0
            summaries[i] = s
            loop["completions"] += 1
            loop["epochs"][i] += 1
            completions = loop["completions"]
            for p, gid in enumerate(s["island_ids"]):
                store[gid] = s["emigrants"].island(p)
            migrations.extend((completions, *e) for e in s["migrations"])
            bx, bf, bv, bg, _, evals, nan, hits = self._merge(summaries, placement)
            best = loop["best"] = _best_of([(bx, bf, bv, bg)] + ([loop["best"]] if loop["best"] else []))
            done_gen = min(summaries[j]["generation"] if j in summaries else 0 for j in range(len(groups)))
            record = self._record(completions, done_gen, t0, evals, nan, best, bf, bv, None, [s],
                                  s["generation"] - prev_gen, hits)
            history.append(record)
            yield record
            settle()
            if snapshots and (snapshot_due(i) or gens[i] >= self.generations):
                take(i)  # and at the group's last epoch, for a checkpoint that goes on with more generations
            if ck.get("every") and (completions % int(ck["every"]) == 0 or not pending and gens[i] >= self.generations):
                if i not in taking:
                    take(i)
                snap = publish_snapshot()
                if snap is not None:
                    checkpoint.save(ck["path"], snap)
            elif snapshot_due(i):
                publish_snapshot()
            if gens[i] < self.generations:
                ids = placement.groups[i]
                pos = {gid: p for p, gid in enumerate(ids)}
                rng = np.random.default_rng([self.seed, completions, 0xA5])
                inbound, remote = {}, {}
                for src, dst in self.topology.sample(self.n, rng):
                    if dst in pos and src in store:
                        inbound.setdefault(pos[dst], []).append(src)
                        if src not in pos:
                            remote[src] = store[src]
                pending[submit(i, inbound, remote)] = i
        return self._result(loop["best"], history, min(gens), t0, migrations, hits)

    # ------------------------------------------------------------------------------------------
    def _publish(self, record: dict) -> None:
        """Hand the epoch's record to the callbacks, unless its epoch was published already (an
        epoch replayed after a restart, or before an interrupted run was resumed)."""
        if record["epoch"] <= self.published_epoch:
            return
        self.published_epoch = record["epoch"]
        for cb in self.callbacks:
            if hasattr(cb, "on_epoch"):
                cb.on_epoch(record)

    @staticmethod
    def _result(best, history: list, generations: int, t0: float, migrations: list, hits=None) -> RunResult:
        return RunResult(best_x=best[0][0], best_f=float(best[1][0]), best_v=float(best[2][0]),
                         evaluations=history[-1]["evaluations"], generations=generations,
                         wall_s=time.perf_counter() - t0, startup_s=0.0, history=history,
                         nan_evals=history[-1]["nan_evaluations"], migrations=migrations,
                         best_genome=best[3][0], hit_generations=hits)

    def _merge(self, summaries: dict, placement):
        """Island-ordered arrays from group summaries: bests (phenotype ``bx``, genome ``bg``),
        emigrants by island, totals, and the stop-target generations (``None`` without one)."""
        n = self.n
        first = next(iter(summaries.values()))
        D = first["best_x"].shape[1]
        bx = np.full((n, D), np.nan, dtype=np.result_type(first["best_x"].dtype, np.float64))
        g0 = first["best"].genome[:, 0]
        bg = np.zeros((n,) + g0.shape[1:], dtype=g0.dtype)
        bf = np.full(n, np.inf)
        bv = np.full(n, np.inf)
        hits = None if first["hit_generation"] is None else np.full(n, -1, dtype=np.int64)
        emigrants, evals, nan = {}, 0, 0
        for s in summaries.values():
            ids = s["island_ids"]
            bx[ids], bf[ids], bv[ids] = s["best_x"], s["best_f"], s["best_v"]
            bg[ids] = s["best"].genome[:, 0]
            if hits is not None:
                hits[ids] = s["hit_generation"]
            if s["emigrants"] is not None:  # None inside a batch of epochs (run_epochs)
                for p, gid in enumerate(ids):
                    emigrants[gid] = s["emigrants"].island(p)
            evals += s["evals"] * len(ids)
            nan += s["nan_evals"]
        return bx, bf, bv, bg, emigrants, evals, nan, hits

    def _record(self, epoch, generation, t0, evals, nan, best, bf, bv, master_best, summaries, epoch_gens,
                hits=None) -> dict:
        """The epoch's metrics; ``summaries`` are the group summaries that arrived for it."""
        wall = time.perf_counter() - t0
        compute = max(s["compute_s"] for s in summaries)
        feasible = bv <= 0
        rec = {
            "epoch": epoch,
            "generation": generation,
            "wall_s": wall,
            "evaluations": int(evals),
            "evals_per_s": evals / wall if wall > 0 else 0.0,
            "best_f": float(best[1][0]),
            "best_v": float(best[2][0]),
            "best_feasible_f": float(best[1][0]) if best[2][0] <= 0 else math.nan,
            "n_feasible_islands": int(feasible.sum()),
            "nan_evaluations": int(nan),
            "compute_s_max": compute,
            "us_per_generation": 1e6 * compute / max(1, epoch_gens),
            "migrations_accepted": sum(m[2] for s in summaries for m in s["migrations"]),
            "island_best_f": bf.copy(),
            "island_best_v": bv.copy(),
        }
        if master_best is not None:
            rec["master_best_f"] = float(master_best[1][0])
        if hits is not None:
            rec["islands_at_target"] = int((hits >= 0).sum())
            rec["island_hit_generation"] = hits.copy()
        return rec


def _best_of(candidates):
    """Best row of stacked ``(x (k, D), f (k,), v (k,), genome (k, ...))`` candidates, as 1-row
    arrays ``(x (1, D), f (1,), v (1,), genome (1, ...))``."""
    x = np.concatenate([np.asarray(c[0], dtype=np.float64) for c in candidates])
    f = np.concatenate([c[1] for c in candidates])
    v = np.concatenate([c[2] for c in candidates])
    g = np.concatenate([c[3] for c in candidates])
    i = int(argbest(f, v, axis=0))
    return x[i:i + 1], f[i:i + 1], v[i:i + 1], g[i:i + 1]


def stop_target(stop: dict) -> float | None:
    """The stop rule's target ``stop.f_target + stop.tol`` (``None`` when ``stop.f_target`` is null).

    An island reaches the target when its best individual is feasible with ``f <= target``; the
    run ends when every island has (or at ``generations``).

    Raises:
        ValueError: ``stop.f_target`` not a number, or ``stop.tol`` negative (one line naming the field).
    """
    ft, tol = stop.get("f_target"), stop.get("tol", 0.0)
    tol = check_range("stop.tol", 0.0 if tol is None else tol, 0)
    if ft is None:
        return None
    return check_range("stop.f_target", ft) + tol


class _Local:
    """Stand-in for an actor handle when running in-process (``use_ray=False``)."""

    def __init__(self, group: IslandGroup):
        self._group = group

    def __getattr__(self, name):
        return getattr(self._group, name)


#: seconds of epochs an in-actor run (:class:`Archipelago`) runs between two reports to the driver
REPORT_S = 0.25
#: seconds of epochs in one batch of an in-process group (:meth:`IslandGroup.run_epochs`), and the
#: most epochs in one batch
BATCH_S = 0.2
MAX_BATCH = 1000


def _cluster_resources() -> dict:
    """Ray's cluster resources (``CPU``, ``GPU``, memory, ...; not the per-node ``node:`` keys),
    for the run's tags."""
    import ray  # noqa: PLC0415

    return {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}


def _island_nodes(infos: list) -> dict:
    """``{island id: Ray node id}`` from the groups' ``info`` (``None`` outside Ray)."""
    return {gid: info.get("node_id") for info in infos for gid in info["island_ids"]}


class Archipelago:
    """The whole archipelago in one process: a :class:`Coordinator` with in-process island
    groups, run as one Ray actor when every island shares one device (sync mode).

    The coordinator's epoch loop (migration plan, master swarm, archipelago best, checkpoints)
    runs beside the islands, so a per-generation exchange (CMEPSO's ``migration_interval=1``)
    costs no Ray round trip; the driver pulls the epoch records in batches with
    :meth:`advance`. Same code, same random numbers, same result as the loop in the driver.

    Args:
        cfg, topology, master: as :class:`Coordinator`.
        device: ``cpu`` or ``gpu``, the placement's device.
        resume_from: the driver's :attr:`Coordinator.resume_from` (read and checked there).
    """

    def __init__(self, cfg: dict, topology, master, device: str, resume_from: dict | None = None):
        ck = {**(cfg.get("checkpoint") or {}), "resume": None}
        cfg = {**cfg, "device": device, "islands": {**cfg["islands"], "n_actors": 1}, "checkpoint": ck}
        self.coordinator = Coordinator(cfg, topology, master, use_ray=False)
        self.coordinator.resume_from = resume_from
        self.placement = self.coordinator._placement()
        self.groups = self.coordinator._start_groups(self.placement)
        self._epochs = None

    def info(self) -> list:
        """The ``info`` of the one island group."""
        return [g.info() for g in self.groups]

    def advance(self, budget_s: float):
        """Run epochs for about ``budget_s`` seconds (at least one).

        Returns:
            ``(records, result, error, snapshot)``: the epochs' records; the :class:`RunResult`
            once the run has ended, else ``None``; the exception that ended the run, else
            ``None`` (given back rather than raised, so the records before it still reach the
            driver); the snapshot taken since the last call (the driver keeps it, to restart
            this actor from it if it dies), else ``None``.
        """
        if self._epochs is None:
            self._epochs = self.coordinator._run_sync(self.groups, self.placement)
        records, t0, snap0 = [], time.perf_counter(), self.coordinator.last_snapshot
        while True:
            try:
                records.append(next(self._epochs))
            except StopIteration as stop:
                return records, stop.value, None, self._new_snapshot(snap0)
            except Exception as err:  # noqa: BLE001
                err.traceback_str = traceback.format_exc()  # read by isles.islands.job.failure_line
                return records, None, err, self._new_snapshot(snap0)
            if time.perf_counter() - t0 >= budget_s:
                return records, None, None, self._new_snapshot(snap0)

    def _new_snapshot(self, before):
        snap = self.coordinator.last_snapshot
        return snap if snap is not before else None

    def resume(self, snapshot: dict) -> None:
        """Continue from ``snapshot`` (after Ray restarted this actor): the next :meth:`advance`
        runs the epochs after it."""
        self._epochs = self.coordinator._run_sync(self.groups, self.placement, resume=snapshot)


#: the loop variables of :meth:`Coordinator._run_sync` that a snapshot holds
LOOP_KEYS = ("done_gens", "epoch", "best", "master_state", "pending", "history", "migrations")

#: config sections that may change between a run and its resume (where and how it runs, not what)
RESUME_FREE = ("checkpoint", "ray", "logger", "progress", "quiet", "device", "hydra", "cuda_graph")
RESUME_FREE_KEYS = ("islands.n_actors", "islands.n_nodes", "islands.placement", "islands.snapshot_every",
                    "islands.max_restarts", "islands.restart_timeout_s", "generations")


def _loop_copy(src: dict) -> dict:
    """The loop variables of ``src`` (a loop dict or a snapshot), lists copied."""
    out = {k: src[k] for k in LOOP_KEYS}
    out["history"], out["migrations"] = list(out["history"]), list(out["migrations"])
    return out


def resumable_config(cfg: dict) -> dict:
    """The flattened config that a resume must repeat: everything but where and how the run
    runs (:data:`RESUME_FREE`, :data:`RESUME_FREE_KEYS`); ``generations`` may grow."""
    flat = {}

    def walk(d, prefix):
        for k, v in d.items():
            key = f"{prefix}{k}"
            if not prefix and k in RESUME_FREE or key in RESUME_FREE_KEYS:
                continue
            if isinstance(v, dict):
                walk(v, key + ".")
            elif not hasattr(v, "__dict__"):  # instantiated objects (topology) are compared by their config
                flat[key] = v
    walk(cfg, "")
    return flat


def check_resumable(data: dict, cfg: dict, path: str) -> None:
    """Refuse to resume a checkpoint under a different config.

    Raises:
        ValueError: one line naming the fields that differ, with both values.
    """
    saved, now = data.get("config", {}), resumable_config(cfg)
    diff = sorted(k for k in set(saved) | set(now) if saved.get(k, "<unset>") != now.get(k, "<unset>"))
    if diff:
        shown = "; ".join(f"{k}: saved {saved.get(k, '<unset>')!r}, now {now.get(k, '<unset>')!r}" for k in diff[:6])
        raise ValueError(f"checkpoint.resume={path!r}: the config differs from the saved run ({shown}); "
                         "resume with the saved values, or start a new run")


def _while_restarting(call, timeout_s: float = 120.0):
    """``call()``, retried while Ray reports the actor as restarting (unavailable), for up to
    ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except Exception as err:
            from ray.exceptions import ActorUnavailableError  # noqa: PLC0415

            if not isinstance(err, ActorUnavailableError) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _actor_died(err: BaseException) -> bool:
    """Whether ``err`` says an island-group actor was lost (Ray's actor errors)."""
    try:
        from ray.exceptions import ActorUnavailableError, RayActorError  # noqa: PLC0415
    except ImportError:
        return False
    return isinstance(err, (RayActorError, ActorUnavailableError))
