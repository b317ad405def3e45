"""Migration policies as objects (issue 26 item 3): the built-ins behind their config names, a
user's policy (tests/migration_policies.py) plugged in through the config in real runs, in-process
and in 2 Ray actors, and bad values refused in one line before Ray."""

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.core.population import Population
from isles.islands.config.schema import validated
from isles.islands.coordinator import Coordinator
from isles.islands.group import IslandGroup
from isles.islands.migration.moves import REPLACEMENTS, replacement
from isles.islands.migration.policies import (
    FairReplace,
    ReplaceWorst,
    SelectBest,
    rank_order,
    replacement_policy,
    selection_policy,
)
from isles.islands.records import GroupSpec

from tests.helpers import make_cfg, plain
from tests.migration_policies import RejectAll, SelectWorst

ROOT = Path(__file__).resolve().parents[1]
REJECT = "islands.replacement={_target_: tests.migration_policies.RejectAll}"
WORST = "islands.selection={_target_: tests.migration_policies.SelectWorst}"
REPLACE_RANDOM = "islands.replacement={_target_: tests.migration_policies.ReplaceRandom}"
DE = [
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "generations=12",
    "islands.n=4",
    "islands.migration_interval=2",
    "islands.n_migrants=2",
    "topology=ring",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def run(*overrides, use_ray=False):
    cfg = plain(make_cfg(*DE, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=use_ray).run()


def test_config_names_map_to_the_builtin_classes_and_policies_pickle():
    assert REPLACEMENTS == ("fair_replace", "replace_worst")  # the names as typed today
    assert replacement_policy("fair_replace") == FairReplace()
    assert replacement_policy("replace_worst") == ReplaceWorst()
    assert selection_policy("select_best") == SelectBest()
    reject = replacement_policy({"_target_": "tests.migration_policies.RejectAll"})
    assert isinstance(reject, RejectAll)
    assert replacement_policy(reject) is reject  # an object given in a spec is used as it is
    for p in (FairReplace(), ReplaceWorst(), SelectBest(), SelectWorst()):  # they cross Ray to the actors
        q = pickle.loads(pickle.dumps(p))
        assert type(q) is type(p)


def test_builtin_objects_equal_the_named_policies_bit_for_bit():
    rs = np.random.default_rng(3)
    res = Population(
        rs.random((3, 6, 2)),
        rs.integers(0, 4, (3, 6)).astype(float),
        np.where(rs.random((3, 6)) < 0.3, rs.random((3, 6)), 0.0),
    )
    imm = Population(rs.random((3, 4, 2)), rs.integers(0, 4, (3, 4)).astype(float), np.zeros((3, 4)))
    valid = rs.random((3, 4)) < 0.7
    for name, cls in (("fair_replace", FairReplace), ("replace_worst", ReplaceWorst)):
        a, b = replacement(name, res, imm, valid), cls().replace(res, imm, valid)
        for x, y in zip(a, b, strict=False):
            if isinstance(x, Population):
                x, y = x.leaves(), y.leaves()
                assert all(np.array_equal(x[k], y[k]) for k in x)
            else:
                assert np.array_equal(x, y)
    assert ReplaceWorst().replace(res, imm, valid)[2].tolist() != FairReplace().replace(res, imm, valid)[2].tolist()


def test_a_selection_policy_from_the_config_chooses_the_emigrants():
    spec = {
        "problem": {"_target_": "isles.problems.benchmarks.Sphere", "dim": 3},
        "algorithm": {"_target_": "isles.algorithms.de.de.DE", "pop_size": 6},
        "island_ids": [0, 1],
        "seed": 0,
        "device": "cpu",
        "n_migrants": 2,
        "selection": {"_target_": "tests.migration_policies.SelectWorst"},
    }
    g = IslandGroup(GroupSpec(**spec))
    pop = g.algorithm.population(g.state)
    worst = np.take_along_axis(pop.f, rank_order(pop.f, pop.v)[:, ::-1][:, :2], axis=1)
    emigrants = g.emigrants()
    np.testing.assert_array_equal(emigrants.f, worst)
    assert (emigrants.f[:, 0] == pop.f.max(axis=1)).all()  # the worst first, not the best


def test_a_replacement_that_accepts_nothing_keeps_every_island_to_itself():
    default = run()
    reject = run(REJECT)
    alone = run("topology=unconnected")
    assert default.migrations_accepted > 0  # the built-in fair_replace accepts some immigrants here
    assert reject.migration_count > 0 and reject.migrations_accepted == 0  # immigrants came, none landed
    # the islands evolve as if unconnected, bit for bit: RejectAll was used at every migration
    np.testing.assert_array_equal(reject.history[-1].island_best_f, alone.history[-1].island_best_f)
    assert reject.best_f == alone.best_f != default.best_f


def test_a_selection_policy_changes_the_run():
    default, worst = run(), run(WORST)
    assert worst.best_f != default.best_f
    assert worst.best_f == run(WORST).best_f  # and is reproducible


def test_user_policies_in_two_ray_actors_equal_the_in_process_run(ray_local):
    one = run(REJECT, WORST, "islands.n_actors=1")
    two = run(REJECT, WORST, "islands.n_actors=2", use_ray=True)
    assert two.migrations_accepted == one.migrations_accepted == 0
    assert two.best_f == one.best_f and two.evaluations == one.evaluations
    np.testing.assert_array_equal(two.history[-1].island_best_f, one.history[-1].island_best_f)


@pytest.mark.slow
def test_random_policies_on_two_ray_actors_equal_one_group(ray_local):
    """A selection and a replacement that draw from their context's counter-based generator
    (issue 34) give the run of one in-process group on two Ray actors, bit for bit."""
    random = ("islands.selection={_target_: tests.migration_policies.SelectRandom}", REPLACE_RANDOM)
    one = run(*random, "islands.n_actors=1")
    two = run(*random, "islands.n_actors=2", use_ray=True)
    assert two.best_f == one.best_f and two.migrations == one.migrations
    np.testing.assert_array_equal(two.history[-1].island_best_f, one.history[-1].island_best_f)


@pytest.mark.parametrize(
    "value, needle",
    [
        (
            "swap",
            (
                "islands.replacement='swap': allowed values are fair_replace|replace_worst or {_target_: a class "
                "with replace(residents, immigrants, valid)}"
            ),
        ),
        ({"size": 1}, "islands.replacement={'size': 1}: allowed values are fair_replace|replace_worst"),
        (
            {"_target_": "tests.migration_policies.NoMethod"},
            "islands.replacement._target_='tests.migration_policies.NoMethod': NoMethod has no method replace()",
        ),
        (
            {"_target_": "tests.migration_policies.Missing"},
            "islands.replacement._target_='tests.migration_policies.Missing': cannot build it",
        ),
        (
            {"_target_": "tests.migration_policies.NoMethod", "width": 2},
            "islands.replacement._target_='tests.migration_policies.NoMethod': cannot build it (TypeError",
        ),
    ],
)
def test_bad_replacement_is_one_line(value, needle):
    with pytest.raises(ValueError) as err:
        validated({"islands": {"replacement": value}, "device": "cpu"})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_bad_selection_is_one_line_before_ray():
    with pytest.raises(
        ValueError,
        match=r"islands.selection='select_worst': allowed values are select_best or "
        r"\{_target_: a class with select\(f, v, k\)\}",
    ):
        validated({"islands": {"selection": "select_worst"}, "device": "cpu"})
    p = subprocess.run(
        [sys.executable, "run.py", *DE, "islands.selection={_target_: tests.migration_policies.NoMethod}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == (
        "isles: error: islands.selection._target_="
        "'tests.migration_policies.NoMethod': NoMethod has no method select(); "
        "allowed values are select_best or {_target_: a class with select(f, v, k)}"
    )
    assert "Traceback" not in p.stderr and "Ray" not in p.stderr + p.stdout
