"""What a run's process starts before it imports the rest of isles (issue 34 §4): CuPy's import and the
CUDA context, in a thread, while Python imports Hydra, NumPy and isles and Hydra composes the config.

On a GPU machine a warm run spent about 0.65 s of its start-up in line on the GPU's side (one H200:
``import cupy`` 0.45 s, the driver's initialisation 0.10 s, the context 0.11 s), all of it where the
run first asks whether a GPU is there (:func:`isles.algorithms.core.backend.cupy_or_none`, checking
the config) and where its first array lands. :func:`start` does the same in a daemon thread at once,
from the entry points (``run.py``, ``python -m isles``, the ``isles`` command): the driver's
initialisation and the context are made without Python's lock held, so they overlap the run's own
imports whole; the import of CuPy shares the lock with them. The run then finds CuPy imported (an
``import`` of a module still being imported waits for it: Python's import lock) and the device's
primary context made (every thread of the process shares it).

Nothing the run computes changes: the same module, the same device (the process's current one,
device 0 of those visible), the context the run would make itself. The thread starts only where the
command line may use a GPU in this process (:func:`isles.algorithms.core.precompile.wants_gpu`: not
``device=cpu``, not a sweep, not a cluster) and CuPy is installed; ``ISLES_EARLY_CUDA=0`` turns it off
(the run then imports CuPy in line, as before). A failure of any kind is left to the run, which meets
it again in line and reports it as before.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading

#: the subcommands of the ``isles`` command that run no job
SUBCOMMANDS = ("show", "sync", "precompile")

#: seconds a process that ends before the thread did (a bad value, Ctrl-C at once) waits for it at exit
EXIT_WAIT_S = 5.0

_started: threading.Thread | None = None


def start(argv: list[str]) -> threading.Thread | None:
    """Import CuPy and make the CUDA context in a daemon thread (module docstring), once per process.

    Args:
        argv: the command line's arguments (``sys.argv[1:]``).

    Returns:
        The thread, or ``None`` where nothing starts: a subcommand (:data:`SUBCOMMANDS`), a command line
        that cannot use a GPU in this process, no CuPy installed, ``ISLES_EARLY_CUDA=0``, or already started.
        Never raises.
    """
    global _started
    if _started is not None or os.environ.get("ISLES_EARLY_CUDA", "1") == "0":
        return None
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return None
    from isles.algorithms.core.precompile import wants_gpu  # noqa: PLC0415  (stdlib only)

    if not wants_gpu(argv):
        return None
    try:
        if importlib.util.find_spec("cupy") is None:
            return None
    except (ImportError, ValueError):
        return None
    _started = threading.Thread(target=_warm, name="isles-early-cuda", daemon=True)
    _started.start()
    # a process that ends first (a bad value, Ctrl-C at once) leaves no CUDA call half done
    atexit.register(_started.join, EXIT_WAIT_S)
    return _started


def _warm() -> None:
    """The thread's work: CuPy imported (with isles' guard against its Optuna import,
    :func:`isles.algorithms.core.backend.import_cupy`), the driver initialised and the current
    device's primary context made (``cudaFree(0)``). Any failure is dropped: the run meets it again."""
    try:
        from isles.algorithms.core.backend import import_cupy  # noqa: PLC0415

        cupy = import_cupy()
        if cupy.cuda.runtime.getDeviceCount() > 0:
            cupy.cuda.runtime.free(0)  # the primary context of the current device
    except Exception:  # noqa: BLE001  (the run reports what fails, in line)
        pass
