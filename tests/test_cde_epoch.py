"""The epoch kernel of the co-evolutionary DE through its host emulation (CI, no GPU).

``algorithms/core/cuda/cde_epoch.cu`` compiled as C (``-DISLES_HOST_EMU``, one thread per block)
must run the NumPy twin's cycles: the same populations bit for bit (the DE's own draws), fitness
and archive to rounding, the same counters; and the problems' per-row device code (``cuda_row``)
must agree with their array code. The GPU tests (tests/test_cde_gpu.py) compare the CUDA kernel
with the graph path and this twin.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.coevolution.cde import CDE
from isles.algorithms.coevolution.epoch import host_epoch, layout, terms_error, unsupported_reason
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.problems.cec2006 import G01, G07, G09, G10
from isles.problems.constraints import Evaluator
from isles.problems.cuda_check import compiler
from isles.problems.engineering import Spring
from isles.problems.minmax import AugmentedLagrangian, SaddleP1

from tests.helpers import numpy_twin
from tests.user_problems import UserSaddle

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

PROBLEMS = {
    "p1": lambda: SaddleP1(20),
    "g01": lambda: AugmentedLagrangian(G01()),
    "g07": lambda: AugmentedLagrangian(G07()),
    "g09": lambda: AugmentedLagrangian(G09()),
    "g10": lambda: AugmentedLagrangian(G10()),
    "spring": lambda: AugmentedLagrangian(Spring()),
}


def _run_both(prob, algo, islands=3, cycles=3, seed=2, dtype=np.float64):
    ctx = Context(np, dtype, Evaluator(prob), CounterRNG(np, seed, range(islands)))
    s0 = algo.init(ctx)
    ref = numpy_twin(algo).run(ctx, dict(s0), cycles)
    host = host_epoch(algo.params, prob, dtype)
    st = host.step(dict(s0), ctx.rng.keys, cycles - 1)  # several cycles in one launch, then one more
    st = host.step(st, ctx.rng.keys, 1)
    return ref, st, host


@pytest.mark.parametrize("crossover", ["bin", "nec"])
@pytest.mark.parametrize("pid", list(PROBLEMS))
def test_host_epoch_equals_numpy_cycles(pid, crossover):
    prob = PROBLEMS[pid]()
    algo = CDE(pop_size=12, pop_size_y=10, gens_x=4, gens_y=3, crossover=crossover)
    ref, st, _ = _run_both(prob, algo)
    for k in ("X", "Y", "bx"):  # the same draws, the same selections: identical rows
        np.testing.assert_array_equal(st[k], ref[k], err_msg=k)
    for k in ("f", "fy", "bf", "bv"):
        np.testing.assert_allclose(st[k], ref[k], rtol=1e-11, atol=1e-12, err_msg=k)
    assert (st["generation"], st["evals"], st["pair_evals"]) == (ref["generation"], ref["evals"], ref["pair_evals"])
    assert int(st["nan_evals"]) == int(ref["nan_evals"])


@pytest.mark.parametrize("dim", [5, 20, 100, 300])
def test_p1_sums_in_numpys_order_bit_for_bit(dim):
    """npsum.cuh sums x^2 in NumPy's pairwise order: P1's fitness equals the NumPy twin's exactly
    (below 8, up to 128 and above 128 coordinates)."""
    algo = CDE(pop_size=10, gens_x=3, gens_y=2)
    ref, st, _ = _run_both(SaddleP1(dim), algo, islands=2, cycles=2)
    for k in ("X", "Y", "f", "fy", "bx", "bf"):
        np.testing.assert_array_equal(st[k], ref[k], err_msg=k)


def test_host_epoch_float32_and_unequal_populations():
    # m = 6 < 8: NumPy sums the penalties left to right too (its pairwise sum starts at 8 terms),
    # so float32 agrees; with 8 or more terms float32 rounding may flip a selection
    prob = AugmentedLagrangian(G10())
    algo = CDE(pop_size=9, pop_size_y=14, gens_x=2, gens_y=5)
    ref, st, _ = _run_both(prob, algo, islands=2, cycles=2, dtype=np.float32)
    np.testing.assert_array_equal(st["X"], ref["X"])
    np.testing.assert_array_equal(st["Y"], ref["Y"])
    np.testing.assert_allclose(st["f"], ref["f"], rtol=1e-5)


def test_shared_memory_layout_matches_the_kernel():
    for pid, make in PROBLEMS.items():
        prob = make()
        algo = CDE(pop_size=50, pop_size_y=30)
        host = host_epoch(algo.params, prob)
        assert host.smem_bytes == layout(algo.params, prob, np.float64)["smem"], pid


def test_large_population_keeps_rows_in_global_memory():
    lay = layout(CDE(pop_size=1000).params, SaddleP1(100), np.float32)
    assert not lay["smem_rows"] and lay["smem"] < 227 * 1024
    assert layout(CDE(pop_size=50).params, SaddleP1(100), np.float64)["smem_rows"]


def test_nan_payoffs_count_and_lose():
    class NanSaddle(SaddleP1):
        pair_terms_cuda = SaddleP1.pair_terms_cuda.replace(
            "tx[0] = isles_np_sumsq(x, PAY_DX);", "tx[0] = x[0] > (T)0.5 ? (T)NAN : isles_np_sumsq(x, PAY_DX);"
        )

        def pair_x(self, X):
            t = super().pair_x(X)
            return np.where(X[..., :1] > 0.5, np.nan, t)

        def payoff(self, X, Y):
            L = super().payoff(X, Y)
            return np.where(X[..., :, None, 0] > 0.5, np.nan, L)

    prob = NanSaddle(6)
    algo = CDE(pop_size=8, gens_x=2, gens_y=2)
    ref, st, _ = _run_both(prob, algo, islands=2, cycles=2)
    assert int(ref["nan_evals"]) > 0
    assert int(st["nan_evals"]) == int(ref["nan_evals"])
    np.testing.assert_array_equal(st["X"], ref["X"])


@pytest.mark.parametrize("pid", [p for p in PROBLEMS if p != "p1"])
def test_cuda_row_agrees_with_the_array_code(pid):
    prob = PROBLEMS[pid]()
    host = host_epoch(CDE(pop_size=8).params, prob)
    rs = np.random.default_rng(0)
    X = prob.lower + rs.random((200, prob.dim)) * (prob.upper - prob.lower)
    Y = prob.y_lower + rs.random((200, prob.y_dim)) * (prob.y_upper - prob.y_lower)
    assert terms_error(prob, host.terms, X, Y, np) < 1e-12


def test_wrong_cuda_row_is_caught_by_the_check():
    class Wrong(G07):
        cuda_row = G07.cuda_row.replace("return add_rn(s, (T)45.0);", "return add_rn(s, (T)46.0);")

    prob = AugmentedLagrangian(Wrong())
    host = host_epoch(CDE(pop_size=8).params, prob)
    X = np.full((4, prob.dim), 1.0)
    Y = np.full((4, prob.y_dim), 1.0)
    assert terms_error(prob, host.terms, X, Y, np) > 1e-6  # the check refuses above 1e-9 (float64)


def test_what_the_epoch_kernel_does_not_run():
    assert "best/1" in unsupported_reason(CDE(strategy="best/1").params, SaddleP1(4))
    assert "exp" in unsupported_reason(CDE(crossover="exp").params, SaddleP1(4))
    assert "has no pair_cuda" in unsupported_reason(CDE().params, UserSaddle(4))  # a user's min-max problem
    assert unsupported_reason(CDE().params, AugmentedLagrangian(G07())) is None

    class NoRow(G07):  # a user's constrained problem without per-row device code
        cuda_row = None

    assert "pair_terms_cuda" in unsupported_reason(CDE().params, AugmentedLagrangian(NoRow()))
