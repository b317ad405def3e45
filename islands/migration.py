"""Migration policies and routing: which individuals emigrate, which reach whom, where they land.

One code path moves whole individuals (:class:`isles.algorithms.core.population.Population`: genome of
any dtype, fitness, violation and extras such as a particle's velocity or EP's step sizes) for
every algorithm, following pagmo 2's policies:

* emigrant selection :func:`select_best`: the ``k`` best individuals of each island under Deb's
  rules;
* routing :func:`route`: which emigrants (of islands in this group, of islands elsewhere, of the
  master swarm) each destination island receives, with fair truncation;
* immigrant replacement :func:`replacement`: ``replace_worst`` overwrites the worst residents
  unconditionally; ``fair_replace`` replaces a resident only by a better immigrant (the island
  keeps the best ``N`` of residents plus immigrants, as ``pagmo::fair_replace``).

Immigrant blocks are padded to a common width ``K``; ``valid (I, K)`` marks real immigrants.
Everything but :func:`route` (host planning on a few integers) runs on the device without host
synchronisation.
"""
from __future__ import annotations

import numpy as np

from isles.algorithms.core.population import Population
from isles.problems.constraints import better

REPLACEMENTS = ("fair_replace", "replace_worst")
PAD = -2  # source id of a padding slot in route()'s src_of


def _xp(a):
    return __import__("cupy") if type(a).__module__.startswith("cupy") else np


def rank_order(f, v):
    """Indices ``(I, N)`` sorting each island best-first under Deb's rules (stable, lexicographic (v, f))."""
    xp = _xp(f)
    by_f = xp.argsort(f, axis=-1, kind="stable")
    v_sorted = xp.take_along_axis(v, by_f, axis=-1)
    by_v = xp.argsort(v_sorted, axis=-1, kind="stable")
    return xp.take_along_axis(by_f, by_v, axis=-1)


def select_best(f, v, k: int):
    """Emigrant indices ``(I, k)``: the ``k`` best individuals of each island (best first).

    Raises:
        ValueError: ``k`` larger than the population ``N`` or below 1 (field ``islands.n_migrants``).
    """
    n = f.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"islands.n_migrants={k}: allowed values are integers 1..{n} (the population size)")
    return rank_order(f, v)[:, :k]


def route(inbound: dict, n_dest: int, offsets: dict, counts: dict, capacity: int, rotate: int = 0):
    """Plan which pool rows each destination island receives (host side, a few integers).

    The pool is the concatenation of every source's emigrants: source ``s`` has ``counts[s]``
    emigrants (best first) at pool rows ``offsets[s] .. offsets[s] + counts[s] - 1``. Sources are
    islands (global ids) and the master swarm (id ``-1``); a source may have fewer emigrants than
    the others (the master sends one).

    Fair truncation: a destination takes its sources' emigrants round-robin (the best emigrant of
    every source, then the second of every source, ...), in the order the sources are listed,
    and stops at ``capacity`` (its population size): when there is no room for all of them, each
    source loses its worst emigrants first and no source is dropped while another sends two.
    When there are more sources than room for one emigrant each, the list of sources is rotated
    by ``rotate`` (callers pass the generation), so that over the run every source, the master
    swarm included, gets in equally often instead of the last-listed ones never.

    Args:
        inbound: ``{destination position (0..n_dest-1): [source ids]}``.
        n_dest: islands in this group ``I``.
        offsets, counts: ``{source id: first pool row}``, ``{source id: emigrants}``.
        capacity: most immigrants one island accepts (``N``).
        rotate: rotation of the source list when not every source fits (see above).

    Returns:
        ``(rows (I, K) int64, src_of (I, K) int64, valid (I, K) bool)``: pool row, source id
        (:data:`PAD` for padding) and validity of each immigrant slot; ``K`` is the largest
        number of immigrants of any destination (0 when nothing migrates).

    Raises:
        KeyError: a source without an entry in ``offsets``/``counts``.
    """
    plans = {}
    for dst, sources in inbound.items():
        srcs = list(dict.fromkeys(sources))  # each source once, first mention first
        if len(srcs) > capacity:
            r = int(rotate) % len(srcs)
            srcs = srcs[r:] + srcs[:r]
        taken = []
        depth = max((counts[s] for s in srcs), default=0)
        for j in range(depth):
            for s in srcs:
                if j < counts[s] and len(taken) < capacity:
                    taken.append((s, offsets[s] + j))
        plans[int(dst)] = taken
    K = max((len(t) for t in plans.values()), default=0)
    rows = np.zeros((n_dest, K), dtype=np.int64)
    src_of = np.full((n_dest, K), PAD, dtype=np.int64)
    valid = np.zeros((n_dest, K), dtype=bool)
    for dst, taken in plans.items():
        for j, (s, r) in enumerate(taken):
            rows[dst, j], src_of[dst, j], valid[dst, j] = r, s, True
    return rows, src_of, valid


def replacement(policy: str, residents: Population, immigrants: Population, valid):
    """Where immigrants go.

    Args:
        policy: ``"fair_replace"`` or ``"replace_worst"``.
        residents: the islands' population ``(I, N)``.
        immigrants: ``(I, K)`` with the residents' leaves (:meth:`Population.conform`), ``K <= N``.
        valid: ``(I, K)`` bool, real immigrants (padding is False).

    Returns:
        ``(idx (I, K), new (I, K) Population, accepted (I, K), order (I, K))``: write ``new`` at
        ``idx`` (distinct per island: the ``K`` worst residents, worst first); where an immigrant
        is not accepted the resident is written back unchanged; ``order`` is the permutation
        applied to the immigrants (best first), so ``accepted[i, j]`` refers to immigrant
        ``order[i, j]`` of the input.

    Raises:
        ValueError: unknown policy (field ``islands.replacement``).
    """
    if policy not in REPLACEMENTS:
        raise ValueError(f"islands.replacement={policy!r}: allowed values are {'|'.join(REPLACEMENTS)}")
    xp = residents.xp
    K = immigrants.shape[1]
    # immigrants best-first, residents worst-first: pairing them keeps the best N of the union
    imm_order = rank_order(xp.where(valid, immigrants.f, xp.inf), xp.where(valid, immigrants.v, xp.inf))
    imm = immigrants.take(imm_order)
    valid = xp.take_along_axis(valid, imm_order, axis=1)
    idx = rank_order(residents.f, residents.v)[:, ::-1][:, :K]
    res = residents.take(idx)
    accepted = valid if policy == "replace_worst" else valid & better(imm.f, imm.v, res.f, res.v)
    return idx, imm.where(accepted, res), accepted, imm_order
