"""The driver's books of an epoch, one function for both schedules: the groups' summaries merged
into island-ordered arrays (:func:`merge_summaries`, a :class:`Merged`), and the epoch booked into
the loop's best, migrations and records (:func:`book_epoch`). The sync schedule books every
group's epoch at once (:mod:`isles.islands.control.sync_loop`), the async one each group's epoch as
it completes, merged with the others' latest (:mod:`isles.islands.control.async_loop`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from isles.islands.results import EpochRecord, best_of, epoch_record, island_metrics, payoff_total


@dataclass
class Merged:
    """Group summaries merged into island-ordered host arrays of the ``n`` islands (:func:`merge_summaries`).

    Attributes:
        x ``(n, D)``: each island's best phenotype; genome ``(n, ...)``; f, v ``(n,)``.
        emigrants: ``{island id: Population (1, k)}`` of the groups whose summaries carry them (a span's last epoch).
        evals, nan_evals: the groups' totals.
        hits: ``(n,)`` stop-target generations (-1: not yet), or ``None`` without a stop target.
    """

    x: np.ndarray
    f: np.ndarray
    v: np.ndarray
    genome: np.ndarray
    emigrants: dict
    evals: int
    nan_evals: int
    hits: Any

    @property
    def best(self) -> tuple:
        """``(x, f, v, genome)``, every island's best as candidates of :func:`isles.islands.results.best_of`."""
        return self.x, self.f, self.v, self.genome

    @property
    def all_hit(self) -> bool:
        """Whether every island has reached the stop target."""
        return self.hits is not None and bool(np.all(self.hits >= 0))


def merge_summaries(n: int, summaries: dict) -> Merged:
    """The :class:`Merged` arrays of ``n`` islands from group summaries ``{group index: EpochSummary}``
    (:class:`isles.islands.records.EpochSummary`); islands no summary holds keep ``inf`` (NaN phenotype)."""
    first = next(iter(summaries.values()))
    D = first.best_x.shape[1]
    bx = np.full((n, D), np.nan, dtype=np.result_type(first.best_x.dtype, np.float64))
    g0 = first.best.genome[:, 0]
    bg = np.zeros((n,) + g0.shape[1:], dtype=g0.dtype)
    bf = np.full(n, np.inf)
    bv = np.full(n, np.inf)
    hits = None if first.hit_generation is None else np.full(n, -1, dtype=np.int64)
    emigrants, evals, nan = {}, 0, 0
    for s in summaries.values():
        ids = _index(s.island_ids)
        bx[ids], bf[ids], bv[ids] = s.best_x, s.best_f, s.best_v
        bg[ids] = s.best.genome[:, 0]
        if hits is not None:
            hits[ids] = s.hit_generation
        if s.emigrants is not None:  # None inside a span
            for p, gid in enumerate(s.island_ids):
                emigrants[gid] = s.emigrants.island(p)
        evals += s.evals
        nan += s.nan_evals
    return Merged(bx, bf, bv, bg, emigrants, evals, nan, hits)


def _index(ids: list):
    """Island ids as an index: a slice where they are consecutive (a view, no fancy indexing)."""
    if ids and ids[-1] - ids[0] == len(ids) - 1 and all(b == a + 1 for a, b in zip(ids, ids[1:], strict=False)):
        return slice(ids[0], ids[-1] + 1)
    return np.asarray(ids)


def book_epoch(
    loop, n: int, summaries: dict, merged: Merged, t0, epoch, generation, k, compute_s, moved, books=None
) -> EpochRecord:
    """Book one epoch into ``loop`` (a loop state with ``best``, ``history`` and ``migrations``:
    :class:`isles.islands.records.LoopState`, :class:`isles.islands.control.async_loop.AsyncState`):
    the migrations ``moved`` (``(epoch, src, dst, accepted, best f moved)``), the archipelago's best
    (the islands' and the plug-ins', whose metrics and evaluations are group 0's: every replica's are
    the same) and the epoch's record, appended to ``loop.history``.

    Args:
        n: the islands; summaries: the groups' latest ``{group index: EpochSummary}``, merged as ``merged``.
        t0: the run's start (``time.perf_counter()``); epoch: the record's number; generation: generations per island done; k: the epoch's generations;
        compute_s: the epoch's compute time, seconds.
        books: a mixed run's per-group books (:class:`isles.islands.mixed.GroupBooks`), or None.

    Returns:
        the epoch's :class:`isles.islands.results.EpochRecord`.
    """
    loop.migrations.extend(moved)
    cand, evals, nan, named = [merged.best], merged.evals, merged.nan_evals, {}
    for pbest, metrics in summaries[min(summaries)].plugins:
        if pbest is not None:
            g = np.asarray(pbest.genome[:, 0])  # a plug-in's genome is its phenotype
            cand.append((g, pbest.f[:, 0], pbest.v[:, 0], g))
        evals += int(metrics.get("evaluations", 0))
        nan += int(metrics.get("nan_evaluations", 0))
        named.update({name: v for name, v in metrics.items() if name not in ("evaluations", "nan_evaluations")})
    loop.best = best_of(cand + ([loop.best] if loop.best else []))
    record = epoch_record(
        epoch=epoch,
        generation=generation,
        t0=t0,
        evaluations=evals,
        nan_evaluations=nan,
        best_f=loop.best[1][0],
        best_v=loop.best[2][0],
        island_best_f=merged.f,
        island_best_v=merged.v,
        compute_s=compute_s,
        epoch_generations=k,
        hits=merged.hits,
        payoff_evaluations=payoff_total(summaries),
        migrations=moved,
        plugin_metrics=named,
        books=books,
        algorithm_metrics=island_metrics(n, summaries),
    )
    loop.history.append(record)
    return record
