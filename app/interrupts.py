"""A job interrupted (Ctrl-C, or SIGTERM treated like it: :func:`_sigterm_as_interrupt`): its
checkpoint is saved (:func:`save_interrupted`) and the command that resumes it is printed
(:func:`resume_command`)."""

from __future__ import annotations

import shlex
import signal
import threading

from isles.app.overrides import launch_command, task_overrides
from isles.islands.control import checkpoint


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _sigterm_as_interrupt():
    """Treat SIGTERM like Ctrl-C while the run goes (main thread only); return the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_interrupt)


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
