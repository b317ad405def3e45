"""GPU: CUDA-graph replay gives exactly the plain CuPy loop's results, which match NumPy's
(counter-based random numbers are bit-identical on both). Run on a GPU machine:
``python -m pytest -m gpu tests/test_graph_gpu.py``."""
import numpy as np
import pytest

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.pso.cmepso import MasterSwarm, cmepso_best, run_cmepso  # noqa: E402
from isles.algorithms.pso.epso import EPSO  # noqa: E402
from isles.algorithms.core.graph import GraphStepper  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.islands.group import IslandGroup  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402
from isles.problems.registry import make_problem  # noqa: E402


def ctx_for(xp, streams, problem="welded_beam"):
    return Context(xp=xp, dtype=np.dtype("float64"), evaluator=Evaluator(make_problem(problem)),
                   rng=CounterRNG(xp, 7, streams))


def test_counter_rng_bit_identical():
    a = CounterRNG(np, 3, [0, 5]).uniform(11, 4, (7, 3), np.float64)
    b = CounterRNG(cp, 3, [0, 5]).uniform(11, 4, (7, 3), np.float64).get()
    np.testing.assert_array_equal(a, b)
    a32 = CounterRNG(np, 3, [1]).uniform(2, 1, (100,), np.float32)
    np.testing.assert_array_equal(a32, CounterRNG(cp, 3, [1]).uniform(2, 1, (100,), np.float32).get())


def test_graph_replay_equals_plain_loop():
    algo = EPSO(n_particles=16, n_replicas=3, max_iterations=50)
    ctx = ctx_for(cp, range(4))
    s0 = algo.init(ctx)
    plain = algo.run(ctx, s0, 25)
    stepper = GraphStepper.for_algorithm(algo, ctx, s0)
    stepper.run(10)
    stepper.run(15)
    replayed = stepper.close()
    assert replayed["generation"] == plain["generation"] == 25
    assert replayed["evals"] == plain["evals"]
    for k in ("x", "vel", "pbest", "gbest", "gbest_f"):
        cp.testing.assert_array_equal(replayed[k], plain[k])


def test_cupy_matches_numpy_first_generations():
    algo = EPSO(n_particles=16, n_replicas=3, max_iterations=50)
    sn = algo.run(ctx_for(np, range(2)), algo.init(ctx_for(np, range(2))), 5)
    cctx = ctx_for(cp, range(2))
    sc = GraphStepper.for_algorithm(algo, cctx, algo.init(cctx))
    sc.run(5)
    np.testing.assert_allclose(sc.close()["gbest"].get(), sn["gbest"], rtol=1e-10)


def test_run_cmepso_graph_equals_plain():
    slaves, master = EPSO(n_particles=20, max_iterations=30), MasterSwarm(n_particles=10, max_iterations=30)
    out = []
    for graph in (False, True):
        s, m = run_cmepso(ctx_for(cp, range(10)), ctx_for(cp, [10]), slaves, master, 30, 1, cuda_graph=graph)
        out.append(float(cmepso_best(cp, s, m)[1]))
    assert out[0] == out[1]


def test_island_group_graph_and_migration():
    spec = {"problem": {"_target_": "isles.problems.benchmarks.Rastrigin", "dim": 10},
            "algorithm": {"_target_": "isles.algorithms.pso.epso.EPSO", "n_particles": 12, "n_replicas": 2},
            "island_ids": [0, 1, 2], "seed": 1, "device": "gpu", "n_migrants": 2}
    runs = []
    for graph in (True, False):
        g = IslandGroup({**spec, "cuda_graph": graph})
        g.run_epoch(5)
        s = g.run_epoch(5, inbound={1: [0], 2: [1]}, remote={})
        runs.append(s)
        assert "NVIDIA" in s["device"] or "cuda" in s["device"]
    np.testing.assert_array_equal(runs[0]["best_f"], runs[1]["best_f"])
    assert runs[0]["generation"] == 10


def test_rng_counter_is_zero_between_replays():
    # a draw outside the graph between two run() calls sees state["generation"], as on NumPy
    algo = EPSO(n_particles=8, n_replicas=2, max_iterations=20)
    ctx = ctx_for(cp, range(2))
    stepper = GraphStepper.for_algorithm(algo, ctx, algo.init(ctx))
    stepper.run(6)
    gen = stepper.state["generation"]
    outside = ctx.rng.uniform(gen, 3, (4, 5), np.float64).get()
    np.testing.assert_array_equal(outside, CounterRNG(np, 7, range(2)).uniform(gen, 3, (4, 5), np.float64))
    stepper.run(4)  # and the replays after the draw still continue where they were
    plain = algo.run(ctx_for(cp, range(2)), algo.init(ctx_for(cp, range(2))), 10)
    cp.testing.assert_array_equal(stepper.close()["x"], plain["x"])
