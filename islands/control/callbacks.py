"""The run's monitors: ``on_start(info)``, ``on_epoch(record)``, ``on_restart(info)`` and
``on_end(result)`` handed to the callbacks that define them (MLflow tracker, progress bar)."""

from __future__ import annotations

import time

from isles.islands.results import EpochRecord, RunResult, cluster_resources


class Monitors:
    """The callbacks of a run, and the last epoch handed to them.

    Args:
        callbacks: objects with optional ``on_start``, ``on_epoch``, ``on_restart``, ``on_end``.
        published_epoch: the last epoch already published (a resumed run's), so that replayed or
            resumed epochs are not handed out twice.
    """

    def __init__(self, callbacks=(), published_epoch: int = 0):
        self.callbacks, self.published_epoch = list(callbacks), int(published_epoch)

    def _each(self, name: str, arg) -> None:
        for cb in self.callbacks:
            if hasattr(cb, name):
                getattr(cb, name)(arg)

    def started(self, info: dict, t_start: float, use_ray: bool) -> float:
        """Hand ``info`` (the groups' ``info`` and the run's sizes) to ``on_start``, with Ray's cluster
        resources (``None`` outside Ray); return the start-up seconds since ``t_start``."""
        startup_s = time.perf_counter() - t_start
        self._each(
            "on_start", {**info, "startup_s": startup_s, "cluster_resources": cluster_resources() if use_ray else None}
        )
        return startup_s

    def publish(self, record: EpochRecord) -> None:
        """Hand the epoch's record to ``on_epoch``, unless its epoch was published already (an epoch
        replayed after a restart, or before an interrupted run was resumed)."""
        if record.epoch <= self.published_epoch:
            return
        self.published_epoch = record.epoch
        self._each("on_epoch", record)

    def restarted(self, moved: dict) -> None:
        """Hand ``on_restart`` the restarted groups ``{group index: info}``."""
        if moved:
            self._each("on_restart", {"groups": moved})

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
        self._each("on_end", result)
        return result
