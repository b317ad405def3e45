"""The fused trial population and selection of DE/rand/1/{bin,nec} for problems evaluated as array
code (:class:`DEVariation`, built by :func:`isles.algorithms.de.cuda.make_variation`)."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.cuda_lib import source
from isles.algorithms.core.plan import elementwise, module, require_supported
from isles.algorithms.de.cuda_source import _cr_args, variation_source, variation_unsupported_reason


class DEVariation:
    """The fused trial population of DE/rand/1/{bin,nec} for a problem evaluated as array code:
    one kernel (``de_variation``) that writes ``U`` bit-identical to
    :meth:`isles.algorithms.de.de.DE.trial`'s array code (same ``decide``/``trial_coord`` as the
    fused generation, module docstring). No host synchronisation; capturable.

    Args:
        params: :class:`isles.algorithms.de.de.DEParams`; ctx: a CuPy context.

    Raises:
        ValueError: :func:`variation_unsupported_reason` gives a reason.
    """

    def __init__(self, params, ctx):
        cp = require_supported("fused DE variation", variation_unsupported_reason(params, ctx))

        self.cp, self.I, self.N, self.D = cp, ctx.n_islands, params.pop_size, int(ctx.dim)
        self.dtype = np.dtype(ctx.dtype)
        src = variation_source(self.dtype, self.D, self.N, params.crossover, params.bound_handling)
        self._k = module(cp, src).get_function("de_variation")
        self._F = self.dtype.type(params.F)
        self._CR, self._log_cr, self._cr_case = _cr_args(params, self.dtype)
        self._keys = ctx.rng.keys
        self._ctr = ctx.rng.ctr
        self._lower = cp.ascontiguousarray(ctx.lower, dtype=self.dtype)
        self._upper = cp.ascontiguousarray(ctx.upper, dtype=self.dtype)
        self._select = _select_kernels(cp)

    def trial(self, X, generation: int):
        """Trial population ``U (I, N, D)`` of ``generation`` (host int; the draws use
        ``generation + rng.ctr`` as :class:`isles.algorithms.core.random.CounterRNG` does).

        Raises:
            ValueError: ``X`` is not ``(I, N, D)`` in the plan's dtype.
        """
        cp = self.cp
        if X.shape != (self.I, self.N, self.D) or X.dtype != self.dtype:
            raise ValueError(
                f"fused DE variation: X{X.shape} {X.dtype} is not ({self.I}, {self.N}, {self.D}) {self.dtype}"
            )
        X = cp.ascontiguousarray(X)
        U = cp.empty_like(X)
        total = self.I * self.N
        self._k(
            (-(-total // 4),),
            (128,),
            (
                X,
                U,
                self._keys,
                self._lower,
                self._upper,
                np.int64(generation),
                self._ctr,
                np.int32(total),
                self._F,
                self._CR,
                self._log_cr,
                self._cr_case,
            ),
        )
        return U

    def select(self, state, U, fu, vu, n_nan):
        """:func:`isles.algorithms.de.de.select` in two elementwise kernels (same rule, same new
        state); no host synchronisation."""
        cp = self.cp
        rows, fv = self._select
        X, f, v = state["X"], state["f"], state["v"]
        c = cp.ascontiguousarray
        s = dict(state)
        Xn = rows(c(X), c(U), c(f), c(v), c(fu), c(vu), np.int64(X.shape[-1]), size=X.size)
        fn, vn = fv(c(f), c(v), c(fu), c(vu), size=f.size)
        s["X"], s["f"], s["v"] = Xn.reshape(X.shape), fn.reshape(f.shape), vn.reshape(v.shape)
        s["generation"] = state["generation"] + 1
        s["evals"] = state["evals"] + X.shape[1]
        s["nan_evals"] = state["nan_evals"] + n_nan
        return s


def _select_kernels(cp):
    """Greedy one-to-one selection as two elementwise kernels (:func:`isles.algorithms.core.plan.elementwise`):
    ``isles_de_select_rows`` writes the next population ``(I, N, D)``, ``isles_de_select_fv`` its
    ``f, v``. The rule is Deb's (``deb.cuh``, :func:`isles.problems.constraints.better`: the trial
    wins unless the target is strictly better), as in :func:`isles.algorithms.de.de.select`."""
    keep = "ISLES_BETTER(f[r], v[r], fu[r], vu[r])"
    deb = source("deb.cuh")
    rows = elementwise(
        cp,
        "raw T X, raw T U, raw F f, raw F v, raw F fu, raw F vu, int64 D",
        "T out",
        f"const long long r = i / D; out = {keep} ? X[i] : U[i];",
        "isles_de_select_rows",
        deb,
    )
    fv = elementwise(
        cp,
        "raw F f, raw F v, raw F fu, raw F vu",
        "F fo, F vo",
        f"const long long r = i; const bool k = {keep}; fo = k ? f[r] : fu[r]; vo = k ? v[r] : vu[r];",
        "isles_de_select_fv",
        deb,
    )
    return rows, fv
