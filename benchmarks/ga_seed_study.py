"""Seed 002 Tables 2-5 with isles' GA: generations to reach |f| < tol, and failed attempts.

For each problem (De Jong = sphere, Ackley, Rastrigin; 2 variables in the seed's encoding) and each
population size 320, 640, ..., 2880, the 100 runs of one cell are 100 **unconnected islands in
one actor** (``+experiment=ga_seed_runs``): one batched launch per generation, not 100 processes.
A run that has not reached the tolerance after ``--generations`` generations is a failed attempt.
The table puts the seed's figures beside ours (mean and standard deviation of the generations of
the successful runs; failed attempts out of 100).

    python benchmarks/ga_seed_study.py --device gpu            # the whole 3 x 9 x 100 study
    python benchmarks/ga_seed_study.py --device cpu --psizes 320,640 --runs 20
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from isles.app.job import run_job  # noqa: E402

PSIZES = (320, 640, 960, 1280, 1600, 1920, 2240, 2560, 2880)
PROBLEMS = {"sphere": "De Jong", "ackley": "Ackley", "rastrigin": "Rastrigin"}
# seed 002 Tables 2-4 (mean, sd of generations) and Table 5 (failed attempts, psize <= 2240)
SEED = {
    "sphere": {
        320: (1240.13, 670.51, 0),
        640: (299.23, 209.60, 0),
        960: (153.28, 122.32, 0),
        1280: (74.08, 54.36, 0),
        1600: (47.92, 34.81, 0),
        1920: (38.54, 28.82, 0),
        2240: (27.91, 18.63, 0),
        2560: (40.59, 14.67, None),
        2880: (161.00, 125.12, None),
    },
    "ackley": {
        320: (2602.90, 930.13, 4),
        640: (724.31, 299.81, 0),
        960: (346.78, 141.93, 0),
        1280: (202.62, 83.81, 0),
        1600: (146.13, 84.14, 0),
        1920: (131.43, 61.64, 0),
        2240: (100.49, 47.17, 0),
        2560: (98.46, 39.04, None),
        2880: (351.00, 143.20, None),
    },
    "rastrigin": {
        320: (1850.04, 841.17, 42),
        640: (512.10, 217.98, 42),
        960: (227.37, 103.85, 28),
        1280: (128.94, 60.58, 23),
        1600: (96.71, 36.58, 21),
        1920: (73.03, 27.07, 17),
        2240: (61.40, 22.33, 13),
        2560: (52.43, 15.26, None),
        2880: (126.00, 58.50, None),
    },
}


def run_cell(problem: str, psize: int, args) -> dict:
    """One cell: ``args.runs`` islands of population ``psize``; returns the statistics."""
    overrides = [
        "+experiment=ga_seed_runs",
        f"problem={problem}",
        f"algorithm.pop_size={psize}",
        f"islands.n={args.runs}",
        f"generations={args.generations}",
        f"device={args.device}",
        f"seed={args.seed}",
        "logger=none",
        "progress=false",
        *args.overrides,
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    t0 = time.perf_counter()
    result, _ = run_job(cfg, use_ray=False)
    wall = time.perf_counter() - t0
    h = np.asarray(result.hit_generations)
    ok = h[h >= 0]
    return {
        "mean": float(ok.mean()) if ok.size else float("nan"),
        "sd": float(ok.std(ddof=1)) if ok.size > 1 else float("nan"),
        "failed": int((h < 0).sum()),
        "runs": int(h.size),
        "wall_s": wall,
        "generations_run": result.generations,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--psizes", default=",".join(map(str, PSIZES)))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--generations", type=int, default=5000, help="budget of one attempt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. algorithm.group_size=3")
    args = ap.parse_args()
    problems = [p for p in args.problems.split(",") if p]
    psizes = [int(p) for p in args.psizes.split(",") if p]
    t_all = time.perf_counter()
    rows = []
    for prob in problems:
        for n in psizes:
            r = run_cell(prob, n, args)
            rows.append((prob, n, r))
            print(
                f"{PROBLEMS.get(prob, prob)} psize {n}: mean {r['mean']:.1f} sd {r['sd']:.1f} "
                f"failed {r['failed']}/{r['runs']} ({r['wall_s']:.2f} s)",
                flush=True,
            )
    print()
    print(
        f"| problem | psize | isles g | isles Sd | isles failed /{args.runs} | seed g | seed Sd | seed failed /100 | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for prob, n, r in rows:
        sg, ssd, sfa = SEED.get(prob, {}).get(n, (None, None, None))
        fmt = lambda x: "–" if x is None else f"{x:.1f}"  # noqa: E731
        print(
            f"| {PROBLEMS.get(prob, prob)} | {n} | {r['mean']:.1f} | {r['sd']:.1f} | {r['failed']} | "
            f"{fmt(sg)} | {fmt(ssd)} | {'–' if sfa is None else sfa} | {r['wall_s']:.2f} |"
        )
    print(
        f"\nwhole study: {time.perf_counter() - t_all:.1f} s ({len(rows)} cells x {args.runs} runs, "
        f"budget {args.generations} generations, device {args.device})"
    )


if __name__ == "__main__":
    main()
