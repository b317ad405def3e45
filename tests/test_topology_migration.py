"""Topologies (pagmo semantics) and migration policies (select_best, fair_replace, replace_worst)."""
import numpy as np
import pytest

from islands.migration import replacement, select_best
from islands.topology import FreeForm, FullyConnected, RandomGraph, Ring, Star, Unconnected


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
    assert select_best(f, v, 2).tolist() == [[1, 2]]
    with pytest.raises(ValueError, match="islands.n_migrants=5"):
        select_best(f, v, 5)


def _pop():
    X = np.arange(8, dtype=float).reshape(1, 4, 2)
    f = np.array([[1.0, 4.0, 2.0, 3.0]])
    v = np.zeros((1, 4))
    return X, f, v


def test_fair_replace_only_replaces_worse():
    X, f, v = _pop()
    imm_X = np.full((1, 2, 2), -1.0)
    imm_f = np.array([[3.5, 9.0]])  # 3.5 beats the worst (4.0); 9.0 beats nothing
    imm_v = np.zeros((1, 2))
    idx, Xn, fn, vn, acc, order = replacement("fair_replace", f, v, imm_X, imm_f, imm_v, np.ones((1, 2), bool), X)
    assert idx.tolist() == [[1, 3]]  # worst first
    assert acc.tolist() == [[True, False]]
    assert fn.tolist() == [[3.5, 3.0]]


def test_replace_worst_is_unconditional_and_respects_padding():
    X, f, v = _pop()
    imm_X = np.zeros((1, 2, 2))
    imm_f = np.array([[9.0, 0.0]])
    valid = np.array([[True, False]])
    _, _, fn, _, acc, _ = replacement("replace_worst", f, v, imm_X, imm_f, np.zeros((1, 2)), valid, X)
    assert acc.sum() == 1 and 9.0 in fn[0]
    with pytest.raises(ValueError, match="islands.replacement"):
        replacement("swap", f, v, imm_X, imm_f, np.zeros((1, 2)), valid, X)
