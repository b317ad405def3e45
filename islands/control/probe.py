"""The placement's probe (issue 35): what the configured run costs on one device, measured in this
process before Ray starts, with the runtime's own island groups (:class:`isles.islands.group.IslandGroup`,
built from the run's :class:`isles.islands.records.GroupSpec`) and its own epoch body
(:meth:`IslandGroup.run_span`).

For one device it measures (:func:`measure`):

1. a group of one island: its generations (:meth:`IslandGroup.evolve`), on the CPU with one thread
   (threadpoolctl), as a one-CPU Ray actor runs NumPy. Where the islands' generation would cost
   :data:`EXPENSIVE_S` or more (an expensive objective), the rest is extrapolated, linear in the
   islands (the objective is the cost), and nothing more runs;
2. otherwise a group of all the islands (the one-actor run): its generations (threads as in this
   process; on the CPU once more with one thread, for the slope over the islands in an actor), and,
   where an epoch's generations take less than :data:`SHORT_EPOCH_S`, spans of epochs of one
   generation each (the epoch's own cost besides the generations: migration, summaries, plug-ins;
   on a GPU the captured epoch's replays, as the run does).

Each timing takes the fastest of :data:`REPEATS` runs of about a quarter of :data:`TIMED_S` seconds
(or :data:`MAX_GENERATIONS` in all), after one warm call (a GPU's capture, first-call allocations).
The probe's groups are thrown away; the random numbers are counter-based, so the run is the same
whether or not it probed. A user's objective runs a few more times in this process (side effects
such as a log of its calls see them).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

from isles.algorithms.core.backend import synchronize
from isles.islands.config.schema import typed
from isles.islands.control.cost_model import DeviceCosts
from isles.islands.control.executor import Executor
from isles.islands.group import IslandGroup
from isles.islands.records import Route, SpanOrder

#: seconds of one generation of all the islands above which the objective is the cost (linear in the islands)
EXPENSIVE_S = 0.05
#: seconds of an epoch's generations from which its own cost (migration, summary: a few ms) is not measured
SHORT_EPOCH_S = 0.05
#: about the seconds each timing runs for (after its warm call), in :data:`REPEATS` runs of which the
#: fastest counts, and the most generations it runs
TIMED_S = 0.01
REPEATS = 3
MAX_GENERATIONS = 256


def _one_thread(device: str):
    """One BLAS/OpenMP thread on the CPU (as Ray's one-CPU actors run), nothing on a GPU."""
    if device != "cpu":
        return nullcontext()
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    return threadpool_limits(limits=1)


def generation_s(group: IslandGroup, warm: bool = True) -> float:
    """Seconds per generation of ``group`` (:meth:`IslandGroup.evolve`, the device synchronised): runs
    of generations, doubled until one takes a quarter of :data:`TIMED_S`, then :data:`REPEATS` of that
    length (at most :data:`MAX_GENERATIONS` in all); the fastest run's figure (other work on the
    machine only adds to a run). After one warm generation; where it alone takes :data:`EXPENSIVE_S`,
    the faster of it and one more is the figure (the first may hold a one-time cost: a host build
    compiled on an empty cache, a GPU kernel loaded)."""
    xp = group.xp
    if warm:
        first = _timed_generation(group)
        if first >= EXPENSIVE_S:
            return min(first, _timed_generation(group))
    best, gens, r, long_runs = float("inf"), 0, 1, 0
    while gens < MAX_GENERATIONS and long_runs < REPEATS:
        t = time.perf_counter()
        group.evolve(r)
        synchronize(xp)
        dt = time.perf_counter() - t
        best, gens = min(best, dt / r), gens + r
        if dt >= TIMED_S / 4:
            long_runs += 1
        else:
            r *= 2
    return best


def _timed_generation(group: IslandGroup) -> float:
    """Seconds of one generation of ``group``, the device synchronised."""
    t = time.perf_counter()
    group.evolve(1)
    synchronize(group.xp)
    return time.perf_counter() - t


def epoch_s(group: IslandGroup, topology, n: int, seed: int, per_generation: float) -> float:
    """Seconds per epoch of one generation of ``group`` (all ``n`` islands, alone) on ``topology``:
    a warm span of four epochs, then :data:`REPEATS` spans of about a quarter of :data:`TIMED_S`
    (3 to 50 epochs); the fastest."""
    route = Route(0, [group.island_ids], topology, n, seed)
    group.run_span(SpanOrder(1, [1] * 4, 0, route))  # a GPU captures its epoch here (islands/span_graph.py)
    m = int(min(50, max(3, TIMED_S / 4 / max(per_generation, 1e-6))))
    best = float("inf")
    for i in range(REPEATS):
        t = time.perf_counter()
        group.run_span(SpanOrder(2 + i, [1] * m, 4 + i * m, route))
        best = min(best, (time.perf_counter() - t) / m)
    return best


def measure(cfg: dict, plugins, topology, device: str, units: int) -> DeviceCosts:
    """The costs of the run ``cfg`` (checked, :func:`isles.islands.config.schema.validated`) on
    ``device`` (``cpu|gpu``) with ``units`` actors available (module docstring).

    Args:
        plugins: the loop's plug-in factories; topology: the run's instantiated topology.

    Raises:
        Exception: whatever building or running the islands raises (the caller keeps the default
            placement).
    """
    t0 = time.perf_counter()
    n, interval = int(cfg["islands"]["n"]), int(cfg["islands"]["migration_interval"])
    ex = Executor(typed(cfg), plugins, None, False, None)  # the runtime reads the typed config
    g1 = None
    if n > 1:
        one = IslandGroup(ex.spec((0,), device))
        with _one_thread(device):
            g1 = generation_s(one)
        del one
        if g1 * n >= EXPENSIVE_S:  # the objective is the cost: linear in the islands
            return DeviceCosts(device, units, interval * g1 * n, 0.0, 0.0, g1, probe_s=time.perf_counter() - t0)
    full = IslandGroup(ex.spec(tuple(range(n)), device))
    gn = generation_s(full)
    expensive = gn >= EXPENSIVE_S
    # the epoch's own cost (a few ms at most) counts only beside short epochs: measured there only
    epoch1 = gn if expensive or interval * gn >= SHORT_EPOCH_S else epoch_s(full, topology, n, int(cfg["seed"]), gn)
    gn1 = gn
    if n > 1 and device == "cpu" and units > 1 and not expensive:
        with _one_thread(device):
            gn1 = generation_s(full, warm=False)
    slope = max(0.0, (gn1 - g1) / (n - 1)) if n > 1 else gn1
    fixed = max(0.0, g1 - slope) if n > 1 else 0.0
    overhead = max(0.0, epoch1 - gn)
    return DeviceCosts(
        device,
        units,
        epoch_s=overhead + interval * gn,
        overhead_s=overhead,
        gen_fixed_s=fixed,
        gen_island_s=slope,
        probe_s=time.perf_counter() - t0,
    )
