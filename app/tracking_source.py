"""What launched a run, as MLflow records it: its source tags, description and default name
(:class:`isles.app.tracking.MlflowTracker`; the run's own process works this out, the tracking
process's command line being ``-c``)."""

from __future__ import annotations

from isles import git_commit


def run_source(argv: list[str] | None = None) -> dict:
    """What launched the run, for MLflow's source tags and the run's description; called in the
    run's own process (the tracking process's command line is ``-c``).

    Args:
        argv: the command line (default: as typed, :func:`isles.app.overrides.launch_command`).

    Returns:
        ``{"name": "run.py" | "isles" | the script's file name, "command": the command line as the
        user typed it (``python run.py +experiment=cmepso device=cpu``, ``python /path/run.py ...``, ``isles ...``,
        ``python -m isles ...``), "experiment": the Hydra choice ``+experiment=NAME`` or ``None``,
        "overrides": a sweep's job's own overrides (``[]`` outside a Hydra multirun)}``.
    """
    import shlex  # noqa: PLC0415

    from isles.app.overrides import launch_command, task_overrides  # noqa: PLC0415

    name, head, args = launch_command(argv)
    experiment, multirun = None, False
    try:
        from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415
        from hydra.types import RunMode  # noqa: PLC0415

        hydra = HydraConfig.get()
        experiment, multirun = hydra.runtime.choices.get("experiment"), hydra.mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001, S110  (not started through Hydra)
        pass
    return {
        "name": name,
        "command": " ".join([*head, *(shlex.quote(a) for a in args)]),
        "experiment": experiment,
        "overrides": task_overrides() if multirun else [],
    }


def default_run_name(params: dict, problem, source: dict) -> str:
    """A run's name that says what ran: ``EXPERIMENT-PROBLEM-sSEED`` (``cmepso-welded_beam-s0``).

    EXPERIMENT is Hydra's ``+experiment`` choice, else ``logger.experiment_name`` unless it is the
    default ``isles``, else the algorithm's class; PROBLEM the problem's ``name``, else its
    class; SEED the config's ``seed``."""

    def leaf(target) -> str:
        return str(target or "").rsplit(".", 1)[-1].lower()

    experiment = source.get("experiment") or (
        params.get("logger.experiment_name")
        if params.get("logger.experiment_name") not in (None, "", "isles")
        else leaf(params.get("algorithm._target_")) or "isles"
    )
    name = getattr(problem, "name", None) or leaf(params.get("problem._target_")) or "problem"
    return f"{experiment}-{name}-s{params.get('seed', 0)}"[:250]


def source_tags(source: dict) -> dict:
    """MLflow's own source tags and description of a run launched by ``source`` (:func:`run_source`):
    ``mlflow.source.name``, ``mlflow.source.type`` (``LOCAL``), ``mlflow.source.git.commit`` (when
    the checkout is known; also the tag ``git_commit``, kept for the readers of earlier runs) and
    ``mlflow.note.content``, the run's description: the command line (and a sweep job's own
    overrides)."""
    from mlflow.utils.mlflow_tags import (  # noqa: PLC0415
        MLFLOW_GIT_COMMIT,
        MLFLOW_RUN_NOTE,
        MLFLOW_SOURCE_NAME,
        MLFLOW_SOURCE_TYPE,
    )

    note = f"Command:\n\n    {source['command']}\n"
    if source.get("overrides"):
        note += f"\nThis job of the sweep:\n\n    {' '.join(source['overrides'])}\n"
    commit = git_commit()
    tags = {
        MLFLOW_SOURCE_NAME: source["name"],
        MLFLOW_SOURCE_TYPE: "LOCAL",
        MLFLOW_RUN_NOTE: note,
        "git_commit": commit,
    }
    if commit != "unknown":
        tags[MLFLOW_GIT_COMMIT] = commit
    return tags
