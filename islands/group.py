"""An island group: the islands one device hosts, evolved as one batched population.

One :class:`IslandGroup` lives in each Ray actor (one actor per GPU, or per CPU worker). It holds
``I`` islands as one batch (``islands x N x D``) and advances all of them with the same kernel
launches. A call to :meth:`IslandGroup.run_epoch` first applies the migration of this epoch
(islands of this group exchange emigrants on the device; emigrants of islands elsewhere arrive
as small host arrays), then runs ``n_generations`` generations on the device without round trips,
and returns a small summary of host arrays (per-island bests, emigrants, counters, timings).

The class is plain Python, so tests and single-process benchmarks use it without Ray; the
runtime wraps it with ``ray.remote``.
"""
from __future__ import annotations

import os
import socket
import time

import numpy as np

from isles.algorithms.core.backend import device_name, dtype_of, get_xp, synchronize, to_host
from isles.algorithms.core.base import Context
from isles.algorithms.core.graph import GraphStepper
from isles.algorithms.core.population import Population, PopulationRoles, by_role
from isles.algorithms.core.random import CounterRNG
from isles.islands.build import build_algorithm, build_evaluator
from isles.islands.migration import PAD, replacement, route, select_best
from isles.islands.placement import ray_location

MASTER_ID = -1  # source id of the master swarm's best in migration plans


class IslandGroup:
    """A batch of islands on one device.

    Args:
        spec: plain dict with keys ``problem`` (config with ``_target_``), ``constraints``
            (``handling``, ``penalty``), ``algorithm`` (config with ``_target_``),
            ``island_ids`` (global ids of this group's islands), ``seed``, ``device``
            (``auto|cpu|gpu``), ``dtype`` (``float32|float64``), ``n_migrants`` (``k``) and
            ``replacement`` (``fair_replace|replace_worst``), ``target`` (stop rule
            ``stop.f_target + stop.tol`` or ``None``, :class:`isles.algorithms.core.base.Context`), ``cuda_graph`` (replay captured
            generations on CuPy, default true).

    Raises:
        ValueError: bad config values (named by field), or ``device=gpu`` without a GPU.
    """

    def __init__(self, spec: dict):
        self.spec = spec
        self.xp = get_xp(spec.get("device", "auto"))
        self.island_ids = [int(i) for i in spec["island_ids"]]
        self.evaluator = build_evaluator(spec["problem"], spec.get("constraints"))
        self.algorithm = build_algorithm(spec["algorithm"])
        self.n_migrants = int(spec.get("n_migrants", 1))
        self.replacement = spec.get("replacement", "fair_replace")
        self.ctx = Context(
            xp=self.xp,
            dtype=dtype_of(spec.get("dtype", "float64")),
            evaluator=self.evaluator,
            rng=CounterRNG(self.xp, int(spec.get("seed", 0)), self.island_ids),
            target=spec.get("target"),
            cuda_graph=bool(spec.get("cuda_graph", True)),
        )
        self.state = self.algorithm.track_target(self.ctx, self.algorithm.init(self.ctx))
        # GPU fast path: replay one captured generation as a CUDA graph (algorithms/core/graph.py)
        self.use_graph = (self.xp is not np and getattr(self.algorithm, "graph_safe", False)
                          and bool(spec.get("cuda_graph", True)))
        self.stepper = None
        self.master, self.master_state, self.hosted = None, None, None  # attach_master, _run_hosted
        self._pending_events = None  # device arrays of the last migration, fetched with the summary
        self._emigrant_cache = None  # emigrants selected for the last summary (state unchanged since)

    # ------------------------------------------------------------------------------------------
    def info(self) -> dict:
        """Where this group runs: device name, host, pid, island ids, and its place in Ray
        (:func:`isles.islands.placement.ray_location`: ``ray_gpu_ids``, ``node_id``, ``node_ip``)."""
        return {
            "device": device_name(self.xp),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **ray_location(),
            "island_ids": self.island_ids,
        }

    def run_epoch(self, n_generations: int, inbound: dict | None = None, remote: dict | None = None) -> dict:
        """Migrate, then evolve ``n_generations`` generations; return the epoch summary.

        Args:
            n_generations: generations to run (>= 0).
            inbound: ``{local position of a destination island: [global source ids]}``.
            remote: ``{global source id: Population (1, k)}`` emigrants (host arrays) of islands
                not in this group, and of the master swarm (id ``-1``, one individual).

        Returns:
            dict of host values: ``island_ids``, ``best`` (Population ``(I, 1)``, the best
            individual of each island with its extras), ``best_x (I, D)`` (its phenotype, e.g.
            the decoded bits of a GA), ``best_f (I,)``, ``best_v (I,)``, ``emigrants``
            (Population ``(I, k)``), ``generation``, ``evals`` (per island), ``nan_evals``
            (whole group), ``hit_generation`` (``(I,)`` int, -1 = not yet, or ``None`` without
            a stop target), ``migrations`` (list of ``(src, dst, accepted, best f moved)``),
            ``compute_s``, ``device``.
        """
        if inbound:
            self._migrate(inbound, remote or {})
        t0 = time.perf_counter()
        self._evolve(n_generations)
        synchronize(self.xp)
        compute_s = time.perf_counter() - t0
        return self._summary(compute_s)

    def _evolve(self, n_generations: int) -> None:
        """``n_generations`` generations on the device (captured-graph replays where possible),
        without a host synchronisation."""
        if self.use_graph and n_generations > 0:
            if self.stepper is None:
                self.stepper = GraphStepper.for_algorithm(self.algorithm, self.ctx, self.state)
            self.stepper.run(n_generations)
            self.state = self.stepper.state
        else:
            self.state = self.algorithm.run(self.ctx, self.state, int(n_generations))
            # an algorithm whose run() does not track per generation is caught at the epoch's end
            self.state = self.algorithm.track_target(self.ctx, self.state)

    # -- the whole archipelago in this group: epochs in batches, the master swarm beside ----------
    def attach_master(self, master, seed: int, stream: int, state: dict | None = None) -> None:
        """Host the master swarm (CMEPSO, :class:`isles.algorithms.pso.cmepso.MasterSwarm`) on
        this group's device, beside the slave islands, for :meth:`run_epochs`.

        Args:
            master: the master swarm.
            seed: the run's seed; stream: the master's random stream (the number of islands, as
                the coordinator's master on the host uses), so both draw the same numbers.
            state: a master state to continue from (host arrays of :meth:`master_state_dict`, or
                the coordinator's), or ``None`` to start it from the first epoch's bests.
        """
        self.master = master
        self.master_ctx = Context(xp=self.xp, dtype=self.ctx.dtype, evaluator=self.evaluator,
                                  rng=CounterRNG(self.xp, int(seed), [int(stream)]))
        self.load_master(state)

    def load_master(self, state: dict | None) -> None:
        """Set the hosted master swarm's state (host or device arrays, or ``None``: start afresh)."""
        self._leave_hosted()
        self.master_state = None if state is None else {
            k: self.xp.asarray(v) if hasattr(v, "shape") else v for k, v in state.items()}

    def master_state_dict(self) -> dict | None:
        """The hosted master swarm's state as host arrays (for snapshots), or ``None`` before
        its first epoch."""
        if self.master_state is None:
            return None
        return {k: to_host(v) if hasattr(v, "shape") else v for k, v in self.master_state.items()}

    def run_epochs(self, plans: list) -> list:
        """Several epochs back to back on the device, with one host synchronisation at the end:
        the loop of the coordinator when this group hosts every island (and the master swarm,
        :meth:`attach_master`), so that a per-generation exchange costs no round trip.

        Args:
            plans: one ``(n_generations, inbound, remote)`` per epoch, as :meth:`run_epoch`'s
                arguments; a ``remote`` entry ``MASTER_ID: None`` is the hosted master's best.

        Returns:
            one summary per epoch, with :meth:`run_epoch`'s keys (``emigrants`` only in the last,
            ``None`` before; ``compute_s`` is the batch's compute time divided evenly) and, with
            a hosted master, ``master``: ``(x (1, D), f (1,), v (1,), evaluations, NaN
            evaluations)`` after the epoch's master generations (host values).
        """
        master = self.master
        t0 = time.perf_counter()
        if self._hosted_graph_fits(plans):
            rows = self._run_hosted(len(plans))
        else:
            self._leave_hosted()
            rows = []
            for k, inbound, remote in plans:
                if inbound:
                    if master is not None and MASTER_ID in (remote or {}) and remote[MASTER_ID] is None:
                        remote = {**remote, MASTER_ID: self._master_best()}
                    self._migrate(inbound, remote or {})
                self._evolve(k)
                best = self.algorithm.best(self.state)  # fresh arrays: a replayed graph reuses its buffers
                px = self.algorithm.phenotype(best.genome[:, 0])
                if master is not None:
                    bf, bv = best.f[:, 0], best.v[:, 0]
                    if self.master_state is None:
                        self.master_state = master.init(self.master_ctx, px, bf, bv)
                    self.master_state = master.run_epoch(self.master_ctx, self.master_state, px, bf, bv, k)
                rows.append(self._row(best, px, self.state, self.master_state if master is not None else None))
        self._emigrant_cache = self._emigrants()
        emigrants = self._emigrant_cache.to_host()  # synchronises: the batch's work is done
        compute_s = (time.perf_counter() - t0) / max(1, len(rows))
        return self._batch_summaries(rows, emigrants, compute_s)

    def _row(self, best: Population, px, state: dict, master_state: dict | None) -> dict:
        """One epoch of :meth:`run_epochs`: copies of what its summary needs (device arrays;
        ``best`` and ``px`` must not be buffers that a later replay overwrites)."""
        xp, hit = self.xp, state.get("hit_generation")
        row = {"best": best, "best_x": px, "generation": int(state["generation"]), "evals": int(state["evals"]),
               "nan_evals": xp.array(state["nan_evals"], copy=True),
               "hit_generation": None if hit is None else xp.array(hit, copy=True),
               "events": self._pending_events}
        self._pending_events = None
        if master_state is not None:
            mx, mf, mv = self.master.best(master_state)
            row["master"] = (xp.array(mx, copy=True), xp.array(mf, copy=True), xp.array(mv, copy=True),
                             int(master_state["evals"]), xp.array(master_state["nan_evals"], copy=True))
        return row

    # -- slaves and master as one captured CUDA graph (CMEPSO's per-generation exchange) --------
    def _hosted_graph_fits(self, plans: list) -> bool:
        """Whether a batch runs as replays of one captured iteration (slaves' generation, their
        bests, the master's generation): on CuPy with a hosted, started master, and epochs of
        one generation without migration (CMEPSO, seed 001 Algorithm 3)."""
        return (self.use_graph and self.master is not None and self.master_state is not None
                and all(k == 1 and not inbound for k, inbound, _ in plans))

    def _run_hosted(self, n_epochs: int) -> list:
        """``n_epochs`` replays of the captured iteration, each followed by copies of its
        outputs (the slaves' bests and the master's state)."""
        if self.hosted is None:
            if self.stepper is not None:
                self.state = self.stepper.close()
                self.stepper = None
            self.hosted = GraphStepper(self._hosted_iteration, self._hosted_flat(), [self.ctx.rng, self.master_ctx.rng])
        rows = []
        for _ in range(n_epochs):
            self.hosted.run(1)
            flat = self.hosted.state
            best = Population.from_leaves({k[2:]: flat[k].copy() for k in flat if k.startswith("b.")})
            self.state, self.master_state = _split(flat, "s."), _split(flat, "m.")
            rows.append(self._row(best, flat["r.best_x"].copy(), self.state, self.master_state))
        return rows

    def _hosted_iteration(self, flat: dict) -> dict:
        """One CMEPSO iteration over the flat state ``s.*`` (slaves), ``m.*`` (master), ``b.*``
        (the slaves' bests, a Population's leaves) and ``r.best_x`` (their phenotype):
        the same operations as the epoch-by-epoch path, in the same order."""
        a, ctx = self.algorithm, self.ctx
        s = a.track_target(ctx, a.step(ctx, _split(flat, "s.")))
        best = a.best(s)
        px = a.phenotype(best.genome[:, 0])
        m = self.master.run_epoch(self.master_ctx, _split(flat, "m."), px, best.f[:, 0], best.v[:, 0], 1)
        return {**_prefixed(s, "s."), **_prefixed(m, "m."), **_prefixed(best.leaves(), "b."), "r.best_x": px}

    def _hosted_flat(self) -> dict:
        """The flat state of :meth:`_hosted_iteration` from the current states."""
        best = self.algorithm.best(self.state)
        return {**_prefixed(self.state, "s."), **_prefixed(self.master_state, "m."), **_prefixed(best.leaves(), "b."),
                "r.best_x": self.algorithm.phenotype(best.genome[:, 0])}

    def _leave_hosted(self) -> None:
        """Stop replaying the captured iteration; the states become plain states again."""
        if self.hosted is not None:
            flat = self.hosted.close()
            self.hosted = None
            self.state, self.master_state = _split(flat, "s."), _split(flat, "m.")

    def _master_best(self) -> Population:
        """The hosted master swarm's best as a one-individual population ``(1, 1)``."""
        mx, mf, mv = self.master.best(self.master_state)
        return Population(mx[None, None], mf.reshape(1, 1), mv.reshape(1, 1))

    def _batch_summaries(self, rows: list, emigrants, compute_s: float) -> list:
        """Host summaries of :meth:`run_epochs`' rows: each device leaf stacked over the epochs
        and copied to the host once."""
        xp = self.xp
        leaves = rows[0]["best"].leaves()
        best = {name: to_host(xp.stack([r["best"].leaves()[name] for r in rows])) for name in leaves}
        best_x = to_host(xp.stack([r["best_x"] for r in rows]))
        nan = to_host(xp.stack([r["nan_evals"] for r in rows]))
        hits = (None if rows[0]["hit_generation"] is None
                else to_host(xp.stack([r["hit_generation"] for r in rows])).astype(np.int64))
        if "master" in rows[0]:
            mx, mf, mv, mn = (to_host(xp.stack([r["master"][j] for r in rows])) for j in (0, 1, 2, 4))
        out = []
        for e, r in enumerate(rows):
            self._pending_events = r["events"]
            s = self._summary_of(Population.from_leaves({name: a[e] for name, a in best.items()}), best_x[e],
                                 emigrants if e == len(rows) - 1 else None, r, int(nan[e]),
                                 None if hits is None else hits[e], compute_s)
            if "master" in r:
                s["master"] = (mx[e].reshape(1, -1), mf[e].reshape(1), mv[e].reshape(1), r["master"][3], int(mn[e]))
            out.append(s)
        return out

    # ------------------------------------------------------------------------------------------
    def _emigrants(self):
        """The ``k`` best of every population role (:meth:`IslandAlgorithm.populations`): a
        :class:`Population` for a one-population algorithm, else a :class:`PopulationRoles`."""
        pops = self.algorithm.populations(self.state)
        out = {r: p.take(select_best(p.f, p.v, self.n_migrants)) for r, p in pops.items()}
        return out[None] if list(out) == [None] else PopulationRoles(out)

    def _migrate(self, inbound: dict, remote: dict) -> None:
        """Immigrants in, through :func:`islands.migration.route` and
        :func:`isles.islands.migration.replacement`: the one code path for every algorithm. Each
        population role receives emigrants of the same role only, and the algorithm may
        re-assess immigrants before they compete (:meth:`IslandAlgorithm.assess_immigrants`)."""
        xp, I = self.xp, len(self.island_ids)
        emigrants = by_role(self._emigrant_cache or self._emigrants())
        self._emigrant_cache = None
        remote = {rid: by_role(r) for rid, r in remote.items()}
        events = []
        for role, residents in self.algorithm.populations(self.state).items():
            mine = emigrants[role]
            k = mine.shape[1]
            offsets, counts, pool = {}, {}, [mine]
            for p, gid in enumerate(self.island_ids):
                offsets[gid], counts[gid] = p * k, k
            row = I * k
            for rid in sorted(remote):
                if role not in remote[rid]:  # a source without this role (the master swarm's best)
                    continue
                r = remote[rid][role].conform(residents)
                c = r.shape[1]
                offsets[rid], counts[rid] = row, c
                pool.append(r)
                row += c
            rows, src_of, valid = route(inbound, I, offsets, counts, residents.shape[1],
                                        rotate=int(self.state["generation"]))
            if not valid.any():
                continue
            flat = Population.from_leaves({
                name: xp.concatenate([a.reshape((-1,) + a.shape[2:]) for a in arrays])
                for name, arrays in _stack_leaves([p.conform(residents) for p in pool]).items()
            })
            rows_d = xp.asarray(rows)
            immigrants = flat.map(lambda a: a[rows_d])
            self.state, immigrants = self.algorithm.assess_immigrants(self.ctx, self.state, role, immigrants)
            residents = self.algorithm.populations(self.state)[role]
            idx, new, accepted, order = replacement(self.replacement, residents, immigrants, xp.asarray(valid))
            self.state = self.algorithm.replace_role(self.ctx, self.state, role, idx, new)
            events.append((src_of, order, accepted, new.f))
        if not events:
            return
        if self.stepper is not None:
            self.stepper.load(self.state)
            self.state = self.stepper.state
        self._pending_events = events

    def _summary(self, compute_s: float) -> dict:
        best = self.algorithm.best(self.state).to_host()
        self._emigrant_cache = self._emigrants()
        hit = self.state.get("hit_generation")
        return self._summary_of(best, np.asarray(to_host(self.algorithm.phenotype(best.genome[:, 0]))),
                                self._emigrant_cache.to_host(), self.state, int(to_host(self.state["nan_evals"])),
                                None if hit is None else to_host(hit).astype(np.int64), compute_s)

    def _summary_of(self, best: Population, best_x, emigrants, state: dict, nan_evals: int, hit_generation,
                    compute_s: float) -> dict:
        """An epoch's summary (what :meth:`run_epoch` returns) from host values: the islands'
        bests ``best`` (Population ``(I, 1)``) and their phenotype ``best_x (I, D)``, the
        ``emigrants`` (Population ``(I, k)``, or ``None`` inside a batch), the counters of
        ``state`` (``generation``, ``evals``), NaN evaluations, the stop-target generations
        ``(I,)`` or ``None``, the compute seconds, and this epoch's migration events."""
        return {
            "island_ids": self.island_ids,
            "best": best,
            "best_x": best_x,
            "best_f": best.f[:, 0],
            "best_v": best.v[:, 0],
            "emigrants": emigrants,
            "generation": int(state["generation"]),
            "evals": int(state["evals"]),
            "nan_evals": nan_evals,
            "hit_generation": hit_generation,
            "migrations": self._migration_events(),
            "compute_s": compute_s,
            "device": device_name(self.xp),
        }

    def _migration_events(self) -> list:
        pending = self._pending_events
        if pending is None:
            return []
        self._pending_events = None
        events = []
        for src_of, order, accepted, f_new in pending:  # one entry per population role
            order, accepted, f_new = to_host(order), to_host(accepted), to_host(f_new)
            src_sorted = np.take_along_axis(src_of, order, axis=1)
            for dst in range(src_sorted.shape[0]):
                for src in np.unique(src_sorted[dst]):
                    if src == PAD:
                        continue
                    m = (src_sorted[dst] == src) & accepted[dst]
                    events.append(
                        (int(src), self.island_ids[dst], int(m.sum()), float(f_new[dst][m].min()) if m.any() else None)
                    )
        return events

    def state_dict(self) -> dict:
        """The group's state as host arrays (for checkpoints)."""
        return {k: to_host(v) if hasattr(v, "shape") else v for k, v in self.state.items()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state saved by :meth:`state_dict` (arrays moved to this group's device)."""
        self._emigrant_cache = None
        self._leave_hosted()
        if self.stepper is not None:
            self.stepper.close()
            self.stepper = None
        self.state = {
            k: self.xp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in state.items()
        }


def _split(flat: dict, prefix: str) -> dict:
    """The entries of ``flat`` under ``prefix``, without it."""
    return {k[len(prefix):]: v for k, v in flat.items() if k.startswith(prefix)}


def _prefixed(d: dict, prefix: str) -> dict:
    """``d`` with ``prefix`` before every key."""
    return {prefix + k: v for k, v in d.items()}


def _stack_leaves(pops) -> dict:
    """``{leaf name: [array of each population]}`` for populations with the same leaves."""
    out: dict = {}
    for p in pops:
        for name, a in p.leaves().items():
            out.setdefault(name, []).append(a)
    return out
