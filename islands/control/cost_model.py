"""The placement's cost model (issue 35): how long a run would take on ``A`` actors of a device, from
what one device costs, and which placement the default takes.

The run's time on ``A`` actors of device ``d`` is predicted as::

    total(d, A) = epochs * epoch(d, A) + start(d, A)
    epoch(d, 1) = the measured epoch of all n islands in one group (in-process)
    epoch(d, A) = overhead + interval * gen(ceil(n / A)) + exchange          (A > 1)
    start(d, 1) = 0;  start(d, A) = (RAY_START_S (unless Ray starts anyway) + A * ACTOR_START_S[d]) * load

``gen(k)``: one generation of a group of ``k`` islands in an actor (``gen_fixed_s + gen_island_s * k``;
on the CPU with one thread, as Ray's one-CPU actors run NumPy); ``overhead``: what an epoch costs a
group besides its generations (migration, the summary row, the plug-ins' replicas), which every actor
pays alike; ``exchange``: what spreading the islands over several actors adds to each epoch (the
emigrants between actors and the driver's books across Ray). The figures of one device come from a
probe (:mod:`isles.islands.control.probe`); the exchange and start-up costs are the runtime's measured
figures (docs/runtime.md, docs/startup.md), constants here, stretched by the machine's load per core
(``load``: Ray's processes start on the cores that other work keeps busy; on a 2-core machine at a
load average of 15-19, a local Ray with 2 CPU actors took about 30 s more than one process).

The default takes the fastest placement, but leaves one actor on the preferred device (a GPU where
there is one) only where the prediction gains at least :data:`GAIN` of its time: a model's error
then costs at most that share, and a run that gains little stays where it runs best by default
(no Ray at all, one device). The result of a run does not depend on the placement (the islands'
random numbers are their own, tests/test_spmd.py), nor, beyond floating point, on the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the least share of the preferred placement's predicted time that another must save to be taken
GAIN = 0.15
#: seconds to start a local Ray (``ray.init``) where the run would not start it otherwise; 3-9 s on a
#: 2-core machine, about 2-3 s on 16 cores (docs/runtime.md, "Start-up (issue 16)")
RAY_START_S = 3.0
#: seconds each actor adds to the run's start and end: a worker process, its imports, its islands'
#: build (a GPU actor also its CUDA context and kernels): 4 GPUs spent 20-28 s outside the evolution
#: against about 3.5 s on one (issue 35); 2 CPU actors on 2 cores 15-25 s at issue 16, about 5-8 s now
ACTOR_START_S = {"cpu": 2.0, "gpu": 4.0}
#: seconds that several actors add to each epoch (the exchange between actors and the driver's books
#: over Ray): 2 CPU actors on channels 0.76-0.81 ms an epoch against one actor's 0.48 ms (tiny ring,
#: interval 1, 2 cores); 2 GPU actors over NCCL 6.56 ms against 3.30 ms (2 H200s; one cross-GPU epoch
#: of 4 GPUs: 5.81 ms, issue 35), docs/runtime.md
EXCHANGE_S = {"cpu": 0.4e-3, "gpu": 3.3e-3}
#: what the line calls a device's actors
UNIT = {"cpu": "CPU actor", "gpu": "GPU"}


@dataclass(frozen=True)
class DeviceCosts:
    """What a run costs on one device (a probe's figures, or injected by tests).

    Attributes:
        device: ``cpu`` or ``gpu``; units: the actors it offers (GPUs, or CPU cores).
        epoch_s: one epoch of all the islands in one group, in this process (seconds).
        overhead_s: of it, what is not the generations (migration, summary, plug-ins), seconds.
        gen_fixed_s, gen_island_s: one generation of a group of ``k`` islands in an actor takes
            ``gen_fixed_s + gen_island_s * k`` seconds.
        exchange_s: what several actors add to each epoch (default :data:`EXCHANGE_S`).
        actor_start_s: seconds to start each actor (default :data:`ACTOR_START_S`).
        probe_s: the probe's own seconds (0 when injected).
    """

    device: str
    units: int
    epoch_s: float
    overhead_s: float
    gen_fixed_s: float
    gen_island_s: float
    exchange_s: float | None = None
    actor_start_s: float | None = None
    probe_s: float = 0.0

    @property
    def exchange(self) -> float:
        """:attr:`exchange_s`, or the device's :data:`EXCHANGE_S`."""
        return EXCHANGE_S[self.device] if self.exchange_s is None else self.exchange_s

    @property
    def actor_start(self) -> float:
        """:attr:`actor_start_s`, or the device's :data:`ACTOR_START_S`."""
        return ACTOR_START_S[self.device] if self.actor_start_s is None else self.actor_start_s


@dataclass(frozen=True)
class Workload:
    """The run: ``n`` islands, ``interval`` generations an epoch, ``generations`` in all;
    ``ray_anyway``: the run starts Ray whatever the placement (async mode), so that only the
    actors' own start counts; ``load``: the machine's load per core (at least 1), by which the
    start-up's processes are slowed (the probe's figures are measured under it already)."""

    n: int
    interval: int
    generations: int
    ray_anyway: bool = False
    load: float = 1.0

    @property
    def epochs(self) -> int:
        """Epochs of the run (an upper bound where a stop target ends it early)."""
        return max(1, math.ceil(self.generations / max(1, self.interval)))


def epoch_time(c: DeviceCosts, w: Workload, actors: int) -> float:
    """Predicted seconds of one epoch of ``w`` on ``actors`` actors of ``c.device`` (module docstring)."""
    if actors <= 1:
        return c.epoch_s
    k = math.ceil(w.n / actors)
    share = max(1.0, actors / max(1, c.units))  # more actors than units share them
    return c.overhead_s + w.interval * (c.gen_fixed_s + c.gen_island_s * k) * share + c.exchange


def start_time(c: DeviceCosts, w: Workload, actors: int) -> float:
    """Predicted seconds that ``actors`` actors add to the run's start and end (0 for one: in-process)."""
    if actors <= 1 and not w.ray_anyway:
        return 0.0
    return ((0.0 if w.ray_anyway else RAY_START_S) + actors * c.actor_start) * max(1.0, w.load)


def predicted(c: DeviceCosts, w: Workload, actors: int) -> float:
    """Predicted seconds of the whole run on ``actors`` actors of ``c.device``."""
    return w.epochs * epoch_time(c, w, actors) + start_time(c, w, actors)


def pick(costs: dict, w: Workload, candidates: list, preferred: tuple) -> tuple:
    """The placement ``(device, actors)`` to take among ``candidates``: the fastest predicted
    (:func:`predicted`), where it saves at least :data:`GAIN` of ``preferred``'s time, else ``preferred``.

    Args:
        costs: ``{device: DeviceCosts}``; candidates: ``[(device, actors)]``, ``preferred`` among them.
    """
    best = min(candidates, key=lambda p: (predicted(costs[p[0]], w, p[1]), p != preferred, p[1]))
    if predicted(costs[best[0]], w, best[1]) < (1.0 - GAIN) * predicted(costs[preferred[0]], w, preferred[1]):
        return best
    return preferred


def describe(place: tuple, gpus: int) -> str:
    """A placement in words: ``"1"`` (GPU actors on a GPU machine, CPU actors without GPUs), or
    ``"the CPU (2 actors)"`` on a machine with GPUs."""
    device, actors = place
    if device == "cpu" and gpus:
        return f"the CPU ({actors} actor{'s' * (actors != 1)})"
    return str(actors)


def words(place: tuple) -> str:
    """A placement ``(device, actors)`` in words: ``"2 GPUs"``, ``"1 CPU actor"``."""
    device, actors = place
    return f"{actors} {UNIT[device]}{'s' * (actors != 1)}"


def ms(seconds: float) -> str:
    """Seconds as milliseconds with three significant digits, e.g. ``"0.512 ms"``, ``"28.1 ms"``
    (from a second on, seconds: ``"2.08 s"``)."""
    return f"{seconds:.3g} s" if seconds >= 1.0 else f"{seconds * 1e3:.3g} ms"
