"""CMEPSO: cooperative multi-swarm EPSO, master/slave (seed 001 section 5, Algorithm 3).

The slave swarms are ``S`` EPSO islands of one batch (:class:`isles.algorithms.pso.epso.EPSO`, ``c3 = 0``)
that never receive anything back: the multi-population cooperative PSO (MCPSO) of Niu, Zhu &
He, "Multi-population cooperative particle swarm optimization", ECAL 2005. After each slave
generation their global bests go to the master swarm, one EPSO swarm (``I = 1``) whose
velocity has the third term ``Rnd3 c3 (b_g^S - x)`` towards the best slave best ``b_g^S``
(eqs. 12-14). Everything stays on the device: no host round trips between slaves and master.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

import numpy as np

from isles.algorithms.core.base import Context, State
from isles.algorithms.pso.epso import EPSO, EPSOParams
from isles.algorithms.core.graph import GraphStepper
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
    def like(cls, slaves: EPSO, n_particles: int = 10, c3: float = 2.02) -> "MasterSwarm":
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


def run_cmepso(
    ctx_slaves: Context,
    ctx_master: Context,
    slaves: EPSO,
    master: MasterSwarm,
    iterations: int,
    exchange_interval: int = 1,
    cuda_graph: bool = True,
):
    """Run CMEPSO (seed 001 Algorithm 3) in one process on one device.

    The ``S = ctx_slaves.n_islands`` slave swarms are one batch; every ``exchange_interval``
    slave generations (and after the last one) their global bests ``(S, D), (S,), (S,)`` are passed,
    as device arrays, to the master, which then runs as many generations as the slaves did
    since the last exchange. The slaves receive nothing (MCPSO of Niu et al. 2005).

    Args:
        ctx_slaves: context of the slaves (``S`` streams); ctx_master: one stream, same ``xp``.
        iterations: slave generations (``I_MAX``; seed 001 uses 1000).
        exchange_interval: slave generations between exchanges (>= 1; 1 = Algorithm 3).
        cuda_graph: on CuPy with ``exchange_interval == 1``, capture one whole iteration (slaves,
            exchange, master) as a CUDA graph and replay it (:mod:`isles.algorithms.core.graph`); same
            random numbers and results as the plain loop.

    Returns:
        ``(slave_state, master_state)``.

    Raises:
        ValueError: ``iterations < 0``, ``exchange_interval < 1`` or ``ctx_master.n_islands != 1``.
    """
    if int(iterations) < 0 or int(exchange_interval) < 1:
        raise ValueError(
            f"run_cmepso: iterations={iterations} must be >= 0 and exchange_interval={exchange_interval} >= 1"
        )
    s = slaves.init(ctx_slaves)
    m = master.init(ctx_master, s["gbest"], s["gbest_f"], s["gbest_v"])
    if cuda_graph and ctx_slaves.xp is not np and int(exchange_interval) == 1 and iterations > 0:

        def iteration(flat):
            s2 = slaves.step(ctx_slaves, {k[2:]: v for k, v in flat.items() if k.startswith("s.")})
            m2 = master.run_epoch(
                ctx_master,
                {k[2:]: v for k, v in flat.items() if k.startswith("m.")},
                s2["gbest"],
                s2["gbest_f"],
                s2["gbest_v"],
                1,
            )
            return {**{"s." + k: v for k, v in s2.items()}, **{"m." + k: v for k, v in m2.items()}}

        flat = {**{"s." + k: v for k, v in s.items()}, **{"m." + k: v for k, v in m.items()}}
        stepper = GraphStepper(iteration, flat, [ctx_slaves.rng, ctx_master.rng])
        stepper.run(iterations)
        flat = stepper.close()
        return (
            {k[2:]: v for k, v in flat.items() if k.startswith("s.")},
            {k[2:]: v for k, v in flat.items() if k.startswith("m.")},
        )
    done = 0
    while done < iterations:
        k = min(int(exchange_interval), int(iterations) - done)
        s = slaves.run(ctx_slaves, s, k)
        m = master.run_epoch(ctx_master, m, s["gbest"], s["gbest_f"], s["gbest_v"], k)
        done += k
    return s, m


def cmepso_best(xp, slave_state: State, master_state: State):
    """Overall best of the slaves' and the master's global bests under Deb's rules:
    ``(x (D,), f (0-d), v (0-d))``."""
    x = xp.concatenate([slave_state["gbest"], master_state["gbest"]])
    f = xp.concatenate([slave_state["gbest_f"], master_state["gbest_f"]])
    v = xp.concatenate([slave_state["gbest_v"], master_state["gbest_v"]])
    bx, bf, bv = best_row(x, f, v)
    return bx[0], bf[0], bv[0]
