"""The compiled CPU path of every family (algorithms/core/host_build.py, issue 37).

On NumPy, ``algorithm.host_kernel=auto`` (the default) runs DE, the GA, FEP and CDE through their
epoch kernels' host builds, as L-SHADE's (tests/test_lshade_epoch.py). Checked here for each family:
the default run is the host build's, bit for bit, and the NumPy twin's (``host_kernel=false``) in
the populations bit for bit (FEP's to the math library's ulp), fitness to the objective's
summation order (the families' epoch
tests compare the host builds with the twins in detail); without a C compiler, or with a build
that fails, the run is the twin's bit for bit with one log line; ``host_kernel=false`` never
builds. Also the on-disk cache of the compiled libraries and the BLAS threads.
"""

from __future__ import annotations

import ctypes
import logging
import os

import numpy as np
import pytest
from isles.algorithms.coevolution.cde import CDE
from isles.algorithms.coevolution.epoch import host_epoch
from isles.algorithms.core import host_build, threads
from isles.algorithms.de.de import DE
from isles.algorithms.de.host_epoch import HostEpochDE
from isles.algorithms.ep.cuda_host import HostFEP
from isles.algorithms.ep.fep import FEP
from isles.algorithms.ga.cuda_host import HostGA
from isles.algorithms.ga.ga import GA
from isles.problems import cuda_check, make_problem
from isles.problems.minmax import SaddleP1

from tests.helpers import island_ctx, numpy_twin

needs_cc = pytest.mark.skipif(cuda_check.compiler() is None, reason="no C compiler")

GENS = 9


def _de(**kw):
    return DE(pop_size=12, F=0.6, CR=0.8, **kw), make_problem("rastrigin", dim=6)


def _ga(**kw):
    return GA(pop_size=20, encoding="gray", **kw), make_problem("sphere", dim=3, lower=-2.0, upper=2.0)


def _fep(**kw):
    return FEP(pop_size=10, q=4, **kw), make_problem("ackley", dim=5)


def _cde(**kw):
    return CDE(pop_size=8, pop_size_y=6, gens_x=2, gens_y=2, **kw), SaddleP1(6)


FAMILIES = {
    "DE": (_de, "X", lambda alg, ctx, s, n: HostEpochDE(alg, ctx).run(s, n, ctx.target)),
    "GA": (_ga, "genome", lambda alg, ctx, s, n: HostGA(alg, ctx).run(s, n)),
    "FEP": (_fep, "X", lambda alg, ctx, s, n: HostFEP(alg, ctx).run(s, n, ctx.target)),
    "CDE": (_cde, "X", lambda alg, ctx, s, n: host_epoch(alg.params, ctx.evaluator.problem).step(s, ctx.rng.keys, n)),
}


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def _ctx(prob, target=None):
    return island_ctx(np, prob, islands=3, target=target)


@needs_cc
@pytest.mark.parametrize("family", list(FAMILIES))
def test_default_cpu_run_is_the_host_build(family):
    """``host_kernel=auto``: :meth:`run` is the host build's (every state leaf bit for bit,
    ``gpu_path`` "host kernel"); the twin's populations equal, its fitness to rounding."""
    make, genome, direct = FAMILIES[family]
    alg, prob = make()
    assert alg.params.host_kernel == "auto"
    ctx = _ctx(prob)
    s0 = alg.init(ctx)
    got = alg.run(ctx, dict(s0), GENS)
    assert alg.gpu_path(ctx) == "host kernel"
    want = direct(alg, ctx, dict(s0), GENS)
    for k, v in want.items():
        if not isinstance(v, (int, float)):
            assert _same(got[k], v), (family, k)
    assert (got["generation"], got["evals"]) == (want["generation"], want["evals"])
    twin = numpy_twin(alg).run(ctx, dict(s0), GENS)
    if family == "FEP":  # Cauchy and normal draws through C's tan/log/exp against NumPy's: to the ulp
        np.testing.assert_allclose(got[genome], twin[genome], rtol=1e-12, atol=1e-9)
    else:
        assert _same(got[genome], twin[genome]), family
    np.testing.assert_allclose(got["f"], twin["f"], rtol=1e-10, atol=1e-12)
    assert int(got["nan_evals"]) == int(twin["nan_evals"]) and got["evals"] == twin["evals"]


@needs_cc
@pytest.mark.parametrize("family", ["DE", "FEP"])
def test_host_build_tracks_the_stop_target_as_the_twin(family):
    alg, _ = FAMILIES[family][0]()
    prob = make_problem("sphere", dim=3, lower=-1.0, upper=1.0)
    ctx = _ctx(prob, target=0.05)
    s0 = alg.track_target(ctx, alg.init(ctx))
    got = alg.track_target(ctx, alg.run(ctx, dict(s0), 30))
    twin = numpy_twin(alg)
    ref = twin.track_target(ctx, twin.run(ctx, dict(s0), 30))
    assert (np.asarray(ref["hit_generation"]) > 0).any()
    assert _same(got["hit_generation"], ref["hit_generation"])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_no_c_compiler_runs_the_twin_with_one_line(family, monkeypatch, caplog):
    """No C compiler (simulated): the NumPy array code, bit for bit, and one INFO line naming why;
    ``host_kernel=true`` says it as a warning."""
    monkeypatch.setattr(cuda_check, "compiler", lambda: None)
    make = FAMILIES[family][0]
    for mode, level in (("auto", logging.INFO), (True, logging.WARNING)):
        alg, prob = make(host_kernel=mode)
        ctx = _ctx(prob)
        s0 = alg.init(ctx)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="isles.algorithms"):
            got = alg.run(ctx, dict(s0), 3)
            got = alg.run(ctx, got, 2)  # the reason is told once
            assert alg.gpu_path(ctx) == "numpy"
        ref = numpy_twin(alg).run(ctx, dict(s0), 5)
        for k, v in ref.items():
            if not isinstance(v, (int, float)):
                assert _same(got[k], v), (family, k)
        recs = [r for r in caplog.records if "not the host kernel" in r.getMessage()]
        assert len(recs) == 1 and recs[0].levelno == level, [r.getMessage() for r in recs]
        assert (
            recs[0].getMessage().startswith(f"{family}: NumPy array code") and "no C compiler" in recs[0].getMessage()
        )


def test_a_failing_build_runs_the_twin(monkeypatch, caplog):
    """A compiler that fails (simulated: the build raises) is a log line, never a failed run."""

    def broken(*a, **k):
        raise RuntimeError("host emulation: cc failed:\nunit.c:1: error")

    monkeypatch.setattr(HostEpochDE, "__init__", broken)
    monkeypatch.setattr(cuda_check, "compiler", lambda: "cc")
    alg, prob = _de()
    ctx = _ctx(prob)
    s0 = alg.init(ctx)
    with caplog.at_level(logging.INFO, logger="isles.algorithms"):
        got = alg.run(ctx, dict(s0), 4)
    ref = numpy_twin(alg).run(ctx, dict(s0), 4)
    assert _same(got["X"], ref["X"]) and _same(got["f"], ref["f"])
    assert [r for r in caplog.records if "cc failed" in r.getMessage()]


def test_host_kernel_false_never_builds(monkeypatch):
    monkeypatch.setattr(host_build, "no_compiler_reason", lambda: pytest.fail("asked for a compiler"))
    for make, _, _ in FAMILIES.values():
        alg, prob = make(host_kernel=False)
        ctx = _ctx(prob)
        alg.run(ctx, alg.init(ctx), 1)
        assert alg.gpu_path(ctx) == "numpy"


class _CountingDE(DE):
    """A user's DE with its own step (counts the calls)."""

    calls = 0

    def step(self, ctx, state):
        type(self).calls += 1
        return super().step(ctx, state)


@needs_cc
def test_a_subclass_with_its_own_step_keeps_it():
    """A subclass that defines ``step`` (or ``run``) runs it: no host build, which would skip it;
    the family's own classes take the host build in both ``step`` and ``run`` (``run(n)`` is
    ``n`` steps)."""
    alg, prob = _de()
    sub = _CountingDE(alg.params)
    ctx = _ctx(prob)
    s0 = alg.init(ctx)
    assert sub.host_plan(ctx) is None and sub.gpu_path(ctx) == "numpy"
    sub.run(ctx, dict(s0), 4)
    assert _CountingDE.calls == 4
    one = alg.run(ctx, dict(s0), 3)
    steps = dict(s0)
    for _ in range(3):
        steps = alg.step(ctx, steps)
    for k in ("X", "f", "v"):
        assert _same(one[k], steps[k]), k


@pytest.mark.parametrize("family", list(FAMILIES))
def test_host_kernel_values(family):
    make = FAMILIES[family][0]
    assert make(host_kernel=True)[0].params.host_kernel is True
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match=f"algorithm.host_kernel={bad}: allowed values are auto.true.false"):
            make(host_kernel=bad)


def test_unsupported_configuration_says_why(caplog):
    """DE/best/1 has no epoch kernel: the array code, the reason in the line."""
    alg = DE(pop_size=12, strategy="best/1")
    ctx = _ctx(make_problem("sphere", dim=4))
    with caplog.at_level(logging.INFO, logger="isles.algorithms"):
        assert alg.gpu_path(ctx) == "numpy"
    assert [
        r for r in caplog.records if r.getMessage().startswith("DE: NumPy array code") and "best/1" in r.getMessage()
    ]


# -- the on-disk cache of compiled libraries ------------------------------------------------------
_SRC = "int isles_cache_probe_{tag}(void) {{ return {value}; }}\n"


@needs_cc
def test_compiled_library_is_cached_on_disk(tmp_path, monkeypatch):
    """A library compiled once lands in ``$ISLES_HOST_CACHE`` (no partial files left); a new
    process (the in-process cache emptied) loads it without the compiler."""
    monkeypatch.setenv("ISLES_HOST_CACHE", str(tmp_path))
    src = _SRC.format(tag="a", value=os.getpid() % 1000 + 7)
    lib = cuda_check.compile_c(src)
    assert lib.isles_cache_probe_a() == os.getpid() % 1000 + 7
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].endswith(".so") and not files[0].startswith(".")
    monkeypatch.setattr(cuda_check, "_CACHE", {})
    monkeypatch.setattr(cuda_check, "_build", lambda *a: pytest.fail("compiled again"))
    again = cuda_check.compile_c(src)
    assert again.isles_cache_probe_a() == os.getpid() % 1000 + 7
    monkeypatch.setattr(cuda_check, "_CACHE", {})  # other flags: another library
    with pytest.raises(pytest.fail.Exception, match="compiled again"):
        cuda_check.compile_c(src, ("-O3",))


@needs_cc
def test_disk_cache_off_and_unwritable(tmp_path, monkeypatch):
    monkeypatch.setenv("ISLES_HOST_CACHE", "off")
    assert cuda_check.cache_dir() is None
    lib = cuda_check.compile_c(_SRC.format(tag="b", value=3))
    assert isinstance(lib, ctypes.CDLL) and lib.isles_cache_probe_b() == 3
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("ISLES_HOST_CACHE", str(blocked / "sub"))  # cannot be created: a temporary folder
    assert cuda_check.compile_c(_SRC.format(tag="c", value=4)).isles_cache_probe_c() == 4


def test_cache_dir_default(monkeypatch):
    monkeypatch.delenv("ISLES_HOST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert cuda_check.cache_dir() == os.path.join("/x/cache", "isles", "host")


# -- BLAS threads ---------------------------------------------------------------------------------
def test_blas_threads_are_set_from_the_cores(monkeypatch):
    from threadpoolctl import threadpool_info  # noqa: PLC0415

    assert threads.process_cores() >= 1
    try:
        assert threads.limit_blas_threads(1) == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
        monkeypatch.setenv("ISLES_BLAS_THREADS", "1")
        assert threads.limit_blas_threads() == 1
        for bad in ("0", "two"):
            monkeypatch.setenv("ISLES_BLAS_THREADS", bad)
            with pytest.raises(ValueError, match=f"ISLES_BLAS_THREADS={bad}: allowed values are integers >= 1"):
                threads.limit_blas_threads()
    finally:
        for lim in threads._LIMITERS:
            lim.restore_original_limits()
        threads._LIMITERS.clear()


def test_blas_threads_follow_cores_and_matrix_size():
    assert threads.blas_threads_for(30, 2) == 1 and threads.blas_threads_for(30, 64) == 1
    assert threads.blas_threads_for(1000, 16) == 1000 // threads.ROWS_PER_THREAD
    assert threads.blas_threads_for(1000, 2) == 2 and threads.blas_threads_for(None, 3) == 3


def test_island_group_sets_its_process_blas_threads(monkeypatch):
    """An island group (an actor's, or the driver's in-process one) sets the process's BLAS
    threads when it starts: one for CMA-ES at D = 30, whatever the machine's cores."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415
    from isles.islands.records import GroupSpec  # noqa: PLC0415
    from threadpoolctl import threadpool_info, threadpool_limits  # noqa: PLC0415

    monkeypatch.delenv("ISLES_BLAS_THREADS", raising=False)
    monkeypatch.setattr(threads, "process_cores", lambda: 8)
    spec = {
        "problem": {"_target_": "isles.problems.benchmarks.Rastrigin", "dim": 30},
        "algorithm": {"_target_": "isles.algorithms.cmaes.cmaes.CMAES", "dim": 30},
        "island_ids": [0, 1],
        "seed": 3,
        "device": "cpu",
        "n_migrants": 1,
        "replacement": "replace_worst",
    }
    with threadpool_limits(limits=2):  # as the machine's default would be
        try:
            IslandGroup(GroupSpec(**spec))
            assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
        finally:
            for lim in threads._LIMITERS:
                lim.restore_original_limits()
            threads._LIMITERS.clear()


# -- one process's islands on its cores (OpenMP over the islands of the host builds) -------------
@needs_cc
@pytest.mark.parametrize("family", ["GA", "FEP"])
def test_ga_and_fep_islands_on_threads_equal_one_thread(family, monkeypatch):
    """As DE's below: 3 threads give the one-thread state bit for bit (stop target included)."""
    from isles.algorithms.ep import cuda_host as ep_host  # noqa: PLC0415
    from isles.algorithms.ga import cuda_host as ga_host  # noqa: PLC0415

    make, _, _ = FAMILIES[family]
    alg, prob = make()
    ctx = island_ctx(np, prob, islands=5, target=0.5)
    s0 = alg.track_target(ctx, alg.init(ctx))
    host = (HostGA if family == "GA" else HostFEP)(alg, ctx)
    run = (lambda st: host.run(st, 7)) if family == "GA" else (lambda st: host.run(st, 7, ctx.target))
    threads_agree(host, run, s0)
    monkeypatch.setenv("ISLES_HOST_THREADS", "4")
    plan = (ga_host if family == "GA" else ep_host).host_plan(alg, ctx)
    assert plan.threads == 4


def threads_agree(host, run, s0: dict) -> dict:
    """``run(state)`` of ``host`` on one thread, then on 3: every array of the state the same bit
    for bit (a Python number may be the count's own type). Returns the one-thread state."""
    host.threads = 1
    one = run(dict(s0))
    host.threads = 3
    many = run(dict(s0))
    for k, v in one.items():
        if not isinstance(v, (int, float)):
            assert _same(many[k], v), k
    return one


@needs_cc
def test_de_islands_on_threads_equal_one_thread(monkeypatch):
    """The islands on 3 threads give the one-thread loop's state bit for bit, the NaN count
    included; :func:`host_plan` takes the process's cores (``ISLES_HOST_THREADS`` here), at most
    one thread per island."""
    from isles.algorithms.de import host_epoch  # noqa: PLC0415

    from tests.user_problems import FusedNaNSphere  # noqa: PLC0415

    alg = DE(pop_size=12, F=0.8, CR=0.9)
    ctx = island_ctx(np, FusedNaNSphere(dim=5), islands=7, target=1e-3)
    s0 = alg.init(ctx)
    host = HostEpochDE(alg, ctx)
    one = threads_agree(host, lambda st: host.run(st, 8, ctx.target), s0)
    assert int(one["nan_evals"]) > 0
    monkeypatch.setenv("ISLES_HOST_THREADS", "2")
    assert host_epoch.host_plan(alg, ctx).threads == 2
    monkeypatch.setenv("ISLES_HOST_THREADS", "64")
    assert threads.host_threads(7) == 7 and threads.host_threads(0) == 1
    monkeypatch.setenv("ISLES_HOST_THREADS", "0")
    with pytest.raises(ValueError, match="ISLES_HOST_THREADS=0: allowed values are integers >= 1"):
        threads.host_threads(4)


@needs_cc
@pytest.mark.parametrize("family", ["CDE", "lshade"])
def test_cde_and_lshade_islands_on_threads_equal_one_thread(family, monkeypatch):
    """As DE's above: CDE's and L-SHADE's host builds run their islands on OpenMP threads, each
    with its own block memory and NaN slot; 3 threads give the one-thread state bit for bit, and
    their plans take ``ISLES_HOST_THREADS``."""
    from isles.algorithms.coevolution import epoch as cde_epoch  # noqa: PLC0415
    from isles.algorithms.lshade import epoch as ls_epoch  # noqa: PLC0415
    from isles.algorithms.lshade import host_epoch as ls_host  # noqa: PLC0415
    from isles.algorithms.lshade.lshade import LSHADE  # noqa: PLC0415

    if family == "CDE":
        alg, prob = _cde()
        ctx = _ctx(prob)
        host = host_epoch(alg.params, prob)
        run = lambda st: host.step(st, ctx.rng.keys, 3)  # noqa: E731
    else:
        alg, prob = LSHADE(dim=4, max_generations=30), make_problem("rastrigin", dim=4)
        ctx = island_ctx(np, prob, islands=5, target=1e-3)
        host = ls_host.HostEpochLSHADE(alg, ctx)
        run = lambda st: ls_epoch.run(alg, ctx, st, 6, kernel=host)  # noqa: E731
    s0 = alg.init(ctx)
    threads_agree(host, run, s0)
    monkeypatch.setenv("ISLES_HOST_THREADS", "2")
    if family == "CDE":
        assert cde_epoch.host_run(alg, ctx) is not None
        plan = host_build._PLANS[("CDE", id(alg), id(ctx))][2]
    else:
        plan = ls_host.host_plan(alg, ctx)
    assert plan.threads == 2
