"""GPU tests of FEP on CuPy: the array path and the fused CUDA generation (algorithms/ep/cuda.py).

Marked ``gpu`` and skipped where CuPy or a CUDA device is missing. Checks: the CuPy array path
and the fused path select the same individuals as NumPy under the same seed (offspring equal to
rounding, the same survivors), for FEP, CEP and IFEP, every bound handling, float32 and float64,
one and several warps per individual (Rosenbrock's ``x_next`` across lanes); graph replay equals
single steps bit for bit; the histogram selection's block scan equals the host rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.ep.fep import FEP, select_survivors, tournament_wins  # noqa: E402
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Schwefel12, Schwefel226, Sphere  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

pytestmark = pytest.mark.gpu

CASES = [
    (lambda: Rastrigin(32), dict(pop_size=64), np.float64),
    (lambda: Rosenbrock(70, -30.0, 30.0), dict(pop_size=40, mutation="improved", bound_handling="reinit"), np.float64),
    (lambda: Sphere(5, -1.0, 1.0), dict(pop_size=33, q=3, mutation="gaussian", bound_handling="clip"), np.float64),
    (lambda: Schwefel226(32), dict(pop_size=400, q=10), np.float64),
]


def _ctx(xp, prob, dtype, streams=(0, 4, 9), seed=11):
    return Context(xp, dtype, Evaluator(prob), CounterRNG(xp, seed, list(streams)))


def _close(a, b, dtype):
    a, b = cp.asnumpy(a) if hasattr(a, "get") else a, cp.asnumpy(b) if hasattr(b, "get") else b
    tol = 1e-4 if dtype == np.float32 else 1e-9
    return np.allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("fused", [False, True])
def test_cupy_selects_the_same_individuals_as_numpy(case, fused):
    make, kw, dtype = CASES[case]
    prob = make()
    alg_np, alg_cp = FEP(**kw), FEP(**kw, fused=fused)
    cn, cc = _ctx(np, prob, dtype), _ctx(cp, prob, dtype)
    a, b = alg_np.init(cn), alg_cp.init(cc)
    assert (alg_cp.fused_plan(cc) is not None) == fused
    for _ in range(12):
        a, b = alg_np.step(cn, a), alg_cp.step(cc, b)
        for k in ("X", "eta", "f", "v"):
            assert _close(a[k], b[k], dtype), k
        assert a["evals"] == b["evals"] and int(a["nan_evals"]) == int(b["nan_evals"])


@pytest.mark.parametrize("make", [lambda: Schwefel226(32), lambda: Rosenbrock(40, -30.0, 30.0)])
def test_float32_fused_equals_cupy_array_path(make):
    """float32: a Cauchy step of 1e6 magnifies an ulp of NumPy's tan into a visible difference, so
    the float32 reference is the CuPy array path, which uses CUDA's math functions as the kernel
    does; both select the same individuals."""
    prob = make()
    a_arr, a_fu = FEP(pop_size=400, fused=False), FEP(pop_size=400, mutation="improved")
    c1, c2 = _ctx(cp, prob, np.float32), _ctx(cp, prob, np.float32)
    a, b = a_arr.init(c1), a_fu.init(c2)
    a_arr = FEP(pop_size=400, mutation="improved", fused=False)
    for _ in range(10):
        a, b = a_arr.step(c1, a), a_fu.step(c2, b)
        for k in ("X", "eta", "f", "v"):
            assert _close(a[k], b[k], np.float32), k


@pytest.mark.parametrize("case", [0, 1])
def test_graph_replay_equals_single_steps(case):
    make, kw, dtype = CASES[case]
    prob = make()
    alg = FEP(**kw)
    ctx = _ctx(cp, prob, dtype)
    s0 = alg.init(ctx)
    r = alg.run(ctx, s0, 150)  # 1 + 2 x 64 graph generations + 21 single
    s = s0
    for _ in range(150):
        s = alg.step(ctx, s)
    for k in ("X", "eta", "f", "v"):
        assert cp.array_equal(r[k], s[k]), k
    assert r["generation"] == 150 and r["evals"] == s["evals"]
    rn = FEP(**kw).run(_ctx(np, prob, dtype), FEP(**kw).init(_ctx(np, prob, dtype)), 150)
    assert _close(rn["f"].min(axis=1), r["f"].min(axis=1), dtype)


@pytest.mark.parametrize("q", [1, 10, 40])
def test_fused_selection_equals_array_rule(q):
    """fep_wins + fep_select (block scan over chunks) give the array code's survivors."""
    rs = np.random.default_rng(q)
    mu = 3000
    prob = Sphere(4)
    alg = FEP(pop_size=mu, q=q)
    ctx = _ctx(cp, prob, np.float64, streams=(0, 1))
    plan = alg.fused_plan(ctx)
    f = cp.asarray(rs.integers(0, 50, (2, 2 * mu)).astype(np.float64))  # many ties
    v = cp.zeros_like(f)
    U = plan._union()
    U[2][...] = f
    U[3][...] = v
    plan._k_wins(
        (plan.wgrid,),
        (plan.wblock,),
        (U[2], U[3], plan._wins, plan._keys, plan._zero, np.int64(7), plan._ctr, np.int32(2 * plan.total)),
    )
    plan._k_sel(
        (plan.I,),
        (plan.sblock,),
        (plan._wins, plan._src, plan._keys, plan._zero, np.int64(7), plan._ctr),
        shared_mem=plan.hist_smem,
    )
    wins = tournament_wins(ctx.rng, 7, f, v, q)
    assert cp.array_equal(plan._wins, wins)
    src = select_survivors(ctx.rng, 7, wins, mu, q)
    assert cp.array_equal(plan._src.astype(np.int64), src)


def test_problem_without_cuda_objective_runs_array_path():
    alg = FEP(pop_size=20)
    ctx = _ctx(cp, Schwefel12(6), np.float64)
    assert alg.fused_plan(ctx) is None
    s = alg.run(ctx, alg.init(ctx), 5)
    assert s["generation"] == 5 and not bool(cp.isnan(s["X"]).any())
