"""Migration topologies: who sends emigrants to whom.

A topology over ``n`` islands is a weight matrix ``W (n, n)`` where ``W[i, j]`` is the probability
that migration happens along the directed edge ``i -> j`` at a migration event (pagmo 2's
semantics for weighted topologies: ``pagmo::free_form``, ``ring``, ``fully_connected``,
``unconnected``). :meth:`Topology.sample` draws the edges used at one migration event.

Names accepted in configs (``topology=NAME``): ``unconnected``, ``ring`` (one-way or two-way),
``fully_connected``, ``star``, ``random`` (each edge with probability ``p``) and ``free_form``
(an explicit edge list ``[[src, dst, weight], ...]``).
"""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.base import check_range


class Topology:
    """Base class: subclasses implement :meth:`weights`."""

    name = "topology"

    def weights(self, n: int) -> np.ndarray:
        """``W (n, n)`` float64 in [0, 1]; ``W[i, j]`` = probability of migration ``i -> j``."""
        raise NotImplementedError

    def sample(self, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
        """Edges ``(src, dst)`` realised at one migration event (each with probability ``W``)."""
        W = self.weights(n)
        hit = rng.random(W.shape) < W
        np.fill_diagonal(hit, False)
        src, dst = np.nonzero(hit)
        return list(zip(src.tolist(), dst.tolist(), strict=False))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Unconnected(Topology):
    """No edges: islands evolve in isolation (pagmo ``unconnected``)."""

    name = "unconnected"

    def weights(self, n: int) -> np.ndarray:
        return np.zeros((n, n))


class Ring(Topology):
    """Ring ``i -> i+1`` (and ``i+1 -> i`` when ``bidirectional``), every edge with ``weight``."""

    name = "ring"

    def __init__(self, bidirectional: bool = True, weight: float = 1.0):
        self.bidirectional = bool(bidirectional)
        self.weight = check_range("topology.weight", weight, 0.0, 1.0)

    def weights(self, n: int) -> np.ndarray:
        W = np.zeros((n, n))
        if n < 2:
            return W
        i = np.arange(n)
        W[i, (i + 1) % n] = self.weight
        if self.bidirectional:
            W[(i + 1) % n, i] = self.weight
        np.fill_diagonal(W, 0.0)
        return W


class FullyConnected(Topology):
    """Every ordered pair ``i != j`` is an edge with ``weight`` (pagmo ``fully_connected``)."""

    name = "fully_connected"

    def __init__(self, weight: float = 1.0):
        self.weight = check_range("topology.weight", weight, 0.0, 1.0)

    def weights(self, n: int) -> np.ndarray:
        W = np.full((n, n), self.weight)
        np.fill_diagonal(W, 0.0)
        return W


class Star(Topology):
    """Hub-and-spokes: island ``center`` exchanges with every other island, both ways."""

    name = "star"

    def __init__(self, center: int = 0, weight: float = 1.0):
        self.center = check_range("topology.center", center, 0, integer=True)
        self.weight = check_range("topology.weight", weight, 0.0, 1.0)

    def weights(self, n: int) -> np.ndarray:
        if self.center >= n:
            raise ValueError(f"topology.center={self.center}: island does not exist (islands.n={n}: ids 0..{n - 1})")
        W = np.zeros((n, n))
        W[self.center, :] = self.weight
        W[:, self.center] = self.weight
        np.fill_diagonal(W, 0.0)
        return W


class RandomGraph(Topology):
    """Erdős–Rényi: every ordered pair is an edge with probability ``p`` at each migration."""

    name = "random"

    def __init__(self, p: float = 0.2):
        self.p = check_range("topology.p", p, 0.0, 1.0)

    def weights(self, n: int) -> np.ndarray:
        W = np.full((n, n), self.p)
        np.fill_diagonal(W, 0.0)
        return W


class FreeForm(Topology):
    """Explicit edge list ``[[src, dst, weight], ...]`` (weight optional, default 1) (pagmo ``free_form``).

    Raises:
        ValueError: an edge that is not ``[src, dst]`` or ``[src, dst, weight]``, or a weight
            outside [0, 1]; at :meth:`weights`, an island id outside ``0..n-1``.
    """

    name = "free_form"

    def __init__(self, edges=()):
        parsed = []
        for e in edges:
            e = list(e)
            if len(e) not in (2, 3):
                raise ValueError(f"topology.edges entry {e}: allowed forms are [src, dst] or [src, dst, weight]")
            src = check_range("topology.edges src", e[0], 0, integer=True)
            dst = check_range("topology.edges dst", e[1], 0, integer=True)
            w = check_range("topology.edges weight", e[2] if len(e) == 3 else 1.0, 0.0, 1.0)
            parsed.append((src, dst, w))
        self.edges = parsed

    def weights(self, n: int) -> np.ndarray:
        W = np.zeros((n, n))
        for src, dst, w in self.edges:
            for node in (src, dst):
                if node >= n:
                    raise ValueError(f"topology.edges: island {node} does not exist (islands.n={n}: ids 0..{n - 1})")
            W[src, dst] = w
        np.fill_diagonal(W, 0.0)
        return W


#: the built-in topologies by the name of their option (``topology=NAME``): each option's node
#: starts from :func:`isles.islands.config.schema.class_node` of its class (``ring_one_way``: ``Ring``'s)
TOPOLOGIES = {
    "free_form": FreeForm,
    "fully_connected": FullyConnected,
    "random": RandomGraph,
    "ring": Ring,
    "star": Star,
    "unconnected": Unconnected,
}
