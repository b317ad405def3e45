"""What a user sees when something fails, and what MLflow keeps (issue 16, section 1):

* the end-of-run report never loses a finished result (a min-max problem without a closed-form
  worst case; a summary that fails for any reason);
* an MLflow run is never FINISHED after a failure (Ray's start, the tracking process);
* a ``ValueError`` raised in a user's objective is a failure inside the run (exit 1, file and
  line, saved traceback), not a config refusal (exit 2);
* ``ray.address=auto`` with no Ray to find, and a local MLflow store in Ray's temporary copy of a
  job's working directory, are one-line refusals before a run opens;
* ``generation=10`` gets the did-you-mean line; ``constraints.r=inf`` is refused.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from isles.algorithms.core.base import check_range
from isles.app import errors, job, ray_setup, tracking_server
from isles.app.job import run_job
from isles.islands.control import checkpoint
from mlflow.tracking import MlflowClient

from isles import cli
from tests.helpers import make_cfg
from tests.test_cli import ROOT, run_cli
from tests.user_problems import FailingSphere

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: a user's min-max problem left at objective_known = False, on a small budget, on the CPU
USER_MINMAX = (
    "+experiment=cde",
    "problem._target_=tests.user_problems.UserSaddle",
    "problem.dim=2",
    "islands.n=2",
    "algorithm.n_cycles=2",
    "algorithm.pop_size=8",
    "algorithm.gens_x=2",
    "algorithm.gens_y=2",
    "device=cpu",
    "progress=false",
)


def _runs(store, experiment):
    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name(experiment)
    return client, ([] if exp is None else client.search_runs([exp.experiment_id]))


# -- 1. the result survives the report ---------------------------------------------------------
def test_minmax_problem_without_its_worst_case_keeps_its_result(store, capsys):
    """CDE on a user's min-max problem whose worst case is not known: the float64 report cannot
    evaluate f, and says so in one line; x and the run's f are printed and logged."""
    result, run_id = run_job(make_cfg(*USER_MINMAX, f"logger.tracking_uri={store}"), use_ray=False)
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("isles: best f=")]
    assert f"x=[{result.best_x[0]:.10g}, {result.best_x[1]:.10g}]" in line and "(run)" in line
    (note,) = [ln for ln in out.splitlines() if ln.startswith("isles: not computed:")]
    assert "NotImplementedError" in note and "UserSaddle.objective" in note
    client, (run,) = _runs(store, "cde")
    assert run.info.run_id == run_id and run.info.status == "FINISHED"
    best = json.loads(Path(client.download_artifacts(run_id, "best_solution.json")).read_text())
    assert best["x"] == pytest.approx(list(result.best_x)) and best["run_best_f"] == pytest.approx(result.best_f)
    assert best["f"] is None and "NotImplementedError" in best["not_computed"]
    assert "NotImplementedError" in run.data.tags["report_not_computed"]


def test_minmax_summary_table_says_what_it_could_not_compute(capsys):
    """The rich summary (progress=true) prints x and one line naming what was not computed."""
    result, _ = run_job(make_cfg(*USER_MINMAX[:-1], "logger=none"), use_ray=False)
    out = capsys.readouterr().out
    assert f"{result.best_x[0]:.10g}" in out
    (note,) = [ln for ln in out.splitlines() if ln.startswith("not computed:")]
    assert "float64 f, g and feasibility of the best x: NotImplementedError" in note
    assert f"f = {result.best_f:.10g} (best fitness in the run)" in out


def test_a_summary_that_fails_still_prints_the_result(store, capsys, monkeypatch, tmp_path):
    """Whatever fails in the end-of-run summary, the result is printed (x, f, MLflow run) and
    one line says what failed, with the log file that holds the traceback; the MLflow run still
    finishes with its result."""

    def broken(*args, **kwargs):
        raise KeyError("summary broke (test)")

    monkeypatch.setattr(job, "result_line", broken)
    monkeypatch.chdir(tmp_path)  # outside Hydra, the traceback goes to run.log in the working directory
    cfg = make_cfg(
        "problem._target_=tests.user_problems.ShiftedSphere",
        "+problem.dim=2",
        "generations=5",
        "islands.n=2",
        "algorithm.n_particles=4",
        "device=cpu",
        "progress=false",
        f"logger.tracking_uri={store}",
    )
    result, run_id = run_job(cfg, use_ray=False)
    captured = capsys.readouterr()
    (line,) = [ln for ln in captured.out.splitlines() if ln.startswith("isles: best f=")]
    assert f"{result.best_x[0]:.10g}" in line and f"mlflow_run={run_id}" in line
    assert "isles: the end-of-run summary failed: KeyError" in captured.err
    assert "summary broke (test)" in (tmp_path / "run.log").read_text()
    _, (run,) = _runs(store, "isles")
    assert run.info.status == "FINISHED"


# -- 2. a failed run is never FINISHED ---------------------------------------------------------
def test_ray_that_fails_to_start_fails_the_mlflow_run(store, monkeypatch):
    def no_ray(ray_cfg, cfg=None):
        raise ConnectionError("no Ray (test)")

    monkeypatch.setattr(job, "init_ray", no_ray)
    cfg = make_cfg(
        "problem._target_=tests.user_problems.ShiftedSphere",
        "generations=3",
        "islands.n=2",
        "device=cpu",
        "progress=false",
        f"logger.tracking_uri={store}",
    )
    with pytest.raises(ConnectionError):
        run_job(cfg, use_ray=True)
    _, (run,) = _runs(store, "isles")
    assert run.info.status == "FAILED"


# -- 3. a ValueError in a user's code is a failure inside the run -------------------------------
def test_value_error_in_users_code_is_not_a_config_error():
    with pytest.raises(ValueError) as user:
        FailingSphere(fail_after=-(10**9), error="ValueError").objective(np.zeros((1, 2)))
    assert not errors.is_config_error(user.value)
    with pytest.raises(ValueError) as refusal:
        check_range("generations", 0, 1, integer=True)
    assert errors.is_config_error(refusal.value)


@pytest.mark.parametrize("n_actors", [1, 2])  # 1: in this process; 2: in Ray actors
def test_value_error_in_users_objective_is_reported_as_a_run_failure(n_actors):
    p = run_cli(
        "problem._target_=tests.user_problems.FailingSphere",
        "+problem.fail_after=8",
        "+problem.error=ValueError",
        "generations=50",
        "islands.n=2",
        f"islands.n_actors={n_actors}",
        "device=cpu",
        "logger=none",
        "progress=false",
        "ray.num_cpus=2",
    )
    assert p.returncode == 1, p.stderr[-2000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("isles: error:")]
    assert line.startswith("isles: error: ValueError: objective crashed (test) at ") and "user_problems.py:" in line
    log = line.split("full traceback in ")[1]
    assert "Traceback" in Path(log).read_text() and "Traceback" not in p.stderr


@pytest.mark.slow  # starts a local Ray, three times
def test_async_run_whose_objective_raises_prints_only_the_error_line(tmp_path):
    """Both actors' objectives raise at once (issue 34): the driver reports the first error; the
    other actor's, which had arrived while the driver read the first one, was printed by Ray as a
    25-line ``Unhandled error`` traceback when its stream was dropped unread."""
    for attempt in range(2):
        barrier = tmp_path / str(attempt)
        barrier.mkdir()
        p = subprocess.run(
            [
                sys.executable,
                "run.py",
                "problem._target_=tests.user_problems.FailingTogether",
                "+problem.fail_after=8",
                f"+problem.barrier={barrier}",
                "generations=50",
                "islands.n=2",
                "islands.n_actors=2",
                "islands.mode=async",
                "device=cpu",
                "logger=none",
                "progress=false",
                "ray.num_cpus=2",
                f"hydra.run.dir={tmp_path / f'run{attempt}'}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "RAY_AUTH_MODE": "token"},  # Ray's token notice skipped (app/ray_security.py)
        )
        assert p.returncode == 1, p.stderr[-2000:]
        assert "Unhandled error" not in p.stderr, f"run {attempt}: {p.stderr[-3000:]}"
        (line,) = p.stderr.strip().splitlines()
        assert line.startswith("isles: error: SlowToRead: objective crashed (test) at ") and "user_problems.py:" in line


#: a run in this process whose user problem raises at its 31st evaluation (after a few epochs)
FAILS_MID_RUN = (
    "problem._target_=tests.user_problems.FailingSphere",
    "+problem.fail_after=30",
    "generations=50",
    "islands.n=2",
    "islands.n_actors=1",
    "device=cpu",
    "logger=none",
    "progress=false",
)


def test_a_run_that_fails_names_the_checkpoint_that_resumes_it(tmp_path):
    # issue 34: the periodic checkpoint (checkpoint.every) and the command that resumes from it
    path = tmp_path / "ck.pkl"
    p = run_cli(*FAILS_MID_RUN, "checkpoint.every=1", f"checkpoint.path={path}", f"hydra.run.dir={tmp_path / 'out'}")
    assert p.returncode == 1, p.stderr[-2000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("isles: error:")]
    assert line.startswith("isles: error: RuntimeError: objective crashed (test) at ") and "full traceback in" in line
    command = line.split("; resume from the last checkpoint with: ")[1]
    assert command.startswith("python run.py ") and command.endswith(f" checkpoint.resume={path}")
    assert all(o in command.split() for o in FAILS_MID_RUN)
    assert checkpoint.load(path)["epoch"] >= 1  # what the run saved before it failed


@pytest.mark.parametrize("stale", [False, True])
def test_a_failure_names_no_checkpoint_the_run_did_not_write(tmp_path, monkeypatch, capsys, stale):
    # without checkpoint.every nothing is saved; a file an earlier run left at checkpoint.path
    # is not this run's (the run fails at its first evaluations, before its first checkpoint)
    monkeypatch.chdir(tmp_path)  # run.log, outside Hydra
    monkeypatch.setattr(FailingSphere, "calls", 0)
    path = tmp_path / "ck.pkl"
    extra = ["+problem.fail_after=0", "checkpoint.every=1", f"checkpoint.path={path}"] if stale else []
    if stale:
        path.write_bytes(b"an earlier run's checkpoint")
    cfg = make_cfg(*(o for o in FAILS_MID_RUN if not (stale and "fail_after" in o)), *extra)
    with pytest.raises(SystemExit) as stop:
        cli.run(cfg)
    assert stop.value.code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("isles: error: RuntimeError: objective crashed (test)") and "resume" not in line
    assert not stale or path.read_bytes() == b"an earlier run's checkpoint"  # the run saved nothing


# -- 4. ray.address=auto with no Ray ------------------------------------------------------------
def _no_ray_to_find(monkeypatch):
    from ray._private import services

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: frozenset())
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)


def test_ray_address_auto_without_ray_is_one_line_before_mlflow(store, monkeypatch):
    _no_ray_to_find(monkeypatch)
    with pytest.raises(ValueError, match=r"^ray.address='auto': no Ray cluster is running on this machine"):
        ray_setup.check_ray_address("auto")
    cfg = make_cfg("+experiment=cmepso", "ray.address=auto", "device=cpu", f"logger.tracking_uri={store}")
    with pytest.raises(ValueError, match="ray.address='auto'"):
        run_job(cfg)
    assert _runs(store, "cmepso")[1] == []  # no MLflow run opened


def test_ray_address_auto_checks_the_address_it_finds(monkeypatch):
    """``auto`` resolving to an address where nothing answers (a stale ``ray start``, or
    ``RAY_ADDRESS``) is refused like ``ray.address=HOST:PORT``."""
    _no_ray_to_find(monkeypatch)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(ValueError, match="nothing answers there"):
        ray_setup.check_ray_address("auto")


# -- 5. ray job submit --working-dir without a tracking server ----------------------------------
@pytest.fixture()
def in_ray_job_copy(tmp_path, monkeypatch):
    """This process as a Ray job's entrypoint, in Ray's unpacked copy of its working directory."""
    copy = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_0123"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    monkeypatch.setenv(
        "RAY_JOB_CONFIG_JSON_ENV_VAR",
        json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_0123.zip"}, "metadata": {}}),
    )
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return copy


def test_local_store_in_ray_job_copy_is_refused_before_the_run(in_ray_job_copy):
    cfg = make_cfg("problem._target_=tests.user_problems.ShiftedSphere", "generations=3", "device=cpu")
    with pytest.raises(ValueError, match=r"^logger.tracking_uri=null .*Ray's temporary copy"):
        run_job(cfg, use_ray=False)
    assert not (in_ray_job_copy / "mlflow.db").exists() and not (in_ray_job_copy / "mlruns").exists()
    with pytest.raises(ValueError, match=r"^logger.tracking_uri='sqlite:///mlflow.db'"):
        tracking_server.reach_tracking_store({"tracking_uri": "sqlite:///mlflow.db"})


def test_named_stores_outside_the_copy_pass(in_ray_job_copy, tmp_path, monkeypatch):
    tracking_server.check_not_in_ray_copy({"tracking_uri": f"sqlite:///{tmp_path}/keep/mlflow.db"})
    tracking_server.check_not_in_ray_copy({"tracking_uri": "http://mlflow.example.org:5000"})
    tracking_server.check_not_in_ray_copy({"tracking_uri": "databricks"})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/keep/mlflow.db")
    tracking_server.check_not_in_ray_copy({"tracking_uri": None})


def test_a_store_named_elsewhere_keeps_its_artifacts_beside_it(tmp_path, monkeypatch):
    """A ``sqlite:`` store outside the launch directory (Ray's copy under ``ray job submit``):
    the artifacts go beside the database, not into the launch directory."""
    from isles.app.tracking import MlflowTracker

    launch, keep = tmp_path / "launch", tmp_path / "keep"
    launch.mkdir()
    keep.mkdir()
    monkeypatch.chdir(launch)
    store = f"sqlite:///{keep}/mlflow.db"
    tracker = MlflowTracker({"tracking_uri": store, "experiment_name": "beside"}, {"seed": 0}, "seed: 0\n", None)
    run_id = tracker.start()
    tracker.end()
    import mlflow

    mlflow.set_tracking_uri(None)
    uri = MlflowClient(tracking_uri=store).get_run(run_id).info.artifact_uri
    assert uri.startswith((keep / "mlruns").as_uri()), uri
    assert os.listdir(launch) == []


# -- 6. smaller --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, needle",
    [
        (["generation=10"], "generation: unknown key (did you mean 'generations'?)"),
        (["islands.size=3"], "islands.size: unknown key; allowed keys here: islands.n,"),
        (["constraints.r=inf"], "constraints.r=inf: allowed values are numbers > 0"),
        (["constraints.penalty=inf"], "constraints.penalty=inf: allowed values are numbers > 0"),
    ],
)
def test_typed_keys_and_values_refused_in_one_line(args, needle):
    p = run_cli("+experiment=cmepso", *args, "logger=none", "device=cpu")
    assert p.returncode == 2, p.stderr[-2000:]
    assert needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
