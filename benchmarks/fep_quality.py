"""FEP against CEP: mean and standard deviation of the final best over 20 runs (issue 7).

The 20 runs are 20 unconnected islands of one batch, exactly what one actor of
``python run.py +experiment=fep_runs`` evolves (one batched generation for all runs; island ``i``
draws stream ``i`` of the counter RNG, so every run is independent and reproducible). The final
best of a run is the best individual of its island's last population.

Settings:

* ``seed``: seed 003 section 5, f1-f5 of its Table 1 at N = 32 (``conf/problem/fep_f*.yaml``),
  mu = 400, q = 10, 2000 generations;
* ``yao``: Yao, Liu & Lin 1999 (IEEE TEC 3(2)) section IV, n = 30, mu = 100, q = 10, eta = 3.0, the
  paper's generation budgets (Tables II-III: sphere f1 1500, Schwefel 1.2 f3 5000, Rosenbrock
  f5 20000, Schwefel 2.26 f8 9000, Rastrigin f9 5000), with the paper's published mean best values
  beside ours (:data:`YAO_MEANS`).

Usage (NumPy; the CuPy path has the same semantics)::

    python benchmarks/fep_quality.py --settings seed
    python benchmarks/fep_quality.py --settings yao
    python benchmarks/fep_quality.py --settings yao --eta-min 1e-3     # Liang et al.'s lower bound
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.algorithms.core.backend import get_xp, to_host  # noqa: E402
from isles.algorithms.core.base import Context  # noqa: E402
from isles.algorithms.core.random import CounterRNG  # noqa: E402
from isles.algorithms.ep.fep import FEP  # noqa: E402
from isles.problems.benchmarks import Rastrigin, Rosenbrock, Schwefel12, Schwefel226, Sphere  # noqa: E402
from isles.problems.constraints import Evaluator  # noqa: E402

#: seed 003 Table 1: (label, class, N, lower, upper)
SEED_PROBLEMS = [
    ("f1 sphere", Sphere, 32, -100.0, 100.0),
    ("f2 Schwefel 1.2", Schwefel12, 32, -100.0, 100.0),
    ("f3 Rosenbrock", Rosenbrock, 32, -30.0, 30.0),
    ("f4 Schwefel 2.26", Schwefel226, 32, -500.0, 500.0),
    ("f5 Rastrigin", Rastrigin, 32, -5.12, 5.12),
]
#: Yao et al. 1999: (label, class, n, lower, upper, generations)
YAO_PROBLEMS = [
    ("sphere (Yao f1)", Sphere, 30, -100.0, 100.0, 1500),
    ("Schwefel 1.2 (Yao f3)", Schwefel12, 30, -100.0, 100.0, 5000),
    ("Rosenbrock (Yao f5)", Rosenbrock, 30, -30.0, 30.0, 20000),
    ("Schwefel 2.26 (Yao f8)", Schwefel226, 30, -500.0, 500.0, 9000),
    ("Rastrigin (Yao f9)", Rastrigin, 30, -5.12, 5.12, 5000),
]
#: Yao, Liu & Lin 1999, Table II (f1, f3, f5) and Table III (f8, f9): mean best over 50 runs,
#: (FEP, CEP)
YAO_MEANS = {
    "sphere (Yao f1)": (5.7e-4, 2.2e-4),
    "Schwefel 1.2 (Yao f3)": (1.6e-2, 5.0e-2),
    "Rosenbrock (Yao f5)": (5.06, 6.17),
    "Schwefel 2.26 (Yao f8)": (-12554.5, -7917.1),
    "Rastrigin (Yao f9)": (4.6e-2, 89.0),
}


def final_best(
    problem, mutation: str, mu: int, q: int, generations: int, runs: int, seed: int, eta_min: float, device: str, dtype
) -> tuple[np.ndarray, float]:
    """Final best ``f`` of ``runs`` independent runs (one batch of unconnected islands) and the
    wall time in seconds."""
    xp = get_xp(device)
    ctx = Context(xp, dtype, Evaluator(problem), CounterRNG(xp, seed, range(runs)))
    alg = FEP(pop_size=mu, q=q, mutation=mutation, eta_min=eta_min)
    t0 = time.perf_counter()
    state = alg.run(ctx, alg.init(ctx), generations)
    best = to_host(state["f"].min(axis=1))
    return best, time.perf_counter() - t0


def main(argv=None) -> int:
    """Run the table; print Markdown to stdout (progress to stderr), optionally save JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settings", choices=("seed", "yao"), default="seed")
    ap.add_argument("--mutations", default="cauchy,gaussian")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eta-min", type=float, default=0.0)
    ap.add_argument("--generations", type=int, default=None, help="override every budget (smoke tests)")
    ap.add_argument("--only", default=None, help="comma-separated row numbers (0-based)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    muts = a.mutations.split(",")
    if a.settings == "seed":
        rows = [(lab, cls(dim, lo, hi), 2000) for lab, cls, dim, lo, hi in SEED_PROBLEMS]
        mu = 400
    else:
        rows = [(lab, cls(dim, lo, hi), g) for lab, cls, dim, lo, hi, g in YAO_PROBLEMS]
        mu = 100
    if a.only:
        keep = {int(k) for k in a.only.split(",")}
        rows = [r for i, r in enumerate(rows) if i in keep]
    out = []
    for lab, prob, gens in rows:
        gens = a.generations or gens
        rec = {"problem": lab, "generations": gens, "f_star": prob.f_star, "mu": mu}
        for m in muts:
            best, wall = final_best(prob, m, mu, 10, gens, a.runs, a.seed, a.eta_min, a.device, np.dtype(a.dtype))
            rec[m] = {
                "mean": float(best.mean()),
                "std": float(best.std(ddof=1)),
                "min": float(best.min()),
                "max": float(best.max()),
                "wall_s": wall,
            }
            print(
                f"{lab} {m}: mean {best.mean():.4g} std {best.std(ddof=1):.3g} ({wall:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        out.append(rec)
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "rows": out}, indent=1))
    head = "| problem | generations | " + " | ".join(f"{m} mean (std)" for m in muts)
    if a.settings == "yao":
        head += " | Yao et al. FEP | Yao et al. CEP"
    print(head + " |")
    print("|" + "---|" * (2 + len(muts) + (2 if a.settings == "yao" else 0)))
    for rec in out:
        cells = [rec["problem"], str(rec["generations"])]
        cells += [f"{rec[m]['mean']:.4g} ({rec[m]['std']:.2g})" for m in muts]
        if a.settings == "yao":
            cells += [f"{v:g}" for v in YAO_MEANS[rec["problem"]]]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
