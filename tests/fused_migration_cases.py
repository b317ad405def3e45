"""Random island groups for the fused migration tests (tests/test_fused_migration.py on the CPU,
tests/test_fused_migration_gpu.py on CuPy): populations with ties, infeasible individuals and
NaNs, plans (ring, fully connected, random), and :func:`compare`, which runs
:func:`isles.islands.migration.moves.emigrants_of` and :func:`~isles.islands.migration.moves.immigrate` with the
fused kernels and with the generic code and checks that every byte agrees."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from isles.algorithms.core.base import IslandAlgorithm
from isles.algorithms.core.population import Population
from isles.islands.migration import fused as fm
from isles.islands.migration import moves as migration
from isles.islands.migration.policies import SelectBest


class Plain(IslandAlgorithm):
    """The base class's population and replace (the fused ``full`` write), with or without the
    extras ``vel (I, N, 2)`` and ``eta (I, N)``."""

    def __init__(self, extras: bool = False):
        super().__init__()
        self.EXTRAS = {"vel": "vel", "eta": "eta"} if extras else {}


class WithReplace(IslandAlgorithm):
    """An own replace (the fused ``slots`` write), as FEP's: a step size ``<= 0`` becomes 0.5,
    and a value computed from the new state."""

    EXTRAS = {"eta": "eta"}

    def replace(self, ctx, state, idx, immigrants):
        """Base replace of the immigrants with fixed step sizes, then ``best`` (I,) of the new f."""
        xp = immigrants.xp
        eta = immigrants.extras["eta"]
        eta = xp.where(eta > 0, eta, eta.dtype.type(0.5))
        s = super().replace(ctx, state, idx, Population(immigrants.genome, immigrants.f, immigrants.v, {"eta": eta}))
        s["best"] = s["f"].min(axis=1)
        return s


def random_state(
    rng, I: int, N: int, f_dtype, v_dtype, genome_dtype: str, trailing: tuple, nan: bool = False, levels: int = 3
):
    """``(state, Population)``: ``X (I, N, *trailing)`` of ``genome_dtype``, ``f`` on ``levels``
    values (ties, -0.0 beside 0.0), ``v`` 0 for about half (ties among the infeasible too), extras
    ``vel`` and ``eta`` (some ``<= 0``); ``nan``: some NaN in ``f`` and ``v``."""
    g = np.dtype(genome_dtype)
    shape = (I, N, *trailing)
    if g.kind == "f":
        X = rng.normal(size=shape).astype(g)
    else:
        info = np.iinfo(g)
        X = rng.integers(info.min, info.max, size=shape, dtype=g, endpoint=True)
    f = (rng.integers(0, levels, size=(I, N)) * 0.5).astype(f_dtype)
    f[(f == 0) & (rng.random((I, N)) < 0.5)] *= -1  # -0.0 ties with 0.0
    v = np.where(rng.random((I, N)) < 0.5, 0, rng.integers(1, 3, size=(I, N))).astype(v_dtype)
    if nan:
        f[rng.random((I, N)) < 0.15] = np.nan
        v[rng.random((I, N)) < 0.1] = np.nan
    state = {
        "X": X,
        "f": f,
        "v": v,
        "vel": rng.normal(size=(I, N, 2)),
        "eta": rng.normal(size=(I, N)).astype(np.float32),
        "generation": int(rng.integers(0, 100)),
    }
    return state, Population(X, f, v, {"vel": state["vel"], "eta": state["eta"]})


def plans(I: int, seed: int = 0) -> list:
    """``[(island ids, inbound)]``: a ring, fully connected, and two random plans (a destination
    may have no source) of ``I`` islands with global ids ``10 .. 10 + I - 1``."""
    ids = list(range(10, 10 + I))
    rng = np.random.default_rng(seed)
    out = [
        (ids, {d: [ids[(d - 1) % I]] for d in range(I)}),
        (ids, {d: [ids[s] for s in range(I) if s != d] for d in range(I)}),
    ]
    for _ in range(2):
        inbound = {}
        for d in range(I):
            srcs = [ids[s] for s in rng.permutation(I)[: rng.integers(0, I)] if s != d]
            if srcs:
                inbound[d] = srcs
        out.append((ids, inbound or {0: [ids[-1]]}))
    return out


def _same(a, b, what):
    a = a.get() if hasattr(a, "get") else a
    b = b.get() if hasattr(b, "get") else b
    if hasattr(a, "dtype"):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), (what, a, b)
    else:
        assert a == b, (what, a, b)


def compare(
    monkeypatch, xp, rng, algo, plan, policy, k: int, fv, genome, N: int, nan: bool = False, levels: int = 3
) -> None:
    """One random group of ``plan`` (:func:`plans`), migrated with the fused kernels and with the
    generic code (``xp``: NumPy runs the kernels' host emulation, CuPy the CUDA kernels): the
    emigrants, the new state and the events must agree byte for byte, and the fused path must
    have run."""
    ids, inbound = plan
    state, _ = random_state(rng, len(ids), N, fv[0], fv[1], genome[0], genome[1], nan, levels)
    state = {key: xp.asarray(a) if hasattr(a, "shape") else a for key, a in state.items()}
    ctx = SimpleNamespace(xp=xp)
    ran = []
    select, imm = fm.select_best, fm.immigrate_role

    def spy(fn):
        def wrapped(*a, **kw):
            out = fn(*a, **kw)
            ran.append(out is not None)
            return out

        return wrapped

    monkeypatch.setattr(fm, "select_best", spy(select))
    monkeypatch.setattr(fm, "immigrate_role", spy(imm))
    results = []
    for fused in (False, True):
        monkeypatch.setattr(migration, "_fused", lambda pop, fused=fused: fused)
        em = migration.emigrants_of(algo, state, k, SelectBest())
        s, events = migration.immigrate(algo, ctx, state, ids, em, inbound, {}, policy)
        results.append((em, s, events))
    monkeypatch.setattr(fm, "select_best", select)
    monkeypatch.setattr(fm, "immigrate_role", imm)
    assert ran == [True, True], ran  # the fused path ran, once for emigrants and once for immigrants
    (e0, s0, v0), (e1, s1, v1) = results
    for name, a in e0.leaves().items():
        _same(a, e1.leaves()[name], f"emigrants {name}")
    assert sorted(s0) == sorted(s1)
    for key in s0:
        _same(s0[key], s1[key], f"state {key}")
    assert len(v0) == len(v1) == 1
    for what, a, b in zip(("src_of", "order", "accepted", "f_new"), v0[0], v1[0], strict=False):
        _same(a, b, f"event {what}")
    assert repr(migration.migration_events(v0, ids)) == repr(migration.migration_events(v1, ids))  # NaN f moved
