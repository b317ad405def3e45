"""CPU tests of the matrix-form DE (algorithms/de/de.py): strategies, bounds, NaN handling,
selection, parameters, the migration interface and the fused kernel's source on the host; its
index draws and crossovers are tested in ``test_de_operators.py``.

Seed 004: Algorithms 2-10. Fast (a few seconds) and CI-safe: NumPy only.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from isles.algorithms.core.base import Context
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.de.crossover import binomial_mask
from isles.algorithms.de.de import (
    DE,
    N_RANDOM,
    STRATEGIES,
    DEParams,
    apply_bounds,
    mutant_vectors,
    sample_indices,
    select,
)
from isles.problems.base import ScalableProblem
from isles.problems.constraints import Evaluator

CROSSOVERS = ("bin", "exp", "nec")
BOUNDS = ("clip", "reflect", "reinit")


class _Sphere(ScalableProblem):
    """Sphere, optionally shifted: ``sum (x - shift)^2`` (local, independent of the registry)."""

    name = "test_sphere"

    def __init__(self, dim=10, lower=-100.0, upper=100.0, shift=0.0):
        super().__init__(dim, lower, upper, f_star=0.0)
        self.shift = shift

    def objective(self, X):
        Y = X - self.shift
        return (Y * Y).sum(axis=-1)


class _NaNHalf(ScalableProblem):
    """Sphere, but NaN wherever ``x_0 > 0`` (NaN must rank worst)."""

    name = "test_nan_half"

    def __init__(self, dim=5):
        super().__init__(dim, -10.0, 10.0, f_star=0.0)

    def objective(self, X):
        f = (X * X).sum(axis=-1)
        return np.where(X[..., 0] > 0, np.nan, f)


def _ctx(problem, seed=1, streams=(0, 1), dtype=np.float64):
    return Context(np, dtype, Evaluator(problem), CounterRNG(np, seed, list(streams)))


# ---------------------------------------------------------------------------------------------
# every strategy x crossover runs and improves the sphere
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy,crossover", list(itertools.product(STRATEGIES, CROSSOVERS)))
def test_every_strategy_and_crossover_improves_sphere(strategy, crossover):
    ctx = _ctx(_Sphere(10))
    de = DE(pop_size=30, F=0.7, CR=0.9, strategy=strategy, crossover=crossover)
    s = de.init(ctx)
    f0 = s["f"].min(axis=1)
    for _ in range(150):
        prev = s["f"]
        s = de.step(ctx, s)
        assert np.all(s["f"] <= prev)  # greedy selection never makes an individual worse
    assert s["generation"] == 150 and s["evals"] == 30 * 151
    assert s["X"].shape == (2, 30, 10) and s["f"].shape == (2, 30)
    assert np.all(s["f"].min(axis=1) < 0.2 * f0)
    assert int(s["nan_evals"]) == 0


def test_rand1_trial_is_the_textbook_formula():
    """U = where(mask, x_r0 + F (x_r1 - x_r2), x) with the module's own draws (no bound hits)."""
    ctx = _ctx(_Sphere(6, lower=-1e6, upper=1e6))
    de = DE(pop_size=8, F=0.6, CR=0.4, crossover="bin")
    s = de.init(ctx)
    s = {**s, "X": s["X"] * 1e-3, "generation": 17}
    U = de.trial(ctx, s)
    r = sample_indices(ctx.rng, 17, 8, 3)
    mask = binomial_mask(ctx.rng, 17, 8, 6, 0.4, np.float64)
    X = s["X"]
    for isl in range(2):
        for i in range(8):
            v = X[isl, r[isl, i, 0]] + 0.6 * (X[isl, r[isl, i, 1]] - X[isl, r[isl, i, 2]])
            np.testing.assert_array_equal(U[isl, i], np.where(mask[isl, i], v, X[isl, i]))


# ---------------------------------------------------------------------------------------------
# bound handling
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", BOUNDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_apply_bounds_keeps_points_in_the_box(kind, dtype):
    rng = CounterRNG(np, 4, [0, 1])
    lo = np.array([-1.0, 0.0, 2.0, 5.0], dtype=dtype)
    hi = np.array([2.0, 1e-3, 2.0, 1e4], dtype=dtype)  # includes a zero-width coordinate
    V = (rng.uniform(0, 9, (500, 4), np.float64) - 0.5) * 1e5
    V = V.astype(dtype)
    W = apply_bounds(kind, V, lo, hi, rng, 3)
    assert W.dtype == np.dtype(dtype)
    assert np.all(lo <= W) and np.all(hi >= W)
    inside = (lo <= V) & (hi >= V)
    np.testing.assert_array_equal(W[inside], V[inside])  # untouched bit for bit


def test_reflect_values():
    lo, hi = np.zeros(1), np.ones(1)
    V = np.array([1.25, -0.25, 2.5, -1.5, 3.0, 0.5]).reshape(1, -1, 1)
    W = apply_bounds("reflect", V, lo, hi)
    np.testing.assert_allclose(W.ravel(), [0.75, 0.25, 0.5, 0.5, 1.0, 0.5])
    np.testing.assert_array_equal(apply_bounds("clip", V, lo, hi).ravel(), [1, 0, 1, 0, 1, 0.5])


@pytest.mark.parametrize("kind", BOUNDS)
def test_de_keeps_population_in_the_box(kind):
    """Optimum outside the box: mutants leave it all the time; the population never does."""
    prob = _Sphere(6, lower=-1.0, upper=1.0, shift=5.0)
    for dtype in (np.float64, np.float32):
        ctx = _ctx(prob, dtype=dtype)
        de = DE(pop_size=12, F=1.5, CR=0.9, bound_handling=kind)
        s = de.init(ctx)
        f0 = s["f"].min(axis=1)
        for _ in range(40):
            s = de.step(ctx, s)
            assert np.all(s["X"] >= ctx.lower) and np.all(s["X"] <= ctx.upper)
        assert np.all(s["f"].min(axis=1) < f0)  # moved towards the corner nearest the optimum


# ---------------------------------------------------------------------------------------------
# NaN handling and selection
# ---------------------------------------------------------------------------------------------
def test_nan_objective_is_treated_as_worst():
    ctx = _ctx(_NaNHalf(5), seed=3)
    de = DE(pop_size=16, F=0.8, CR=0.9)
    s = de.init(ctx)
    assert np.all(np.isinf(s["f"][s["X"][..., 0] > 0]))  # NaN -> +inf
    n0 = int(s["nan_evals"])
    assert n0 > 0
    for _ in range(40):
        prev = s
        s = de.step(ctx, s)
        assert not np.any(np.isnan(s["f"]))
        finite = np.isfinite(prev["f"])
        assert np.all(np.isfinite(s["f"][finite]))  # a NaN trial never replaces a finite target
        assert np.all(s["f"] <= prev["f"])
    assert int(s["nan_evals"]) > n0
    assert np.all(s["X"][..., 0][np.isfinite(s["f"])] <= 0)
    assert np.all(np.isfinite(s["f"].min(axis=1)))


def test_select_is_greedy_under_debs_rules():
    X = np.zeros((1, 4, 2))
    U = np.ones((1, 4, 2))
    state = {
        "X": X,
        "f": np.array([[1.0, np.inf, 3.0, 2.0]]),
        "v": np.array([[0.0, 0.0, 0.5, 0.0]]),
        "generation": 5,
        "evals": 8,
        "nan_evals": np.asarray(0),
    }
    fu = np.array([[np.inf, 5.0, 100.0, 2.0]])  # NaN trial (inf), better, feasible vs infeasible, tie
    vu = np.array([[0.0, 0.0, 0.0, 0.0]])
    s = select(np, state, U, fu, vu, np.asarray(1))
    np.testing.assert_array_equal(s["X"][0, :, 0], [0, 1, 1, 1])
    np.testing.assert_array_equal(s["f"][0], [1.0, 5.0, 100.0, 2.0])
    assert s["generation"] == 6 and s["evals"] == 12 and int(s["nan_evals"]) == 1


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"CR": 1.5}, "algorithm.CR"),
        ({"CR": -0.1}, "algorithm.CR"),
        ({"F": 0}, "algorithm.F"),
        ({"F": -0.5}, "algorithm.F"),
        ({"F": 2.5}, "algorithm.F"),
        ({"pop_size": 5, "strategy": "rand/2"}, "algorithm.pop_size"),
        ({"pop_size": 3, "strategy": "rand/1"}, "algorithm.pop_size"),
        ({"pop_size": 2, "strategy": "best/1"}, "algorithm.pop_size"),
        ({"pop_size": 2, "strategy": "current-to-best/1"}, "algorithm.pop_size"),
        ({"pop_size": 10.5}, "algorithm.pop_size"),
        ({"strategy": "rand/3"}, "algorithm.strategy"),
        ({"crossover": "uniform"}, "algorithm.crossover"),
        ({"bound_handling": "wrap"}, "algorithm.bound_handling"),
        ({"fused": "yes"}, "algorithm.fused"),
    ],
)
def test_params_errors_name_the_field(kwargs, field):
    with pytest.raises(ValueError) as e:
        DEParams(**kwargs)
    msg = str(e.value)
    assert msg.startswith(field + "=") and "allowed values" in msg and "\n" not in msg


def test_params_error_messages_list_allowed_values():
    with pytest.raises(ValueError, match=r"rand/1\|best/1\|current-to-best/1\|rand/2"):
        DEParams(strategy="rand/3")
    with pytest.raises(ValueError, match=r"bin\|exp\|nec"):
        DEParams(crossover="uniform")
    with pytest.raises(ValueError, match=r"integers >= 6.*rand/2"):
        DEParams(pop_size=5, strategy="rand/2")


def test_params_accept_the_edges():
    assert DEParams(pop_size=6, strategy="rand/2").pop_size == 6
    assert DEParams(pop_size=4, strategy="rand/1").pop_size == 4
    assert DEParams(pop_size=3, strategy="best/1").pop_size == 3
    assert DEParams(pop_size=3, strategy="current-to-best/1").pop_size == 3
    p = DEParams(CR=0, F=2)
    assert p.CR == 0.0 and p.F == 2.0 and isinstance(p.CR, float)
    assert DEParams(CR=1).CR == 1.0
    for s, k in N_RANDOM.items():
        assert DEParams(strategy=s, pop_size=k + 1).pop_size == k + 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEParams().F = 1.0  # frozen


# ---------------------------------------------------------------------------------------------
# state, migration interface, reproducibility
# ---------------------------------------------------------------------------------------------
def test_population_and_replace():
    ctx = _ctx(_Sphere(4))
    de = DE(pop_size=6)
    s = de.init(ctx)
    assert s["generation"] == 0 and s["evals"] == 6 and np.asarray(s["nan_evals"]).shape == ()
    pop = de.population(s)
    assert pop.genome.shape == (2, 6, 4) and pop.f.shape == pop.v.shape == (2, 6) and not pop.extras
    idx = np.array([[0, 5], [2, 3]])
    Xi = np.full((2, 2, 4), 0.5)
    fi = np.full((2, 2), 1.0)
    vi = np.zeros((2, 2))
    s2 = de.replace(ctx, s, idx, Population(Xi, fi, vi))
    assert np.all(s2["X"][0, [0, 5]] == 0.5) and np.all(s2["X"][1, [2, 3]] == 0.5)
    assert np.all(s2["f"][0, [0, 5]] == 1.0)
    assert not np.any(s["X"] == 0.5)  # the old state is untouched
    np.testing.assert_array_equal(s2["X"][0, 1:5], s["X"][0, 1:5])
    b = de.best(s2)
    assert b.genome.shape == (2, 1, 4) and b.f.shape == (2, 1)


def test_reproducible_and_independent_of_batching():
    prob = _Sphere(5)
    de = DE(pop_size=8, crossover="nec", CR=0.5)
    a = de.run(_ctx(prob, seed=7, streams=(0, 1)), de.init(_ctx(prob, seed=7, streams=(0, 1))), 20)
    b = de.run(_ctx(prob, seed=7, streams=(0, 1)), de.init(_ctx(prob, seed=7, streams=(0, 1))), 20)
    np.testing.assert_array_equal(a["X"], b["X"])
    ctx1 = _ctx(prob, seed=7, streams=(1,))
    c = de.run(ctx1, de.init(ctx1), 20)
    np.testing.assert_array_equal(a["X"][1], c["X"][0])  # island 1 alone == island 1 in a batch


def test_mutant_strategies_formulas():
    rng = CounterRNG(np, 1, [0])
    X = rng.uniform(0, 0, (7, 3))
    r = sample_indices(rng, 0, 7, 5)
    best = np.array([2])
    x = lambda m: X[0, r[0, :, m]]  # noqa: E731
    np.testing.assert_allclose(mutant_vectors(X, r, "rand/2", 0.5)[0], x(0) + 0.5 * (x(1) - x(2)) + 0.5 * (x(3) - x(4)))
    np.testing.assert_allclose(mutant_vectors(X, r, "best/1", 0.5, best)[0], X[0, 2] + 0.5 * (x(0) - x(1)))
    np.testing.assert_allclose(
        mutant_vectors(X, r, "current-to-best/1", 0.5, best)[0], X[0] + 0.5 * (X[0, 2] - X[0]) + 0.5 * (x(0) - x(1))
    )
    with pytest.raises(ValueError, match="best index"):
        mutant_vectors(X, r, "best/1", 0.5)


def test_numpy_never_builds_a_fused_plan():
    ctx = _ctx(_Sphere(4))
    assert DE(pop_size=6).fused_plan(ctx) is None


# ---------------------------------------------------------------------------------------------
# the fused kernel's source (algorithms/de/cuda.py) on the CPU: the objective comes from the problem
# ---------------------------------------------------------------------------------------------
def _fake_cupy_ctx(problem, dtype=np.float32, handling="feasibility"):
    from types import SimpleNamespace  # noqa: PLC0415

    return SimpleNamespace(
        xp=SimpleNamespace(__name__="cupy"),
        dtype=np.dtype(dtype),
        evaluator=Evaluator(problem, handling),
        dim=problem.dim,
        n_islands=2,
    )


def _real_problems_with_source():
    from isles.problems.registry import PROBLEMS, make_problem  # noqa: PLC0415

    out = []
    for name, cls in PROBLEMS.items():
        if getattr(cls, "genome", "real") != "real" or cls.n_constraints:
            continue
        p = make_problem(name, dim=40)
        if p.cuda_objective is not None:
            out.append(p)
    return out


def test_fused_kernel_source_has_no_problem_names_and_compiles_on_the_host():
    """The DE kernel includes the problem's cuda_objective and never switches on its name; the
    source (its host-visible part: prelude, objective, decisions, trial coordinates) compiles as
    C++ under ISLES_HOST_EMU."""
    import re  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from isles.algorithms.de import cuda_source as de_source  # noqa: PLC0415  (imports no CuPy)
    from isles.problems.registry import PROBLEMS  # noqa: PLC0415

    assert not hasattr(de_source, "PROBLEM_IDS")
    names = set(PROBLEMS) | {c.__name__ for c in PROBLEMS.values()} | {"schwefel", "trap", "onemax"}
    probs = _real_problems_with_source()
    assert {p.name for p in probs} == {"sphere", "rastrigin", "ackley", "griewank", "rosenbrock", "schwefel_2_26"}
    gxx = shutil.which("g++")
    for p in probs:
        for dtype in (np.float32, np.float64):
            src = de_source.kernel_source(dtype, p.dim, 12, p.cuda_objective, "nec", "reflect")
            assert p.cuda_objective in src
            rest = src.replace(p.cuda_objective, "").lower()
            assert not any(n.lower() in rest for n in names), p.name
            assert not re.search(r"\bPROB\b", rest.upper())
            if gxx is not None:
                with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as fh:
                    fh.write(src)
                res = subprocess.run(
                    [gxx, "-x", "c++", "-fsyntax-only", "-DISLES_HOST_EMU", fh.name], capture_output=True, text=True
                )
                assert res.returncode == 0, res.stderr


def test_fused_unsupported_reasons_come_from_the_contract():
    from isles.algorithms.de import cuda_source as de_source  # noqa: PLC0415
    from isles.problems.registry import make_problem  # noqa: PLC0415

    params = DEParams(pop_size=10)
    for p in _real_problems_with_source():
        assert de_source.unsupported_reason(params, _fake_cupy_ctx(p)) is None, p.name
    assert (
        de_source.unsupported_reason(params, _fake_cupy_ctx(make_problem("schwefel_1_2", dim=5)))
        == "problem has no cuda_objective"
    )
    assert (
        de_source.unsupported_reason(params, _fake_cupy_ctx(make_problem("spring"), np.float64))
        == "problem has no cuda_objective"
    )
    assert de_source.unsupported_reason(params, _fake_cupy_ctx(_Sphere(4))) == "problem has no cuda_objective"
    assert "genome" in de_source.unsupported_reason(params, _fake_cupy_ctx(make_problem("onemax", n_bits=8)))

    class ConstrainedNoV(_Sphere):
        n_constraints = 1
        cuda_objective = make_problem("sphere", dim=3).cuda_objective

        def __init__(self):
            super().__init__(3)
            self.constraint_scale = np.ones(1)

    assert "OBJ_HAS_V 0" in de_source.unsupported_reason(params, _fake_cupy_ctx(ConstrainedNoV()))

    class NoMacros(_Sphere):
        cuda_objective = "ISLES_DEV void obj_init(T* acc) {}"

    assert "lacks #define" in de_source.unsupported_reason(params, _fake_cupy_ctx(NoMacros(4)))
    big = make_problem("rosenbrock", dim=7000)  # OBJ_NEXT: the float64 row does not fit 48 KiB
    assert "shared memory" in de_source.unsupported_reason(params, _fake_cupy_ctx(big, np.float64))
    assert de_source.unsupported_reason(params, _fake_cupy_ctx(make_problem("ackley", dim=7000), np.float64)) is None
