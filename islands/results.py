"""What a run hands back: the :class:`RunResult`, the epoch records (:class:`EpochRecord`, typed)
given to the callbacks, the bounded logs the loops keep them in (:class:`RecordLog`), and the
merge of the island groups' summaries into island-ordered arrays (host values)."""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field, fields

import numpy as np
from isles.problems.constraints import argbest

#: items a :class:`RecordLog` keeps whole at the end of a run (the latest), and the most it keeps
#: of the items before them (an evenly thinned sample, the first included)
LOG_TAIL = 500
LOG_SAMPLE = 500


class RecordLog:
    """A run's per-epoch items (epoch records, or migration tuples) as the loops keep them in
    memory: bounded whatever the number of epochs. Every item is kept up to
    ``tail + sample`` items; after that the latest ``tail`` items are kept whole and the items
    before them are thinned to an even sample of at most ``sample`` items (every ``stride``-th,
    the first item included; ``stride`` doubles each time the sample fills). Every item is handed
    to the callbacks as it is made (the job writes them to ``history.csv`` and ``migrations.csv``,
    :class:`isles.app.run_files.HistoryFiles`); this log is what the end-of-run summary and the convergence
    plot read.

    Args:
        tail: items kept whole at the end (:data:`LOG_TAIL`).
        sample: most items kept of those before the tail (:data:`LOG_SAMPLE`; >= 2).
        tally: index of an int field summed over every item ever appended (:attr:`tallied`),
            e.g. 3, a migration's ``accepted``; ``None`` for none.

    Attributes:
        total: items ever appended (kept or not).
        tallied: the sum of field ``tally`` over every item ever appended (0 without ``tally``).
    """

    def __init__(self, items=(), tail: int = LOG_TAIL, sample: int = LOG_SAMPLE, tally: int | None = None):
        self.tail, self.sample, self.tally = int(tail), max(2, int(sample)), tally
        self.total = self.tallied = 0
        self.stride = 1  # of the thinned sample
        self._thinned = 0  # items that left the tail (the sample keeps every stride-th of them)
        self._sampled: list = []
        self._recent: deque = deque()
        self.extend(items)

    def append(self, item) -> None:
        """Add ``item`` (the latest)."""
        self.total += 1
        if self.tally is not None:
            self.tallied += int(item[self.tally])
        self._recent.append(item)
        if self.total <= self.tail + self.sample:  # every item kept so far
            return
        while len(self._recent) > self.tail:
            old = self._recent.popleft()
            if self._thinned % self.stride == 0:
                self._sampled.append(old)
            self._thinned += 1
            if len(self._sampled) > self.sample:  # every other one: the same rule with twice the stride
                self._sampled = self._sampled[::2]
                self.stride *= 2

    def extend(self, items) -> None:
        """Add ``items`` in order."""
        for item in items:
            self.append(item)

    def copy(self) -> RecordLog:
        """A copy (the items themselves are shared: records are never changed after they are made)."""
        new = RecordLog(tail=self.tail, sample=self.sample, tally=self.tally)
        new.total, new.tallied, new.stride, new._thinned = self.total, self.tallied, self.stride, self._thinned
        new._sampled, new._recent = list(self._sampled), deque(self._recent)
        return new

    @classmethod
    def of(cls, items, tally: int | None = None) -> RecordLog:
        """``items`` as a :class:`RecordLog`: a copy of a log, or a log of a list's items (a
        checkpoint written before the logs were bounded)."""
        return items.copy() if isinstance(items, RecordLog) else cls(items, tally=tally)

    def to_list(self) -> list:
        """The kept items, oldest first."""
        return self._sampled + list(self._recent)

    def __iter__(self):
        return iter(self.to_list())

    def __len__(self) -> int:
        return len(self._sampled) + len(self._recent)

    def __getitem__(self, i):
        return self.to_list()[i]


def migration_log(items=()) -> RecordLog:
    """A :class:`RecordLog` of ``(epoch, src, dst, accepted, best f moved)`` migrations that
    tallies the immigrants accepted (:attr:`RecordLog.tallied`): a copy of a log, or a log of
    ``items`` (a checkpoint's list of before the logs)."""
    return RecordLog.of(items, tally=3)


#: where an :class:`EpochRecord` field goes (its ``metadata["sinks"]``): a column of the run's
#: ``history.csv`` (:mod:`isles.app.run_files`), an MLflow metric per step (:mod:`isles.app.tracking`)
CSV, MLFLOW = "csv", "mlflow"


def _metric(*sinks: str, **kw):
    """A field of :class:`EpochRecord` that goes to ``sinks`` (:data:`CSV`, :data:`MLFLOW`)."""
    return field(metadata={"sinks": frozenset(sinks)}, **kw)


@dataclass(frozen=True, kw_only=True, eq=False)
class EpochRecord:
    """One epoch's record (host values), made by the loop (:func:`epoch_record`) and handed to
    the callbacks' ``on_epoch``; :attr:`RunResult.history` keeps them. A plain dataclass of
    ints, floats, a dict and NumPy arrays: it pickles (Ray, the tracking process's queue,
    checkpoints). Its scalar metrics by name are :meth:`metrics`; the field order is
    ``history.csv``'s column order.

    Attributes:
        epoch: the epoch's number, 1-based (an async run: completed group epochs).
        generation: generations per island done (the MLflow step; async: the slowest group's).
        wall_s: seconds since the evolution started.
        evaluations: evaluations of the objective and constraints so far, plug-in included.
        evals_per_s: ``evaluations / wall_s``.
        best_f, best_v: the archipelago's best so far (objective, total normalised violation).
        best_feasible_f: ``best_f`` where the best is feasible, else NaN.
        plugin_metrics: ``{name: value}`` a loop plug-in reports (the master swarm's
            ``master_best_f``); each is a metric (column, MLflow metric) of that name.
        group_metrics: ``{group_NAME_metric: value}`` of a mixed run's groups
            (:class:`isles.islands.mixed.GroupBooks`), each a metric of that name; ``{}`` without groups.
        algorithm_metrics: ``{name: (n_islands,) float64}`` the algorithm reports per island
            (:meth:`isles.algorithms.core.base.IslandAlgorithm.metrics`, e.g. CMA-ES's ``sigma``):
            the metrics ``name`` (the mean over the islands that reported it) and, with more than
            one island, ``island_XX_name``.
        nan_evaluations: evaluations with a NaN objective or constraint so far.
        migrations_accepted: immigrants accepted in this epoch.
        us_per_generation: the slowest group's compute time per generation of the epoch, µs.
        payoff_evaluations: a min-max algorithm's pair payoffs so far; ``None`` otherwise.
        islands_at_target: islands that reached the stop target; ``None`` without one.
        island_best_f: ``(n_islands,)`` float64, each island's best objective (the metrics
            ``island_XX_best_f``).
        island_best_v: ``(n_islands,)`` float64, the violations of those bests.
        compute_s_max: the slowest group's compute time of the epoch, seconds.
        n_feasible_islands: islands whose best is feasible.
        island_hit_generation: ``(n_islands,)`` int64 stop-target generations (-1: not yet),
            ``None`` without a target.
        migrations: the epoch's ``(epoch, src, dst, accepted, best f moved)`` tuples (the job
            appends them to ``migrations.csv``).
    """

    epoch: int = _metric(CSV)
    generation: int = _metric(CSV)
    wall_s: float = _metric(CSV, MLFLOW)
    evaluations: int = _metric(CSV, MLFLOW)
    evals_per_s: float = _metric(MLFLOW)
    best_f: float = _metric(CSV, MLFLOW)
    best_v: float = _metric(CSV, MLFLOW)
    best_feasible_f: float = _metric(CSV, MLFLOW)
    plugin_metrics: dict[str, float] = _metric(CSV, MLFLOW, default_factory=dict)
    group_metrics: dict[str, float] = _metric(CSV, MLFLOW, default_factory=dict)
    algorithm_metrics: dict[str, np.ndarray] = _metric(CSV, MLFLOW, default_factory=dict)
    nan_evaluations: int = _metric(CSV, MLFLOW)
    migrations_accepted: int = _metric(CSV, MLFLOW)
    us_per_generation: float = _metric(CSV, MLFLOW)
    payoff_evaluations: int | None = _metric(MLFLOW, default=None)
    islands_at_target: int | None = _metric(MLFLOW, default=None)
    island_best_f: np.ndarray = _metric(CSV, MLFLOW)
    island_best_v: np.ndarray
    compute_s_max: float
    n_feasible_islands: int
    island_hit_generation: np.ndarray | None = None
    migrations: tuple = ()

    def metrics(self, sink: str | None = None) -> dict[str, int | float]:
        """The record's scalar metrics ``{name: value}`` in field order: every field of ``sink``
        (:data:`CSV`: ``history.csv``'s columns; :data:`MLFLOW`: the MLflow metrics of the step;
        ``None``: both) that is not ``None``, each plug-in metric under its own name and
        ``island_best_f`` as ``island_XX_best_f`` per island (Python ints and floats).

        Raises:
            ValueError: ``sink`` is not ``"csv"``, ``"mlflow"`` or ``None``.
        """
        if sink not in (CSV, MLFLOW, None):
            raise ValueError(f"sink={sink!r}: allowed values are {CSV!r}, {MLFLOW!r} or None")
        out = {}
        for f in fields(self):
            sinks = f.metadata.get("sinks", ())
            value = getattr(self, f.name)
            if not sinks or (sink is not None and sink not in sinks) or value is None:
                continue
            if f.name in ("plugin_metrics", "group_metrics"):
                out.update(value)
            elif f.name == "algorithm_metrics":
                out.update(island_metric_columns(value))
            elif f.name == "island_best_f":
                out.update({f"island_{i:02d}_best_f": float(v) for i, v in enumerate(value)})
            else:
                out[f.name] = value
        return out


@dataclass
class RunResult:
    """What a finished run hands back (host values).

    Attributes:
        best_x (D,), best_f, best_v: best solution under Deb's rules (ranking pair).
        evaluations: evaluations of the objective and constraints (one per point x) of all
            islands and the loop's plug-in (docs/budgets.md).
        payoff_evaluations: pair payoffs ``L(x, y)`` of a min-max algorithm, 0 otherwise.
        generations: generations per island.
        wall_s: wall time of the evolution (actors already started), seconds.
        startup_s: actor start-up time, seconds.
        history: the :class:`EpochRecord` objects given to ``on_epoch``, as a :class:`RecordLog` keeps them:
            every epoch's up to ``LOG_TAIL + LOG_SAMPLE`` epochs, else an even sample of the
            earlier epochs (the first included) and the latest ``LOG_TAIL`` epochs whole.
        devices: ``{island id: device name}``.
        gpu_paths: ``{island id: the algorithm's path on its device}`` (``algorithm.gpu_path``:
            e.g. ``"epoch kernel (shared memory)"``, ``"fused kernel"``, ``"graph"``, ``"numpy"``).
        nodes: ``{island id: Ray node id}`` where each island ran at the end (after a lost node,
            its islands' new node); ``None`` values outside Ray.
        nan_evals: evaluations with a NaN objective or constraint.
        migrations: ``(epoch, src, dst, accepted, best f moved)`` tuples, kept as ``history``.
        epochs: epochs run (all of them, whatever ``history`` keeps).
        migration_count, migrations_accepted: transfers and immigrants accepted, all of them.
        history_path, migrations_path: ``history.csv`` and ``migrations.csv``, every epoch's
            record and every migration (:class:`isles.app.run_files.HistoryFiles`), where the job wrote them.
        solution: the ``best_solution.json`` record (:func:`isles.app.report.solution_record`),
            and ``solution_path`` where it was written, once the job made them.
        best_genome: the best individual's genome (e.g. packed ``uint32`` bit words), of
            which ``best_x`` is the phenotype.
        hit_generations: ``(n_islands,)`` int, the generation at which each island first reached
            the stop target (``stop.f_target + stop.tol``), -1 if it never did; ``None`` without
            a target.
        steady_evals_per_s: evaluations per second after the first epoch (which includes kernel
            compilation and CUDA-graph capture on GPUs); the overall rate with one epoch.
    """

    best_x: np.ndarray
    best_f: float
    best_v: float
    evaluations: int
    generations: int
    wall_s: float
    startup_s: float
    history: list[EpochRecord] = field(default_factory=list)
    devices: dict = field(default_factory=dict)
    gpu_paths: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    nan_evals: int = 0
    migrations: list = field(default_factory=list)
    best_genome: np.ndarray | None = None
    hit_generations: np.ndarray | None = None
    payoff_evaluations: int = 0
    epochs: int = 0
    migration_count: int = 0
    migrations_accepted: int = 0
    history_path: str | None = None
    migrations_path: str | None = None
    solution: dict | None = None
    solution_path: str | None = None

    @property
    def warnings(self) -> list[str]:
        """What the result cannot show by itself, one line each (printed after the result): the
        best individual has no finite objective (NaN counts as ``+inf``), and whether every
        evaluation of the run gave NaN; the same for the constraints (inequalities and equalities: a
        NaN constraint counts as an infinite violation) when the best has a finite ``f`` but no finite
        violation (``best_v``), naming the constraints that are NaN at the best x where the end-of-run
        record (``solution``) has them."""
        if np.isfinite(self.best_f) and not np.isfinite(self.best_v):
            return [self._constraint_warning()]
        if np.isfinite(self.best_f):
            return []
        if self.evaluations and self.nan_evals >= self.evaluations:
            return [
                f"no individual ever had a finite objective: all {self.evaluations} evaluations gave NaN "
                "(objective or constraints; NaN counts as +inf, the worst fitness)"
            ]
        return [
            f"the best individual has no finite objective (f={self.best_f}); {self.nan_evals} of "
            f"{self.evaluations} evaluations gave NaN (counted as +inf, the worst fitness)"
        ]

    def _constraint_warning(self) -> str:
        """The warning of :attr:`warnings` for constraints that were never finite (``best_v`` not finite)."""
        g, types = (self.solution or {}).get("g") or [], (self.solution or {}).get("g_type") or []
        nan = [
            f"g{i + 1} (h = 0)" if i < len(types) and types[i] == "equality" else f"g{i + 1}"
            for i, v in enumerate(g)
            if v is None or not np.isfinite(v)
        ]
        at_best = f"; at the best x {', '.join(nan)} {'is' if len(nan) == 1 else 'are'} NaN" if nan else ""
        if self.evaluations and self.nan_evals >= self.evaluations:
            return (
                f"no individual ever had finite constraints: all {self.evaluations} evaluations gave NaN{at_best} "
                "(a NaN constraint counts as an infinite violation: nothing can be feasible)"
            )
        return (
            f"the best individual has no finite constraint violation (v={self.best_v}); {self.nan_evals} of "
            f"{self.evaluations} evaluations gave NaN{at_best} (a NaN constraint counts as an infinite violation)"
        )

    @property
    def steady_evals_per_s(self) -> float:
        """Evaluations per second over all epochs but the first (see the class docstring)."""
        h = self.history
        if len(h) < 2 or h[-1].wall_s <= h[0].wall_s:
            return self.evaluations / max(self.wall_s, 1e-12)
        return (h[-1].evaluations - h[0].evaluations) / (h[-1].wall_s - h[0].wall_s)


def best_of(candidates):
    """Best row of stacked ``(x (k, D), f (k,), v (k,), genome (k, ...))`` candidates, as 1-row
    arrays ``(x (1, D), f (1,), v (1,), genome (1, ...))``."""
    x = np.concatenate([np.asarray(c[0], dtype=np.float64) for c in candidates])
    f = np.concatenate([c[1] for c in candidates])
    v = np.concatenate([c[2] for c in candidates])
    g = np.concatenate([c[3] for c in candidates])
    i = int(argbest(f, v, axis=0))
    return x[i : i + 1], f[i : i + 1], v[i : i + 1], g[i : i + 1]


def run_result(best, history: RecordLog, generations: int, t0: float, migrations: RecordLog, hits=None) -> RunResult:
    """The :class:`RunResult` of a loop: its best (:func:`best_of`), records and migrations
    (:class:`RecordLog`), generations per island, start ``t0`` (``time.perf_counter()``) and
    stop-target generations."""
    last = history[-1]
    return RunResult(
        best_x=best[0][0],
        best_f=float(best[1][0]),
        best_v=float(best[2][0]),
        evaluations=last.evaluations,
        generations=generations,
        wall_s=time.perf_counter() - t0,
        startup_s=0.0,
        history=history.to_list(),
        nan_evals=last.nan_evaluations,
        migrations=migrations.to_list(),
        best_genome=best[3][0],
        hit_generations=hits,
        epochs=history.total,
        migration_count=migrations.total,
        migrations_accepted=migrations.tallied,
        payoff_evaluations=last.payoff_evaluations or 0,
    )


def island_metrics(n: int, summaries: dict) -> dict:
    """The algorithm's own metrics of ``n`` islands, island-ordered, from group summaries ``{group
    index: EpochSummary}``: ``{name: (n,) float64}``, NaN for an island whose group has not
    reported (an async run's first epochs)."""
    out = {}
    for s in summaries.values():
        for name, values in s.metrics.items():
            out.setdefault(name, np.full(n, np.nan))[s.island_ids] = values
    return out


def island_metric_columns(metrics: dict) -> dict:
    """``{name: mean over the islands, island_XX_name: each island's}`` (Python floats) of
    :func:`island_metrics`' arrays (the per-island columns only with more than one island)."""
    out = {}
    for name, values in metrics.items():
        values = np.asarray(values, dtype=np.float64)
        finite = values[~np.isnan(values)]
        out[name] = float(finite.mean()) if finite.size else math.nan
        if values.size > 1:
            out.update({f"island_{i:02d}_{name}": float(v) for i, v in enumerate(values)})
    return out


def payoff_total(summaries: dict) -> int:
    """Pair payoffs of all islands (a min-max algorithm's ``payoff_evals`` per island) of the
    latest group summaries ``{group index: summary}``."""
    return sum(s.payoff_evals * len(s.island_ids) for s in summaries.values())


def epoch_record(
    *,
    epoch: int,
    generation: int,
    t0: float,
    evaluations: int,
    nan_evaluations: int,
    best_f: float,
    best_v: float,
    island_best_f: np.ndarray,
    island_best_v: np.ndarray,
    compute_s: float,
    epoch_generations: int,
    hits: np.ndarray | None = None,
    payoff_evaluations: int = 0,
    migrations=(),
    plugin_metrics: dict | None = None,
    algorithm_metrics: dict | None = None,
    books=None,
) -> EpochRecord:
    """The :class:`EpochRecord` of an epoch that ends now (host values; every field typed here).

    Args:
        epoch: the epoch's number (1-based); generation: generations per island done by its end.
        t0: the run's start (``time.perf_counter()``): ``wall_s`` is the time since.
        evaluations, nan_evaluations: totals of the run so far (plug-in included).
        best_f, best_v: the archipelago's best so far.
        island_best_f, island_best_v: ``(n_islands,)`` each island's best (copied).
        compute_s: the slowest group's compute time of the epoch, seconds.
        epoch_generations: the epoch's generations (``us_per_generation`` divides by them).
        hits: ``(n_islands,)`` stop-target generations (-1: not reached), ``None`` without a target.
        payoff_evaluations: a min-max algorithm's pair payoffs (:func:`payoff_total`), recorded where > 0.
        migrations: the epoch's ``(epoch, src, dst, accepted, best f moved)`` tuples.
        plugin_metrics: ``{name: value}`` a loop plug-in reports (e.g. ``master_best_f``).
        algorithm_metrics: ``{name: (n_islands,)}`` the algorithm's own (:func:`island_metrics`).
        books: a mixed run's :class:`isles.islands.mixed.GroupBooks` (the epoch booked: ``group_metrics``), or ``None``.
    """
    wall = time.perf_counter() - t0
    moved = tuple(migrations)
    return EpochRecord(
        epoch=int(epoch),
        generation=int(generation),
        wall_s=wall,
        evaluations=int(evaluations),
        evals_per_s=evaluations / wall if wall > 0 else 0.0,
        best_f=float(best_f),
        best_v=float(best_v),
        best_feasible_f=float(best_f) if best_v <= 0 else math.nan,
        plugin_metrics={k: float(v) for k, v in (plugin_metrics or {}).items()},
        group_metrics={} if books is None else books.book(island_best_f, island_best_v, best_f, best_v, moved),
        algorithm_metrics={k: np.array(v, dtype=np.float64) for k, v in (algorithm_metrics or {}).items()},
        nan_evaluations=int(nan_evaluations),
        migrations_accepted=int(sum(m[3] for m in moved)),
        us_per_generation=1e6 * float(compute_s) / max(1, int(epoch_generations)),
        payoff_evaluations=int(payoff_evaluations) if payoff_evaluations else None,
        islands_at_target=None if hits is None else int((hits >= 0).sum()),
        island_best_f=np.array(island_best_f, dtype=np.float64),
        island_best_v=np.array(island_best_v, dtype=np.float64),
        compute_s_max=float(compute_s),
        n_feasible_islands=int((np.asarray(island_best_v) <= 0).sum()),
        island_hit_generation=None if hits is None else np.array(hits, dtype=np.int64),
        migrations=moved,
    )


def cluster_resources() -> dict:
    """Ray's cluster resources (``CPU``, ``GPU``, memory, ...; not the per-node ``node:`` keys),
    for the run's tags."""
    import ray  # noqa: PLC0415

    return {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}


def island_nodes(infos: list) -> dict:
    """``{island id: Ray node id}`` from the groups' ``info`` (``None`` outside Ray)."""
    return {gid: info.get("node_id") for info in infos for gid in info["island_ids"]}
