"""The plug-in interface of the epoch body: code that sees every epoch's bests and may send
migrants to every island (e.g. a swarm that learns from the islands, which lives with its
algorithm under ``algorithms/``). The runtime never names a plug-in's algorithm.

The run config's ``plugins`` list holds factories (instantiated from their ``_target_``): each
``make(xp, dtype, evaluator, seed, stream)`` returns a :class:`Plugin` on the array module ``xp``.
Every island group builds its own replica of every plug-in from the same factory, seed and stream;
the epoch body (:func:`isles.islands.epoch.run_epoch`) hands each replica the bests of every
island in island-id order (gathered from the peer groups), so the replicas stay equal, bit for bit.
A plug-in's migrants reach every island as the immigrants of source id :func:`source_id`.
"""

from __future__ import annotations

from typing import Protocol


def source_id(j: int) -> int:
    """The source id of plug-in ``j``'s migrants in migration plans and records: -1, -3, -4, ...
    (never an island's id, nor the route's padding, :data:`isles.islands.migration.moves.PAD`)."""
    return -1 if int(j) == 0 else -2 - int(j)


def plugin_stream(n_islands: int, j: int = 0) -> int:
    """The random stream of plug-in ``j`` in an archipelago of ``n_islands`` islands (after the islands')."""
    return int(n_islands) + int(j)


class Plugin(Protocol):
    """What the epoch body and the driver call on a plug-in (an implementation lives with its
    algorithm under ``algorithms/``, named by the config's ``plugins``)."""

    def after_epoch(self, bests, phenotype, n_generations: int) -> None:
        """Run on the epoch's bests, Population ``(I, 1)`` of every island (device arrays), and
        their phenotype ``(I, D)``, after an epoch of ``n_generations`` generations."""

    def migrants(self):
        """What it sends to every island before the next epoch, Population ``(1, 1)``, or ``None``."""

    def best(self):
        """Its best so far, Population ``(1, 1)`` (a candidate of the archipelago's best), or ``None``."""

    def metrics(self) -> dict:
        """Its metrics for the epoch's record ``{name: value}`` (numbers or 0-d arrays of ``xp``);
        ``evaluations`` and ``nan_evaluations`` add to the run's totals, the others are recorded
        under their names (e.g. ``master_best_f``)."""

    def state_dict(self, host: bool = True) -> dict | None:
        """Its state (host arrays, or its live device arrays with ``host=False``), ``None`` before
        the first epoch."""

    def load_state_dict(self, state: dict | None) -> None:
        """Continue from a :meth:`state_dict` (host or device arrays; ``None``: start afresh)."""

    def rngs(self) -> list:
        """The counter-based generators it draws from (a captured epoch advances them)."""
