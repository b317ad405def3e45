"""CEC 2014 benchmark harness (issue 28): isles' L-SHADE, jSO, BIPOP-CMA-ES and DE against pygmo's
``sade``, ``de1220`` and ``cmaes``, and EvoX's SHADE and CMA-ES (``--evox``, GPU, torch).

**Rules** (Liang, Qu & Suganthan, "Problem definitions and evaluation criteria for the CEC 2014
special session and competition on single objective real-parameter numerical optimization",
Technical Report 201311, Zhengzhou University / NTU Singapore, 2013): box ``[-100, 100]^D``, a budget
of ``10000 D`` evaluations per run, the error ``f(x_best) - F_i*`` (``F_i* = 100 i``) counted as 0
below ``1e-8``, 51 runs (``--runs 51``; fewer where time does not allow, and the report says how
many). pygmo's ``cec2014`` is the oracle of the function values (no CEC data in this repository):
:class:`benchmarks.cec_common.CEC2014` wraps it as an isles user problem evaluated on the host, one pygmo call per row;
EvoX's peers evaluate the same pygmo functions (:func:`run_evox`).

**Optimisers** (every one gets the same budget, in this process, one run after the other):

* ``isles-lshade``: :class:`isles.algorithms.lshade.lshade.LSHADE` at the paper's defaults
  (``N_init = 18 D``), one island through the algorithm API (``init`` + ``run``: the island's
  generations without the runtime's epochs); ``isles-jso``: :class:`isles.algorithms.lshade.jso.JSO`;
* ``isles-cmaes``: :class:`isles.algorithms.cmaes.cmaes.CMAES`, BIPOP, the tutorial's defaults,
  ``sigma0 = 0.3`` of the box;
* ``isles-de``: :class:`isles.algorithms.de.de.DE`, DE/rand/1/bin, ``N = 50``, ``F = 0.5``, ``CR = 0.9``;
* ``pygmo-sade`` (jDE, variant 2 rand/1/exp, population 50), ``pygmo-de1220`` (population 50),
  ``pygmo-cmaes`` (no restarts, ``lambda = 4 + floor(3 ln D)``, ``sigma0 = 0.3``, ``force_bounds``);
  ``ftol = xtol = 0`` so that none stops before the budget;
* ``--evox``: ``evox-shade`` (``evox.algorithms.SHADE``, population 100, as the SHADE paper) and
  ``evox-cmaes`` (``evox.algorithms.CMAES``, no restarts, mean uniform in the box, ``sigma = 0.3 *
  200``; its samples are clipped to the box for the evaluation), through ``evox.workflows.StdWorkflow``
  and ``EvalMonitor`` (evox 1.4, torch; on ``cuda`` where there is one).

``--device gpu`` runs isles' islands on CuPy (the objective still pygmo on the host: one copy of the
trials each way per generation).

**Output.** Every run appends one JSON line to ``--out`` (a run already there is skipped, so an
interrupted benchmark goes on): function, dim, optimiser, seed, device, final ``f`` and error,
wall and CPU seconds, evaluations and a trace of ``(evaluations, wall s, best error, CPU s)`` at
about 100 points. ``--report FILE...`` prints the Markdown tables from such files
(:mod:`benchmarks.cec_report`): median and mean errors, success rates (error 0), Wilcoxon
signed-rank wins/ties/losses (scipy) against each peer, time-to-target (the CPU time to reach
pygmo ``sade``'s median final error; wall time on a GPU), and, at D = 30, the comparison with the
published L-SHADE results (:data:`benchmarks.cec_report.PUBLISHED_LSHADE_D30`). ``--curves PNG``
plots error against evaluations (median over the runs) for ``--functions``.

Usage::

    pip install -e ".[bench]"
    python benchmarks/cec_bench.py --dim 10 --runs 51 --out cec_d10.jsonl      # all 30 functions
    python benchmarks/cec_bench.py --dim 30 --runs 5 --out cec_d30.jsonl
    python benchmarks/cec_bench.py --report cec_d10.jsonl cec_d30.jsonl        # the tables (docs/cec2014.md)
    python benchmarks/cec_bench.py --report cec_d10.jsonl --curves docs/cec2014_curves.png --functions 1 4 6 11
    python benchmarks/cec_bench.py --speed                                     # 1e5 evaluations, D = 10: vs sade
    python benchmarks/cec_bench.py --dim 30 --runs 5 --evox --device gpu --optimisers isles-lshade \\
        isles-cmaes evox-shade evox-cmaes pygmo-sade --out cec_gpu.jsonl       # the device
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.problems.base import Problem  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

from benchmarks.cec_common import (  # noqa: E402, F401  (CEC2014, error, OPTIMISERS: this harness's names too)
    CEC2014,
    EVOX,
    ISLES,
    OPTIMISERS,
    PYGMO,
    ZERO,
    error,
    isles_algorithm,
    pygmo_uda,
)

#: points of a run's trace (evaluations, wall s, best error)
TRACE_POINTS = 100


class _Trace:
    """Best-so-far error against evaluations and time of one run (``points``: ``[evals, wall s,
    error, CPU s of the process]``), the clocks started at construction."""

    def __init__(self, fid: int):
        self.fid, self.points, self.best = fid, [], math.inf
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def add(self, evals: int, f: float) -> None:
        self.best = min(self.best, float(f))
        self.points.append(
            [int(evals), time.perf_counter() - self.t0, error(self.best, self.fid), time.process_time() - self.c0]
        )

    def record(self, evals: int) -> dict:
        """The run's fields: final ``f``, ``error``, ``wall_s``, ``cpu_s``, ``evaluations``, ``trace``."""
        return {
            "f": self.best,
            "error": error(self.best, self.fid),
            "wall_s": time.perf_counter() - self.t0,
            "cpu_s": time.process_time() - self.c0,
            "evaluations": int(evals),
            "trace": self.points,
        }


def run_isles(name: str, prob: Problem, budget: int, seed: int, device: str = "cpu") -> dict:
    """One island of isles' ``name`` on ``prob`` (one run, the counter RNG's seed ``seed``, stream
    0): the record's fields (:class:`_Trace`)."""
    return run_isles_batch(name, prob, budget, [seed], device, batched=False)[0]


def run_isles_batch(
    name: str, prob: Problem, budget: int, seeds, device: str = "cpu", batched: bool = True
) -> list[dict]:
    """Runs of isles' ``name`` on ``prob`` as the islands of one batch (unconnected: independent
    runs; ``batched``: run ``s`` is stream ``s`` of seed 0, which is what ``islands.n=K
    topology=unconnected`` evolves; else one seed ``seeds[0]``, stream 0): one record's fields per
    run, their times the batch's divided by the runs (amortised; ``batch`` says how many shared it)."""
    alg, gens = isles_algorithm(name, prob.dim, budget)
    if device == "gpu":
        import cupy as xp  # noqa: PLC0415
    else:
        xp = np
    seeds = [int(x) for x in seeds]
    rng = CounterRNG(xp, 0, seeds) if batched else CounterRNG(xp, seeds[0], [0])
    ctx = Context(xp, np.float64, Evaluator(prob), rng)
    chunk = max(1, gens // TRACE_POINTS)
    k = len(seeds)
    traces = [_Trace(getattr(prob, "fid", 0)) for _ in seeds]
    t0, c0 = time.perf_counter(), time.process_time()
    s = alg.init(ctx)
    done = 0
    while done < gens:
        n = min(chunk, gens - done)
        s = alg.run(ctx, s, n)
        done += n
        best = np.asarray(alg.best(s).f[:, 0].tolist())  # a host copy: the device waits here
        wall, cpu = (time.perf_counter() - t0) / k, (time.process_time() - c0) / k
        for tr, f in zip(traces, best, strict=False):
            tr.best = min(tr.best, float(f))
            tr.points.append([int(s["evals"]), wall, error(tr.best, tr.fid), cpu])
    wall, cpu = (time.perf_counter() - t0) / k, (time.process_time() - c0) / k
    out = []
    for tr in traces:
        rec = tr.record(s["evals"])
        rec.update(wall_s=wall, cpu_s=cpu, batch=k, rng="seed 0, stream = seed" if batched else "seed, stream 0")
        out.append(rec)
    return out


def pygmo_pop_size(name: str, dim: int) -> int:
    """pygmo's population: 50 for ``sade`` and ``de1220``, ``4 + floor(3 ln D)`` for ``cmaes``."""
    return 4 + int(math.floor(3 * math.log(dim))) if name == "pygmo-cmaes" else 50


def run_pygmo(name: str, fid: int, dim: int, budget: int, seed: int) -> dict:
    """pygmo's ``name`` on its own CEC 2014 ``fid`` (one run, seed ``seed``), ``budget`` evaluations
    at most (``budget / N - 1`` generations after the initial population of ``N``), evolved in
    about :data:`TRACE_POINTS` calls with ``memory=True`` (the adaptation goes on across them):
    the record's fields."""
    import pygmo as pg  # noqa: PLC0415

    n = pygmo_pop_size(name, dim)
    total = budget // n - 1
    chunk = max(1, total // TRACE_POINTS)
    tr = _Trace(fid)
    prob = pg.problem(pg.cec2014(prob_id=fid, dim=dim))
    pop = pg.population(prob, n, seed=seed)
    algo, done = pg.algorithm(pygmo_uda(name, chunk, seed, True)), 0
    while done < total:
        if total - done < chunk:
            algo = pg.algorithm(pygmo_uda(name, total - done, seed, True))
        pop = algo.evolve(pop)
        done += min(chunk, total - done)
        tr.add(pop.problem.get_fevals(), pop.champion_f[0])
    return tr.record(pop.problem.get_fevals())


def run_evox(name: str, fid: int, dim: int, budget: int, seed: int) -> dict:
    """EvoX's (1.4, torch) ``name`` on CEC 2014 ``fid`` (pygmo's values, the points copied to the
    host) through ``StdWorkflow`` and ``EvalMonitor``, ``budget // N`` steps of ``N`` evaluations
    (EvoX's SHADE and CMA-ES evaluate their population once per step, SHADE none at ``init_step``):
    the record's fields. On ``cuda`` where torch sees one.

    Raises:
        ImportError: without evox and torch.
    """
    import torch  # noqa: PLC0415
    from evox.algorithms import CMAES as EvoxCMAES  # noqa: PLC0415
    from evox.algorithms import SHADE as EvoxSHADE  # noqa: PLC0415
    from evox.core import Problem as EvoxProblem  # noqa: PLC0415
    from evox.workflows import EvalMonitor, StdWorkflow  # noqa: PLC0415

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(seed)
    host = CEC2014(fid, dim)

    class _CEC(EvoxProblem):
        def __init__(self):
            super().__init__()

        @torch.compiler.disable
        def evaluate(self, pop: torch.Tensor) -> torch.Tensor:
            x = pop.detach().clamp(-100.0, 100.0).to("cpu", torch.float64).numpy()
            return torch.as_tensor(host.objective(x), dtype=pop.dtype, device=pop.device)

    lb = torch.full((dim,), -100.0, device=device)
    ub = torch.full((dim,), 100.0, device=device)
    if name == "evox-shade":
        algo = EvoxSHADE(pop_size=100, lb=lb, ub=ub, device=device)
        n = 100
    else:
        mean = lb + torch.rand(dim, device=device) * (ub - lb)
        algo = EvoxCMAES(mean_init=mean, sigma=0.3 * 200.0, device=device)
        n = algo.pop_size
    monitor = EvalMonitor(full_fit_history=False, device=device)
    wf = StdWorkflow(algo, _CEC(), monitor=monitor, device=device)
    steps = budget // n
    chunk = max(1, steps // TRACE_POINTS)
    tr = _Trace(fid)
    wf.init_step()
    done = 1
    while done < steps:
        for _ in range(min(chunk, steps - done)):
            wf.step()
        done = min(steps, done + chunk)
        tr.add(done * n, float(monitor.get_best_fitness()))
    return tr.record(steps * n)


def run_one(name: str, fid: int, dim: int, seed: int, device: str = "cpu", budget: int | None = None) -> dict:
    """One run of ``name`` on CEC 2014 ``fid`` in dimension ``dim``: its JSON record."""
    budget = 10000 * dim if budget is None else budget
    if name in ISLES:
        rec = run_isles(name, CEC2014(fid, dim), budget, seed, device)
    elif name in PYGMO:
        rec = run_pygmo(name, fid, dim, budget, seed)
    else:
        rec = run_evox(name, fid, dim, budget, seed)
    where = device if name in ISLES else ("gpu" if name in EVOX else "cpu")
    return {"function": fid, "dim": dim, "optimiser": name, "seed": seed, "device": where, "budget": budget, **rec}


def _key(r: dict) -> tuple:
    return (r["function"], r["dim"], r["optimiser"], r["seed"], r.get("device", "cpu"))


def load(paths) -> list[dict]:
    """The records of JSON-lines files (missing files: none; a line cut short is skipped)."""
    out = []
    for p in paths:
        p = Path(p)
        if p.exists():
            for line in p.read_text().splitlines():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut short by a killed run
                    continue
    return out


def benchmark(
    functions,
    dim: int,
    runs: int,
    optimisers,
    out: Path | None,
    device: str = "cpu",
    batch: int = 1,
    first_seed: int = 0,
) -> list[dict]:
    """Every ``(seed, function, optimiser)`` run not yet in ``out`` (seeds ``first_seed .. runs - 1``:
    a long benchmark split over processes by seed ranges), seeds outermost (so that an
    interrupted benchmark has whole seeds over all functions); each record appended to ``out``.
    ``batch > 1``: isles' runs of ``batch`` consecutive seeds as the islands of one batch
    (:func:`run_isles_batch`)."""
    done = {_key(r) for r in load([out])} if out else set()
    records = []

    def where(name):
        return device if name in ISLES else ("gpu" if name in EVOX else "cpu")

    def keep(rec):
        records.append(rec)
        if out:
            with open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec) + "\n")
        print(
            f"D{dim} F{rec['function']} {rec['optimiser']} seed {rec['seed']}: error {rec['error']:.3g} "
            f"({rec['evaluations']} evaluations, {rec['cpu_s']:.2f} s CPU)",
            file=sys.stderr,
            flush=True,
        )

    for first in range(first_seed, runs, batch):
        seeds = list(range(first, min(runs, first + batch)))
        for fid in functions:
            for name in optimisers:
                todo = [x for x in seeds if (fid, dim, name, x, where(name)) not in done]
                if not todo:
                    continue
                if name in ISLES and batch > 1:
                    budget = 10000 * dim
                    for x, rec in zip(
                        todo, run_isles_batch(name, CEC2014(fid, dim), budget, todo, device), strict=False
                    ):
                        keep(
                            {"function": fid, "dim": dim, "optimiser": name, "seed": x, "device": device}
                            | {"budget": budget, **rec}
                        )
                    continue
                for x in todo:
                    keep(run_one(name, fid, dim, x, device))
    return records


def main(argv=None) -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--functions", type=int, nargs="+", default=list(range(1, 31)))
    ap.add_argument("--dim", type=int, default=10, choices=(10, 30, 50, 100))
    ap.add_argument("--runs", type=int, default=51, help="runs (seeds 0..runs-1) per function and optimiser")
    ap.add_argument("--first-seed", type=int, default=0, help="start at this seed (split a benchmark over processes)")
    ap.add_argument("--optimisers", nargs="+", default=None, choices=OPTIMISERS)
    ap.add_argument("--evox", action="store_true", help="add EvoX's SHADE and CMA-ES (evox 1.4, torch)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="isles' islands on NumPy or CuPy")
    ap.add_argument("--out", type=Path, default=None, help="append every run's JSON record here (and skip those there)")
    ap.add_argument("--report", type=Path, nargs="+", default=None, help="print the tables of these JSON-lines files")
    ap.add_argument("--curves", type=Path, default=None, help="with --report: plot error against evaluations here")
    ap.add_argument("--speed", action="store_true", help="only the wall-time comparison on F1 (no trace)")
    ap.add_argument("--batch", type=int, default=1, help="isles' runs of this many seeds as one batch of islands")
    a = ap.parse_args(argv)
    if a.report:
        from benchmarks.cec_report import plot_curves, report  # noqa: PLC0415

        records = load(a.report)
        if a.curves:
            plot_curves(records, a.functions, a.dim, a.curves)
            return
        print(report(records, optimisers=a.optimisers, functions=a.functions))
        return
    if a.speed:
        print("| optimiser | wall time (best of 5) | CPU time (best of 5) | evaluations |\n|---|---|---|---|")
        from benchmarks.cec_speed import speed  # noqa: PLC0415

        print(speed(a.dim))
        return
    names = a.optimisers or list(ISLES + PYGMO + (EVOX if a.evox else ()))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    records = benchmark(a.functions, a.dim, a.runs, names, a.out, a.device, a.batch, a.first_seed)
    from benchmarks.cec_report import report  # noqa: PLC0415

    print(report(records))


if __name__ == "__main__":
    main()
