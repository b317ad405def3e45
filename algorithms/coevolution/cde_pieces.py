"""The pieces of CDE's cycle (:class:`CDEPieces`, a base class of
:class:`isles.algorithms.coevolution.cde.CDE`; that module's docstring describes the algorithm)."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.base import Context, State
from isles.problems.constraints import argbest, better
from isles.problems.minmax import check_payoff_shape


class _Side:
    """What a DE generation of one population needs: ``xp``, ``rng`` and its box ``lower, upper
    (D,)`` (the subset of :class:`isles.algorithms.core.base.Context` that :meth:`DE.trial` reads)."""

    def __init__(self, ctx: Context, lower, upper):
        self.xp, self.rng, self.dtype = ctx.xp, ctx.rng, ctx.dtype
        self.lower = ctx.xp.asarray(lower, dtype=ctx.dtype)
        self.upper = ctx.xp.asarray(upper, dtype=ctx.dtype)


class CDEPieces:
    """The pieces a CDE cycle is made of, a base class of :class:`isles.algorithms.coevolution.cde.CDE`
    (which holds the cycle and the island interface): the min-max problem of a context, the two
    populations' sides, the fused pair kernel and the epoch kernel (built and cached per context,
    never pickled), the pair fitness, the x rows' true objective and the result archive. Reads
    ``self.params`` (:class:`isles.algorithms.coevolution.cde.CDEParams`)."""

    # -- pieces ----------------------------------------------------------------------------------
    @staticmethod
    def problem_of(ctx: Context):
        """The min-max problem of ``ctx``.

        Raises:
            ValueError: the problem has no ``payoff`` (one line, naming the fix).
        """
        p = ctx.evaluator.problem
        if not hasattr(p, "payoff") or not hasattr(p, "y_dim"):
            raise ValueError(
                f"algorithm=cde needs a min-max problem: problem {getattr(p, 'name', p)!r} has no payoff; "
                "for a constrained problem set constraints.handling=augmented_lagrangian"
            )
        return p

    def _sides(self, ctx: Context) -> dict:
        hit = getattr(self, "_side_cache", None)
        if hit is not None and hit[0] is ctx:
            return hit[1]
        p = self.problem_of(ctx)
        sides = {"x": _Side(ctx, p.lower, p.upper), "y": _Side(ctx, p.y_lower, p.y_upper)}
        self._side_cache = (ctx, sides)
        return sides

    def fused_pairs(self, ctx: Context, X=None, Y=None):
        """The fused pair kernel for ``ctx`` (:class:`isles.algorithms.coevolution.cuda.FusedPairs`), or
        ``None`` (NumPy, ``fused=False``, no pair contract, or a failed self-check). Built, and
        checked against the generic path on ``X, Y`` (a one-off synchronisation), at the first
        call with populations: :meth:`init`, or the warm-up before a CUDA-graph capture."""
        if ctx.xp is np or not self.params.fused:
            return None
        hit = getattr(self, "_fused_cache", None)
        if hit is not None and hit[0] is ctx:
            return hit[1]
        if X is None:
            return None
        from isles.algorithms.coevolution import cuda as cde_cuda  # noqa: PLC0415  (imports CuPy lazily)

        plan = cde_cuda.make_fused(
            ctx.xp, self.problem_of(ctx), ctx.dtype, X, Y, lambda a, b, r: self.pair_fitness(ctx, a, b, r, generic=True)
        )
        self._fused_cache = (ctx, plan)
        return plan

    def epoch_plan(self, ctx: Context):
        """The epoch kernel for ``ctx`` (:class:`isles.algorithms.coevolution.epoch.EpochCDE`), or ``None``
        (NumPy, ``epoch=False``, an unsupported configuration or problem, or a failed self-check).
        Built and checked at the first call (a one-off synchronisation: :meth:`init`, or the
        warm-up before a CUDA-graph capture), then cached per context."""
        if ctx.xp is np or not self.params.epoch:
            return None
        hit = getattr(self, "_epoch_cache", None)
        if hit is not None and hit[0] is ctx:
            return hit[1]
        from isles.algorithms.coevolution import epoch  # noqa: PLC0415  (imports CuPy lazily)

        plan = epoch.make_epoch(self, ctx)
        self._epoch_cache = (ctx, plan)
        return plan

    def gpu_path(self, ctx: Context) -> str:
        """Which path runs a cycle on ``ctx``: ``"numpy"`` or ``"host kernel"`` (NumPy, :meth:`host_plan`), ``"epoch kernel (shared memory)"`` /
        ``"(global memory)"`` (one launch per cycle), or ``"graph"`` (a cycle of array code replayed
        as one CUDA graph; ``"graph, fused pairs"`` with ``fused=True``)."""
        if ctx.xp is np:
            return "numpy" if self.host_plan(ctx) is None else "host kernel"
        plan = self.epoch_plan(ctx)
        if plan is not None:
            return plan.path()
        return "graph, fused pairs" if getattr(self, "_fused_cache", (None, None))[1] is not None else "graph"

    def __getstate__(self):
        d = dict(self.__dict__)
        d.pop("_fused_cache", None)  # compiled kernels and contexts do not travel (Ray actors)
        d.pop("_epoch_cache", None)
        d.pop("_side_cache", None)
        return d

    def pair_fitness(self, ctx: Context, X, Y, role: str, terms=None, generic: bool = False):
        """Fitness of population ``role`` against the other, from the pair payoffs.

        Args:
            X: ``(I, Nx, Dx)``; Y: ``(I, Ny, Dy)``.
            role: ``"x"``: ``max_j L[:, i, j]`` (I, Nx), seed eq. 11; ``"y"``: ``-min_i L[:, i, j]``
                (I, Ny), the negated fitness of the maximising player.
            terms: ``problem.x_terms(X)`` (generic path) or ``problem.pair_x(X)`` (fused path) when
                already computed for a frozen P1, else ``None``.
            generic: force the array path (the fused kernel's self-check).

        Returns:
            ``(fitness, n_nan)``: NaN payoffs give ``+inf`` (the worst) and are counted (0-d int).

        Raises:
            ValueError: the problem's payoff has the wrong shape.
        """
        xp = ctx.xp
        p = self.problem_of(ctx)
        fused = None if generic else self.fused_pairs(ctx, X, Y)
        if fused is not None:
            return fused(X, Y, role, terms)
        L = p.payoff(X, Y) if terms is None else p.payoff_terms(terms, Y)
        check_payoff_shape(p, X, Y, L)
        L = xp.asarray(L, dtype=ctx.dtype)
        fit = L.max(axis=-1) if role == "x" else -L.min(axis=-2)
        nan = xp.isnan(fit)
        return xp.where(nan, xp.inf, fit), nan.sum()

    def _true(self, ctx: Context, X, terms=None):
        """Objective and violation ``(f, v) (I, N)`` of x rows for the result, or ``None``; from
        ``terms`` (``x_terms(X)``) where the problem derives them (:meth:`_x_terms`), without a
        second evaluation."""
        p = self.problem_of(ctx)
        if not getattr(p, "objective_known", False):
            return None
        if terms is not None and hasattr(p, "true_of_terms"):
            return p.true_of_terms(terms)
        f, v, _ = ctx.evaluator(X, ctx.dtype)
        return f, v

    def _x_terms(self, ctx: Context, X):
        """``problem.x_terms(X)`` on the array path (the objective and constraints of every row of
        ``X``, once), or ``None`` where the fused pair kernel computes its own terms (CuPy,
        ``fused=True``) or the problem has no ``x_terms``."""
        p = self.problem_of(ctx)
        if getattr(self, "_fused_cache", (None, None))[1] is not None or not hasattr(p, "x_terms"):
            return None
        return p.x_terms(X)

    @staticmethod
    def _keep_terms(xp, terms, new, acc):
        """The x terms after a selection: ``new``'s rows where ``acc (I, N)``, else ``terms``'s
        (arrays ``(I, N, ...)`` or a tuple of them)."""
        if terms is None or new is None:
            return None
        if isinstance(terms, tuple):
            return tuple(CDEPieces._keep_terms(xp, a, b, acc) for a, b in zip(terms, new, strict=False))
        return xp.where(acc.reshape(acc.shape + (1,) * (terms.ndim - 2)), new, terms)

    @staticmethod
    def _archive(xp, state: State, X, fv) -> State:
        """Keep each island's best of ``state``'s archive and the rows ``X (I, N, D)`` with
        ``fv = (f, v)`` under Deb's rules."""
        if fv is None:
            return state
        f, v = fv
        i = argbest(f, v, axis=1)[:, None]
        cx = xp.take_along_axis(X, i[..., None], axis=1)
        cf, cv = xp.take_along_axis(f, i, axis=1), xp.take_along_axis(v, i, axis=1)
        s = dict(state)
        if "bx" not in state:
            s["bx"], s["bf"], s["bv"] = cx, cf, cv
            return s
        take = better(cf, cv, state["bf"], state["bv"])
        s["bx"] = xp.where(take[..., None], cx, state["bx"])
        s["bf"] = xp.where(take, cf, state["bf"])
        s["bv"] = xp.where(take, cv, state["bv"])
        return s
