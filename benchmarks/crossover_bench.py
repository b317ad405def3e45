"""Crossovers alone at seed 004 Table I's sizes: binomial, classic exponential and NEC.

    python benchmarks/crossover_bench.py --device gpu        # D in {10,100,1000,10000} x Np in {100,1000,10000}
    python benchmarks/crossover_bench.py --device cpu --max-elements 10000000

Times one call of :func:`isles.algorithms.de.crossover.crossover_mask` (the generic array path: mask of
shape ``(1, Np, D)``, random numbers included) with synchronized timers
(``cupyx.profiler.benchmark`` on the GPU). Prints a Markdown table in microseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.core.backend import device_name, get_xp  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.de.crossover import crossover_mask  # noqa: E402

DIMS = (10, 100, 1000, 10000)
POPS = (100, 1000, 10000)
KINDS = ("bin", "exp", "nec")


def time_us(xp, fn, repeat: int) -> float:
    """Mean time of ``fn()`` in microseconds (GPU: device time from cupyx's benchmark)."""
    if xp is np:
        fn()
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - t0) / repeat * 1e6
    from cupyx.profiler import benchmark  # noqa: PLC0415

    return float(np.mean(benchmark(fn, n_repeat=repeat, n_warmup=3).gpu_times)) * 1e6


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--cr", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--max-elements", type=float, default=1e8, help="skip sizes with more Np*D")
    a = ap.parse_args()
    xp = get_xp(a.device)
    rng = CounterRNG(xp, 0, [0])
    print(f"crossover_mask, CR={a.cr}, {device_name(xp)}, microseconds per call")
    print("| D | Np | " + " | ".join(KINDS) + " |")
    print("|---|---|" + "---|" * len(KINDS))
    for d in DIMS:
        for n in POPS:
            if n * d > a.max_elements:
                continue
            cells = [
                f"{time_us(xp, lambda k=k, n=n, d=d: crossover_mask(k, rng, 1, n, d, a.cr), a.repeat):.1f}"
                for k in KINDS
            ]
            print(f"| {d} | {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
