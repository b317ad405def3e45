"""Speed benchmarks of the main job (CMEPSO) and of one PSO step.

    python benchmarks/cmepso_bench.py inprocess --device gpu      # 1000-iteration welded beam, all swarms on one device
    python benchmarks/cmepso_bench.py pso-step --device gpu       # EvoX's workload: PSO, N=100, sphere D=500
    python benchmarks/cmepso_bench.py epso-step --device gpu      # the main job's slave step: fused vs generic
    python benchmarks/cmepso_bench.py job --device gpu            # the Ray job (run_job), wall time and evals/s
    python benchmarks/cmepso_bench.py job --device gpu --particles 4096

GPU times come from synchronized timers (``cupyx.profiler.benchmark`` for the single step, a
device synchronisation before each clock read for whole runs); compilation and start-up are
excluded by a warm-up. Prints Markdown table rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.core.backend import device_name, get_xp  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.graph import GraphStepper  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.pso.epso import EPSO  # noqa: E402
from isles.algorithms.pso.pso import PSO  # noqa: E402
from isles.problems.constraints import Evaluator, feasibility_report  # noqa: E402
from isles.problems.registry import make_problem  # noqa: E402


def runtime_cmepso(
    problem: str, seed: int, iterations: int, device: str, slaves=10, particles=40, interval=1, params=()
):
    """One CMEPSO run of the runtime in this process (``+experiment=cmepso``: ``slaves`` EPSO islands of
    ``particles`` and the master swarm plug-in, exchanging every ``interval`` generations; no Ray,
    no MLflow); ``params``: ``(field, value)`` EPSOParams of slaves and master alike.
    ``(RunResult, wall seconds of the run)``."""
    from hydra.utils import instantiate  # noqa: PLC0415
    from isles.islands.config.build import build_plugins  # noqa: PLC0415
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415

    from tests.helpers import make_cfg, plain  # noqa: PLC0415

    over = [f"algorithm.{k}={v}" for k, v in params] + [f"++plugins.0.{k}={v}" for k, v in params]
    cfg = plain(
        make_cfg(
            "+experiment=cmepso",
            f"problem={problem}",
            f"seed={seed}",
            f"generations={iterations}",
            f"device={device}",
            f"islands.n={slaves}",
            f"algorithm.n_particles={particles}",
            f"islands.migration_interval={interval}",
            "logger=none",
            "progress=false",
            *over,
        )
    )
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), build_plugins(cfg["plugins"]), use_ray=False)
    t0 = time.perf_counter()
    result = coordinator.run()
    return result, time.perf_counter() - t0


def bench_inprocess(args) -> None:
    """Whole CMEPSO run (seed 001 sec. 6 settings) in one process (the runtime's in-process
    coordinator, :func:`runtime_cmepso`): wall time after warm-up."""
    walls, fs = [], []
    for rep in range(args.repeats + 1):
        iters = 5 if rep == 0 else args.iterations  # rep 0: warm-up (kernel compilation)
        result, wall = runtime_cmepso(args.problem, rep, iters, args.device, args.slaves, args.particles, args.interval)
        if rep:
            walls.append(wall)
            fs.append(feasibility_report(make_problem(args.problem), np.asarray(result.best_x))["f"])
    w = statistics.median(walls)
    print(
        f"| CMEPSO in-process {args.problem} {args.slaves}x{args.particles} | {'; '.join(sorted(set(result.devices.values())))} | "
        f"{args.iterations} it | median wall {w:.3f} s (min {min(walls):.3f}) | {result.evaluations / w:,.0f} evals/s | "
        f"best f {min(fs):.7g} |"
    )


def bench_pso_step(args) -> None:
    """One PSO step, N=100 particles on sphere D=500 (EvoX 1.4's benchmark workload)."""
    xp = get_xp(args.device)
    problem = make_problem("sphere", dim=args.dim)
    for dtype in (np.float32, np.float64):
        ctx = Context(xp=xp, dtype=np.dtype(dtype), evaluator=Evaluator(problem), rng=CounterRNG(xp, 0, [0]))
        pso = PSO(n_particles=100)
        state = pso.init(ctx)
        for _ in range(10):
            state = pso.step(ctx, state)
        if xp is np:
            t0 = time.perf_counter()
            n = 200
            for _ in range(n):
                state = pso.step(ctx, state)
            us = (time.perf_counter() - t0) / n * 1e6
        else:
            from cupyx.profiler import benchmark  # noqa: PLC0415

            r = benchmark(pso.step, (ctx, state), n_repeat=200, n_warmup=10)
            print(
                f"  plain CuPy step: {float(np.mean(r.gpu_times)) * 1e6:.1f} us GPU, "
                f"{float(np.mean(r.cpu_times)) * 1e6:.1f} us host"
            )
            stepper = GraphStepper.for_algorithm(pso, ctx, state)
            stepper.run(50)
            n = 2000
            start, end = xp.cuda.Event(), xp.cuda.Event()
            start.record(stepper.stream)
            t0 = time.perf_counter()
            stepper.run(n)
            host_us = (time.perf_counter() - t0) / n * 1e6
            end.record(stepper.stream)
            end.synchronize()
            us = xp.cuda.get_elapsed_time(start, end) * 1e3 / n
            print(f"  CUDA-graph replay: {us:.1f} us GPU per step (events), {host_us:.1f} us host per launch")
        print(f"| PSO step N=100 sphere D={args.dim} {np.dtype(dtype).name} | {device_name(xp)} | {us:.1f} us/step |")


def bench_epso_step(args) -> None:
    """One EPSO step of the main job's slaves (``--slaves`` islands of ``--particles`` particles, 5
    replicas, welded beam, float64), fused kernels (:mod:`isles.algorithms.pso.epso_cuda`) against
    the generic array code (``fused=False``), as CUDA-graph replays timed with CUDA events; and the
    master swarm's step (one island of 10, ``c3 = 2.02``)."""
    xp = get_xp(args.device)
    if xp is np:
        raise SystemExit("epso-step: a GPU benchmark (--device gpu)")
    problem = make_problem(args.problem)
    for label, n_isl, n_part, c3 in (("slaves", args.slaves, args.particles, 0.0), ("master", 1, 10, 2.02)):
        for fused in (True, False):
            ctx = Context(
                xp=xp, dtype=np.dtype(np.float64), evaluator=Evaluator(problem), rng=CounterRNG(xp, 0, range(n_isl))
            )
            alg = EPSO(n_particles=n_part, c3=c3, max_iterations=args.iterations, fused=fused)
            state = alg.run(ctx, alg.init(ctx), 5)
            if c3 > 0:
                state = EPSO.set_attractor(state, state["gbest"], state["gbest_f"], state["gbest_v"])
            stepper = GraphStepper.for_algorithm(alg, ctx, state)
            stepper.run(50)
            n = 1000
            start, end = xp.cuda.Event(), xp.cuda.Event()
            start.record(stepper.stream)
            stepper.run(n)
            end.record(stepper.stream)
            end.synchronize()
            us = xp.cuda.get_elapsed_time(start, end) * 1e3 / n
            kind = "fused" if fused else "generic"
            print(
                f"| EPSO step {label} {n_isl}x{n_part} R=5 {args.problem} float64 {kind} | {device_name(xp)} | "
                f"{us:.1f} us/step (graph replay, events) |"
            )


def bench_job(args) -> None:
    """The Ray job as users run it (run_job), without MLflow: wall time and evals/s."""
    from hydra import compose, initialize_config_dir  # noqa: PLC0415
    from isles.app.job import run_job  # noqa: PLC0415
    from isles.islands.config import schema as _schema  # noqa: F401, PLC0415  (registers isles_schema)

    conf = str(Path(__file__).resolve().parents[1] / "conf")
    over = [
        "+experiment=cmepso",
        f"problem={args.problem}",
        f"device={args.device}",
        "logger=none",
        "progress=false",
        f"algorithm.n_particles={args.particles}",
        f"generations={args.iterations}",
        f"islands.migration_interval={args.interval}",
    ] + args.overrides
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose(config_name="config", overrides=over)
    result, _ = run_job(cfg)
    devices = sorted(set(result.devices.values()))
    print(
        f"| job {args.problem} 10x{args.particles} interval {args.interval} | {'; '.join(devices)} | "
        f"wall {result.wall_s:.2f} s (+{result.startup_s:.1f} s start-up) | "
        f"{result.evaluations / result.wall_s:,.0f} evals/s (steady state {result.steady_evals_per_s:,.0f}) | "
        f"best f {result.best_f:.7g} |"
    )
    for gid, dev in sorted(result.devices.items()):
        print(f"  island {gid}: {dev}")


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["inprocess", "pso-step", "epso-step", "job"])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--problem", default="welded_beam")
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--interval", type=int, default=1)
    ap.add_argument("--slaves", type=int, default=10)
    ap.add_argument("--particles", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dim", type=int, default=500)
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides for 'job'")
    a = ap.parse_intermixed_args()
    benches = {"inprocess": bench_inprocess, "pso-step": bench_pso_step, "epso-step": bench_epso_step, "job": bench_job}
    benches[a.what](a)


if __name__ == "__main__":
    main()
