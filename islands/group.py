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
        )
        self.state = self.algorithm.track_target(self.ctx, self.algorithm.init(self.ctx))
        # GPU fast path: replay one captured generation as a CUDA graph (algorithms/core/graph.py)
        self.use_graph = (self.xp is not np and getattr(self.algorithm, "graph_safe", False)
                          and bool(spec.get("cuda_graph", True)))
        self.stepper = None
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
        if self.use_graph and n_generations > 0:
            if self.stepper is None:
                self.stepper = GraphStepper.for_algorithm(self.algorithm, self.ctx, self.state)
            self.stepper.run(n_generations)
            self.state = self.stepper.state
        else:
            self.state = self.algorithm.run(self.ctx, self.state, int(n_generations))
            # an algorithm whose run() does not track per generation is caught at the epoch's end
            self.state = self.algorithm.track_target(self.ctx, self.state)
        synchronize(self.xp)
        compute_s = time.perf_counter() - t0
        return self._summary(compute_s)

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
        out = {
            "island_ids": self.island_ids,
            "best": best,
            "best_x": np.asarray(to_host(self.algorithm.phenotype(best.genome[:, 0]))),
            "best_f": best.f[:, 0],
            "best_v": best.v[:, 0],
            "emigrants": self._emigrant_cache.to_host(),
            "generation": int(self.state["generation"]),
            "evals": int(self.state["evals"]),
            "nan_evals": int(to_host(self.state["nan_evals"])),
            "hit_generation": None if hit is None else to_host(hit).astype(np.int64),
            "migrations": self._migration_events(),
            "compute_s": compute_s,
            "device": device_name(self.xp),
        }
        return out

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
        if self.stepper is not None:
            self.stepper.close()
            self.stepper = None
        self.state = {
            k: self.xp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in state.items()
        }


def _stack_leaves(pops) -> dict:
    """``{leaf name: [array of each population]}`` for populations with the same leaves."""
    out: dict = {}
    for p in pops:
        for name, a in p.leaves().items():
            out.setdefault(name, []).append(a)
    return out
