"""Property test of migration (issue 6): every accepted immigrant equals its source individual,
extras included, and nothing else changes; k > 1 migrants from local, remote and master sources,
with truncation, on a genome of integer words and a float extra."""

import numpy as np
import pytest
from isles.algorithms.core.base import IslandAlgorithm
from isles.algorithms.core.population import Population
from isles.islands.group import IslandGroup
from isles.islands.plugin import source_id
from isles.islands.records import GroupSpec

from tests.helpers import one_epoch

MASTER_ID = source_id(0)  # a plug-in's migrants (islands/plugin.py)
from isles.islands.migration.moves import REPLACEMENTS


class WordsAlgorithm(IslandAlgorithm):
    """A do-nothing algorithm whose individuals are uint32 words with a float extra ``eta``."""

    name = "words"
    FIELDS = {"genome": "genome", "f": "f", "v": "v"}
    EXTRAS = {"eta": "eta"}

    def __init__(self, pop_size: int = 6, words: int = 3, fit_seed: int = 0):
        self.n, self.w, self.fit_seed = pop_size, words, fit_seed
        self.params = None

    def population_size(self) -> int:
        return self.n

    def init(self, ctx):
        I = ctx.n_islands
        rs = np.random.default_rng([self.fit_seed, *ctx.rng.streams])
        return {
            "genome": rs.integers(0, 2**32, size=(I, self.n, self.w), dtype=np.uint32),
            "f": rs.integers(0, 5, size=(I, self.n)).astype(np.float64),  # ties on purpose
            "v": np.where(rs.random((I, self.n)) < 0.3, rs.random((I, self.n)), 0.0),
            "eta": rs.random((I, self.n, 2)),
            "generation": 0,
            "evals": 0,
            "nan_evals": np.zeros((), np.int64),
        }

    def step(self, ctx, state):
        return {**state, "generation": state["generation"] + 1}


def _group(ids, k, policy, n, fit_seed):
    spec = {
        "problem": {"_target_": "isles.problems.benchmarks.Sphere", "dim": 2},
        "algorithm": {"_target_": "tests.test_migration_property.WordsAlgorithm", "pop_size": n, "fit_seed": fit_seed},
        "island_ids": ids,
        "seed": 0,
        "device": "cpu",
        "n_migrants": k,
        "replacement": policy,
    }
    return IslandGroup(GroupSpec(**spec))


def _remote(rs, k, n_words, with_extra=True):
    pop = Population(
        rs.integers(0, 2**32, size=(1, k, n_words), dtype=np.uint32),
        rs.integers(-3, 3, size=(1, k)).astype(np.float64),
        np.zeros((1, k)),
        {"eta": rs.random((1, k, 2))} if with_extra else {},
    )
    return pop


@pytest.mark.parametrize("policy", REPLACEMENTS)
@pytest.mark.parametrize("case", range(25))
def test_accepted_immigrants_equal_their_sources(policy, case):
    rs = np.random.default_rng(case)
    n, k = int(rs.integers(2, 7)), None
    k = int(rs.integers(1, n + 1))
    local_ids = [0, 1, 2]
    g = _group(local_ids, k, policy, n, fit_seed=case)
    before = g.algorithm.population(g.state)
    emig = g.emigrants()  # what the local islands send (k best each)
    sources = {gid: emig.island(p) for p, gid in enumerate(local_ids)}
    remote = {7: _remote(rs, k, 3), 9: _remote(rs, k, 3)}
    remote[MASTER_ID] = _remote(rs, 1, 3, with_extra=False)  # the master: one individual, no extras
    sources.update(remote)
    inbound = {}
    for dst in range(3):
        pool = [s for s in (0, 1, 2, 7, 9, MASTER_ID) if s != local_ids[dst]]
        chosen = list(rs.choice(pool, size=int(rs.integers(1, len(pool) + 1)), replace=False))
        inbound[dst] = [int(c) for c in chosen]
    events = one_epoch(g, 0, inbound, remote).migrations
    after = g.algorithm.population(g.state)
    accepted_total = {}
    for _src, dst, acc, _ in events:
        accepted_total[dst] = accepted_total.get(dst, 0) + acc
    for d in range(3):
        changed = [
            j
            for j in range(n)
            if not all(
                np.array_equal(before.leaves()[name][d, j], after.leaves()[name][d, j]) for name in before.leaves()
            )
        ]
        assert len(changed) <= accepted_total.get(local_ids[d], 0)
        # every changed slot holds one of the immigrants offered to it, whole
        offered = []
        for s in inbound[d]:
            src = sources[s].conform(before)
            offered += [{name: a[0, j] for name, a in src.leaves().items()} for j in range(src.shape[1])]
        for j in changed:
            cur = {name: a[d, j] for name, a in after.leaves().items()}
            assert any(all(np.array_equal(cur[name], o[name]) for name in cur) for o in offered), (d, j)
        if policy == "fair_replace":  # an island never gets worse
            assert (
                np.min(after.f[d][after.v[d] == after.v[d].min()])
                <= np.min(before.f[d][before.v[d] == before.v[d].min()])
                or after.v[d].min() < before.v[d].min()
            )


def test_master_sends_best_with_several_migrants_is_correct():
    """The issue's reproducer: master_sends_best with n_migrants > 1 (was an IndexError)."""
    rs = np.random.default_rng(5)
    g = _group([0, 1], 3, "replace_worst", 6, fit_seed=1)
    master = _remote(rs, 1, 3, with_extra=False)
    one_epoch(g, 0, {0: [1, MASTER_ID], 1: [0, MASTER_ID]}, {MASTER_ID: master})
    after = g.algorithm.population(g.state)
    for d in range(2):  # replace_worst: the master's individual is in every island, eta zero
        hit = [j for j in range(6) if np.array_equal(after.genome[d, j], master.genome[0, 0])]
        assert len(hit) == 1 and np.all(after.extras["eta"][d, hit[0]] == 0)
