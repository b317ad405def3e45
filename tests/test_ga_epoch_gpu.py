"""GPU tests of the GA's epoch kernel (algorithms/ga/epoch.py, algorithms/core/cuda/ga_epoch.cu).

Marked ``gpu``. The epoch kernel (every generation of a call in one launch, one block per island)
must equal the per-generation kernels replayed from a CUDA graph bit for bit (genomes, f, v, the
NaN count, the stop target's generation): one island and several, block sizes from one warp to
1024 threads, a long genome with several words per thread, seed 002's real-coded Rastrigin and
bit problems (trap-5, OneMax, knapsack), a constrained user problem under Deb's rules and the
penalty, NaN, ``n`` below and above the graph's 64 generations, in one call and across calls; and
it must build the same populations as the host twin (:meth:`isles.algorithms.ga.cuda_host.HostGA.run`,
CI's reference). Trap-5 with 10^5 bits stays on the per-generation kernels, with a reason.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import cupy_or_skip, epoch_and_per_generation  # noqa: E402

cp = cupy_or_skip()

from isles.algorithms.ga import cuda_host as ga_host  # noqa: E402
from isles.algorithms.ga.ga import GA  # noqa: E402
from isles.problems.benchmarks import Rastrigin  # noqa: E402
from isles.problems.binary import Knapsack, OneMax, Trap  # noqa: E402

from tests.helpers import island_ctx  # noqa: E402
from tests.user_problems import FusedNaNSphere, FusedPressureVessel  # noqa: E402

pytestmark = pytest.mark.gpu


def _ctx(xp, prob, islands=5, dtype=np.float64, **kw):
    return island_ctx(xp, prob, islands, kw.pop("seed", 3), dtype=dtype, **kw)


def _both(algo, ctx, n=50, split=30, eblock=None):
    """(epoch state, per-generation state, plan) after the same ``n`` generations, in two calls
    (``split`` + rest) or one (``split=n``)."""
    plan = algo.fused_plan(ctx)
    return (*epoch_and_per_generation(plan, algo.track_target(ctx, algo.init(ctx)), n, split, eblock), plan)


def _assert_same(a, b):
    for k in ("genome", "f", "v"):
        np.testing.assert_array_equal(cp.asnumpy(a[k]), cp.asnumpy(b[k]), err_msg=k)
    assert (a["generation"], a["evals"]) == (b["generation"], b["evals"])
    assert int(a["nan_evals"]) == int(b["nan_evals"])
    if "hit_generation" in b:
        np.testing.assert_array_equal(cp.asnumpy(a["hit_generation"]), cp.asnumpy(b["hit_generation"]))


CASES = [
    (lambda: Rastrigin(2, -1.0, 1.0), dict(pop_size=640, encoding="seed002"), 1, np.float32),  # seed 002
    (lambda: Rastrigin(2, -1.0, 1.0), dict(pop_size=224, encoding="seed002"), 9, np.float64),
    (lambda: Trap(105), dict(pop_size=100, crossover="uniform", n_elite=2, renewal=0.1), 7, np.float32),
    (lambda: OneMax(300), dict(pop_size=64, crossover="two_point", mutation="seed", n_elite=0), 3, np.float64),
    (lambda: Trap(2000), dict(pop_size=96, n_elite=3), 2, np.float32),  # 63 words: TPI 2, 32 per thread
    (lambda: Trap(4000), dict(pop_size=40, renewal=0.1), 3, np.float64),  # 125 words: TPI 32, 4 per thread
    (lambda: Knapsack(70), dict(pop_size=50, n_elite=2), 4, np.float64),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("n,split", [(70, 70), (90, 23)])
def test_epoch_equals_per_generation_kernels_bit_for_bit(case, n, split):
    make, kw, islands, dtype = CASES[case]
    a, b, _ = _both(GA(**kw), _ctx(cp, make(), islands, dtype), n, split)
    _assert_same(a, b)


@pytest.mark.parametrize("eblock", [32, 96, 1024])
def test_epoch_block_size_does_not_change_the_result(eblock):
    a, b, _ = _both(GA(pop_size=75, n_elite=2), _ctx(cp, Trap(205), 3), 40, 25, eblock)
    _assert_same(a, b)


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_epoch_constrained_user_problem(handling):
    prob = FusedPressureVessel()
    a, b, _ = _both(GA(pop_size=60, encoding="binary", bits_per_variable=20), _ctx(cp, prob, 3, handling=handling), 40)
    _assert_same(a, b)


def test_epoch_counts_nan_as_the_per_generation_kernels():
    prob = FusedNaNSphere(dim=3)
    a, b, _ = _both(GA(pop_size=40, encoding="binary", bits_per_variable=12), _ctx(cp, prob, 3), 20, 12)
    _assert_same(a, b)
    assert int(b["nan_evals"]) > 0


def test_epoch_stop_target_generation():
    a, b, _ = _both(GA(pop_size=24), _ctx(cp, OneMax(60), 6, target=7.0), 60, 24)
    _assert_same(a, b)
    hits = cp.asnumpy(b["hit_generation"])
    assert (hits > 0).any() and (hits != hits[0]).any()


@pytest.mark.parametrize("target", [None, 7.0])
def test_epoch_equals_host_twin(target):
    """The same populations as HostGA.run (CI's twin), bit for bit on integer objectives."""
    prob = Trap(105) if target is None else OneMax(60)
    algo = GA(pop_size=48, n_elite=2)
    ctx = _ctx(cp, prob, 4, target=target)
    plan = algo.fused_plan(ctx)
    plan.use_epoch = True
    s0 = algo.track_target(ctx, algo.init(ctx))
    g = plan.run(dict(s0), 45)
    cn = _ctx(np, prob, 4, target=target)
    h = ga_host.HostGA(algo, cn).run({k: (cp.asnumpy(v) if hasattr(v, "get") else v) for k, v in s0.items()}, 45)
    for k in ("genome", "f", "v"):
        np.testing.assert_array_equal(cp.asnumpy(g[k]), h[k], err_msg=k)
    if target is not None:
        np.testing.assert_array_equal(cp.asnumpy(g["hit_generation"]), h["hit_generation"])


def test_plan_times_both_paths_and_reports_its_choice():
    algo = GA(pop_size=64, encoding="seed002")
    ctx = _ctx(cp, Rastrigin(2, -1.0, 1.0), 1)
    plan = algo.fused_plan(ctx)
    assert plan.timings is not None and len(plan.timings) == 2 and min(plan.timings) > 0
    assert plan.gpu_path == ("epoch kernel" if plan.use_epoch else "fused kernel")
    assert algo.gpu_path(ctx) == plan.gpu_path
    off = GA(pop_size=64, encoding="seed002", epoch=False)
    p2 = off.fused_plan(_ctx(cp, Rastrigin(2, -1.0, 1.0), 1))
    assert p2.epoch is None and p2.epoch_reason == "algorithm.epoch=false" and p2.gpu_path == "fused kernel"


def test_long_genome_stays_on_per_generation_kernels():
    """Trap-5 with 10^5 bits (TPI = 128): no epoch kernel, with its reason."""
    algo = GA(pop_size=8)
    plan = algo.fused_plan(_ctx(cp, Trap(100000), 1))
    assert plan.tpi == 128 and plan.epoch is None and "TPI=128" in plan.epoch_reason
    assert plan.gpu_path == "fused kernel" and plan.timings is None
