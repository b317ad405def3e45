"""isles entry point: ``python run.py +experiment=cmepso [overrides]`` (Hydra).

Examples:
    python run.py +experiment=cmepso                    # CMEPSO on the welded beam
    python run.py +experiment=cmepso problem=spring     # ... on the spring
    python run.py -m +experiment=cmepso seed='range(20)' logger.experiment_name=cmepso-quality
"""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))

from islands.job import failure_line, run_job  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Run one job; a bad config value exits with a one-line error and status 2."""
    try:
        result, _ = run_job(cfg)
    except ValueError as err:
        print(f"isles: error: {err}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:  # noqa: BLE001  (a failure inside an actor or a user's problem)
        print(f"isles: error: {failure_line(err)}", file=sys.stderr)
        sys.exit(1)
    return result.best_f


if __name__ == "__main__":
    main()
