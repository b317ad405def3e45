"""The GA's epoch path through its host twin (CI, no GPU).

The epoch kernel (``algorithms/core/cuda/ga_epoch.cu``) runs the per-generation kernels' own
device functions (``ga_elite_block``, ``ga_track``, ``ga_decide``, ``ga_slot``) generation after
generation in one launch; its host twin is :meth:`isles.algorithms.ga.cuda_host.HostGA.run`, that
kernel's own block loop (``ga_epoch_block``: ping-pong populations, the stop target on every
population) compiled as C with one thread per block (``-DISLES_HOST_EMU``); :meth:`HostGA.step` is
the per-generation kernels' steps, so the two are compared as well. Here it must run the NumPy
twin's generations (one-point, two-point and uniform crossover, per-bit and seed mutation,
elitism and renewal, bit problems and real problems decoded from bits, a constrained user problem
under Deb's rules and the static penalty, NaN, the stop target) in one call and across calls: the
same genomes and ``(f, v)`` bit for bit, the same NaN count and ``hit_generation``. The GPU tests
(``tests/test_ga_epoch_gpu.py``) compare the CUDA epoch kernel with the per-generation kernels bit
for bit and with this twin.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.ga import cuda_host as ga_host
from isles.algorithms.ga import cuda_source as ga_source
from isles.algorithms.ga.epoch import MAX_EPOCH_TPI, epoch_rows_bytes, epoch_unsupported_reason
from isles.algorithms.ga.ga import GA
from isles.problems.benchmarks import Rastrigin, Sphere
from isles.problems.binary import Knapsack, OneMax, Trap

from tests.helpers import host_run_and_steps, island_ctx, numpy_twin
from tests.user_problems import FusedNaNSphere, FusedPressureVessel

pytestmark = pytest.mark.skipif(ga_host.host_compiler() is None, reason="no C compiler")


def _ctx(prob, islands=3, seed=5, **kw):
    return island_ctx(np, prob, islands, seed, **kw)


def _assert_same(a, b, exact=True):
    """Same genomes, counts and NaN count; ``(f, v)`` bit for bit, or (``exact=False``: a real
    objective summed by the kernel's threads, not NumPy's order) to the rounding of the sum."""
    np.testing.assert_array_equal(a["genome"], b["genome"])
    for k in ("f", "v"):
        if exact:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        else:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-12, atol=1e-12, err_msg=k)
    assert (a["generation"], a["evals"]) == (b["generation"], b["evals"])
    assert int(a["nan_evals"]) == int(b["nan_evals"])


def _compare(prob, algo, ctx, n=12, first=None, tpi=None):
    """NumPy ``algo.run`` against the host twin in two calls (``first`` generations, then the rest)."""
    s0 = algo.track_target(ctx, algo.init(ctx))
    ref = numpy_twin(algo).run(ctx, dict(s0), n)
    host = ga_host.HostGA(algo, ctx, tpi)
    first = n - 3 if first is None else first
    st = host.run(dict(s0), first)
    st = host.run(st, n - first)
    _assert_same(st, ref, exact=ctx.evaluator.problem.__class__ not in (Sphere, FusedPressureVessel, FusedNaNSphere))
    return st, ref


CASES = [
    (lambda: OneMax(100), dict(pop_size=30, n_elite=2, renewal=0.1), 4),
    (lambda: OneMax(64), dict(pop_size=30, n_elite=0, crossover="two_point", mutation="seed", p_m=0.5), 1),
    (lambda: Trap(105), dict(pop_size=40, group_size=3, crossover="uniform", p_m=0.05), 2),
    (lambda: Trap(1000), dict(pop_size=20, n_elite=3), 1),  # 32 words per thread
    (lambda: Knapsack(70), dict(pop_size=30, n_elite=2), 4),  # constrained: Deb's rules on (f, v)
    (lambda: Rastrigin(2, -1.0, 1.0), dict(pop_size=64, encoding="seed002"), None),
    (lambda: Sphere(3, -5.0, 3.0), dict(pop_size=40, encoding="gray", bits_per_variable=20), None),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_host_epoch_equals_numpy_generations(case):
    make, kw, tpi = CASES[case]
    prob = make()
    _compare(prob, GA(**kw), _ctx(prob), n=14, tpi=tpi)


def test_host_epoch_in_one_call_equals_steps():
    """The epoch loop and the per-generation kernels' steps (HostGA.step) build the same populations."""
    prob = Trap(105)
    algo = GA(pop_size=24, n_elite=2, renewal=0.1)
    ctx = _ctx(prob)
    host = ga_host.HostGA(algo, ctx)
    s0 = algo.init(ctx)
    one, st = host_run_and_steps(host, s0, 9)
    _assert_same(one, st)
    assert not np.array_equal(one["genome"], s0["genome"])
    assert host.run(dict(s0), 0)["generation"] == s0["generation"]
    with pytest.raises(ValueError, match="n_generations=-1"):
        host.run(dict(s0), -1)


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_host_epoch_constrained_user_problem(handling):
    """OBJ_HAS_V (a user's pressure vessel, real-coded): Deb's rules, or the static penalty."""
    prob = FusedPressureVessel()
    st, ref = _compare(
        prob, GA(pop_size=40, encoding="binary", bits_per_variable=20), _ctx(prob, handling=handling), n=12
    )
    if handling == "feasibility":
        assert (np.asarray(ref["v"]) > 0).any()  # infeasible individuals take part
    else:
        assert (np.asarray(ref["v"]) == 0).all()


def test_host_epoch_knapsack_penalty():
    prob = Knapsack(60)
    _compare(prob, GA(pop_size=30, n_elite=1), _ctx(prob, handling="penalty"), n=10)


def test_host_epoch_counts_nan_as_the_twin():
    prob = FusedNaNSphere(dim=3)
    st, ref = _compare(prob, GA(pop_size=30, encoding="binary", bits_per_variable=12), _ctx(prob), n=10)
    assert int(ref["nan_evals"]) > 0  # the test exercises the NaN rule


def test_host_epoch_stop_target_generation_as_the_twin():
    """hit_generation: the first generation whose best is feasible with f <= target, inside one
    call and across two."""
    prob = OneMax(60)
    st, ref = _compare(prob, GA(pop_size=24), _ctx(prob, islands=4, target=7.0), n=40, first=24)
    hits = np.asarray(ref["hit_generation"])
    assert (hits > 0).all() and (hits <= 24).any() and (hits > 24).any()  # hit in the first call and in the second
    np.testing.assert_array_equal(st["hit_generation"], hits)


def test_epoch_applies_up_to_a_warp_per_slot():
    """Trap-5 with 10^5 bits (TPI = 128) stays on the per-generation kernels, with a reason;
    seed 002's 64-bit genome (TPI = 2) and 1024-word genomes (TPI = 32) take the epoch kernel."""
    tpi, _, _ = ga_source.layout(3125, 3125)
    assert tpi == 128 and "TPI=128" in epoch_unsupported_reason(tpi, 3125)
    assert epoch_unsupported_reason(ga_source.layout(2, 2)[0], 2) is None
    assert ga_source.layout(1024, 1024)[0] == MAX_EPOCH_TPI and epoch_unsupported_reason(32, 1024) is None
    assert epoch_rows_bytes(1024, 2, 2) == 512 * 2 * 4
