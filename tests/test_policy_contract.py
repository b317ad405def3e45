"""The contract of a user's migration policy (issue 34, islands/migration/contract.py): a return that
breaks it is refused at the first migration in one line naming the class, its method and what was
expected (in-process, and through ``run.py``: exit 1, ``run.log``); the built-ins are not wrapped; a
policy that takes a context gets the islands' ids, generation and epoch and a counter-based
generator, so that a random policy gives the same run on any grouping (one group, two in-process
groups, a mixed batch split over groups)."""

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.core.population import Population
from isles.app.job import run_job
from isles.islands import span_graph
from isles.islands.coordinator import Coordinator
from isles.islands.group import IslandGroup
from isles.islands.migration.contract import (
    GuardedReplacement,
    GuardedSelection,
    MigrationContext,
    PolicyError,
    guarded,
    policy_rng,
    takes_context,
)
from isles.islands.migration.policies import FairReplace, ReplaceWorst, SelectBest, worst_first
from isles.islands.records import GroupSpec

from tests.helpers import make_cfg, plain
from tests.migration_policies import ReplaceRandom, SelectRandom, SelectWorst
from tests.test_mixed_islands import SMALL, assert_same_runs

ROOT = Path(__file__).resolve().parents[1]
POLICIES = "tests.migration_policies"
DE = [
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "generations=12",
    "islands.n=4",
    "islands.migration_interval=2",
    "islands.n_migrants=1",
    "topology=ring",
    "logger=none",
    "progress=false",
    "device=cpu",
]
SELECT = "islands.selection={_target_: " + POLICIES + ".%s}"
REPLACE = "islands.replacement={_target_: " + POLICIES + ".%s}"


def run(*overrides, base=DE):
    cfg = plain(make_cfg(*base, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()


def islands(I=3, N=6, K=4, seed=3):
    """Residents ``(I, N)``, immigrants ``(I, K)`` and ``valid`` (the last immigrant of island 0 padding)."""
    rs = np.random.default_rng(seed)
    res = Population(rs.random((I, N, 2)), rs.random((I, N)), np.zeros((I, N)))
    imm = Population(rs.random((I, K, 2)), rs.random((I, K)), np.zeros((I, K)))
    valid = np.ones((I, K), dtype=bool)
    valid[0, -1] = False
    return res, imm, valid


class Returns:
    """A policy whose method returns what ``make(args)`` makes of its arguments."""

    def __init__(self, make):
        self.make = make

    def select(self, f, v, k):
        return self.make(f, v, k)

    def replace(self, residents, immigrants, valid):
        return self.make(residents, immigrants, valid)


@pytest.mark.parametrize(
    "make, got",
    [
        (lambda f, v, k: np.zeros((3, k + 3), dtype=np.int64) + np.arange(k + 3), "shape (3, 5)"),
        (lambda f, v, k: np.zeros((3, k), dtype=float), "dtype float64"),
        (lambda f, v, k: np.full((3, k), 6), "index 6 on island 11"),
        (lambda f, v, k: np.array([[0, 1], [2, -1], [0, 1]]), "index -1 on island 12"),
        (lambda f, v, k: np.array([[0, 1], [2, 3], [4, 4]]), "index 4 repeated 2 times on island 13"),
        (lambda f, v, k: [[0, 1]] * 3, "a list"),
    ],
)
def test_a_selection_that_breaks_its_contract_is_one_line_naming_it(make, got):
    f = np.random.default_rng(0).random((3, 6))
    context = MigrationContext((11, 12, 13), 4, 2, policy_rng(np, 0, (11, 12, 13), "select"))
    with pytest.raises(PolicyError) as err:
        guarded(Returns(make), "select").select(f, f * 0, 2, context)
    assert str(err.value) == (
        f"Returns.select returned {got}; expected (I, k) = (3, 2) integer indices in [0, 6) without repeats"
    )


def _at_zero(r, i, v):
    idx, imm, res, valid, order = worst_first(r, i, v)
    return idx * 0, imm.where(valid, res), valid, order


def _changed_resident(r, i, v):
    idx, imm, res, valid, order = worst_first(r, i, v)
    return idx, imm, valid & False, order  # nothing accepted, yet every immigrant written


def _padding_accepted(r, i, v):
    idx, imm, res, valid, order = worst_first(r, i, v)
    return idx, imm, valid | True, order


def _not_a_permutation(r, i, v):
    idx, imm, res, valid, order = worst_first(r, i, v)
    return idx, imm.where(valid, res), valid, order * 0


@pytest.mark.parametrize(
    "make, needle",
    [
        (_at_zero, "returned idx with index 0 repeated 4 times on island 11; expected idx (I, K) = (3, 4) integer"),
        (lambda r, i, v: _at_zero(r, i, v)[:3], "returned a tuple of 3; expected a tuple (idx, new, accepted, order)"),
        (
            lambda r, i, v: (worst_first(r, i, v)[0], i.map(lambda a: a[:, :-1]), v, worst_first(r, i, v)[4]),
            "returned new of shape (3, 3) with leaves (genome, f, v); expected new a Population (I, K) = (3, 4)",
        ),
        (
            lambda r, i, v: (*worst_first(r, i, v)[:2], v.astype(int), worst_first(r, i, v)[4]),
            "returned accepted as shape (3, 4) int64; expected accepted (I, K) = (3, 4) bool",
        ),
        (_not_a_permutation, "returned order [0, 0, 0, 0] on island 11; expected order (I, K) a permutation of 0..3"),
        (_padding_accepted, "returned accepted[0, 3] True for a padding slot (valid[order] False) on island 11"),
        (_changed_resident, "returned new.genome changed at idx[0, 0] where accepted is False (island 11)"),
    ],
)
def test_a_replacement_that_breaks_its_contract_is_one_line_naming_it(make, needle):
    res, imm, valid = islands()
    context = MigrationContext((11, 12, 13), 4, 2, policy_rng(np, 0, (11, 12, 13), "replace"))
    with pytest.raises(PolicyError) as err:
        guarded(Returns(make), "replace").replace(res, imm, valid, context)
    assert str(err.value).startswith(f"Returns.replace {needle}") and "\n" not in str(err.value)


def test_builtins_are_trusted_as_they_are_and_old_signatures_keep_working():
    for p in (SelectBest(), FairReplace(), ReplaceWorst()):
        assert guarded(p, "select" if isinstance(p, SelectBest) else "replace") is p
    g = guarded(SelectWorst(), "select")
    assert isinstance(g, GuardedSelection) and guarded(g, "select") is g and not g.takes_context
    assert guarded(SelectRandom(), "select").takes_context
    assert isinstance(guarded(ReplaceRandom(), "replace"), GuardedReplacement)
    assert not takes_context(SimpleNamespace(select=lambda f, v, k, *, seed=0: None), "select", 3)
    context, got = MigrationContext((5, 6), 4, 2, policy_rng(np, 0, (5, 6), "select")), []
    first = lambda f, k, c: got.append(c) or np.zeros((f.shape[0], k), dtype=np.int64) + np.arange(k)  # noqa: E731
    for select in (
        lambda f, v, k, *, context: first(f, k, context),  # keyword-only
        lambda f, v, k, ctx: first(f, k, ctx),  # positional, another name
        lambda f, v, k, **kw: first(f, k, kw["context"]),
    ):
        guarded(SimpleNamespace(select=select), "select").select(np.zeros((2, 5)), np.zeros((2, 5)), 2, context)
    assert got == [context] * 3
    f = np.random.default_rng(1).random((2, 5))
    np.testing.assert_array_equal(g.select(f, f * 0, 2), np.argsort(-f, axis=1)[:, :2])  # called without a context
    # a group of the built-ins: its policies unwrapped (the fused kernels' test is type(policy) is ...), no context made
    spec = {
        "problem": {"_target_": "isles.problems.benchmarks.Sphere", "dim": 3},
        "algorithm": {"_target_": "isles.algorithms.de.de.DE", "pop_size": 6},
        "island_ids": [0, 1],
        "seed": 0,
        "device": "cpu",
    }
    group = IslandGroup(GroupSpec(**spec))
    assert type(group.selection) is SelectBest and type(group.replacement) is FairReplace
    assert group.policy_context("select") is None


def test_a_policy_that_breaks_its_contract_stops_the_run_at_the_first_migration():
    for overrides, needle in (
        ((SELECT % "SelectTooMany",), "SelectTooMany.select returned shape (4, 4); expected (I, k) = (4, 1)"),
        ((SELECT % "SelectOutOfRange",), "SelectOutOfRange.select returned index 8 on island 0; expected"),
        ((SELECT % "SelectFloat",), "SelectFloat.select returned dtype float64; expected"),
        ((REPLACE % "ReplaceAtZero", "islands.n_migrants=2"), "ReplaceAtZero.replace returned idx with index 0"),
    ):
        with pytest.raises(PolicyError, match=re.escape(needle)):
            run(*overrides)


def test_the_context_names_the_islands_their_generation_and_epoch(monkeypatch):
    seen, select_random, replace_random = [], SelectRandom.select, ReplaceRandom.replace

    def select(self, f, v, k, context):
        seen.append(("select", context.island_ids, context.generation, context.epoch, f.shape))
        return select_random(self, f, v, k, context)

    def replace(self, residents, immigrants, valid, context):
        seen.append(("replace", context.island_ids, context.generation, context.epoch, residents.shape))
        return replace_random(self, residents, immigrants, valid, context)

    monkeypatch.setattr(SelectRandom, "select", select)
    monkeypatch.setattr(ReplaceRandom, "replace", replace)
    run(SELECT % "SelectRandom", REPLACE % "ReplaceRandom", "islands.n_actors=2", "generations=6")
    # two groups of two islands, epochs of 2 generations: the migration after epoch e is at generation 2e;
    # emigrants are selected after every epoch (the last one's for the run's record), immigrants land after 1 and 2
    for method, epochs in (("select", (1, 2, 3)), ("replace", (1, 2))):
        want = sorted((ids, 2 * e, e, (2, 8)) for ids in ((0, 1), (2, 3)) for e in epochs)
        assert sorted(s[1:] for s in seen if s[0] == method) == want, method


def test_random_policies_give_the_same_run_on_one_and_two_groups():
    policies = (SELECT % "SelectRandom", REPLACE % "ReplaceRandom")
    one = run(*policies, "islands.n_actors=1")
    two = run(*policies, "islands.n_actors=2")
    assert one.best_f == two.best_f and one.migrations == two.migrations
    np.testing.assert_array_equal(one.history[-1].island_best_f, two.history[-1].island_best_f)
    assert one.best_f != run(REPLACE % "ReplaceRandom", "islands.n_actors=1").best_f  # the selection took part
    assert one.best_f == run(*policies, "islands.n_actors=4").best_f  # each island its own group


def test_random_policies_resumed_from_a_checkpoint_give_the_uninterrupted_run(tmp_path):
    """The context's numbers depend on (seed, island, generation, draw): a run that resumes a
    checkpoint on another grouping draws what the uninterrupted run drew."""
    policies = (SELECT % "SelectRandom", REPLACE % "ReplaceRandom", "quiet=true")
    path = tmp_path / "ck.pkl"
    run_job(make_cfg(*DE, *policies, "generations=6", "checkpoint.every=1", f"checkpoint.path={path}"), use_ray=False)
    resumed = run_job(make_cfg(*DE, *policies, f"checkpoint.resume={path}", "islands.n_actors=2"), use_ray=False)[0]
    straight = run(*policies)
    assert resumed.best_f == straight.best_f and resumed.migrations == straight.migrations
    np.testing.assert_array_equal(resumed.history[-1].island_best_f, straight.history[-1].island_best_f)


def test_random_policies_on_a_mixed_batch_are_the_same_on_one_two_and_three_groups():
    """Each family of a batch gets its islands' part of the context (Mixed.emigrants_of, immigrate)."""
    policies = (SELECT % "SelectRandom", REPLACE % "ReplaceRandom")
    one = run(*policies, "islands.n_actors=1", base=SMALL)
    for n in (2, 3):
        assert_same_runs(one, run(*policies, f"islands.n_actors={n}", base=SMALL))


def test_a_policy_that_takes_the_context_runs_plain_epochs_not_span_graphs():
    """A replay of a captured epoch would hand the policy the captured epoch's generation."""
    group = SimpleNamespace(span_graph="auto", xp=object(), ctx=SimpleNamespace(cuda_graph=True))
    for policy, eligible in ((SelectWorst(), True), (SelectRandom(), False)):
        group.selection, group.replacement = guarded(policy, "select"), FairReplace()
        assert span_graph.eligible(group, across_actors=False) is eligible


@pytest.mark.slow
def test_a_bad_replacement_in_a_run_is_one_isles_line_exit_1_with_run_log(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *DE, REPLACE % "ReplaceWrongShape", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert p.returncode == 1, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "isles: error: PolicyError: ReplaceWrongShape.replace returned new of shape (4, 1) with leaves "
        "(genome, f, v); expected new a Population (I, K) = (4, 2)"
    )
    assert line.endswith(f"full traceback in {tmp_path}/run.log") and (tmp_path / "run.log").exists()
    assert "Traceback" not in p.stderr
