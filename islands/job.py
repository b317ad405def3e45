"""One job: config in, Ray up, coordinator run, MLflow run, summary out.

``run.py`` calls :func:`run_job` with the composed Hydra config. Errors in the config are raised
as ``ValueError`` with a one-line message naming the field and the allowed values; a run that
fails after it started leaves its MLflow run marked ``FAILED`` with what was logged so far.
"""
from __future__ import annotations

import os

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from algorithms.core.backend import DEVICES, cupy_or_none, dtype_of
from islands.build import build_algorithm, build_problem, check_pairing
from islands.coordinator import Coordinator, RunResult
from islands.progress import ConsoleProgress, print_summary
from islands.tracking import ROOT, MlflowTracker, flatten

RAY_EXCLUDES = [".git", "outputs", "multirun", "mlruns", "mlflow.db", "mlartifacts", ".devbundle", "*.egg-info"]


def init_ray(ray_cfg: dict) -> None:
    """Start a local Ray (no ``ray.address``) or connect to a cluster (``ray.address``).

    The repository travels to a cluster's workers as the Ray ``working_dir``.
    """
    import ray  # noqa: PLC0415

    if ray.is_initialized():
        return
    address = ray_cfg.get("address")
    if address:
        ray.init(address=address, runtime_env={"working_dir": str(ROOT), "excludes": RAY_EXCLUDES},
                 log_to_driver=True)
    else:
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        ray.init(num_cpus=ray_cfg.get("num_cpus"), include_dashboard=bool(ray_cfg.get("include_dashboard", False)),
                 runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=True,
                 configure_logging=True, logging_level="warning")


def _output_dir() -> str:
    """The job's Hydra output directory, or the working directory outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415

        return HydraConfig.get().runtime.output_dir
    except Exception:
        return os.getcwd()


def validate(cfg: dict) -> None:
    """Top-level checks that need no actor.

    Raises:
        ValueError: ``device``, ``dtype`` or ``seed`` out of range; ``device=gpu`` on a machine
            without a GPU when no cluster address is given.
    """
    if cfg.get("device") not in DEVICES:
        raise ValueError(f"device={cfg.get('device')!r}: allowed values are {'|'.join(DEVICES)}")
    dtype_of(cfg.get("dtype", "float64"))
    if cfg["device"] == "gpu" and not cfg.get("ray", {}).get("address") and cupy_or_none() is None:
        raise ValueError("device=gpu: no GPU is visible on this machine (CuPy missing or no CUDA device); "
                         "allowed values here are auto|cpu")
    if not isinstance(cfg.get("seed"), int) or cfg["seed"] < 0:
        raise ValueError(f"seed={cfg.get('seed')!r}: allowed values are integers >= 0")


def run_job(cfg: DictConfig, use_ray: bool = True) -> tuple[RunResult, str | None]:
    """Run the experiment described by ``cfg``; return the result and the MLflow run id.

    Raises:
        ValueError: a bad config value (before or during the run; the MLflow run, if started,
            is marked FAILED).
    """
    plain = OmegaConf.to_container(cfg, resolve=True)
    validate(plain)
    ck = plain.setdefault("checkpoint", {}) or {}
    if ck.get("every") and not ck.get("path"):
        ck["path"] = os.path.join(_output_dir(), "checkpoint.pkl")
    problem = build_problem(plain["problem"])
    topology = instantiate(plain["topology"])
    master = instantiate(plain["master"]) if plain.get("master") else None
    # build (and validate) the island algorithm here too, so a bad value fails before Ray starts
    algorithm = build_algorithm(plain["algorithm"])
    check_pairing(algorithm, problem, plain.get("constraints"))
    n_pop = algorithm.population_size()
    k = plain["islands"].get("n_migrants", 1)
    if not isinstance(k, int) or not 1 <= k <= n_pop:
        raise ValueError(f"islands.n_migrants={k}: allowed values are integers 1..{n_pop} (the population size)")

    tracker = None
    if plain.get("logger", {}).get("enabled", False):
        params = flatten({k: v for k, v in plain.items() if k != "hydra"})
        tracker = MlflowTracker(plain["logger"], params, OmegaConf.to_yaml(cfg, resolve=True), problem)
    callbacks = [ConsoleProgress(problem)] if plain.get("progress", True) else []
    coordinator = Coordinator(plain, topology, master, callbacks=callbacks + ([tracker] if tracker else []),
                              use_ray=use_ray)
    if use_ray:
        init_ray(plain.get("ray", {}))
    run_id = tracker.start() if tracker else None
    try:
        result = coordinator.run()
    except BaseException:
        if tracker:
            tracker.end("FAILED")
        raise
    if tracker:
        tracker.end("FINISHED")
    if plain.get("progress", True):
        print_summary(result, problem, run_id)
    return result, run_id
