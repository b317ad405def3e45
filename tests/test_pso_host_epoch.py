"""Plain PSO's compiled CPU path (algorithms/pso/host_epoch.py with algorithms/core/cuda/epso_host.cuh
and obj_fold.cuh; issue 37): whole generations of every island in one C call, EPSO's host build
with no replicas and no third attractor.

Against the NumPy twin (``host_kernel=false``, PSO.step's array code), over several generations and
islands: positions, velocities, personal and global bests, their ``f`` and ``v``, the NaN count and
the evaluations bit for bit (``f`` where the C objective is the array code's bit for bit: the
welded beam's row code, and Rastrigin, Sphere and Griewank folded in NumPy's order where the C
library's ``cos`` is NumPy's; else to rounding), with feasibility and penalty handling, with and
without the velocity clamp, COR over the overshoot and the range; ``step``, chunks and threads
equal one call; the stop target as the twin's; without a compiler, the twin and one line;
``host_kernel=false`` never builds; a whole ``device=cpu`` run the same ``f`` as the twin's.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from isles.algorithms.core import host_build
from isles.algorithms.pso import host_epoch
from isles.algorithms.pso.host_epoch import HostEpochEPSO
from isles.algorithms.pso.pso import PSO, inertia_weight, vmax_schedule
from isles.problems import cuda_check, make_problem

from tests.helpers import island_ctx, numpy_twin

needs_cc = pytest.mark.skipif(cuda_check.compiler() is None, reason="no C compiler")

LEAVES = ("x", "vel", "pbest", "gbest", "pbest_v", "gbest_v", "nan_evals")
FITNESS = ("pbest_f", "gbest_f")
CONFIGS = [  # PSO fields
    {},  # the defaults: the decreasing clamp, COR over the overshoot
    dict(vmax_fraction=0.0, cor_mode="range"),  # no clamp, COR over the range
    dict(w_max=0.7, w_min=0.7, c1=1.5, c2=2.5, cor=0.0, vmax_final=0.3),  # constant w, clipping
]
PROBLEMS = {  # name -> (problem, handling)
    "rastrigin_5": (lambda: make_problem("rastrigin", dim=5), "feasibility"),
    "rastrigin_12": (lambda: make_problem("rastrigin", dim=12), "feasibility"),  # >= 8 terms: NumPy's pairwise sum
    "welded_beam": (lambda: make_problem("welded_beam"), "feasibility"),  # constraints, the row code
    "welded_beam_penalty": (lambda: make_problem("welded_beam"), "penalty"),
}


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _start(problem, dtype=np.float64, islands=3, handling="feasibility", target=None, **fields):
    alg = PSO(n_particles=fields.pop("n_particles", 11), max_iterations=30, **fields)
    ctx = island_ctx(np, problem, islands=islands, dtype=dtype, handling=handling, target=target)
    return alg, ctx, alg.init(ctx)


def _exact_f(host) -> bool:
    """Whether the host build's ``f`` is the array code's bit for bit: the row code, or a fused
    objective folded in NumPy's order (the build checked it on its points)."""
    return host.np_order == 1 or getattr(host.ctx.evaluator.problem, "cuda_row", None) is not None


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("problem", list(PROBLEMS))
@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_default_run_is_the_host_build_and_the_numpy_twin(dtype, problem, config):
    """The default run (``host_kernel=auto``) is the host build's; after 20 generations of 3
    islands its state is the twin's bit for bit (``f`` too where the C objective is exact)."""
    make, handling = PROBLEMS[problem]
    alg, ctx, s0 = _start(make(), dtype, handling=handling, **CONFIGS[config])
    assert alg.params.host_kernel == "auto"
    got = alg.run(ctx, dict(s0), 20)
    assert alg.gpu_path(ctx) == "host kernel"
    want = numpy_twin(alg).run(ctx, dict(s0), 20)
    for k in LEAVES:
        assert _same(got[k], want[k]), k
    host = host_epoch.host_plan(alg, ctx)
    for k in FITNESS:
        if _exact_f(host):
            assert _same(got[k], want[k]), k
        else:  # float32: NumPy's own cos, not the C library's
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert (got["generation"], got["evals"]) == (want["generation"], want["evals"]) == (20, 21 * 11)
    if dtype == np.float64 and problem.startswith("rastrigin") and host.c_cos:
        assert host.np_order == 1  # where the C library's cos is NumPy's, Rastrigin's f is exact


@needs_cc
@pytest.mark.parametrize(("name", "dim"), [("rastrigin", 100), ("sphere", 300), ("griewank", 10), ("rastrigin", 9)])
def test_fused_objective_folded_in_numpys_order(name, dim):
    """``obj_fold.cuh``: a fused objective's sums in NumPy's pairwise order and its products left to
    right give the array code's ``f`` bit for bit on points everywhere in the box and near the
    optimum (the left-to-right fold does not, at 8 terms and more)."""
    prob = make_problem(name, dim=dim)
    alg, ctx, _ = _start(prob, islands=1)
    host = HostEpochEPSO(alg, ctx)
    if not host.c_cos:
        pytest.skip("the C library's cos is not NumPy's here: the fold cannot be exact")
    assert host.np_order == 1
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.uniform(prob.lower, prob.upper, (300, dim)), rng.uniform(-1e-3, 1e-3, (300, dim))])
    X = np.ascontiguousarray(X)
    fw = ctx.evaluator(X[None])[0][0]
    f, _ = host.evaluate(X)
    assert _same(f, fw)
    f_seq, _ = host.evaluate(X, np_order=0)
    assert not _same(f_seq, fw)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "fields",
    [dict(max_iterations=37), dict(max_iterations=1), dict(vmax_fraction=0.0), dict(vmax_final=0.6), {}],
)
def test_schedules_are_pythons(dtype, fields):
    """The inertia weight and the clamp of each generation, computed in C for a chunk
    (``epso_host_schedules``), are :func:`inertia_weight`'s and :func:`vmax_schedule`'s Python
    values bit for bit, past ``max_iterations`` too; zeros without the clamp."""
    alg = PSO(**{"max_iterations": 1000, **fields})
    host = HostEpochEPSO(alg, island_ctx(np, make_problem("sphere", dim=3), islands=1, dtype=dtype))
    p = alg.params
    w, vm = host.schedules(3, 1200)
    ks = range(4, 1204)
    assert _same(w, np.array([inertia_weight(k, p.max_iterations, p.w_max, p.w_min) for k in ks], dtype=dtype))
    want = [
        vmax_schedule(k, p.max_iterations, p.vmax_fraction, p.vmax_final) if p.vmax_fraction > 0 else 0.0 for k in ks
    ]
    assert _same(vm, np.array(want, dtype=dtype))


@needs_cc
def test_steps_chunks_and_threads_equal_one_call(monkeypatch):
    """``run(n)`` in one call, in one-generation chunks, as ``n`` ``step`` calls, and with the
    islands on 3 threads: the same state; :func:`host_plan` takes ``ISLES_HOST_THREADS``."""
    alg, ctx, s0 = _start(make_problem("rastrigin", dim=10), islands=5)
    host = HostEpochEPSO(alg, ctx)
    one = host.run(dict(s0), 9)
    monkeypatch.setattr(host_epoch, "CHUNK_ELEMENTS", 1)
    chunked = host.run(dict(s0), 9)
    steps = dict(s0)
    for _ in range(9):
        steps = alg.step(ctx, steps)
    host.threads = 3
    many = host.run(dict(s0), 9)
    for k in (*LEAVES, *FITNESS):
        assert _same(chunked[k], one[k]) and _same(steps[k], one[k]) and _same(many[k], one[k]), k
    monkeypatch.setenv("ISLES_HOST_THREADS", "4")
    assert host_epoch.host_plan(PSO(n_particles=8), island_ctx(np, make_problem("spring"), islands=6)).threads == 4


@needs_cc
def test_stop_target_tracked_as_the_twin():
    alg, ctx, s0 = _start(make_problem("sphere", dim=3, lower=-1.0, upper=1.0), target=1e-3)
    s0 = alg.track_target(ctx, s0)
    got = alg.run(ctx, dict(s0), 30)
    want = numpy_twin(alg).run(ctx, dict(s0), 30)
    assert (np.asarray(want["hit_generation"]) > 0).any()
    assert _same(got["hit_generation"], want["hit_generation"]) and _same(got["x"], want["x"])


@pytest.mark.parametrize("mode", ["auto", True])
def test_no_c_compiler_runs_the_twin_with_one_line(mode, monkeypatch, caplog):
    """No C compiler (simulated): the array code bit for bit and one line (a warning for ``true``)."""
    monkeypatch.setattr(cuda_check, "compiler", lambda: None)
    alg, ctx, s0 = _start(make_problem("rastrigin", dim=6), host_kernel=mode)
    with caplog.at_level(logging.INFO, logger="isles.algorithms"):
        got = alg.run(ctx, alg.run(ctx, dict(s0), 2), 2)
        assert alg.gpu_path(ctx) == "numpy"
    want = numpy_twin(alg).run(ctx, dict(s0), 4)
    for k in (*LEAVES, *FITNESS):
        assert _same(got[k], want[k]), k
    recs = [r for r in caplog.records if "not the host kernel" in r.getMessage()]
    assert len(recs) == 1 and recs[0].getMessage().startswith("PSO: NumPy array code"), recs
    assert "no C compiler" in recs[0].getMessage()
    assert recs[0].levelno == (logging.INFO if mode == "auto" else logging.WARNING)


@needs_cc
def test_a_problem_without_c_objective_says_why(caplog):
    """The speed reducer has neither row code nor fused objective: the twin, its reason in the line."""
    alg, ctx, s0 = _start(make_problem("speed_reducer"))
    with caplog.at_level(logging.INFO, logger="isles.algorithms"):
        got = alg.run(ctx, dict(s0), 3)
    assert alg.gpu_path(ctx) == "numpy" and _same(got["x"], numpy_twin(alg).run(ctx, dict(s0), 3)["x"])
    assert [r for r in caplog.records if r.getMessage().startswith("PSO: NumPy") and "no cuda_row" in r.getMessage()]


def test_host_kernel_values_and_false_never_builds(monkeypatch):
    assert PSO(host_kernel=True).params.host_kernel is True
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match=f"algorithm.host_kernel={bad}: allowed values are auto.true.false"):
            PSO(host_kernel=bad)
    monkeypatch.setattr(host_build, "no_compiler_reason", lambda: pytest.fail("asked for a compiler"))
    alg = PSO(n_particles=6, host_kernel=False)
    ctx = island_ctx(np, make_problem("rastrigin", dim=4), islands=2)
    alg.run(ctx, alg.init(ctx), 1)
    assert alg.gpu_path(ctx) == "numpy"


class _CountingPSO(PSO):
    """A user's PSO with its own step (counts the calls)."""

    calls = 0

    def step(self, ctx, state):
        type(self).calls += 1
        return super().step(ctx, state)


@needs_cc
def test_a_subclass_with_its_own_step_keeps_it():
    """A user's subclass that defines ``step`` runs it (the host build would skip it); PSO itself
    takes the host build on the same context."""
    alg = _CountingPSO(n_particles=6)
    ctx = island_ctx(np, make_problem("rastrigin", dim=4), islands=2)
    assert alg.host_plan(ctx) is None and alg.gpu_path(ctx) == "numpy"
    alg.run(ctx, alg.init(ctx), 3)
    assert _CountingPSO.calls == 3
    assert PSO(alg.params).gpu_path(ctx) == "host kernel"


@needs_cc
@pytest.mark.slow
def test_cpu_run_is_the_host_build_with_the_twins_f():
    """``python run.py algorithm=pso device=cpu problem=rastrigin problem.dim=10 ...`` in process:
    the default run takes the host build (its ``gpu_paths``) and ends with ``host_kernel=false``'s
    best ``f`` and ``x`` bit for bit, the same evaluations."""
    from hydra.utils import instantiate  # noqa: PLC0415
    from isles.islands.control.budget import with_budget  # noqa: PLC0415
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415

    from tests.helpers import make_cfg, plain  # noqa: PLC0415

    common = ["algorithm=pso", "device=cpu", "logger=none", "progress=false", "problem=rastrigin", "problem.dim=10"]
    common += ["islands.n=2", "stop.max_evaluations=6000"]
    runs = {}
    for mode in ("auto", "false"):
        cfg = plain(with_budget(make_cfg(*common, f"algorithm.host_kernel={mode}")))
        runs[mode] = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()
    assert set(runs["auto"].gpu_paths.values()) == {"host kernel"}
    assert set(runs["false"].gpu_paths.values()) == {"numpy"}
    a, b = runs["auto"], runs["false"]
    assert a.evaluations == b.evaluations >= 6000
    assert a.best_f == b.best_f and _same(a.best_x, b.best_x)
