"""The MLflow tracker (:class:`isles.app.tracking.MlflowTracker`) in a process of its own.

MLflow's imports take seconds, and its store and artifacts (the convergence plot) take time of
their own: :class:`TrackingProcess` hands each callback's argument to a fresh interpreter through
a pipe and the run goes on. A run of more than :data:`MAX_STEPS` epochs sends every k-th epoch
as a metric step (and the last); every epoch reaches ``history.csv`` at the end.

The command line starts the process before Hydra composes the config (:func:`prestart`), and the
process imports MLflow and its SQL store before it learns what to track: MLflow's start-up
(about 4 s: its imports, the store's schema check, the run's creation) overlaps the run's own
(the config, Ray, CuPy's compilation) instead of following it.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading

from isles.app.tracking import MlflowTracker, mlflow_module, run_source

#: most epochs a run logs as MLflow metric steps (a longer run logs every k-th epoch)
MAX_STEPS = 250


_prestarted: tuple | None = None  # (process, pipe end) started by prestart(), not yet taken


def _spawn() -> tuple:
    """A fresh interpreter running :func:`child_main`, and this side's end of its pipe. It imports
    only this module and MLflow (not the run's main module, as a ``multiprocessing`` spawn would),
    with this process's ``sys.path``, and talks over a ``multiprocessing`` pipe whose end it
    inherits."""
    import multiprocessing as mp  # noqa: PLC0415
    import os  # noqa: PLC0415

    conn, child = mp.Pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # as a spawn would
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from isles.app.tracking_process import child_main; child_main(int(sys.argv[1]))",
            str(child.fileno()),
        ],
        pass_fds=[child.fileno()],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=2,
    )  # MLflow's "View run ... at" lines (a tracking server) go to stderr: stdout is the result
    child.close()
    return proc, conn


def prestart(argv: list[str]) -> bool:
    """Start the tracking process now, before Hydra composes the config, when the command line
    ``argv`` (its arguments, without the program) is one run's overrides that do not turn MLflow
    off: no ``logger=none`` or ``logger.enabled=false``, no flag (``-m``, ``--cfg``, ``--help``:
    a sweep's jobs may run in other processes). The first :meth:`TrackingProcess.start` of this
    process takes it; one never taken (a bad config value) ends when this process does.
    Call it after ``sys.path`` holds the launch directory (a user's problem is unpickled there).

    Returns:
        whether a process was started.
    """
    global _prestarted
    off = {"logger=none", "logger.enabled=false", "logger.enabled=False", "++logger.enabled=false"}
    if _prestarted is not None or any(a.startswith("-") or a.strip() in off for a in argv):
        return False
    _prestarted = _spawn()
    return True


class TrackingProcess:
    """The MLflow tracker in a process of its own, so that MLflow's imports (seconds), its store
    and its artifacts (the convergence plot) never sit on the run's path: the run hands each
    callback's argument to the process through a pipe and goes on; the process does what
    :class:`MlflowTracker` does. Same arguments and callbacks as :class:`MlflowTracker`.

    :meth:`start` returns at once; :attr:`run_id` waits for the process to have opened the run.
    :meth:`end` waits for it to finish (every metric and artifact written) and raises what failed
    there.
    """

    def __init__(self, logger_cfg: dict, params: dict, config_yaml: str, problem, sweep: dict | None = None):
        self.args = (logger_cfg, params, config_yaml, problem, sweep)
        self._source = run_source()  # the run's command line (the tracking process's is "-c")
        self._conn = self._proc = None
        self._run_id = None
        self._error = None  # what failed in the process (one line), raised again by run_id and end()
        self._stride, self._held = 1, None  # epochs sent as metric steps: every stride-th (on_start)

    def start(self, run_id: str | None = None) -> None:
        """Start the process, which opens the run (or continues ``run_id``, a resumed run): the one
        :func:`prestart` started, when it is still alive, else a new one (:func:`_spawn`)."""
        global _prestarted
        taken, _prestarted = _prestarted, None
        if taken is not None and taken[0].poll() is None:
            self._proc, self._conn = taken
        else:
            self._proc, self._conn = _spawn()
        # the sends go through a thread: the run never waits on the pipe (which fills while the
        # process is still importing MLflow)
        self._queue = queue.SimpleQueue()
        self._queue.put(("args", (*self.args, run_id, self._source)))
        self._sender = threading.Thread(target=self._pump, name="isles-mlflow-send", daemon=True)
        self._sender.start()

    def _pump(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._conn.send(item)
            except (BrokenPipeError, OSError):  # the process ended early; end() reports why
                return

    @property
    def run_id(self) -> str | None:
        """The MLflow run id (waits until the process has opened the run)."""
        if self._run_id is None and self._conn is not None:
            self._receive()
        return self._run_id

    def _receive(self) -> str:
        """The next message's kind (``run_id``, ``done``); its value kept.

        Raises:
            RuntimeError: the process reported an error (kept: raised again by every later call),
                or ended without a word."""
        if self._error is None:
            try:
                kind, value = self._conn.recv()
            except (EOFError, OSError):
                kind, value = "error", "the tracking process ended early (its output above says why)"
            if kind == "error":
                self._error = f"MLflow tracking failed: {value}"
            elif kind == "run_id":
                self._run_id = value
        if self._error is not None:
            raise RuntimeError(self._error)
        return kind

    def _send(self, name: str, arg) -> None:
        self._queue.put((name, arg))

    def on_start(self, info: dict) -> None:
        """Forwarded to :meth:`MlflowTracker.on_start`; sets the stride of the logged epochs."""
        interval = int(self.args[1].get("islands.migration_interval") or 1)
        epochs = -(-int(info.get("generations") or 1) // max(1, interval))
        self._stride = max(1, -(-epochs // MAX_STEPS))
        self._send("on_start", info)

    def on_restart(self, info: dict) -> None:
        """Forwarded to :meth:`MlflowTracker.on_restart`."""
        self._send("on_restart", info)

    def on_epoch(self, rec) -> None:
        """Forwarded to :meth:`MlflowTracker.on_epoch`: every epoch up to :data:`MAX_STEPS`
        epochs a run, else every ``stride``-th one (and the last), so that MLflow's store never
        paces the run; every epoch goes to ``history.csv`` at the end."""
        if (rec.epoch - 1) % self._stride == 0:
            self._send("on_epoch", rec)
            self._held = None
        else:
            self._held = rec

    def on_end(self, result) -> None:
        """Forwarded to :meth:`MlflowTracker.on_end` (after the last epoch's metrics)."""
        if self._held is not None:
            self._send("on_epoch", self._held)
        self._send("on_end", result)

    def end(self, status: str = "FINISHED") -> None:
        """Close the run with ``status`` and wait for the process to finish.

        Raises:
            RuntimeError: what failed in the tracking process (one line)."""
        if self._proc is None:
            return
        try:
            self._send("end", status)
            self._queue.put(None)
            self._sender.join()
            self.run_id  # noqa: B018  (an error at the start surfaces here)
            while self._receive() != "done":
                pass
        finally:
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None


def child_main(fd: int) -> None:
    """Entry point of :class:`TrackingProcess`'s process: the pipe's end is file descriptor
    ``fd``; the first message holds :class:`MlflowTracker`'s arguments and the run id to continue."""
    import signal  # noqa: PLC0415
    from multiprocessing.connection import Connection  # noqa: PLC0415

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C and SIGTERM are the run's process's
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn = Connection(fd)
    # MLflow's start_run imports IPython (0.4 s) only to look for a Databricks notebook's dbutils,
    # and takes an ImportError as "none": this process is never a notebook
    sys.modules.setdefault("IPython", None)
    _preimport()  # while the run's process composes its config (prestart) or starts its run
    # MLflow's INFO lines ("Creating initial MLflow database tables...", "Experiment ... does not
    # exist. Creating a new experiment.") would land in the middle of the run's progress
    import logging  # noqa: PLC0415

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    try:
        _, args = conn.recv()
    except (EOFError, OSError):  # the run's process is gone before it said what to track
        _exit_now()
    _tracking_main(conn, *args)
    _exit_now()


def _preimport() -> None:
    """Import what opening a run needs (seconds): MLflow, its client, its SQL store and the
    schema check's alembic scripts, and GitPython (MLflow's git run context), where installed."""
    import importlib  # noqa: PLC0415

    for name in ("mlflow", "mlflow.tracking", "mlflow.store.tracking.sqlalchemy_store", "git"):
        try:
            importlib.import_module(name)
        except ImportError:  # GitPython missing, or a store MLflow cannot import: opening the run says why
            pass
    try:  # the schema check of every SQL store reads alembic's scripts (imports them the first time)
        importlib.import_module("mlflow.store.db.utils")._get_latest_schema_revision()
    except Exception:  # noqa: BLE001, S110  (opening the store checks it again, and says what fails)
        pass


def _tracking_main(conn, logger_cfg, params, config_yaml, problem, sweep, run_id, source=None) -> None:
    """Body of :class:`TrackingProcess`: an :class:`MlflowTracker` fed from ``conn``, until the
    run's process ends the run. Ctrl-C and SIGTERM are for the run's process, which closes the run
    (KILLED) through ``conn``. Whatever fails here ends the run FAILED (never FINISHED by MLflow's
    exit hook) and is sent to the run's process as one line; a run's process that is gone
    (its end of ``conn`` closed) ends it KILLED, quietly. ``source``: what launched the run
    (:func:`isles.app.tracking.run_source`, sent by the run's process; default: this one's)."""
    tracker = None

    def close(status: str) -> None:
        """End the run with ``status`` (a run open before its id came back too): a run never
        stays open, nor is marked FINISHED by MLflow's exit hook."""
        try:
            if tracker is not None:
                tracker.end(status)
        except Exception:  # noqa: BLE001, S110  (the run is ended below all the same)
            pass
        if "mlflow" in sys.modules:
            try:
                mlflow_module().end_run(status=status)  # nothing to do when no run is open
            except Exception:  # noqa: BLE001, S110
                pass

    try:
        tracker = MlflowTracker(logger_cfg, params, config_yaml, problem, sweep=sweep, source=source)
        # the run's id goes back as soon as the run exists (the result line waits for it)
        tracker.start(run_id, opened=lambda rid: conn.send(("run_id", rid)))
        # the convergence plot's imports (matplotlib) while the run goes on; joined before any
        # other import of them (two threads importing one package at once can see it half-made)
        plots = threading.Thread(target=__import__, args=("isles.app.plots",), daemon=True)
        plots.start()
        while True:
            if not conn.poll():  # idle: write the buffered metrics now, not at the run's end
                tracker.flush()
            name, arg = conn.recv()
            if name in ("on_end", "end"):
                plots.join()
            if name == "end":
                tracker.end(arg)  # every metric and artifact is written, the run closed
                conn.send(("done", None))
                return
            getattr(tracker, name)(arg)
    except (EOFError, BrokenPipeError):  # the run's process is gone: close the run as killed
        close("KILLED")
    except Exception as err:  # noqa: BLE001  (the run's process reports it, and the run is FAILED)
        close("FAILED")
        try:
            conn.send(
                ("error", f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}")
            )
        except OSError:  # the run's process is gone already
            pass


def _exit_now() -> None:
    """End the tracking process at once, once the run is closed: MLflow, SQLAlchemy and
    matplotlib have nothing left to write, and their exit handlers take about a second."""
    import os  # noqa: PLC0415

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
