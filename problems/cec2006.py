"""CEC2006 constrained problems g01, g07, g09, g10 (seed 000's P2-P5).

Every class implements the formulation of ``shared/problems.md`` section 3 (Liang et al. 2006,
the CEC2006 technical report, as in Runarsson's ``fcnsuite.c``), with f*, x*, bounds and constraint
scales from ``shared/reference/problems.json``, **not** the seed's misprints (``shared/problems.md``
section 7.1): seed 000 prints P2's g7 with ``3x2``, garbles P3's g4/g5/g7, drops the minus signs of
P4's x3 and x5, prints P5's g4 and g6 wrongly and quotes the older HS106 value 7049.330923 for
P5 (CEC2006 f* = 7049.24802052867). The seed also renumbers the constraints; isles uses the CEC
order.

Shapes: ``X`` is ``(..., D)`` (NumPy or CuPy, any float dtype); ``objective`` returns
``X.shape[:-1]``, ``constraints`` returns ``X.shape[:-1] + (m,)`` with ``g <= 0`` feasible.
Constants are Python floats so float32 input stays float32. These are ordinary constrained
problems: every algorithm runs them (Deb's rules or the static penalty); the co-evolutionary DE
runs them through the augmented Lagrangian (:class:`isles.problems.minmax.AugmentedLagrangian`).
"""

from __future__ import annotations

from array_api_compat import array_namespace
from isles.problems.base import Problem

__all__ = ["G01", "G07", "G09", "G10"]


def _columns(xp, cols):
    """``g (..., m)`` from ``m`` arrays of shape ``(...)``, written column by column into one
    allocation: one copy kernel per column, captured in a CUDA graph for any ``m``. CuPy's
    ``xp.stack`` does the same for up to 8 arrays (the README's example stacks 4), but joins more
    than 8 small arrays with one kernel that reads a table of their addresses copied from the host
    (``_concatenate_single_kernel``), which a capture must not contain (docs/user_problems.md;
    ``tests/test_user_problem_gpu.py`` checks both cases on a GPU)."""
    out = xp.empty(cols[0].shape + (len(cols),), dtype=cols[0].dtype)
    for i, c in enumerate(cols):
        out[..., i] = c
    return out


class G01(Problem):
    """CEC2006 g01 (``shared/problems.md`` 3.1; seed 000 P2), D = 13, m = 9::

        f  = 5 sum_{i<=4} x_i - 5 sum_{i<=4} x_i^2 - sum_{i=5}^{13} x_i
        g1 = 2x1 + 2x2 + x10 + x11 - 10    g4 = -8x1 + x10    g7 = -2x4 - x5 + x10
        g2 = 2x1 + 2x3 + x10 + x12 - 10    g5 = -8x2 + x11    g8 = -2x6 - x7 + x11
        g3 = 2x2 + 2x3 + x11 + x12 - 10    g6 = -8x3 + x12    g9 = -2x8 - x9 + x12

    Bounds ``[0, 1]`` except ``x10, x11, x12 in [0, 100]``; f* = -15 at
    ``(1, ..., 1, 3, 3, 3, 1)``.
    """

    name = "g01"
    n_constraints = 9

    #: per-row device code (the contract of :class:`isles.problems.base.Problem`), the array code's
    #: operations in the same order
    cuda_row = r"""
#define ROW_M 9
ISLES_DEV T row_objective(const T* x) {
    T s1 = x[0], s2 = mul_rn(x[0], x[0]), s3 = x[4];
    for (int i = 1; i < 4; ++i) { s1 = add_rn(s1, x[i]); s2 = add_rn(s2, mul_rn(x[i], x[i])); }
    for (int i = 5; i < 13; ++i) s3 = add_rn(s3, x[i]);
    return sub_rn(sub_rn(mul_rn((T)5.0, s1), mul_rn((T)5.0, s2)), s3);
}
ISLES_DEV T row_constraint(const T* x, int i) {
    const T two = (T)2.0;
    switch (i) {
    case 0: return sub_rn(add_rn(add_rn(add_rn(mul_rn(two, x[0]), mul_rn(two, x[1])), x[9]), x[10]), (T)10.0);
    case 1: return sub_rn(add_rn(add_rn(add_rn(mul_rn(two, x[0]), mul_rn(two, x[2])), x[9]), x[11]), (T)10.0);
    case 2: return sub_rn(add_rn(add_rn(add_rn(mul_rn(two, x[1]), mul_rn(two, x[2])), x[10]), x[11]), (T)10.0);
    case 3: return add_rn(mul_rn((T)-8.0, x[0]), x[9]);
    case 4: return add_rn(mul_rn((T)-8.0, x[1]), x[10]);
    case 5: return add_rn(mul_rn((T)-8.0, x[2]), x[11]);
    case 6: return add_rn(sub_rn(mul_rn((T)-2.0, x[3]), x[4]), x[9]);
    case 7: return add_rn(sub_rn(mul_rn((T)-2.0, x[5]), x[6]), x[10]);
    default: return add_rn(sub_rn(mul_rn((T)-2.0, x[7]), x[8]), x[11]);
    }
}
"""

    def __init__(self):
        up = [1.0] * 9 + [100.0] * 3 + [1.0]
        super().__init__(13, [0.0] * 13, up, f_star=-15.0, constraint_scale=[1.0] * 9)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        a = X[..., 0:4]
        return 5.0 * a.sum(axis=-1) - 5.0 * (a * a).sum(axis=-1) - X[..., 4:13].sum(axis=-1)

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (9,)``."""
        xp = array_namespace(X)
        x = [X[..., i] for i in range(13)]
        x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12 = x[:12]
        return _columns(
            xp,
            [
                2.0 * x1 + 2.0 * x2 + x10 + x11 - 10.0,
                2.0 * x1 + 2.0 * x3 + x10 + x12 - 10.0,
                2.0 * x2 + 2.0 * x3 + x11 + x12 - 10.0,
                -8.0 * x1 + x10,
                -8.0 * x2 + x11,
                -8.0 * x3 + x12,
                -2.0 * x4 - x5 + x10,
                -2.0 * x6 - x7 + x11,
                -2.0 * x8 - x9 + x12,
            ],
        )


class G07(Problem):
    """CEC2006 g07 (``shared/problems.md`` 3.2; seed 000 P3), D = 10, m = 8, box ``[-10, 10]``::

        f = x1^2 + x2^2 + x1 x2 - 14 x1 - 16 x2 + (x3-10)^2 + 4(x4-5)^2 + (x5-3)^2 + 2(x6-1)^2
            + 5 x7^2 + 7(x8-11)^2 + 2(x9-10)^2 + (x10-7)^2 + 45
        g1 = -105 + 4x1 + 5x2 - 3x7 + 9x8            g5 = 5x1^2 + 8x2 + (x3-6)^2 - 2x4 - 40
        g2 = 10x1 - 8x2 - 17x7 + 2x8                  g6 = x1^2 + 2(x2-2)^2 - 2x1x2 + 14x5 - 6x6
        g3 = -8x1 + 2x2 + 5x9 - 2x10 - 12             g7 = 0.5(x1-8)^2 + 2(x2-4)^2 + 3x5^2 - x6 - 30
        g4 = 3(x1-2)^2 + 4(x2-3)^2 + 2x3^2 - 7x4 - 120   g8 = -3x1 + 6x2 + 12(x9-8)^2 - 7x10

    f* = 24.30620906818 (the seed's best 24.47 is 0.67 % above it).
    """

    name = "g07"
    n_constraints = 8

    #: per-row device code (:class:`isles.problems.base.Problem`), the array code's operations in order
    cuda_row = r"""
#define ROW_M 8
ISLES_DEV T g07_sq(T a) { return mul_rn(a, a); }
ISLES_DEV T row_objective(const T* x) {
    T s = add_rn(g07_sq(x[0]), g07_sq(x[1]));
    s = add_rn(s, mul_rn(x[0], x[1]));
    s = sub_rn(s, mul_rn((T)14.0, x[0]));
    s = sub_rn(s, mul_rn((T)16.0, x[1]));
    s = add_rn(s, g07_sq(sub_rn(x[2], (T)10.0)));
    s = add_rn(s, mul_rn((T)4.0, g07_sq(sub_rn(x[3], (T)5.0))));
    s = add_rn(s, g07_sq(sub_rn(x[4], (T)3.0)));
    s = add_rn(s, mul_rn((T)2.0, g07_sq(sub_rn(x[5], (T)1.0))));
    s = add_rn(s, mul_rn((T)5.0, g07_sq(x[6])));
    s = add_rn(s, mul_rn((T)7.0, g07_sq(sub_rn(x[7], (T)11.0))));
    s = add_rn(s, mul_rn((T)2.0, g07_sq(sub_rn(x[8], (T)10.0))));
    s = add_rn(s, g07_sq(sub_rn(x[9], (T)7.0)));
    return add_rn(s, (T)45.0);
}
ISLES_DEV T row_constraint(const T* x, int i) {
    switch (i) {
    case 0: return add_rn(sub_rn(add_rn(add_rn((T)-105.0, mul_rn((T)4.0, x[0])), mul_rn((T)5.0, x[1])),
                                 mul_rn((T)3.0, x[6])), mul_rn((T)9.0, x[7]));
    case 1: return add_rn(sub_rn(sub_rn(mul_rn((T)10.0, x[0]), mul_rn((T)8.0, x[1])), mul_rn((T)17.0, x[6])),
                          mul_rn((T)2.0, x[7]));
    case 2: return sub_rn(sub_rn(add_rn(add_rn(mul_rn((T)-8.0, x[0]), mul_rn((T)2.0, x[1])), mul_rn((T)5.0, x[8])),
                                 mul_rn((T)2.0, x[9])), (T)12.0);
    case 3: return sub_rn(sub_rn(add_rn(add_rn(mul_rn((T)3.0, g07_sq(sub_rn(x[0], (T)2.0))),
                                               mul_rn((T)4.0, g07_sq(sub_rn(x[1], (T)3.0)))),
                                        mul_rn((T)2.0, g07_sq(x[2]))), mul_rn((T)7.0, x[3])), (T)120.0);
    case 4: return sub_rn(sub_rn(add_rn(add_rn(mul_rn((T)5.0, g07_sq(x[0])), mul_rn((T)8.0, x[1])),
                                        g07_sq(sub_rn(x[2], (T)6.0))), mul_rn((T)2.0, x[3])), (T)40.0);
    case 5: return sub_rn(add_rn(sub_rn(add_rn(g07_sq(x[0]), mul_rn((T)2.0, g07_sq(sub_rn(x[1], (T)2.0)))),
                                        mul_rn(mul_rn((T)2.0, x[0]), x[1])), mul_rn((T)14.0, x[4])),
                          mul_rn((T)6.0, x[5]));
    case 6: return sub_rn(sub_rn(add_rn(add_rn(mul_rn((T)0.5, g07_sq(sub_rn(x[0], (T)8.0))),
                                               mul_rn((T)2.0, g07_sq(sub_rn(x[1], (T)4.0)))),
                                        mul_rn((T)3.0, g07_sq(x[4]))), x[5]), (T)30.0);
    default: return sub_rn(add_rn(add_rn(mul_rn((T)-3.0, x[0]), mul_rn((T)6.0, x[1])),
                                  mul_rn((T)12.0, g07_sq(sub_rn(x[8], (T)8.0)))), mul_rn((T)7.0, x[9]));
    }
}
"""

    def __init__(self):
        super().__init__(10, -10.0, 10.0, f_star=24.30620906818, constraint_scale=[1.0] * 8)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        x1, x2, x3, x4, x5, x6, x7, x8, x9, x10 = (X[..., i] for i in range(10))
        return (
            x1**2
            + x2**2
            + x1 * x2
            - 14.0 * x1
            - 16.0 * x2
            + (x3 - 10.0) ** 2
            + 4.0 * (x4 - 5.0) ** 2
            + (x5 - 3.0) ** 2
            + 2.0 * (x6 - 1.0) ** 2
            + 5.0 * x7**2
            + 7.0 * (x8 - 11.0) ** 2
            + 2.0 * (x9 - 10.0) ** 2
            + (x10 - 7.0) ** 2
            + 45.0
        )

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (8,)``."""
        xp = array_namespace(X)
        x1, x2, x3, x4, x5, x6, x7, x8, x9, x10 = (X[..., i] for i in range(10))
        return _columns(
            xp,
            [
                -105.0 + 4.0 * x1 + 5.0 * x2 - 3.0 * x7 + 9.0 * x8,
                10.0 * x1 - 8.0 * x2 - 17.0 * x7 + 2.0 * x8,
                -8.0 * x1 + 2.0 * x2 + 5.0 * x9 - 2.0 * x10 - 12.0,
                3.0 * (x1 - 2.0) ** 2 + 4.0 * (x2 - 3.0) ** 2 + 2.0 * x3**2 - 7.0 * x4 - 120.0,
                5.0 * x1**2 + 8.0 * x2 + (x3 - 6.0) ** 2 - 2.0 * x4 - 40.0,
                x1**2 + 2.0 * (x2 - 2.0) ** 2 - 2.0 * x1 * x2 + 14.0 * x5 - 6.0 * x6,
                0.5 * (x1 - 8.0) ** 2 + 2.0 * (x2 - 4.0) ** 2 + 3.0 * x5**2 - x6 - 30.0,
                -3.0 * x1 + 6.0 * x2 + 12.0 * (x9 - 8.0) ** 2 - 7.0 * x10,
            ],
        )


class G09(Problem):
    """CEC2006 g09 (``shared/problems.md`` 3.3; seed 000 P4), D = 7, m = 4, box ``[-10, 10]``::

        f = (x1-10)^2 + 5(x2-12)^2 + x3^4 + 3(x4-11)^2 + 10 x5^6 + 7 x6^2 + x7^4 - 4 x6 x7
            - 10 x6 - 8 x7
        g1 = -127 + 2x1^2 + 3x2^4 + x3 + 4x4^2 + 5x5     g3 = -196 + 23x1 + x2^2 + 6x6^2 - 8x7
        g2 = -282 + 7x1 + 3x2 + 10x3^2 + x4 - x5         g4 = 4x1^2 + x2^2 - 3x1x2 + 2x3^2 + 5x6 - 11x7

    f* = 680.630057374402 (x3 and x5 of x* are negative; the seed prints them positive).
    """

    name = "g09"
    n_constraints = 4

    #: per-row device code (:class:`isles.problems.base.Problem`); ``**4``/``**6`` as ``pow`` (NumPy's)
    cuda_row = r"""
#define ROW_M 4
ISLES_DEV T g09_sq(T a) { return mul_rn(a, a); }
ISLES_DEV T row_objective(const T* x) {
    T s = add_rn(g09_sq(sub_rn(x[0], (T)10.0)), mul_rn((T)5.0, g09_sq(sub_rn(x[1], (T)12.0))));
    s = add_rn(s, t_pow(x[2], (T)4.0));
    s = add_rn(s, mul_rn((T)3.0, g09_sq(sub_rn(x[3], (T)11.0))));
    s = add_rn(s, mul_rn((T)10.0, t_pow(x[4], (T)6.0)));
    s = add_rn(s, mul_rn((T)7.0, g09_sq(x[5])));
    s = add_rn(s, t_pow(x[6], (T)4.0));
    s = sub_rn(s, mul_rn(mul_rn((T)4.0, x[5]), x[6]));
    s = sub_rn(s, mul_rn((T)10.0, x[5]));
    return sub_rn(s, mul_rn((T)8.0, x[6]));
}
ISLES_DEV T row_constraint(const T* x, int i) {
    switch (i) {
    case 0: return add_rn(add_rn(add_rn(add_rn(add_rn((T)-127.0, mul_rn((T)2.0, g09_sq(x[0]))),
                                               mul_rn((T)3.0, t_pow(x[1], (T)4.0))), x[2]),
                                 mul_rn((T)4.0, g09_sq(x[3]))), mul_rn((T)5.0, x[4]));
    case 1: return sub_rn(add_rn(add_rn(add_rn(add_rn((T)-282.0, mul_rn((T)7.0, x[0])), mul_rn((T)3.0, x[1])),
                                        mul_rn((T)10.0, g09_sq(x[2]))), x[3]), x[4]);
    case 2: return sub_rn(add_rn(add_rn(add_rn((T)-196.0, mul_rn((T)23.0, x[0])), g09_sq(x[1])),
                                 mul_rn((T)6.0, g09_sq(x[5]))), mul_rn((T)8.0, x[6]));
    default: return sub_rn(add_rn(add_rn(sub_rn(add_rn(mul_rn((T)4.0, g09_sq(x[0])), g09_sq(x[1])),
                                                mul_rn(mul_rn((T)3.0, x[0]), x[1])), mul_rn((T)2.0, g09_sq(x[2]))),
                                  mul_rn((T)5.0, x[5])), mul_rn((T)11.0, x[6]));
    }
}
"""

    def __init__(self):
        super().__init__(7, -10.0, 10.0, f_star=680.630057374402, constraint_scale=[1.0] * 4)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        x1, x2, x3, x4, x5, x6, x7 = (X[..., i] for i in range(7))
        return (
            (x1 - 10.0) ** 2
            + 5.0 * (x2 - 12.0) ** 2
            + x3**4
            + 3.0 * (x4 - 11.0) ** 2
            + 10.0 * x5**6
            + 7.0 * x6**2
            + x7**4
            - 4.0 * x6 * x7
            - 10.0 * x6
            - 8.0 * x7
        )

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (4,)``."""
        xp = array_namespace(X)
        x1, x2, x3, x4, x5, x6, x7 = (X[..., i] for i in range(7))
        return _columns(
            xp,
            [
                -127.0 + 2.0 * x1**2 + 3.0 * x2**4 + x3 + 4.0 * x4**2 + 5.0 * x5,
                -282.0 + 7.0 * x1 + 3.0 * x2 + 10.0 * x3**2 + x4 - x5,
                -196.0 + 23.0 * x1 + x2**2 + 6.0 * x6**2 - 8.0 * x7,
                4.0 * x1**2 + x2**2 - 3.0 * x1 * x2 + 2.0 * x3**2 + 5.0 * x6 - 11.0 * x7,
            ],
        )


class G10(Problem):
    """CEC2006 g10 (``shared/problems.md`` 3.4; seed 000 P5, HS106), D = 8, m = 6::

        f  = x1 + x2 + x3
        g1 = -1 + 0.0025 (x4 + x6)          g4 = -x1 x6 + 833.33252 x4 + 100 x1 - 83333.333
        g2 = -1 + 0.0025 (x5 + x7 - x4)     g5 = -x2 x7 + 1250 x5 + x2 x4 - 1250 x4
        g3 = -1 + 0.01 (x8 - x5)            g6 = -x3 x8 + 1250000 + x3 x5 - 2500 x5

    Bounds ``x1 in [100, 1e4]``, ``x2, x3 in [1e3, 1e4]``, ``x4..x8 in [10, 1e3]``; constraint
    scales ``(1, 1, 1, 1e5, 1e5, 1e6)`` (g4..g6 are differences of terms around 1e6-1e7);
    f* = 7049.24802052867 (the seed's 7049.330923 is the older HS106 value, 0.0827 above).
    """

    name = "g10"
    n_constraints = 6

    #: per-row device code (:class:`isles.problems.base.Problem`), the array code's operations in order
    cuda_row = r"""
#define ROW_M 6
ISLES_DEV T row_objective(const T* x) { return add_rn(add_rn(x[0], x[1]), x[2]); }
ISLES_DEV T row_constraint(const T* x, int i) {
    switch (i) {
    case 0: return add_rn((T)-1.0, mul_rn((T)0.0025, add_rn(x[3], x[5])));
    case 1: return add_rn((T)-1.0, mul_rn((T)0.0025, sub_rn(add_rn(x[4], x[6]), x[3])));
    case 2: return add_rn((T)-1.0, mul_rn((T)0.01, sub_rn(x[7], x[4])));
    case 3: return sub_rn(add_rn(add_rn(-mul_rn(x[0], x[5]), mul_rn((T)833.33252, x[3])), mul_rn((T)100.0, x[0])),
                          (T)83333.333);
    case 4: return sub_rn(add_rn(add_rn(-mul_rn(x[1], x[6]), mul_rn((T)1250.0, x[4])), mul_rn(x[1], x[3])),
                          mul_rn((T)1250.0, x[3]));
    default: return sub_rn(add_rn(add_rn(-mul_rn(x[2], x[7]), (T)1250000.0), mul_rn(x[2], x[4])),
                           mul_rn((T)2500.0, x[4]));
    }
}
"""

    def __init__(self):
        super().__init__(
            8,
            [100.0, 1000.0, 1000.0] + [10.0] * 5,
            [10000.0] * 3 + [1000.0] * 5,
            f_star=7049.24802052867,
            constraint_scale=[1.0, 1.0, 1.0, 1e5, 1e5, 1e6],
        )

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        return X[..., 0] + X[..., 1] + X[..., 2]

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (6,)``."""
        xp = array_namespace(X)
        x1, x2, x3, x4, x5, x6, x7, x8 = (X[..., i] for i in range(8))
        return _columns(
            xp,
            [
                -1.0 + 0.0025 * (x4 + x6),
                -1.0 + 0.0025 * (x5 + x7 - x4),
                -1.0 + 0.01 * (x8 - x5),
                -x1 * x6 + 833.33252 * x4 + 100.0 * x1 - 83333.333,
                -x2 * x7 + 1250.0 * x5 + x2 * x4 - 1250.0 * x4,
                -x3 * x8 + 1250000.0 + x3 * x5 - 2500.0 * x5,
            ],
        )
