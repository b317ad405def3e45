"""Co-evolutionary differential evolution (CDE) for min-max problems (seed 000, Algorithm 1).

Seed 000 (Fabris & Krohling, CDE on GPU) solves ``min_x max_y L(x, y)`` with two DE populations
coupled through their fitness (Barbosa 1996; Tahk & Sun 2000): P1 holds x, P2 holds y (the
multipliers ``mu`` when ``L`` is the augmented Lagrangian of a constrained problem,
:class:`isles.problems.minmax.AugmentedLagrangian`). One **cycle** (Algorithm 1, lines 3-12):

1. refresh the fitness of P1 against the current P2 (migration or the last y phase changed P2);
2. evolve P1 for ``gens_x`` DE generations against the frozen P2; the fitness of an x is
   ``f1(x) = max_{y in P2} L(x, y)`` (eq. 11), minimised;
3. refresh the fitness of P2 against the current P1;
4. evolve P2 for ``gens_y`` generations against the frozen P1; the fitness of a y is
   ``f2(y) = min_{x in P1} L(x, y)``, maximised. (Eq. 12 prints ``max_{x in P1}`` and the text
   then calls the smallest value the fitness: garbled. The y player maximises its worst case
   over the x it faces, the min.) Internally P2 stores ``-f2`` so that both populations minimise.

``n_cycles`` cycles in all. Each DE generation is :class:`isles.algorithms.de.de.DE`'s own: indices
(:func:`isles.algorithms.de.de.sample_indices`), mutants (:func:`~isles.algorithms.de.de.mutant_vectors`,
rand/1 or best/1 and the others), bounds (:func:`~isles.algorithms.de.de.apply_bounds`), crossover mask
(:mod:`isles.algorithms.de.crossover`, ``bin`` in the seed) and greedy selection
(:func:`~isles.algorithms.de.de.select`), one DE, not a second copy; only the fitness differs (a
reduction of the pair payoffs ``L (I, Nx, Ny)`` of :meth:`MinMaxProblem.payoff`).

**The result** (Algorithm 1 line 13, "the best individual that does not violate the
constraints"): every island keeps the best x it has evaluated under Deb's rules on the problem's
*own* objective and normalised violation (``bx, bf, bv``; :func:`isles.problems.constraints.better`):
a feasible x if one was ever evaluated, else the one of least violation, which the run summary
then reports as infeasible. For a min-max problem whose worst case ``max_y L`` is known
(``objective_known``, P1: ``sum x^2``) the objective is that worst case. Otherwise
(a user's problem without it) the result is the x of best fitness against the island's current
opponents, the only measure available, and :meth:`CDE.best` says so in its docstring.

**Islands**: a CDE island holds both populations; :meth:`CDE.populations` exposes them as two
roles, ``x`` and ``y``, and the runtime migrates each role into the population of the same role
(:mod:`isles.islands.group`). Fitness is relative to the opponents, so :meth:`CDE.assess_immigrants`
re-evaluates immigrants (and refreshes the residents of that role) against the destination's
opponents before they compete; no stale fitness travels.

**GPU**: ``graph_safe`` lets the island runtime capture a whole cycle (both phases,
``gens_x + gens_y`` generations) as one CUDA graph and replay it (:mod:`isles.algorithms.core.graph`).
With ``fused=True`` the pair fitness is one fused kernel per generation (payoffs and their max/min
in registers, no pair matrix in memory; :mod:`isles.algorithms.coevolution.cuda`) where the problem
carries the pair contract (P1 and every augmented Lagrangian do). The NumPy twin runs the same
array code. A generation is still some hundred small kernels (the DE operators, the problem's
constraints), so the replayed cycle is launch-bound: see docs/cde.md's speed table.

**Random numbers**: one counter RNG per island. DE generation ``k`` of cycle ``c`` (``k`` in
``[0, gens_x)`` for x, ``[gens_x, gens_x + gens_y)`` for y) draws at counter
``1 + c + k * 2**24``; initialisation at counter 0 (x: draw 0, y: draw 5). A captured cycle
replayed with the device counter ``ctr`` added to every counter therefore draws exactly cycle
``c + ctr``'s numbers (:mod:`isles.algorithms.core.graph`), so NumPy and CuPy runs draw the same numbers.

The runtime's ``generations`` counts **cycles** for CDE (one :meth:`CDE.step` is one cycle); the
experiments set ``generations: ${algorithm.n_cycles}``.

**Counts** (per island, host ints; docs/budgets.md): ``state["evals"]`` counts evaluations of
the problem's objective and constraints at one x (for a min-max problem, of its x terms): ``2 Nx``
at initialisation (the Evaluator's checked first evaluation, then the terms), ``Nx (1 + gens_x)``
per cycle (:func:`cycle_evaluations`); P2's phase pays none (P1's terms are kept through the
selections). ``state["pair_evals"]`` counts pair payoffs ``L(x, y)`` (:func:`cycle_payoffs`), the
run's ``payoff_evaluations``. Re-assessed immigrants add theirs at a migration.

Files: the parameters and the cycle with the island interface (:class:`CDE`) here; the pieces of
the cycle (problem, sides, fused kernels, pair fitness, archive) in
:mod:`isles.algorithms.coevolution.cde_pieces`.
"""

from __future__ import annotations

from dataclasses import dataclass

from isles.algorithms.coevolution.cde_pieces import CDEPieces
from isles.algorithms.coevolution.counts import (  # noqa: F401  (cycle_payoffs: a public name of this module)
    COUNTER_STRIDE,
    DRAW_INIT_Y,
    cycle_evaluations,
    cycle_payoffs,
)
from isles.algorithms.core.base import Context, IslandAlgorithm, State, check_bool, check_range
from isles.algorithms.core.host_build import check_host_kernel
from isles.algorithms.core.population import Population
from isles.algorithms.de.de import DE, DEParams, select
from isles.problems.constraints import argbest, better

#: roles of the two populations (migration keys)
ROLES = ("x", "y")


@dataclass(frozen=True)
class CDEParams:
    """Parameters of :class:`CDE` (validated on construction; seed 000 Table 1 defaults).

    Attributes:
        pop_size: individuals of P1 (x) per island, ``n`` (Table 1: 50); at least what the
            strategy needs (rand/1: 4, best/1: 3).
        pop_size_y: individuals of P2 (y); ``None`` = ``pop_size``.
        n_cycles: cycles (Table 1: 200), ``>= 1``. The runtime's ``generations`` counts cycles.
        gens_x, gens_y: DE generations of P1 and of P2 per cycle (Table 1: 20 and 20), ``>= 1``.
        F, CR: DE's differential weight in ``(0, 2]`` and crossover rate in ``[0, 1]`` (Table 1:
            0.7 and 0.7), shared by both populations.
        strategy: DE strategy of both populations: ``rand/1`` (case study 1) or ``best/1``
            (case study 2); ``current-to-best/1`` and ``rand/2`` also work.
        crossover: ``bin`` (the seed), ``exp`` or ``nec``.
        bound_handling: ``reflect`` (default of :class:`isles.algorithms.de.de.DEParams`), ``clip``
            or ``reinit``.
        fused: on CuPy, evaluate pairs with the fused kernel of :mod:`isles.algorithms.coevolution.cuda`
            where the problem carries the pair contract. Default ``False``: measured on one H100
            (``benchmarks/cde_bench.py``, docs/cde.md) the kernel is 2 % faster on P1 but 7-50 % slower
            on P2-P6 at n = 50 and 100, where a generation is bound by launches, not by the pairs.

        epoch: on CuPy, run each cycle of every island as one launch of the epoch kernel
            (:mod:`isles.algorithms.coevolution.epoch`) where the configuration and the problem
            allow it (rand/1 with bin or nec; a problem with the term contract). Default ``True``;
            ``False``: the graph path (a generation of array code, replayed).
        host_kernel: on NumPy, run cycles in the epoch kernel's host build (the same
            configurations and problems as ``epoch``): ``"auto"`` (default), ``True`` or ``False``
            (:mod:`isles.algorithms.core.host_build`).

    Raises:
        ValueError: one line naming the field (``algorithm.<field>``) and the allowed values.
    """

    pop_size: int = 50
    pop_size_y: int | None = None
    n_cycles: int = 200
    gens_x: int = 20
    gens_y: int = 20
    F: float = 0.7
    CR: float = 0.7
    strategy: str = "rand/1"
    crossover: str = "bin"
    bound_handling: str = "reflect"
    fused: bool = False
    epoch: bool = True
    host_kernel: bool | str = "auto"

    def __post_init__(self):
        check_host_kernel(self.host_kernel)
        for name in ("fused", "epoch"):
            object.__setattr__(self, name, check_bool(f"algorithm.{name}", getattr(self, name)))
        for name in ("n_cycles", "gens_x", "gens_y"):
            object.__setattr__(self, name, check_range(f"algorithm.{name}", getattr(self, name), 1, integer=True))
        x = self.de_params("x")  # validates F, CR, strategy, crossover, bound_handling, pop_size
        object.__setattr__(self, "F", x.F)
        object.__setattr__(self, "CR", x.CR)
        object.__setattr__(self, "pop_size", x.pop_size)
        if self.pop_size_y is None:
            object.__setattr__(self, "pop_size_y", x.pop_size)
        object.__setattr__(self, "pop_size_y", self.de_params("y").pop_size)  # validated

    def de_params(self, role: str) -> DEParams:
        """The :class:`DEParams` of population ``role`` (``x`` or ``y``).

        Raises:
            ValueError: as :class:`DEParams`, with the population size named
                ``algorithm.pop_size`` or ``algorithm.pop_size_y``.
        """
        n = self.pop_size if role == "x" else self.pop_size_y
        try:
            return DEParams(
                pop_size=n,
                F=self.F,
                CR=self.CR,
                strategy=self.strategy,
                crossover=self.crossover,
                bound_handling=self.bound_handling,
                fused=False,
            )
        except ValueError as e:
            msg = str(e)
            if role == "y" and msg.startswith("algorithm.pop_size="):
                msg = "algorithm.pop_size_y=" + msg[len("algorithm.pop_size=") :]
            raise ValueError(msg) from None


class CDE(CDEPieces, IslandAlgorithm):
    """Co-evolutionary DE on ``I`` islands in lockstep (module docstring; seed 000 Algorithm 1).

    State (dict): ``X (I, Nx, Dx)`` with fitness ``f (I, Nx)`` (``max_y L``) and ``v`` (zeros),
    ``Y (I, Ny, Dy)`` with ``fy (I, Ny)`` (``-min_x L``) and ``vy`` (zeros), the result archive
    ``bx (I, 1, Dx)``, ``bf, bv (I, 1)`` (objective and violation of the best x evaluated),
    ``generation`` (host int, cycles done), ``evals`` (host int, pair payoffs per island),
    ``nan_evals`` (0-d device int64, NaN payoffs).

    Raises:
        ValueError: the problem is not a min-max problem (a constrained problem needs
            ``constraints.handling=augmented_lagrangian``); a payoff of the wrong shape (at the
            first evaluation, both shapes in the message).
    """

    name = "cde"
    Params = CDEParams
    graph_safe = True  # one step (a cycle) has no host synchronisation: CUDA-graph replay on CuPy
    HOST_MODULE = "isles.algorithms.coevolution.epoch"  # the host build, NumPy runs' CPU path (algorithm.host_kernel)
    minmax = True  # solves min-max problems (islands/config/build.py pairs it with augmented_lagrangian)

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self.de = {r: DE(self.params.de_params(r)) for r in ROLES}

    def population_size(self) -> int:
        """``Nx = pop_size`` (the x population; ``pop_size_y`` for y)."""
        return self.params.pop_size

    def population_sizes(self) -> dict:
        """``{"x": pop_size, "y": pop_size_y}``, the roles of :meth:`populations`."""
        return {"x": int(self.params.pop_size), "y": int(self.params.pop_size_y)}

    # -- interface -------------------------------------------------------------------------------
    def init(self, ctx: Context) -> State:
        """Both populations uniform in their boxes; P1 evaluated against P2 and P2 against P1."""
        xp = ctx.xp
        p = self.problem_of(ctx)
        sides = self._sides(ctx)
        nx, ny = self.params.pop_size, self.params.pop_size_y
        X = ctx.uniform_in_box(0, 0, nx)
        sy = sides["y"]
        Y = sy.lower + ctx.rng.uniform(0, DRAW_INIT_Y, (ny, p.y_dim), ctx.dtype) * (sy.upper - sy.lower)
        true = self._true(ctx, X)  # the Evaluator's checked first evaluation (Nx)
        terms = p.x_terms(X) if hasattr(p, "x_terms") else None  # Nx
        f, n1 = self.pair_fitness(ctx, X, Y, "x", terms, generic=True)  # payoff shape checked
        fy, n2 = self.pair_fitness(ctx, X, Y, "y", terms, generic=True)
        self.fused_pairs(ctx, X, Y)  # CuPy: build and self-check the fused kernel now
        self.epoch_plan(ctx)  # CuPy: build and self-check the epoch kernel now
        zx = xp.zeros_like(f)
        state = {
            "X": X,
            "f": f,
            "v": zx,
            "Y": Y,
            "fy": fy,
            "vy": xp.zeros_like(fy),
            "generation": 0,
            "evals": self.initial_evaluations(),
            "pair_evals": 2 * nx * ny,
            "nan_evals": xp.asarray(n1 + n2, dtype=xp.int64),
        }
        return self._archive(xp, state, X, true)

    def initial_evaluations(self) -> int:
        """``2 Nx`` x rows per island at :meth:`init` (module docstring, "Counts")."""
        return 2 * self.params.pop_size

    def evaluations_per_generation(self) -> int:
        """:func:`cycle_evaluations`: ``Nx (1 + gens_x)`` x rows per island and cycle."""
        return cycle_evaluations(self.params)

    def _evolve(self, ctx: Context, state: State, role: str, k0: int, n_gens: int, terms=None):
        """``n_gens`` DE generations of population ``role`` against the frozen other one
        (``state["evals"]`` is counted by :meth:`step`, ``pair_evals`` here).

        Args:
            terms: the x terms of ``state["X"]`` (:meth:`_x_terms`) or ``None``. Role x: kept
                through the selections (each trial's terms are evaluated once, for its fitness and
                the result archive); role y: P1's terms for the whole phase (recomputed where
                ``None``).

        Returns:
            ``(state, terms)``: the new state and the x terms of its ``X`` (``None`` where unknown).
        """
        xp = ctx.xp
        side = self._sides(ctx)[role]
        keys = ("X", "f", "v") if role == "x" else ("Y", "fy", "vy")
        other = state["Y"] if role == "x" else state["X"]
        sub = {
            "X": state[keys[0]],
            "f": state[keys[1]],
            "v": state[keys[2]],
            "generation": 0,
            "evals": 0,
            "nan_evals": state["nan_evals"],
        }
        s = dict(state)
        n_other = other.shape[1]
        p = self.problem_of(ctx)
        if role == "y" and terms is None:  # P1 is frozen: its per-x terms once for the whole phase
            if self.fused_pairs(ctx, state["X"], state["Y"]) is not None:
                terms = p.pair_x(other)
            elif hasattr(p, "x_terms"):
                terms = p.x_terms(other)
        for k in range(k0, k0 + n_gens):
            sub["generation"] = 1 + state["generation"] + k * COUNTER_STRIDE
            U = self.de[role].trial(side, sub)
            if role == "x":
                tu = self._x_terms(ctx, U)
                fu, n_nan = self.pair_fitness(ctx, U, other, "x", tu)
                s = self._archive(xp, s, U, self._true(ctx, U, tu))
                terms = self._keep_terms(xp, terms, tu, ~better(sub["f"], sub["v"], fu, xp.zeros_like(fu)))
            else:
                fu, n_nan = self.pair_fitness(ctx, other, U, "y", terms)
            sub = select(xp, sub, U, fu, xp.zeros_like(fu), n_nan)
        s[keys[0]], s[keys[1]], s[keys[2]] = sub["X"], sub["f"], sub["v"]
        s["nan_evals"] = sub["nan_evals"]
        s["pair_evals"] = state.get("pair_evals", 0) + n_gens * sub["X"].shape[1] * n_other
        return s, (terms if role == "x" else None)

    def refresh(self, ctx: Context, state: State, role: str, terms=None):
        """Fitness of population ``role`` re-evaluated against the current opponents.

        Args:
            terms: the x terms of ``state["X"]`` where known (no evaluation), else ``None``: they
                are evaluated (``Nx`` rows, counted in ``state["evals"]`` by the caller).

        Returns:
            ``(state, terms)``: the new state and the x terms of its ``X`` (``None`` where unknown).
        """
        s = dict(state)
        if terms is None:
            terms = self._x_terms(ctx, state["X"])
        fit, n_nan = self.pair_fitness(ctx, state["X"], state["Y"], role, terms)
        s["f" if role == "x" else "fy"] = fit
        s["nan_evals"] = state["nan_evals"] + n_nan
        s["pair_evals"] = state.get("pair_evals", 0) + state["X"].shape[1] * state["Y"].shape[1]
        return s, terms

    def step(self, ctx: Context, state: State) -> State:
        """One cycle of every island (seed 000 Algorithm 1 lines 3-12); no host synchronisation.
        On CuPy, one launch of the epoch kernel where :meth:`epoch_plan` applies."""
        host = self.host_plan(ctx)  # None on CuPy
        if host is not None:  # NumPy: the host build, as run's (algorithm.host_kernel)
            return host(state, 1)
        plan = self.epoch_plan(ctx)
        if plan is not None:
            return plan.step(state)
        p = self.params
        s, terms = self.refresh(ctx, state, "x")
        s, terms = self._evolve(ctx, s, "x", 0, p.gens_x, terms)
        s, terms = self.refresh(ctx, s, "y", terms)
        s, _ = self._evolve(ctx, s, "y", p.gens_x, p.gens_y, terms)
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + cycle_evaluations(p)
        return s

    def run(self, ctx: Context, state: State, n_generations: int) -> State:
        """``n_generations`` cycles; with the epoch kernel and no stop target (nothing to track
        after each cycle) all of them in one launch, else :meth:`step` after :meth:`step`, the
        target tracked after each."""
        plan = self.epoch_plan(ctx)
        if plan is not None and ctx.target is None and int(n_generations) > 0:
            return plan.step(state, int(n_generations))
        return super().run(ctx, state, n_generations)

    def solve(self, ctx: Context, state: State | None = None) -> State:
        """``n_cycles`` cycles from ``state`` (or a fresh :meth:`init`), without the island runtime."""
        state = self.init(ctx) if state is None else state
        return self.run(ctx, state, self.params.n_cycles)

    # -- migration and results -----------------------------------------------------------------
    def populations(self, state: State) -> dict:
        """Both populations as migration roles: ``{"x": Population(X, f, v), "y": Population(Y, fy, vy)}``."""
        return {
            "x": Population(state["X"], state["f"], state["v"]),
            "y": Population(state["Y"], state["fy"], state["vy"]),
        }

    def population(self, state: State) -> Population:
        """The x population (P1)."""
        return self.populations(state)["x"]

    def replace_role(self, ctx: Context, state: State, role, idx, immigrants: Population) -> State:
        """Write ``immigrants (I, k)`` into population ``role`` at ``idx (I, k)``."""
        keys = ("X", "f", "v") if role == "x" else ("Y", "fy", "vy")
        new = self.populations(state)[role].put(idx, immigrants)
        s = dict(state)
        s[keys[0]], s[keys[1]], s[keys[2]] = new.genome, new.f, new.v
        return s

    def replace(self, ctx: Context, state: State, idx, immigrants: Population) -> State:
        """x immigrants in (:meth:`replace_role` with role ``x``)."""
        return self.replace_role(ctx, state, "x", idx, immigrants)

    def assess_immigrants(self, ctx: Context, state: State, role, immigrants: Population):
        """Re-evaluate ``immigrants (I, k)`` of ``role`` against this island's opponents.

        The residents of ``role`` are refreshed against the same opponents, so that the
        replacement policy compares like with like; a stale fitness never competes.

        Returns:
            ``(state, immigrants)`` with fresh fitness (violation 0, as the residents').
        """
        xp = ctx.xp
        s, terms = self.refresh(ctx, state, role)
        G = xp.asarray(immigrants.genome, dtype=ctx.dtype)
        if role == "x":
            tg = self._x_terms(ctx, G)
            fit, n_nan = self.pair_fitness(ctx, G, s["Y"], "x", tg)
            s = self._archive(xp, s, G, self._true(ctx, G, tg))
            s["pair_evals"] = s["pair_evals"] + G.shape[1] * s["Y"].shape[1]
        else:
            fit, n_nan = self.pair_fitness(ctx, s["X"], G, "y", terms)
            s["pair_evals"] = s["pair_evals"] + G.shape[1] * s["X"].shape[1]
        s["nan_evals"] = s["nan_evals"] + n_nan
        s["evals"] = s["evals"] + s["X"].shape[1] + (G.shape[1] if role == "x" else 0)  # the refresh, x immigrants
        fresh = Population(G, fit, xp.zeros_like(fit), dict(immigrants.extras))
        return s, fresh

    def best(self, state: State) -> Population:
        """The result of each island, ``(I, 1)``: the best x evaluated under Deb's rules on the
        problem's objective and violation (module docstring). Where the worst case is unknown
        (no ``bx`` in the state) it is the x of best fitness against the current opponents."""
        if "bx" in state:
            return Population(state["bx"], state["bf"], state["bv"])
        pop = self.population(state)
        return pop.take(argbest(pop.f, pop.v, axis=1)[:, None])
