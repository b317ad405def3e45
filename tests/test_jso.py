"""Tests of jSO (algorithms/lshade/jso.py; Brest, Maučec & Bošković, CEC 2017): L-SHADE's state and
runtime (tests/test_lshade.py) with jSO's defaults, schedules and memory update. NumPy only, fast."""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.lshade.jso import JSO, JSOParams
from isles.algorithms.lshade.operators import pbest_indices

from tests.helpers import island_ctx
from tests.test_lshade import _run, _Sphere


def test_jso_defaults_are_the_papers():
    """Brest et al. 2017: N_init = round(25 ln(D) sqrt(D)), H = 5, r_arc = 1, p = 0.25, M_F = 0.3,
    M_CR = 0.8 at the start."""
    assert JSOParams(dim=10).n_init == 182 and JSOParams(dim=30).n_init == 466  # 182.03, 465.8
    p = JSOParams(dim=10)
    assert (p.H, p.r_arc, p.p, p.N_min) == (5, 1.0, 0.25, 4)
    alg = JSO(dim=4, max_generations=10)
    s = alg.init(island_ctx(np, _Sphere(4), islands=1))
    assert (
        (s["M_F"] == 0.3).all() and (s["M_CR"] == 0.8).all() and s["A"].shape[1] == 69
    )  # N_init = round(69.3), |A| = N_init
    with pytest.raises(ValueError, match=r"^algorithm.dim=1: allowed values are integers >= 2"):
        JSOParams(dim=1)


def test_jso_schedules():
    """F_w / F = 0.7, 0.8, 1.2; p = 0.25 (1 - 0.5 nfe / MAX_NFE); pbest != i before half the budget;
    CR floors 0.7, 0.6 and the F cap 0.7; the last slot gives 0.9."""
    alg = JSO(pop_size=100, max_generations=9)  # MAX_NFE = 1000
    assert [alg._pbest_weight(e) for e in (0, 199, 200, 399, 400, 1000)] == [0.7, 0.7, 0.8, 0.8, 1.2, 1.2]
    assert alg._pbest_count(100, 0) == 25 and alg._pbest_count(100, 1000) == 13 and alg._pbest_count(4, 0) == 2
    assert alg._pbest_not_self(499) and not alg._pbest_not_self(500)
    F, CR = np.array([0.9, 0.2]), np.array([0.1, 0.9])
    np.testing.assert_array_equal(alg._repair(np, F, CR, 100)[1], [0.7, 0.9])
    np.testing.assert_array_equal(alg._repair(np, F, CR, 300)[1], [0.6, 0.9])
    np.testing.assert_array_equal(alg._repair(np, F, CR, 500)[1], [0.1, 0.9])
    np.testing.assert_array_equal(alg._repair(np, F, CR, 599)[0], [0.7, 0.2])
    np.testing.assert_array_equal(alg._repair(np, F, CR, 600)[0], [0.9, 0.2])
    mf, mcr = alg._slot_means(np, np.array([[0.1, 0.2]]), np.array([[0.3, -1.0]]), np.array([[4, 1]]))
    np.testing.assert_array_equal(mf, [[0.9, 0.2]])
    np.testing.assert_array_equal(mcr, [[0.9, -1.0]])


def test_pbest_excludes_self_exactly_and_uniformly():
    """pnum = 3: an individual among the 3 best draws the other two with probability 1/2 each;
    one outside draws each of the 3 with 1/3; without the rule, any of the 3."""
    order = np.array([[2, 0, 4, 1, 3]])
    u = np.linspace(0, 1, 600, endpoint=False)
    picks = {i: [] for i in range(5)}
    for x in u:
        pb = pbest_indices(np, order, np.full((1, 5), x), 3, True)[0]
        for i in range(5):
            picks[i].append(pb[i])
    for i in range(5):
        counts = {j: picks[i].count(j) for j in set(picks[i])}
        if i in (2, 0, 4):
            assert set(counts) == {2, 0, 4} - {i} and set(counts.values()) == {300}
        else:
            assert set(counts) == {2, 0, 4} and set(counts.values()) == {200}
    free = {int(pbest_indices(np, order, np.full((1, 5), x), 3, False)[0, 2]) for x in u}
    assert free == {2, 0, 4}


def test_jso_memory_is_the_mean_of_old_and_lehmer():
    alg = JSO(pop_size=6, max_generations=10)
    ctx = island_ctx(np, _Sphere(3), islands=1)
    s = alg._start_generation(ctx, alg.init(ctx), 0)
    f = s["f"][:, :6]
    fu = f + 1.0
    fu[0, 0], fu[0, 1] = f[0, 0] - 1.0, f[0, 1] - 3.0
    F, CR = np.full((1, 6), 0.3), np.full((1, 6), 0.7)
    F[0, :2], CR[0, :2] = (0.5, 0.8), (0.2, 0.6)
    s.update(F=F, CR=CR, fu=fu, vu=np.zeros_like(fu), cursor=6)
    out = alg._end_generation(ctx, s, nfe=12)
    w = np.array([1.0, 3.0])
    lehmer = lambda x: (w * x * x).sum() / (w * x).sum()  # noqa: E731
    assert out["M_F"][0, 0] == pytest.approx((lehmer(np.array([0.5, 0.8])) + 0.3) / 2, rel=1e-15)
    assert out["M_CR"][0, 0] == pytest.approx((lehmer(np.array([0.2, 0.6])) + 0.8) / 2, rel=1e-15)


def test_jso_sphere_d10_error_below_1e8_within_1e5_evaluations():
    alg = JSO(dim=10, max_generations=713, evals_per_generation=140)  # 182 + 713 * 140 = 100002
    s = _run(alg, island_ctx(np, _Sphere(10), islands=1), 713)
    assert s["evals"] == 100_002 and s["n_active"] == 4
    assert s["f"][0, :4].min() < 1e-8


# -- the runtime: migration, checkpoints and the exact budget (what jSO shares with L-SHADE) ----------
def test_jso_islands_migrate_and_spend_the_budget_exactly():
    """``+experiment=lshade algorithm=jso``: two jSO islands on a ring migrate and accept immigrants,
    spend exactly the budget (each island's last generation what is left of its 10,001 share), and
    solve the sphere."""
    from tests.test_lshade import _coordinator_run  # noqa: PLC0415

    result, cfg, _ = _coordinator_run(
        "algorithm=jso", "islands.n=2", "topology=ring", "islands.migration_interval=3", "stop.max_evaluations=20002"
    )
    assert cfg["algorithm"]["_target_"].endswith("JSO")
    assert result.migration_count > 0 and result.migrations_accepted > 0
    assert result.evaluations == 20002 and result.best_f < 1e-6


def test_jso_checkpoint_resume_is_bit_identical(tmp_path):
    """A jSO run saved mid L-SHADE generation at generation 10 and resumed to 24 ends where the run
    of 24 in one go ends (its schedules read the evaluations, which the state carries)."""
    from isles.app import job  # noqa: PLC0415
    from isles.islands.control import checkpoint  # noqa: PLC0415

    from tests.helpers import make_cfg  # noqa: PLC0415
    from tests.test_lshade import RESUMED  # noqa: PLC0415

    common = ["+experiment=lshade", "algorithm=jso", *RESUMED]
    whole = job.run_job(make_cfg(*common, "generations=24"), use_ray=False)[0]
    path = tmp_path / "ck.pkl"
    job.run_job(make_cfg(*common, "generations=10", "checkpoint.every=1", f"checkpoint.path={path}"), use_ray=False)
    assert checkpoint.load(path)["states"][0]["cursor"] > 0
    resumed = job.run_job(make_cfg(*common, "generations=24", f"checkpoint.resume={path}"), use_ray=False)[0]
    assert resumed.evaluations == whole.evaluations and resumed.best_f == whole.best_f
    np.testing.assert_array_equal(resumed.best_x, whole.best_x)
