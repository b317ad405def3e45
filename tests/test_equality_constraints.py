"""Equality constraints h(x) = 0 (issue 25): a problem declares ``n_eq`` (the last ``n_eq`` of its
constraint columns), ``constraints.eq_tol`` (default 1e-4) is their tolerance, and every path
counts an equality as the inequality ``|h| - eq_tol <= 0`` (``as_inequalities``, one place): the
Evaluator of every family, the float64 report (``best_solution.json``), the augmented Lagrangian
and its CUDA terms (host twin here), and a fused ``cuda_objective`` (host twin here)."""

from __future__ import annotations

import numpy as np
import pytest
from isles.app.job import run_job
from isles.islands.config.build import build_evaluator, build_problem
from isles.islands.config.schema import check_values, with_defaults
from isles.problems.constraints import EQ_TOL, Evaluator, as_inequalities, feasibility_report, total_violation
from isles.problems.minmax import AugmentedLagrangian

from tests.helpers import make_cfg
from tests.user_problems import G11, ShiftedSphere, SphereOnPlane

G11_TARGET = "tests.user_problems.G11"


def test_a_raw_h_below_zero_is_violated():
    """h = x1^2 - x2 < 0 at (0, 1) (h = -1): before equalities it counted as satisfied (v = 0)."""
    ev = Evaluator(G11())
    X = np.array([[0.0, 1.0], [0.5, 0.25 + 0.5e-4], [0.5, 0.25 - 0.5e-4], [0.5, 0.25 + 2e-4]])
    f, v, _ = ev(X)
    np.testing.assert_allclose(v, [1.0 - EQ_TOL, 0.0, 0.0, 2e-4 - EQ_TOL], rtol=1e-9, atol=1e-15)
    assert f[0] == 0.0


def test_as_inequalities_touches_only_the_last_n_eq_columns():
    g = np.array([[-0.5, -0.3, 2e-4], [0.1, 1e-5, -3e-4]])
    out = as_inequalities(g, 2, 1e-4)
    np.testing.assert_allclose(out, [[-0.5, 0.3 - 1e-4, 1e-4], [0.1, 1e-5 - 1e-4, 2e-4]], rtol=1e-12)
    assert as_inequalities(g, 0, 1e-4) is g and g[0, 1] == -0.3  # no copy without equalities, g unchanged
    np.testing.assert_allclose(
        total_violation(g, np.array([1.0, 2.0, 1.0]), 2, 1e-4), [(0.3 - 1e-4) / 2 + 1e-4, 0.1 + 2e-4], rtol=1e-12
    )


def test_n_eq_is_checked():
    class TooMany(G11):
        n_eq = 2

    with pytest.raises(ValueError, match=r"TooMany.n_eq=2: allowed values are integers 0..n_constraints=1"):
        TooMany()


def test_eq_tol_comes_from_the_config_and_is_checked():
    ev = build_evaluator({"_target_": G11_TARGET}, {"eq_tol": 1e-2})
    assert ev.problem.eq_tol == 1e-2
    _, v, _ = ev(np.array([[0.5, 0.25 + 5e-3]]))
    assert v[0] == 0.0  # |h| = 5e-3 <= 1e-2
    assert build_problem({"_target_": G11_TARGET}).eq_tol == EQ_TOL
    cfg = with_defaults({"constraints": {"eq_tol": -1.0}})
    with pytest.raises(ValueError, match=r"constraints.eq_tol=-1.0: allowed values are numbers >= 0"):
        check_values(cfg)


def test_report_shows_h_and_says_which_are_equalities():
    p = SphereOnPlane(4)
    rep = feasibility_report(p, [0.25, 0.25, 0.25, 0.25 + 5e-5])
    assert rep["g_type"] == ["inequality", "equality"] and rep["eq_tol"] == EQ_TOL
    np.testing.assert_allclose(rep["g"], [0.25 - 0.9, 5e-5], rtol=1e-9)  # h itself, not |h| - eq_tol
    assert rep["feasible"] and rep["max_normalised_violation"] == 0.0
    rep = feasibility_report(p, [0.25, 0.25, 0.25, 0.25 - 3e-4])
    assert not rep["feasible"] and rep["max_normalised_violation"] == pytest.approx(2e-4, rel=1e-6)
    plain = feasibility_report(ShiftedSphere(1), [0.5])  # no equalities: no eq_tol key
    assert plain["g_type"] == ["inequality"] and "eq_tol" not in plain


@pytest.mark.parametrize(
    "experiment, extra",
    [
        ("de_islands", ["generations=600", "islands.n=2", "algorithm.pop_size=20"]),
        ("cmepso", ["generations=150", "islands.n=3", "algorithm.n_particles=12"]),
        ("fep", ["generations=1000", "algorithm.pop_size=50"]),
        ("cde", ["generations=20", "islands.n=1"]),
    ],
)
def test_g11_is_solved_within_eq_tol(experiment, extra, capsys):
    """Each family reaches CEC 2006 g11's optimum (0.7499 within eq_tol) with |h| <= eq_tol; a
    raw h read as h <= 0 would give f = 0 at (0, 1)."""
    cfg = make_cfg(
        f"+experiment={experiment}",
        f"problem._target_={G11_TARGET}",
        "++problem.dim=2",
        "device=cpu",
        "progress=false",
        "logger=none",
        *extra,
    )
    result, _ = run_job(cfg, use_ray=False)
    rep = feasibility_report(G11(), result.best_x)
    assert rep["feasible"] and abs(rep["g"][0]) <= EQ_TOL * (1 + 1e-9), rep
    assert 0.7499 - 1e-3 <= rep["f"] <= 0.7499 + 0.03, rep
    assert result.best_v == 0.0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("isles: best f=")]
    assert " feasible (float64)" in line


def test_cde_cuda_row_terms_turn_h_into_an_inequality():
    """The host twin of the CDE epoch kernel (the cuda_row path) agrees with the array code with
    an equality, and a kernel that skipped the transform (raw h) would be refused by the check."""
    from isles.algorithms.coevolution.cde import CDE  # noqa: PLC0415
    from isles.algorithms.coevolution.epoch import host_epoch, terms_error  # noqa: PLC0415
    from isles.problems.cuda_check import compiler  # noqa: PLC0415

    if compiler() is None:
        pytest.skip("no C compiler")
    prob = AugmentedLagrangian(G11())
    host = host_epoch(CDE(pop_size=8).params, prob)
    rs = np.random.default_rng(0)
    X = prob.lower + rs.random((200, 2)) * (prob.upper - prob.lower)
    X[:50, 1] = X[:50, 0] ** 2 + rs.uniform(-5e-5, 5e-5, 50)  # on the curve h = 0, within eq_tol
    Y = prob.y_lower + rs.random((200, 1)) * (prob.y_upper - prob.y_lower)
    assert terms_error(prob, host.terms, X, Y, np) < 1e-12
    _, _, _, TV = host.terms(X, Y)
    assert np.any(TV > 0) and np.any(TV == 0)

    class RawH(G11):  # what a raw h gives: the kernel's terms must differ from the array code's
        n_eq = 0

    raw = host_epoch(CDE(pop_size=8).params, AugmentedLagrangian(RawH()))
    assert terms_error(prob, raw.terms, X, Y, np) > 1e-6


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_objective_with_an_equality_matches_the_array_code(dtype):
    """The host twin of a fused objective (problems/cuda_check.py) with an equality agrees with
    the Evaluator (|h| - eq_tol at its one place), for any split over threads; eq_tol is baked."""
    from isles.algorithms.core.cuda_prelude import ARITHMETIC, HASH, MATH  # noqa: PLC0415
    from isles.problems.cuda_check import compiler, host_objective  # noqa: PLC0415

    if compiler() is None:
        pytest.skip("no C compiler")
    prob = SphereOnPlane(8)
    rs = np.random.default_rng(3)
    X = (rs.random((300, 8)) * 2 - 1) * 0.3 + 0.125  # around the plane sum x = 1
    X[:100] += (1.0 - X[:100].sum(axis=1, keepdims=True)) / 8 + rs.normal(0, 3e-5, (100, 8))
    X = X.astype(dtype)
    fref, vref, _ = Evaluator(prob)(X, dtype=dtype)
    assert (vref == 0).any() and (vref > 0).any()
    h = host_objective(prob, HASH + ARITHMETIC + MATH, dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for n_threads in (1, 3):
        f, v = h(X, n_threads)
        assert np.max(np.abs(f - fref) / (1 + np.abs(fref))) <= tol
        assert np.max(np.abs(v - vref) / (1 + np.abs(vref))) <= tol
    prob.eq_tol = 1e-2  # constraints.eq_tol reaches the source
    assert "((T)0.01)" in prob.cuda_objective
