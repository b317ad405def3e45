"""benchmarks/cec_bench.py: pygmo's CEC 2014 functions as an isles user problem (the oracle of the
harness), checked against pygmo itself; skipped without pygmo (``pip install -e ".[bench]"``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pg = pytest.importorskip("pygmo")

from isles.problems.constraints import Evaluator  # noqa: E402

from benchmarks.cec_bench import CEC2014, error, run_one  # noqa: E402
from benchmarks.cec_report import complete_runs, errors, report, time_to_target, wilcoxon_wtl  # noqa: E402


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


def test_every_optimiser_spends_the_same_budget_exactly():
    """A short budget (CEC's rule scaled down): isles' L-SHADE, jSO, BIPOP-CMA-ES and DE and pygmo's
    sade, de1220 and cmaes evaluate at most 2000 points each, isles' exactly 2000 (the exact budget),
    and every record carries a trace whose errors never increase (best so far)."""
    for name in ("isles-lshade", "isles-jso", "isles-cmaes", "isles-de", "pygmo-sade", "pygmo-de1220", "pygmo-cmaes"):
        rec = run_one(name, 1, 10, seed=0, budget=2000)
        assert rec["f"] >= 100.0 and rec["error"] == error(rec["f"], 1)
        assert rec["evaluations"] == 2000 if name.startswith("isles") else 1900 <= rec["evaluations"] <= 2000, name
        errs = [p[2] for p in rec["trace"]]
        assert errs == sorted(errs, reverse=True) and errs[-1] == rec["error"], name


def test_report_counts_wins_ties_losses_and_time_to_target():
    """The report's statistics on hand-made records: a peer that is worse on every run loses the
    Wilcoxon signed-rank test (p < 0.05 needs >= 6 pairs), equal samples tie, and the time-to-target
    is the first trace point at or below pygmo sade's median final error."""
    recs = []
    for seed in range(8):
        for name, err in (
            ("isles-lshade", 1.0 + seed * 0.01),
            ("pygmo-sade", 5.0 + seed),
            ("pygmo-de1220", 1.0 + seed * 0.01),
        ):
            trace = [[100, 0.5, 10.0], [200, 1.0, err]]
            recs.append(
                {
                    "function": 3,
                    "dim": 10,
                    "optimiser": name,
                    "seed": seed,
                    "error": err,
                    "wall_s": 1.0,
                    "cpu_s": 1.0,
                    "trace": trace,
                }
            )
    assert complete_runs(recs, 10, ["isles-lshade", "pygmo-sade"], [3]) == 8
    a, b = errors(recs, 10, 3, "isles-lshade", 8), errors(recs, 10, 3, "pygmo-sade", 8)
    assert wilcoxon_wtl(a, b) == "+" and wilcoxon_wtl(b, a) == "-"
    assert wilcoxon_wtl(a, errors(recs, 10, 3, "pygmo-de1220", 8)) == "="
    t, k = time_to_target(recs, 10, 3, "isles-lshade", 8, float(np.median(b)))
    assert (t, k) == (1.0, 8)
    text = report(recs)
    assert "| isles-lshade | 1/0/0; median <= on 1/1 | 0/1/0; median <= on 1/1 |" in text


def test_within_the_published_results_is_mean_plus_two_std_plus_ten_percent():
    """F5 (published 20 +- 0.037): within up to 20 + 0.074 + 2 = 22.074; a lower mean is within; a
    function without a published value gives None."""
    from benchmarks.cec_report import PUBLISHED_LSHADE_D30, within_published  # noqa: PLC0415

    assert PUBLISHED_LSHADE_D30[5] == (20.0, 0.037)
    assert within_published(22.07, 5) and within_published(0.0, 5)
    assert not within_published(22.08, 5)
    assert within_published(1.0, 1) is None


@pytest.mark.parametrize("name", ["isles-lshade", "isles-cmaes"])
def test_a_batch_of_runs_is_the_runs_one_by_one(name):
    """``--batch``: runs as the islands of one batch are the same runs (stream = seed) as alone, and
    each record says how many shared the batch's time."""
    from benchmarks.cec_bench import run_isles_batch  # noqa: PLC0415

    prob = CEC2014(4, 10)
    both = run_isles_batch(name, prob, 2000, [3, 5])
    alone = run_isles_batch(name, prob, 2000, [5])
    assert both[1]["f"] == alone[0]["f"] and both[1]["evaluations"] == alone[0]["evaluations"] == 2000
    assert [p[2] for p in both[1]["trace"]] == [p[2] for p in alone[0]["trace"]]
    assert both[0]["f"] != both[1]["f"] and both[0]["batch"] == 2 and alone[0]["batch"] == 1


def test_across_functions_counts_lower_and_higher_and_tests_them():
    """Ten functions, isles lower on eight, higher on one, equal on one: a two-sided signed-rank p
    below 0.05 (scipy's exact test on the nine non-zero differences)."""
    from benchmarks.cec_report import across_functions  # noqa: PLC0415

    a = np.array([1.0, 2, 3, 4, 5, 6, 7, 8, 10, 5])
    b = np.array([2.0, 3, 4, 5, 6, 7, 8, 9, 9.5, 5])
    lower, higher, p = across_functions(a, b)
    assert (lower, higher) == (8, 1) and p < 0.05
    assert across_functions(a, a) == (0, 0, 1.0)
