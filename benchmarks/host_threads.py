"""One process's islands on its cores: DE's host build with 1, 2, 4 ... threads (issue 37 part 2).

    python benchmarks/host_threads.py                                   # 16 islands, Ackley D=1000, N=500
    python benchmarks/host_threads.py --islands 16 --dim 100 --pop 100 --gens 256
    python run.py +experiment=de_benchmark device=cpu islands.n=16 islands.n_actors=1 generations=256
    ISLES_HOST_THREADS=1 python run.py +experiment=de_benchmark device=cpu islands.n=16 islands.n_actors=1 generations=256

Times :class:`isles.algorithms.de.host_epoch.HostEpochDE` (the default CPU path of DE, OpenMP over
the islands) in this process for each thread count up to the cores it may run on, and checks that
every count gives the one-thread state bit for bit. Prints one Markdown row per count: wall,
CPU time, speed-up over one thread. The two ``run.py`` lines are the same through the whole job
(its ``wall time``), the second on one thread.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's isles


def main(argv=None) -> None:
    """Parse the arguments, time each thread count, print the table."""
    from isles.algorithms.core.base import Context  # noqa: PLC0415
    from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415
    from isles.algorithms.de.de import DE  # noqa: PLC0415
    from isles.algorithms.de.host_epoch import HostEpochDE  # noqa: PLC0415
    from isles.problems import make_problem  # noqa: PLC0415
    from isles.problems.constraints import Evaluator  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--islands", type=int, default=16)
    ap.add_argument("--dim", type=int, default=1000)
    ap.add_argument("--pop", type=int, default=500)
    ap.add_argument("--gens", type=int, default=32)
    ap.add_argument("--problem", default="ackley")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    a = ap.parse_args(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    alg = DE(pop_size=a.pop, CR=0.2)
    ctx = Context(
        np, np.dtype(a.dtype), Evaluator(make_problem(a.problem, dim=a.dim)), CounterRNG(np, 0, range(a.islands))
    )
    host = HostEpochDE(alg, ctx)
    s0 = alg.init(ctx)
    counts, t = [], 1
    while t < min(cores, a.islands):
        counts.append(t)
        t *= 2
    counts.append(min(cores, a.islands))
    print(
        f"DE host build, {a.islands} islands, {a.problem} D={a.dim}, N={a.pop}, {a.gens} generations, {cores} cores\n"
    )
    print("| threads | wall (s) | CPU (s) | speed-up | same state |")
    print("|---|---|---|---|---|")
    base, ref = None, None
    for n in counts:
        host.threads = n
        c, w = time.process_time(), time.perf_counter()
        out = host.run(dict(s0), a.gens)
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        ref = out if ref is None else ref
        same = all(np.asarray(out[k]).tobytes() == np.asarray(ref[k]).tobytes() for k in ("X", "f", "v"))
        base = wall if base is None else base
        print(f"| {n} | {wall:.3f} | {cpu:.3f} | {base / wall:.2f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
