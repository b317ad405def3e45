"""The local MLflow store (issue 25): runs started at once in a folder without ``mlflow.db`` all
get their records, and the store they leave opens for the next run.

Each process does what a run's tracking process does (:meth:`isles.app.tracking.MlflowTracker.start`,
then ``end``); they wait on a barrier so that they open the store at the same moment, as the jobs
of a parallel sweep or two terminals do. Without the lock of
:func:`isles.app.tracking.prepare_sqlite_store`, MLflow's schema creation races with itself
(``duplicate column name: step``, ``table ... already exists``) and runs are lost.
"""

import multiprocessing as mp
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from isles.app.tracking import MlflowTracker, default_run_name, prepare_sqlite_store, run_source
from mlflow.tracking import MlflowClient

# slow: each repetition creates a fresh store (MLflow's migrations take seconds)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

PROCESSES = 4
REPEATS = 3


def _open_and_log(uri: str, seed: int, barrier, results) -> None:
    """One run's tracking: open the store and the run once every process is ready, log, close."""
    try:
        barrier.wait(timeout=120)
        tracker = MlflowTracker(
            {"tracking_uri": uri, "experiment_name": "race"}, {"seed": seed}, f"seed: {seed}\n", None
        )
        run_id = tracker.start()
        tracker._client.log_metric(run_id, "seed", float(seed))
        tracker.end("FINISHED")
        results.put((seed, run_id, None))
    except BaseException:  # noqa: BLE001  (reported to the test)
        results.put((seed, None, traceback.format_exc(limit=3)[-600:]))


def test_runs_started_at_once_in_a_fresh_folder_are_all_recorded(tmp_path):
    ctx = mp.get_context("fork")  # MLflow imported once, here; the processes start at the same moment
    for repeat in range(REPEATS):
        uri = f"sqlite:///{tmp_path}/fresh{repeat}/mlflow.db"
        barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
        procs = [ctx.Process(target=_open_and_log, args=(uri, seed, barrier, results)) for seed in range(PROCESSES)]
        for p in procs:
            p.start()
        got = [results.get(timeout=240) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        errors = [err for _, _, err in got if err]
        assert not errors, f"repeat {repeat}: {len(errors)} of {PROCESSES} runs lost:\n" + "\n".join(errors)
        client = MlflowClient(tracking_uri=uri)
        runs = client.search_runs([client.get_experiment_by_name("race").experiment_id])
        assert sorted(int(r.data.metrics["seed"]) for r in runs) == list(range(PROCESSES))
        assert {r.info.run_id for r in runs} == {run_id for _, run_id, _ in got}
        assert all(r.info.status == "FINISHED" for r in runs)
        # the store is whole: a later run opens it and is recorded
        later = MlflowTracker({"tracking_uri": uri, "experiment_name": "race"}, {"seed": 99}, "seed: 99\n", None)
        later_id = later.start()
        later.end("FINISHED")
        assert client.get_run(later_id).info.status == "FINISHED"


ROOT = Path(__file__).resolve().parents[1]


def test_a_run_says_what_ran_in_mlflow(tmp_path):
    """As users launch it: the run is named for what ran, MLflow's source tags name ``run.py`` and
    the commit, the description holds the command line, and the experiment opens as model
    training (MLflow's ``mlflow.experimentKind``), not in the GenAI view."""
    store = f"sqlite:///{tmp_path}/mlflow.db"
    args = [
        "+experiment=cmepso",
        "generations=3",
        "islands.n=2",
        "algorithm.n_particles=6",
        "seed=7",
        "progress=false",
        "device=cpu",
        f"logger.tracking_uri={store}",
        "logger.wait=true",  # the run waits for its MLflow record (by default it is written after the run exits)
        f"hydra.run.dir={tmp_path}/out",
    ]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    p = subprocess.run(
        [sys.executable, "run.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "INFO mlflow" not in p.stdout + p.stderr  # MLflow's own INFO lines stay out of the run's output
    (run_id,) = re.findall(r"mlflow_run=(\w+)", p.stdout)
    client = MlflowClient(tracking_uri=store)
    run = client.get_run(run_id)
    assert run.info.run_name == "cmepso-welded_beam-s7"
    tags = run.data.tags
    assert tags["mlflow.source.name"] == "run.py" and tags["mlflow.source.type"] == "LOCAL"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    assert tags["mlflow.source.git.commit"] == head == tags["git_commit"]
    assert tags["mlflow.note.content"] == "Command:\n\n    python run.py " + " ".join(args) + "\n"
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "cmepso" and exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_run_name_and_kind_set_by_hand_stay(tmp_path):
    """``logger.run_name`` names the run; an experiment whose kind was set by hand keeps it."""
    store = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=store)
    prepare_sqlite_store(store)
    kind = {"mlflow.experimentKind": "genai_development"}  # its artifacts beside the store, not in the checkout
    exp_id = client.create_experiment("mine", artifact_location=(tmp_path / "mlruns").as_uri(), tags=kind)
    tracker = MlflowTracker(
        {"tracking_uri": store, "experiment_name": "mine", "run_name": "my run"},
        {"seed": 3},
        "seed: 3\n",
        None,
        source={"name": "isles", "command": "isles +experiment=de seed=3", "experiment": "de", "overrides": []},
    )
    run_id = tracker.start()
    tracker.end("FINISHED")
    run = client.get_run(run_id)
    assert run.info.run_name == "my run" and run.data.tags["mlflow.source.name"] == "isles"
    assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "genai_development"


@pytest.mark.parametrize(
    ("argv", "name", "command"),
    [
        (["run.py", "+experiment=cmepso", "problem.dim=3"], "run.py", "python run.py +experiment=cmepso problem.dim=3"),
        (
            ["/venv/bin/isles", "+experiment=de", "logger.run_name=a b"],
            "isles",
            "isles +experiment=de 'logger.run_name=a b'",
        ),
        (["/src/isles/isles/__main__.py", "seed=1"], "isles", "python -m isles seed=1"),
    ],
)
def test_run_source_names_the_command(argv, name, command):
    source = run_source(argv)
    assert (source["name"], source["command"]) == (name, command)


def test_default_run_name_falls_back_to_the_algorithm():
    from isles.problems.engineering import Spring

    params = {
        "seed": 2,
        "logger.experiment_name": "isles",
        "algorithm._target_": "isles.algorithms.de.DE",
        "problem._target_": "isles.problems.engineering.Spring",
    }
    assert default_run_name(params, Spring(), {"experiment": None}) == "de-spring-s2"
    assert default_run_name(params, None, {"experiment": "de_islands"}) == "de_islands-spring-s2"


@pytest.mark.parametrize(
    ("argv", "started"),
    [
        (["+experiment=cmepso", "device=cpu"], True),
        (["+experiment=cmepso", "logger=none"], False),
        (["+experiment=cmepso", "logger.enabled=false"], False),
        (["-m", "+experiment=cmepso", "seed=0,1"], False),  # a sweep's jobs may run in other processes
        (["--cfg", "job"], False),
    ],
)
def test_the_command_line_starts_the_tracking_process_before_hydra(argv, started, monkeypatch, tmp_path):
    """``prestart`` (called by the command line before Hydra composes the config) starts the
    tracking process for one run that tracks, and the run's ``TrackingProcess`` takes that one:
    MLflow's imports overlap the run's start-up instead of following it (issue 25 §4)."""
    from isles.app import tracking_process

    monkeypatch.setattr(tracking_process, "_prestarted", None)
    assert tracking_process.prestart(argv) is started
    if not started:
        assert tracking_process._prestarted is None
        return
    proc, _ = tracking_process._prestarted
    assert proc.poll() is None and tracking_process.prestart(argv) is False  # one at a time
    tracker = tracking_process.TrackingProcess({"tracking_uri": f"sqlite:///{tmp_path}/unused.db"}, {}, "", None)
    monkeypatch.setattr(tracker, "_pump", lambda: None)  # nothing sent: the process is only taken
    tracker.start()
    assert tracker._proc is proc and tracking_process._prestarted is None
    tracker._conn.close()  # the process finds its pipe closed and ends, quietly
    assert proc.wait(timeout=120) == 0
