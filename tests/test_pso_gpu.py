"""GPU tests of the fused PSO step (algorithms/pso/cuda.py) against the generic CuPy and NumPy code.

Marked ``gpu`` (deselected by default; ``python -m pytest -m gpu tests/test_pso_gpu.py``) and
skipped where CuPy or a CUDA device is missing. What is checked (seed 001 eqs. 1-5):

* the schedules (eq. 3 inertia weight, velocity clamp) are bit-identical to the generic 0-d CuPy
  expressions, for any value of the RNG device counter;
* a fused step is **bit-identical** to the generic CuPy step (``PSOParams(fused=False)``): every
  state array, float32 and float64, both COR modes, with and without the clamp, several islands,
  swarms and dimensions above one block, constrained problems and NaN objectives;
* against NumPy, ``x`` and ``vel`` after one step are bit-identical in float64 where the clamp
  fraction is computed alike (no clamp, or ``k = 1``), within 1e-12 (relative) in float64
  otherwise, and to float32 rounding in float32 (module docstring of algorithms/pso/cuda.py);
* CUDA-graph replay (:class:`isles.algorithms.core.graph.GraphStepper`) of the fused step equals a plain
  loop of fused steps and a loop of generic steps, bit for bit;
* a step does not synchronise with the host.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.graph import GraphStepper  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.pso import cuda as pso_cuda  # noqa: E402
from isles.algorithms.pso.pso import PSO, VMAX_POWER, inertia_weight, vmax_schedule  # noqa: E402
from isles.problems.base import ScalableProblem  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402
from isles.problems.registry import make_problem  # noqa: E402

pytestmark = pytest.mark.gpu

ARRAYS = ("x", "vel", "pbest", "pbest_f", "pbest_v", "gbest", "gbest_f", "gbest_v", "nan_evals")
DTYPES = (np.float32, np.float64)
MODES = ("overshoot", "range")


class _NanSphere(ScalableProblem):
    """Sphere on [-10, 10] whose objective is NaN where x_0 > 6 (NaN = worst, counted)."""

    name = "nan_sphere"
    default_bounds = (-10.0, 10.0)

    def objective(self, X):
        xp = cp.get_array_module(X)
        f = (X * X).sum(axis=-1)
        return xp.where(X[..., 0] > 6.0, xp.nan, f)


def _problem(name):
    if name == "nan_sphere":
        return _NanSphere(dim=6)
    if name == "sphere":
        return make_problem("sphere", dim=7)
    if name == "sphere_big":
        return make_problem("sphere", dim=600)
    return make_problem(name)


def _ctx(xp, problem, dtype, streams=(0, 1, 2), seed=5):
    return Context(xp, np.dtype(dtype), Evaluator(problem), CounterRNG(xp, seed, list(streams)))


def _host(a):
    return cp.asnumpy(a) if isinstance(a, cp.ndarray) else np.asarray(a)


def _same_bits(a, b):
    a, b = _host(a), _host(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _assert_same_state(a, b, where=""):
    for k in ARRAYS:
        assert _same_bits(a[k], b[k]), f"{where}: {k} differs"
    assert a["generation"] == b["generation"] and a["evals"] == b["evals"], where


def _to_cupy(state):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in state.items()}


def _pso(fused, mode="overshoot", clamp=True, n=13, max_iterations=30, **kw):
    return PSO(
        n_particles=n,
        cor_mode=mode,
        vmax_fraction=0.5 if clamp else 0.0,
        max_iterations=max_iterations,
        fused=fused,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# schedules (eq. 3 and the clamp)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "i_max,start,final", [(1000, 0.5, 1e-6), (30, 0.5, 1e-6), (1, 0.5, 1e-6), (50, 0.3, 0.3), (50, 0.0, 1e-6)]
)
def test_schedule_values_bit_identical_to_generic(dtype, i_max, start, final):
    ctx = _ctx(cp, make_problem("sphere", dim=3), dtype)
    try:
        for ctr in (0, 9):
            ctx.rng.ctr[...] = ctr
            for k in (1, 2, 3, 17, 29, 30, 31, 500, 999, 1000, 1001, 4000):
                kd = ctx.generation_value(k)
                w_ref = cp.asarray(inertia_weight(kd, i_max, 0.9, 0.4), dtype=dtype)
                v_ref = cp.asarray(vmax_schedule(kd, i_max, start, final), dtype=dtype)
                w, v = pso_cuda.schedule_values(ctx, k, i_max, 0.9, 0.4, start, final, VMAX_POWER)
                assert w.shape == v.shape == () and w.dtype == v.dtype == np.dtype(dtype)
                assert _same_bits(w, w_ref), (ctr, k, float(w), float(w_ref))
                assert _same_bits(v, v_ref), (ctr, k, float(v), float(v_ref))
    finally:
        ctx.rng.ctr[...] = 0


# ---------------------------------------------------------------------------------------------
# fused step == generic CuPy step, bit for bit
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("clamp", [True, False])
@pytest.mark.parametrize("problem", ["welded_beam", "sphere", "speed_reducer"])
def test_fused_step_bit_identical_to_generic_cupy(dtype, mode, clamp, problem):
    ctx = _ctx(cp, _problem(problem), dtype)
    fused, generic = _pso(True, mode, clamp), _pso(False, mode, clamp)
    s = generic.init(ctx)
    sf = dict(s)
    corrected = 0
    for g in range(35):  # past max_iterations = 30: schedules clamped at their ends
        ref = generic.step(ctx, s)
        one = fused.step(ctx, s)  # lockstep: the same input state
        _assert_same_state(one, ref, f"step {g}")
        # a coordinate was corrected (eqs. 4-5) where x_new != x_old + vel_new
        corrected += int(cp.count_nonzero(ref["x"] != s["x"] + ref["vel"]))
        s = ref
        sf = fused.step(ctx, sf)  # independent fused trajectory
    _assert_same_state(sf, s, "trajectory")
    assert corrected > 0
    lo, hi = ctx.lower, ctx.upper
    assert bool(cp.all((s["x"] >= lo) & (s["x"] <= hi)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_honours_the_rng_device_counter(dtype):
    """CounterRNG and generation_value add ctr[0] on CuPy (graph replay); so do the kernels."""
    ctx = _ctx(cp, make_problem("welded_beam"), dtype)
    fused, generic = _pso(True), _pso(False)
    s = generic.run(ctx, generic.init(ctx), 4)
    ctx.rng.ctr[...] = 6
    try:
        a, b = fused.step(ctx, s), generic.step(ctx, s)
    finally:
        ctx.rng.ctr[...] = 0
    _assert_same_state(a, b)
    c = fused.step(ctx, {**s, "generation": s["generation"] + 6})
    for k in ("x", "vel", "pbest", "gbest"):
        assert _same_bits(a[k], c[k]), k  # generation g + ctr 6 == generation g + 6


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_fused_many_islands_large_swarm_and_dim(dtype, mode):
    """N and D above one block of the bests kernel (256 threads), 5 islands."""
    ctx = _ctx(cp, _problem("sphere_big"), dtype, streams=(4, 0, 9, 2, 7))
    fused, generic = _pso(True, mode, n=300), _pso(False, mode, n=300)
    s = generic.init(ctx)
    for g in range(4):
        ref = generic.step(ctx, s)
        _assert_same_state(fused.step(ctx, s), ref, f"step {g}")
        s = ref


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_nan_objective_bit_identical(dtype):
    ctx = _ctx(cp, _problem("nan_sphere"), dtype)
    fused, generic = _pso(True, n=20), _pso(False, n=20)
    s = generic.init(ctx)
    sf = dict(s)
    for g in range(15):
        s, sf = generic.step(ctx, s), fused.step(ctx, sf)
        _assert_same_state(sf, s, f"step {g}")
    assert int(s["nan_evals"]) > 0


def test_fused_path_only_where_supported():
    ctx = _ctx(cp, make_problem("sphere", dim=4), np.float64)
    s = PSO(n_particles=5).init(ctx)
    assert PSO(n_particles=5)._fused_ok(ctx, s)
    assert not PSO(n_particles=5, fused=False)._fused_ok(ctx, s)
    nctx = _ctx(np, make_problem("sphere", dim=4), np.float64)
    assert not PSO(n_particles=5)._fused_ok(nctx, PSO(n_particles=5).init(nctx))
    with pytest.raises(ValueError, match="algorithm.fused"):
        PSO(fused="yes")
    with pytest.raises(ValueError, match="cor_mode"):
        pso_cuda.fused_move(
            ctx, s["x"], s["vel"], s["pbest"], s["gbest"], 0, cp.ones((), np.float64), None, 2.0, 2.0, 0.2, "clip"
        )


# ---------------------------------------------------------------------------------------------
# fused step vs NumPy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("clamp", [True, False])
def test_fused_step_matches_numpy(dtype, mode, clamp):
    prob = make_problem("speed_reducer")
    nctx, cctx = _ctx(np, prob, dtype), _ctx(cp, prob, dtype)
    pso = _pso(True, mode, clamp)
    sn = pso.init(nctx)
    for g in range(8):
        sc = _to_cupy(sn)  # the same state on both sides
        nn, cc = pso.step(nctx, sn), pso.step(cctx, sc)
        for k in ("x", "vel"):
            a, b = _host(cc[k]), nn[k]
            exact = dtype == np.float64 and (not clamp or g == 0)  # vmax computed alike (k = 1: t = 0)
            if exact:
                assert _same_bits(a, b), (g, k)
            elif dtype == np.float64:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * float(prob.upper.max()))
            else:
                np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * float(prob.upper.max()))
        np.testing.assert_allclose(_host(cc["gbest_f"]), nn["gbest_f"], rtol=1e-4 if dtype == np.float32 else 1e-10)
        sn = nn


# ---------------------------------------------------------------------------------------------
# CUDA-graph replay
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_graph_replay_of_fused_step_equals_plain_loops(dtype, mode):
    ctx = _ctx(cp, make_problem("welded_beam"), dtype, streams=(0, 1, 2, 3))
    fused, generic = _pso(True, mode, n=16), _pso(False, mode, n=16)
    s0 = fused.init(ctx)
    plain = fused.run(ctx, s0, 25)
    gen = generic.run(ctx, s0, 25)
    stepper = GraphStepper.for_algorithm(fused, ctx, s0)
    stepper.run(10)
    stepper.run(15)
    replayed = stepper.close()
    _assert_same_state(replayed, plain, "graph vs plain fused")
    _assert_same_state(plain, gen, "plain fused vs generic")
    assert replayed["generation"] == 25 and replayed["evals"] == 16 * 26


# ---------------------------------------------------------------------------------------------
# no host synchronisation
# ---------------------------------------------------------------------------------------------
_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
}
"""


def test_fused_step_does_not_synchronise():
    ctx = _ctx(cp, make_problem("sphere", dim=500), np.float32, streams=(0,))
    pso = PSO(n_particles=100)
    s = pso.run(ctx, pso.init(ctx), 3)  # warm-up: compilation, memory pool
    cp.cuda.Device().synchronize()
    spin = cp.RawKernel(_SPIN, "spin")
    spin((1,), (1,), (np.int64(1_000_000_000),))  # 1 s of device work queued ahead
    t0 = time.perf_counter()
    s = pso.run(ctx, s, 20)
    host = time.perf_counter() - t0
    busy = not cp.cuda.get_current_stream().done
    cp.cuda.Device().synchronize()
    assert busy and host < 0.8, f"host waited {host:.3f} s for the device"
    assert s["generation"] == 23
