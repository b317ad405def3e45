"""Quality table of a Hydra sweep read back from MLflow (seed 001 Tables 2-4 style).

    python run.py -m +experiment=cmepso problem=welded_beam,spring,speed_reducer \
        seed='range(20)' logger.experiment_name=cmepso-quality progress=false
    python benchmarks/quality_table.py --experiment cmepso-quality

For every problem: runs, best, median, mean, std, worst of the final fitness (float64
re-evaluation of each run's best), feasibility rate, and the gaps of best and median to f*.
Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from mlflow.tracking import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.islands.build import build_problem  # noqa: E402


def collect(client: MlflowClient, experiment: str, by: str = "problem._target_") -> dict:
    """``{(problem target, value of param by): [(final_best_f, feasible, wall_s, evaluations), ...]}``
    of the experiment's finished runs."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise SystemExit(f"no MLflow experiment named {experiment!r}")
    rows: dict = {}
    runs = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", max_results=5000)
    for r in runs:
        m, p = r.data.metrics, r.data.params
        if "final_best_f" not in m:
            continue
        rows.setdefault((p["problem._target_"], p.get(by, "")), []).append(
            (m["final_best_f"], m["final_feasible"] > 0, m.get("final_wall_s", np.nan), m.get("final_evaluations", np.nan)))
    return rows


def table(rows: dict) -> str:
    """Markdown table of the statistics per problem."""
    out = ["| problem | group | runs | best | median | mean | std | worst | feasible | best gap to f* | median gap | mean evaluations | mean wall s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (target, group), vals in sorted(rows.items()):
        problem = build_problem({"_target_": target})
        f = np.array([v[0] for v in vals])
        feas = np.array([v[1] for v in vals])
        wall = np.array([v[2] for v in vals])
        evals = np.array([v[3] for v in vals])
        fs = problem.f_star
        gap = (lambda x: f"{100 * (x - fs) / abs(fs):.4f} %") if fs else (lambda x: "")
        out.append(f"| {problem.name} | {group} | {len(f)} | {f.min():.7g} | {np.median(f):.7g} | {f.mean():.7g} | {f.std(ddof=1) if len(f) > 1 else 0:.3g} "
                   f"| {f.max():.7g} | {feas.sum()}/{len(f)} | {gap(f.min())} | {gap(np.median(f))} | {np.nanmean(evals):,.0f} | {np.nanmean(wall):.2f} |")
    return "\n".join(out)


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", default="cmepso-quality")
    ap.add_argument("--tracking-uri", default=None, help="default: MLflow's default (sqlite:///mlflow.db here)")
    ap.add_argument("--by", default="problem._target_", help="a second grouping parameter, e.g. topology._target_")
    a = ap.parse_args()
    print(table(collect(MlflowClient(tracking_uri=a.tracking_uri), a.experiment, a.by)))


if __name__ == "__main__":
    main()
