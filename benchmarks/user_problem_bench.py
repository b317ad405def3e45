"""A user's own problem at GPU speed (issue 17): per family, the same problem three ways.

Usage (repository root, on the GPU machine; every row in one call)::

    python benchmarks/user_problem_bench.py                  # all rows, Markdown to stdout
    python benchmarks/user_problem_bench.py --only de_ackley,fep --json out.json

Ways, per row:

* ``fused``: the built-in problem, whose ``cuda_objective`` is compiled into the family's kernels
  (the fully fused plan);
* ``array, captured``: the same function as a user writes it, array code only
  (``cuda_objective = None``): the family's generation with the problem's objective and
  constraints as CuPy array code, captured once as a CUDA graph and replayed
  (:mod:`isles.algorithms.core.plan`); DE builds its trial population with its fused kernel;
* ``array, uncaptured``: the same with ``capture_safe = False``: one launch per array operation,
  what a user's problem got before (the reference of the issue's "now" column);
* ``CPU``: the user's problem on NumPy (this machine's cores), fewer generations timed and scaled;
* ``EvoX``: (DE Ackley only) EvoX's DE with the same Ackley written in PyTorch, its
  ``workflow.step`` under ``torch.compile`` (compilation excluded).

Rows (the issue's workloads):

* ``fep``: FEP f5 (Rastrigin n = 32 in [-5.12, 5.12]), mu = 400, q = 10, 1 island, float64 (the
  ``fep`` experiment), 2000 generations;
* ``de_islands``: DE 8 islands x 50, Rastrigin D = 100, F = 0.5, CR = 0.9, float64, 2000
  generations in 40 epochs of 50 (``de_islands islands.n_actors=1`` without the migration, the same
  in every way);
* ``de_ackley``: DE Ackley D = 1000 ([-30, 30]), N = 500, F = 0.5, CR = 0.2, one island, float32,
  microseconds per generation;
* ``ga_trap``: the GA (defaults, N = 4096) on trap-5 with L = 10^5 bits; the user's trap-5 is array
  code over the unpacked bits;
* ``cmepso``: the main job's CMEPSO in one process (10 slave swarms x 40 particles + the master
  swarm, welded beam as array code, 1000 iterations; :func:`benchmarks.cmepso_bench` settings);
* ``cde``: the co-evolutionary DE on g07 through the augmented Lagrangian (seed 000 P3, n = 50,
  20 islands, 200 cycles): ``graph`` (fused pair kernel) against ``graph-generic`` (the pair matrix
  as array code, captured) and NumPy (:func:`benchmarks.cde_bench.time_cycles`).

Timing: GPU with CUDA events around ``run`` after a warm-up run (compilation, self-check and capture
excluded), the median of ``--repeats``; CPU with ``time.perf_counter``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from isles.algorithms.core.backend import device_name, get_xp  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.de.de import DE  # noqa: E402
from isles.algorithms.ep.fep import FEP  # noqa: E402
from isles.algorithms.ga.ga import GA  # noqa: E402
from isles.problems import make_problem  # noqa: E402
from isles.problems.benchmarks import Rastrigin  # noqa: E402
from isles.problems.binary import Trap  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402


def as_user_problem(problem, capture_safe: bool = True):
    """``problem`` as a user writes it: the same object with ``cuda_objective = None`` (array code
    only); ``capture_safe=False`` also forbids the CUDA-graph capture (the uncaptured reference)."""
    cls = type(problem)
    user = type(f"User{cls.__name__}", (cls,), {"cuda_objective": None, "capture_safe": capture_safe})
    obj = cls.__new__(user)
    obj.__dict__.update(problem.__dict__)
    return obj


def _ctx(xp, problem, dtype, islands: int, seed: int = 0):
    return Context(xp, np.dtype(dtype), Evaluator(problem), CounterRNG(xp, seed, range(islands)))


def gpu_seconds(alg, ctx, generations: int, chunk: int | None, repeats: int) -> tuple[float, dict]:
    """Median seconds of ``generations`` generations (``run`` calls of ``chunk``) on the GPU, by
    CUDA events, after a warm-up call; and the last state."""
    cp = ctx.xp
    chunk = chunk or generations
    state = alg.run(ctx, alg.init(ctx), min(chunk, generations))  # warm-up: compile, check, capture
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        done = 0
        while done < generations:
            k = min(chunk, generations - done)
            state = alg.run(ctx, state, k)
            done += k
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) / 1e3)
    return statistics.median(ts), state


def cpu_seconds(alg, ctx, generations: int) -> float:
    """Seconds of ``generations`` NumPy generations after one warm-up generation."""
    state = alg.run(ctx, alg.init(ctx), 1)
    t0 = time.perf_counter()
    alg.run(ctx, state, generations)
    return time.perf_counter() - t0


def three_ways(
    name, make_alg, problem, dtype, islands, generations, chunk, cpu_generations, repeats, per_generation=False
) -> dict:
    """The fused / captured / uncaptured / CPU times of one workload (seconds for ``generations``)."""
    import cupy as cp  # noqa: PLC0415

    row = {"workload": name, "generations": generations, "islands": islands, "dtype": str(np.dtype(dtype))}
    ways = {
        "fused": problem,
        "array_captured": as_user_problem(problem),
        "array_uncaptured": as_user_problem(problem, capture_safe=False),
    }
    for way, prob in ways.items():
        alg = make_alg()
        ctx = _ctx(cp, prob, dtype, islands)
        gens = generations if way != "array_uncaptured" else max(chunk or 0, min(generations, 200))
        t, state = gpu_seconds(alg, ctx, gens, chunk, repeats)
        if way == "fused" and alg.fused_plan(ctx) is None:
            row["note"] = "built-in problem not fused"
        row[way + "_s"] = t * generations / gens
        row[way + "_best_f"] = float(state["f"].min())
        if way == "array_captured":
            cap = alg._captures.get(id(ctx))
            row["captured"] = bool(cap is not None and cap.stepper is not None)
    alg = make_alg()
    row["cpu_s"] = (
        cpu_seconds(alg, _ctx(np, as_user_problem(problem), dtype, islands), cpu_generations)
        * generations
        / cpu_generations
    )
    row["cpu_generations_timed"] = cpu_generations
    row["captured_over_fused"] = row["array_captured_s"] / row["fused_s"]
    row["cpu_over_captured"] = row["cpu_s"] / row["array_captured_s"]
    row["uncaptured_over_captured"] = row["array_uncaptured_s"] / row["array_captured_s"]
    if per_generation:
        for k in ("fused", "array_captured", "array_uncaptured", "cpu"):
            row[k + "_us_per_gen"] = row[k + "_s"] / generations * 1e6
    return row


def evox_de_ackley(dim: int, pop: int, F: float, CR: float, generations: int, repeats: int) -> dict:
    """EvoX's DE (rand/1/bin) on Ackley written in PyTorch (a user's problem in EvoX), float32,
    ``workflow.step`` under ``torch.compile``: microseconds per generation (CUDA events)."""
    try:
        import torch  # noqa: PLC0415
        from evox.algorithms import DE as EvoxDE  # noqa: PLC0415
        from evox.core import Problem  # noqa: PLC0415
        from evox.workflows import StdWorkflow  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001
        return {"workload": "evox_de_ackley", "error": f"{type(exc).__name__}: {exc}"}

    class TorchAckley(Problem):
        """Ackley (a = 20, b = 0.2, c = 2 pi), as a user writes it in PyTorch."""

        def evaluate(self, pop):
            return (
                -20.0 * torch.exp(-0.2 * torch.sqrt(torch.mean(pop * pop, dim=1)))
                - torch.exp(torch.mean(torch.cos(2.0 * math.pi * pop), dim=1))
                + 20.0
                + math.e
            )

    torch.set_default_device("cuda")
    lb, ub = torch.full((dim,), -30.0), torch.full((dim,), 30.0)
    algo = EvoxDE(pop_size=pop, lb=lb, ub=ub, differential_weight=F, cross_probability=CR)
    wf = StdWorkflow(algo, TorchAckley())
    wf.init_step()
    t0 = time.perf_counter()
    step = torch.compile(wf.step)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    setup = time.perf_counter() - t0
    ts = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(generations):
            step()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    t = statistics.median(ts)
    return {
        "workload": "evox_de_ackley",
        "us_per_gen": t / generations * 1e6,
        "compile_s": setup,
        "best_f": float(algo.fit.min()),
    }


def cmepso_row(iterations: int, cpu_iterations: int) -> dict:
    """The main job's CMEPSO in one process on the welded beam (the runtime's in-process coordinator,
    :func:`benchmarks.cmepso_bench.runtime_cmepso`), GPU and CPU, seconds per ``iterations``."""
    from benchmarks.cmepso_bench import runtime_cmepso  # noqa: PLC0415

    out = {"workload": "cmepso welded_beam 10x40, 1000 iterations"}
    for device, iters, key in (("gpu", iterations, "gpu_s"), ("cpu", cpu_iterations, "cpu_s")):
        runtime_cmepso("welded_beam", 0, 5, device)  # warm-up
        _, wall = runtime_cmepso("welded_beam", 1, iters, device)
        out[key] = wall * iterations / iters
    out["cpu_over_gpu"] = out["cpu_s"] / out["gpu_s"]
    return out


def cde_row(cycles: int, cpu_cycles: int) -> dict:
    """CDE on g07 through the augmented Lagrangian (P3, n = 50, 20 islands), seconds per 200 cycles."""
    import cupy as cp  # noqa: PLC0415

    from benchmarks.cde_bench import time_cycles  # noqa: PLC0415

    out = {"workload": "cde g07 (P3) n=50, 20 islands, 200 cycles"}
    for path in ("graph", "graph-generic"):
        out[path + "_s"] = time_cycles(cp, "P3", 50, 20, cycles, path, np.float64) / cycles * 200
    out["cpu_s"] = time_cycles(np, "P3", 50, 20, cpu_cycles, "numpy", np.float64) / cpu_cycles * 200
    out["generic_over_fused"] = out["graph-generic_s"] / out["graph_s"]
    return out


ROWS = ("fep", "de_islands", "de_ackley", "ga_trap", "cmepso", "cde")


def main(argv=None) -> int:
    """Run the selected rows; print one JSON line per row and a Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(ROWS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    only = a.only.split(",")
    xp = get_xp("gpu")
    print(f"device: {device_name(xp)}", flush=True)
    rows = []

    def emit(fn, *args, **kw):
        try:
            r = fn(*args, **kw)
        except Exception as exc:  # noqa: BLE001 - one failing row must not lose the others
            traceback.print_exc()
            r = {"workload": getattr(fn, "__name__", str(fn)), "error": f"{type(exc).__name__}: {exc}"}
        rows.append(r)
        print(json.dumps(r), flush=True)
        return r

    if "fep" in only:
        emit(
            three_ways,
            "fep f5 mu=400 2000 gens float64",
            lambda: FEP(pop_size=400, q=10),
            Rastrigin(32, -5.12, 5.12),
            np.float64,
            1,
            2000,
            None,
            20,
            a.repeats,
        )
    if "de_islands" in only:
        emit(
            three_ways,
            "de 8x50 rastrigin D=100 2000 gens float64",
            lambda: DE(pop_size=50, F=0.5, CR=0.9),
            make_problem("rastrigin", dim=100),
            np.float64,
            8,
            2000,
            50,
            20,
            a.repeats,
        )
    if "de_ackley" in only:
        emit(
            three_ways,
            "de ackley D=1000 N=500 F=0.5 CR=0.2 float32",
            lambda: DE(pop_size=500, F=0.5, CR=0.2),
            make_problem("ackley", dim=1000),
            np.float32,
            1,
            2000,
            None,
            5,
            a.repeats,
            per_generation=True,
        )
        emit(evox_de_ackley, 1000, 500, 0.5, 0.2, 2000, a.repeats)
    if "ga_trap" in only:
        emit(
            three_ways,
            "ga trap-5 L=1e5 N=4096",
            lambda: GA(pop_size=4096),
            Trap(n_bits=100_000, k=5),
            np.float64,
            1,
            50,
            None,
            1,
            a.repeats,
            per_generation=True,
        )
    if "cmepso" in only:
        emit(cmepso_row, 1000, 50)
    if "cde" in only:
        emit(cde_row, 20, 2)
    print()
    print(
        "| workload | built-in, fused, GPU | user's array code, GPU captured | same, uncaptured | CPU (NumPy) |"
        " captured / fused | CPU / captured |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "fused_s" in r:
            print(
                f"| {r['workload']} | {r['fused_s']:.3f} s | {r['array_captured_s']:.3f} s | "
                f"{r['array_uncaptured_s']:.3f} s | {r['cpu_s']:.2f} s | {r['captured_over_fused']:.2f}x | "
                f"{r['cpu_over_captured']:.1f}x |"
            )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
