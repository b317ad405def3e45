"""The GA's operators as array code, NumPy or CuPy (:class:`isles.algorithms.ga.ga.GA` runs them
in the order its module docstring gives; the fused generation, :mod:`isles.algorithms.ga.cuda`,
makes the same draws): elite search, tournaments, crossover, per-bit and seed mutation, renewal
words."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.backend import array_module, device_constant
from isles.algorithms.ga.draws import (
    CROSSOVERS,
    DRAW_CUT,
    DRAW_MUTATE,
    DRAW_SELECT,
    DRAW_XMASK,
    DRAW_XOVER,
    flip_thresholds,
)
from isles.problems.constraints import better


def elite_indices(f, v, n: int):
    """The ``n`` best individuals of each island in rank order: int64 ``(I, n)``.

    Deb's rules (lexicographic ``(v, f)``, :mod:`isles.problems.constraints`), ties to the lower index
    (two stable sorts). ``f, v``: ``(I, N)``.
    """
    xp = array_module(f)
    o1 = xp.argsort(f, axis=1, kind="stable")
    v1 = xp.take_along_axis(v, o1, axis=1)
    o2 = xp.argsort(v1, axis=1, kind="stable")
    return xp.take_along_axis(o1, o2, axis=1)[:, :n]


def tournament(rng, generation: int, f, v, group_size: int, start: int, stop: int):
    """Parents of child slots ``[start, stop)``: int64 ``(I, M, 2)``, ``M = stop - start``.

    Each parent wins a tournament of ``group_size`` candidates drawn uniformly with replacement
    (``DRAW_SELECT``, index ``(2 c + p) S + t``, candidate ``min(floor(u N), N - 1)``); a
    candidate replaces the current winner only if strictly better under Deb's rules, so ties go to
    the first drawn (seed 002 section 2.6, appendix A.3).
    """
    xp = rng.xp
    I, N = f.shape
    S = int(group_size)
    c = np.arange(start, stop, dtype=np.int64)
    idx = (c[:, None, None] * 2 + np.arange(2)[None, :, None]) * S + np.arange(S)[None, None, :]
    u = rng.uniform_at(generation, DRAW_SELECT, device_constant(xp, idx)[None])
    cand = xp.minimum((u * N).astype(np.int64), N - 1)  # (I, M, 2, S)
    flat = cand.reshape(I, -1)
    fc = xp.take_along_axis(f, flat, axis=1).reshape(cand.shape)
    vc = xp.take_along_axis(v, flat, axis=1).reshape(cand.shape)
    win, fw, vw = cand[..., 0], fc[..., 0], vc[..., 0]
    for t in range(1, S):
        b = better(fc[..., t], vc[..., t], fw, vw)
        win = xp.where(b, cand[..., t], win)
        fw = xp.where(b, fc[..., t], fw)
        vw = xp.where(b, vc[..., t], vw)
    return win


def _low_mask(xp, a):
    """uint32 words with the ``clip(a, 0, 32)`` lowest bits set."""
    a = xp.clip(a, 0, 32).astype(np.uint64)
    return ((np.uint64(1) << a) - np.uint64(1)).astype(np.uint32)


def crossover(rng, generation: int, G1, G2, start: int, stop: int, kind: str, p_c: float, n_bits: int):
    """Children ``(I, M, W)`` uint32 of parents ``G1, G2 (I, M, W)`` for slots ``[start, stop)``.

    With probability ``p_c`` (``DRAW_XOVER``) the ``kind`` crossover (module docstring; cuts from
    ``DRAW_CUT``, uniform masks from ``DRAW_XMASK``), else parent 1. Padding bits stay 0.

    Raises:
        ValueError: unknown ``kind``.
    """
    xp = rng.xp
    I, M, W = G1.shape
    L = int(n_bits)
    c = np.arange(start, stop, dtype=np.int64)
    do = rng.uniform_at(generation, DRAW_XOVER, device_constant(xp, c)[None]) < p_c  # (I, M)
    wbit = device_constant(xp, 32 * np.arange(W, dtype=np.int64))
    if kind == "one_point":
        u = rng.uniform_at(generation, DRAW_CUT, device_constant(xp, 2 * c)[None])
        k = 1 + xp.minimum((u * (L - 1)).astype(np.int64), L - 2) if L >= 2 else xp.ones(u.shape, np.int64)
        m1 = _low_mask(xp, k[..., None] - wbit)
        child = (G1 & m1) | (G2 & ~m1)
    elif kind == "two_point":
        u = rng.uniform_at(generation, DRAW_CUT, device_constant(xp, 2 * c[:, None] + np.arange(2))[None])
        cuts = xp.minimum((u * (L + 1)).astype(np.int64), L)
        lo, hi = cuts.min(axis=-1), cuts.max(axis=-1)
        m2 = _low_mask(xp, hi[..., None] - wbit) & ~_low_mask(xp, lo[..., None] - wbit)
        child = (G1 & ~m2) | (G2 & m2)
    elif kind == "uniform":
        z = rng.bits_at(generation, DRAW_XMASK, device_constant(xp, c[:, None] * W + np.arange(W))[None])
        m2 = (z >> np.uint64(32)).astype(np.uint32)
        child = (G1 & ~m2) | (G2 & m2)
    else:
        raise ValueError(f"algorithm.crossover={kind!r}: allowed values are {'|'.join(CROSSOVERS)}")
    return xp.where(do[..., None], child, G1)


def word_bits(n_bits: int) -> np.ndarray:
    """Genome bits of each word, int64 ``(W,)``: 32, except ``L - 32 (W - 1)`` for the last."""
    W = (int(n_bits) + 31) // 32
    nb = np.full(W, 32, dtype=np.int64)
    nb[-1] = int(n_bits) - 32 * (W - 1)
    return nb


def per_bit_flips(rng, generation: int, start: int, stop: int, n_bits: int, p_m: float):
    """Flip masks ``(I, M, W)`` uint32 of per-bit mutation for slots ``[start, stop)``.

    Geometric gaps per word (module docstring): draw ``k`` of word ``w`` of slot ``c`` is
    ``DRAW_MUTATE`` at index ``32 (c W + w) + k``; ``1 + 32 p_m`` hashes per word on average.
    NumPy: the words that still flip are compacted after every draw; CuPy: one elementwise kernel
    (:func:`isles.algorithms.ga.cuda.per_bit_flips_cupy`), no host synchronisation.
    """
    xp = rng.xp
    I = rng.n_streams
    W = (int(n_bits) + 31) // 32
    M = stop - start
    if M <= 0 or p_m <= 0.0:
        return xp.zeros((I, max(M, 0), W), dtype=np.uint32)
    K = flip_thresholds(p_m)
    if xp is not np:
        from isles.algorithms.ga import cuda as ga_cuda  # noqa: PLC0415

        return ga_cuda.per_bit_flips_cupy(rng, generation, start, stop, n_bits, K)
    nbw = word_bits(n_bits)
    base = (np.arange(start, stop, dtype=np.int64)[:, None] * W + np.arange(W)[None, :]) * 32  # (M, W)
    flips = np.zeros((I, M, W), dtype=np.uint32)
    k53 = rng.bits_at(generation, DRAW_MUTATE, base[None]) >> np.uint64(11)  # (I, M, W)
    nb = np.broadcast_to(nbw, (I, M, W))
    act = k53 < K[nb]  # at least one flip in the word
    ii, cc, ww = np.nonzero(act)
    k53, nb = k53[act], nb[act]
    b = base[cc, ww]
    pos = np.full(k53.shape, -1, dtype=np.int64)
    ms = np.arange(1, 33)
    k = 0
    while k53.size:
        r = nb - 1 - pos  # bits left after pos
        gap = ((k53[:, None] >= K[None, 1:]) & (ms[None, :] < r[:, None])).sum(axis=1)
        pos = pos + 1 + gap
        flips[ii, cc, ww] |= np.uint32(1) << pos.astype(np.uint32)
        k += 1
        keep = pos < nb - 1
        ii, cc, ww, b, pos, nb = ii[keep], cc[keep], ww[keep], b[keep], pos[keep], nb[keep]
        if not ii.size:
            break
        k53 = rng.bits_at(generation, DRAW_MUTATE, b + k, streams=ii) >> np.uint64(11)
        go = k53 < K[nb - 1 - pos]
        ii, cc, ww, b, pos, nb, k53 = ii[go], cc[go], ww[go], b[go], pos[go], nb[go], k53[go]
    return flips


def seed_flips(rng, generation: int, start: int, stop: int, n_bits: int, p_m: float):
    """Flip masks ``(I, M, W)`` uint32 of seed 002's mutation (A.5) for slots ``[start, stop)``:
    with probability ``p_m`` (``DRAW_MUTATE`` index ``2 c``) bit ``min(floor(u L), L - 1)`` (index
    ``2 c + 1``) flips."""
    xp = rng.xp
    L = int(n_bits)
    W = (L + 31) // 32
    c = np.arange(start, stop, dtype=np.int64)
    u = rng.uniform_at(generation, DRAW_MUTATE, device_constant(xp, 2 * c[:, None] + np.arange(2))[None])
    do = u[..., 0] < p_m
    pos = xp.minimum((u[..., 1] * L).astype(np.int64), L - 1)
    w = device_constant(xp, np.arange(W, dtype=np.int64))
    hit = do[..., None] & ((pos >> 5)[..., None] == w)
    bit = (np.uint32(1) << (pos & 31).astype(np.uint32))[..., None]
    return xp.where(hit, bit, np.uint32(0)).astype(np.uint32)


def random_words(rng, generation: int, draw: int, start: int, stop: int, n_bits: int):
    """Uniform random genomes ``(I, M, W)`` for slots ``[start, stop)``: word ``w`` of slot ``c`` is
    ``uint32(z >> 32)`` of hash ``c W + w`` of ``draw``, masked to the genome bits."""
    xp = rng.xp
    W = (int(n_bits) + 31) // 32
    idx = np.arange(start, stop, dtype=np.int64)[:, None] * W + np.arange(W)[None, :]
    z = rng.bits_at(generation, draw, device_constant(xp, idx)[None])
    from isles.algorithms.core.bitstrings import valid_mask  # noqa: PLC0415

    return (z >> np.uint64(32)).astype(np.uint32) & valid_mask(n_bits, xp)
