"""The ``isles`` command (and ``python -m isles``, ``python run.py``): one Hydra job.

Examples::

    isles +experiment=cmepso                    # CMEPSO on the welded beam
    isles +experiment=cmepso problem=spring     # ... on the spring
    isles -m +experiment=cmepso seed='range(20)' logger.experiment_name=cmepso-quality
    isles sync                                  # wait for the MLflow records still being written
    isles precompile                            # the GPU kernels into CuPy's cache, once after install

The configs are ``isles.conf`` (the repository's ``conf/``, shipped as package data). Exit status:
0 done, 2 a bad config value (one line naming the field), 1 a failure inside a run (one line with
the file and line, and where the full log is; for lost actors that could not be restarted, where
the checkpoint is and the command that resumes). In a ``-m`` sweep a failed job does not stop the
sweep: every job runs, each failed one prints its line, and the sweep ends with one line per failed
job and exit status 1; a bad value in any job's config stops the sweep before its first job, exit
status 2 (:class:`isles.app.sweeper.IslesSweeper`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from isles import early
from isles.algorithms.core import kernel_lists, precompile
from isles.app.errors import error_message, is_config_error
from isles.app.interrupts import interrupts_kept
from isles.app.job import failure_line, run_job
from isles.app.overrides import preprocess_argv
from isles.app.sweep_runs import sweep_info
from isles.app.sweeper import JobFailed, check_plugin_extras, use_isles_sweeper
from isles.app.tracking_journal import start_background_sync
from isles.app.tracking_process import prestart, record_failure
from isles.islands.config.schema import check_override_keys
from isles.islands.coordinator import RestartFailed

CONF_DIR = str(Path(__import__("isles.conf", fromlist=["_"]).__file__).resolve().parent)
"""The Hydra config directory (``conf/`` of a checkout, or ``isles/conf`` of an installed wheel)."""


def import_from_launch_directory() -> None:
    """Put the directory isles was launched from first on ``sys.path``, as ``python -m isles``
    does: ``problem._target_=my_module.MyProblem`` then finds ``my_module.py`` there whichever way
    isles was started (``isles``, ``python run.py`` from a checkout, ``python -m isles``). Ray's
    workers on this machine get the same directory from Ray; on a cluster the user's modules
    travel with the job (:mod:`isles.app.user_modules`)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def run(cfg: DictConfig) -> float:
    """Run one job and return its best fitness (Hydra's sweepers minimise it).

    Raises:
        SystemExit: 2 on a bad config value (:func:`isles.app.errors.is_config_error`), 1 on a
            failure inside the run, a user's own ``ValueError`` included, 130 on Ctrl-C (or
            SIGTERM); one line on stderr.
        JobFailed: instead of ``SystemExit``, for a job of a ``-m`` sweep (after the same line):
            an ``Exception``, so that Hydra marks the job failed and runs the sweep's other jobs
            (``SystemExit`` would end the sweep).
    """
    try:
        result, _ = run_job(cfg)
    except KeyboardInterrupt:  # Ctrl-C outside the run's own handlers (e.g. while a user's problem is built)
        interrupted()
    except RestartFailed as err:  # lost actors with nowhere to go: the checkpoint and the resume command
        _fail(str(err), 1)
    except Exception as err:  # noqa: BLE001  (a bad value, or a failure inside an actor or a user's problem)
        if is_config_error(err):
            _fail(error_message(err), 2)
        _fail(failure_line(err), 1)
    return result.best_f


def precompile_main(argv: list[str]) -> int:
    """``isles precompile [EXPERIMENT ...]``: compile the CUDA kernels of the shipped kernel lists
    (every experiment's, or those named) into CuPy's kernel cache on this machine's GPU, once after
    installing isles (:func:`isles.algorithms.core.precompile.fill_cache`): no run compiles them
    after. One line; returns the exit status: 0, 2 for an experiment without a list, 1 without a
    GPU or CuPy."""
    import time  # noqa: PLC0415

    t0 = time.perf_counter()
    try:
        n = precompile.fill_cache(argv or None)
    except (ValueError, RuntimeError) as err:
        print(f"isles: error: {err}", file=sys.stderr)
        return 2 if isinstance(err, ValueError) else 1
    print(
        f"isles precompile: {n} kernels in CuPy's kernel cache {precompile.cache_dir()} ({time.perf_counter() - t0:.1f} s)"
    )
    return 0


def sync_main(argv: list[str]) -> int:
    """``isles sync [FOLDER ...]``: wait for the MLflow records still being written by runs' tracking
    processes, and complete those whose process died, from the journals in the runs' output folders
    (:func:`isles.app.tracking_journal.sync`); without folders, every unfinished record. One line per
    record. Returns the exit status: 0, or 1 when a record could not be completed (what failed is
    said; ``isles sync`` tries it again)."""
    from isles.app.tracking_journal import sync  # noqa: PLC0415

    if any(a.startswith("-") for a in argv):
        print("usage: isles sync [RUN_OUTPUT_FOLDER ...]", file=sys.stderr)
        return 2
    missing = [a for a in argv if not os.path.isdir(a)]
    if missing:
        print(
            f"isles: error: sync {missing[0]}: no such folder; give a run's output folder (outputs/DATE/TIME)",
            file=sys.stderr,
        )
        return 2
    return 1 if sync(argv or None, say=lambda line: print(f"isles sync: {line}", flush=True)) else 0


def _fail(line: str, status: int):
    """Print ``isles: error: LINE`` and exit with ``status``; in a sweep job, raise :class:`JobFailed`.
    A run that failed after its MLflow run opened keeps the line there too (tag ``isles.error``,
    :func:`isles.app.tracking_process.record_failure`)."""
    sweep = sweep_info()
    if sweep is None:
        print(f"isles: error: {line}", file=sys.stderr, flush=True)
        record_failure(line)
        sys.exit(status)
    print(f"isles: error: job {sweep['job']}: {line}", file=sys.stderr, flush=True)
    record_failure(line)
    raise JobFailed(line)


_hydra_run = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")(run)


#: overrides after which a config may set ``hydra.mode`` (conf/hparams_search/de_optuna.yaml does)
MODE_KEYS = ("hydra.mode", "hparams_search", "hydra.searchpath")
#: Hydra's flags that take the config from elsewhere
CONFIG_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn", "--experimental-rerun")


def compose_once(argv: list[str]) -> bool:
    """Spare Hydra's first composition of the config where it can only find nothing.

    Hydra composes a run's config twice: once (as a multirun) only to read ``hydra.mode``, then
    for the run (``hydra._internal.utils._run_hydra``: ``Hydra.get_mode``, then ``Hydra.run``):
    about a fifth of a short CPU run's process. isles' configs leave ``hydra.mode`` unset except
    ``hparams_search`` (a sweep without ``-m``); where the command line ``argv`` names neither it
    nor ``hydra.mode``, ``hydra.searchpath`` or another config (``--config-dir``, ...), the first
    composition finds ``None``, and Hydra then takes the mode from ``-m``: ``get_mode`` returns
    ``None`` at once instead. Returns whether it does (a Hydra without ``get_mode``: nothing done).
    """
    from hydra._internal.hydra import Hydra  # noqa: PLC0415

    if not hasattr(Hydra, "get_mode"):
        return False
    if any(a.split("=", 1)[0] in CONFIG_FLAGS for a in argv):
        return False
    if any(a.lstrip("~+").startswith(MODE_KEYS) for a in argv):
        return False
    Hydra.get_mode = _no_mode
    return True


def _no_mode(self, config_name, overrides):
    """``Hydra.get_mode`` where no config sets ``hydra.mode`` (:func:`compose_once`)."""
    return None


def main() -> None:
    """The ``isles`` command: rewrite the overrides that Hydra's merge would refuse although isles
    gives them a meaning (:func:`isles.app.overrides.preprocess`), refuse an unknown key typed as
    ``key=value`` (:func:`isles.islands.config.schema.check_override_keys`) and a Hydra plug-in whose
    extra is not installed (:func:`isles.app.sweeper.check_plugin_extras`) with one line (exit
    status 2), make the launch directory
    importable (:func:`import_from_launch_directory`), then let Hydra compose the config and run
    :func:`run` (once, or per job of a ``-m`` sweep). On a GPU, the experiment's CUDA kernels
    start compiling in parallel at once (:mod:`isles.algorithms.core.precompile`). Ctrl-C at any
    moment is one line and exit status 130 (:func:`run` within a job, :func:`interrupted` around)."""
    try:
        with interrupts_kept():  # one that a finaliser or a library dropped: raised again (run_job's steps, the end)
            _main()
    except KeyboardInterrupt:  # Ctrl-C outside a job's own handlers: Hydra composing the config, ...
        interrupted()


def interrupted() -> None:
    """Ctrl-C outside a run's own handlers (isles' imports, Hydra composing the config): the line
    ``isles: interrupted`` and exit status 130, not Python's traceback.

    Raises:
        SystemExit: 130."""
    print("isles: interrupted", file=sys.stderr, flush=True)
    record_failure("interrupted")  # the line in the MLflow run too (isles.error), where one was open
    sys.exit(130)


def _main() -> None:
    """:func:`main`'s steps."""
    if sys.argv[1:2] == ["show"]:  # isles show PATH: a run's best_solution.json (isles/show.py)
        from isles.show import main as show  # noqa: PLC0415

        sys.exit(show(sys.argv[2:]))
    if sys.argv[1:2] == ["precompile"]:  # isles precompile [EXPERIMENT ...]: the GPU kernels into CuPy's cache
        sys.exit(precompile_main(sys.argv[2:]))
    if sys.argv[1:2] == ["sync"]:  # isles sync [FOLDER ...]: MLflow records still being written, or left unfinished
        sys.exit(sync_main(sys.argv[2:]))
    early.start(sys.argv[1:])  # the ``isles`` command's own entry (run.py and ``-m isles`` started it already)
    preprocess_argv()  # what Hydra's merge would refuse in several lines (isles.app.overrides.preprocess)
    if os.environ.get("ISLES_RECORD_KERNELS"):  # benchmarks/record_kernels.py
        kernel_lists.record_to(os.environ["ISLES_RECORD_KERNELS"])
    else:
        precompile.start_in_background(sys.argv[1:])
    groups = {d for d in os.listdir(CONF_DIR) if os.path.isdir(os.path.join(CONF_DIR, d))}
    try:
        check_override_keys(sys.argv[1:], groups)
        check_plugin_extras(sys.argv[1:], CONF_DIR)  # hparams_search=de_optuna without isles[sweep]
    except ValueError as err:
        print(f"isles: error: {error_message(err)}", file=sys.stderr)
        sys.exit(2)
    import_from_launch_directory()
    if "-m" not in sys.argv[1:] and "--multirun" not in sys.argv[1:]:
        start_background_sync()  # records whose tracking process died (isles.app.tracking_journal)
    prestart(sys.argv[1:])  # MLflow's start-up overlaps Hydra's and the run's (isles.app.tracking_process)
    use_isles_sweeper()
    compose_once(sys.argv[1:])
    _hydra_run()
