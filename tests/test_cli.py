"""``python run.py ...`` as users type it: bad input gives a one-line error naming the field and
the allowed values, with a non-zero exit code; a user's own problem plugs in through the config."""

import subprocess
import sys
from pathlib import Path

import pytest
from isles.algorithms.core.backend import cupy_or_none

ROOT = Path(__file__).resolve().parents[1]


def on_cpu(args) -> list:
    """``args`` with ``device=cpu`` unless they name a device (a CPU test says so: issue 16 §3)."""
    return args if any(a.startswith("device=") for a in args) else [*args, "device=cpu"]


def run_cli(*args, timeout=180):
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["+experiment=cmepso", "algorithm.n_particles=0"],
            "algorithm.n_particles=0: allowed values are integers >= 1",
        ),
        (["+experiment=cmepso", "islands.n=-3"], "islands.n=-3: allowed values are integers >= 1"),
        pytest.param(
            ["+experiment=cmepso", "device=gpu"],
            "device=gpu: no GPU is visible",
            marks=pytest.mark.skipif(cupy_or_none() is not None, reason="a GPU is visible here"),
        ),
        (["+experiment=cmepso", "device=tpu"], "device='tpu': allowed values are auto|cpu|gpu"),
        (["+experiment=cmepso", "dtype=float16"], "dtype='float16': allowed values are float32|float64"),
        (
            ["problem._target_=tests.user_problems.ShiftedSphere", "+problem.lower=[0,0]"],
            "problem.lower has 2 entries but problem.dim=3",
        ),
        (["topology=free_form", "topology.edges=[[0,9]]", "islands.n=4"], "island 9 does not exist"),
        (["+experiment=de_islands", "algorithm.CR=1.5"], "algorithm.CR=1.5"),
        (["+experiment=de_islands", "algorithm.F=0"], "algorithm.F=0"),
        (["+experiment=de_islands", "algorithm.strategy=rand/2", "algorithm.pop_size=5"], "algorithm.pop_size=5"),
        (["+experiment=de_islands", "algorithm.strategy=rand/9"], "algorithm.strategy='rand/9'"),
        (
            ["+experiment=de_islands", "islands.n_migrants=51"],
            "islands.n_migrants=51: allowed values are integers 1..50",
        ),
        # caught before Ray starts, named as the user typed them (issue 9, section 3)
        (["+experiment=cmepso", "+generation=10"], "generation: unknown key (did you mean 'generations'?)"),
        (["+experiment=cmepso", "+islands.size=3"], "islands.size: unknown key; allowed keys here: islands.n,"),
        # keys of earlier versions name where they went (issue 26: the master swarm became a plug-in)
        (
            ["+experiment=cmepso", "islands.master_sends_best=true"],
            "islands.master_sends_best: unknown key (it moved: plugins.0.sends_best",
        ),
        (["+master=cmepso"], "master: unknown key (it moved: a plug-in of the list plugins: +plugin=master_swarm"),
        (
            ["+experiment=cmepso", "constraints.handling=deb"],
            "constraints.handling='deb': allowed values are feasibility|penalty",
        ),
        (["+experiment=cmepso", "constraints.penalty=0"], "constraints.penalty=0.0: allowed values are numbers > 0"),
        (["+experiment=cmepso", "checkpoint.resume=/no/such.pkl"], "checkpoint.resume='/no/such.pkl': no such file"),
        (["+experiment=cmepso", "islands.n_actors=0"], "islands.n_actors=0: allowed values are integers >= 1"),
        (
            ["+experiment=cmepso", "islands.restart_timeout_s=0"],
            "islands.restart_timeout_s=0.0: allowed values are numbers > 0",
        ),
        (
            ["+experiment=cmepso", "islands.placement=spread_out"],
            "islands.placement='spread_out': allowed values are spread|strict_spread|pack",
        ),
        (
            ["+experiment=cmepso", "islands.replacement=swap"],
            "islands.replacement='swap': allowed values are fair_replace|replace_worst",
        ),
        (["+experiment=cmepso", "generations=-5"], "generations=-5: allowed values are integers >= 1"),
        (["+experiment=cmepso", "ray.address=127.0.0.1:1"], "ray.address='127.0.0.1:1': nothing answers there"),
        (["+experiment=cmepso", "islands.n=abc"], "islands.n"),
        # the Coordinator's checks, now the schema's (issue 19): still one line, before Ray
        (
            ["+experiment=cmepso", "islands.mode=async"],
            "islands.mode=async: plugins (the loop's plug-ins) need islands.mode=sync",
        ),
        (["+experiment=de_islands", "stop.tol=-1"], "stop.tol=-1.0: allowed values are numbers >= 0"),
    ],
)
def test_bad_input_one_line_error(args, needle):
    p = run_cli(*on_cpu(args), "logger=none")
    assert p.returncode != 0
    assert needle in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr


def test_unknown_topology_lists_the_options():
    p = run_cli("+experiment=de_islands", "topology=hypercube", "logger=none", "device=cpu")
    assert p.returncode != 0
    assert "Could not find 'topology/hypercube'" in p.stderr and "fully_connected" in p.stderr


def test_unknown_problem_lists_the_options():
    p = run_cli("+experiment=cmepso", "problem=no_such_problem", "logger=none", "device=cpu")
    assert p.returncode != 0
    assert "Could not find 'problem/no_such_problem'" in p.stderr
    assert "welded_beam" in p.stderr and "speed_reducer" in p.stderr  # the allowed values


@pytest.mark.slow  # a whole run
def test_user_problem_plugs_in_through_config():
    p = run_cli(
        "problem._target_=tests.user_problems.ShiftedSphere",
        "+problem.dim=2",
        "generations=40",
        "islands.n=2",
        "islands.n_actors=1",
        "logger=none",
        "ray.num_cpus=1",
        "device=cpu",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "shifted_sphere" in p.stdout and "feasible" in p.stdout


@pytest.mark.slow  # a whole run
def test_quiet_run_still_prints_its_result():
    p = run_cli("+experiment=cmepso", "generations=20", "progress=false", "logger=none", "ray.num_cpus=1", "device=cpu")
    assert p.returncode == 0, p.stderr[-2000:]
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("isles: best f=")]
    assert "feasible" in line and "evaluations=" in line


@pytest.mark.slow  # Ray actors
def test_failure_inside_an_actor_is_one_line_with_the_users_file():
    p = run_cli(
        "problem._target_=tests.user_problems.FailingSphere",
        "+problem.fail_after=8",
        "generations=50",
        "islands.n=2",
        "islands.n_actors=2",
        "logger=none",
        "progress=false",
        "ray.num_cpus=2",
        "device=cpu",
    )
    assert p.returncode == 1
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("isles: error:")]
    assert len(lines) == 1 and "objective crashed" in lines[0] and "user_problems.py:" in lines[0]
    assert "full traceback in" in lines[0]
    assert "Traceback" not in p.stderr and "Unhandled error" not in p.stderr


@pytest.mark.parametrize(
    "args, needle",
    [  # the other CDE fields are checked in-process (tests/test_cde.py); the messages are the same
        (["+experiment=cde", "algorithm.gens_y=0"], "algorithm.gens_y=0: allowed values are integers >= 1"),
        (["+experiment=cde", "problem=g07", "constraints.r=0"], "constraints.r=0.0: allowed values are numbers > 0"),
        (
            ["+experiment=cde", "problem._target_=tests.user_problems.BadPayoff"],
            # the class's own dim=2, not the experiment's p1_minmax dim=100 (issue 16)
            "returned shape (1, 2) for X (1, 2, 2) and Y (1, 3, 2): expected (1, 2, 3)",
        ),
        (
            ["algorithm=de", "problem=g07", "constraints.handling=augmented_lagrangian"],
            "constraints.handling=augmented_lagrangian: needs a min-max algorithm",
        ),
    ],
)
def test_cde_bad_input_one_line_error(args, needle):
    p = run_cli(*on_cpu(args), "logger=none")
    assert p.returncode != 0
    assert needle in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]


@pytest.mark.slow  # a whole run
def test_cde_runs_as_typed():
    """``python run.py +experiment=cde problem=g07`` as typed, on a budget (2 islands, 3 cycles)."""
    p = run_cli(
        "+experiment=cde",
        "problem=g07",
        "algorithm.n_cycles=3",
        "islands.n=2",
        "logger=none",
        "ray.num_cpus=1",
        "device=cpu",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "g07" in p.stdout and "f* = 24.30620907" in p.stdout


def test_a_missing_user_module_is_one_line(tmp_path):
    # issue 25: Hydra's own 3-line "[ERROR] ... Are you sure that module ... is installed?" came first
    # (Hydra's log, on stdout); the same in a sweep's check of every job before the first starts
    p = run_cli("problem._target_=nosuchmodule.P", "logger=none", "device=cpu")
    assert p.returncode == 2
    assert p.stdout == ""  # Hydra's log lines go to stdout
    assert p.stderr.splitlines() == [
        "isles: error: problem._target_='nosuchmodule.P': no module named 'nosuchmodule': run isles from the folder "
        "that holds nosuchmodule.py (or its package folder), or add that folder to PYTHONPATH"
    ]
    p = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "problem._target_=nosuchmodule.P",
            "logger=none",
            "device=cpu",
            "seed=0,1",
            f"hydra.sweep.dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.splitlines()
    assert line.startswith("isles: error: job 0 (seed=0): problem._target_='nosuchmodule.P': no module named")
