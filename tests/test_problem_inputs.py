"""Bad problem values typed on the command line (issue 25): one line naming the field as typed and
the allowed values, exit status 2, before Ray starts; integer fields of every problem class."""

import subprocess
import sys
from pathlib import Path

import pytest
from isles.islands.config.build import build_problem

ROOT = Path(__file__).resolve().parents[1]
FINITE = "allowed values are finite numbers (one number, or one per variable)"


@pytest.mark.parametrize(
    "cfg, message",
    [
        # scalar bounds: the list form was checked, the scalar form returned before the check
        ({"_target_": "isles.problems.benchmarks.Sphere", "lower": float("nan")}, f"problem.lower=nan: {FINITE}"),
        ({"_target_": "isles.problems.benchmarks.Sphere", "upper": float("inf")}, f"problem.upper=inf: {FINITE}"),
        ({"_target_": "isles.problems.benchmarks.Sphere", "lower": float("-inf")}, f"problem.lower=-inf: {FINITE}"),
        ({"_target_": "isles.problems.benchmarks.Sphere", "lower": "abc"}, f"problem.lower='abc': {FINITE}"),
        (
            {"_target_": "isles.problems.benchmarks.Sphere", "dim": 3, "upper": [1, "x", 2]},
            f"problem.upper=[1, 'x', 2]: {FINITE}",
        ),
        (
            {"_target_": "isles.problems.benchmarks.Sphere", "dim": 3, "lower": [0, float("nan"), 0]},
            f"problem.lower=[0, nan, 0]: {FINITE}",
        ),
        ({"_target_": "tests.user_problems.ShiftedSphere", "lower": float("nan")}, f"problem.lower=nan: {FINITE}"),
        # integer fields: int(2.5) == 2 ran a 2-variable problem
        (
            {"_target_": "isles.problems.benchmarks.Sphere", "dim": 2.5},
            "problem.dim=2.5: allowed values are integers >= 1",
        ),
        (
            {"_target_": "isles.problems.benchmarks.Sphere", "dim": True},
            "problem.dim=True: allowed values are integers >= 1",
        ),
        (
            {"_target_": "isles.problems.benchmarks.Rastrigin", "dim": float("nan")},
            "problem.dim=nan: allowed values are integers >= 1",
        ),
        (
            {"_target_": "tests.user_problems.ShiftedSphere", "dim": 2.5},
            "problem.dim=2.5: allowed values are integers >= 1",
        ),
        (
            {"_target_": "isles.problems.minmax.SaddleP1", "dim": 2.5},
            "problem.dim=2.5: allowed values are integers >= 1",
        ),
        (
            {"_target_": "isles.problems.binary.Knapsack", "n_items": 10.5},
            "problem.n_items=10.5: allowed values are integers >= 1",
        ),
        (
            {"_target_": "isles.problems.binary.Knapsack", "n_items": 10, "seed": 2.5},
            "problem.seed=2.5: allowed values are integers",
        ),
        (
            {"_target_": "isles.problems.binary.Knapsack", "n_items": 10, "R": 100.5},
            "problem.R=100.5: allowed values are integers",
        ),
    ],
)
def test_bad_problem_value_is_one_line_naming_the_field(cfg, message):
    with pytest.raises(ValueError) as err:
        build_problem(cfg)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_integral_floats_still_pass():
    """``++problem.dim=4.0`` is the integer 4 (Hydra parses it as a float)."""
    p = build_problem({"_target_": "isles.problems.benchmarks.Sphere", "dim": 4.0, "lower": -1, "upper": 2.0})
    assert p.dim == 4 and isinstance(p.dim, int)
    assert p.lower.tolist() == [-1.0] * 4 and p.upper.tolist() == [2.0] * 4


@pytest.mark.parametrize(
    "override, message",
    [
        ("++problem.lower=nan", f"isles: error: problem.lower=nan: {FINITE}"),
        ("++problem.upper=inf", f"isles: error: problem.upper=inf: {FINITE}"),
        ("++problem.lower=abc", f"isles: error: problem.lower='abc': {FINITE}"),
        ("++problem.dim=2.5", "isles: error: problem.dim=2.5: allowed values are integers >= 1"),
    ],
)
def test_cli_refuses_before_ray(override, message):
    p = subprocess.run(
        [
            sys.executable,
            "run.py",
            "+experiment=de_islands",
            "device=cpu",
            "logger=none",
            "generations=2",
            "islands.n_actors=2",
            override,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [message], p.stderr[-2000:]
    assert "Ray" not in p.stdout + p.stderr and "group 0" not in p.stdout
