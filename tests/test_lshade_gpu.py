"""GPU tests of L-SHADE on CuPy (algorithms/lshade/lshade.py): the same array code as NumPy.

Marked ``gpu`` and skipped where CuPy or a CUDA device is missing (the lead runs them on a GPU
machine). What is bit-identical between NumPy and CuPy, and what is equal to rounding:

* bit for bit: the counter-based draws and every decision made from them and from comparisons
  (memory slots, pbest, r1, r2, j_rand, the crossover mask, selection, the archive's members and
  fill, the memory slot ``k``, the population reduction), given the same objective values;
* to rounding: ``F_i`` and ``CR_i`` (``tan``, ``arctan``, ``log1p``, ``cos``: NumPy's and CUDA's
  libraries may differ in the last bit, as FEP's Cauchy variates do, tests/test_fep_gpu.py), the
  Lehmer means (sums reduced in another order) and the objective itself (a sum over D), hence a
  whole run's values after many generations.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()

from isles.algorithms.lshade.lshade import LSHADE  # noqa: E402
from isles.problems.base import ScalableProblem  # noqa: E402

from tests.helpers import island_ctx  # noqa: E402

pytestmark = pytest.mark.gpu


class _Sphere(ScalableProblem):
    name = "test_sphere"

    def __init__(self, dim=6):
        super().__init__(dim, -100.0, 100.0, f_star=0.0)

    def objective(self, X):
        Y = X - 1.5
        return (Y * Y).sum(axis=-1)


def _to_cupy(state):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in state.items()}


def _same_bits(a, b):
    a, b = cp.asnumpy(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _tol(dtype):
    return 1e-5 if dtype == np.float32 else 1e-12


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_generation_from_the_same_state(dtype):
    """Trials from the same (host) state: the same decisions bit for bit, F and CR to rounding;
    the generation's end from the same objective values: population, archive and ``k`` bit for bit."""
    alg = LSHADE(dim=6, max_generations=20, evals_per_generation=40)
    prob = _Sphere(6)
    cn, cc = island_ctx(np, prob, islands=3, dtype=dtype), island_ctx(cp, prob, islands=3, dtype=dtype)
    s = alg.run(cn, alg.init(cn), 9)  # archive and memories in use
    s["cursor"] = 0
    s.update(LSHADE._no_pending(np, s["X"]))
    a, b = alg._start_generation(cn, s), alg._start_generation(cc, _to_cupy(s))
    n = s["n_active"]
    np.testing.assert_allclose(cp.asnumpy(b["F"]), a["F"], rtol=_tol(dtype))
    np.testing.assert_allclose(cp.asnumpy(b["CR"]), a["CR"], rtol=_tol(dtype), atol=_tol(dtype))
    np.testing.assert_allclose(cp.asnumpy(b["U"]), a["U"], rtol=1e3 * _tol(dtype), atol=1e3 * _tol(dtype))
    X = s["X"][:, :n]
    assert np.array_equal(cp.asnumpy(b["U"]) != X, a["U"] != X)  # the crossover's choices
    # the end of the generation from the NumPy trials and their NumPy values
    fu, vu, _ = cn.evaluator(a["U"])
    a.update(fu=fu, vu=vu, cursor=n)
    end_n = alg._end_generation(cn, a, nfe=s["evals"] + n)
    end_c = alg._end_generation(cc, _to_cupy(a), nfe=s["evals"] + n)
    for key in ("X", "f", "v", "A", "a_n", "k"):
        assert _same_bits(end_c[key], end_n[key]), key
    for key in ("M_F", "M_CR"):
        np.testing.assert_allclose(cp.asnumpy(end_c[key]), end_n[key], rtol=_tol(dtype))
    assert end_c["n_active"] == end_n["n_active"] and end_c["lgen"] == end_n["lgen"]


def test_a_run_agrees_with_numpy():
    """A whole run: the same schedule (host counters), the same best to rounding (float64)."""
    alg = LSHADE(dim=6, max_generations=40, evals_per_generation=47)
    prob = _Sphere(6)
    cn, cc = island_ctx(np, prob, islands=3), island_ctx(cp, prob, islands=3)
    a, b = alg.run(cn, alg.init(cn), 40), alg.run(cc, alg.init(cc), 40)
    for key in ("generation", "evals", "lgen", "n_active", "cursor"):
        assert a[key] == b[key], key
    fa, fb = alg.best(a).f[:, 0], cp.asnumpy(alg.best(b).f[:, 0])
    np.testing.assert_allclose(fb, fa, rtol=1e-6, atol=1e-12)
    assert (fb < 1.0).all()  # from 1.7e3-6.4e3 at the start


_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
}
"""


def test_steps_do_not_synchronise():
    """With 1.5 s of device work queued ahead, a few runtime generations return at once."""
    ctx = island_ctx(cp, _Sphere(50), islands=4, dtype=np.float32)
    alg = LSHADE(dim=50, max_generations=30)
    s = alg.run(ctx, alg.init(ctx), 3)  # warm-up: kernels compiled, memory pool filled
    cp.cuda.Device().synchronize()
    spin = cp.RawKernel(_SPIN, "spin")
    spin((1,), (1,), (np.int64(1_500_000_000),))
    t0 = time.perf_counter()
    s = alg.run(ctx, s, 3)
    host = time.perf_counter() - t0
    busy = not cp.cuda.get_current_stream().done
    cp.cuda.Device().synchronize()
    assert busy and host < 1.0, f"host waited {host:.3f} s for the device"


def test_capture_is_refused():
    """A CUDA-graph capture of a step (islands.span_graph) raises, so the runtime keeps plain epochs."""
    ctx = island_ctx(cp, _Sphere(4), islands=2)
    alg = LSHADE(dim=4, max_generations=10)
    s = alg.init(ctx)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            with pytest.raises(RuntimeError, match="cannot be captured"):
                alg.step(ctx, s)
        finally:
            stream.end_capture()


# -- the epoch kernel (algorithms/lshade/epoch.py) ----------------------------------------------------


def _epoch_pair(cls, prob, dtype, islands=4, xn_global=False, **kw):
    from isles.algorithms.lshade.epoch import EpochLSHADE  # noqa: PLC0415
    from isles.algorithms.lshade.host_epoch import HostEpochLSHADE  # noqa: PLC0415

    alg = cls(**kw)
    cn, cc = island_ctx(np, prob, islands=islands, dtype=dtype), island_ctx(cp, prob, islands=islands, dtype=dtype)
    return alg, cn, cc, HostEpochLSHADE(alg, cn, xn_global), EpochLSHADE(alg, cc, xn_global=xn_global)


@pytest.mark.parametrize(("dtype", "xn_global"), [(np.float64, False), (np.float32, False), (np.float64, True)])
@pytest.mark.parametrize("jso", [False, True])
def test_epoch_kernel_equals_its_host_build(dtype, xn_global, jso):
    """The CUDA kernel and its host build (the same text) from the same state, trial rows in shared
    or global memory: the same decisions (archive fill, memory slot, population size) and the same
    values up to the math libraries' last bit (CUDA's tan/atan/log1p/cos against the C library's;
    bit for bit where they agree). The block's threads split the ranks and the archive's counts,
    which the one-thread host build does not: a wrong split would show here."""
    from isles.algorithms.lshade import epoch  # noqa: PLC0415
    from isles.algorithms.lshade.jso import JSO  # noqa: PLC0415

    from tests.test_lshade_epoch import MaxDistance  # noqa: PLC0415

    cls = JSO if jso else LSHADE
    alg, cn, cc, host, dev = _epoch_pair(
        cls, MaxDistance(9), dtype, xn_global=xn_global, dim=9, pop_size=40, max_generations=20
    )
    s = alg.init(cn)
    a = epoch.run(alg, cn, dict(s), 6, kernel=host)
    b = epoch.run(alg, cc, _to_cupy(s), 6, kernel=dev)
    for key in ("generation", "evals", "lgen", "n_active", "cursor"):
        assert a[key] == b[key], key
    for key in ("a_n", "k"):
        assert _same_bits(b[key], a[key]), key
    assert int(b["nan_evals"]) == int(a["nan_evals"])
    tol = 1e-4 if dtype == np.float32 else 1e-9
    for key in ("X", "f", "A", "M_F", "M_CR"):
        np.testing.assert_allclose(cp.asnumpy(b[key]), a[key], rtol=tol, atol=tol, err_msg=key)


def test_run_takes_the_epoch_kernel_and_agrees_with_the_array_code():
    """``LSHADE.run`` on CuPy with a fused objective runs the epoch kernel (gpu_path), without host
    synchronisation, and lands where the array code does (epoch=False) to rounding."""
    from isles.problems.benchmarks import Sphere  # noqa: PLC0415

    prob = Sphere(20, -100.0, 100.0)
    on, off = LSHADE(dim=20, max_generations=30), LSHADE(dim=20, max_generations=30, epoch=False)
    c1, c2 = island_ctx(cp, prob, islands=4), island_ctx(cp, prob, islands=4)
    assert on.gpu_path(c1) == "epoch kernel" and off.gpu_path(c2) == "array code"
    a = on.run(c1, on.init(c1), 5)
    b = off.run(c2, off.init(c2), 5)
    for key in ("generation", "evals", "lgen", "n_active", "cursor"):
        assert a[key] == b[key], key
    np.testing.assert_allclose(cp.asnumpy(a["f"]), cp.asnumpy(b["f"]), rtol=1e-6)
    spin = cp.RawKernel(_SPIN, "spin")
    cp.cuda.Device().synchronize()
    spin((1,), (1,), (np.int64(1_500_000_000),))
    t0 = time.perf_counter()
    a = on.run(c1, a, 3)
    host = time.perf_counter() - t0
    busy = not cp.cuda.get_current_stream().done
    cp.cuda.Device().synchronize()
    assert busy and host < 1.0, f"host waited {host:.3f} s for the device"


def test_budget_and_metrics_on_cupy():
    """The exact budget's short last generation and the metrics hook on CuPy: the evaluations and
    N_G are NumPy's (host counters), the metrics are (I,) device arrays equal to NumPy's decisions
    (pop_size, archive) and to rounding (the memories)."""
    kw = dict(dim=4, max_generations=30, evals_per_generation=50, max_evaluations=2 * (72 + 10 * 50 + 37), n_islands=2)
    out = {}
    for xp in (np, cp):
        alg = LSHADE(**kw)
        ctx = island_ctx(xp, _Sphere(4), islands=2)
        s = alg.run(ctx, alg.init(ctx), 12)
        out[xp] = (s, alg.metrics(s))
    (sn, mn), (sc, mc) = out[np], out[cp]
    assert sn["evals"] == sc["evals"] == 609 and sn["n_active"] == sc["n_active"] == 4
    assert all(isinstance(v, cp.ndarray) and v.shape == (2,) for v in mc.values())
    np.testing.assert_array_equal(cp.asnumpy(mc["pop_size"]), mn["pop_size"])
    np.testing.assert_array_equal(cp.asnumpy(mc["archive"]), mn["archive"])
    np.testing.assert_allclose(cp.asnumpy(mc["M_F"]), mn["M_F"], rtol=1e-9)
