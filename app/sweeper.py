"""isles' sweeper of a Hydra multirun (``hydra/sweeper: basic``): :class:`IslesSweeper` checks every
job's config before the first job starts (:func:`check_job`, the checks of
:func:`isles.app.job.prepare`), and a failed job (:class:`JobFailed`) does not stop the sweep.

The sweep's MLflow runs (a parent run, a child run per job) are :mod:`isles.app.sweep_runs`; this
module runs the jobs and imports that one, never the other way round.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobStatus
from isles.app.job import prepare
from isles.app.sweep_runs import override_keys
from omegaconf import DictConfig, OmegaConf


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
                print(
                    f"isles: error: job {num} ({swept_overrides(list(overrides), command)}): {_first_line(err)}; "
                    "no job of the sweep was started",
                    file=sys.stderr,
                    flush=True,
                )
                raise SystemExit(2) from None

    def sweep(self, arguments: list[str]) -> Any:
        """Run every job (BasicSweeper's batches), all of them checked before the first starts.

        Returns:
            The jobs' ``JobReturn``\\ s, a list per batch (as BasicSweeper).

        Raises:
            SystemExit: 1 after the last job when some failed, after one line per failed job.
        """
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(
            parser.parse_overrides(self._parse_config() + list(arguments)), self.max_batch_size
        )
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


#: Hydra plug-ins that isles' configs choose, by ``(config group, option)``: the module that holds the
#: plug-in and the isles extra that installs it (pyproject.toml)
PLUGIN_EXTRAS = {
    ("hydra/sweeper", "optuna"): ("hydra_plugins.hydra_optuna_sweeper", "sweep"),
    ("hydra/launcher", "ray"): ("hydra_plugins.hydra_ray_launcher", "cluster"),
}


def _chosen_options(group: str, option: str, conf_dir: str) -> list[tuple[str, str]]:
    """``(group, option)`` and the options that its file in ``conf_dir`` chooses in its defaults list
    (``hparams_search=de_optuna``: ``override /hydra/sweeper: optuna``; ``hydra/launcher=ray_cluster``:
    ``- ray``, an option of its own group)."""
    import yaml  # noqa: PLC0415

    out = [(group, option)]
    try:
        with open(os.path.join(conf_dir, group, f"{option}.yaml"), encoding="utf-8") as fh:
            defaults = (yaml.safe_load(fh) or {}).get("defaults") or []
    except (OSError, yaml.YAMLError, AttributeError):
        return out
    for entry in defaults:
        if isinstance(entry, str) and entry != "_self_":
            out.append((group, entry))
        elif isinstance(entry, dict):
            for key, value in entry.items():
                key = key.removeprefix("override ").strip()
                out.append((key.lstrip("/") if key.startswith("/") else f"{group}/{key}", str(value)))
    return out


def check_plugin_extras(args: list[str], conf_dir: str) -> None:
    """Refuse, before Hydra composes, a config option of the command line ``args`` that needs a Hydra
    plug-in that is not installed (:data:`PLUGIN_EXTRAS`): ``hparams_search=de_optuna`` (which picks
    ``hydra/sweeper: optuna``), ``hydra/sweeper=optuna``, ``hydra/launcher=ray_cluster``. Hydra would
    say ``Could not find 'hydra/sweeper/optuna'`` in 10 lines.

    Raises:
        ValueError: ``hparams_search=de_optuna: needs Hydra's Optuna sweeper (hydra/sweeper=optuna),
            which is not installed: pip install "isles[sweep]"``.
    """
    import importlib.util  # noqa: PLC0415

    for arg in args:
        choice, sep, option = arg.lstrip("+").partition("=")
        if not sep or arg.startswith("-") or "." in choice or not option:
            continue
        for group, name in _chosen_options(choice.partition("@")[0], option, conf_dir):
            module, extra = PLUGIN_EXTRAS.get((group, name), (None, None))
            try:
                found = module is None or importlib.util.find_spec(module) is not None
            except ImportError:
                found = False
            if not found:
                raise ValueError(
                    f"{arg.lstrip('+')}: needs Hydra's {name} plug-in ({group}={name}), which is not installed: "
                    f'pip install "isles[{extra}]"'
                )


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
        module = types.ModuleType(module_name, "isles' sweeper (isles.app.sweeper.IslesSweeper)")
        setattr(module, class_name, type(class_name, (IslesSweeper, BasicSweeper), {"__module__": module_name}))
        sys.modules[module_name] = module
    plugins.register(getattr(module, class_name))
    conf = make_dataclass("IslesSweeperConf", [("_target_", str, PLUGIN_NAME)], bases=(BasicSweeperConf,))
    ConfigStore.instance().store(group="hydra/sweeper", name="basic", node=conf, provider="isles")
