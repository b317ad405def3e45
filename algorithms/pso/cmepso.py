"""CMEPSO: cooperative multi-swarm EPSO, master/slave (seed 001 section 5, Algorithm 3).

The slave swarms are ``S`` EPSO islands of one batch (:class:`isles.algorithms.pso.epso.EPSO`, ``c3 = 0``)
that never receive anything back: the multi-population cooperative PSO (MCPSO) of Niu, Zhu &
He, "Multi-population cooperative particle swarm optimization", ECAL 2005. After each slave
generation their global bests go to the master swarm, one EPSO swarm (``I = 1``) whose
velocity has the third term ``Rnd3 c3 (b_g^S - x)`` towards the best slave best ``b_g^S``
(eqs. 12-14). Everything stays on the device: no host round trips between slaves and master.
The runtime runs it: the slaves are the run's islands, the master a plug-in of the island loop
(:mod:`isles.algorithms.pso.master_plugin`, ``+experiment=cmepso`` or ``+plugin=master_swarm``).
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from isles.algorithms.core.base import Context, State
from isles.algorithms.pso.epso import EPSO, EPSOParams
from isles.algorithms.pso.pso import update_gbest
from isles.problems.constraints import best_row


class MasterSwarm:
    """The CMEPSO master swarm (seed 001 sec. 5.1.2, eqs. 12-14, Algorithm 3): one EPSO island
    with the third attractor ``c3``.

    Args:
        params: :class:`EPSOParams` of the master; default ``EPSOParams(n_particles=10,
            c3=2.02)`` (seed 001 section 6), i.e. the slaves' defaults otherwise.
        **overrides: fields replacing those of ``params``.

    Raises:
        ValueError: a parameter out of range (``algorithm.<field>``).
    """

    def __init__(self, params: EPSOParams | None = None, **overrides):
        params = params if params is not None else EPSOParams(n_particles=10, c3=2.02)
        self.epso = EPSO(dc_replace(params, **overrides) if overrides else params)
        self.params = self.epso.params

    def initial_evaluations(self) -> int:
        """0: the master starts from the slaves' evaluated bests (:meth:`init`)."""
        return 0

    def evaluations_per_generation(self) -> int:
        """``n_particles (1 + n_replicas)`` per master generation (one per slave generation)."""
        return self.epso.evaluations_per_generation()

    @classmethod
    def like(cls, slaves: EPSO, n_particles: int = 10, c3: float = 2.02) -> MasterSwarm:
        """A master with the slaves' parameters except ``n_particles`` and ``c3`` (seed 001 sec. 6)."""
        return cls(dc_replace(slaves.params, n_particles=n_particles, c3=c3))

    def init(self, ctx: Context, slave_x, slave_f, slave_v) -> State:
        """Master state from the slaves' global bests (Algorithm 3, "Initialize master's local best
        with values of b_g from each slave swarm"); no evaluation.

        Args:
            ctx: context of one island (``ctx.n_islands == 1``) on the slaves' ``xp``.
            slave_x ``(S, D)``, slave_f, slave_v ``(S,)``: the slaves' global bests. Particle ``j``
                takes slave ``j mod S`` (cycling when ``S != n_particles``) as position and
                personal best; velocities start at 0; the attractor is the best slave.

        Raises:
            ValueError: ``ctx.n_islands != 1``.
        """
        if ctx.n_islands != 1:
            raise ValueError(f"master swarm: ctx.n_islands={ctx.n_islands}: must be 1")
        xp, n = ctx.xp, self.params.n_particles
        idx = xp.arange(n) % slave_x.shape[0]
        x = xp.asarray(slave_x, dtype=ctx.dtype)[idx][None]
        f = xp.asarray(slave_f, dtype=ctx.dtype)[idx][None]
        v = xp.asarray(slave_v, dtype=ctx.dtype)[idx][None]
        s = {
            "x": x,
            "vel": xp.zeros_like(x),
            "pbest": x,
            "pbest_f": f,
            "pbest_v": v,
            "gbest": xp.zeros((1, ctx.dim), dtype=ctx.dtype),
            "gbest_f": xp.full((1,), xp.inf, dtype=ctx.dtype),
            "gbest_v": xp.full((1,), xp.inf, dtype=ctx.dtype),
            "generation": 0,
            "evals": 0,
            "nan_evals": xp.zeros((), dtype=xp.int64),
        }
        s = update_gbest(xp, s)
        return EPSO.set_attractor(s, *best_row(x[0], f[0], v[0]))

    def run_epoch(self, ctx: Context, state: State, slave_x, slave_f, slave_v, n_generations: int = 1) -> State:
        """Set ``b_g^S`` to the best of ``slave_x (S, D)``, ``slave_f, slave_v (S,)`` under Deb's
        rules, then run ``n_generations`` EPSO generations (eq. 13 originals, eq. 12 replicas)."""
        state = EPSO.set_attractor(state, *best_row(slave_x, slave_f, slave_v))
        return self.epso.run(ctx, state, n_generations)

    def best(self, state: State):
        """The master's global best ``(x (D,), f (0-d), v (0-d))``."""
        return state["gbest"][0], state["gbest_f"][0], state["gbest_v"][0]
