"""Constraint handling: Deb's feasibility rules, the static penalty, and the NaN treatment."""

import numpy as np
import pytest
from isles.problems.base import Problem
from isles.problems.constraints import Evaluator, argbest, better, feasibility_report, total_violation


class TwoConstraints(Problem):
    name = "two"
    n_constraints = 2

    def __init__(self):
        super().__init__(2, -1.0, 1.0, constraint_scale=[1.0, 10.0])

    def objective(self, X):
        return X.sum(axis=-1)

    def constraints(self, X):
        return np.stack([X[..., 0] - 0.5, 10.0 * X[..., 1]], axis=-1)


def test_total_violation_is_normalised_and_nan_is_infinite():
    g = np.array([[0.5, 20.0], [-1.0, -1.0], [np.nan, 0.0]])
    v = total_violation(g, np.array([1.0, 10.0]))
    assert v.tolist() == [2.5, 0.0, np.inf]


def test_deb_rules():
    # feasible beats infeasible whatever f; lower f among feasible; lower v among infeasible
    assert better(np.array(9.0), np.array(0.0), np.array(-9.0), np.array(0.1))
    assert better(np.array(1.0), np.array(0.0), np.array(2.0), np.array(0.0))
    assert better(np.array(5.0), np.array(0.2), np.array(1.0), np.array(0.3))
    assert not better(np.array(1.0), np.array(0.0), np.array(1.0), np.array(0.0))
    f = np.array([[-5.0, 3.0, 1.0]])
    v = np.array([[0.1, 0.0, 0.0]])
    assert argbest(f, v, axis=1).tolist() == [2]


def test_evaluator_feasibility_and_penalty():
    X = np.array([[0.9, 0.2], [0.0, -0.5]])  # first violates both constraints
    f, v, n_nan = Evaluator(TwoConstraints())(X)
    assert v[0] == pytest.approx(0.4 + 0.2) and v[1] == 0 and int(n_nan) == 0
    fp, vp, _ = Evaluator(TwoConstraints(), "penalty", penalty=100.0)(X)
    assert np.all(vp == 0) and fp[0] == pytest.approx(1.1 + 100 * 0.6) and fp[1] == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="constraints.handling"):
        Evaluator(TwoConstraints(), "barrier")
    with pytest.raises(ValueError, match="constraints.penalty"):
        Evaluator(TwoConstraints(), "penalty", penalty=0)


def test_nan_objective_becomes_worst_and_is_counted():
    class NaNs(Problem):
        def __init__(self):
            super().__init__(2, -1.0, 1.0)

        def objective(self, X):
            return np.where(X[..., 0] > 0, np.nan, X[..., 1])

    f, v, n_nan = Evaluator(NaNs())(np.array([[1.0, -1.0], [-1.0, 0.5]]))
    assert f[0] == np.inf and f[1] == 0.5 and int(n_nan) == 1
    assert argbest(f[None], v[None], axis=1).tolist() == [1]


def test_feasibility_report_float64():
    rep = feasibility_report(TwoConstraints(), [0.5, 0.0])
    assert rep["feasible"] and rep["max_normalised_violation"] == 0.0
    assert not feasibility_report(TwoConstraints(), [0.6, 0.0])["feasible"]
    assert not feasibility_report(TwoConstraints(), [2.0, -1.0])["in_bounds"]
