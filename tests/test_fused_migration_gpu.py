"""GPU: the fused migration kernels (algorithms/core/migration_kernels.py, cuda/migration.cu)
against the generic CuPy array code, bit for bit: random populations (tests/fused_migration_cases.py:
ties, infeasible individuals, NaN, genomes of several dtypes, uint32 words, extras), k = 1..3, ring,
fully connected and random plans, both write modes and both built-in replacements; islands whose
rows span several blocks; and whole runs (DE, the GA, FEP, PSO; plain epochs and the captured span
graph) with ``ISLES_FUSED_MIGRATION=0`` and ``1``.
``python -m pytest -m gpu tests/test_fused_migration_gpu.py``."""

import numpy as np
import pytest
from hydra.utils import instantiate

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.algorithms.core import migration_kernels as mk  # noqa: E402
from isles.islands.coordinator import Coordinator  # noqa: E402
from isles.islands.migration import fused as fm  # noqa: E402
from isles.islands.migration.policies import FairReplace, ReplaceWorst  # noqa: E402

from tests.fused_migration_cases import Plain, WithReplace, compare, plans  # noqa: E402
from tests.helpers import make_cfg, plain  # noqa: E402

GENOMES = [("float64", (5,)), ("float32", (3,)), ("uint32", (13,)), ("int8", (3,))]


@pytest.mark.parametrize("genome", GENOMES, ids=lambda g: g[0])
@pytest.mark.parametrize(
    "fv", [(np.float64, np.float64), (np.float32, np.float32), (np.float32, np.float64)], ids=["f64", "f32", "f32v64"]
)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_fused_kernels_equal_the_generic_code(monkeypatch, genome, fv, k):
    rng = np.random.default_rng(hash((genome, fv, k)) % 2**32)
    for plan in plans(8, seed=k):
        for policy in (FairReplace(), ReplaceWorst()):
            for algo in (Plain(extras=True), Plain(), WithReplace()):
                compare(monkeypatch, cp, rng, algo, plan, policy, k, fv, genome, N=16)


def test_fused_kernels_with_nans_ties_and_full_fronts(monkeypatch):
    rng = np.random.default_rng(11)
    for nan in (True, False):
        for levels in (1, 2, 50):
            for plan in plans(5, seed=levels):
                compare(
                    monkeypatch,
                    cp,
                    rng,
                    Plain(extras=True),
                    plan,
                    FairReplace(),
                    3,
                    (np.float64, np.float64),
                    ("float64", (2,)),
                    N=4,
                    nan=nan,
                    levels=levels,
                )
                compare(
                    monkeypatch,
                    cp,
                    rng,
                    WithReplace(),
                    plan,
                    ReplaceWorst(),
                    2,
                    (np.float32, np.float32),
                    ("uint32", (1,)),
                    N=6,
                    nan=nan,
                    levels=levels,
                )


def test_fused_kernels_on_large_islands(monkeypatch):
    """Rows of one island over several blocks, and hundreds of residents per block's scan."""
    rng = np.random.default_rng(5)
    for plan in plans(6, seed=2):
        compare(
            monkeypatch,
            cp,
            rng,
            Plain(extras=True),
            plan,
            FairReplace(),
            3,
            (np.float64, np.float64),
            ("float64", (300,)),
            N=700,
            levels=40,
        )
    monkeypatch.setattr(mk, "CHUNK_BYTES", 256)
    for plan in plans(3, seed=3):
        compare(
            monkeypatch,
            cp,
            rng,
            Plain(extras=True),
            plan,
            ReplaceWorst(),
            2,
            (np.float32, np.float32),
            ("uint32", (7,)),
            N=50,
        )


def _run(monkeypatch, fused: bool, *overrides):
    monkeypatch.setenv(fm.ENV, "1" if fused else "0")
    cfg = plain(
        make_cfg(
            *overrides, "device=gpu", "islands.migration_interval=1", "islands.n=4", "logger=none", "progress=false"
        )
    )
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()


RUNS = {
    "de": [
        "+experiment=de_islands",
        "problem=sphere",
        "problem.dim=8",
        "algorithm.pop_size=16",
        "generations=60",
        "islands.n_migrants=2",
    ],
    "ga": [
        "+experiment=ga_islands",
        "problem.n_bits=70",
        "algorithm.pop_size=20",
        "generations=40",
        "islands.replacement=replace_worst",
    ],
    "fep": ["+experiment=fep_islands", "algorithm.pop_size=20", "generations=40", "topology=fully_connected"],
    "pso": [
        "algorithm=pso",
        "problem=sphere",
        "problem.dim=8",
        "generations=40",
        "topology=ring",
        "islands.n_migrants=3",
    ],
}


@pytest.mark.parametrize("span_graph", ["never", "auto"])
@pytest.mark.parametrize("family", list(RUNS))
def test_runs_with_and_without_the_fused_kernels_are_the_same(monkeypatch, family, span_graph):
    calls = []
    imm = fm.immigrate_role
    monkeypatch.setattr(fm, "immigrate_role", lambda *a, **k: calls.append(imm(*a, **k)) or calls[-1])
    runs = [_run(monkeypatch, fused, *RUNS[family], f"islands.span_graph={span_graph}") for fused in (False, True)]
    assert calls and all(c is not None for c in calls)  # the fused kernel ran (and only in the fused run)
    a, b = runs
    assert a.best_f == b.best_f and a.evaluations == b.evaluations and a.migrations == b.migrations
    assert a.migration_count > 0
    np.testing.assert_array_equal(a.best_x, b.best_x)
    for x, y in zip(a.history, b.history, strict=True):
        np.testing.assert_array_equal(x.island_best_f, y.island_best_f)
