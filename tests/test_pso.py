"""PSO helpers, EPSO and the CMEPSO master swarm on NumPy (seed 001 eqs. 1-14)."""

import numpy as np
import pytest
from isles.algorithms.core.base import Context
from isles.algorithms.core.population import Population
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.pso.cmepso import MasterSwarm
from isles.algorithms.pso.epso import EPSO
from isles.algorithms.pso.pso import PSO, boundary_correction, inertia_weight, vmax_schedule
from isles.islands.config.schema import validated
from isles.problems.constraints import Evaluator, better, feasibility_report
from isles.problems.registry import make_problem

from tests.helpers import cmepso_run, make_cfg, plain

STATE_SHAPES = {  # key -> shape as a function of (I, N, D)
    "x": "IND",
    "vel": "IND",
    "pbest": "IND",
    "pbest_f": "IN",
    "pbest_v": "IN",
    "gbest": "ID",
    "gbest_f": "I",
    "gbest_v": "I",
    "attractor": "ID",
    "attractor_f": "I",
    "attractor_v": "I",
}


def ctx_for(problem, seed=0, streams=(0, 1), dtype=np.float64):
    return Context(np, np.dtype(dtype), Evaluator(problem), CounterRNG(np, seed, streams))


def run(alg, ctx, n):
    return alg.run(ctx, alg.init(ctx), n)


# -- helpers (eqs. 3-5) -------------------------------------------------------------------------
def test_inertia_schedule_endpoints():
    assert inertia_weight(1, 1000, 0.9, 0.4) == pytest.approx(0.9)
    assert inertia_weight(1000, 1000, 0.9, 0.4) == pytest.approx(0.4)
    assert inertia_weight(500.5, 1000, 0.9, 0.4) == pytest.approx(0.65, abs=1e-3)
    assert inertia_weight(5000, 1000, 0.9, 0.4) == pytest.approx(0.4)  # clamped after the schedule
    assert inertia_weight(1, 1, 0.9, 0.4) == pytest.approx(0.9)
    ws = [inertia_weight(k, 50, 0.9, 0.4) for k in range(1, 51)]
    assert np.all(np.diff(ws) < 0)


def test_vmax_schedule_endpoints():
    assert vmax_schedule(1, 1000, 0.5, 1e-6) == pytest.approx(0.5)
    assert vmax_schedule(1000, 1000, 0.5, 1e-6) == pytest.approx(1e-6)
    assert vmax_schedule(700, 1000, 0.5, 0.5) == 0.5  # constant clamp
    assert vmax_schedule(700, 1000, 0.0, 1e-6) == 0.0  # disabled


@pytest.mark.parametrize("mode", ["overshoot", "range"])
def test_boundary_correction_keeps_box_and_flips_velocity(mode):
    p = make_problem("speed_reducer")  # x2 in [0.7, 0.8]: narrower than the seed's absolute COR
    ctx = ctx_for(p)
    rng = np.random.default_rng(1)
    span = p.upper - p.lower
    x = p.lower + rng.uniform(-2, 3, (2, 500, 7)) * span
    vel = rng.normal(size=x.shape)
    u = rng.uniform(size=x.shape)
    xc, vc = boundary_correction(ctx, x, vel, u, 1.0, mode)
    assert np.all(xc >= p.lower) and np.all(xc <= p.upper)
    out = (x < p.lower) | (x > p.upper)
    assert out.any() and (~out).any()
    np.testing.assert_array_equal(vc[out], -vel[out])
    np.testing.assert_array_equal(vc[~out], vel[~out])
    np.testing.assert_array_equal(xc[~out], x[~out])
    # a tiny overshoot lands within COR * overshoot of the bound in "overshoot" mode
    xs = np.broadcast_to(p.lower - 1e-9, (1, 1, 7))
    xt, _ = boundary_correction(ctx, xs, np.ones_like(xs), np.full_like(xs, 0.999), 0.22, mode)
    limit = 0.22 * 1e-9 if mode == "overshoot" else 0.22 * span
    assert np.all(xt - p.lower <= limit * (1 + 1e-6))
    with pytest.raises(ValueError, match="algorithm.cor_mode"):
        boundary_correction(ctx, x, vel, u, 0.22, "clip")


# -- EPSO ---------------------------------------------------------------------------------------
def test_epso_sphere_converges():
    ctx = ctx_for(make_problem("sphere", dim=5))
    s = run(EPSO(max_iterations=300), ctx, 300)
    assert np.all(s["gbest_f"] < 1e-6)
    assert np.all(s["gbest_v"] == 0)


def test_pso_sphere_converges():
    ctx = ctx_for(make_problem("sphere", dim=5))
    s = run(PSO(max_iterations=300), ctx, 300)
    assert np.all(s["gbest_f"] < 1e-3)
    assert s["evals"] == 40 * 301


def test_epso_state_shapes_and_monotone_gbest():
    p = make_problem("welded_beam")  # constrained: infeasible at first, Deb's rules matter
    ctx = ctx_for(p, streams=(3, 4, 5))
    alg = EPSO(n_particles=12, n_replicas=3)
    s = alg.init(ctx)
    I, N, D = 3, 12, 4
    dims = {"I": I, "N": N, "D": D}
    for g in range(40):
        for key, sh in STATE_SHAPES.items():
            assert s[key].shape == tuple(dims[c] for c in sh), key
            assert s[key].dtype == np.float64, key
        assert s["generation"] == g and s["evals"] == N + g * N * 4
        prev = s
        s = alg.step(ctx, s)
        assert not np.any(better(prev["gbest_f"], prev["gbest_v"], s["gbest_f"], s["gbest_v"]))
        assert not np.any(better(prev["pbest_f"], prev["pbest_v"], s["pbest_f"], s["pbest_v"]))
    assert np.all(s["x"] >= p.lower) and np.all(s["x"] <= p.upper)
    assert int(s["nan_evals"]) == 0
    pop = alg.population(s)
    assert pop.genome.shape == (I, N, D) and pop.f.shape == pop.v.shape == (I, N)
    assert set(pop.extras) == {"x", "vel"} and pop.extras["vel"].shape == (I, N, D)
    b = alg.best(s)
    assert b.genome.shape == (I, 1, D) and b.f.shape == b.v.shape == (I, 1)
    np.testing.assert_array_equal(b.f[:, 0], s["gbest_f"])


def test_epso_float32_stays_float32():
    ctx = ctx_for(make_problem("spring"), dtype=np.float32)
    s = run(EPSO(n_particles=8, n_replicas=2, c3=1.0), ctx, 3)
    for key in STATE_SHAPES:
        assert s[key].dtype == np.float32, key


def test_replace_puts_immigrants_in_with_their_velocity():
    ctx = ctx_for(make_problem("sphere", dim=3))
    alg = EPSO(n_particles=6)
    s = run(alg, ctx, 2)
    idx = np.array([[1, 4], [0, 5]])
    X = np.zeros((2, 2, 3))
    X[0, 1] = 1.0
    f, v, _ = ctx.evaluator(X)
    vel = np.full((2, 2, 3), 0.25)
    pos = X + 0.5
    imm = Population(X, f, v, {"x": pos, "vel": vel})
    r = alg.replace(ctx, s, idx, imm)
    for i in range(2):
        np.testing.assert_array_equal(r["pbest"][i, idx[i]], X[i])
        np.testing.assert_array_equal(r["x"][i, idx[i]], pos[i])
        np.testing.assert_array_equal(r["pbest_f"][i, idx[i]], f[i])
        np.testing.assert_array_equal(r["vel"][i, idx[i]], 0.25)  # the immigrant keeps moving
    assert np.all(r["gbest_f"] == 0)  # the immigrant at the optimum became the global best
    # an immigrant without extras (the master swarm's best) arrives with zero velocity
    bare = Population(X, f, v).conform(alg.population(s))
    r2 = alg.replace(ctx, s, idx, bare)
    np.testing.assert_array_equal(r2["vel"][0, idx[0]], 0.0)


def test_same_seed_identical_different_seed_differs():
    p = make_problem("spring")
    alg = EPSO(n_particles=10, n_replicas=2)
    a = run(alg, ctx_for(p, seed=7), 15)
    b = run(alg, ctx_for(p, seed=7), 15)
    c = run(alg, ctx_for(p, seed=8), 15)
    for key in STATE_SHAPES:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["x"], c["x"])


def test_islands_do_not_mix():
    p = make_problem("welded_beam")
    alg = EPSO(n_particles=10, n_replicas=3, c3=1.5)
    batch = run(alg, ctx_for(p, seed=3, streams=(0, 1)), 20)
    alone = run(alg, ctx_for(p, seed=3, streams=(1,)), 20)
    for key in STATE_SHAPES:
        np.testing.assert_array_equal(batch[key][1], alone[key][0])


def test_unset_attractor_means_no_c3_term():
    p = make_problem("spring")
    a = run(EPSO(n_particles=8, c3=2.02), ctx_for(p), 10)
    b = run(EPSO(n_particles=8, c3=0.0), ctx_for(p), 10)
    np.testing.assert_array_equal(a["x"], b["x"])
    s = EPSO.set_attractor(b, b["gbest"], b["gbest_f"], b["gbest_v"])
    alg = EPSO(n_particles=8, c3=2.02)
    assert not np.array_equal(alg.step(ctx_for(p), s)["x"], EPSO(n_particles=8).step(ctx_for(p), s)["x"])


@pytest.mark.parametrize(
    "cls, field, value",
    [
        (EPSO, "n_particles", 0),
        (PSO, "n_particles", 0),
        (EPSO, "n_replicas", -1),
        (EPSO, "cor", 1.5),
        (EPSO, "sigma", -0.1),
        (PSO, "max_iterations", 2.5),
        (EPSO, "vmax_fraction", -1),
        (EPSO, "c3", float("nan")),
    ],
)
def test_params_validation(cls, field, value):
    with pytest.raises(ValueError, match=f"algorithm.{field}="):
        cls(**{field: value})
    with pytest.raises(ValueError, match="algorithm.cor_mode"):
        cls(cor_mode="absolute")


# -- CMEPSO -------------------------------------------------------------------------------------
def cmepso(*overrides):
    """A CMEPSO run of the runtime in this process on NumPy (:func:`tests.helpers.cmepso_run`)."""
    return cmepso_run("device=cpu", *overrides)


def test_master_init_cycles_slaves_and_sets_attractor():
    p = make_problem("spring")
    ctx = ctx_for(p, streams=(9,))
    rng = np.random.default_rng(0)
    sx = p.lower + rng.uniform(size=(3, 3)) * (p.upper - p.lower)
    sf, sv = np.array([3.0, 1.0, 2.0]), np.array([0.0, 0.0, 0.5])
    master = MasterSwarm(n_particles=7)
    m = master.init(ctx, sx, sf, sv)
    np.testing.assert_array_equal(m["pbest"][0], sx[np.arange(7) % 3])
    np.testing.assert_array_equal(m["attractor"][0], sx[1])
    assert m["attractor_f"][0] == 1.0 and m["gbest_f"][0] == 1.0
    assert master.params.c3 == 2.02 and master.params.n_replicas == 5
    m = master.run_epoch(ctx, m, sx, sf, sv, 3)
    x, f, v = master.best(m)
    assert x.shape == (3,) and np.ndim(f) == 0 and np.ndim(v) == 0 and m["generation"] == 3
    with pytest.raises(ValueError, match="n_islands"):
        master.init(ctx_for(p), sx, sf, sv)


def test_cmepso_exchange_interval_and_errors():
    """3 slaves exchange with the master every 4 generations of 10: epochs end at 4, 8 and 10, and
    slaves and master make every generation's evaluations (slaves: 40 at the start and 40 (1 + 5
    replicas) a generation each; master: 10 (1 + 5) a generation, from the slaves' evaluated bests)."""
    result = cmepso("problem=spring", "islands.n=3", "islands.migration_interval=4", "generations=10")
    assert [r.generation for r in result.history] == [4, 8, 10]
    assert result.evaluations == 3 * (40 + 10 * 240) + 10 * 60
    assert np.isfinite(result.history[-1].plugin_metrics["master_best_f"])
    with pytest.raises(ValueError, match="islands.migration_interval"):
        validated(plain(make_cfg("+experiment=cmepso", "islands.migration_interval=0")))


@pytest.mark.slow
@pytest.mark.parametrize("iterations, tol", [(300, 1e-2), (1000, 1e-3)])
def test_cmepso_welded_beam_quality(iterations, tol):
    p = make_problem("welded_beam")
    result = cmepso(f"generations={iterations}")
    rep = feasibility_report(p, np.asarray(result.best_x))
    assert rep["feasible"] and float(result.best_v) == 0
    assert rep["f"] <= p.f_star * (1 + tol), rep["f"]
    assert rep["f"] >= p.f_star * (1 - 1e-9)


def test_vmax_fraction_zero_means_no_clamp_at_init():
    # SPSO-2011 initial velocities y - x are as large as the box allows; vmax_fraction=0 keeps them
    ctx = ctx_for(make_problem("sphere", dim=4))
    free = PSO(n_particles=64, vmax_fraction=0.0).init(ctx)["vel"]
    clamped = PSO(n_particles=64, vmax_fraction=0.01).init(ctx)["vel"]
    span = ctx.upper - ctx.lower
    assert np.abs(free).max() > 0.1 * span.max()
    assert np.all(np.abs(clamped) <= 0.01 * span + 1e-12)
