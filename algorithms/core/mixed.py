"""A batch of islands of several algorithm families: the island algorithm of a heterogeneous archipelago.

A run whose config lists ``groups`` (``groups: [{algorithm: ..., islands: 4}, ...]``,
:func:`isles.islands.config.schema.with_groups`) runs :class:`Mixed`: group ``j`` of the list owns the
global islands ``start_j .. start_j + islands_j - 1`` (in the list's order), and an island group of the
runtime (one per actor or device) holds the islands placement gives it, in id order (a block, or
those the placement by cost spreads to it), so it may hold islands of several families. :class:`Mixed` is one island algorithm to the runtime: each
family present in the batch (a *part*) runs its own ``init``/``step``/``run`` on its islands, with its own
context (a :class:`~isles.algorithms.core.random.CounterRNG` over the part's global island ids, so the
numbers of an island depend on (seed, island, generation) only, whatever the grouping: 1 and N actors
give the same run, bit for bit).

**Individuals crossing families.** Between families an individual travels as its phenotype ``x``
(``genome``, ``(D,)`` in the run's dtype), ``f`` and ``v``: every emigrant of a mixed batch has these
leaves only (:meth:`Mixed.emigrants_of`). On arrival the destination family makes its own individual of
it by its rule, :meth:`~isles.algorithms.core.base.IslandAlgorithm.adopt` (PSO: velocity 0, personal best
and position = the immigrant; FEP: ``eta = eta_init``; the GA: the nearest genome of its encoding,
re-evaluated; DE, CMA-ES, L-SHADE: as it is). The rule is the same whatever the source's family
(also between islands of one family), so that where a source runs never changes the result.

**State.** A flat dict: each part's state under ``"<j>:<key>"`` (``j`` the group's index in the
list), and ``generation``, ``evals`` (the batch's evaluations, all islands: :meth:`batch_evaluations`),
``nan_evals`` (0-d, the batch's) and ``adopted_evals`` (the GA's evaluations of its arrivals) at the top.
A checkpoint resumes on any grouping (:meth:`Mixed.regroup`, each family's part by its own island axes).
"""

from __future__ import annotations

import re

import numpy as np

from isles.algorithms.core.backend import device_constant
from isles.algorithms.core.base import Context, IslandAlgorithm, State
from isles.algorithms.core.population import Population, PopulationRoles, by_role
from isles.algorithms.core.random import CounterRNG

ROLE = "mixed"
"""The role name of a mixed batch's emigrants (:class:`PopulationRoles` of one role: a mixed batch is
not one population, so no span graph captures its epochs)."""


def common(pop: Population, algorithm, dtype) -> Population:
    """``pop`` of ``algorithm``'s family as it travels between families: ``genome`` = its phenotype
    ``(..., D)`` in ``dtype``, ``f``, ``v``, no extras."""
    xp = pop.xp
    return Population(xp.asarray(algorithm.phenotype(pop.genome), dtype=dtype), pop.f, pop.v, {})


def only(pops) -> Population:
    """The one population of a :class:`Population` or a one-role :class:`PopulationRoles`."""
    (pop,) = by_role(pops).values()
    return pop


def built(node, j) -> IslandAlgorithm:
    """The algorithm of group ``j`` (its key as typed: an index or a name): ``node`` itself, or built
    from its config node (:func:`isles.islands.config.build.build_algorithm`), an error naming
    ``groups.<j>.algorithm``.

    Raises:
        ValueError: a bad value or target of the node, one line naming ``groups.<j>.algorithm.<field>``.
    """
    if not isinstance(node, dict):
        return node
    from isles.islands.config.build import build_algorithm  # noqa: PLC0415  (the runtime's builder)

    try:
        return build_algorithm(node)
    except ValueError as err:
        text = str(err)
        if not text.startswith("algorithm."):
            raise ValueError(f"groups.{j}.algorithm: {text}") from None
        # every field the line names is the group's (algorithm.N_min -> groups.0.algorithm.N_min)
        raise ValueError(re.sub(r"(?<![\w.])algorithm\.", f"groups.{j}.algorithm.", text)) from None


class Mixed(IslandAlgorithm):
    """Islands of several families in one batch (module docstring).

    Args:
        groups: ``[{"name": str, "islands": int, "algorithm": IslandAlgorithm or its config node, "key": as typed}]``,
            in the config's order (the ``_target_`` node that :func:`isles.islands.config.schema.with_groups`
            makes; each algorithm node is built here, :func:`built`).

    Raises:
        ValueError: a group's algorithm that cannot be built (:func:`built`); a family with several
            migrating populations or one that solves min-max problems, named as ``groups.<j>.algorithm``.
    """

    name = "mixed"
    graph_safe = False

    def __init__(self, groups: list):
        super().__init__(params=object())
        self.names = [str(g["name"]) for g in groups]
        self.algorithms = [built(g["algorithm"], g.get("key", j)) for j, g in enumerate(groups)]
        self.sizes = [int(g["islands"]) for g in groups]
        self.starts = [int(s) for s in np.cumsum([0] + self.sizes[:-1])]
        for j, (g, a) in enumerate(zip(groups, self.algorithms)):
            if getattr(a, "minmax", False) or len(a.population_sizes()) != 1:
                raise ValueError(
                    f"groups.{g.get('key', j)}.algorithm={type(a).__name__}: a family with several populations (min-max) "
                    "cannot join a mixed archipelago; allowed are families with one population (DE, FEP, GA, PSO, ...)"
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

    def parts(self, ctx: Context) -> list:
        """``[(j, positions (slice), sub-context)]`` of the families in ``ctx``'s batch, in order. The
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
        (``None`` at init): ``adopted`` more evaluations of arrivals (:meth:`adopt` of a family that
        ``evaluates_arrivals``), kept as ``adopted_evals``; ``hit_generation`` carried."""
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

    def _islands(self, j: int, st: State) -> int:
        return int(self.algorithms[j].population(st).shape[0])

    # -- the interface ------------------------------------------------------------------------------
    def population_size(self) -> int:
        """The smallest family's population (what ``islands.n_migrants`` must fit)."""
        return min(int(a.population_size()) for a in self.algorithms)

    def _uniform(self, method: str) -> int:
        counts = {int(getattr(a, method)()) for a in self.algorithms}
        if len(counts) != 1:
            raise NotImplementedError(
                f"the groups' {method}() differ ({', '.join(f'{n}: {getattr(a, method)()}' for n, a in zip(self.names, self.algorithms))}); "
                "a budget in evaluations needs groups with equal counts per island"
            )
        return counts.pop()

    def shares_budget(self) -> bool:
        """Whether any family shares the evaluation budget per island itself (:meth:`IslandAlgorithm.shares_budget`)."""
        return any(a.shares_budget() for a in self.algorithms)

    def initial_evaluations(self) -> int:
        """Evaluations per island at initialisation, where every family's are equal.

        Raises:
            NotImplementedError: the families' counts differ (``stop.max_evaluations`` then says so)."""
        return self._uniform("initial_evaluations")

    def evaluations_per_generation(self) -> int:
        """Evaluations per island and generation, where every family's are equal (GA arrivals'
        re-evaluations aside, as :meth:`adopt` says).

        Raises:
            NotImplementedError: the families' counts differ."""
        return self._uniform("evaluations_per_generation")

    def batch_evaluations(self, state: State) -> int:
        """Evaluations of the batch's islands together (each family counts its own)."""
        return int(state["evals"])

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
        from isles.islands.control.checkpoint import regroup  # noqa: PLC0415  (the runtime's regroup)

        if [list(g) for g in old_groups] == [list(g) for g in new_groups]:
            return states
        fam = lambda ids, j: [i for i in ids if self.family_of(i) == j]  # noqa: E731
        parts = [{} for _ in new_groups]
        for j, a in enumerate(self.algorithms):
            old = [(st, fam(ids, j)) for st, ids in zip(states, old_groups) if fam(ids, j)]
            new = [(n, fam(ids, j)) for n, ids in enumerate(new_groups) if fam(ids, j)]
            moved = regroup(
                [self.part(st, j) for st, _ in old], [o for _, o in old], [i for _, i in new], a.island_axes
            )
            for (n, _), st in zip(new, moved):
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
        return "; ".join(f"{self.names[j]}: {self.algorithms[j].gpu_path(sub)}" for j, _, sub in self.parts(ctx))

    def init(self, ctx: Context) -> State:
        """Each part's ``init`` on its islands."""
        self.dtype = ctx.dtype
        return self.joined({j: self.algorithms[j].init(sub) for j, _, sub in self.parts(ctx)}, None, 0)

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
        parts = {j: self.algorithms[j].run(sub, self.part(state, j), n) for j, _, sub in self.parts(ctx)}
        return self.joined(parts, state, state["generation"] + n)

    def best(self, state: State) -> Population:
        """Each island's best ``(I, 1)`` as it travels (phenotype, ``f``, ``v``)."""
        bests = [
            common(self.algorithms[j].best(self.part(state, j)), self.algorithms[j], self.dtype)
            for j in self.present(state)
        ]
        return Population.concat(bests, axis=0)

    def phenotype(self, genome):
        """The identity: a mixed batch's individuals carry their phenotype."""
        return genome

    def emigrants_of(self, state: State, k: int, selection, context=None) -> PopulationRoles:
        """Each part's ``k`` emigrants (:func:`isles.islands.migration.moves.emigrants_of`) as they
        travel (:func:`common`), ``(I, k)``, under the role :data:`ROLE`; ``context``: the batch's
        :class:`~isles.islands.migration.contract.MigrationContext` (each part gets its islands'), or ``None``."""
        from isles.islands.migration.moves import emigrants_of  # noqa: PLC0415  (the runtime calls this)

        pops, at = [], 0
        for j in self.present(state):
            a, sub = self.algorithms[j], self.part(state, j)
            n = self._islands(j, sub)
            c = None if context is None else context.part(slice(at, at + n))
            pops.append(common(emigrants_of(a, sub, k, selection, c), a, self.dtype))
            at += n
        return PopulationRoles({ROLE: Population.concat(pops, axis=0)})

    def immigrate(
        self, ctx: Context, state: State, island_ids: list, emigrants, inbound: dict, remote: dict, policy, context=None
    ):
        """:func:`isles.islands.migration.moves.immigrate` for a mixed batch: one pool of every source's
        emigrants as they travel; for each part, the route of its islands
        (:func:`~isles.islands.migration.moves.route`), the family's arrival rule (:meth:`adopt`), the
        replacement policy (with the part's islands' ``context``, where given) and the family's
        ``replace``. Returns ``(state, events)``, the events over the batch's rows."""
        from isles.islands.migration.moves import replacement, route  # noqa: PLC0415

        xp, I = ctx.xp, len(island_ids)
        mine = only(emigrants)
        k = mine.shape[1]
        pool, offsets, counts, row = [mine], {}, {}, I * k
        for p, gid in enumerate(island_ids):
            offsets[gid], counts[gid] = p * k, k
        for rid in sorted(remote):
            r = only(remote[rid])
            r = Population(
                xp.asarray(r.genome, dtype=mine.genome.dtype),
                xp.asarray(r.f, dtype=mine.f.dtype),
                xp.asarray(r.v, dtype=mine.v.dtype),
                {},
            )
            offsets[rid], counts[rid] = row, r.shape[1]
            pool.append(r)
            row += r.shape[1]
        flat = Population.from_leaves(
            {
                name: xp.concatenate([p.leaves()[name].reshape((-1,) + p.leaves()[name].shape[2:]) for p in pool])
                for name in mine.leaves()
            }
        )
        parts, events, adopted = {j: self.part(state, j) for j in self.present(state)}, [], 0
        for j, where, sub in self.parts(ctx):
            a, off, n = self.algorithms[j], where.start, where.stop - where.start
            mine_in = {pos - off: srcs for pos, srcs in inbound.items() if off <= pos < where.stop}
            if not mine_in:
                continue
            residents = a.population(parts[j])
            rows, src_of, valid = route(
                mine_in, n, offsets, counts, residents.shape[1], rotate=int(state["generation"])
            )
            if not valid.any():
                continue
            rows_d = device_constant(xp, rows)
            st, imm = a.adopt(sub, parts[j], flat.map(lambda v: v[rows_d]), valid)
            adopted += int(valid.sum()) if getattr(a, "evaluates_arrivals", False) else 0
            c = None if context is None else context.part(where)
            idx, new, accepted, order = replacement(policy, a.population(st), imm, device_constant(xp, valid), c)
            parts[j] = a.replace_role(sub, st, None, idx, new)
            events.append(self._rows(xp, I, off, src_of, order, accepted, new.f))
        return self.joined(parts, state, state["generation"], adopted), events

    @staticmethod
    def _rows(xp, I: int, off: int, src_of, order, accepted, f):
        """A part's event ``(src_of, order, accepted, f)`` over the batch's ``I`` rows (the others
        padding: source ``PAD``, nothing accepted)."""
        from isles.islands.migration.moves import PAD  # noqa: PLC0415

        n, K = src_of.shape
        src = np.full((I, K), PAD, dtype=src_of.dtype)
        src[off : off + n] = src_of

        def padded(a, fill):
            out = xp.full((I, K), fill, dtype=a.dtype)
            out[off : off + n] = a
            return out

        return src, padded(order, 0), padded(accepted, False), padded(f, 0)
