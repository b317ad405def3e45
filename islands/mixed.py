"""The layout of a group's islands over algorithm families: one family on all of them (:class:`Whole`), or
the families of a heterogeneous archipelago (:class:`Mixed`, docs/mixed_islands.md).

A run whose config lists ``groups`` (``groups: [{algorithm: ..., islands: 4}, ...]``,
:func:`isles.islands.config.schema.with_groups`) runs :class:`Mixed`: group ``j`` of the list owns the
global islands ``start_j .. start_j + islands_j - 1`` (in the list's order), and an island group of the
runtime (one per actor or device) holds the islands placement gives it, in id order (a block, or those
the placement by cost spreads to it), so it may hold islands of several families: one :class:`Part` per
family present, each running its own ``init``/``step``/``run`` on its islands with its own context (a
:class:`~isles.algorithms.core.random.CounterRNG` over the part's global island ids, so the numbers of an
island depend on (seed, island, generation) only: 1 and N actors give the same run, bit for bit).

**Individuals crossing families** travel as their phenotype ``x`` (``genome``, ``(D,)`` in the run's
dtype), ``f`` and ``v`` (:attr:`Mixed.travels`); on arrival the destination family makes its own individual
of it by its rule, :meth:`~isles.algorithms.core.base.IslandAlgorithm.adopt`, the same whatever the source's
family (also between islands of one family), so that where a source runs never changes the result. The one
migration code path over the parts is :func:`isles.islands.migration.moves.immigrate`.

**State.** A flat dict: each part's state under ``"<j>:<key>"`` (``j`` the group's index in the list), and
``generation``, ``evals`` (the batch's evaluations, all islands), ``nan_evals`` (0-d, the batch's) and
``adopted_evals`` (the evaluations of arrivals by families that ``evaluates_arrivals``) at the top. A
checkpoint resumes on any grouping (:meth:`Mixed.regroup`, each family's part by its own island axes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from isles.algorithms.core.base import Context, IslandAlgorithm, State
from isles.algorithms.core.population import Population, PopulationRoles
from isles.algorithms.core.random import CounterRNG
from isles.islands.config.build import build_algorithm
from isles.islands.control import checkpoint

ROLE = "mixed"
"""The role name of a mixed batch's emigrants (:class:`PopulationRoles` of one role: a mixed batch is
not one population, so no span graph captures its epochs)."""


@dataclass
class Part:
    """One family's islands in a group's batch.

    Attributes:
        key: the family's index in the layout (0 for :class:`Whole`).
        algorithm: the family's island algorithm.
        rows: its islands' positions in the batch (consecutive: the batch is in id order).
        ctx: its context (random streams over its islands' global ids), or ``None`` where not asked for.
        state: its own state (keys without the layout's prefix).
    """

    key: int
    algorithm: IslandAlgorithm
    rows: slice
    ctx: Context | None
    state: State


class Whole:
    """One family on all of a group's islands (a run without ``groups``): one :class:`Part`, whose
    individuals travel with all their leaves (``travels`` False: migration conforms them to the
    residents and the family may re-assess them, :meth:`IslandAlgorithm.assess_immigrants`).

    Args:
        algorithm: the run's island algorithm.
    """

    travels = False

    def __init__(self, algorithm):
        self.algorithm = algorithm

    def parts(self, state: State, ctx: Context | None = None) -> list:
        """``[Part]`` of the one family on every island."""
        return [Part(0, self.algorithm, slice(None), ctx, state)]

    def merged(self, parts: list, before: State, adopted: int = 0) -> State:
        """The batch state of ``parts`` (:meth:`parts` after migration): the one part's."""
        return parts[0].state

    def emigrants(self, parts: list, chosen: list):
        """The batch's emigrants of the parts' ``{role: Population (I, k)}``: a :class:`Population` for one
        role, else a :class:`PopulationRoles`."""
        (out,) = chosen
        return out[None] if list(out) == [None] else PopulationRoles(out)

    def evaluations(self, state: State, n_islands: int) -> int:
        """The batch's evaluations in ``state`` (host counters): per island times the islands."""
        return int(state["evals"]) * int(n_islands)

    def counts(self, n_islands: int) -> tuple[int, int]:
        """``(at init, per generation)``: evaluations of ``n_islands`` islands (the budget's formula,
        :mod:`isles.islands.control.budget`).

        Raises:
            NotImplementedError: the family does not declare its counts."""
        a = self.algorithm
        return int(n_islands) * int(a.initial_evaluations()), int(n_islands) * int(a.evaluations_per_generation())

    def regroup(self, states: list, old_groups: list, new_groups: list) -> list:
        """A checkpoint's states grouped as ``old_groups`` (global ids), grouped as ``new_groups``, by the
        family's ``island_axes`` (:func:`isles.islands.control.checkpoint.regroup`)."""
        return checkpoint.regroup(states, old_groups, new_groups, self.algorithm.island_axes)


def layout_of(algorithm) -> Whole | Mixed:
    """The layout of a group whose island algorithm is ``algorithm``: a :class:`Mixed` itself, else
    :class:`Whole`."""
    return algorithm if isinstance(algorithm, Mixed) else Whole(algorithm)


def common(pop: Population, algorithm, dtype) -> Population:
    """``pop`` of ``algorithm``'s family as it travels between families: ``genome`` = its phenotype
    ``(..., D)`` in ``dtype``, ``f``, ``v``, no extras."""
    return Population(pop.xp.asarray(algorithm.phenotype(pop.genome), dtype=dtype), pop.f, pop.v, {})


def _one(counts: set, method: str) -> int:
    """The one count of ``counts`` (every family's ``method()``).

    Raises:
        NotImplementedError: the counts differ (a mixed run's budget sums them: :meth:`Mixed.counts`)."""
    if len(counts) != 1:
        raise NotImplementedError(f"the groups' {method}() differ ({sorted(counts)}): see Mixed.counts")
    return counts.pop()


def built(node, j, islands: int = 1, dim=None, budget=None) -> IslandAlgorithm:
    """The algorithm of group ``j`` (its key as typed: an index or a name): ``node`` itself, or built
    from its config node (:func:`isles.islands.config.build.build_algorithm`) with what a one-algorithm
    run's option takes from the run: ``dim`` (where null) the problem's, ``n_islands`` the group's
    ``islands``; a ``max_evaluations`` that is the run's ``budget`` (the option's interpolation) null:
    a mixed run's budget is the run's, spent by all its groups' generations (:meth:`Mixed.counts`).

    Raises:
        ValueError: a bad value or target of the node, one line naming ``groups.<j>.algorithm.<field>``.
    """
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "dim" in node and node["dim"] is None:
        node["dim"] = dim
    if "n_islands" in node:
        node["n_islands"] = int(islands)
    if node.get("max_evaluations") is not None and node["max_evaluations"] == budget:
        node["max_evaluations"] = None
    try:
        return build_algorithm(node)
    except ValueError as err:
        text = str(err)
        if not text.startswith("algorithm."):
            raise ValueError(f"groups.{j}.algorithm: {text}") from None
        # every field the line names is the group's (algorithm.N_min -> groups.0.algorithm.N_min)
        raise ValueError(re.sub(r"(?<![\w.])algorithm\.", f"groups.{j}.algorithm.", text)) from None


class Mixed(IslandAlgorithm):
    """Islands of several families in one batch (module docstring): the island algorithm that the group
    evolves (each part its own generations) and the layout that migration goes through (:meth:`parts`).

    Args:
        groups: ``[{"name": str, "islands": int, "algorithm": IslandAlgorithm or its config node, "key": as typed}]``,
            in the config's order (the ``_target_`` node that :func:`isles.islands.config.schema.with_groups`
            makes; each algorithm node is built here, :func:`built`).
        dim, budget: the problem's ``dim`` and the run's ``stop.max_evaluations`` (``None``: unset), :func:`built`.

    Raises:
        ValueError: a group's algorithm that cannot be built (:func:`built`); a family with several
            migrating populations or one that solves min-max problems, named as ``groups.<j>.algorithm``.
    """

    name = "mixed"
    graph_safe = False
    travels = True

    def __init__(self, groups: list, dim: int | None = None, budget: int | None = None):
        super().__init__(params=object())
        self.names = [str(g["name"]) for g in groups]
        self.algorithms = [
            built(g["algorithm"], g.get("key", j), g["islands"], dim, budget) for j, g in enumerate(groups)
        ]
        self.sizes = [int(g["islands"]) for g in groups]
        self.starts = [int(s) for s in np.cumsum([0] + self.sizes[:-1])]
        for j, (g, a) in enumerate(zip(groups, self.algorithms, strict=False)):
            if a.minmax or len(a.population_sizes()) != 1:
                raise ValueError(
                    f"groups.{g.get('key', j)}.algorithm={type(a).__name__}: a family with several populations (min-max) "
                    "cannot join a mixed archipelago; allowed are families with one population"
                )
        self.dtype = np.float64
        self._ctxs: dict = {}

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_ctxs"] = {}  # contexts hold device arrays: each group builds its own
        return d

    # -- layout -----------------------------------------------------------------------------------
    def family_of(self, island: int) -> int:
        """The group index ``j`` whose islands include global island ``island``."""
        return int(np.searchsorted(np.asarray(self.starts), int(island), side="right") - 1)

    def contexts(self, ctx: Context) -> list:
        """``[(j, rows (slice), sub-context)]`` of the families in ``ctx``'s batch, in order. The
        sub-context draws from the part's global island ids; it has no stop target (the batch tracks it)."""
        ids = list(ctx.rng.streams)
        hit = self._ctxs.get(id(ctx))
        if hit is not None and hit[0] is ctx and hit[1] == ids:  # a group that regroups changes ctx.rng
            return hit[2]
        if ids != sorted(ids):
            raise ValueError(f"a mixed batch holds its islands in id order, not {ids}")
        out = []
        for j in sorted({self.family_of(i) for i in ids}):
            pos = [p for p, i in enumerate(ids) if self.family_of(i) == j]  # consecutive: ids sorted
            rng = CounterRNG(ctx.xp, ctx.rng.seed, [ids[p] for p in pos])
            sub = Context(ctx.xp, ctx.dtype, ctx.evaluator, rng, None, ctx.cuda_graph)
            out.append((j, slice(pos[0], pos[-1] + 1), sub))
        self._ctxs[id(ctx)] = (ctx, ids, out)
        return out

    def parts(self, state: State, ctx: Context | None = None) -> list:
        """``[Part]`` of the families present in the batch ``state``, in order (with their contexts where
        ``ctx`` is given)."""
        if ctx is not None:
            return [Part(j, self.algorithms[j], rows, sub, self.part(state, j)) for j, rows, sub in self.contexts(ctx)]
        out, at = [], 0
        for j in self.present(state):
            st = self.part(state, j)
            n = self._islands(j, st)
            out.append(Part(j, self.algorithms[j], slice(at, at + n), None, st))
            at += n
        return out

    @staticmethod
    def present(state: State) -> list:
        """The group indices whose parts ``state`` holds, in order."""
        return sorted({int(k.split(":", 1)[0]) for k in state if ":" in k})

    @staticmethod
    def part(state: State, j: int) -> State:
        """Part ``j``'s own state (its keys without the prefix)."""
        pre = f"{j}:"
        return {k[len(pre) :]: v for k, v in state.items() if k.startswith(pre)}

    def joined(self, parts: dict, before: State | None, generation: int, adopted: int = 0) -> State:
        """The batch state of ``{j: part state}`` (module docstring) after the batch state ``before``
        (``None`` at init): ``adopted`` more evaluations of arrivals, kept as ``adopted_evals``;
        ``hit_generation`` carried."""
        s: State = {"generation": int(generation)}
        for j, st in parts.items():
            s.update({f"{j}:{k}": v for k, v in st.items()})
        s["adopted_evals"] = int((before or {}).get("adopted_evals", 0)) + int(adopted)
        own = sum(int(st["evals"]) * self._islands(j, st) for j, st in parts.items())
        s["evals"] = own + s["adopted_evals"]
        s["nan_evals"] = sum(st["nan_evals"] for st in parts.values())
        if before is not None and "hit_generation" in before:
            s["hit_generation"] = before["hit_generation"]
        return s

    def merged(self, parts: list, before: State, adopted: int = 0) -> State:
        """The batch state of ``parts`` (:meth:`parts` after migration) and ``adopted`` evaluations of arrivals."""
        return self.joined({p.key: p.state for p in parts}, before, before["generation"], adopted)

    def emigrants(self, parts: list, chosen: list) -> PopulationRoles:
        """The batch's emigrants ``(I, k)`` of the ``parts``' ``{None: Population}``, as they travel
        (:func:`common`), under the role :data:`ROLE`."""
        pops = [common(c[None], p.algorithm, self.dtype) for p, c in zip(parts, chosen, strict=False)]
        return PopulationRoles({ROLE: Population.concat(pops, axis=0)})

    def _islands(self, j: int, st: State) -> int:
        return int(self.algorithms[j].population(st).shape[0])

    def evaluations(self, state: State, n_islands: int) -> int:
        """The batch's evaluations (each family counts its own, arrivals' evaluations included)."""
        return int(state["evals"])

    def counts(self, n_islands: int) -> tuple[int, int]:
        """``(at init, per generation)``: evaluations of all the run's islands, each family's count
        times its islands (the budget's formula, :mod:`isles.islands.control.budget`; ``n_islands``
        is their sum).

        Raises:
            NotImplementedError: a family does not declare its counts."""
        at_init = sum(n * int(a.initial_evaluations()) for n, a in zip(self.sizes, self.algorithms, strict=False))
        per = sum(n * int(a.evaluations_per_generation()) for n, a in zip(self.sizes, self.algorithms, strict=False))
        return at_init, per

    # -- the interface ------------------------------------------------------------------------------
    def shares_budget(self) -> bool:
        """Whether any family shares the evaluation budget per island itself (:meth:`IslandAlgorithm.shares_budget`)."""
        return any(a.shares_budget() for a in self.algorithms)

    def initial_evaluations(self) -> int:
        """Evaluations per island at init, where every family's are equal (the budget reads :meth:`counts`).

        Raises:
            NotImplementedError: the families' counts differ."""
        return _one({int(a.initial_evaluations()) for a in self.algorithms}, "initial_evaluations")

    def evaluations_per_generation(self) -> int:
        """Evaluations per island and generation, where every family's are equal (:meth:`counts` otherwise).

        Raises:
            NotImplementedError: the families' counts differ."""
        return _one({int(a.evaluations_per_generation()) for a in self.algorithms}, "evaluations_per_generation")

    def population_size(self) -> int:
        """The smallest family's population (what ``islands.n_migrants`` must fit)."""
        return min(int(a.population_size()) for a in self.algorithms)

    def check_problem(self, problem) -> None:
        """Every family's :meth:`~IslandAlgorithm.check_problem`."""
        for a in self.algorithms:
            a.check_problem(problem)

    def regroup(self, states: list, old_groups: list, new_groups: list) -> list:
        """A checkpoint's batch states of the islands grouped as ``old_groups`` (global ids), grouped as
        ``new_groups``: each family's part regrouped over its own islands by the family's
        ``island_axes`` (:func:`isles.islands.control.checkpoint.regroup`), ``hit_generation`` by the
        batch's islands, ``adopted_evals`` (a total) kept on the first new group; the rest made anew
        (:meth:`joined`)."""
        if [list(g) for g in old_groups] == [list(g) for g in new_groups]:
            return states
        fam = lambda ids, j: [i for i in ids if self.family_of(i) == j]  # noqa: E731
        parts = [{} for _ in new_groups]
        for j, a in enumerate(self.algorithms):
            old = [(st, fam(ids, j)) for st, ids in zip(states, old_groups, strict=False) if fam(ids, j)]
            new = [(n, fam(ids, j)) for n, ids in enumerate(new_groups) if fam(ids, j)]
            moved = checkpoint.regroup(
                [self.part(st, j) for st, _ in old], [o for _, o in old], [i for _, i in new], a.island_axes
            )
            for (n, _), st in zip(new, moved, strict=False):
                parts[n][j] = st
        out, generation = [], states[0]["generation"]
        adopted = sum(int(st.get("adopted_evals", 0)) for st in states)
        hits = "hit_generation" in states[0]
        if hits:
            where = {gid: (g, p) for g, ids in enumerate(old_groups) for p, gid in enumerate(ids)}
        for n, ids in enumerate(new_groups):
            before = {"adopted_evals": 0}
            if hits:
                before["hit_generation"] = np.array([states[where[i][0]]["hit_generation"][where[i][1]] for i in ids])
            out.append(self.joined(parts[n], before, generation, adopted if n == 0 else 0))
        return out

    def gpu_path(self, ctx: Context) -> str:
        """Each family's path, by group name."""
        return "; ".join(f"{self.names[j]}: {self.algorithms[j].gpu_path(sub)}" for j, _, sub in self.contexts(ctx))

    def init(self, ctx: Context) -> State:
        """Each part's ``init`` on its islands."""
        self.dtype = ctx.dtype
        return self.joined({j: self.algorithms[j].init(sub) for j, _, sub in self.contexts(ctx)}, None, 0)

    def step(self, ctx: Context, state: State) -> State:
        """One generation of each part."""
        return self.run(ctx, state, 1)

    def run(self, ctx: Context, state: State, n_generations: int) -> State:
        """``n_generations`` of each part back to back (each family's own fast path), then the target
        tracked; with a stop target, generation by generation with the target tracked after each."""
        n = int(n_generations)
        if ctx.target is not None and n > 1:
            for _ in range(n):
                state = self.track_target(ctx, self.run(ctx, state, 1))
            return state
        parts = {p.key: p.algorithm.run(p.ctx, p.state, n) for p in self.parts(state, ctx)}
        return self.joined(parts, state, state["generation"] + n)

    def best(self, state: State) -> Population:
        """Each island's best ``(I, 1)`` as it travels (phenotype, ``f``, ``v``)."""
        bests = [common(p.algorithm.best(p.state), p.algorithm, self.dtype) for p in self.parts(state)]
        return Population.concat(bests, axis=0)

    def phenotype(self, genome):
        """The identity: a mixed batch's individuals carry their phenotype."""
        return genome


#: the metrics of each group ``NAME`` of a mixed run (``group_NAME_<metric>``), see :class:`GroupBooks`
METRICS = ("best_f", "improvement_share", "migrants_sent", "migrants_taken")


def group_metric(name: str, metric: str) -> str:
    """The record's key of ``metric`` (one of :data:`METRICS`) of group ``name``: ``group_NAME_metric``."""
    return f"group_{name}_{metric}"


class GroupBooks:
    """Each group's metrics of a mixed run, cumulative over the run (from the first epoch this process
    books: a resumed run's books start at the resume), for the epoch record's ``group_metrics``
    (:func:`isles.islands.results.epoch_record`; ``history.csv``, MLflow, the convergence plot):

    * ``group_NAME_best_f``: the best ``f`` any island of the group has had (feasible bests first, by
      Deb's rules on the islands' bests);
    * ``group_NAME_improvement_share``: of the epochs after the first whose end improved the run's
      best, the fraction whose new best is on an island of the group (0 before any);
    * ``group_NAME_migrants_sent``, ``..._taken``: migrants accepted anywhere from the group's
      islands, and accepted by the group's islands (a plug-in's migrants are taken, sent by none).

    Args:
        groups: the run's groups as the schema normalised them (``[{name, islands, ...}]``, in order).
    """

    def __init__(self, groups: list):
        self.names = [str(g["name"]) for g in groups]
        self.of = np.repeat(np.arange(len(groups)), [int(g["islands"]) for g in groups])  # island -> group
        n = len(groups)
        self.best, self.best_v = np.full(n, np.inf), np.full(n, np.inf)
        self.improved, self.sent, self.taken = (np.zeros(n, dtype=np.int64) for _ in range(3))
        self.run_best = None  # (v, f) of the run's best after the last epoch booked

    @classmethod
    def of(cls, cfg: dict) -> GroupBooks | None:
        """The books of a checked config's ``groups``; ``None`` for a run without groups."""
        return cls(cfg["groups"]) if cfg.get("groups") else None

    def book(self, island_best_f, island_best_v, best_f: float, best_v: float, migrations) -> dict:
        """Book an epoch (each island's best ``(n_islands,)``, the run's best, the epoch's
        ``(epoch, src, dst, accepted, best f moved)`` migrations); the groups' metrics ``{name: float}``."""
        f, v = np.asarray(island_best_f, dtype=np.float64), np.asarray(island_best_v, dtype=np.float64)
        for g in range(len(self.names)):
            mine = self.of == g
            i = np.lexsort((f[mine], v[mine]))[0]  # the group's best island now (Deb: v, then f)
            if (v[mine][i], f[mine][i]) < (self.best_v[g], self.best[g]):
                self.best_v[g], self.best[g] = v[mine][i], f[mine][i]
        now = (float(best_v), float(best_f))
        if self.run_best is not None and now < self.run_best:
            self.improved[self.of[np.lexsort((f, v))[0]]] += 1
        self.run_best = now if self.run_best is None else min(self.run_best, now)
        for _, src, dst, accepted, _ in migrations:
            if 0 <= src < len(self.of):
                self.sent[self.of[src]] += accepted
            self.taken[self.of[dst]] += accepted
        total, out = max(1, int(self.improved.sum())), {}
        for g, name in enumerate(self.names):
            out[group_metric(name, "best_f")] = float(self.best[g])
            out[group_metric(name, "improvement_share")] = float(self.improved[g]) / total
            out[group_metric(name, "migrants_sent")] = float(self.sent[g])
            out[group_metric(name, "migrants_taken")] = float(self.taken[g])
        return out
