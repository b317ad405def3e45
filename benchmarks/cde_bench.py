"""Speed of the co-evolutionary DE (seed 000 Tables 2 and 6), CPU (NumPy) or GPU (CuPy).

    python benchmarks/cde_bench.py --device cpu                  # Tables 2/6 rows on this CPU
    python benchmarks/cde_bench.py --device gpu                  # the same on the GPU, plus n = 1000
    python benchmarks/cde_bench.py --device gpu --json out.json

Rows (Table 1's settings: rand/1/bin, F = CR = 0.7, 20 + 20 generations per cycle, float64 unless
``--dtype``): for P1 (D = 100 + 100) and P2-P6 (through the augmented Lagrangian, r = 1e7), at
n = 50 (Table 2) and n = 100 (Table 6), **time per run** of 200 cycles, 1 island and 20 batched
islands (20 runs), beside the seed's C-CUDA (GTX 285) and C times. The time is measured over
``--cycles`` cycles (default 20) after a warm-up cycle (kernel compilation, CUDA-graph capture)
and scaled to 200 cycles (every cycle does the same work). GPU paths, both in the same call:

* ``epoch``: isles' CDE with the epoch kernel (:mod:`isles.algorithms.coevolution.epoch`): one launch per
  cycle of every island, replayed from a CUDA graph as the island runtime does (the default);
* ``epoch-run``: the same kernel, all measured cycles in one launch (``CDE.run`` without a stop target:
  :meth:`isles.algorithms.coevolution.cde.CDE.solve`, a run outside the island runtime);
* ``graph``: isles' CDE without the epoch kernel, the fused pair kernel (:mod:`isles.algorithms.coevolution.cuda`) and a whole
  cycle captured once as a CUDA graph and replayed (:class:`isles.algorithms.core.graph.GraphStepper`,
  as the island runtime does);
* ``graph-generic``: the same without the fused kernel (pair matrix written and reduced);
* ``plain``: the array code issued call by call (one CuPy call per array operation, no fused
  kernel, no graph), the plain CuPy CDE baseline (1 island only, ``--plain-islands``).

GPU times are CUDA events around the replays (or calls); CPU times ``time.perf_counter``.
``--scale`` adds P1 with n = 1000 (10^6 payoffs per generation): microseconds per generation
(cycle time / 40) and the effective FP32 rate of a naive pair evaluation (3 D flops per pair)
as a fraction of the H100 SXM's 67 TFLOP/s FP32 peak.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from isles.algorithms.coevolution.cde import CDE  # noqa: E402
from isles.algorithms.core.backend import dtype_of  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.graph import GraphStepper  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.cec2006 import G01, G07, G09, G10  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402
from isles.problems.engineering import Spring  # noqa: E402
from isles.problems.minmax import AugmentedLagrangian, SaddleP1  # noqa: E402

H100_FP32_PEAK = 67e12  # flop/s, H100 SXM5 (NVIDIA datasheet)
PROBLEMS = {
    "P1": lambda: SaddleP1(100),
    "P2": lambda: AugmentedLagrangian(G01()),
    "P3": lambda: AugmentedLagrangian(G07()),
    "P4": lambda: AugmentedLagrangian(G09()),
    "P5": lambda: AugmentedLagrangian(G10()),
    "P6": lambda: AugmentedLagrangian(Spring()),
}
# seed 000: Table 2 (n = 50) and Table 6 (n = 100), mean ms per run: (C-CUDA GTX 285, C Athlon X2)
SEED_MS = {
    50: {
        "P1": (4584.8, 19800.5),
        "P2": (934.0, 3910.0),
        "P3": (866.2, 8355.0),
        "P4": (674.7, 7620.0),
        "P5": (683.3, 2955.0),
        "P6": (550.8, 7395.0),
    },
    100: {
        "P1": (5006.8, 90251.0),
        "P2": (1300.1, 14852.9),
        "P3": (1162.0, 32673.0),
        "P4": (858.2, 29993.0),
        "P5": (907.0, 11384.0),
        "P6": (486.5, 29210.0),
    },
}


def time_cycles(xp, pid: str, n: int, islands: int, cycles: int, path: str, dtype) -> float:
    """Seconds for ``cycles`` cycles of ``islands`` batched runs (after one warm-up cycle)."""
    algo = CDE(
        pop_size=n,
        gens_x=20,
        gens_y=20,
        F=0.7,
        CR=0.7,
        strategy="rand/1",
        fused=path in ("graph", "fused"),
        epoch=path.startswith("epoch"),
    )
    ctx = Context(xp, dtype, Evaluator(PROBLEMS[pid]()), CounterRNG(xp, 0, range(islands)))
    state = algo.init(ctx)
    if xp is np:
        state = algo.run(ctx, state, 1)
        t0 = time.perf_counter()
        algo.run(ctx, state, cycles)
        return time.perf_counter() - t0
    start, end = xp.cuda.Event(), xp.cuda.Event()
    if path.startswith("graph") or path == "epoch":
        stepper = GraphStepper.for_algorithm(algo, ctx, state)
        stepper.run(1)
        start.record(xp.cuda.get_current_stream())
        stepper.run(cycles)
        end.record(xp.cuda.get_current_stream())
        end.synchronize()
        stepper.close()
    else:
        state = algo.run(ctx, state, 1)
        start.record()
        algo.run(ctx, state, cycles)
        end.record()
        end.synchronize()
    return xp.cuda.get_elapsed_time(start, end) * 1e-3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    ap.add_argument("--sizes", nargs="*", type=int, default=[50, 100])
    ap.add_argument("--islands", nargs="*", type=int, default=[1, 20])
    ap.add_argument("--paths", nargs="*", default=None, help="gpu: graph plain")
    ap.add_argument("--plain-islands", nargs="*", type=int, default=[1])
    ap.add_argument("--scale", action="store_true", help="P1 with n = 1000")
    ap.add_argument("--scale-dtype", default="float32")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    xp = np if a.device == "cpu" else __import__("cupy")
    dtype = dtype_of(a.dtype)
    paths = ["numpy"] if xp is np else (a.paths or ["epoch", "graph", "graph-generic", "plain"])
    rows = []
    if xp is not np:  # warm-up: clocks up, modules loaded (the first timing of a process is discarded)
        time_cycles(xp, a.problems[0], a.sizes[0], 1, 5, paths[0], dtype)
    print("| P | n | islands | path | ms per run (200 cycles) | seed C-CUDA ms | seed C ms |")
    print("|---|---|---|---|---|---|---|")
    for n in a.sizes:
        for pid in a.problems:
            for isl in a.islands:
                for path in paths:
                    if path == "plain" and isl not in a.plain_islands:
                        continue
                    s = time_cycles(xp, pid, n, isl, a.cycles, path, dtype)
                    ms = s / a.cycles * 200 * 1e3
                    seed = SEED_MS.get(n, {}).get(pid, (None, None))
                    rows.append(
                        {
                            "problem": pid,
                            "n": n,
                            "islands": isl,
                            "path": path,
                            "ms_per_run": ms,
                            "seed_cuda_ms": seed[0],
                            "seed_c_ms": seed[1],
                            "dtype": a.dtype,
                            "measured_cycles": a.cycles,
                        }
                    )
                    print(f"| {pid} | {n} | {isl} | {path} | {ms:.1f} | {seed[0]} | {seed[1]} |", flush=True)
    if a.scale:
        for path in paths:
            cyc = max(2, a.cycles // 10)
            s = time_cycles(xp, "P1", 1000, 1, cyc, path, dtype_of(a.scale_dtype))
            us_gen = s / cyc / 40 * 1e6
            flops = 3 * 100 * 1000 * 1000 / (us_gen * 1e-6)
            rows.append(
                {
                    "problem": "P1",
                    "n": 1000,
                    "islands": 1,
                    "path": path,
                    "us_per_generation": us_gen,
                    "naive_pair_flops_per_s": flops,
                    "fraction_of_h100_fp32_peak": flops / H100_FP32_PEAK,
                    "dtype": a.scale_dtype,
                }
            )
            print(
                f"P1 n=1000 {path} {a.scale_dtype}: {us_gen:.1f} us/generation, naive pair rate {flops / 1e12:.2f} "
                f"TFLOP/s = {100 * flops / H100_FP32_PEAK:.2f} % of H100 FP32 peak",
                flush=True,
            )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
