"""A user's own problem on day one (issue 16, section 1): held-out problems written from the README
(``tests/user_designs.py``: a pressure vessel, a three-bar truss, a cantilever) through the
experiments as a new user types them. Nothing silently wrong: an encoding never leaves the
problem's box, an experiment's problem settings never leak into a user's class, results of the
wrong shape stop at the first evaluation with one line, and a run with no finite objective says so.
"""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from isles.algorithms.core.encoding_choice import make_encoding
from isles.algorithms.core.real_codes import Seed002
from isles.app.job import run_job
from isles.app.overrides import job_overrides, user_problem_config
from isles.islands.config.build import build_problem
from isles.islands.coordinator import RunResult
from isles.problems.base import ProblemShapeError, probe_evaluation
from isles.problems.benchmarks import Rastrigin
from isles.problems.constraints import Evaluator, feasibility_report

from tests.helpers import CONF, make_cfg, plain
from tests.user_designs import (
    PressureVessel,
    ThreeBarTruss,
    TrussColumnObjective,
    TrussComplex,
    TrussFourColumns,
)
from tests.user_problems import G11

ROOT = Path(__file__).resolve().parents[1]
FAST = ["device=cpu", "logger=none", "progress=false"]
PV = "problem._target_=tests.user_designs.PressureVessel"
PV_BOX = (np.array([0.0, 0.0, 10.0, 10.0]), np.array([99.0, 99.0, 200.0, 200.0]))


def run_cli(*args, timeout=180):
    return subprocess.run(
        [sys.executable, "run.py", *args, *FAST], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def result_x(stdout: str) -> np.ndarray:
    """The ``x=[...]`` of the one result line (``progress=false``)."""
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("isles: best f=")]
    return np.array([float(v) for v in re.search(r"x=\[([^\]]*)\]", line).group(1).split(",")])


def one_error_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("isles: error: "), p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    return lines[0]


# ---- 1. an encoding never leaves the problem's box -------------------------------------------------


def test_ga_experiment_refuses_seed002_for_a_users_box():
    """The issue's command: seed 002's code decodes into [-1, 1], the vessel's box is [0, 99] x [10, 200]."""
    p = run_cli(
        "+experiment=ga",
        PV,
        "++problem.dim=4",
        "++problem.lower=[0,0,10,10]",
        "++problem.upper=[99,99,200,200]",
        "generations=5",
    )
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    line = one_error_line(p)
    assert "algorithm.encoding=seed002" in line and "[-1, 1]" in line and "binary|gray|auto" in line


def test_ga_experiment_with_binary_encoding_stays_in_a_users_box():
    p = run_cli("+experiment=ga", PV, "algorithm.encoding=binary", "generations=5")
    assert p.returncode == 0, p.stderr[-3000:]
    x = result_x(p.stdout)
    assert x.shape == (4,) and np.all(x >= PV_BOX[0]) and np.all(x <= PV_BOX[1])


def test_seed002_only_on_its_own_box():
    assert isinstance(make_encoding("seed002", Rastrigin(2, -1.0, 1.0)), Seed002)
    for problem in (PressureVessel(), Rastrigin(2, -5.12, 5.12), Rastrigin(2, -0.5, 0.5)):
        with pytest.raises(ValueError, match=r"^algorithm.encoding=seed002 decodes into seed 002's domain \[-1, 1\]"):
            make_encoding("seed002", problem)


# ---- 2. an experiment's problem settings never leak into a user's class -----------------------------


def test_fep_experiment_runs_a_users_class_with_its_own_defaults():
    """``+experiment=fep`` composes fep_f5 (dim 32 on +-5.12); the vessel has 4 variables in its box."""
    p = run_cli("+experiment=fep", PV, "generations=5")
    assert p.returncode == 0, p.stderr[-3000:]
    x = result_x(p.stdout)
    assert x.shape == (4,) and np.all(x >= PV_BOX[0]) and np.all(x <= PV_BOX[1])


@pytest.mark.parametrize("experiment", ["+experiment=fep", "+experiment=cmepso", "+experiment=ga"])
def test_force_add_spelling_works_with_every_experiment(experiment):
    """``++problem.*`` composes whether the experiment's problem has the key (fep_f5: dim) or not
    (welded_beam); only the keys typed on the command line reach the user's class."""
    overrides = [
        experiment,
        "problem._target_=tests.user_designs.SegmentedCantilever",
        "++problem.dim=5",
        "++problem.upper=50",
    ]
    cfg = plain(make_cfg(*overrides))
    problem_cfg = user_problem_config(cfg["problem"], overrides)
    assert problem_cfg == {"_target_": "tests.user_designs.SegmentedCantilever", "dim": 5, "upper": 50}
    problem = build_problem(problem_cfg)
    assert problem.dim == 5 and np.all(problem.lower == 0.01) and np.all(problem.upper == 50.0)


def test_problem_node_kept_without_a_new_target():
    overrides = ["+experiment=fep", "problem.dim=8", "problem=fep_f1"]
    cfg = plain(make_cfg(*overrides))
    assert user_problem_config(cfg["problem"], overrides) == cfg["problem"]


def test_missing_or_unknown_constructor_argument_is_named():
    with pytest.raises(
        ValueError,
        match=r"^problem.dim is missing: tests.user_designs.SegmentedCantilever requires it "
        r"\(add \+\+problem.dim=VALUE\)$",
    ):
        build_problem({"_target_": "tests.user_designs.SegmentedCantilever"})
    with pytest.raises(
        ValueError,
        match=r"^problem.dim=3: tests.user_designs.ThreeBarTruss takes no parameter 'dim' "
        r"\(its parameters: none\)$",
    ):
        build_problem({"_target_": "tests.user_designs.ThreeBarTruss", "dim": 3})


G11_FEP = [
    "+experiment=fep",
    "problem._target_=tests.user_problems.G11",
    "++problem.dim=2",
    "algorithm.pop_size=30",
    "algorithm.q=5",
    "generations=300",
    *FAST,
]


def test_a_config_composed_in_process_runs_a_users_class_in_its_own_box():
    """The reported 'FEP leaves the box' run, composed in-process (``make_cfg``, as the tests and a
    script calling Hydra's ``compose`` do) then ``run_job``: nothing outside a Hydra job said which
    problem keys were typed, so fep_f5's ``lower=-5.12, upper=5.12`` reached G11 (box [-1, 1]) and
    FEP, keeping every individual in +-5.12 as its bound handling should, returned x = (1.5116,
    2.2850) (``in_bounds=False`` for G11). Now G11 gets its own box, and the same x as ``run.py``."""
    cfg = make_cfg(*G11_FEP)
    result, _ = run_job(cfg, use_ray=False)
    rep = feasibility_report(G11(), result.best_x)
    assert rep["in_bounds"] and rep["feasible"], rep
    assert plain(cfg)["problem"] == {"_target_": "tests.user_problems.G11", "dim": 2}
    p = run_cli(*G11_FEP)
    assert p.returncode == 0, p.stderr[-3000:]
    np.testing.assert_allclose(result.best_x, result_x(p.stdout), rtol=1e-9)


def test_run_job_reads_the_overrides_from_the_configs_hydra_node():
    """``run_job`` on a config composed with ``return_hydra_config=True`` (the node records the
    overrides; before, it was refused while resolving ``hydra.sweep.subdir``) builds the user's
    class without the experiment's bounds."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=G11_FEP, return_hydra_config=True)
    assert cfg.problem.lower == -5.12  # what Hydra composed: fep_f5's keys under G11's target
    result, _ = run_job(cfg, use_ray=False)
    assert np.all(np.abs(result.best_x) <= 1.0), result.best_x
    np.testing.assert_array_equal(result.best_x, run_job(make_cfg(*G11_FEP), use_ray=False)[0].best_x)
    assert job_overrides(cfg) == G11_FEP


# ---- 3. shapes checked at the first evaluation --------------------------------------------------------


@pytest.mark.parametrize(
    "cls, message",
    [
        (
            TrussFourColumns,
            r"^TrussFourColumns.constraints returned g of shape \(2, 5, 4\) for X of shape \(2, 5, 2\): "
            r"expected \(2, 5, 3\) \(X.shape\[:-1\] \+ \(n_constraints=3,\)\)$",
        ),
        (
            TrussColumnObjective,
            r"^TrussColumnObjective.objective returned f of shape \(2, 5, 1\) for X of shape "
            r"\(2, 5, 2\): expected \(2, 5\) \(X.shape\[:-1\]\)$",
        ),
        (TrussComplex, r"^TrussComplex.objective returned f of dtype complex128: expected a real dtype"),
    ],
)
def test_first_evaluation_names_class_method_and_shapes(cls, message):
    X = np.random.default_rng(0).uniform(0.1, 1.0, (2, 5, 2))
    with pytest.raises(ProblemShapeError, match=message):
        Evaluator(cls())(X)


def test_dim_smaller_than_the_class_reads_is_named_at_the_first_evaluation():
    X = np.full((1, 3, 3), 20.0)
    with pytest.raises(
        ProblemShapeError,
        match=r"^PressureVessel.objective raised IndexError \(index 3 is out of bounds"
        r".*user_problems.py:\d+ on the first batch, X of shape \(1, 3, 3\) "
        r"\(problem.dim=3\)",
    ):
        Evaluator(PressureVessel(3, 0.0, 200.0))(X)


def test_shape_check_runs_once(monkeypatch):
    import isles.problems.constraints as constraints

    calls = []
    real = constraints.first_evaluation
    monkeypatch.setattr(constraints, "first_evaluation", lambda p, X: calls.append(1) or real(p, X))
    ev = Evaluator(ThreeBarTruss())
    X = np.full((2, 4, 2), 0.5)
    for _ in range(3):
        f, v, _n = ev(X)
    assert len(calls) == 1 and f.shape == (2, 4) and v.shape == (2, 4)
    probe_evaluation(ThreeBarTruss())  # a right class passes the probe


def test_wrong_constraint_count_is_one_line_before_ray():
    """Default config (8 islands on CPU actors): the probe stops it before Ray, in one line."""
    p = run_cli("problem._target_=tests.user_designs.TrussFourColumns", "generations=5")
    assert p.returncode == 2
    line = one_error_line(p)
    assert "TrussFourColumns.constraints returned g of shape (1, 4, 4)" in line and "expected (1, 4, 3)" in line


# ---- 4. an objective that is NaN everywhere ---------------------------------------------------------------


def test_nan_everywhere_warns_in_one_line():
    p = run_cli("problem._target_=tests.user_designs.TrussNaN", "generations=5", "islands.n=1")
    assert p.returncode == 0, p.stderr[-3000:]
    warnings = [ln for ln in p.stderr.splitlines() if ln.startswith("isles: warning:")]
    assert len(warnings) == 1 and "no individual ever had a finite objective" in warnings[0], p.stderr[-2000:]


def test_result_warnings():
    base = dict(best_x=np.zeros(2), best_v=0.0, generations=5, wall_s=0.1, startup_s=0.0)
    assert RunResult(best_f=1.0, evaluations=10, nan_evals=3, **base).warnings == []
    (w,) = RunResult(best_f=np.nan, evaluations=10, nan_evals=10, **base).warnings
    assert w.startswith("no individual ever had a finite objective: all 10 evaluations gave NaN")
    (w,) = RunResult(best_f=np.inf, evaluations=10, nan_evals=4, **base).warnings
    assert w.startswith("the best individual has no finite objective (f=inf); 4 of 10 evaluations gave NaN")


def test_reported_violation_is_never_negative():
    """An interior point of the vessel: every g < 0, so the violation is 0 (not max g < 0)."""
    rep = feasibility_report(PressureVessel(), [1.0, 0.6, 45.0, 150.0])
    assert max(rep["g"]) < 0 and rep["max_normalised_violation"] == 0.0 and rep["feasible"]


def test_target_in_a_moved_module_names_its_new_home():
    """Issue 19: a ``_target_`` in a module that moved from ``isles.islands`` to ``isles.app`` is one
    line naming the new module, not Hydra's "Are you sure that module ... is installed?"."""
    with pytest.raises(ValueError) as err:
        build_problem({"_target_": "isles.islands.report.Vessel"})
    assert str(err.value).startswith(
        "problem._target_='isles.islands.report.Vessel': cannot import it: "
        "the module isles.islands.report moved to isles.app.report"
    )
