"""Scaling over GPUs: the same config on 1 actor and on N actors (one GPU each), side by side in
one process; steady-state evaluations per second (after the first epoch, which holds compilation
and graph capture), the ratio, and the wall time per epoch.

    python benchmarks/scaling_bench.py --actors 2 +experiment=de_benchmark device=gpu islands.n=8 \\
        generations=65536 islands.migration_interval=16384
    python benchmarks/scaling_bench.py --actors 2 +experiment=cmepso device=gpu algorithm.n_particles=4096
    # CPU: one process's islands on 8 host-build threads against one thread
    python benchmarks/scaling_bench.py --actors 1 --threads 8 +experiment=de_benchmark device=cpu islands.n=8
    # the cost of one migration between actors: epochs of one generation with almost no compute
    python benchmarks/scaling_bench.py --actors 2 +experiment=de_islands device=gpu problem=sphere \\
        problem.dim=8 algorithm.pop_size=16 generations=3000 islands.migration_interval=1
    # the CPU target of issue 19: 2 CPU actors, ring, an exchange every generation, tiny DE islands
    python benchmarks/scaling_bench.py --actors 2 +experiment=de_islands device=cpu problem=sphere \\
        problem.dim=8 algorithm.pop_size=16 generations=1000 islands.migration_interval=1 topology=ring

Prints one Markdown row per actor count (with the share of an epoch the driver waits for the
actors' spans), then the CPU time per epoch of the driver and of each actor on this machine
(psutil, after the first span): on a machine with fewer cores than actors plus the driver, their
sum over the cores bounds the wall.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from isles.app.job import run_job  # noqa: E402


def run(overrides: list[str], n_actors: int):
    """One run with ``islands.n_actors=n_actors``: ``(RunResult, seconds per steady epoch, seconds
    per epoch the driver waits for the actors' spans or None, CPU seconds per epoch of the driver and
    of each actor after the first span or None)`` (``SyncLoop.end_span``; the rest of an epoch is
    the driver's own books, while the next span runs; CPU times from psutil, user + system)."""
    from isles.islands.control import sync_loop  # noqa: PLC0415

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[*overrides, "logger=none", "progress=false", f"islands.n_actors={n_actors}"],
        )
    import psutil  # noqa: PLC0415  (Ray's dependency)

    spans, cpu, real = [], [], sync_loop.SyncLoop.end_span

    def timed(self, *a, **k):
        t = time.perf_counter()
        out = real(self, *a, **k)
        spans.append((len(out), time.perf_counter() - t))
        here = [(i, g["pid"]) for i, g in enumerate(self.ex.infos) if g.get("host") == socket.gethostname()]
        try:  # actors on this machine only (a cluster's other nodes have their own pids)
            procs = {"driver": psutil.Process()} | {f"actor {i}": psutil.Process(pid) for i, pid in here}
            cpu.append((sum(n for n, _ in spans), {k: sum(p.cpu_times()[:2]) for k, p in procs.items()}))
        except psutil.Error:  # an actor restarting
            pass
        return out

    sync_loop.SyncLoop.end_span = timed
    try:
        result, _ = run_job(cfg)
    finally:
        sync_loop.SyncLoop.end_span = real
    h = result.history
    # epochs between the first and the last record kept (a RecordLog thins long runs: not len(h) - 1)
    epoch_s = (h[-1].wall_s - h[0].wall_s) / max(1, h[-1].epoch - h[0].epoch)
    steady = spans[1:]  # the first span is one epoch: compilation, graph capture
    span_s = sum(s for _, s in steady) / sum(n for n, _ in steady) if steady else None
    cpu_s = (
        {k: (cpu[-1][1][k] - cpu[0][1][k]) / (cpu[-1][0] - cpu[0][0]) for k in cpu[0][1] if k in cpu[-1][1]}
        if len(cpu) > 1 and cpu[-1][0] > cpu[0][0]
        else None
    )
    return result, epoch_s, span_s, cpu_s


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", type=int, default=2, help="actors of the scaled run (1 GPU each)")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU host builds: the first run on one island thread, the scaled run on this many "
        "(ISLES_HOST_THREADS; 0: as the environment says)",
    )
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the run")
    a = ap.parse_intermixed_args()
    print(
        "| actors | steady evals/s | ratio | evolution wall | wall over 1 actor's | wall per epoch after the first "
        "| of it waiting for the actors | best f | devices |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    base = base_wall = None
    cpus = []
    for first, n in ((True, 1), (False, a.actors)):
        if a.threads:  # the processes' island threads (algorithms/core/threads.py host_threads)
            os.environ["ISLES_HOST_THREADS"] = "1" if first else str(a.threads)
        result, epoch_s, span_s, cpu_s = run(a.overrides, n)
        rate = result.steady_evals_per_s
        base = base or rate
        base_wall = base_wall or result.wall_s
        devices = "; ".join(sorted({f"{d}" for d in result.devices.values()}))
        print(
            f"| {n}{'' if not a.threads else ' (1 thread)' if first else f' ({a.threads} threads)'} | {rate / 1e6:,.2f} M | {rate / base:.2f}x | {result.wall_s:.2f} s | "
            f"{result.wall_s / base_wall:.2f}x | {epoch_s * 1e3:.3f} ms | "
            f"{'-' if span_s is None else f'{span_s * 1e3:.3f} ms'} | {result.best_f:.7g} | {devices} |",
            flush=True,
        )
        if cpu_s:
            cpus.append(f"{n} actors, CPU ms per epoch: " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in cpu_s.items()))
    for line in cpus:  # the driver's and the actors' CPU time after the first span (psutil)
        print(f"\n{line}")


if __name__ == "__main__":
    main()
