"""GPU tests of DE on CuPy: the generic path, and the fused CUDA path (algorithms/de/cuda.py).

Marked ``gpu`` (deselected by default; run ``pytest -m gpu tests/test_de_gpu.py``) and skipped
where CuPy or a CUDA device is missing. Checks: the CPU suite's properties on CuPy; the generic
CuPy path draws and computes bit-identically to NumPy; the fused kernel builds bit-identical
trial populations (seed 004 Algorithm 2 with Algorithms 4, 7 and 10 / eq. 9), agrees with the
generic selection up to objective rounding, converges like it, replays CUDA graphs exactly like
single steps, keeps the population in the box, and neither path synchronises with the host.
"""

from __future__ import annotations

import itertools
import time
import warnings

import numpy as np
import pytest

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.de.crossover import binomial_mask, crossover_lengths, crossover_mask  # noqa: E402
from isles.algorithms.de.de import DE, STRATEGIES, sample_indices  # noqa: E402
from isles.problems import make_problem  # noqa: E402
from isles.problems.base import ScalableProblem  # noqa: E402
from isles.problems.benchmarks import Ackley  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

pytestmark = pytest.mark.gpu

CROSSOVERS = ("bin", "exp", "nec")
BOUNDS = ("clip", "reflect", "reinit")


def _ctx(xp, prob, dtype=np.float64, streams=(0, 1, 2), seed=5):
    return Context(xp, dtype, Evaluator(prob), CounterRNG(xp, seed, list(streams)))


def _to_cupy(state):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in state.items()}


def _same_bits(a, b):
    a, b = cp.asnumpy(a), cp.asnumpy(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


class _WrongAckley(Ackley):
    """Ackley's cuda_objective (b = 0.2) but seed 004's misprinted b = 0.02 in ``objective``: the
    self-check must catch the disagreement and refuse to fuse."""

    def objective(self, X):
        xp = cp.get_array_module(X)
        return -20 * xp.exp(-0.02 * xp.sqrt((X * X).mean(-1))) - xp.exp(xp.cos(2 * np.pi * X).mean(-1)) + 20 + np.e


# ---------------------------------------------------------------------------------------------
# the generic path on CuPy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy,crossover", list(itertools.product(STRATEGIES, CROSSOVERS)))
def test_generic_cupy_improves_sphere(strategy, crossover):
    ctx = _ctx(cp, make_problem("sphere", dim=10), streams=(0, 1))
    de = DE(pop_size=30, F=0.7, CR=0.9, strategy=strategy, crossover=crossover, fused=False)
    s = de.init(ctx)
    f0 = cp.asnumpy(s["f"].min(axis=1))
    for _ in range(150):
        prev = s["f"]
        s = de.step(ctx, s)
        assert bool(cp.all(s["f"] <= prev))
    assert np.all(cp.asnumpy(s["f"].min(axis=1)) < 0.2 * f0)


@pytest.mark.parametrize("strategy,crossover", list(itertools.product(STRATEGIES, CROSSOVERS)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_generic_cupy_trial_is_bit_identical_to_numpy(strategy, crossover, dtype):
    prob = make_problem("sphere", dim=9, lower=-1.0, upper=1.0)
    for bounds in BOUNDS if strategy == "rand/1" else ("reflect",):
        de = DE(pop_size=12, F=1.2, CR=0.6, strategy=strategy, crossover=crossover, bound_handling=bounds, fused=False)
        cn, cc = _ctx(np, prob, dtype), _ctx(cp, prob, dtype)
        s = de.init(cn)
        s["generation"] = 77
        Un = de.trial(cn, s)
        Uc = de.trial(cc, _to_cupy(s))
        assert _same_bits(Un, Uc), (strategy, crossover, bounds)


def test_cupy_draws_match_numpy_and_indices_are_distinct():
    rn, rc = CounterRNG(np, 3, [0, 4]), CounterRNG(cp, 3, [0, 4])
    for g in range(40):
        for n, k in ((4, 3), (6, 5), (50, 3)):
            r = sample_indices(rc, g, n, k)
            assert _same_bits(r, sample_indices(rn, g, n, k))
            i = cp.broadcast_to(cp.arange(n)[None, :, None], (2, n, 1))
            allidx = cp.sort(cp.concatenate([i, r], axis=-1), axis=-1)
            assert bool(cp.all(cp.diff(allidx, axis=-1) > 0))
    for cr in (0.0, 0.3, 1.0):
        m = binomial_mask(rc, 5, 300, 17, cr, np.float32)
        assert _same_bits(m, binomial_mask(rn, 5, 300, 17, cr, np.float32))
        assert bool(cp.all(m.sum(-1) >= 1))
        for kind in ("exp", "nec"):
            assert _same_bits(crossover_lengths(kind, rc, 5, 300, 17, cr), crossover_lengths(kind, rn, 5, 300, 17, cr))
            assert _same_bits(crossover_mask(kind, rc, 5, 300, 17, cr), crossover_mask(kind, rn, 5, 300, 17, cr))
    assert bool(cp.all(crossover_lengths("nec", rc, 0, 100, 17, 0.0) == 1))
    assert bool(cp.all(crossover_lengths("nec", rc, 0, 100, 17, 1.0) == 17))


def test_generic_cupy_nan_is_worst():
    class NaNHalf(ScalableProblem):
        name = "test_nan_half"

        def objective(self, X):
            return cp.where(X[..., 0] > 0, cp.nan, (X * X).sum(-1))

    ctx = _ctx(cp, NaNHalf(5, -10.0, 10.0), streams=(0,))
    de = DE(pop_size=16, F=0.8)
    s = de.init(ctx)
    for _ in range(30):
        prev = s
        s = de.step(ctx, s)
        finite = cp.isfinite(prev["f"])
        assert bool(cp.all(cp.isfinite(s["f"])[finite]))
        assert not bool(cp.any(cp.isnan(s["f"])))
    assert int(s["nan_evals"]) > 0


# ---------------------------------------------------------------------------------------------
# the fused path
# ---------------------------------------------------------------------------------------------
FUSED_CASES = [
    # problem, D, N, I, dtype, crossover, bounds, CR
    ("ackley", 1000, 500, 1, np.float32, "bin", "reflect", 0.2),
    ("ackley", 100, 20, 3, np.float64, "nec", "reinit", 0.9),
    ("griewank", 500, 30, 2, np.float32, "nec", "clip", 0.45),
    ("rosenbrock", 50, 100, 3, np.float32, "bin", "reflect", 0.95),
    ("rosenbrock", 300, 10, 2, np.float64, "nec", "reflect", 0.2),
    ("rastrigin", 30, 12, 2, np.float32, "nec", "reinit", 0.5),
    ("sphere", 7, 4, 3, np.float64, "bin", "clip", 0.0),
    ("schwefel_2_26", 300, 16, 1, np.float64, "bin", "reflect", 1.0),
    ("ackley", 2000, 8, 1, np.float32, "bin", "reflect", 0.3),
    ("sphere", 5000, 6, 1, np.float32, "nec", "reflect", 0.7),
    ("rastrigin", 64, 10, 2, np.float32, "nec", "clip", 0.0),
    ("griewank", 33, 9, 2, np.float64, "nec", "reflect", 1.0),
]


def _fused_setup(problem, D, N, I, dtype, crossover, bounds, F=0.9, CR=0.5):
    prob = make_problem(problem, dim=D)
    ctx = _ctx(cp, prob, dtype, streams=tuple(range(I)))
    kw = dict(pop_size=N, F=F, CR=CR, crossover=crossover, bound_handling=bounds)
    fused, generic = DE(**kw), DE(**kw, fused=False)
    s = fused.init(ctx)
    plan = fused.fused_plan(ctx)
    assert plan is not None, "fused path not taken"
    return prob, ctx, fused, generic, plan, s


@pytest.mark.parametrize(
    "case", FUSED_CASES, ids=lambda c: f"{c[0]}-D{c[1]}-N{c[2]}-I{c[3]}-{np.dtype(c[4]).name}-{c[5]}-{c[6]}-CR{c[7]}"
)
def test_fused_trial_is_bit_identical_and_selection_agrees(case):
    prob, ctx, fused, generic, plan, s = _fused_setup(*case[:7], CR=case[7])
    dtype = case[4]
    for g in (0, 31, 123456):
        s["generation"] = g
        Uf, fUf = plan.trial(s)
        Ug = generic.trial(ctx, s)
        assert _same_bits(Uf, Ug), f"generation {g}: fused trial differs from the generic one"
        fref = prob.objective(Ug).astype(np.float64)
        rtol = 1e-4 if dtype == np.float32 else 1e-10
        err = cp.abs(fUf.astype(np.float64) - fref) / (1 + cp.abs(fref))
        assert float(err.max()) < rtol
    # one step on both paths: the same population wherever the selection decisions agree
    sf, sg = fused.step(ctx, s), generic.step(ctx, s)
    same_row = cp.all(sf["X"] == sg["X"], axis=-1)
    assert float(same_row.mean()) >= 0.99
    assert sf["generation"] == sg["generation"] == s["generation"] + 1
    assert sf["evals"] == sg["evals"]
    np.testing.assert_allclose(
        cp.asnumpy(sf["f"]), cp.asnumpy(sg["f"]), rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-5
    )
    assert bool(cp.all(sf["X"] >= ctx.lower)) and bool(cp.all(sf["X"] <= ctx.upper))


def test_fused_honours_the_rng_device_counter():
    """CounterRNG draws generation + ctr[0] on CuPy (CUDA-graph replay); so does the kernel."""
    _, ctx, fused, generic, plan, s = _fused_setup("rastrigin", 40, 12, 2, np.float32, "nec", "reinit", CR=0.6)
    s["generation"] = 10
    ctx.rng.ctr[...] = 7
    try:
        Uf, _ = plan.trial(s)
        Ug = generic.trial(ctx, s)
    finally:
        ctx.rng.ctr[...] = 0
    assert _same_bits(Uf, Ug)
    s17 = {**s, "generation": 17}
    assert _same_bits(Uf, plan.trial(s17)[0])  # generation 10 + ctr 7 == generation 17


def test_fused_graph_run_equals_step_loop():
    _, ctx, fused, _, plan, s0 = _fused_setup("rosenbrock", 50, 100, 4, np.float32, "bin", "reflect", F=0.65, CR=0.95)
    n = 2 * plan.graph_generations + 5
    a = fused.run(ctx, s0, n)
    b = s0
    for _ in range(n):
        b = fused.step(ctx, b)
    for k in ("X", "f", "v"):
        assert _same_bits(a[k], b[k]), k
    assert a["generation"] == b["generation"] == n
    assert a["evals"] == b["evals"] == 100 * (n + 1)
    assert int(a["nan_evals"]) == int(b["nan_evals"])
    c = fused.run(ctx, fused.run(ctx, s0, 70), n - 70)  # graph reuse from another generation
    assert _same_bits(c["X"], a["X"])
    assert bool(cp.all(s0["X"] == fused.init(ctx)["X"]))  # inputs untouched


@pytest.mark.parametrize("crossover", ["bin", "nec"])
def test_fused_converges_like_generic(crossover):
    prob = make_problem("rastrigin", dim=30)
    ctx = _ctx(cp, prob, np.float64, streams=(0, 1, 2, 3))
    kw = dict(pop_size=60, F=0.5, CR=0.9 if crossover == "bin" else 0.95, crossover=crossover)
    fused, generic = DE(**kw), DE(**kw, fused=False)
    s = fused.init(ctx)
    f0 = cp.asnumpy(s["f"].min(1))
    bf = cp.asnumpy(fused.run(ctx, s, 400)["f"].min(1))
    bg = cp.asnumpy(generic.run(ctx, s, 400)["f"].min(1))
    assert fused.fused_plan(ctx) is not None and generic.fused_plan(ctx) is None
    assert np.all(bf < 0.6 * f0) and np.all(bg < 0.6 * f0)  # NumPy twin: 0.43-0.52 (bin), 0.23-0.30 (nec)
    ratio = np.median(bf) / np.median(bg)
    assert 0.5 < ratio < 2.0, (bf, bg)


@pytest.mark.parametrize("bounds", BOUNDS)
def test_fused_keeps_population_in_the_box(bounds):
    _, ctx, fused, _, _, s = _fused_setup("sphere", 40, 20, 2, np.float32, "nec", bounds, F=1.8, CR=0.9)
    s = fused.run(ctx, s, 200)
    assert bool(cp.all(s["X"] >= ctx.lower)) and bool(cp.all(s["X"] <= ctx.upper))
    assert bool(cp.all(cp.isfinite(s["f"])))


def test_fused_path_only_where_supported():
    ctx = _ctx(cp, make_problem("ackley", dim=20), np.float32)
    assert DE(pop_size=10).fused_plan(ctx) is not None
    assert DE(pop_size=10, crossover="nec").fused_plan(ctx) is not None
    assert DE(pop_size=10, crossover="exp").fused_plan(ctx) is None
    assert DE(pop_size=10, strategy="best/1").fused_plan(ctx) is None
    assert DE(pop_size=10, fused=False).fused_plan(ctx) is None
    ctx_c = _ctx(cp, make_problem("spring"), np.float64)
    assert DE(pop_size=10).fused_plan(ctx_c) is None
    ctx_w = _ctx(cp, _WrongAckley(20), np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert DE(pop_size=10).fused_plan(ctx_w) is None
    assert any("fused DE disabled" in str(x.message) for x in w)


class _SphereSumAtLeastOne(ScalableProblem):
    """``sum x^2`` subject to ``g = 1 - sum x <= 0`` with a fused source (OBJ_HAS_V 1): f* = 1/D."""

    name = "test_sphere_sum_ge_1"
    n_constraints = 1
    default_bounds = (-5.0, 5.0)
    cuda_objective = r"""#define OBJ_NACC 2
#define OBJ_HAS_V 1
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* other) { acc[0] += other[0]; acc[1] += other[1]; }
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) { (void)x_next; (void)j; acc[0] += x * x; acc[1] += x; }
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0]; }
ISLES_DEV T obj_violation(const T* acc, int n) { (void)n; const T g = (T)1 - acc[1]; return g > (T)0 ? g : (T)0; }
"""

    def objective(self, X):
        return (X * X).sum(axis=-1)

    def constraints(self, X):
        return (1.0 - X.sum(axis=-1))[..., None]


@pytest.mark.parametrize("handling", ["feasibility", "penalty"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_constrained_problem_uses_obj_violation(handling, dtype):
    """OBJ_HAS_V: the trial's v is obj_violation, selection is Deb's rules (or the penalty)."""
    prob = _SphereSumAtLeastOne(dim=40)
    ctx = Context(cp, dtype, Evaluator(prob, handling, 100.0), CounterRNG(cp, 5, [0, 1]))
    kw = dict(pop_size=30, F=0.7, CR=0.9)
    fused, generic = DE(**kw), DE(**kw, fused=False)
    s = fused.init(ctx)
    plan = fused.fused_plan(ctx)
    assert plan is not None
    assert ("#define PENALTY" in plan.source) == (handling == "penalty")
    for g in (0, 9):
        s["generation"] = g
        Uf, _ = plan.trial(s)
        assert _same_bits(Uf, generic.trial(ctx, s))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    sf, sg = fused.step(ctx, s), generic.step(ctx, s)
    assert float(cp.all(sf["X"] == sg["X"], axis=-1).mean()) >= 0.99
    for k in ("f", "v"):
        np.testing.assert_allclose(cp.asnumpy(sf[k]), cp.asnumpy(sg[k]), rtol=tol, atol=tol)
    bf = fused.run(ctx, s, 300)
    bg = generic.run(ctx, s, 300)
    assert float(bf["v"].min()) == 0.0 and float(bg["v"].min()) == 0.0
    ratio = float(cp.median(bf["f"].min(axis=1)) / cp.median(bg["f"].min(axis=1)))
    assert 0.5 < ratio < 2.0 and float(bf["f"].min()) < 0.2 * float(s["f"].min())


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


@pytest.mark.parametrize("fused", [True, False])
def test_step_and_run_do_not_synchronise(fused):
    ctx = _ctx(cp, make_problem("ackley", dim=200), np.float32, streams=(0, 1))
    de = DE(pop_size=40, crossover="nec", fused=fused)
    s = de.init(ctx)
    s = de.run(ctx, s, 70)  # warm-up: plan, compilation, graph capture, memory pool
    s = de.step(ctx, s)
    cp.cuda.Device().synchronize()
    spin = cp.RawKernel(_SPIN, "spin")
    spin((1,), (1,), (np.int64(1_500_000_000),))  # 1.5 s of device work queued ahead
    t0 = time.perf_counter()
    s = de.step(ctx, s)
    s = de.run(ctx, s, 70 if fused else 5)
    host = time.perf_counter() - t0
    busy = not cp.cuda.get_current_stream().done
    cp.cuda.Device().synchronize()
    assert busy and host < 1.0, f"host waited {host:.3f} s for the device"
    assert s["generation"] == 71 + 1 + (70 if fused else 5)
