"""The island-algorithm interface shared by every algorithm in isles.

An algorithm is a small class over an array module ``xp`` (NumPy or CuPy, same code, same
semantics), in the style of evosax / EvoX:

* its parameters are a frozen dataclass validated on construction (:func:`check_range`);
* its state is a plain ``dict`` of arrays (plus host ints), so that checkpoints are generic;
* it evolves a *batch* of ``I`` islands at once, every array carrying the island axis first
  (``X`` of shape ``(I, N, D)``), so that all islands of one GPU share the same kernel launches;
* ``init`` and ``step`` do no host synchronisation: no ``float()``, ``.get()`` or branching on
  device values, so many generations queue on the GPU without round trips.

Migration is generic over any population algorithm through :meth:`IslandAlgorithm.population`
(the individuals that can emigrate) and :meth:`IslandAlgorithm.replace` (immigrants in).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from algorithms.core.backend import array_module
from algorithms.core.random import CounterRNG
from problems.constraints import Evaluator, argbest

State = dict  # name -> array (device) or host int


def check_range(
    field: str,
    value,
    lo: float | None = None,
    hi: float | None = None,
    *,
    integer: bool = False,
    lo_open: bool = False,
    hi_open: bool = False,
):
    """Validate one config value; raise a one-line ``ValueError`` naming the field and the range.

    Args:
        field: dotted config path, e.g. ``"algorithm.n_particles"``.
        value: the value.
        lo, hi: inclusive bounds (exclusive with ``lo_open``/``hi_open``); ``None`` = unbounded.
        integer: the value must be an integer.

    Raises:
        ValueError: ``"algorithm.n_particles=0: allowed values are integers >= 1"``.
    """
    kind = "integers" if integer else "numbers"
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi}")
    allowed = f"allowed values are {kind} {' and '.join(parts)}".rstrip()
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer and not float(value).is_integer():
        ok = False
    if ok and not np.isfinite(float(value)):
        ok = False
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    if not ok:
        raise ValueError(f"{field}={value!r}: {allowed}")
    return int(value) if integer else float(value)


def params_dict(params) -> dict:
    """The fields of a parameter dataclass as a plain dict (for logging)."""
    return {f.name: getattr(params, f.name) for f in fields(params)}


@dataclass
class Context:
    """What a batch of islands needs to run on one device.

    Attributes:
        xp: ``numpy`` or ``cupy``.
        dtype: float dtype of positions and fitness (``float64`` by default).
        evaluator: the problem with its constraint handling (:class:`problems.constraints.Evaluator`).
        rng: counter-based generator with one stream per island of this batch.
        lower, upper: device arrays ``(D,)`` of the box bounds in ``dtype``.
    """

    xp: Any
    dtype: Any
    evaluator: Evaluator
    rng: CounterRNG

    def __post_init__(self):
        p = self.evaluator.problem
        self.lower = self.xp.asarray(p.lower, dtype=self.dtype)
        self.upper = self.xp.asarray(p.upper, dtype=self.dtype)

    @property
    def dim(self) -> int:
        """Problem dimension ``D``."""
        return self.evaluator.problem.dim

    @property
    def n_islands(self) -> int:
        """Number of islands ``I`` in this batch."""
        return self.rng.n_streams

    def generation_value(self, generation: int):
        """The generation counter for array expressions (e.g. an inertia schedule).

        NumPy: the host int. CuPy: a 0-d device array ``generation + rng.ctr`` in ``dtype``, so
        that a generation captured in a CUDA graph (:mod:`algorithms.core.graph`) sees the right
        counter at every replay.
        """
        if self.xp is np:
            return generation
        return (self.rng.ctr[0] + np.uint64(generation)).astype(self.dtype)

    def uniform_in_box(self, generation: int, draw: int, n: int):
        """``(I, n, D)`` points uniform in the box (initialisation)."""
        u = self.rng.uniform(generation, draw, (n, self.dim), self.dtype)
        return self.lower + u * (self.upper - self.lower)


class IslandAlgorithm:
    """Base class of island algorithms: a batch of ``I`` islands evolved in lockstep.

    Subclasses set ``name`` and ``Params``, and implement :meth:`init`, :meth:`step`,
    :meth:`population` and :meth:`replace`. ``state["generation"]`` (host int) counts
    generations, ``state["evals"]`` (host int) counts objective evaluations per island, and
    ``state["nan_evals"]`` (0-d device int) counts NaN evaluations of the whole batch.
    """

    name = "algorithm"
    Params: type = object
    graph_safe = False  # True: step() can be captured as a CUDA graph (algorithms/core/graph.py)

    def __init__(self, params=None, **kwargs):
        self.params = params if params is not None else self.Params(**kwargs)

    def population_size(self) -> int:
        """Individuals per island ``N`` (what migration may select from)."""
        raise NotImplementedError

    def init(self, ctx: Context) -> State:
        """Initial state of ``ctx.n_islands`` islands (evaluated)."""
        raise NotImplementedError

    def step(self, ctx: Context, state: State) -> State:
        """One generation of every island; no host synchronisation."""
        raise NotImplementedError

    def population(self, state: State):
        """``(X (I, N, D), f (I, N), v (I, N))``: the individuals that migration sees."""
        raise NotImplementedError

    def replace(self, ctx: Context, state: State, idx, X, f, v) -> State:
        """Write immigrants ``X (I, k, D)`` with ``(f, v) (I, k)`` at positions ``idx (I, k)``."""
        raise NotImplementedError

    def best(self, state: State):
        """Best individual of each island: ``(x (I, D), f (I,), v (I,))`` under Deb's rules."""
        X, f, v = self.population(state)
        xp = array_module(X)
        i = argbest(f, v, axis=1)
        rows = xp.arange(X.shape[0])
        return X[rows, i], f[rows, i], v[rows, i]

    def run(self, ctx: Context, state: State, n_generations: int) -> State:
        """``n_generations`` steps back to back on the device (no host round trips)."""
        for _ in range(int(n_generations)):
            state = self.step(ctx, state)
        return state

