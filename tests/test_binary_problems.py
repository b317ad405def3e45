"""Natively binary problems (problems/binary.py): OneMax, trap-k (Deb & Goldberg 1993), knapsack
(Pisinger 2005 generators, exact DP optimum). Values on hand-made bit strings, deceptiveness,
generator ranges, DP against brute force, one-line errors naming the field."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from isles.problems.binary import KNAPSACK_KINDS, Knapsack, OneMax, Trap, knapsack_instance, knapsack_optimum
from isles.problems.constraints import Evaluator
from isles.problems.registry import make_problem


def _bits(s: str) -> np.ndarray:
    return np.array([int(c) for c in s.replace(" ", "")], dtype=np.uint8)


# ---------------------------------------------------------------------------------------------
# OneMax
# ---------------------------------------------------------------------------------------------
def test_onemax_values_and_attributes():
    p = OneMax(n_bits=8)
    assert p.genome == "bits" and p.n_bits == p.dim == 8 and p.n_constraints == 0 and p.f_star == 0.0
    assert np.all(p.lower == 0) and np.all(p.upper == 1)
    B = np.stack([_bits("00000000"), _bits("11111111"), _bits("10110001")])
    f = p.objective(B)
    assert f.dtype == np.float64 and f.tolist() == [8.0, 0.0, 4.0]
    assert p.objective(B.astype(bool)).tolist() == [8.0, 0.0, 4.0]
    assert p.objective(B.reshape(3, 1, 8)).shape == (3, 1)  # any batch shape


def test_evaluator_gives_float_fitness_for_bits():
    p = OneMax(n_bits=5)
    B = np.ones((2, 3, 5), dtype=np.uint8)
    f, v, n = Evaluator(p)(B)
    assert f.dtype == v.dtype == np.float64 and f.shape == (2, 3) and int(n) == 0
    f32, v32, _ = Evaluator(p)(B, dtype=np.float32)
    assert f32.dtype == v32.dtype == np.float32


# ---------------------------------------------------------------------------------------------
# trap-k
# ---------------------------------------------------------------------------------------------
def test_trap5_block_values():
    p = Trap(n_bits=5)
    # u ones -> k - trap(u): u=0 -> 1, u=1 -> 2, ..., u=4 -> 5, u=5 -> 0
    for u, want in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)]:
        b = np.array([1] * u + [0] * (5 - u), dtype=np.uint8)
        assert p.objective(b) == want
        assert p.objective(np.roll(b, 2)) == want  # only the number of ones counts


def test_trap_concatenation_and_name():
    p = make_problem("trap5", n_bits=15)
    assert p.name == "trap5" and p.k == 5 and p.f_star == 0.0
    B = np.stack([_bits("11111 00000 10000"), _bits("00000 00000 00000"), np.ones(15, np.uint8)])
    assert p.objective(B).tolist() == [0 + 1 + 2, 3.0, 0.0]
    assert Trap(n_bits=8, k=4).name == "trap4"


def test_trap_is_deceptive_all_zeros_is_the_second_best_local_optimum():
    k, m = 5, 4
    p = Trap(n_bits=k * m, k=k)
    zeros = np.zeros(k * m, dtype=np.uint8)
    f0 = float(p.objective(zeros))
    assert f0 == m  # every block unsolved by one
    # local optimum: every single-bit flip is worse
    flips = np.tile(zeros, (k * m, 1)) ^ np.eye(k * m, dtype=np.uint8)
    assert np.all(p.objective(flips) > f0)
    # second best: over all strings of one block (the others fixed), only all ones beats all zeros
    block_vals = {
        u: float(Trap(n_bits=k, k=k).objective(np.array([1] * u + [0] * (k - u), np.uint8))) for u in range(k + 1)
    }
    assert sorted(block_vals.values())[:2] == [0.0, 1.0] and block_vals[k] == 0.0 and block_vals[0] == 1.0
    # the slope leads away from the optimum: more ones (short of k) is worse
    assert all(block_vals[u] < block_vals[u + 1] for u in range(k - 1))


def test_trap_errors_name_the_field():
    with pytest.raises(ValueError, match=r"^problem\.n_bits=12: allowed values are multiples of problem\.k=5$"):
        Trap(n_bits=12)
    with pytest.raises(ValueError, match=r"problem\.k"):
        Trap(n_bits=10, k=1)
    with pytest.raises(ValueError, match=r"problem\.n_bits"):
        Trap(n_bits=0)
    with pytest.raises(ValueError, match=r"problem\.n_bits"):
        OneMax(n_bits=2.5)


# ---------------------------------------------------------------------------------------------
# knapsack
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 7])
def test_generators_ranges(seed):
    R = 1000
    w, p = knapsack_instance(2000, "uncorrelated", seed, R)
    assert w.dtype == p.dtype == np.int64 and w.shape == p.shape == (2000,)
    assert w.min() >= 1 and w.max() <= R and p.min() >= 1 and p.max() <= R
    assert w.max() > 0.95 * R and p.min() < 0.05 * R  # the whole range is used
    assert abs(np.corrcoef(w, p)[0, 1]) < 0.1
    w2, p2 = knapsack_instance(2000, "strongly_correlated", seed, R)
    assert w2.min() >= 1 and w2.max() <= R and np.array_equal(p2, w2 + R // 10)
    w3, _ = knapsack_instance(2000, "uncorrelated", seed, R)
    assert np.array_equal(w, w3)  # reproducible


def test_knapsack_values_and_constraint():
    k = Knapsack(n_items=6, seed=3)
    assert k.genome == "bits" and k.n_bits == k.dim == 6 and k.n_constraints == 1
    assert k.capacity == float(int(k.weights.sum()) // 2) and k.constraint_scale.tolist() == [k.capacity]
    B = np.stack([np.zeros(6, np.uint8), np.ones(6, np.uint8), _bits("101000")])
    f, g = k.objective(B), k.constraints(B)
    assert f.tolist() == [0.0, -float(k.values.sum()), -float(k.values[0] + k.values[2])]
    assert g.shape == (3, 1)
    assert g[:, 0].tolist() == [-k.capacity, k.weights.sum() - k.capacity, k.weights[0] + k.weights[2] - k.capacity]
    _, v, _ = Evaluator(k)(B)
    assert v[0] == 0 and v[1] == pytest.approx((k.weights.sum() - k.capacity) / k.capacity)


def _brute(w, p, C):
    best, bx = 0, np.zeros(len(w), np.uint8)
    for bits in itertools.product((0, 1), repeat=len(w)):
        x = np.array(bits)
        if x @ w <= C and x @ p > best:
            best, bx = int(x @ p), x.astype(np.uint8)
    return best, bx


@pytest.mark.parametrize(
    "n,kind,seed,R,frac",
    [
        (1, "uncorrelated", 0, 10, 0.5),
        (5, "uncorrelated", 1, 20, 0.5),
        (8, "strongly_correlated", 2, 100, 0.3),
        (10, "uncorrelated", 3, 1000, 0.5),
        (12, "strongly_correlated", 4, 50, 0.6),
        (12, "uncorrelated", 5, 30, 0.1),
    ],
)
def test_dp_optimum_equals_brute_force(n, kind, seed, R, frac):
    w, p = knapsack_instance(n, kind, seed, R)
    C = np.floor(frac * w.sum()) + 0.25  # a non-integer capacity too
    best, x = knapsack_optimum(w, p, C)
    bbest, _ = _brute(w, p, C)
    assert best == bbest
    assert x.dtype == np.uint8 and int(x @ w) <= C and int(x @ p) == best


def test_knapsack_f_star_is_the_optimum_when_small():
    k = Knapsack(n_items=12, kind="strongly_correlated", seed=4, R=50)
    best, _ = _brute(k.weights, k.values, k.capacity)
    assert k.f_star == -best
    big = Knapsack(n_items=3000, R=1000)  # n * capacity ~ 7.5e8 > 2e7: not solved
    assert big.f_star is None
    assert Knapsack(n_items=10, capacity=0.5).f_star == 0.0  # nothing fits


def test_knapsack_errors_name_the_field():
    with pytest.raises(ValueError, match=r"^problem\.capacity=0: allowed values are numbers > 0$"):
        Knapsack(n_items=5, capacity=0)
    with pytest.raises(ValueError, match=r"^problem\.capacity=-3\.0: allowed values are numbers > 0$"):
        Knapsack(n_items=5, capacity=-3.0)
    with pytest.raises(
        ValueError, match=r"^problem\.kind='weak': allowed values are uncorrelated\|strongly_correlated$"
    ):
        Knapsack(n_items=5, kind="weak")
    with pytest.raises(ValueError, match=r"problem\.n_items"):
        Knapsack(n_items=0)
    with pytest.raises(ValueError, match=r"problem\.R"):
        Knapsack(n_items=5, R=0)
    with pytest.raises(ValueError, match=r"knapsack_optimum"):
        knapsack_optimum([1, 2], [1], 3)
    assert KNAPSACK_KINDS == ("uncorrelated", "strongly_correlated")


def test_registry_and_configs_build_the_binary_problems():
    from pathlib import Path  # noqa: PLC0415

    import yaml  # noqa: PLC0415  (omegaconf's dependency)

    root = Path(__file__).resolve().parents[1] / "conf" / "problem"
    for name, cls in (("onemax", OneMax), ("trap5", Trap), ("knapsack", Knapsack)):
        cfg = yaml.safe_load((root / f"{name}.yaml").read_text())
        target = cfg.pop("_target_")
        assert target == f"isles.problems.binary.{cls.__name__}"
        p = cls(**cfg)
        assert make_problem(name, **cfg).describe() == p.describe()
        assert p.describe()["genome"] == "bits"
