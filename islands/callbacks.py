"""Callback dispatch: the run's ``on_start(info)``, ``on_epoch(record)``, ``on_restart(info)`` and
``on_end(result)`` handed to the callbacks that define them (MLflow tracker, progress bar)."""
from __future__ import annotations

import time

from isles.islands.results import EpochRecord, RunResult, cluster_resources


class Callbacks:
    """The callback dispatch of :class:`isles.islands.coordinator.Coordinator` (a mix-in: it uses
    its ``callbacks``, ``published_epoch``, ``group_infos``, ``n``, ``generations``, ``use_ray``)."""

    def _ended(self, result: RunResult) -> RunResult:
        """Hand the result to the callbacks' ``on_end``; return it."""
        for cb in self.callbacks:
            if hasattr(cb, "on_end"):
                cb.on_end(result)
        return result

    def _started(self, infos: list, t_start: float) -> float:
        """Hand the groups' ``info`` to the callbacks' ``on_start`` (with Ray's cluster resources,
        ``None`` outside Ray); return the start-up seconds."""
        startup_s = time.perf_counter() - t_start
        self.group_infos = list(infos)
        info = {"groups": infos, "startup_s": startup_s, "n_islands": self.n, "generations": self.generations,
                "max_evaluations": self.cfg["stop"].get("max_evaluations"),  # generations is its limit then
                "cluster_resources": cluster_resources() if self.use_ray else None}
        for cb in self.callbacks:
            if hasattr(cb, "on_start"):
                cb.on_start(info)
        return startup_s

    def _drive(self, epochs) -> RunResult:
        """Run the epoch generator ``epochs`` to its end, handing each record to the callbacks;
        return its :class:`RunResult`."""
        while True:
            try:
                record = next(epochs)
            except StopIteration as stop:
                return stop.value
            self._publish(record)

    def _publish(self, record: EpochRecord) -> None:
        """Hand the epoch's record to the callbacks, unless its epoch was published already (an
        epoch replayed after a restart, or before an interrupted run was resumed)."""
        if record.epoch <= self.published_epoch:
            return
        self.published_epoch = record.epoch
        for cb in self.callbacks:
            if hasattr(cb, "on_epoch"):
                cb.on_epoch(record)

