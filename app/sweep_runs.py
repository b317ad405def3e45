"""A Hydra multirun as one parent MLflow run with a child run per job.

``python run.py -m +experiment=cmepso seed='range(20)'`` is one *sweep*; its id is the sweep's
output directory as Hydra resolved it (``hydra.sweep.dir``, e.g. ``multirun/2026-11-23/08-30-00``),
which every job of the sweep sees, in whichever process or node a launcher runs it.

* The parent run (tags ``sweep=<id>``, ``sweep_parent=true``, ``sweep_overrides``: the command's
  overrides, ``sweep_fixed_keys``: the keys it sets to one value) is opened by :class:`SweepParentRun`, a Hydra callback (``conf/config.yaml``
  ``hydra.callbacks``), once in the launching process before any job starts, and closed when the
  sweep ends (``FINISHED``; ``FAILED`` if the process exits before, e.g. a job's bad config).
* Each job's run (:class:`isles.app.tracking.MlflowTracker`) finds the parent by its tag,
  through the tracking store, not through memory; it opens the parent itself if none exists
  (the callback was left out, or the job logs to another experiment). Jobs that open one at the
  same time keep the oldest and delete the others.
* A job's run carries ``mlflow.parentRunId`` (the MLflow UI nests it under the parent and
  compares the children), ``sweep=<id>`` and ``sweep_job=<hydra.job.num>``; its name is
  ``NUM: <the job's overrides of keys the command sweeps or does not set>`` (``1: seed=1``; an
  Optuna sweeper's parameters too) unless ``logger.run_name`` is set.

The sweep itself (``hydra/sweeper: basic``, the cartesian product of the ``-m`` overrides) is
:class:`IslesSweeper`: every job's config is checked before the first job starts, and a failed job
does not stop the sweep.

``benchmarks/quality_table.py --parent RUN_ID`` or ``--sweep ID|latest`` reads one sweep back.
"""
from __future__ import annotations

import atexit
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

#: tag naming a run's sweep (the sweep id); on the parent and on every child
SWEEP_TAG = "sweep"
#: tag marking a sweep's parent run (value ``"true"``)
PARENT_TAG = "sweep_parent"


def sweep_info() -> dict | None:
    """This Hydra job's sweep, or ``None`` outside a multirun (a single run, or no Hydra).

    Returns:
        ``{"id": hydra.sweep.dir, "job": hydra.job.num, "overrides": [the job's overrides]}``.
    """
    try:
        from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415
        from hydra.types import RunMode  # noqa: PLC0415

        if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
            return None
        hc = HydraConfig.get()
        return {"id": str(hc.sweep.dir), "job": int(hc.job.get("num") or 0),
                "overrides": [str(o) for o in hc.overrides.task]}
    except Exception:  # noqa: BLE001  (a Hydra config without these fields: not a sweep we know)
        return None


def experiment_id(client, name: str) -> str:
    """The id of the MLflow experiment ``name``, created if it does not exist (also when another
    process creates it at the same moment)."""
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:
        return client.get_experiment_by_name(name).experiment_id


def _parents(client, exp_id: str, sweep_id: str) -> list:
    quoted = sweep_id.replace("\\", "\\\\").replace("'", "\\'")
    return client.search_runs([exp_id], f"tags.{SWEEP_TAG} = '{quoted}' AND tags.{PARENT_TAG} = 'true'",
                              order_by=["attributes.start_time ASC", "attributes.run_id ASC"], max_results=100)


def override_keys(overrides: list[str]) -> list[tuple[str, bool]]:
    """``(key, is a sweep)`` of each Hydra override (``seed=0,1`` -> ``("seed", True)``,
    ``+experiment=cmepso`` -> ``("+experiment", False)``).

    Raises:
        hydra.errors.OverrideParseException: an override Hydra cannot parse.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415

    return [(o.get_key_element(), o.is_sweep_override()) for o in OverridesParser.create().parse_overrides(overrides)]


def find_or_create_parent(client, exp_id: str, sweep_id: str, overrides: list[str] | None = None) -> str:
    """The run id of sweep ``sweep_id``'s parent run in experiment ``exp_id``, opened if there
    is none (run name ``sweep <id>``). Of several (jobs that opened one at the same moment) the
    oldest is kept (the smallest run id among equally old ones, so that every job keeps the
    same) and the one opened here is deleted.

    Args:
        client: an ``mlflow.tracking.MlflowClient`` on the tracking store.
        overrides: the command's overrides (tags ``sweep_overrides`` and ``sweep_fixed_keys``),
            when known.
    """
    found = _parents(client, exp_id, sweep_id)
    if found:
        return found[0].info.run_id
    from isles.app.tracking import git_commit  # noqa: PLC0415

    tags = {SWEEP_TAG: sweep_id, PARENT_TAG: "true", "git_commit": git_commit()}
    if overrides is not None:
        tags["sweep_overrides"] = " ".join(overrides)
        tags["sweep_fixed_keys"] = " ".join(k for k, swept in override_keys(overrides) if not swept)
    mine = client.create_run(exp_id, run_name=f"sweep {sweep_id}", tags=tags).info.run_id
    kept = _parents(client, exp_id, sweep_id)[0].info.run_id
    if kept != mine:
        client.delete_run(mine)
    return kept


def child_tags(parent_run_id: str, sweep: dict) -> dict:
    """Tags of a sweep job's run: nested under ``parent_run_id`` in the MLflow UI, with the sweep
    id and the job number."""
    return {"mlflow.parentRunId": parent_run_id, SWEEP_TAG: sweep["id"], "sweep_job": str(sweep["job"])}


def child_name(client, parent_run_id: str, sweep: dict) -> str:
    """A sweep job's run name: ``NUM: `` and the job's overrides of keys that the sweep's command
    does not set to one value (the parent's ``sweep_fixed_keys``), i.e. its swept values
    (``3: seed=3``), at most 250 characters."""
    fixed = set((client.get_run(parent_run_id).data.tags.get("sweep_fixed_keys") or "").split())
    own = [o for o, (key, _) in zip(sweep["overrides"], override_keys(sweep["overrides"])) if key not in fixed]
    return f"{sweep['job']}: {' '.join(own)}"[:250]


class SweepParentRun(Callback):
    """Hydra callback: opens a multirun's parent MLflow run before its first job and closes it
    after the last (``conf/config.yaml``, ``hydra.callbacks.mlflow_sweep``). Does nothing for a
    single run or ``logger=none``.

    It never stops a sweep: a tracking server that does not answer is left to each job (which
    fails with one line, or falls back to the local store), and any other failure to open the
    parent prints one line, after which the first job opens it.
    """

    def __init__(self) -> None:
        self._open = None  # (client, run id) while the parent is open

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        """Open the parent run (tags ``sweep``, ``sweep_parent``, ``sweep_overrides``)."""
        from isles.app.tracking_server import reach_tracking_store  # noqa: PLC0415

        logger = OmegaConf.to_container(config.logger, resolve=True) if "logger" in config else {}
        if not logger.get("enabled"):
            return
        try:
            logger = reach_tracking_store(logger)
        except ValueError:
            return
        try:
            from mlflow.tracking import MlflowClient  # noqa: PLC0415

            from isles.app.tracking import prepare_sqlite_store  # noqa: PLC0415

            prepare_sqlite_store(logger.get("tracking_uri"))  # a local store made once, under its lock
            client = MlflowClient(tracking_uri=logger.get("tracking_uri"))
            exp_id = experiment_id(client, logger.get("experiment_name") or "isles")
            overrides = list(config.hydra.overrides.task)
            run_id = find_or_create_parent(client, exp_id, str(config.hydra.sweep.dir), overrides)
        except Exception as err:  # noqa: BLE001
            line = str(err).strip().splitlines()[0] if str(err).strip() else ""
            print(f"isles: the sweep's parent MLflow run was not opened here ({type(err).__name__}: {line}); "
                  "the first job opens it", file=sys.stderr, flush=True)
            return
        self._open = (client, run_id)
        atexit.register(self._close, "FAILED")

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        """Close the parent run as ``FINISHED``."""
        self._close("FINISHED")

    def _close(self, status: str) -> None:
        if self._open is None:
            return
        client, run_id = self._open
        self._open = None
        try:
            with contextlib.redirect_stdout(sys.stderr):  # MLflow's "View run ... at" lines: stdout is results
                client.set_terminated(run_id, status)
        except Exception as err:  # noqa: BLE001  (at exit: say it, do not raise)
            print(f"isles: the sweep's parent MLflow run {run_id} was not closed ({type(err).__name__})",
                  file=sys.stderr, flush=True)


class JobFailed(Exception):
    """A sweep job's failure (raised by :func:`isles.cli.run` inside a multirun instead of exiting):
    an ``Exception``, so that Hydra's launcher marks the job ``FAILED`` and the sweep goes on (an
    Optuna sweeper tells the study the trial failed). The message is the job's one line."""


def check_job(cfg: DictConfig) -> None:
    """The checks :func:`isles.app.job.run_job` runs before Ray starts
    (:func:`isles.app.job.prepare`), on one job's composed config ``cfg`` (its ``hydra`` node, if
    any, gives the job's overrides). Starts nothing.

    Raises:
        ValueError: one line naming the field and the allowed values, as a run would.
    """
    from isles.app.job import prepare  # noqa: PLC0415  (job imports this module)

    prepare(cfg)


def swept_overrides(job: list[str], command: list[str]) -> str:
    """The overrides of one job (``job``) of the keys that the command (``command``) sweeps
    (``algorithm.F=0.5,5`` -> ``algorithm.F=5``): what names the job; all of them if it sweeps none."""
    swept = {key for key, is_sweep in override_keys(command) if is_sweep}
    own = [o for o, (key, _) in zip(job, override_keys(job), strict=True) if key in swept]
    return " ".join(own or job)


def failed_jobs_message(failed: list[tuple[int, str, str]], n_jobs: int) -> str:
    """The end of a sweep with failed jobs: a first line counting them, then one line per failed
    job, ``isles: job NUM (OVERRIDES) failed: LINE``.

    Args:
        failed: ``(job number, its swept overrides, its one-line error)`` of each failed job.
        n_jobs: how many jobs the sweep ran.
    """
    lines = [f"isles: error: {len(failed)} of {n_jobs} jobs of the sweep failed:"]
    lines += [f"isles: job {num} ({overrides}) failed: {line}" for num, overrides, line in failed]
    return "\n".join(lines)


PLUGIN_NAME = "hydra_plugins.isles.IslesSweeper"
"""The name Hydra knows :class:`IslesSweeper` by. Hydra instantiates a sweeper only from a class
registered under a name in its ``hydra_plugins`` namespace, which it imports by that name; isles
ships one package (``isles``), so :func:`use_isles_sweeper` registers the class and makes the
module ``hydra_plugins.isles`` (holding only this class) importable in the isles process."""


class IslesSweeper:
    """Hydra's basic sweeper (the cartesian product of the ``-m`` overrides, in batches of
    ``max_batch_size`` jobs) with two changes:

    * every job's config is composed and checked (:func:`check_job`) before the first job starts: a
      bad value (``algorithm.F=0.5,5,0.6``) is one line naming the job's override and the allowed
      values, exit status 2, and no job runs;
    * a failed job does not stop the sweep: every job runs, and the sweep ends with one line per
      failed job and exit status 1, the sweep's parent MLflow run left ``FAILED`` (Hydra's basic
      sweeper raises the first failure after its batch and leaves the later batches unlaunched).

    A mixin: :func:`use_isles_sweeper` makes the plugin class from it and Hydra's ``BasicSweeper``
    once Hydra has scanned its plugins (the scan executes ``basic_sweeper.py`` again, so that a
    subclass made before it would not be one of the ``BasicSweeper`` that Hydra then uses).
    """

    _first_job = 0  # the number of the first job of the batch being checked

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Compose each job's config (Hydra's own check), then run isles' checks on it.

        Raises:
            SystemExit: 2, after one line ``isles: error: job NUM (OVERRIDES): MESSAGE`` on stderr.
        """
        loader = self.hydra_context.config_loader
        command = list(self.config.hydra.overrides.task)
        for num, overrides in enumerate(batch, start=self._first_job):
            cfg = loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))
            try:
                check_job(cfg)
            except ValueError as err:
                print(f"isles: error: job {num} ({swept_overrides(list(overrides), command)}): {_first_line(err)}; "
                      "no job of the sweep was started", file=sys.stderr, flush=True)
                raise SystemExit(2) from None

    def sweep(self, arguments: list[str]) -> Any:
        """Run every job (BasicSweeper's batches), all of them checked before the first starts.

        Returns:
            The jobs' ``JobReturn``\\ s, a list per batch (as BasicSweeper).

        Raises:
            SystemExit: 1 after the last job when some failed, after one line per failed job.
        """
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(self._parse_config() + list(arguments)),
                                              self.max_batch_size)
        self._first_job = 0
        for batch in self.overrides:  # every job checked before the first starts
            self.validate_batch_is_legal(batch)
            self._first_job += len(batch)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        command, returns, failed, first = list(self.config.hydra.overrides.task), [], [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            results = self.launcher.launch(batch, initial_job_idx=first)
            for num, r in enumerate(results, start=first):
                if r.status == JobStatus.FAILED:  # r.return_value would raise the job's error
                    overrides = swept_overrides(list(r.overrides or []), command)
                    failed.append((num, overrides, _first_line(r._return_value)))
            first += len(batch)
            returns.append(results)
        if failed:
            print(failed_jobs_message(failed, first), file=sys.stderr, flush=True)
            raise SystemExit(1)
        return returns


def _first_line(err: BaseException) -> str:
    """The first line of ``err``'s message, or its type's name when it has none."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def use_isles_sweeper() -> None:
    """Make ``hydra/sweeper: basic`` (the sweeper of a ``-m`` run unless the config picks another,
    e.g. ``hparams_search=de_optuna``) :class:`IslesSweeper` on Hydra's ``BasicSweeper``:
    registered with Hydra's plugins as :data:`PLUGIN_NAME` and stored in Hydra's ConfigStore, in
    this process only (other Hydra applications keep Hydra's basic sweeper). Called by
    :func:`isles.cli.main`; idempotent."""
    import types  # noqa: PLC0415
    from dataclasses import make_dataclass  # noqa: PLC0415

    from hydra.core.config_store import ConfigStore  # noqa: PLC0415
    from hydra.core.plugins import Plugins  # noqa: PLC0415

    plugins = Plugins.instance()  # scans Hydra's plugins first (see IslesSweeper)
    try:
        import hydra_plugins  # noqa: F401, PLC0415  (the namespace package of Hydra's plugins)
    except ImportError:  # no Hydra plugin installed (pip install isles without extras): an empty one
        namespace = types.ModuleType("hydra_plugins")
        namespace.__path__ = []
        sys.modules["hydra_plugins"] = namespace
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf  # noqa: PLC0415

    module_name, class_name = PLUGIN_NAME.rsplit(".", 1)
    module = sys.modules.get(module_name)
    if module is None or getattr(module, class_name).__bases__[1] is not BasicSweeper:
        module = types.ModuleType(module_name, "isles' sweeper (isles.app.sweep_runs.IslesSweeper)")
        setattr(module, class_name, type(class_name, (IslesSweeper, BasicSweeper), {"__module__": module_name}))
        sys.modules[module_name] = module
    plugins.register(getattr(module, class_name))
    conf = make_dataclass("IslesSweeperConf", [("_target_", str, PLUGIN_NAME)], bases=(BasicSweeperConf,))
    ConfigStore.instance().store(group="hydra/sweeper", name="basic", node=conf, provider="isles")
