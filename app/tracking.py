"""MLflow tracking of a run: parameters, per-epoch metrics, tags and artifacts.

One MLflow run per job, in the experiment ``logger.experiment_name``:

* parameters: the resolved config, flattened (``algorithm.c1``, ``islands.n``, ...);
* metrics, per epoch (step = generation): ``best_f``, ``best_v`` (total violation of the best),
  ``best_feasible_f``, ``evaluations`` (of the objective and constraints; a min-max
  algorithm's pair payoffs as ``payoff_evaluations``), ``evals_per_s``, ``wall_s``, ``us_per_generation``
  (synchronized device time of the slowest group), ``nan_evaluations``,
  ``migrations_accepted``, ``master_best_f``, and ``island_XX_best_f`` per island;
* the run's name: ``logger.run_name``, else what ran (``cmepso-welded_beam-s0``); its description:
  the command line; MLflow's source tags (``mlflow.source.name`` ``run.py`` or ``isles``,
  ``mlflow.source.git.commit``); the experiment's tag ``mlflow.experimentKind`` (model training);
* tags: device, host, Ray node and GPU ids of every island group, Ray cluster resources, git commit;
* artifacts: ``config.yaml`` (resolved), ``convergence.png``, ``best_solution.json`` (the record
  the job writes into its output folder too, :func:`isles.app.report.solution_record`: ``x``,
  ``f``, ``g``, ``feasible``, ``evaluations``, ``seed``, ``config``; where the problem cannot
  re-evaluate x, ``f``, ``g`` and ``feasible`` are null, with the run's ``run_best_f``,
  ``run_best_v`` and ``not_computed``, also the tag ``report_not_computed``), ``history.csv``
  (every epoch's metrics, per island too) and ``migrations.csv`` when islands migrated: the files
  the job appended to as the epochs were made (:mod:`isles.app.run_files`);
* with ``logger.system_metrics=true``, MLflow's system metrics (``system/cpu_utilization_percentage``,
  ``system/system_memory_usage_megabytes``, ``system/gpu_N_utilization_percentage``, ...,
  every ``logger.system_metrics_interval`` seconds). They are sampled in the tracking process,
  and are system-wide: the CPUs, memory and (through NVML) GPUs of the machine that launched
  the run, not those of a cluster's other nodes;
* in a Hydra multirun, the tags that nest the run under its sweep's parent run
  (:mod:`isles.app.sweep_runs`).

The tracker runs in a process of its own (:class:`isles.app.tracking_process.TrackingProcess`);
a run of more than :data:`isles.app.tracking_process.MAX_STEPS` epochs logs every k-th epoch as
metric steps (and the last), all of them in ``history.csv``.

Metrics are buffered and written with ``log_batch`` whenever the tracking process has nothing
else to do (and every few seconds at the latest), so per-iteration epochs never wait on the
tracking store and little is left to write when the run ends. The default store is MLflow's own default (``sqlite:///mlflow.db``
in the launch directory); ``mlflow ui`` started there shows every run. A tracking server
(``logger.tracking_uri=http://HOST:PORT``) is checked before the run starts
(:mod:`isles.app.tracking_server`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import time

from isles.app.run_files import MIGRATION_HEADER, history_header, history_row, migration_row
from isles.app.tracking_server import prepare_sqlite_store
from isles.app.tracking_source import default_run_name, run_source, source_tags
from isles.islands.results import MLFLOW, EpochRecord


def mlflow_module():
    """The ``mlflow`` module, imported on first use (it takes seconds; a run with
    ``logger=none`` never pays for it, and with
    :class:`isles.app.tracking_process.TrackingProcess` the run's own process never imports it)."""
    import mlflow  # noqa: PLC0415

    return mlflow


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}} -> {"a.b": 1}``; lists become their string form."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def group_tags(groups: dict) -> dict:
    """MLflow tags of where island groups run: ``{group index: info}`` (:meth:`IslandGroup.info`)
    to ``group_<i>.device``, ``.host``, ``.node_id``, ``.node_ip`` (under Ray), ``.gpus`` (Ray's
    GPU ids), ``.islands`` (the island ids, comma-separated) and ``.gpu_path`` (the algorithm's path)."""
    tags = {}
    for i, g in groups.items():
        tags[f"group_{i}.device"] = g["device"]
        tags[f"group_{i}.host"] = g["host"]
        if g.get("node_id"):
            tags[f"group_{i}.node_id"], tags[f"group_{i}.node_ip"] = g["node_id"], g["node_ip"]
        if g.get("ray_gpu_ids"):
            tags[f"group_{i}.gpus"] = ",".join(g["ray_gpu_ids"])
        tags[f"group_{i}.islands"] = ",".join(map(str, g["island_ids"]))
        if g.get("gpu_path"):
            tags[f"group_{i}.gpu_path"] = g["gpu_path"]
    return tags


#: MLflow's experiment tag that picks the UI's view of an experiment (MLflow 3: without it an
#: experiment of runs without models may open in the GenAI view, "Evaluation runs", Traces, Judges)
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
#: its value for model training: the runs table and the metric charts
EXPERIMENT_KIND = "custom_model_development"


#: the tag of a failed or interrupted run that holds the line it printed (:meth:`MlflowTracker.on_error`)
ERROR_TAG = "isles.error"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _median(values: list) -> float:
    return float(sorted(values)[len(values) // 2]) if values else math.nan


class MlflowTracker:
    """Callback that writes one MLflow run.

    Args:
        logger_cfg: ``tracking_uri`` (or ``None`` for MLflow's default), ``experiment_name``,
            ``run_name``, ``system_metrics``, ``system_metrics_interval``.
        params: flat parameter dict (the resolved config).
        config_yaml: the resolved config as YAML text (artifact ``config.yaml``).
        problem: the problem, for the float64 report of the best solution.
        flush_s: seconds between metric flushes.
        sweep: the Hydra multirun this job belongs to
            (:func:`isles.app.sweep_runs.sweep_info`), or ``None``.
        source: what launched the run (:func:`run_source`; default: this process's command line).
    """

    def __init__(
        self,
        logger_cfg: dict,
        params: dict,
        config_yaml: str,
        problem,
        flush_s: float = 2.0,
        sweep: dict | None = None,
        source: dict | None = None,
    ):
        self.cfg = logger_cfg
        self.sweep = sweep
        self.source = source or run_source()
        self.params = params
        self.config_yaml = config_yaml
        self.problem = problem
        self.flush_s = flush_s
        self.run_id = None
        self._buffer: list = []
        self._last_flush = time.monotonic()
        self._client = None
        self._restarts = 0
        self.tags: dict = {}  # set at the run's creation too (the journal's id: isles.app.tracking_journal)
        self._live = False  # the run is MLflow's active run in this process (start), not reopened (reopen)

    def start(self, run_id: str | None = None, opened=None) -> str:
        """Open the run, log parameters, tags and the config; return the run id.

        ``opened``: called with the run id as soon as the run exists, before its parameters
        and config are logged.

        ``run_id``: continue that run (a resumed run: its parameters and config are logged
        already, and stay as they were); when the store does not hold it (a checkpoint written
        against another store, or ``logger.fallback_local``), a new run tagged
        ``resumed_from_run``, with one line on stderr. A sweep's job is nested under the sweep's parent run.
        A new run is named ``logger.run_name``, else what ran (:func:`default_run_name`; a
        sweep's job: its number and values), with MLflow's source tags and the command line as
        its description (:func:`source_tags`).
        With ``system_metrics``, MLflow samples the machine's CPU, memory and GPUs in a thread
        of this process until the run ends (``MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=true`` in
        the environment turns it on too)."""
        mlflow = mlflow_module()
        from isles.app.sweep_runs import child_name, child_tags, find_or_create_parent  # noqa: PLC0415
        from mlflow.tracking import MlflowClient  # noqa: PLC0415

        if self.cfg.get("tracking_uri"):
            mlflow.set_tracking_uri(self.cfg["tracking_uri"])
        prepare_sqlite_store(mlflow.get_tracking_uri())  # two runs at once never race to create it
        self._client = MlflowClient()
        system_metrics = True if self.cfg.get("system_metrics") else None  # None: MLflow's env variable
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # not its start/stop lines
        if self.cfg.get("system_metrics_interval"):
            mlflow.set_system_metrics_sampling_interval(float(self.cfg["system_metrics_interval"]))
        self._live = True
        if run_id and self._has_run(run_id):
            self.run_id = mlflow.start_run(run_id=run_id, log_system_metrics=system_metrics).info.run_id
            if opened:
                opened(self.run_id)
            mlflow.set_tags({"resumed": "true"})
            return self.run_id
        exp = self._experiment(self.cfg.get("experiment_name") or "isles")
        name, tags = self.cfg.get("run_name"), {}
        if run_id:  # resumed, but its run is in another store (e.g. logger.fallback_local): a new run
            tags = {"resumed": "true", "resumed_from_run": run_id}
            print(
                f"isles: MLflow run {run_id} is not in {mlflow.get_tracking_uri()}; the resumed run is "
                "logged as a new run there (tag resumed_from_run)",
                file=sys.stderr,
                flush=True,
            )
        if self.sweep:
            parent = find_or_create_parent(self._client, exp.experiment_id, self.sweep["id"])
            tags, name = (
                {**tags, **child_tags(parent, self.sweep)},
                name or child_name(self._client, parent, self.sweep),
            )
        tags = {**source_tags(self.source), **tags, **self.tags}  # MLflow's own (source.name would read "-c")
        run = mlflow.start_run(
            run_name=name or default_run_name(self.params, self.problem, self.source),
            tags=tags,
            log_system_metrics=system_metrics,
        )
        self.run_id = run.info.run_id
        if opened:
            opened(self.run_id)
        self.log_config()
        return self.run_id

    def log_config(self) -> None:
        """Log the parameters and ``config.yaml`` (again: the same values, nothing changes)."""
        from mlflow.entities import Param  # noqa: PLC0415

        items = [Param(k, str(v)[:6000]) for k, v in self.params.items()]
        for i in range(0, len(items), 100):  # MLflow takes at most 100 parameters a batch
            self._client.log_batch(self.run_id, params=items[i : i + 100])
        self._client.log_text(self.run_id, self.config_yaml, "config.yaml")

    def reopen(self, run_id: str | None, created: bool) -> str | None:
        """Continue writing the run ``run_id`` that an earlier tracking process opened (a record
        completed from its journal, :mod:`isles.app.tracking_journal`), without making it MLflow's
        active run or changing its status; ``created``: that process created the run, whose
        parameters and config are logged again (the same values: nothing changes). With no
        ``run_id``, the run is looked up by its tags :attr:`tags` (created, but its id not yet
        journaled); ``None`` when the store holds no such run (nothing was written: open it anew
        with :meth:`start`)."""
        mlflow = mlflow_module()
        from mlflow.tracking import MlflowClient  # noqa: PLC0415

        if self.cfg.get("tracking_uri"):
            mlflow.set_tracking_uri(self.cfg["tracking_uri"])
        self._client = MlflowClient()
        if run_id is None:
            exp = self._client.get_experiment_by_name(self.cfg.get("experiment_name") or "isles")
            where = " and ".join(f"tags.`{k}` = '{v}'" for k, v in self.tags.items())
            found = self._client.search_runs([exp.experiment_id], where, max_results=1) if exp and where else []
            if not found:
                return None
            run_id, created = found[0].info.run_id, True
        self.run_id = run_id
        if created:
            self.log_config()
        return run_id

    def _experiment(self, name: str):
        """Set (and return) the experiment ``name``, creating it when the store lacks it; a local
        ``sqlite:`` store's new experiment keeps its artifacts beside the database
        (:func:`isles.app.tracking_server.local_artifact_root`), not in the launch directory
        (under ``ray job submit``, Ray's temporary copy of the working directory). An experiment
        without :data:`EXPERIMENT_KIND_TAG` is tagged model training (:data:`EXPERIMENT_KIND`), so
        that MLflow's UI opens it on the runs table and charts, not the GenAI view; a kind set
        by hand stays."""
        from urllib.parse import quote  # noqa: PLC0415

        from isles.app.tracking_server import local_artifact_root  # noqa: PLC0415
        from mlflow.exceptions import MlflowException  # noqa: PLC0415

        mlflow = mlflow_module()
        root = local_artifact_root(mlflow.get_tracking_uri())
        if root and self._client.get_experiment_by_name(name) is None:
            with contextlib.suppress(
                MlflowException
            ):  # tagged as it is created: no second write for runs started at once to race on created meanwhile (another job of a sweep)
                self._client.create_experiment(
                    name,
                    artifact_location=f"{root}/{quote(name, safe='')}",
                    tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
                )
        exp = mlflow.set_experiment(name)
        if EXPERIMENT_KIND_TAG not in exp.tags:
            try:
                self._client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
            except MlflowException:  # another run set it meanwhile (MLflow's insert is not atomic)
                if EXPERIMENT_KIND_TAG not in self._client.get_experiment(exp.experiment_id).tags:
                    raise
        return exp

    def _has_run(self, run_id: str) -> bool:
        """Whether the tracking store holds the run ``run_id``."""
        from mlflow.exceptions import MlflowException  # noqa: PLC0415

        try:
            self._client.get_run(run_id)
        except MlflowException:
            return False
        return True

    # -- coordinator callbacks -----------------------------------------------------------------
    def on_start(self, info: dict, ts: int | None = None) -> None:
        """Tags: each group's device, host, Ray node, GPUs and islands; Ray's cluster resources
        (``info["cluster_resources"]``); start-up time metric (``ts``: its time, ms since the
        epoch; default now)."""
        from mlflow.entities import Metric  # noqa: PLC0415

        tags = group_tags(dict(enumerate(info["groups"])))
        tags["devices"] = "; ".join(sorted({g["device"] for g in info["groups"]}))
        tags["gpu_path"] = "; ".join(sorted({g.get("gpu_path", "") for g in info["groups"]} - {""}))
        if info.get("cluster_resources"):  # from the run's process (this one does not import Ray)
            tags["ray.cluster_resources"] = json.dumps(info["cluster_resources"])
        self._set_tags(tags)
        self._log_metrics([Metric("startup_s", float(info["startup_s"]), ts or _now_ms(), 0)])

    def on_restart(self, info: dict) -> None:
        """Tags of the restarted groups (``info["groups"]``: ``{group index: info}``) say where
        they run now; ``restarts`` counts the restarted groups."""
        self._restarts += len(info["groups"])
        self._set_tags({**group_tags(info["groups"]), "restarts": str(self._restarts)})

    def on_epoch(self, rec: EpochRecord, ts: int | None = None) -> None:
        """Buffer the epoch's MLflow metrics (:meth:`isles.islands.results.EpochRecord.metrics`;
        step = generation; ``ts``: their time, ms since the epoch, default now; NaN and infinite
        values left out); flush every ``flush_s`` seconds. The same epoch with the same ``ts``
        logged again (a record completed from its journal) adds no rows: MLflow's SQL store
        drops a metric it holds already."""
        from mlflow.entities import Metric  # noqa: PLC0415

        step, ts = rec.generation, ts or _now_ms()
        for k, v in rec.metrics(MLFLOW).items():
            v = float(v)
            if math.isfinite(v):
                self._buffer.append(Metric(k, v, ts, step))
        if time.monotonic() - self._last_flush > self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Write buffered metrics (MLflow takes at most 1000 per batch)."""
        while self._buffer:
            chunk, self._buffer = self._buffer[:1000], self._buffer[1000:]
            self._client.log_batch(self.run_id, metrics=chunk)
        self._last_flush = time.monotonic()

    def on_end(self, result, ts: int | None = None) -> None:
        """Final metrics and the artifacts (best solution, convergence plot, history, migrations).

        The best solution comes first (:func:`isles.app.report.end_report`): where the problem
        cannot re-evaluate it, ``best_solution.json`` holds ``x``, the run's ``run_best_f`` and
        ``run_best_v`` and ``not_computed`` (also the tag ``report_not_computed``), and the
        ``final_best_f``, ``final_max_violation`` and ``final_feasible`` metrics are left out."""
        from isles.app.plots import convergence_figure  # noqa: PLC0415
        from isles.app.report import solution_record  # noqa: PLC0415
        from mlflow.entities import Metric  # noqa: PLC0415

        client, rid, ts = self._client, self.run_id, ts or _now_ms()
        self.flush()
        # the job's record (written in its output folder too), else made here the same way
        report = result.solution if result.solution is not None else solution_record(self.problem, result)
        final = {
            "final_evaluations": result.evaluations,
            "final_wall_s": result.wall_s,
            "final_evals_per_s": result.evaluations / max(result.wall_s, 1e-12),
            "final_steady_evals_per_s": result.steady_evals_per_s,
            "final_us_per_generation": _median([h.us_per_generation for h in result.history]),
        }
        if result.payoff_evaluations:  # a min-max algorithm's pair payoffs, apart from evaluations
            final["final_payoff_evaluations"] = result.payoff_evaluations
        if report.get("not_computed"):
            client.set_tag(rid, "report_not_computed", report["not_computed"][:5000])
        else:
            final.update(
                {
                    "final_best_f": report["f"],
                    "final_max_violation": report["max_normalised_violation"],
                    "final_feasible": float(report["feasible"]),
                }
            )
        client.log_dict(rid, report, "best_solution.json")  # the result first: nothing after it can lose it
        if result.hit_generations is not None:
            final.update({f"island_{i:02d}_hit_generation": float(g) for i, g in enumerate(result.hit_generations)})
        self._log_metrics([Metric(k, float(v), ts, 0) for k, v in final.items()])
        fig = convergence_figure(result.history, self.problem)  # the kept records: bounded, evenly thinned
        client.log_figure(rid, fig, "convergence.png")
        # every epoch and migration: the files the job wrote as they were made, else what the result kept
        if result.history_path and os.path.isfile(result.history_path):
            client.log_artifact(rid, result.history_path)
        else:
            client.log_text(rid, history_csv(result.history), "history.csv")
        if result.migrations_path and os.path.isfile(result.migrations_path):
            client.log_artifact(rid, result.migrations_path)
        elif result.migrations:
            lines = [MIGRATION_HEADER] + [migration_row(m) for m in result.migrations]
            client.log_text(rid, "\n".join(lines) + "\n", "migrations.csv")

    def on_error(self, info: dict) -> None:
        """What ended a failed or interrupted run, kept in MLflow: the line the run printed as the
        tag ``isles.error`` (``info["line"]``) and the run's log ``run.log`` (``info["log"]``, the
        traceback, where it exists) as an artifact. Called after :meth:`end` too (the run's
        status stays)."""
        if info.get("line"):
            self._client.set_tag(self.run_id, ERROR_TAG, str(info["line"])[:5000])
        if info.get("log") and os.path.isfile(info["log"]):
            self._client.log_artifact(self.run_id, info["log"])

    def _set_tags(self, tags: dict) -> None:
        from mlflow.entities import RunTag  # noqa: PLC0415

        self._client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def _log_metrics(self, metrics: list) -> None:
        for i in range(0, len(metrics), 1000):
            self._client.log_batch(self.run_id, metrics=metrics[i : i + 1000])

    def end(self, status: str = "FINISHED") -> None:
        """Flush and close the run with ``status`` (``FINISHED``, ``FAILED`` or ``KILLED``)."""
        if self.run_id is None:
            return
        try:
            self.flush()
        except BaseException:
            self._terminate("FAILED")  # metrics lost: never FINISHED
            raise
        self._terminate(status)

    def _terminate(self, status: str) -> None:
        """Set the run's status: MLflow's active run ended (its system metrics stop), a reopened
        run (:meth:`reopen`) set through the client."""
        if self._live:
            mlflow_module().end_run(status=status)
        else:
            self._client.set_terminated(self.run_id, status)


def history_csv(history: list) -> str:
    """Epoch records as ``history.csv`` text (:func:`isles.app.run_files.history_row`)."""
    if not history:
        return "\n"
    header = history_header(history[0])
    return "\n".join([",".join(header)] + [history_row(h, header) for h in history]) + "\n"
