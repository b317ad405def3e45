"""CPU tests of the GA (algorithms/ga/ga.py) and of its fused generation's C code run on the host
(algorithms/ga/cuda_host.py, ``-DISLES_HOST_EMU``).

Seed 002 sections 2.1-2.8 and appendix A: parameter validation (one-line errors), one
generation (elitism, partial renewal), padding bits, reproducibility and island batching, target
tracking, phenotypes, OneMax/trap solved, and the host-compiled kernel code bit-identical to
NumPy; the operators (elitism, tournaments, crossovers, mutations) in ``test_ga_operators.py``. Fast and CI-safe: NumPy (plus the system C compiler for the
host emulation; skipped without one).
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.core.base import Context
from isles.algorithms.core.bitstrings import pack_bits, unpack_bits, valid_mask
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.ga import cuda_host as ga_host
from isles.algorithms.ga import cuda_source as ga_source
from isles.algorithms.ga.draws import DRAW_RENEW
from isles.algorithms.ga.ga import GA, SEED_P_M, GAParams
from isles.algorithms.ga.operators import elite_indices, random_words
from isles.problems.base import Problem
from isles.problems.benchmarks import Rastrigin, Sphere
from isles.problems.binary import Knapsack, OneMax, Trap
from isles.problems.constraints import Evaluator

from tests.helpers import numpy_twin


def _ctx(prob, seed=3, streams=(0, 1), dtype=np.float64, target=None, handling="feasibility"):
    return Context(np, dtype, Evaluator(prob, handling=handling), CounterRNG(np, seed, list(streams)), target=target)


class _NaNOneMax(OneMax):
    """OneMax, but NaN where bit 0 is set (NaN must rank worst and be counted)."""

    name = "nan_onemax"
    cuda_objective = None

    def objective(self, B):
        f = super().objective(B)
        return np.where(B[..., 0] == 1, np.nan, f)


# ---- parameters --------------------------------------------------------------------------------


def test_defaults():
    p = GAParams()
    assert (p.pop_size, p.group_size, p.crossover, p.p_c, p.mutation, p.p_m, p.n_elite, p.renewal) == (
        640,
        2,
        "one_point",
        0.9,
        "per_bit",
        None,
        1,
        0.0,
    )
    assert p.mutation_probability(64) == 1 / 64
    assert GAParams(mutation="seed").mutation_probability(64) == SEED_P_M < 0.05
    assert GAParams(p_m=0.01).mutation_probability(64) == 0.01
    assert GAParams(pop_size=100, renewal=0.29).n_renew == 29


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(pop_size=1), r"^algorithm.pop_size=1: allowed values are integers >= 2$"),
        (dict(pop_size=10, group_size=1), r"^algorithm.group_size=1: allowed values are integers >= 2 and <= 10$"),
        (dict(pop_size=10, group_size=11), r"^algorithm.group_size=11: allowed values are integers >= 2 and <= 10$"),
        (dict(p_m=-0.1), r"^algorithm.p_m=-0.1: allowed values are numbers >= 0 and <= 1$"),
        (dict(p_m=1.5), r"^algorithm.p_m=1.5: allowed values are numbers >= 0 and <= 1$"),
        (dict(p_c=2), r"^algorithm.p_c=2: allowed values are numbers >= 0 and <= 1$"),
        (dict(pop_size=10, n_elite=10), r"^algorithm.n_elite=10: allowed values are integers >= 0 and < 10$"),
        (dict(n_elite=-1), r"^algorithm.n_elite=-1: allowed values are integers >= 0 and < 640$"),
        (dict(renewal=1.0), r"^algorithm.renewal=1.0: allowed values are numbers >= 0 and < 1$"),
        (dict(renewal=-0.1), r"^algorithm.renewal=-0.1: allowed values are numbers >= 0 and < 1$"),
        (dict(pop_size=10, n_elite=5, renewal=0.5), r"^algorithm.renewal=0.5: .* leaves no child; allowed values"),
        (dict(encoding="hex"), r"^algorithm.encoding='hex': allowed values are auto\|binary\|gray\|seed002\|bits$"),
        (
            dict(crossover="three_point"),
            r"^algorithm.crossover='three_point': allowed values are one_point\|two_point\|uniform$",
        ),
        (dict(mutation="gauss"), r"^algorithm.mutation='gauss': allowed values are per_bit\|seed$"),
        (dict(bits_per_variable=0), r"^algorithm.bits_per_variable=0: allowed values are integers 1..52$"),
        (dict(bits_per_variable=60), r"^algorithm.bits_per_variable=60: allowed values are integers 1..52$"),
        (dict(nvdec=1), r"^algorithm.nvdec=1: allowed values are integers 2..16$"),
        (dict(nvbin=0), r"^algorithm.nvbin=0: allowed values are integers 1..16$"),
        (dict(fused="yes"), r"^algorithm.fused='yes': allowed values are true\|false$"),
    ],
)
def test_bad_parameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        GAParams(**kw)


def test_encoding_must_suit_the_problem():
    ga = GA(pop_size=10, encoding="gray")
    with pytest.raises(ValueError, match=r"^algorithm.encoding='gray': .* allowed values are bits\|auto$"):
        ga.init(_ctx(OneMax(20)))
    ga = GA(pop_size=10, encoding="bits")
    with pytest.raises(ValueError, match=r"^algorithm.encoding='bits'"):
        ga.init(_ctx(Sphere(2)))


# ---- one generation ------------------------------------------------------------------------------


def test_generation_slots_elitism_renewal_and_counts():
    prob = OneMax(100)  # L = 100: 4 words, 28 padding bits
    ga = GA(pop_size=40, n_elite=3, renewal=0.1, p_m=0.05)
    ctx = _ctx(prob)
    s = ga.init(ctx)
    assert s["evals"] == 40 and s["genome"].shape == (2, 40, 4)
    eidx = elite_indices(s["f"], s["v"], 3)
    s1 = ga.step(ctx, s)
    rows = np.arange(2)[:, None]
    assert np.array_equal(s1["genome"][:, :3], s["genome"][rows, eidx])
    assert np.array_equal(s1["f"][:, :3], s["f"][rows, eidx])
    assert np.array_equal(s1["genome"][:, 36:], random_words(ctx.rng, 0, DRAW_RENEW, 36, 40, 100))
    assert s1["evals"] == 40 + 37 and s1["generation"] == 1
    # every f is the objective of its genome
    f, _, _ = ga.evaluate_genomes(ctx, s1["genome"])
    assert np.array_equal(f, s1["f"])
    best = s1["f"].min(axis=1)
    for _ in range(30):
        s1 = ga.step(ctx, s1)
        assert np.all(s1["f"].min(axis=1) <= best)  # elitism: the best never gets worse
        best = s1["f"].min(axis=1)
        assert not np.any(s1["genome"] & ~valid_mask(100))  # padding bits never set


def test_nan_objective_ranks_worst_and_is_counted():
    prob = _NaNOneMax(40)
    ga = GA(pop_size=30)
    ctx = _ctx(prob)
    s = ga.init(ctx)
    assert int(s["nan_evals"]) == int((unpack_bits(s["genome"], 40)[..., 0] == 1).sum())
    assert np.all(np.isfinite(s["f"]) | (s["f"] == np.inf))
    s = ga.run(ctx, s, 20)
    assert int(s["nan_evals"]) > 0
    assert np.all(unpack_bits(ga.best(s).genome[:, 0], 40)[:, 0] == 0)


def test_constrained_knapsack_elite_is_feasible_best():
    prob = Knapsack(60)
    ga = GA(pop_size=60, n_elite=2)
    ctx = _ctx(prob)
    s = ga.run(ctx, ga.init(ctx), 60)
    b = ga.best(s)
    assert np.all(b.v[:, 0] == 0)
    assert np.all(s["f"][:, 0] == b.f[:, 0])
    assert np.all(b.f[:, 0] >= prob.f_star)


# ---- runs ---------------------------------------------------------------------------------------


def test_onemax_solved():
    prob = OneMax(64)
    ga = GA(pop_size=60)
    ctx = _ctx(prob, target=0.0)
    s = ga.run(ctx, ga.track_target(ctx, ga.init(ctx)), 150)
    assert np.all(s["f"].min(axis=1) == 0.0)
    assert np.all(s["hit_generation"] >= 1)


def test_trap5_solved_small():
    """Deceptive trap-5, 4 blocks: one-point crossover keeps the (contiguous) blocks together."""
    prob = Trap(20)
    ga = GA(pop_size=300, n_elite=2)
    ctx = _ctx(prob, streams=(0, 1, 2, 3), target=0.0)
    s = ga.run(ctx, ga.track_target(ctx, ga.init(ctx)), 200)
    assert np.all(s["f"].min(axis=1) == 0.0) and np.all(s["hit_generation"] >= 0)


def test_seed002_rastrigin_reaches_tolerance():
    """Seed 002 section 4.3 workload: Rastrigin in 2 variables, 64-bit digit genomes, |f| < 1e-7."""
    prob = Rastrigin(2, -1.0, 1.0)
    ga = GA(pop_size=320, encoding="seed002")
    ctx = _ctx(prob, streams=(0, 1, 2), target=1e-7)
    s = ga.run(ctx, ga.track_target(ctx, ga.init(ctx)), 300)
    assert (s["hit_generation"] >= 0).sum() >= 2
    X = ga.phenotype(ga.best(s).genome[:, 0])
    assert X.dtype == np.float64 and X.shape == (3, 2) and np.all(np.abs(X) <= 1.0)


def test_hit_generation_is_first_generation_at_target():
    prob = OneMax(40)
    ga = GA(pop_size=30)
    ctx = _ctx(prob, target=0.0)
    s = ga.track_target(ctx, ga.init(ctx))
    first = np.full(2, -1)
    for g in range(1, 80):
        s = ga.step(ctx, s)
        hit = s["f"].min(axis=1) <= 0.0
        first = np.where((first < 0) & hit, g, first)
    s2 = ga.run(ctx, ga.track_target(ctx, ga.init(ctx)), 79)
    assert np.array_equal(s2["hit_generation"], first) and (first > 0).all()


def test_reproducible_and_independent_of_island_batching():
    prob = Trap(50)
    kw = dict(pop_size=30, n_elite=2, renewal=0.1, crossover="two_point")
    a = GA(**kw).run(_ctx(prob, streams=(0, 1, 2)), GA(**kw).init(_ctx(prob, streams=(0, 1, 2))), 25)
    ga = GA(**kw)
    c3 = _ctx(prob, streams=(0, 1, 2))
    b = ga.run(c3, ga.init(c3), 25)
    assert np.array_equal(a["genome"], b["genome"]) and np.array_equal(a["f"], b["f"])
    c1 = _ctx(prob, streams=(1,))
    g1 = GA(**kw)
    one = g1.run(c1, g1.init(c1), 25)
    assert np.array_equal(one["genome"][0], b["genome"][1]) and np.array_equal(one["f"][0], b["f"][1])
    c4 = _ctx(prob, seed=4, streams=(0, 1, 2))
    g4 = GA(**kw)
    other = g4.run(c4, g4.init(c4), 25)
    assert not np.array_equal(other["genome"], b["genome"])


def test_phenotype_and_encode():
    ga = GA(pop_size=10, encoding="gray", bits_per_variable=10)
    with pytest.raises(RuntimeError, match="init"):
        ga.phenotype(np.zeros((1, 1), np.uint32))
    prob = Sphere(3, -2.0, 2.0)
    ctx = _ctx(prob)
    s = ga.init(ctx)
    X = ga.phenotype(s["genome"])
    assert X.shape == (2, 10, 3) and X.dtype == np.float64
    f, _, _ = ctx.evaluator(X)
    assert np.allclose(f, s["f"])
    assert np.array_equal(ga.encode(X), s["genome"])
    gb = GA(pop_size=10)
    cb = _ctx(OneMax(45))
    sb = gb.init(cb)
    B = gb.phenotype(sb["genome"])
    assert B.dtype == np.uint8 and B.shape == (2, 10, 45)
    assert np.array_equal(pack_bits(B), sb["genome"])


def test_padding_bits_never_change_fitness():
    for prob, enc in ((OneMax(100), "auto"), (Trap(100), "auto"), (Rastrigin(3, -1.0, 1.0), "binary")):
        ga = GA(pop_size=10, encoding=enc, bits_per_variable=11)
        ctx = _ctx(prob)
        s = ga.init(ctx)
        G = s["genome"] | ~ga.encoding.valid_mask()
        f, v, _ = ga.evaluate_genomes(ctx, G)
        assert np.array_equal(f, s["f"]) and np.array_equal(v, s["v"])


def test_float32_run():
    prob = OneMax(70)
    ga = GA(pop_size=20)
    ctx = _ctx(prob, dtype=np.float32)
    s = ga.run(ctx, ga.init(ctx), 5)
    assert s["f"].dtype == np.float32 and s["v"].dtype == np.float32


def test_island_group_runs_ga():
    """The runtime's island group (no Ray) runs the GA from config dicts, phenotype in the summary."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415
    from isles.islands.records import GroupSpec  # noqa: PLC0415

    from tests.helpers import one_epoch  # noqa: PLC0415

    spec = {
        "problem": {"_target_": "isles.problems.binary.OneMax", "n_bits": 40},
        "algorithm": {"_target_": "isles.algorithms.ga.ga.GA", "pop_size": 20},
        "island_ids": [0, 1],
        "seed": 1,
        "device": "cpu",
        "target": 0.0,
    }
    g = IslandGroup(GroupSpec(**spec))
    out = one_epoch(g, 30)
    assert out.best_x.shape == (2, 40) and out.best_x.dtype == np.uint8
    assert out.evals == 2 * (20 + 30 * 19)  # the group's evaluations, both islands
    assert out.hit_generation is not None


def test_config_instantiates():
    from isles.islands.config.build import build_algorithm  # noqa: PLC0415

    from tests.helpers import make_cfg, plain  # noqa: PLC0415

    cfg = plain(make_cfg("algorithm=ga"))["algorithm"]
    ga = build_algorithm(cfg)
    assert isinstance(ga, GA) and ga.params == GAParams()
    assert set(cfg) - {"_target_"} == set(GAParams.__dataclass_fields__)


# ---- the fused generation's C code on the host -----------------------------------------------------

HOST_CASES = [
    (lambda: OneMax(100), dict(pop_size=30, n_elite=2, renewal=0.1), 4, np.float64),
    (lambda: OneMax(64), dict(pop_size=30, n_elite=0, crossover="two_point", mutation="seed", p_m=0.5), 1, np.float64),
    (lambda: Trap(105), dict(pop_size=40, group_size=3, crossover="uniform", p_m=0.05), 2, np.float32),
    (lambda: Trap(1000), dict(pop_size=20, n_elite=1), 64, np.float64),
    (lambda: Knapsack(70), dict(pop_size=30, n_elite=2), 4, np.float64),
    (lambda: Knapsack(50, kind="strongly_correlated"), dict(pop_size=30, crossover="uniform"), 2, np.float32),
    (lambda: Rastrigin(2, -1.0, 1.0), dict(pop_size=64, encoding="seed002"), 1, np.float64),
    (lambda: Sphere(3, -5.0, 3.0), dict(pop_size=40, encoding="gray", bits_per_variable=20), 1, np.float64),
    (
        lambda: Sphere(5, [-5, -4, -3, -2, -1], [3, 4, 5, 6, 7]),
        dict(pop_size=40, encoding="binary", bits_per_variable=33, crossover="uniform", p_m=1.0),
        1,
        np.float64,
    ),
]


@pytest.mark.parametrize("case", range(len(HOST_CASES)))
def test_host_emulated_kernel_equals_numpy(case):
    """The fused generation's C code (decisions, words, mutation, objective, elite search) builds
    the same populations as the NumPy twin, bit for bit."""
    if ga_host.host_compiler() is None:
        pytest.skip("no C compiler for the host emulation")
    make, kw, tpi, dtype = HOST_CASES[case]
    prob = make()
    ga = GA(**kw)
    ctx = _ctx(prob, streams=(0, 3), dtype=dtype, seed=7)
    host = ga_host.HostGA(ga, ctx, tpi)
    a = ga.init(ctx)
    b = a
    twin = numpy_twin(ga)
    for _ in range(12):
        a, b = twin.step(ctx, a), host.step(b)
        assert np.array_equal(a["genome"], b["genome"])
        assert np.array_equal(a["f"], b["f"]) and np.array_equal(a["v"], b["v"])
        assert a["evals"] == b["evals"] and int(a["nan_evals"]) == int(b["nan_evals"])


def test_host_emulated_kernel_tracks_target_like_numpy():
    if ga_host.host_compiler() is None:
        pytest.skip("no C compiler for the host emulation")
    prob = OneMax(50)
    ga = GA(pop_size=30)
    ctx = _ctx(prob, target=0.0)
    s0 = ga.track_target(ctx, ga.init(ctx))
    a = numpy_twin(ga).run(ctx, s0, 60)
    b = ga_host.HostGA(ga, ctx).run(s0, 60)
    assert np.array_equal(a["hit_generation"], b["hit_generation"]) and (a["hit_generation"] > 0).all()
    assert np.array_equal(a["genome"], b["genome"])


def test_host_emulated_objective_and_nan_rule():
    if ga_host.host_compiler() is None:
        pytest.skip("no C compiler for the host emulation")
    for prob in (OneMax(77), Trap(95), Knapsack(40)):
        ga = GA(pop_size=8)
        ctx = _ctx(prob)
        ga.setup(ctx)
        host = ga_host.HostGA(ga, ctx, tpi=8)
        G = np.random.default_rng(1).integers(0, 2**32, (50, ga.encoding.n_words), dtype=np.uint64)
        G = G.astype(np.uint32) & ga.encoding.valid_mask()
        f, v, bad = host.evaluate(G)
        fp, vp, _ = ga.evaluate_genomes(ctx, G)
        assert np.array_equal(f, fp) and np.array_equal(v, vp) and not bad.any()
    # penalty handling is applied by the kernel code as by the evaluator
    prob = Knapsack(40)
    ga = GA(pop_size=8)
    ctx = _ctx(prob, handling="penalty")
    ga.setup(ctx)
    G = np.full((3, 2), 0xFFFFFFFF, np.uint32) & ga.encoding.valid_mask()
    f, v, _ = ga_host.HostGA(ga, ctx).evaluate(G)
    fp, vp, _ = ga.evaluate_genomes(ctx, G)
    assert np.array_equal(f, fp) and np.all(v == 0) and np.all(vp == 0)


def test_unsupported_reason_on_numpy():
    ga = GA(pop_size=8)
    assert ga_source.unsupported_reason(ga, _ctx(OneMax(10))) == "the array module is not CuPy"
    assert ga.fused_plan(_ctx(OneMax(10))) is None


class _NoSource(Problem):
    name = "no_source"

    def __init__(self):
        super().__init__(2, -1.0, 1.0)

    def objective(self, X):
        return (X * X).sum(axis=-1)


def test_problem_without_cuda_objective_runs_array_path():
    ga = GA(pop_size=12, encoding="seed002")
    ctx = _ctx(_NoSource())
    s = ga.run(ctx, ga.init(ctx), 5)
    assert s["generation"] == 5
    with pytest.raises(ValueError, match="cuda_objective"):
        ga_source.kernel_source(ga, ctx)
