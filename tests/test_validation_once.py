"""Issue 26, item 6: a run's config is checked once, by the job before Ray starts; the runtime
(the driver's Coordinator, and the groups it starts) trusts the checked config it is handed,
and ``islands.n_migrants`` is checked when an island group is built, not at every migration."""

import pickle

import pytest
from hydra.utils import instantiate
from isles.app import job
from isles.islands.config import schema
from isles.islands.coordinator import Coordinator
from isles.islands.migration import policies

from tests.counting_actor import CountingGroup
from tests.helpers import make_cfg

TINY = [
    "algorithm=de",
    "algorithm.pop_size=8",
    "problem=sphere",
    "problem.dim=3",
    "topology=ring",
    "islands.n=3",
    "islands.n_actors=1",
    "islands.migration_interval=2",
    "generations=20",
    "device=cpu",
    "logger=none",
    "progress=false",
    "quiet=true",
]


@pytest.fixture
def checks(monkeypatch):
    """Counts of the schema's value checks (:func:`isles.islands.config.schema.check_values`, what
    ``validated`` runs) and of the ``islands.n_migrants`` checks, by name."""
    counts = {"check_values": 0, "check_n_migrants": 0}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(schema, "check_values", counting("check_values", schema.check_values))
    monkeypatch.setattr(policies, "check_n_migrants", counting("check_n_migrants", policies.check_n_migrants))
    return counts


def test_an_in_process_run_checks_its_config_once(checks):
    """The job checks the config; the Coordinator trusts it (before: checked twice in process)."""
    result, _ = job.run_job(make_cfg(*TINY), use_ray=False)
    assert result.generations == 20
    assert checks["check_values"] == 1


def test_a_budget_run_checks_its_config_once(checks):
    """``stop.max_evaluations``: the budget's generations reuse the checked config (before: the
    budget checked it, then the job, then the Coordinator: three times)."""
    result, _ = job.run_job(make_cfg(*TINY, "stop.max_evaluations=100"), use_ray=False)
    assert result.generations == 4  # 3 islands of 8: 24 at init, 24 per generation -> 100 after 4
    assert checks["check_values"] == 1


def test_the_coordinator_trusts_the_jobs_config(checks):
    """The driver's Coordinator, handed the job's checked config (as Ray would pickle it too),
    checks nothing again; its groups' specs carry it as it is."""
    prepared = job.prepare(make_cfg(*TINY))
    assert isinstance(prepared.plain, schema.Validated) and checks["check_values"] == 1
    driver = Coordinator(prepared.plain, prepared.topology, prepared.plugins, use_ray=False)
    shipped = pickle.loads(pickle.dumps(driver.cfg))
    assert isinstance(shipped, schema.Validated)
    again = Coordinator(shipped, prepared.topology, prepared.plugins, use_ray=False)
    assert again.executor.spec([0, 1, 2], "cpu").n_migrants == 1
    assert checks["check_values"] == 1


def test_a_hand_made_config_is_still_checked(checks):
    """A plain dict (a library user's, a test's) is checked by the Coordinator, with the one-line error."""
    cfg = {"islands": {"n": 2, "mode": "lazy"}, "device": "cpu", "problem": {}, "algorithm": {}}
    with pytest.raises(ValueError, match=r"^islands.mode='lazy': allowed values are sync\|async$"):
        Coordinator(cfg, instantiate({"_target_": "isles.islands.migration.topology.Unconnected"}), use_ray=False)
    assert checks["check_values"] == 1
    assert schema.validated(schema.validated({"device": "cpu"})) is not None and checks["check_values"] == 2


@pytest.mark.parametrize("generations", [8, 40])
def test_n_migrants_is_checked_at_construction_not_per_migration(checks, generations):
    """``islands.n_migrants`` is checked by the job and by the group when it builds its selection;
    the count does not grow with the migrations (before: once more per migration and island group)."""
    result, _ = job.run_job(make_cfg(*TINY, f"generations={generations}"), use_ray=False)
    assert result.generations == generations
    assert checks["check_n_migrants"] == 2  # the job (before Ray) and the one in-process group


def test_n_migrants_too_large_for_a_second_population_is_refused_before_the_run(monkeypatch):
    """CDE's ``y`` population (``pop_size_y``) bounds ``islands.n_migrants`` too: refused before
    anything starts, in one line (before: only ``pop_size`` was checked up front, and the first
    migration failed inside the run)."""

    def started(*args, **kwargs):
        raise AssertionError("the run started before the config was checked")

    monkeypatch.setattr(job, "Coordinator", started)
    monkeypatch.setattr(job, "init_ray", started)
    cfg = make_cfg(
        "+experiment=cde_islands",
        "algorithm.pop_size=10",
        "algorithm.pop_size_y=4",
        "islands.n_migrants=5",
        "device=cpu",
        "logger=none",
    )
    with pytest.raises(ValueError) as err:
        job.run_job(cfg)
    assert str(err.value) == "islands.n_migrants=5: allowed values are integers 1..4 (the population size of y)"


def test_selection_policy_checks_k_when_built():
    """The group's selection is built with its ``k`` and algorithm: a ``k`` above a population's
    size is refused there; ``select`` itself does no check."""
    from isles.algorithms.de.de import DE

    with pytest.raises(
        ValueError, match=r"^islands.n_migrants=9: allowed values are integers 1..8 \(the population size\)$"
    ):
        policies.selection_policy("select_best", 9, DE(pop_size=8))
    assert policies.selection_policy("select_best", 8, DE(pop_size=8)) == policies.SelectBest()


@pytest.mark.slow
def test_an_in_actor_run_checks_its_config_once(checks, monkeypatch):
    """The whole run in one Ray actor: the job checks the config; the driver's Coordinator and the
    actor's group (built from its GroupSpec) check nothing."""
    import isles.islands.control.executor as executor

    monkeypatch.setattr(executor, "IslandGroup", CountingGroup)
    prepared = job.prepare(make_cfg(*TINY))
    run = Coordinator(prepared.plain, prepared.topology, prepared.plugins, use_ray=True)
    job.init_ray({"num_cpus": 1})
    try:
        result = run.run()
    finally:
        import ray

        ray.shutdown()
    assert result.generations == 20
    assert [i["checks_in_actor"] for i in run.executor.infos] == [0]
    assert checks["check_values"] == 1  # the job's, in this process
