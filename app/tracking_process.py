"""The MLflow tracker (:class:`isles.app.tracking.MlflowTracker`) in a process of its own.

MLflow's imports take seconds, and its store and artifacts (the convergence plot) take time of
their own: :class:`TrackingProcess` appends each callback's argument to the run's journal
(:mod:`isles.app.tracking_journal`, in the run's output folder), a fresh interpreter writes the
MLflow run from it, and the run goes on. At the end the run's process prints its result and exits
while that process, detached, finishes the record (``logger.wait=true``: the run's process waits
for it; ``isles sync`` waits for every record being written, and completes those whose process
died). A run of more than :data:`MAX_STEPS` epochs sends every k-th epoch as a metric step (and
the last); every epoch reaches ``history.csv`` at the end.

The command line starts the process before Hydra composes the config (:func:`prestart`), and the
process imports MLflow and its SQL store before it learns what to track: MLflow's start-up
(about 4 s: its imports, the store's schema check, the run's creation) overlaps the run's own
(the config, Ray, CuPy's compilation) instead of following it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time

from isles.app.tracking_journal import LOG, JournalWriter, apply_journal, read_state, write_state
from isles.app.tracking_source import run_source
from isles.islands.control.callbacks import Callback

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


class TrackingProcess(Callback):
    """The MLflow tracker in a process of its own, so that MLflow's imports (seconds), its store
    and its artifacts (the convergence plot) never sit on the run's path: the run appends each
    callback's argument to its journal (:class:`isles.app.tracking_journal.JournalWriter`, through
    a thread: the run never waits on the disk) and goes on; the process does what
    :class:`isles.app.tracking.MlflowTracker` does. Same arguments and callbacks as
    :class:`~isles.app.tracking.MlflowTracker`, and:

    Args:
        folder: the run's output folder, where the journal goes (``None``: a temporary folder, and
            the run waits for its record, as with ``wait``).
        wait: :meth:`end` waits until the record is written (and raises what failed there);
            otherwise the run's process goes on (exits) while the tracking process finishes it.

    :meth:`start` returns at once; :attr:`run_id` is the MLflow run's id once the process has
    opened it (waited for with ``wait``), :meth:`wait_run_id` waits for it.
    """

    def __init__(
        self,
        logger_cfg: dict,
        params: dict,
        config_yaml: str,
        problem,
        sweep: dict | None = None,
        folder: str | None = None,
        wait: bool = False,
    ):
        self.args = (logger_cfg, params, config_yaml, problem, sweep)
        self._source = run_source()  # the run's command line (the tracking process's is "-c")
        self.folder, self.wait = folder, wait or folder is None
        self._conn = self._proc = self._journal = None
        self._run_id = None
        self._error = None  # what failed in the process (one line), raised again by end()
        self._acked, self._gone = 0, False
        self._stride, self._held = 1, None  # epochs sent as metric steps: every stride-th (on_start)

    def start(self, run_id: str | None = None) -> None:
        """Start the journal and the process, which opens the run (or continues ``run_id``, a
        resumed run): the one :func:`prestart` started, when it is still alive, else a new one
        (:func:`_spawn`)."""
        import tempfile  # noqa: PLC0415
        import uuid  # noqa: PLC0415

        global _prestarted
        if _unfinished is not None:  # an earlier failed run's record that no failure line came for
            _unfinished.close()
        self._journal = JournalWriter(self.folder or tempfile.mkdtemp(prefix="isles-mlflow-"), uuid.uuid4().hex)
        self._journal.append("args", (*self.args, run_id, self._source))
        self._journal.flush()
        taken, _prestarted = _prestarted, None
        if taken is not None and taken[0].poll() is None:
            self._proc, self._conn = taken
        else:
            self._proc, self._conn = _spawn()
        self._poke(("journal", self._journal.folder))
        self._hand_lock()
        # the journal is written by a thread: the run never waits on the disk or the pickling
        self._queue = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._pump, name="isles-mlflow-journal", daemon=True)
        self._sender.start()

    def _pump(self) -> None:
        while True:
            item = self._queue.get()
            while item is not None:
                self._journal.append(*item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            self._journal.flush()
            self._poke(("poke", None))
            if item is None:
                return

    def _hand_lock(self) -> None:
        """Hand the process this one's descriptor of the journal, whose shared lock it carries: the
        lock then holds until both have let go of it (also while the descriptor is still in the
        pipe), so that no ``isles sync`` takes the record for an abandoned one after this process
        exits, and this one never waits for the other to take it."""
        from isles.app.tracking_journal import fcntl  # noqa: PLC0415

        if fcntl is None:  # no locks (Windows)
            return
        from multiprocessing import reduction  # noqa: PLC0415

        with contextlib.suppress(OSError):  # the process is gone: its record is completed by isles sync
            reduction.send_handle(self._conn, self._journal.fileno(), self._proc.pid)

    def _poke(self, message) -> None:
        """Tell the process (it reads its pipe at once, in a thread of its own); a process that is
        gone is told nothing (its record is completed from the journal: ``isles sync``)."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self._conn.send(message)

    def _receive(self, timeout: float | None) -> bool:
        """Take the process's next message (within ``timeout`` seconds; ``None``: until one comes);
        ``False`` when none came, or the process is gone."""
        if self._gone:
            return False
        try:
            if timeout is not None and not self._conn.poll(max(timeout, 0)):
                return False
            kind, value = self._conn.recv()
        except (EOFError, OSError):
            self._gone = True
            if self._error is None and self.wait:
                self._error = "MLflow tracking failed: the tracking process ended early (its output above says why)"
            return False
        if kind == "error":
            self._error = f"MLflow tracking failed: {value}"
        elif kind == "run_id":
            self._run_id = value
        elif kind == "ack":
            self._acked = max(self._acked, value)
        return True

    @property
    def run_id(self) -> str | None:
        """The MLflow run's id once the process has opened the run, else ``None`` (with ``wait``:
        waits for it, and raises what failed there)."""
        if self.wait:
            return self.wait_run_id()
        while self._conn is not None and self._receive(0):
            pass
        return self._run_id

    def wait_run_id(self, timeout: float | None = None) -> str | None:
        """The MLflow run's id, waiting (up to ``timeout`` seconds) for the process to open the run.

        Raises:
            RuntimeError: what failed in the process, with ``wait``."""
        end = None if timeout is None else time.monotonic() + timeout
        while self._run_id is None and self._error is None and self._conn is not None:
            if not self._receive(None if end is None else end - time.monotonic()):
                break
        if self._error and self.wait:
            raise RuntimeError(self._error)
        return self._run_id

    def _send(self, name: str, arg) -> None:
        self._queue.put((name, arg, int(time.time() * 1000)))

    def on_start(self, info: dict) -> None:
        """Journaled for :meth:`MlflowTracker.on_start`; sets the stride of the logged epochs."""
        interval = int(self.args[1].get("islands.migration_interval") or 1)
        epochs = -(-int(info.get("generations") or 1) // max(1, interval))
        self._stride = max(1, -(-epochs // MAX_STEPS))
        self._send("on_start", info)

    def on_restart(self, info: dict) -> None:
        """Journaled for :meth:`MlflowTracker.on_restart`."""
        self._send("on_restart", info)

    def on_epoch(self, rec) -> None:
        """Journaled for :meth:`MlflowTracker.on_epoch`: every epoch up to :data:`MAX_STEPS`
        epochs a run, else every ``stride``-th one (and the last), so that MLflow's store never
        paces the run; every epoch goes to ``history.csv`` at the end."""
        if (rec.epoch - 1) % self._stride == 0:
            self._send("on_epoch", rec)
            self._held = None
        else:
            self._held = rec

    def on_end(self, result) -> None:
        """Journaled for :meth:`MlflowTracker.on_end` (after the last epoch's metrics)."""
        if self._held is not None:
            self._send("on_epoch", self._held)
        self._send("on_end", result)

    @property
    def journal_folder(self) -> str | None:
        """The folder of the run's journal, which ``isles sync FOLDER`` completes (``None`` before
        :meth:`start`)."""
        return self._journal.folder if self._journal is not None else None

    def end(self, status: str = "FINISHED") -> None:
        """Close the run with ``status``. A finished run's record is closed (:meth:`close`); a
        failed or interrupted run's stays open for the line the run prints (:func:`record_failure`),
        its status written first (waited for with ``wait``).

        Raises:
            RuntimeError: what failed in the tracking process (one line), where that is known."""
        global _unfinished
        if self._proc is None or self._journal is None or self._journal.closed:
            return
        self._queue.put(None)
        self._sender.join()
        target = self._journal.append("end", status) + 1
        self._journal.flush()
        self._poke(("poke", None))
        if status == "FINISHED":
            self.close()
            return
        _unfinished = self
        if self.wait:  # the status is in the store when this returns
            while self._acked < target and self._error is None and self._receive(None):
                pass

    def close(self, failure: dict | None = None) -> None:
        """End the journal (after ``failure``: the line the run printed and its log,
        :meth:`isles.app.tracking.MlflowTracker.on_error`) and let the process finish the record,
        waited for with ``wait``; otherwise this one may exit at once (the process holds the journal).

        Raises:
            RuntimeError: what failed in the tracking process, where that is known."""
        global _unfinished
        if _unfinished is self:
            _unfinished = None
        if self._journal is None or self._journal.closed:
            return
        if failure:
            self._journal.append("on_error", failure)
        target = self._journal.append("close", None) + 1
        self._journal.close()
        self._poke(("poke", None))
        if self.wait:
            while self._acked < target and self._error is None and self._receive(None):
                pass
        while self._receive(0):
            pass
        self._conn.close()  # the process finishes what is left, then ends
        if self.wait:
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        ended, self._proc = self._proc.poll() is not None and not self.wait, None
        if self._error is not None:
            raise RuntimeError(self._error)
        if ended:
            print(
                f"isles: the MLflow tracking process ended early; `isles sync {self.journal_folder}` "
                "completes the run's record from its journal",
                file=sys.stderr,
                flush=True,
            )


_unfinished: TrackingProcess | None = None  # a failed or interrupted run's, open for its failure line


def record_failure(line: str) -> None:
    """Keep the line that a failed or interrupted run printed in its MLflow run (the tag
    ``isles.error``), with the run's log ``run.log`` of its output folder (an artifact), and let
    the tracking process finish the record. Nothing to do when no run of this process failed
    with MLflow on."""
    tracker = _unfinished
    if tracker is None:
        return
    log = os.path.join(tracker.folder, "run.log") if tracker.folder else None
    with contextlib.suppress(RuntimeError):  # the tracking process failed: the run's own line says more
        tracker.close({"line": line, "log": log})


def child_main(fd: int) -> None:
    """Entry point of :class:`TrackingProcess`'s process: the pipe's end is file descriptor
    ``fd``. The pipe brings the journal's folder, then a word whenever something was appended; a
    thread reads it all the time, so that the run's process never waits, and once that process is
    gone (the pipe closed) this one's output goes to the folder's ``mlflow_tracking.log``. The
    journal's entries are written to MLflow (:func:`isles.app.tracking_journal.apply_journal`);
    what fails ends the run FAILED, is sent to the run's process as one line, and is kept in the
    record's state (``isles sync`` tries again)."""
    import signal  # noqa: PLC0415
    from multiprocessing.connection import Connection  # noqa: PLC0415

    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):  # the run's process's
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    # background work: on a busy machine the run's own process goes first
    with contextlib.suppress(AttributeError, OSError):
        os.nice(10)
    conn = Connection(fd)
    sending = threading.Lock()
    box: dict = {}
    have_folder, wake, gone = threading.Event(), threading.Event(), threading.Event()

    def tell(kind: str, value) -> None:
        with sending, contextlib.suppress(OSError):  # the run's process is gone
            conn.send((kind, value))

    def watch() -> None:
        while True:
            try:
                kind, value = conn.recv()
            except (EOFError, OSError):
                break
            if kind == "journal" and "folder" not in box:
                box["folder"], box["lock"] = value, _hold(conn)
                have_folder.set()
            wake.set()
        gone.set()
        wake.set()
        have_folder.set()
        _detach(box.get("folder"))

    threading.Thread(target=watch, name="isles-mlflow-pipe", daemon=True).start()
    # MLflow's start_run imports IPython (0.4 s) only to look for a Databricks notebook's dbutils,
    # and takes an ImportError as "none": this process is never a notebook
    sys.modules.setdefault("IPython", None)
    _preimport()  # while the run's process composes its config (prestart) or starts its run
    # MLflow's INFO lines ("Creating initial MLflow database tables...", "Experiment ... does not
    # exist. Creating a new experiment.") would land in the middle of the run's progress
    import logging  # noqa: PLC0415

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    have_folder.wait()
    folder = box.get("folder")
    if folder is not None:
        # the convergence plot's imports (matplotlib) while the run goes on
        threading.Thread(target=__import__, args=("isles.app.plots",), daemon=True).start()
        try:
            apply_journal(folder, gone=gone, wake=wake, tell=tell)
        except Exception as err:  # noqa: BLE001  (the run's process reports it; isles sync tries again)
            line = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"
            write_state(folder, {**read_state(folder), "error": line})
            tell("error", line)
    _exit_now()


def _hold(conn) -> int | None:
    """The run's process's descriptor of its journal, with the shared lock it carries
    (:meth:`TrackingProcess._hand_lock`), held for as long as this process lives."""
    from isles.app.tracking_journal import fcntl  # noqa: PLC0415

    if fcntl is None:
        return None
    from multiprocessing import reduction  # noqa: PLC0415

    try:
        return reduction.recv_handle(conn)
    except (OSError, EOFError, RuntimeError):  # the run's process is gone (isles sync completes the record)
        return None


def _detach(folder: str | None) -> None:
    """The run's process is gone: this process's output goes to ``folder``'s ``mlflow_tracking.log``
    (nothing of it holds the run's terminal or its output pipes)."""
    try:
        fd = os.open(os.path.join(folder, LOG) if folder else os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _preimport() -> None:
    """Import what opening a run needs (seconds): MLflow, its client, its SQL store and the
    schema check's alembic scripts, and GitPython (MLflow's git run context), where installed."""
    import importlib  # noqa: PLC0415

    for name in ("mlflow", "mlflow.tracking", "mlflow.store.tracking.sqlalchemy_store", "git"):
        with contextlib.suppress(
            ImportError
        ):  # GitPython missing, or a store MLflow cannot import: opening the run says why
            importlib.import_module(name)
    with contextlib.suppress(
        Exception
    ):  # the schema check of every SQL store reads alembic's scripts (imports them the first time) (opening the store checks it again, and says what fails)
        importlib.import_module("mlflow.store.db.utils")._get_latest_schema_revision()


def _exit_now() -> None:
    """End the tracking process at once, once the run is closed: MLflow, SQLAlchemy and
    matplotlib have nothing left to write, and their exit handlers take about a second."""
    import os  # noqa: PLC0415

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
