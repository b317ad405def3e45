"""The problem interface: bounds, constraint count, a batched evaluation and a fused CUDA objective.

A problem evaluates a whole population at once. ``X`` has shape ``(..., D)`` (for example
``(N, D)`` or ``islands x N x D``) and lives on the CPU (NumPy) or the GPU (CuPy); the results
live in the same array module (found with ``array_api_compat.array_namespace``; ``problems``
imports nothing from ``algorithms``):

* ``objective(X) -> f`` of shape ``(...)``;
* ``constraints(X) -> g`` of shape ``(..., m)``, feasible where every ``g <= 0``; a problem
  with equality constraints declares ``n_eq``: the last ``n_eq`` of the ``m`` columns are
  equalities ``h(x) = 0``, satisfied where ``|h| <= eq_tol`` (pagmo's ``get_nec``/``get_nic``,
  with the equalities last).

Bounds are closed boxes ``lower <= x <= upper`` (host NumPy arrays of shape ``(D,)``). This is
pygmo's user-defined-problem interface, batched. A user's own problem subclasses :class:`Problem`
(or provides the same attributes) and plugs in through the config with
``problem._target_=my_module.MyProblem``. Natively binary problems (``genome = "bits"``) take
unpacked bits instead (:class:`Problem`). The fused-objective contract (``cuda_objective``) is
documented on :class:`Problem`.
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Sequence

import numpy as np
from array_api_compat import array_namespace

#: Allowed values of :attr:`Problem.genome`.
GENOMES = ("real", "bits")

#: Integer macros every fused objective defines (``OBJ_NEXT`` only for ``genome == "real"``).
OBJECTIVE_MACROS = ("OBJ_NACC", "OBJ_HAS_V")


class Problem:
    """Base class of every problem (minimisation).

    Attributes:
        name: short id, e.g. ``"welded_beam"``.
        dim: number of decision variables ``D`` (bit problems: ``D = n_bits``).
        n_constraints: number of constraints ``m`` (bounds not counted), inequalities and
            equalities together.
        n_eq: how many of them are equalities ``h(x) = 0``: the **last** ``n_eq`` columns of
            ``constraints(X)`` (default 0; ``0 <= n_eq <= m``). An equality counts as the
            inequality ``|h| - eq_tol <= 0`` wherever a violation is computed
            (:func:`isles.problems.constraints.as_inequalities`).
        eq_tol: the tolerance of the equalities (default ``1e-4``, the CEC 2006/2010
            convention); a run sets it from ``constraints.eq_tol``
            (:func:`isles.islands.config.build.build_problem`).
        lower, upper: float64 arrays of shape ``(D,)``, the closed box (bit problems: 0 and 1).
        f_star: known optimum value, or ``None``.
        constraint_scale: float64 array ``(m,)`` dividing ``g`` before violations are summed
            (normalisation, ``shared/problems.md`` section 0), or ones.
        genome: ``"real"`` (default): ``objective``/``constraints`` take float rows
            ``X (..., D)``. ``"bits"``: a natively binary problem with ``n_bits`` ``L`` (``= D``)
            whose ``objective``/``constraints`` take **unpacked** bits ``B (..., L)``, uint8 0/1.
        n_bits: ``L``, bit problems only.
        cuda_objective: CUDA source of the fused objective (the contract below), or ``None``
            (default: kernels use the generic path, i.e. call ``objective``/``constraints``).
            An attribute or a property; instance data and parameters are baked into the text, so
            two instances with different data give different sources.
        cuda_row: CUDA source of the per-row contract (below), or ``None`` (default). Used by
            kernels that evaluate rows they already hold in shared memory (the co-evolutionary
            DE's epoch kernel, through :class:`isles.problems.minmax.AugmentedLagrangian`).
        capture_safe: ``True`` (default): on CuPy, a generation that evaluates this problem as
            array code may be captured once as a CUDA graph and replayed
            (:mod:`isles.algorithms.core.plan`: no host synchronisation, no Python side effects
            in ``objective``/``constraints``). ``False``: always issued call by call.

    **Fused-objective contract** (the only place it is written down). Fused kernels (e.g.
    ``algorithms/de/cuda.py``) include a problem's ``cuda_objective`` and never switch on its
    name. The source is included after ``objective.cuh`` of the CUDA library
    (``algorithms/core/cuda/``, :mod:`isles.algorithms.core.cuda_lib`), so it may use ``T``
    (float if ``IS_F32`` else double), ``ISLES_DEV``, ``T_INF``, ``add_rn``..., ``t_fmod t_cos
    t_sin t_sqrt t_exp t_log t_abs t_tan t_log1p t_pow`` and ``t_popc``; it compiles with NVRTC
    and, with ``-DISLES_HOST_EMU``, as C99 on the host (``problems/cuda_check.py``). It must
    define:

    * ``#define OBJ_NACC n``: the number of accumulators, ``1 <= n <= 4``;
    * ``#define OBJ_HAS_V 0|1``: whether ``obj_violation`` is defined (required when the
      problem has constraints; a kernel must not fuse a constrained problem without it);
    * ``ISLES_DEV void obj_init(T* acc)``: sets ``acc[0..n)`` to identity values (0 for a sum
      slot, 1 for a product slot);
    * ``ISLES_DEV void obj_merge(T* acc, const T* other)``: ``acc <- acc (+) other``, an
      associative and commutative combine per slot (sum or product), so that any partition of the
      coordinates into threads and any reduction tree give the same value up to rounding;
    * ``ISLES_DEV T obj_final(const T* acc, int n)``: ``f`` from the fully merged accumulators;
      ``n = D`` (real) or ``n_bits`` (bits);
    * if ``OBJ_HAS_V``: ``ISLES_DEV T obj_violation(const T* acc, int n)``, the total normalised
      violation ``sum_i max(0, g_i / scale_i)`` (``isles.problems.constraints.total_violation``),
      where an equality ``h`` (``n_eq``) contributes ``max(0, (|h| - eq_tol) / scale_i)``, with
      the problem's ``eq_tol`` baked into the source (kernels check the value against
      ``total_violation`` and run the array path where it differs, e.g. a raw ``h``).

    Real genomes (``genome == "real"``) additionally define ``#define OBJ_NEXT 0|1`` and
    ``ISLES_DEV void obj_term(T* acc, T x, T x_next, int j)``, which folds coordinate ``j`` in
    ``[0, D)`` into ``acc``; ``x_next = x_{j+1}`` when ``OBJ_NEXT`` is 1 and ``j < D - 1``, else 0
    (a kernel only stages the row in shared memory when ``OBJ_NEXT`` is 1).

    Bit genomes (``genome == "bits"``) additionally define ``ISLES_DEV int obj_units(int n_bits)``
    and ``ISLES_DEV void obj_unit(T* acc, const unsigned int* row, int u, int n_bits)``, which
    folds unit ``u`` in ``[0, obj_units(n_bits))`` (a 32-bit word for OneMax, a block of ``k``
    bits for trap-k, an item for the knapsack). ``row`` is the individual's packed genome of
    ``ceil(n_bits / 32)`` words: bit ``b`` is ``(row[b >> 5] >> (b & 31)) & 1``; the padding bits
    of the last word are 0.

    A kernel gives each thread a strided subset of ``j`` (or ``u``), folds them into a private
    ``acc`` started by ``obj_init``, merges the threads' accumulators with ``obj_merge`` and then
    calls ``obj_final`` (and ``obj_violation``). Instance data (e.g. knapsack weights) is baked
    into the source as ``__device__ const`` arrays (``static const`` under ``ISLES_HOST_EMU``)
    whose names carry a prefix unique to the problem class. Kernels still check the fused value
    against ``objective`` (a wrong source must not change results silently).

    **Per-row contract** (``cuda_row``; for objectives and constraints that are not sums over the
    coordinates, e.g. ``x1 x2`` terms). Same include context and C rules as ``cuda_objective``.
    It defines, for one individual's row ``x[0..D)`` (``T``, any memory space):

    * ``#define ROW_M m``: the number of constraints (``n_constraints``);
    * ``ISLES_DEV T row_objective(const T* x)``: ``f``;
    * ``ISLES_DEV T row_constraint(const T* x, int i)``: ``g_i`` for ``i`` in ``[0, m)``, raw
      (before ``constraint_scale``), ``<= 0`` feasible (when ``m >= 1``); for the last ``n_eq``
      values of ``i`` the equality's raw ``h_i`` (the kernel that includes it turns it into
      ``|h_i| - eq_tol``, as the array code does).

    One thread evaluates one row. Written with ``add_rn``/``mul_rn``... in the array code's order
    it agrees with ``objective``/``constraints`` to rounding (``pow`` where NumPy calls it).
    Kernels check it against ``objective``/``constraints`` on random points before use and run
    the array path (with a warning) where it disagrees. Built in: g01, g07, g09, g10, spring, welded beam.

    Raises:
        ValueError: the bounds do not match ``dim`` (field ``problem.lower``/``problem.upper``),
            or ``lower > upper`` somewhere, or ``dim < 1``, or ``n_eq`` is not an integer in
            ``[0, n_constraints]``.
    """

    name: str = "problem"
    n_constraints: int = 0
    n_eq: int = 0
    eq_tol: float = 1e-4
    genome: str = "real"
    cuda_objective: str | None = None
    cuda_row: str | None = None
    capture_safe: bool = True

    def __init__(
        self,
        dim: int,
        lower: Sequence[float] | float,
        upper: Sequence[float] | float,
        f_star: float | None = None,
        constraint_scale: Sequence[float] | None = None,
    ):
        self.dim, self.lower, self.upper = box("", dim, lower, upper)
        self.f_star = None if f_star is None else float(f_star)
        m = self.n_constraints
        scale = np.ones(m) if constraint_scale is None else np.asarray(constraint_scale, dtype=np.float64)
        if scale.shape != (m,):
            raise ValueError(f"problem.constraint_scale has {scale.size} entries: must have n_constraints={m}")
        self.constraint_scale = scale
        check_n_eq(self)

    # -- to override ---------------------------------------------------------------------------
    def objective(self, X):
        """Objective values ``f`` of shape ``X.shape[:-1]`` (to override)."""
        raise NotImplementedError

    def constraints(self, X):
        """Constraint values ``g`` of shape ``X.shape[:-1] + (m,)``; ``g <= 0`` is feasible.

        The default (no constraints) returns an empty ``(..., 0)`` array in ``X``'s dtype.
        """
        xp = array_namespace(X)
        return xp.zeros(X.shape[:-1] + (0,), dtype=X.dtype)

    # -- provided ------------------------------------------------------------------------------
    def evaluate(self, X):
        """Return ``(f, g)`` for a batch ``X`` of shape ``(..., D)``.

        Raises:
            ValueError: ``X.shape[-1] != dim``.
        """
        if X.shape[-1] != self.dim:
            raise ValueError(f"{self.name}: population has {X.shape[-1]} variables, problem.dim is {self.dim}")
        return self.objective(X), self.constraints(X)

    def describe(self) -> dict:
        """Plain-data description for logs: name, dim, m, n_eq, bounds, f*."""
        return {
            "name": self.name,
            "dim": self.dim,
            "n_constraints": self.n_constraints,
            "n_eq": self.n_eq,
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "f_star": self.f_star,
            "genome": self.genome,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, m={self.n_constraints})"


#: The methods a problem's first evaluation names in its errors (the class's own code).
_METHODS = ("objective", "constraints", "evaluate")


class ProblemShapeError(ValueError):
    """A problem's results do not have the interface's shapes or dtypes (:func:`first_evaluation`)."""


def first_evaluation(problem, X):
    """``problem.evaluate(X)`` checked against the interface, for a run's first batch only.

    The results must be ``f`` of shape ``X.shape[:-1]`` and ``g`` of shape ``X.shape[:-1] + (m,)``
    with ``m = problem.n_constraints``, each of a real dtype (bool, integer or floating). Only
    shapes and dtypes are read (host metadata of NumPy and CuPy arrays alike), so the check adds
    no device synchronisation; :class:`isles.problems.constraints.Evaluator` calls it once, then
    calls ``evaluate`` directly.

    An ``IndexError`` raised by the class on this first batch is reported with ``X``'s shape and
    ``problem.dim``: the usual cause is a ``problem.dim`` smaller than the number of variables
    the class reads.

    Returns:
        ``(f, g)`` as ``problem.evaluate`` returned them.

    Raises:
        ProblemShapeError: (a ``ValueError``) one line naming the class, the method, the expected
            and the actual shape (or dtype), e.g. ``TrussFourColumns.constraints returned g of
            shape (1, 40, 4) for X of shape (1, 40, 2): expected (1, 40, 3) (X.shape[:-1] +
            (n_constraints=3,))``; or the class's ``IndexError``, with where it was raised and
            ``X``'s shape.
    """
    cls = type(problem).__name__
    xshape = tuple(X.shape)
    try:
        f, g = problem.evaluate(X)
    except IndexError as err:
        tb = traceback.extract_tb(err.__traceback__)
        method = next((fr.name for fr in reversed(tb) if fr.name in _METHODS), "evaluate")
        raise ProblemShapeError(
            f"{cls}.{method} raised IndexError ({err}) at {tb[-1].filename}:{tb[-1].lineno} on the first batch, "
            f"X of shape {xshape} (problem.dim={problem.dim}): does the class read more variables than "
            f"problem.dim?"
        ) from err
    own = type(problem).evaluate is Problem.evaluate  # else the class's own evaluate() is named
    m = int(problem.n_constraints)
    for what, value, want, method, rule in (
        ("f", f, xshape[:-1], "objective", "X.shape[:-1]"),
        ("g", g, xshape[:-1] + (m,), "constraints", f"X.shape[:-1] + (n_constraints={m},)"),
    ):
        name = f"{cls}.{method if own else 'evaluate'}"
        got = tuple(value.shape) if hasattr(value, "shape") else tuple(np.shape(value))
        if got != want:
            raise ProblemShapeError(
                f"{name} returned {what} of shape {got} for X of shape {xshape}: expected {want} ({rule})"
            )
        dtype = np.dtype(value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype)
        if dtype.kind not in "biuf":
            raise ProblemShapeError(
                f"{name} returned {what} of dtype {dtype}: expected a real dtype (bool, integer or floating)"
            )
    return f, g


def probe_evaluation(problem) -> None:
    """:func:`first_evaluation` of a few individuals at the box's centre (bit problems: all zeros),
    with NumPy on the host, so that results of the wrong shape or dtype stop a run before Ray
    starts (the run's own first evaluation checks again, on its device). The individuals number
    the smallest ``N >= 2`` that is neither ``dim`` nor ``n_constraints`` (2 to 4), so that a
    transposed result cannot pass. Any other error of the problem's code is left to the run,
    which reports it as a failure inside the run.

    Raises:
        ProblemShapeError: as :func:`first_evaluation`.
    """
    D = int(problem.dim)
    n = next(k for k in (2, 3, 4) if k not in (D, int(problem.n_constraints)))
    if getattr(problem, "genome", "real") == "bits":
        X = np.zeros((1, n, D), dtype=np.uint8)
    else:
        X = np.repeat(((np.asarray(problem.lower) + np.asarray(problem.upper)) / 2.0)[None, None, :], n, axis=1)
    try:
        with np.errstate(all="ignore"):
            first_evaluation(problem, X)
    except ProblemShapeError:
        raise
    except Exception:  # noqa: BLE001  (e.g. a problem written for CuPy only: the run reports its own errors)
        pass


def check_n_eq(problem) -> int:
    """``problem.n_eq`` (0 where the problem does not declare it), checked against
    ``problem.n_constraints``.

    Raises:
        ValueError: ``MyProblem.n_eq=3: allowed values are integers 0..n_constraints=2``.
    """
    n_eq, m = getattr(problem, "n_eq", 0), int(problem.n_constraints)
    ok = isinstance(n_eq, (int, np.integer)) and not isinstance(n_eq, (bool, np.bool_)) and 0 <= n_eq <= m
    if not ok:
        raise ValueError(
            f"{type(problem).__name__}.n_eq={n_eq!r}: allowed values are integers "
            f"0..n_constraints={m} (the last n_eq constraints are equalities h = 0)"
        )
    return int(n_eq)


def positive_int(field: str, value) -> int:
    """``int(value)`` where ``value`` is an integer >= 1 (an ``int``, or a float with an integral
    value such as ``4.0``), for the integer fields of problems (``problem.dim``, ``problem.y_dim``,
    ``problem.n_bits``, ``problem.k``, ...).

    Args:
        field: the field without its ``problem.`` prefix, e.g. ``"dim"``.

    Raises:
        ValueError: one line, e.g. ``problem.dim=2.5: allowed values are integers >= 1`` (also for a
            bool, a string, NaN or infinity).
    """
    ok = isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not (ok and math.isfinite(float(value)) and float(value) >= 1 and float(value).is_integer()):
        raise ValueError(f"problem.{field}={value!r}: allowed values are integers >= 1")
    return int(value)


def box(prefix: str, dim, lower, upper) -> tuple[int, np.ndarray, np.ndarray]:
    """A validated closed box: ``(dim, lower (dim,), upper (dim,))`` float64, each bound a
    number or one per variable.

    Args:
        prefix: the fields' prefix, ``""`` (``problem.dim``, ``problem.lower``, ...) or ``"y_"``
            (a min-max problem's y box: ``problem.y_dim``, ``problem.y_lower``, ...).

    Raises:
        ValueError: ``dim`` not an integer >= 1 (:func:`positive_int`), a bound that is not a
            number, not finite or of the wrong length, or ``lower > upper`` somewhere (one line
            naming the field as the user types it and the allowed values).
    """
    dim = positive_int(f"{prefix}dim", dim)
    lo = _bound_vector(f"{prefix}lower", lower, dim, f"{prefix}dim")
    hi = _bound_vector(f"{prefix}upper", upper, dim, f"{prefix}dim")
    bad = np.nonzero(lo > hi)[0]
    if bad.size:
        raise ValueError(
            f"problem.{prefix}lower > problem.{prefix}upper at variable(s) {bad.tolist()}: "
            "bounds must satisfy lower <= upper"
        )
    return dim, lo, hi


def _bound_vector(field: str, value, dim: int, dim_field: str = "dim") -> np.ndarray:
    """``value`` (a number or ``dim`` numbers) as a finite float64 array ``(dim,)``; a one-line
    ``ValueError`` naming ``problem.<field>`` otherwise (a string such as ``abc``, NaN, infinity)."""
    shown = value.tolist() if isinstance(value, np.ndarray) else value
    allowed = "allowed values are finite numbers (one number, or one per variable)"
    try:
        if isinstance(value, (bool, np.bool_, str, bytes)):
            raise TypeError(value)
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"problem.{field}={shown!r}: {allowed}") from None
    if arr.dtype == object or not np.all(np.isfinite(arr)):
        raise ValueError(f"problem.{field}={shown!r}: {allowed}")
    if arr.ndim == 0:
        return np.full(dim, float(arr))
    arr = arr.reshape(-1)
    if arr.size != dim:
        raise ValueError(
            f"problem.{field} has {arr.size} entries but problem.{dim_field}={dim}: "
            f"give one bound per variable or a single number"
        )
    return arr


class ScalableProblem(Problem):
    """An unconstrained problem of any dimension with the same bounds on every coordinate.

    Args:
        dim: dimension ``D``.
        lower, upper: per-coordinate bound(s), a number or ``D`` numbers.
    """

    default_bounds: tuple[float, float] = (-100.0, 100.0)

    def __init__(self, dim: int = 30, lower=None, upper=None, f_star: float | None = 0.0):
        lo, hi = self.default_bounds
        super().__init__(dim, lo if lower is None else lower, hi if upper is None else upper, f_star)


def objective_macros(source: str, genome: str = "real") -> dict[str, int]:
    """The integer macros of a fused objective (``#define NAME <int>``), checked.

    Args:
        source: a :attr:`Problem.cuda_objective` text.
        genome: ``"real"`` (``OBJ_NEXT`` is then required too) or ``"bits"``.

    Returns:
        ``{"OBJ_NACC": n, "OBJ_HAS_V": 0|1}`` plus ``"OBJ_NEXT"`` for real genomes.

    Raises:
        ValueError: a required macro is missing or out of range (``OBJ_NACC`` in 1..4, the
            flags 0 or 1), or ``genome`` is not one of :data:`GENOMES`.
    """
    if genome not in GENOMES:
        raise ValueError(f"problem.genome={genome!r}: allowed values are {'|'.join(GENOMES)}")
    pattern = r"^\s*#\s*define\s+(OBJ_[A-Z_]+)\s+(\d+)\b"
    found = {m.group(1): int(m.group(2)) for m in re.finditer(pattern, source, re.M)}
    need = OBJECTIVE_MACROS + (("OBJ_NEXT",) if genome == "real" else ())
    missing = [k for k in need if k not in found]
    if missing:
        raise ValueError(f"cuda_objective lacks #define {', '.join(missing)}")
    out = {k: found[k] for k in need}
    if not 1 <= out["OBJ_NACC"] <= 4:
        raise ValueError(f"cuda_objective: OBJ_NACC={out['OBJ_NACC']}: allowed values are 1..4")
    for k in need[1:]:
        if out[k] not in (0, 1):
            raise ValueError(f"cuda_objective: {k}={out[k]}: allowed values are 0|1")
    return out
