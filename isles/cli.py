"""The ``isles`` command (and ``python -m isles``, ``python run.py``): one Hydra job.

Examples::

    isles +experiment=cmepso                    # CMEPSO on the welded beam
    isles +experiment=cmepso problem=spring     # ... on the spring
    isles -m +experiment=cmepso seed='range(20)' logger.experiment_name=cmepso-quality

The configs are ``isles.conf`` (the repository's ``conf/``, shipped as package data). Exit status:
0 done, 2 a bad config value (one line naming the field), 1 a failure inside a run (one line with
the file and line, and where the full log is; for lost actors that could not be restarted, where
the checkpoint is and the command that resumes).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from isles.islands.coordinator import RestartFailed
from isles.islands.job import failure_line, run_job

CONF_DIR = str(Path(__import__("isles.conf", fromlist=["_"]).__file__).resolve().parent)
"""The Hydra config directory (``conf/`` of a checkout, or ``isles/conf`` of an installed wheel)."""


def import_from_launch_directory() -> None:
    """Put the directory isles was launched from first on ``sys.path``, as ``python -m isles``
    does: ``problem._target_=my_module.MyProblem`` then finds ``my_module.py`` there whichever way
    isles was started (``isles``, ``python run.py`` from a checkout, ``python -m isles``). Ray's
    workers on this machine get the same directory from Ray; on a cluster the user's modules
    travel with the job (:mod:`isles.islands.user_modules`)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def main() -> None:
    """The ``isles`` command: the launch directory importable, then one Hydra job (:func:`run`)."""
    import_from_launch_directory()
    run()


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def run(cfg: DictConfig) -> float:
    """Run one job and return its best fitness (Hydra's sweepers minimise it).

    Raises:
        SystemExit: 2 on a bad config value, 1 on a failure inside the run; one line on stderr.
    """
    try:
        result, _ = run_job(cfg)
    except ValueError as err:
        print(f"isles: error: {err}", file=sys.stderr)
        sys.exit(2)
    except RestartFailed as err:  # lost actors with nowhere to go: the checkpoint and the resume command
        print(f"isles: error: {err}", file=sys.stderr)
        sys.exit(1)
    except Exception as err:  # noqa: BLE001  (a failure inside an actor or a user's problem)
        print(f"isles: error: {failure_line(err)}", file=sys.stderr)
        sys.exit(1)
    return result.best_f
