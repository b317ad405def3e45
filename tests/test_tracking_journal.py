"""The MLflow record of a run through its journal (issue 34 §4, §2): the run's process does not wait
for MLflow, a tracking process killed in the middle of a run loses nothing (``isles sync``, or the
next run, completes the record from the journal in the run's output folder), and a run that fails
or is interrupted keeps its error line (tag ``isles.error``) and ``run.log`` in MLflow."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from isles.app.tracking import ERROR_TAG, flatten
from isles.app.tracking_journal import JOURNAL, STATE, JournalReader, JournalWriter, apply_journal, read_state
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[1]


def isles(*args, cwd=ROOT, env=None, **kwargs):
    """``python run.py ARGS`` (a run, or ``sync``), its output captured."""
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        **kwargs,
    )


def the_run(store: str):
    """The one MLflow run of ``store``."""
    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return client, run


def assert_complete(store: str, folder: Path, status: str = "FINISHED"):
    """Every parameter, metric row and artifact of the run in ``folder`` is in MLflow, once."""
    client, run = the_run(store)
    assert run.info.status == status
    config = yaml.safe_load(Path(client.download_artifacts(run.info.run_id, "config.yaml")).read_text())
    # the config's keys, and the default placement's choice (placement.*) where a probe chose
    assert {k for k in run.data.params if not k.startswith("placement.")} == set(flatten(config))
    with open(folder / "history.csv") as fh:
        generations = [int(float(row["generation"])) for row in csv.DictReader(fh)]
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "best_f")]
    assert sorted(steps) == generations  # every epoch, none twice
    assert {"best_solution.json", "config.yaml", "convergence.png", "history.csv"} <= {
        a.path for a in client.list_artifacts(run.info.run_id)
    }
    assert "final_best_f" in run.data.metrics and "startup_s" in run.data.metrics
    return run


@pytest.fixture(autouse=True)
def pending(tmp_path, monkeypatch):
    """This test's own list of unfinished records."""
    monkeypatch.setenv("ISLES_PENDING_DIR", str(tmp_path / "pending"))


def test_the_journal_reads_whole_entries_only(tmp_path):
    writer = JournalWriter(str(tmp_path), "j1")
    writer.append("args", (1, 2))
    writer.append("on_epoch", {"a": 1}, ts=5)
    writer.flush()
    with open(tmp_path / JOURNAL, "ab") as fh:  # half an entry: a run killed while it wrote
        fh.write(b"\x00\x00\x01\x00abc")
    reader = JournalReader(str(tmp_path / JOURNAL))
    assert reader.next()[:2] == ("args", (1, 2))
    assert reader.next() == ("on_epoch", {"a": 1}, 5)
    assert reader.next() is None and reader.next() is None
    writer.close()
    assert read_state(str(tmp_path))["done"] is False and os.getcwd() in read_state(str(tmp_path))["path"]


def test_a_failure_while_writing_the_record_fails_the_run_and_keeps_the_journal(store, tmp_path):
    """What fails in MLflow (here a result that is not one) ends the run FAILED, never FINISHED, and
    leaves the record unfinished: a later ``isles sync`` tries again."""
    writer = JournalWriter(str(tmp_path), "j2")
    writer.append(
        "args", ({"tracking_uri": store, "experiment_name": "t"}, {"seed": 0}, "seed: 0\n", None, None, None, None)
    )
    writer.append("on_end", object())
    writer.append("end", "FINISHED")
    writer.close()
    told = []
    with pytest.raises(AttributeError):
        apply_journal(str(tmp_path), tell=lambda kind, value: told.append((kind, value)))
    (run_id,) = [v for k, v in told if k == "run_id"]
    assert MlflowClient(tracking_uri=store).get_run(run_id).info.status == "FAILED"
    assert not read_state(str(tmp_path))["done"] and (tmp_path / JOURNAL).exists()


def held_run(tmp_path: Path):
    """Start the main job on GateSphere, which holds it at generation 20 until ``gate`` exists, and
    wait until GateSphere holds it (``gate.held``) and its MLflow run is open (the journal applied
    ``on_start`` and one more record).
    Returns ``(driver, store, folder, gate, env)``."""
    store, folder, gate = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "out", tmp_path / "gate"
    env = {**os.environ, "ISLES_PENDING_DIR": str(tmp_path / "pending")}
    driver = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "+experiment=cmepso", "problem._target_=tests.user_problems.GateSphere",
         f"+problem.gate={gate}", "+problem.after=20", "generations=40", "device=cpu", "islands.n_actors=1", "progress=false",
         f"logger.tracking_uri={store}", f"hydra.run.dir={folder}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    held = Path(f"{gate}.held")  # the run held at its middle (not still before its first epoch, on a loaded machine)
    while not (
        held.exists() and read_state(str(folder)).get("run_id") and read_state(str(folder)).get("applied", 0) >= 2
    ):
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[1][-3000:]
        time.sleep(0.1)
    return driver, store, folder, gate, env


def tracking_process(driver: subprocess.Popen) -> psutil.Process:
    """The run's tracking process (a child of ``driver``)."""
    for child in psutil.Process(driver.pid).children():
        if "child_main" in " ".join(child.cmdline()):
            return child
    raise AssertionError("the run has no tracking process")


@pytest.mark.slow
def test_a_tracking_process_killed_mid_run_loses_nothing(tmp_path):
    """The tracking process is killed (SIGKILL) while the run is held in its middle; the run ends
    as usual (exit 0), and the next run of isles completes the record in the background, which
    ``isles sync`` waits for: every parameter, metric row and artifact, and the FINISHED status."""
    driver, store, folder, gate, env = held_run(tmp_path)
    tracking_process(driver).kill()  # the run opened, on_start written, the run held at its middle
    gate.touch()
    out, err = driver.communicate(timeout=240)
    assert driver.returncode == 0, err[-3000:]
    assert "isles: best f=" in out and not read_state(str(folder))["done"]
    later = isles("+experiment=cmepso", "device=cpu", "logger=none", "generations=2", "progress=false",
                  f"hydra.run.dir={tmp_path / 'later'}", env=env)  # fmt: skip
    assert later.returncode == 0 and "completing the MLflow record of 1 earlier run" in later.stderr, later.stderr
    synced = isles("sync", env=env)
    assert synced.returncode == 0, synced.stderr
    run = assert_complete(store, folder)
    assert read_state(str(folder))["done"] and read_state(str(folder))["run_id"] == run.info.run_id
    assert not (folder / JOURNAL).exists() and not os.listdir(tmp_path / "pending")


@pytest.mark.slow
def test_the_run_does_not_wait_for_its_record_and_isles_sync_does(tmp_path):
    """By default the result is printed and the run's process exits while the tracking process
    finishes the record; ``isles sync FOLDER`` waits for it (``logger.wait=true`` would make the
    run wait instead)."""
    store, folder = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "out"
    env = {**os.environ, "ISLES_PENDING_DIR": str(tmp_path / "pending")}
    p = isles("+experiment=cmepso", "device=cpu", "generations=30", "progress=false", f"logger.tracking_uri={store}",
              f"hydra.run.dir={folder}", env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    synced = isles("sync", folder, env=env)
    assert synced.returncode == 0 and str(folder) in synced.stdout, synced.stdout + synced.stderr
    run = assert_complete(store, folder)
    assert json.loads((folder / STATE).read_text())["run_id"] == run.info.run_id
    assert ERROR_TAG not in run.data.tags


@pytest.mark.slow
@pytest.mark.parametrize("wait", [False, True])
def test_a_run_that_fails_mid_run_keeps_its_error_line_and_log_in_mlflow(tmp_path, wait):
    store, folder = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "out"
    env = {**os.environ, "ISLES_PENDING_DIR": str(tmp_path / "pending")}
    p = isles("+experiment=cmepso", "problem._target_=tests.user_problems.FailingSphere", "+problem.fail_after=30",
              "device=cpu", "progress=false", f"logger.tracking_uri={store}", f"hydra.run.dir={folder}",
              f"logger.wait={str(wait).lower()}", env=env)  # fmt: skip
    assert p.returncode == 1, p.stderr[-3000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("isles: error: ")]
    if not wait:
        assert isles("sync", env=env).returncode == 0
    client, run = the_run(store)
    assert run.info.status == "FAILED"
    assert run.data.tags[ERROR_TAG] == line.removeprefix("isles: error: ")
    assert "objective crashed (test)" in run.data.tags[ERROR_TAG]
    log = Path(client.download_artifacts(run.info.run_id, "run.log")).read_text()
    assert "Traceback" in log and "objective crashed (test)" in log


@pytest.mark.slow
def test_an_interrupted_run_keeps_its_line_in_mlflow(tmp_path):
    driver, store, folder, gate, env = held_run(tmp_path)
    driver.send_signal(signal.SIGINT)
    gate.touch()
    _, err = driver.communicate(timeout=240)
    assert driver.returncode == 130, err[-3000:]
    (line,) = [ln for ln in err.splitlines() if ln.startswith("isles: interrupted after epoch")]
    assert isles("sync", env=env).returncode == 0
    _, run = the_run(store)
    assert run.info.status == "KILLED" and run.data.tags[ERROR_TAG].startswith(line.removeprefix("isles: "))
    assert "checkpoint.resume=" in run.data.tags[ERROR_TAG]  # the resume command, as printed
