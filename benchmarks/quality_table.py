"""Quality table of a Hydra sweep read back from MLflow (seed 001 Tables 2-4 style).

    python run.py -m +experiment=cmepso problem=welded_beam,spring,speed_reducer \
        seed='range(20)' logger.experiment_name=cmepso-quality progress=false
    python benchmarks/quality_table.py --experiment cmepso-quality
    python benchmarks/quality_table.py --experiment cmepso-quality --sweep latest   # the last sweep only
    python benchmarks/quality_table.py --experiment cmepso-quality --parent RUN_ID  # one sweep's children

For every problem: runs, best, median, mean, std, worst of the final fitness (float64
re-evaluation of each run's best), feasibility rate, and the gaps of best and median to f*.
Prints a Markdown table. Reads every finished run of the experiment, or one sweep's: the children
of a parent run (``--parent``), or the runs tagged ``sweep=ID`` (``--sweep``; ``latest`` is the
sweep of the experiment's newest parent run); see ``app/sweep_runs.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from mlflow.tracking import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isles.app.sweep_runs import PARENT_TAG, SWEEP_TAG  # noqa: E402
from isles.islands.config.build import build_problem  # noqa: E402


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def latest_sweep(client: MlflowClient, exp_id: str) -> str:
    """The sweep id of the experiment's newest parent run.

    Raises:
        SystemExit: the experiment has no sweep."""
    runs = client.search_runs(
        [exp_id], f"tags.{PARENT_TAG} = 'true'", order_by=["attributes.start_time DESC"], max_results=1
    )
    if not runs:
        raise SystemExit("--sweep latest: the experiment has no sweep (no run tagged sweep_parent=true)")
    return runs[0].data.tags[SWEEP_TAG]


def collect(
    client: MlflowClient,
    experiment: str,
    by: str = "problem._target_",
    parent: str | None = None,
    sweep: str | None = None,
) -> dict:
    """``{(problem target, value of param by): [(final_best_f, feasible, wall_s, evaluations), ...]}``
    of the experiment's finished runs: all of them, the children of run ``parent``, or the runs
    of sweep ``sweep`` (``"latest"``: :func:`latest_sweep`).

    Raises:
        SystemExit: no such experiment, or no sweep for ``--sweep latest``."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise SystemExit(f"no MLflow experiment named {experiment!r}")
    query = "attributes.status = 'FINISHED'"
    if parent:
        query += f" AND tags.`mlflow.parentRunId` = {_quoted(parent)}"
    elif sweep:
        sweep = latest_sweep(client, exp.experiment_id) if sweep == "latest" else sweep
        query += f" AND tags.{SWEEP_TAG} = {_quoted(sweep)}"
    rows: dict = {}
    runs = client.search_runs([exp.experiment_id], query, max_results=5000)
    for r in runs:
        m, p = r.data.metrics, r.data.params
        if "final_best_f" not in m:
            continue
        rows.setdefault((p["problem._target_"], p.get(by, "")), []).append(
            (
                m["final_best_f"],
                m["final_feasible"] > 0,
                m.get("final_wall_s", np.nan),
                m.get("final_evaluations", np.nan),
            )
        )
    return rows


def table(rows: dict) -> str:
    """Markdown table of the statistics per problem."""
    out = [
        "| problem | group | runs | best | median | mean | std | worst | feasible | best gap to f* | median gap | mean evaluations | mean wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (target, group), vals in sorted(rows.items()):
        problem = build_problem({"_target_": target})
        f = np.array([v[0] for v in vals])
        feas = np.array([v[1] for v in vals])
        wall = np.array([v[2] for v in vals])
        evals = np.array([v[3] for v in vals])
        fs = problem.f_star
        gap = (lambda x, fs=fs: f"{100 * (x - fs) / abs(fs):.4f} %") if fs else (lambda x: "")
        out.append(
            f"| {problem.name} | {group} | {len(f)} | {f.min():.7g} | {np.median(f):.7g} | {f.mean():.7g} | {f.std(ddof=1) if len(f) > 1 else 0:.3g} "
            f"| {f.max():.7g} | {feas.sum()}/{len(f)} | {gap(f.min())} | {gap(np.median(f))} | {np.nanmean(evals):,.0f} | {np.nanmean(wall):.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", default="cmepso-quality")
    ap.add_argument("--tracking-uri", default=None, help="default: MLflow's default (sqlite:///mlflow.db here)")
    ap.add_argument("--by", default="problem._target_", help="a second grouping parameter, e.g. topology._target_")
    one = ap.add_mutually_exclusive_group()
    one.add_argument("--parent", default=None, help="only the children of this parent run (a sweep)")
    one.add_argument("--sweep", default=None, help="only the runs of this sweep (tag sweep=ID), or latest")
    a = ap.parse_args()
    print(table(collect(MlflowClient(tracking_uri=a.tracking_uri), a.experiment, a.by, a.parent, a.sweep)))


if __name__ == "__main__":
    main()
