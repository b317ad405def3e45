"""Co-evolutionary DE (seed 000): min-max problems, the augmented Lagrangian, CDE's cycle
semantics, role-wise migration with re-assessed immigrants, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.coevolution.cde import CDE, CDEParams
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.de.crossover import crossover_mask
from isles.algorithms.de.de import apply_bounds, mutant_vectors, sample_indices
from isles.islands.config.build import build_evaluator, check_pairing
from isles.islands.group import IslandGroup
from isles.islands.records import GroupSpec
from isles.problems.cec2006 import G07, G10
from isles.problems.constraints import Evaluator, feasibility_report
from isles.problems.engineering import Spring
from isles.problems.minmax import AugmentedLagrangian, SaddleP1, al_penalty

from tests.helpers import numpy_twin, one_epoch
from tests.user_problems import BadPayoff, UserSaddle


def ctx_of(problem, n_islands=2, seed=0):
    return Context(np, np.float64, Evaluator(problem), CounterRNG(np, seed, range(n_islands)))


# -- augmented Lagrangian ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "g, mu, r, want",
    [
        (0.1, 1.0, 10.0, 1.0 * 0.1 + 10.0 * 0.01),  # violated: mu g + r g^2 = 0.2
        (-0.01, 1.0, 10.0, -0.01 + 10.0 * 1e-4),  # feasible but g > -mu/(2r) = -0.05: still quadratic
        (-0.1, 1.0, 10.0, -1.0 / 40.0),  # g < -0.05: -mu^2/(4r)
        (-3.0, 2.0, 0.5, -4.0 / 2.0),  # switch at -2: constant -mu^2/(4r) = -2
        (-1.0, 2.0, 0.5, -2.0 + 0.5),  # g = -1 > -2: mu g + r g^2 = -1.5
        (0.0, 0.0, 7.0, 0.0),  # mu = 0: switch at 0, both branches 0
    ],
)
def test_al_penalty_hand_values(g, mu, r, want):
    assert al_penalty(np.array(g), np.array(mu), r) == pytest.approx(want, rel=1e-14, abs=1e-15)


@pytest.mark.parametrize("mu, r", [(1.0, 10.0), (3.7, 1e3), (250.0, 1e7)])
def test_al_penalty_continuous_at_switch(mu, r):
    s = -mu / (2 * r)
    eps = np.array([1e-3, 1e-6, 1e-9]) * abs(s)
    left = al_penalty(s - eps, np.full(3, mu), r)
    right = al_penalty(s + eps, np.full(3, mu), r)
    at = -mu * mu / (4 * r)
    assert al_penalty(np.array(s), np.array(mu), r) == pytest.approx(at, rel=1e-12)
    # both one-sided limits reach the value at the switch (the seed's printed eq. 7, switching at
    # +mu/(2r), would jump by mu^2/r there: shared/problems.md 7.1)
    assert np.all(np.abs(left - at) <= np.abs(at) * 1e-12 + 1e-300)
    assert np.all(np.abs(right - at) <= mu * eps + r * (eps * eps) * 4 + abs(at) * 1e-12)
    assert np.abs(right - at)[-1] < mu * mu / r * 1e-6


def test_al_payoff_against_loop_with_scales():
    p = G10()  # constraint scales (1, 1, 1, 1e5, 1e5, 1e6)
    al = AugmentedLagrangian(p, r=100.0, multiplier_bound=5.0)
    rng = np.random.default_rng(1)
    X = p.lower + rng.random((2, 3, 8)) * (p.upper - p.lower)
    Y = rng.random((2, 4, 6)) * 5.0
    L = al.payoff(X, Y)
    assert L.shape == (2, 3, 4)
    for i in range(2):
        for a in range(3):
            f, g = p.evaluate(X[i, a][None])
            g = g[0] / p.constraint_scale
            for b in range(4):
                want = f[0]
                for gi, mi in zip(g, Y[i, b], strict=False):
                    want += mi * gi + 100.0 * gi * gi if gi >= -mi / 200.0 else -mi * mi / 400.0
                assert L[i, a, b] == pytest.approx(want, rel=1e-13)
    assert (al.y_dim, al.y_lower.max(), al.y_upper.min()) == (6, 0.0, 5.0)


def test_al_saddle_value_at_optimum_is_f_star():
    """At x* with mu = 0 the payoff is f*; larger mu never lowers it where g(x*) <= 0 is active
    or slack only by rounding (g = 0 gives p = 0 for every mu)."""
    al = AugmentedLagrangian(Spring(), r=1e7)
    x = np.array([[0.051689061232, 0.356717743398, 11.288965540657]])
    L = al.payoff(x[None], np.zeros((1, 1, 4)))
    assert L[0, 0, 0] == pytest.approx(Spring().f_star, rel=1e-9)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"r": 0.0}, "constraints.r=0.0"),
        ({"r": -1}, "constraints.r=-1"),
        ({"multiplier_bound": 0}, "constraints.multiplier_bound=0"),
    ],
)
def test_al_rejects_bad_parameters(kw, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.") + ": allowed values are numbers > 0"):
        AugmentedLagrangian(G07(), **kw)


# -- min-max problems ----------------------------------------------------------------------------
def test_p1_payoff_and_worst_case():
    p = SaddleP1(5)
    rng = np.random.default_rng(0)
    X, Y = rng.uniform(-1, 1, (3, 4, 5)), rng.uniform(-1, 1, (3, 6, 5))
    L = p.payoff(X, Y)
    want = (X**2).sum(-1)[:, :, None] - (Y**2).sum(-1)[:, None, :]
    np.testing.assert_allclose(L, want, rtol=1e-14)
    # the worst case over y is at y = 0: F(x) = sum x^2, never below the payoff of any y
    np.testing.assert_allclose(p.objective(X), (X**2).sum(-1))
    assert np.all(L.max(-1) <= p.objective(X) + 1e-15)


def test_wrong_payoff_shape_names_both_shapes():
    p = BadPayoff(2)
    want = r"returned shape \(2, 4\) for X \(2, 4, 2\) and Y \(2, 4, 2\): expected \(2, 4, 4\)"
    with pytest.raises(ValueError, match=want):
        CDE(pop_size=4).init(ctx_of(p))


# -- CDE semantics -------------------------------------------------------------------------------
def test_p1_saddle_found_to_1e_6():
    p = SaddleP1(10)
    algo = CDE(pop_size=20, n_cycles=60, gens_x=10, gens_y=2, F=0.5, CR=0.9, strategy="rand/1")
    s = algo.solve(ctx_of(p, seed=1))
    b = algo.best(s)
    assert np.abs(b.genome).max() < 1e-6
    assert np.all(b.f[:, 0] == (b.genome[:, 0] ** 2).sum(-1))


@pytest.mark.parametrize("strategy", ["rand/1", "best/1"])
def test_cycle_fitness_semantics(strategy):
    p = AugmentedLagrangian(G07(), r=1e3, multiplier_bound=10.0)
    ctx = ctx_of(p, 3)
    algo = CDE(pop_size=8, pop_size_y=6, gens_x=3, gens_y=2, strategy=strategy)
    s0 = algo.init(ctx)
    L0 = p.payoff(s0["X"], s0["Y"])
    np.testing.assert_array_equal(s0["f"], L0.max(-1))  # x minimises max over P2
    np.testing.assert_array_equal(s0["fy"], -L0.min(-2))  # y maximises min over P1 (stored negated)
    # the x phase leaves Y frozen and never worsens an x against it
    s1, _ = algo._evolve(ctx, algo.refresh(ctx, s0, "x")[0], "x", 0, 3)
    np.testing.assert_array_equal(s1["Y"], s0["Y"])
    assert np.all(s1["f"] <= s0["f"])
    np.testing.assert_array_equal(s1["f"], p.payoff(s1["X"], s1["Y"]).max(-1))
    # a whole cycle: the y phase ran last against the final X, so fy is exact for the final pair
    s = numpy_twin(algo).step(ctx, s0)  # the array code's cycle (the host build folds its own order)
    L = p.payoff(s["X"], s["Y"])
    np.testing.assert_array_equal(s["fy"], -L.min(-2))
    assert s["generation"] == 1 and s["evals"] == s0["evals"] + 8 * (1 + 3)  # x rows: the refresh, 3 x generations
    assert s["pair_evals"] == s0["pair_evals"] + 2 * 8 * 6 + 3 * 8 * 6 + 2 * 6 * 8  # pair payoffs
    assert np.all(s["Y"] >= 0) and np.all(s["Y"] <= 10.0)
    assert np.all(s["X"] >= p.lower) and np.all(s["X"] <= p.upper)


def test_x_generation_is_des_generation():
    """One x generation = DE's operators (indices, mutant, bounds, bin mask) + greedy selection on
    the fitness max_y L: recomputed here from the DE functions."""
    p = AugmentedLagrangian(G07(), r=1e3, multiplier_bound=10.0)
    ctx = ctx_of(p, 2, seed=4)
    algo = CDE(pop_size=7, gens_x=1, gens_y=1, strategy="best/1", F=0.6, CR=0.8)
    s0, _ = algo.refresh(ctx, algo.init(ctx), "x")
    s1, _ = algo._evolve(ctx, s0, "x", 0, 1)
    g = 1 + s0["generation"]  # counter of DE generation k = 0 of cycle 0
    X = s0["X"]
    r = sample_indices(ctx.rng, g, 7, 2)
    V = apply_bounds("reflect", mutant_vectors(X, r, "best/1", 0.6, s0["f"].argmin(1)), ctx.lower, ctx.upper)
    U = np.where(crossover_mask("bin", ctx.rng, g, 7, 10, 0.8), V, X)
    fu = p.payoff(U, s0["Y"]).max(-1)
    acc = ~(s0["f"] < fu)
    np.testing.assert_array_equal(s1["X"], np.where(acc[..., None], U, X))


def test_result_is_best_feasible_on_objective():
    p = AugmentedLagrangian(Spring(), r=1e7)
    algo = CDE(pop_size=20, n_cycles=15, gens_x=10, gens_y=5)
    s = algo.solve(ctx_of(p, 2))
    b = algo.best(s)
    for i in range(2):
        rep = feasibility_report(Spring(), b.genome[i, 0])
        assert rep["f"] == pytest.approx(b.f[i, 0], rel=1e-14)
        assert rep["feasible"] == (b.v[i, 0] == 0)
    # the archive is never worse (Deb's rules) than any x now in the population
    f, v, _ = Evaluator(p)(s["X"])
    for i in range(2):
        assert b.v[i, 0] <= v[i].min()
        if b.v[i, 0] == 0:
            assert b.f[i, 0] <= f[i][v[i] == 0].min()


def test_user_minmax_problem_without_worst_case():
    p = UserSaddle(2)
    algo = CDE(pop_size=12, n_cycles=30, gens_x=5, gens_y=5, F=0.5, CR=0.9)
    s = algo.solve(ctx_of(p, 2))
    b = algo.best(s)
    # saddle of sum (x-.3)^2 - sum (y+.2)^2 + x.y: 2(x-.3) + y = 0 and x - 2(y+.2) = 0
    xs = np.linalg.solve([[2.0, 1.0], [1.0, -2.0]], [0.6, 0.4])[0]
    assert np.abs(b.genome[:, 0] - xs).max() < 1e-2


# -- islands -------------------------------------------------------------------------------------
def _group(n=2, **algo):
    spec = {
        "problem": {"_target_": "isles.problems.cec2006.G07"},
        "constraints": {"handling": "augmented_lagrangian", "r": 1e4, "multiplier_bound": 100.0},
        "algorithm": {
            "_target_": "isles.algorithms.coevolution.cde.CDE",
            "pop_size": 10,
            "pop_size_y": 6,
            "gens_x": 3,
            "gens_y": 3,
            **algo,
        },
        "island_ids": list(range(n)),
        "seed": 3,
        "device": "cpu",
        "n_migrants": 2,
        "replacement": "replace_worst",
    }
    return IslandGroup(GroupSpec(**spec))


def test_immigrants_are_reassessed_against_destination_opponents():
    g = _group()
    ctx, algo = g.ctx, g.algorithm
    s = g.state
    pops = algo.populations(s)
    assert set(pops) == {"x", "y"} and pops["x"].genome.shape[2] == 10 and pops["y"].genome.shape[2] == 8
    # immigrants carrying a stale, too-good fitness (from their source island)
    imm = pops["x"].take(np.array([[0, 1], [2, 3]]))
    imm = type(imm)(imm.genome[::-1], np.full((2, 2), -1e30), imm.v)
    s2, fresh = algo.assess_immigrants(ctx, s, "x", imm)
    np.testing.assert_array_equal(fresh.f, ctx.evaluator.problem.payoff(imm.genome, s["Y"]).max(-1))
    np.testing.assert_array_equal(s2["f"], ctx.evaluator.problem.payoff(s["X"], s["Y"]).max(-1))
    yimm = pops["y"].take(np.array([[0], [1]]))
    _, yfresh = algo.assess_immigrants(ctx, s, "y", yimm)
    np.testing.assert_array_equal(yfresh.f, -ctx.evaluator.problem.payoff(s["X"], yimm.genome).min(-2))


def test_migration_is_role_wise_and_fitness_fresh():
    g = _group()
    one_epoch(g, 2)
    em = g.emigrants()
    assert set(em) == {"x", "y"}
    summary = one_epoch(g, 0, inbound={0: [1]})  # island 1 -> island 0, both roles (replace_worst)
    s = g.state
    P = g.ctx.evaluator.problem
    # island 1's emigrants sit in island 0's populations of the same role
    for role, key in (("x", "X"), ("y", "Y")):
        for row in em[role].genome[1]:
            assert np.any(np.all(s[key][0] == row, axis=-1))
    # and every resident's fitness is fresh against island 0's current opponents
    np.testing.assert_array_equal(s["fy"][0], -P.payoff(s["X"][:1], s["Y"][:1]).min(-2)[0])
    assert len(summary.migrations) == 2  # one event per role


def test_islands_code_names_no_algorithm():
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[1] / "islands"
    for f in root.glob("*.py"):
        text = f.read_text().lower()
        assert "cde" not in text and "coevolution" not in text, f.name


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"n_cycles": 0}, "algorithm.n_cycles=0: allowed values are integers >= 1"),
        ({"gens_x": 0}, "algorithm.gens_x=0: allowed values are integers >= 1"),
        ({"gens_y": -2}, "algorithm.gens_y=-2: allowed values are integers >= 1"),
        ({"pop_size": 3}, "algorithm.pop_size=3: allowed values are integers >= 4"),
        ({"pop_size_y": 2, "strategy": "best/1"}, "algorithm.pop_size_y=2: allowed values are integers >= 3"),
        ({"F": 0}, "algorithm.F=0"),
    ],
)
def test_bad_parameters(kw, needle):
    with pytest.raises(ValueError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        CDEParams(**kw)


def test_pairing_checks():
    from isles.algorithms.de.de import DE  # noqa: PLC0415

    with pytest.raises(ValueError, match="constraints.handling=augmented_lagrangian: needs a min-max algorithm"):
        check_pairing(DE(), G07(), {"handling": "augmented_lagrangian"})
    with pytest.raises(ValueError, match="allowed value is augmented_lagrangian"):
        check_pairing(CDE(), G07(), {"handling": "feasibility"})
    with pytest.raises(ValueError, match="is a min-max problem"):
        check_pairing(DE(), SaddleP1(3), {})
    with pytest.raises(ValueError, match="returned shape"):
        check_pairing(CDE(), BadPayoff(2), {})
    check_pairing(CDE(), SaddleP1(3), {"handling": "augmented_lagrangian"})
    ev = build_evaluator({"_target_": "isles.problems.cec2006.G07"}, {"handling": "augmented_lagrangian", "r": 5.0})
    assert isinstance(ev.problem, AugmentedLagrangian) and ev.problem.r == 5.0


# -- the fused pair kernel, host-emulated ----------------------------------------------------------
@pytest.mark.parametrize("pid", ["p1", "g07", "g01", "g10", "spring"])
def test_host_emulated_pair_kernel_equals_numpy(pid):
    from isles.algorithms.coevolution.cuda import compiler, host_pairs  # noqa: PLC0415

    if compiler() is None:
        pytest.skip("no C compiler")
    p = {
        "p1": lambda: SaddleP1(7),
        "g07": lambda: AugmentedLagrangian(G07(), r=1e3, multiplier_bound=10.0),
        "g01": lambda: AugmentedLagrangian(__import__("isles.problems.cec2006", fromlist=["G01"]).G01()),
        "g10": lambda: AugmentedLagrangian(G10()),
        "spring": lambda: AugmentedLagrangian(Spring()),
    }[pid]()
    ctx = ctx_of(p, 3)
    algo = CDE(pop_size=9, pop_size_y=6, gens_x=2, gens_y=2)
    s = algo.run(ctx, algo.init(ctx), 1)
    emu = host_pairs(p)
    for role in ("x", "y"):
        got, n_nan = emu(s["X"], s["Y"], role)
        want, _ = algo.pair_fitness(ctx, s["X"], s["Y"], role)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
        assert n_nan == 0
    # NaN payoffs: +inf fitness and counted, as the array path
    X = s["X"].copy()
    X[0, 2, 0] = np.nan
    got, n_nan = emu(X, s["Y"], "x")
    want, w_nan = algo.pair_fitness(ctx, X, s["Y"], "x")
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert got[0, 2] == np.inf and n_nan == w_nan == 1
    goty, ny_nan = emu(X, s["Y"], "y")
    assert np.all(goty[0] == np.inf) and ny_nan == 6


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("pid", ["g01", "g07", "g09", "g10", "spring"])
@pytest.mark.parametrize("strategy", ["rand/1", "best/1"])
def test_seed_settings_reach_the_quality_target(pid, strategy):
    """Table 1's settings, 4 runs as islands: every result feasible, the best within 0.1 % of f*
    (docs/cde.md's tables run 20; ``python benchmarks/cde_quality.py``)."""
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from cde_quality import run_row  # noqa: PLC0415

    row = run_row(pid, strategy, 4, 0, [])
    assert row["feasible"] == 4
    assert row["gap_best_pct"] <= 0.1


def test_minmax_y_box_is_checked_like_the_x_box():
    from isles.problems.minmax import MinMaxProblem

    with pytest.raises(ValueError, match=r"problem.y_lower > problem.y_upper at variable\(s\) \[1\]"):
        MinMaxProblem(2, -1.0, 1.0, 2, [0.0, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"problem.y_lower has 3 entries but problem.y_dim=2"):
        MinMaxProblem(2, -1.0, 1.0, 2, [0.0, 0.0, 0.0], 1.0)
    with pytest.raises(ValueError, match=r"problem.y_dim=0: allowed values are integers >= 1"):
        MinMaxProblem(2, -1.0, 1.0, 0, 0.0, 1.0)
