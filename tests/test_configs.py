"""Every experiment in conf/experiment composes as users type it (+experiment=NAME) and builds its
problem, algorithm, topology and master; overrides hold only what they change."""
from pathlib import Path

import pytest
from hydra.utils import instantiate

from isles.islands.build import build_algorithm, build_problem
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
    if cfg.get("master"):
        instantiate(cfg["master"])
    assert problem.dim >= 1 and algo.population_size() >= 1


def test_table2_workloads_match_seed_004():
    for name, dim, n, F, CR, gens, xo in [("de_ackley_bin", 1000, 500, 0.5, 0.2, 30000, "bin"),
                                         ("de_griewank_nec", 500, 300, 0.25, 0.45, 20000, "nec"),
                                         ("de_rosenbrock_bin", 50, 100, 0.65, 0.95, 10000, "bin")]:
        c = plain(make_cfg(f"+experiment={name}"))
        a = c["algorithm"]
        assert (c["problem"]["dim"], a["pop_size"], a["F"], a["CR"], c["generations"], a["crossover"]) == \
            (dim, n, F, CR, gens, xo)


def test_cmepso_defaults_are_the_papers():
    c = plain(make_cfg("+experiment=cmepso"))
    a, m = c["algorithm"], c["master"]
    assert (c["generations"], c["islands"]["n"], a["n_particles"], a["n_replicas"], m["n_particles"]) == (1000, 10, 40, 5, 10)
    assert (a["cor"], a["sigma_g"], a["sigma"], a["c1"], a["c2"], m["c3"]) == (0.22, 0.005, 0.22, 2.05, 2.05, 2.02)
    assert c["islands"]["migration_interval"] == 1 and c["dtype"] == "float64"
    assert plain(make_cfg("+experiment=cmepso", "problem=spring"))["problem"]["_target_"].endswith("Spring")
