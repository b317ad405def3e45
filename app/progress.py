"""What a person sees while a run goes and when it ends (rich console output)."""

from __future__ import annotations

import sys

import numpy as np
from isles.app.report import end_report, verdict
from isles.islands.control.callbacks import Callback
from isles.islands.control.placement import where
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


class ConsoleProgress(Callback):
    """Coordinator callback: where the islands run, then a progress bar over generations.

    On a terminal the bar redraws in place; otherwise (CI logs, files) it prints a line every
    ~10% of the run.
    """

    def __init__(self, problem, console: Console | None = None):
        self.problem = problem
        self.console = console or Console(stderr=False)
        self.progress = None
        self.task = None
        self._next_line = 0.0

    def on_start(self, info: dict) -> None:
        """Print the placement (group, device, islands) and start the bar."""
        for i, g in enumerate(info["groups"]):
            ids = g["island_ids"]
            self.console.print(f"group {i}: islands {ids[0]}..{ids[-1]} on {where(g)}")
        budget = info.get("max_evaluations")  # the generations that reach it (islands/control/budget.py)
        self.console.print(
            f"actors ready in {info['startup_s']:.1f} s; {info['generations']} generations"
            + (f" (stop.max_evaluations={int(budget):,})" if budget is not None else "")
        )
        self.total = info["generations"]
        if self.console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[best]}"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.task = self.progress.add_task("generations", total=self.total, best="")
            self.progress.start()

    def on_epoch(self, rec) -> None:
        """Advance the bar; show the best fitness and its violation."""
        best = f"best f={rec.best_f:.8g}" + ("" if rec.best_v <= 0 else f" (violation {rec.best_v:.3g})")
        if self.progress is not None:
            self.progress.update(self.task, completed=rec.generation, best=best)
        elif rec.generation >= self._next_line or rec.generation >= self.total:
            self.console.print(
                f"generation {rec.generation}/{self.total}  {best}  {rec.evaluations} evals  {rec.wall_s:.1f} s"
            )
            self._next_line = rec.generation + max(1, self.total // 10)

    def on_end(self, result) -> None:
        """Stop the bar."""
        if self.progress is not None:
            self.progress.stop()


def _report(problem, result) -> dict:
    """The run's ``best_solution.json`` record where the job made it (``result.solution``), else
    :func:`isles.app.report.end_report` of the best x."""
    return result.solution if getattr(result, "solution", None) is not None else end_report(problem, result)


def result_line(result, problem, run_id: str | None) -> str:
    """The run's result in one line (what ``progress=false`` prints, so a finished result is
    never lost): ``isles: best f=... LABEL (float64) x=[...] evaluations ... wall ... s
    [solution=PATH] [mlflow_run=...]``, LABEL as :func:`isles.app.report.verdict` (``feasible``,
    ``f not finite``, ``INFEASIBLE (f not finite)`` or ``INFEASIBLE``); x is cut to 6 variables,
    the full x is in the ``best_solution.json`` named. Where the problem cannot re-evaluate the best x
    (:func:`isles.app.report.end_report`), ``f`` is the run's own, marked ``(run)``, and a
    second line says what was not computed and why."""
    rep = _report(problem, result)
    x = ", ".join(f"{v:.10g}" for v in rep["x"][:6]) + (", ..." if len(rep["x"]) > 6 else "")
    if rep.get("not_computed"):
        head = f"isles: best f={rep['run_best_f']:.10g} (run)"
    else:
        head = f"isles: best f={rep['f']:.10g} {verdict(rep)} (float64)"
    line = f"{head} x=[{x}] evaluations={result.evaluations} wall={result.wall_s:.2f}s"
    line += f" solution={result.solution_path}" if getattr(result, "solution_path", None) else ""
    line += f" mlflow_run={run_id}" if run_id else ""
    return line + (f"\nisles: not computed: {rep['not_computed']}" if rep.get("not_computed") else "")


def print_summary(result, problem, run_id: str | None, console: Console | None = None) -> dict:
    """Print the end-of-run summary (float64 re-evaluation of the best) and return the report
    (:func:`isles.app.report.end_report`: what the problem could not re-evaluate is one line
    saying why, and ``f`` is then the run's own)."""
    console = console or Console()
    rep = _report(problem, result)
    path = getattr(result, "solution_path", None)
    table = Table(title=f"best solution: {problem.name}", show_header=True)
    table.add_column("variable")
    table.add_column("value", justify="right")
    shown = rep["x"] if len(rep["x"]) <= 12 else rep["x"][:10]
    for i, x in enumerate(shown):
        table.add_row(f"x{i + 1}", f"{x:.10g}")
    if len(shown) < len(rep["x"]):
        table.add_row("...", f"({len(rep['x']) - len(shown)} more: {path or 'best_solution.json in MLflow'})")
    console.print(table)
    own = rep.get("not_computed") is not None  # the problem could not re-evaluate x: the run's f
    if own:
        console.print(f"not computed: {rep['not_computed']}", markup=False, highlight=False, soft_wrap=True)
    f = rep["run_best_f"] if own else rep["f"]
    f_star = getattr(problem, "f_star", None)
    gap = ""
    if f_star is not None and f_star != 0:
        gap = f"  (f* = {f_star:.10g}, gap {100 * (f - f_star) / abs(f_star):+.5f} %)"
    console.print(f"f = {f:.10g}{' (best fitness in the run)' if own else ''}{gap}")
    if rep["g"]:  # None when not computed
        n_eq = rep.get("g_type", []).count("equality")
        eqs = f"; the last {n_eq}: h = 0, |h| <= {rep['eq_tol']:g}" if n_eq else ""
        console.print("g = [" + ", ".join(f"{g:.4g}" for g in rep["g"]) + f"]  (g <= 0 feasible{eqs})")
    if rep["feasible"] is not None:
        status = f"[green]{verdict(rep)}[/green]" if rep["feasible"] else f"[red]{verdict(rep)}[/red]"
        console.print(f"{status} (max normalised violation {rep['max_normalised_violation']:.3g}, float64)")
    us = sorted(h.us_per_generation for h in result.history)[len(result.history) // 2]
    console.print(
        f"evaluations {result.evaluations:,}  wall time {result.wall_s:.2f} s "
        f"(+ {result.startup_s:.1f} s start-up)  {result.evaluations / max(result.wall_s, 1e-12):,.0f} evals/s "
        f"(steady state {result.steady_evals_per_s:,.0f})  "
        f"{us:.1f} us/generation (device, median epoch)  NaN evaluations {result.nan_evals}"
    )
    if result.payoff_evaluations:  # a min-max algorithm (CDE): its pair payoffs L(x, y), apart
        console.print(f"payoff evaluations {result.payoff_evaluations:,} (pairs L(x, y))")
    paths = sorted({p for p in result.gpu_paths.values() if p and p != "numpy"})
    if paths:  # the kernels' path: a GPU's, or the CPU's host build ("host kernel")
        on_gpu = any(str(d) != "cpu" for d in result.devices.values())
        console.print(("GPU" if on_gpu else "CPU") + " path: " + "; ".join(paths))
    if result.hit_generations is not None:
        h = np.asarray(result.hit_generations)
        ok = h[h >= 0]
        line = f"stop target reached by {ok.size}/{h.size} islands"
        if ok.size:
            line += f", after {ok.mean():.1f} ± {ok.std(ddof=1) if ok.size > 1 else 0.0:.1f} generations (mean ± sd)"
        console.print(line)
    if result.best_genome is not None and np.asarray(result.best_genome).dtype == np.uint32:
        words = np.asarray(result.best_genome).reshape(-1)
        hexs = " ".join(f"{int(w):08x}" for w in words[:8]) + (" ..." if words.size > 8 else "")
        console.print(f"best genome ({words.size} words, hex): {hexs}  decoded above as x")
    # every migration's totals (the result keeps only a bounded log of them)
    count, accepted = getattr(result, "migration_count", 0), getattr(result, "migrations_accepted", 0)
    if not count and result.migrations:  # a result made without the loops' totals: what it holds
        count, accepted = len(result.migrations), sum(m[3] for m in result.migrations)
    if count:
        console.print(f"migrations: {count} transfers, {accepted} immigrants accepted")
    if path:
        console.print(
            f"best solution (full precision): {path}  (python -m isles show {path})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if run_id:
        console.print(f"MLflow run {run_id}  (review: mlflow ui, then open http://127.0.0.1:5000)")
    sys.stdout.flush()
    return rep
