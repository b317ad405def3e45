"""GPU tests of the co-evolutionary DE on CuPy (``pytest -m gpu tests/test_cde_gpu.py``).

Checks: the CuPy path, with the fused pair kernel and without, draws the same random numbers and
reaches the NumPy twin's populations (rand/1 and best/1, P1 and an augmented-Lagrangian problem),
the fused kernel equals the array code on the device, a whole cycle replayed as a CUDA
graph equals plain cycles, and the replayed cycles keep both populations in their boxes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()

from isles.algorithms.coevolution.cde import CDE  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.graph import GraphStepper  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.cec2006 import G01, G07, G09, G10  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402
from isles.problems.engineering import Spring  # noqa: E402
from isles.problems.minmax import AugmentedLagrangian, SaddleP1  # noqa: E402

pytestmark = pytest.mark.gpu


def _ctx(xp, prob, n=3, seed=2):
    return Context(xp, np.float64, Evaluator(prob), CounterRNG(xp, seed, range(n)))


PROBLEMS = {"p1": lambda: SaddleP1(20), "g07": lambda: AugmentedLagrangian(G07(), r=1e7)}


@pytest.mark.parametrize("epoch", [True, False])
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("strategy", ["rand/1", "best/1"])
@pytest.mark.parametrize("pid", list(PROBLEMS))
def test_cupy_equals_numpy(pid, strategy, fused, epoch):
    algo = CDE(pop_size=12, gens_x=4, gens_y=3, strategy=strategy, fused=fused, epoch=epoch)
    out = {}
    for xp in (np, cp):
        ctx = _ctx(xp, PROBLEMS[pid]())
        out[xp.__name__] = algo.run(ctx, algo.init(ctx), 3)
        if xp is cp:
            assert (algo.fused_pairs(ctx) is not None) == fused
            assert algo.gpu_path(ctx).startswith("epoch") == (epoch and strategy == "rand/1")
    a, b = out["numpy"], out["cupy"]
    for k in ("X", "Y", "f", "fy", "bx", "bf", "bv"):
        np.testing.assert_allclose(cp.asnumpy(b[k]), a[k], rtol=1e-11, atol=1e-12, err_msg=k)
    assert a["evals"] == b["evals"] and a["generation"] == b["generation"]


@pytest.mark.parametrize("epoch", [True, False])
def test_graph_replay_of_cycles_equals_plain_cycles(epoch):
    prob = AugmentedLagrangian(G07(), r=1e7)
    algo = CDE(pop_size=10, gens_x=3, gens_y=2, epoch=epoch)
    ctx = _ctx(cp, prob)
    s0 = algo.init(ctx)
    plain = algo.run(ctx, dict(s0), 4)
    stepper = GraphStepper.for_algorithm(algo, ctx, dict(s0))
    stepper.run(4)
    replay = stepper.close()
    for k in ("X", "Y", "f", "fy", "bx", "bf"):
        np.testing.assert_array_equal(cp.asnumpy(replay[k]), cp.asnumpy(plain[k]), err_msg=k)
    assert replay["generation"] == plain["generation"] == 4
    Y = cp.asnumpy(replay["Y"])
    assert Y.min() >= 0 and Y.max() <= prob.multiplier_bound


@pytest.mark.parametrize("pid", list(PROBLEMS))
def test_fused_pairs_equal_array_code_on_device(pid):
    prob = PROBLEMS[pid]()
    algo = CDE(pop_size=64, pop_size_y=48, fused=True)
    ctx = _ctx(cp, prob, n=4)
    s = algo.run(ctx, algo.init(ctx), 1)
    fused = algo.fused_pairs(ctx)
    assert fused is not None
    for role in ("x", "y"):
        a, _ = fused(s["X"], s["Y"], role)
        b, _ = algo.pair_fitness(ctx, s["X"], s["Y"], role, generic=True)
        np.testing.assert_allclose(cp.asnumpy(a), cp.asnumpy(b), rtol=1e-13)


EPOCH_PROBLEMS = {
    **PROBLEMS,
    "g01": lambda: AugmentedLagrangian(G01()),
    "g09": lambda: AugmentedLagrangian(G09()),
    "g10": lambda: AugmentedLagrangian(G10()),
    "spring": lambda: AugmentedLagrangian(Spring()),
}


@pytest.mark.parametrize("crossover", ["bin", "nec"])
@pytest.mark.parametrize("pid", list(EPOCH_PROBLEMS))
def test_epoch_kernel_equals_graph_path_and_host_twin(pid, crossover):
    """The CUDA epoch kernel, the graph path (epoch=False) and the kernel's host emulation run the
    same cycles: identical rows, fitness to rounding."""
    from isles.algorithms.coevolution.epoch import host_epoch  # noqa: PLC0415

    prob = EPOCH_PROBLEMS[pid]()
    out = {}
    for epoch in (True, False):
        algo = CDE(pop_size=16, pop_size_y=12, gens_x=5, gens_y=4, crossover=crossover, epoch=epoch)
        ctx = _ctx(cp, prob, n=4)
        out[epoch] = algo.run(ctx, algo.init(ctx), 3)
        assert algo.gpu_path(ctx) == ("epoch kernel (shared memory)" if epoch else "graph")
    nctx = _ctx(np, prob, n=4)
    s0 = algo.init(nctx)
    host = host_epoch(algo.params, prob).step(dict(s0), nctx.rng.keys, 3)
    a, b = out[True], out[False]
    for k in ("X", "Y", "f", "fy", "bx", "bf", "bv"):
        np.testing.assert_allclose(cp.asnumpy(a[k]), cp.asnumpy(b[k]), rtol=1e-11, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(cp.asnumpy(a[k]), host[k], rtol=1e-11, atol=1e-12, err_msg=k)
    assert a["evals"] == b["evals"] == host["evals"]
    assert int(a["nan_evals"]) == int(b["nan_evals"])


def test_epoch_kernel_with_rows_in_global_memory():
    """A population too large for shared memory keeps its rows in global memory: same cycles."""
    prob = SaddleP1(100)
    out = {}
    for epoch in (True, False):
        algo = CDE(pop_size=160, gens_x=2, gens_y=2, epoch=epoch)
        ctx = _ctx(cp, prob, n=2)
        out[epoch] = algo.run(ctx, algo.init(ctx), 2)
        if epoch:
            assert algo.gpu_path(ctx) == "epoch kernel (global memory)"
    for k in ("X", "Y", "f", "fy", "bx", "bf"):
        np.testing.assert_allclose(
            cp.asnumpy(out[True][k]), cp.asnumpy(out[False][k]), rtol=1e-11, atol=1e-12, err_msg=k
        )


def test_epoch_kernel_float32_twenty_islands():
    prob = AugmentedLagrangian(G10())  # 6 penalty terms: NumPy sums them left to right too
    algo = CDE(pop_size=50, gens_x=20, gens_y=20)
    ctx = Context(cp, np.float32, Evaluator(prob), CounterRNG(cp, 3, range(20)))
    s = algo.run(ctx, algo.init(ctx), 2)
    nctx = Context(np, np.float32, Evaluator(prob), CounterRNG(np, 3, range(20)))
    ref = algo.run(nctx, algo.init(nctx), 2)
    np.testing.assert_allclose(cp.asnumpy(s["X"]), ref["X"], rtol=1e-5)
    np.testing.assert_allclose(cp.asnumpy(s["bf"]), ref["bf"], rtol=1e-5)
