"""DE's host build around a user's array-code objective (``EXT_OBJ``, issue 37).

A problem without a ``cuda_objective`` runs the DE epoch kernel's host build with the problem's own
objective: C builds every island's trial rows of a generation, one ctypes callback evaluates them
with the context's Evaluator (the twin's ``(I, N, D)`` call), C selects
(:mod:`isles.algorithms.de.host_epoch`). Against the NumPy twin (``host_kernel=false``) the
objective's calls, the populations, ``f``, ``v``, NaN evaluations and the stop target's generation
are equal bit for bit (DE's draws need no math library); an objective's error reaches the caller as
on the NumPy path; without a compiler the run is the twin's with one line.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from isles.algorithms.de import cuda_source
from isles.algorithms.de.de import DE
from isles.algorithms.de.host_epoch import HostEpochDE, host_plan
from isles.problems import cuda_check, make_problem

from tests.helpers import assert_no_compiler_line, island_ctx, numpy_twin
from tests.test_lshade_user_problem import Nesting, ObjectiveError, Raising, RotatedRastrigin
from tests.user_problems import NaNSphere, ShiftedSphere

needs_cc = pytest.mark.skipif(cuda_check.compiler() is None, reason="no C compiler")
KEYS = ("X", "f", "v", "nan_evals", "generation", "evals")


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _check(alg, prob, n, dtype=np.float64, handling="feasibility", target=None):
    """The default run (``host_kernel=auto``, the callback) against the twin, bit for bit; its state."""
    ctx = island_ctx(np, prob, islands=3, dtype=dtype, handling=handling, target=target)
    s0 = alg.init(ctx)
    got = alg.run(ctx, dict(s0), n)
    ref = numpy_twin(alg).run(ctx, dict(s0), n)
    assert alg.gpu_path(ctx) == "host kernel" and HostEpochDE(alg, ctx).external
    for key in KEYS + (("hit_generation",) if target is not None else ()):
        assert _same(got[key], ref[key]), key
    return got


@needs_cc
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("crossover", ["bin", "nec"])
@pytest.mark.parametrize("bounds", ["clip", "reflect"])
def test_user_problem_bit_for_bit_with_the_twin(crossover, bounds, dtype):
    """rand/1 with ``bin`` and ``nec`` on a rotated Rastrigin as array code, D = 10."""
    alg = DE(pop_size=16, F=0.6, CR=0.8, crossover=crossover, bound_handling=bounds)
    _check(alg, RotatedRastrigin(10), 30, dtype=dtype)


class Recording(RotatedRastrigin):
    """:class:`RotatedRastrigin` that records the batches it is given."""

    def __init__(self, dim=5):
        super().__init__(dim)
        self.batches = []

    def objective(self, X):
        self.batches.append(X.copy())
        return super().objective(X)


@needs_cc
def test_the_objective_gets_the_twins_batches():
    """One call a generation with every island's trial rows ``(I, N, D)``: the same arrays, in the
    same order, as the NumPy twin gives the problem."""
    alg = DE(pop_size=10, F=0.6, CR=0.8)
    seen = []
    for a in (alg, numpy_twin(alg)):
        prob = Recording(5)
        ctx = island_ctx(np, prob, islands=3)
        a.run(ctx, a.init(ctx), 7)
        seen.append(prob.batches)
    assert len(seen[0]) == len(seen[1]) == 8 and seen[0][1].shape == (3, 10, 5)
    assert all(_same(a, b) for a, b in zip(*seen, strict=True))


@needs_cc
@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_constrained_and_nan_user_problems(handling):
    """A constraint (the Evaluator's violation, Deb's rules or the penalty) and NaN rows (worst,
    counted) as the twin."""
    _check(DE(pop_size=12, F=0.6, CR=0.8), ShiftedSphere(5), 20, handling=handling)
    got = _check(DE(pop_size=12, F=0.6, CR=0.8), NaNSphere(3), 20)
    assert int(got["nan_evals"]) > 0


@needs_cc
def test_stop_target_generation_as_the_twin():
    """The generation each island first reaches the target is the twin's."""
    prob = RotatedRastrigin(6)
    alg = DE(pop_size=16, F=0.6, CR=0.8)
    plain = island_ctx(np, prob, islands=3)
    mid = numpy_twin(alg).run(plain, alg.init(plain), 10)
    got = _check(alg, prob, 30, target=float(alg.best(mid).f.max()))
    assert (got["hit_generation"] >= 1).all() and (got["hit_generation"] > 1).any()


@needs_cc
def test_an_objective_error_reaches_the_caller():
    """The user's exception is raised by ``run`` and ``step`` as on the NumPy path; the plan stays
    usable."""
    prob = Raising(4)
    alg = DE(pop_size=12, F=0.6, CR=0.8)
    ctx = island_ctx(np, prob, islands=2)
    s0 = alg.init(ctx)
    assert host_plan(alg, ctx).external
    prob.fail = ObjectiveError
    for call in (lambda a: a.run(ctx, dict(s0), 5), lambda a: a.step(ctx, dict(s0))):
        for a in (alg, numpy_twin(alg)):
            with pytest.raises(ObjectiveError, match="the user's objective failed"):
                call(a)
    prob.fail = None
    assert _same(alg.run(ctx, dict(s0), 5)["X"], numpy_twin(alg).run(ctx, dict(s0), 5)["X"])


@needs_cc
def test_a_nested_run_of_the_same_build_inside_the_objective():
    """The objective runs a DE of the same configuration (the same library and its callback slot):
    the outer run is still the twin's bit for bit."""
    _check(DE(pop_size=12, F=0.6, CR=0.8), Nesting(5, DE(pop_size=12, F=0.6, CR=0.8)), 12)


@needs_cc
def test_islands_on_threads_equal_one_thread():
    """The C passes on 3 OpenMP threads give the one-thread state bit for bit (NaN count and stop
    target included)."""
    from tests.test_host_build import threads_agree  # noqa: PLC0415

    alg = DE(pop_size=12, F=0.8, CR=0.9)
    ctx = island_ctx(np, NaNSphere(3), islands=7, target=1e-3)
    host = HostEpochDE(alg, ctx)
    assert host.external
    one = threads_agree(host, lambda s: host.run(s, 25, ctx.target), alg.init(ctx))
    assert int(one["nan_evals"]) > 0 and (one["hit_generation"] > 0).any()


@needs_cc
def test_a_fused_problem_through_the_callback_is_the_fused_build():
    """``external=True`` on Rastrigin (which has a ``cuda_objective``): the same populations as the
    fused build (the same C around either objective), ``f`` to the fold's rounding."""
    prob = make_problem("rastrigin", dim=6)
    alg = DE(pop_size=12, F=0.6, CR=0.8)
    ctx = island_ctx(np, prob, islands=3)
    s0 = alg.init(ctx)
    a = HostEpochDE(alg, ctx).run(dict(s0), 15)
    b = HostEpochDE(alg, ctx, external=True).run(dict(s0), 15)
    assert not HostEpochDE(alg, ctx).external
    assert _same(a["X"], b["X"])
    np.testing.assert_allclose(a["f"], b["f"], rtol=1e-12)


@pytest.mark.parametrize("mode", ["auto", True, False])
def test_no_compiler_or_false_runs_the_twin(mode, monkeypatch, caplog):
    """Without a C compiler (simulated) a user problem's run is the twin's bit for bit with one line
    (a warning where ``host_kernel=true`` asked for it); ``host_kernel=false`` never builds."""
    monkeypatch.setattr(cuda_check, "compiler", lambda: None)
    alg = DE(pop_size=12, F=0.6, CR=0.8, host_kernel=mode)
    ctx = island_ctx(np, ShiftedSphere(5), islands=2)
    s0 = alg.init(ctx)
    with caplog.at_level(logging.INFO, logger="isles.algorithms.de.host_epoch"):
        got = alg.run(ctx, dict(s0), 6)
        assert alg.gpu_path(ctx) == "numpy" and host_plan(alg, ctx) is None
    ref = numpy_twin(alg).run(ctx, dict(s0), 6)
    for key in KEYS:
        assert _same(got[key], ref[key]), key
    assert_no_compiler_line(caplog, mode)


def test_where_the_external_objective_applies():
    """Without a ``cuda_objective`` only the variation's conditions remain (rand/1, bin or nec)."""
    ctx = island_ctx(np, make_problem("schwefel_1_2", dim=4))
    p = DE(pop_size=12).params
    assert "cuda_objective" in cuda_source.unsupported_reason(p, ctx, device=False)
    assert cuda_source.unsupported_reason(p, ctx, device=False, external=True) is None
    best = DE(pop_size=12, strategy="best/1").params
    assert cuda_source.unsupported_reason(best, ctx, device=False, external=True) is not None
