"""The fused migration kernels (algorithms/core/migration_kernels.py, cuda/migration.cu) on the
CPU: the same C text compiled as one-thread blocks (``-DISLES_HOST_EMU``) must give the generic
array code's emigrants, states and events bit for bit, on random populations with ties, infeasible
individuals, NaNs, genomes of several dtypes (uint32 words for the GA, an odd-sized int8 row) and
extras, for both write modes and both built-in replacements; plus the host-side planning (copy
units, rows per block, which policies and algorithms take the fused path). The GPU tests
(tests/test_fused_migration_gpu.py) run the same comparisons with the CUDA kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
from isles.algorithms.core import migration_kernels as mk
from isles.islands.migration import fused as fm
from isles.islands.migration import moves as migration
from isles.islands.migration.policies import FairReplace, ReplaceWorst, SelectBest
from isles.problems.cuda_check import compiler

from tests.fused_migration_cases import (
    Plain,
    WithReplace,
    compare,
    plans,
    random_state,
)

needs_cc = pytest.mark.skipif(compiler() is None, reason="no C compiler")


# ---- host-side planning ------------------------------------------------------------------------


def test_copy_unit_is_the_widest_that_divides_the_row_and_aligns_every_pointer():
    assert mk.copy_unit(32, [256, 512, 1024]) == 8
    assert mk.copy_unit(12, [256, 512, 1024]) == 4
    assert mk.copy_unit(32, [256, 4, 1024]) == 4  # a view that starts at 4 bytes
    assert mk.copy_unit(6, [256, 512, 1024]) == 2
    assert mk.copy_unit(3, [256, 512, 1024]) == 1
    assert mk.copy_unit(0, [256, 512, 1024]) == 8  # an empty row copies nothing


def test_chunk_rows_bounds_one_blocks_copy():
    assert mk.chunk_rows(16, 8 * 8 + 16) == 16  # tiny islands: one block each
    assert mk.chunk_rows(5000, 16) == mk.MAX_ROWS
    assert mk.chunk_rows(4096, 8 * 1000) == mk.CHUNK_BYTES // 8000
    assert mk.chunk_rows(100, 10**7) == 1


def test_leaf_table_rows_and_units():
    a = np.zeros((2, 5, 3), np.int8)
    b = np.zeros((2, 5, 4), np.float64)
    t = mk.leaf_table([(a, None, a), (b, b, b)])
    assert [r[3:] for r in t] == [(3, 1), (32, 8)]
    assert t[0][1] == 0 and t[1][1] == b.ctypes.data


def test_which_policies_and_algorithms_take_the_fused_path():
    from isles.algorithms.coevolution.cde import CDE  # noqa: PLC0415
    from isles.algorithms.de.de import DE  # noqa: PLC0415
    from isles.algorithms.ep.fep import FEP  # noqa: PLC0415
    from isles.algorithms.ga.ga import GA  # noqa: PLC0415
    from isles.algorithms.pso.pso import PSO  # noqa: PLC0415

    class MyFair(FairReplace):
        pass

    assert fm.policy_kind(FairReplace()) == 0 and fm.policy_kind(ReplaceWorst()) == 1
    assert fm.policy_kind(MyFair()) is None  # a subclass may change replace(): the generic code
    assert [fm.write_mode(c()) for c in (DE, GA, PSO, FEP, CDE)] == ["full", "full", "slots", "slots", None]


def test_layout_reason_names_what_the_kernels_cannot_take():
    pop = random_state(np.random.default_rng(0), 2, 6, np.float64, np.float32, "float64", (4,))[1]
    assert mk.layout_reason(pop, 3) is None
    assert "float32 or float64" in mk.layout_reason(type(pop)(pop.genome, pop.f.astype(np.float16), pop.v), 3)
    assert "C-contiguous" in mk.layout_reason(type(pop)(pop.genome[:, :, ::2], pop.f, pop.v), 3)
    assert "migrants per island" in mk.layout_reason(pop, mk.MAX_SLOTS + 1)


def test_the_switch_turns_the_fused_path_off(monkeypatch):
    monkeypatch.setenv(fm.ENV, "0")
    assert not fm.enabled()
    monkeypatch.setenv(fm.ENV, "1")
    assert fm.enabled()


# ---- the kernels' C text against the generic code -------------------------------------------------

GENOMES = [("float64", (5,)), ("float32", (3,)), ("uint32", (2,)), ("int8", (3,))]


@needs_cc
@pytest.mark.parametrize("genome", GENOMES, ids=lambda g: g[0])
@pytest.mark.parametrize(
    "fv", [(np.float64, np.float64), (np.float32, np.float32), (np.float32, np.float64)], ids=["f64", "f32", "f32v64"]
)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_emulated_kernels_equal_the_generic_code(monkeypatch, genome, fv, k):
    rng = np.random.default_rng(hash((genome, fv, k)) % 2**32)
    for plan in plans(6):
        for policy in (FairReplace(), ReplaceWorst()):
            for algo in (Plain(extras=True), WithReplace()):
                compare(monkeypatch, np, rng, algo, plan, policy, k, fv, genome, N=9)


@needs_cc
def test_emulated_kernels_with_nans_and_full_fronts(monkeypatch):
    """NaN in f and v sort last; all-equal keys keep the positions' order; K as large as N."""
    rng = np.random.default_rng(7)
    for nan in (True, False):
        for plan in plans(4):
            compare(
                monkeypatch,
                np,
                rng,
                Plain(extras=True),
                plan,
                FairReplace(),
                3,
                (np.float64, np.float64),
                ("float64", (2,)),
                N=4,
                nan=nan,
                levels=1,
            )
            compare(
                monkeypatch,
                np,
                rng,
                WithReplace(),
                plan,
                ReplaceWorst(),
                2,
                (np.float32, np.float32),
                ("uint32", (1,)),
                N=6,
                nan=nan,
            )


@needs_cc
def test_emulated_full_write_in_several_blocks(monkeypatch):
    """Rows of one island over several blocks (chunk_rows): each block writes its rows only."""
    monkeypatch.setattr(mk, "CHUNK_BYTES", 64)
    rng = np.random.default_rng(3)
    for plan in plans(5):
        compare(
            monkeypatch,
            np,
            rng,
            Plain(extras=True),
            plan,
            FairReplace(),
            2,
            (np.float64, np.float64),
            ("float64", (3,)),
            N=11,
        )


@needs_cc
def test_emulated_select_best_trusts_k_checked_at_construction(monkeypatch):
    """Issue 26 item 6: ``k`` is checked once, when a group builds its selection (a ``k`` above the
    population is refused there), not at every migration by the fused selection."""
    from isles.algorithms.de.de import DE
    from isles.islands.migration import policies

    monkeypatch.setattr(migration, "_fused", lambda pop: True)
    checked = []
    monkeypatch.setattr(policies, "check_n_migrants", lambda *args: checked.append(args))
    state = random_state(np.random.default_rng(1), 3, 5, np.float64, np.float64, "float64", (2,))[0]
    assert migration.emigrants_of(Plain(), state, 2, SelectBest()).f.shape == (3, 2) and checked == []
    monkeypatch.undo()
    with pytest.raises(ValueError, match="islands.n_migrants=6"):
        policies.selection_policy(SelectBest(), 6, DE(pop_size=5))


# ---- the events' summary ---------------------------------------------------------------------------


def _events_by_loop(pending, island_ids):
    """The per-island loop that migration_events replaced (one np.unique per destination)."""
    events = []
    for src_of, order, accepted, f_new in pending:
        src_sorted = np.take_along_axis(src_of, order, axis=1)
        for dst in range(src_sorted.shape[0]):
            for src in np.unique(src_sorted[dst]):
                if src == migration.PAD:
                    continue
                m = (src_sorted[dst] == src) & accepted[dst]
                events.append(
                    (int(src), island_ids[dst], int(m.sum()), float(f_new[dst][m].min()) if m.any() else None)
                )
    return events


def test_migration_events_equal_the_per_island_loop():
    """Sources with several immigrants, the plug-in (-1), padding, nothing accepted, NaN f, two roles."""
    rng = np.random.default_rng(2)
    for trial in range(200):
        I, K = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        ids = [int(x) for x in rng.permutation(50)[:I] + 3]
        pending = []
        for _ in range(int(rng.integers(1, 3))):
            src_of = rng.choice([migration.PAD, -1, *ids], size=(I, K))
            order = np.argsort(rng.random((I, K)), axis=1)
            accepted = rng.random((I, K)) < (0.0 if trial % 7 == 0 else 0.6)
            f_new = rng.integers(0, 4, size=(I, K)).astype(np.float32 if trial % 2 else np.float64)
            f_new[rng.random((I, K)) < 0.1] = np.nan
            pending.append((src_of, order, accepted, f_new))
        assert repr(migration.migration_events(pending, ids)) == repr(_events_by_loop(pending, ids))
    assert migration.migration_events(None, [0]) == []
