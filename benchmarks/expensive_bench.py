"""An expensive objective with uneven cost (issue 27): isles on 1, 2, 4, 8 CPU actors, sync and async,
beside pygmo's archipelago on the same problem, islands, population, evaluations and cores.

The user problem (:class:`OdeDesign`, loaded by isles through ``problem._target_`` like any user
module, wrapped for pygmo as :class:`PygmoUDP`) is a Python loop over the batch that calls scipy's
``solve_ivp`` (RK45) once per design, on a damped Van der Pol oscillator whose stiffness ``mu`` and
integration span depend on the design: a design costs from about half to twice the mean. The mean
cost per design is calibrated on this machine to ``--cost-ms`` (the span is scaled; the calibration
is printed). Workload (the issue's): 16 islands x 32, DE (rand/1/bin, F = 0.5, CR = 0.9), 20
generations, migration every 5 on a two-way ring (select best 1, fair replace), so 16 x 32 x 21 =
10,752 evaluations per run on every system. pygmo: ``pg.de(gen=5, variant=7)`` (rand/1/bin) on 16
``mp_island`` of one pool of ``--pygmo`` processes, ``archipelago.evolve(4)``, ``pg.ring()``.

Figures per run:

* ``wall``: the evolution's wall time (isles: from the loop's start, actors already started and
  their initial populations evaluated; pygmo: ``evolve`` to ``wait_check``, islands built and
  their initial populations evaluated); ``speedup``: against the same mode on 1 actor, and
  against sync on 1 actor, at the same number of evaluations;
* ``busy``: time inside the objective over the wall, per worker process (isles' actors, pygmo's
  pool), mean and lowest: measured by the problem itself (each call's interval, per process);
* ``best f`` and the evaluations.

``--seeds N`` adds the quality per evaluation over seeds ``0..N-1`` at the largest actor count:
each system's best f (median, min, max) and whether async's median lies within sync's spread.

Usage (repository root)::

    # a quick check on 2 cores (about a minute; a smoke test, not a measurement)
    python benchmarks/expensive_bench.py --cost-ms 1 --actors 1,2 --pygmo 2 --generations 10
    # the 16-core GPU machine, the timing table (about 4 min at 4 ms a design); async rows draw from
    # the shared pool (islands.async_budget=shared); --async-budget island: fixed generations per
    # island (the idle tail), --async-budget shared,island: both
    python benchmarks/expensive_bench.py --cost-ms 4 --actors 1,2,4,8 --pygmo 8
    # the quality over 10 seeds on 8 actors (about 2 min at 1 ms a design)
    python benchmarks/expensive_bench.py --cost-ms 1 --actors 8 --pygmo 8 --seeds 10 --no-timing

Prints Markdown tables; ``--json PATH`` also writes every run's figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from isles.islands.control.callbacks import Callback  # noqa: E402
from isles.problems.base import Problem  # noqa: E402

#: the workload of the issue: islands, population, generations, migration interval
ISLANDS, POP, GENERATIONS, INTERVAL, DIM = 16, 32, 20, 5, 6


def _rhs(t, y, mu, k):
    """A damped Van der Pol oscillator ``y'' - mu (1 - y^2) y' + k y' + y = 0``."""
    return [y[1], mu * (1.0 - y[0] * y[0]) * y[1] - k * y[1] - y[0]]


def simulate(x, span: float, mu_max: float = 30.0) -> float:
    """One design ``x`` (``(D,)`` in ``[-1, 1]``, ``D >= 5``): its objective, from one ``solve_ivp``.

    ``mu`` (the stiffness, hence the steps RK45 takes) grows with ``x[0]``, the span with ``x[2]``;
    ``x[1]`` damps. The objective: the oscillator's energy at the end, plus ``(x[0] - 0.5)^2`` (the
    best designs are stiff: expensive) and ``|x[3:] - 0.5|^2``."""
    from scipy.integrate import solve_ivp  # noqa: PLC0415

    mu = 0.5 + mu_max * (x[0] + 1.0) / 2.0
    k = 2.0 * (x[1] + 1.0)
    T = span * (1.0 + (x[2] + 1.0) / 2.0)
    sol = solve_ivp(_rhs, (0.0, T), [1.0 + x[3], x[4]], args=(mu, k), rtol=1e-6, atol=1e-8)
    y = sol.y[:, -1]
    return float(y[0] ** 2 + y[1] ** 2 + (x[0] - 0.5) ** 2 + np.sum((np.asarray(x[3:]) - 0.5) ** 2))


class OdeDesign(Problem):
    """A simulation-driven design problem as a user writes it: a Python loop over the batch, one
    scalar ODE solve per design (:func:`simulate`), uneven cost. ``log_dir``: each call appends
    ``pid start end`` (``time.time()``, seconds) to ``log_dir/PID.log`` (busy intervals per process)."""

    name = "ode_design"

    def __init__(self, dim: int = DIM, span: float = 10.0, log_dir: str | None = None):
        super().__init__(dim, -1.0, 1.0)
        self.span, self.log_dir = float(span), log_dir

    def objective(self, X):
        t0 = time.time()
        flat = np.asarray(X, dtype=np.float64).reshape(-1, X.shape[-1])
        f = np.array([simulate(x, self.span) for x in flat]).reshape(X.shape[:-1])
        if self.log_dir:
            with open(os.path.join(self.log_dir, f"{os.getpid()}.log"), "a") as out:
                out.write(f"{os.getpid()} {t0!r} {time.time()!r}\n")
        return f


class PygmoUDP:
    """:class:`OdeDesign` as a pygmo user-defined problem (one design per ``fitness`` call)."""

    def __init__(self, dim: int = DIM, span: float = 10.0, log_dir: str | None = None):
        self.problem = OdeDesign(dim, span, log_dir)

    def fitness(self, x):
        """``[f]`` of one design."""
        return [float(self.problem.objective(np.asarray(x, dtype=np.float64)[None])[0])]

    def get_bounds(self):
        """The box ``[-1, 1]^D``."""
        return list(self.problem.lower), list(self.problem.upper)

    def get_name(self):
        """The problem's name."""
        return OdeDesign.name


def calibrate(cost_ms: float, n: int = 60, seed: int = 0, span: float | None = None) -> tuple[float, dict]:
    """The span whose mean cost per design on one core is ``cost_ms`` (a line through the costs at
    two spans), and the measured costs per design at it (``mean``, ``p10``, ``p90`` ms). Costs are
    the thread's CPU time (a loaded machine's time slicing left out); at least about 0.3 ms, the
    cost of a solve at the shortest span. ``span`` given (``--span``): that span, only measured, so
    that invocations on a machine whose speed drifts run the same workload (the calibrated span
    moved from 2.15 to 3.88 between three invocations at 5 ms on the 16-core device)."""
    X = np.random.default_rng(seed).uniform(-1.0, 1.0, (n, DIM))

    def costs(span):
        out = []
        for x in X:
            t = time.thread_time()
            simulate(x, span)
            out.append(1e3 * (time.thread_time() - t))
        return np.array(out)

    costs(1.0)  # warm-up (imports)
    if span is not None:
        c = costs(span)
        return span, {"mean": float(c.mean()), "p10": float(np.percentile(c, 10)), "p90": float(np.percentile(c, 90))}
    a, b = costs(1.0).mean(), costs(8.0).mean()
    span = max(0.01, 1.0 + (cost_ms - a) * 7.0 / (b - a))
    c = costs(span)
    for _ in range(3):  # the cost is not linear in the span near its floor: scale the span to the target
        if abs(c.mean() - cost_ms) < 0.05 * cost_ms:
            break
        span = max(0.01, span * cost_ms / c.mean())
        c = costs(span)
    return span, {"mean": float(c.mean()), "p10": float(np.percentile(c, 10)), "p90": float(np.percentile(c, 90))}


def busy(log_dir: Path, t0: float, t1: float, exclude_pid: int | None = None) -> list[float]:
    """Per process that evaluated in ``[t0, t1]`` (``time.time()``): its time inside the objective
    there over ``t1 - t0``."""
    out = []
    for path in sorted(log_dir.glob("*.log")):
        rows = [line.split() for line in path.read_text().splitlines()]
        if not rows or int(rows[0][0]) == exclude_pid:
            continue
        inside = sum(max(0.0, min(float(b), t1) - max(float(a), t0)) for _, a, b in rows)
        if inside > 0:
            out.append(inside / (t1 - t0))
    return out


class _Started(Callback):
    """Callback: when the loop starts (``time.time()``), after the actors are up."""

    t = None

    def on_start(self, info):
        self.t = time.time()


class _Moves(logging.Handler):
    """Counts the sync loop's moves of islands by measured cost (:class:`isles.islands.control.placement.Balancer`)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record):
        self.count += record.getMessage().startswith("islands spread over the actors")


def run_isles(mode: str, actors: int, span: float, seed: int, generations: int, budget: str = "shared") -> dict:
    """One isles run (Ray actors, this machine's local Ray); its figures. ``budget``: async mode's
    ``islands.async_budget`` (``shared``: the actors draw epochs from one pool; ``island``: fixed
    generations per island)."""
    from hydra import compose, initialize_config_dir  # noqa: PLC0415
    from hydra.utils import instantiate  # noqa: PLC0415
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415
    from omegaconf import OmegaConf  # noqa: PLC0415

    log_dir = Path(tempfile.mkdtemp(prefix="isles-expensive-"))
    overrides = [
        "+experiment=de_islands",
        "problem._target_=benchmarks.expensive_bench.OdeDesign",
        f"problem.dim={DIM}",
        f"+problem.span={span}",
        f"+problem.log_dir={log_dir}",
        f"algorithm.pop_size={POP}",
        "algorithm.F=0.5",
        "algorithm.CR=0.9",
        f"generations={generations}",
        f"islands.n={ISLANDS}",
        f"islands.migration_interval={INTERVAL}",
        f"islands.n_actors={actors}",
        f"islands.mode={mode}",
        f"islands.async_budget={budget}",
        "topology=ring",
        f"seed={seed}",
        "logger=none",
        "progress=false",
        "device=cpu",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=True)
    cfg.pop("hydra", None)
    started, moves = _Started(), _Moves()
    log = logging.getLogger("isles.islands.coordinator")
    level = log.level
    log.addHandler(moves)
    log.setLevel(logging.INFO)
    try:
        co = Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=[started], use_ray=True)
        result = co.run()
    finally:
        log.removeHandler(moves)
        log.setLevel(level)
    t1 = started.t + result.wall_s
    b = busy(log_dir, started.t, t1)
    return {
        "system": "isles",
        "mode": mode if mode == "sync" else f"async ({budget})",
        "workers": actors,
        "seed": seed,
        "wall_s": result.wall_s,
        "startup_s": result.startup_s,
        "busy": b,
        "evaluations": result.evaluations,
        "best_f": result.best_f,
        "moves": moves.count,
        # async: generations each actor's islands ran (the shared pool's shares; island: all alike)
        "group_generations": None if mode == "sync" else co.last_snapshot["async"]["gens"],
    }


def run_pygmo(workers: int, span: float, seed: int, generations: int) -> dict:
    """One pygmo archipelago run: 16 ``mp_island`` on a pool of ``workers`` processes."""
    import pygmo as pg  # noqa: PLC0415

    log_dir = Path(tempfile.mkdtemp(prefix="pygmo-expensive-"))
    pg.mp_island.init_pool(workers)
    if pg.mp_island.get_pool_size() != workers:
        pg.mp_island.resize_pool(workers)
    udp = PygmoUDP(DIM, span, str(log_dir))
    algo = pg.algorithm(pg.de(gen=INTERVAL, F=0.5, CR=0.9, variant=7, ftol=0.0, xtol=0.0))
    archi = pg.archipelago(t=pg.ring())
    for i in range(ISLANDS):
        archi.push_back(udi=pg.mp_island(), algo=algo, prob=pg.problem(udp), size=POP, seed=seed * 1000 + i)
    t0 = time.time()
    archi.evolve(-(-generations // INTERVAL))
    archi.wait_check()
    t1 = time.time()
    evals = sum(isl.get_population().problem.get_fevals() for isl in archi)
    return {
        "system": "pygmo",
        "mode": "archipelago",
        "workers": workers,
        "seed": seed,
        "wall_s": t1 - t0,
        "startup_s": None,
        "busy": busy(log_dir, t0, t1, exclude_pid=os.getpid()),
        "evaluations": int(evals),
        "best_f": float(np.min(archi.get_champions_f())),
    }


def timing_table(rows: list[dict]) -> str:
    """The Markdown table of the timing runs."""
    base = {(r["system"], r["mode"]): r["wall_s"] for r in rows if r["workers"] == 1}
    sync1 = base.get(("isles", "sync"))
    out = [
        "| system | mode | actors / processes | wall (s) | speedup vs same mode on 1 | speedup vs sync on 1 "
        "| busy mean | busy lowest | evaluations | best f |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        own = base.get((r["system"], r["mode"]))
        b, wall = r["busy"] or [0.0], r["wall_s"]
        out.append(
            f"| {r['system']} | {r['mode']} | {r['workers']} | {wall:.2f} "
            f"| {'-' if own is None else f'{own / wall:.2f}x'} "
            f"| {'-' if sync1 is None else f'{sync1 / wall:.2f}x'} "
            f"| {statistics.mean(b):.0%} | {min(b):.0%} | {r['evaluations']} | {r['best_f']:.6g} |"
        )
    return "\n".join(out)


def quality_table(rows: list[dict]) -> str:
    """The Markdown table of the seed runs: each system's best f over the seeds."""
    by = {}
    for r in rows:
        by.setdefault((r["system"], r["mode"], r["workers"]), []).append(r["best_f"])
    sync = next((v for k, v in by.items() if k[:2] == ("isles", "sync")), None)
    out = [
        "| system | mode | actors / processes | seeds | median best f | min | max | median within sync's spread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (system, mode, workers), fs in by.items():
        med = statistics.median(fs)
        within = "-" if sync is None else ("yes" if min(sync) <= med <= max(sync) else "no")
        out.append(
            f"| {system} | {mode} | {workers} | {len(fs)} | {med:.6g} | {min(fs):.6g} | {max(fs):.6g} | {within} |"
        )
    return "\n".join(out)


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cost-ms", type=float, default=5.0, help="mean cost of one design, ms (calibrated here)")
    ap.add_argument(
        "--span", type=float, default=None, help="the ODE's span as given, not calibrated (the same workload)"
    )
    ap.add_argument("--actors", default="1,2,4,8", help="isles CPU actor counts, comma-separated")
    ap.add_argument("--modes", default="sync,async", help="isles modes, comma-separated")
    ap.add_argument(
        "--async-budget",
        default="shared",
        help="async rows' islands.async_budget, comma-separated: shared (one pool the actors draw epochs "
        "from), island (fixed generations per island, the idle tail), or both: shared,island",
    )
    ap.add_argument("--pygmo", type=int, default=8, help="pygmo's pool processes (0: no pygmo)")
    ap.add_argument("--generations", type=int, default=GENERATIONS)
    ap.add_argument("--seeds", type=int, default=0, help="quality over seeds 0..N-1 at the largest actor count")
    ap.add_argument("--no-timing", action="store_true", help="only the seed runs")
    ap.add_argument("--json", help="write every run's figures here")
    a = ap.parse_args()
    actors = [int(x) for x in a.actors.split(",")]
    # each async budget is a mode of its own in the tables: ("async", "shared"), ("async", "island")
    modes = [(m, b) for m in a.modes.split(",") for b in (a.async_budget.split(",") if m == "async" else ["shared"])]
    from isles.app.ray_setup import init_ray  # noqa: PLC0415

    span, cost = calibrate(a.cost_ms, span=a.span)
    print(
        f"# OdeDesign: span {span:.3f}; cost per design on one core {cost['mean']:.2f} ms "
        f"(p10 {cost['p10']:.2f}, p90 {cost['p90']:.2f}); {ISLANDS} islands x {POP}, {a.generations} generations, "
        f"interval {INTERVAL}; {os.cpu_count()} CPUs",
        flush=True,
    )
    init_ray({"num_cpus": max(actors + [a.pygmo, 1]) + 1})
    timing, seeds = [], []
    if not a.no_timing:
        for mode, budget in modes:
            for n in actors:
                timing.append(run_isles(mode, n, span, 0, a.generations, budget))
                r = timing[-1]
                print(
                    f"  isles {r['mode']} {n}: {r['wall_s']:.2f} s, islands moved {r['moves']}x"
                    + ("" if r["group_generations"] is None else f", generations per actor {r['group_generations']}"),
                    file=sys.stderr,
                    flush=True,
                )
        if a.pygmo:
            timing.append(run_pygmo(a.pygmo, span, 0, a.generations))
        print("\n" + timing_table(timing), flush=True)
    if a.seeds:
        for seed in range(a.seeds):
            for mode, budget in modes:
                seeds.append(run_isles(mode, max(actors), span, seed, a.generations, budget))
            if a.pygmo:
                seeds.append(run_pygmo(a.pygmo, span, seed, a.generations))
            print(f"  seed {seed} done", file=sys.stderr, flush=True)
        print("\n" + quality_table(seeds), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"span": span, "cost": cost, "timing": timing, "seeds": seeds}, indent=1))


if __name__ == "__main__":
    from benchmarks.expensive_bench import main as _main  # the classes by their module's name (pickles)

    _main()
