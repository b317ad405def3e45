"""Topologies (pagmo semantics) and migration policies (select_best, fair_replace, replace_worst)."""

import numpy as np
import pytest
from isles.algorithms.core.population import Population
from isles.islands.migration.moves import PAD, replacement, route, select_best
from isles.islands.migration.topology import FreeForm, FullyConnected, RandomGraph, Ring, Star, Unconnected


def test_ring_edges():
    W = Ring(bidirectional=False).weights(4)
    assert W[0, 1] == 1 and W[3, 0] == 1 and W[1, 0] == 0
    W2 = Ring(bidirectional=True).weights(4)
    assert W2[1, 0] == 1 and W2.sum() == 8
    assert np.all(np.diag(W2) == 0)


def test_fully_connected_star_unconnected():
    assert FullyConnected().weights(5).sum() == 20
    S = Star(center=2).weights(5)
    assert S[2].sum() == 4 and S[:, 2].sum() == 4 and S.sum() == 8
    assert Unconnected().weights(3).sum() == 0


def test_random_graph_probability():
    rng = np.random.default_rng(0)
    edges = sum(len(RandomGraph(p=0.3).sample(10, rng)) for _ in range(200))
    assert abs(edges / (200 * 90) - 0.3) < 0.02


def test_free_form_weights_and_sampling():
    t = FreeForm(edges=[[0, 1, 1.0], [1, 2, 0.0], [2, 0]])
    W = t.weights(3)
    assert W[0, 1] == 1 and W[1, 2] == 0 and W[2, 0] == 1
    edges = t.sample(3, np.random.default_rng(1))
    assert (0, 1) in edges and (2, 0) in edges and (1, 2) not in edges


def test_free_form_unknown_island_is_an_error():
    with pytest.raises(ValueError, match=r"island 7 does not exist \(islands.n=4"):
        FreeForm(edges=[[0, 7]]).weights(4)
    with pytest.raises(ValueError, match="topology.edges"):
        FreeForm(edges=[[0, 1, 2.0]])
    with pytest.raises(ValueError, match="topology.center"):
        Star(center=9).weights(3)


def test_select_best_uses_feasibility_rules():
    f = np.array([[5.0, 1.0, 3.0, 0.5]])
    v = np.array([[0.0, 0.0, 0.0, 2.0]])  # the lowest f is infeasible
    assert select_best(f, v, 2).tolist() == [[1, 2]]  # k is checked once, when a group is built (test_validation_once)


def _pop():
    X = np.arange(8, dtype=float).reshape(1, 4, 2)
    f = np.array([[1.0, 4.0, 2.0, 3.0]])
    v = np.zeros((1, 4))
    return Population(X, f, v)


def test_fair_replace_only_replaces_worse():
    imm = Population(np.full((1, 2, 2), -1.0), np.array([[3.5, 9.0]]), np.zeros((1, 2)))
    # 3.5 beats the worst (4.0); 9.0 beats nothing
    idx, new, acc, order = replacement("fair_replace", _pop(), imm, np.ones((1, 2), bool))
    assert idx.tolist() == [[1, 3]]  # worst first
    assert acc.tolist() == [[True, False]]
    assert new.f.tolist() == [[3.5, 3.0]]


def test_replace_worst_is_unconditional_and_respects_padding():
    imm = Population(np.zeros((1, 2, 2)), np.array([[9.0, 0.0]]), np.zeros((1, 2)))
    valid = np.array([[True, False]])
    _, new, acc, _ = replacement("replace_worst", _pop(), imm, valid)
    assert acc.sum() == 1 and 9.0 in new.f[0]
    with pytest.raises(ValueError, match="islands.replacement"):
        replacement("swap", _pop(), imm, valid)


def test_route_is_fair_when_truncated():
    # three sources with 3, 3 and 1 (the master) emigrants into an island of capacity 5
    offsets, counts = {0: 0, 1: 3, -1: 6}, {0: 3, 1: 3, -1: 1}
    rows, src, valid = route({0: [0, 1, -1]}, 1, offsets, counts, capacity=5)
    assert valid.sum() == 5
    assert rows[0].tolist() == [0, 3, 6, 1, 4]  # best of each source first, then the seconds
    assert src[0].tolist() == [0, 1, -1, 0, 1]
    rows, src, valid = route({1: [1]}, 2, offsets, counts, capacity=10)
    assert valid[0].sum() == 0 and rows[1].tolist() == [3, 4, 5] and src[0].tolist() == [PAD] * 3


def test_route_rotates_sources_when_more_than_capacity():
    # five sources (four islands and the master) of one emigrant each into an island of two slots:
    # over five generations every source gets in equally often, the master included
    sources = [3, 4, 5, 6, -1]
    offsets, counts = {s: j for j, s in enumerate(sources)}, {s: 1 for s in sources}
    seen = []
    for gen in range(5):
        _, src, valid = route({0: sources}, 1, offsets, counts, capacity=2, rotate=gen)
        assert valid.sum() == 2
        seen.extend(src[0].tolist())
    assert sorted(seen) == sorted(sources * 2)
    # without truncation the rotation changes nothing
    a = route({0: sources}, 1, offsets, counts, capacity=10, rotate=0)
    b = route({0: sources}, 1, offsets, counts, capacity=10, rotate=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=False))
