"""EPSO's compiled CPU path (algorithms/pso/host_epoch.py, algorithms/core/cuda/epso_host.cuh;
issue 37): whole generations of every island in one C call, CMEPSO's slaves and master swarm.

Against the NumPy twin (``host_kernel=false``, EPSO.step's array code): the populations, bests and
NaN counts bit for bit (the normal draws' ``log1p`` and ``cos`` are NumPy's), the fitness to the
objective's rounding; the islands on threads equal one thread; without a compiler, with a build
that fails, or with a C objective that disagrees with the array code, the twin's run and one
line; the welded beam's row code against its array code.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from isles.algorithms.core import host_build
from isles.algorithms.pso import host_epoch
from isles.algorithms.pso.epso import EPSO
from isles.algorithms.pso.host_epoch import HostEpochEPSO
from isles.problems import cuda_check, make_problem

from tests.helpers import island_ctx, numpy_twin

needs_cc = pytest.mark.skipif(cuda_check.compiler() is None, reason="no C compiler")

POPS = ("x", "vel", "pbest", "gbest", "pbest_v", "gbest_v", "nan_evals")
CONFIGS = [  # EPSO fields, attractor set
    (dict(n_replicas=5, c3=0.0), False),  # CMEPSO's slaves
    (dict(n_particles=10, n_replicas=5, c3=2.02), True),  # its master swarm with its attractor
    (dict(n_particles=10, n_replicas=5, c3=2.02), False),  # the master before an attractor (on = 0)
    (dict(n_replicas=0, c3=1.5), True),  # no replicas
    (dict(n_replicas=2, vmax_fraction=0.0, cor_mode="range"), False),  # no clamp, COR over the range
]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _start(fields, attractor, problem, dtype=np.float64, islands=3):
    alg = EPSO(n_particles=fields.pop("n_particles", 12), max_iterations=40, **fields)
    ctx = island_ctx(np, problem, islands=islands, dtype=dtype)
    s0 = alg.init(ctx)
    if attractor:  # another island's best as each island's attractor (the master's b_g^S)
        perm = np.roll(np.arange(islands), 1)
        s0 = EPSO.set_attractor(s0, s0["gbest"][perm], s0["gbest_f"][perm], s0["gbest_v"][perm])
    return alg, ctx, s0


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("problem", ["welded_beam", "rastrigin"])
@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_host_epoch_is_the_numpy_twin(dtype, problem, config):
    """The default run (``host_kernel=auto``) is the host build's; its populations, bests'
    positions, violations and NaN count are the twin's bit for bit, its fitness to rounding."""
    fields, attractor = CONFIGS[config]
    prob = make_problem(problem) if problem == "welded_beam" else make_problem(problem, dim=5)
    alg, ctx, s0 = _start(dict(fields), attractor, prob, dtype)
    got = alg.run(ctx, dict(s0), 25)
    assert alg.gpu_path(ctx) == "host kernel"
    want = numpy_twin(alg).run(ctx, dict(s0), 25)
    for k in POPS:
        assert _same(got[k], want[k]), k
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for k in ("pbest_f", "gbest_f"):
        np.testing.assert_allclose(got[k], want[k], rtol=rtol)
    assert (got["generation"], got["evals"]) == (want["generation"], want["evals"])


@needs_cc
def test_steps_and_chunks_equal_one_call(monkeypatch):
    """``run(n)`` in one call, in chunks of generations, and as ``n`` calls of one: the same state."""
    alg, ctx, s0 = _start(dict(n_replicas=3, c3=2.02), True, make_problem("welded_beam"))
    host = HostEpochEPSO(alg, ctx)
    one = host.run(dict(s0), 9)
    monkeypatch.setattr(host_epoch, "CHUNK_ELEMENTS", 1)  # one generation a chunk
    chunked = host.run(dict(s0), 9)
    steps = dict(s0)
    for _ in range(9):
        steps = host.run(steps, 1)
    for k in (*POPS, "pbest_f", "gbest_f"):
        assert _same(chunked[k], one[k]) and _same(steps[k], one[k]), k


@needs_cc
def test_numpy_cos_where_the_c_library_differs(monkeypatch):
    """Where the C library's ``cos`` is not NumPy's (float32 here; simulated for float64), the
    epoch takes ``np.cos`` of the draws: the twin's state bit for bit all the same."""
    monkeypatch.setattr(HostEpochEPSO, "_same_cos", lambda self: False)
    alg, ctx, s0 = _start(dict(n_replicas=3), False, make_problem("welded_beam"))
    host = HostEpochEPSO(alg, ctx)
    assert host.c_cos is False
    got = host.run(dict(s0), 6)
    want = numpy_twin(alg).run(ctx, dict(s0), 6)
    for k in POPS:
        assert _same(got[k], want[k]), k


@needs_cc
def test_islands_on_threads_equal_one_thread(monkeypatch):
    """3 threads give the one-thread state bit for bit; :func:`host_plan` takes
    ``ISLES_HOST_THREADS`` (at most one thread per island)."""
    alg, ctx, s0 = _start(dict(n_replicas=4), False, make_problem("welded_beam"), islands=5)
    host = HostEpochEPSO(alg, ctx)
    one = host.run(dict(s0), 7)
    host.threads = 3
    many = host.run(dict(s0), 7)
    for k in (*POPS, "pbest_f", "gbest_f"):
        assert _same(many[k], one[k]), k
    monkeypatch.setenv("ISLES_HOST_THREADS", "4")
    assert host_epoch.host_plan(EPSO(n_particles=8), island_ctx(np, make_problem("spring"), islands=6)).threads == 4


@pytest.mark.parametrize("mode", ["auto", True])
def test_no_c_compiler_runs_the_twin_with_one_line(mode, monkeypatch, caplog):
    """No C compiler (simulated): the array code bit for bit and one line (a warning for ``true``)."""
    monkeypatch.setattr(cuda_check, "compiler", lambda: None)
    alg, ctx, s0 = _start(dict(n_replicas=2, host_kernel=mode), False, make_problem("welded_beam"))
    with caplog.at_level(logging.INFO, logger="isles.algorithms"):
        got = alg.run(ctx, alg.run(ctx, dict(s0), 2), 2)
        assert alg.gpu_path(ctx) == "numpy"
    want = numpy_twin(alg).run(ctx, dict(s0), 4)
    for k in (*POPS, "pbest_f", "gbest_f"):
        assert _same(got[k], want[k]), k
    recs = [r for r in caplog.records if "not the host kernel" in r.getMessage()]
    assert len(recs) == 1 and recs[0].getMessage().startswith("EPSO: NumPy array code"), recs
    assert "no C compiler" in recs[0].getMessage()
    assert recs[0].levelno == (logging.INFO if mode == "auto" else logging.WARNING)


@needs_cc
def test_a_wrong_c_objective_or_none_runs_the_twin(monkeypatch, caplog):
    """A row code that disagrees with the array code is not used (the reason in the line); a
    problem with neither row code nor fused objective (the speed reducer) says so."""
    wrong = make_problem("welded_beam")
    monkeypatch.setattr(type(wrong), "cuda_row", property(lambda self: make_problem("spring").cuda_row))
    for prob, why in ((wrong, "disagrees with its array code"), (make_problem("speed_reducer"), "no cuda_row")):
        alg, ctx, s0 = _start(dict(n_replicas=2), False, prob)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="isles.algorithms"):
            got = alg.run(ctx, dict(s0), 3)
        want = numpy_twin(alg).run(ctx, dict(s0), 3)
        assert _same(got["x"], want["x"]) and alg.gpu_path(ctx) == "numpy"
        assert [r for r in caplog.records if why in r.getMessage()], [r.getMessage() for r in caplog.records]


def test_host_kernel_values_and_false_never_builds(monkeypatch):
    assert EPSO(host_kernel=True).params.host_kernel is True
    with pytest.raises(ValueError, match="algorithm.host_kernel=yes: allowed values are auto.true.false"):
        EPSO(host_kernel="yes")
    monkeypatch.setattr(host_build, "no_compiler_reason", lambda: pytest.fail("asked for a compiler"))
    alg = EPSO(n_particles=6, host_kernel=False)
    ctx = island_ctx(np, make_problem("welded_beam"), islands=2)
    alg.run(ctx, alg.init(ctx), 1)
    assert alg.gpu_path(ctx) == "numpy"


@needs_cc
@pytest.mark.parametrize("cls", ["welded_beam", "welded_beam_j4"])
def test_welded_beam_row_code_is_its_array_code(cls):
    """The welded beam's ``cuda_row`` (in C, through the host build's Evaluator) against
    ``objective`` and ``constraints``: ``f`` bit for bit (no ``pow``), ``v`` to rounding, on
    feasible and infeasible points."""
    prob = make_problem(cls)
    ctx = island_ctx(np, prob, islands=1)
    host = HostEpochEPSO(EPSO(), ctx)
    u = np.random.default_rng(5).random((500, 4))
    X = np.ascontiguousarray(prob.lower + u * (prob.upper - prob.lower))
    X[:5] = [0.2057296, 3.4704887, 9.0366239, 0.2057296]  # near x*: feasible
    f, v = host.evaluate(X)
    fw, vw, _ = ctx.evaluator(X[None])
    assert _same(f, fw[0])
    np.testing.assert_allclose(v, vw[0], rtol=1e-13)
    assert (v == 0).sum() >= 5 and (v > 0).sum() > 100


@needs_cc
def test_step_takes_the_host_build():
    """On NumPy ``step`` is the host build's generation too (as DE's), so ``run(n)`` is ``n`` steps."""
    alg, ctx, s0 = _start(dict(n_replicas=3), False, make_problem("welded_beam"))
    steps = dict(s0)
    for _ in range(4):
        steps = alg.step(ctx, steps)
    one = HostEpochEPSO(alg, ctx).run(dict(s0), 4)
    for k in (*POPS, "pbest_f", "gbest_f"):
        assert _same(steps[k], one[k]), k
