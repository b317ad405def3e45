"""DE's epoch kernel through its host emulation (CI, no GPU).

``algorithms/core/cuda/de_epoch.cu`` compiled as C (``-DISLES_HOST_EMU``, one thread per island)
must run the NumPy twin's generations: the same populations bit for bit (the same draws, the
same trial rows, the same selections), fitness to rounding (the fold order differs from NumPy's
sums), the same NaN count and stop-target generation, whatever the number of generations per
launch. The GPU tests (tests/test_de_gpu.py) compare the CUDA kernel with the per-generation
kernel (bit for bit) and with this twin.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.core.epoch_layout import epoch_block
from isles.algorithms.de.de import DE
from isles.algorithms.de.epoch import epoch_smem_bytes, epoch_unsupported_reason
from isles.algorithms.de.host_epoch import HostEpochDE
from isles.problems import make_problem
from isles.problems.cuda_check import compiler

from tests.helpers import island_ctx, numpy_twin
from tests.user_problems import FusedNaNSphere, FusedPressureVessel

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")


def _compare(prob, algo, ctx, n=12, rtol=1e-11):
    s0 = algo.init(ctx)
    ref = numpy_twin(algo).run(ctx, dict(s0), n)
    host = HostEpochDE(algo, ctx)
    target = ctx.target
    st = host.run(dict(s0), n - 3, target)  # several generations in one launch, then the rest
    st = host.run(st, 3, target)
    np.testing.assert_array_equal(st["X"], ref["X"])  # the same draws, trials and selections
    np.testing.assert_allclose(st["f"], ref["f"], rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(st["v"], ref["v"], rtol=rtol, atol=1e-12)
    assert (st["generation"], st["evals"]) == (ref["generation"], ref["evals"])
    assert int(st["nan_evals"]) == int(ref["nan_evals"])
    return st, ref


@pytest.mark.parametrize("crossover", ["bin", "nec"])
@pytest.mark.parametrize("bounds", ["reflect", "clip", "reinit"])
@pytest.mark.parametrize("pid", ["sphere", "rosenbrock", "ackley"])
def test_host_epoch_equals_numpy_generations(pid, bounds, crossover):
    """Rosenbrock sets OBJ_NEXT (the neighbour's coordinate of the trial row in shared memory)."""
    prob = make_problem(pid, dim=9)
    algo = DE(pop_size=11, F=0.7, CR=0.6, crossover=crossover, bound_handling=bounds)
    _compare(prob, algo, _ctx(prob))


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_host_epoch_constrained_user_problem(handling):
    """OBJ_HAS_V (a user's pressure vessel): Deb's rules, or the static penalty, as the twin."""
    prob = FusedPressureVessel()
    algo = DE(pop_size=16, F=0.6, CR=0.9)
    st, _ = _compare(prob, algo, _ctx(prob, handling=handling), n=20, rtol=1e-9)


def test_host_epoch_counts_nan_as_the_twin():
    prob = FusedNaNSphere(dim=5)
    algo = DE(pop_size=12, F=0.8, CR=0.9)
    st, ref = _compare(prob, algo, _ctx(prob), n=10)
    assert int(ref["nan_evals"]) > 0  # the test exercises the NaN rule


def test_host_epoch_stop_target_generation_as_the_twin():
    """hit_generation: the first generation after which an island's best is feasible with f <=
    target, inside one launch and across two."""
    prob = make_problem("sphere", dim=4, lower=-1.0, upper=1.0)
    algo = DE(pop_size=10, F=0.5, CR=0.9)
    st, ref = _compare(prob, algo, _ctx(prob, islands=4, target=0.02), n=40)
    hits = np.asarray(ref["hit_generation"])
    assert (hits > 0).any() and (hits != hits[0]).any()  # islands reach it at different generations
    np.testing.assert_array_equal(st["hit_generation"], hits)


def test_host_epoch_float32():
    prob = make_problem("rosenbrock", dim=6)
    algo = DE(pop_size=9, F=0.65, CR=0.95)
    _compare(prob, algo, _ctx(prob, dtype=np.float32), n=8, rtol=2e-5)


def test_block_layout_balances_rows_and_fits_the_sm():
    # N = 100 at TPI = 32: 4 passes of 25 groups (800 threads) for a lone island
    assert epoch_block(100, 32, 1, 45_000, 132) == 800
    # 1024 islands on 132 SMs: 8 per SM, but the SM's shared memory holds 5 of 45 kB
    b = epoch_block(100, 32, 1024, 45_000, 132)
    assert b % 32 == 0 and b * 5 <= 2048 and b >= 32
    # every thread count is a multiple of TPI and at most 1024
    for n in (4, 7, 33, 100, 513):
        for tpi in (1, 2, 8, 32, 64, 256):
            for islands in (1, 64, 4096):
                t = epoch_block(n, tpi, islands, 10_000, 132)
                assert t % tpi == 0 and t % 32 == 0 and max(tpi, 32) <= t <= max(tpi, 1024)
    assert epoch_block(40, 2, 1, 10_000, 132) == 96  # 40 rows of 2 threads: 80, rounded to 3 warps


def test_blocks_per_sm_for_the_launch_bounds():
    from isles.algorithms.core.epoch_layout import epoch_min_blocks

    assert epoch_min_blocks(416, 1024, 43_000, 132) == 4  # threads allow 4, shared memory 5, islands 8
    assert epoch_min_blocks(800, 64, 43_000, 132) == 1  # one island per SM
    assert epoch_min_blocks(128, 4096, 100_000, 132) == 2  # shared memory
    assert epoch_min_blocks(1024, 1, 1_000_000, 132) == 1


def test_threads_per_row():
    from isles.algorithms.de.epoch import epoch_tpi

    assert epoch_tpi(50, 32, 64) == 8 and epoch_tpi(50, 32, 1024) == 4  # latency / work
    assert epoch_tpi(3, 32) == 1 and epoch_tpi(128, 32, 1) == 16
    assert epoch_tpi(300, 128, 5000) == 128  # groups wider than a warp keep TPI


def test_shared_memory_count_and_refusal():
    assert epoch_smem_bytes(np.float32, 50, 100, 32, 1, 25) == 4 * (2 * 100 * 50 + 4 * 100)
    # TPI > 32: each group's merge scratch, OBJ_NACC per warp
    assert epoch_smem_bytes(np.float64, 200, 10, 64, 2, 3) == 8 * (2 * 10 * 200 + 40 + 3 * 2 * 2)
    assert epoch_unsupported_reason(np.float32, 50, 100, 32, 1) is None
    why = epoch_unsupported_reason(np.float32, 1000, 500, 256, 2)
    assert "N x D = 500 x 1000" in why and "shared memory" in why


def test_self_check_agrees_where_both_sides_are_nan():
    """A problem undefined in part of its box (NaN there in its array code and its fused source)
    keeps its fused path; NaN on one side only is a disagreement."""
    from isles.algorithms.core.fused_check import real_objective_error

    prob = FusedNaNSphere(dim=3)

    def kernel(X, wrong=False):
        f = prob.objective(X)
        if wrong:
            f = np.where(np.isnan(f), 0.0, f)
        return f, np.zeros_like(f)

    assert real_objective_error(np, prob, kernel, np.float64, False, 32, seed=1) == 0.0
    assert real_objective_error(np, prob, lambda X: kernel(X, True), np.float64, False, 32, seed=1) == np.inf


def _ctx(prob, islands=3, seed=4, **kw):
    return island_ctx(np, prob, islands, seed, **kw)
