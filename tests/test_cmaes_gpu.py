"""GPU tests of the batched CMA-ES on CuPy (algorithms/cmaes/): the same array code as NumPy.

Marked ``gpu`` and skipped where CuPy or a CUDA device is missing. What is asserted, and why not
more: the random numbers are bit-identical (counter-based), so the initial state and the first
block of samples (``B = I``: every product in ``y = B D z`` but one is an exact zero) are equal
bit for bit. After that, cuBLAS's and cuSOLVER's rounding differs from OpenBLAS's and LAPACK's
(``matmul`` sums in another order, ``eigh`` is another algorithm; the eigenvectors' signs are
fixed by :func:`isles.algorithms.cmaes.cmaes.canonical_signs`), so the trajectories agree to
rounding for the first generations and are then compared statistically (both converge on the
sphere within the CPU test's bounds); restarts and injection run the same masks on both.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()

from isles.algorithms.cmaes.cmaes import CMAES  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.population import Population  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.benchmarks import Rastrigin, Sphere  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

pytestmark = pytest.mark.gpu


def ctx_of(xp, prob, islands=4, seed=3):
    return Context(xp, np.float64, Evaluator(prob), CounterRNG(xp, seed, list(range(islands))))


def host(a):
    return cp.asnumpy(a) if hasattr(a, "get") else np.asarray(a)


def test_initial_state_is_bit_identical_and_first_block_agrees_to_rounding():
    prob = Sphere(10, -5.0, 5.0)
    alg = CMAES(dim=10, restarts="bipop")
    c_cpu, c_gpu = ctx_of(np, prob), ctx_of(cp, prob)
    s_cpu, s_gpu = alg.init(c_cpu), alg.init(c_gpu)
    for k in ("X", "mean", "sigma", "C", "B", "d", "lam"):
        np.testing.assert_array_equal(host(s_gpu[k]), s_cpu[k], err_msg=k)
    np.testing.assert_allclose(host(s_gpu["f"]), s_cpu["f"], rtol=1e-14)
    x_cpu = alg.sample_block(c_cpu, s_cpu)[0]
    x_gpu = alg.sample_block(c_gpu, s_gpu)[0]
    # the block is mean + sigma * B (d * z): the same draws z, but cuBLAS and OpenBLAS sum the
    # product in different orders (seen on an H100: 34 of 400 entries one ulp apart)
    np.testing.assert_allclose(host(x_gpu), x_cpu, rtol=1e-14, atol=1e-14)


def test_trajectories_agree_to_rounding_then_both_converge():
    prob = Sphere(10, -5.0, 5.0)
    alg = CMAES(dim=10, restarts="none")
    c_cpu, c_gpu = ctx_of(np, prob), ctx_of(cp, prob)
    s_cpu, s_gpu = alg.init(c_cpu), alg.init(c_gpu)
    for g in range(300):
        s_cpu, s_gpu = alg.step(c_cpu, s_cpu), alg.step(c_gpu, s_gpu)
        if g < 5:
            np.testing.assert_allclose(host(s_gpu["mean"]), s_cpu["mean"], rtol=1e-8, atol=1e-12)
            np.testing.assert_allclose(host(s_gpu["C"]), s_cpu["C"], rtol=1e-8, atol=1e-12)
    assert s_gpu["evals"] == s_cpu["evals"]
    assert (host(s_gpu["f"][:, 0]) < 1e-10).all() and (s_cpu["f"][:, 0] < 1e-10).all()


def test_restarts_and_injection_run_on_the_gpu():
    """BIPOP on Rastrigin with a migrant injected: the same counters and masks as on NumPy (the
    restart generations may differ once rounding has moved the runs apart, so only the
    invariants are compared)."""
    prob = Rastrigin(5)
    alg = CMAES(dim=5, restarts="bipop", max_doublings=3)
    ctx = ctx_of(cp, prob)
    s = alg.init(ctx)
    for _ in range(20):
        s = alg.step(ctx, s)
    star = cp.zeros((4, 1, 5))
    f, v, _ = ctx.evaluator(star)
    s = alg.replace(ctx, s, cp.full((4, 1), alg.population_size() - 1, dtype=np.int64), Population(star, f, v))
    s = alg.step(ctx, s)
    np.testing.assert_array_equal(host(s["X"][:, 1]), 0.0)  # the immigrant was evaluated
    for _ in range(1500):
        s = alg.step(ctx, s)
    assert (host(s["runs"]) > 0).all()
    lam = host(s["lam"])
    assert ((lam % alg.lam0 == 0) & (lam <= alg.params.lam_cap)).all()
    assert s["evals"] == 1 + 1521 * alg.lam0
    assert host(s["f"][:, 0]).max() == 0.0  # the injected optimum stays the best so far


_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
}
"""


@pytest.mark.xfail(
    strict=True,
    reason="CuPy 14's batched eigh waits for the device at n = 100 (one call behind a 0.5 s spin: the host "
    "waited 0.51 s; at n = 16, 32, 33 it waited 0 s: python benchmarks/eigh_sync.py)",
)
def test_batched_decomposition_at_d100_and_no_host_sync():
    """Issue 28's workload shape (D = 100 > 32, where cuSOLVER's batched Jacobi leaves its fast path;
    lambda = 4 + floor(3 ln D) = 17, so the lazy rule decomposes every generation): the batched
    ``eigh`` reconstructs every island's C, and generations queue behind 1.5 s of device work
    without the host waiting (no synchronisation inside a generation)."""
    import time  # noqa: PLC0415

    D, I = 100, 16
    alg = CMAES(dim=D)
    assert alg.lam0 == 17 and alg.eigen_interval(D) == 1
    ctx = ctx_of(cp, Sphere(D, -5.0, 5.0), islands=I)
    s = alg.init(ctx)
    for _ in range(4):
        s = alg.step(ctx, s)
    B, d, C = host(s["B"]), host(s["d"]), host(s["C"])
    rebuilt = np.matmul(B * (d * d)[:, None, :], np.swapaxes(B, 1, 2))
    np.testing.assert_allclose(rebuilt, (C + np.swapaxes(C, 1, 2)) / 2, rtol=1e-8, atol=1e-10 * np.abs(C).max())
    cp.cuda.Device().synchronize()
    cp.RawKernel(_SPIN, "spin")((1,), (1,), (np.int64(1_500_000_000),))
    t0 = time.perf_counter()
    for _ in range(3):
        s = alg.step(ctx, s)
    waited = time.perf_counter() - t0
    busy = not cp.cuda.get_current_stream().done
    cp.cuda.Device().synchronize()
    assert busy and waited < 1.0, f"host waited {waited:.3f} s for the device"


def test_budget_and_metrics_on_cupy():
    """The budget's short last block on CuPy: exactly the share is evaluated, the distribution stays;
    the metrics hook gives (I,) device arrays (sigma, pop_size, restarts, regime, condition)."""
    ctx = ctx_of(cp, Sphere(4), islands=2)
    lam = CMAES(dim=4).lam0
    alg = CMAES(dim=4, restarts="ipop", max_evaluations=2 * (1 + 5 * lam + 3), n_islands=2)
    s = alg.init(ctx)
    for _ in range(5):
        s = alg.step(ctx, s)
    last = alg.step(ctx, s)
    assert last["evals"] == 1 + 5 * lam + 3 and alg.step(ctx, last)["evals"] == last["evals"]
    for key in ("mean", "sigma", "C", "Y", "blk"):
        assert bool((last[key] == s[key]).all()), key
    m = alg.metrics(last)
    assert set(m) == {"sigma", "pop_size", "restarts", "regime", "condition"}
    assert all(isinstance(v, cp.ndarray) and v.shape == (2,) for v in m.values())
    np.testing.assert_array_equal(host(m["sigma"]), host(last["sigma"]))
