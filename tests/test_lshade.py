"""Tests of L-SHADE (algorithms/lshade/lshade.py; Tanabe & Fukunaga, CEC 2014).

NumPy only and fast, except the ``gpu`` test (CPU = GPU bit for bit), which the lead runs on a GPU.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hydra.utils import get_class, instantiate
from isles.algorithms.core.population import Population
from isles.algorithms.lshade.lshade import LSHADE, LSHADEParams, population_at
from isles.algorithms.lshade.operators import lehmer_mean
from isles.app import job
from isles.islands.config.build import build_algorithm
from isles.islands.control import checkpoint
from isles.islands.control.budget import evaluation_counts, evaluations_after, with_budget
from isles.islands.coordinator import Coordinator
from isles.problems.base import ScalableProblem
from isles.problems.cuda_check import compiler

from tests.helpers import island_ctx, make_cfg, plain


class _Sphere(ScalableProblem):
    """Shifted sphere ``sum (x - 1.5)^2`` on ``[-100, 100]^D`` (f* = 0, the optimum off the centre)."""

    name = "test_sphere"

    def __init__(self, dim=10, lower=-100.0, upper=100.0):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        Y = X - 1.5
        return (Y * Y).sum(axis=-1)


def _run(alg, ctx, n):
    s = alg.init(ctx)
    return alg.run(ctx, s, n)


def _equal_states(a: dict, b: dict):
    assert sorted(a) == sorted(b)
    for key in a:
        if isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


# -- parameters ---------------------------------------------------------------------------------
def test_default_parameters_are_the_papers():
    """Tanabe & Fukunaga 2014, Section IV: N_init = 18 D, N_min = 4, r_arc = 2.6, p = 0.11, H = 6."""
    p = LSHADEParams(dim=10)
    assert (p.r_N_init, p.N_min, p.r_arc, p.p, p.H) == (18.0, 4, 2.6, 0.11, 6)
    assert p.n_init == 180 and p.archive_capacity == 468 and p.E == 180
    alg = LSHADE(dim=30, max_generations=100)
    assert alg.initial_evaluations() == 540 and alg.evaluations_per_generation() == 540
    assert alg.params.max_nfe == 540 + 100 * 540
    assert alg.population_size() == 4  # what islands.n_migrants must fit
    cfg = plain(make_cfg("+experiment=lshade"))
    built = build_algorithm(cfg["algorithm"])
    assert built.params.n_init == 180 and built.params.E == 140 and built.params.max_generations == 100000


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dim": 10, "N_min": 3}, "algorithm.N_min=3"),
        ({"dim": 10, "p": 0}, "algorithm.p=0"),
        ({"dim": 10, "H": 0}, "algorithm.H=0"),
        ({"dim": 10, "r_arc": -1}, "algorithm.r_arc=-1"),
        ({"pop_size": 3}, "algorithm.pop_size=3"),
        ({"dim": 2.5}, "algorithm.dim=2.5"),
        ({"dim": 10, "evals_per_generation": 0}, "algorithm.evals_per_generation=0"),
        ({}, "algorithm.pop_size=None"),
    ],
)
def test_bad_parameters_are_one_line_naming_the_field(kwargs, field):
    with pytest.raises(ValueError) as err:
        LSHADEParams(**kwargs)
    assert str(err.value).startswith(f"{field}: allowed values are") and "\n" not in str(err.value)


def test_dim_must_be_the_problems():
    with pytest.raises(ValueError, match=r"^algorithm.dim=7: allowed value is the problem's dimension 10$"):
        LSHADE(dim=7).check_problem(_Sphere(10))


# -- population size schedule (LPSR, eq. 10) ------------------------------------------------------
def test_population_schedule_is_eq_10():
    """``round((N_min - N_init) / MAX_NFE * NFE + N_init)`` at hand-computed points (N_init = 180,
    N_min = 4, MAX_NFE = 180 + 99 * 180 = 18000)."""
    p = LSHADEParams(dim=10, max_generations=99)
    assert p.max_nfe == 18000
    assert population_at(p, 0) == 180
    assert population_at(p, 180) == 178  # 180 - 176 * 0.01 = 178.24
    assert population_at(p, 9000) == 92  # half way: 180 - 88
    assert population_at(p, 12375) == 59  # 180 - 176 * 0.6875 = 59.0
    assert population_at(p, 18000) == 4
    assert population_at(p, 10**6) == 4  # past the budget: N_min
    # the same formula in floats, at every evaluation count of the run
    for nfe in range(0, 18001, 7):
        assert population_at(p, nfe) == max(4, math.floor((4 - 180) / 18000 * nfe + 180 + 0.5 + 1e-9))


def test_run_follows_the_schedule_and_ends_at_n_min():
    """Each L-SHADE generation ends at the schedule's size for the evaluations done, and the
    population is N_min at the island's last evaluation (MAX_NFE)."""
    prob = _Sphere(5)
    alg = LSHADE(dim=5, max_generations=30, evals_per_generation=37)
    ctx = island_ctx(np, prob, islands=2)
    s = alg.init(ctx)
    seen = []
    for _ in range(30):
        s = alg.step(ctx, s)
        seen.append(s["n_active"])
        if s["cursor"] == 0:  # a generation just ended: its size follows eq. 10 at evals
            assert s["n_active"] == population_at(alg.params, s["evals"])
    assert s["evals"] == alg.params.max_nfe == 90 + 30 * 37
    assert seen[-1] == 4 and seen == sorted(seen, reverse=True)
    assert seen[:3] == [90, 90, 77]  # the first generation ends at NFE 180: 90 - 86 * 180 / 1200 = 77.1


# -- memory update (Algorithm 1, eqs. 6-9) ------------------------------------------------------
def test_weighted_lehmer_mean_on_a_hand_example():
    """S = (0.5, 0.8, 0.2) with improvements (1, 3, 0, not a success): weights 1/4, 3/4;
    mean_WL = (0.25 * 0.25 + 0.75 * 0.64) / (0.25 * 0.5 + 0.75 * 0.8) = 0.5425 / 0.725."""
    S = np.array([[0.5, 0.8, 0.2]])
    w = np.array([[1.0, 3.0, 5.0]])
    mask = np.array([[True, True, False]])
    mean, ok = lehmer_mean(np, S, w, mask)
    assert ok[0] and mean[0] == pytest.approx(0.5425 / 0.725, rel=1e-15)
    mean, ok = lehmer_mean(np, S, w, np.zeros_like(mask))
    assert not ok[0] and mean[0] == 0


def _one_generation_state(alg, ctx):
    """An initial state whose first L-SHADE generation's trials are built (not yet evaluated)."""
    s = alg.init(ctx)
    return alg._start_generation(ctx, s)


def test_memory_update_writes_slot_k_and_advances_it():
    """One generation by hand: trials 0 and 1 improve by 1 and 3 (F 0.5, 0.8; CR 0.2, 0.6), the
    rest do not. M_F[k] = Lehmer(F), M_CR[k] = Lehmer(CR), k -> k + 1; an island without success
    keeps its memory and k; where every successful CR is 0, M_CR[k] becomes terminal (-1)."""
    alg = LSHADE(pop_size=6, max_generations=10)
    ctx = island_ctx(np, _Sphere(3), islands=3)
    s = _one_generation_state(alg, ctx)
    f = s["f"][:, :6]
    fu = f + 1.0  # no trial improves ...
    fu[0, 0], fu[0, 1] = f[0, 0] - 1.0, f[0, 1] - 3.0  # ... except two on island 0
    fu[2, 3] = f[2, 3] - 2.0  # and one on island 2, with CR = 0
    F = np.full((3, 6), 0.3)
    CR = np.full((3, 6), 0.7)
    F[0, :2], CR[0, :2] = (0.5, 0.8), (0.2, 0.6)
    CR[2, 3] = 0.0
    s.update(F=F, CR=CR, fu=fu, vu=np.zeros_like(fu), cursor=6)
    out = alg._end_generation(ctx, s, nfe=12)
    w = np.array([1.0, 3.0])
    lehmer = lambda x: (w * x * x).sum() / (w * x).sum()  # noqa: E731
    assert out["M_F"][0, 0] == pytest.approx(lehmer(np.array([0.5, 0.8])), rel=1e-15)
    assert out["M_CR"][0, 0] == pytest.approx(lehmer(np.array([0.2, 0.6])), rel=1e-15)
    np.testing.assert_array_equal(out["M_F"][0, 1:], 0.5)
    np.testing.assert_array_equal(out["M_F"][1], 0.5)  # no success: unchanged
    np.testing.assert_array_equal(out["M_CR"][1], 0.5)
    assert out["M_F"][2, 0] == pytest.approx(0.3) and out["M_CR"][2, 0] == -1.0  # terminal value
    np.testing.assert_array_equal(out["k"], [1, 0, 1])
    # successful parents go to the archive; selection keeps the better
    np.testing.assert_array_equal(out["a_n"], [2, 0, 1])
    archived = {tuple(r) for r in out["A"][0, :2]}
    assert archived == {tuple(s["X"][0, 0]), tuple(s["X"][0, 1])}
    np.testing.assert_array_equal(out["X"][0, :2], s["U"][0, :2])
    np.testing.assert_array_equal(out["X"][1], s["X"][1])


def test_terminal_cr_memory_gives_cr_zero():
    alg = LSHADE(pop_size=20, max_generations=10)
    ctx = island_ctx(np, _Sphere(8), islands=1)
    s = alg.init(ctx)
    s["M_CR"] = np.full_like(s["M_CR"], -1.0)
    out = alg._start_generation(ctx, s)
    np.testing.assert_array_equal(out["CR"], 0.0)
    # CR = 0: the trial differs from its target in exactly one coordinate (j_rand)
    np.testing.assert_array_equal((out["U"] != s["X"][:, :20]).sum(axis=-1), 1)


def test_f_is_in_0_1_and_its_distribution_is_the_truncated_cauchy():
    """F_i = randc(M_F, 0.1) regenerated while <= 0 and cut at 1: with M_F = 0.05 about
    P(F <= 0) = 0.352 of the raw Cauchy is redrawn, so P(F <= 0.05 | F > 0) = (0.5 - 0.352) / 0.648."""
    alg = LSHADE(pop_size=4000, max_generations=10)
    ctx = island_ctx(np, _Sphere(2), islands=1)
    s = alg.init(ctx)
    s["M_F"] = np.full_like(s["M_F"], 0.05)
    F = alg._start_generation(ctx, s)["F"]
    assert (F > 0).all() and (F <= 1).all()
    c0 = 0.5 + math.atan(-0.5) / math.pi
    assert (F <= 0.05).mean() == pytest.approx((0.5 - c0) / (1 - c0), abs=0.025)


# -- behaviour -----------------------------------------------------------------------------------
def test_sphere_d10_error_below_1e8_within_1e5_evaluations():
    """CEC rules on a shifted sphere: error < 1e-8 by 1e5 evaluations (seed 4, one island)."""
    alg = LSHADE(dim=10, max_generations=713, evals_per_generation=140)
    ctx = island_ctx(np, _Sphere(10), islands=1)
    s = _run(alg, ctx, 713)
    assert s["evals"] == 100_000
    assert s["f"][0, : s["n_active"]].min() < 1e-8


def test_archive_stays_within_its_bound_and_holds_old_parents():
    alg = LSHADE(dim=4, max_generations=40, evals_per_generation=23)
    prob = _Sphere(4)
    ctx = island_ctx(np, prob, islands=2)
    s = alg.init(ctx)
    fills = []
    for _ in range(40):
        s = alg.step(ctx, s)
        bound = round(2.6 * s["n_active"] + 1e-9) if s["cursor"] == 0 else alg.params.archive_capacity
        assert (s["a_n"] <= bound).all() and (s["a_n"] >= 0).all()
        fills.append(int(s["a_n"].max()))
        for i in range(2):
            A = s["A"][i, : s["a_n"][i]]
            assert ((A >= -100) & (A <= 100)).all()
    assert max(fills) > 20  # the archive did fill up
    assert s["A"].shape == (2, 187, 4)


def test_state_shapes_stay_at_capacity():
    alg = LSHADE(dim=3, max_generations=20)
    ctx = island_ctx(np, _Sphere(3), islands=2)
    s = _run(alg, ctx, 20)
    assert s["X"].shape == (2, 54, 3) and s["f"].shape == s["v"].shape == (2, 54)
    assert s["n_active"] == 4 and alg.population(s).shape == (2, 4)


def test_reproducible_and_independent_of_batching():
    """Island 1 of a batch of two equals the same island alone (counter-based randomness)."""
    alg = LSHADE(dim=4, max_generations=15, evals_per_generation=31)
    prob = _Sphere(4)
    both = _run(alg, island_ctx(np, prob, islands=2, seed=9), 15)
    from isles.algorithms.core.base import Context  # noqa: PLC0415
    from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415

    ctx1 = Context(np, np.float64, island_ctx(np, prob).evaluator, CounterRNG(np, 9, [1]))
    alone = _run(alg, ctx1, 15)
    for key in ("X", "f", "A", "a_n", "M_F", "M_CR", "k"):
        np.testing.assert_array_equal(both[key][1], alone[key][0], err_msg=key)


def test_pending_generation_resumes_bit_for_bit():
    """A state saved in the middle of an L-SHADE generation (pending trials) and copied goes on
    exactly as the uninterrupted run: what a checkpoint between runtime generations relies on."""
    alg = LSHADE(dim=5, max_generations=12, evals_per_generation=50)
    ctx = island_ctx(np, _Sphere(5), islands=2)
    s = alg.run(ctx, alg.init(ctx), 5)
    assert s["cursor"] > 0  # mid-generation
    saved = copy.deepcopy(s)
    whole = alg.run(ctx, s, 7)
    resumed = alg.run(ctx, saved, 7)
    _equal_states(whole, resumed)


def test_migration_writes_active_rows_and_keeps_archive_and_memories():
    alg = LSHADE(dim=3, max_generations=10)
    ctx = island_ctx(np, _Sphere(3), islands=2)
    s = alg.run(ctx, alg.init(ctx), 4)
    n = s["n_active"]
    imm = Population(np.full((2, 2, 3), 1.5), np.zeros((2, 2)), np.zeros((2, 2)), {})
    idx = np.array([[0, n - 1], [2, 3]])
    out = alg.replace(ctx, s, idx, imm)
    np.testing.assert_array_equal(out["X"][0, [0, n - 1]], 1.5)
    np.testing.assert_array_equal(out["X"][1, [2, 3]], 1.5)
    assert out["X"].shape == s["X"].shape and out["n_active"] == n
    for key in ("A", "a_n", "M_F", "M_CR", "k", "U", "F", "CR", "fu"):
        np.testing.assert_array_equal(out[key], s[key], err_msg=key)
    assert (alg.best(out).f[:, 0] == 0).all()
    # the immigrants take part in the next generations
    after = alg.run(ctx, out, 3)
    assert (alg.best(after).f[:, 0] == 0).all()


# -- the runtime: migration, budget, checkpoints, constraints ---------------------------------------
COMMON = ["logger=none", "progress=false", "device=cpu", "problem=sphere", "problem.dim=4"]
#: a 2-island run of 24 generations of 50 evaluations, checkpointed and resumed mid L-SHADE generation
RESUMED = [
    *COMMON,
    "stop.max_evaluations=null",
    "islands.n=2",
    "topology=ring",
    "islands.migration_interval=2",
    "algorithm.evals_per_generation=50",
    "algorithm.max_generations=24",
    "quiet=true",
]


def _coordinator_run(*overrides):
    """An in-process run, its plain config and the points its problem counted; the budget sets
    ``generations`` before ``${generations}`` resolves, as ``run.py`` does (:func:`with_budget`)."""
    cfg = plain(with_budget(make_cfg("+experiment=lshade", *COMMON, *overrides)))
    counter = get_class(cfg["problem"]["_target_"])
    counter.points = 0
    result = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()
    return result, cfg, counter.points


def test_islands_migrate_into_lshade():
    """Two L-SHADE islands on a ring, one actor: migrations happen and are accepted."""
    result, _, _ = _coordinator_run(
        "islands.n=2", "topology=ring", "islands.migration_interval=3", "stop.max_evaluations=20000"
    )
    assert result.migration_count > 0 and result.migrations_accepted > 0
    assert result.best_f < 1e-6


@pytest.mark.parametrize(
    ("budget", "n", "epg"),
    [(19744, 2, 140), (19744, 2, None), (20001, 2, None), (20000, 4, 33), (777, 1, None)],
)
def test_budget_is_exact(budget, n, epg):
    """``stop.max_evaluations`` = the points a user's counter sees, exactly the budget: each of the
    ``islands.n`` islands spends ``ceil(budget / islands.n)``, its last generation only what is left
    (before: the first generation past the budget, 19,872 for 19,744 with ``E = N_init = 72``);
    where ``islands.n`` does not divide the budget, fewer than ``islands.n`` evaluations past it.
    LPSR spans exactly the island's share (``MAX_NFE``), so the population ends at ``N_min``."""
    extra = [f"algorithm.evals_per_generation={'null' if epg is None else epg}"]
    result, cfg, points = _coordinator_run(
        "problem._target_=tests.test_budget.PointCounter",
        "++problem.lower=-1.0",
        "++problem.upper=1.0",
        f"islands.n={n}",
        f"stop.max_evaluations={budget}",
        *extra,
    )
    share = -(-budget // n)
    assert result.evaluations == points == n * share
    assert budget <= result.evaluations < budget + n
    alg = build_algorithm(cfg["algorithm"])
    assert alg.params.budget == share and alg.params.max_nfe == share
    # the generations are the formula's (the first generation that reaches the budget)
    counts = evaluation_counts(alg)
    assert (
        evaluations_after(result.generations - 1, n, counts)
        < budget
        <= evaluations_after(result.generations, n, counts)
    )


def test_budget_ends_inside_a_generation_at_n_min():
    """The island's last runtime generation evaluates only what is left (37 of E = 50 here), and the
    population is N_min at its last evaluation: LPSR's MAX_NFE is the budget, not ``N_init + g E``."""
    prob = _Sphere(4)
    alg = LSHADE(
        dim=4, max_generations=30, evals_per_generation=50, max_evaluations=2 * (72 + 10 * 50 + 37), n_islands=2
    )
    assert alg.params.budget == 609 and alg.params.max_nfe == 609
    ctx = island_ctx(np, prob, islands=2)
    s = alg.init(ctx)
    evals = []
    for _ in range(12):
        s = alg.step(ctx, s)
        evals.append(s["evals"])
    assert evals[9:] == [572, 609, 609]  # 10 whole generations, then 37, then nothing
    assert s["n_active"] == 4 and s["generation"] == 12


def test_constrained_problem_by_feasibility_rules():
    """g07 (CEC 2006, f* = 24.3062091) under Deb's rules: a feasible point near f*."""
    result, _, _ = _coordinator_run("problem=g07", "~problem.dim", "algorithm.dim=10", "stop.max_evaluations=30000")
    assert result.best_v == 0 and result.best_f < 24.306209 + 0.5


def test_checkpoint_resume_is_bit_identical(tmp_path):
    """A run saved at generation 10 and resumed to 24 ends where the run of 24 in one go ends."""
    common = ["+experiment=lshade", *RESUMED]
    whole = job.run_job(make_cfg(*common, "generations=24"), use_ray=False)[0]
    path = tmp_path / "ck.pkl"
    job.run_job(make_cfg(*common, "generations=10", "checkpoint.every=1", f"checkpoint.path={path}"), use_ray=False)
    saved = checkpoint.load(path)
    assert saved["done_gens"] == 10 and saved["states"][0]["cursor"] > 0  # saved mid L-SHADE generation
    resumed = job.run_job(make_cfg(*common, "generations=24", f"checkpoint.resume={path}"), use_ray=False)[0]
    assert resumed.generations == whole.generations == 24
    assert resumed.evaluations == whole.evaluations == 2 * (72 + 24 * 50)
    assert resumed.best_f == whole.best_f
    np.testing.assert_array_equal(resumed.best_x, whole.best_x)


def test_adapted_parameters_report_the_memories():
    """Means over the memory per island (the terminal value as 0), the population and archive fill."""
    alg = LSHADE(dim=3, max_generations=10)
    ctx = island_ctx(np, _Sphere(3), islands=2)
    s = alg.run(ctx, alg.init(ctx), 3)
    s["M_CR"] = np.array([[0.2, -1.0, 0.4, 0.6, 0.8, 1.0], [0.5] * 6])
    out = alg.adapted_parameters(s)
    np.testing.assert_allclose(out["M_CR"], [3.0 / 6, 0.5])
    np.testing.assert_allclose(out["M_F"], s["M_F"].mean(axis=1))
    assert (out["pop_size"] == s["n_active"]).all() and list(out["archive"]) == list(s["a_n"])


def test_checkpoint_regroups_islands_over_other_actors():
    """A state of two islands saved mid-generation and regrouped as two groups of one
    (:func:`isles.islands.control.checkpoint.regroup`, a resume on more actors) goes on as the pair does."""
    from isles.algorithms.core.base import Context  # noqa: PLC0415
    from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415

    alg = LSHADE(dim=4, max_generations=12, evals_per_generation=31)
    prob = _Sphere(4)
    pair = island_ctx(np, prob, islands=2, seed=3)
    s = alg.run(pair, alg.init(pair), 5)
    assert s["cursor"] > 0
    parts = checkpoint.regroup([copy.deepcopy(s)], [[0, 1]], [[0], [1]], alg.island_axes)
    whole = alg.run(pair, s, 7)
    for i, part in enumerate(parts):
        ctx = Context(np, np.float64, pair.evaluator, CounterRNG(np, 3, [i]))
        alone = alg.run(ctx, part, 7)
        for key in ("X", "f", "v", "A", "a_n", "M_F", "M_CR", "k", "U", "fu"):
            np.testing.assert_array_equal(alone[key][0], whole[key][i], err_msg=key)
        assert alone["n_active"] == whole["n_active"] and alone["cursor"] == whole["cursor"]


def test_best_includes_evaluated_trials_of_the_unfinished_generation():
    """A run may end with trials evaluated but not yet selected (cursor > 0): the best reported is
    the best point evaluated, among them too."""
    alg = LSHADE(dim=3, max_generations=10, evals_per_generation=5)
    ctx = island_ctx(np, _Sphere(3), islands=2)
    s = alg.step(ctx, alg.init(ctx))
    assert s["cursor"] == 5
    s["fu"] = s["fu"].copy()
    s["fu"][1, 2] = -1.0  # a pending trial of island 1 better than every resident
    b = alg.best(s)
    assert b.f[1, 0] == -1.0 and (b.genome[1, 0] == s["U"][1, 2]).all()
    assert b.f[0, 0] == min(s["f"][0, :54].min(), s["fu"][0].min())


@pytest.mark.skipif(compiler() is None, reason="no C compiler")
def test_cpu_run_takes_the_host_build_unless_host_kernel_is_false():
    """A ``device=cpu`` run of L-SHADE on a problem with a fused objective runs the epoch kernel's
    host build (``algorithm.host_kernel=auto``, the default; the run's ``gpu_paths`` say so), with
    the exact budget; ``algorithm.host_kernel=false`` keeps the NumPy array code. Both reach the
    sphere's optimum: the same search, up to the math library's last bit."""
    runs = {}
    for mode in ("auto", "false"):
        result, _, _ = _coordinator_run("islands.n=2", "stop.max_evaluations=12000", f"algorithm.host_kernel={mode}")
        runs[mode] = result
        assert result.evaluations == 12000
        assert result.best_f < 1e-6
    assert set(runs["auto"].gpu_paths.values()) == {"host kernel"}
    assert set(runs["false"].gpu_paths.values()) == {"numpy"}
