"""The fused-objective contract (isles.problems.base.Problem.cuda_objective), checked on the CPU.

Every problem with a source is compiled as C (``-DISLES_HOST_EMU``, problems/cuda_check.py) and
evaluated row by row (obj_init, obj_term/obj_unit for every j/u, obj_merge of emulated threads,
obj_final, obj_violation); the result must match ``problem.objective`` (and the Evaluator's
violation) on random points: float64 to 1e-12 and float32 to 1e-5 relative (``|a - b| / (1 +
|b|)``), exactly for the binary problems. Skipped where gcc is missing.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.core.cuda_prelude import ARITHMETIC, HASH, MATH
from isles.problems.base import objective_macros
from isles.problems.constraints import Evaluator
from isles.problems.cuda_check import compiler, host_objective, pack_bits_le
from isles.problems.registry import PROBLEMS, make_problem

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler (gcc)")

PRELUDE = HASH + ARITHMETIC + MATH
RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}

REAL_CASES = [
    ("sphere", {"dim": 33}),
    ("rastrigin", {"dim": 30}),
    ("ackley", {"dim": 100}),
    ("ackley", {"dim": 7, "b": 0.02}),
    ("griewank", {"dim": 50}),
    ("rosenbrock", {"dim": 20}),
    ("rosenbrock", {"dim": 1}),
    ("schwefel_2_26", {"dim": 32}),
]
BIT_CASES = [
    ("onemax", {"n_bits": 77}),
    ("onemax", {"n_bits": 64}),
    ("trap5", {"n_bits": 95}),
    ("trap5", {"n_bits": 40, "k": 4}),
    ("trap5", {"n_bits": 96, "k": 32}),
    ("knapsack", {"n_items": 70}),
    ("knapsack", {"n_items": 33, "kind": "strongly_correlated", "seed": 3, "capacity": 900.5}),
]
DTYPES = [np.float64, np.float32]


def _rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / (1.0 + np.abs(b))))


def _points(prob, n, dtype, seed=0):
    rs = np.random.default_rng(seed)
    lo, hi = prob.lower, prob.upper
    P = lo + rs.random((n, prob.dim)) * (hi - lo)
    mid = 0.5 * (lo + hi)
    P = np.concatenate([P, mid + 1e-3 * (P - mid), mid[None, :]])
    return P.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,kw", REAL_CASES, ids=lambda c: str(c))
def test_real_source_matches_objective(name, kw, dtype):
    prob = make_problem(name, **kw)
    h = host_objective(prob, PRELUDE, dtype)
    X = _points(prob, 40, dtype)
    fref = prob.objective(X)
    assert fref.dtype == np.dtype(dtype)
    for n_threads in (1, 3, 32):  # any partition of j + obj_merge gives the same value
        f, v = h(X, n_threads)
        assert _rel_err(f, fref) <= RTOL[np.dtype(dtype)], (name, n_threads)
        assert np.all(v == 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,kw", BIT_CASES, ids=lambda c: str(c))
def test_bit_source_matches_objective_exactly(name, kw, dtype):
    prob = make_problem(name, **kw)
    h = host_objective(prob, PRELUDE, dtype)
    rs = np.random.default_rng(1)
    L = prob.n_bits
    B = (rs.random((60, L)) < rs.random((60, 1))).astype(np.uint8)
    B = np.concatenate([B, np.zeros((1, L), np.uint8), np.ones((1, L), np.uint8)])
    fref, vref, _ = Evaluator(prob)(B, dtype=dtype)
    for n_threads in (1, 5):
        f, v = h(B, n_threads)
        np.testing.assert_array_equal(f, fref)
        np.testing.assert_array_equal(v, vref)
    feas = vref == 0
    assert prob.f_star is None or fref[feas].min() >= prob.f_star  # nothing feasible beats f*


def test_every_source_declares_valid_macros():
    for name, kw in REAL_CASES + BIT_CASES:
        prob = make_problem(name, **kw)
        m = objective_macros(prob.cuda_objective, prob.genome)
        assert 1 <= m["OBJ_NACC"] <= 4
        assert m["OBJ_HAS_V"] == int(prob.n_constraints > 0)
    assert objective_macros(make_problem("rosenbrock", dim=5).cuda_objective)["OBJ_NEXT"] == 1
    assert objective_macros(make_problem("ackley", dim=5).cuda_objective)["OBJ_NEXT"] == 0


def test_which_problems_have_a_source():
    with_src = {n for n, c in PROBLEMS.items() if _make_default(n).cuda_objective is not None}
    assert with_src == {
        "sphere",
        "rastrigin",
        "ackley",
        "griewank",
        "rosenbrock",
        "schwefel_2_26",
        "onemax",
        "trap5",
        "knapsack",
    }


def _make_default(name):
    return (
        make_problem(name, dim=4)
        if name in {"sphere", "rastrigin", "ackley", "griewank", "rosenbrock", "schwefel_2_26", "schwefel_1_2"}
        else make_problem(name)
    )


def test_parameters_are_baked_into_the_source():
    a, b = make_problem("ackley", dim=5), make_problem("ackley", dim=5, b=0.02)
    assert a.cuda_objective != b.cuda_objective and "-0.02" in b.cuda_objective
    k1, k2 = make_problem("knapsack", n_items=20, seed=1), make_problem("knapsack", n_items=20, seed=2)
    assert k1.cuda_objective != k2.cuda_objective
    r1, r2 = make_problem("rosenbrock", dim=5), make_problem("rosenbrock", dim=6)
    assert r1.cuda_objective != r2.cuda_objective


def test_a_wrong_source_is_caught():
    """The harness compares the source, not the name: a source with a wrong constant fails."""

    class BadSphere(type(make_problem("sphere", dim=3))):
        @property
        def cuda_objective(self):
            return super().cuda_objective.replace("acc[0] += x * x", "acc[0] += (T)1.001 * x * x")

    prob = BadSphere(dim=9)
    X = _points(prob, 10, np.float64)
    f, _ = host_objective(prob, PRELUDE, np.float64)(X)
    assert _rel_err(f, prob.objective(X)) > 1e-4


def test_pack_bits_layout():
    B = np.zeros((1, 40), np.uint8)
    B[0, [0, 31, 32, 39]] = 1
    W = pack_bits_le(B)
    assert W.dtype == np.uint32 and W.shape == (1, 2)
    assert int(W[0, 0]) == (1 | (1 << 31)) and int(W[0, 1]) == (1 | (1 << 7))


def test_host_objective_errors():
    with pytest.raises(ValueError, match="no cuda_objective"):
        host_objective(make_problem("schwefel_1_2", dim=3), PRELUDE)
    h = host_objective(make_problem("sphere", dim=3), PRELUDE)
    with pytest.raises(ValueError, match="expected"):
        h(np.zeros((2, 4)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_user_constrained_source_matches_array_code(dtype):
    """A user's cuda_objective for a closed-form constrained problem (the pressure vessel of
    tests/user_problems.py, the README's example) agrees with its array code: f and the
    Evaluator's violation, for any split of the coordinates over threads."""
    from tests.user_problems import FusedPressureVessel  # noqa: PLC0415

    prob = FusedPressureVessel()
    h = host_objective(prob, PRELUDE, dtype)
    X = _points(prob, 200, dtype, seed=4)
    fref, vref, _ = Evaluator(prob)(X, dtype=dtype)
    assert (vref > 0).any() and (vref == 0).any()  # both feasible and infeasible points
    for n_threads in (1, 2, 4):
        f, v = h(X, n_threads)
        assert _rel_err(f, fref) <= RTOL[np.dtype(dtype)], n_threads
        assert _rel_err(v, vref) <= RTOL[np.dtype(dtype)], n_threads
