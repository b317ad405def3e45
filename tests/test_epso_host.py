"""The fused EPSO generation's C code run on the host (``-DISLES_HOST_EMU``;
algorithms/pso/epso_cuda.py, algorithms/core/cuda/epso.cu and pso.cu, the twin
algorithms/pso/cuda_host.py): the kernels' draws, mutation, velocity, clamp, boundary correction,
selection and best updates against the NumPy generic step, bit for bit.

The only difference left between the two is the math library of the normal draws (NumPy's own
``log1p``/``cos`` against the C library's): :func:`_patched` makes the NumPy step draw its normals
with the kernel's ``epso_normal`` (checked against ``CounterRNG.normal`` to the dtype's rounding
by :func:`test_kernel_normal_is_counter_rng_normal`), so that every other operation is compared
bit for bit. On the GPU the kernel and CuPy call the same CUDA library functions
(tests/test_epso_gpu.py)."""

from __future__ import annotations

import ctypes
import re
import subprocess
import types

import numpy as np
import pytest
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.ga.cuda_host import compile_host, host_compiler
from isles.algorithms.pso import cuda_host
from isles.algorithms.pso.draws import DRAW_NC1, DRAW_NG, DRAW_NW
from isles.algorithms.pso.epso import EPSO, select_candidates
from isles.algorithms.pso.pso import update_bests
from isles.problems.base import ScalableProblem
from isles.problems.constraints import Evaluator
from isles.problems.registry import make_problem

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no C compiler for the host emulation")

ARRAYS = ("x", "vel", "pbest", "pbest_f", "pbest_v", "gbest", "gbest_f", "gbest_v", "nan_evals")
DTYPES = (np.float32, np.float64)


class _Plateaus(ScalableProblem):
    """Sphere rounded to steps of 4 on [-10, 10] (many exact ties between candidates), NaN where
    ``x_0 > 7`` (the evaluator's NaN rule: worst, counted)."""

    name = "plateaus"
    default_bounds = (-10.0, 10.0)

    def objective(self, X):
        f = np.floor((X * X).sum(axis=-1) / 4.0)
        return np.where(X[..., 0] > 7.0, np.nan, f)


def _ctx(problem, dtype, streams=(0, 3, 1), seed=11):
    return Context(np, np.dtype(dtype), Evaluator(problem), CounterRNG(np, seed, list(streams)))


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _assert_same_state(a, b, where=""):
    for k in ARRAYS:
        assert _same_bits(a[k], b[k]), f"{where}: {k} differs"
    assert a["generation"] == b["generation"] and a["evals"] == b["evals"], where


def _patched(ctx, host):
    """``ctx`` whose generator draws its normals with the kernel's code (the C library's math)."""
    ctx.rng.normal = host.normal
    return ctx


CONFIGS = [  # (EPSO fields, attractor set)
    (dict(n_replicas=5, c3=0.0), False),  # the slaves
    (dict(n_replicas=5, c3=2.02), True),  # the master swarm with its attractor
    (dict(n_replicas=5, c3=2.02), False),  # the master before an attractor is set (on = 0)
    (dict(n_replicas=0, c3=1.5), True),  # no replicas: plain PSO moves plus the third term
    (dict(n_replicas=2, c3=0.0, vmax_fraction=0.0), False),  # no clamp
    (dict(n_replicas=3, c3=0.0, vmax_fraction=0.3, vmax_final=0.3), False),  # constant clamp
]


def _attract(alg, ctx, s):
    """``s`` with the attractor set to another island's global best (as the master's)."""
    I = s["x"].shape[0]
    j = (np.arange(I) + 1) % I
    return EPSO.set_attractor(s, s["gbest"][j].copy(), s["gbest_f"][j].copy(), s["gbest_v"][j].copy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["overshoot", "range"])
@pytest.mark.parametrize("config", range(len(CONFIGS)))
@pytest.mark.parametrize("problem", ["welded_beam", "plateaus"])
def test_host_kernel_step_equals_numpy_generic_step(dtype, mode, config, problem):
    """Every state array after each of 12 generations (lockstep from the same state, and
    independent trajectories), float32 and float64, both COR modes, c3 on/off with and without
    an attractor, R = 0 and R > 0, clamp scheduled/constant/off, a constrained problem and one with
    ties and NaN objectives; past ``max_iterations`` (schedules at their ends)."""
    fields, attract = CONFIGS[config]
    prob = _Plateaus(dim=5) if problem == "plateaus" else make_problem(problem)
    alg = EPSO(n_particles=9, cor_mode=mode, max_iterations=10, host_kernel=False, **fields)
    ctx = _ctx(prob, dtype)
    host = cuda_host.HostEPSO(alg, ctx)
    _patched(ctx, host)
    s = alg.init(ctx)
    if attract:
        s = _attract(alg, ctx, s)
    t = dict(s)
    corrected = 0
    for g in range(12):
        ref = alg.step(ctx, s)
        _assert_same_state(host.step(s), ref, f"step {g}")
        xc, velc = host.candidates  # a candidate was corrected (eqs. 4-5) where xc != x + velc
        corrected += int(np.count_nonzero(xc != s["x"][:, :, None] + velc))
        s, t = ref, host.step(t)
    _assert_same_state(t, s, "trajectory")
    assert corrected > 0  # the boundary correction ran on some candidates
    if problem == "plateaus":
        assert int(s["nan_evals"]) > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_host_kernel_honours_the_rng_counter(dtype):
    """The draws of generation ``g + ctr`` (CUDA-graph replay), as CounterRNG's."""
    alg = EPSO(n_particles=7, n_replicas=4, c3=2.02, host_kernel=False)
    ctx = _ctx(make_problem("welded_beam"), dtype)
    host = cuda_host.HostEPSO(alg, ctx)
    _patched(ctx, host)
    s = _attract(alg, ctx, alg.run(ctx, alg.init(ctx), 3))
    ctx.rng.ctr[...] = 5
    a, b = alg.step(ctx, s), host.step(s)
    _assert_same_state(b, a)
    ctx.rng.ctr[...] = 0
    assert not _same_bits(host.step(s)["x"], b["x"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_normal_is_counter_rng_normal(dtype):
    """``epso_normal`` is ``CounterRNG.normal`` (same streams, indices and transform): equal to
    the dtype's rounding of the math library (NumPy's ``log1p``/``cos`` may differ from the C
    library's by an ulp), for several draws, generations and a counter."""
    ctx = _ctx(make_problem("sphere", dim=3), dtype)
    host = cuda_host.HostEPSO(EPSO(), ctx)
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for ctr in (0, 7):
        ctx.rng.ctr[...] = ctr
        for g, draw, shape in ((0, DRAW_NW, (40, 5, 1)), (13, DRAW_NC1, (40, 5, 1)), (999, DRAW_NG, (11, 2, 4))):
            a = host.normal(g, draw, shape)
            b = CounterRNG.normal(ctx.rng, g, draw, shape, dtype)
            assert a.dtype == b.dtype == np.dtype(dtype) and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
            assert np.mean(a == b) > 0.5  # mostly the very same numbers


def _select_reference(s, xc, velc, f, v, n_nan):
    """The generic code of EPSO.step after the evaluation (NumPy)."""
    I, N, C, D = xc.shape
    x_new, vel_new, f_new, v_new = select_candidates(np, xc, velc, f.reshape(I, N, C), v.reshape(I, N, C))
    r = update_bests(np, s, x_new, f_new, v_new)
    r.update(x=x_new, vel=vel_new, nan_evals=s["nan_evals"] + n_nan)
    return r


@pytest.mark.parametrize("dtype", DTYPES)
def test_host_selection_and_bests_with_ties_nan_and_infinities(dtype):
    """Deb's choice among the candidates and the best updates (``select_row``, ``bests_rows``,
    ``bests_island``) on keys with exact ties, NaN ``f`` or ``v`` and infinities equal the generic
    ``argbest``/``take_along_axis``/``update_bests`` (first index on ties, NumPy's NaN rules)."""
    rs = np.random.default_rng(4)
    I, N, C, D = 3, 37, 6, 4
    ctx = _ctx(make_problem("sphere", dim=D), dtype)
    alg = EPSO(n_particles=N, n_replicas=C - 1)
    host = cuda_host.HostEPSO(alg, ctx)
    s = alg.init(ctx)
    for trial in range(25):
        xc = rs.normal(size=(I, N, C, D)).astype(dtype)
        velc = rs.normal(size=(I, N, C, D)).astype(dtype)
        f = rs.integers(0, 4, (I, N * C)).astype(dtype)
        v = np.where(rs.random((I, N * C)) < 0.5, 0.0, rs.integers(1, 3, (I, N * C))).astype(dtype)
        for arr, val, p in ((f, np.nan, 0.03), (v, np.nan, 0.01), (f, np.inf, 0.05), (v, np.inf, 0.05)):
            arr[rs.random(arr.shape) < p] = val
        if trial % 5 == 4:  # a whole particle of NaN v, and one of ties at inf
            v[0, :C] = np.nan
            f[1, C : 2 * C], v[1, C : 2 * C] = np.inf, np.inf
        n_nan = np.int64(trial)
        a = _select_reference(s, xc, velc, f, v, n_nan)
        b = host.select_bests(s, xc, velc, f, v, n_nan)
        for k in ARRAYS:
            assert _same_bits(a[k], b[k]), (trial, k)
        # the next trial starts from these bests (NaN and inf personal bests included)
        s = {**s, **{k: b[k] for k in ARRAYS}}


def test_fused_flag_and_numpy_take_the_generic_path():
    """``fused`` defaults to True (the CuPy path), ``fused=False`` and NumPy run the array code;
    the master swarm's EPSO (conf/plugin/master_swarm.yaml's fields) keeps the default."""
    from isles.algorithms.pso.master_plugin import MasterSwarmPlugin  # noqa: PLC0415

    ctx = _ctx(make_problem("sphere", dim=4), np.float64)
    s = EPSO(n_particles=5).init(ctx)
    assert EPSO(n_particles=5).params.fused is True
    assert not EPSO(n_particles=5)._fused_ok(ctx, s)  # NumPy
    assert not EPSO(n_particles=5, fused=False)._fused_ok(ctx, s)
    plugin = MasterSwarmPlugin(n_particles=10, n_replicas=5, c3=2.02, max_iterations=100)
    assert plugin.swarm.epso.params.fused is True and plugin.swarm.epso.params.c3 > 0
    with pytest.raises(ValueError, match="algorithm.fused"):
        EPSO(fused="yes")


# ---------------------------------------------------------------------------------------------
# the launchers: a CuPy stand-in on NumPy whose kernels are the host emulation
# ---------------------------------------------------------------------------------------------
_EMU = {"epso_move": "emu_epso_move_kernel", "pso_bests": "emu_pso_bests"}  # kernel -> its host twin


def _kernel_params(src: str, name: str) -> list[str]:
    """Parameter declarations of kernel ``name`` in CUDA source ``src``, macros expanded (the C
    preprocessor on the device side of the text)."""
    cc = host_compiler()
    out = subprocess.run([cc, "-E", "-P", "-x", "c", "-"], input=src, capture_output=True, text=True, check=True)
    m = re.search(
        r"__global__\s+void\s+(?:__launch_bounds__\s*\(\s*\d+\s*\)\s*)?" + name + r"\s*\(([^)]*)\)", out.stdout
    )
    assert m, f"kernel {name} not found"
    return [" ".join(p.split()) for p in m.group(1).split(",")]


def _ctype(decl: str, arg, dtype):
    """``arg`` as the ctypes value of parameter ``decl``, asserting that its type is the one the
    kernel declares (CuPy's RawKernel passes any argument as given, unchecked)."""
    t = np.dtype(dtype)
    if "*" in decl:
        base = decl.replace("const", "").replace("__restrict__", "").split("*")[0].strip()
        want = {"T": t, "u64": np.dtype(np.uint64), "long long": np.dtype(np.int64)}[base]
        assert isinstance(arg, np.ndarray) and arg.dtype == want and arg.flags.c_contiguous, (decl, type(arg))
        return arg.ctypes.data_as(ctypes.c_void_p)
    base = decl.replace("const", "").strip().rsplit(" ", 1)[0].strip()
    want, ct = {
        "T": (t.type, ctypes.c_float if t == np.float32 else ctypes.c_double),
        "int": (np.int32, ctypes.c_int),
        "long long": (np.int64, ctypes.c_longlong),
        "u64": (np.uint64, ctypes.c_ulonglong),
    }[base]
    assert type(arg) is want, (decl, type(arg))
    return ct(arg.item())


def _fake_function(launched, dtype):
    """Stand-in of :func:`isles.algorithms.core.plan.function`: checks every launch against the
    kernel's parameters and runs its host twin where it has one."""

    def function(cp, src, name, options=()):
        params = _kernel_params(src, name)
        lib = compile_host(src) if name in _EMU else None

        def launch(grid, block, args):
            assert len(args) == len(params), (name, len(args), len(params))
            cargs = [_ctype(d, a, dtype) for d, a in zip(params, args, strict=False)]
            launched.append(name)
            if lib is not None:
                getattr(lib, _EMU[name])(*cargs)

        return launch

    return function


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_fused_launchers_pass_the_kernels_parameters(dtype, config, monkeypatch):
    """``EPSO._fused_step`` through its launchers (``epso_cuda.fused_move``,
    ``pso.cuda.fused_select_bests``) on a CuPy stand-in whose kernels are their host twins: every
    argument has the type the kernel declares, and in float64 (where the kernel's schedules in
    ``T`` equal the NumPy path's host floats) the step equals the NumPy generic step bit for bit;
    in float32 to rounding. The PSO launchers pass their kernels' types too."""
    from isles.algorithms.pso import cuda as pso_cuda  # noqa: PLC0415
    from isles.algorithms.pso import epso_cuda  # noqa: PLC0415
    from isles.algorithms.pso.pso import PSO  # noqa: PLC0415

    launched = []
    monkeypatch.setattr(epso_cuda, "function", _fake_function(launched, dtype))
    monkeypatch.setattr(pso_cuda, "function", _fake_function(launched, dtype))
    fake = types.SimpleNamespace(
        __name__="cupy", ascontiguousarray=np.ascontiguousarray, empty=np.empty, asarray=np.asarray
    )
    fields, attract = CONFIGS[config]
    alg = EPSO(n_particles=9, max_iterations=10, host_kernel=False, **fields)
    prob = make_problem("welded_beam")
    nctx = _ctx(prob, dtype)
    host = cuda_host.HostEPSO(alg, nctx)
    _patched(nctx, host)
    fctx = Context(fake, np.dtype(dtype), Evaluator(prob), CounterRNG(np, 11, [0, 3, 1]))
    fctx.rng.normal = host.normal  # (not drawn by the fused path)
    s = alg.init(nctx)
    if attract:
        s = _attract(alg, nctx, s)
    assert alg._fused_ok(fctx, s)
    for g in range(12):  # past max_iterations
        a, b = alg.step(fctx, s), alg.step(nctx, s)
        assert launched[-2:] == ["epso_move", "pso_bests"]
        if dtype == np.float64:
            _assert_same_state(a, b, f"step {g}")
        else:
            for k in ARRAYS:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-4 * float(np.max(prob.upper)))
        s = b
    pso = PSO(n_particles=6)
    pso.step(fctx, pso.init(nctx))  # checked launches only (pso_schedule, pso_move have no host twin here)
    assert launched[-3:] == ["pso_schedule", "pso_move", "pso_bests"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["overshoot", "range"])
@pytest.mark.parametrize("clamp", [True, False])
def test_pso_move_shares_pso_finish(dtype, mode, clamp):
    """PSO's move (``pso.cu``'s ``move_one``, whose clamp, move and boundary correction are now
    ``pso_finish``, shared with EPSO) equals the NumPy PSO step's ``x`` and ``vel`` bit for bit,
    with the schedules' values as NumPy computes them."""
    from isles.algorithms.pso import cuda as pso_cuda  # noqa: PLC0415
    from isles.algorithms.pso.pso import PSO, inertia_weight, vmax_schedule  # noqa: PLC0415

    ctx = _ctx(make_problem("speed_reducer"), dtype)
    alg = PSO(n_particles=11, cor_mode=mode, vmax_fraction=0.5 if clamp else 0.0, max_iterations=8)
    lib = compile_host(pso_cuda.kernel_source(dtype))
    T = ctypes.c_float if np.dtype(dtype) == np.float32 else ctypes.c_double
    s = alg.init(ctx)
    for g in range(10):
        ref = alg.step(ctx, s)
        k = g + 1
        w, vmax = inertia_weight(k, 8, alg.params.w_max, alg.params.w_min), vmax_schedule(k, 8, 0.5, 1e-6)
        I, N, D = s["x"].shape
        xo, vo = np.empty((I, N, D), dtype), np.empty((I, N, D), dtype)
        arrs = [np.ascontiguousarray(a, dtype=dtype) for a in (s["x"], s["vel"], s["pbest"], s["gbest"])]
        arrs += [np.ascontiguousarray(ctx.lower), np.ascontiguousarray(ctx.upper), ctx.rng.keys]
        lib.emu_move(
            *(a.ctypes.data_as(ctypes.c_void_p) for a in arrs),
            ctypes.c_ulonglong(0),
            ctypes.c_ulonglong(g << 16),
            T(w),
            T(vmax),
            T(alg.params.c1),
            T(alg.params.c2),
            T(alg.params.cor),
            ctypes.c_longlong(N * D),
            ctypes.c_int(D),
            ctypes.c_longlong(I * N * D),
            ctypes.c_int(clamp),
            ctypes.c_int(pso_cuda.COR_MODE_IDS[mode]),
            xo.ctypes.data_as(ctypes.c_void_p),
            vo.ctypes.data_as(ctypes.c_void_p),
        )
        assert _same_bits(xo, ref["x"]) and _same_bits(vo, ref["vel"]), g
        s = ref
