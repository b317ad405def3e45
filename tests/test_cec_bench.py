"""benchmarks/cec_bench.py: pygmo's CEC 2014 functions as an isles user problem (the oracle of the
harness), checked against pygmo itself; skipped without pygmo (``pip install -e ".[bench]"``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pg = pytest.importorskip("pygmo")

from benchmarks.cec_bench import CEC2014, error, run_isles, run_pygmo  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402


@pytest.mark.parametrize("fid", [1, 2, 3, 4, 9, 10, 17, 23])
def test_wrapper_gives_pygmos_values(fid):
    """Rows evaluated through isles' Evaluator equal pygmo's ``fitness`` bit for bit, in any batch shape."""
    prob = CEC2014(fid, 10)
    ref = pg.problem(pg.cec2014(prob_id=fid, dim=10))
    X = np.random.default_rng(fid).uniform(-100, 100, (2, 5, 10))
    f, v, n_nan = Evaluator(prob)(X)
    expect = np.array([[ref.fitness(x)[0] for x in row] for row in X])
    np.testing.assert_array_equal(f, expect)
    assert (v == 0).all() and int(n_nan) == 0
    assert prob.f_star == 100.0 * fid and (prob.lower == -100).all() and (prob.upper == 100).all()
    again = pickle.loads(pickle.dumps(prob))  # Ray ships problems by pickle
    np.testing.assert_array_equal(again.objective(X), expect)


def test_error_counts_below_1e8_as_zero():
    assert error(100.0 + 5e-9, 1) == 0.0 and error(300.5, 3) == pytest.approx(0.5)


def test_both_sides_spend_the_same_budget():
    """A short budget: isles' L-SHADE and DE and pygmo's sade evaluate exactly 2000 points each."""
    prob = CEC2014(1, 10)
    for name in ("isles-lshade", "isles-de"):
        f, _, _, evals = run_isles(name, prob, 2000, seed=0)
        assert evals == 2000 and f >= 100.0
    f, _, _, evals = run_pygmo("pygmo-sade", 1, 10, 2000, seed=0)
    assert evals == 2000 and f >= 100.0
