"""The plug-in interface of the epoch loop: code that runs on the islands' bests after every
epoch and may send one individual back to every island (e.g. a master population, which lives
with its algorithm under ``algorithms/``).

The run config's ``master`` object (instantiated from its ``_target_``) is the factory: its
``plugin(xp, dtype, evaluator, seed, stream, state)`` returns a :class:`LoopPlugin` on the array
module ``xp``. The loop runs it on the device beside the islands when one group hosts them all,
as an identical replica in every actor of the SPMD loop (:mod:`isles.islands.replica`), or on the
host beside the driver's loop (several in-process groups); the runtime never names the algorithm.
"""
from __future__ import annotations

from typing import Protocol

from isles.islands.planner import MASTER_ID


def with_broadcast(remote: dict | None, plugin) -> dict | None:
    """``remote`` (a plan's ``{source id: Population}``) with an entry ``MASTER_ID: None`` (the
    driver's placeholder for a plug-in hosted beside the islands) set to ``plugin.broadcast()``,
    Population ``(1, 1)``; otherwise ``remote`` itself."""
    if remote and MASTER_ID in remote and remote[MASTER_ID] is None:
        return {**remote, MASTER_ID: plugin.broadcast()}
    return remote


def plugin_stream(n_islands: int) -> int:
    """The random stream of the loop's plug-in in an archipelago of ``n_islands`` islands."""
    return int(n_islands)


class LoopPlugin(Protocol):
    """What the loop calls on a plug-in (an implementation lives with its algorithm under ``algorithms/``)."""

    def after_epoch(self, x, f, v, n_generations: int) -> None:
        """Run on the islands' bests ``x (I, D)``, ``f, v (I,)`` after an epoch of
        ``n_generations`` generations."""

    def best(self):
        """The plug-in's best ``(x (D,), f (0-d), v (0-d))``, part of the archipelago's best."""

    def broadcast(self):
        """The individual sent to every island (``islands.master_sends_best``), Population ``(1, 1)``."""

    def counters(self):
        """``(evaluations, NaN evaluations)`` of the plug-in so far."""

    def started(self) -> bool:
        """Whether it has run its first epoch."""

    def state_dict(self) -> dict | None:
        """Its state as host arrays (snapshots), ``None`` before the first epoch."""

    def load_state_dict(self, state: dict | None) -> None:
        """Continue from a :meth:`state_dict` (``None``: start afresh)."""

    def graph_fits(self, group, plans: list) -> bool:
        """Whether a batch of ``group``'s epochs runs as one captured graph with the plug-in."""

    def run_graph(self, group, n_epochs: int) -> list:
        """Run ``n_epochs`` captured epochs; the group's rows (:meth:`IslandGroup._row`)."""

    def leave_graph(self, group) -> None:
        """Stop the captured graph; the group's and the plug-in's states become plain again."""
