"""The mix against each algorithm alone (issue 27 §1, docs/mixed_islands.md): a heterogeneous
archipelago of DE, FEP and PSO islands against 12 islands of one of them, at the same number of
evaluations, on several problems and seeds.

Every arm has 12 islands of 50 individuals (DE ``pop_size``, FEP ``mu``, PSO ``n_particles``; 50
evaluations per island and generation in each family) on a two-way ring, the best individual
migrating every 50 generations (``fair_replace``), so every arm makes ``12 x 50 x (1 + G)``
evaluations in ``G`` generations. Arms:

* ``mix``: ``+experiment=mixed_islands`` (4 DE, 4 FEP, 4 PSO islands);
* ``de``, ``fep``, ``pso``: ``algorithm=NAME`` with ``islands.n=12`` and the same settings (the
  families' defaults, as in the mix; PSO's inertia schedule spans the run).

Usage (repository root)::

    python benchmarks/mixed_bench.py                                  # D=30, 4 problems, 3 seeds, 1000 generations
    python benchmarks/mixed_bench.py --dim 100 --generations 2000 --seeds 5 --device gpu
    python benchmarks/mixed_bench.py --problems rastrigin --arms mix,de --seeds 1 --generations 200

Prints a Markdown table: per problem and arm, the median, best and worst final ``f`` over the seeds,
the arm's rank by median (ties share a rank), on how many seeds the mix ended better and worse than
the arm (paired by seed), and for the mix each group's mean share of the run's improvements
(:class:`isles.islands.mixed.GroupBooks`); then the wall time of the whole benchmark.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from isles.islands.config.schema import validated  # noqa: E402
from isles.islands.coordinator import Coordinator  # noqa: E402
from isles.islands.mixed import group_metric  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

SIZE = {"de": "pop_size", "fep": "pop_size", "pso": "n_particles"}
COMMON = ["topology=ring", "islands.migration_interval=50", "logger=none", "progress=false"]


def overrides(arm: str, problem: str, dim: int, generations: int, seed: int, device: str) -> list:
    """The Hydra overrides of one run of ``arm`` (``mix`` or a family's name)."""
    run = [f"problem={problem}", f"problem.dim={dim}", f"generations={generations}", f"seed={seed}", f"device={device}"]
    if arm == "mix":
        return ["+experiment=mixed_islands", *run, *COMMON]
    extra = ["algorithm.max_iterations=${generations}"] if arm == "pso" else []
    return [f"algorithm={arm}", f"algorithm.{SIZE[arm]}=50", "islands.n=12", *extra, *run, *COMMON]


def run_one(arm: str, problem: str, dim: int, generations: int, seed: int, device: str) -> tuple:
    """``(best f, evaluations, {group: improvement share})`` of one run."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides(arm, problem, dim, generations, seed, device))
    cfg = validated(OmegaConf.to_container(cfg, resolve=True))
    result = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()
    last = result.history[-1].group_metrics  # a mixed run's (isles.islands.mixed.GroupBooks); {} for one algorithm
    shares = {g["name"]: last[group_metric(g["name"], "improvement_share")] for g in cfg.get("groups") or []}
    return float(result.best_f), int(result.evaluations), shares


def main() -> None:
    """Run the arms and print the table (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="rastrigin,rosenbrock,ackley,griewank")
    ap.add_argument("--arms", default="mix,de,fep,pso")
    ap.add_argument("--dim", type=int, default=30)
    ap.add_argument("--generations", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    arms, t0 = a.arms.split(","), time.perf_counter()
    print(f"D={a.dim}, {a.generations} generations, seeds 0..{a.seeds - 1}, device={a.device}; 12 islands x 50\n")
    print(
        "| problem | arm | median f | best f | worst f | rank | mix better / worse (seeds) | evaluations | improvement share (mix) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for problem in a.problems.split(","):
        rows = {}
        for arm in arms:
            runs = [run_one(arm, problem, a.dim, a.generations, s, a.device) for s in range(a.seeds)]
            fs = [r[0] for r in runs]
            share = {n: statistics.fmean(r[2][n] for r in runs) for n in runs[0][2]}
            rows[arm] = (statistics.median(fs), min(fs), max(fs), runs[0][1], share, fs)
        for arm in arms:
            med, lo, hi, evals, share, fs = rows[arm]
            shares = ", ".join(f"{n} {v:.2f}" for n, v in share.items())
            mix = rows["mix"][5] if "mix" in rows and arm != "mix" else None
            paired = (
                f"{sum(m < f for m, f in zip(mix, fs, strict=False))} / {sum(m > f for m, f in zip(mix, fs, strict=False))}"
                if mix
                else ""
            )
            print(
                f"| {problem} | {arm} | {med:.4g} | {lo:.4g} | {hi:.4g} | {1 + sum(rows[o][0] < med for o in arms)} | {paired} | {evals:,} | {shares} |"
            )
        sys.stdout.flush()
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
