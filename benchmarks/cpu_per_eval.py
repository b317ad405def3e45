"""Per-evaluation cost on the CPU, isles against pygmo, side by side in one call (issue 37).

    python benchmarks/cpu_per_eval.py                       # Rastrigin D=10, 1e5 evaluations, one core
    python benchmarks/cpu_per_eval.py --reps 3 --only de_islands,lshade
    python benchmarks/cpu_per_eval.py --problem rosenbrock --dim 100
    python benchmarks/cpu_per_eval.py --reps 3 --only pso --dim 100     # plain PSO against pygmo's pso

Each isles row is ``python run.py +experiment=E device=cpu logger=none problem=P problem.dim=D
stop.max_evaluations=1e5 seed=S`` in a subprocess (``pso``: ``algorithm=pso`` on the root config,
no experiment: 8 unconnected islands of 40 particles, ``generations=100000``), with the experiment's islands and with
``islands.n=1``, and with ``algorithm.host_kernel=false`` (the NumPy array code: the CPU path
before issue 37) and ``auto`` (the families' compiled host builds, the default); its figure is
the run's own wall time (the job's ``wall time``, start-up excluded) over its evaluations; a
second row times the algorithm alone in this process (:func:`evolve_row`: ``alg.run``, no island
runtime), as pygmo's rows time ``evolve`` alone; those rows also give the process's CPU time,
which a loaded machine inflates less than the wall. Each
pygmo row times ``algo.evolve(pop)`` alone (tolerance stops off) at a population like the isles
row's. The process pins itself to one core (``--cores``), and so its children. Median of
``--reps`` seeds. Prints one Markdown table (docs/cpu_speed.md).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the isles experiments and, per experiment, the pygmo algorithm nearest to it (name, population)
EXPERIMENTS = {
    "de_islands": ("de", 50),
    "lshade": ("sade", 50),
    "cmepso": ("pso", 40),
    "pso": ("pso", 40),
    "fep": ("de", 400),
    "ga": ("sga", 640),
}
#: experiments whose family has no host build: one NumPy row (none today; EPSO's is
#: :mod:`isles.algorithms.pso.host_epoch`)
NO_HOST: set = set()
#: rows that are a plain algorithm of the root config (``conf/config.yaml``), not an experiment (its
#: ``generations`` raised so that the budget, not the root's 1,000 generations, ends the run)
JOB_ARGS = {"pso": ["algorithm=pso", "generations=100000"]}
_LINE = re.compile(r"evaluations ([\d,]+)\s+wall time ([\d.]+) s")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's isles


def isles_row(exp: str, problem: str, dim: int, evals: int, one_island: bool, host: str | None, seed: int) -> tuple:
    """``(wall_s, evaluations, best f)`` of one ``run.py`` job (``host``: ``algorithm.host_kernel``,
    ``None``: not set).

    Raises:
        RuntimeError: the job failed or printed no result line (its output's tail)."""
    cmd = [
        sys.executable,
        "run.py",
        *JOB_ARGS.get(exp, [f"+experiment={exp}"]),
        "device=cpu",
        "logger=none",
        f"problem={problem}",
        f"problem.dim={dim}",
        f"stop.max_evaluations={evals}",
        f"seed={seed}",
    ]
    if host is not None:
        cmd.append(f"algorithm.host_kernel={host}")
    if one_island:
        cmd += ["islands.n=1", "islands.n_actors=1"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = res.stdout + res.stderr
    m = _LINE.search(out)
    if res.returncode != 0 or m is None:
        raise RuntimeError(f"{' '.join(cmd[1:])} failed:\n{out[-2000:]}")
    f = re.search(r"^f = (\S+)", out, re.M)
    return float(m.group(2)), int(m.group(1).replace(",", "")), float(f.group(1)) if f else float("nan")


def evolve_row(exp: str, problem: str, dim: int, evals: int, one_island: bool, host: str, seed: int) -> tuple:
    """``(wall_s, evaluations, best f, CPU s)`` of the experiment's algorithm alone, in this process:
    ``alg.run`` from its initial population for the generations that spend about ``evals``
    evaluations over its islands (no island runtime: like pygmo's ``evolve`` alone). The
    experiments' settings: ``de_islands`` 8 islands of DE (N 50), ``lshade`` 1 island (N_init
    18 D, E 140), ``fep`` 1 island (mu 400, q 10), ``ga`` 1 island (N 640, seed002 encoding on
    [-1, 1]), ``cmepso`` its 10 slave swarms (EPSO, 40 particles x 6 candidates; the master swarm
    is the job's), ``pso`` 8 islands of plain PSO (40 particles); ``one_island``: one island of each."""
    from isles.algorithms.core.base import Context  # noqa: PLC0415
    from isles.algorithms.core.random import CounterRNG  # noqa: PLC0415
    from isles.algorithms.de.de import DE  # noqa: PLC0415
    from isles.algorithms.ep.fep import FEP  # noqa: PLC0415
    from isles.algorithms.ga.ga import GA  # noqa: PLC0415
    from isles.algorithms.lshade.lshade import LSHADE  # noqa: PLC0415
    from isles.algorithms.pso.epso import EPSO  # noqa: PLC0415
    from isles.algorithms.pso.pso import PSO  # noqa: PLC0415
    from isles.problems import make_problem  # noqa: PLC0415
    from isles.problems.constraints import Evaluator  # noqa: PLC0415

    hk = host == "auto"
    islands, box = 1, {}
    if exp == "de_islands":
        alg, islands = DE(pop_size=50, host_kernel=hk), 1 if one_island else 8
    elif exp == "lshade":
        alg = LSHADE(dim=dim, max_generations=(evals - 18 * dim) // 140, evals_per_generation=140, host_kernel=hk)
    elif exp == "fep":
        alg = FEP(pop_size=400, q=10, host_kernel=hk)
    elif exp == "ga":
        alg, box = GA(pop_size=640, encoding="seed002", host_kernel=hk), {"lower": -1.0, "upper": 1.0}
    elif exp == "cmepso":
        islands = 1 if one_island else 10
        alg = EPSO(max_iterations=max(1, evals // (240 * islands)), host_kernel=hk)
    elif exp == "pso":
        islands = 1 if one_island else 8
        alg = PSO(max_iterations=max(1, evals // (40 * islands)), host_kernel=hk)
    else:
        raise ValueError(f"experiment {exp!r}: allowed values are {'|'.join(EXPERIMENTS)}")
    import numpy as np  # noqa: PLC0415

    prob = make_problem(problem, dim=dim, **box)
    ctx = Context(np, np.float64, Evaluator(prob), CounterRNG(np, seed, range(islands)))
    alg.run(ctx, alg.init(ctx), 1)  # the host build compiled (or loaded from the disk cache)
    s = alg.init(ctx)
    gens = max(1, (evals - s["evals"] * islands) // (alg.evaluations_per_generation() * islands))
    t, c = time.perf_counter(), time.process_time()
    s = alg.run(ctx, s, gens)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return wall, int(s["evals"]) * islands, float(np.min(s["f"] if "f" in s else s["gbest_f"])), cpu


def pygmo_row(name: str, pop_size: int, problem: str, dim: int, evals: int, seed: int) -> tuple:
    """``(evolve wall_s, evaluations, best f, CPU s)`` of pygmo's ``name`` on isles' ``problem`` (through
    pygmo's Python UDP, the objective in NumPy per point; pygmo's own C++ Rastrigin where it has it)."""
    import pygmo as pg  # noqa: PLC0415

    gens = max(1, (evals - pop_size) // pop_size)
    if name == "de":
        algo = pg.algorithm(pg.de(gen=gens, ftol=0, xtol=0, seed=seed))
    elif name == "sade":
        algo = pg.algorithm(pg.sade(gen=gens, ftol=0, xtol=0, seed=seed))
    elif name == "pso":
        algo = pg.algorithm(pg.pso(gen=gens, seed=seed))
    elif name == "sga":
        algo = pg.algorithm(pg.sga(gen=gens, seed=seed))
    else:
        raise ValueError(f"pygmo algorithm {name!r}: allowed values are de|sade|pso|sga")
    prob = {"rastrigin": pg.rastrigin, "rosenbrock": pg.rosenbrock, "ackley": pg.ackley}[problem](dim)
    pop = pg.population(pg.problem(prob), pop_size, seed=seed)
    n0 = pop.problem.get_fevals()
    t, c = time.perf_counter(), time.process_time()
    pop = algo.evolve(pop)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return wall, pop.problem.get_fevals() - n0, float(pop.champion_f[0]), cpu


def main(argv=None) -> None:
    """Parse the arguments, run the rows, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="rastrigin", choices=["rastrigin", "rosenbrock", "ackley"])
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--evals", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3, help="seeds per row (median)")
    ap.add_argument("--only", default=",".join(EXPERIMENTS), help="experiments, comma-separated")
    ap.add_argument("--cores", default="0", help="cores to pin to (comma-separated; empty: no pinning)")
    a = ap.parse_args(argv)
    if a.cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in a.cores.split(",")})
    os.environ.setdefault("ISLES_BLAS_THREADS", "1")
    print(f"{a.problem} D={a.dim}, {a.evals:,} evaluations, cores {a.cores or 'all'}, median of {a.reps} seeds\n")
    print("| run | islands | path | wall (s) | evaluations | us / evaluation | CPU us / evaluation | best f |")
    print("|---|---|---|---|---|---|---|---|")
    pygmo_done = set()
    for exp in a.only.split(","):
        for one in (False, True):
            for host in (None,) if exp in NO_HOST else ("false", "auto"):
                rows = [isles_row(exp, a.problem, a.dim, a.evals, one, host, s) for s in range(a.reps)]
                path = "host build" if host == "auto" else "NumPy"
                _print(f"isles `{exp}` (job)", "1" if one else "default", path, rows)
                if host is not None:
                    rows = [evolve_row(exp, a.problem, a.dim, a.evals, one, host, s) for s in range(a.reps)]
                    _print(f"isles `{exp}` (`run` alone)", "1" if one else "default", path, rows)
        name, pop = EXPERIMENTS[exp]
        if (name, pop) not in pygmo_done:
            pygmo_done.add((name, pop))
            try:
                rows = [pygmo_row(name, pop, a.problem, a.dim, a.evals, s) for s in range(a.reps)]
            except ImportError:
                print(f"| pygmo `{name}` | pop {pop} | (pygmo not installed: pip install -e '.[bench]') | | | | | |")
                continue
            _print(f"pygmo `{name}`", f"pop {pop}", "C++", rows)


def _print(run: str, islands: str, path: str, rows: list) -> None:
    wall = statistics.median(r[0] for r in rows)
    n = statistics.median(r[1] for r in rows)
    f = statistics.median(r[2] for r in rows)
    cpu = f"{statistics.median(r[3] for r in rows) / n * 1e6:.2f}" if len(rows[0]) > 3 else "-"
    print(
        f"| {run} | {islands} | {path} | {wall:.3f} | {int(n):,} | {wall / n * 1e6:.2f} | {cpu} | {f:.4g} |", flush=True
    )


if __name__ == "__main__":
    main()
