"""L-SHADE's and jSO's host build around a user's array-code objective (``EXT_OBJ``, issue 37).

A problem without a ``cuda_objective`` runs the epoch kernel's host build with the problem's own
objective: C builds an island's trial rows, one ctypes callback evaluates them with the context's
Evaluator, C selects (:mod:`isles.algorithms.lshade.host_epoch`). Against the NumPy twin
(``host_kernel=false``), with NumPy's ``tan``, ``arctan``, ``log1p``, ``cos`` as the C library's
(tests/test_lshade_epoch.py's fixture), the whole state is the twin's bit for bit: populations,
``f``, ``v``, memories, archive, pending trials, counters, NaN evaluations and the stop target's
generation; an objective's error reaches the caller as on the NumPy path; without a compiler the run
is the twin's with one line.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from isles.algorithms.core import host_build
from isles.algorithms.lshade import epoch, host_epoch
from isles.algorithms.lshade.host_epoch import HostEpochLSHADE
from isles.algorithms.lshade.jso import JSO
from isles.algorithms.lshade.lshade import LSHADE
from isles.problems import cuda_check, make_problem
from isles.problems.base import Problem

from tests import test_lshade_epoch
from tests.helpers import assert_no_compiler_line, island_ctx, numpy_twin
from tests.user_problems import NaNSphere, ShiftedSphere

needs_cc = pytest.mark.skipif(cuda_check.compiler() is None, reason="no C compiler")

#: NumPy's math as the C library's (the draws' tan, arctan, log1p, cos)
c_library_math = test_lshade_epoch.c_library_math
STATE_KEYS = test_lshade_epoch.STATE_KEYS
COUNTERS = test_lshade_epoch.COUNTERS


class RotatedRastrigin(Problem):
    """A CEC-like user problem as array code: Rastrigin shifted and rotated, ``z = M (x - o)``
    written as a product and a sum over the last axis (each row's value independent of its batch)."""

    name = "user_rotated_rastrigin"

    def __init__(self, dim=10):
        super().__init__(dim, -100.0, 100.0, f_star=0.0)
        rng = np.random.default_rng(7)
        self.o = rng.uniform(-80, 80, dim)
        self.M = np.linalg.qr(rng.standard_normal((dim, dim)))[0]

    def objective(self, X):
        z = ((X - self.o)[..., None, :] * self.M).sum(axis=-1) * 0.0512
        return (z**2 - 10 * np.cos(2 * np.pi * z) + 10).sum(axis=-1)


class ObjectiveError(Exception):
    """The user's own error."""


class Raising(Problem):
    """A sphere whose evaluation raises ``fail`` (an exception class, e.g. :class:`ObjectiveError`)
    while it is set."""

    name = "user_raising"

    def __init__(self, dim=4):
        super().__init__(dim, -1.0, 1.0)
        self.fail = None

    def objective(self, X):
        if self.fail is not None:
            raise self.fail("the user's objective failed")
        return (X**2).sum(axis=-1)


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _check(alg, prob, n, islands=3, dtype=np.float64, handling="feasibility", first=None, target=None):
    """The default run (``host_kernel=auto``) against the twin, every state leaf bit for bit;
    ``first``: two calls (a pending L-SHADE generation carried over). Returns the default run's state."""
    ctx = island_ctx(np, prob, islands=islands, dtype=dtype, handling=handling, target=target)
    s0 = alg.init(ctx)
    ref = numpy_twin(alg).run(ctx, dict(s0), n)
    mid = dict(s0) if first is None else alg.run(ctx, dict(s0), first)
    out = alg.run(ctx, mid, n - (first or 0))
    plan = host_epoch.host_plan(alg, ctx)
    assert plan is not None and plan.external and alg.gpu_path(ctx) == "host kernel"
    for key in COUNTERS:
        assert out[key] == ref[key], key
    assert int(out["nan_evals"]) == int(ref["nan_evals"])
    for key in STATE_KEYS:
        assert _same(out[key], ref[key]), key
    return out, ref


@needs_cc
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls", [LSHADE, JSO])
def test_user_problem_bit_for_bit_with_the_twin(cls, dtype, c_library_math):
    """A rotated Rastrigin as array code, D = 10: LPSR, the archive and the memories over many
    L-SHADE generations, E = 23 leaving generations pending across runtime generations and calls."""
    alg = cls(dim=10, pop_size=40, max_generations=30, evals_per_generation=23)
    out, _ = _check(alg, RotatedRastrigin(10), 25, dtype=dtype, first=11)
    assert out["lgen"] > 10 and out["n_active"] < 40 and int(out["a_n"].max()) > 0


@needs_cc
@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_constrained_user_problem_bit_for_bit(handling, c_library_math):
    """A user problem with a constraint: the violation is the Evaluator's (its scale and Deb's rules,
    or the static penalty folded into ``f``), the same function as the twin's."""
    alg = LSHADE(dim=5, pop_size=30, max_generations=20)
    out, _ = _check(alg, ShiftedSphere(5), 20, handling=handling)
    if handling == "feasibility":
        assert (out["v"] > 0).any() and (out["v"] == 0).any()
    else:
        assert (out["v"] == 0).all()


@needs_cc
def test_nan_rows_count_as_the_twin(c_library_math):
    """An objective that returns NaN for some rows: worst, counted as NaN evaluations, as the twin."""
    alg = JSO(dim=3, pop_size=24, max_generations=10)
    out, _ = _check(alg, NaNSphere(3), 10, first=4)
    assert int(out["nan_evals"]) > 0


@needs_cc
def test_stop_target_generation_as_the_twin(c_library_math):
    """With a stop target the runtime generation each island first reaches it is the twin's."""
    prob = RotatedRastrigin(6)
    alg = LSHADE(dim=6, pop_size=30, max_generations=30, evals_per_generation=23)
    plain = island_ctx(np, prob, islands=3)
    mid = numpy_twin(alg).run(plain, alg.init(plain), 9)
    target = float(alg.best(mid).f.max())
    out, ref = _check(alg, prob, 25, target=target, first=11)
    assert _same(out["hit_generation"], ref["hit_generation"])
    assert (ref["hit_generation"] >= 1).all() and (ref["hit_generation"] > 1).any()


@needs_cc
@pytest.mark.parametrize("error", [ObjectiveError, KeyboardInterrupt])
def test_an_objective_error_reaches_the_caller(error, c_library_math):
    """The user's exception (or a Ctrl-C inside the objective), raised by the callback's objective,
    is raised by ``run`` as on the NumPy path (its type and message); the plan stays usable and the
    next run is the twin's."""
    prob = Raising(4)
    alg = LSHADE(dim=4, pop_size=20, max_generations=10)
    ctx = island_ctx(np, prob, islands=2)
    s0 = alg.init(ctx)
    prob.fail = error
    for a in (alg, numpy_twin(alg)):
        with pytest.raises(error, match="the user's objective failed"):
            a.run(ctx, dict(s0), 5)
    assert host_epoch.host_plan(alg, ctx).external
    prob.fail = None
    got, ref = alg.run(ctx, dict(s0), 5), numpy_twin(alg).run(ctx, dict(s0), 5)
    assert _same(got["X"], ref["X"]) and _same(got["A"], ref["A"])


class Nesting(RotatedRastrigin):
    """A user objective that, at every fourth call, runs another optimiser of the same configuration
    (the same compiled build, a nested run: bilevel optimisation), its result unused."""

    def __init__(self, dim, inner):
        super().__init__(dim)
        self.inner, self.calls = inner, 0

    def objective(self, X):
        self.calls += 1
        if self.calls % 4 == 3:
            ctx = island_ctx(np, RotatedRastrigin(self.dim), islands=2)
            self.inner.run(ctx, self.inner.init(ctx), 3)
        return super().objective(X)


@needs_cc
def test_a_nested_run_of_the_same_build_inside_the_objective(c_library_math):
    """The objective runs an L-SHADE of the same configuration (the same library and its callback
    slot): the outer run is still the twin's bit for bit."""
    alg = LSHADE(dim=5, pop_size=20, max_generations=12)
    _check(alg, Nesting(5, LSHADE(dim=5, pop_size=20, max_generations=5)), 12, islands=2)


class Recording(RotatedRastrigin):
    """:class:`RotatedRastrigin` that records the shapes of the batches it is given."""

    def __init__(self, dim=5):
        super().__init__(dim)
        self.shapes = []

    def objective(self, X):
        self.shapes.append(X.shape)
        return super().objective(X)


@needs_cc
def test_one_call_a_generation_for_every_island():
    """The islands in lockstep: one call per L-SHADE generation with every island's trial rows
    ``(I, N_G, D)``, ``N_G`` falling with LPSR (eq. 10)."""
    prob = Recording(5)
    alg = LSHADE(dim=5, pop_size=24, max_generations=10)
    ctx = island_ctx(np, prob, islands=3)
    s0 = alg.init(ctx)
    prob.shapes.clear()
    s = epoch.run(alg, ctx, s0, 10, kernel=HostEpochLSHADE(alg, ctx))
    sizes = [shape[1] for shape in prob.shapes]
    assert all(shape[0] == 3 and shape[2] == 5 for shape in prob.shapes) and sizes[0] == 24
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < 24 and s["lgen"] >= len(sizes) - 1


@needs_cc
def test_islands_on_threads_equal_one_thread(c_library_math):
    """The C passes on 3 OpenMP threads give the one-thread state bit for bit."""
    from tests.test_host_build import threads_agree  # noqa: PLC0415

    alg = JSO(dim=4, pop_size=20, max_generations=12)
    ctx = island_ctx(np, NaNSphere(4), islands=5, target=1e-2)
    host = HostEpochLSHADE(alg, ctx)
    assert host.external
    one = threads_agree(host, lambda s: epoch.run(alg, ctx, s, 12, kernel=host), alg.init(ctx))
    assert int(one["nan_evals"]) > 0


@needs_cc
def test_a_fused_problem_through_the_callback_is_the_fused_build():
    """``external=True`` on a problem with a ``cuda_objective`` whose fold is exact (a maximum): the
    callback's state is the fused host build's bit for bit (the same C around either objective)."""
    prob = test_lshade_epoch.MaxDistance(7)
    alg = LSHADE(dim=7, pop_size=30, max_generations=20, evals_per_generation=23)
    ctx = island_ctx(np, prob, islands=3)
    s0 = alg.init(ctx)
    fused = HostEpochLSHADE(alg, ctx)
    ext = HostEpochLSHADE(alg, ctx, external=True)
    assert not fused.external and ext.external and ext.xn_global
    a = epoch.run(alg, ctx, dict(s0), 15, kernel=fused)
    b = epoch.run(alg, ctx, dict(s0), 15, kernel=ext)
    for key in STATE_KEYS:
        assert _same(a[key], b[key]), key


@pytest.mark.parametrize("mode", ["auto", True, False])
def test_no_compiler_or_false_runs_the_twin(mode, monkeypatch, caplog):
    """Without a C compiler (simulated) a user problem's run is the twin's bit for bit with one line
    (a warning where ``host_kernel=true`` asked for it); ``host_kernel=false`` never builds."""
    monkeypatch.setattr(cuda_check, "compiler", lambda: None)
    monkeypatch.setattr(host_build, "compile_host", lambda *a, **k: pytest.fail("compiled"))
    alg = LSHADE(dim=5, pop_size=20, max_generations=6, host_kernel=mode)
    ctx = island_ctx(np, ShiftedSphere(5), islands=2)
    s0 = alg.init(ctx)
    with caplog.at_level(logging.INFO, logger="isles.algorithms.lshade.epoch"):
        got = alg.run(ctx, dict(s0), 6)
        assert alg.gpu_path(ctx) == "numpy"
    ref = numpy_twin(alg).run(ctx, dict(s0), 6)
    for key in STATE_KEYS:
        assert _same(got[key], ref[key]), key
    assert_no_compiler_line(caplog, mode)


def test_where_the_external_objective_does_not_apply():
    """The reasons left for a user problem: ``epoch=False``; a built-in problem without a
    ``cuda_objective`` (Schwefel 1.2) takes the callback too."""
    ctx = island_ctx(np, make_problem("schwefel_1_2", dim=4))
    alg = LSHADE(dim=4, pop_size=20)
    assert "cuda_objective" in epoch.unsupported_reason(alg, ctx, device=False)
    assert epoch.unsupported_reason(alg, ctx, device=False, external=True) is None
    off = LSHADE(dim=4, pop_size=20, epoch=False)
    assert "epoch=False" in epoch.unsupported_reason(off, ctx, device=False, external=True)
