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

import copy
import logging
import os
import pickle
import socket
import threading
import time

import numpy as np

from isles.algorithms.core.backend import device_name, dtype_of, get_xp, synchronize, to_host
from isles.algorithms.core.base import Context
from isles.algorithms.core.graph import GraphStepper
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG
from isles.islands.build import build_algorithm, build_evaluator
from isles.islands.migration import emigrants_of, immigrate, migration_events
from isles.islands.policies import replacement_policy, selection_policy
from isles.islands.placement import ray_location
from isles.islands.planner import MASTER_ID, fixed_plan, group_plan, migration_edges  # noqa: F401  (MASTER_ID re-exported)
from isles.islands import span_graph
from isles.islands.span_graph import SpanGraph
from isles.islands.exchange import exchange
from isles.islands.exchange import layout as exchange_layout
from isles.islands.exchange import plan as exchange_plan
from isles.islands.plugin import with_broadcast
from isles.islands.replica import Replica
from isles.islands.links import PeerLinks

log = logging.getLogger(__name__)


class IslandGroup(PeerLinks):
    """A batch of islands on one device.

    Args:
        spec: plain dict with keys ``problem`` (config with ``_target_``), ``constraints``
            (``handling``, ``penalty``), ``algorithm`` (config with ``_target_``),
            ``island_ids`` (global ids of this group's islands), ``seed``, ``device``
            (``auto|cpu|gpu``), ``dtype`` (``float32|float64``), ``n_migrants`` (``k``) and
            ``replacement`` and ``selection`` (the migration policies: a name, ``{_target_: ...}``
            or a policy object, :mod:`isles.islands.policies`), ``target`` (stop rule
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
        self.replacement = replacement_policy(spec.get("replacement", "fair_replace"))
        self.selection = selection_policy(spec.get("selection", "select_best"), self.n_migrants, self.algorithm)
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
        #: islands.span_graph: auto | always | never (:mod:`isles.islands.span_graph`)
        self.span_graph = spec.get("span_graph", "auto")
        self.plugin = None  # the loop's plug-in hosted beside the islands (attach)
        self._pending_events = None  # device arrays of the last migration, fetched with the summary
        self._emigrant_cache = None  # emigrants selected for the last summary (state unchanged since)
        self._init_links()  # inbox, NCCL communicator, channels (islands/links.py)
        # held by a span and by state reads and writes: the driver's load of a snapshot after an
        # aborted span waits for the span's thread to leave (post and abort do not take it)
        self._state_lock = threading.RLock()

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
            "gpu_path": self.algorithm.gpu_path(self.ctx),
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
            decoded bit strings), ``best_f (I,)``, ``best_v (I,)``, ``emigrants``
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

    # -- the SPMD loop: epochs of this group, emigrants exchanged with its peers directly --------
    def run_span(self, span: int, first: tuple, ks: list, epoch0: int, route: dict) -> list:
        """Run ``len(ks)`` epochs of the sync loop in this actor, exchanging emigrants with the
        peer groups directly (:mod:`isles.islands.transport`), without the driver.

        Every group runs the same span: before epoch ``j > 0`` each computes the migration plan
        after epoch ``epoch0 + j`` from the topology, the seed and the epoch
        (:func:`isles.islands.planner.migration_edges`) and exchanges emigrants with its peers:
        over NCCL, GPU to GPU (``route["nccl"]`` and a communicator formed by :meth:`nccl_join`:
        :func:`isles.islands.exchange.exchange`), else through the shared-memory channel of each
        pair on one node (``route["channels"]``, :mod:`isles.islands.channels`) and by posting to
        the other peers what they need (:mod:`isles.islands.transport`). The epochs' summaries stay on the device and
        are fetched once, at the end of the span (:meth:`_batch_summaries`): over NCCL a span has
        one host synchronisation. The result is that of the driver's epoch-by-epoch loop, bit for
        bit.

        Args:
            span: the span's id (increasing over the run; messages of other spans are ignored).
            first: ``(inbound, remote)`` of the first epoch (the driver's plan, from the
                emigrants of the span before), as :meth:`run_epoch`'s.
            ks: generations of each epoch.
            epoch0: epochs finished before the span.
            route: ``peers`` (actor handles by group index), ``index`` (this group's),
                ``groups`` (island ids of every group), ``topology``, ``n``, ``seed``,
                ``timeout_s`` (the longest wait for a peer's emigrants), ``nccl`` (exchange over
                the group's NCCL communicator; with ``islands.span_graph=always`` like epochs
                replay one captured epoch, :mod:`isles.islands.span_graph`), ``send_master``
                (with a plug-in attached, :meth:`attach`: a replica of it runs here on every
                island's best, :mod:`isles.islands.replica`, and its best goes to every island),
                ``snapshots`` (epochs after which a snapshot falls due: their summaries carry
                ``snapshot``, ``(state_dict(), plugin_state_dict())``, and their emigrants, so that
                the driver's snapshot needs no call and the span need not end there).

        Returns:
            one :meth:`run_epoch` summary per epoch, with ``master`` as :meth:`run_epochs`' with a
            plug-in; ``emigrants`` only in the last (``None`` before); ``compute_s`` is the span's
            time divided evenly.

        Raises:
            isles.islands.transport.Aborted: the driver aborted the span (a peer was lost).
            TimeoutError: a peer's emigrants did not arrive within ``route["timeout_s"]``.
        """
        with self._state_lock:
            self.inbox.start(span)
            transport = self._transport(route)  # posts, or channels (islands/links.py)
            nccl = self._nccl if route.get("nccl") else None  # emigrants GPU to GPU (islands/exchange.py)
            mine = {gid: p for p, gid in enumerate(self.island_ids)}
            where = {gid: g for g, ids in enumerate(route["groups"]) for gid in ids}
            rows, edges, sent, sends, receives, lay = [], None, None, None, None, None
            # the loop's plug-in: a replica here, on every island's bests (islands/replica.py)
            replica = Replica(self, route, span, transport, nccl) if self.plugin is not None else None
            inbound, remote = first if replica is None else (first[0], replica.fill(first[1]))
            t0 = time.perf_counter()
            done = 0  # epochs run so far (a captured span graph runs several at once)
            single = len(route["groups"]) == 1  # no peer: the plan's sources are all here
            fixed = fixed_plan(route["topology"], route["n"])  # the same plan every epoch: made once
            graphable = replica is None and (nccl is not None or single) and span_graph.eligible(self, not single) and fixed
            snaps = sorted(route.get("snapshots", ()))  # epochs after which a snapshot falls due
            for j, k in enumerate(ks):
                if j < done:
                    continue
                m = next((i for i, x in enumerate(ks[j:]) if x != k), len(ks) - j)  # epochs like this one
                m = min([m] + [e - epoch0 - j for e in snaps if e > epoch0 + j])  # replays end at a snapshot
                if graphable and j >= 2 and m >= 2:  # the same epoch m times: replays of one captured epoch
                    if single:  # no exchange: the group's own (fixed) plan
                        got = self._span_graph(k, m, rows[-1]["events"], inbound=group_plan(edges, self.island_ids, {})[0])
                    else:  # the plan is fixed, so edges, sends and receives stay those of this epoch
                        lay = lay or exchange_layout(sent.island(0))
                        got = self._span_graph(k, m, rows[-1]["events"],
                                               exchange_args=(nccl, edges, mine, sends, receives, lay))
                    graphable = got is not None
                    if got is not None:
                        rows += got
                        done = j + m
                        if done < len(ks):
                            sent = self._emigrant_cache = self._emigrants()
                        self._keep_snapshot(rows, epoch0 + done in snaps, sent if done < len(ks) else None)
                        continue
                done = j + 1
                if j > 0:  # edges: the plan after epoch epoch0 + j, made at the end of the epoch before
                    if nccl is not None:
                        lay = lay or exchange_layout(sent.island(0))  # the individuals' leaves: fixed for the run
                        got = exchange(nccl, self.xp, sent, mine, sends, receives, lay)
                    else:  # with a replica, the emigrants came with the bests
                        got = replica.got if replica else transport.take(span, epoch0 + j, sorted(receives), route["timeout_s"])
                    inbound, remote = replica.plan(edges, got) if replica else group_plan(edges, self.island_ids, got)
                if inbound:
                    self._migrate(inbound, remote or {})
                self._evolve(k)
                # the epoch's summary stays on the device: one host synchronisation a span (_batch_summaries)
                best, posts = self.algorithm.best(self.state), None  # fresh arrays: a replayed graph reuses its buffers
                if j < len(ks) - 1:
                    if edges is None or not fixed:
                        edges = migration_edges(route["topology"], route["n"], route["seed"], epoch0 + j + 1)
                        sends, receives = exchange_plan(edges, mine, where)  # the same for every transport
                    sent = self._emigrant_cache = self._emigrants()  # also the next migration's local sources
                    if nccl is None:
                        host = sent.to_host()
                        posts = {g: {src: host.island(mine[src]) for src in srcs} for g, srcs in sends.items()}
                        if replica is None:
                            transport.send(span, epoch0 + j + 1, posts)
                if replica is not None:  # the plug-in's epoch on every island's best, before the row
                    replica.after_epoch(best, k, epoch0 + j + 1, posts)
                rows.append(self._row(best, self.algorithm.phenotype(best.genome[:, 0]), self.state))
                self._keep_snapshot(rows, epoch0 + j + 1 in snaps, sent if j < len(ks) - 1 else None)
            return self._end_batch(rows, t0)

    def run_span_packed(self, *args) -> bytes:
        """:meth:`run_span`'s summaries pickled into one bytes object, for the driver across Ray
        (Ray serialises each of a span's hundreds of small arrays as a buffer of its own: tiny CPU
        islands on 2 actors went from 0.79 to 0.76 ms an epoch)."""
        return pickle.dumps(self.run_span(*args), protocol=pickle.HIGHEST_PROTOCOL)

    def _keep_snapshot(self, rows: list, due: bool, sent) -> None:
        """Where a snapshot falls due after the last row's epoch (``due``), keep the group's state
        in the row, with the hosted plug-in's and the epoch's emigrants (``sent``, device arrays;
        ``None`` at a span's end, where the summary has them): the driver's snapshot needs no call,
        and a span need not end there."""
        if due:
            kept = (self.state_dict(), self.plugin_state_dict(), None if sent is None else sent.to_host())
            # NumPy's host arrays are the state's own, and the span goes on: copies (CuPy's are copies already)
            rows[-1]["snapshot"] = copy.deepcopy(kept) if self.xp is np else kept

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

    # -- the whole archipelago in this group: epochs in batches, the loop's plug-in beside ------
    def attach(self, factory, seed: int, stream: int, state: dict | None = None) -> None:
        """Host the loop's plug-in (:class:`isles.islands.plugin.LoopPlugin`, e.g. a master swarm)
        on this group's device, beside the islands, for :meth:`run_epochs`, or a replica of it for
        :meth:`run_span` (every group the same one).

        Args:
            factory: the config's ``master`` object; its ``plugin(xp, dtype, evaluator, seed,
                stream, state)`` makes the plug-in.
            seed: the run's seed; stream: the plug-in's random stream
                (:func:`isles.islands.plugin.plugin_stream`), the same as the driver's plug-in uses.
            state: a state to continue from (:meth:`plugin_state_dict`, or the driver's), or ``None``.
        """
        with self._state_lock:  # after an aborted span, once its thread has left
            self.plugin = factory.plugin(self.xp, self.ctx.dtype, self.evaluator, seed, stream, state)

    def plugin_state_dict(self) -> dict | None:
        """The hosted plug-in's state as host arrays (for snapshots), or ``None``."""
        if self.plugin is None:
            return None
        return self.plugin.state_dict()

    def run_epochs(self, plans: list) -> list:
        """Several epochs back to back on the device, with one host synchronisation at the end:
        the loop of the coordinator when this group hosts every island (and the master swarm,
        :meth:`attach`), so that a per-generation exchange costs no round trip.

        Args:
            plans: one ``(n_generations, inbound, remote)`` per epoch, as :meth:`run_epoch`'s
                arguments; a ``remote`` entry ``MASTER_ID: None`` is the hosted master's best.

        Returns:
            one summary per epoch, with :meth:`run_epoch`'s keys (``emigrants`` only in the last,
            ``None`` before; ``compute_s`` is the batch's compute time divided evenly) and, with
            a hosted master, ``master``: ``(x (1, D), f (1,), v (1,), evaluations, NaN
            evaluations)`` after the epoch's master generations (host values).
        """
        plugin = self.plugin
        t0 = time.perf_counter()
        if plugin is not None and plugin.graph_fits(self, plans):
            rows = plugin.run_graph(self, len(plans))
        else:
            if plugin is not None:
                plugin.leave_graph(self)
            rows = []
            graphable = plugin is None and span_graph.eligible(self, False)
            done = 0  # epochs run so far (a captured epoch replays several at once)
            for j, (k, inbound, remote) in enumerate(plans):
                if j < done:
                    continue
                done = j + 1
                if graphable and j >= 1:  # epochs like the one before (same generations and plan, no master)
                    def like(p, k=k, inbound=inbound):
                        return p[0] == k and p[1] == inbound and not p[2]

                    m = next((i for i, p in enumerate(plans[j:]) if not like(p)), len(plans) - j)
                    if like(plans[j - 1]) and m >= 2:
                        got = self._span_graph(k, m, rows[-1]["events"], inbound=inbound)
                        if got is not None:
                            rows += got
                            done = j + m
                            continue
                        graphable = False  # it did not fit or the capture failed: plain from here
                if inbound:
                    if plugin is not None:
                        remote = with_broadcast(remote, plugin)
                    self._migrate(inbound, remote or {})
                self._evolve(k)
                best = self.algorithm.best(self.state)  # fresh arrays: a replayed graph reuses its buffers
                px = self.algorithm.phenotype(best.genome[:, 0])
                if plugin is not None:
                    plugin.after_epoch(px, best.f[:, 0], best.v[:, 0], k)
                rows.append(self._row(best, px, self.state))
        return self._end_batch(rows, t0)

    def _span_graph(self, k: int, m: int, events, inbound: dict | None = None,
                    exchange_args: tuple | None = None) -> list | None:
        """``m`` like epochs of ``k`` generations as replays of one captured epoch
        (:class:`isles.islands.span_graph.SpanGraph`); their rows, or ``None`` where the plan does
        not fit. ``inbound``: the fixed plan from this group's own emigrants (:meth:`run_epochs`,
        one actor's :meth:`run_span`), where a failed capture is logged once and ``None`` returned
        too (the state is untouched: the caller goes on with plain epochs); ``exchange_args``
        ``(nccl, edges, mine, sends, receives, lay)``: emigrants exchanged with the peers over NCCL,
        where a failed capture raises (every peer captures the same epoch)."""
        sent = self._emigrant_cache or self._emigrants()
        most = (span_graph.most_sources(exchange_args[1]) if exchange_args is not None
                else max((len(v) for v in inbound.values()), default=0))
        if not SpanGraph.fits(self, [k] * m, True, sent, most):
            return None
        if exchange_args is not None:
            graph = SpanGraph(self, k, sent, events, exchange_args=exchange_args)
        else:
            try:
                graph = SpanGraph(self, k, sent, events, inbound=inbound)
            except Exception as err:  # noqa: BLE001  (e.g. a step that synchronises: CuPy refuses it in capture)
                log.warning("islands.span_graph: the epoch could not be captured (%s); plain epochs instead "
                            "(islands.span_graph=never skips the attempt)",
                            str(err).splitlines()[0] if str(err) else err)
                self.span_graph = "never"
                return None
        self._emigrant_cache = None
        rows = graph.run(m)
        graph.close()
        return rows

    def _end_batch(self, rows: list, t0: float) -> list:
        """The summaries of a batch of epochs (:meth:`run_epochs`, :meth:`run_span`) begun at
        ``t0``: the last epoch's emigrants selected and copied to the host (which synchronises:
        the batch's work is done), then :meth:`_batch_summaries` with the compute time divided
        evenly."""
        self._emigrant_cache = self._emigrants()
        emigrants = self._emigrant_cache.to_host()
        return self._batch_summaries(rows, emigrants, (time.perf_counter() - t0) / max(1, len(rows)))

    def _row(self, best: Population, px, state: dict) -> dict:
        """One epoch of :meth:`run_epochs`: copies of what its summary needs (device arrays;
        ``best`` and ``px`` must not be buffers that a later replay overwrites), and the hosted
        plug-in's best and counters (``master``)."""
        xp, hit = self.xp, state.get("hit_generation")
        row = {"best": best, "best_x": px, "generation": int(state["generation"]), "evals": int(state["evals"]),
               "pair_evals": int(state.get("pair_evals", 0)),
               "nan_evals": xp.array(state["nan_evals"], copy=True),
               "hit_generation": None if hit is None else xp.array(hit, copy=True),
               "events": self._pending_events}
        self._pending_events = None
        if self.plugin is not None and self.plugin.started():
            mx, mf, mv = self.plugin.best()
            evals, nan = self.plugin.counters()
            row["master"] = (xp.array(mx, copy=True), xp.array(mf, copy=True), xp.array(mv, copy=True),
                             evals, xp.array(nan, copy=True))
        return row

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
            kept = r.get("snapshot")  # (state, plug-in state, emigrants) where a snapshot falls due (run_span)
            s = self._summary_of(Population.from_leaves({name: a[e] for name, a in best.items()}), best_x[e],
                                 emigrants if e == len(rows) - 1 else kept and kept[2], r, int(nan[e]),
                                 None if hits is None else hits[e], compute_s)
            if kept:
                s["snapshot"] = kept[:2]
            if "master" in r:
                s["master"] = (mx[e].reshape(1, -1), mf[e].reshape(1), mv[e].reshape(1), r["master"][3], int(mn[e]))
            out.append(s)
        return out

    # ------------------------------------------------------------------------------------------
    def _emigrants(self):
        """The emigrants of this group's islands (:func:`isles.islands.migration.emigrants_of`)."""
        return emigrants_of(self.algorithm, self.state, self.n_migrants, self.selection)

    def _migrate(self, inbound: dict, remote: dict) -> None:
        """Immigrants in (:func:`isles.islands.migration.immigrate`), on the device; the events
        are fetched with the next summary."""
        emigrants = self._emigrant_cache or self._emigrants()
        self._emigrant_cache = None
        self.state, events = immigrate(self.algorithm, self.ctx, self.state, self.island_ids, emigrants,
                                       inbound, remote, self.replacement)
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
            "payoff_evals": int(state.get("pair_evals", 0)),  # a min-max algorithm's pair payoffs per island
            "nan_evals": nan_evals,
            "hit_generation": hit_generation,
            "migrations": self._migration_events(),
            "compute_s": compute_s,
            "device": device_name(self.xp),
        }

    def _migration_events(self) -> list:
        pending, self._pending_events = self._pending_events, None
        return migration_events(pending, self.island_ids)

    def state_dict(self) -> dict:
        """The group's state as host arrays (for checkpoints)."""
        with self._state_lock:
            return {k: to_host(v) if hasattr(v, "shape") else v for k, v in self.state.items()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state saved by :meth:`state_dict` (arrays moved to this group's device)."""
        with self._state_lock:
            self._emigrant_cache = None
            if self.plugin is not None:
                self.plugin.leave_graph(self)
            if self.stepper is not None:
                self.stepper.close()
                self.stepper = None
            self.state = {
                k: self.xp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in state.items()
            }
