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
from isles.problems.cec2006 import G07  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402
from isles.problems.minmax import AugmentedLagrangian, SaddleP1  # noqa: E402

pytestmark = pytest.mark.gpu


def _ctx(xp, prob, n=3, seed=2):
    return Context(xp, np.float64, Evaluator(prob), CounterRNG(xp, seed, range(n)))


PROBLEMS = {"p1": lambda: SaddleP1(20), "g07": lambda: AugmentedLagrangian(G07(), r=1e7)}


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("strategy", ["rand/1", "best/1"])
@pytest.mark.parametrize("pid", list(PROBLEMS))
def test_cupy_equals_numpy(pid, strategy, fused):
    algo = CDE(pop_size=12, gens_x=4, gens_y=3, strategy=strategy, fused=fused)
    out = {}
    for xp in (np, cp):
        ctx = _ctx(xp, PROBLEMS[pid]())
        out[xp.__name__] = algo.run(ctx, algo.init(ctx), 3)
        if xp is cp:
            assert (algo.fused_pairs(ctx) is not None) == fused
    a, b = out["numpy"], out["cupy"]
    for k in ("X", "Y", "f", "fy", "bx", "bf", "bv"):
        np.testing.assert_allclose(cp.asnumpy(b[k]), a[k], rtol=1e-11, atol=1e-12, err_msg=k)
    assert a["evals"] == b["evals"] and a["generation"] == b["generation"]


def test_graph_replay_of_cycles_equals_plain_cycles():
    prob = AugmentedLagrangian(G07(), r=1e7)
    algo = CDE(pop_size=10, gens_x=3, gens_y=2)
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
