"""FEP speed (issue 7): seed 003's Tables 2-4 as our table, its largest case, batched islands, and
the anchors (a plain CuPy FEP with one array call per step, the NumPy path) in the same call.

Usage (repository root)::

    python benchmarks/fep_bench.py                      # everything below, Markdown to stdout
    python benchmarks/fep_bench.py --only big,batched   # a subset: table, big, batched, anchors
    python benchmarks/fep_bench.py --only table --device cpu --cpu-generations 20

Rows:

* ``table``: time per 2000-generation run of FEP (q = 10, N = 32, seed 003 Table 1 f1-f5 with its
  ranges) for mu = 400, 800, 3200, 6400 (seed 003 Tables 2-4). GPU: ``FEP.run`` (the fused
  generation under CUDA-graph replay where the problem has ``cuda_objective``; Schwefel 1.2 (f2)
  has none and runs the array code on CuPy: 200 generations timed, scaled to 2000), timed with
  CUDA events after a warm-up run (compilation, self-check and graph capture excluded). CPU:
  NumPy, ``--cpu-generations`` generations timed with ``perf_counter`` and scaled to 2000
  (stated in the output).
* ``big``: f5, mu = 6400, 2000 generations, one island (the issue's target: <= 50 ms, i.e.
  25 us per generation; stretch 10 us).
* ``batched``: 20 runs of mu = 400 (f5) as 20 islands of one batch: us per island-generation.
* ``anchors``: the same f5 mu = 6400 workload as a plain CuPy FEP (``fused=False``: the array code,
  one CuPy call per operation, what a user would write) and on NumPy, per generation, with the
  ratios to the fused path measured in this call.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from isles.algorithms.core.backend import device_name, get_xp, synchronize  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.ep.fep import FEP  # noqa: E402
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Schwefel12, Schwefel226, Sphere  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

SEED_PROBLEMS = {
    "f1": lambda: Sphere(32, -100.0, 100.0),
    "f2": lambda: Schwefel12(32, -100.0, 100.0),
    "f3": lambda: Rosenbrock(32, -30.0, 30.0),
    "f4": lambda: Schwefel226(32, -500.0, 500.0),
    "f5": lambda: Rastrigin(32, -5.12, 5.12),
}
MUS = (400, 800, 3200, 6400)


def setup(device: str, fname: str, mu: int, islands: int = 1, fused: bool = True, dtype="float32", seed=0):
    """``(alg, ctx, state)`` of FEP on seed 003's ``fname`` (initialised)."""
    xp = get_xp(device)
    ctx = Context(xp, np.dtype(dtype), Evaluator(SEED_PROBLEMS[fname]()), CounterRNG(xp, seed, range(islands)))
    alg = FEP(pop_size=mu, q=10, fused=fused)
    return alg, ctx, alg.init(ctx)


def gpu_time(alg, ctx, state, generations: int, repeats: int = 3) -> tuple[float, str]:
    """Median seconds of ``alg.run(ctx, state, generations)`` on the GPU (CUDA events), after one
    warm-up run; and the path (fused|array)."""
    cp = ctx.xp
    path = "fused" if alg.fused_plan(ctx) is not None else "array"
    alg.run(ctx, state, generations)  # warm-up: compile, self-check, capture
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        out = alg.run(ctx, state, generations)
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) / 1e3)
        del out
    return statistics.median(ts), path


def cpu_time(alg, ctx, state, generations: int) -> float:
    """Seconds of ``generations`` NumPy generations (after one warm-up generation)."""
    state = alg.run(ctx, state, 1)
    t0 = time.perf_counter()
    alg.run(ctx, state, generations)
    synchronize(ctx.xp)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    """Run the selected rows; print Markdown tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="table,big,batched,anchors")
    ap.add_argument("--device", default="gpu", help="gpu: GPU rows (and CPU anchors); cpu: CPU table only")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--generations", type=int, default=2000)
    ap.add_argument("--cpu-generations", type=int, default=10)
    ap.add_argument("--anchor-generations", type=int, default=20)
    a = ap.parse_args(argv)
    only = set(a.only.split(","))
    G = a.generations
    xp = get_xp(a.device)
    print(f"device: {device_name(xp)}; dtype {a.dtype}; q = 10, N = 32\n", flush=True)
    if "table" in only:
        print(f"| mu | " + " | ".join(f"{f} s/run" for f in SEED_PROBLEMS) + " | path |")
        print("|---|" + "---|" * (len(SEED_PROBLEMS) + 1))
        for mu in MUS:
            cells, paths = [], set()
            for fname in SEED_PROBLEMS:
                alg, ctx, st = setup(a.device, fname, mu, dtype=a.dtype)
                if a.device == "gpu" and alg.fused_plan(ctx) is not None:
                    t, path = gpu_time(alg, ctx, st, G)
                elif a.device == "gpu":  # the array code on CuPy: 200 generations, scaled
                    t, path = gpu_time(alg, ctx, st, min(G, 200), repeats=1)
                    t, path = t * G / min(G, 200), f"array(x{G / min(G, 200):g})"
                else:
                    t, path = cpu_time(alg, ctx, st, a.cpu_generations) * G / a.cpu_generations, "numpy"
                cells.append(f"{t:.4g}")
                paths.add(f"{fname}:{path}")
            print(f"| {mu} | " + " | ".join(cells) + f" | {' '.join(sorted(paths))} |", flush=True)
        if a.device != "gpu":
            print(f"\n(CPU: {a.cpu_generations} generations timed, scaled to {G})")
        print()
    if a.device != "gpu":
        return 0
    fused_big = None
    if "big" in only:
        alg, ctx, st = setup("gpu", "f5", 6400, dtype=a.dtype)
        t, path = gpu_time(alg, ctx, st, G)
        fused_big = t / G
        print(f"big: f5 mu=6400 N=32 {G} generations, {path}: {t * 1e3:.2f} ms per run, "
              f"{t / G * 1e6:.2f} us/generation (target 50 ms / 25 us, stretch 10 us)", flush=True)
    if "batched" in only:
        alg, ctx, st = setup("gpu", "f5", 400, islands=20, dtype=a.dtype)
        t, path = gpu_time(alg, ctx, st, G)
        print(f"batched: 20 islands x mu=400 f5 {G} generations, {path}: {t * 1e3:.2f} ms per run, "
              f"{t / G * 1e6:.2f} us/generation, {t / G / 20 * 1e6:.3f} us per island-generation", flush=True)
        alg, ctx, st = setup("gpu", "f5", 400, islands=1, dtype=a.dtype)
        t1, _ = gpu_time(alg, ctx, st, G)
        print(f"         1 island x mu=400: {t1 / G * 1e6:.2f} us/generation", flush=True)
    if "anchors" in only:
        ga = a.anchor_generations
        alg, ctx, st = setup("gpu", "f5", 6400, fused=False, dtype=a.dtype)
        t_arr, _ = gpu_time(alg, ctx, st, ga, repeats=3)
        alg, ctx, st = setup("cpu", "f5", 6400, dtype=a.dtype)
        t_cpu = cpu_time(alg, ctx, st, max(2, ga // 4))
        n_cpu = max(2, ga // 4)
        if fused_big is None:
            alg, ctx, st = setup("gpu", "f5", 6400, dtype=a.dtype)
            t, _ = gpu_time(alg, ctx, st, G)
            fused_big = t / G
        print("\n| f5, mu = 6400, N = 32 | us/generation | 2000 generations | vs fused |")
        print("|---|---|---|---|")
        for name, per in (("fused CUDA + graph replay", fused_big), (f"plain CuPy (array code, {ga} gens)", t_arr / ga),
                          (f"NumPy on this machine's CPU ({n_cpu} gens)", t_cpu / n_cpu)):
            print(f"| {name} | {per * 1e6:.1f} | {per * 2000:.3g} s | {per / fused_big:.1f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
