"""A job interrupted (Ctrl-C, or SIGTERM treated like it): no interrupt is lost
(:func:`interrupts_kept`), its checkpoint is saved (:func:`save_interrupted`) and the command that
resumes it is printed (:func:`resume_command`)."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from contextlib import contextmanager

from isles.app.overrides import launch_command, task_overrides
from isles.islands.control import checkpoint

#: the signals received by each :func:`interrupts_kept` phase now open (outermost first)
_phases: list[list[int]] = []


@contextmanager
def interrupts_kept(signals=(signal.SIGINT,), defer: bool = False):
    """Around a phase of a job (Ray's start; the run): each of ``signals`` (SIGINT, Ctrl-C; SIGTERM,
    a preempted node) raises ``KeyboardInterrupt`` as Python does for Ctrl-C, and is remembered: if
    the phase still ends without one, ``KeyboardInterrupt`` is raised at its end. With ``defer``
    the signal is only remembered, and raised at the phase's end: for a phase that must run whole
    (a finished run's result printed). The previous
    handlers (Ray's SIGTERM handler, Python's SIGINT handler) are put back; outside the main thread
    (where Python runs no signal handler) the phase runs as it is.

    Python runs a signal's handler at the next instruction of the main thread, wherever that is.
    Where that code drops what it raises, the interrupt would be lost and the run go on to exit 0:
    a finaliser (``__del__`` or a weakref callback run by the garbage collector, after which
    Python prints ``Exception ignored in ...`` and goes on: those lines are not printed here, the
    interrupt being raised again), or Ray's check for signals inside its blocking calls, which
    turns the ``KeyboardInterrupt`` into a status (``ray._raylet.check_signals``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def interrupt(signum, frame):
        came.append(signum)
        if not defer:
            raise KeyboardInterrupt(f"signal {signum}")

    def unraisable(info):  # a KeyboardInterrupt dropped by a finaliser: raised again at the phase's end
        if not (came and isinstance(info.exc_value, KeyboardInterrupt)):
            hook(info)

    previous = {s: signal.signal(s, interrupt) for s in signals}
    hook, sys.unraisablehook = sys.unraisablehook, unraisable
    _phases.append(came)
    try:
        yield
    except Exception as err:  # what a dropped interrupt left behind (e.g. a call it cut short): still an interrupt
        if came:
            raise KeyboardInterrupt(f"signal {came[0]}") from err
        raise
    finally:
        _phases.pop()  # this phase: they nest
        sys.unraisablehook = hook
        for s, handler in previous.items():  # None: a handler not set from Python; the default then
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
    if came:
        raise KeyboardInterrupt(f"signal {came[0]}")


def raise_if_interrupted() -> None:
    """Between two steps of a job: raise ``KeyboardInterrupt`` if a phase of :func:`interrupts_kept`
    now open (e.g. the whole command's, :func:`isles.cli.main`) received an interrupt that the code
    it cut short dropped (a finaliser; a library's ``except BaseException``), so that the job stops
    at this step rather than at that phase's end (after the run).

    Raises:
        KeyboardInterrupt: where an open phase received SIGINT (or SIGTERM) since it began."""
    for came in _phases:
        if came:
            raise KeyboardInterrupt(f"signal {came[0]}")


def save_interrupted(coordinator, path: str, run_id: str | None) -> str | None:
    """Write the coordinator's last snapshot as a checkpoint at ``path`` for a resume, with the
    MLflow run to continue and the last epoch already published; ``None`` without a snapshot."""
    snap = coordinator.last_snapshot
    if snap is None:
        return None
    checkpoint.save(path, {**snap, "mlflow_run_id": run_id, "published_epoch": coordinator.published_epoch})
    return str(path)


def resume_command(path: str) -> str:
    """The command line that resumes this run: the program as the user started it (``python
    /path/run.py``, ``isles``, ``python -m isles``: :func:`isles.app.overrides.launch_command`;
    ``python run.py`` where isles was not started by one of those, e.g. called as a library), the
    run's overrides (from Hydra) and ``checkpoint.resume=PATH``."""
    name, head, _ = launch_command()
    head = head if name in ("isles", "run.py") else ["python", "run.py"]
    task = [o for o in task_overrides() if not o.startswith("checkpoint.resume=")]
    return " ".join([*head, *(shlex.quote(o) for o in task), shlex.quote(f"checkpoint.resume={path}")])
