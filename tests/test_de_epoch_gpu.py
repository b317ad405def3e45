"""GPU tests of DE's epoch kernel (algorithms/de/epoch.py, algorithms/core/cuda/de_epoch.cu).

Marked ``gpu``. The epoch kernel (every generation of an epoch in one launch, one block per
island) must equal the per-generation kernel replayed from a CUDA graph bit for bit (X, f, v, the
NaN count, the stop target's generation), with one warp per row and with groups of several warps
(D > 128, the merge across warps), and its rows must equal the host emulation's (CI's twin).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import cupy_or_skip, epoch_and_per_generation  # noqa: E402

cp = cupy_or_skip()

from isles.algorithms.de.de import DE  # noqa: E402
from isles.algorithms.de.host_epoch import HostEpochDE  # noqa: E402
from isles.problems import make_problem  # noqa: E402

from tests.helpers import island_ctx  # noqa: E402
from tests.user_problems import (
    FusedNaNSphere,  # noqa: E402
    FusedPressureVessel,  # noqa: E402
)

pytestmark = pytest.mark.gpu


def _both(prob, algo, ctx, n=50):
    """(epoch state, per-generation state, plan) after the same ``n`` generations, split 30 + rest."""
    plan = algo.fused_plan(ctx)
    return (*epoch_and_per_generation(plan, algo.init(ctx), n, 30), plan)


def _assert_same(a, b):
    for k in ("X", "f", "v"):
        np.testing.assert_array_equal(cp.asnumpy(a[k]), cp.asnumpy(b[k]), err_msg=k)
    assert int(a["nan_evals"]) == int(b["nan_evals"])
    assert (a["generation"], a["evals"]) == (b["generation"], b["evals"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pid,dim", [("sphere", 50), ("rosenbrock", 50), ("ackley", 200), ("rastrigin", 300)])
@pytest.mark.parametrize("crossover", ["bin", "nec"])
def test_epoch_equals_per_generation_bit_for_bit(pid, dim, crossover, dtype):
    """D = 50: one warp per row; D = 200, 300: groups of 2 and 4 warps (merge across warps)."""
    prob = make_problem(pid, dim=dim)
    algo = DE(pop_size=24, F=0.6, CR=0.7, crossover=crossover)
    a, b, _ = _both(prob, algo, _ctx(cp, prob, dtype=dtype))
    _assert_same(a, b)


@pytest.mark.parametrize("islands", [1, 70, 600])
def test_epoch_block_sizes_across_island_counts(islands):
    """Blocks shrink when several islands share an SM; the results do not change."""
    prob = make_problem("rosenbrock", dim=20)
    algo = DE(pop_size=40, F=0.65, CR=0.95, bound_handling="reinit")
    a, b, plan = _both(prob, algo, _ctx(cp, prob, islands=islands, dtype=np.float32), n=40)
    _assert_same(a, b)
    assert plan.epoch.block % plan.tpi == 0


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_epoch_constrained_user_problem(handling):
    prob = FusedPressureVessel()
    algo = DE(pop_size=20, F=0.6, CR=0.9)
    a, b, _ = _both(prob, algo, _ctx(cp, prob, handling=handling))
    _assert_same(a, b)


def test_epoch_nan_and_stop_target():
    prob = FusedNaNSphere(dim=6)
    algo = DE(pop_size=16, F=0.8, CR=0.9)
    a, b, _ = _both(prob, algo, _ctx(cp, prob, islands=6, target=1e-3), n=80)
    _assert_same(a, b)
    assert int(a["nan_evals"]) > 0
    np.testing.assert_array_equal(cp.asnumpy(a["hit_generation"]), cp.asnumpy(b["hit_generation"]))
    assert (cp.asnumpy(a["hit_generation"]) > 0).any()


def test_epoch_rows_equal_the_host_twin():
    prob = make_problem("rosenbrock", dim=30)
    algo = DE(pop_size=20, F=0.65, CR=0.95, crossover="nec")
    ctx_g = _ctx(cp, prob, islands=3)
    plan = algo.fused_plan(ctx_g)
    plan.use_epoch = True
    g = plan.run(algo.init(ctx_g), 25)
    ctx_h = _ctx(np, prob, islands=3)
    h = HostEpochDE(algo, ctx_h).run(algo.init(ctx_h), 25)
    np.testing.assert_array_equal(cp.asnumpy(g["X"]), h["X"])
    np.testing.assert_allclose(cp.asnumpy(g["f"]), h["f"], rtol=1e-11)


def test_plan_times_both_paths_and_reports_its_choice():
    prob = make_problem("rosenbrock", dim=50)
    ctx = _ctx(cp, prob, islands=256, dtype=np.float32)
    algo = DE(pop_size=100, F=0.65, CR=0.95)
    plan = algo.fused_plan(ctx)
    per_gen, epoch = plan.timings
    assert per_gen > 0 and epoch > 0
    assert plan.use_epoch == (epoch < per_gen)
    assert algo.gpu_path(ctx) == ("epoch kernel" if plan.use_epoch else "fused kernel")
    off = DE(pop_size=100, F=0.65, CR=0.95, epoch=False)
    ctx2 = _ctx(cp, prob, islands=256, dtype=np.float32)
    p2 = off.fused_plan(ctx2)
    assert p2.epoch is None and not p2.use_epoch and p2.epoch_reason == "algorithm.epoch=false"
    assert off.gpu_path(ctx2) == "fused kernel"


def test_too_large_islands_keep_the_per_generation_kernel():
    prob = make_problem("ackley", dim=1000)
    algo = DE(pop_size=500, F=0.5, CR=0.2)
    ctx = _ctx(cp, prob, islands=1, dtype=np.float32)
    plan = algo.fused_plan(ctx)
    assert plan.epoch is None and "shared memory" in plan.epoch_reason
    assert not plan.use_epoch


def _ctx(xp, prob, islands=5, dtype=np.float64, **kw):
    return island_ctx(xp, prob, islands, kw.pop("seed", 3), dtype=dtype, **kw)
