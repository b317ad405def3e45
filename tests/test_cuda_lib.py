"""The CUDA library (issue 18 section 1): one place per concept, assembled by
:func:`isles.algorithms.core.cuda_lib.source`; every family's assembled kernel source compiles for
the host emulation (and, where ``nvcc`` is on ``PATH``, for the device); DE's trial coordinates,
now built with the library's bound handling, equal the NumPy path's bit for bit."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from isles.algorithms.core import cuda_lib
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.problems.benchmarks import Rosenbrock, Sphere
from isles.problems.binary import Knapsack, OneMax
from isles.problems.constraints import Evaluator
from isles.problems.cuda_check import compile_c, compiler

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "algorithms" / "core" / "cuda"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from user_problems import FusedPressureVessel  # noqa: E402


def _ctx(prob, dtype=np.float64, handling="feasibility", seed=5, streams=(0, 2)):
    return Context(np, dtype, Evaluator(prob, handling), CounterRNG(np, seed, list(streams)))


# ---- the assembler -------------------------------------------------------------------------------


def test_source_inlines_each_file_once_and_keeps_literal_text_in_order():
    src = cuda_lib.source("#define IS_F32 0\n", "math.cuh", "// mine\n", "bounds.cuh")
    assert src.count("ISLES_DEV u64 isles_mix64(") == 1  # rng.cuh through math -> arith -> rng
    assert src.count("ISLES_DEV T isles_bound(") == 1
    assert src.index("#define IS_F32 0") < src.index("isles_mix64") < src.index("// mine") < src.index("isles_bound")
    assert '#include "' not in src.replace('(#include "', "")  # every include resolved


def test_source_refuses_unknown_files():
    with pytest.raises(FileNotFoundError, match="no file 'nope.cuh'"):
        cuda_lib.source("nope.cuh")
    with pytest.raises(FileNotFoundError, match="no file 'nope.cuh'"):
        cuda_lib.source('#include "nope.cuh"\n')


def test_every_header_has_an_include_guard():
    """Texts assembled separately (e.g. cuda_prelude's HASH + ARITHMETIC + MATH) may be concatenated."""
    for name in cuda_lib.names():
        if name.endswith(".cuh"):
            text = cuda_lib.read(name)
            guard = re.search(r"#ifndef (ISLES_\w+_CUH)\n#define \1\n", text)
            assert guard, name


def test_draw_ids_come_from_python():
    from isles.algorithms.de import crossover, de  # noqa: PLC0415
    from isles.algorithms.de import cuda_source as de_source  # noqa: PLC0415
    from isles.algorithms.ep import cuda_source as ep_source  # noqa: PLC0415
    from isles.algorithms.ep import fep
    from isles.algorithms.ga import cuda_source as ga_source  # noqa: PLC0415
    from isles.algorithms.ga import draws
    from isles.algorithms.pso import cuda as pso_cuda  # noqa: PLC0415
    from isles.algorithms.pso import pso

    src = de_source.kernel_source(np.float64, 4, 8, Sphere(4).cuda_objective, "bin", "reinit")
    for name, mod in (("DRAW_INDEX", de), ("DRAW_BOUND", de), ("DRAW_START", crossover), ("DRAW_CROSS", crossover)):
        assert f"#define {name} {getattr(mod, name)}ull\n" in src
    assert f"#define DRAW_MUTATE {draws.DRAW_MUTATE}ull\n" in ga_source.DRAWS
    assert f"#define DRAW_TIE {fep.DRAW_TIE}ull\n" in ep_source.DRAWS
    assert f"#define DRAW_COR {pso.DRAW_COR}ull\n" in pso_cuda.kernel_source(np.float32)
    with pytest.raises(ValueError, match="draw id"):
        cuda_lib.draw_ids(DRAW_X=-1)


def test_one_concept_one_place():
    """No kernel file or Python module writes its own copy of a library concept: draw ids,
    Deb's comparison, the NaN rule, the counter kernels, the accumulator shuffles, the bound
    handling, a module cache of compiled CUDA."""
    owners = {
        r"#define DRAW_\w+ \d": set(),  # draw ids: Python only
        r"\(va < vb\) \|\| \(\(va == vb\)|\(\(va\) < \(vb\)\)": {"deb.cuh"},
        r"\*f != \*f|\bf != f\)": {"fitness.cuh"},  # NaN rule
        r"_i64\(long long\* p": {"counter.cu"},
        r"__shfl_xor_sync\([^,]+, acc": {"reduce.cuh"},
        r"y = t_fmod\(y, w2\)": {"bounds.cuh"},  # reflection
        r"RawModule\(": {"plan.py"},
    }
    files = [p for p in LIB.iterdir() if p.suffix in (".cu", ".cuh")]
    files += [p for p in (ROOT / "algorithms").rglob("*.py")] + [p for p in (ROOT / "problems").rglob("*.py")]
    for pattern, allowed in owners.items():
        found = {p.name for p in files if re.search(pattern, p.read_text(encoding="utf-8"))}
        assert found == allowed, (pattern, found)


# ---- every family's assembled sources compile for the host emulation ---------------------------


def _host(src: str, cxx: bool = False):
    return compile_c("#define ISLES_HOST_EMU 1\n" + src, ("-x", "c++") if cxx else ("-std=gnu11",))


def _family_sources():
    """``(name, source, c++)`` of every family's kernels in a few configurations."""
    from isles.algorithms.coevolution import cuda as cde_cuda  # noqa: PLC0415
    from isles.algorithms.de import cuda_source as de_source  # noqa: PLC0415
    from isles.algorithms.ep import cuda_source as ep_source  # noqa: PLC0415
    from isles.algorithms.ep.fep import FEP  # noqa: PLC0415
    from isles.algorithms.ga import cuda_source as ga_source  # noqa: PLC0415
    from isles.algorithms.ga.ga import GA  # noqa: PLC0415
    from isles.algorithms.pso import cuda as pso_cuda  # noqa: PLC0415
    from isles.algorithms.pso import epso_cuda  # noqa: PLC0415
    from isles.problems.cec2006 import G07  # noqa: PLC0415
    from isles.problems.minmax import AugmentedLagrangian, SaddleP1  # noqa: PLC0415

    out = []
    vessel = FusedPressureVessel()
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        b = "reinit" if dt == np.float32 else "clip"
        out.append((f"de {t} {b}", de_source.kernel_source(dt, 40, 12, Rosenbrock(40).cuda_objective, "nec", b), True))
        out.append((f"de variation {t} {b}", de_source.variation_source(dt, 40, 12, "bin", b), True))
        out.append(
            (
                f"de penalty {t}",
                de_source.kernel_source(dt, vessel.dim, 12, vessel.cuda_objective, "bin", "reflect", 1e6),
                True,
            )
        )
        for prob, kw, h in (
            (OneMax(77), {}, "feasibility"),
            (Knapsack(40), {}, "penalty"),
            (Sphere(3, -5.0, 3.0), dict(encoding="gray", bits_per_variable=20), "feasibility"),
            (Sphere(2, -1.0, 1.0), dict(encoding="seed002"), "feasibility"),
        ):
            out.append(
                (f"ga {prob.name} {t} {h}", ga_source.kernel_source(GA(pop_size=20, **kw), _ctx(prob, dt, h))[0], False)
            )
        for m in ("cauchy", "gaussian", "improved"):
            out.append(
                (
                    f"fep {m} {t}",
                    ep_source.kernel_source(FEP(pop_size=10, q=3, mutation=m), _ctx(Sphere(5), dt))[0],
                    False,
                )
            )
        out.append(
            (f"fep penalty {t}", ep_source.kernel_source(FEP(pop_size=10, q=3), _ctx(vessel, dt, "penalty"))[0], False)
        )
        out.append((f"pso {t}", pso_cuda.kernel_source(dt), False))
        out.append((f"epso {t}", epso_cuda.kernel_source(dt), False))
        for prob in (SaddleP1(7), AugmentedLagrangian(G07())):
            out.append((f"cde pairs {prob.name} {t}", cde_cuda.kernel_source(prob, dt), False))
    return out


def test_every_family_source_compiles_for_the_host_emulation():
    if compiler() is None:
        pytest.skip("no C compiler for the host emulation")
    srcs = _family_sources()
    assert {s[0].split()[0] for s in srcs} == {"de", "ga", "fep", "pso", "epso", "cde"}
    for name, src, cxx in srcs:
        try:
            _host(src, cxx)
        except RuntimeError as exc:  # pragma: no cover - the failure message names the source
            pytest.fail(f"{name}: {exc}")


@pytest.mark.slow  # nvcc, about a second per source
def test_every_family_source_compiles_for_the_device():
    """Where ``nvcc`` is on ``PATH`` (no GPU needed): the device side of every assembled source
    (the ``#ifndef ISLES_HOST_EMU`` kernels) compiles to PTX."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    srcs = [(n, s) for n, s, _ in _family_sources()]
    srcs += [
        ("counter", cuda_lib.source("counter.cu")),
        ("track f32", cuda_lib.source("#define IS_F32 1\n", "track.cu")),
    ]
    for name, src in srcs:
        res = subprocess.run(
            [nvcc, "-arch=sm_80", "-ptx", "-x", "cu", "-", "-o", "/dev/null"],
            input=src,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, f"{name}:\n{res.stderr[-3000:]}"


# ---- DE's trial coordinates (library bound handling) equal the NumPy path ----------------------

_DE_HARNESS = r"""
extern "C" void de_trial_host(const T* X, T* U, const u64* keys, const T* lower, const T* upper, long long g,
                              int total, T Fw, T CRt, double log_cr, int cr_case) {
    for (int gind = 0; gind < total; ++gind) {
        const int isl = gind / NPOP, i = gind - isl * NPOP;
        const Decisions d = decide(keys[isl], g, i, log_cr, cr_case);
        const isz base = (isz)isl * NPOP * DIM, row = (isz)gind * DIM;
        for (int j = 0; j < DIM; ++j)
            U[row + j] = trial_coord(X, base, d, keys[isl], i, j, X[row + j], Fw, CRt, lower, upper);
    }
}
"""


@pytest.mark.parametrize("bound", ["clip", "reflect", "reinit"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_de_trial_coordinates_equal_numpy(bound, dtype):
    """de.cu's decide + trial_coord (the de_variation kernel's loop, run on the host) build the
    trial population of :meth:`isles.algorithms.de.de.DE.trial` bit for bit, out-of-box
    coordinates included (a wide F pushes many mutants out of the box)."""
    if compiler() is None:
        pytest.skip("no C compiler for the host emulation")
    from isles.algorithms.de import cuda_source as de_source  # noqa: PLC0415
    from isles.algorithms.de.de import DE  # noqa: PLC0415

    prob = Sphere(9, -2.0, 3.0)
    de = DE(pop_size=11, F=1.9, CR=0.6, crossover="bin", bound_handling=bound)
    ctx = _ctx(prob, dtype)
    state = de.init(ctx)
    lib = _host(de_source.variation_source(dtype, prob.dim, de.params.pop_size, "bin", bound) + _DE_HARNESS, cxx=True)
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    T = ctypes.c_float if np.dtype(dtype) == np.float32 else ctypes.c_double
    lower = np.ascontiguousarray(np.broadcast_to(prob.lower, (prob.dim,)), dtype=dtype)
    upper = np.ascontiguousarray(np.broadcast_to(prob.upper, (prob.dim,)), dtype=dtype)
    for g in range(3):
        X = np.ascontiguousarray(state["X"], dtype=dtype)
        state = dict(state, generation=g)
        want = de.trial(ctx, state)
        got = np.empty_like(X)
        cr, log_cr, case = de_source._cr_args(de.params, dtype)
        lib.de_trial_host(
            ptr(X),
            ptr(got),
            ptr(ctx.rng.keys),
            ptr(lower),
            ptr(upper),
            ctypes.c_longlong(g),
            ctypes.c_int(X.shape[0] * X.shape[1]),
            T(de.params.F),
            T(cr),
            ctypes.c_double(log_cr),
            ctypes.c_int(int(case)),
        )
        assert np.array_equal(got, want), (bound, g)
        state = de.step(ctx, state)
