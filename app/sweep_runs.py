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
:class:`isles.app.sweeper.IslesSweeper`: every job's config is checked before the first job
starts, and a failed job does not stop the sweep.

``benchmarks/quality_table.py --parent RUN_ID`` or ``--sweep ID|latest`` reads one sweep back.
"""

from __future__ import annotations

import atexit
import contextlib
import sys

from hydra.experimental.callback import Callback
from isles.app.tracking_server import local_artifact_root, prepare_sqlite_store
from omegaconf import DictConfig, OmegaConf

from isles import git_commit

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
        return {
            "id": str(hc.sweep.dir),
            "job": int(hc.job.get("num") or 0),
            "overrides": [str(o) for o in hc.overrides.task],
        }
    except Exception:  # noqa: BLE001  (a Hydra config without these fields: not a sweep we know)
        return None


def experiment_id(client, name: str) -> str:
    """The id of the MLflow experiment ``name``, created if it does not exist (also when another
    process creates it at the same moment), its artifacts beside a local store as a run's own
    experiment keeps them (:func:`isles.app.tracking_server.local_artifact_root`; before, a sweep
    that created it put every job's artifacts in ``mlruns`` of the launch directory)."""
    from urllib.parse import quote  # noqa: PLC0415

    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    root = local_artifact_root(client.tracking_uri)
    try:
        return client.create_experiment(name, artifact_location=f"{root}/{quote(name, safe='')}" if root else None)
    except MlflowException:
        return client.get_experiment_by_name(name).experiment_id


def _parents(client, exp_id: str, sweep_id: str) -> list:
    quoted = sweep_id.replace("\\", "\\\\").replace("'", "\\'")
    return client.search_runs(
        [exp_id],
        f"tags.{SWEEP_TAG} = '{quoted}' AND tags.{PARENT_TAG} = 'true'",
        order_by=["attributes.start_time ASC", "attributes.run_id ASC"],
        max_results=100,
    )


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
    own = [
        o
        for o, (key, _) in zip(sweep["overrides"], override_keys(sweep["overrides"]), strict=False)
        if key not in fixed
    ]
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

            prepare_sqlite_store(logger.get("tracking_uri"))  # a local store made once, under its lock
            client = MlflowClient(tracking_uri=logger.get("tracking_uri"))
            exp_id = experiment_id(client, logger.get("experiment_name") or "isles")
            overrides = list(config.hydra.overrides.task)
            run_id = find_or_create_parent(client, exp_id, str(config.hydra.sweep.dir), overrides)
        except Exception as err:  # noqa: BLE001
            line = str(err).strip().splitlines()[0] if str(err).strip() else ""
            print(
                f"isles: the sweep's parent MLflow run was not opened here ({type(err).__name__}: {line}); "
                "the first job opens it",
                file=sys.stderr,
                flush=True,
            )
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
            print(
                f"isles: the sweep's parent MLflow run {run_id} was not closed ({type(err).__name__})",
                file=sys.stderr,
                flush=True,
            )
