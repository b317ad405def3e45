"""CPU tests of DE's random pieces: the index draws of the mutation (``sample_indices``,
algorithms/de/de.py) and the crossovers (algorithms/de/crossover.py).

Seed 004: Algorithms 2-10, eq. 9 and Fig. 2 (NEC's L has the exponential crossover's
distribution). Fast (a few seconds) and CI-safe: NumPy only.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.de.crossover import (
    binomial_mask,
    crossover_lengths,
    crossover_mask,
    exponential_length_loop,
    segment_mask,
    start_indices,
)
from isles.algorithms.de.de import sample_indices
from scipy import stats


def _expected_counts_truncated_geometric(cr, dim, n):
    p = np.array([cr ** (k - 1) * (1 - cr) for k in range(1, dim)] + [cr ** (dim - 1)])
    return p * n


def _merge_small(obs, exp, min_expected=5.0):
    """Merge tail bins until every expected count is >= min_expected (chi-square validity)."""
    obs, exp = list(obs), list(exp)
    while len(exp) > 2 and exp[-1] < min_expected:
        e, o = exp.pop(), obs.pop()
        exp[-1] += e
        obs[-1] += o
    return np.array(obs, dtype=float), np.array(exp, dtype=float)


# ---------------------------------------------------------------------------------------------
# index selection
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,k", [(4, 3), (6, 5), (3, 2), (10, 5), (50, 3)])
def test_indices_distinct_and_not_target(n, k):
    rng = CounterRNG(np, 3, [0, 1, 2])
    for g in range(300):
        r = sample_indices(rng, g, n, k)
        assert r.shape == (3, n, k) and r.dtype == np.int64
        assert r.min() >= 0 and r.max() < n
        i = np.broadcast_to(np.arange(n)[None, :, None], (3, n, 1))
        allidx = np.sort(np.concatenate([i, r], axis=-1), axis=-1)
        assert np.all(np.diff(allidx, axis=-1) > 0), "indices not distinct / equal to target"


def test_indices_uniform():
    """r0 uniform over the N-1 others; (r0, r1, r2) uniform over ordered distinct triples."""
    n, G = 6, 3000
    rng = CounterRNG(np, 11, [0])
    r = np.stack([sample_indices(rng, g, n, 3)[0] for g in range(G)])  # (G, N, 3)
    for i in (0, 3):
        counts = np.bincount(r[:, i, 0], minlength=n)
        assert counts[i] == 0
        assert stats.chisquare(np.delete(counts, i)).pvalue > 1e-3
        triples = r[:, i, 0] * n * n + r[:, i, 1] * n + r[:, i, 2]
        _, c = np.unique(triples, return_counts=True)
        assert len(c) == 5 * 4 * 3
        assert stats.chisquare(c).pvalue > 1e-3


def test_sample_indices_rejects_too_many():
    rng = CounterRNG(np, 0, [0])
    with pytest.raises(ValueError, match="k=5"):
        sample_indices(rng, 0, 5, 5)


# ---------------------------------------------------------------------------------------------
# crossovers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cr", [0.0, 0.3, 0.9, 1.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binomial_takes_at_least_one_mutant_coordinate(cr, dtype):
    rng = CounterRNG(np, 5, [0, 1])
    n, D = 2000, 12
    j = start_indices(rng, 4, n, D)
    m = binomial_mask(rng, 4, n, D, cr, dtype)
    assert m.shape == (2, n, D) and m.dtype == bool
    assert np.all(m.sum(axis=-1) >= 1)
    assert np.all(np.take_along_axis(m, j[..., None], axis=-1))  # j_rand always taken
    if cr == 0.0:
        assert np.all(m.sum(axis=-1) == 1)
    if cr == 1.0:
        assert np.all(m)
    expected = cr + (1 - cr) / D
    assert abs(m.mean() - expected) < 0.01


def test_classic_exponential_matches_the_loop():
    """Vectorised Algorithm 8 == its do-while loop on the same uniforms (length and segment)."""
    n, D = 400, 9
    for cr, dtype in [(0.5, np.float64), (0.85, np.float32), (0.0, np.float64), (1.0, np.float32)]:
        rng = CounterRNG(np, 2, [0])
        u = rng.uniform(7, 3, (n, D), dtype)[0]  # DRAW_CROSS = 3
        L = crossover_lengths("exp", rng, 7, n, D, cr, dtype)[0]
        mask = crossover_mask("exp", rng, 7, n, D, cr, dtype)[0]
        start = start_indices(rng, 7, n, D)[0]
        for i in range(n):
            Li = exponential_length_loop(u[i], cr, D)
            assert L[i] == Li
            ref = np.zeros(D, bool)
            j = start[i]
            for _ in range(Li):  # Algorithm 8's copy loop, cyclic
                ref[j] = True
                j = (j + 1) % D
            np.testing.assert_array_equal(mask[i], ref)


@pytest.mark.parametrize("cr", [0.2, 0.5, 0.7, 0.9])
def test_nec_length_has_the_exponential_distribution(cr):
    """Seed 004 Fig. 2: L of NEC (eq. 9) and of the classic loop (Alg. 8) have one distribution."""
    D, n = 10, 100_000
    rng = CounterRNG(np, 42, [0])
    L_exp = crossover_lengths("exp", rng, 1, n, D, cr)[0]
    L_nec = crossover_lengths("nec", rng, 2, n, D, cr)[0]  # another generation: independent
    assert L_exp.min() >= 1 and L_exp.max() <= D and L_nec.min() >= 1 and L_nec.max() <= D
    expected = _expected_counts_truncated_geometric(cr, D, n)
    for L in (L_exp, L_nec):
        obs = np.bincount(L, minlength=D + 1)[1:]
        o, e = _merge_small(obs, expected)
        assert stats.chisquare(o, e).pvalue > 1e-3
    # two-sample test: same distribution
    c_exp = np.bincount(L_exp, minlength=D + 1)[1:]
    c_nec = np.bincount(L_nec, minlength=D + 1)[1:]
    keep = (c_exp + c_nec) >= 10
    table = np.stack([c_exp[keep], c_nec[keep]])
    assert stats.chi2_contingency(table).pvalue > 1e-3


@pytest.mark.parametrize("kind", ["exp", "nec"])
def test_special_cases_cr0_and_cr1(kind):
    rng = CounterRNG(np, 9, [0, 1])
    D = 13
    assert np.all(crossover_lengths(kind, rng, 0, 500, D, 0.0) == 1)
    assert np.all(crossover_lengths(kind, rng, 0, 500, D, 1.0) == D)
    assert np.all(crossover_mask(kind, rng, 0, 500, D, 0.0).sum(-1) == 1)
    assert np.all(crossover_mask(kind, rng, 0, 500, D, 1.0))
    # L in [1, D] and the mask has exactly L consecutive (cyclic) ones
    L = crossover_lengths(kind, rng, 3, 500, D, 0.8)
    m = crossover_mask(kind, rng, 3, 500, D, 0.8)
    assert L.min() >= 1 and L.max() <= D
    np.testing.assert_array_equal(m.sum(-1), L)


def test_segment_mask_wraps_around():
    m = segment_mask(np.array([[8, 0, 3]]), np.array([[3, 1, 10]]), 10)
    np.testing.assert_array_equal(np.nonzero(m[0, 0])[0], [0, 8, 9])
    np.testing.assert_array_equal(np.nonzero(m[0, 1])[0], [0])
    assert m[0, 2].all()


def test_crossover_errors():
    rng = CounterRNG(np, 0, [0])
    with pytest.raises(ValueError, match="algorithm.crossover"):
        crossover_mask("two-point", rng, 0, 4, 3, 0.5)
    with pytest.raises(ValueError, match="algorithm.CR"):
        crossover_mask("nec", rng, 0, 4, 3, 1.5)
    with pytest.raises(ValueError, match="exp\\|nec"):
        crossover_lengths("bin", rng, 0, 4, 3, 0.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_reflect_of_the_outside_coordinates_equals_the_whole_array_formula(dtype):
    """NumPy's ``reflect`` computes only the coordinates outside the box; it must equal the
    whole-array formula the GPU runs (``_reflected`` under ``where``), NaN, infinities, a
    zero-width range and far-out values included, bit for bit."""
    from isles.algorithms.de.de import _reflected, apply_bounds  # noqa: PLC0415

    r = np.random.default_rng(3)
    V = (r.standard_normal((3, 20, 6)) * 12).astype(dtype)
    V[0, 0, :3] = [np.nan, np.inf, -np.inf]
    lo, up = np.full(6, -5, dtype), np.array([5, 5, -5, 1e-3, 30, 5], dtype)
    with np.errstate(all="ignore"):
        whole = np.where((lo > V) | (up < V), _reflected(np, V, lo, up), V)
    got = apply_bounds("reflect", V, lo, up)
    assert got.dtype == V.dtype and got is not V
    np.testing.assert_array_equal(got, whole)
    inside = np.clip(V[1:], -4, 4)
    np.testing.assert_array_equal(apply_bounds("reflect", inside, np.full(6, -5, dtype), np.full(6, 5, dtype)), inside)
