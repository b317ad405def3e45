"""A batch's like epochs as replays of one captured CUDA graph (CuPy; ``islands.span_graph``).

An epoch of :meth:`isles.islands.group.IslandGroup.run_span` (:func:`isles.islands.epoch.run_epoch`) issues a few hundred small device operations
from Python: the exchange of the emigrants with the peer groups, if any
(:func:`isles.islands.transport.nccl.exchange`), immigration (:func:`isles.islands.migration.moves.immigrate`),
the generations, the islands' bests and the next emigrants (:func:`isles.islands.migration.moves.emigrants_of`).
At one generation per epoch that Python, not the GPU, sets the pace (about 3.7 ms per epoch on an
H100 for four tiny islands, ``benchmarks/epoch_overhead.py``). Where the rest of a batch repeats
one epoch, :class:`SpanGraph` captures that same epoch body once, plug-ins included (:class:`isles.algorithms.core.graph.GraphStepper`;
over NCCL the send and receive are captured with the kernels, which NCCL supports from 2.9) and
replays it: one launch per epoch, plus the copies of the epoch's summary row.

**When** (:func:`eligible`, :meth:`SpanGraph.fits`): ``islands.span_graph=auto`` for a group that
exchanges with no other actor (in-process, or one actor), ``always`` also across GPU actors over
NCCL (the same answer in every group, since a captured NCCL exchange must be replayed by both of
its ranks); CuPy with CUDA graphs on (``cuda_graph``); one population per island; the same plan
every epoch (:func:`isles.islands.migration.planner.fixed_plan`, or equal plans in a batch); no island with
more sources than its population size (so the route never rotates); the same generations per
epoch, at most :data:`MAX_K`; every plug-in started. The algorithm's ``step`` must not synchronise with the
host (the families' fused steps, and array code that the ``cuda_graph`` path captures, do not):
where it does, ``auto`` logs a warning and goes on with the plain epochs; across actors the
capture's error stops the run (``islands.span_graph=never`` avoids the attempt).

On NumPy the same epoch function runs directly (:class:`isles.algorithms.core.graph.DirectStepper`),
the twin that CI checks against the plain epochs (``tests/test_span_graph.py``, ``tests/test_exchange.py``).

**Same results.** A replay runs the operations of the plain epoch in the same order; random
numbers are counter-based on the generation (the stepper advances the counters by the epoch's
generations per replay), so the states, summaries and migrations equal the plain epochs' bit for
bit (``tests/test_runtime_gpu.py``; over NCCL ``tests/test_exchange_gpu.py``).
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core import backend
from isles.algorithms.core.graph import DirectStepper, GraphStepper, RowRing
from isles.algorithms.core.graph import prefixed as _prefixed
from isles.algorithms.core.graph import split as _split
from isles.algorithms.core.population import Population
from isles.islands.epoch import Rows, run_epoch
from isles.islands.migration.contract import uses_context

#: the most generations of one captured epoch (each is a node of the graph; beyond this the
#: epoch's own work hides the Python of the plain path)
MAX_K = 256


class SpanGraph:
    """Replays of one captured epoch (:func:`isles.islands.epoch.run_epoch`) of ``group``'s span
    (module docstring). ``SpanGraph.captures`` counts the epochs captured in this process (tests, benchmarks).

    Args:
        group: the :class:`isles.islands.group.IslandGroup` (its state, emigrants and plug-ins'
            states are the epoch's input and output).
        k: generations per epoch; edges: the (fixed) plan of every epoch, ``[(src, dst)]``.
        link: the span's link (:class:`isles.islands.transport.link.Alone` or ``Collective``).
        events: the previous epoch's migration events (same plan: same shapes), or ``None``.

    Raises:
        RuntimeError (or CuPy's CUDA error): the epoch cannot be captured.
    """

    captures = 0

    def __init__(self, group, k: int, edges: list, link, events):
        self.group, self.k, self.edges, self.link = group, int(k), edges, link
        self.src_of = [ev[0] for ev in events or []]  # host constants of the plan
        self.ring = RowRing(group.xp)  # the epochs' rows, written by the captured epoch itself
        self.host_metrics = [()] * len(group.plugins)  # per plug-in: its metrics that are host numbers
        if group.stepper is not None:  # the generations' own graph: its state becomes plain again
            group.state = group.stepper.close()
            group.stepper = None
        flat = self._flat()
        if group.xp is np:  # the NumPy twin (tests): the same epoch, called directly
            self.stepper = DirectStepper(self._epoch, flat)
        else:
            rngs = [group.ctx.rng] + [r for p in group.plugins for r in p.rngs()]
            self.stepper = GraphStepper(self._epoch, flat, rngs, ctr_step=self.k)
        SpanGraph.captures += 1
        # the route's plans the graph reads (device constants, backend.device_constant), held while it lives
        self._plans = list(backend._CONSTANTS.values())

    @staticmethod
    def fits(group, ks: list, eligible: bool, emigrants, most_sources: int) -> bool:
        """Whether the epochs ``ks`` (generations each) of ``group``'s span can be replays of one
        captured epoch (module docstring): ``eligible`` (:func:`eligible`), one population, the
        same generations each, at most :data:`MAX_K`, every plug-in started, and ``most_sources``
        (the most sources of one destination island) within the population size, so that the route
        never rotates. Over NCCL every argument is the same in every group (the plan is the
        archipelago's), so every group answers the same."""
        if not eligible or not ks or not isinstance(emigrants, Population):
            return False
        if len(set(ks)) != 1 or not 1 <= ks[0] <= MAX_K:
            return False
        if any(p.state_dict(host=False) is None for p in group.plugins):
            return False
        return most_sources + len(group.plugins) <= group_population(group)

    def _flat(self) -> dict:
        """The flat state of the group's state ``s.*``, emigrants ``e.*`` and plug-ins ``p<j>.*``."""
        g = self.group
        flat = {**_prefixed(g.state, "s."), **_prefixed(g.emigrants().leaves(), "e.")}
        for j, p in enumerate(g.plugins):
            flat.update(_prefixed(p.state_dict(host=False), f"p{j}."))
        return flat

    def _load(self, flat: dict) -> None:
        """The group's state, emigrants and plug-ins' states from ``flat``."""
        g = self.group
        g.state, g.sent = _split(flat, "s."), Population.from_leaves(_split(flat, "e."))
        for j, p in enumerate(g.plugins):
            p.load_state_dict(_split(flat, f"p{j}."))

    def _epoch(self, flat: dict) -> dict:
        """The epoch body on the flat state (:meth:`_flat`); its row's device values go to the ring."""
        self._load(flat)
        g = self.group
        best, px, events = run_epoch(g, self.k, 0, self.edges, self.link, self.edges, captured=True)
        row = {**_prefixed(best.leaves(), "b."), "r.best_x": px}
        for key in ("nan_evals", "hit_generation"):
            if hasattr(g.state.get(key), "shape"):
                row["r." + key] = g.state[key]
        for i, (_, order, accepted, f) in enumerate(events or []):
            row.update({f"v{i}.order": order, f"v{i}.accepted": accepted, f"v{i}.f": f})
        row.update(_prefixed(g.algorithm.metrics(g.state), "a."))  # the algorithm's own metrics, (I,) each
        for j, p in enumerate(g.plugins):
            pb, metrics = p.best(), p.metrics()
            row.update(_prefixed({} if pb is None else pb.leaves(), f"p{j}.b."))
            row.update(_prefixed({k: v for k, v in metrics.items() if hasattr(v, "shape")}, f"p{j}.m."))
            self.host_metrics[j] = tuple(k for k, v in metrics.items() if not hasattr(v, "shape"))
        self.ring.put(row)
        return self._flat()

    def run(self, n_epochs: int) -> list:
        """``n_epochs`` replays in blocks of the ring's rows; no host synchronisation. Returns the
        blocks' :class:`isles.islands.epoch.Rows` (the rows copied out of the ring once a block)."""
        blocks, left, direct = [], int(n_epochs), isinstance(self.stepper, DirectStepper)
        while left:
            c = min(left, self.ring.rows or 1)
            self.ring.reset()
            if direct:  # NumPy: the host counters read after each epoch
                hosts = []
                for _ in range(c):
                    self.stepper.run(1)
                    hosts.append({k: v for k, v in self.stepper.state.items() if not hasattr(v, "shape")})
            else:
                r0 = self.stepper.replays
                self.stepper.run(c)
                hosts = [self.stepper.host_at(r0 + i + 1) for i in range(c)]
            blocks.append(self._block(c, hosts))
            left -= c
        self._load(self.stepper.state)
        return blocks

    def _block(self, c: int, hosts: list) -> Rows:
        """The :class:`isles.islands.epoch.Rows` of ``c`` replays: the ring's rows and the host
        counters ``hosts`` (the flat state's host values after each replay)."""
        g, rows = self.group, self.ring.take(c)
        plugins = []
        for j, p in enumerate(g.plugins):
            metrics = _split(rows, f"p{j}.m.")
            if self.host_metrics[j]:  # host numbers: the plug-in's metrics at each replay's host counters
                state, got = p.state_dict(host=False), []
                for h in hosts:
                    p.load_state_dict({**state, **_split(h, f"p{j}.")})
                    got.append(p.metrics())
                p.load_state_dict(state)
                metrics.update({k: [m[k] for m in got] for k in self.host_metrics[j]})
            pb = _split(rows, f"p{j}.b.")
            plugins.append((pb or None, metrics))
        nan = rows.get("r.nan_evals")
        return Rows(
            best=_split(rows, "b."),
            best_x=rows["r.best_x"],
            generation=[h["s.generation"] for h in hosts],
            evals=[g.evaluations({**g.state, **_split(h, "s.")}) for h in hosts],
            pair_evals=[h.get("s.pair_evals", 0) for h in hosts],
            nan_evals=[h["s.nan_evals"] for h in hosts] if nan is None else nan,
            hit_generation=rows.get("r.hit_generation"),
            events=[
                (src, rows[f"v{i}.order"], rows[f"v{i}.accepted"], rows[f"v{i}.f"]) for i, src in enumerate(self.src_of)
            ]
            or None,
            plugins=plugins,
            metrics=_split(rows, "a."),
        )

    def close(self) -> None:
        """Stop replaying: the group's state, emigrants and plug-ins become plain arrays (the buffers) again."""
        self._load(self.stepper.close())


def eligible(group, across_actors: bool) -> bool:
    """The run's part of :meth:`SpanGraph.fits`: ``islands.span_graph`` (``group.span_graph``:
    ``auto`` for a group that exchanges with no other actor, ``always`` also across actors over
    NCCL), CuPy with CUDA graphs on (``cuda_graph``). A caller that replays one epoch's plan also
    checks that the plan is fixed (:func:`isles.islands.migration.planner.fixed_plan`). A group whose
    migration policy takes a context (:mod:`isles.islands.migration.contract`) runs plain epochs: a
    replay would hand the policy the captured epoch's generation and epoch."""
    mode = getattr(group, "span_graph", "auto")
    if mode == "never" or (across_actors and mode != "always"):
        return False
    if uses_context(getattr(group, "selection", None), getattr(group, "replacement", None)):
        return False
    return group.xp is not np and bool(group.ctx.cuda_graph)


def most_sources(edges) -> int:
    """The most sources of one destination among ``edges`` ``[(src, dst)]`` (0 without edges)."""
    indegree: dict = {}
    for _, dst in edges:
        indegree[dst] = indegree.get(dst, 0) + 1
    return max(indegree.values(), default=0)


def group_population(group) -> int:
    """Individuals per island of ``group``'s one population (the route's capacity)."""
    return int(group.algorithm.population(group.state).shape[1])
