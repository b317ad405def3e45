"""A user's array-code problem on the CPU: the NumPy generation against the host build around the
problem's own objective (issue 37; docs/cpu_speed.md, "A user's array-code problem").

    python benchmarks/user_problem_cpu.py                          # L-SHADE, jSO, DE; D=10, 1e5 evaluations
    python benchmarks/user_problem_cpu.py --reps 3 --dim 30 --only lshade --problems rastrigin
    python benchmarks/user_problem_cpu.py --only de --islands 8    # DE: 8 islands of 50

Each row is the family's ``alg.run`` alone in this process (no island runtime, like pygmo's
``evolve``), one island by default, on a CEC-like problem written as a user writes it (NumPy array
code, no ``cuda_objective``): ``algorithm.host_kernel=false`` (the NumPy array code, the CPU path
before this change) and ``auto`` (the host build, the objective called back: L-SHADE and jSO once
per island and L-SHADE generation, DE once a generation for all islands). L-SHADE and jSO at the
paper's defaults (``N_init = 18 D``, ``E = 140`` evaluations a runtime generation), DE rand/1/bin
with ``N = 50``, ``F = 0.5``, ``CR = 0.9``; the evaluations are per island. The figure is the process's CPU time (``time.process_time``) of the run, which a loaded
machine inflates less than the wall (also printed); the median of ``--reps`` seeds, after one warm-up
run that compiles the host build (or loads it from the disk cache). Also the share of the CPU time
spent in the objective alone (the same rows evaluated again, timed). Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's isles

import numpy as np  # noqa: E402
from isles.problems.base import Problem  # noqa: E402


class UserProblem(Problem):
    """A CEC 2014-like problem as NumPy array code: ``z = M (x - o)`` (a seeded shift in
    ``[-80, 80]`` and rotation), then Rastrigin (``z * 0.0512``), Rosenbrock (``z * 0.02048 + 1``)
    or Ackley, in ``[-100, 100]^D``. ``calls`` and ``seconds`` count the objective's own cost."""

    def __init__(self, kind: str = "rastrigin", dim: int = 10):
        super().__init__(dim, -100.0, 100.0, f_star=0.0)
        self.name = f"user_{kind}"
        self.kind = kind
        rng = np.random.default_rng(2014)
        self.o = rng.uniform(-80, 80, dim)
        self.MT = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((dim, dim)))[0].T)
        self.seconds = 0.0

    def objective(self, X):
        t = time.process_time()
        z = (X - self.o) @ self.MT
        if self.kind == "rastrigin":
            z = z * 0.0512
            f = (z**2 - 10 * np.cos(2 * np.pi * z) + 10).sum(axis=-1)
        elif self.kind == "rosenbrock":
            z = z * 0.02048 + 1
            f = (100 * (z[..., 1:] - z[..., :-1] ** 2) ** 2 + (z[..., :-1] - 1) ** 2).sum(axis=-1)
        else:
            z = z * 0.32
            d = z.shape[-1]
            f = (
                -20 * np.exp(-0.2 * np.sqrt((z**2).sum(axis=-1) / d))
                - np.exp(np.cos(2 * np.pi * z).sum(axis=-1) / d)
                + 20
                + np.e
            )
        self.seconds += time.process_time() - t
        return f


def make(family: str, dim: int, evals: int, host: bool):
    """The family's algorithm for about ``evals`` evaluations per island (``E`` evaluations a
    runtime generation) and its generations."""
    from isles.algorithms.de.de import DE  # noqa: PLC0415
    from isles.algorithms.lshade.jso import JSO  # noqa: PLC0415
    from isles.algorithms.lshade.lshade import LSHADE  # noqa: PLC0415

    hk = "auto" if host else False
    if family in ("lshade", "jso"):
        cls = LSHADE if family == "lshade" else JSO
        n0 = cls(dim=dim).params.n_init
        gens = (evals - n0) // 140
        return cls(dim=dim, max_generations=gens, evals_per_generation=140, host_kernel=hk), gens
    if family == "de":
        return DE(pop_size=50, F=0.5, CR=0.9, host_kernel=hk), (evals - 50) // 50
    raise ValueError(f"--only {family}: allowed values are lshade|jso|de")


def row(family: str, kind: str, dim: int, evals: int, islands: int, host: bool, seed: int) -> tuple:
    """``(CPU s, wall s, objective CPU s, evaluations, best f, gpu_path)`` of one ``alg.run``."""
    from isles.algorithms.core.base import Context  # noqa: PLC0415
    from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415
    from isles.problems.constraints import Evaluator  # noqa: PLC0415

    alg, gens = make(family, dim, evals, host)
    prob = UserProblem(kind, dim)
    ctx = Context(np, np.float64, Evaluator(prob), CounterRNG(np, seed, range(islands)))
    alg.run(ctx, alg.init(ctx), 2)  # the host build compiled or loaded
    s = alg.init(ctx)
    prob.seconds = 0.0
    t, c = time.perf_counter(), time.process_time()
    s = alg.run(ctx, s, gens)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return cpu, wall, prob.seconds, int(s["evals"]) * islands, float(np.min(s["f"])), alg.gpu_path(ctx)


def main(argv=None) -> None:
    """Parse the options, run the rows, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--evals", type=int, default=100_000)
    ap.add_argument("--islands", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="lshade,jso,de")
    ap.add_argument("--problems", default="rastrigin,rosenbrock,ackley")
    a = ap.parse_args(argv)
    print("| family | problem | path | CPU s | wall s | objective CPU s | evaluations | best f |")
    print("|---|---|---|---|---|---|---|---|")
    for family in a.only.split(","):
        for kind in a.problems.split(","):
            for host in (False, True):
                rs = [row(family, kind, a.dim, a.evals, a.islands, host, seed) for seed in range(a.reps)]
                med = [statistics.median(r[i] for r in rs) for i in range(5)]
                print(
                    f"| {family} | {kind} {a.dim} | {rs[0][5]} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} "
                    f"| {int(med[3]):,} | {med[4]:.4g} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
