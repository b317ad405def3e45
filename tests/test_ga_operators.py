"""CPU tests of the GA's operators (algorithms/ga/operators.py), seed 002 sections 2.3-2.8 and
appendix A: elitism, tournaments (ties to the first drawn), crossovers, per-bit mutation by
geometric gaps (per-bit Bernoulli in distribution), seed mutation (A.5), renewal words. Fast and
CI-safe: NumPy only.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.core.bitstrings import unpack_bits, valid_mask
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.ga.draws import DRAW_CUT, DRAW_RENEW, DRAW_XOVER, flip_thresholds
from isles.algorithms.ga.operators import (
    crossover,
    elite_indices,
    per_bit_flips,
    random_words,
    seed_flips,
    tournament,
)
from scipy import stats


def test_elite_indices_deb_rules_and_ties():
    f = np.array([[3.0, 1.0, 1.0, 0.5, 2.0, 1.0]])
    v = np.array([[0.0, 0.0, 0.0, 0.1, 0.0, 0.0]])
    # feasible first by f, ties to the lower index, the infeasible one last
    assert elite_indices(f, v, 6).tolist() == [[1, 2, 5, 4, 0, 3]]
    assert elite_indices(f, v, 2).tolist() == [[1, 2]]


def test_tournament_best_wins_ties_to_first_drawn():
    rng = CounterRNG(np, 1, [0, 1])
    N, S = 20, 4
    f = np.tile(np.arange(N, dtype=np.float64)[::-1], (2, 1))  # individual N-1 is the best
    v = np.zeros_like(f)
    par = tournament(rng, 5, f, v, S, 0, N)
    idx = (np.arange(N)[:, None, None] * 2 + np.arange(2)[None, :, None]) * S + np.arange(S)
    u = rng.uniform_at(5, 1, idx[None])
    cand = np.minimum((u * N).astype(np.int64), N - 1)
    assert np.array_equal(par, cand.max(axis=-1))  # highest index = lowest f wins
    # all equal: the first drawn candidate wins
    par = tournament(rng, 5, np.zeros((2, N)), np.zeros((2, N)), S, 0, N)
    assert np.array_equal(par, cand[..., 0])
    # an infeasible candidate loses to any feasible one (Deb's rules)
    v = np.ones((2, N))
    v[:, 0] = 0.0
    par = tournament(rng, 5, f, v, S, 0, N)
    assert np.all((par == 0) == (cand == 0).any(axis=-1))


@pytest.mark.parametrize("L", [1, 2, 31, 64, 100])
def test_one_point_crossover(L):
    rng = CounterRNG(np, 2, [0, 1])
    M, W = 50, (L + 31) // 32
    G1 = np.zeros((2, M, W), np.uint32)
    G2 = np.broadcast_to(valid_mask(L), (2, M, W)).copy()
    C = crossover(rng, 7, G1, G2, 10, 10 + M, "one_point", 1.0, L)
    bits = unpack_bits(C, L)
    u = rng.uniform_at(7, DRAW_CUT, (2 * np.arange(10, 10 + M))[None])
    k = 1 + np.minimum((u * (L - 1)).astype(np.int64), L - 2) if L >= 2 else np.ones_like(u, np.int64)
    expect = (np.arange(L) >= k[..., None]).astype(np.uint8)  # parent 2 from the cut on
    assert np.array_equal(bits, expect)
    assert not np.any(C & ~valid_mask(L))


def test_two_point_uniform_and_no_crossover():
    L = 100
    rng = CounterRNG(np, 2, [0, 1])
    M, W = 200, 4
    G1 = np.zeros((2, M, W), np.uint32)
    G2 = np.broadcast_to(valid_mask(L), (2, M, W)).copy()
    C = unpack_bits(crossover(rng, 7, G1, G2, 0, M, "two_point", 1.0, L), L)
    # parent 2's bits form one contiguous segment [a, b)
    for row in C.reshape(-1, L):
        ones = np.flatnonzero(row)
        assert ones.size == 0 or ones[-1] - ones[0] + 1 == ones.size
    U = unpack_bits(crossover(rng, 7, G1, G2, 0, M, "uniform", 1.0, L), L)
    assert abs(U.mean() - 0.5) < 0.01
    # p_c: crossover where u < p_c, else a copy of parent 1
    C = crossover(rng, 7, G1, G2, 0, M, "uniform", 0.3, L)
    do = rng.uniform_at(7, DRAW_XOVER, np.arange(M)[None]) < 0.3
    assert np.all(C[~do] == 0) and (C[do] != 0).any(axis=-1).all()
    assert np.array_equal(crossover(rng, 7, G1, G2, 0, M, "one_point", 0.0, L), G1)


def _reference_flips(rng, g, start, stop, L, p):
    """Per-word geometric gaps written as the plain loop, with floats: gap >= m iff 1 - u <= q_m."""
    q = [(1.0 - p) ** m for m in range(33)]
    W = (L + 31) // 32
    out = np.zeros((rng.n_streams, stop - start, W), np.uint32)
    for i in range(rng.n_streams):
        for c in range(start, stop):
            for w in range(W):
                nb = min(32, L - 32 * w)
                pos, k = -1, 0
                while k < nb:
                    r = nb - 1 - pos
                    z = rng.bits_at(g, 5, np.array([32 * (c * W + w) + k]), np.array([i]))
                    u = 1.0 - float((z[0] >> np.uint64(11)).astype(np.float64)) * 2.0**-53
                    if u <= q[r]:
                        break
                    gap = sum(1 for m in range(1, r) if u <= q[m])
                    pos += gap + 1
                    out[i, c - start, w] |= np.uint32(1 << pos)
                    k += 1
                    if pos >= nb - 1:
                        break
    return out


def test_flip_thresholds_exact():
    for p in (1e-5, 0.01, 1 / 3, 0.5, 0.99):
        K = flip_thresholds(p)
        q = [(1.0 - p) ** m for m in range(33)]
        rs = np.random.default_rng(0)
        k = np.concatenate([rs.integers(0, 2**53, 2000, dtype=np.uint64), K, K - np.uint64(1)])
        k = k[k < 2**53]
        u = 1.0 - k.astype(np.float64) * 2.0**-53
        for m in range(33):
            assert np.array_equal(k >= K[m], u <= q[m])
    assert flip_thresholds(0.0)[5] == 0 and flip_thresholds(1.0)[5] == 2**53


def test_per_bit_flips_match_reference_loop():
    rng = CounterRNG(np, 9, [0, 4])
    for L, p in ((70, 0.2), (64, 0.9), (33, 1.0), (100, 0.01)):
        a = per_bit_flips(rng, 3, 5, 25, L, p)
        assert np.array_equal(a, _reference_flips(rng, 3, 5, 25, L, p))
        assert not np.any(a & ~valid_mask(L))
    assert np.array_equal(per_bit_flips(rng, 3, 0, 10, 33, 1.0), np.broadcast_to(valid_mask(33), (2, 10, 2)))
    assert not per_bit_flips(rng, 3, 0, 10, 33, 0.0).any()


@pytest.mark.parametrize("p", [0.03, 0.3])
def test_per_bit_mutation_is_bernoulli(p):
    """Geometric gaps per word = independent Bernoulli(p) bits: per-position rates, the number of
    flips per word (Binomial(32, p)) and no correlation between neighbouring bits."""
    L = 96
    rng = CounterRNG(np, 4, [0, 1])
    B = unpack_bits(per_bit_flips(rng, 0, 0, 20000, L, p), L).astype(np.float64).reshape(-1, L)
    n = B.shape[0]
    rate = B.mean(axis=0)
    assert np.all(np.abs(rate - p) < 5 * np.sqrt(p * (1 - p) / n))
    counts = B.reshape(n, 3, 32).sum(axis=2).astype(int).ravel()
    obs = np.bincount(counts, minlength=33)
    exp = stats.binom.pmf(np.arange(33), 32, p) * counts.size
    keep = exp >= 5
    obs_k = np.append(obs[keep], obs[~keep].sum())
    exp_k = np.append(exp[keep], exp[~keep].sum())
    assert stats.chisquare(obs_k, exp_k * obs_k.sum() / exp_k.sum()).pvalue > 1e-4
    c = np.corrcoef(B[:, :-1].ravel(), B[:, 1:].ravel())[0, 1]
    assert abs(c) < 0.01


def test_seed_mutation_flips_at_most_one_bit():
    L, p = 100, 0.25
    rng = CounterRNG(np, 4, [0, 1])
    F = seed_flips(rng, 2, 0, 4000, L, p)
    n = unpack_bits(F, L).sum(axis=-1)
    assert set(np.unique(n)) <= {0, 1}
    assert abs(n.mean() - p) < 0.03
    assert not np.any(F & ~valid_mask(L))


def test_random_words_masked():
    rng = CounterRNG(np, 4, [0, 1])
    G = random_words(rng, 3, DRAW_RENEW, 0, 500, 100)
    assert not np.any(G & ~valid_mask(100))
    assert abs(unpack_bits(G, 100).mean() - 0.5) < 0.01
