"""L-SHADE on a batch of islands: success-history adaptive DE with linear population size reduction.

Source: R. Tanabe and A. S. Fukunaga, "Improving the search performance of SHADE using linear
population size reduction", Proc. IEEE CEC 2014, pp. 1658-1665 (the CEC 2014 competition's
winner), built on SHADE (Tanabe & Fukunaga, CEC 2013) and JADE (Zhang & Sanderson, IEEE TEC 13(5),
2009). Equation numbers below are the L-SHADE paper's.

One L-SHADE generation ``G`` of every island (population ``N_G`` rows, ``X (I, N_G, D)``):

1. **Parameters** (Section II.C, eqs. 3-4): each individual ``i`` picks a memory slot ``r_i``
   uniform in ``1..H`` and draws ``CR_i = randn(M_CR[r_i], 0.1)`` clipped to ``[0, 1]`` (``0``
   where ``M_CR[r_i]`` is the terminal value ``⊥``, stored as ``-1``) and
   ``F_i = randc(M_F[r_i], 0.1)``, cut to 1 above and drawn again where ``<= 0``. The redraw is done
   exactly and in one draw by the inverse CDF of the Cauchy conditioned on ``F > 0``:
   ``F = M_F + 0.1 tan(pi (q - 1/2))`` with ``q = c0 + u (1 - c0)``, ``c0`` the Cauchy CDF at 0
   (rejection sampling until ``F > 0`` has exactly this distribution, and a fixed number of draws
   keeps the step free of host synchronisation).
2. **Mutation** current-to-pbest/1 with an archive (eq. 1, JADE): ``v_i = x_i + F_i (x_pbest - x_i)
   + F_i (x_r1 - x~_r2)``; ``x_pbest`` uniform among the ``max(round(p N_G), 2)`` best (Deb's rules),
   ``r1`` uniform in ``P \\ {i}``, ``x~_r2`` uniform in ``P ∪ A \\ {i, r1}`` (exact sampling without
   rejection: a uniform integer shifted past the excluded indices). A coordinate that leaves the
   box goes half-way back to the parent: ``(lower + x_ij) / 2`` or ``(upper + x_ij) / 2`` (JADE).
3. **Binomial crossover** (eq. 2) with ``CR_i`` and one coordinate ``j_rand`` always from ``v_i``.
4. **Selection** (eq. 5) under Deb's rules (:func:`isles.problems.constraints.better`): ``u_i``
   replaces ``x_i`` unless ``x_i`` is strictly better (``f(u) <= f(x)`` on unconstrained
   problems). Where ``u_i`` is strictly better, ``x_i`` goes to the archive ``A``, and ``F_i``,
   ``CR_i`` and the improvement ``Δf_i = |f(x_i) - f(u_i)|`` are recorded (``|v(x_i) - v(u_i)|`` where
   the violations differ; a non-finite improvement, e.g. from a NaN parent, weighs 0).
5. **Memory update** (Algorithm 1, eqs. 6-9): where the island had successes, slot ``k`` becomes
   the weighted Lehmer mean ``mean_WL(S) = Σ w S² / Σ w S`` with ``w = Δf / Σ Δf`` of ``S_F``
   (``M_F``) and of ``S_CR`` (``M_CR``; ``⊥`` where ``M_CR[k] = ⊥`` or ``max S_CR = 0``), and
   ``k`` advances cyclically. ``M_F = M_CR = 0.5`` at the start.
6. **Archive**: the archived parents join ``A``; whenever ``|A|`` exceeds ``round(r_arc N_{G+1})``,
   randomly chosen *older* members are deleted to make room for the new ones (the paper: "randomly
   selected individuals are deleted to make space for the newly inserted individuals"); only when
   the new ones alone exceed the bound is a random subset of them kept.
7. **Linear population size reduction** (LPSR, eq. 10): ``N_{G+1} = round((N_min - N_init) /
   MAX_NFE · NFE + N_init)``; where ``N_{G+1} < N_G`` the worst individuals (Deb's rules) are
   deleted.

Defaults (Section IV, the tuned L-SHADE of the paper): ``N_init = round(18 D)``, ``N_min = 4``,
``r_arc = 2.6``, ``p = 0.11``, ``H = 6``.

**Shapes and budget.** The state's arrays keep a fixed capacity ``N_init`` rows (``X (I, N_init,
D)``); the active individuals are the first ``state["n_active"]`` rows, a host int. It is the same
for every island, because the schedule (eq. 10) depends only on the evaluations, which every island
of a run performs equally; so no per-island mask is needed, and a generation computes on the
active prefix, whose length is known on the host without looking at device values: nothing in a
step synchronises with the host. The island runtime counts a fixed number of evaluations per
generation (:mod:`isles.islands.control.budget`), while an L-SHADE generation evaluates ``N_G`` trials, a
number that shrinks. So one runtime generation (:meth:`LSHADE.step`) evaluates exactly ``E =
evals_per_generation`` trial vectors per island (default ``N_init``): it continues the L-SHADE
generation in progress, finishing it and starting the next as often as needed; the trials of an
unfinished generation (``U``, ``F_i``, ``CR_i`` and the results so far) wait in the state, so a
checkpoint taken between runtime generations resumes bit for bit. Every L-SHADE generation is the
paper's; only the runtime's bookkeeping is in units of ``E`` evaluations. ``MAX_NFE = N_init +
max_generations · E`` is the island's budget: ``max_generations`` defaults to the run's
``${generations}``, which ``stop.max_evaluations`` sets (:func:`isles.islands.control.budget.with_budget`),
so the population reaches ``N_min`` at the run's last evaluation. The run's evaluations are
``islands.n (N_init + g E)`` after ``g`` generations, except where a budget ``B`` caps them:
``algorithm.max_evaluations`` (``${stop.max_evaluations}``) gives each of the ``islands.n`` islands
``ceil(B / islands.n)`` evaluations, the last runtime generation evaluates only what is left of
them (``E`` trials or fewer, across L-SHADE generations as always), and ``MAX_NFE`` is that share:
the budget is exact wherever ``islands.n`` divides it (else each island spends ``ceil(B /
islands.n)``: fewer than ``islands.n`` evaluations past ``B``).

**Migration** moves individuals (genome, ``f``, ``v``) into the active rows
(:meth:`LSHADE.population` is the active prefix); the archive, the memories and the pending trials
stay with their island. An immigrant that lands on a row whose trial is pending competes with that
trial when the generation ends.

**GPU.** The same array code runs on CuPy, with the same counter-based random numbers
(:mod:`isles.algorithms.core.random`). A runtime generation issues a variable number of L-SHADE
generations and evaluator calls decided by host counters, so it cannot be captured as a CUDA
graph (``graph_safe = False``); under a capture (``islands.span_graph``) :meth:`LSHADE.step` raises
so that the runtime goes on with plain epochs.
"""

from __future__ import annotations

import math

import numpy as np
from isles.algorithms.core.base import Context, IslandAlgorithm, State
from isles.algorithms.core.population import Population
from isles.algorithms.lshade.draws import (
    COL_CR1,
    COL_CR2,
    COL_F,
    COL_JRAND,
    COL_MEMORY,
    COL_PBEST,
    COL_R1,
    COL_R2,
    DRAW_ARCHIVE,
    DRAW_CROSS,
    DRAW_INDIVIDUAL,
    DRAW_INIT,
    N_COLS,
)
from isles.algorithms.lshade.operators import lehmer_mean, pbest_indices, rank, round_half_up, take_rows
from isles.algorithms.lshade.params import LSHADEParams, population_at
from isles.problems.constraints import argbest, better

#: the terminal value ``⊥`` of ``M_CR`` (Algorithm 1): ``CR_i = 0`` for a slot that holds it
TERMINAL = -1.0
#: the scale of the Cauchy (F) and normal (CR) distributions around the memories (eqs. 3-4)
SCALE = 0.1


class LSHADE(IslandAlgorithm):
    """L-SHADE (Tanabe & Fukunaga, CEC 2014) on ``I`` islands in lockstep (module docstring).

    State (dict; arrays island axis first):

    * ``X (I, N_init, D)``, ``f, v (I, N_init)``: the population at capacity; rows ``< n_active``
      are the active individuals;
    * ``A (I, |A|max, D)``, ``a_n (I,)`` int64: the archive and its fill per island;
    * ``M_F, M_CR (I, H)``, ``k (I,)`` int64: the success-history memories and the next slot
      (``M_CR = -1`` is the terminal value);
    * pending trials of the L-SHADE generation in progress: ``U (I, N_G, D)``, ``F, CR (I, N_G)``
      (``N_G = 0`` columns between generations), and the results so far ``fu, vu (I, cursor)``;
    * host ints: ``generation`` (runtime generations), ``evals`` (evaluations per island),
      ``lgen`` (L-SHADE generations), ``n_active`` (``N_G``), ``cursor`` (pending trials evaluated);
    * ``nan_evals``: 0-d device int64, NaN evaluations of the batch.
    """

    name = "lshade"
    Params = LSHADEParams

    def population_size(self) -> int:
        """``N_min``: the fewest individuals an island has (what ``islands.n_migrants`` must fit)."""
        return self.params.N_min

    def shares_budget(self) -> bool:
        """Whether ``algorithm.max_evaluations`` is set: each island stops at its share
        (:meth:`isles.algorithms.core.base.IslandAlgorithm.shares_budget`)."""
        return self.params.max_evaluations is not None

    def initial_evaluations(self) -> int:
        """``N_init``: the initial population, evaluated."""
        return self.params.n_init

    def evaluations_per_generation(self) -> int:
        """``E = evals_per_generation`` (default ``N_init``): exactly that many trials per runtime
        generation (module docstring)."""
        return self.params.E

    def check_problem(self, problem) -> None:
        """Refuse a bit problem and an ``algorithm.dim`` other than the problem's.

        Raises:
            ValueError: one line naming ``algorithm.dim`` or the problem.
        """
        if getattr(problem, "genome", "real") != "real":
            raise ValueError(
                f"problem {getattr(problem, 'name', problem)!r} is a bit problem: algorithm lshade needs a real box"
            )
        p = self.params
        if p.dim is not None and int(p.dim) != int(problem.dim):
            raise ValueError(f"algorithm.dim={p.dim}: allowed value is the problem's dimension {problem.dim}")

    # -- state ------------------------------------------------------------------------------------
    def init(self, ctx: Context) -> State:
        """Uniform population of ``N_init`` in the box, evaluated; empty archive; memories at
        ``M_F0``, ``M_CR0`` (L-SHADE: 0.5)."""
        p, xp, dt = self.params, ctx.xp, ctx.dtype
        n, I, D = p.n_init, ctx.n_islands, ctx.dim
        X = ctx.uniform_in_box(0, DRAW_INIT, n)
        f, v, n_nan = ctx.evaluator(X)
        return {
            "X": X,
            "f": f,
            "v": v,
            "A": xp.zeros((I, p.archive_capacity, D), dtype=dt),
            "a_n": xp.zeros((I,), dtype=np.int64),
            "M_F": xp.full((I, p.H), self.M_F0, dtype=dt),
            "M_CR": xp.full((I, p.H), self.M_CR0, dtype=dt),
            "k": xp.zeros((I,), dtype=np.int64),
            **self._no_pending(xp, X),
            "generation": 0,
            "evals": n,
            "lgen": 0,
            "n_active": n,
            "cursor": 0,
            "nan_evals": xp.asarray(n_nan, dtype=xp.int64),
        }

    @staticmethod
    def _no_pending(xp, X) -> dict:
        """Pending-trial arrays with no columns (between L-SHADE generations)."""
        I, D = X.shape[0], X.shape[2]
        empty = xp.zeros((I, 0), dtype=X.dtype)
        return {"U": xp.zeros((I, 0, D), dtype=X.dtype), "F": empty, "CR": empty, "fu": empty, "vu": empty}

    def population(self, state: State) -> Population:
        """The active individuals ``(I, n_active)`` (genome, ``f``, ``v``): what migration sees."""
        n = state["n_active"]
        return Population(state["X"][:, :n], state["f"][:, :n], state["v"][:, :n], {})

    def replace(self, ctx: Context, state: State, idx, immigrants: Population) -> State:
        """Write ``immigrants (I, k)`` at active rows ``idx (I, k)``; archive, memories and pending
        trials unchanged. Returns a new state."""
        xp, n = ctx.xp, state["n_active"]
        new = self.population(state).put(idx, immigrants)
        s = dict(state)
        for key, a in (("X", new.genome), ("f", new.f), ("v", new.v)):
            s[key] = xp.concatenate([a, state[key][:, n:]], axis=1)
        return s

    def best(self, state: State) -> Population:
        """Best individual of each island under Deb's rules, ``(I, 1)``, among the active
        population and the trials of the unfinished L-SHADE generation already evaluated (at the
        end of a run up to ``N_G - 1`` evaluated trials may not have met selection yet; the best
        point evaluated is reported all the same)."""
        pop = self.population(state)
        c = state["cursor"]
        if c > 0:
            pop = Population.concat([pop, Population(state["U"][:, :c], state["fu"], state["vu"], {})])
        return pop.take(argbest(pop.f, pop.v, axis=1)[:, None])

    def metrics(self, state: State) -> dict:
        """The adapted parameters per island, ``(I,)`` arrays on the state's device, which the runtime
        records every epoch in ``history.csv`` and MLflow (the mean over the islands as ``M_F``, ...,
        and ``island_XX_M_F``, ...): ``M_F`` and ``M_CR`` (means over the memory's ``H`` slots, the
        terminal value of ``M_CR`` counted as 0), ``pop_size`` (``N_G``, the active population) and
        ``archive`` (``|A|``). No host synchronisation."""
        a_n = state["a_n"]
        return {
            "M_F": state["M_F"].mean(axis=1),
            "M_CR": state["M_CR"].clip(0, None).mean(axis=1),
            "pop_size": a_n * 0 + state["n_active"],
            "archive": a_n,
        }

    def adapted_parameters(self, state: State) -> dict:
        """:meth:`metrics` as host arrays (synchronises: a host copy)."""
        return {k: v.get() if hasattr(v, "get") else v for k, v in self.metrics(state).items()}

    # -- one runtime generation -------------------------------------------------------------------
    def step(self, ctx: Context, state: State) -> State:
        """Exactly ``E`` trial evaluations per island (module docstring; the run's last generation
        only what is left of ``algorithm.max_evaluations``' share, :meth:`LSHADEParams.evaluations_left`):
        the L-SHADE generation in progress is continued, finished (selection, archive, memory,
        LPSR) and the next started as often as needed. No host synchronisation: the loop runs on host counters.

        Raises:
            RuntimeError: called while a CUDA graph is being captured (the step's work depends on
                host counters, so a replayed capture would be wrong).
        """
        xp = ctx.xp
        if xp is not np and xp.cuda.get_current_stream().is_capturing():
            raise RuntimeError("lshade: a generation depends on host counters and cannot be captured as a CUDA graph")
        E = self.params.evaluations_left(state["evals"])  # E, or what is left of the budget
        s, todo = dict(state), E
        while todo > 0:
            if s["cursor"] == 0:
                s = self._start_generation(ctx, s, state["evals"] + E - todo)
            c, n = s["cursor"], s["n_active"]
            k = min(todo, n - c)
            fu, vu, n_nan = ctx.evaluator(s["U"][:, c : c + k])
            s["fu"] = xp.concatenate([s["fu"], fu], axis=1)
            s["vu"] = xp.concatenate([s["vu"], vu], axis=1)
            s["nan_evals"] = s["nan_evals"] + n_nan
            s["cursor"], todo = c + k, todo - k
            if s["cursor"] == n:
                s = self._end_generation(ctx, s, state["evals"] + E - todo)
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + E
        return s

    def run(self, ctx: Context, state: State, n_generations: int) -> State:
        """``n_generations`` runtime generations; the whole L-SHADE generations in the epoch
        kernel where it applies (:mod:`isles.algorithms.lshade.epoch`, the same state): on CuPy
        the GPU kernel (``algorithm.epoch``), on NumPy its host build (``algorithm.host_kernel``,
        :func:`isles.algorithms.lshade.host_epoch.host_plan`); else :meth:`step` after :meth:`step` with
        the target tracked."""
        from isles.algorithms.lshade import epoch, host_epoch  # noqa: PLC0415  (an import cycle at module level)

        if ctx.xp is not np:
            out = epoch.run(self, ctx, state, int(n_generations))
        else:  # the kernel's host build where algorithm.host_kernel allows it (host_epoch.host_plan)
            host = host_epoch.host_plan(self, ctx)
            out = None if host is None else epoch.run(self, ctx, state, int(n_generations), kernel=host)
        if out is not None:
            return out
        return super().run(ctx, state, n_generations)

    def gpu_path(self, ctx: Context) -> str:
        """``"numpy"``, ``"host kernel"`` (NumPy with the kernel's host build), ``"epoch kernel"``
        or ``"array code"`` (:meth:`run`)."""
        from isles.algorithms.lshade import epoch, host_epoch  # noqa: PLC0415

        if ctx.xp is np:
            return "host kernel" if host_epoch.host_plan(self, ctx) is not None else "numpy"
        return "epoch kernel" if epoch.plan(self, ctx) is not None else "array code"

    # -- what jSO (JSO below) changes; L-SHADE's rules here -----------------------------------------
    M_F0 = M_CR0 = 0.5  # the memories' initial values

    def _slot_means(self, xp, mf, mcr, r):
        """``(M_F[r_i], M_CR[r_i])`` as drawn (L-SHADE: the memory's values)."""
        return mf, mcr

    def _repair(self, xp, F, CR, nfe: int):
        """``(F_i, CR_i)`` after the variant's repair (L-SHADE: none)."""
        return F, CR

    def _pbest_count(self, n: int, nfe: int) -> int:
        """Individuals ``pbest`` is drawn from: ``max(round(p N_G), 2)``."""
        return max(round_half_up(self.params.p * n), 2)

    def _pbest_not_self(self, nfe: int) -> bool:
        """Whether ``pbest`` must differ from ``i`` (L-SHADE: no)."""
        return False

    def _pbest_weight(self, nfe: int) -> float:
        """``F_w / F`` of the ``pbest`` term (L-SHADE: 1)."""
        return 1.0

    def _terminal(self, old_cr, max_cr):
        """Where ``M_CR[k]`` becomes ``⊥`` (Algorithm 1: it is ``⊥`` already, or ``max S_CR = 0``)."""
        return (old_cr < 0) | (max_cr == 0)

    def _memory_value(self, xp, new, old):
        """The memory slot's new value from the Lehmer mean ``new`` and the old value (L-SHADE: ``new``)."""
        return new

    def _start_generation(self, ctx: Context, s: State, nfe: int = 0) -> State:
        """Steps 1-3 of the module docstring: ``F_i``, ``CR_i`` and the trials ``U`` of the active
        population, stored as pending; ``nfe``: evaluations per island so far (jSO's schedules).
        Returns a new state dict (``s`` is not modified)."""
        s = dict(s)
        p, xp, rng, g = self.params, ctx.xp, ctx.rng, s["lgen"]
        n, dt = s["n_active"], ctx.dtype
        X, f, v = s["X"][:, :n], s["f"][:, :n], s["v"][:, :n]
        I, D = X.shape[0], X.shape[2]
        # 1. parameters from a random memory slot (eqs. 3-4); one block of uniforms (draws.py)
        u = rng.uniform(g, DRAW_INDIVIDUAL, (n, N_COLS), np.float64)
        r = xp.minimum((u[..., COL_MEMORY] * p.H).astype(np.int64), p.H - 1)
        rows = xp.arange(I)[:, None]
        mf, mcr = self._slot_means(xp, s["M_F"][rows, r], s["M_CR"][rows, r], r)
        z = xp.sqrt(-2.0 * xp.log1p(-u[..., COL_CR1])) * xp.cos((2.0 * math.pi) * u[..., COL_CR2])
        CR = xp.clip(mcr + SCALE * z.astype(dt), 0, 1)
        CR = xp.where(mcr < 0, 0, CR).astype(dt)
        c0 = 0.5 + xp.arctan(-mf / SCALE) / math.pi  # Cauchy CDF at 0: F conditioned on F > 0
        q = c0 + u[..., COL_F].astype(dt) * (1 - c0)
        F = mf + SCALE * xp.tan(math.pi * (q - 0.5))
        F = xp.minimum(xp.maximum(F, xp.finfo(dt).tiny), 1).astype(dt)
        F, CR = self._repair(xp, F, CR, nfe)
        # 2. current-to-pbest/1 with the archive (eq. 1)
        order = rank(xp, f, v)
        pnum = self._pbest_count(n, nfe)
        i = xp.arange(n, dtype=np.int64)
        pbest = pbest_indices(xp, order, u[..., COL_PBEST], pnum, self._pbest_not_self(nfe))
        c1 = xp.minimum((u[..., COL_R1] * (n - 1)).astype(np.int64), n - 2)
        r1 = c1 + (c1 >= i)
        m2 = (n - 2 + s["a_n"])[:, None]  # |P ∪ A| - 2 choices per island (device)
        c2 = xp.minimum((u[..., COL_R2] * m2.astype(np.float64)).astype(np.int64), m2 - 1)
        lo, hi = xp.minimum(i, r1), xp.maximum(i, r1)
        r2 = c2 + (c2 >= lo)
        r2 = r2 + (r2 >= hi)
        pool = xp.concatenate([X, s["A"]], axis=1)
        Fc = F[..., None]
        w = self._pbest_weight(nfe)
        Fw = Fc if w == 1.0 else Fc * w
        V = X + Fw * (X[rows, pbest] - X) + Fc * (X[rows, r1] - pool[rows, r2])
        lower, upper = ctx.lower, ctx.upper
        V = xp.where(lower > V, (lower + X) / 2, xp.where(upper < V, (upper + X) / 2, V))
        # 3. binomial crossover (eq. 2)
        jr = xp.minimum((u[..., COL_JRAND] * D).astype(np.int64), D - 1)
        mask = (rng.uniform(g, DRAW_CROSS, (n, D), dt) < CR[..., None]) | (xp.arange(D) == jr[..., None])
        s["U"] = xp.where(mask, V, X)
        s["F"], s["CR"] = F, CR
        return s

    def _end_generation(self, ctx: Context, s: State, nfe: int) -> State:
        """Steps 4-7 of the module docstring once all ``N_G`` trials are evaluated; ``nfe`` is the
        evaluations per island at that point (for LPSR, eq. 10). Returns a new state dict."""
        s = dict(s)
        p, xp, g = self.params, ctx.xp, s["lgen"]
        n, cap = s["n_active"], s["X"].shape[1]
        X, f, v = s["X"][:, :n], s["f"][:, :n], s["v"][:, :n]
        U, fu, vu, F, CR = s["U"], s["fu"], s["vu"], s["F"], s["CR"]
        acap = s["A"].shape[1]
        # 4. selection under Deb's rules; successes are strict improvements
        acc = ~better(f, v, fu, vu)
        succ = better(fu, vu, f, v)
        with np.errstate(invalid="ignore"):
            df = xp.where(v == vu, xp.abs(f - fu), xp.abs(v - vu))
        df = xp.where(succ & xp.isfinite(df), df, 0)
        # 5. memory update (Algorithm 1)
        new_f, ok_f = lehmer_mean(xp, F, df, succ)
        new_cr, ok_cr = lehmer_mean(xp, CR, df, succ)
        k = s["k"]
        slot = xp.arange(p.H) == k[:, None]
        old_cr = s["M_CR"][xp.arange(k.shape[0]), k]
        max_cr = xp.where(succ, CR, 0).max(axis=1)
        terminal = self._terminal(old_cr, max_cr)
        new_cr = xp.where(terminal, TERMINAL, new_cr)
        old_f = s["M_F"][xp.arange(k.shape[0]), k]
        new_f = self._memory_value(xp, new_f, old_f)
        new_cr = self._memory_value(xp, new_cr, old_cr)
        upd = ok_f  # some success with a finite improvement
        s["M_F"] = xp.where(slot & upd[:, None], new_f[:, None].astype(s["M_F"].dtype), s["M_F"])
        s["M_CR"] = xp.where(
            slot & (upd & (ok_cr | terminal))[:, None], new_cr[:, None].astype(s["M_CR"].dtype), s["M_CR"]
        )
        s["k"] = xp.where(upd, (k + 1) % p.H, k)
        # 7. the next population size (LPSR, eq. 10), needed by the archive's bound
        n_next = min(n, population_at(p, nfe))
        # 6. archive: new parents first (in random order), then the older members (random order)
        if acap > 0:
            u = ctx.rng.uniform(g, DRAW_ARCHIVE, (n + acap,))
            key_new = xp.where(succ, u[:, :n], 3.0)
            key_old = xp.where(xp.arange(acap) < s["a_n"][:, None], 1.0 + u[:, n:], 3.0)
            keep = xp.argsort(xp.concatenate([key_new, key_old], axis=1), axis=1, kind="stable")[:, :acap]
            s["A"] = take_rows(xp, xp.concatenate([X, s["A"]], axis=1), keep)
            bound = min(acap, round_half_up(p.r_arc * n_next))
            s["a_n"] = xp.minimum(s["a_n"] + succ.sum(axis=1), bound).astype(np.int64)
        X = xp.where(acc[..., None], U, X)
        f = xp.where(acc, fu, f)
        v = xp.where(acc, vu, v)
        if n_next < n:  # delete the worst
            keep = rank(xp, f, v)[:, :n_next]
            X, f, v = take_rows(xp, X, keep), take_rows(xp, f, keep), take_rows(xp, v, keep)
        for key, a in (("X", X), ("f", f), ("v", v)):
            s[key] = xp.concatenate([a, s[key][:, a.shape[1] : cap]], axis=1) if a.shape[1] < cap else a
        s.update(self._no_pending(xp, s["X"]))
        s["lgen"], s["cursor"], s["n_active"] = g + 1, 0, n_next
        return s
