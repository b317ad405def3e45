"""Scalable unconstrained benchmark functions (``shared/problems.md`` section 5).

Each class is a :class:`isles.problems.base.ScalableProblem`: ``__init__(dim=..., lower=None,
upper=None)`` with the seed setting of ``default_bounds``/``dim`` below, ``n_constraints = 0`` and
``f_star`` set for the chosen ``dim``. ``objective(X)`` takes ``X`` of shape ``(..., D)`` (NumPy
or CuPy, any float dtype) and returns ``X.shape[:-1]`` in the same module and dtype (constants are
Python floats, so float32 stays float32; sums run over the last axis).

Fused objectives (``cuda_objective``, the contract of :class:`isles.problems.base.Problem`): Sphere,
Rastrigin, Ackley (its ``b`` baked in), Griewank, Rosenbrock (``OBJ_NEXT 1``, ``D`` baked in) and
Schwefel 2.26 give one; Schwefel 1.2 (prefix sums, not a fold of independent terms) gives
``None``. The sources compute the same formulas in ``T`` as ``objective`` does in ``X.dtype``.

Raises (from :class:`isles.problems.base.Problem`): ``ValueError`` when ``lower``/``upper`` do not have
1 or ``dim`` entries (field ``problem.lower``/``problem.upper``), ``lower > upper`` or ``dim < 1``.

Sources: the classic definitions (Yao & Liu's FEP set; Storn & Price 1997) as used by seeds
002-004. Seed errata fixed here (``shared/problems.md`` 7.3-7.5): Ackley uses b = 0.2, not seed
004's misprinted 0.02; Schwefel 2.26 uses ``sqrt(|x_i|)`` (seed 003's OCR lost the bars);
Rosenbrock and Ackley are non-separable, whatever seed 004's labels say.
"""

from __future__ import annotations

import math

from array_api_compat import array_namespace
from isles.problems.base import ScalableProblem

__all__ = ["Sphere", "Rastrigin", "Ackley", "Griewank", "Rosenbrock", "Schwefel226", "Schwefel12"]

_SUM1 = r"""
#define OBJ_NACC 1
#define OBJ_HAS_V 0
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; }
"""


def _sum_source(term: str, final: str = "acc[0]") -> str:
    """Fused source (contract of :class:`isles.problems.base.Problem`) of ``f = final(sum_j term(x_j))``:
    one sum accumulator, no ``x_next``. ``term`` is a C expression of ``x`` (and ``j``)."""
    return _SUM1 + (
        "ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {\n"
        f"    (void)x_next; (void)j;\n    acc[0] += {term};\n}}\n"
        f"ISLES_DEV T obj_final(const T* acc, int n) {{ (void)n; return {final}; }}\n"
    )


class Sphere(ScalableProblem):
    """Sphere / De Jong f1: ``f = sum_i x_i^2``; f* = 0 at x = 0; id ``sphere``.

    Default: D = 32, ``[-100, 100]`` (seed 003 f1). Separable.
    """

    name = "sphere"
    default_bounds = (-100.0, 100.0)

    def __init__(self, dim: int = 32, lower=None, upper=None):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        return (X * X).sum(axis=-1)

    @property
    def cuda_objective(self) -> str:
        """Fused source: one sum of ``x_j^2`` (:class:`isles.problems.base.Problem` contract)."""
        return _sum_source("x * x")


class Schwefel12(ScalableProblem):
    """Schwefel 1.2: ``f = sum_{i=1}^D (sum_{j<=i} x_j)^2``; f* = 0 at x = 0; id ``schwefel_1_2``.

    Default: D = 32, ``[-100, 100]`` (seed 003 f2). Non-separable.
    """

    name = "schwefel_1_2"
    default_bounds = (-100.0, 100.0)

    def __init__(self, dim: int = 32, lower=None, upper=None):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        xp = array_namespace(X)
        c = xp.cumsum(X, axis=-1)
        return (c * c).sum(axis=-1)


class Rosenbrock(ScalableProblem):
    """Rosenbrock: ``f = sum_{i=1}^{D-1} [100 (x_{i+1} - x_i^2)^2 + (x_i - 1)^2]``; id ``rosenbrock``.

    f* = 0 at x = (1, ..., 1). Default: D = 50, ``[-5.12, 5.12]`` (seed 004; seed 003 f3 uses
    D = 32, ``[-30, 30]``: pass ``lower``/``upper``). **Non-separable** (seed 004 labels it
    separable, ``shared/problems.md`` 7.5). Needs D >= 2 for a non-trivial sum (D = 1 gives 0).
    """

    name = "rosenbrock"
    default_bounds = (-5.12, 5.12)

    def __init__(self, dim: int = 50, lower=None, upper=None):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        a, b = X[..., :-1], X[..., 1:]
        return (100.0 * (b - a * a) ** 2 + (a - 1.0) ** 2).sum(axis=-1)

    @property
    def cuda_objective(self) -> str:
        """Fused source: ``OBJ_NEXT 1``; term ``j`` uses ``x_next = x_{j+1}`` and is skipped for
        ``j = D - 1`` (``D`` baked in as ``RSB_LAST``)."""
        return (
            "#define OBJ_NACC 1\n#define OBJ_HAS_V 0\n#define OBJ_NEXT 1\n"
            f"#define RSB_LAST {self.dim - 1}\n"
            + r"""ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; }
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {
    if (j < RSB_LAST) {
        const T p = x_next - x * x;
        const T q = x - (T)1;
        acc[0] += (T)100 * p * p + q * q;
    }
}
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0]; }
"""
        )


class Schwefel226(ScalableProblem):
    """Schwefel 2.26: ``f = -sum_i x_i sin(sqrt(|x_i|))``; id ``schwefel_2_26``.

    f* = -418.98288727243374 D at ``x_i = 420.9687463599821`` (not shifted to 0). Default:
    D = 32, ``[-500, 500]`` (seed 003 f4; its OCR lost the ``|.|``, ``shared/problems.md`` 7.4).
    """

    name = "schwefel_2_26"
    default_bounds = (-500.0, 500.0)
    F_STAR_PER_DIM = -418.98288727243374
    X_STAR_COORD = 420.9687463599821

    def __init__(self, dim: int = 32, lower=None, upper=None):
        super().__init__(dim, lower, upper, f_star=self.F_STAR_PER_DIM * int(dim))

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        xp = array_namespace(X)
        return -(X * xp.sin(xp.sqrt(xp.abs(X)))).sum(axis=-1)

    @property
    def cuda_objective(self) -> str:
        """Fused source: ``-sum_j x_j sin(sqrt(|x_j|))``."""
        return _sum_source("x * t_sin(t_sqrt(t_abs(x)))", final="-acc[0]")


class Rastrigin(ScalableProblem):
    """Rastrigin: ``f = sum_i [x_i^2 - 10 cos(2 pi x_i) + 10]``; f* = 0 at x = 0; id ``rastrigin``.

    Default: D = 32, ``[-5.12, 5.12]`` (seed 003 f5; seed 002 uses D = 2, ``[-1, 1]``). Separable.
    """

    name = "rastrigin"
    default_bounds = (-5.12, 5.12)

    def __init__(self, dim: int = 32, lower=None, upper=None):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        xp = array_namespace(X)
        return (X * X - 10.0 * xp.cos((2.0 * math.pi) * X) + 10.0).sum(axis=-1)

    @property
    def cuda_objective(self) -> str:
        """Fused source: ``sum_j [x_j^2 - 10 cos(2 pi x_j) + 10]``."""
        return _sum_source(f"x * x - (T)10 * t_cos((T){2.0 * math.pi!r} * x) + (T)10")


class Ackley(ScalableProblem):
    """Ackley: ``f = -20 exp(-0.2 sqrt(mean x_i^2)) - exp(mean cos(2 pi x_i)) + 20 + e``.

    id ``ackley``; f* = 0 at x = 0; a = 20, **b = 0.2**, c = 2 pi (seed 002's appendix code; seed
    004 misprints b = 0.02, ``shared/problems.md`` 7.5: at x = (1, ..., 1) f = 3.625 with b = 0.2
    against 0.396 with 0.02, for every D). Default: D = 1000, ``[-30, 30]`` (seed 004).
    Non-separable. In float32 f(0) is about -1e-6, not 0.

    Args:
        b: the exponent's factor; keep the standard 0.2. ``b=0.02`` gives seed 004's printed
            variant (a flatter landscape), for comparisons with its tables only.

    Raises:
        ValueError: ``b <= 0`` (field ``problem.b``).
    """

    name = "ackley"
    default_bounds = (-30.0, 30.0)
    A = 20.0

    def __init__(self, dim: int = 1000, lower=None, upper=None, b: float = 0.2):
        super().__init__(dim, lower, upper, f_star=0.0)
        if not b > 0:
            raise ValueError(f"problem.b={b}: allowed values are numbers > 0")
        self.B = float(b)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        xp = array_namespace(X)
        mean_sq = (X * X).mean(axis=-1)
        mean_cos = xp.cos((2.0 * math.pi) * X).mean(axis=-1)
        return -self.A * xp.exp(-self.B * xp.sqrt(mean_sq)) - xp.exp(mean_cos) + (self.A + math.e)

    @property
    def cuda_objective(self) -> str:
        """Fused source: two sums (``x_j^2``, ``cos(2 pi x_j)``); ``a``, ``b`` and ``a + e`` baked
        into ``obj_final``."""
        return (
            "#define OBJ_NACC 2\n#define OBJ_HAS_V 0\n#define OBJ_NEXT 0\n"
            + r"""ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; acc[1] += other[1]; }
"""
            + "ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {\n"
            "    (void)x_next; (void)j;\n"
            "    acc[0] += x * x;\n"
            f"    acc[1] += t_cos((T){2.0 * math.pi!r} * x);\n"
            "}\n"
            "ISLES_DEV T obj_final(const T* acc, int n) {\n"
            f"    return (T)({-self.A!r}) * t_exp((T)({-self.B!r}) * t_sqrt(acc[0] / (T)n))"
            f" - t_exp(acc[1] / (T)n) + (T){self.A + math.e!r};\n"
            "}\n"
        )


class Griewank(ScalableProblem):
    """Griewank: ``f = sum_i x_i^2/4000 - prod_{i=1}^D cos(x_i / sqrt(i)) + 1``; id ``griewank``.

    f* = 0 at x = 0. Default: D = 500, ``[-400, 400]`` (seed 004; ``[-600, 600]`` is more
    common). Non-separable.
    """

    name = "griewank"
    default_bounds = (-400.0, 400.0)

    def __init__(self, dim: int = 500, lower=None, upper=None):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        xp = array_namespace(X)
        sqrt_i = xp.sqrt(xp.arange(1, X.shape[-1] + 1, dtype=X.dtype))
        return (X * X).sum(axis=-1) / 4000.0 - xp.cos(X / sqrt_i).prod(axis=-1) + 1.0

    @property
    def cuda_objective(self) -> str:
        """Fused source: a sum (``x_j^2``) and a product (``cos(x_j / sqrt(j + 1))``)."""
        return r"""#define OBJ_NACC 2
#define OBJ_HAS_V 0
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)1; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; acc[1] *= other[1]; }
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {
    (void)x_next;
    acc[0] += x * x;
    acc[1] *= t_cos(x / t_sqrt((T)(j + 1)));
}
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0] / (T)4000 - acc[1] + (T)1; }
"""
