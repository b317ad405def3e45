"""FEP's epoch path through its host twin (CI, no GPU).

The epoch kernel (``algorithms/core/cuda/fep_epoch.cu``) runs the per-generation kernels' own
device functions (``fep_slot``, ``fep_wins_of``, ``fep_select_block``) generation after generation in
one launch; its host twin is :meth:`isles.algorithms.ep.cuda_host.HostFEP.run`, that kernel's own
block loop (``fep_epoch_block``: ping-pong union buffers, survivors as the next parents, the stop
target) compiled as C with one thread per block (``-DISLES_HOST_EMU``); :meth:`HostFEP.step` is
the per-generation kernels' steps, so the two are compared as well. Here it must run the NumPy twin's generations (FEP, CEP,
IFEP; a constrained user problem; NaN; the stop target) in one call and across calls: the same
survivors, offspring to the math library's ulp (as ``tests/test_fep.py``), the same NaN count and
``hit_generation``. The GPU tests (``tests/test_fep_epoch_gpu.py``) compare the CUDA epoch kernel
with the per-generation kernels bit for bit and with this twin.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.ep import cuda_host as ep_host
from isles.algorithms.ep.fep import FEP
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Sphere

from tests.helpers import host_run_and_steps, island_ctx, numpy_twin
from tests.user_problems import FusedNaNSphere, FusedPressureVessel

pytestmark = pytest.mark.skipif(ep_host.host_compiler() is None, reason="no C compiler")


def _compare(prob, algo, ctx, n=12, first=None):
    """NumPy ``algo.run`` against the host twin in two calls (``first`` generations, then the rest)."""
    s0 = algo.init(ctx)
    ref = numpy_twin(algo).run(ctx, dict(s0), n)
    host = ep_host.HostFEP(algo, ctx)
    first = n - 3 if first is None else first
    st = host.run(dict(s0), first, ctx.target)
    st = host.run(st, n - first, ctx.target)
    scale = float(np.max(np.asarray(prob.upper) - np.asarray(prob.lower)))
    np.testing.assert_allclose(st["X"], ref["X"], rtol=1e-12, atol=1e-9 * scale)  # see test_fep._host_equals_numpy
    np.testing.assert_allclose(st["eta"], ref["eta"], rtol=1e-12)
    np.testing.assert_allclose(st["f"], ref["f"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(st["v"], ref["v"], rtol=1e-10, atol=1e-12)
    assert (st["generation"], st["evals"]) == (ref["generation"], ref["evals"])
    assert int(st["nan_evals"]) == int(ref["nan_evals"])
    return st, ref


@pytest.mark.parametrize("mutation", ["cauchy", "gaussian", "improved"])
def test_host_epoch_equals_numpy_generations(mutation):
    """FEP, CEP, IFEP; Rosenbrock sets OBJ_NEXT (the neighbour lane's coordinate)."""
    prob = Rosenbrock(9, -5.0, 5.0)
    _compare(prob, FEP(pop_size=13, q=5, mutation=mutation), _ctx(prob), n=12)


def test_host_epoch_in_one_call_equals_steps():
    prob = Rastrigin(6)
    algo = FEP(pop_size=10, q=4, bound_handling="reinit")
    ctx = _ctx(prob)
    host = ep_host.HostFEP(algo, ctx)
    one, st = host_run_and_steps(host, algo.init(ctx), 9)
    for k in ("X", "eta", "f", "v"):
        np.testing.assert_array_equal(one[k], st[k])
    _compare(prob, algo, ctx, n=9, first=9)


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
def test_host_epoch_constrained_user_problem(handling):
    """OBJ_HAS_V (a user's pressure vessel): Deb's rules, or the static penalty, as the twin."""
    prob = FusedPressureVessel()
    _compare(
        prob, FEP(pop_size=12, q=6, mutation="improved", bound_handling="clip"), _ctx(prob, handling=handling), n=15
    )


def test_host_epoch_counts_nan_as_the_twin():
    prob = FusedNaNSphere(dim=5)
    st, ref = _compare(prob, FEP(pop_size=12, q=5), _ctx(prob), n=10)
    assert int(ref["nan_evals"]) > 0  # the test exercises the NaN rule


def test_host_epoch_stop_target_generation_as_the_twin():
    """hit_generation: the first generation after which an island's best is feasible with f <=
    target, inside one call and across two."""
    prob = Sphere(3, -1.0, 1.0)
    st, ref = _compare(
        prob, FEP(pop_size=10, q=4, mutation="gaussian"), _ctx(prob, islands=4, target=0.05), n=30, first=17
    )
    hits = np.asarray(ref["hit_generation"])
    assert (hits > 0).any() and (hits != hits[0]).any()  # islands reach it at different generations
    np.testing.assert_array_equal(st["hit_generation"], hits)


def _ctx(prob, islands=3, seed=5, **kw):
    return island_ctx(np, prob, islands, seed, **kw)
