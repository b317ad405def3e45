"""L-SHADE's and jSO's epoch kernel through its host build (CI, no GPU).

``algorithms/core/cuda/lshade_epoch.cu`` compiled as C (``-DISLES_HOST_EMU``, one thread per island)
runs whole L-SHADE generations; :func:`isles.algorithms.lshade.epoch.run` wraps it into runtime
generations. Against the NumPy twin (:meth:`LSHADE.run`):

* with an objective that is exact in any summation order (a maximum) and NumPy's ``tan``,
  ``arctan``, ``log1p``, ``cos`` replaced by the C library's (NumPy's SIMD versions differ from it
  in the last bit on many CPUs), the whole state after many generations (population, archive
  and its order, memories, ``k``, pending trials, counters) is the twin's **bit for bit**: every
  draw, rounding, ranking, Lehmer sum, archive sort and population reduction is the same;
* with NumPy's own math and a sum objective, the same trajectory to rounding.

The GPU kernel is the same text (tests/test_lshade_gpu.py).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging

import numpy as np
import pytest
from isles.algorithms.core import host_build
from isles.algorithms.lshade import epoch, host_epoch
from isles.algorithms.lshade.epoch import (
    smem_bytes,
    trials_in_global,
    unsupported_reason,
    whole_generations,
)
from isles.algorithms.lshade.host_epoch import HostEpochLSHADE
from isles.algorithms.lshade.jso import JSO
from isles.algorithms.lshade.lshade import LSHADE
from isles.algorithms.lshade.operators import round_half_up
from isles.algorithms.lshade.params import population_at
from isles.problems import make_problem
from isles.problems.base import ScalableProblem
from isles.problems.cuda_check import compile_c, compiler

from tests.helpers import island_ctx
from tests.user_problems import FusedNaNSphere, FusedPressureVessel

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

STATE_KEYS = ("X", "f", "v", "A", "a_n", "M_F", "M_CR", "k", "U", "F", "CR", "fu", "vu")
COUNTERS = ("generation", "evals", "lgen", "n_active", "cursor")


class MaxDistance(ScalableProblem):
    """``f = max_j |x_j - 1.5|``: a fold whose value does not depend on the order (max is exact),
    so the kernel's objective equals NumPy's bit for bit."""

    name = "test_max_distance"
    cuda_objective = r"""#define OBJ_NACC 1
#define OBJ_HAS_V 0
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* o) { acc[0] = o[0] > acc[0] ? o[0] : acc[0]; }
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {
    (void)x_next; (void)j;
    const T d = t_abs(sub_rn(x, (T)1.5));
    acc[0] = d > acc[0] ? d : acc[0];
}
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0]; }
"""

    def __init__(self, dim=6):
        super().__init__(dim, -100.0, 100.0, f_star=0.0)

    def objective(self, X):
        return np.abs(X - 1.5).max(axis=-1)


_LIBM = r"""
#include <math.h>
#define V(name) \
void v_##name(const double* x, double* y, long n) { for (long i = 0; i < n; ++i) y[i] = name(x[i]); } \
void v_##name##f(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = name##f(x[i]); }
V(tan) V(atan) V(log1p) V(cos)
"""


@pytest.fixture
def c_library_math(monkeypatch):
    """NumPy's ``tan``, ``arctan``, ``log1p``, ``cos`` as the C library's (what the host build calls)."""
    # array-api-compat's NumPy namespace copies NumPy's functions when first imported: imported under
    # the patch it would keep the C library's for the rest of the process (an in-process run's
    # Rastrigin then differed from a Ray actor's in the last bit)
    import array_api_compat.numpy  # noqa: F401, PLC0415

    lib = compile_c(_LIBM)

    def wrap(name):
        def f(x):
            x = np.asarray(x)
            x = np.ascontiguousarray(x if x.dtype in (np.float32, np.float64) else x.astype(np.float64))
            y = np.empty_like(x)
            fn = getattr(lib, f"v_{name}" + ("f" if x.dtype == np.float32 else ""))
            fn(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(x.size))
            return y

        return f

    for np_name, c_name in (("tan", "tan"), ("arctan", "atan"), ("log1p", "log1p"), ("cos", "cos")):
        monkeypatch.setattr(np, np_name, wrap(c_name))


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _twin(alg):
    """``alg`` with ``host_kernel=False``: :meth:`LSHADE.run` on NumPy is then the array code."""
    return type(alg)(dataclasses.replace(alg.params, host_kernel=False))


def _both(alg, prob, n, islands=3, dtype=np.float64, handling="feasibility", first=None, xn_global=False):
    ctx = island_ctx(np, prob, islands=islands, dtype=dtype, handling=handling)
    s0 = alg.init(ctx)
    ref = _twin(alg).run(ctx, dict(s0), n)
    host = HostEpochLSHADE(alg, ctx, xn_global=xn_global)
    if first is None:
        out = epoch.run(alg, ctx, dict(s0), n, kernel=host)
    else:  # two calls: a pending generation is carried from one to the next
        out = epoch.run(alg, ctx, dict(s0), first, kernel=host)
        out = epoch.run(alg, ctx, out, n - first, kernel=host)
    for key in COUNTERS:
        assert out[key] == ref[key], key
    assert int(out["nan_evals"]) == int(ref["nan_evals"])
    return ref, out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls", [LSHADE, JSO])
def test_bit_for_bit_with_the_twin(cls, dtype, c_library_math):
    """Many L-SHADE generations with LPSR (N 30 -> 8), archive overflow and memory updates; E = 23
    leaves L-SHADE generations pending across runtime generations and across the two calls."""
    alg = cls(dim=7, pop_size=30, max_generations=30, evals_per_generation=23)
    ref, out = _both(alg, MaxDistance(7), 25, dtype=dtype, first=11)
    assert ref["lgen"] > 20 and ref["n_active"] < 30  # the kernel ran generations that reduced N
    for key in STATE_KEYS:
        assert _same(out[key], ref[key]), key


def test_bit_for_bit_without_archive_above_128_and_trials_in_global_memory(c_library_math):
    """``r_arc = 0`` (no archive: r2 from the population only), ``N_init = 150`` (NumPy's pairwise
    sums split above 128 terms), and the trial rows in a global scratch (the layout of islands too
    large for two populations in shared memory)."""
    for alg, xn_global in (
        (LSHADE(dim=5, pop_size=20, r_arc=0.0, max_generations=12), False),
        (LSHADE(dim=5, pop_size=150, max_generations=8), False),
        (JSO(dim=5, pop_size=40, max_generations=12), True),
    ):
        ref, out = _both(alg, MaxDistance(5), alg.params.max_generations, xn_global=xn_global)
        for key in STATE_KEYS:
            assert _same(out[key], ref[key]), key


def test_bit_for_bit_with_a_large_archive_at_the_paper_defaults(c_library_math):
    """D = 10 at the paper's defaults (``N_init = 180``, ``|A|`` up to 468): the archive fills to
    more than 350 members and then is cut to ``round(2.6 N_G)`` as LPSR shrinks ``N``, the regime
    where the host build places its members by sorting (``ls_host_archive_counts``) and ranks by
    sorting (``ls_host_ranks``) where the GPU counts: the same places, so the same state."""
    alg = LSHADE(dim=10, max_generations=40)
    ref, out = _both(alg, MaxDistance(10), 12, islands=2, first=5)
    for key in STATE_KEYS:
        assert _same(out[key], ref[key]), key
    bound = round_half_up(alg.params.r_arc * ref["n_active"])
    assert (ref["a_n"] == bound).all() and bound > 128  # the archive is full: old members were dropped
    mid = LSHADE(dim=10, max_generations=40, host_kernel=False)
    ctx = island_ctx(np, MaxDistance(10), islands=2)
    assert int(mid.run(ctx, mid.init(ctx), 8)["a_n"].max()) > 350


def test_the_same_trajectory_to_rounding_with_numpy_math():
    """A sum objective (Rosenbrock: OBJ_NEXT, the next coordinate of the trial row) and NumPy's own
    math: the fold order and the math library's last bit differ, the run does not."""
    prob = make_problem("rosenbrock", dim=8)
    alg = LSHADE(dim=8, pop_size=40, max_generations=20)
    ref, out = _both(alg, prob, 6)
    for key in ("X", "f", "M_F", "M_CR"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-6, atol=1e-9, err_msg=key)
    assert _same(out["a_n"], ref["a_n"]) and _same(out["k"], ref["k"])


def test_nan_objective_and_constrained_problem(c_library_math):
    """A NaN objective counts as the evaluator does (worst, one NaN evaluation); a constrained user
    problem follows Deb's rules (the ranks and selection by ``(v, f)``) and the static penalty."""
    alg = LSHADE(dim=3, pop_size=24, max_generations=10)
    _, out = _both(alg, FusedNaNSphere(3), 10)
    assert int(out["nan_evals"]) > 0
    for handling in ("feasibility", "penalty"):
        alg = LSHADE(dim=4, pop_size=20, max_generations=10)
        ref, out = _both(alg, FusedPressureVessel(), 10, handling=handling)
        for key in ("a_n", "k"):
            assert _same(out[key], ref[key]), key
        np.testing.assert_allclose(out["f"], ref["f"], rtol=1e-9)
        np.testing.assert_allclose(out["v"], ref["v"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("when", ["during", "at once", "never"])
def test_stop_target_generation_as_the_twin_tracks_it(when, c_library_math):
    """With a stop target the kernel path records the runtime generation at which each island first
    reaches it, as tracking after every step does (the twin): reached mid-run (by a launch's
    generation or an array-code chunk), already at the start (generation + 1), or never (-1)."""
    prob = MaxDistance(7)
    alg = LSHADE(dim=7, pop_size=30, max_generations=30, evals_per_generation=23)
    plain = island_ctx(np, prob, islands=3)
    mid = alg.run(plain, alg.init(plain), 9)
    target = {"during": float(alg.best(mid).f.max()), "at once": 1e9, "never": -1.0}[when]
    ctx = island_ctx(np, prob, islands=3, target=target)
    s0 = alg.init(ctx)
    ref = _twin(alg).run(ctx, dict(s0), 25)
    host = HostEpochLSHADE(alg, ctx)
    out = epoch.run(alg, ctx, dict(s0), 11, kernel=host)
    out = epoch.run(alg, ctx, out, 14, kernel=host)
    assert _same(out["hit_generation"], ref["hit_generation"])
    expect = {
        "during": lambda h: (h >= 1).all() and (h > 1).any() and (h <= 9).all(),
        "at once": lambda h: (h == 1).all(),
    }
    assert expect.get(when, lambda h: (h == -1).all())(ref["hit_generation"]), ref["hit_generation"]


def test_whole_generations_follow_eq_10():
    """The schedule the host computes for a launch is LPSR's (eq. 10) generation by generation."""
    p = LSHADE(dim=5, pop_size=50, max_generations=40).params
    k, used, n = whole_generations(p, 50, 50, 1000)
    sizes, nn, nfe = [], 50, 50
    while sum(sizes) + nn <= 1000:
        sizes.append(nn)
        nfe += nn
        nn = min(nn, population_at(p, nfe))
    assert (k, used, n) == (len(sizes), sum(sizes), nn)
    assert n < 50 and used <= 1000 < used + n


def test_where_the_kernel_does_not_apply():
    """No kernel: no fused objective, a stop target, too little shared memory, ``epoch=False``; the
    smem formula counts both populations."""
    alg = LSHADE(dim=4, pop_size=20, max_generations=5)
    ctx = island_ctx(np, make_problem("schwefel_1_2", dim=4))
    assert "cuda_objective" in unsupported_reason(alg, ctx, device=False)
    ctx = island_ctx(np, make_problem("sphere", dim=4))
    assert unsupported_reason(alg, ctx, device=False) is None
    assert "array module" in unsupported_reason(alg, ctx)
    assert "epoch=False" in unsupported_reason(LSHADE(dim=4, pop_size=20, epoch=False), ctx, device=False)
    need = smem_bytes(np.float64, 4, 20, alg.params.archive_capacity, alg.params.H)
    one = smem_bytes(np.float64, 4, 20, alg.params.archive_capacity, alg.params.H, xn_global=True)
    assert need - one == 20 * 4 * 8  # the trial rows
    assert trials_in_global(np.float64, 4, 20, alg.params.archive_capacity, alg.params.H, need) is False
    assert trials_in_global(np.float64, 4, 20, alg.params.archive_capacity, alg.params.H, need - 1) is True
    assert unsupported_reason(alg, ctx, device=False, optin=one) is None
    assert "shared memory" in unsupported_reason(alg, ctx, device=False, optin=one - 1)
    with pytest.raises(ValueError, match="algorithm.epoch=1: allowed values are true|false"):
        LSHADE(dim=4, pop_size=20, epoch=1)
    assert epoch.run(alg, ctx, alg.init(ctx), 2) is None  # NumPy: the caller's array code
    host = HostEpochLSHADE(alg, ctx)
    with pytest.raises(ValueError, match=r"state\['A'\] has shape"):  # a jSO state: another archive
        host.run(JSO(dim=4, pop_size=20).init(ctx), 1, 20)


def test_numpy_runs_take_the_host_build_where_host_kernel_allows(caplog, monkeypatch):
    """``algorithm.host_kernel``: ``auto`` (default) and ``true`` run :meth:`LSHADE.run` on NumPy
    through the host build (the same state as ``epoch.run`` with it, bit for bit; ``gpu_path``
    "host kernel"), ``false`` the array code; where it does not apply (``epoch=false``; a problem
    without a ``cuda_objective`` takes it with its own objective, tests/test_lshade_user_problem.py)
    the array code with a one-line log, a warning only where ``true`` asked for it."""
    prob = make_problem("sphere", dim=5)
    launches = []
    launch = HostEpochLSHADE._launch
    monkeypatch.setattr(HostEpochLSHADE, "_launch", lambda self, *a: launches.append(1) or launch(self, *a))
    for mode in ("auto", True, False):
        alg = LSHADE(dim=5, pop_size=24, max_generations=12, evals_per_generation=17, host_kernel=mode)
        ctx = island_ctx(np, prob, islands=2)
        s0 = alg.init(ctx)
        launches.clear()
        got = alg.run(ctx, dict(s0), 12)
        assert bool(launches) == (mode is not False), mode
        host = epoch.run(alg, ctx, dict(s0), 12, kernel=HostEpochLSHADE(alg, ctx))
        twin = _twin(alg).run(ctx, dict(s0), 12)
        want = twin if mode is False else host
        for key in STATE_KEYS:
            assert _same(got[key], want[key]), (mode, key)
        assert alg.gpu_path(ctx) == ("numpy" if mode is False else "host kernel")
    np.testing.assert_allclose(host["f"], twin["f"], rtol=1e-6, atol=1e-12)  # the math library's last bit aside
    for mode, level in (("auto", logging.INFO), (True, logging.WARNING)):
        caplog.clear()
        alg = LSHADE(dim=4, pop_size=20, max_generations=5, host_kernel=mode, epoch=False)
        ctx = island_ctx(np, make_problem("schwefel_1_2", dim=4), islands=2)
        with caplog.at_level(logging.INFO, logger="isles.algorithms.lshade.epoch"):
            assert alg.gpu_path(ctx) == "numpy"
            s = alg.run(ctx, alg.init(ctx), 3)
        assert s["evals"] == 20 + 3 * 20
        recs = [r for r in caplog.records if "host kernel" in r.getMessage()]
        assert len(recs) == 1 and recs[0].levelno == level and "epoch=False" in recs[0].getMessage()


def test_no_c_compiler_falls_back_to_numpy(monkeypatch, caplog):
    """Without a C compiler a NumPy run is the array code's, logged in one line, never a failure."""
    import isles.problems.cuda_check as cc  # noqa: PLC0415

    monkeypatch.setattr(cc, "compiler", lambda: None)
    alg = LSHADE(dim=4, pop_size=20, max_generations=5)
    ctx = island_ctx(np, make_problem("sphere", dim=4), islands=2)
    s0 = alg.init(ctx)
    with caplog.at_level(logging.INFO, logger="isles.algorithms.lshade.epoch"):
        got = alg.run(ctx, dict(s0), 4)
    ref = _twin(alg).run(ctx, dict(s0), 4)
    for key in STATE_KEYS:
        assert _same(got[key], ref[key]), key
    assert [r.getMessage() for r in caplog.records if "C compiler" in r.getMessage()]
    for _ in range(40):  # the plans (each holding its alg and ctx) do not pile up
        host_epoch.host_plan(alg, island_ctx(np, make_problem("sphere", dim=4), islands=2))
    assert len(host_build._PLANS) <= host_build.PLANS_KEPT


def test_host_kernel_values():
    """``algorithm.host_kernel``: auto, true or false; anything else a one-line error naming it."""
    assert LSHADE(dim=4, pop_size=20).params.host_kernel == "auto"
    assert JSO(dim=4, host_kernel=False).params.host_kernel is False
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match=f"algorithm.host_kernel={bad}: allowed values are auto.true.false"):
            LSHADE(dim=4, pop_size=20, host_kernel=bad)
