"""Natively binary problems (minimisation): OneMax, concatenated deceptive trap-k, 0/1 knapsack.

Every class here has ``genome = "bits"`` and ``n_bits = L``; ``dim = L`` with the box ``[0, 1]``
so that :class:`isles.problems.base.Problem`'s bookkeeping holds. ``objective(B)`` and
``constraints(B)`` take **unpacked** bits ``B`` of shape ``(..., L)`` (uint8 0/1, or bool or any
integer dtype holding 0/1; NumPy or CuPy, found with ``array_api_compat.array_namespace``) and
return float64 arrays in ``B``'s module (the values are integers, exact in float64);
:class:`isles.problems.constraints.Evaluator` casts them to the run's dtype.

Each class also gives ``cuda_objective`` (the fused-objective contract of
:class:`isles.problems.base.Problem`): units are 32-bit words (OneMax), blocks of ``k`` bits (trap-k)
and items (knapsack); accumulators hold integer counts and sums, exact in ``T`` up to ``2^53``
(double) or ``2^24`` (float).

Sources: OneMax, Ackley (1987) "A connectionist machine for genetic hillclimbing" and Schaffer &
Eshelman (1991) "On crossover as an evolutionarily viable strategy"; trap-k, Deb & Goldberg
(1993) "Analyzing deception in trap functions" (FOGA 2); knapsack instances, Pisinger (2005)
"Where are the hard knapsack problems?", Computers & Operations Research 32(9).
"""

from __future__ import annotations

import math

import numpy as np
from array_api_compat import array_namespace
from isles.problems.base import Problem, positive_int

__all__ = ["OneMax", "Trap", "Knapsack", "KNAPSACK_KINDS", "knapsack_optimum"]

#: Instance generators of :class:`Knapsack` (Pisinger 2005, section 2).
KNAPSACK_KINDS = ("uncorrelated", "strongly_correlated")
#: ``n_items * capacity`` up to which :class:`Knapsack` solves its instance for ``f_star``.
KNAPSACK_DP_LIMIT = 2e7

_ACC1 = r"""#define OBJ_NACC 1
#define OBJ_HAS_V 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; }
"""


class BitProblem(Problem):
    """Base of the natively binary problems: ``genome = "bits"``, ``dim = n_bits``, box ``[0, 1]``.

    Args:
        n_bits: genome length ``L`` (an integer >= 1).
        f_star: known optimum, or ``None``.
        constraint_scale: as :class:`isles.problems.base.Problem`.

    Raises:
        ValueError: ``n_bits`` is not an integer >= 1 (field ``problem.n_bits``).
    """

    genome = "bits"

    def __init__(self, n_bits: int, f_star=None, constraint_scale=None, field: str = "n_bits"):
        n = positive_int(field, n_bits)
        self.n_bits = n
        super().__init__(n, 0.0, 1.0, f_star=f_star, constraint_scale=constraint_scale)

    def describe(self) -> dict:
        """:meth:`isles.problems.base.Problem.describe` plus ``n_bits``, without the per-bit bounds."""
        d = super().describe()
        d.update(n_bits=self.n_bits, lower=0.0, upper=1.0)
        return d

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_bits={self.n_bits})"


class OneMax(BitProblem):
    """OneMax as minimisation: ``f(B) = L - sum_b B_b``, the number of zero bits; id ``onemax``.

    f* = 0 at all ones. Sources: Ackley (1987), Schaffer & Eshelman (1991) (maximising the number
    of ones; isles minimises the number of zeros).

    Args:
        n_bits: ``L``, an integer >= 1 (default 1000).

    Raises:
        ValueError: ``n_bits`` is not an integer >= 1 (field ``problem.n_bits``).
    """

    name = "onemax"

    def __init__(self, n_bits: int = 1000):
        super().__init__(n_bits, f_star=0.0)

    def objective(self, B):
        """``f`` of shape ``B.shape[:-1]`` (float64) for bits ``B (..., L)``."""
        xp = array_namespace(B)
        ones = xp.sum(B, axis=-1, dtype=xp.int64)
        return xp.asarray(self.n_bits - ones, dtype=xp.float64)

    @property
    def cuda_objective(self) -> str:
        """Fused source: units are the ``ceil(L/32)`` words, ``acc[0]`` counts ones (``t_popc``,
        padding bits are 0), ``f = n_bits - acc[0]``."""
        return (
            _ACC1
            + r"""ISLES_DEV int obj_units(int n_bits) { return (n_bits + 31) >> 5; }
ISLES_DEV void obj_unit(T* acc, const unsigned int* row, int u, int n_bits) {
    (void)n_bits;
    acc[0] += (T)t_popc(row[u]);
}
ISLES_DEV T obj_final(const T* acc, int n) { return (T)n - acc[0]; }
"""
        )


class Trap(BitProblem):
    """Concatenated deceptive trap-k (Deb & Goldberg 1993); id ``trap5`` (the default ``k = 5``).

    The genome is ``L / k`` blocks of ``k`` consecutive bits. A block with ``u`` ones scores
    ``trap(u) = k`` if ``u = k`` else ``k - 1 - u`` (fully deceptive: every block's slope leads to
    all zeros, a local optimum worth ``k - 1``); as minimisation ``f = sum_blocks (k - trap(u))``,
    i.e. 0 for a solved block and ``u + 1`` otherwise. f* = 0 at all ones; all zeros gives
    ``f = L / k``, the second-best local optimum (every single-bit flip from it is worse).

    Args:
        n_bits: ``L``, a multiple of ``k`` (default 100).
        k: block length, an integer in ``[2, 32]`` (default 5).

    Raises:
        ValueError: ``k`` outside ``[2, 32]`` (field ``problem.k``), ``n_bits`` not an integer >= 1
            or not a multiple of ``k`` (field ``problem.n_bits``).
    """

    name = "trap5"

    def __init__(self, n_bits: int = 100, k: int = 5):
        kk = positive_int("k", k)
        if not 2 <= kk <= 32:
            raise ValueError(f"problem.k={k!r}: allowed values are integers in [2, 32]")
        n = positive_int("n_bits", n_bits)
        if n % kk:
            raise ValueError(f"problem.n_bits={n_bits!r}: allowed values are multiples of problem.k={kk}")
        self.k = kk
        self.name = f"trap{kk}"
        super().__init__(n, f_star=0.0)

    def objective(self, B):
        """``f`` of shape ``B.shape[:-1]`` (float64) for bits ``B (..., L)``."""
        xp = array_namespace(B)
        k = self.k
        u = xp.sum(xp.reshape(B, B.shape[:-1] + (self.n_bits // k, k)), axis=-1, dtype=xp.int64)
        per_block = xp.where(u == k, 0, u + 1)
        return xp.asarray(xp.sum(per_block, axis=-1), dtype=xp.float64)

    @property
    def cuda_objective(self) -> str:
        """Fused source: units are the ``L/k`` blocks (``k`` baked in as ``TRP_K``; a block may
        straddle two words), ``acc[0]`` sums ``k - trap(u)``."""
        mask = (1 << self.k) - 1
        return (
            _ACC1
            + f"#define TRP_K {self.k}\n#define TRP_MASK 0x{mask:x}u\n"
            + r"""ISLES_DEV int obj_units(int n_bits) { return n_bits / TRP_K; }
ISLES_DEV void obj_unit(T* acc, const unsigned int* row, int u, int n_bits) {
    (void)n_bits;
    const int b = u * TRP_K;
    const int w = b >> 5, o = b & 31;
    unsigned int bits = row[w] >> o;
    if (o + TRP_K > 32) bits |= row[w + 1] << (32 - o);
    const int ones = t_popc(bits & TRP_MASK);
    acc[0] += (ones == TRP_K) ? (T)0 : (T)(ones + 1);
}
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0]; }
"""
        )


def knapsack_instance(n_items: int, kind: str = "uncorrelated", seed: int = 0, R: int = 1000):
    """Pisinger's (2005) instance generators: ``(weights, values)``, int64 arrays of shape ``(n,)``.

    * ``"uncorrelated"``: ``w_j``, ``p_j`` independent uniform integers in ``[1, R]``;
    * ``"strongly_correlated"``: ``w_j`` uniform in ``[1, R]``, ``p_j = w_j + R // 10`` (integer
      division, as Pisinger's generator ``genhard.c``).

    Draws with ``numpy.random.default_rng(seed)``: ``w`` first, then (uncorrelated) ``p``.

    Raises:
        ValueError: unknown ``kind`` (the message lists :data:`KNAPSACK_KINDS`), ``n_items`` or
            ``R`` not an integer >= 1.
    """
    n = positive_int("n_items", n_items)
    R = positive_int("R", R)
    if kind not in KNAPSACK_KINDS:
        raise ValueError(f"problem.kind={kind!r}: allowed values are {'|'.join(KNAPSACK_KINDS)}")
    rng = np.random.default_rng(seed)
    w = rng.integers(1, R + 1, size=n, dtype=np.int64)
    p = rng.integers(1, R + 1, size=n, dtype=np.int64) if kind == "uncorrelated" else w + R // 10
    return w, p


def knapsack_optimum(weights, values, capacity) -> tuple[int, np.ndarray]:
    """Exact 0/1 knapsack optimum by dynamic programming over capacities (for small instances).

    ``O(n C)`` time and ``n (C + 1)`` bytes of memory with ``C = floor(capacity)``.

    Args:
        weights, values: non-negative integers, shape ``(n,)``.
        capacity: the knapsack capacity (a number >= 0; only ``floor(capacity)`` matters for
            integer weights).

    Returns:
        ``(best_value, x)``: the largest ``sum p_j x_j`` with ``sum w_j x_j <= capacity`` and one
        optimal ``x`` (uint8 0/1, shape ``(n,)``).

    Raises:
        ValueError: shapes differ, negative or non-integer data, or ``capacity < 0``.
    """
    w = np.asarray(weights)
    p = np.asarray(values)
    if w.shape != p.shape or w.ndim != 1:
        raise ValueError(f"knapsack_optimum: weights {w.shape} and values {p.shape} must be equal 1-d shapes")
    if not (np.all(w == np.floor(w)) and np.all(p == np.floor(p)) and np.all(w >= 0) and np.all(p >= 0)):
        raise ValueError("knapsack_optimum: weights and values must be non-negative integers")
    if not capacity >= 0:
        raise ValueError(f"knapsack_optimum: capacity={capacity!r} must be >= 0")
    w, p = w.astype(np.int64), p.astype(np.int64)
    C = int(math.floor(capacity))
    n = w.size
    dp = np.zeros(C + 1, dtype=np.int64)  # dp[c]: best value of the items so far within capacity c
    take = np.zeros((n, C + 1), dtype=bool)
    for i in range(n):
        wi, pi = int(w[i]), int(p[i])
        if wi > C:
            continue
        cand = dp[: C + 1 - wi] + pi
        better = cand > dp[wi:]
        take[i, wi:] = better
        dp[wi:] = np.where(better, cand, dp[wi:])  # right side read before the write (a copy)
    x = np.zeros(n, dtype=np.uint8)
    c = C
    for i in range(n - 1, -1, -1):
        if take[i, c]:
            x[i] = 1
            c -= int(w[i])
    return int(dp[C]), x


class Knapsack(BitProblem):
    """0/1 knapsack as constrained minimisation (Pisinger 2005 instances); id ``knapsack``.

    ``f(B) = -sum_j p_j B_j`` and one constraint ``g(B) = sum_j w_j B_j - capacity <= 0``
    (``constraint_scale = capacity``, so the normalised violation is the relative overweight).
    ``n_bits = n_items``. Instances: :func:`knapsack_instance` (uncorrelated or strongly
    correlated, ``R`` the data range, ``numpy.random.default_rng(seed)``); capacity defaults to
    ``floor(sum_j w_j / 2)``. ``f_star = -optimum`` (:func:`knapsack_optimum`) when
    ``n_items * capacity <= 2e7``, else ``None``.

    Attributes:
        weights, values: int64 arrays ``(n_items,)``; capacity: float; kind, seed, R.

    Args:
        n_items: number of items (default 100).
        kind: ``"uncorrelated"`` or ``"strongly_correlated"``.
        seed: instance seed.
        R: data range (an integer >= 1, default 1000).
        capacity: a number > 0, or ``None`` for ``floor(sum w / 2)``.

    Raises:
        ValueError: one line naming the field: ``problem.kind`` (unknown, lists the allowed
            values), ``problem.capacity`` (``<= 0``), ``problem.n_items`` / ``problem.R`` (not an
            integer >= 1), or a generated instance whose data do not fit in 32-bit integers.
    """

    name = "knapsack"
    n_constraints = 1

    def __init__(
        self,
        n_items: int = 100,
        kind: str = "uncorrelated",
        seed: int = 0,
        R: int = 1000,
        capacity: float | None = None,
    ):
        if capacity is not None and not (
            isinstance(capacity, (int, float, np.integer, np.floating))
            and not isinstance(capacity, (bool, np.bool_))
            and capacity > 0
        ):
            raise ValueError(f"problem.capacity={capacity!r}: allowed values are numbers > 0")
        w, p = knapsack_instance(n_items, kind, seed, R)
        if max(int(w.max()), int(p.max())) >= 2**31:
            raise ValueError(f"problem.R={R!r}: allowed values are integers in [1, 1900000000]")
        self.kind, self.seed, self.R = kind, int(seed), int(R)
        self.weights, self.values = w, p
        cap = float(math.floor(int(w.sum()) / 2)) if capacity is None else float(capacity)
        if not cap > 0:  # the default of a one-item instance with w = 1
            raise ValueError(f"problem.capacity={cap!r}: allowed values are numbers > 0")
        self.capacity = cap
        f_star = None
        if int(n_items) * cap <= KNAPSACK_DP_LIMIT:
            f_star = -float(knapsack_optimum(w, p, cap)[0])
        self._dev: dict = {}
        super().__init__(n_items, f_star=f_star, constraint_scale=[cap], field="n_items")

    def _data(self, xp):
        """``(values, weights)`` as float64 arrays of ``xp`` (cached per module)."""
        key = xp.__name__
        if key not in self._dev:
            self._dev[key] = (xp.asarray(self.values, dtype=xp.float64), xp.asarray(self.weights, dtype=xp.float64))
        return self._dev[key]

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_dev"] = {}  # device copies do not travel (pickling for Ray actors)
        return d

    def objective(self, B):
        """``f = -sum_j p_j B_j`` of shape ``B.shape[:-1]`` (float64, exact)."""
        xp = array_namespace(B)
        p, _ = self._data(xp)
        return -xp.matmul(xp.asarray(B, dtype=xp.float64), p)

    def constraints(self, B):
        """``g = sum_j w_j B_j - capacity`` of shape ``B.shape[:-1] + (1,)`` (float64)."""
        xp = array_namespace(B)
        _, w = self._data(xp)
        return xp.expand_dims(xp.matmul(xp.asarray(B, dtype=xp.float64), w) - self.capacity, axis=-1)

    def describe(self) -> dict:
        """:meth:`BitProblem.describe` plus the instance parameters."""
        d = super().describe()
        d.update(kind=self.kind, seed=self.seed, R=self.R, capacity=self.capacity)
        return d

    @property
    def cuda_objective(self) -> str:
        """Fused source: units are the items; ``acc[0]`` sums the chosen values, ``acc[1]`` the
        chosen weights; weights, values (``ksp_w``, ``ksp_p``, int) and the capacity are baked in.
        ``obj_violation = max(0, (acc[1] - capacity) / capacity)``."""

        def arr(name, a):
            body = ",".join(str(int(v)) for v in a)
            return f"KSP_CONST int {name}[{a.size}] = {{{body}}};\n"

        return (
            "#define OBJ_NACC 2\n#define OBJ_HAS_V 1\n"
            "#ifdef ISLES_HOST_EMU\n#define KSP_CONST static const\n#else\n"
            "#define KSP_CONST __device__ const\n#endif\n"
            + arr("ksp_w", self.weights)
            + arr("ksp_p", self.values)
            + f"#define KSP_CAP ((T){self.capacity!r})\n"
            + r"""ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; acc[1] += other[1]; }
ISLES_DEV int obj_units(int n_bits) { return n_bits; }
ISLES_DEV void obj_unit(T* acc, const unsigned int* row, int u, int n_bits) {
    (void)n_bits;
    if ((row[u >> 5] >> (u & 31)) & 1u) { acc[0] += (T)ksp_p[u]; acc[1] += (T)ksp_w[u]; }
}
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return -acc[0]; }
ISLES_DEV T obj_violation(const T* acc, int n) {
    (void)n;
    const T g = (acc[1] - KSP_CAP) / KSP_CAP;
    return g > (T)0 ? g : (T)0;
}
"""
        )
