"""The CMEPSO master swarm as a plug-in of the island loop (:class:`isles.islands.plugin.Plugin`).

After every epoch the loop hands the plug-in the slaves' bests; the master swarm sets its third
attractor to the best of them and runs as many generations as the slaves did (seed 001 sec. 5,
Algorithm 3). Its best may be sent to every island (``sends_best``). Every island group runs an
identical replica on its device, beside its islands; with like epochs on CuPy the replica is part
of the captured epoch (:mod:`isles.islands.span_graph`).
"""

from __future__ import annotations

from isles.algorithms.core.backend import to_host
from isles.algorithms.core.base import Context
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.pso.cmepso import MasterSwarm


class MasterSwarmPlugin:
    """The config's master swarm plug-in (``plugins.master`` in ``conf/experiment/cmepso.yaml``): a
    factory of :class:`MasterPlugin` replicas.

    Args:
        sends_best: also send the master's best to every island as an immigrant after each epoch.
        **params: the master swarm's parameters (:class:`isles.algorithms.pso.cmepso.MasterSwarm`).

    Raises:
        ValueError: a parameter out of range.
    """

    def __init__(self, sends_best: bool = False, **params):
        self.sends_best = bool(sends_best)
        self.swarm = MasterSwarm(**params)

    def evaluations_per_generation(self) -> int:
        """The master's evaluations per generation (:mod:`isles.islands.control.budget`)."""
        return self.swarm.evaluations_per_generation()

    def make(self, xp, dtype, evaluator, seed: int, stream: int) -> MasterPlugin:
        """A replica on ``xp`` (arguments as :class:`MasterPlugin`)."""
        return MasterPlugin(self.swarm, xp, dtype, evaluator, seed, stream, self.sends_best)


class MasterPlugin:
    """A master swarm (:class:`isles.algorithms.pso.cmepso.MasterSwarm`) with its context and state,
    driven by the island loop.

    Args:
        master: the master swarm.
        xp: NumPy or CuPy; dtype: the islands' dtype; evaluator: the problem's evaluator.
        seed: the run's seed; stream: the master's random stream (after the islands'), the same in
            every replica, so all draw the same numbers.
        sends_best: :meth:`migrants` is its best (else ``None``).
    """

    def __init__(self, master, xp, dtype, evaluator, seed: int, stream: int, sends_best: bool = False):
        self.master, self.xp, self.sends_best = master, xp, sends_best
        self.ctx = Context(xp=xp, dtype=dtype, evaluator=evaluator, rng=CounterRNG(xp, int(seed), [int(stream)]))
        self.state = None

    def after_epoch(self, bests, phenotype, n_generations: int) -> None:
        """Run the master's epoch on the slaves' bests (Population ``(S, 1)``, phenotype ``(S, D)``),
        started from them on the first epoch, for ``n_generations`` generations."""
        f, v = bests.f[:, 0], bests.v[:, 0]
        if self.state is None:
            self.state = self.master.init(self.ctx, phenotype, f, v)
        self.state = self.master.run_epoch(self.ctx, self.state, phenotype, f, v, n_generations)

    def best(self) -> Population | None:
        """The master's best as a Population ``(1, 1)`` (its genome is its position), or ``None``."""
        if self.state is None:
            return None
        mx, mf, mv = self.master.best(self.state)
        return Population(mx[None, None], mf.reshape(1, 1), mv.reshape(1, 1))

    def migrants(self) -> Population | None:
        """The master's best, where it is sent to every island (``sends_best``), else ``None``."""
        return self.best() if self.sends_best else None

    def metrics(self) -> dict:
        """``master_best_f``, ``evaluations`` and ``nan_evaluations`` of the master so far."""
        if self.state is None:
            return {}
        return {
            "master_best_f": self.state["gbest_f"][0],
            "evaluations": int(self.state["evals"]),
            "nan_evaluations": self.state["nan_evals"],
        }

    def state_dict(self, host: bool = True) -> dict | None:
        """The state as host arrays (for snapshots), or the live arrays (``host=False``); ``None``
        before the first epoch."""
        if self.state is None or not host:
            return self.state
        return {k: to_host(v) if hasattr(v, "shape") else v for k, v in self.state.items()}

    def load_state_dict(self, state: dict | None) -> None:
        """Set the state (host or device arrays, or ``None``: start afresh)."""
        self.state = (
            None if state is None else {k: self.xp.asarray(v) if hasattr(v, "shape") else v for k, v in state.items()}
        )

    def rngs(self) -> list:
        """The master's counter-based generator."""
        return [self.ctx.rng]
