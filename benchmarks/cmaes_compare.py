"""isles' batched CMA-ES (no restart, IPOP, BIPOP) against pygmo's ``cmaes`` on a fixed budget (issue 28).

Each of ``--runs`` independent runs is one unconnected island of one batch (island ``i`` draws
stream ``i``: what ``python run.py algorithm=cmaes topology=unconnected islands.n=RUNS`` evolves),
on the same problem objects for both (pygmo through a user-defined problem wrapping isles'
objective, so the bounds and functions are identical). pygmo's ``cmaes`` (no restarts) gets the
tutorial's default population ``4 + floor(3 ln D)``, ``budget / lambda`` generations and
``ftol = xtol = 0`` (its defaults, 1e-6, end a run at errors near 1e-7 and after a fraction of the
budget: its wall time would not be the budget's), seeds ``0..runs-1``. Reported: median and best final error, and the wall time of all runs, on this
machine's CPU.

With ``--cec F ...``: CEC 2014 functions instead (``benchmarks/cec_bench.py``'s :class:`CEC2014`,
pygmo's ``cec2014`` as the oracle: isles evaluates it row by row through Python, pygmo's ``cmaes``
calls its C++ problem directly), CEC's budget ``10000 D`` unless ``--budget`` is given, errors
below 1e-8 counted as 0.

Usage::

    python benchmarks/cmaes_compare.py --dim 10 --budget 100000 --runs 5
    python benchmarks/cmaes_compare.py --cec 4 5 6 7 8 9 10 11 12 13 14 15 16 --dim 30 --runs 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.cmaes.cmaes import CMAES  # noqa: E402
from isles.algorithms.cmaes.strategy import default_pop_size  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.benchmarks import Ackley, Griewank, Rastrigin, Rosenbrock  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

PROBLEMS = {
    "rastrigin": lambda d: Rastrigin(d),
    "ackley": lambda d: Ackley(d),
    "griewank": lambda d: Griewank(d),
    "rosenbrock": lambda d: Rosenbrock(d, -30.0, 30.0),
}


def isles_runs(problem, restarts: str, budget: int, runs: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Final best errors ``(runs,)`` and wall seconds of ``runs`` batched isles CMA-ES runs."""
    ctx = Context(np, np.float64, Evaluator(problem), CounterRNG(np, seed, list(range(runs))))
    alg = CMAES(dim=problem.dim, restarts=restarts)
    t = time.perf_counter()
    s = alg.init(ctx)
    while s["evals"] < budget:
        s = alg.step(ctx, s)
    return s["f"][:, 0] - problem.f_star, time.perf_counter() - t


class _UDP:
    """An isles problem as a pygmo user-defined problem (same objective and bounds)."""

    def __init__(self, problem=None):
        self.problem = problem

    def fitness(self, x):
        return [float(self.problem.objective(np.asarray(x)[None, :])[0])]

    def get_bounds(self):
        return (list(self.problem.lower), list(self.problem.upper))


def pygmo_runs(problem, budget: int, runs: int) -> tuple[np.ndarray, float]:
    """Final best errors ``(runs,)`` and wall seconds of pygmo's ``cmaes`` (seeds ``0..runs-1``)."""
    import pygmo as pg  # noqa: PLC0415

    lam = default_pop_size(problem.dim)
    out = []
    t = time.perf_counter()
    for r in range(runs):
        prob = pg.problem(_UDP(problem))
        algo = pg.algorithm(pg.cmaes(gen=budget // lam - 1, ftol=0.0, xtol=0.0, force_bounds=True, seed=r))
        pop = algo.evolve(pg.population(prob, lam, seed=r))
        out.append(pop.champion_f[0] - problem.f_star)
    return np.array(out), time.perf_counter() - t


def pygmo_cec_runs(fid: int, dim: int, budget: int, runs: int) -> tuple[np.ndarray, float]:
    """Final errors ``(runs,)`` (CEC's: below 1e-8 is 0) and wall seconds of pygmo's ``cmaes`` on
    its own C++ CEC 2014 function ``fid`` (seeds ``0..runs-1``, ``ftol = xtol = 0``)."""
    import pygmo as pg  # noqa: PLC0415

    lam = default_pop_size(dim)
    out = []
    t = time.perf_counter()
    for r in range(runs):
        prob = pg.problem(pg.cec2014(prob_id=fid, dim=dim))
        algo = pg.algorithm(pg.cmaes(gen=budget // lam - 1, ftol=0.0, xtol=0.0, force_bounds=True, seed=r))
        pop = algo.evolve(pg.population(prob, lam, seed=r))
        out.append(pop.champion_f[0] - 100.0 * fid)
    err = np.array(out)
    return np.where(err < 1e-8, 0.0, err), time.perf_counter() - t


def cec(functions, dim: int, budget: int, runs: int) -> None:
    """Print one table row per CEC 2014 function and optimiser (median, mean error, successes)."""
    from benchmarks.cec_common import CEC2014  # noqa: PLC0415

    print(f"CEC 2014, D = {dim}, budget {budget:,} evaluations per run, {runs} runs")
    print("| F | optimiser | median error | mean error | error 0 (< 1e-8) | wall s (all runs) |")
    print("|---|---|---|---|---|---|")
    for fid in functions:
        problem = CEC2014(fid, dim)
        rows = []
        for restarts in ("ipop", "bipop"):
            err, wall = isles_runs(problem, restarts, budget, runs)
            rows.append((f"isles cmaes {restarts}", np.where(err < 1e-8, 0.0, err), wall))
        rows.append(("pygmo cmaes", *pygmo_cec_runs(fid, dim, budget, runs)))
        for name, err, wall in rows:
            print(
                f"| F{fid} | {name} | {np.median(err):.3g} | {err.mean():.3g} | {int((err == 0).sum())}/{runs} "
                f"| {wall:.1f} |",
                flush=True,
            )


def main() -> None:
    """Print one table row per problem and optimiser."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--budget", type=int, default=None, help="evaluations per run (100,000; with --cec 10000 D)")
    ap.add_argument("--cec", type=int, nargs="+", default=None, help="CEC 2014 functions instead")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--problems", default="rastrigin,ackley,griewank,rosenbrock")
    ap.add_argument("--only-pygmo", action="store_true", help="pygmo's rows only")
    args = ap.parse_args()
    if args.cec:
        cec(args.cec, args.dim, args.budget or 10000 * args.dim, args.runs)
        return
    args.budget = args.budget or 100_000
    print(f"D = {args.dim}, budget {args.budget:,} evaluations per run, {args.runs} runs")
    print("| problem | optimiser | median error | best error | wall s (all runs) |")
    print("|---|---|---|---|---|")
    for name in args.problems.split(","):
        problem = PROBLEMS[name](args.dim)
        for restarts in () if args.only_pygmo else ("none", "ipop", "bipop"):
            err, wall = isles_runs(problem, restarts, args.budget, args.runs)
            print(
                f"| {name} | isles cmaes {restarts} | {np.median(err):.3g} | {err.min():.3g} | {wall:.1f} |", flush=True
            )
        err, wall = pygmo_runs(problem, args.budget, args.runs)
        print(f"| {name} | pygmo cmaes | {np.median(err):.3g} | {err.min():.3g} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
