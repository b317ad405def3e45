"""The shared budget of an async run (``islands.async_budget=shared``): a pool of island-generations
that the actors draw from before each of their epochs.

The run's work is ``n_islands * generations`` island-generations (``generations``, or those that
``stop.max_evaluations`` buys: :mod:`isles.islands.control.budget`). A group of ``s`` islands
that runs an epoch of ``k`` generations spends ``k * s`` of it; a group keeps running epochs while
the pool grants it some, so the actors whose islands draw cheaper designs run more generations and
all of them end at about the same time (with a fixed share each, the fast actors idled while the
slowest worked: the idle tail). Every island of a group runs the group's generations (one batch), so a grant is a whole number of
the group's generations: the most up to the epoch's ``migration_interval`` and to the generations
left per island of the groups drawing (guided self-scheduling: the last epochs shorten, so the
actors end within about a generation of each other rather than an epoch; migrations then come more
often in the run's last generations), that leave a remainder the groups still drawing can spend
exactly (:func:`spendable`: groups of 2 and 3 islands and 1 island-generation left cannot). The run
spends the pool to the last island-generation, so the evaluations are the budget's exactly, as with
fixed shares (``n_islands * (init + generations * per_generation)``). On one actor the grants are
the sync run's epochs.

:class:`SharedBudget` is the pool: a plain object behind a lock, run as a tiny Ray actor by the
async loop (its calls run one at a time: a claim is atomic). :class:`Claims` is a group's side of
it, an iterator of its epochs' generations. A group restarted from its snapshot after a lost actor
gives back what it had claimed since (:meth:`SharedBudget.restart`); claims of the lost actor's
old incarnation that arrive later get nothing (each start of a group has its own ``attempt``).
"""

from __future__ import annotations

import heapq
import math
import threading

from isles.islands.config.build import build_algorithm


def spendable(left: int, sizes) -> bool:
    """Whether ``left`` island-generations are a sum of whole epochs of groups of ``sizes`` islands
    (``left = sum_j x_j * sizes[j]``, integers ``x_j >= 0``): the coin problem, by the shortest
    sums per residue modulo the smallest size (Dijkstra on ``min(sizes)`` nodes).

    Args:
        left: island-generations (>= 0); sizes: islands of each group still drawing (ints >= 1).
    """
    sizes = sorted({int(s) for s in sizes})
    if left == 0:
        return True
    if not sizes or left < 0:
        return False
    m = sizes[0]
    least = [math.inf] * m  # least[r]: the smallest spendable sum that is r modulo m
    least[0], heap = 0, [(0, 0)]
    while heap:
        d, r = heapq.heappop(heap)
        if d > least[r]:
            continue
        for s in sizes[1:]:
            t = d + s
            if t < least[t % m]:
                least[t % m] = t
                heapq.heappush(heap, (t, t % m))
    return left >= least[left % m]


def shares_itself(cfg: dict) -> bool:
    """Whether the run's algorithm (``cfg["algorithm"]``, built) shares the evaluation budget per
    island itself (:meth:`isles.algorithms.core.base.IslandAlgorithm.shares_budget`: L-SHADE, jSO,
    CMA-ES with ``algorithm.max_evaluations`` give each island ``ceil(stop.max_evaluations /
    islands.n)``): the pool would give an island generations past its own share, and the run's
    evaluations would fall short of the budget, so such a run keeps each island's generations
    (``islands.async_budget=shared`` acts as ``island``)."""
    return build_algorithm(cfg["algorithm"]).shares_budget()


class SharedBudget:
    """The pool of island-generations of an async run (thread-safe; a Ray actor in the run).

    Args:
        sizes: islands of each group (``len(sizes)`` groups).
        done: generations each group has run so far (0s at the start; a resumed run's counts).
        total: the run's island-generations, ``n_islands * generations``.
    """

    def __init__(self, sizes, done, total: int):
        self.sizes = [int(s) for s in sizes]
        self.claimed = [int(g) for g in done]  # generations granted to each group (run, or running)
        self.left = max(0, int(total) - sum(s * g for s, g in zip(self.sizes, self.claimed, strict=False)))
        self.drawing = set(range(len(self.sizes)))  # groups that have not been refused yet
        self.attempt = [0] * len(self.sizes)
        self._lock = threading.Lock()

    def claim(self, group: int, want: int, attempt: int = 0) -> int:
        """Grant group ``group`` its next epoch: the most generations ``k <= want``, and at most the
        generations left per island of the groups drawing (rounded up: near the end the epochs
        shorten, so the actors end together), whose ``k * size`` island-generations leave a pool
        that the groups still drawing can spend exactly (:func:`spendable`); 0 when none is left for
        it (the group stops drawing) or ``attempt`` is not the group's current one (a lost
        incarnation's late claim). A lone group is granted ``min(want, generations left)``."""
        with self._lock:
            if attempt != self.attempt[group] or group not in self.drawing:
                return 0
            s, others = self.sizes[group], [self.sizes[j] for j in self.drawing]
            share = -(-self.left // sum(others))  # generations left per island drawing: the last epochs shorten
            for k in range(min(int(want), self.left // s, share), 0, -1):
                if spendable(self.left - k * s, others):
                    self.left -= k * s
                    self.claimed[group] += k
                    return k
            self.drawing.discard(group)  # what is left is the others' (every sum of it leaves this group out)
            return 0

    def restart(self, group: int, done: int, attempt: int) -> int:
        """Group ``group`` goes back to its snapshot of ``done`` generations as its start ``attempt``:
        the generations it had claimed since return to the pool, and it draws again. Returns the
        island-generations left."""
        with self._lock:
            self.left += (self.claimed[group] - int(done)) * self.sizes[group]
            self.claimed[group], self.attempt[group] = int(done), int(attempt)
            self.drawing.add(group)
            return self.left

    def state(self) -> dict:
        """``left`` (island-generations in the pool) and ``claimed`` (generations granted per group)."""
        with self._lock:
            return {"left": self.left, "claimed": list(self.claimed)}


class Claims:
    """A group's draws from the pool: an iterator of its epochs' generations, ending when the pool
    grants it none (a handle pickled into the group's actor).

    Args:
        pool: the :class:`SharedBudget`, or its Ray actor handle.
        group: the group's index; want: generations an epoch asks for (``islands.migration_interval``).
        attempt: this start of the group (:meth:`SharedBudget.restart`).
        every: a snapshot after every ``every``-th epoch and after the last (0: none).
    """

    def __init__(self, pool, group: int, want: int, attempt: int = 0, every: int = 0):
        self.pool, self.group, self.want, self.attempt, self.every = pool, group, want, attempt, every

    def __iter__(self):
        return self

    def __next__(self) -> int:
        if isinstance(self.pool, SharedBudget):
            k = self.pool.claim(self.group, self.want, self.attempt)
        else:
            import ray  # noqa: PLC0415

            k = ray.get(self.pool.claim.remote(self.group, self.want, self.attempt))
        if k <= 0:
            raise StopIteration
        return k

    def due(self, epoch: int, following: int, generation: int) -> bool:
        """Whether a snapshot falls due after ``epoch``, which ends at the group's ``generation``, the
        pool granting ``following`` generations next (0: none, the group's last epoch): every
        ``every``-th epoch and the last whole one (before a grant shorter than ``want``), where the
        epoch ends on the grid of ``want`` generations (none after an epoch cut short: a checkpoint
        there would resume off the run's epochs,
        :meth:`isles.islands.control.sync_loop.Schedule.checkpoint_due`)."""
        whole = int(generation) % self.want == 0
        return bool(self.every) and whole and (epoch % self.every == 0 or following < self.want)
