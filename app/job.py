"""One job: config in, Ray up, coordinator run, MLflow run, summary out.

``run.py`` calls :func:`run_job` with the composed Hydra config. Errors in the config are raised
as ``ValueError`` with a one-line message naming the field and the allowed values
(:func:`isles.app.errors.is_config_error` tells them from a user's code's own ``ValueError``); a run that fails
after it started leaves its MLflow run marked ``FAILED`` with what was logged so far, and its
one-line report names the innermost file and line and the log file with the traceback
(:func:`failure_line`). A finished result is always printed, whatever the end-of-run report
cannot compute (:func:`show_result`, :mod:`isles.app.report`).

Its phases elsewhere: Ray's start (:mod:`isles.app.ray_setup`), errors told apart
(:mod:`isles.app.errors`), an interrupted run's checkpoint (:mod:`isles.app.interrupts`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
from typing import Any, NamedTuple

import numpy as np
from hydra.utils import instantiate
from isles.algorithms.core.backend import cupy_or_none
from isles.app.callbacks import RunContext, build_callbacks, check_callbacks
from isles.app.errors import _frames, error_message, is_config_error
from isles.app.interrupts import interrupts_kept, raise_if_interrupted, resume_command, save_interrupted
from isles.app.overrides import RETARGETED, check_mixed_overrides, job_overrides, typed_class_node
from isles.app.progress import print_summary, result_line
from isles.app.ray_security import check_dashboard_host
from isles.app.ray_setup import check_ray_address, init_ray
from isles.app.sweep_runs import sweep_info
from isles.app.tracking import flatten
from isles.app.tracking_process import TrackingProcess, record_failure
from isles.app.tracking_server import reach_tracking_store
from isles.islands.config.build import build_algorithm, build_plugins, build_problem, check_pairing
from isles.islands.config.schema import check_keys, validated, with_generations
from isles.islands.control import checkpoint
from isles.islands.control.autoplace import choose
from isles.islands.control.budget import with_budget
from isles.islands.control.placement import needs_ray
from isles.islands.coordinator import Coordinator, RestartFailed, RunResult
from isles.islands.migration.policies import check_migrants
from omegaconf import DictConfig, OmegaConf


def failure_line(err: BaseException) -> str:
    """One line for a run that failed after it started: the error, the innermost file and line
    outside installed packages (the user's problem, or isles), and where the full traceback went
    (the job's log file in the Hydra output directory, written here).

    A Ray task error is unwrapped to its cause; its remote traceback is searched for the line.
    When :func:`run_job` found a checkpoint that resumes the run (:func:`resumable_checkpoint`),
    the line ends with it and the command that resumes.

    The line is made once per error and kept on it: a second call (the job's failure path, then
    the ``isles`` command's) returns it again, without writing the traceback twice."""
    made = getattr(err, FAILURE_LINE, None)
    if made is not None:
        return made
    cause = getattr(err, "cause", None) or err
    text, frames = _frames(err)
    where = f" at {frames[-1][0]}:{frames[-1][1]}" if frames else ""
    log_path = os.path.join(_output_dir(), "run.log")
    try:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        saved = f"; full traceback in {log_path}"
    except OSError:
        saved = ""
    message = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    resume = getattr(err, RESUMABLE, None)
    resume = f"; resume from the last checkpoint with: {resume_command(resume)}" if resume else ""
    line = f"{type(cause).__name__}: {message}{where}{saved}{resume}"
    _keep(err, FAILURE_LINE, line)
    return line


FAILURE_LINE = "isles_failure_line"
"""The attribute of a run's error that keeps its :func:`failure_line`."""
RESUMABLE = "isles_resumable"
"""The attribute of a run's error that names the checkpoint resuming the run (:func:`resumable_checkpoint`)."""


def _keep(err: BaseException, name: str, value) -> None:
    """Set ``err.name = value`` where the error takes attributes."""
    with contextlib.suppress(AttributeError):  # an error class with __slots__ and no __dict__
        setattr(err, name, value)


def _file_state(path) -> tuple | None:
    """``(inode, mtime in ns, size)`` of the file ``path``, or ``None`` where there is none."""
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def resumable_checkpoint(ck: dict, before: tuple | None) -> str | None:
    """The checkpoint that resumes a run that failed: ``checkpoint.path`` where the run wrote it
    (``checkpoint.every``; the file differs from ``before``, its :func:`_file_state` when the run
    started: a file an earlier run left there is not this run's), else the checkpoint the run
    resumed from (``checkpoint.resume``, the run had saved nothing newer); ``None`` where neither."""
    if ck["every"] and ck["path"]:
        now = _file_state(ck["path"])
        if now is not None and now != before:
            return str(ck["path"])
    if ck["resume"] and _file_state(ck["resume"]) is not None:
        return str(ck["resume"])
    return None


def _output_dir() -> str:
    """The job's Hydra output directory (:func:`_run_folder`), or the working directory outside Hydra."""
    return _run_folder() or os.getcwd()


def _run_folder() -> str | None:
    """The job's Hydra output directory, where it writes ``best_solution.json``, ``history.csv``
    and ``migrations.csv`` (:mod:`isles.app.run_files`); ``None`` outside Hydra (``run_job``
    called as a library function: the record stays in the result)."""
    try:
        from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415

        return HydraConfig.get().runtime.output_dir
    except Exception:  # noqa: BLE001  (no Hydra run)
        return None


def validate(cfg: dict) -> dict:
    """Checks that need no actor, run before Ray starts; each error is one line naming the field
    as the user types it and the allowed values. Returns ``cfg`` with the schema's defaults.

    The config's own fields are checked by the schema (:func:`isles.islands.config.schema.check_keys`,
    :func:`isles.islands.config.schema.validated`); here only what depends on this machine or the
    cluster is added.

    Raises:
        ValueError: a key the schema does not know, or a typed field out of range
            (:func:`isles.islands.config.schema.check_values`); ``device=gpu`` on a machine without a GPU
            when no cluster address is given; an unreachable ``ray.address``, or
            ``ray.address=auto`` with no cluster to find (:func:`check_ray_address`);
            ``logger.system_metrics=true`` without psutil; a ``ray.dashboard_host`` that is not an
            IP address; a ``checkpoint.path`` that cannot be written
            (:func:`isles.islands.control.checkpoint.check_path`). (A tracking server that does not answer
            is caught by :func:`isles.app.tracking_server.reach_tracking_store` in :func:`run_job`,
            also before Ray starts.)
    """
    check_keys(cfg)
    cfg = validated(cfg)
    check_ray_address(cfg["ray"]["address"])
    log = cfg["logger"]
    if log["enabled"] and log["system_metrics"] and importlib.util.find_spec("psutil") is None:
        raise ValueError("logger.system_metrics=true: MLflow's system metrics need psutil (pip install psutil)")
    check_dashboard_host(cfg["ray"]["dashboard_host"])
    if cfg["checkpoint"]["path"]:  # a save would fail at the first checkpoint, or at an interrupt
        checkpoint.check_path(cfg["checkpoint"]["path"])
    if cfg["device"] == "gpu" and not cfg["ray"]["address"] and cupy_or_none() is None:
        raise ValueError(
            "device=gpu: no GPU is visible on this machine (CuPy missing or no CUDA device); "
            "allowed values here are auto|cpu"
        )
    return cfg


class Prepared(NamedTuple):
    """A job's config checked and built before Ray starts (:func:`prepare`)."""

    plain: dict  # the resolved config with the schema's defaults, checked (islands/config/schema.py Validated)
    problem: Any
    topology: Any
    plugins: list  # the loop's plug-ins (islands/plugin.py), instantiated
    algorithm: Any  # the island algorithm, built to validate it (the groups build their own)


def _resolved(run_cfg: DictConfig, cfg: DictConfig) -> dict:
    """The composed run config ``run_cfg`` resolved as the job runs it: the problem's and the
    topology's keys as typed (``cfg``'s own ``hydra`` node, or the running job's overrides: no stale
    keys of another class, :func:`isles.app.overrides.typed_class_node`) and the default checkpoint
    path (the job's output directory)."""
    plain = OmegaConf.to_container(run_cfg, resolve=True)
    overrides = job_overrides(cfg)
    for group in RETARGETED:
        plain[group] = typed_class_node(plain.get(group) or {}, overrides, group)
    ck = plain.get("checkpoint") or {}
    if ck.get("every") and not ck.get("path"):
        plain["checkpoint"] = {**ck, "path": os.path.join(_output_dir(), "checkpoint.pkl")}
    return plain


def prepare(cfg: DictConfig) -> Prepared:
    """Everything a job checks and builds before Ray starts, for a run (:func:`run_job`) and for
    each job of a sweep before its first job starts (:func:`isles.app.sweeper.check_job`): the
    problem's keys as typed (``cfg``'s own ``hydra`` node, or the running job's overrides), the
    default checkpoint path, :func:`validate` (the run's one check of its config: the runtime
    trusts the :class:`~isles.islands.config.schema.Validated` config it returns), in a mixed run
    no ``islands.n`` nor ``algorithm`` override (:func:`isles.app.overrides.check_mixed_overrides`), ``stop.max_evaluations``
    as generations (:func:`isles.islands.control.budget.with_budget`), then the problem, topology,
    plug-ins and algorithm built and checked against each other. Starts nothing.

    Raises:
        ValueError: one line naming the field and the allowed values.
    """
    run_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])  # a sweep's job config has hydra's node
    plain = validate(_resolved(run_cfg, cfg))  # the run's one check of its config (islands/config/schema.py)
    check_mixed_overrides(plain, job_overrides(cfg))  # islands.n=3, algorithm=cmaes: the groups' own
    check_callbacks(plain.get("callbacks"))  # conf/callbacks/: each target imports, a class is a Callback
    if plain["stop"]["max_evaluations"] is not None:  # as generations (islands/control/budget.py)
        budgeted = with_budget(run_cfg, plain, build_plugins(plain["plugins"]))
        if budgeted is not run_cfg:  # what interpolates ${generations} (max_iterations) follows the budget
            plain = with_generations(plain, _resolved(budgeted, cfg))
    problem = build_problem(plain["problem"], plain["constraints"])  # constraints.eq_tol: the report's equalities
    topology = instantiate(plain["topology"])
    plugins = build_plugins(plain["plugins"])
    # build (and validate) the island algorithm here too, so a bad value fails before Ray starts
    algorithm = build_algorithm(plain["algorithm"])
    check_pairing(algorithm, problem, plain["constraints"])
    check_migrants(plain["islands"]["n_migrants"], algorithm)  # each population's (CDE: x and y)
    return Prepared(plain, problem, topology, plugins, algorithm)


def run_job(cfg: DictConfig, use_ray: bool | None = None) -> tuple[RunResult, str | None]:
    """Run the experiment described by ``cfg``; return the result and the MLflow run id.

    ``cfg``: a Hydra job's config, or one composed in-process; with its ``hydra`` node
    (``compose(..., return_hydra_config=True)``), which records the overrides: a class named by
    ``problem._target_=...`` then gets only the ``problem.*`` keys typed with it, as in a Hydra job
    (:func:`isles.app.overrides.job_overrides`; without that node, nothing says which keys were
    typed and the composed problem node is built as it is).

    ``use_ray``: ``None`` (default) starts Ray only when the run needs it
    (:func:`isles.islands.control.placement.needs_ray`: a cluster address, async mode, or several island
    groups); ``True`` always, ``False`` never (everything in this process). Unless ``False``, the run's
    actors and device are first chosen where the config leaves them to the default
    (:func:`isles.islands.control.autoplace.choose`: a probe in this process and a cost model), the
    choice printed (:func:`show_placement`) and logged to MLflow as ``placement.*`` parameters.

    The MLflow run, once opened, never ends FINISHED unless the run did: any error raised after
    it opened (Ray's start, the run, the report) marks it FAILED, an interrupt KILLED. A finished
    result is printed (:func:`show_result`) before an error of the tracking process is raised.

    Raises:
        ValueError: a bad config value (before or during the run), or a user's code's own
            ``ValueError`` (:func:`is_config_error` tells them apart).
        RuntimeError: ``MLflow tracking failed: ...``, after the result was printed.
        RestartFailed: lost actors not restarted; the message names the checkpoint and the resume command.
        SystemExit: 130 after Ctrl-C or SIGTERM (checkpoint written, resume command printed).
        Exception: whatever failed inside the run (a user's objective, an actor).
    """
    plain, problem, topology, plugins, _ = prepare(cfg)
    ck, chosen = plain["checkpoint"], plain.pop("callbacks", None)  # what observes the run, not what runs
    # the default placement (islands/control/autoplace.py): actors and device from a probe, before Ray
    placed = choose(plain, plugins, topology) if use_ray is not False else None
    if placed is not None:
        plain = placed.applied(plain)
        show_placement(placed, plain)
    if use_ray is None:
        use_ray = needs_ray(plain)

    tracker = None
    if plain["logger"]["enabled"]:
        plain["logger"] = reach_tracking_store(plain["logger"])  # a dead tracking server: one line, before Ray
        settings = {k: v for k, v in plain.items() if k != "hydra"}  # what runs (a user's problem: its own keys)
        params = {**flatten(settings), **(placed.params() if placed else {})}  # placement.*: the choice
        tracker = TrackingProcess(  # its journal in the output folder: the run need not wait for MLflow
            plain["logger"],
            params,
            OmegaConf.to_yaml(settings),
            problem,
            sweep=sweep_info(),
            folder=_run_folder(),
            wait=plain["logger"]["wait"],
        )
    # the config group callbacks (conf/callbacks/, app/callbacks.py): a mixed run's books, the output
    # folder's files (before MLflow, which logs them), progress, a user's own; built before Ray starts
    run = RunContext(problem, {k: v for k, v in plain.items() if k != "hydra"}, _run_folder(), bool(ck["resume"]))
    callbacks = build_callbacks(chosen, run)
    coordinator = Coordinator(
        plain, topology, plugins, callbacks=callbacks + ([tracker] if tracker else []), use_ray=use_ray
    )
    before = _file_state(ck["path"])  # a checkpoint.path file an earlier run left (not this run's)

    def close(status: str) -> None:
        """Close the MLflow run with ``status`` after a failure, which stays the error raised (a
        tracking error on top of it is dropped: the run's own error says more)."""
        if tracker:
            with contextlib.suppress(Exception):
                tracker.end(status)

    def stop_with_checkpoint(status: str) -> str | None:
        """The last snapshot as a checkpoint (its path, or ``None``), and the MLflow run closed."""
        try:  # the resumed run continues this MLflow run
            run_id = tracker.wait_run_id(timeout=60) if tracker else None
        except RuntimeError:  # the tracking process failed: the checkpoint is kept all the same
            run_id = None
        path = save_interrupted(coordinator, ck["path"] or os.path.join(_output_dir(), "checkpoint.pkl"), run_id)
        close(status)
        return path

    try:  # a Ray that fails to start fails the MLflow run (never left open, nor FINISHED)
        if tracker:  # MLflow works in a process of its own; a resumed run continues its MLflow run
            tracker.start((coordinator.resume_from or {}).get("mlflow_run_id"))
        if use_ray:
            with interrupts_kept():  # Ctrl-C (SIGTERM is Ray's own while it starts)
                raise_if_interrupted()  # one that the steps before (the probe, ...) dropped: Ray not started
                init_ray(plain["ray"], plain)
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) while MLflow opens or Ray starts: nothing has run, nothing to save
        close("KILLED")
        moment = "while Ray was starting" if use_ray else "before the run"
        line = f"interrupted {moment}; nothing had run, so there is nothing to save"
        print(f"isles: {line}", file=sys.stderr, flush=True)
        record_failure(line)  # the line in the MLflow run too (isles.error)
        raise SystemExit(130) from None
    except BaseException:
        close("FAILED")
        raise
    try:
        # SIGTERM like Ctrl-C: after ray.init, which installs a SIGTERM handler of its own (put back after)
        with interrupts_kept((signal.SIGINT, signal.SIGTERM)):
            raise_if_interrupted()  # one dropped since Ray started: no epoch run
            result = coordinator.run()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (a preempted node)
        try:
            path = stop_with_checkpoint("KILLED")
            saved = (
                f"checkpoint {path}; resume with:\n  {resume_command(path)}"
                if path
                else "no snapshot to save (islands.snapshot_every=0)"
            )
        except Exception as err:  # noqa: BLE001  (an unwritable checkpoint.path: still the interrupt line)
            close("KILLED")
            saved = f"the checkpoint could not be written: {type(err).__name__}: {error_message(err)}"
        line = f"interrupted after epoch {coordinator.published_epoch}; {saved}"
        print(f"isles: {line}", file=sys.stderr, flush=True)
        record_failure(line)  # the line in the MLflow run too (isles.error)
        raise SystemExit(130) from None
    except RestartFailed as err:  # lost actors with nowhere to go: keep what the run has done
        path = stop_with_checkpoint("FAILED")
        raise RestartFailed(
            f"{err}; checkpoint {path}; once the cluster has room, resume with: {resume_command(path)}"
            if path
            else str(err)
        ) from None
    except BaseException as err:
        if isinstance(err, Exception) and not is_config_error(err):  # its failure line names the checkpoint
            _keep(err, RESUMABLE, resumable_checkpoint(ck, before))
        close("FAILED")
        raise
    finally:  # what the epochs made is on disk, whatever ended the run
        coordinator.monitors.exited()
    try:  # the result is shown whatever MLflow or the report cannot do; then MLflow closes the run
        try:
            run_id = tracker.run_id if tracker else None
        except RuntimeError:  # the tracking process failed: tracker.end below raises why
            run_id = None
        with interrupts_kept((signal.SIGINT, signal.SIGTERM), defer=True):  # the result is printed whole
            show_result(result, problem, run_id, plain)
        if tracker:  # a signal while it waits for the record (logger.wait): the record is closed already
            with interrupts_kept((signal.SIGINT, signal.SIGTERM)):
                tracker.end("FINISHED")
    except KeyboardInterrupt:  # after the run finished: its result stands, its record is finished without us
        finished_record_left(tracker)
        raise SystemExit(130) from None
    except BaseException:
        close("FAILED")
        raise
    return result, run_id


def finished_record_left(tracker) -> None:
    """After a Ctrl-C or SIGTERM that came once the run had finished (its result printed, or its
    MLflow record being written with ``logger.wait``): the run's record is closed FINISHED and left
    to the tracking process, which ignores the signal and completes it from the journal (``isles
    sync FOLDER`` does, where that process dies too); one line on stderr says so."""
    where = ""
    if tracker is not None:
        tracker.wait = False  # the journal is closed here; the process finishes it
        with contextlib.suppress(Exception):
            tracker.end("FINISHED")
        where = f"; its MLflow record is completed by the tracking process (or `isles sync {tracker.journal_folder}`)"
    print(f"isles: interrupted after the run finished: the result above stands{where}", file=sys.stderr, flush=True)


def show_placement(placed, plain: dict) -> None:
    """Print the default placement's line (:attr:`isles.islands.control.autoplace.Choice.line`, with the
    progress output) and its warning (on stderr, unless ``quiet``)."""
    if plain["progress"] and not plain["quiet"]:
        print(f"placement: {placed.line}", flush=True)
    if placed.warning and not plain["quiet"]:
        print(f"isles: warning: {placed.warning}", file=sys.stderr, flush=True)


def show_result(result, problem, run_id: str | None, plain: dict) -> None:
    """Print the run's result: the summary (``progress``), one line (``progress=false``), or
    nothing (``quiet``). Never raises: when the summary fails (whatever it could not compute),
    the result is still printed as one line with the best x, the run's best f, the
    ``best_solution.json`` written (the full x) and the MLflow run, and one line on stderr says
    what failed, where, and the log file that holds the traceback (:func:`failure_line`)."""
    if plain["quiet"]:
        return
    try:
        if plain["progress"]:
            print_summary(result, problem, run_id)
            if plain["logger"]["enabled"] and not run_id:  # the tracking process opens the run after this one exits
                print("MLflow run: written in the background once this process exits (isles sync waits for it)")
        else:
            print(result_line(result, problem, run_id), flush=True)
    except Exception as err:  # noqa: BLE001  (a finished result is never lost)
        x = ", ".join(f"{float(v):.10g}" for v in np.asarray(result.best_x).reshape(-1))
        print(
            f"isles: best f={float(result.best_f):.10g} (run) x=[{x}] evaluations={result.evaluations}"
            + (f" solution={result.solution_path}" if result.solution_path else "")
            + (f" mlflow_run={run_id}" if run_id else ""),
            flush=True,
        )
        print(f"isles: the end-of-run summary failed: {failure_line(err)}", file=sys.stderr, flush=True)
    for warning in result.warnings:  # e.g. no individual ever had a finite objective
        print(f"isles: warning: {warning}", file=sys.stderr, flush=True)
