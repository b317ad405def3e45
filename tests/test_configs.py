"""Every experiment in conf/experiment composes as users type it (+experiment=NAME) and builds its
problem, algorithm, topology and master; overrides hold only what they change."""

from pathlib import Path

import pytest
from hydra.utils import instantiate
from isles.islands.config.build import build_algorithm, build_problem

from tests.helpers import make_cfg, plain

EXPERIMENTS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_and_builds(name):
    text = (Path(__file__).resolve().parents[1] / "conf" / "experiment" / f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_")
    cfg = plain(make_cfg(f"+experiment={name}"))
    problem = build_problem(cfg["problem"])
    algo = build_algorithm(cfg["algorithm"])
    instantiate(cfg["topology"]).weights(cfg["islands"]["n"])
    for p in cfg["plugins"]:
        assert hasattr(instantiate(p), "make")  # a plug-in factory (islands/plugin.py)
    assert problem.dim >= 1 and algo.population_size() >= 1


def test_table2_workloads_match_seed_004():
    for name, dim, n, F, CR, gens, xo in [
        ("de_ackley_bin", 1000, 500, 0.5, 0.2, 30000, "bin"),
        ("de_griewank_nec", 500, 300, 0.25, 0.45, 20000, "nec"),
        ("de_rosenbrock_bin", 50, 100, 0.65, 0.95, 10000, "bin"),
    ]:
        c = plain(make_cfg(f"+experiment={name}"))
        a = c["algorithm"]
        assert (c["problem"]["dim"], a["pop_size"], a["F"], a["CR"], c["generations"], a["crossover"]) == (
            dim,
            n,
            F,
            CR,
            gens,
            xo,
        )


def test_cmepso_defaults_are_the_papers():
    c = plain(make_cfg("+experiment=cmepso"))
    a, m = c["algorithm"], c["plugins"][0]
    assert (c["generations"], c["islands"]["n"], a["n_particles"], a["n_replicas"], m["n_particles"]) == (
        1000,
        10,
        40,
        5,
        10,
    )
    assert (a["cor"], a["sigma_g"], a["sigma"], a["c1"], a["c2"], m["c3"]) == (0.22, 0.005, 0.22, 2.05, 2.05, 2.02)
    assert c["islands"]["migration_interval"] == 1 and c["dtype"] == "float64"
    assert plain(make_cfg("+experiment=cmepso", "problem=spring"))["problem"]["_target_"].endswith("Spring")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["islands.mode=lazy"], "islands.mode='lazy': allowed values are sync|async"),
        (
            ["+experiment=cmepso", "islands.mode=async"],
            "islands.mode=async: plugins (the loop's plug-ins) need islands.mode=sync",
        ),
        (["islands.migration_interval=0"], "islands.migration_interval=0: allowed values are integers >= 1"),
        (["islands.snapshot_every=-1"], "islands.snapshot_every=-1: allowed values are integers >= 0"),
        (["islands.max_restarts=-2"], "islands.max_restarts=-2: allowed values are integers >= 0"),
        (["checkpoint.every=-1"], "checkpoint.every=-1: allowed values are integers >= 0"),
        (["stop.tol=-1"], "stop.tol=-1.0: allowed values are numbers >= 0"),
        (["stop.f_target=nan"], "stop.f_target=nan: allowed values are numbers"),
        (["seed=-3"], "seed=-3: allowed values are integers >= 0"),
    ],
)
def test_schema_checks_fire_before_anything_starts(overrides, message, monkeypatch):
    """Issue 19: the range checks that the Coordinator made on its own are the schema's
    (``islands/config/schema.py``: :func:`check_values`), run by the job before it builds anything: no
    Coordinator is made, no Ray and no MLflow run started; one line naming the field as typed."""
    from isles.app import job

    def started(*args, **kwargs):
        raise AssertionError("the run started before the config was checked")

    monkeypatch.setattr(job, "Coordinator", started)
    monkeypatch.setattr(job, "init_ray", started)
    monkeypatch.setattr(job, "TrackingProcess", started)
    with pytest.raises(ValueError) as err:
        job.run_job(make_cfg(*overrides, "device=cpu", "logger=none"))
    assert str(err.value) == message


def test_coordinator_reads_the_schemas_defaults_and_checks():
    """The runtime reads a config through the schema (:func:`isles.islands.config.schema.validated`): a
    hand-made dict gets the defaults of the keys it lacks, and a bad value the same line as the job's."""
    from isles.islands.config.schema import IslandsConfig, validated

    cfg = validated({"islands": {"n": 4}, "device": "cpu"})
    assert cfg["islands"]["migration_interval"] == IslandsConfig.migration_interval
    assert cfg["islands"]["n"] == 4 and cfg["checkpoint"]["every"] == 0
    with pytest.raises(ValueError, match=r"^islands.mode='lazy': allowed values are sync\|async$"):
        validated({"islands": {"mode": "lazy"}, "device": "cpu"})


@pytest.mark.parametrize("family", ["de", "fep", "ga"])
def test_epoch_flag_is_validated_in_one_line(family):
    """``algorithm.epoch`` of every family with an epoch kernel (check_bool): a one-line error
    naming the field and the allowed values; true by default."""
    from isles.algorithms.de.de import DE  # noqa: PLC0415
    from isles.algorithms.ep.fep import FEP  # noqa: PLC0415
    from isles.algorithms.ga.ga import GA  # noqa: PLC0415

    cls = {"de": DE, "fep": FEP, "ga": GA}[family]
    with pytest.raises(ValueError, match=r"^algorithm\.epoch='yes': allowed values are true\|false$"):
        cls(epoch="yes")
    assert cls(epoch=False).params.epoch is False
    assert cls().params.epoch is True


@pytest.mark.parametrize(
    "plugin, message",
    [
        ("{_target_: nosuch.Plugin}", "plugins.0._target_='nosuch.Plugin': no module named 'nosuch'"),
        ("{_target_: collections.OrderedDict}", "plugins.0._target_='collections.OrderedDict': not a plug-in"),
        ("{_target_: isles.algorithms.pso.master_plugin.MasterSwarmPlugin, n_particles: 0}", "n_particles"),
    ],
)
def test_a_bad_plugin_is_one_line_before_anything_starts(plugin, message, monkeypatch):
    """The ``plugins`` list is built by the job before Ray starts: a target that cannot be imported, an
    object that is not a plug-in factory, or a bad parameter is one ``ValueError`` line."""
    from isles.app import job

    def started(*args, **kwargs):
        raise AssertionError("the run started before the plug-ins were built")

    monkeypatch.setattr(job, "Coordinator", started)
    monkeypatch.setattr(job, "init_ray", started)
    with pytest.raises(ValueError) as err:
        job.run_job(make_cfg("+experiment=de_islands", f"plugins=[{plugin}]", "device=cpu", "logger=none"))
    assert message in str(err.value) and "\n" not in str(err.value)
