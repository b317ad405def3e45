"""The loop in an actor: the whole archipelago in one process, run as one Ray actor when every
island shares one device (sync mode); the driver pulls the epoch records in batches."""
from __future__ import annotations

import time
import traceback

#: seconds of epochs an in-actor run (:class:`Archipelago`) runs between two reports to the driver
REPORT_S = 0.25


class Archipelago:
    """The whole archipelago in one process: a :class:`Coordinator` with in-process island
    groups, run as one Ray actor when every island shares one device (sync mode).

    The coordinator's epoch loop (migration plan, plug-in, archipelago best, checkpoints)
    runs beside the islands, so a per-generation exchange (``migration_interval=1``)
    costs no Ray round trip; the driver pulls the epoch records in batches with
    :meth:`advance`. Same code, same random numbers, same result as the loop in the driver.

    Args:
        coordinator: the class of the coordinator to run here,
            :class:`isles.islands.coordinator.Coordinator` (its driver passes it, so that this
            module imports nothing of the coordinator, which starts this class).
        cfg, topology, master: as :class:`Coordinator`.
        device: ``cpu`` or ``gpu``, the placement's device.
        resume_from: the driver's :attr:`Coordinator.resume_from` (read and checked there).
    """

    def __init__(self, coordinator: type, cfg: dict, topology, master, device: str, resume_from: dict | None = None):
        ck = {**cfg["checkpoint"], "resume": None}
        cfg = type(cfg)({**cfg, "device": device, "islands": {**cfg["islands"], "n_actors": 1}, "checkpoint": ck})
        self.coordinator = coordinator(cfg, topology, master, use_ray=False)
        self.coordinator.resume_from = resume_from
        self.placement = self.coordinator._placement()
        self.groups = self.coordinator._start_groups(self.placement)
        self._epochs = None

    def info(self) -> list:
        """The ``info`` of the one island group."""
        return [g.info() for g in self.groups]

    def advance(self, budget_s: float):
        """Run epochs for about ``budget_s`` seconds (at least one).

        Returns:
            ``(records, result, error, snapshot)``: the epochs' records; the :class:`RunResult`
            once the run has ended, else ``None``; the exception that ended the run, else
            ``None`` (given back rather than raised, so the records before it still reach the
            driver); the snapshot taken since the last call (the driver keeps it, to restart
            this actor from it if it dies), else ``None``.
        """
        if self._epochs is None:
            self._epochs = self.coordinator._run_sync(self.groups, self.placement)
        records, t0, snap0 = [], time.perf_counter(), self.coordinator.last_snapshot
        while True:
            try:
                records.append(next(self._epochs))
            except StopIteration as stop:
                return records, stop.value, None, self._new_snapshot(snap0)
            except Exception as err:  # noqa: BLE001
                err.traceback_str = traceback.format_exc()  # read by isles.app.job.failure_line
                return records, None, err, self._new_snapshot(snap0)
            if time.perf_counter() - t0 >= budget_s:
                return records, None, None, self._new_snapshot(snap0)

    def _new_snapshot(self, before):
        snap = self.coordinator.last_snapshot
        return snap if snap is not before else None

    def resume(self, snapshot: dict) -> None:
        """Continue from ``snapshot`` (after Ray restarted this actor): the next :meth:`advance`
        runs the epochs after it."""
        self._epochs = self.coordinator._run_sync(self.groups, self.placement, resume=snapshot)


