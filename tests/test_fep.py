"""FEP / CEP / IFEP (issue 7, seed 003; Yao, Liu & Lin 1999): parameters, operators, selection
without sorting, migration of the step sizes, configs and the command line; the fused kernel's C
code on the host in ``test_fep_host.py``."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from isles.algorithms.core.base import Context
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.ep.fep import (
    DRAW_CAUCHY,
    DRAW_ETA,
    DRAW_ETA_IND,
    FEP,
    FEPParams,
    cauchy,
    learning_rates,
    mutate,
    opponents,
    select_survivors,
    tournament_wins,
)
from isles.islands.config.build import build_problem
from isles.islands.group import IslandGroup
from isles.islands.plugin import source_id
from isles.islands.records import GroupSpec
from isles.problems.base import ScalableProblem
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Sphere
from isles.problems.constraints import Evaluator, better
from scipy import stats

from tests.helpers import make_cfg, one_epoch, plain

MASTER_ID = source_id(0)  # a plug-in's migrants (islands/plugin.py)
from tests.user_problems import G11

ROOT = Path(__file__).resolve().parents[1]


def _ctx(prob, streams=(0, 1), dtype=np.float64, seed=3):
    return Context(np, dtype, Evaluator(prob), CounterRNG(np, seed, list(streams)))


# ---- parameters ---------------------------------------------------------------------------------


def test_defaults_are_yao_et_al():
    p = FEPParams()
    assert (p.pop_size, p.q, p.mutation, p.eta_init, p.eta_min, p.bound_handling) == (
        100,
        10,
        "cauchy",
        3.0,
        0.0,
        "reflect",
    )
    tau, taup = learning_rates(30)
    assert tau == pytest.approx(1 / math.sqrt(2 * math.sqrt(30))) and taup == pytest.approx(1 / math.sqrt(60))


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"q": 0}, "algorithm.q=0: allowed values are integers >= 1 and < 2*pop_size = 200"),
        ({"q": 200}, "algorithm.q=200: allowed values are integers >= 1 and < 2*pop_size = 200"),
        ({"q": 2.5}, "algorithm.q=2.5"),
        ({"pop_size": 1}, "algorithm.pop_size=1: allowed values are integers >= 2"),
        ({"eta_init": 0}, "algorithm.eta_init=0: allowed values are numbers > 0"),
        ({"eta_min": -1.0}, "algorithm.eta_min=-1.0: allowed values are numbers >= 0"),
        ({"mutation": "levy"}, "algorithm.mutation='levy': allowed values are cauchy|gaussian|improved"),
        ({"bound_handling": "wrap"}, "algorithm.bound_handling='wrap': allowed values are clip|reflect|reinit"),
        ({"fused": "yes"}, "algorithm.fused='yes'"),
    ],
)
def test_bad_parameters(kw, msg):
    with pytest.raises(ValueError) as e:
        FEPParams(**kw)
    assert msg in str(e.value) and "\n" not in str(e.value)


# ---- operators ----------------------------------------------------------------------------------


def test_cauchy_variates_have_the_cauchy_quantiles():
    rng = CounterRNG(np, 0, [0])
    d = cauchy(rng, 5, DRAW_CAUCHY, (200000,), np.float64)[0]
    for p in (0.1, 0.25, 0.5, 0.75, 0.9):  # the CDF at the quantiles (sd of the fraction: 0.0007)
        assert (d < math.tan(math.pi * (p - 0.5))).mean() == pytest.approx(p, abs=0.004)
    assert stats.kstest(d, "cauchy").pvalue > 1e-3 and np.isfinite(d).all()


def test_mutation_follows_yao_eqs_1_2_4():
    prob = Sphere(6, -1e6, 1e6)  # wide box: no bound handling involved
    ctx = _ctx(prob)
    rs = np.random.default_rng(0)
    X = rs.uniform(-5, 5, (2, 7, 6))
    eta = rs.uniform(0.1, 2, (2, 7, 6))
    g = 4
    tau, taup = learning_rates(6)
    Ni = ctx.rng.normal(g, DRAW_ETA_IND, (7,))
    Nij = ctx.rng.normal(g, DRAW_ETA, (7, 6))
    for mut, delta in (
        ("cauchy", cauchy(ctx.rng, g, DRAW_CAUCHY, (7, 6), np.float64)),
        ("gaussian", ctx.rng.normal(g, 5, (7, 6))),
    ):
        Xo, eo = mutate(ctx, g, X, eta, FEPParams(mutation=mut))
        np.testing.assert_allclose(eo, eta * np.exp(taup * Ni[..., None] + tau * Nij), rtol=1e-15)
        np.testing.assert_allclose(Xo, X + eta * delta, rtol=1e-15)  # the OLD eta moves x
    Xo, eo = mutate(ctx, g, X, eta, FEPParams(mutation="improved"))
    assert Xo.shape == (2, 14, 6) and eo.shape == (2, 7, 6)
    _, eo = mutate(ctx, g, X, np.full_like(eta, 1e-9), FEPParams(eta_min=1e-3))
    assert eo.min() == 1e-3


@pytest.mark.parametrize("bounds", ["reflect", "clip", "reinit"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bound_handling_never_nan_even_with_huge_steps(bounds, dtype):
    prob = Rastrigin(8)
    ctx = _ctx(prob, dtype=dtype)
    big = float(np.finfo(dtype).max)
    X = np.zeros((2, 50, 8), dtype)
    for eta0 in (0.0, 1.0, 1e20, big):
        eta = np.full((2, 50, 8), eta0, dtype)
        for g in range(3):
            Xo, eo = mutate(ctx, g, X, eta, FEPParams(mutation="improved", bound_handling=bounds))
            assert Xo.dtype == dtype and not np.isnan(Xo).any() and np.isfinite(eo).all()
            assert (Xo >= prob.lower.astype(dtype)).all() and (Xo <= prob.upper.astype(dtype)).all()
    alg = FEP(pop_size=20, eta_init=1e30, bound_handling=bounds)
    s = alg.run(ctx, alg.init(ctx), 30)
    assert np.isfinite(s["X"]).all() and np.isfinite(s["f"]).all() and int(s["nan_evals"]) == 0


# ---- selection ----------------------------------------------------------------------------------


def _brute_wins(rng, g, f, v, q):
    I, M2 = f.shape
    w = np.zeros((I, M2), np.int64)
    opp = opponents(rng, g, M2, q)
    for i in range(I):
        for k in range(M2):
            for t in range(q):
                o = opp[i, k, t]
                assert o != k and 0 <= o < M2
                w[i, k] += not better(f[i, o], v[i, o], f[i, k], v[i, k])
    return w


@pytest.mark.parametrize("seed", range(6))
def test_selection_equals_brute_force(seed):
    rs = np.random.default_rng(seed)
    mu, q = int(rs.integers(2, 40)), None
    q = int(rs.integers(1, 2 * mu))
    rng = CounterRNG(np, seed, [0, 1, 2])
    f = rs.integers(0, 6, (3, 2 * mu)).astype(np.float64)  # many ties in f and in wins
    v = np.where(rs.random((3, 2 * mu)) < 0.3, rs.integers(0, 3, (3, 2 * mu)), 0).astype(np.float64)
    wins = tournament_wins(rng, 9, f, v, q)
    assert np.array_equal(wins, _brute_wins(rng, 9, f, v, q))
    src = select_survivors(rng, 9, wins, mu, q)
    for i in range(3):
        w = wins[i]
        # brute force: threshold by trying every t; ties filled in union order from offset s
        t = max(t for t in range(q + 1) if (w >= t).sum() >= mu)
        tied = [k for k in range(2 * mu) if w[k] == t]
        need = mu - int((w > t).sum())
        s = min(int(rng.uniform(9, 7, (1,))[i, 0] * len(tied)), len(tied) - 1)
        keep_tied = {tied[(s + j) % len(tied)] for j in range(need)}
        expect = [k for k in range(2 * mu) if w[k] > t or k in keep_tied]
        assert src[i].tolist() == expect
        assert len(set(src[i].tolist())) == mu
        rest = np.setdiff1d(np.arange(2 * mu), src[i])
        assert rest.size == 0 or w[src[i]].min() >= w[rest].max()


def test_tie_filling_is_uniform_chi_square():
    """Over many generations, each of m tied individuals survives with probability need/m: the
    selection counts pass a chi-square test of uniformity (and are not all equal by construction)."""
    mu, q = 40, 10
    w = np.full((1, 2 * mu), 3, np.int32)
    w[0, :25] = 9  # 25 sure survivors
    tied = np.arange(25, 2 * mu)  # 55 tied at the threshold, 15 places left
    rng = CounterRNG(np, 1, [0])
    counts = np.zeros(2 * mu)
    G = 3000
    for g in range(G):
        src = select_survivors(rng, g, w, mu, q)[0]
        counts[src] += 1
    assert (counts[:25] == G).all()
    c = counts[tied]
    assert c.sum() == 15 * G
    _, p = stats.chisquare(c)
    assert p > 1e-3, p


def test_best_individual_survives_and_fitness_never_worse():
    prob = Sphere(5)
    ctx = _ctx(prob, streams=(0, 1, 2))
    alg = FEP(pop_size=30)
    s = alg.init(ctx)
    best = s["f"].min(axis=1)
    for _ in range(40):
        s = alg.step(ctx, s)
        b = s["f"].min(axis=1)
        assert (b <= best).all()  # the best wins all q tournaments: (mu + mu) selection keeps it
        best = b
        assert np.allclose(prob.objective(s["X"]), s["f"])


@pytest.mark.parametrize("box", [(-1.0, 1.0), (-5.12, 5.12)])
def test_every_generation_stays_in_the_box_of_the_problem_it_was_given(box):
    """Issue 25's 'FEP returned x outside the box' (G11, mu = 30, q = 5, 300 generations): FEP
    keeps every parent of every generation inside the box of the problem it was given. Given G11
    with fep_f5's +-5.12 (what an in-process composition of ``+experiment=fep`` handed it before
    the fix in ``app/overrides.py``; ``tests/test_user_problems.py`` tests that) seed 0 ends at
    x = (1.51, 2.28): inside that box, outside G11's own [-1, 1]. The defect was the box FEP was
    given, not FEP's bound handling. A guard: it passes on the old code too."""
    prob = G11(lower=box[0], upper=box[1])
    ctx = _ctx(prob, streams=range(4), seed=0)
    alg = FEP(pop_size=30, q=5)
    s = alg.init(ctx)
    for _ in range(300):
        s = alg.step(ctx, s)
        assert (s["X"] >= box[0]).all() and (s["X"] <= box[1]).all()


@pytest.mark.parametrize("mutation", ["cauchy", "gaussian", "improved"])
def test_variants_run_and_count_evaluations(mutation):
    ctx = _ctx(Rastrigin(6))
    alg = FEP(pop_size=16, mutation=mutation)
    s = alg.run(ctx, alg.init(ctx), 25)
    per = 32 if mutation == "improved" else 16
    assert s["generation"] == 25 and s["evals"] == 16 + 25 * per
    assert s["X"].shape == s["eta"].shape == (2, 16, 6)


def test_reproducible_and_independent_of_island_batching():
    prob = Rosenbrock(6, -30.0, 30.0)
    alg = FEP(pop_size=12, mutation="improved", bound_handling="reinit")
    a = alg.run(_ctx(prob, (0, 5, 9)), alg.init(_ctx(prob, (0, 5, 9))), 20)
    b = alg.run(_ctx(prob, (5,)), alg.init(_ctx(prob, (5,))), 20)
    for k in ("X", "eta", "f"):
        assert np.array_equal(a[k][1], b[k][0])


class _NaNSphere(ScalableProblem):
    name = "nan_sphere"

    def objective(self, X):
        f = (X * X).sum(axis=-1)
        return np.where(X[..., 0] > 50, np.nan, f)


def test_nan_objective_ranks_worst_and_is_counted():
    ctx = _ctx(_NaNSphere(3))
    alg = FEP(pop_size=20)
    s = alg.run(ctx, alg.init(ctx), 10)
    assert int(s["nan_evals"]) > 0 and np.isfinite(s["f"].min(axis=1)).all()


def test_cep_fep_converge_on_sphere():
    """FEP and CEP make progress on the sphere (Yao et al. f1), from about 1e5 to far below."""
    for mut in ("cauchy", "gaussian"):
        ctx = _ctx(Sphere(10), streams=(0,))
        alg = FEP(pop_size=30, mutation=mut, eta_min=1e-4)
        s0 = alg.init(ctx)
        s = alg.run(ctx, s0, 300)
        assert s["f"].min() < 1e-3 * s0["f"].min()


# ---- migration ----------------------------------------------------------------------------------


def _group(policy="replace_worst"):
    spec = {
        "problem": {"_target_": "isles.problems.benchmarks.Sphere", "dim": 4},
        "algorithm": {"_target_": "isles.algorithms.ep.fep.FEP", "pop_size": 6},
        "island_ids": [0, 1],
        "seed": 0,
        "device": "cpu",
        "n_migrants": 2,
        "replacement": policy,
    }
    return IslandGroup(GroupSpec(**spec))


def test_eta_survives_migration():
    """Step sizes travel with their individuals through islands/migration/moves.py's one code path:
    local migrants, remote migrants (eta given) and the master's (no eta: gets eta_init)."""
    g = _group()
    g.state = g.algorithm.run(g.ctx, g.state, 3)
    before = g.algorithm.population(g.state)
    rs = np.random.default_rng(0)
    remote = Population(
        0.25 + np.arange(8.0).reshape(1, 2, 4) / 100,
        np.array([[-5.0, -4.0]]),
        np.zeros((1, 2)),
        {"eta": rs.uniform(0.1, 0.2, (1, 2, 4))},
    )
    master = Population(np.full((1, 1, 4), 0.5), np.array([[-9.0]]), np.zeros((1, 1)))
    emig = g.emigrants()
    one_epoch(g, 0, {0: [1], 1: [7, MASTER_ID]}, {7: remote, MASTER_ID: master})
    after = g.algorithm.population(g.state)
    # island 0 received island 1's two best, eta included
    for j in range(2):
        hit = [k for k in range(6) if np.array_equal(after.genome[0, k], emig.genome[1, j])]
        assert hit and np.array_equal(after.extras["eta"][0, hit[0]], emig.extras["eta"][1, j])
    # island 1 received the remote island's individuals with their eta, and the master's with eta_init
    for j in range(2):
        k = [k for k in range(6) if np.array_equal(after.genome[1, k], remote.genome[0, j])]
        assert k and np.array_equal(after.extras["eta"][1, k[0]], remote.extras["eta"][0, j])
    k = [k for k in range(6) if np.array_equal(after.genome[1, k], master.genome[0, 0])]
    assert k and np.all(after.extras["eta"][1, k[0]] == 3.0)
    assert before.extras["eta"].shape == after.extras["eta"].shape
    # and the migrated step sizes are what the next generation mutates with
    s = g.algorithm.step(g.ctx, g.state)
    assert np.isfinite(s["X"]).all()


# ---- configs and the command line ----------------------------------------------------------------


def test_seed_003_problems_and_experiment():
    c = plain(make_cfg("+experiment=fep"))
    a = c["algorithm"]
    assert (a["pop_size"], a["q"], a["mutation"], c["generations"]) == (400, 10, "cauchy", 2000)
    assert build_problem(c["problem"]).name == "rastrigin"
    expect = {
        1: ("sphere", 100.0),
        2: ("schwefel_1_2", 100.0),
        3: ("rosenbrock", 30.0),
        4: ("schwefel_2_26", 500.0),
        5: ("rastrigin", 5.12),
    }
    for k, (name, hi) in expect.items():
        p = build_problem(plain(make_cfg("+experiment=fep", f"problem=fep_f{k}"))["problem"])
        assert (p.name, p.dim, float(p.upper[0]), float(p.lower[0])) == (name, 32, hi, -hi)
    p = build_problem(plain(make_cfg("+experiment=fep", "problem=fep_f4"))["problem"])
    assert p.f_star == pytest.approx(-13407.452393, abs=1e-6)  # shared/problems.md erratum 7.4
    r = plain(make_cfg("+experiment=fep_runs"))
    assert (r["islands"]["n"], r["islands"]["n_actors"], r["topology"]["_target_"]) == (
        20,
        1,
        "isles.islands.migration.topology.Unconnected",
    )


def _cli(*args, timeout=180):
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["algorithm.q=0"], "algorithm.q=0: allowed values are integers >= 1 and < 2*pop_size = 800"),
        (["algorithm.q=800"], "algorithm.q=800: allowed values are integers >= 1 and < 2*pop_size = 800"),
        (["algorithm.pop_size=1"], "algorithm.pop_size=1: allowed values are integers >= 2"),
        (["algorithm.eta_init=0"], "algorithm.eta_init=0: allowed values are numbers > 0"),
        (["algorithm.eta_min=-0.5"], "algorithm.eta_min=-0.5: allowed values are numbers >= 0"),
        (["algorithm.mutation=levy"], "algorithm.mutation='levy': allowed values are cauchy|gaussian|improved"),
    ],
)
def test_bad_input_one_line_error_on_the_command_line(args, needle):
    p = _cli("+experiment=fep", *args, "logger=none", "device=cpu")
    assert p.returncode != 0
    assert needle in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr


@pytest.mark.slow  # a whole run
def test_run_py_experiment_fep_end_to_end():
    """``python run.py +experiment=fep`` as users type it (a shorter budget, no MLflow)."""
    p = _cli("+experiment=fep", "generations=40", "logger=none", "device=cpu")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "rastrigin" in p.stdout and "feasible" in p.stdout
