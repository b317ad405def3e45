"""What a run hands back: the :class:`RunResult`, the epoch records given to the callbacks, and the
merge of the island groups' summaries into island-ordered arrays (host values)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from isles.problems.constraints import argbest


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
        history: one dict per epoch (the records given to ``on_epoch``).
        devices: ``{island id: device name}``.
        gpu_paths: ``{island id: the algorithm's path on its device}`` (``algorithm.gpu_path``:
            e.g. ``"epoch kernel (shared memory)"``, ``"fused kernel"``, ``"graph"``, ``"numpy"``).
        nodes: ``{island id: Ray node id}`` where each island ran at the end (after a lost node,
            its islands' new node); ``None`` values outside Ray.
        nan_evals: evaluations with a NaN objective or constraint.
        migrations: ``(epoch, src, dst, accepted, best f moved)`` tuples.
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
    history: list = field(default_factory=list)
    devices: dict = field(default_factory=dict)
    gpu_paths: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    nan_evals: int = 0
    migrations: list = field(default_factory=list)
    best_genome: np.ndarray | None = None
    hit_generations: np.ndarray | None = None
    payoff_evaluations: int = 0

    @property
    def warnings(self) -> list[str]:
        """What the result cannot show by itself, one line each (printed after the result): the
        best individual has no finite objective (NaN counts as ``+inf``), and whether every
        evaluation of the run gave NaN."""
        if np.isfinite(self.best_f):
            return []
        if self.evaluations and self.nan_evals >= self.evaluations:
            return [f"no individual ever had a finite objective: all {self.evaluations} evaluations gave NaN "
                    "(objective or constraints; NaN counts as +inf, the worst fitness)"]
        return [f"the best individual has no finite objective (f={self.best_f}); {self.nan_evals} of "
                f"{self.evaluations} evaluations gave NaN (counted as +inf, the worst fitness)"]

    @property
    def steady_evals_per_s(self) -> float:
        """Evaluations per second over all epochs but the first (see the class docstring)."""
        h = self.history
        if len(h) < 2 or h[-1]["wall_s"] <= h[0]["wall_s"]:
            return self.evaluations / max(self.wall_s, 1e-12)
        return (h[-1]["evaluations"] - h[0]["evaluations"]) / (h[-1]["wall_s"] - h[0]["wall_s"])


def best_of(candidates):
    """Best row of stacked ``(x (k, D), f (k,), v (k,), genome (k, ...))`` candidates, as 1-row
    arrays ``(x (1, D), f (1,), v (1,), genome (1, ...))``."""
    x = np.concatenate([np.asarray(c[0], dtype=np.float64) for c in candidates])
    f = np.concatenate([c[1] for c in candidates])
    v = np.concatenate([c[2] for c in candidates])
    g = np.concatenate([c[3] for c in candidates])
    i = int(argbest(f, v, axis=0))
    return x[i:i + 1], f[i:i + 1], v[i:i + 1], g[i:i + 1]


def run_result(best, history: list, generations: int, t0: float, migrations: list, hits=None) -> RunResult:
    """The :class:`RunResult` of a loop: its best (:func:`best_of`), records, generations per
    island, start ``t0`` (``time.perf_counter()``), migrations and stop-target generations."""
    return RunResult(best_x=best[0][0], best_f=float(best[1][0]), best_v=float(best[2][0]),
                     evaluations=history[-1]["evaluations"], generations=generations,
                     wall_s=time.perf_counter() - t0, startup_s=0.0, history=history,
                     nan_evals=history[-1]["nan_evaluations"], migrations=migrations,
                     best_genome=best[3][0], hit_generations=hits,
                     payoff_evaluations=history[-1].get("payoff_evaluations", 0))


def merge_summaries(n: int, summaries: dict):
    """Island-ordered arrays of ``n`` islands from group summaries ``{group index: summary}``:
    bests (phenotype ``bx (n, D)``, genome ``bg``, ``bf``, ``bv (n,)``), emigrants by island,
    totals, and the stop-target generations (``None`` without one)."""
    first = next(iter(summaries.values()))
    D = first["best_x"].shape[1]
    bx = np.full((n, D), np.nan, dtype=np.result_type(first["best_x"].dtype, np.float64))
    g0 = first["best"].genome[:, 0]
    bg = np.zeros((n,) + g0.shape[1:], dtype=g0.dtype)
    bf = np.full(n, np.inf)
    bv = np.full(n, np.inf)
    hits = None if first["hit_generation"] is None else np.full(n, -1, dtype=np.int64)
    emigrants, evals, nan = {}, 0, 0
    for s in summaries.values():
        ids = s["island_ids"]
        bx[ids], bf[ids], bv[ids] = s["best_x"], s["best_f"], s["best_v"]
        bg[ids] = s["best"].genome[:, 0]
        if hits is not None:
            hits[ids] = s["hit_generation"]
        if s["emigrants"] is not None:  # None inside a batch of epochs (run_epochs)
            for p, gid in enumerate(ids):
                emigrants[gid] = s["emigrants"].island(p)
        evals += s["evals"] * len(ids)
        nan += s["nan_evals"]
    return bx, bf, bv, bg, emigrants, evals, nan, hits


def payoff_total(summaries: dict) -> int:
    """Pair payoffs of all islands (a min-max algorithm's ``payoff_evals`` per island) of the
    latest group summaries ``{group index: summary}``."""
    return sum(s.get("payoff_evals", 0) * len(s["island_ids"]) for s in summaries.values())


def epoch_record(epoch, generation, t0, evals, nan, best, bf, bv, master_best, summaries, epoch_gens,
                 hits=None, payoff_evals: int = 0) -> dict:
    """The epoch's metrics; ``summaries`` are the group summaries that arrived for it;
    ``payoff_evals`` (:func:`payoff_total`) is recorded as ``payoff_evaluations`` where > 0."""
    wall = time.perf_counter() - t0
    compute = max(s["compute_s"] for s in summaries)
    feasible = bv <= 0
    rec = {
        "epoch": epoch,
        "generation": generation,
        "wall_s": wall,
        "evaluations": int(evals),
        "evals_per_s": evals / wall if wall > 0 else 0.0,
        "best_f": float(best[1][0]),
        "best_v": float(best[2][0]),
        "best_feasible_f": float(best[1][0]) if best[2][0] <= 0 else math.nan,
        "n_feasible_islands": int(feasible.sum()),
        "nan_evaluations": int(nan),
        "compute_s_max": compute,
        "us_per_generation": 1e6 * compute / max(1, epoch_gens),
        "migrations_accepted": sum(m[2] for s in summaries for m in s["migrations"]),
        "island_best_f": bf.copy(),
        "island_best_v": bv.copy(),
    }
    if payoff_evals:
        rec["payoff_evaluations"] = int(payoff_evals)
    if master_best is not None:
        rec["master_best_f"] = float(master_best[1][0])
    if hits is not None:
        rec["islands_at_target"] = int((hits >= 0).sum())
        rec["island_hit_generation"] = hits.copy()
    return rec


def cluster_resources() -> dict:
    """Ray's cluster resources (``CPU``, ``GPU``, memory, ...; not the per-node ``node:`` keys),
    for the run's tags."""
    import ray  # noqa: PLC0415

    return {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}


def island_nodes(infos: list) -> dict:
    """``{island id: Ray node id}`` from the groups' ``info`` (``None`` outside Ray)."""
    return {gid: info.get("node_id") for info in infos for gid in info["island_ids"]}

