"""The run's monitors: ``on_start(info)``, ``on_epoch(record)``, ``on_restart(info)`` and
``on_end(result)`` handed to each :class:`Callback` (MLflow tracker, progress bar, output files;
a job's are the config group ``callbacks``, :mod:`isles.app.callbacks`)."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from isles.islands.results import EpochRecord, RunResult, cluster_resources


@runtime_checkable
class Callback(Protocol):
    """What a run hands its callbacks, in this order: :meth:`on_start` once, :meth:`on_epoch` per
    epoch, :meth:`on_restart` after a restart, :meth:`on_end` at a finished run's end, and
    :meth:`on_exit` after the run, whatever ended it. Subclass it to get a no-op for each method not
    defined; an object that does not must define all five.
    """

    def on_start(self, info: dict) -> None:
        """The run has started: ``info`` holds the groups' ``info`` (where each runs), the run's sizes,
        ``startup_s`` and ``cluster_resources`` (Ray's, or ``None``)."""

    def on_epoch(self, record: EpochRecord) -> None:
        """An epoch's :class:`isles.islands.results.EpochRecord` (each epoch once, in order)."""

    def on_restart(self, info: dict) -> None:
        """Lost groups were restarted: ``info["groups"]`` is ``{group index: info}`` of each."""

    def on_end(self, result: RunResult) -> None:
        """The run finished: its :class:`isles.islands.results.RunResult` (a callback may fill fields of it)."""

    def on_exit(self) -> None:
        """After the run, finished or not (a failure, an interrupt): close what is open."""


class Monitors:
    """The callbacks of a run, and the last epoch handed to them.

    Args:
        callbacks: :class:`Callback` objects.
        published_epoch: the last epoch already published (a resumed run's), so that replayed or
            resumed epochs are not handed out twice.

    Raises:
        TypeError: a callback is not a :class:`Callback` (the line names its missing methods).
    """

    def __init__(self, callbacks=(), published_epoch: int = 0):
        self.callbacks, self.published_epoch = [checked(cb) for cb in callbacks], int(published_epoch)

    def started(self, info: dict, t_start: float, use_ray: bool) -> float:
        """Hand ``info`` (the groups' ``info`` and the run's sizes) to ``on_start``, with Ray's cluster
        resources (``None`` outside Ray); return the start-up seconds since ``t_start``."""
        startup_s = time.perf_counter() - t_start
        info = {**info, "startup_s": startup_s, "cluster_resources": cluster_resources() if use_ray else None}
        for cb in self.callbacks:
            cb.on_start(info)
        return startup_s

    def publish(self, record: EpochRecord) -> None:
        """Hand the epoch's record to ``on_epoch``, unless its epoch was published already (an epoch
        replayed after a restart, or before an interrupted run was resumed)."""
        if record.epoch <= self.published_epoch:
            return
        self.published_epoch = record.epoch
        for cb in self.callbacks:
            cb.on_epoch(record)

    def restarted(self, moved: dict) -> None:
        """Hand ``on_restart`` the restarted groups ``{group index: info}``."""
        if moved:
            for cb in self.callbacks:
                cb.on_restart({"groups": moved})

    def drive(self, epochs) -> RunResult:
        """Run the epoch generator ``epochs`` to its end, publishing each record; its :class:`RunResult`."""
        while True:
            try:
                record = next(epochs)
            except StopIteration as stop:
                return stop.value
            self.publish(record)

    def ended(self, result: RunResult) -> RunResult:
        """Hand the result to ``on_end``; return it."""
        for cb in self.callbacks:
            cb.on_end(result)
        return result

    def exited(self) -> None:
        """Hand ``on_exit`` to every callback (after the run, whatever ended it)."""
        for cb in self.callbacks:
            cb.on_exit()


#: the methods of a :class:`Callback`
HOOKS = ("on_start", "on_epoch", "on_restart", "on_end", "on_exit")


def checked(callback, name: str | None = None):
    """``callback`` if it is a :class:`Callback`.

    Raises:
        TypeError: one line naming it (``name``, e.g. ``callbacks.mine``, or its class) and the
            methods it lacks."""
    if isinstance(callback, Callback):
        return callback
    missing = [h for h in HOOKS if not callable(getattr(callback, h, None))]
    raise TypeError(
        f"{name or type(callback).__qualname__}: {type(callback).__module__}.{type(callback).__qualname__} is not "
        f"a callback: it lacks {', '.join(missing)} (subclass isles.islands.control.callbacks.Callback: "
        "a no-op for each method it does not define)"
    )
