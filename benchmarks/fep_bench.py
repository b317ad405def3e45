"""FEP speed (issue 7): seed 003's Tables 2-4 as our table, its largest case, batched islands, and
the anchors (a plain CuPy FEP with one array call per step, the NumPy path) in the same call.

Usage (repository root)::

    python benchmarks/fep_bench.py                      # everything below, Markdown to stdout
    python benchmarks/fep_bench.py --only big,batched   # a subset: table, big, batched, anchors
    python benchmarks/fep_bench.py --only table --device cpu --cpu-generations 20
    python benchmarks/fep_bench.py --only epoch --generations 1024   # issue 18: epoch vs per-generation
    python benchmarks/fep_bench.py --only big --kernel generation     # force one of the fused paths

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
* ``epoch`` (issue 18 section 2): f5 mu = 400 at 1 and 20 islands, f5 mu = 100 at 256 islands and
  the launch floor (sphere n = 2, mu = 16, one island), each with the per-generation kernels
  (three launches per generation, CUDA-graph replay) and the epoch kernel (one launch per
  ``FEP.run``, :mod:`isles.algorithms.ep.epoch`), and the plan's own timed choice.

``--kernel generation|epoch`` forces one of the fused plan's two paths in every GPU row (the
same results); ``auto`` (default) keeps the plan's choice (:meth:`isles.algorithms.ep.cuda.FusedFEP.choose`).
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


KERNEL = "auto"  # --kernel: auto | epoch | generation
EBLOCK = None  # --eblock: threads per block of the epoch kernel (default: algorithms/ep/epoch.py)


def setup(
    device: str,
    fname: str,
    mu: int,
    islands: int = 1,
    fused: bool = True,
    dtype="float32",
    seed=0,
    kernel: str | None = None,
):
    """``(alg, ctx, state)`` of FEP on seed 003's ``fname`` (or ``"launch"``: sphere n = 2),
    initialised; on the GPU with ``kernel`` (default ``--kernel``) ``epoch`` or ``generation`` the
    fused plan is forced onto that path.

    Raises:
        SystemExit: ``--kernel epoch`` where the plan has no epoch kernel."""
    xp = get_xp(device)
    prob = Sphere(2) if fname == "launch" else SEED_PROBLEMS[fname]()
    ctx = Context(xp, np.dtype(dtype), Evaluator(prob), CounterRNG(xp, seed, range(islands)))
    alg = FEP(pop_size=mu, q=10, fused=fused)
    kernel = KERNEL if kernel is None else kernel
    plan = alg.fused_plan(ctx) if xp is not np and fused else None
    if plan is not None and kernel != "auto":
        if kernel == "epoch" and plan.epoch is None:
            raise SystemExit(f"--kernel epoch: not available ({plan.epoch_reason})")
        plan.use_epoch = kernel == "epoch"
        if plan.use_epoch and EBLOCK:
            from isles.algorithms.ep.epoch import EpochFEP  # noqa: PLC0415

            plan.epoch = EpochFEP(plan, plan.epoch_src, EBLOCK)
    return alg, ctx, alg.init(ctx)


def gpu_time(alg, ctx, state, generations: int, repeats: int = 3) -> tuple[float, str]:
    """Median seconds of ``alg.run(ctx, state, generations)`` on the GPU (CUDA events), after one
    warm-up run; and the path (fused|array)."""
    cp = ctx.xp
    plan = alg.fused_plan(ctx)
    path = "array" if plan is None else ("epoch" if plan.use_epoch else "fused")
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
    ap.add_argument(
        "--kernel",
        default="auto",
        choices=("auto", "epoch", "generation"),
        help="auto (the plan's timed choice) | epoch (one launch per run) | generation (three "
        "launches per generation, graph replay)",
    )
    ap.add_argument(
        "--eblock",
        type=int,
        default=None,
        help="threads per block of the epoch kernel (a multiple of 32; default algorithms/ep/epoch.py)",
    )
    a = ap.parse_args(argv)
    global KERNEL, EBLOCK
    KERNEL, EBLOCK = a.kernel, a.eblock
    only = set(a.only.split(","))
    G = a.generations
    xp = get_xp(a.device)
    print(f"device: {device_name(xp)}; dtype {a.dtype}; q = 10, N = 32\n", flush=True)
    if "table" in only:
        print("| mu | " + " | ".join(f"{f} s/run" for f in SEED_PROBLEMS) + " | path |")
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
        print(
            f"big: f5 mu=6400 N=32 {G} generations, {path}: {t * 1e3:.2f} ms per run, "
            f"{t / G * 1e6:.2f} us/generation (target 50 ms / 25 us, stretch 10 us)",
            flush=True,
        )
    if "batched" in only:
        alg, ctx, st = setup("gpu", "f5", 400, islands=20, dtype=a.dtype)
        t, path = gpu_time(alg, ctx, st, G)
        print(
            f"batched: 20 islands x mu=400 f5 {G} generations, {path}: {t * 1e3:.2f} ms per run, "
            f"{t / G * 1e6:.2f} us/generation, {t / G / 20 * 1e6:.3f} us per island-generation",
            flush=True,
        )
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
        for name, per in (
            ("fused CUDA + graph replay", fused_big),
            (f"plain CuPy (array code, {ga} gens)", t_arr / ga),
            (f"NumPy on this machine's CPU ({n_cpu} gens)", t_cpu / n_cpu),
        ):
            print(f"| {name} | {per * 1e6:.1f} | {per * 2000:.3g} s | {per / fused_big:.1f}x |", flush=True)
    if "epoch" in only:
        print(
            "\n| workload (float32, q = 10) | islands | per-generation kernels us/gen | epoch kernel us/gen | "
            "epoch us per island-gen | speed-up | plan's choice (timed at build) |"
        )
        print("|---|---|---|---|---|---|---|")
        for label, fname, mu, isl in (
            ("launch floor: sphere n=2, mu=16", "launch", 16, 1),
            ("f5 Rastrigin n=32, mu=400", "f5", 400, 1),
            ("f5 Rastrigin n=32, mu=400", "f5", 400, 20),
            ("f5 Rastrigin n=32, mu=100", "f5", 100, 256),
        ):
            per = {}
            for kernel in ("generation", "epoch"):
                alg, ctx, st = setup("gpu", fname, mu, islands=isl, dtype=a.dtype, kernel=kernel)
                t, _ = gpu_time(alg, ctx, st, G)
                per[kernel] = t / G
            plan = alg.fused_plan(ctx)
            tg, te = plan.timings
            choice = f"{'epoch' if te < tg else 'generation'} ({tg:.2f} / {te:.2f} us)"
            print(
                f"| {label} | {isl} | {per['generation'] * 1e6:.2f} | {per['epoch'] * 1e6:.2f} | "
                f"{per['epoch'] / isl * 1e6:.3f} | {per['generation'] / per['epoch']:.2f}x | {choice} |",
                flush=True,
            )
        print(f"\n({G} generations per FEP.run, median of 3 after a warm-up, CUDA events)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
