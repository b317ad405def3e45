"""Individuals as a small pytree: genome of any dtype, fitness, violation and named extras.

Every algorithm in isles exposes the individuals that migration sees as one :class:`Population`,
island axis first:

* ``genome``: ``(I, N, *G)`` of any dtype: float rows ``(I, N, D)`` for DE and PSO, bits packed
  32 to a ``uint32`` word ``(I, N, W)`` for the GA (:mod:`isles.algorithms.core.encodings`);
* ``f``: ``(I, N)`` fitness (objective) in its own float dtype, whatever the genome's dtype;
* ``v``: ``(I, N)`` total normalised constraint violation (Deb's rules rank the pair ``(v, f)``,
  :mod:`isles.problems.constraints`);
* ``extras``: named per-individual state that travels with the individual, each ``(I, N, ...)``:
  a particle's velocity and current position (PSO), EP's step sizes ``eta``.

Selection of emigrants, transport between actors and replacement of residents all go through
:meth:`Population.take`, :meth:`Population.put`, :meth:`Population.where` and
:meth:`Population.conform`, one code path for every algorithm (:mod:`isles.islands.migration.moves`). The
class is array-module agnostic (NumPy or CuPy; :meth:`to_host` and :meth:`to_device` move it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from isles.algorithms.core.backend import array_module


@dataclass(frozen=True)
class Population:
    """A batch of individuals (see the module docstring).

    Attributes:
        genome: ``(I, N, *G)``, any dtype.
        f: ``(I, N)`` float fitness (minimised).
        v: ``(I, N)`` float violation (0 = feasible).
        extras: ``{name: (I, N, ...)}`` per-individual state that migrates with the individual.
    """

    genome: Any
    f: Any
    v: Any
    extras: Mapping[str, Any] = field(default_factory=dict)

    # -- structure ---------------------------------------------------------------------------
    def leaves(self) -> dict:
        """Flat ``{name: array}``: ``genome``, ``f``, ``v`` and ``extras.<name>``."""
        out = {"genome": self.genome, "f": self.f, "v": self.v}
        out.update({f"extras.{k}": a for k, a in self.extras.items()})
        return out

    @classmethod
    def from_leaves(cls, leaves: Mapping[str, Any]) -> Population:
        """Inverse of :meth:`leaves`."""
        extras = {k[len("extras.") :]: a for k, a in leaves.items() if k.startswith("extras.")}
        return cls(leaves["genome"], leaves["f"], leaves["v"], extras)

    def map(self, fn: Callable) -> Population:
        """Apply ``fn(array) -> array`` to every leaf."""
        return Population(fn(self.genome), fn(self.f), fn(self.v), {k: fn(a) for k, a in self.extras.items()})

    @property
    def shape(self) -> tuple:
        """``(I, N)``: islands and individuals."""
        return tuple(self.f.shape)

    @property
    def xp(self):
        """The array module of the leaves (``numpy`` or ``cupy``)."""
        return array_module(self.f)

    # -- selection and replacement ---------------------------------------------------------------
    def take(self, idx) -> Population:
        """Individuals ``idx (I, k)`` of each island: a Population of shape ``(I, k)``."""
        xp = self.xp
        rows = xp.arange(idx.shape[0])[:, None]
        return self.map(lambda a: a[rows, idx])  # one gather per leaf (take_along_axis costs ~10x on CuPy)

    def put(self, idx, other: Population) -> Population:
        """A copy with ``other (I, k)`` written at positions ``idx (I, k)`` (distinct per island).

        ``other`` must have the same leaves (use :meth:`conform` first); dtypes are converted.
        """
        xp = self.xp
        rows = xp.arange(idx.shape[0])[:, None]
        mine, theirs = self.leaves(), other.leaves()
        out = {}
        for k, a in mine.items():
            b = a.copy()
            b[rows, idx] = xp.asarray(theirs[k], dtype=a.dtype)
            out[k] = b
        return Population.from_leaves(out)

    def where(self, mask, other: Population) -> Population:
        """Per individual: ``self`` where ``mask (I, k)`` is True, else ``other`` (same leaves)."""
        xp = self.xp
        mine, theirs = self.leaves(), other.leaves()
        out = {}
        for k, a in mine.items():
            m = mask.reshape(mask.shape + (1,) * (a.ndim - 2))
            out[k] = xp.where(m, a, theirs[k])
        return Population.from_leaves(out)

    def conform(self, like: Population) -> Population:
        """This population with ``like``'s leaves, dtypes and array module.

        An extra that ``like`` has and ``self`` lacks (an immigrant from the master swarm, which
        carries no velocity) is filled with zeros; extras that ``like`` lacks are dropped.

        Raises:
            ValueError: the genomes' trailing shapes differ (islands of different problems).
        """
        xp = like.xp
        if tuple(self.genome.shape[2:]) != tuple(like.genome.shape[2:]):
            raise ValueError(
                f"migration: immigrant genome shape {tuple(self.genome.shape[2:])} does not match "
                f"the island's {tuple(like.genome.shape[2:])}"
            )
        I, k = self.shape
        extras = {}
        for name, a in like.extras.items():
            if name in self.extras:
                extras[name] = xp.asarray(self.extras[name], dtype=a.dtype)
            else:
                extras[name] = xp.zeros((I, k) + tuple(a.shape[2:]), dtype=a.dtype)
        return Population(
            xp.asarray(self.genome, dtype=like.genome.dtype),
            xp.asarray(self.f, dtype=like.f.dtype),
            xp.asarray(self.v, dtype=like.v.dtype),
            extras,
        )

    # -- transport ------------------------------------------------------------------------------
    def to_host(self) -> Population:
        """Every leaf as a NumPy array (for summaries sent through Ray)."""
        return self.map(lambda a: a.get() if hasattr(a, "get") else np.asarray(a))

    def to_device(self, xp) -> Population:
        """Every leaf in array module ``xp`` (dtypes kept)."""
        return self.map(xp.asarray)

    def island(self, i: int) -> Population:
        """Island ``i`` as a Population of shape ``(1, N)``."""
        return self.map(lambda a: a[i : i + 1])

    @staticmethod
    def concat(pops, axis: int = 1) -> Population:
        """Concatenate populations with the same leaves along ``axis`` (1: individuals, 0: islands)."""
        pops = list(pops)
        xp = pops[0].xp
        keys = pops[0].leaves().keys()
        leaves = [p.leaves() for p in pops]
        return Population.from_leaves({k: xp.concatenate([lv[k] for lv in leaves], axis=axis) for k in keys})


class PopulationRoles(dict):
    """Populations of several roles of one batch of islands, ``{role: Population (I, k)}``.

    What migration carries for an algorithm with more than one population (the co-evolutionary
    DE: roles ``x`` and ``y``, :meth:`isles.algorithms.core.base.IslandAlgorithm.populations`).
    :meth:`island` and :meth:`to_host` apply :class:`Population`'s per role, so the coordinator
    handles it exactly like a single :class:`Population`.
    """

    def map(self, fn: Callable) -> PopulationRoles:
        """Apply ``fn(array) -> array`` to every leaf of every role."""
        return PopulationRoles({r: p.map(fn) for r, p in self.items()})

    def island(self, i: int) -> PopulationRoles:
        """Island ``i`` of every role."""
        return PopulationRoles({r: p.island(i) for r, p in self.items()})

    def to_host(self) -> PopulationRoles:
        """Every leaf as a NumPy array."""
        return PopulationRoles({r: p.to_host() for r, p in self.items()})


def by_role(pops) -> dict:
    """``{role: Population}`` of a :class:`Population` (role ``None``) or a :class:`PopulationRoles`."""
    return dict(pops) if isinstance(pops, dict) else {None: pops}
