"""The CMEPSO master swarm as a plug-in of the island loop (:class:`isles.islands.plugin.LoopPlugin`).

After every epoch the loop hands the plug-in the slaves' bests; the master swarm sets its third
attractor to the best of them and runs as many generations as the slaves did (seed 001 sec. 5,
Algorithm 3). Its best may be broadcast back to every island (``islands.master_sends_best``).
The same plug-in runs on the host beside the driver's loop (NumPy) or on the slaves' device
beside their islands; with epochs of one generation on CuPy it also runs as one captured CUDA
graph with the slaves (:meth:`MasterPlugin.run_graph`: the graph-hosted variant).
"""
from __future__ import annotations

from isles.algorithms.core.backend import to_host
from isles.algorithms.core.base import Context
from isles.algorithms.core.graph import GraphStepper
from isles.algorithms.core.graph import prefixed as _prefixed
from isles.algorithms.core.graph import split as _split
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG


class MasterPlugin:
    """A master swarm (:class:`isles.algorithms.pso.cmepso.MasterSwarm`) with its context and
    state, driven by the island loop.

    Args:
        master: the master swarm.
        xp: NumPy or CuPy; dtype: the islands' dtype; evaluator: the problem's evaluator.
        seed: the run's seed; stream: the master's random stream (the number of islands), the same
            on the host and on a device, so both draw the same numbers.
        state: a state to continue from (host or device arrays), or ``None``: the master starts
            from the first epoch's bests.
    """

    def __init__(self, master, xp, dtype, evaluator, seed: int, stream: int, state: dict | None = None):
        self.master = master
        self.xp = xp
        self.ctx = Context(xp=xp, dtype=dtype, evaluator=evaluator, rng=CounterRNG(xp, int(seed), [int(stream)]))
        self.graph = None  # the captured slaves-and-master iteration (run_graph)
        self.state = None
        self.load_state_dict(state)

    # -- the plug-in protocol -----------------------------------------------------------------
    def after_epoch(self, x, f, v, n_generations: int) -> None:
        """Run the master's epoch on the slaves' bests ``x (S, D)``, ``f, v (S,)`` (started from
        them on the first epoch) for ``n_generations`` generations."""
        if self.state is None:
            self.state = self.master.init(self.ctx, x, f, v)
        self.state = self.master.run_epoch(self.ctx, self.state, x, f, v, n_generations)

    def best(self):
        """The master's best ``(x (D,), f (0-d), v (0-d))`` (arrays of ``xp``)."""
        return self.master.best(self.state)

    def broadcast(self) -> Population:
        """The individual sent to every island: the master's best as a Population ``(1, 1)``."""
        mx, mf, mv = self.best()
        return Population(mx[None, None], mf.reshape(1, 1), mv.reshape(1, 1))

    def counters(self):
        """``(evaluations (int), NaN evaluations (0-d array of xp))`` of the master so far."""
        return int(self.state["evals"]), self.state["nan_evals"]

    def started(self) -> bool:
        """Whether the master has run its first epoch."""
        return self.state is not None

    def state_dict(self) -> dict | None:
        """The state as host arrays (for snapshots), or ``None`` before the first epoch."""
        if self.state is None:
            return None
        return {k: to_host(v) if hasattr(v, "shape") else v for k, v in self.state.items()}

    def load_state_dict(self, state: dict | None) -> None:
        """Set the state (host or device arrays, or ``None``: start afresh)."""
        self.state = None if state is None else {
            k: self.xp.asarray(v) if hasattr(v, "shape") else v for k, v in state.items()}

    # -- the graph-hosted variant: slaves and master as one captured CUDA graph -----------------
    def graph_fits(self, group, plans: list) -> bool:
        """Whether a batch of ``group`` runs as replays of one captured iteration (slaves'
        generation, their bests, the master's generation): on CuPy with a started master and
        epochs of one generation without migration (CMEPSO, seed 001 Algorithm 3)."""
        return (group.use_graph and self.state is not None
                and all(k == 1 and not inbound for k, inbound, _ in plans))

    def run_graph(self, group, n_epochs: int) -> list:
        """``n_epochs`` replays of the captured iteration over ``group``'s islands and this
        master, each followed by the group's row of the epoch (:meth:`IslandGroup._row`)."""
        if self.graph is None:
            if group.stepper is not None:
                group.state = group.stepper.close()
                group.stepper = None
            self.graph = GraphStepper(lambda flat: self._iteration(group, flat), self._flat(group),
                                      [group.ctx.rng, self.ctx.rng])
        rows = []
        for _ in range(n_epochs):
            self.graph.run(1)
            flat = self.graph.state
            best = Population.from_leaves({k[2:]: flat[k].copy() for k in flat if k.startswith("b.")})
            group.state, self.state = _split(flat, "s."), _split(flat, "m.")
            rows.append(group._row(best, flat["r.best_x"].copy(), group.state))
        return rows

    def leave_graph(self, group) -> None:
        """Stop replaying the captured iteration; ``group``'s and the master's states become
        plain states again."""
        if self.graph is not None:
            flat = self.graph.close()
            self.graph = None
            group.state, self.state = _split(flat, "s."), _split(flat, "m.")

    def _iteration(self, group, flat: dict) -> dict:
        """One CMEPSO iteration over the flat state ``s.*`` (slaves), ``m.*`` (master), ``b.*``
        (the slaves' bests, a Population's leaves) and ``r.best_x`` (their phenotype): the same
        operations as the epoch-by-epoch path, in the same order."""
        a, ctx = group.algorithm, group.ctx
        s = a.track_target(ctx, a.step(ctx, _split(flat, "s.")))
        best = a.best(s)
        px = a.phenotype(best.genome[:, 0])
        m = self.master.run_epoch(self.ctx, _split(flat, "m."), px, best.f[:, 0], best.v[:, 0], 1)
        return {**_prefixed(s, "s."), **_prefixed(m, "m."), **_prefixed(best.leaves(), "b."), "r.best_x": px}

    def _flat(self, group) -> dict:
        """The flat state of :meth:`_iteration` from the current states."""
        best = group.algorithm.best(group.state)
        return {**_prefixed(group.state, "s."), **_prefixed(self.state, "m."), **_prefixed(best.leaves(), "b."),
                "r.best_x": group.algorithm.phenotype(best.genome[:, 0])}
