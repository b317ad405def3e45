"""GPU tests of FEP's epoch kernel (algorithms/ep/epoch.py, algorithms/core/cuda/fep_epoch.cu).

Marked ``gpu``. The epoch kernel (every generation of a call in one launch, one block per island)
must equal the per-generation kernels replayed from a CUDA graph bit for bit (X, eta, f, v, the
survivors, the NaN count, the stop target's generation) for FEP, CEP and IFEP, one and several
items per lane, ``q < 32`` and ``q >= 32`` (the two histogram codes), several island counts and
block sizes, ``n`` below and above the graph's 64 generations, in one call and across calls; and
it must select the same individuals as the host twin (:meth:`isles.algorithms.ep.cuda_host.HostFEP.run`,
CI's reference).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import cupy_or_skip, epoch_and_per_generation  # noqa: E402

cp = cupy_or_skip()

from isles.algorithms.ep import cuda_host as ep_host  # noqa: E402
from isles.algorithms.ep.fep import FEP  # noqa: E402
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Sphere  # noqa: E402

from tests.helpers import island_ctx  # noqa: E402
from tests.user_problems import (
    FusedNaNSphere,  # noqa: E402
    FusedPressureVessel,  # noqa: E402
)

pytestmark = pytest.mark.gpu


def _both(algo, ctx, n=50, split=30, eblock=None):
    """(epoch state, per-generation state, plan) after the same ``n`` generations, in two calls
    (``split`` + rest) or one (``split=n``)."""
    plan = algo.fused_plan(ctx)
    return (*epoch_and_per_generation(plan, algo.init(ctx), n, split, eblock), plan)


def _assert_same(a, b):
    for k in ("X", "eta", "f", "v"):
        np.testing.assert_array_equal(cp.asnumpy(a[k]), cp.asnumpy(b[k]), err_msg=k)
    assert (a["generation"], a["evals"]) == (b["generation"], b["evals"])
    assert int(a["nan_evals"]) == int(b["nan_evals"])


CASES = [
    (lambda: Rastrigin(32), dict(pop_size=64), 1, np.float64),
    (lambda: Rastrigin(32), dict(pop_size=400), 20, np.float32),
    (
        lambda: Rosenbrock(70, -30.0, 30.0),
        dict(pop_size=40, mutation="improved", bound_handling="reinit"),
        7,
        np.float64,
    ),
    (lambda: Sphere(5, -1.0, 1.0), dict(pop_size=33, q=3, mutation="gaussian", bound_handling="clip"), 3, np.float64),
    (lambda: Rastrigin(9), dict(pop_size=100, q=40), 40, np.float32),  # q >= 32: shared-memory histogram
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("n,split", [(50, 30), (70, 70), (3, 1)])
def test_epoch_equals_per_generation_kernels_bit_for_bit(case, n, split):
    make, kw, islands, dtype = CASES[case]
    prob = make()
    a, b, _ = _both(FEP(**kw), _ctx(cp, prob, islands, dtype), n, split)
    _assert_same(a, b)


@pytest.mark.parametrize("eblock", [32, 96, 1024])
def test_epoch_block_size_does_not_change_the_result(eblock):
    """One warp for 33 slots (many passes), an odd warp count, 1024 threads (more threads than the
    union: empty chunks in the selection's scans)."""
    prob = Rosenbrock(40, -30.0, 30.0)
    a, b, _ = _both(FEP(pop_size=33, q=7, mutation="improved"), _ctx(cp, prob, 4), 40, 25, eblock)
    _assert_same(a, b)


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_epoch_constrained_user_problem(handling):
    prob = FusedPressureVessel()
    a, b, _ = _both(FEP(pop_size=24, q=6, mutation="improved"), _ctx(cp, prob, 3, handling=handling), 40)
    _assert_same(a, b)


def test_epoch_counts_nan_as_the_per_generation_kernels():
    prob = FusedNaNSphere(dim=5)
    a, b, _ = _both(FEP(pop_size=12, q=5), _ctx(cp, prob, 3), 20, 12)
    _assert_same(a, b)
    assert int(b["nan_evals"]) > 0


def test_epoch_stop_target_generation():
    prob = Sphere(3, -1.0, 1.0)
    a, b, _ = _both(FEP(pop_size=10, q=4, mutation="gaussian"), _ctx(cp, prob, 6, target=0.05), 60, 17)
    _assert_same(a, b)
    hits = cp.asnumpy(b["hit_generation"])
    assert (hits > 0).any() and (hits != hits[0]).any()
    np.testing.assert_array_equal(cp.asnumpy(a["hit_generation"]), hits)


@pytest.mark.parametrize("target", [None, 0.05])
def test_epoch_equals_host_twin(target):
    """The same survivors as HostFEP.run (CI's twin); offspring to the math libraries' ulp."""
    prob = Sphere(6, -1.0, 1.0) if target else Rosenbrock(9, -5.0, 5.0)
    algo = FEP(pop_size=16, q=5, mutation="improved")
    ctx = _ctx(cp, prob, 4, target=target)
    plan = algo.fused_plan(ctx)
    plan.use_epoch = True
    s0 = algo.init(ctx)
    g = plan.run(dict(s0), 25)
    cn = _ctx(np, prob, 4, target=target)
    h = ep_host.HostFEP(algo, cn).run(
        {k: (cp.asnumpy(v) if hasattr(v, "get") else v) for k, v in s0.items()}, 25, target
    )
    np.testing.assert_allclose(cp.asnumpy(g["X"]), h["X"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(cp.asnumpy(g["f"]), h["f"], rtol=1e-9, atol=1e-12)
    assert int(g["nan_evals"]) == int(h["nan_evals"])
    if target is not None:
        np.testing.assert_array_equal(cp.asnumpy(g["hit_generation"]), h["hit_generation"])


def test_plan_times_both_paths_and_reports_its_choice():
    algo = FEP(pop_size=16, q=5)
    ctx = _ctx(cp, Sphere(2), 1)
    plan = algo.fused_plan(ctx)
    assert plan.timings is not None and len(plan.timings) == 2 and min(plan.timings) > 0
    assert plan.gpu_path == ("epoch kernel" if plan.use_epoch else "fused kernel")
    assert algo.gpu_path(ctx) == plan.gpu_path
    off = FEP(pop_size=16, q=5, epoch=False)
    p2 = off.fused_plan(_ctx(cp, Sphere(2), 1))
    assert p2.epoch is None and p2.epoch_reason == "algorithm.epoch=false" and p2.gpu_path == "fused kernel"


def _ctx(xp, prob, islands=5, dtype=np.float64, **kw):
    return island_ctx(xp, prob, islands, kw.pop("seed", 3), dtype=dtype, **kw)
