"""CEC 2014 benchmark harness: isles' L-SHADE and DE against pygmo's ``sade`` and ``de1220``.

Issue 28 item 4, the start. Under CEC 2014's rules (Liang, Qu & Suganthan, "Problem definitions and
evaluation criteria for the CEC 2014 special session...", 2013): box ``[-100, 100]^D``, a budget of
``10000 D`` evaluations, the error ``f(x_best) - F_i*`` (``F_i* = 100 i``) counted as 0 below
``1e-8``. pygmo's ``cec2014`` is the oracle of the function values (no CEC data in this repository):
:class:`CEC2014` wraps it as an isles user problem evaluated on the host, one pygmo call per row.

Every optimiser gets the same budget and runs in this process, one after the other, one run per
(function, seed):

* ``isles-lshade``: :class:`isles.algorithms.lshade.lshade.LSHADE` at the paper's defaults
  (``N_init = 18 D``), one island, through the algorithm API (``init`` + ``run``: the island's
  generations without the runtime's epochs);
* ``isles-jso``: :class:`isles.algorithms.lshade.jso.JSO` at its defaults (``N_init = round(25 ln(D)
  sqrt(D))``), likewise;
* ``isles-de``: :class:`isles.algorithms.de.de.DE`, DE/rand/1/bin, ``N = 50``, ``F = 0.5``,
  ``CR = 0.9``, likewise;
* ``pygmo-sade``: ``pygmo.sade`` (jDE variant 2, rand/1/exp, population 50);
* ``pygmo-de1220``: ``pygmo.de1220`` (population 50).

The wall times include the host evaluation (the same Python loop over pygmo for isles; pygmo's own
optimisers call their C++ problem directly, so their times are the lower bound of a CPU optimiser
here): ``--time-only`` times F1 with a NumPy objective of the same cost for isles instead (see
docs/lshade.md).

Usage::

    pip install -e ".[bench]"
    python benchmarks/cec_bench.py                         # F1-F10, D = 10, 3 seeds
    python benchmarks/cec_bench.py --functions 1 4 9 --dim 30 --seeds 5
    python benchmarks/cec_bench.py --speed                 # F1 D = 10: L-SHADE vs sade wall time
    python benchmarks/cec_bench.py --functions 1 5 9 --curves docs/lshade_curves.png   # error against evaluations

Prints a table (median and mean error, success rate = error < 1e-8, median CPU time of the
process, steadier than wall time on a shared machine) per function and optimiser; ``--json PATH`` writes every run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.de.de import DE  # noqa: E402
from isles.algorithms.lshade.jso import JSO  # noqa: E402
from isles.algorithms.lshade.lshade import LSHADE  # noqa: E402
from isles.problems.base import Problem  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

#: errors below this count as 0 (CEC 2014)
ZERO = 1e-8
OPTIMISERS = ("isles-lshade", "isles-jso", "isles-de", "pygmo-sade", "pygmo-de1220")


class CEC2014(Problem):
    """CEC 2014 function ``fid`` (1-30) in dimension ``dim`` (2, 10, 20, 30, 50 or 100), evaluated by
    pygmo on the host (``pygmo.cec2014``), as an isles user problem: box ``[-100, 100]^D``,
    ``f_star = 100 fid``.

    Args:
        fid: the function number ``1..30``.
        dim: ``D``; pygmo ships the data for 2, 10, 20, 30, 50, 100 (the hybrid and composition
            functions F17-F30 not for 2).

    Raises:
        ImportError: without pygmo (``pip install -e ".[bench]"``).
        ValueError: a ``fid`` or ``dim`` pygmo does not have (pygmo's message).
    """

    name = "cec2014"

    def __init__(self, fid: int = 1, dim: int = 10):
        import pygmo  # noqa: PLC0415

        super().__init__(int(dim), -100.0, 100.0, f_star=100.0 * int(fid))
        self.fid = int(fid)
        self.name = f"cec2014_f{self.fid}"
        self._udp = pygmo.problem(pygmo.cec2014(prob_id=self.fid, dim=int(dim)))

    def __getstate__(self):
        d = dict(self.__dict__)
        d.pop("_udp")
        return d

    def __setstate__(self, d):
        import pygmo  # noqa: PLC0415

        self.__dict__.update(d)
        self._udp = pygmo.problem(pygmo.cec2014(prob_id=self.fid, dim=self.dim))

    def objective(self, X):
        """``f (...)`` of ``X (..., D)`` (NumPy; one pygmo call per row)."""
        X = np.asarray(X, dtype=np.float64)
        rows = X.reshape(-1, self.dim)
        fit = self._udp.fitness
        return np.array([fit(r)[0] for r in rows], dtype=np.float64).reshape(X.shape[:-1])


def error(f: float, fid: int) -> float:
    """CEC 2014's error ``f - 100 fid``, 0 below :data:`ZERO`."""
    e = float(f) - 100.0 * fid
    return 0.0 if e < ZERO else e


def run_isles(name: str, prob: Problem, budget: int, seed: int) -> tuple[float, float, float, int]:
    """``(best f, wall s, CPU s, evaluations)`` of one island of isles' ``name`` on ``prob``."""
    if name in ("isles-lshade", "isles-jso"):
        cls = LSHADE if name == "isles-lshade" else JSO
        n0 = cls(dim=prob.dim).params.n_init
        # the budget exactly where a divisor of budget - N_init up to N_init is large enough (for a
        # given MAX_NFE, E does not change the search, only the runtime's bookkeeping, and a small E
        # costs a step per E evaluations); else E = N_init, and the run stops short of the budget
        # by < N_init
        e = max(k for k in range(1, n0 + 1) if (budget - n0) % k == 0)
        e = e if 4 * e >= n0 else n0
        gens = (budget - n0) // e
        alg = cls(dim=prob.dim, max_generations=gens, evals_per_generation=e)
    else:
        alg = DE(pop_size=50, F=0.5, CR=0.9)
        gens = (budget - 50) // 50
    ctx = Context(np, np.float64, Evaluator(prob), CounterRNG(np, seed, [0]))
    t0, c0 = time.perf_counter(), time.process_time()
    s = alg.run(ctx, alg.init(ctx), gens)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    b = alg.best(s)
    return float(b.f[0, 0]), wall, cpu, int(s["evals"])


def run_pygmo(name: str, fid: int, dim: int, budget: int, seed: int) -> tuple[float, float, float, int]:
    """``(best f, wall s, CPU s, evaluations)`` of pygmo's ``name`` (population 50) on CEC 2014 ``fid``."""
    import pygmo as pg  # noqa: PLC0415

    prob = pg.problem(pg.cec2014(prob_id=fid, dim=dim))
    gen = budget // 50 - 1
    if name == "pygmo-sade":
        uda = pg.sade(gen=gen, variant=2, variant_adptv=1, ftol=0, xtol=0, seed=seed)
    else:
        uda = pg.de1220(gen=gen, ftol=0, xtol=0, seed=seed)
    t0, c0 = time.perf_counter(), time.process_time()
    pop = pg.population(prob, 50, seed=seed)
    pop = pg.algorithm(uda).evolve(pop)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return float(pop.champion_f[0]), wall, cpu, int(pop.problem.get_fevals())


def benchmark(functions, dim: int, seeds: int, optimisers=OPTIMISERS) -> list[dict]:
    """Every ``(function, optimiser, seed)`` run: a list of records."""
    budget = 10000 * dim
    out = []
    for fid in functions:
        prob = CEC2014(fid, dim)
        for name in optimisers:
            for seed in range(seeds):
                if name.startswith("isles"):
                    f, wall, cpu, evals = run_isles(name, prob, budget, seed)
                else:
                    f, wall, cpu, evals = run_pygmo(name, fid, dim, budget, seed)
                out.append(
                    {
                        "function": fid,
                        "dim": dim,
                        "optimiser": name,
                        "seed": seed,
                        "f": f,
                        "error": error(f, fid),
                        "wall_s": wall,
                        "cpu_s": cpu,
                        "evaluations": evals,
                    }
                )
                print(
                    f"F{fid} {name} seed {seed}: error {out[-1]['error']:.3g} ({evals} evaluations, {wall:.2f} s)",
                    file=sys.stderr,
                )
    return out


def table(records: list[dict]) -> str:
    """A Markdown table: per function and optimiser, median / mean error, success rate, median CPU time."""
    names = [n for n in OPTIMISERS if any(r["optimiser"] == n for r in records)]
    lines = ["| function | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for fid in sorted({r["function"] for r in records}):
        cells = []
        for n in names:
            rs = [r for r in records if r["function"] == fid and r["optimiser"] == n]
            e = np.array([r["error"] for r in rs])
            c = np.median([r["cpu_s"] for r in rs])
            cells.append(f"{np.median(e):.3g} / {e.mean():.3g} / {(e == 0).mean():.0%} / {c:.2f} s")
        lines.append(f"| F{fid} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed(dim: int = 10, repeats: int = 3) -> str:
    """F1, ``10000 D`` evaluations: isles' L-SHADE (pygmo's F1 on the host, and a NumPy
    elliptic function of no evaluation cost to speak of, which isolates the optimiser) against
    pygmo's ``sade`` (population 50), side by side, the best of ``repeats``."""

    class Elliptic(Problem):
        name = "elliptic"

        def __init__(self, dim):
            super().__init__(dim, -100.0, 100.0, f_star=0.0)
            self.w = 1e6 ** (np.arange(dim) / (dim - 1))

        def objective(self, X):
            return (self.w * (X - 1.0) ** 2).sum(axis=-1)

    budget = 10000 * dim
    rows = {}
    for label, fn in (
        ("pygmo sade (pop 50), F1", lambda s: run_pygmo("pygmo-sade", 1, dim, budget, s)),
        (
            "isles L-SHADE, F1 through pygmo on the host",
            lambda s: run_isles("isles-lshade", CEC2014(1, dim), budget, s),
        ),
        ("isles L-SHADE, NumPy elliptic", lambda s: run_isles("isles-lshade", Elliptic(dim), budget, s)),
        ("isles DE (pop 50), NumPy elliptic", lambda s: run_isles("isles-de", Elliptic(dim), budget, s)),
    ):
        runs = [fn(s) for s in range(repeats)]
        rows[label] = (min(r[1] for r in runs), min(r[2] for r in runs), runs[0][3])
    return "\n".join(f"| {k} | {w:.3f} s | {c:.3f} s | {e:,} |" for k, (w, c, e) in rows.items())


def curves(functions, dim: int = 10, seed: int = 0, n_points: int = 50) -> dict:
    """Best-so-far error against evaluations, ``{fid: {optimiser: (evaluations, errors)}}``, for
    isles' L-SHADE and jSO (runtime generation by generation) and pygmo's ``sade`` (population 50,
    ``memory=True``, so that its adaptation goes on across the ``evolve`` calls), at most ``10000 D``
    evaluations (isles: ``E = N_init``, the generations that fit), about ``n_points`` points each."""
    import pygmo as pg  # noqa: PLC0415

    budget = 10000 * dim
    out = {}
    for fid in functions:
        prob = CEC2014(fid, dim)
        out[fid] = {}
        for name, cls in (("isles-lshade", LSHADE), ("isles-jso", JSO)):
            n0 = cls(dim=dim).params.n_init
            gens = (budget - n0) // n0
            alg = cls(dim=dim, max_generations=gens)
            ctx = Context(np, np.float64, Evaluator(prob), CounterRNG(np, seed, [0]))
            s, ev, err, best = alg.init(ctx), [], [], np.inf
            every = max(1, gens // n_points)
            for g in range(gens):
                s = alg.step(ctx, s)
                best = min(best, float(alg.best(s).f[0, 0]))
                if g % every == 0 or g == gens - 1:
                    ev.append(s["evals"])
                    err.append(error(best, fid))
            out[fid][name] = (ev, err)
        udp = pg.problem(pg.cec2014(prob_id=fid, dim=dim))
        pop = pg.population(udp, 50, seed=seed)
        total = budget // 50 - 1
        step = max(1, total // n_points)
        algo = pg.algorithm(pg.sade(gen=step, variant=2, variant_adptv=1, ftol=0, xtol=0, memory=True, seed=seed))
        ev, err, done = [], [], 0
        while done < total:
            if total - done < step:
                algo = pg.algorithm(
                    pg.sade(gen=total - done, variant=2, variant_adptv=1, ftol=0, xtol=0, memory=True, seed=seed)
                )
            pop = algo.evolve(pop)
            done += min(step, total - done)
            ev.append(int(pop.problem.get_fevals()))
            err.append(error(pop.champion_f[0], fid))
        out[fid]["pygmo-sade"] = (ev, err)
    return out


def plot_curves(data: dict, path: Path, dim: int) -> None:
    """One panel per function of :func:`curves`' data, log error against evaluations, to ``path``."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fids = sorted(data)
    fig, axes = plt.subplots(1, len(fids), figsize=(4 * len(fids), 3.4), squeeze=False)
    for ax, fid in zip(axes[0], fids):
        for name, (ev, err) in data[fid].items():
            ax.plot(ev, np.maximum(err, 1e-9), label=name)
        ax.set_yscale("log")
        ax.set_title(f"CEC 2014 F{fid}, D = {dim}")
        ax.set_xlabel("evaluations")
        ax.axhline(1e-8, color="grey", lw=0.5, ls=":")
    axes[0][0].set_ylabel("best error (0 drawn at 1e-9)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--functions", type=int, nargs="+", default=list(range(1, 11)))
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--optimisers", nargs="+", default=list(OPTIMISERS), choices=OPTIMISERS)
    ap.add_argument("--json", type=Path, default=None, help="write every run's record here")
    ap.add_argument("--speed", action="store_true", help="only the wall-time comparison on F1")
    ap.add_argument("--curves", type=Path, default=None, help="plot error against evaluations (seed 0) to this PNG")
    a = ap.parse_args(argv)
    if a.curves:
        plot_curves(curves(a.functions, a.dim), a.curves, a.dim)
        return
    if a.speed:
        print("| optimiser | wall time (best of 3) | CPU time (best of 3) | evaluations |\n|---|---|---|---|")
        print(speed(a.dim))
        return
    records = benchmark(a.functions, a.dim, a.seeds, a.optimisers)
    if a.json:
        a.json.write_text(json.dumps(records, indent=1))
    print(
        f"D = {a.dim}, {10000 * a.dim} evaluations, {a.seeds} seeds; cells: median error / mean error / "
        "success rate (error < 1e-8) / median CPU time of the process"
    )
    print(table(records))


if __name__ == "__main__":
    main()
