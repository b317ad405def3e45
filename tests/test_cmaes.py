"""CPU tests of the batched CMA-ES with IPOP/BIPOP restarts (algorithms/cmaes/, issue 28).

Against published reference behaviour: the 2016 tutorial's default parameters (arXiv:1604.00772,
Table 1), log-linear convergence on the sphere, learning the ellipsoid's Hessian, cumulative
step-size adaptation on a linear function, IPOP's doubling and BIPOP's regime choice, and a run
without restarts. The runtime side (migration, budget, checkpoints, ...) is in
tests/test_cmaes_runtime.py. NumPy only, seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from isles.algorithms.cmaes.cmaes import CMAES
from isles.algorithms.cmaes.strategy import default_pop_size, strategy_parameters
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.problems.base import ScalableProblem
from isles.problems.constraints import Evaluator


class Ellipsoid(ScalableProblem):
    """``sum_i cond^((i-1)/(n-1)) (x_i - shift)^2``; ``cond = 1``: the sphere."""

    name = "test_ellipsoid"

    def __init__(self, dim=10, cond=1.0, lower=-5.0, upper=5.0, shift=0.0):
        super().__init__(dim, lower, upper, f_star=0.0)
        self.cond, self.shift = cond, shift

    def objective(self, X):
        n = X.shape[-1]
        c = self.cond ** (np.arange(n) / max(1, n - 1))
        Y = X - self.shift
        return (c * Y * Y).sum(axis=-1)


class Flat(ScalableProblem):
    """``f = 0`` everywhere: only TolFun ends a run, after exactly ``10 + ceil(30 n / lambda)``
    iterations."""

    name = "test_flat"

    def __init__(self, dim=2):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)

    def objective(self, X):
        return np.zeros(X.shape[:-1])


class Linear(ScalableProblem):
    """``f = x_0`` in a box too wide to matter."""

    name = "test_linear"

    def __init__(self, dim=10):
        super().__init__(dim, -1e12, 1e12, f_star=0.0)

    def objective(self, X):
        return X[..., 0]


def ctx_of(problem, islands=2, seed=1):
    return Context(np, np.float64, Evaluator(problem), CounterRNG(np, seed, list(range(islands))))


def run_until(alg, ctx, state, target, max_generations):
    """Steps until every island's best is below ``target``: ``(state, evaluations at the hit (I,),
    trace [(evaluations, best f (I,))])``."""
    hit = np.full(ctx.n_islands, -1)
    trace = []
    while (hit < 0).any() and state["generation"] < max_generations:
        state = alg.step(ctx, state)
        f = state["f"][:, 0].copy()
        trace.append((state["evals"], f))
        hit = np.where((hit < 0) & (f < target), state["evals"], hit)
    return state, hit, trace


# -- default parameters -------------------------------------------------------------------------------
def tutorial_table(n: int, lam: int) -> dict:
    """The tutorial's Table 1 and eqs. (49)-(58), transcribed term by term in scalar Python."""
    mu = lam // 2
    wp = [math.log((lam + 1) / 2) - math.log(i) for i in range(1, lam + 1)]
    pos, neg = wp[:mu], wp[mu:]
    mu_eff = sum(pos) ** 2 / sum(w * w for w in pos)
    mu_eff_neg = sum(neg) ** 2 / sum(w * w for w in neg)
    c1 = 2 / ((n + 1.3) ** 2 + mu_eff)
    c_mu = min(1 - c1, 2 * (mu_eff - 2 + 1 / mu_eff) / ((n + 2) ** 2 + 2 * mu_eff / 2))
    a_neg = min(1 + c1 / c_mu, 1 + 2 * mu_eff_neg / (mu_eff + 2), (1 - c1 - c_mu) / (n * c_mu))
    w = [x / sum(pos) for x in pos] + [a_neg * x / sum(abs(y) for y in neg) for x in neg]
    c_sigma = (mu_eff + 2) / (n + mu_eff + 5)
    return {
        "w": w,
        "mu_eff": mu_eff,
        "c1": c1,
        "c_mu": c_mu,
        "c_sigma": c_sigma,
        "d_sigma": 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (n + 1)) - 1) + c_sigma,
        "c_c": (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n),
    }


@pytest.mark.parametrize("n", [2, 10, 30, 100, 1000])
def test_default_parameters_are_the_tutorials(n):
    lam = default_pop_size(n)
    assert lam == 4 + int(3 * math.log(n))
    got = strategy_parameters(np, n, np.array([lam, 2 * lam]), 2 * lam)
    for row, lam_i in enumerate((lam, 2 * lam)):
        ref = tutorial_table(n, lam_i)
        np.testing.assert_allclose(got["w"][row, :lam_i], ref["w"], rtol=1e-12)
        assert (got["w"][row, lam_i:] == 0).all()
        for key in ("mu_eff", "c1", "c_mu", "c_sigma", "d_sigma", "c_c"):
            assert got[key][row] == pytest.approx(ref[key], rel=1e-12), key
        w = got["w"][row]
        assert w[w > 0].sum() == pytest.approx(1.0)  # positive weights sum to one (eq. 53)


def test_default_parameters_match_pycmas_printout_for_n_10():
    """pycma prints ``(5_w,10)-aCMA-ES (mu_w=3.2,w_1=45%) in dimension 10``."""
    p = strategy_parameters(np, 10, np.array([10]), 10)
    assert default_pop_size(10) == 10
    assert round(float(p["mu_eff"][0]), 1) == 3.2
    assert round(100 * float(p["w"][0, 0])) in (45, 46)  # 45.6 %
    assert (p["w"][0, :5] > 0).all() and (p["w"][0, 5:] < 0).all()


# -- step-size and covariance adaptation ---------------------------------------------------------------
def test_sphere_converges_log_linearly():
    """D = 10, lambda = 10: 1e-10 within 1,200-2,800 evaluations (measured: 1,661-2,031 over 12
    runs), at 100-250 evaluations per decade on a straight line in log f (measured 141-179, R^2
    >= 0.987)."""
    ctx = ctx_of(Ellipsoid(10), islands=4)
    alg = CMAES(dim=10, restarts="none")
    _, hit, trace = run_until(alg, ctx, alg.init(ctx), 1e-10, 400)
    assert ((hit >= 1200) & (hit <= 2800)).all(), hit
    E = np.array([t[0] for t in trace])
    F = np.array([t[1] for t in trace])
    for i in range(4):
        seg = (F[:, i] < 1e-3) & (F[:, i] > 1e-10)
        slope = np.polyfit(E[seg], np.log10(F[seg, i]), 1)[0]
        r = np.corrcoef(E[seg], np.log10(F[seg, i]))[0, 1]
        assert 100 <= -1 / slope <= 250 and r * r >= 0.97, (i, -1 / slope, r * r)


def test_ellipsoid_learns_the_hessian():
    """D = 10, condition 1e6: 1e-8 within 3,000-6,500 evaluations (measured 3,771-4,421), and the
    covariance learnt is the inverse Hessian's shape: condition ~1e6 (measured 0.67e6-1.2e6) and
    ``log C_ii`` against ``log c_i`` of slope -1 (measured -0.97 to -1.00)."""
    ctx = ctx_of(Ellipsoid(10, 1e6), islands=4)
    alg = CMAES(dim=10, restarts="none")
    s, hit, _ = run_until(alg, ctx, alg.init(ctx), 1e-8, 800)
    assert ((hit >= 3000) & (hit <= 6500)).all(), hit
    ev = np.linalg.eigvalsh(s["C"])
    assert ((ev[:, -1] / ev[:, 0] > 3e5) & (ev[:, -1] / ev[:, 0] < 3e6)).all()
    c = 1e6 ** (np.arange(10) / 9)
    for i in range(4):
        slope = np.polyfit(np.log10(c), np.log10(np.diagonal(s["C"][i])), 1)[0]
        assert -1.05 <= slope <= -0.95, slope


def test_step_size_grows_on_a_linear_function():
    """CSA (eq. 44): on a linear function sigma grows geometrically (measured x2,300 in 40
    iterations); without it (or with the path's sign wrong) it would not."""
    ctx = ctx_of(Linear(10))
    alg = CMAES(dim=10, restarts="none", sigma0=1e-11)
    s = alg.init(ctx)
    s0 = s["sigma"].copy()
    for _ in range(40):
        s = alg.step(ctx, s)
    assert (s["sigma"] / s0 > 200).all()


def log_rates(n, cond, islands=2, seed=3, f_stop=1e-14):
    """Runs of CMA-ES (no restarts, optimum at 0) on the ellipsoid of condition ``cond`` in dimension
    ``n`` until ``f(m) < f_stop``: per island ``(rate, sigma_share, learnt)``, where ``rate = -(n / 2)
    d ln f(m) / d evaluations`` (``= -n d ln ||m|| / d evaluations`` on the sphere) is fitted after
    the covariance is learnt (``cond(C) > cond / 3``; from the start on the sphere),
    ``sigma_share = (d ln sigma / d evaluations) / (d ln f / d evaluations)`` and ``learnt`` the
    evaluations until then."""
    prob = Ellipsoid(n, cond)
    ctx = ctx_of(prob, islands=islands, seed=seed)
    alg = CMAES(dim=n, restarts="none")
    s = alg.init(ctx)
    E, F, S, K = [], [], [], []
    while s["generation"] < 30000 and prob.objective(s["mean"]).max() > f_stop:
        s = alg.step(ctx, s)
        if s["blk"].max() == 0:  # an iteration ended (lambda = lambda_start: every generation)
            ev = np.linalg.eigvalsh(s["C"])
            E.append(s["evals"])
            F.append(prob.objective(s["mean"]))
            S.append(s["sigma"].copy())
            K.append(ev[:, -1] / ev[:, 0])
    E, F, S, K = map(np.array, (E, F, S, K))
    out = []
    for i in range(islands):
        start = int(np.argmax(K[:, i] > cond / 3)) if cond > 1 else 0
        seg = (np.arange(len(E)) >= start) & (F[:, i] < 1e-2 * F[start, i]) & (F[:, i] > 1e-13)
        kf = np.polyfit(E[seg], np.log(F[seg, i]), 1)[0]
        ks = np.polyfit(E[seg], np.log(S[seg, i]), 1)[0]
        out.append((-kf * n / 2, ks / kf, E[start]))
    return out


def optimal_rate(n: int) -> float:
    """The largest per-evaluation rate ``c`` of the default weighted recombination at ``lambda = 4 +
    floor(3 ln n)`` on the sphere in the limit ``n -> inf`` (Beyer 2001; Arnold 2006, "Optimal
    weighted recombination"): the normalised progress ``phi*(s) = s c_w - s^2 / (2 mu_eff)`` per
    iteration, ``c_w = sum_i w_i E[N_{i:lambda}]`` (the positive weights and the expected order
    statistics of ``lambda`` standard normals, largest first), is largest at ``s = mu_eff c_w``:
    ``mu_eff c_w^2 / 2`` per iteration, divided by ``lambda`` per evaluation (about 0.19-0.20 here)."""
    from scipy import integrate, stats  # noqa: PLC0415

    lam = default_pop_size(n)
    sp = strategy_parameters(np, n, np.array([lam]), lam)
    w = np.maximum(sp["w"][0], 0.0)
    order = []
    for k in range(1, lam + 1):  # E of the k-th largest of lam standard normals
        c = math.factorial(lam) / (math.factorial(k - 1) * math.factorial(lam - k))
        dens = lambda x, k=k: x * stats.norm.pdf(x) * stats.norm.cdf(x) ** (lam - k) * stats.norm.sf(x) ** (k - 1)  # noqa: E731
        order.append(c * integrate.quad(dens, -12, 12)[0])
    c_w = float((w * np.array(order)).sum())
    mu_eff = float(sp["mu_eff"][0])
    return mu_eff * c_w**2 / 2 / lam


def test_sphere_rate_follows_the_c_over_d_law():
    """Theory: on the sphere an ES with an adapted step size converges log-linearly (Auger & Hansen
    2016, linear convergence of scale-invariant ESs), ``ln ||m - x*||`` falling by ``c / D`` per
    evaluation, ``c`` at most the optimal rate of its weighted recombination
    (:func:`optimal_rate`, about 0.2); CSA's step size is below the optimum at finite ``D`` (Arnold &
    Beyer 2004), which costs rate but not more than a factor 3. CSA keeps ``sigma`` proportional to
    the distance: ``ln sigma`` falls at half the rate of ``ln f = 2 ln ||m||`` once stationary.
    Asserted at D = 5, 10, 20: ``c`` in ``[0.3, 1] x`` the optimal rate, the same within a factor
    1.5 across D (the ``c / D`` law), and ``d ln sigma / d ln f`` in ``[0.35, 0.55]`` (stationary
    1/2; the early transient lowers it in small D). A wrong CSA fails: ``E||N(0, I)||`` 20 % low,
    ``d_sigma`` tripled or ``c_sigma`` cut to 30 % each give ``c`` at 0.2-0.28 of the optimum."""
    rates = {n: log_rates(n, 1.0) for n in (5, 10, 20)}
    for n, rs in rates.items():
        opt = optimal_rate(n)
        assert all(0.3 * opt <= c <= opt for c, _, _ in rs), (n, opt, rs)
        assert all(0.35 <= share <= 0.55 for _, share, _ in rs), (n, rs)
    cs = [r[0] for rs in rates.values() for r in rs]
    assert max(cs) / min(cs) <= 1.5, rates


def test_ellipsoid_rate_after_learning_is_the_spheres():
    """Theory (the tutorial, sec. 3-4: CMA-ES is invariant under affine maps of the search space):
    once ``C`` is proportional to the inverse Hessian, the ellipsoid (condition 1e6) is a sphere in
    the learnt coordinates, so the rate afterwards is the sphere's (within 30 %, the run-to-run
    spread). The covariance forgets its past at the rate ``c_1 + c_mu`` per iteration (eq. 47), so
    learning a condition ``K`` takes about ``ln K / (c_1 + c_mu)`` iterations: asserted within
    ``[0.5, 1.3]`` of it at D = 5 and 10 (learnt: ``cond(C) > K / 3``), which also makes the
    learning time grow like ``D^2`` (``c_mu ~ mu_eff / D^2``). ``c_mu`` cut to 20 % takes 1.5 times
    as long."""
    for n in (5, 10):
        sphere = np.mean([r[0] for r in log_rates(n, 1.0)])
        lam = default_pop_size(n)
        sp = strategy_parameters(np, n, np.array([lam]), lam)
        tau = math.log(1e6 / 3) / float(sp["c1"][0] + sp["c_mu"][0])  # iterations
        for rate, _, learnt in log_rates(n, 1e6):
            assert 0.7 <= rate / sphere <= 1.3, (n, rate, sphere)
            assert 0.5 <= (learnt / lam) / tau <= 1.3, (n, learnt / lam, tau)


# -- restarts -------------------------------------------------------------------------------------------
def trace_restarts(restarts, generations, max_doublings=3):
    """Per generation of a flat function (D = 2, lambda_start = 6): the state's restart fields."""
    ctx = ctx_of(Flat(2), islands=2)
    alg = CMAES(dim=2, restarts=restarts, max_doublings=max_doublings)
    s = alg.init(ctx)
    rows = []
    for _ in range(generations):
        prev = s
        s = alg.step(ctx, s)
        rows.append(
            {k: np.array(s[k], copy=True) for k in ("lam", "runs", "regime", "sigma_start", "it")}
            | {"generation": s["generation"], "done_lam": prev["lam"]}
        )
    return alg, ctx, rows


def tolfun_iterations(n, lam):
    return 10 + math.ceil(30 * n / lam)


def test_ipop_doubles_the_population_at_each_restart():
    """On a flat function TolFun ends each run after exactly ``10 + ceil(30 n / lambda)``
    iterations, of ``lambda / lambda_start`` generations each; IPOP doubles lambda up to
    ``lambda_cap = 6 * 2^3`` and then keeps it."""
    alg, _, rows = trace_restarts("ipop", 400)
    lam0 = alg.lam0
    assert lam0 == 6 and alg.params.lam_cap == 48
    expected, g, lam = [], 0, lam0
    while True:
        g += tolfun_iterations(2, lam) * lam // lam0
        if g > 400:
            break
        lam = min(2 * lam, 48)
        expected.append((g, lam))
    for i in range(2):
        seen = [
            (r["generation"], int(r["lam"][i]))
            for k, r in enumerate(rows)
            if r["runs"][i] != (rows[k - 1]["runs"][i] if k else 0)
        ]
        assert seen == expected, (i, seen)
    assert [lam for _, lam in expected][:4] == [12, 24, 48, 48]


def test_bipop_chooses_the_regime_with_the_smaller_budget():
    """BIPOP (Hansen 2009): the first run counts for the large regime; each restart runs the regime
    that has used fewer evaluations; large runs double lambda (sigma_0), small runs draw lambda in
    ``[lambda_start, lambda_l / 2]`` and ``sigma_0 10^(-2 u)``. Checked against budgets recomputed
    here from the runs' lengths."""
    alg, ctx, rows = trace_restarts("bipop", 600, max_doublings=4)
    _, sigma0 = alg.box_scale(ctx)
    lam0 = alg.lam0
    for i in range(2):
        budget = {0: 0, 1: 0}
        regime, lam, lam_large, start, large_lams, smalls = 0, lam0, lam0, 0, [], 0
        for k, r in enumerate(rows):
            if r["runs"][i] == (rows[k - 1]["runs"][i] if k else 0):
                continue
            length = r["generation"] - start  # generations of the run that ended: exactly TolFun's
            assert length == tolfun_iterations(2, lam) * lam // lam0, (k, length, lam)
            budget[regime] += length * lam0
            start = r["generation"]
            new_regime, lam = int(r["regime"][i]), int(r["lam"][i])
            assert new_regime == (1 if budget[1] < budget[0] else 0), (k, budget)
            if new_regime == 0:
                lam_large = min(2 * lam_large, 16 * lam0)
                large_lams.append(lam)
                assert lam == lam_large and r["sigma_start"][i] == pytest.approx(sigma0)
            else:
                smalls += 1
                assert lam % lam0 == 0 and lam0 <= lam <= max(lam0, lam_large // 2)
                assert sigma0 / 100 <= r["sigma_start"][i] < sigma0
            regime = new_regime
        assert smalls >= 2 and large_lams[:2] == [2 * lam0, 4 * lam0], (smalls, large_lams)


def test_adapted_parameters_report_the_restarts():
    alg, ctx, _ = trace_restarts("ipop", 0)
    s = alg.init(ctx)
    for _ in range(30):  # the first run ends at generation 20, the second would at 50
        s = alg.step(ctx, s)
    rep = alg.adapted_parameters(s)
    assert (rep["pop_size"] == 12).all() and (rep["restarts"] == 1).all() and (rep["regime"] == 0).all()
    np.testing.assert_array_equal(rep["sigma"], s["sigma"])
    assert (rep["condition"] >= 1).all()


def test_no_restart_keeps_one_run_and_freezes_it_when_it_terminates():
    """``restarts=none``: one run; once TolFun fires (iteration 20 on the flat function) the
    distribution stays as it was, instead of shrinking or drifting on (before: sigma under the
    precision, then overflows and NaN on Rastrigin)."""
    ctx = ctx_of(Flat(2), islands=2)
    alg = CMAES(dim=2, restarts="none")
    assert alg.params.lam_cap == 6
    s = alg.init(ctx)
    means, sigmas = [], []
    for _ in range(60):
        s = alg.step(ctx, s)
        means.append(s["mean"].copy())
        sigmas.append(s["sigma"].copy())
    assert (s["runs"] == 0).all() and (s["lam"] == 6).all() and (s["it"] == 60).all()
    L = tolfun_iterations(2, 6)  # iteration L (list index L - 1) terminates: its update is undone
    for g in range(L - 1, 60):
        np.testing.assert_array_equal(means[g], means[L - 2])
        np.testing.assert_array_equal(sigmas[g], sigmas[L - 2])
    assert not np.array_equal(means[L - 3], means[L - 2])  # it moved until then


def test_a_run_without_restarts_stays_finite_long_after_it_converged():
    """Sphere D = 4 (converged, TolFun frozen, after ~200 generations), 600 generations: no
    overflow, no NaN (before: sigma went under the precision and then overflowed)."""
    ctx = ctx_of(Ellipsoid(4), islands=2)
    alg = CMAES(dim=4, restarts="none")
    s = alg.init(ctx)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for _ in range(600):
            s = alg.step(ctx, s)
    assert np.isfinite(s["sigma"]).all() and (s["sigma"] > 0).all() and (s["f"][:, 0] < 1e-12).all()


# -- fewer NumPy calls a generation (issue 37): kept parameters, no splice without injections --------
def test_numpy_strategy_parameters_and_box_scale_are_kept_read_only():
    """On NumPy the parameters of a ``(n, lambda, cap, dtype)`` and the box's scale are computed
    once (the same read-only arrays each call), with the values of the arithmetic."""
    from isles.algorithms.cmaes import strategy  # noqa: PLC0415

    lam = np.array([10, 20, 10])
    a = strategy_parameters(np, 7, lam, 40)
    assert strategy_parameters(np, 7, lam.copy(), 40) is a
    fresh = strategy._parameters(np, 7, lam, 40, np.float64)
    for k, v in a.items():
        assert not v.flags.writeable and v.tobytes() == fresh[k].tobytes(), k
    lo, hi = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 0.0, 5.0])
    s, sig = strategy.box_scale_of(np, lo, hi, 0.3)
    assert strategy.box_scale_of(np, lo.copy(), hi.copy(), 0.3)[0] is s and not s.flags.writeable
    s2, sig2 = strategy._box_scale(np, lo, hi, 0.3)
    assert s.tobytes() == s2.tobytes() and sig == sig2


def test_numpy_generation_without_injections_splices_nothing(monkeypatch):
    """Without pending injections a NumPy generation does not compute the clipped steps (nothing
    would be spliced in); with them it does: the state is the same either way as before."""
    from isles.algorithms.cmaes import cmaes as cm  # noqa: PLC0415
    from isles.problems import make_problem  # noqa: PLC0415

    ctx = Context(np, np.float64, Evaluator(make_problem("sphere", dim=5)), CounterRNG(np, 2, [0, 1]))
    alg = CMAES(dim=5)
    s = alg.init(ctx)
    calls = []
    real = cm.clip_steps
    monkeypatch.setattr(cm, "clip_steps", lambda *a: calls.append(1) or real(*a))
    s = alg.run(ctx, s, 3)
    assert calls == []
    s["inj_on"] = s["inj_on"].copy()
    s["inj_on"][0, 0] = True
    alg.step(ctx, s)
    assert calls == [1]
