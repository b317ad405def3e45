"""The journal of a run's MLflow record, in its output folder: what lets the run end before MLflow does.

The run's process appends every callback's argument for the tracker (:class:`isles.app.tracking.MlflowTracker`)
to ``mlflow_journal.bin`` in the run's output folder (:class:`JournalWriter`), and the tracking process
(:mod:`isles.app.tracking_process`) writes the MLflow run from it (:func:`apply_journal`): the run's process
prints its result and exits while the tracking process, detached, finishes the record (``logger.wait=true``
waits for it). ``mlflow_state.json`` beside it says how far the record got: the run's id, how many journal
entries are in the store, the status the run ended with, ``done``. The run's output goes to
``mlflow_tracking.log`` there once the run's process is gone.

If the tracking process dies (killed, the machine rebooted), the journal is still there: ``isles sync``
(``python -m isles sync``) completes every unfinished record (:func:`sync`), and every run of isles starts
that in the background for records whose processes are gone (:func:`start_background_sync`). A record is
written again from where the state says it got; what is written twice changes nothing (the same parameters,
tags and artifacts; a metric with the same key, step, time and value, which MLflow's SQL store keeps once),
and a run created before its id reached the state is found again by its tag ``isles.journal``.

Unfinished records are listed in :func:`pending_dir` (one file each, naming the folder), so that a run finds
them without searching. A record is being written while its run's process or its tracking process holds a
shared ``flock`` on the journal; :func:`sync` takes it exclusively.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import struct
import sys
import time

JOURNAL, STATE, LOG = "mlflow_journal.bin", "mlflow_state.json", "mlflow_tracking.log"
#: the tag of a run that names its journal (:func:`apply_journal` finds a run created before its id was kept)
JOURNAL_TAG = "isles.journal"
_HEAD = struct.Struct(">I")

try:
    import fcntl
except ImportError:  # Windows: no locks; nothing is synced in the background there
    fcntl = None


def pending_dir() -> str:
    """The folder that lists unfinished records: ``ISLES_PENDING_DIR``, else
    ``$XDG_CACHE_HOME/isles/mlflow_pending`` (``~/.cache/isles/mlflow_pending``)."""
    if os.environ.get("ISLES_PENDING_DIR"):
        return os.environ["ISLES_PENDING_DIR"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "isles", "mlflow_pending")


def lock(fh, exclusive: bool, block: bool = True) -> bool:
    """``flock`` ``fh`` shared or ``exclusive``; ``block=False``: return ``False`` at once when it is held."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fh, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def read_state(folder: str) -> dict:
    """The record's state in ``folder`` (``{}`` when none was written)."""
    try:
        with open(os.path.join(folder, STATE), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def write_state(folder: str, state: dict) -> None:
    """Write ``state`` atomically (a temporary file, then a rename)."""
    path = os.path.join(folder, STATE)
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    os.replace(path + ".tmp", path)


class JournalWriter:
    """The run's side: appends ``(name, argument, time in ms)`` entries to ``folder/mlflow_journal.bin``
    (each a length and a pickle), holding a shared lock on it until :meth:`close`, and lists the folder in
    :func:`pending_dir` until the record is done.

    Args:
        folder: the run's output folder (made if missing).
        uid: the journal's id (the run's tag ``isles.journal``).
    """

    def __init__(self, folder: str, uid: str):
        os.makedirs(folder, exist_ok=True)
        self.folder, self.uid, self.count = os.path.abspath(folder), uid, 0
        self._fh = open(os.path.join(self.folder, JOURNAL), "ab")  # noqa: SIM115  (closed by close())
        lock(self._fh, exclusive=False)
        # the run's import path: a user's problem module is found again where the record is completed
        path = [os.getcwd(), *(p for p in sys.path if p)]
        write_state(self.folder, {"journal": uid, "applied": 0, "done": False, "path": path})
        try:
            os.makedirs(pending_dir(), exist_ok=True)
            with open(os.path.join(pending_dir(), uid), "w", encoding="utf-8") as fh:
                fh.write(self.folder)
        except OSError:  # nowhere to list it: `isles sync FOLDER` still completes it
            pass

    def append(self, name: str, arg, ts: int | None = None) -> int:
        """Append one entry (not yet flushed); return its index."""
        data = pickle.dumps((name, arg, ts or int(time.time() * 1000)), protocol=pickle.HIGHEST_PROTOCOL)
        self._fh.write(_HEAD.pack(len(data)) + data)
        self.count += 1
        return self.count - 1

    def flush(self) -> None:
        """Hand what was appended to the operating system (a killed process loses none of it)."""
        self._fh.flush()

    def fileno(self) -> int:
        """The journal's descriptor (its shared lock goes with it)."""
        return self._fh.fileno()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._fh.closed

    def close(self) -> None:
        """Flush and release the lock."""
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()


class JournalReader:
    """Reads the entries of ``path`` as they are appended: :meth:`next` returns the next whole entry, or
    ``None`` when none is there yet (a half-written one is read again later)."""

    def __init__(self, path: str):
        self._fh = open(path, "rb")  # noqa: SIM115  (closed by close())

    def next(self):
        """The next ``(name, argument, time in ms)``, or ``None``."""
        where = self._fh.tell()
        head = self._fh.read(_HEAD.size)
        if len(head) == _HEAD.size:
            data = self._fh.read(_HEAD.unpack(head)[0])
            if len(data) == _HEAD.unpack(head)[0]:
                return pickle.loads(data)  # noqa: S301  (this run's own journal)
        self._fh.seek(where)
        return None

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def finish(folder: str, state: dict) -> None:
    """Mark the record done: the state says so, the journal is removed, the folder is no longer pending."""
    write_state(folder, {**state, "done": True})
    for path in (os.path.join(folder, JOURNAL), os.path.join(pending_dir(), str(state.get("journal")))):
        with contextlib.suppress(OSError):
            os.remove(path)


def apply_journal(folder: str, gone=None, wake=None, tell=None) -> dict:
    """Write the MLflow run of the journal in ``folder`` from where its state says the record got, until
    the journal ends: a ``close`` entry, or (with ``gone`` set: the run's process has ended) its last
    whole entry. A journal whose run never said how it ended closes the run ``KILLED``.

    Args:
        folder: the run's output folder.
        gone: a ``threading.Event`` set once nothing more is appended (``None``: already so, as for
            :func:`sync`).
        wake: a ``threading.Event`` set when something was appended (waited on while nothing is there).
        tell: called with ``(kind, value)`` for the run's process: ``("run_id", id)`` once the run is
            open, ``("ack", n)`` once the first ``n`` entries are written, ``("error", line)``.

    Returns:
        the final state.

    Raises:
        Exception: what failed in MLflow (the run is then closed ``FAILED``; the record stays unfinished
            for a later :func:`sync`).
    """
    import threading  # noqa: PLC0415

    gone = gone or _set_event(threading.Event())
    tell = tell or (lambda kind, value: None)
    state = read_state(folder)
    sys.path.extend(p for p in state.get("path", []) if p not in sys.path)  # the run's (a user's problem)
    reader = JournalReader(os.path.join(folder, JOURNAL))
    tracker, index, ended = None, 0, None
    try:
        while True:
            entry = reader.next()
            if entry is None:
                if not gone.is_set():
                    if tracker is not None and tracker._buffer:  # idle: write the buffered metrics now
                        tracker.flush()
                        _save(folder, state, index)
                    (wake or gone).wait(1.0)
                    if wake is not None:
                        wake.clear()
                    continue
                entry = reader.next()  # the last entries, appended before the run's process ended
                if entry is None:
                    break
            name, arg, ts = entry
            if name == "close":
                break
            if name == "args":
                tracker = _open(arg, state, folder, tell)
            elif index >= state.get("applied", 0):
                tracker.flush()
                if name == "end":
                    tracker.end(arg)
                    ended = state["status"] = arg
                elif name == "on_epoch":
                    tracker.on_epoch(arg, ts)
                elif name in ("on_start", "on_end"):
                    getattr(tracker, name)(arg, ts)
                else:
                    getattr(tracker, name)(arg)
            index += 1
            if name != "on_epoch":
                _save(folder, state, index)
                tell("ack", index)
        if tracker is not None:
            tracker.flush()
            if ended is None:  # the run's process never said how the run ended (killed), or said it before
                tracker.end(state.get("status") or "KILLED")
                state["status"] = state.get("status") or "KILLED"
        state["applied"] = index
        finish(folder, state)
        tell("ack", index + 1)  # the close entry too
        return state
    except BaseException:
        if tracker is not None and tracker.run_id is not None:
            with contextlib.suppress(Exception):
                tracker._terminate("FAILED")  # never left RUNNING (nor FINISHED by MLflow's exit hook)
        raise
    finally:
        reader.close()


def _set_event(event):
    event.set()
    return event


def _save(folder: str, state: dict, index: int) -> None:
    state["applied"] = max(index, state.get("applied", 0))
    write_state(folder, state)


def _open(args: tuple, state: dict, folder: str, tell):
    """The tracker of the journal's ``args`` entry, its run opened: continued where an earlier process
    opened it (the state's run id, else a run tagged with the journal's id), else opened now."""
    from isles.app.tracking import MlflowTracker  # noqa: PLC0415

    logger_cfg, params, config_yaml, problem, sweep, run_id, source = args
    tracker = MlflowTracker(logger_cfg, params, config_yaml, problem, sweep=sweep, source=source)
    tracker.tags = {JOURNAL_TAG: state["journal"]}
    rid, created = state.get("run_id"), bool(state.get("created"))
    if rid is not None:
        tracker.reopen(rid, created)
    elif state.get("opening"):  # an earlier process may have created the run before its id was kept
        rid = tracker.reopen(None, True)
        created = True
    if rid is not None:
        state.update(run_id=rid, created=created)
        write_state(folder, state)
        tell("run_id", rid)
        return tracker
    state["opening"] = True
    write_state(folder, state)

    def opened(new: str) -> None:
        state.update(run_id=new, created=not (run_id and new == run_id))
        write_state(folder, state)
        tell("run_id", new)

    tracker.start(run_id, opened=opened)
    return tracker


def pending_folders() -> list[str]:
    """The output folders of unfinished records listed in :func:`pending_dir`; entries of records done
    (or of folders gone) are dropped."""
    try:
        names = sorted(os.listdir(pending_dir()))
    except OSError:
        return []
    folders = []
    for name in names:
        entry = os.path.join(pending_dir(), name)
        try:
            with open(entry, encoding="utf-8") as fh:
                folder = fh.read().strip()
        except OSError:
            continue
        if os.path.isfile(os.path.join(folder, JOURNAL)) and not read_state(folder).get("done"):
            folders.append(folder)
        else:
            with contextlib.suppress(OSError):
                os.remove(entry)
    return folders


def unattended(folders: list[str]) -> list[str]:
    """Those of ``folders`` whose journal no process holds (neither the run's nor its tracking process)."""
    free = []
    for folder in folders:
        try:
            with open(os.path.join(folder, JOURNAL), "rb") as fh:
                if fcntl is not None and lock(fh, exclusive=True, block=False):
                    free.append(folder)
        except OSError:
            pass
    return free


def sync(folders: list[str] | None = None, block: bool = True, say=None) -> int:
    """Complete the MLflow records of ``folders`` (default: every unfinished one, :func:`pending_folders`)
    from their journals. A record still being written (its run's or tracking process holds the journal)
    is waited for (``block``), else left alone.

    Args:
        folders: runs' output folders.
        block: wait for records being written.
        say: called with one line per record (default: none).

    Returns:
        how many records could not be completed (what failed is said, and kept in the state as ``error``).
    """
    say = say or (lambda line: None)
    failed = 0
    for folder in [os.path.abspath(f) for f in (pending_folders() if folders is None else folders)]:
        path = os.path.join(folder, JOURNAL)
        if read_state(folder).get("done") or not os.path.isfile(path):
            state = read_state(folder)
            say(
                f"{folder}: done (MLflow run {state.get('run_id')}, {state.get('status')})"
                if state
                else f"{folder}: no MLflow journal"
            )
            continue
        with open(path, "rb") as fh:
            if not lock(fh, exclusive=True, block=False):
                if not block:
                    continue
                say(f"{folder}: waiting for the process that writes its MLflow record")
                lock(fh, exclusive=True)
            if read_state(folder).get("done") or not os.path.isfile(path):  # written meanwhile
                state = read_state(folder)
                say(f"{folder}: done (MLflow run {state.get('run_id')}, {state.get('status')})")
                continue
            try:
                state = apply_journal(folder)
            except Exception as err:  # noqa: BLE001  (one line; the next sync tries again)
                line = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"
                write_state(folder, {**read_state(folder), "error": line})
                say(f"{folder}: not completed: {line}")
                failed += 1
                continue
        say(f"{folder}: completed (MLflow run {state.get('run_id')}, {state.get('status')})")
    return failed


def start_background_sync() -> int:
    """Complete, in a detached process of their own, the records whose processes are gone (a tracking
    process killed, a machine rebooted), with one line on stderr; called as a run starts. Records that
    failed in MLflow (an ``error`` in their state) are left to ``isles sync``. Returns how many."""
    stale = [f for f in unattended(pending_folders()) if not read_state(f).get("error")]
    if not stale:
        return 0
    import subprocess  # noqa: PLC0415

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            "-c",
            "import sys; from isles.app.tracking_journal import sync; sync(sys.argv[1:], False)",
            *stale,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    print(
        f"isles: completing the MLflow record of {len(stale)} earlier run(s) in the background "
        f"({stale[0]}{', ...' if len(stale) > 1 else ''}; isles sync waits for it)",
        file=sys.stderr,
        flush=True,
    )
    return len(stale)
