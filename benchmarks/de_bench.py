"""Time DE per generation (us/gen) and objective evaluations per second for one workload.

Usage (repository root)::

    python benchmarks/de_bench.py --problem ackley --dim 1000 --pop 500 --F 0.5 --CR 0.2 \
        --crossover bin --dtype float32 --device gpu
    python benchmarks/de_bench.py --all            # the issue's workloads (seed 004 Table II)
    python benchmarks/de_bench.py --quality        # seed 004's generation budgets, best f

Timing: on the GPU with CUDA events around ``DE.run`` (``--mode run``: the fused path replays a
captured CUDA graph) or around a Python loop of ``DE.step`` (``--mode step``); on the CPU with
``time.perf_counter``. A warm-up advance (compilation, self-check, graph capture) is excluded;
the median of ``--repeats`` timed advances of ``--generations`` generations is reported. Each
row prints: workload, path (fused|generic), us per generation (all islands), us per
island-generation, and millions of objective evaluations per second (``I * N`` per generation).

``--epoch`` times issue 18's epoch-kernel workloads: Rosenbrock D=50 N=100 at 1, 64 and 1024 islands
with ``--kernel generation`` (one launch per generation) and ``--kernel epoch`` (one launch per
``DE.run``, :mod:`isles.algorithms.de.epoch`), then Ackley D=1000 N=500 (too large for the epoch
kernel: the per-generation kernel). Path ``epoch`` in a row means the epoch kernel ran.

``--all`` runs Ackley D=1000 N=500 F=0.5 CR=0.2, Griewank D=500 N=300 F=0.25 CR=0.45 and
Rosenbrock D=50 N=100 F=0.65 CR=0.95 (seed 004 Table II), each with bin and nec, then 64 islands
of the Rosenbrock workload, plus two reference rows (the generic CuPy path, and the fused path
driven by single ``step`` calls). Problems are the built-ins of :mod:`isles.problems.registry` at their
seed-004 default bounds (Ackley [-30, 30], Griewank [-400, 400], Rosenbrock [-5.12, 5.12]);
Ackley uses b = 0.2 (``shared/problems.md`` 7.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from isles.algorithms.core.backend import device_name, dtype_of, get_xp, synchronize  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.de.de import DE  # noqa: E402
from isles.problems import make_problem  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

#: seed 004 Table II workloads (F, CR) and generation budgets
TABLE_II = [
    {"problem": "ackley", "dim": 1000, "pop": 500, "F": 0.5, "CR": 0.2, "budget": 30000},
    {"problem": "griewank", "dim": 500, "pop": 300, "F": 0.25, "CR": 0.45, "budget": 20000},
    {"problem": "rosenbrock", "dim": 50, "pop": 100, "F": 0.65, "CR": 0.95, "budget": 10000},
]

HEADER = (
    f"{'problem':<11}{'D':>6}{'N':>6}{'F':>6}{'CR':>6} {'strategy':<9}{'xo':<4}{'I':>4} "
    f"{'dtype':<8}{'path':<8}{'mode':<5}{'gens':>7}{'us/gen':>10}{'us/isl-gen':>11}"
    f"{'Meval/s':>10}{'best_f':>12}"
)


def _row(r: dict) -> str:
    return (
        f"{r['problem']:<11}{r['dim']:>6}{r['pop']:>6}{r['F']:>6.2f}{r['CR']:>6.2f} "
        f"{r['strategy']:<9}{r['crossover']:<4}{r['islands']:>4} {r['dtype']:<8}{r['path']:<8}"
        f"{r['mode']:<5}{r['generations']:>7}{r['us_per_gen']:>10.2f}{r['us_per_island_gen']:>11.3f}"
        f"{r['meval_per_s']:>10.1f}{r['best_f']:>12.4g}"
    )


def build(args):
    """``(de, ctx, state, path)`` for the workload in ``args`` (state initialised)."""
    xp = get_xp(args.device)
    dtype = dtype_of(args.dtype)
    prob = make_problem(args.problem, dim=args.dim)
    ctx = Context(xp, dtype, Evaluator(prob), CounterRNG(xp, args.seed, range(args.islands)))
    de = DE(
        pop_size=args.pop,
        F=args.F,
        CR=args.CR,
        strategy=args.strategy,
        crossover=args.crossover,
        bound_handling=args.bounds,
        fused=args.path != "generic",
    )
    state = de.init(ctx)
    plan = de.fused_plan(ctx)
    if args.path == "fused" and plan is None:
        from isles.algorithms.de.cuda_source import unsupported_reason  # noqa: PLC0415

        raise SystemExit(f"--path fused: not available ({unsupported_reason(de.params, ctx)})")
    if plan is None:
        return de, ctx, state, "generic"
    if args.kernel != "auto":  # force one of the fused plan's two paths (the same results)
        if args.kernel == "epoch" and plan.epoch is None:
            raise SystemExit(f"--kernel epoch: not available ({plan.epoch_reason})")
        plan.use_epoch = args.kernel == "epoch"
        if plan.use_epoch and (args.etpi or args.eminb):
            from isles.algorithms.de.epoch import EpochDE  # noqa: PLC0415

            plan.epoch = EpochDE(plan, plan.epoch_src, args.etpi, args.eminb)
    return de, ctx, state, "epoch" if plan.use_epoch else "fused"


def measure(args) -> dict:
    """Time one workload; returns a dict (the table row's fields)."""
    de, ctx, state, path = build(args)
    xp = ctx.xp
    gens = args.generations
    if gens is None:
        gens = 2048 if path in ("fused", "epoch") and args.mode == "run" else (200 if xp is not np else 10)

    def advance(s, n):
        if args.mode == "run":
            return de.run(ctx, s, n)
        for _ in range(n):
            s = de.step(ctx, s)
        return s

    state = advance(state, min(gens, 128))  # warm-up: compile, self-check, graph capture
    synchronize(xp)
    times = []
    for _ in range(args.repeats):
        if xp is np:
            t0 = time.perf_counter()
            state = advance(state, gens)
            times.append(time.perf_counter() - t0)
        else:
            start, end = xp.cuda.Event(), xp.cuda.Event()
            start.record()
            state = advance(state, gens)
            end.record()
            end.synchronize()
            times.append(xp.cuda.get_elapsed_time(start, end) * 1e-3)
    t = statistics.median(times) / gens
    I, N = ctx.n_islands, de.params.pop_size
    return {
        "problem": args.problem,
        "dim": args.dim,
        "pop": N,
        "F": args.F,
        "CR": args.CR,
        "strategy": args.strategy,
        "crossover": args.crossover,
        "islands": I,
        "dtype": args.dtype,
        "bounds": args.bounds,
        "device": device_name(xp),
        "path": path,
        "mode": args.mode,
        "generations": gens,
        "repeats": args.repeats,
        "us_per_gen": t * 1e6,
        "us_per_island_gen": t * 1e6 / I,
        "meval_per_s": I * N / t * 1e-6,
        "best_f": float(state["f"].min()),
        "spread_us_per_gen": [x / gens * 1e6 for x in times],
        "lower": float(ctx.evaluator.problem.lower[0]),
        "upper": float(ctx.evaluator.problem.upper[0]),
    }


def quality(args, w: dict, crossover: str) -> dict:
    """Seed 004's generation budget from a fresh population: best f and wall time."""
    a = argparse.Namespace(
        **{
            **vars(args),
            "problem": w["problem"],
            "dim": w["dim"],
            "pop": w["pop"],
            "F": w["F"],
            "CR": w["CR"],
            "crossover": crossover,
            "islands": 1,
        }
    )
    de, ctx, state, path = build(a)
    synchronize(ctx.xp)
    t0 = time.perf_counter()
    state = de.run(ctx, state, w["budget"])
    best = float(state["f"].min())
    wall = time.perf_counter() - t0
    return {
        "problem": w["problem"],
        "dim": w["dim"],
        "pop": w["pop"],
        "crossover": crossover,
        "dtype": args.dtype,
        "path": path,
        "generations": w["budget"],
        "best_f": best,
        "wall_s": wall,
    }


def parse(argv=None):
    """Command-line arguments (``--help`` lists them)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--problem", default="ackley")
    p.add_argument("--dim", type=int, default=1000)
    p.add_argument("--pop", type=int, default=500, help="population size N per island")
    p.add_argument("--F", type=float, default=0.5)
    p.add_argument("--CR", type=float, default=0.2)
    p.add_argument("--strategy", default="rand/1")
    p.add_argument("--crossover", default="bin")
    p.add_argument("--bounds", default="reflect", help="bound handling clip|reflect|reinit")
    p.add_argument("--islands", type=int, default=1)
    p.add_argument(
        "--generations",
        type=int,
        default=None,
        help="timed generations per repeat (default: 2048 fused, 200 generic GPU, 10 CPU)",
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="auto", help="auto|cpu|gpu")
    p.add_argument("--path", default="auto", help="auto|fused|generic")
    p.add_argument(
        "--kernel",
        default="auto",
        help="auto (the plan's timed choice) | epoch (one launch per run, algorithms/de/epoch.py) | "
        "generation (one launch per generation, CUDA graph)",
    )
    p.add_argument(
        "--etpi",
        type=int,
        default=None,
        help="threads per row of the epoch kernel (default: algorithms/de/epoch.py epoch_tpi)",
    )
    p.add_argument(
        "--eminb",
        type=int,
        default=None,
        help="blocks per SM of the epoch kernel's launch bounds (default: algorithms/de/epoch.py)",
    )
    p.add_argument(
        "--epoch",
        action="store_true",
        help="issue 18's epoch-kernel table: Rosenbrock D=50 N=100 at 1, 64, 1024 islands and Ackley "
        "D=1000 N=500, each with the per-generation and the epoch kernel",
    )
    p.add_argument("--mode", default="run", help="run (DE.run, CUDA graph) | step (DE.step loop)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--all", action="store_true", help="the issue's workloads (seed 004 Table II)")
    p.add_argument("--quality", action="store_true", help="seed 004 Table II generation budgets (bin and nec), best f")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    """Entry point: print a header and one row per workload."""
    args = parse(argv)
    rows, qrows = [], []
    xp = get_xp(args.device)
    print(
        f"# device: {device_name(xp)}; timer: {'CUDA events' if xp is not np else 'perf_counter'}; "
        f"median of {args.repeats}",
        flush=True,
    )
    if args.all or args.epoch or not args.quality:
        print(HEADER, flush=True)
    if args.epoch:
        base = vars(args)
        for isl in (1, 64, 1024):
            for kernel in ("generation", "epoch"):
                a = argparse.Namespace(
                    **{
                        **base,
                        **{k: v for k, v in TABLE_II[2].items() if k != "budget"},
                        "crossover": "bin",
                        "islands": isl,
                        "kernel": kernel,
                        "generations": args.generations or (256 if isl == 1024 else 2048),
                    }
                )
                r = measure(a)
                rows.append(r)
                print(_row(r), flush=True)
        a = argparse.Namespace(
            **{
                **base,
                **{k: v for k, v in TABLE_II[0].items() if k != "budget"},
                "crossover": "bin",
                "islands": 1,
                "kernel": "auto",
            }
        )
        r = measure(a)
        rows.append(r)
        print(_row(r), flush=True)
    elif args.all:
        base = vars(args)
        jobs = []
        for w in TABLE_II:
            for xo in ("bin", "nec"):
                jobs.append({**w, "crossover": xo, "islands": 1})
        for xo in ("bin", "nec"):
            jobs.append({**TABLE_II[2], "crossover": xo, "islands": 64})
        if xp is not np:  # reference rows: generic CuPy path, fused path driven by step()
            jobs.append(
                {**TABLE_II[0], "crossover": "bin", "islands": 1, "path": "generic", "generations": 100, "repeats": 3}
            )
            jobs.append(
                {**TABLE_II[0], "crossover": "bin", "islands": 1, "mode": "step", "generations": 1000, "repeats": 3}
            )
        for j in jobs:
            a = argparse.Namespace(**{**base, **{k: v for k, v in j.items() if k != "budget"}})
            r = measure(a)
            rows.append(r)
            print(_row(r), flush=True)
    elif not args.quality:
        r = measure(args)
        rows.append(r)
        print(_row(r), flush=True)
    if args.quality:
        print(f"# seed 004 budgets, dtype {args.dtype}, bounds {args.bounds}", flush=True)
        print(f"{'problem':<11}{'D':>6}{'N':>6} {'xo':<4}{'path':<8}{'gens':>7}{'best_f':>12}{'wall_s':>9}")
        for w in TABLE_II:
            for xo in ("bin", "nec"):
                q = quality(args, w, xo)
                qrows.append(q)
                print(
                    f"{q['problem']:<11}{q['dim']:>6}{q['pop']:>6} {xo:<4}{q['path']:<8}"
                    f"{q['generations']:>7}{q['best_f']:>12.4g}{q['wall_s']:>9.2f}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "quality": qrows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
