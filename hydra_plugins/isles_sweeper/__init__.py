"""isles' sweeper: Hydra's basic sweeper (the cartesian product of ``-m`` overrides) with two
changes, used by the ``isles`` command (:func:`isles.cli.main` stores it in Hydra's ConfigStore
as ``hydra/sweeper: basic``, so other Hydra applications keep Hydra's own):

* every job's config is composed and checked before the first job starts
  (:func:`isles.app.sweep_runs.check_job`): a bad value (``algorithm.F=0.5,5,0.6``) is one line
  naming the job's override and the allowed values, exit status 2, and no job runs;
* a failed job does not stop the sweep: every job runs, and the sweep ends with one line per
  failed job and exit status 1, the sweep's parent MLflow run left ``FAILED`` (Hydra's basic sweeper raises the first failure after its batch,
  and leaves the later batches unlaunched).

It lives in the ``hydra_plugins`` namespace because Hydra instantiates sweepers only from there.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobStatus
from omegaconf import OmegaConf


@dataclass
class IslesSweeperConf(BasicSweeperConf):
    """The config of :class:`IslesSweeper`: Hydra's basic sweeper's (``max_batch_size``, ``params``)."""

    _target_: str = "hydra_plugins.isles_sweeper.IslesSweeper"


class IslesSweeper(BasicSweeper):
    """Hydra's :class:`BasicSweeper`, checking every job before the first starts and running every
    job whatever fails (module docstring)."""

    _first_job = 0  # the number of the first job of the batch being checked

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Compose each job's config (Hydra's own check), then run isles' checks on it.

        Raises:
            SystemExit: 2, after one line ``isles: error: job NUM (OVERRIDES): MESSAGE`` on stderr.
        """
        from isles.app.sweep_runs import check_job, swept_overrides  # noqa: PLC0415

        loader = self.hydra_context.config_loader
        command = list(self.config.hydra.overrides.task)
        for num, overrides in enumerate(batch, start=self._first_job):
            cfg = loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))
            try:
                check_job(cfg)
            except ValueError as err:
                line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                print(f"isles: error: job {num} ({swept_overrides(list(overrides), command)}): {line}; "
                      "no job of the sweep was started", file=sys.stderr, flush=True)
                raise SystemExit(2) from None

    def sweep(self, arguments: list[str]) -> Any:
        """Run every job (BasicSweeper's batches), all of them checked before the first starts.

        Raises:
            SystemExit: 1 after the last job when some failed, after one line per failed job.
        """
        from isles.app.sweep_runs import failed_jobs_message, swept_overrides  # noqa: PLC0415

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
                if r.status == JobStatus.FAILED:
                    err = r._return_value  # JobReturn.return_value would raise it
                    line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                    failed.append((num, swept_overrides(list(r.overrides or []), command), line))
            first += len(batch)
            returns.append(results)
        if failed:
            print(failed_jobs_message(failed, first), file=sys.stderr, flush=True)
            raise SystemExit(1)
        return returns
