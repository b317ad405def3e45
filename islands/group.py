"""An island group: the islands one device hosts, evolved as one batched population.

One :class:`IslandGroup` lives in each Ray actor (one actor per GPU, or per CPU worker), or in the
driver's process (``use_ray=False``). It holds ``I`` islands as one batch (``islands x N x D``) and
advances all of them with the same kernel launches. The driver orders spans of epochs
(:meth:`IslandGroup.run_span`); each epoch is the one epoch body, :func:`isles.islands.epoch.run_epoch`
(emigrants between this group's islands move on the device; those of other groups over the span's
link, :mod:`isles.islands.transport.link`), and the summaries of a span come back as host arrays at its end.

The class is plain Python, so tests and single-process benchmarks use it without Ray; the
runtime wraps it with ``ray.remote``.
"""

from __future__ import annotations

import copy
import dataclasses
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
from isles.algorithms.core.threads import limit_blas_threads
from isles.islands import span_graph
from isles.islands.config.build import build_algorithm, build_evaluator
from isles.islands.control.placement import ray_location
from isles.islands.epoch import Row, Rows, run_epoch
from isles.islands.migration.contract import Guarded, MigrationContext, guarded, policy_rng
from isles.islands.migration.moves import emigrants_of, migration_events
from isles.islands.migration.planner import arrivals_plan, fixed_plan, migration_edges
from isles.islands.migration.policies import replacement_policy, selection_policy
from isles.islands.mixed import layout_of
from isles.islands.records import EpochSummary, GroupSnapshot, GroupSpec, Plan, SpanOrder
from isles.islands.span_graph import SpanGraph
from isles.islands.transport.kinds import span_link
from isles.islands.transport.link import ActorTransport, Alone, Arrivals
from isles.islands.transport.peer_links import PeerLinks

log = logging.getLogger(__name__)


class IslandGroup(PeerLinks):
    """A batch of islands on one device, with its replicas of the loop's plug-ins.

    Args:
        spec: the :class:`isles.islands.records.GroupSpec`.

    Raises:
        ValueError: bad config values (named by field), or ``device=gpu`` without a GPU.
    """

    def __init__(self, spec: GroupSpec):
        self.spec = spec
        self.xp = get_xp(spec.device)
        self.island_ids = [int(i) for i in spec.island_ids]
        self.evaluator = build_evaluator(spec.problem, spec.constraints)
        # this process's BLAS threads, from its cores and its matrices' size (algorithms/core/threads.py)
        limit_blas_threads(dim=getattr(self.evaluator.problem, "dim", None))
        self.algorithm = build_algorithm(spec.algorithm)
        self.layout = layout_of(self.algorithm)  # one family on every island, or a mixed batch's parts
        self.n_migrants = int(spec.n_migrants)
        # a user's policy is checked where it returns (islands/migration/contract.py); the built-ins as they are
        self.replacement = guarded(replacement_policy(spec.replacement), "replace")
        self.selection = guarded(selection_policy(spec.selection, self.n_migrants, self.algorithm), "select")
        self.epoch = 0  # the epochs completed (the next migration is the one after this epoch)
        self._policy_rngs: dict = {}  # the policies' generators of this group's islands (policy_context)
        self.ctx = Context(
            xp=self.xp,
            dtype=dtype_of(spec.dtype),
            evaluator=self.evaluator,
            rng=CounterRNG(self.xp, int(spec.seed), self.island_ids),
            target=spec.target,
            cuda_graph=bool(spec.cuda_graph),
        )
        self.state = self.algorithm.track_target(self.ctx, self.algorithm.init(self.ctx))
        # GPU fast path: replay one captured generation as a CUDA graph (algorithms/core/graph.py)
        self.use_graph = self.xp is not np and self.algorithm.graph_safe and bool(spec.cuda_graph)
        self.stepper = None
        self.graph = None  # one group's span graph, kept across its spans while the epochs stay alike
        #: islands.span_graph: auto | always | never (:mod:`isles.islands.span_graph`)
        self.span_graph = spec.span_graph
        # the loop's plug-ins: this group's replicas (every group builds the same ones)
        self.plugins = [
            f.make(self.xp, self.ctx.dtype, self.evaluator, int(spec.seed), spec.plugin_stream + j)
            for j, f in enumerate(spec.plugins)
        ]
        self.sent = None  # the emigrants selected after the last epoch (state unchanged since), device arrays
        self._init_links()  # inbox, NCCL communicator, channels (islands/transport/peer_links.py)
        # held by a span and by state reads and writes: the driver's load of a snapshot after an
        # aborted span waits for the span's thread to leave (post and abort do not take it)
        self._state_lock = threading.RLock()

    # ------------------------------------------------------------------------------------------
    def info(self) -> dict:
        """Where this group runs: device name, host, pid, island ids, and its place in Ray
        (:func:`isles.islands.control.placement.ray_location`: ``ray_gpu_ids``, ``node_id``, ``node_ip``)."""
        return {
            "device": device_name(self.xp),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **ray_location(),
            "island_ids": self.island_ids,
            "gpu_path": self.algorithm.gpu_path(self.ctx),
        }

    def run_span(self, order: SpanOrder) -> list:
        """Run the span's epochs (:func:`isles.islands.epoch.run_epoch` each), exchanging emigrants
        with the peer groups directly, without the driver.

        Every group runs the same span: after each epoch ``e`` it computes the plan of the migration
        after ``e`` from the topology, the seed and ``e`` (:func:`isles.islands.migration.planner.migration_edges`)
        and exchanges emigrants with its peers over the span's link (``route.transport``,
        :mod:`isles.islands.transport.kinds`): NCCL (a communicator formed by :meth:`nccl_join`),
        shared-memory channels or posts to the peers' inboxes (Ray actors, or in-process groups). The first epoch's migration is the
        driver's (``order.first``, from the emigrants of the span before). Like epochs replay one
        captured epoch where they can (:mod:`isles.islands.span_graph`). The epochs' rows stay on the
        device and are copied to the host once, at the end of the span.

        Args:
            order: the :class:`isles.islands.records.SpanOrder`.

        Returns:
            one :class:`isles.islands.records.EpochSummary` per epoch: ``emigrants`` in the last (and
            where a snapshot fell due, with its ``snapshot``); ``compute_s`` is the span's time divided evenly.

        Raises:
            isles.islands.transport.link.Aborted: the driver aborted the span (a peer was lost).
            TimeoutError: a peer's message did not arrive within ``route.timeout_s``.
        """
        with self._state_lock:
            r, ks, epoch0 = order.route, list(order.ks), int(order.epoch0)
            self.inbox.start(order.span)
            link = span_link(self, r, order.span)
            single = len(r.groups) == 1
            fixed = len(ks) > 1 and fixed_plan(r.topology, r.n)  # the same plan every epoch: made once
            graphable = fixed and (single or r.transport.collective) and span_graph.eligible(self, not single)
            snaps = sorted(order.snapshots)  # epochs after which a snapshot falls due
            rows, edges, plan, j, t0 = [], None, order.first, 0, time.perf_counter()
            while j < len(ks):
                k = ks[j]
                m = next((i for i, x in enumerate(ks[j:]) if x != k), len(ks) - j)  # epochs like this one
                m = min([m] + [e - epoch0 - j for e in snaps if e > epoch0 + j])  # replays end at a snapshot
                live = single and self.graph is not None and self.graph.k == k  # replays go on from the last span
                if graphable and (j >= 2 or live) and m >= 2:  # the same epoch m times: replays of one captured epoch
                    if live:
                        edges, got = self.graph.edges, self.graph.run(m)
                    else:
                        got = self._span_graph(k, m, edges, link, rows[-1].last_events(), single)
                    graphable = got is not None
                    if got is not None:
                        rows += got
                        j += m
                        self.epoch = epoch0 + j
                        plan = edges  # the next epoch's sources, as after a plain epoch
                        self._keep_snapshot(rows, epoch0 + j in snaps, j < len(ks))
                        continue
                self.leave_graph()  # a plain epoch: the state becomes plain arrays again
                if j < len(ks) - 1 and (edges is None or not fixed):
                    edges = migration_edges(r.topology, r.n, r.seed, epoch0 + j + 1)
                rows.append(self._epoch(k, epoch0 + j + 1, plan, link, edges if j < len(ks) - 1 else None))
                plan = edges  # the next epoch's sources: these edges
                j += 1
                self._keep_snapshot(rows, epoch0 + j in snaps, j < len(ks))
            return self._summaries(rows, t0)

    def run_async(self, order: SpanOrder, claims=None):
        """The async loop's epochs of this group after its ``order.epoch0``, back to back, never waiting
        for a peer (:mod:`isles.islands.control.async_loop`): ``order.ks`` (generations each;
        ``islands.async_budget=island``), or as many as ``claims`` (:class:`isles.islands.control.pool.Claims`)
        draws from the run's shared pool when the epoch before ends.

        Before its epoch ``e`` the group immigrates what :func:`isles.islands.migration.planner.arrivals_plan`
        names: the sources among its own islands that the plan after its epoch ``e - 1`` names, and
        those that the peers have posted since its last epoch (:meth:`Arrivals.arrived`); after the
        epoch, the same epoch body as :meth:`run_span`'s (:meth:`_epoch`) has posted its emigrants by
        the plan after ``e``, and it goes on at once.

        Yields:
            each epoch's :class:`isles.islands.records.EpochSummary`, pickled (bytes, for a Ray streaming
            call), with the group's :class:`isles.islands.records.GroupSnapshot` after the epochs in
            ``order.snapshots`` (with ``claims``: as :meth:`isles.islands.control.pool.Claims.due` says).
        """
        r = order.route
        link = (
            Arrivals(r, ActorTransport(r.peers, r.index, self.inbox)) if len(r.groups) > 1 else Alone(self.island_ids)
        )
        ks = iter(order.ks) if claims is None else claims
        k, e = next(ks, 0), order.epoch0
        while k:
            e += 1
            with self._state_lock:
                t0 = time.perf_counter()
                planned = migration_edges(r.topology, r.n, r.seed, e - 1) if e > 1 else []
                edges, emigrants = link.arrived() if isinstance(link, Arrivals) else ([], {})
                plan = Plan(*arrivals_plan(planned, edges, self.island_ids, emigrants))
                rows = [self._epoch(k, e, plan, link, migration_edges(r.topology, r.n, r.seed, e))]
                k = next(ks, 0)  # the next epoch's generations (0: this was the last)
                due = e in order.snapshots if claims is None else claims.due(e, k, rows[0].generation[0])
                self._keep_snapshot(rows, due, False)
                summary = self._summaries(rows, t0)[0]
            yield pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)

    def _epoch(self, k: int, e: int, plan, link, edges) -> Rows:
        """Epoch ``e`` of ``k`` generations, the one epoch body (:func:`isles.islands.epoch.run_epoch`:
        immigrants by ``plan``, emigrants sent by ``edges`` over ``link``), of :meth:`run_span` and
        :meth:`run_async` alike; its row as a one-epoch block."""
        best, px, events = run_epoch(self, k, e, plan, link, edges)
        return Rows.of(self.row(best, px, events))

    def run_span_packed(self, order: SpanOrder) -> bytes:
        """:meth:`run_span`'s summaries pickled into one bytes object, for the driver across Ray
        (Ray serialises each of a span's hundreds of small arrays as a buffer of its own: tiny CPU
        islands on 2 actors went from 0.79 to 0.76 ms an epoch)."""
        return pickle.dumps(self.run_span(order), protocol=pickle.HIGHEST_PROTOCOL)

    # -- what the epoch body calls ----------------------------------------------------------------
    def emigrants(self):
        """The emigrants of this group's islands now (:func:`isles.islands.migration.moves.emigrants_of`;
        kept until the state changes)."""
        if self.sent is None:
            context = self.policy_context("select")
            self.sent = emigrants_of(self.algorithm, self.state, self.n_migrants, self.selection, context)
        return self.sent

    def policy_context(self, method: str) -> MigrationContext | None:
        """The :class:`isles.islands.migration.contract.MigrationContext` of ``method``'s call
        (``select`` or ``replace``) at the migration after epoch :attr:`epoch`, from the islands' ids and
        generation now (a user's policy gets it where its method takes it, and its checks name the
        islands by it); ``None`` for the built-ins (nothing is made)."""
        if not isinstance(self.selection, Guarded) and not isinstance(self.replacement, Guarded):
            return None
        key = (method, tuple(self.island_ids), id(self.ctx.rng))
        rng = self._policy_rngs.get(key)
        if rng is None:  # after a regroup, new ids: a new generator (the counter shared with the group's)
            rng = policy_rng(self.xp, int(self.spec.seed), self.island_ids, method, self.ctx.rng.ctr)
            self._policy_rngs = {k: v for k, v in self._policy_rngs.items() if k[1:] == key[1:]}
            self._policy_rngs[key] = rng
        return MigrationContext(tuple(self.island_ids), int(self.state["generation"]), int(self.epoch), rng)

    def set_state(self, state: dict, captured: bool = False) -> None:
        """The islands' state after a migration (into the generations' captured graph, if any)."""
        self.state = state
        if self.stepper is not None and not captured:
            self.stepper.load(state)
            self.state = self.stepper.state

    def evolve(self, k: int, captured: bool = False) -> None:
        """``k`` generations on the device (captured-graph replays where possible), without a host
        synchronisation; ``captured``: plain steps, inside the span graph's capture."""
        a, ctx = self.algorithm, self.ctx
        if captured:
            for _ in range(int(k)):
                self.state = a.track_target(ctx, a.step(ctx, self.state))
        elif self.use_graph and k > 0:
            if self.stepper is None:
                self.stepper = GraphStepper.for_algorithm(a, ctx, self.state)
            self.stepper.run(k)
            self.state = self.stepper.state
        else:
            # an algorithm whose run() does not track per generation is caught at the epoch's end
            self.state = a.track_target(ctx, a.run(ctx, self.state, int(k)))

    def row(self, best: Population, px, events) -> Row:
        """The epoch's :class:`isles.islands.epoch.Row`: copies of what its summary needs (``best``
        and ``px`` must not be buffers that a later replay overwrites), and each plug-in's best and metrics."""
        xp, state = self.xp, self.state
        hit = state.get("hit_generation")

        def copied(v):
            return xp.array(v, copy=True) if hasattr(v, "shape") else v

        plugins = []
        for p in self.plugins:
            pb = p.best()
            plugins.append((None if pb is None else pb.map(copied), {k: copied(v) for k, v in p.metrics().items()}))
        return Row(
            best,
            px,
            int(state["generation"]),
            self.evaluations(state),
            int(state.get("pair_evals", 0)),
            xp.array(state["nan_evals"], copy=True),
            None if hit is None else xp.array(hit, copy=True),
            events,
            plugins,
            metrics={k: copied(v) for k, v in self.algorithm.metrics(state).items()},
        )

    def evaluations(self, state: dict) -> int:
        """The group's evaluations so far in ``state`` (its host counters suffice): per island times
        the islands, or a mixed batch's own count (:meth:`isles.islands.mixed.Mixed.evaluations`)."""
        return self.layout.evaluations(state, len(self.island_ids))

    # -- spans' helpers ---------------------------------------------------------------------------
    def _keep_snapshot(self, rows: list, due: bool, more: bool) -> None:
        """Where a snapshot falls due after the last row's epoch (``due``), keep the group's state in
        the row, with the plug-ins' and the epoch's emigrants (``more``: epochs follow in the span, else
        the summary has them): the driver's snapshot needs no call, and a span need not end there."""
        if due:
            kept = GroupSnapshot(self.state_dict(), self.plugin_states(), self.emigrants().to_host() if more else None)
            # NumPy's host arrays are the state's own, and the span goes on: copies (CuPy's are copies already)
            rows[-1].snapshot = copy.deepcopy(kept) if self.xp is np else kept

    def _span_graph(self, k: int, m: int, edges, link, events, single: bool) -> list | None:
        """``m`` like epochs of ``k`` generations as replays of one captured epoch
        (:class:`isles.islands.span_graph.SpanGraph`); their rows, or ``None`` where the plan does not
        fit. Without peers (``single``) a failed capture is logged once and ``None`` returned (the
        state is untouched: the caller goes on with plain epochs); over NCCL it raises (every peer
        captures the same epoch)."""
        self.leave_graph()
        if not SpanGraph.fits(self, [k] * m, True, self.emigrants(), span_graph.most_sources(edges)):
            return None
        try:
            graph = SpanGraph(self, k, edges, link, events)
        except Exception as err:  # noqa: BLE001  (e.g. a step that synchronises: CuPy refuses it in capture)
            if not single:
                raise
            log.warning(
                "islands.span_graph: the epoch could not be captured (%s); plain epochs instead "
                "(islands.span_graph=never skips the attempt)",
                str(err).splitlines()[0] if str(err) else err,
            )
            self.span_graph = "never"
            return None
        rows = graph.run(m)
        if single:  # kept for the next span (no peer to capture with): one capture a run, not one a span
            self.graph = graph
        else:
            graph.close()
        return rows

    def leave_graph(self) -> None:
        """Stop replaying the kept span graph (:meth:`_span_graph`): the state, emigrants and plug-ins
        become plain arrays again (before a plain epoch, a state load or new plug-ins)."""
        if self.graph is not None:
            self.graph.close()
            self.graph = None

    def _summaries(self, blocks: list, t0: float) -> list:
        """The host summaries of a span's rows (:class:`isles.islands.epoch.Rows` blocks) begun at
        ``t0``: the last epoch's emigrants selected and copied to the host (which synchronises: the
        span's work is done), then each device leaf concatenated over the blocks and copied to the
        host once; the compute time divided evenly."""
        emigrants = self.emigrants().to_host()
        synchronize(self.xp)
        n = sum(len(b) for b in blocks)
        compute_s = (time.perf_counter() - t0) / max(1, n)
        xp = self.xp

        def cat(values):  # one leaf of every block: device arrays joined and copied once; host numbers as they are
            if all(hasattr(v, "shape") for v in values):
                return to_host(xp.concatenate([xp.asarray(v) for v in values]))
            return np.concatenate([to_host(v) if hasattr(v, "shape") else np.asarray(v) for v in values])

        b0 = blocks[0]
        best = {name: cat([b.best[name] for b in blocks]) for name in b0.best}
        best_x, nan = cat([b.best_x for b in blocks]), cat([b.nan_evals for b in blocks])
        hits = None if b0.hit_generation is None else cat([b.hit_generation for b in blocks]).astype(np.int64)
        plugins = []  # per plug-in: its bests' leaves and its metrics, over the epochs
        for j, (pb, metrics) in enumerate(b0.plugins):
            bests = None if pb is None else {leaf: cat([b.plugins[j][0][leaf] for b in blocks]) for leaf in pb}
            plugins.append((bests, {key: cat([b.plugins[j][1][key] for b in blocks]) for key in metrics}))
        events, snaps = [], {}  # per epoch: its migration events (host arrays); the snapshots by epoch
        for b in blocks:
            host = None if b.events is None else [(s, *map(to_host, (o, a, f))) for s, o, a, f in b.events]
            events += [None if host is None else [(s, o[e], a[e], f[e]) for s, o, a, f in host] for e in range(len(b))]
            snaps[len(events) - 1] = b.snapshot
        gens = [g for b in blocks for g in b.generation]
        evals = [v for b in blocks for v in b.evals]
        pairs = [v for b in blocks for v in b.pair_evals]
        alg_metrics = {key: cat([b.metrics[key] for b in blocks]) for key in b0.metrics}  # (epochs, I) each
        out = []
        for e in range(n):
            b = Population.from_leaves({name: a[e] for name, a in best.items()})
            snap = snaps.get(e)
            out.append(
                EpochSummary(
                    island_ids=self.island_ids,
                    best=b,
                    best_x=best_x[e],
                    best_f=b.f[:, 0],
                    best_v=b.v[:, 0],
                    emigrants=emigrants if e == n - 1 else snap and snap.emigrants,
                    generation=int(gens[e]),
                    evals=int(evals[e]),
                    payoff_evals=int(pairs[e]),
                    nan_evals=int(nan[e]),
                    hit_generation=None if hits is None else hits[e],
                    migrations=migration_events(events[e], self.island_ids),
                    compute_s=compute_s,
                    device=device_name(xp),
                    snapshot=snap,
                    plugins=[
                        (
                            None if pb is None else Population.from_leaves({leaf: a[e] for leaf, a in pb.items()}),
                            {key: a[e].item() for key, a in metrics.items()},
                        )
                        for pb, metrics in plugins
                    ],
                    metrics={key: a[e] for key, a in alg_metrics.items()},
                )
            )
        return out

    # -- state in and out -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The islands' state as host arrays (for checkpoints)."""
        with self._state_lock:
            return {k: to_host(v) if hasattr(v, "shape") else v for k, v in self.state.items()}

    def load_state_dict(self, state: dict, plugins: list | None = None) -> None:
        """Restore a state saved by :meth:`state_dict` (arrays moved to this group's device), and
        the plug-ins' states ``plugins`` (:meth:`plugin_states`; ``None``: theirs stay)."""
        with self._state_lock:
            self.leave_graph()
            self.sent = None
            if self.stepper is not None:
                self.stepper.close()
                self.stepper = None
            self.state = {k: self.xp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in state.items()}
            if plugins is not None:
                for p, st in zip(self.plugins, plugins, strict=False):
                    p.load_state_dict(st)

    def regroup(self, island_ids, state: dict, plugins: list | None = None) -> None:
        """Host the islands ``island_ids`` (global ids) from now on, with their ``state`` (host arrays,
        :func:`isles.islands.control.checkpoint.regroup`) and the plug-ins' (``None``: theirs stay):
        sync mode's placement by cost (:class:`isles.islands.control.placement.Balancer`). The islands'
        random streams are their own (:class:`CounterRNG` of the ids), so the run goes on bit for bit."""
        with self._state_lock:
            self.island_ids = [int(i) for i in island_ids]
            self.spec = dataclasses.replace(self.spec, island_ids=tuple(self.island_ids))
            self.ctx.rng = CounterRNG(self.xp, int(self.spec.seed), self.island_ids)
            self.load_state_dict(state, plugins)

    def plugin_states(self) -> list:
        """Every plug-in's ``state_dict()`` (host arrays; ``None`` before its first epoch)."""
        with self._state_lock:
            return [p.state_dict() for p in self.plugins]
