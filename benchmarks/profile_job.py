"""Profile one job in this process (cProfile), e.g. where the main job's evolution time goes.

    python benchmarks/profile_job.py +experiment=cmepso device=gpu logger=none
Prints the top functions by cumulative time.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from isles.app.job import run_job  # noqa: E402


def main() -> None:
    overrides = [*sys.argv[1:], "progress=false"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    run_job(cfg)  # warm-up: kernel compilation, imports
    prof = cProfile.Profile()
    prof.enable()
    run_job(cfg)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
