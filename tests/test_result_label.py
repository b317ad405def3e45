"""The result's label (issue 25): ``INFEASIBLE`` only where a constraint or the box is violated;
a run whose objective was never finite says ``f not finite`` (app/report.py ``verdict``)."""

from types import SimpleNamespace

import numpy as np
import pytest
from isles.app.job import run_job
from isles.app.progress import print_summary, result_line
from isles.app.report import end_report, verdict

from tests.helpers import make_cfg
from tests.user_problems import InfiniteSphere, ShiftedSphere


def _result(x, f=np.inf, v=0.0):
    return SimpleNamespace(
        best_x=np.asarray(x, dtype=np.float64),
        best_f=f,
        best_v=v,
        evaluations=10,
        wall_s=0.1,
        history=[SimpleNamespace(us_per_generation=1.0)],
        startup_s=0.0,
        steady_evals_per_s=1.0,
        nan_evals=0,
        gpu_paths={},
        hit_generations=None,
        best_genome=None,
        migrations=[],
        payoff_evaluations=0,
    )


@pytest.mark.parametrize(
    "problem, x, label",
    [
        (InfiniteSphere(2), [0.0, 0.0], "f not finite"),  # no constraints
        (InfiniteSphere(2, n_constraints=1), [0.0, 0.0], "f not finite"),  # the constraint holds
        (InfiniteSphere(2, n_constraints=1, bound=-0.5), [0.0, 0.0], "INFEASIBLE (f not finite)"),
        (ShiftedSphere(2), [0.0, 0.5], "INFEASIBLE"),  # g = 0.25 - x1 > 0
        (ShiftedSphere(2), [0.5, 0.5], "feasible"),
    ],
)
def test_verdict_names_what_failed(problem, x, label):
    rep = end_report(problem, _result(x))
    assert verdict(rep) == label
    line = result_line(_result(x), problem, None)
    assert line.startswith("isles: best f=") and f" {label} (float64) x=[" in line, line


def test_summary_label_without_constraints(capsys):
    print_summary(_result([0.0, 0.0]), InfiniteSphere(2), None)
    out = capsys.readouterr().out
    assert "f not finite (max normalised violation 0" in out and "INFEASIBLE" not in out


def test_run_whose_objective_is_never_finite_is_not_called_infeasible(capsys):
    cfg = make_cfg(
        "+experiment=de_islands",
        "problem._target_=tests.user_problems.InfiniteSphere",
        "++problem.dim=2",
        "generations=3",
        "islands.n=2",
        "algorithm.pop_size=8",
        "device=cpu",
        "progress=false",
        "logger=none",
    )
    run_job(cfg, use_ray=False)
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("isles: best f=")]
    assert line.startswith("isles: best f=inf f not finite (float64)"), line


def test_summary_says_which_constraints_are_equalities(capsys):
    from tests.user_problems import SphereOnPlane  # noqa: PLC0415

    print_summary(_result([0.25, 0.25, 0.25, 0.25]), SphereOnPlane(4), None)
    out = capsys.readouterr().out
    assert "(g <= 0 feasible; the last 1: h = 0, |h| <= 0.0001)" in out and "feasible (max normalised" in out


@pytest.mark.parametrize("device, label", [("cpu", "CPU path: host kernel"), ("cuda:0", "GPU path: host kernel")])
def test_summary_names_the_kernels_path_by_its_device(capsys, device, label):
    # a CPU run's host build was shown as "GPU path: host kernel"
    result = _result([0.0, 0.0], f=0.0)
    result.gpu_paths, result.devices = {0: "host kernel"}, {0: device}
    print_summary(result, ShiftedSphere(2), None)
    out = capsys.readouterr().out
    assert label in out and ("GPU path" in out) == (device != "cpu")
