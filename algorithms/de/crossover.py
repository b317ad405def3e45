"""Batched DE crossovers as 0-1 masks (seed 004, Algorithms 7-10 and eq. 9).

In the matrix form of DE (seed 004, Algorithm 2) the crossover is computed *before* the mutation,
as a boolean mask ``(I, N, D)`` that is ``True`` where the trial vector takes the mutant's
coordinate and ``False`` where it keeps the target's:

* ``"bin"`` binomial (uniform) crossover, Algorithm 7 / eq. 2: coordinate ``j`` is taken where
  ``U_j < CR`` or ``j == j_rand``, so at least one coordinate always comes from the mutant.
* ``"exp"`` the classic exponential crossover, Algorithm 8: start at a random ``j``, copy, and
  keep copying the next coordinate (cyclically, ``j = (j + 1) mod D``) while ``U < CR`` and fewer
  than ``D`` were copied. Its length ``L`` is therefore truncated-geometric,
  ``P{L = n} = CR^(n-1) (1 - CR)`` for ``n < D`` and ``P{L = D} = CR^(D-1)`` (seed 004, eq. 3).
  The loop is vectorised exactly: ``L = 1 +`` the number of leading successes ``U_k < CR``
  among the loop's ``D - 1`` tests, so the mask equals the loop's (checked against
  :func:`exponential_length_loop` in the tests).
* ``"nec"`` the new exponential crossover (NEC), Algorithms 9-10 with eq. 9: ``L`` is drawn
  directly by inversion from one uniform per individual, ``L = min(ceil(ln U / ln CR), D)`` for
  ``CR`` in (0, 1), with the special cases ``L = 1`` for ``CR = 0`` and ``L = D`` for ``CR = 1``.
  Since ``P{ceil(ln U / ln CR) <= n} = P{U >= CR^n} = 1 - CR^n`` (eq. 4), ``L`` has exactly the
  classic exponential crossover's distribution; the mask is the cyclic segment of length ``L``
  starting at ``j`` (Algorithm 10 printed without the wrap-around; the wrap-around of Algorithms
  8-9 is what makes the segment always ``L`` long, and it is used here).

Random numbers come from the counter-based generator (:class:`isles.algorithms.core.random.CounterRNG`), so
every mask is a pure function of ``(seed, island, generation, draw, index)`` and identical on
NumPy and CuPy. Draw ids and layouts (the fused CUDA kernels of :mod:`isles.algorithms.de.cuda` use the
same ones, so they draw the same numbers):

* start / ``j_rand``: ``rng.integers(generation, DRAW_START, (N,), D)``;
* binomial and classic-exponential tests: ``rng.uniform(generation, DRAW_CROSS, (N, D), dtype)``
  (exp uses the first ``D - 1`` columns), compared with ``CR`` rounded to ``dtype``;
* NEC: ``rng.uniform(generation, DRAW_CROSS, (N,), float64)``.
"""

from __future__ import annotations

import math

import numpy as np
from isles.algorithms.core.backend import array_module

CROSSOVERS = ("bin", "exp", "nec")

# draw ids of the counter RNG used by the crossovers (see algorithms/de/de.py for the others)
DRAW_START = 2
DRAW_CROSS = 3


def _check_kind(kind: str) -> None:
    if kind not in CROSSOVERS:
        raise ValueError(f"algorithm.crossover={kind!r}: allowed values are {'|'.join(CROSSOVERS)}")


def _check_cr(cr) -> float:
    cr = float(cr)
    if not 0.0 <= cr <= 1.0:
        raise ValueError(f"algorithm.CR={cr!r}: allowed values are numbers >= 0 and <= 1")
    return cr


def start_indices(rng, generation: int, n: int, dim: int, draw: int = DRAW_START):
    """Random start coordinate (``j_rand``) of each individual.

    Seed 004 Algorithm 7 line 2, Algorithm 8 line 4, Algorithm 10 line 1.

    Args:
        rng: :class:`isles.algorithms.core.random.CounterRNG` with ``I`` streams.
        generation: generation counter (host int).
        n: individuals per island ``N``.
        dim: dimension ``D``.
        draw: draw id (default :data:`DRAW_START`).

    Returns:
        int64 array ``(I, N)`` uniform in ``[0, D)``.
    """
    return rng.integers(generation, draw, (n,), dim)


def binomial_mask(rng, generation: int, n: int, dim: int, cr: float, dtype=np.float64, *, start=None):
    """Binomial (uniform) crossover mask, seed 004 Algorithm 7 / eq. 2.

    ``mask[i, k, j] = (U[i, k, j] < CR) or (j == j_rand[i, k])`` with ``U`` uniform in [0, 1) in
    ``dtype`` and ``CR`` rounded to ``dtype``. ``CR = 0`` takes exactly the ``j_rand`` coordinate;
    ``CR = 1`` takes every coordinate.

    Args:
        rng, generation, n, dim: as :func:`start_indices`.
        cr: crossover rate in [0, 1].
        dtype: float dtype of the uniforms (the run's dtype).
        start: optional ``(I, N)`` ``j_rand`` (default: :func:`start_indices`).

    Returns:
        bool array ``(I, N, D)``.

    Raises:
        ValueError: ``cr`` outside [0, 1].
    """
    cr = _check_cr(cr)
    xp = rng.xp
    j = start_indices(rng, generation, n, dim) if start is None else start
    u = rng.uniform(generation, DRAW_CROSS, (n, dim), dtype)
    cols = xp.arange(dim, dtype=np.int64)
    return (u < np.dtype(dtype).type(cr)) | (cols == j[..., None])


def exponential_lengths(rng, generation: int, n: int, dim: int, cr: float, dtype=np.float64):
    """Lengths ``L`` of the classic exponential crossover, seed 004 Algorithm 8 (vectorised).

    The loop copies one coordinate, then tests ``U_1 < CR`` (and ``L < D``), copies again, tests
    ``U_2 < CR``, ... so ``L = 1 + #(leading k with U_k < CR)``, ``k = 1..D-1``. The ``U_k`` are
    the first ``D - 1`` columns of ``rng.uniform(generation, DRAW_CROSS, (N, D), dtype)``.

    Returns:
        int64 array ``(I, N)`` with values in ``[1, D]``.

    Raises:
        ValueError: ``cr`` outside [0, 1].
    """
    cr = _check_cr(cr)
    xp = rng.xp
    u = rng.uniform(generation, DRAW_CROSS, (n, dim), dtype)
    cont = u[..., : dim - 1] < np.dtype(dtype).type(cr)  # (I, N, D-1): the loop's tests
    stop = xp.concatenate([~cont, xp.ones(cont.shape[:-1] + (1,), dtype=bool)], axis=-1)
    return 1 + xp.argmax(stop, axis=-1).astype(np.int64)


def exponential_length_loop(u_row, cr: float, dim: int) -> int:
    """Reference: the length ``L`` that Algorithm 8's do-while loop produces (pure Python).

    Seed 004 Algorithm 8 lines 5-9: ``do {copy; j = (j+1) mod D; L += 1} while (U < CR and
    L < D)``, the ``k``-th test using ``u_row[k - 1]``.

    Args:
        u_row: the individual's uniforms (at least ``D - 1`` of them), already in the run dtype.
        cr: crossover rate, compared in the dtype of ``u_row``.
        dim: dimension ``D``.

    Returns:
        ``L`` in ``[1, D]``.
    """
    cr_t = np.asarray(u_row).dtype.type(cr)
    L = 0
    while True:
        L += 1
        if not (dim > L and u_row[L - 1] < cr_t):
            return L


def nec_lengths(rng, generation: int, n: int, dim: int, cr: float):
    """Lengths ``L`` of the new exponential crossover (NEC), seed 004 eq. 9.

    ``L = 1`` for ``CR = 0``; ``L = D`` for ``CR = 1``; otherwise
    ``L = min(ceil(ln U / ln CR), D)`` with one ``U`` per individual, uniform in [0, 1) in float64
    (``rng.uniform(generation, DRAW_CROSS, (N,), float64)``; ``U = 0`` gives ``L = D``). ``L`` has
    the distribution of the classic exponential crossover's length (eqs. 3-8).

    Returns:
        int64 array ``(I, N)`` with values in ``[1, D]``.

    Raises:
        ValueError: ``cr`` outside [0, 1].
    """
    cr = _check_cr(cr)
    xp = rng.xp
    shape = (rng.n_streams, n)
    if cr <= 0.0:
        return xp.ones(shape, dtype=np.int64)
    if cr >= 1.0:
        return xp.full(shape, dim, dtype=np.int64)
    u = rng.uniform(generation, DRAW_CROSS, (n,), np.float64)
    with np.errstate(divide="ignore"):
        x = xp.ceil(xp.log(u) / math.log(cr))  # log(0) = -inf -> x = +inf -> L = D
    L = xp.minimum(x, float(dim)).astype(np.int64)
    return xp.maximum(L, 1)


def segment_mask(start, length, dim: int):
    """Cyclic segment mask of the exponential crossovers (Algorithms 8-9; Algorithm 10 lines 3-6).

    ``mask[..., j] = ((j - start) mod D) < L``: ``L`` consecutive coordinates starting at
    ``start``, wrapping around from ``D - 1`` to 0.

    Args:
        start: int array ``(I, N)`` in ``[0, D)``.
        length: int array ``(I, N)`` in ``[1, D]``.
        dim: dimension ``D``.

    Returns:
        bool array ``(I, N, D)``.
    """
    xp = array_module(start)
    cols = xp.arange(dim, dtype=np.int64)
    return (cols - start[..., None]) % dim < length[..., None]


def crossover_lengths(kind: str, rng, generation: int, n: int, dim: int, cr: float, dtype=np.float64):
    """The lengths ``L (I, N)`` of an exponential crossover alone (for distribution tests).

    Args:
        kind: ``"exp"`` (classic loop, Algorithm 8) or ``"nec"`` (eq. 9).
        rng, generation, n, dim, cr, dtype: as :func:`crossover_mask`.

    Returns:
        int64 array ``(I, N)`` in ``[1, D]``.

    Raises:
        ValueError: ``kind`` is not ``exp``/``nec``, or ``cr`` outside [0, 1].
    """
    if kind == "exp":
        return exponential_lengths(rng, generation, n, dim, cr, dtype)
    if kind == "nec":
        return nec_lengths(rng, generation, n, dim, cr)
    raise ValueError(f"crossover_lengths: kind={kind!r}: allowed values are exp|nec")


def crossover_mask(kind: str, rng, generation: int, n: int, dim: int, cr: float, dtype=np.float64):
    """Crossover mask ``(I, N, D)`` (``True`` = take the mutant's coordinate).

    Args:
        kind: ``"bin"`` (Algorithm 7), ``"exp"`` (Algorithm 8) or ``"nec"`` (Algorithms 9-10,
            eq. 9).
        rng: counter RNG with ``I`` streams; generation: host int; n: ``N``; dim: ``D``.
        cr: crossover rate in [0, 1].
        dtype: float dtype of the per-coordinate uniforms (bin, exp).

    Returns:
        bool array ``(I, N, D)``; every row has at least one ``True``.

    Raises:
        ValueError: unknown ``kind`` (message names ``algorithm.crossover`` and the allowed
            values) or ``cr`` outside [0, 1].
    """
    _check_kind(kind)
    if kind == "bin":
        return binomial_mask(rng, generation, n, dim, cr, dtype)
    start = start_indices(rng, generation, n, dim)
    return segment_mask(start, crossover_lengths(kind, rng, generation, n, dim, cr, dtype), dim)
