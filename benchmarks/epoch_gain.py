"""What an epoch kernel could gain for FEP and the GA (issue 18 section 2: "then FEP and the GA
where a measurement shows a gain; say where it did not").

An epoch kernel removes the cost of launching a generation's kernels (replayed from a CUDA
graph); it cannot remove the generation's work. For each family this times ``run`` on the fused
path (CUDA events, us per generation, median of 5 x ``--generations``) twice: at the family's
benchmark workload, and at a tiny size (two coordinates, eight or sixteen individuals, one
island) where the work is nil and what remains is the launch floor of a generation. The floor
bounds the gain: an epoch kernel saves at most ``floor / workload`` of a generation's time.

Usage (repository root, a GPU)::

    python benchmarks/epoch_gain.py [--generations 2048] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Sphere  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402


def _cases():
    from isles.algorithms.de.de import DE  # noqa: PLC0415
    from isles.algorithms.ep.fep import FEP  # noqa: PLC0415
    from isles.algorithms.ga.ga import GA, GAParams  # noqa: PLC0415

    ga_b = dict(pop_size=2240, nvdec=8, nvbin=4)
    return [
        # (family, workload label, algorithm factory, problem factory, islands)
        (
            "FEP",
            "f5 (Rastrigin D=32), mu=400, 20 islands",
            lambda: FEP(pop_size=400, q=10),
            lambda: Rastrigin(32, -5.12, 5.12),
            20,
        ),
        ("FEP", "f5, mu=400, 1 island", lambda: FEP(pop_size=400, q=10), lambda: Rastrigin(32, -5.12, 5.12), 1),
        ("FEP", "floor: sphere D=2, mu=16, 1 island", lambda: FEP(pop_size=16, q=10), lambda: Sphere(2), 1),
        (
            "GA",
            "Rastrigin D=2, N=2240, 100 islands (ga_bench B)",
            lambda: GA(GAParams(**ga_b)),
            lambda: Rastrigin(2, -1.0, 1.0),
            100,
        ),
        ("GA", "Rastrigin D=2, N=2240, 1 island", lambda: GA(GAParams(**ga_b)), lambda: Rastrigin(2, -1.0, 1.0), 1),
        (
            "GA",
            "floor: D=2, N=8, 1 island",
            lambda: GA(GAParams(pop_size=8, nvdec=8, nvbin=4)),
            lambda: Rastrigin(2, -1.0, 1.0),
            1,
        ),
        (
            "DE",
            "Rosenbrock D=50, N=100, 1 island (per-generation kernel)",
            lambda: DE(pop_size=100, F=0.65, CR=0.95, epoch=False),
            lambda: Rosenbrock(50),
            1,
        ),
        ("DE", "floor: sphere D=2, N=8, 1 island", lambda: DE(pop_size=8, epoch=False), lambda: Sphere(2), 1),
    ]


def measure(cp, algo, prob, islands: int, generations: int, repeats: int = 5) -> tuple[float, str]:
    """``(us per generation, gpu_path)`` of ``algo.run`` on the GPU (CUDA events, median;
    ``fep_bench.gpu_time``, which any algorithm's ``run`` serves)."""
    from fep_bench import gpu_time  # noqa: PLC0415  (this folder)

    ctx = Context(cp, np.dtype(np.float32), Evaluator(prob), CounterRNG(cp, 0, range(islands)))
    seconds, _ = gpu_time(algo, ctx, algo.init(ctx), generations, repeats)
    return seconds * 1e6 / generations, algo.gpu_path(ctx)


def main(argv=None) -> int:
    """Print one row per case and, per family, the largest share an epoch kernel could save."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--generations", type=int, default=2048)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import cupy as cp  # noqa: PLC0415

    print(
        f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; float32; CUDA events, median of 5 "
        f"x {args.generations} generations",
        flush=True,
    )
    rows = []
    for family, label, make_algo, make_prob, islands in _cases():
        us, path = measure(cp, make_algo(), make_prob(), islands, args.generations)
        rows.append({"family": family, "workload": label, "islands": islands, "us_per_gen": us, "path": path})
        print(f"{family:<4} {label:<58} {path:<14} {us:9.2f} us/gen", flush=True)
    for family in ("FEP", "GA", "DE"):
        fam = [r for r in rows if r["family"] == family]
        floor = [r for r in fam if r["workload"].startswith("floor")][0]["us_per_gen"]
        for r in fam:
            if not r["workload"].startswith("floor"):
                r["max_epoch_gain"] = floor / r["us_per_gen"]
                print(
                    f"{family}: {r['workload']}: launch floor {floor:.2f} of {r['us_per_gen']:.2f} us "
                    f"= at most {100 * floor / r['us_per_gen']:.0f} % to gain",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
