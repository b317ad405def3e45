"""Faults: an island-group actor killed with SIGKILL mid-run is restarted by Ray from the last
snapshot, and the run ends with exactly the result of an uninterrupted run (NumPy, sync mode);
a resume under a changed config is refused with the fields that differ."""

import os
import signal

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.islands.control import checkpoint
from isles.islands.control.callbacks import Callback, Monitors
from isles.islands.coordinator import Coordinator

from tests.helpers import interrupt_at, make_cfg, plain

# slow: real Ray actors killed and restarted, runs interrupted and resumed (CI runs them; the quick run -m "not slow" does not)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

DE = [
    "+experiment=de_islands",
    "problem._target_=tests.user_problems.SlowSphere",
    "problem.dim=6",
    "+problem.delay_s=0.004",
    "algorithm.pop_size=12",
    "generations=120",
    "islands.n=4",
    "islands.migration_interval=10",
    "islands.snapshot_every=3",
    "logger=none",
    "progress=false",
    "device=cpu",
]


class KillAt(Callback):
    """Callback: SIGKILL the actor of group ``group`` when epoch ``epoch`` is published (once)."""

    def __init__(self, epoch: int, group: int = 0):
        self.epoch, self.group, self.pids, self.killed, self.restarted = epoch, group, [], False, {}

    def on_start(self, info):
        self.pids = [g["pid"] for g in info["groups"]]

    def on_restart(self, info):
        self.restarted.update(info["groups"])

    def on_epoch(self, rec):
        if rec.epoch == self.epoch and not self.killed:
            self.killed = True
            os.kill(self.pids[self.group], signal.SIGKILL)


def coordinator(*overrides, callbacks=(), use_ray=True):
    cfg = plain(make_cfg(*DE, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=callbacks, use_ray=use_ray)


@pytest.mark.parametrize("n_actors", [2, 1])  # 2: the driver's loop; 1: the loop inside the actor
def test_killed_actor_is_restarted_and_the_result_is_unchanged(ray_local, n_actors, caplog):
    reference = coordinator(f"islands.n_actors={n_actors}").run()
    kill = KillAt(epoch=5)
    with caplog.at_level("WARNING", logger="isles.islands.coordinator"):
        result = coordinator(f"islands.n_actors={n_actors}", callbacks=[kill]).run()
    assert kill.killed
    assert list(kill.restarted) == [0] and kill.restarted[0]["pid"] != kill.pids[0]  # told to the callbacks
    assert "died" in caplog.text and "snapshot of epoch" in caplog.text  # it was restarted mid-run
    assert result.best_f == reference.best_f
    np.testing.assert_array_equal(result.best_x, reference.best_x)
    np.testing.assert_array_equal(result.history[-1].island_best_f, reference.history[-1].island_best_f)


def test_a_lone_actor_killed_after_a_mid_run_snapshot_resumes_from_that_epochs_state(ray_local, caplog):
    """One actor whose span was started ahead while the driver booked the span before: the snapshot
    due at that span's end must be the state of its epoch, carried in the summaries (asked of the
    actor then, it was a later epoch's state: the restored run ran ahead, 4,848 evaluations at
    epoch 6 against 2,928)."""
    reference = coordinator("islands.n_actors=1").run()
    kill = KillAt(epoch=8)
    with caplog.at_level("WARNING", logger="isles.islands.coordinator"):
        result = coordinator("islands.n_actors=1", callbacks=[kill]).run()
    assert kill.killed and "snapshot of epoch" in caplog.text and "snapshot of epoch 0 " not in caplog.text
    assert [r.evaluations for r in result.history] == [r.evaluations for r in reference.history]
    assert result.best_f == reference.best_f
    np.testing.assert_array_equal(result.best_x, reference.best_x)
    assert [h.epoch for h in result.history] == list(range(1, 13))


def test_without_restarts_a_killed_actor_ends_the_run(ray_local):
    from ray.exceptions import RayActorError

    with pytest.raises(RayActorError):
        coordinator("islands.n_actors=2", "islands.max_restarts=0", callbacks=[KillAt(epoch=2)]).run()


def test_resume_refuses_a_changed_config(tmp_path):
    path = tmp_path / "ck.pkl"
    coordinator("generations=40", "checkpoint.every=2", f"checkpoint.path={path}", use_ray=False).run()
    assert checkpoint.load(path)["epoch"] == 4
    with pytest.raises(ValueError, match=r"algorithm.F: saved 0.5, now 0.7"):
        coordinator(f"checkpoint.resume={path}", "algorithm.F=0.7", use_ray=False).run()
    resumed = coordinator(f"checkpoint.resume={path}", use_ray=False).run()  # same config: goes on
    assert resumed.generations == 120


def _cli(args, cwd, **kw):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen(
        [sys.executable, str(root / "run.py"), *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def test_sigterm_checkpoints_and_the_resume_gives_the_uninterrupted_result(tmp_path):
    import re
    import shlex
    import time

    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path}/mlflow.db"
    args = [
        *[a for a in DE if a not in ("logger=none", "device=cpu")],
        "generations=600",
        "+problem.delay_s=0.02",
        "device=cpu",
        "ray.num_cpus=2",
        f"logger.tracking_uri={store}",
        "logger.wait=true",  # the MLflow record is read back right after each run
        "islands.n_actors=2",
    ]
    args = [a for a in args if a != "+problem.delay_s=0.004"]
    full = _cli([*args, f"hydra.run.dir={tmp_path}/out"], tmp_path)
    out_full, err_full = full.communicate(timeout=300)
    assert full.returncode == 0, err_full[-2000:]
    (line_full,) = [ln for ln in out_full.splitlines() if ln.startswith("isles: best f=")]

    # the run to stop writes its own folder: its history.csv has the epochs the driver made (MLflow's
    # metrics lag behind them under load, and came once after the run had finished)
    folder = tmp_path / "stopped"
    run = _cli([*args, f"hydra.run.dir={folder}"], tmp_path)
    deadline = time.time() + 300  # a hang guard (Ray starts slowly under load)
    while time.time() < deadline and run.poll() is None:  # wait until the run has made a few epochs
        time.sleep(0.2)
        if (folder / "history.csv").is_file() and len((folder / "history.csv").read_text().splitlines()) >= 3:
            break
    assert not (folder / "best_solution.json").exists()  # still running: the signal comes mid-run
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err[-2000:]
    client = MlflowClient(tracking_uri=store)
    runs = client.search_runs(
        [client.get_experiment_by_name("de-islands").experiment_id], order_by=["attributes.start_time DESC"]
    )
    killed = client.get_run(runs[0].info.run_id)
    assert killed.info.status == "KILLED"
    cmd = re.search(r"resume with:\n  (python \S*run.py .*)", err).group(1)  # as started: python /path/run.py
    resume = _cli(shlex.split(cmd)[2:], tmp_path)
    out_res, err_res = resume.communicate(timeout=300)
    assert resume.returncode == 0, err_res[-2000:]
    (line_res,) = [ln for ln in out_res.splitlines() if ln.startswith("isles: best f=")]
    strip = lambda ln: re.sub(r" (wall|solution|mlflow_run)=\S+", "", ln)  # noqa: E731
    assert strip(line_res) == strip(line_full)  # the same best f, x and evaluations
    assert f"mlflow_run={killed.info.run_id}" in line_res  # resumed into the same MLflow run
    assert client.get_run(killed.info.run_id).info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(killed.info.run_id, "best_f")]
    assert steps == sorted(set(steps)) and steps[-1] == 600  # every epoch once, none replayed twice


def test_resume_with_another_number_of_actors_gives_the_same_result(tmp_path):
    path = tmp_path / "ck.pkl"
    whole = coordinator("islands.n_actors=2", use_ray=False).run()
    coordinator(
        "islands.n_actors=2", "generations=40", "checkpoint.every=2", f"checkpoint.path={path}", use_ray=False
    ).run()
    for n in (1, 4):  # saved by 2 groups, resumed by 1 and by 4
        resumed = coordinator(f"islands.n_actors={n}", f"checkpoint.resume={path}", use_ray=False).run()
        assert resumed.best_f == whole.best_f
        np.testing.assert_array_equal(resumed.history[-1].island_best_f, whole.history[-1].island_best_f)


def test_lost_actors_not_restarted_leave_a_checkpoint_and_the_resume_command(tmp_path, monkeypatch):
    """The job's side of :class:`RestartFailed` (its cluster side is in tests/test_multinode.py):
    the last snapshot becomes a checkpoint, the error names it and the resume command, and the
    resume gives the uninterrupted result."""
    from isles.app.job import run_job
    from isles.islands.coordinator import RestartFailed

    whole = coordinator("islands.n_actors=2", use_ray=False).run()

    def drive_then_lose(self, epochs):  # actors lost for good in epoch 6 of 12 (last snapshot: epoch 3)
        for _ in range(5):
            self.publish(next(epochs))
        raise RestartFailed("islands.restart_timeout_s=5: island group(s) 1 lost and not restarted")

    monkeypatch.setattr(Monitors, "drive", drive_then_lose)
    path = tmp_path / "ck.pkl"
    with pytest.raises(
        RestartFailed,
        match=rf"not restarted; checkpoint {path}; once the cluster has room, "
        rf"resume with: python run.py checkpoint.resume={path}$",
    ):
        run_job(make_cfg(*DE, "islands.n_actors=2", f"checkpoint.path={path}"), use_ray=False)
    monkeypatch.undo()
    assert checkpoint.load(path)["epoch"] == 3
    resumed = coordinator("islands.n_actors=2", f"checkpoint.resume={path}", use_ray=False).run()
    assert [h.epoch for h in resumed.history] == list(range(1, 13))
    assert resumed.best_f == whole.best_f
    np.testing.assert_array_equal(resumed.history[-1].island_best_f, whole.history[-1].island_best_f)


# -- async mode: each group's own snapshot; results depend on timing, counters do not ------------

ASYNC = ["islands.mode=async", "islands.n_actors=2"]


def test_async_killed_actor_goes_back_to_its_own_snapshot(ray_local, caplog):
    reference = coordinator(*ASYNC).run()
    kill = KillAt(epoch=7)
    with caplog.at_level("WARNING", logger="isles.islands.coordinator"):
        result = coordinator(*ASYNC, callbacks=[kill]).run()
    assert kill.killed and list(kill.restarted) == [0]
    assert "island group 0 died" in caplog.text and "the other groups go on" in caplog.text
    # the run's island-generations spent once (the shared pool, islands.async_budget's default: what the
    # lost group had claimed since its snapshot went back to the pool, and its lost epochs ran again)
    assert (result.generations, result.evaluations) == (reference.generations, reference.evaluations) == (120, 5808)
    assert result.history[-1].generation == 120


def test_async_checkpoint_resumes_with_more_generations(ray_local, tmp_path):
    path = tmp_path / "async.pkl"
    reference = coordinator(*ASYNC).run()
    first = coordinator(*ASYNC, "generations=60", "checkpoint.every=2", f"checkpoint.path={path}").run()
    assert first.generations == 60
    saved = checkpoint.load(path)
    # the final checkpoint: each group's last whole epoch (groups of 2 islands; each group's share of the
    # pool depends on timing, and its last epochs shorten: none of those is saved, as in sync mode)
    gens = saved["async"]["gens"]
    assert saved["mode"] == "async" and all(g % 10 == 0 for g in gens) and 100 <= sum(gens) <= 120
    assert saved["async"]["done"] == sum(gens) // 2
    resumed = coordinator(*ASYNC, f"checkpoint.resume={path}").run()
    assert (resumed.generations, resumed.evaluations) == (120, reference.evaluations)
    # the saved records go on (24 epochs of 10 generations, and the pool's shortened last epochs)
    assert [h.epoch for h in resumed.history] == list(range(1, len(resumed.history) + 1)) and len(resumed.history) >= 24
    with pytest.raises(
        ValueError,
        match=r"an async run resumes with the grouping it was saved with: "
        r"islands.n_actors=2 \(now 1\)",
    ):
        coordinator("islands.mode=async", "islands.n_actors=1", f"checkpoint.resume={path}").run()


@pytest.mark.parametrize("budget", ["shared", "island"])
def test_a_one_actor_async_run_stopped_inside_an_epoch_resumes_as_the_uninterrupted_run(ray_local, tmp_path, budget):
    """On one actor the async run is the sync one, and so is its resume (either budget). Before: a run
    stopped inside an epoch (75 generations, 10 an epoch) saved that epoch's state, and the resume's
    epochs and migrations ran off the uninterrupted run's (80, 90, ... from 75). Now its checkpoint is
    the last whole epoch's (70)."""
    path = tmp_path / "async.pkl"
    one = ["islands.mode=async", "islands.n_actors=1", f"islands.async_budget={budget}"]
    whole = coordinator(*one).run()
    coordinator(*one, "generations=75", "checkpoint.every=2", f"checkpoint.path={path}").run()
    assert checkpoint.load(path)["async"]["gens"] == [70]
    resumed = coordinator(*one, f"checkpoint.resume={path}").run()
    assert (resumed.best_f, resumed.evaluations, resumed.generations) == (whole.best_f, whole.evaluations, 120)
    np.testing.assert_array_equal(resumed.best_x, whole.best_x)
    np.testing.assert_array_equal(resumed.history[-1].island_best_f, whole.history[-1].island_best_f)


def test_async_interrupt_checkpoints_and_resumes(ray_local, tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM, which the job turns into the same interrupt) in async mode: the job
    writes every group's latest state as a checkpoint and prints the resume command; the resumed
    run ends with the uninterrupted run's counters."""
    from isles.app.job import run_job

    reference = coordinator(*ASYNC).run()
    interrupt_at(monkeypatch, 7)
    path = tmp_path / "async.pkl"
    with pytest.raises(SystemExit) as stop:
        run_job(make_cfg(*DE, *ASYNC, f"checkpoint.path={path}"), use_ray=True)
    monkeypatch.undo()
    assert stop.value.code == 130
    assert f"resume with:\n  python run.py checkpoint.resume={path}" in capsys.readouterr().err
    saved = checkpoint.load(path)
    assert saved["mode"] == "async" and 0 < sum(saved["async"]["gens"]) < 240 and saved["published_epoch"] == 7
    resumed = coordinator(*ASYNC, f"checkpoint.resume={path}").run()
    assert (resumed.generations, resumed.evaluations) == (120, reference.evaluations)


def test_sigterm_to_the_whole_process_group_stops_cleanly_and_resumes(tmp_path):
    """``timeout``, Slurm's ``scancel`` and ``kill -- -PGID`` signal every process of the run's
    process group. The local Ray runs in a session of its own (app/local_ray.py), so the signal
    reaches the driver only: it exits 130 within seconds with a checkpoint, the resume line and
    its MLflow run KILLED (before: Ray's processes died first, the driver waited 60 s for the GCS
    and exited 1, MLflow FAILED, nothing saved). The resume goes on to the run's end."""
    import re
    import shlex

    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path}/mlflow.db"
    args = [
        *[a for a in DE if a not in ("logger=none", "progress=false", "+problem.delay_s=0.004")],
        "+problem.delay_s=0.01",
        "generations=200",
        "islands.n_actors=2",
        "ray.num_cpus=2",
        f"logger.tracking_uri={store}",
        "logger.wait=true",  # the MLflow record is read back right after the run
        f"hydra.run.dir={tmp_path}/out",
    ]
    run = _cli(args, tmp_path, start_new_session=True)  # its own group: the test's group is not signalled
    try:
        lines = (ln for ln in run.stdout if ln.startswith("generation "))
        for _ in zip(range(2), lines, strict=False):  # two progress lines: the actors are evolving, a snapshot is kept
            pass
        os.killpg(run.pid, signal.SIGTERM)
        _, err = run.communicate(timeout=300)  # a hang guard: the bug was an exit 1 after the GCS wait, below
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130, err[-2000:]
    assert "Failed to connect to GCS" not in err  # the driver did not wait for a dead Ray (the seconds: load's)
    path = tmp_path / "out" / "checkpoint.pkl"
    saved = checkpoint.load(path)
    assert saved["done_gens"] < 200  # the last snapshot (the span schedules when it is taken)
    client = MlflowClient(tracking_uri=store)
    (killed,) = client.search_runs([client.get_experiment_by_name("de-islands").experiment_id])
    assert killed.info.status == "KILLED"
    cmd = re.search(r"resume with:\n  (python \S*run.py .*)", err).group(1)  # as started: python /path/run.py
    assert f"checkpoint.resume={path}" in cmd
    assert shlex.split(cmd)[1] == os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "run.py")
    resume = _cli(shlex.split(cmd)[2:], tmp_path)
    _, err_res = resume.communicate(timeout=300)
    assert resume.returncode == 0, err_res[-2000:]
    finished = client.get_run(killed.info.run_id)
    assert finished.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(killed.info.run_id, "best_f")]
    assert steps == sorted(set(steps)) and steps[-1] == 200  # every epoch once, to the end
