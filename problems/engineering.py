"""Constrained engineering design problems: spring, welded beam, speed reducer.

Every class implements the **standard formulation** of ``shared/problems.md`` section 4 (values
and bounds from ``shared/reference/problems.json``), not the variants printed in the seed papers:

* seed 000 (Fabris & Krohling) prints the spring (its P6) with ``x2^2`` in g1 and the bound
  ``0.5 <= x1``; its printed x* violates the standard g1 (``shared/problems.md`` section 7.1);
* seed 001 (Souza et al., CMEPSO) reports "best" welded-beam, spring and speed-reducer results
  with "Violations 0" that are **infeasible** under the standard formulations (its code mis-codes
  the spring constants and the speed reducer's g9, and drops g5; ``shared/problems.md``
  section 7.2). isles does not reproduce those errors.

Shapes: ``X`` is ``(..., D)`` (NumPy or CuPy, any float dtype, e.g. ``islands x N x D``);
``objective`` returns ``X.shape[:-1]`` and ``constraints`` returns ``X.shape[:-1] + (m,)`` with
``g <= 0`` feasible, in ``X``'s array module and dtype. Constants are Python floats so float32
input stays float32. Divisions are not guarded (the standard formulations have no guard; a zero
denominator gives inf/NaN, which :class:`isles.problems.constraints.Evaluator` treats as infeasible).
"""

from __future__ import annotations

import math

from array_api_compat import array_namespace
from isles.problems.base import Problem

__all__ = ["Spring", "WeldedBeam", "WeldedBeamJ4", "SpeedReducer", "SpeedReducerB", "SpeedReducerC"]


class Spring(Problem):
    """Tension/compression spring weight (``shared/problems.md`` 4.1; id ``spring``).

    ``x = (d wire diameter, D mean coil diameter, N active coils)``, D = 3, m = 4::

        f  = (x3 + 2) x2 x1^2
        g1 = 1 - x2^3 x3 / (71785 x1^4)                                        (deflection)
        g2 = (4 x2^2 - x1 x2) / (12566 (x2 x1^3 - x1^4)) + 1/(5108 x1^2) - 1  (shear stress)
        g3 = 1 - 140.45 x1 / (x2^2 x3)                                         (surge frequency)
        g4 = (x1 + x2)/1.5 - 1                                                 (outside diameter)

    Bounds ``[0.05, 2] x [0.25, 1.3] x [2, 15]``; f* = 0.012665232788 at
    ``(0.051689061232, 0.356717743398, 11.288965540657)``.

    Sources: Belegundu (1982), Arora (1989), Coello (2000), CEC2020 RC17. Seed errata: seed 000's
    P6 has ``x2^2`` in g1 and ``0.5 <= x1`` (infeasible box), seed 001's 0.002820 at
    ``(0.05, 0.282023, 2)`` violates g1 by +0.900 (``shared/problems.md`` 7.1, 7.2). isles
    implements the standard formulation above.
    """

    name = "spring"
    n_constraints = 4

    #: per-row device code (:class:`isles.problems.base.Problem`); ``**3``/``**4`` as ``pow`` (NumPy's)
    cuda_row = r"""
#define ROW_M 4
ISLES_DEV T row_objective(const T* x) { return mul_rn(mul_rn(add_rn(x[2], (T)2.0), x[1]), mul_rn(x[0], x[0])); }
ISLES_DEV T row_constraint(const T* x, int i) {
    const T x1 = x[0], x2 = x[1], x3 = x[2];
    switch (i) {
    case 0: return sub_rn((T)1.0, div_rn(mul_rn(t_pow(x2, (T)3.0), x3), mul_rn((T)71785.0, t_pow(x1, (T)4.0))));
    case 1: return sub_rn(add_rn(div_rn(sub_rn(mul_rn((T)4.0, mul_rn(x2, x2)), mul_rn(x1, x2)),
                                        mul_rn((T)12566.0, sub_rn(mul_rn(x2, t_pow(x1, (T)3.0)), t_pow(x1, (T)4.0)))),
                                 div_rn((T)1.0, mul_rn((T)5108.0, mul_rn(x1, x1)))), (T)1.0);
    case 2: return sub_rn((T)1.0, div_rn(mul_rn((T)140.45, x1), mul_rn(mul_rn(x2, x2), x3)));
    default: return sub_rn(div_rn(add_rn(x1, x2), (T)1.5), (T)1.0);
    }
}
"""

    def __init__(self):
        super().__init__(3, [0.05, 0.25, 2.0], [2.0, 1.3, 15.0], f_star=0.012665232788, constraint_scale=[1.0] * 4)

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        x1, x2, x3 = X[..., 0], X[..., 1], X[..., 2]
        return (x3 + 2.0) * x2 * x1**2

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (4,)``."""
        xp = array_namespace(X)
        x1, x2, x3 = X[..., 0], X[..., 1], X[..., 2]
        g1 = 1.0 - x2**3 * x3 / (71785.0 * x1**4)
        g2 = (4.0 * x2**2 - x1 * x2) / (12566.0 * (x2 * x1**3 - x1**4)) + 1.0 / (5108.0 * x1**2) - 1.0
        g3 = 1.0 - 140.45 * x1 / (x2**2 * x3)
        g4 = (x1 + x2) / 1.5 - 1.0
        return xp.stack([g1, g2, g3, g4], axis=-1)


class WeldedBeam(Problem):
    """Welded beam cost, Coello (2000) version (``shared/problems.md`` 4.2; id ``welded_beam``).

    ``x = (h weld thickness, l weld length, t bar height, b bar thickness)``, D = 4, m = 7::

        f  = 1.10471 x1^2 x2 + 0.04811 x3 x4 (14 + x2)
        g1 = tau - 13600           g2 = sigma - 30000         g3 = x1 - x4
        g4 = 0.10471 x1^2 + 0.04811 x3 x4 (14 + x2) - 5      g5 = 0.125 - x1
        g6 = delta - 0.25          g7 = P - Pc

        tau   = sqrt(tau'^2 + 2 tau' tau'' x2/(2R) + tau''^2)
        tau'  = P / (sqrt(2) x1 x2),   tau'' = M R / J,   M = P (L + x2/2)
        R     = sqrt(x2^2/4 + ((x1 + x3)/2)^2)
        J     = 2 sqrt(2) x1 x2 [x2^2/12 + ((x1 + x3)/2)^2]
        sigma = 6 P L / (x4 x3^2),     delta = 4 P L^3 / (E x3^3 x4)
        Pc    = 4.013 E sqrt(x3^2 x4^6 / 36) / L^2 (1 - x3/(2L) sqrt(E/(4G)))

    with P = 6000, L = 14, E = 30e6, G = 12e6. Bounds ``[0.1, 2] x [0.1, 10] x [0.1, 10] x
    [0.1, 2]``; constraint scales ``(13600, 30000, 1, 1, 1, 0.25, 6000)``; f* = 1.7248523086
    (quoted 1.724852) at ``(0.205729639786, 3.470488665628, 9.036623910358, 0.205729639786)``.

    Sources: Ragsdell & Phillips (1976), Deb (1991), Coello (2000), Cagnina et al. (2008).
    Seed erratum: seed 001's CMEPSO "best" 1.458883 at ``(0.205730, 1.517675, 9.036624,
    0.205730)`` has tau = 2.02 tau_max (g1 = +13887): infeasible (``shared/problems.md`` 7.2).
    isles implements the standard formulation above.
    """

    name = "welded_beam"
    n_constraints = 7
    #: coefficient of ``x2^2`` in J: 1/12 (Coello 2000); :class:`WeldedBeamJ4` uses 1/4.
    j_coeff = 1.0 / 12.0
    f_star_value = 1.7248523086

    P, L, E, G = 6000.0, 14.0, 30e6, 12e6
    TAU_MAX, SIGMA_MAX, DELTA_MAX = 13600.0, 30000.0, 0.25

    def __init__(self):
        super().__init__(
            4,
            [0.1, 0.1, 0.1, 0.1],
            [2.0, 10.0, 10.0, 2.0],
            f_star=self.f_star_value,
            constraint_scale=[13600.0, 30000.0, 1.0, 1.0, 1.0, 0.25, 6000.0],
        )

    @property
    def cuda_row(self) -> str:
        """Per-row device code (:class:`isles.problems.base.Problem`): :meth:`objective` and
        :meth:`constraints` operation by operation in NumPy's order (the Python constants folded as
        Python folds them; ``x**2`` a product, as NumPy's ``square``; ``x**3``, ``x**6`` the C
        library's ``pow``, NumPy's own may differ in the last bit)."""
        P, L, E, G = self.P, self.L, self.E, self.G

        def c(v: float) -> str:
            return f"(T){float(v)!r}"

        return f"""
#define ROW_M 7
ISLES_DEV T row_objective(const T* x) {{
    return add_rn(mul_rn(mul_rn({c(1.10471)}, mul_rn(x[0], x[0])), x[1]),
                  mul_rn(mul_rn(mul_rn({c(0.04811)}, x[2]), x[3]), add_rn({c(14.0)}, x[1])));
}}
ISLES_DEV T row_constraint(const T* x, int i) {{
    const T x1 = x[0], x2 = x[1], x3 = x[2], x4 = x[3];
    switch (i) {{
    case 0: {{
        const T tau_p = div_rn({c(P)}, mul_rn(mul_rn({c(math.sqrt(2.0))}, x1), x2));
        const T M = mul_rn({c(P)}, add_rn({c(L)}, div_rn(x2, {c(2.0)})));
        const T h = div_rn(add_rn(x1, x3), {c(2.0)});
        const T half = mul_rn(h, h);
        const T R = t_sqrt(add_rn(div_rn(mul_rn(x2, x2), {c(4.0)}), half));
        const T J = mul_rn({c(2.0)}, mul_rn(mul_rn(mul_rn({c(math.sqrt(2.0))}, x1), x2),
                                            add_rn(mul_rn({c(self.j_coeff)}, mul_rn(x2, x2)), half)));
        const T tau_pp = div_rn(mul_rn(M, R), J);
        const T mid = div_rn(mul_rn(mul_rn(mul_rn({c(2.0)}, tau_p), tau_pp), x2), mul_rn({c(2.0)}, R));
        const T tau = t_sqrt(add_rn(add_rn(mul_rn(tau_p, tau_p), mid), mul_rn(tau_pp, tau_pp)));
        return sub_rn(tau, {c(self.TAU_MAX)});
    }}
    case 1: return sub_rn(div_rn({c(6.0 * P * L)}, mul_rn(x4, mul_rn(x3, x3))), {c(self.SIGMA_MAX)});
    case 2: return sub_rn(x1, x4);
    case 3: return sub_rn(add_rn(mul_rn({c(0.10471)}, mul_rn(x1, x1)),
                                 mul_rn(mul_rn(mul_rn({c(0.04811)}, x3), x4), add_rn({c(14.0)}, x2))), {c(5.0)});
    case 4: return sub_rn({c(0.125)}, x1);
    case 5: return sub_rn(div_rn({c(4.0 * P * L**3)}, mul_rn(mul_rn({c(E)}, t_pow(x3, (T)3.0)), x4)),
                          {c(self.DELTA_MAX)});
    default: {{
        const T root = t_sqrt(div_rn(mul_rn(mul_rn(x3, x3), t_pow(x4, (T)6.0)), {c(36.0)}));
        const T left = div_rn(mul_rn({c(4.013 * E)}, root), {c(L**2)});
        const T right = sub_rn({c(1.0)}, mul_rn(div_rn(x3, {c(2.0 * L)}), {c(math.sqrt(E / (4.0 * G)))}));
        return sub_rn({c(P)}, mul_rn(left, right));
    }}
    }}
}}
"""

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        x1, x2, x3, x4 = X[..., 0], X[..., 1], X[..., 2], X[..., 3]
        return 1.10471 * x1**2 * x2 + 0.04811 * x3 * x4 * (14.0 + x2)

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (7,)``."""
        xp = array_namespace(X)
        x1, x2, x3, x4 = X[..., 0], X[..., 1], X[..., 2], X[..., 3]
        P, L, E, G = self.P, self.L, self.E, self.G
        s2 = math.sqrt(2.0)
        tau_p = P / (s2 * x1 * x2)
        M = P * (L + x2 / 2.0)
        half = ((x1 + x3) / 2.0) ** 2
        R = xp.sqrt(x2**2 / 4.0 + half)
        J = 2.0 * (s2 * x1 * x2 * (self.j_coeff * x2**2 + half))
        tau_pp = M * R / J
        tau = xp.sqrt(tau_p**2 + 2.0 * tau_p * tau_pp * x2 / (2.0 * R) + tau_pp**2)
        sigma = 6.0 * P * L / (x4 * x3**2)
        delta = 4.0 * P * L**3 / (E * x3**3 * x4)
        pc = (4.013 * E * xp.sqrt(x3**2 * x4**6 / 36.0) / L**2) * (1.0 - x3 / (2.0 * L) * math.sqrt(E / (4.0 * G)))
        g = [
            tau - self.TAU_MAX,
            sigma - self.SIGMA_MAX,
            x1 - x4,
            0.10471 * x1**2 + 0.04811 * x3 * x4 * (14.0 + x2) - 5.0,
            0.125 - x1,
            delta - self.DELTA_MAX,
            P - pc,
        ]
        return xp.stack(g, axis=-1)


class WeldedBeamJ4(WeldedBeam):
    """Welded beam variant with ``x2^2/4`` in J (``shared/problems.md`` 4.3; id ``welded_beam_j4``).

    Same as :class:`WeldedBeam` except ``J = 2 sqrt(2) x1 x2 [x2^2/4 + ((x1 + x3)/2)^2]``, so only
    g1 changes. f* = 1.6952471649 (quoted 1.695247) at ``(0.205729639786, 3.253120040744,
    9.036623910358, 0.205729639786)``. Results are **not comparable** with :class:`WeldedBeam`.
    Source: the variant used by several metaheuristic papers (no primary source defining it was
    found); shapes, errata and errors as :class:`WeldedBeam`.
    """

    name = "welded_beam_j4"
    j_coeff = 0.25
    f_star_value = 1.6952471649


class SpeedReducer(Problem):
    """Speed reducer weight, Golinski bounds (``shared/problems.md`` 4.4; id ``speed_reducer``).

    ``x = (b face width, m module, z pinion teeth, l1, l2 shaft lengths, d1, d2 shaft
    diameters)``, D = 7, m = 11::

        f   = 0.7854 x1 x2^2 (3.3333 x3^2 + 14.9334 x3 - 43.0934) - 1.508 x1 (x6^2 + x7^2)
              + c3 (x6^3 + x7^3) + 0.7854 (x4 x6^2 + x5 x7^2)               (c3 = 7.4777)
        g1  = 27 / (x1 x2^2 x3) - 1               g7  = x2 x3 / 40 - 1
        g2  = 397.5 / (x1 x2^2 x3^2) - 1          g8  = 5 x2 / x1 - 1
        g3  = 1.93 x4^3 / (x2 x3 x6^4) - 1        g9  = x1 / (12 x2) - 1
        g4  = 1.93 x5^3 / (x2 x3 x7^4) - 1        g10 = (1.5 x6 + 1.9) / x4 - 1
        g5  = sqrt((745 x4/(x2 x3))^2 + c5) / (110 x6^3) - 1                   (c5 = 16.9e6)
        g6  = sqrt((745 x5/(x2 x3))^2 + 157.5e6) / (85 x7^3) - 1
        g11 = (1.1 x7 + 1.9) / x5 - 1

    Bounds ``[2.6, 3.6] x [0.7, 0.8] x [17, 28] x [7.3, 8.3] x [7.8, 8.3] x [2.9, 3.9] x
    [5.0, 5.5]``; f* = 2996.3481649685 (quoted 2996.348165) at
    ``(3.5, 0.7, 17, 7.3, 7.8, 3.350214666096, 5.286683229758)``.

    Sources: Golinski (1973), Mezura-Montes & Coello (2005), Lemonge et al. (2010). Seed
    erratum: seed 001's CMEPSO "best" 2896.25927 at ``(3.5, 0.7, 17, 7.3, 7.8, 2.9, 5.286684)``
    violates g5 by +0.5418 (it is the optimum without g5; its g9 is also mis-coded as
    ``x1 x2/12 - 1``), ``shared/problems.md`` 7.2. isles implements the standard formulation.
    """

    name = "speed_reducer"
    n_constraints = 11
    x5_lower = 7.8
    c3 = 7.4777
    c5 = 16.9e6
    f_star_value = 2996.3481649685

    def __init__(self):
        super().__init__(
            7,
            [2.6, 0.7, 17.0, 7.3, self.x5_lower, 2.9, 5.0],
            [3.6, 0.8, 28.0, 8.3, 8.3, 3.9, 5.5],
            f_star=self.f_star_value,
            constraint_scale=[1.0] * 11,
        )

    def objective(self, X):
        """``f`` of shape ``X.shape[:-1]``."""
        x1, x2, x3, x4, x5, x6, x7 = (X[..., i] for i in range(7))
        return (
            0.7854 * x1 * x2**2 * (3.3333 * x3**2 + 14.9334 * x3 - 43.0934)
            - 1.508 * x1 * (x6**2 + x7**2)
            + self.c3 * (x6**3 + x7**3)
            + 0.7854 * (x4 * x6**2 + x5 * x7**2)
        )

    def constraints(self, X):
        """``g`` of shape ``X.shape[:-1] + (11,)``."""
        xp = array_namespace(X)
        x1, x2, x3, x4, x5, x6, x7 = (X[..., i] for i in range(7))
        g = [
            27.0 / (x1 * x2**2 * x3) - 1.0,
            397.5 / (x1 * x2**2 * x3**2) - 1.0,
            1.93 * x4**3 / (x2 * x3 * x6**4) - 1.0,
            1.93 * x5**3 / (x2 * x3 * x7**4) - 1.0,
            xp.sqrt((745.0 * x4 / (x2 * x3)) ** 2 + self.c5) / (110.0 * x6**3) - 1.0,
            xp.sqrt((745.0 * x5 / (x2 * x3)) ** 2 + 157.5e6) / (85.0 * x7**3) - 1.0,
            x2 * x3 / 40.0 - 1.0,
            5.0 * x2 / x1 - 1.0,
            x1 / (12.0 * x2) - 1.0,
            (1.5 * x6 + 1.9) / x4 - 1.0,
            (1.1 * x7 + 1.9) / x5 - 1.0,
        ]
        return xp.stack(g, axis=-1)


class SpeedReducerB(SpeedReducer):
    """Speed reducer with ``7.3 <= x5`` (``shared/problems.md`` 4.5; id ``speed_reducer_b``).

    As :class:`SpeedReducer` except the lower bound of x5 (7.3, Ray 2003). g11 becomes active;
    f* = 2994.4710661468 at ``(3.5, 0.7, 17, 7.3, 7.715319911478, 3.350214666096,
    5.28665446498)``. Shapes and errors as :class:`SpeedReducer`.
    """

    name = "speed_reducer_b"
    x5_lower = 7.3
    f_star_value = 2994.4710661468


class SpeedReducerC(SpeedReducer):
    """CEC2020 RC15 speed reducer (``shared/problems.md`` 4.5; id ``speed_reducer_c``).

    As :class:`SpeedReducerB` (``7.3 <= x5``) with c3 = 7.477 in f and c5 = 16.91e6 in g5
    (Kumar et al. 2020, RC15). f* = 2994.4244657567 at ``(3.5, 0.7, 17, 7.3, 7.715319911478,
    3.350540949106, 5.28665446498)``. The often-quoted 2994.4245 is only reachable with these
    constants, not with :class:`SpeedReducerB`'s. Shapes and errors as :class:`SpeedReducer`.
    """

    name = "speed_reducer_c"
    x5_lower = 7.3
    c3 = 7.477
    c5 = 16.91e6
    f_star_value = 2994.4244657567
