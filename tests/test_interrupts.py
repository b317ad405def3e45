"""Ctrl-C at any moment of a run (issue 25): one line saying ``interrupted`` and exit status 130,
never a traceback: while Ray starts, and when the checkpoint of an interrupted run cannot be written."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import isles.app.job as job
import psutil
import pytest
from isles.app.interrupts import interrupts_kept
from isles.app.tracking_process import TrackingProcess
from isles.islands.coordinator import Coordinator

from isles import cli
from tests.helpers import make_cfg

ROOT = Path(__file__).resolve().parents[1]
#: a run of two island groups (Ray starts for it), small enough for seconds
TWO_GROUPS = [
    "+experiment=de_islands",
    "islands.n=2",
    "islands.n_actors=2",
    "algorithm.pop_size=10",
    "problem.dim=5",
    "generations=20",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def exit_status(cfg):
    """How :func:`isles.cli.run` ends on ``cfg``: the ``SystemExit`` code, or the other exception
    (a ``KeyboardInterrupt`` that escaped: Python's traceback for the user)."""
    try:
        cli.run(cfg)
    except SystemExit as stop:
        return stop.code
    except BaseException as err:  # noqa: BLE001
        return err
    return None


def interrupted_line(err: str) -> str:
    """The one line of ``err`` (a run's stderr), asserting that it is all there is."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_ctrl_c_while_ray_starts_is_one_line_and_130(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "init_ray", interrupted)
    assert exit_status(make_cfg(*TWO_GROUPS)) == 130
    assert interrupted_line(capsys.readouterr().err).startswith("isles: interrupted while Ray was starting")


def test_ctrl_c_before_ray_is_one_line_and_130(monkeypatch, capsys):
    # e.g. while the problem is built, before run_job's own handlers
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "build_problem", interrupted)
    assert exit_status(make_cfg(*TWO_GROUPS)) == 130
    assert interrupted_line(capsys.readouterr().err) == "isles: interrupted"


def test_ctrl_c_with_an_unwritable_checkpoint_still_says_interrupted(monkeypatch, capsys, tmp_path):
    # the snapshot cannot be written where checkpoint.path says: the interrupt line says so (a path
    # unwritable from the start is refused before the run, tests/test_checkpoint.py: here its
    # folder becomes a file while the run goes)
    run = Coordinator.run
    folder = tmp_path / "folder"

    def interrupted(self):
        run(self)
        folder.rmdir()
        folder.write_text("")  # under a file: never writable
        raise KeyboardInterrupt

    monkeypatch.setattr(Coordinator, "run", interrupted)
    folder.mkdir()
    path = folder / "checkpoint.pkl"
    cfg = make_cfg(*TWO_GROUPS, "islands.n_actors=1", "islands.snapshot_every=1", f"checkpoint.path={path}")
    assert exit_status(cfg) == 130
    line = interrupted_line(capsys.readouterr().err)
    assert line.startswith("isles: interrupted after epoch ") and "the checkpoint could not be written: " in line


class DropsInterrupt:
    """An object whose finaliser receives a signal: Python drops the ``KeyboardInterrupt`` raised
    there (``Exception ignored in ...``) and goes on, as when a signal's handler ran in one of the
    finalisers that Ray's start or the run's calls run (issue 34: a run that ignored Ctrl-C)."""

    def __init__(self, signum=signal.SIGINT):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)


def test_ctrl_c_dropped_while_ray_starts_still_stops_the_run(monkeypatch, capsys):
    def started(*args, **kwargs):
        DropsInterrupt()  # freed at once: Ctrl-C lands in its finaliser

    before = signal.getsignal(signal.SIGINT)  # Python's default; SIG_IGN in a pytest-xdist worker
    monkeypatch.setattr(job, "init_ray", started)
    monkeypatch.setattr(Coordinator, "run", lambda self: pytest.fail("the run went on after Ctrl-C"))
    assert exit_status(make_cfg(*TWO_GROUPS)) == 130
    assert interrupted_line(capsys.readouterr().err).startswith("isles: interrupted while Ray was starting")
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_ctrl_c_while_mlflow_opens_the_run_closes_it_killed(monkeypatch, capsys, store):
    # the moment between the MLflow run's opening and Ray's start: the run is closed KILLED, not left open
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    ended = []
    monkeypatch.setattr(TrackingProcess, "start", interrupted)
    monkeypatch.setattr(TrackingProcess, "end", lambda self, status="FINISHED": ended.append(status))
    monkeypatch.setattr(job, "init_ray", lambda *a, **k: pytest.fail("Ray started after Ctrl-C"))
    cfg = make_cfg(*[a for a in TWO_GROUPS if a != "logger=none"], f"logger.tracking_uri={store}")
    assert exit_status(cfg) == 130 and ended == ["KILLED"]
    assert interrupted_line(capsys.readouterr().err).startswith("isles: interrupted while Ray was starting")


def test_ctrl_c_dropped_before_ray_starts_stops_the_run_before_ray(monkeypatch, capsys):
    # e.g. in a finaliser while the placement probe runs: the command's own phase (isles.cli.main)
    # keeps it, and run_job stops before Ray starts rather than after the run
    def placed(*args, **kwargs):
        DropsInterrupt()

    monkeypatch.setattr(job, "choose", placed)
    monkeypatch.setattr(job, "init_ray", lambda *a, **k: pytest.fail("Ray started after Ctrl-C"))
    with pytest.raises(SystemExit) as stop, interrupts_kept():  # as isles.cli.main runs a job
        cli.run(make_cfg(*TWO_GROUPS))
    assert stop.value.code == 130
    assert interrupted_line(capsys.readouterr().err).startswith("isles: interrupted while Ray was starting")


def test_ctrl_c_dropped_anywhere_in_the_command_is_one_line_and_130(monkeypatch, capsys):
    # e.g. in a finaliser while Hydra composes the config: the command ends 130, not 0
    before = signal.getsignal(signal.SIGINT)  # Python's default; SIG_IGN in a pytest-xdist worker
    monkeypatch.setattr(cli, "_main", DropsInterrupt)
    with pytest.raises(SystemExit) as stop:
        cli.main()
    assert stop.value.code == 130 and interrupted_line(capsys.readouterr().err) == "isles: interrupted"
    assert signal.getsignal(signal.SIGINT) is before  # put back


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_dropped_during_the_run_still_saves_the_checkpoint(monkeypatch, capsys, tmp_path, signum):
    run = Coordinator.run

    def interrupted(self):
        result = run(self)
        DropsInterrupt(signum)
        return result

    monkeypatch.setattr(Coordinator, "run", interrupted)
    path = tmp_path / "checkpoint.pkl"
    cfg = make_cfg(*TWO_GROUPS, "islands.n_actors=1", "islands.snapshot_every=1", f"checkpoint.path={path}")
    assert exit_status(cfg) == 130
    err = capsys.readouterr().err
    line, command = err.strip().splitlines()  # the line, then the resume command
    assert line.startswith("isles: interrupted after epoch ") and line.endswith(f"checkpoint {path}; resume with:")
    assert command.strip().endswith(f"checkpoint.resume={path}") and "Traceback" not in err and path.is_file()


def maps(pid: int, name: str) -> bool:
    """Whether process ``pid`` has a file with ``name`` in its path mapped (a module's library loaded)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return name in f.read()
    except OSError:
        return False


def descendants_named(pid: int, name: str) -> bool:
    """Whether a process below ``pid`` has ``name`` in its command line."""
    try:
        return any(name in " ".join(p.cmdline()) for p in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return False


@pytest.fixture()
def loaded_machine():
    """A CPU burner per core beside the test (issue 34: Ctrl-C was lost on a loaded 2-core machine)."""
    spin = "import time\nend = time.monotonic() + 300\nwhile time.monotonic() < end: pass"
    burners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    yield
    for b in burners:
        b.kill()
        b.wait()


@pytest.mark.slow  # starts a local Ray, three times
@pytest.mark.parametrize(
    "moment",
    [
        None,  # isles' imports and Hydra's composition (once NumPy is loaded: past Python's own start-up)
        "gcs_server",  # Ray's first process spawned
        "raylet",  # Ray's node starting
    ],
)
def test_sigint_while_ray_starts_is_one_line_and_130(loaded_machine, moment):
    # as in a terminal: SIGINT to the run's whole process group, at a moment of its start-up
    p = subprocess.Popen(
        [sys.executable, "run.py", *TWO_GROUPS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "RAY_AUTH_MODE": "token"},  # Ray's token notice skipped (app/ray_security.py)
        # Ctrl-C's disposition as a terminal's shell gives it, whatever this worker inherited (a SIGINT
        # ignored here would be ignored by the run's Python until isles' own handler is installed)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # a poll with a generous deadline: the moment comes seconds late on a loaded machine; a SIGINT
        # sent before Python has started (a fixed half second) would stop Python, not isles
        deadline = time.monotonic() + 60
        while (
            not (maps(p.pid, "_multiarray_umath") if moment is None else descendants_named(p.pid, moment))
            and time.monotonic() < deadline
            and p.poll() is None
        ):
            time.sleep(0.02)
        assert p.poll() is None, p.communicate()
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=180)  # a hang guard: an exit takes seconds on a loaded machine
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert interrupted_line(err).startswith("isles: interrupted") and "isles: best f=" not in out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_finished_result_is_printed_keeps_the_whole_result(monkeypatch, capsys, signum):
    # issue 34: a SIGTERM after the run's last epoch (Ray's handler was back: exit 15, the record KILLED)
    show = job.show_result

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), signum)  # handled at the next instruction: here, in the middle of the printing
        show(*args, **kwargs)

    monkeypatch.setattr(job, "show_result", signalled)
    before = signal.getsignal(signum)
    assert exit_status(make_cfg(*TWO_GROUPS, "islands.n_actors=1")) == 130
    out, err = capsys.readouterr()
    assert "isles: best f=" in out  # the result printed whole, after the signal came
    assert interrupted_line(err) == "isles: interrupted after the run finished: the result above stands"
    assert signal.getsignal(signum) is before  # put back


def test_a_signal_while_the_finished_record_is_waited_for_leaves_it_finished(monkeypatch, capsys, store):
    ended = []

    def signalled(self, status="FINISHED"):
        ended.append((status, self.wait))
        if len(ended) == 1:  # the wait for the record (logger.wait=true), cut short
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs here
        end(self, status)

    end = TrackingProcess.end
    monkeypatch.setattr(TrackingProcess, "end", signalled)
    args = [a for a in TWO_GROUPS if a != "logger=none"]
    cfg = make_cfg(*args, "islands.n_actors=1", f"logger.tracking_uri={store}", "logger.wait=true")
    assert exit_status(cfg) == 130
    out, err = capsys.readouterr()
    assert "isles: best f=" in out
    line = interrupted_line(err)
    assert line.startswith("isles: interrupted after the run finished: the result above stands; its MLflow record")
    assert ended == [("FINISHED", True), ("FINISHED", False)]  # closed FINISHED, never KILLED
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    deadline = time.time() + 60
    while run.info.status != "FINISHED" and time.time() < deadline:  # the tracking process completes it
        time.sleep(0.5)
        run = client.get_run(run.info.run_id)
    assert run.info.status == "FINISHED"
