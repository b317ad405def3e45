"""Where a generation of isles' batched CMA-ES goes on the GPU: milliseconds per generation on CuPy
(CUDA events) and NumPy, one instance at D = 30 and 128 instances at D = 100 (float64), the batched
``eigh`` alone, and the Python calls per generation (``cProfile``): the host-bound cost behind
isles' CMA-ES time-to-target in docs/cec2014.md ("GPU and EvoX").

Usage (repository root, a GPU machine with CuPy)::

    python benchmarks/cmaes_generation_cost.py          # about 30 s on an H100
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.cmaes.cmaes import CMAES  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.benchmarks import Sphere  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402


def per_generation_ms(cp, fn, n: int) -> float:
    """Milliseconds per call of ``fn(n)`` between two CUDA events (the host's wall on NumPy)."""
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    fn(n)
    e1.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) / n


def main() -> None:
    import cupy as cp  # noqa: PLC0415

    print(
        "| instances | D | CuPy ms / generation | NumPy ms / generation | CuPy eigh alone, ms | Python calls / generation |"
    )
    print("|---|---|---|---|---|---|")
    for n_islands, dim in ((1, 30), (128, 100)):
        row = {}
        for xp in (cp, np):
            alg = CMAES(dim=dim)
            ctx = Context(xp, np.float64, Evaluator(Sphere(dim, -100.0, 100.0)), CounterRNG(xp, 0, range(n_islands)))
            box = {"s": alg.init(ctx)}

            def run(n, alg=alg, ctx=ctx, box=box):
                for _ in range(n):
                    box["s"] = alg.step(ctx, box["s"])

            run(5)
            if xp is np:
                t0 = time.perf_counter()
                run(10)
                row["numpy"] = (time.perf_counter() - t0) * 1e3 / 10
                continue
            row["cupy"] = per_generation_ms(cp, run, 30)
            C = box["s"]["C"]
            row["eigh"] = per_generation_ms(cp, lambda n, C=C: [cp.linalg.eigh(C) for _ in range(n)], 10)
            prof = cProfile.Profile()
            prof.enable()
            run(30)
            cp.cuda.Device().synchronize()
            prof.disable()
            row["calls"] = pstats.Stats(prof).total_calls / 30
        print(
            f"| {n_islands} | {dim} | {row['cupy']:.2f} | {row['numpy']:.2f} | {row['eigh']:.2f} | {row['calls']:.0f} |"
        )


if __name__ == "__main__":
    main()
