"""Plots a person would rather look at than read: convergence of a run."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def convergence_figure(history: list, problem=None):
    """Convergence plot of a run: best fitness per island and overall, and the gap to f*.

    Args:
        history: :class:`isles.islands.results.EpochRecord` objects (``generation``, ``best_f``,
            ``best_v``, ``island_best_f (n,)``; each plug-in metric, e.g. the master swarm's
            ``master_best_f``, a dashed line; a mixed run's ``group_NAME_best_f``, one solid line per
            group, :class:`isles.islands.mixed.GroupBooks`).
        problem: optional problem; with a known ``f_star`` the right panel shows the relative gap
            ``(f - f*) / max(|f*|, 1e-12)`` on a log scale, otherwise the best's total violation.

    Returns:
        a matplotlib ``Figure`` (two panels).
    """
    gen = np.array([r.generation for r in history])
    best = np.array([r.best_f for r in history])
    viol = np.array([r.best_v for r in history])
    islands = np.array([r.island_best_f for r in history])
    # fixed margins: a layout engine would draw the figure twice when it is saved (0.6 s of the
    # tracking process's end of run)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.12, top=0.86, wspace=0.22)
    for i in range(islands.shape[1]):
        ax1.plot(gen, islands[:, i], lw=0.7, alpha=0.5, color="tab:blue")
    for name in history[-1].plugin_metrics if history else ():  # e.g. the master swarm's best
        ax1.plot(gen, [r.plugin_metrics.get(name, np.nan) for r in history], lw=1.2, ls="--", label=name)
    for name in history[-1].group_metrics if history else ():  # a mixed run's groups: one line each
        if group := re.fullmatch(r"group_(.+)_best_f", name):
            values = [r.group_metrics.get(name, np.nan) for r in history]
            ax1.plot(gen, values, lw=1.6, label=f"group {group[1]}", zorder=3)
    ax1.plot(gen, best, lw=2, color="black", label="best of the run")
    if len(best) and np.all(np.isfinite(best)):
        lo, hi = (
            np.nanmin(best),
            np.nanpercentile(islands[np.isfinite(islands)], 90) if np.isfinite(islands).any() else None,
        )
        if hi is not None and hi > lo:
            ax1.set_ylim(lo - 0.05 * (hi - lo), hi)
    ax1.set_xlabel("generation")
    ax1.set_ylabel("best fitness f (island bests in blue)")
    ax1.legend(loc="upper right")
    ax1.grid(alpha=0.3)
    f_star = getattr(problem, "f_star", None)
    if f_star is not None:
        gap = np.abs(best - f_star) / max(abs(f_star), 1e-12) if f_star != 0 else np.abs(best - f_star)
        gap = np.where(viol > 0, np.nan, np.maximum(gap, 1e-16))
        ax2.semilogy(gen, gap, color="tab:red")
        ax2.set_ylabel("relative gap to f*" if f_star != 0 else "|f - f*|")
        ax2.set_title(f"f* = {f_star:.10g}", fontsize=10)
    else:
        ax2.plot(gen, viol, color="tab:red")
        ax2.set_ylabel("total violation of the best")
    ax2.set_xlabel("generation")
    ax2.grid(alpha=0.3, which="both")
    name = getattr(problem, "name", "")
    fig.suptitle(f"isles convergence: {name}")
    return fig
