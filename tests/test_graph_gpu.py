"""GPU: CUDA-graph replay gives exactly the plain CuPy loop's results, which match NumPy's
(counter-based random numbers are bit-identical on both). Run on a GPU machine:
``python -m pytest -m gpu tests/test_graph_gpu.py``."""

import numpy as np
import pytest

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.graph import GraphStepper  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.pso.epso import EPSO  # noqa: E402
from isles.islands.group import IslandGroup  # noqa: E402
from isles.islands.records import GroupSpec  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402
from isles.problems.registry import make_problem  # noqa: E402

from tests.helpers import assert_same_runs, cmepso_run, one_epoch  # noqa: E402


def ctx_for(xp, streams, problem="welded_beam"):
    return Context(
        xp=xp, dtype=np.dtype("float64"), evaluator=Evaluator(make_problem(problem)), rng=CounterRNG(xp, 7, streams)
    )


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


def test_cmepso_graph_equals_plain():
    """CMEPSO of the runtime (+experiment=cmepso, 10 slave islands and the master swarm plug-in, 30
    generations) on one GPU: replays of captured generations and epochs (cuda_graph=true,
    islands.span_graph=always) equal the plain loop (cuda_graph=false, islands.span_graph=never), bit for bit."""
    run = ("device=gpu", "generations=30")
    graph = cmepso_run(*run, "cuda_graph=true", "islands.span_graph=always")
    loop = cmepso_run(*run, "cuda_graph=false", "islands.span_graph=never")
    assert_same_runs(graph, loop, ["master_best_f"])


def test_island_group_graph_and_migration():
    spec = {
        "problem": {"_target_": "isles.problems.benchmarks.Rastrigin", "dim": 10},
        "algorithm": {"_target_": "isles.algorithms.pso.epso.EPSO", "n_particles": 12, "n_replicas": 2},
        "island_ids": [0, 1, 2],
        "seed": 1,
        "device": "gpu",
        "n_migrants": 2,
    }
    runs = []
    for graph in (True, False):
        g = IslandGroup(GroupSpec(**{**spec, "cuda_graph": graph}))
        one_epoch(g, 5)
        s = one_epoch(g, 5, inbound={1: [0], 2: [1]}, remote={})
        runs.append(s)
        assert "NVIDIA" in s.device or "cuda" in s.device
    np.testing.assert_array_equal(runs[0].best_f, runs[1].best_f)
    assert runs[0].generation == 10


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


# ---------------------------------------------------------------------------------------------
# a user's problem as array code (no cuda_objective): DE, FEP and the GA capture their generation
# (algorithms/core/plan.py) and select the same individuals as the NumPy twin
# ---------------------------------------------------------------------------------------------
import warnings  # noqa: E402

from isles.algorithms.de.de import DE  # noqa: E402
from isles.algorithms.ep.fep import FEP  # noqa: E402
from isles.algorithms.ga.ga import GA  # noqa: E402
from isles.problems.benchmarks import Rastrigin  # noqa: E402

from tests.user_problems import CountingSphere, HostSyncSphere, MaskedSphere, PressureVessel  # noqa: E402


class UserRastrigin(Rastrigin):
    """Rastrigin as a user writes it: array code only."""

    name = "user_rastrigin"
    cuda_objective = None


FAMILIES = {
    "de_rand1_bin": lambda: DE(pop_size=24, F=0.5, CR=0.9),
    "de_rand1_nec": lambda: DE(pop_size=24, F=0.5, CR=0.3, crossover="nec", bound_handling="reinit"),
    "de_best1": lambda: DE(pop_size=24, strategy="best/1"),
    "fep": lambda: FEP(pop_size=20, q=5),
    "ga": lambda: GA(pop_size=32),
}
PROBLEMS = {"rastrigin": lambda: UserRastrigin(6), "pressure_vessel": PressureVessel}


def _pair(problem, target=None, streams=(0, 3)):
    ev = Evaluator(problem)
    return (
        Context(np, np.float64, ev, CounterRNG(np, 9, list(streams)), target=target),
        Context(cp, np.float64, ev, CounterRNG(cp, 9, list(streams)), target=target),
    )


def _assert_same_population(alg, sn, sc):
    g = alg.FIELDS["genome"]
    if sn[g].dtype.kind in "ui":
        np.testing.assert_array_equal(sn[g], sc[g].get())
    else:
        np.testing.assert_allclose(sn[g], sc[g].get(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sn["f"], sc["f"].get(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sn["v"], sc["v"].get(), rtol=1e-9, atol=1e-12)
    assert sn["generation"] == sc["generation"] and sn["evals"] == sc["evals"]
    assert int(sn["nan_evals"]) == int(sc["nan_evals"])


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_array_code_problem_captured_equals_numpy(family, problem):
    prob = PROBLEMS[problem]()
    cn, cc = _pair(prob)
    an, ac = FAMILIES[family](), FAMILIES[family]()
    sn, sc = an.init(cn), ac.init(cc)
    assert ac.fused_plan(cc) is None  # no cuda_objective: not the fully fused plan
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the capture must not fall back
        sc = ac.run(cc, ac.run(cc, sc, 9), 14)  # two calls: the second replays the same graph
    sn = an.run(cn, sn, 23)
    assert ac._captures[id(cc)].stepper is not None and ac._captures[id(cc)].stepper.replays == 23
    _assert_same_population(ac, sn, sc)


def test_de_fused_variation_is_bit_identical_to_array_trial():
    prob = UserRastrigin(37)
    for kw in (
        dict(crossover="bin", bound_handling="reflect"),
        dict(crossover="nec", CR=0.4, bound_handling="clip"),
        dict(crossover="bin", bound_handling="reinit"),
    ):
        _, cc = _pair(prob, streams=(0, 1, 5))
        fused, plain = DE(pop_size=50, **kw), DE(pop_size=50, fused=False, **kw)
        s = plain.init(cc)
        for g in (0, 7, 1234):
            s = {**s, "generation": g}
            assert fused.module_plan(cc, "make_variation") is not None
            assert _same(fused.trial(cc, s), plain.trial(cc, s)), (kw, g)


def test_cuda_graph_false_issues_array_code_uncaptured():
    prob = UserRastrigin(6)
    cn, cc = _pair(prob)
    cc.cuda_graph = False  # config cuda_graph=false (IslandGroup passes it to the context)
    an, ac = FAMILIES["de_rand1_bin"](), FAMILIES["de_rand1_bin"]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not a capture failure: no warning
        sc = ac.run(cc, ac.init(cc), 7)
    assert id(cc) not in ac._captures
    _assert_same_population(ac, an.run(cn, an.init(cn), 7), sc)


def _same(a, b):
    return a.shape == b.shape and bool(cp.all(a.view(np.uint8) == b.view(np.uint8)))


@pytest.mark.parametrize("family", ["de_rand1_bin", "fep", "ga"])
@pytest.mark.parametrize("problem,reason", [(HostSyncSphere, ""), (MaskedSphere, ""), (CountingSphere, "replay")])
def test_capture_unsafe_problem_warns_once_and_runs_uncaptured(family, problem, reason):
    prob = problem()
    _, cc = _pair(prob)
    alg = FAMILIES[family]()
    s = alg.init(cc)
    with pytest.warns(RuntimeWarning) as rec:
        s = alg.run(cc, s, 5)
    lines = [str(w.message) for w in rec if "uncaptured" in str(w.message)]
    assert len(lines) == 1 and prob.name in lines[0] and alg.name in lines[0] and reason in lines[0], lines
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one line per run, not per call
        s = alg.run(cc, s, 4)
    assert s["generation"] == 9 and alg._captures[id(cc)].stepper is None
    if problem is not CountingSphere:  # uncaptured, the results are the NumPy twin's
        cn, _ = _pair(problem())
        an = FAMILIES[family]()
        _assert_same_population(alg, an.run(cn, an.init(cn), 9), s)


@pytest.mark.parametrize("family", ["de_rand1_bin", "fep", "ga"])
def test_hit_generation_exact_on_captured_array_code(family):
    prob = UserRastrigin(2)
    cn, cc = _pair(prob, target=2.0, streams=(0, 1, 2, 3))
    an, ac = FAMILIES[family](), FAMILIES[family]()
    sn = an.run(cn, an.track_target(cn, an.init(cn)), 40)
    sc = ac.run(cc, ac.run(cc, ac.track_target(cc, ac.init(cc)), 13), 27)
    hn, hc = sn["hit_generation"], sc["hit_generation"].get()
    np.testing.assert_array_equal(hn, hc)
    assert (hn > 0).any()  # some island reached the target after the start, inside an epoch


@pytest.mark.parametrize("family", ["de_rand1_bin", "fep"])
def test_hit_generation_exact_on_fused_plan(family):
    """The fused plans track the target inside their CUDA graph after every generation (a tiny
    kernel, algorithms/core/plan.py TargetTracker): the NumPy twin's generation, not the epoch's end."""
    prob = Rastrigin(4)
    cn, cc = _pair(prob, target=0.05, streams=(0, 1, 2, 3))
    an, ac = FAMILIES[family](), FAMILIES[family]()
    assert ac.fused_plan(cc) is not None
    sn = an.run(cn, an.track_target(cn, an.init(cn)), 300)
    sc = ac.run(cc, ac.run(cc, ac.track_target(cc, ac.init(cc)), 70), 230)  # graphs of 64 + singles
    hn, hc = sn["hit_generation"], sc["hit_generation"].get()
    np.testing.assert_array_equal(hn, hc)
    assert ((hn > 0) & (hn % 64 != 0)).any(), hn  # reached inside an epoch, not at a graph boundary


@pytest.mark.parametrize(
    "algorithm",
    [
        {"_target_": "isles.algorithms.de.de.DE", "pop_size": 20},
        {"_target_": "isles.algorithms.ep.fep.FEP", "pop_size": 20, "q": 5},
        {"_target_": "isles.algorithms.ga.ga.GA", "pop_size": 32},
    ],
    ids=["de", "fep", "ga"],
)
def test_island_group_user_problem_gpu_equals_cpu(algorithm):
    """The runtime's path: epochs with migration between them on a user's constrained problem
    (array code): the GPU group (captured generations, migrants loaded into the graph's buffers)
    gives the CPU group's bests and hit generations."""
    spec = {
        "problem": {"_target_": "tests.user_problems.PressureVessel"},
        "algorithm": algorithm,
        "island_ids": [0, 1, 2],
        "seed": 3,
        "n_migrants": 1,
        "target": 20000.0,
    }
    runs = {}
    for device in ("gpu", "cpu"):
        g = IslandGroup(GroupSpec(**{**spec, "device": device}))
        s = one_epoch(g, 7)
        for _ in range(2):
            s = one_epoch(g, 7, inbound={1: [0], 2: [1], 0: [2]}, remote={})
        runs[device] = s
    assert runs["gpu"].generation == runs["cpu"].generation == 21
    np.testing.assert_allclose(runs["gpu"].best_f, runs["cpu"].best_f, rtol=1e-9)
    np.testing.assert_array_equal(runs["gpu"].hit_generation, runs["cpu"].hit_generation)
