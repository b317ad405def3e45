"""Metrics per group of a mixed archipelago (``groups``, docs/mixed_islands.md), booked from each
epoch's record: the first callback of a mixed run's job (:func:`isles.app.job.run_job`) adds them to
the record's ``plugin_metrics``, so ``history.csv``, MLflow and the convergence plot
(:func:`isles.app.plots.convergence_figure`: one line per group) all have them."""

from __future__ import annotations

import numpy as np

from isles.islands.control.callbacks import Callback

#: the metrics of each group ``NAME`` (``group_NAME_<metric>``), see :class:`GroupBooks`
METRICS = ("best_f", "improvement_share", "migrants_sent", "migrants_taken")


def group_metric(name: str, metric: str) -> str:
    """The record's key of ``metric`` (one of :data:`METRICS`) of group ``name``: ``group_NAME_metric``."""
    return f"group_{name}_{metric}"


class GroupBooks(Callback):
    """A callback (``on_epoch``) that adds each group's metrics to the epoch's record, cumulative
    over the run (from the first epoch this process sees: a resumed run's books start at the resume).

    * ``group_NAME_best_f``: the best ``f`` any island of the group has had (feasible bests first, by
      Deb's rules on the islands' bests);
    * ``group_NAME_improvement_share``: of the epochs after the first whose end improved the run's
      best, the fraction whose new best is on an island of the group (0 before any);
    * ``group_NAME_migrants_sent``, ``..._taken``: migrants accepted anywhere from the group's
      islands, and accepted by the group's islands (a plug-in's migrants are taken, sent by none).

    Args:
        groups: the run's groups as the schema normalised them (``[{name, islands, ...}]``, in order).
    """

    def __init__(self, groups: list):
        self.names = [str(g["name"]) for g in groups]
        self.of = np.repeat(np.arange(len(groups)), [int(g["islands"]) for g in groups])  # island -> group
        n = len(groups)
        self.best = np.full(n, np.inf)
        self.best_v = np.full(n, np.inf)
        self.improved = np.zeros(n, dtype=np.int64)
        self.sent = np.zeros(n, dtype=np.int64)
        self.taken = np.zeros(n, dtype=np.int64)
        self.run_best = None  # (v, f) of the run's best after the last epoch seen

    def on_epoch(self, rec) -> None:
        """Book ``rec`` (:class:`isles.islands.results.EpochRecord`) and add the groups' metrics to
        its ``plugin_metrics``."""
        f, v = np.asarray(rec.island_best_f, dtype=np.float64), np.asarray(rec.island_best_v, dtype=np.float64)
        for g in range(len(self.names)):
            mine = self.of == g
            i = np.lexsort((f[mine], v[mine]))[0]  # the group's best island now (Deb: v, then f)
            if (v[mine][i], f[mine][i]) < (self.best_v[g], self.best[g]):
                self.best_v[g], self.best[g] = v[mine][i], f[mine][i]
        now = (float(rec.best_v), float(rec.best_f))
        if self.run_best is not None and now < self.run_best:
            self.improved[self.of[np.lexsort((f, v))[0]]] += 1
        self.run_best = now if self.run_best is None else min(self.run_best, now)
        for _, src, dst, accepted, _ in rec.migrations:
            if 0 <= src < len(self.of):
                self.sent[self.of[src]] += accepted
            self.taken[self.of[dst]] += accepted
        total = max(1, int(self.improved.sum()))
        for g, name in enumerate(self.names):
            rec.plugin_metrics.update(
                {
                    group_metric(name, "best_f"): float(self.best[g]),
                    group_metric(name, "improvement_share"): float(self.improved[g]) / total,
                    group_metric(name, "migrants_sent"): float(self.sent[g]),
                    group_metric(name, "migrants_taken"): float(self.taken[g]),
                }
            )
