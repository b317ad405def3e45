"""Min-max problems ``min_x max_y L(x, y)`` and the augmented Lagrangian (seed 000).

A **min-max problem** (:class:`MinMaxProblem`) declares two boxes, the x box (``dim``, ``lower``,
``upper``, as every :class:`isles.problems.base.Problem`) and the y box (``y_dim``, ``y_lower``,
``y_upper``), and evaluates the **payoff** of every pair at once::

    payoff(X (..., Nx, Dx), Y (..., Ny, Dy)) -> L (..., Nx, Ny),   L[..., i, j] = L(x_i, y_j)

as one array expression over ``array_api_compat`` (NumPy or CuPy; nothing is imported from
``algorithms/``). x minimises, y maximises; a saddle point ``(x*, y*)`` has
``L(x*, y) <= L(x*, y*) <= L(x, y*)``. A user's own min-max problem subclasses
:class:`MinMaxProblem` and plugs in with ``problem._target_=my_module.MyMinMax``.

Where the worst case ``F(x) = max_y L(x, y)`` is known in closed form a problem sets
``objective_known = True`` and returns it from ``objective`` (P1: ``sum x_i^2``); the
co-evolutionary DE then picks its result on ``F`` (and feasibility), not on the relative fitness
against the current opponents. Otherwise the result is the x of best fitness against the final
opponents.

The **augmented Lagrangian** (:class:`AugmentedLagrangian`) turns any constrained problem
(``f``, ``g <= 0``; a built-in one or a user's) into a min-max problem with y = the multipliers
``mu >= 0`` (seed 000 eqs. 6-7 after Tahk & Sun 2000). An equality ``h = 0`` (a problem's
``n_eq``) enters as the inequality ``|h| - eq_tol <= 0``
(:func:`isles.problems.constraints.as_inequalities`, the same as every violation), so eq. 6's
free-sign ``lambda`` and ``r h^2`` terms do not arise::

    L(x, mu) = f(x) + sum_i p_i,   p_i = mu_i g_i + r g_i^2   if g_i >= -mu_i / (2r)
                                         = -mu_i^2 / (4r)     otherwise

with ``g_i`` the constraint (as an inequality) normalised by its scale (``Problem.constraint_scale``). This is the
standard, continuous form (Rockafellar's ``(max(0, mu + 2 r g)^2 - mu^2) / (4r)``). Seed 000's
eq. 7 prints the switch at ``g >= +mu/(2r)``: a sign error that makes ``p`` jump by ``mu^2/r`` at
the switch (``shared/problems.md`` section 7.1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from array_api_compat import array_namespace
from isles.problems.base import Problem, box
from isles.problems.constraints import as_inequalities, equalities

__all__ = ["MinMaxProblem", "SaddleP1", "AugmentedLagrangian", "al_penalty", "check_payoff_shape"]


class MinMaxProblem(Problem):
    """Base class of min-max problems ``min_{x in X box} max_{y in Y box} L(x, y)``.

    Args:
        dim, lower, upper: the x box (``Dx``; as :class:`isles.problems.base.Problem`).
        y_dim, y_lower, y_upper: the y box (``Dy``), a number or ``Dy`` numbers each.
        f_star: the saddle value ``min_x max_y L``, or ``None``.

    Attributes:
        objective_known: ``True`` when ``objective(X)`` returns the worst case
            ``F(x) = max_y L(x, y)`` (and ``constraints`` the x constraints); default ``False``.
        pair_cuda: CUDA source of one pair's payoff from per-individual terms (the fused pair
            kernel's contract, :mod:`isles.algorithms.coevolution.cuda`), or ``None``.
        pair_terms_cuda: CUDA source of the **term contract**, or ``None`` (default): the terms of
            one row as device code, so that a kernel holding the rows computes them itself (the
            epoch kernel, :mod:`isles.algorithms.coevolution.epoch`). With ``pair_cuda`` before it
            and ``PAY_DX``, ``PAY_DY`` defined by the kernel, it defines
            ``ISLES_DEV void pay_terms_x(const T* x, T* tx)`` (``x[0..Dx)`` -> ``tx[0..PAY_KX)``, as
            ``pair_x``), ``ISLES_DEV void pay_terms_y(const T* y, T* ty)`` (as ``pair_y``),
            ``#define PAY_TRUE 0|1`` and, with ``PAY_TRUE 1`` (``objective_known``),
            ``ISLES_DEV void pay_true(const T* tx, T* f, T* v)``: the objective and the total
            normalised violation ``sum_i max(0, g_i/s_i)`` of the x row (NaN propagated; the
            kernel applies the Evaluator's NaN rule). Optionally ``#define PAY_TX_PARTS n`` with
            ``ISLES_DEV void pay_terms_x_part(const T* x, T* tx, int p)`` writing part ``p`` in
            ``[0, n)`` of the terms (``pay_terms_x`` = every part), so that the kernel spreads a
            row's parts over threads; ``PAY_TY_PARTS``/``pay_terms_y_part`` the same for y.

    Raises:
        ValueError: bad bounds (field ``problem.y_lower``/``problem.y_upper``/``problem.y_dim``).
    """

    name = "minmax"
    objective_known = False
    pair_cuda: str | None = None
    pair_terms_cuda: str | None = None

    def __init__(
        self,
        dim: int,
        lower,
        upper,
        y_dim: int,
        y_lower,
        y_upper,
        f_star: float | None = None,
        constraint_scale: Sequence[float] | None = None,
    ):
        super().__init__(dim, lower, upper, f_star, constraint_scale)
        self.y_dim, self.y_lower, self.y_upper = box("y_", y_dim, y_lower, y_upper)

    def payoff(self, X, Y):
        """``L (..., Nx, Ny)`` of ``X (..., Nx, Dx)`` against ``Y (..., Ny, Dy)`` (to override)."""
        raise NotImplementedError

    def x_terms(self, X):
        """What the payoff needs of ``X (..., Nx, Dx)``, computed once for a frozen x population
        (the y phase of a cycle); default ``X`` itself. Pair with :meth:`payoff_terms`."""
        return X

    def payoff_terms(self, terms, Y):
        """``L (..., Nx, Ny)`` from ``x_terms(X)`` and ``Y``; default ``payoff(terms, Y)``."""
        return self.payoff(terms, Y)

    def objective(self, X):
        """The worst case ``F(x) = max_y L(x, y)`` of shape ``X.shape[:-1]`` where known.

        Raises:
            NotImplementedError: ``objective_known`` is False.
        """
        raise NotImplementedError(f"{self.name}: the worst case max_y L(x, y) is not known in closed form")

    def describe(self) -> dict:
        """:meth:`Problem.describe` plus the y box."""
        d = super().describe()
        d.update({"y_dim": self.y_dim, "y_lower": self.y_lower.tolist(), "y_upper": self.y_upper.tolist()})
        return d


def check_payoff_shape(problem, X, Y, L) -> None:
    """Raise a one-line error when ``L`` is not ``X.shape[:-1] + (Ny,)``.

    Args:
        X: ``(..., Nx, Dx)``; Y: ``(..., Ny, Dy)``; L: what ``problem.payoff(X, Y)`` returned.

    Raises:
        ValueError: ``problem.payoff returned shape (..) for X (..) and Y (..): expected (..)``.
    """
    want = tuple(X.shape[:-1]) + (Y.shape[-2],)
    got = tuple(getattr(L, "shape", ()))
    if got != want:
        raise ValueError(
            f"problem.payoff of {type(problem).__name__} returned shape {got} for X {tuple(X.shape)} "
            f"and Y {tuple(Y.shape)}: expected {want} (X.shape[:-1] + (Ny,))"
        )


class SaddleP1(MinMaxProblem):
    """Seed 000 P1 (eq. 13; ``shared/problems.md`` 2.1; id ``p1_minmax``)::

        min_{x in [-1,1]^n} max_{y in [-1,1]^n} L(x, y) = sum_i (x_i^2 - y_i^2)

    Saddle point ``x* = y* = 0``, saddle value 0 (closed bounds; the seed prints open ones). The
    inner maximum is at ``y = 0``, so ``F(x) = sum x_i^2`` (``objective_known``).

    Args:
        dim: ``n`` (100 in the seed), for x and y alike.
    """

    name = "p1_minmax"
    objective_known = True

    def __init__(self, dim: int = 100):
        super().__init__(dim, -1.0, 1.0, dim, -1.0, 1.0, f_star=0.0)

    def payoff(self, X, Y):
        """``L (..., Nx, Ny) = sum x^2 [.., :, None] - sum y^2 [.., None, :]``."""
        return (X * X).sum(axis=-1)[..., :, None] - (Y * Y).sum(axis=-1)[..., None, :]

    def objective(self, X):
        """``F(x) = sum x_i^2`` of shape ``X.shape[:-1]``."""
        return (X * X).sum(axis=-1)

    # pair contract of the fused CDE kernel (algorithms/coevolution/cuda.py)
    pair_cuda = (
        "#define PAY_KX 1\n#define PAY_KY 1\n"
        "ISLES_DEV T pay_pair(const T* tx, const T* ty) { return sub_rn(tx[0], ty[0]); }\n"
    )

    #: the term contract (:attr:`MinMaxProblem.pair_terms_cuda`): ``sum x^2``, ``sum y^2`` in NumPy's
    #: pairwise order (``npsum.cuh`` of the CUDA library: the NumPy twin's sums bit for bit)
    pair_terms_cuda = (
        '#include "npsum.cuh"\n'
        "#define PAY_TRUE 1\n"
        "ISLES_DEV void pay_terms_x(const T* x, T* tx) { tx[0] = isles_np_sumsq(x, PAY_DX); }\n"
        "ISLES_DEV void pay_terms_y(const T* y, T* ty) { ty[0] = isles_np_sumsq(y, PAY_DY); }\n"
        "ISLES_DEV void pay_true(const T* tx, T* f, T* v) { *f = tx[0]; *v = (T)0; }\n"
    )

    def pair_x(self, X):
        """Per-x terms ``(..., Nx, 1)``: ``sum x^2``."""
        return (X * X).sum(axis=-1)[..., None]

    def pair_y(self, Y):
        """Per-y terms ``(..., Ny, 1)``: ``sum y^2``."""
        return (Y * Y).sum(axis=-1)[..., None]


def al_penalty(g, mu, r: float):
    """Augmented-Lagrangian term of inequality constraints, the standard continuous form.

    ``p = mu g + r g^2`` where ``g >= -mu/(2r)``, else ``-mu^2/(4r)`` (seed 000 eq. 7 with its sign
    error corrected, ``shared/problems.md`` 7.1). Both branches equal ``-mu^2/(4r)`` at the switch
    ``g = -mu/(2r)``, and so do their slopes (0), so ``p`` is C1 in ``g``.

    Args:
        g: normalised constraint values, any shape; mu: multipliers ``>= 0`` broadcastable with ``g``.
        r: penalty factor ``> 0`` (a host float).

    Returns:
        ``p`` of the broadcast shape (same array module and dtype).
    """
    xp = array_namespace(g, mu)
    active = g >= -mu / (2.0 * r)
    return xp.where(active, mu * g + r * g * g, -(mu * mu) / (4.0 * r))


class AugmentedLagrangian(MinMaxProblem):
    """A constrained problem as the min-max problem of its augmented Lagrangian (seed 000 eq. 6).

    x is the problem's variable vector (same box), y the multipliers ``mu in [0, mu_max]^m`` of
    the ``m`` constraints (an equality as ``|h| - eq_tol <= 0``).
    ``payoff(X, MU) = f(x) + sum_i p(g_i(x)/scale_i, mu_i)`` (:func:`al_penalty`). ``objective``/``constraints`` are the wrapped problem's, so that
    results, feasibility and Deb's rules use the real objective (``objective_known``).

    Args:
        problem: any constrained :class:`isles.problems.base.Problem` with ``m >= 1`` (a built-in or a
            user's problem).
        r: penalty factor ``> 0`` (seed 000 Table 1: 1e7).
        multiplier_bound: ``mu_max > 0``, the upper end of the multiplier box. The default 1e4
            covers the multipliers of the normalised constraints of P2-P6 (the largest, g10's
            g1..g3, are a few thousand in units of f).

    Raises:
        ValueError: ``r <= 0`` (field ``constraints.r``), ``multiplier_bound <= 0`` (field
            ``constraints.multiplier_bound``) or a problem without constraints.
    """

    objective_known = True

    def __init__(self, problem, r: float = 1e7, multiplier_bound: float = 1e4):
        _positive("constraints.r", r)
        _positive("constraints.multiplier_bound", multiplier_bound)
        m = int(problem.n_constraints)
        if m < 1:
            raise ValueError(
                f"constraints.handling=augmented_lagrangian: problem {getattr(problem, 'name', problem)!r} "
                "has no constraints; allowed values for it are feasibility|penalty"
            )
        self.base = problem
        self.name = f"{getattr(problem, 'name', type(problem).__name__)}"
        self.n_constraints = m
        self.n_eq = equalities(problem)[0]
        self.r = float(r)
        self.multiplier_bound = float(multiplier_bound)
        self._scales: dict = {}
        super().__init__(
            problem.dim,
            problem.lower,
            problem.upper,
            m,
            0.0,
            float(multiplier_bound),
            f_star=getattr(problem, "f_star", None),
            constraint_scale=getattr(problem, "constraint_scale", None),
        )

    @property
    def eq_tol(self) -> float:
        """The wrapped problem's equality tolerance (``constraints.eq_tol``)."""
        return equalities(self.base)[1]

    @eq_tol.setter
    def eq_tol(self, value: float) -> None:
        self.base.eq_tol = float(value)

    def objective(self, X):
        """The wrapped problem's ``f`` of shape ``X.shape[:-1]``."""
        return self.base.objective(X)

    def constraints(self, X):
        """The wrapped problem's ``g`` of shape ``X.shape[:-1] + (m,)``."""
        return self.base.constraints(X)

    def payoff(self, X, Y):
        """``L (..., Nx, Ny)`` for ``X (..., Nx, D)`` and multipliers ``Y (..., Ny, m)``."""
        return self.payoff_terms(self.x_terms(X), Y)

    def x_terms(self, X):
        """``(f (..., Nx), g / scale (..., Nx, m))`` of ``X (..., Nx, D)``, in ``X``'s dtype, the
        equalities as ``|h| - eq_tol`` (:func:`isles.problems.constraints.as_inequalities`)."""
        xp = array_namespace(X)
        f, g = self.base.evaluate(X)
        f = xp.asarray(f, dtype=X.dtype)
        key = (xp.__name__, str(X.dtype))
        if key not in self._scales:  # device copy made once (no host-to-device copy in a CUDA graph)
            self._scales[key] = xp.asarray(self.constraint_scale, dtype=X.dtype)
        g = as_inequalities(xp.asarray(g, dtype=X.dtype), self.n_eq, self.eq_tol) / self._scales[key]
        return f, g

    @staticmethod
    def true_of_terms(terms):
        """The Evaluator's ``(f, v)`` (:class:`isles.problems.constraints.Evaluator`) from
        :meth:`x_terms`' ``(f, g / scale)``, without evaluating the problem again: NaN ``f`` as
        ``+inf``, ``v = sum_i max(0, g_i / scale_i)`` (``inf`` where NaN), the same operations."""
        from isles.problems.constraints import total_violation  # noqa: PLC0415

        f, g = terms
        xp = array_namespace(f)
        return xp.where(xp.isnan(f), xp.inf, f), total_violation(g)

    @property
    def pair_cuda(self) -> str:
        """CUDA source of one pair's payoff (the fused CDE kernel's contract,
        :mod:`isles.algorithms.coevolution.cuda`): ``tx = (f, g_i/s_i, r g_i/s_i)``, ``ty = (mu_i,
        -mu_i/(2r), -mu_i^2/(4r))`` (:meth:`pair_x`, :meth:`pair_y`: the divisions once per
        individual, not per pair); the same separately rounded operations as :func:`al_penalty`,
        penalties summed left to right."""
        m = self.n_constraints
        return (
            f"#define PAY_KX {1 + 2 * m}\n#define PAY_KY {3 * m}\n#define AL_M {m}\n"
            f"#define AL_R ((T){self.r!r})\n#define AL_2R ((T)(2.0 * {self.r!r}))\n"
            f"#define AL_4R ((T)(4.0 * {self.r!r}))\n"
            + r"""
ISLES_DEV T pay_pair(const T* tx, const T* ty) {
    T s = (T)0;
    for (int i = 0; i < AL_M; ++i) {
        const T g = tx[1 + i];
        const T p = (g >= ty[AL_M + i]) ? add_rn(mul_rn(ty[i], g), mul_rn(tx[1 + AL_M + i], g)) : ty[2 * AL_M + i];
        s = (i == 0) ? p : add_rn(s, p);
    }
    return add_rn(tx[0], s);
}
"""
        )

    @property
    def pair_terms_cuda(self) -> str | None:
        """The term contract (:attr:`MinMaxProblem.pair_terms_cuda`) from the wrapped problem's
        per-row code (``cuda_row``, :class:`isles.problems.base.Problem`): :meth:`pair_x`'s and
        :meth:`pair_y`'s terms (scales and ``r`` baked in) and the true ``(f, v)``; ``None`` when
        the wrapped problem has no ``cuda_row`` (a user's problem: the CDE runs its graph path).
        The last ``n_eq`` values of ``row_constraint`` are equalities ``h``, turned into
        ``|h| - eq_tol`` here (``AL_NEQ``, ``AL_EQ_TOL`` baked in), as :meth:`x_terms` does."""
        row = getattr(self.base, "cuda_row", None)
        if row is None:
            return None
        scales = ", ".join(f"(T){float(c)!r}" for c in np.asarray(self.constraint_scale, dtype=np.float64))
        return (
            row
            + f"""
#if ROW_M != AL_M
#error "cuda_row: ROW_M differs from n_constraints"
#endif
#define AL_NEQ {self.n_eq}
#define AL_EQ_TOL ((T){self.eq_tol!r})
#define PAY_TX_PARTS (1 + AL_M)
ISLES_DEV void pay_terms_x_part(const T* x, T* tx, int part) {{
    const T sc[AL_M] = {{{scales}}};
    if (part == 0) {{
        tx[0] = row_objective(x);
    }} else {{
        T raw = row_constraint(x, part - 1);
        if (part - 1 >= AL_M - AL_NEQ) raw = sub_rn(t_abs(raw), AL_EQ_TOL);  /* an equality: |h| - eq_tol */
        const T g = div_rn(raw, sc[part - 1]);
        tx[part] = g;
        tx[AL_M + part] = mul_rn(AL_R, g);
    }}
}}
ISLES_DEV void pay_terms_x(const T* x, T* tx) {{
    for (int p = 0; p < PAY_TX_PARTS; ++p) pay_terms_x_part(x, tx, p);
}}
#define PAY_TY_PARTS AL_M
ISLES_DEV void pay_terms_y_part(const T* y, T* ty, int i) {{
    const T mu = y[i];
    ty[i] = mu;
    ty[AL_M + i] = div_rn(-mu, AL_2R);
    ty[2 * AL_M + i] = div_rn(-mul_rn(mu, mu), AL_4R);
}}
ISLES_DEV void pay_terms_y(const T* y, T* ty) {{
    for (int i = 0; i < AL_M; ++i) pay_terms_y_part(y, ty, i);
}}
#define PAY_TRUE 1
ISLES_DEV void pay_true(const T* tx, T* f, T* v) {{
    T s = (T)0;
    for (int i = 0; i < AL_M; ++i) {{
        const T g = tx[1 + i];
        const T p = (g != g) ? g : (g > (T)0 ? g : (T)0);
        s = (i == 0) ? p : add_rn(s, p);
    }}
    *f = tx[0];
    *v = s;
}}
"""
        )

    def pair_x(self, X):
        """Per-x terms ``(..., Nx, 1 + 2m)``: ``(f, g_1/s_1, .., g_m/s_m, r g_1/s_1, .., r g_m/s_m)``."""
        xp = array_namespace(X)
        f, g = self.x_terms(X)
        m = g.shape[-1]
        out = xp.empty(g.shape[:-1] + (1 + 2 * m,), dtype=g.dtype)  # no xp.concatenate: its pointer
        out[..., 0] = f  # table is a host copy (not in a
        out[..., 1 : 1 + m] = g  # CUDA graph)
        out[..., 1 + m :] = self.r * g
        return out

    def pair_y(self, Y):
        """Per-y terms ``(..., Ny, 3m)``: ``(mu, -mu/(2r), -mu^2/(4r))``, as :func:`al_penalty` computes them."""
        xp = array_namespace(Y)
        m = Y.shape[-1]
        out = xp.empty(Y.shape[:-1] + (3 * m,), dtype=Y.dtype)
        out[..., :m] = Y
        out[..., m : 2 * m] = -Y / (2.0 * self.r)
        out[..., 2 * m :] = -(Y * Y) / (4.0 * self.r)
        return out

    def payoff_terms(self, terms, Y):
        """``L (..., Nx, Ny) = f + sum_i p(g_i, mu_i)`` from ``terms = x_terms(X)`` and ``Y``."""
        f, g = terms
        p = al_penalty(g[..., :, None, :], Y[..., None, :, :], self.r)  # (..., Nx, Ny, m)
        return f[..., :, None] + p.sum(axis=-1)


def _positive(field: str, value) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not np.isfinite(float(value)) or not float(value) > 0:
        raise ValueError(f"{field}={value!r}: allowed values are numbers > 0")
    return float(value)
