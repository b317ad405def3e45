"""CMEPSO solution quality on the seed-001 engineering problems, NumPy, one process per run.

Runs the runtime's CMEPSO in one process (``+experiment=cmepso``, :func:`benchmarks.cmepso_bench.runtime_cmepso`;
seed 001 section 6 defaults: 1000 iterations, 10 slave swarms of 40 particles, 5 replicas, master of 10 with
c3 = 2.02) over seeds and prints, per
problem, best / median / mean / std / worst of the final best ``f`` and the feasible rate
(float64 check of :func:`isles.problems.constraints.feasibility_report`, tolerance 1e-6), plus the
relative gaps to f* used by the project's acceptance target (best within 0.01 %, median within
0.5 %, all feasible).

    python benchmarks/cmepso_quality_local.py --seeds 20 --workers 2
    python benchmarks/cmepso_quality_local.py --problems spring --vmax 0 --cor 0.22
    python benchmarks/cmepso_quality_local.py --set cor_mode=range vmax_final=0.5   # ablations

Relative gaps (f - f*)/f* over seeds 0..19 (best / median; all runs feasible), measured with the former
one-process CMEPSO loop (``run_cmepso``, removed by issue 36; its master started from the slaves'
initial bests, the runtime's from their bests after the first epoch):

| variant                                   | welded_beam     | spring          | speed_reducer   |
|-------------------------------------------|-----------------|-----------------|-----------------|
| defaults (overshoot COR, clamp 0.5->1e-6) | 1.2e-6 / 1.8e-6 | 3.5e-8 / 4.0e-6 | 3.2e-5 / 1.5e-4 |
| cor_mode=range                            | 1.0e-6 / 2.0e-6 | 2.0e-7 / 5.1e-6 | 5.9e-4 / 1.1e-3 |
| constant clamp 0.5 (vmax_final=0.5)       | 1.1e-4 / 2.1e-4 | 4.1e-5 / 1.3e-4 | 1.5e-4 / 3.2e-4 |
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.pso.epso import EPSO  # noqa: E402
from isles.problems.constraints import feasibility_report  # noqa: E402
from isles.problems.registry import make_problem  # noqa: E402

from benchmarks.cmepso_bench import runtime_cmepso  # noqa: E402

PROBLEMS = ("welded_beam", "spring", "speed_reducer")


def one_run(args):
    """One CMEPSO run: ``(problem, seed, overrides, iterations, slaves)`` -> ``(f, feasible, secs)``."""
    name, seed, overrides, iterations, n_slaves = args
    result, secs = runtime_cmepso(name, seed, iterations, "cpu", n_slaves, params=sorted(overrides.items()))
    rep = feasibility_report(make_problem(name), np.asarray(result.best_x))
    return rep["f"], rep["feasible"], secs


def main(argv=None):
    """Parse arguments, run every (problem, seed) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--slaves", type=int, default=10)
    ap.add_argument("--vmax", type=float, default=None, help="vmax_fraction (default: EPSO's)")
    ap.add_argument("--cor", type=float, default=None, help="COR (default: EPSO's)")
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help="other EPSOParams fields of slaves and master, e.g. vmax_final=0.5 cor_mode=range",
    )
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    over = {k: v for k, v in (("vmax_fraction", a.vmax), ("cor", a.cor)) if v is not None}
    for kv in a.set:
        k, v = kv.split("=", 1)
        try:
            over[k] = int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            over[k] = v  # e.g. cor_mode=range
    print(
        f"EPSO params: {EPSO(**over).params}; iterations={a.iterations}, slaves={a.slaves}, "
        f"seeds {a.first_seed}..{a.first_seed + a.seeds - 1}"
    )
    hdr = (
        f"{'problem':14s} {'best':>14s} {'median':>14s} {'mean':>14s} {'std':>10s} {'worst':>14s} "
        f"{'feas':>6s} {'best gap':>9s} {'med gap':>9s} {'s/run':>6s}"
    )
    rows = []
    with ProcessPoolExecutor(a.workers) as pool:
        for name in a.problems:
            jobs = [(name, sd, over, a.iterations, a.slaves) for sd in range(a.first_seed, a.first_seed + a.seeds)]
            res = list(pool.map(one_run, jobs))
            f = np.array([r[0] for r in res])
            feas = np.array([r[1] for r in res])
            fs = make_problem(name).f_star
            rows.append(
                f"{name:14s} {f.min():14.10g} {np.median(f):14.10g} {f.mean():14.10g} {f.std():10.3g} "
                f"{f.max():14.10g} {feas.mean():6.0%} {(f.min() - fs) / fs:9.2e} "
                f"{(np.median(f) - fs) / fs:9.2e} {np.mean([r[2] for r in res]):6.1f}"
            )
            print(rows[-1] if len(rows) > 1 else hdr + "\n" + rows[-1], flush=True)


if __name__ == "__main__":
    main()
