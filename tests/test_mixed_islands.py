"""Heterogeneous archipelagos (issue 27 §1): groups of islands of several algorithm families in one run
(``groups``, :mod:`isles.islands.mixed`), migrants crossing between families with each
family's arrival rule (``adopt``), the same run on 1, 2 and 3 groups (in process and on Ray actors),
checkpoint and resume, the groups' metrics, and one-line errors for bad groups before Ray starts."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.app import job
from isles.app.plots import convergence_figure
from isles.islands.config.build import build_algorithm
from isles.islands.config.schema import validated, with_groups
from isles.islands.coordinator import Coordinator
from isles.islands.migration.moves import emigrants_of, immigrate, migration_events
from isles.islands.migration.policies import ReplaceWorst, SelectBest
from isles.islands.mixed import ROLE, Mixed
from isles.problems.benchmarks import Rastrigin
from isles.problems.constraints import Evaluator

from tests.helpers import make_cfg, plain

ROOT = Path(__file__).resolve().parents[1]

#: a small mixed run: DE, FEP, PSO and a real-coded GA (binary code of the box), every island
#: exchanging with every other each 3 generations (2 emigrants each), 9 islands
SMALL = [
    "+experiment=mixed_islands",
    "problem.dim=8",
    "groups.de.islands=2",
    "groups.fep.islands=3",
    "groups.pso.islands=2",
    "+algorithm@groups.ga.algorithm=ga",
    "+groups.ga.islands=2",
    "groups.de.algorithm.pop_size=12",
    "groups.fep.algorithm.pop_size=12",
    "groups.pso.algorithm.n_particles=12",
    "groups.ga.algorithm.pop_size=12",
    "generations=30",
    "islands.migration_interval=3",
    "islands.n_migrants=2",
    "topology=fully_connected",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def coordinator(*overrides, use_ray=False, callbacks=()):
    cfg = plain(make_cfg(*SMALL, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=callbacks, use_ray=use_ray)


def assert_same_runs(a, b) -> None:
    """Two runs, bit for bit: the result, every epoch's island bests and counters, the migrations."""
    assert (a.best_f, a.best_v, a.evaluations, a.nan_evals) == (b.best_f, b.best_v, b.evaluations, b.nan_evals)
    np.testing.assert_array_equal(a.best_x, b.best_x)
    assert a.migrations == b.migrations
    assert len(a.history) == len(b.history)
    for x, y in zip(a.history, b.history, strict=False):
        assert (x.best_f, x.evaluations, x.migrations_accepted) == (y.best_f, y.evaluations, y.migrations_accepted)
        np.testing.assert_array_equal(x.island_best_f, y.island_best_f)


def test_a_mixed_run_is_the_same_on_one_two_and_three_groups():
    """In-process groups (one thread each): 2 and 3 groups split the families' islands differently
    (a group holds islands of two or three families), and the run is that of one group, bit for bit;
    migrants crossed between families (the groups' islands are 0-1 DE, 2-4 FEP, 5-6 PSO, 7-8 GA)."""
    one = coordinator("islands.n_actors=1").run()
    for n in (2, 3):
        assert_same_runs(one, coordinator(f"islands.n_actors={n}").run())
    family = lambda i: 0 if i < 2 else 1 if i < 5 else 2 if i < 7 else 3  # noqa: E731
    crossed = {(family(s), family(d)) for _, s, d, accepted, _ in one.migrations if accepted}
    assert len(crossed) == 16  # every ordered pair of families, each family to itself too


def test_a_mixed_run_on_two_ray_actors_equals_one_actor(ray_local):
    """Across Ray actors (emigrants through the peers' inboxes or shared-memory channels)."""
    two = coordinator("islands.n_actors=2", use_ray=True).run()
    assert_same_runs(two, coordinator("islands.n_actors=1").run())


def test_evaluations_of_a_mixed_run_are_each_familys_count():
    """Without a GA (whose arrivals are re-evaluated) the run's evaluations are the families' own
    counts: islands x (init + generations x per generation), summed over the groups (DE 12, FEP 12,
    PSO 12 a generation per island; FEP with mu 6 and IFEP: 12 too)."""
    run = coordinator("~groups.ga", "groups.fep.algorithm.pop_size=6", "groups.fep.algorithm.mutation=improved").run()
    assert run.evaluations == 2 * (12 + 30 * 12) + 3 * (6 + 30 * 12) + 2 * (12 + 30 * 12)


# -- migrants between every pair of families -----------------------------------------------------
FAMILIES = {
    "de": {"pop_size": 10},
    "fep": {"pop_size": 10, "eta_init": 0.7},
    "ga": {"pop_size": 10, "encoding": "gray", "bits_per_variable": 12},
    "pso": {"n_particles": 10},
    "cmaes": {"dim": 4},
    "lshade": {"dim": 4},
}


def pair(src: str, dst: str) -> tuple:
    """A :class:`Mixed` of island 0 of family ``src`` and island 1 of family ``dst`` on Rastrigin
    D=4, its context and initial state."""
    groups = [{"algorithm": name, "islands": 1} for name in (src, dst)]
    cfg = with_groups({"groups": groups, "islands": {}})
    for g in cfg["groups"]:
        g["algorithm"].update(FAMILIES[g["name"].rstrip("1")])
    mixed = build_algorithm(cfg["algorithm"])
    problem = Rastrigin(dim=4)
    ctx = Context(np, np.float64, Evaluator(problem), CounterRNG(np, 3, [0, 1]))
    return mixed, ctx, mixed.init(ctx), problem


@pytest.mark.parametrize("src,dst", list(itertools.product(FAMILIES, repeat=2)))
def test_migrants_cross_between_every_pair_of_families(src, dst):
    """Island 0's 2 best go to island 1 of another family (or the same), replacing its 2 worst: they
    arrive with their x, f and v (the GA: the nearest code of x, re-evaluated), and the destination's
    extras are its arrival rule's (PSO at rest: velocity 0, position = personal best = x; FEP: eta =
    eta_init); the source's island is untouched, and the event says what moved."""
    mixed, ctx, state, problem = pair(src, dst)
    sent = emigrants_of(mixed, state, 2, SelectBest())[ROLE]
    new, events = immigrate(mixed, ctx, state, [0, 1], {ROLE: sent}, {1: [0]}, {}, ReplaceWorst())
    a, b = mixed.algorithms
    for key, value in Mixed.part(state, 0).items():  # the source island is as it was
        np.testing.assert_array_equal(Mixed.part(new, 0)[key], value)
    after = b.population(Mixed.part(new, 1))
    x = np.asarray(b.phenotype(after.genome[0]), dtype=np.float64)
    for r in range(2):
        d = np.abs(x - sent.genome[0, r]).max(axis=1)
        if dst == "ga":  # the nearest code: within half a step of the 12-bit code of the box
            i = int(np.argmin(d))
            assert d[i] <= (problem.upper[0] - problem.lower[0]) / (2**12 - 1) / 2 + 1e-12
            f, _, _ = ctx.evaluator(x[None, i : i + 1])
            assert after.f[0, i] == f[0, 0]  # re-evaluated at the code's x
        else:
            (hits,) = np.nonzero((d == 0) & (after.f[0] == sent.f[0, r]) & (after.v[0] == sent.v[0, r]))
            assert len(hits) >= 1, (src, dst, r)  # with its f and v
            i = int(hits[0])
        if dst == "pso":
            np.testing.assert_array_equal(after.extras["vel"][0, i], 0.0)
            np.testing.assert_array_equal(after.extras["x"][0, i], after.genome[0, i])
        if dst == "fep":
            np.testing.assert_array_equal(after.extras["eta"][0, i], 0.7)
    assert [(s, d, n) for s, d, n, _ in migration_events(events, [0, 1])] == [(0, 1, 2)]
    if dst == "ga":
        assert new["evals"] == state["evals"] + 2  # the GA's re-evaluations of its arrivals
    else:
        assert new["evals"] == state["evals"]


# -- checkpoint and resume -----------------------------------------------------------------------
def test_checkpoint_and_resume_of_a_mixed_run_is_the_uninterrupted_run(tmp_path):
    """Stopped after 12 of 30 generations (a checkpoint every 2 epochs) on 2 groups, resumed to 30
    on 2, 1 and 3 groups (each family's islands regrouped by its own island axes: the FEP and GA
    states, the GA's re-evaluations of its arrivals, the PSO schedule over 30 generations): the run
    without the stop, bit for bit."""
    path = tmp_path / "ck.pkl"
    whole = coordinator("islands.n_actors=2").run()
    coordinator(
        "islands.n_actors=2",
        "generations=12",
        "checkpoint.every=2",
        f"checkpoint.path={path}",
        "groups.pso.algorithm.max_iterations=30",
    ).run()
    for n in (2, 1, 3):
        resumed = coordinator(f"islands.n_actors={n}", f"checkpoint.resume={path}").run()
        assert [h.generation for h in resumed.history] == list(range(3, 31, 3))
        assert_same_runs(whole, resumed)


def test_a_resume_with_other_groups_names_each_changed_field_in_one_line(tmp_path):
    """Before: a resume with another group list was refused with both lists in full (about 3,300
    characters: ``groups`` and the mixed algorithm's copy of them). Now each field that changed, as
    typed, with both values and the overrides that give the saved run back."""
    path = tmp_path / "ck.pkl"
    coordinator("generations=6", "checkpoint.every=1", f"checkpoint.path={path}").run()
    no_ga = [a for a in SMALL if "groups.ga" not in a]
    for overrides, says in [
        (
            ["groups.pso.islands=3"],
            "(groups.pso.islands: saved 2, now 3); resume with the saved values (groups.pso.islands=2)",
        ),
        (
            ["groups.de.algorithm.F=0.7"],
            "(groups.de.algorithm.F: saved 0.5, now 0.7); resume with the saved values (groups.de.algorithm.F=0.5)",
        ),
        (
            ["+groups.cmaes.islands=1", "+algorithm@groups.cmaes.algorithm=cmaes"],
            "(groups.cmaes: saved <unset>, now 1 island of CMAES); resume with the saved values, or",
        ),
        (["--no-ga"], "(groups.ga: saved 2 islands of GA, now <unset>); resume with the saved values, or"),
    ]:
        base = no_ga if overrides == ["--no-ga"] else SMALL
        cfg = plain(
            make_cfg(*base, *[o for o in overrides if o != "--no-ga"], "generations=6", f"checkpoint.resume={path}")
        )
        with pytest.raises(ValueError) as err:
            Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False)
        msg = str(err.value)
        assert "\n" not in msg and len(msg) < 300, msg
        assert msg.startswith(f"checkpoint.resume={str(path)!r}: the config differs from the saved run {says}"), msg


def test_more_generations_of_a_pso_group_that_follows_them_is_refused_as_plain_pso_is(tmp_path):
    """PSO's ``max_iterations: ${generations}`` (its inertia schedule spans the run) is saved with the
    groups: a resume with more generations changes it and is refused in one line, as a plain PSO run's
    is (``algorithm.max_iterations: saved 6, now 30``), naming the override that keeps the saved
    schedule; with it, the resume is the uninterrupted run on that schedule."""
    path = tmp_path / "ck.pkl"
    coordinator("generations=6", "checkpoint.every=1", f"checkpoint.path={path}").run()
    with pytest.raises(ValueError) as err:
        coordinator(f"checkpoint.resume={path}")
    assert str(err.value) == (
        f"checkpoint.resume={str(path)!r}: the config differs from the saved run "
        "(groups.pso.algorithm.max_iterations: saved 6, now 30); resume with the saved values "
        "(groups.pso.algorithm.max_iterations=6), or start a new run"
    )
    kept = "groups.pso.algorithm.max_iterations=6"
    assert_same_runs(coordinator(kept, f"checkpoint.resume={path}").run(), coordinator(kept).run())


# -- the groups' metrics ----------------------------------------------------------------------------
def test_each_groups_metrics_and_its_line_in_the_plot():
    """Per epoch: each group's best f (the best its islands have had), its share of the run's
    improvements (summing to 1 once the run improved), migrants it sent and took (all migrants
    accepted; no plug-in here, so sent and taken sum alike); the plot has one line per group. The
    records carry them as their typed ``group_metrics`` (no callback), under the same names in
    ``history.csv`` and MLflow."""
    cfg = validated(plain(make_cfg(*SMALL)))
    run = coordinator().run()
    names = ["de", "fep", "pso", "ga"]
    assert [g["name"] for g in cfg["groups"]] == names
    ranges = {"de": range(0, 2), "fep": range(2, 5), "pso": range(5, 7), "ga": range(7, 9)}
    for rec in run.history:
        m = rec.group_metrics
        assert not rec.plugin_metrics and len(m) == 4 * len(names)
        assert all(rec.metrics(sink)[k] == v for sink in ("csv", "mlflow") for k, v in m.items())
        sent = sum(m[f"group_{n}_migrants_sent"] for n in names)
        assert sent == sum(m[f"group_{n}_migrants_taken"] for n in names)
    assert sent == sum(acc for *_, acc, _ in run.migrations) > 0
    last = run.history[-1].group_metrics
    for n, r in ranges.items():
        best = min(min(rec.island_best_f[list(r)]) for rec in run.history)
        assert last[f"group_{n}_best_f"] == best
        taken = sum(acc for _, _, d, acc, _ in run.migrations if d in r)
        assert last[f"group_{n}_migrants_taken"] == taken
    assert min(last[f"group_{n}_best_f"] for n in names) == run.best_f
    assert sum(last[f"group_{n}_improvement_share"] for n in names) == pytest.approx(1.0)
    labels = [line.get_label() for line in convergence_figure(run.history).axes[0].get_lines()]
    assert [lb for lb in labels if lb.startswith("group")] == [f"group {n}" for n in names]
    assert not any(lb.startswith("group_") for lb in labels)


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides,message",
    [
        (["groups.de.islands=0"], "groups.de.islands=0: allowed values are integers >= 1"),
        (["groups.fep.islands=-2"], "groups.fep.islands=-2: allowed values are integers >= 1"),
        (["groups.pso.algorithm=nosuch"], "groups.pso.algorithm='nosuch': allowed values are cde|cmaes|de|"),
        (["~groups", "+groups=[]"], "groups=[]: allowed values are a list or a mapping of one or more groups"),
        (["~groups", "+groups=[{algorithm: de, islands: 0}]"], "groups.0.islands=0: allowed values are integers >= 1"),
        (["~groups", "+groups=[{algorithm: ga}]"], "groups.0.islands=None: allowed values are integers >= 1"),
        (["+groups.cma={islands: 2}"], "groups.cma.algorithm=None: allowed values are cde|cmaes|"),
        (["groups.de.algorithm.F=3"], "groups.de.algorithm.F=3"),
        (["groups.de.algorithm._target_=nosuchmodule.DE"], "groups.de.algorithm._target_='nosuchmodule.DE'"),
        (["+groups.cde={algorithm: cde, islands: 1}"], "groups.cde.algorithm=CDE: a family with several populations"),
        (["~groups", "+groups=[{algorithm: de, islands: 1}, {algorithm: cde, islands: 1}]"], "groups.1.algorithm=CDE"),
    ],
)
def test_bad_groups_are_one_line_before_ray_starts(overrides, message, monkeypatch):
    """Each bad group stops the job in :func:`isles.app.job.prepare` (nothing started) with one line
    naming the field as typed and the allowed values."""
    monkeypatch.setattr(job, "init_ray", lambda *a, **k: pytest.fail("Ray started"))
    with pytest.raises(ValueError) as err:
        job.prepare(make_cfg(*SMALL, *overrides))
    assert "\n" not in str(err.value) and str(err.value).startswith(message), str(err.value)


def test_bad_group_on_the_command_line_and_the_experiment_as_users_type_it(tmp_path):
    """``python run.py +experiment=mixed_islands device=cpu``, shortened: it runs, and a bad island
    count is ``isles: error: ...`` with exit status 2."""
    base = [sys.executable, "run.py", "+experiment=mixed_islands", "device=cpu", "logger=none"]
    bad = subprocess.run([*base, "groups.pso.islands=0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == "isles: error: groups.pso.islands=0: allowed values are integers >= 1"
    ok = subprocess.run(
        [*base, "generations=100", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "evaluations 60,600" in ok.stdout and "de: host kernel; fep: host kernel; pso: host kernel" in ok.stdout


def test_a_budget_in_evaluations_where_the_groups_count_alike_and_where_not():
    """DE, FEP and PSO islands of 12 (12 evaluations each at init and per generation, 7 islands: 84 a
    generation): ``stop.max_evaluations=2000`` runs 23 generations, 2,016 evaluations. With the GA
    (``N - n_elite`` a generation) the counts differ (was refused in one line): the run's counts are
    summed over the groups, 108 at init and 106 a generation, so 18 generations reach the budget
    (the GA's re-evaluations of its arrivals counted beside it, as in any run)."""
    prepared = job.prepare(make_cfg(*SMALL, "~groups.ga", "stop.max_evaluations=2000"))
    assert prepared.plain["generations"] == 23
    run = Coordinator(prepared.plain, prepared.topology, prepared.plugins, use_ray=False).run()
    assert (run.generations, run.evaluations) == (23, 84 * 24)
    prepared = job.prepare(make_cfg(*SMALL, "stop.max_evaluations=2000"))
    assert prepared.plain["generations"] == 18  # 108 + 17 * 106 = 1910 < 2000 <= 108 + 18 * 106 = 2016


def test_one_group_of_a_family_without_extras_is_the_plain_run():
    """``groups`` with one DE group of 5 islands is ``algorithm=de islands.n=5``, bit for bit: the same
    random numbers per island, emigrants, routes, replacements and counts (DE has no extras, so its
    arrival rule changes nothing). A family with extras differs by its rule (FEP's eta_init on arrival)."""
    common = ["problem.dim=8", "generations=30", "islands.migration_interval=3", "islands.n_migrants=2"]
    common += ["topology=fully_connected", "logger=none", "progress=false", "device=cpu"]
    cfg = plain(make_cfg("algorithm=de", "algorithm.pop_size=12", "islands.n=5", "problem=rastrigin", *common))
    alone = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()
    mixed = coordinator("~groups.pso", "~groups.fep", "~groups.ga", "groups.de.islands=5", *common)
    assert_same_runs(alone, mixed.run())


def test_a_mixed_group_takes_islands_out_of_order_of_families_as_placement_by_cost_moves_them():
    """Sync mode's placement by cost (:class:`isles.islands.control.placement.Balancer`) gives a group
    islands that are not one block (here 0, 2, 5, 7 of DE 0-1, FEP 2-4, PSO 5-6, GA 7-8):
    :meth:`Mixed.regroup` splits the one group's state so, and back to the same state; the group that
    took them (:meth:`IslandGroup.regroup`, its context's streams changed) evolves them as the whole
    group does, bit for bit."""
    from isles.islands.group import IslandGroup  # noqa: PLC0415
    from isles.islands.records import GroupSpec  # noqa: PLC0415

    from tests.helpers import one_epoch  # noqa: PLC0415

    cfg = validated(plain(make_cfg(*SMALL)))
    spec = GroupSpec(problem=cfg["problem"], algorithm=cfg["algorithm"], island_ids=tuple(range(9)), device="cpu")
    whole, moved = IslandGroup(spec), IslandGroup(spec)
    parts, some = [[0, 2, 5, 7], [1, 3, 4, 6, 8]], [0, 2, 5, 7]
    split = whole.algorithm.regroup([whole.state_dict()], [list(range(9))], parts)
    back = whole.algorithm.regroup(split, parts, [list(range(9))])[0]
    for key, value in whole.state_dict().items():
        np.testing.assert_array_equal(back[key], value, err_msg=key)
    moved.regroup(some, split[0])
    a, b = one_epoch(whole, 6), one_epoch(moved, 6)
    np.testing.assert_array_equal(b.best_f, a.best_f[some])
    np.testing.assert_array_equal(b.best_x, a.best_x[some])
    assert b.evals == sum(12 + 6 * e for e in (12, 12, 12)) + (12 + 6 * 11)  # DE, FEP, PSO, GA (n_elite 1)


def test_async_mixed_run_on_one_actor_is_the_sync_run_and_counts_exactly_on_two(ray_local):
    """``islands.mode=async``: on one actor the sync run, bit for bit; on two actors (what has
    arrived decides the trajectories) the evaluations without GA islands are the sync run's."""
    assert_same_runs(coordinator("islands.mode=async", "islands.n_actors=1", use_ray=True).run(), coordinator().run())
    two = coordinator("islands.mode=async", "islands.n_actors=2", "~groups.ga", use_ray=True).run()
    assert two.evaluations == coordinator("~groups.ga").run().evaluations == 2 * 372 + 3 * 372 + 2 * 372


#: the issue's mix (issue 36 §1): the list form with built-in names, as docs/mixed_islands.md shows it
LIST_FORM = "groups=[{algorithm: lshade, islands: 2}, {algorithm: cmaes, islands: 2}]"


def test_a_budget_in_evaluations_for_a_mix_whose_counts_differ_is_spent_by_all_groups_together():
    """L-SHADE (N_init = 18 D at init and a generation) and CMA-ES (1 at init, lambda a generation) in
    the list form on Rastrigin D=10 (``++problem.dim=10``: each group's family takes the problem's
    dimension, as a one-algorithm run does; was ``groups.0.algorithm.pop_size=None``), with
    ``stop.max_evaluations`` (was refused: the families' ``initial_evaluations()`` differ). The run's
    counts are each family's times its islands: the run stops at the first generation whose
    evaluations reach the budget, over it by less than one generation of all islands, on 1 and 2 groups."""
    budget = 30_000
    args = ["+experiment=mixed_islands", LIST_FORM, "++problem.dim=10", f"stop.max_evaluations={budget}"]
    prepared = job.prepare(make_cfg(*args, "islands.migration_interval=5", "logger=none", "device=cpu"))
    lshade, cmaes = prepared.algorithm.algorithms
    assert lshade.params.dim == cmaes.params.dim == 10 and lshade.initial_evaluations() != cmaes.initial_evaluations()
    assert lshade.params.max_evaluations is None and lshade.params.n_islands == 2  # the run's pool, not a share
    at_init, per = prepared.algorithm.counts(4)
    assert (at_init, per) == (
        2 * (lshade.initial_evaluations() + cmaes.initial_evaluations()),
        2 * (lshade.evaluations_per_generation() + cmaes.evaluations_per_generation()),
    )
    g = prepared.plain["generations"]
    assert at_init + (g - 1) * per < budget <= at_init + g * per
    runs = []
    for n in (1, 2):
        cfg = {**prepared.plain, "islands": {**prepared.plain["islands"], "n_actors": n}}
        runs.append(Coordinator(cfg, prepared.topology, prepared.plugins, use_ray=False).run())
        assert (runs[-1].generations, runs[-1].evaluations) == (g, at_init + g * per)
    assert_same_runs(*runs)


@pytest.mark.parametrize("form", ["", "+", "++"])
def test_the_list_form_over_the_experiment_on_the_command_line_as_users_type_it(form, tmp_path):
    """``python run.py +experiment=mixed_islands device=cpu logger=none 'groups=[...]' ++problem.dim=10``
    (and ``+groups=[...]``, ``++groups=[...]``, which gave Hydra's 5-line merge error): it runs the two
    groups, each on the problem's dimension."""
    cmd = [sys.executable, "run.py", "+experiment=mixed_islands", "device=cpu", "logger=none", form + LIST_FORM]
    cmd += ["++problem.dim=10", "generations=4", f"hydra.run.dir={tmp_path}"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "lshade: host kernel; cmaes: numpy" in p.stdout and "x10 " in p.stdout and "x11 " not in p.stdout
