"""GPU (issue 25): a user's problem with an equality constraint gives on CuPy what it gives on
NumPy (the violation, a captured generation, the fused DE plan's self-check and selection), and
what ``xp.stack`` does under CUDA-graph capture. Run on a GPU machine:
``python -m pytest -m gpu tests/test_user_problem_gpu.py``."""

import warnings

import numpy as np
import pytest

from tests.gpu import cupy_or_skip

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from array_api_compat import array_namespace  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.de.de import DE  # noqa: E402
from isles.algorithms.ep.fep import FEP  # noqa: E402
from isles.problems.base import Problem  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

from tests.user_problems import G11, SphereOnPlane  # noqa: E402


def _pair(problem, streams=(0, 3)):
    ev = Evaluator(problem)
    return (
        Context(np, np.float64, ev, CounterRNG(np, 9, list(streams))),
        Context(cp, np.float64, ev, CounterRNG(cp, 9, list(streams))),
    )


def _same(sn, sc, genome="X"):
    np.testing.assert_allclose(sn[genome], sc[genome].get(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sn["f"], sc["f"].get(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sn["v"], sc["v"].get(), rtol=1e-9, atol=1e-12)


# -- equality constraints on the GPU ---------------------------------------------------------------
@pytest.mark.parametrize("problem", [G11, lambda: SphereOnPlane(8)], ids=["g11", "sphere_on_plane"])
def test_equality_violation_cupy_equals_numpy(problem):
    prob = problem()
    rs = np.random.default_rng(1)
    X = prob.lower + rs.random((3, 50, prob.dim)) * (prob.upper - prob.lower)
    fn, vn, _ = Evaluator(prob)(X)
    fc, vc, _ = Evaluator(prob)(cp.asarray(X))
    np.testing.assert_allclose(vc.get(), vn, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fc.get(), fn, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("family", ["de", "fep"])
def test_equality_problem_captured_equals_numpy(family):
    """G11 as array code (no cuda_objective): the captured generation ranks by |h| - eq_tol as
    the NumPy twin does."""
    make = {"de": lambda: DE(pop_size=16, F=0.5, CR=0.9), "fep": lambda: FEP(pop_size=12, q=4)}[family]
    cn, cc = _pair(G11())
    an, ac = make(), make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the capture must not fall back
        sc = ac.run(cc, ac.run(cc, ac.init(cc), 7), 13)
    sn = an.run(cn, an.init(cn), 20)
    assert ac._captures[id(cc)].stepper is not None
    _same(sn, sc, ac.FIELDS["genome"])


def test_fused_de_with_an_equality_passes_its_check_and_selects_as_numpy():
    """SphereOnPlane carries a cuda_objective whose obj_violation has |h| - eq_tol: the fused DE
    plan is taken (its self-check against the array code's violation passes) and its selection
    agrees with the array path on the same trial vectors."""
    prob = SphereOnPlane(8)
    _, cc = _pair(prob, streams=(0, 1, 2))
    fused, generic = DE(pop_size=20, F=0.5, CR=0.9), DE(pop_size=20, F=0.5, CR=0.9, fused=False)
    s = fused.init(cc)
    plan = fused.fused_plan(cc)
    assert plan is not None and plan.verify() < 1e-9
    sf, sg = fused.run(cc, s, 60), generic.run(cc, s, 60)
    vf, vg = sf["v"].get(), sg["v"].get()
    assert np.all(vf.min(axis=1) == 0.0) and np.all(vg.min(axis=1) == 0.0)  # feasible within eq_tol
    np.testing.assert_allclose(sf["f"].get().min(axis=1), sg["f"].get().min(axis=1), rtol=0.5)


def test_fused_source_with_a_raw_h_is_refused():
    """A cuda_objective that adds a raw h (not |h| - eq_tol) disagrees with the array code: the
    fused plan is refused and the array path runs (a wrong source never changes results)."""

    class RawH(SphereOnPlane):
        @property
        def cuda_objective(self):
            return super().cuda_objective.replace("t_abs(sub_rn(acc[1], (T)1.0))", "sub_rn(acc[1], (T)1.0)")

    _, cc = _pair(RawH(8))
    with pytest.warns(RuntimeWarning):
        plan = DE(pop_size=20).fused_plan(cc)
    assert plan is None


# -- xp.stack under CUDA-graph capture (README "Your own problem", problems/cec2006.py) -------------
class StackedConstraints(Problem):
    """Sphere with ``k`` constraints ``x_(i mod D) - 2 <= 0`` (always hold), returned by
    ``xp.stack`` of ``k`` arrays, as the README's example does with 4."""

    name = "stacked_constraints"

    def __init__(self, k=4, dim=3):
        self.n_constraints = int(k)
        super().__init__(dim, -1.0, 1.0, f_star=0.0)

    def objective(self, X):
        return (X * X).sum(axis=-1)

    def constraints(self, X):
        xp = array_namespace(X)
        return xp.stack([X[..., i % self.dim] - 2.0 for i in range(self.n_constraints)], axis=-1)


@pytest.mark.parametrize("k", [4, 8])
def test_xp_stack_of_up_to_8_arrays_is_captured(k):
    """CuPy stacks up to 8 arrays with one copy kernel each: the generation is captured (no
    fallback warning) and its replays equal the NumPy twin, also with other host-to-device
    copies between the replays."""
    cn, cc = _pair(StackedConstraints(k))
    an, ac = DE(pop_size=12), DE(pop_size=12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sc = ac.run(cc, ac.init(cc), 5)
        cp.asarray(np.arange(1000.0))  # unrelated host -> device traffic between the replays
        sc = ac.run(cc, sc, 10)
    assert ac._captures[id(cc)].stepper is not None and ac._captures[id(cc)].stepper.replays == 15
    _same(an.run(cn, an.init(cn), 15), sc)


def test_xp_stack_of_more_than_8_arrays_is_not_captured_silently_wrong():
    """Of more than 8 small arrays CuPy builds a pointer table on the host
    (``_concatenate_single_kernel``). Whatever capture does with it, the results equal the NumPy
    twin's, also with host-to-device copies between the replays; a fallback is one warning."""
    cn, cc = _pair(StackedConstraints(11))
    an, ac = DE(pop_size=12), DE(pop_size=12)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sc = ac.run(cc, ac.init(cc), 5)
        for _ in range(5):
            cp.asarray(np.random.default_rng(0).random(4096))  # reuse the pinned staging buffers
        sc = ac.run(cc, sc, 10)
    _same(an.run(cn, an.init(cn), 15), sc)
    fallback = [str(w.message) for w in rec if "uncaptured" in str(w.message)]
    captured = ac._captures[id(cc)].stepper is not None
    assert captured != bool(fallback), (captured, fallback)  # captured, or one warning saying it is not
    print(f"xp.stack of 11 arrays: {'captured' if captured else 'uncaptured: ' + fallback[0]}")
