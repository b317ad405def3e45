"""Budgets in evaluations (issue 25): ``stop.max_evaluations``, what ``evaluations`` counts in every
family (evaluations of the objective and constraints at one point x; a min-max problem's pair
payoffs apart), and the evaluations per generation documented in docs/budgets.md."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import get_class, instantiate
from isles.islands.config.build import build_algorithm
from isles.islands.config.schema import validated
from isles.islands.control.budget import evaluation_counts, evaluations_after
from isles.islands.coordinator import Coordinator
from isles.problems.base import Problem

from tests.helpers import make_cfg, plain

ROOT = Path(__file__).resolve().parents[1]


class PointCounter(Problem):
    """A user's constrained problem that counts the points it evaluates (rows of ``X``) in the
    class attribute ``points`` (shared by every instance of this process: the in-process groups),
    as a user measuring an optimiser's cost would."""

    name = "point_counter"
    n_constraints = 1
    points = 0

    def __init__(self, dim=3, lower=-1.0, upper=1.0):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        type(self).points += int(np.prod(X.shape[:-1]))
        return ((X - 0.25) ** 2).sum(axis=-1)

    def constraints(self, X):
        return 0.1 - X[..., :1]


COMMON = [
    "logger=none",
    "progress=false",
    "device=cpu",
    "problem._target_=tests.test_budget.PointCounter",
    "++problem.dim=3",
    "++problem.lower=-1.0",
    "++problem.upper=1.0",
]

#: one tiny run per family: (name, overrides)
FAMILIES = {
    "de": [
        "algorithm=de",
        "algorithm.pop_size=8",
        "islands.n=3",
        "topology=ring",
        "islands.migration_interval=4",
        "generations=60",
    ],
    "pso": [
        "algorithm=pso",
        "algorithm.n_particles=6",
        "islands.n=3",
        "islands.migration_interval=4",
        "generations=60",
    ],
    "cmepso": [
        "+experiment=cmepso",
        "algorithm.n_particles=6",
        "algorithm.n_replicas=2",
        "plugins.0.n_particles=4",
        "plugins.0.n_replicas=2",
        "islands.n=3",
        "generations=60",
    ],
    "ga": [
        "algorithm=ga",
        "algorithm.pop_size=10",
        "algorithm.n_elite=2",
        "algorithm.encoding=binary",
        "islands.n=3",
        "topology=ring",
        "islands.migration_interval=5",
        "generations=60",
    ],
    "fep": [
        "algorithm=fep",
        "algorithm.pop_size=6",
        "algorithm.q=3",
        "islands.n=3",
        "topology=ring",
        "islands.migration_interval=5",
        "generations=60",
    ],
    "ifep": [
        "algorithm=fep",
        "algorithm.pop_size=6",
        "algorithm.q=3",
        "algorithm.mutation=improved",
        "islands.n=2",
        "generations=60",
    ],
    "lshade": [
        "algorithm=lshade",
        "algorithm.pop_size=12",
        "algorithm.evals_per_generation=7",
        "islands.n=3",
        "topology=ring",
        "islands.migration_interval=4",
        "generations=60",
    ],
    "cde": [
        "+experiment=cde",
        "algorithm.pop_size=6",
        "algorithm.gens_x=3",
        "algorithm.gens_y=2",
        "algorithm.n_cycles=30",
        "islands.n=3",
    ],
}


def config(family: str, *extra: str, n_actors: int = 1) -> dict:
    """The plain config of ``family``'s tiny run with ``extra`` overrides."""
    return plain(make_cfg(*FAMILIES[family], *COMMON, *extra, f"islands.n_actors={n_actors}"))


def run(family: str, *extra: str, n_actors: int = 1):
    """``(result, points)``: the in-process run of ``family`` and the points its problem counted."""
    cfg = config(family, *extra, n_actors=n_actors)
    plugins = [instantiate(p) for p in cfg["plugins"]]
    counter = get_class(cfg["problem"]["_target_"])  # the class the run builds (the module as Hydra imports it)
    counter.points = 0
    result = Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=False).run()
    return result, counter.points


def per_generation(cfg: dict) -> int:
    """The whole run's evaluations per generation from the documented formula."""
    plugins = [instantiate(p) for p in cfg["plugins"]]
    counts = evaluation_counts(build_algorithm(cfg["algorithm"]), plugins)
    n = cfg["islands"]["n"]
    return evaluations_after(1, n, counts) - evaluations_after(0, n, counts)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_evaluations_are_the_points_evaluated_and_match_the_formula(family):
    """``evaluations`` is what a user's own counter sees (one per point x), and docs/budgets.md's
    formula ``n (init + g per_generation) + g master`` gives it."""
    result, points = run(family)
    cfg = config(family)
    plugins = [instantiate(p) for p in cfg["plugins"]]
    counts = evaluation_counts(build_algorithm(cfg["algorithm"]), plugins)
    assert result.evaluations == points
    assert result.evaluations == evaluations_after(result.generations, cfg["islands"]["n"], counts)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_max_evaluations_stops_at_the_first_generation_that_reaches_it(family):
    cfg = config(family)
    per = per_generation(cfg)
    budget = 7 * per + per // 2 + cfg["islands"]["n"] * build_algorithm(cfg["algorithm"]).initial_evaluations()
    result, points = run(family, f"stop.max_evaluations={budget}")
    assert budget <= result.evaluations < budget + per
    assert result.evaluations == points  # the true count, as the user's own counter has it
    assert result.generations == 8 and result.history[-1].generation == 8


@pytest.mark.parametrize("family", ["de", "fep", "cde", "lshade"])
def test_max_evaluations_is_the_same_on_two_groups(family):
    """Several groups (each island group its own evaluations) stop at the same count as one."""
    budget = 500
    one, _ = run(family, f"stop.max_evaluations={budget}")
    two, _ = run(family, f"stop.max_evaluations={budget}", n_actors=2)
    assert two.evaluations == one.evaluations >= budget
    assert two.generations == one.generations


def test_max_evaluations_never_exceeds_generations():
    result, _ = run("de", "stop.max_evaluations=100000000")
    assert result.generations == 60


@pytest.mark.parametrize("value", [0, -5, 2.5, "abc", True])
def test_bad_max_evaluations_is_refused(value):
    with pytest.raises(ValueError, match=r"^stop\.max_evaluations=.*: allowed values are integers >= 1$"):
        validated({"stop": {"max_evaluations": value}, "device": "cpu"})


def test_cde_counts_points_and_pair_payoffs_apart():
    """CDE's ``evaluations`` are points x (the issue: 19,000,000 pair payoffs printed for 209,006
    evaluations of the objective and constraints); the pairs are ``payoff_evaluations``."""
    from isles.algorithms.coevolution.cde import cycle_payoffs

    result, points = run("cde")
    algo = build_algorithm(config("cde")["algorithm"])
    n, nx = 3, algo.params.pop_size
    assert result.evaluations == points == n * (2 * nx + 30 * nx * (1 + 3))
    assert result.payoff_evaluations == n * (2 * nx * nx + 30 * cycle_payoffs(algo.params))
    assert result.history[-1].payoff_evaluations == result.payoff_evaluations
    assert run("de")[0].history[-1].payoff_evaluations is None


@pytest.mark.slow
@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize("family, modes", [("de", ("sync", "async")), ("cmepso", ("sync",))])
def test_max_evaluations_on_ray_actors(family, modes):
    """The same stop on Ray actors (one actor: the archipelago's own loop; two: the SPMD loop;
    async) as in process."""
    budget = 777
    ref, _ = run(family, f"stop.max_evaluations={budget}")
    for mode, n_actors in [(m, k) for m in modes for k in (1, 2)]:
        cfg = config(family, f"stop.max_evaluations={budget}", f"islands.mode={mode}", n_actors=n_actors)
        plugins = [instantiate(p) for p in cfg["plugins"]]
        result = Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=True).run()
        assert (result.evaluations, result.generations) == (ref.evaluations, ref.generations), (mode, n_actors)
        assert budget <= result.evaluations < budget + per_generation(cfg)


EXPERIMENTS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_names_say_whether_they_split_the_budget(name):
    """``*_runs`` experiments are many independent runs (unconnected islands, no master: a budget
    is split over them, for statistics); every other experiment is one run (or one connected
    archipelago) that spends the whole budget on one answer. ``cde`` is one run, ``cde_runs`` 20."""
    cfg = plain(make_cfg(f"+experiment={name}"))
    independent = cfg["topology"]["_target_"].endswith("Unconnected") and cfg["islands"]["n"] > 1 and not cfg["plugins"]
    assert independent == name.endswith("_runs"), (name, cfg["islands"]["n"])


#: docs/budgets.md's table: experiment -> (islands, evaluations at initialisation per island,
#: per island and generation, master per generation); the rows are checked against the config
#: and the families' counts here, and each family's count against a run above.
def budget_table() -> dict:
    """The rows of docs/budgets.md's table of experiments, parsed: ``{name: (islands, init, per
    generation per island, master per generation, whole run per generation)}``."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "budgets.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0].startswith("+experiment="):
            nums = [int(c.replace(",", "")) for c in cells[1:6]]
            rows[cells[0].removeprefix("+experiment=")] = tuple(nums)
    return rows


def test_docs_table_covers_every_experiment_and_matches_the_counts():
    rows = budget_table()
    assert sorted(rows) == EXPERIMENTS
    for name, (n, init, per, master_per, total) in rows.items():
        cfg = validated(plain(make_cfg(f"+experiment={name}")))  # a run's groups set its algorithm and islands.n
        plugins = [instantiate(p) for p in cfg["plugins"]]
        counts = evaluation_counts(build_algorithm(cfg["algorithm"]), plugins)
        assert (n, init, per, master_per) == (cfg["islands"]["n"], *counts), name
        assert total == evaluations_after(1, n, counts) - evaluations_after(0, n, counts), name


@pytest.mark.parametrize("value", ["2.5", "abc", "0"])
def test_bad_max_evaluations_on_the_command_line_is_one_line(value):
    """As typed: one line, exit 2, before anything runs (Hydra's typed-config error would be five)."""
    p = subprocess.run(
        [
            sys.executable,
            "run.py",
            "+experiment=de_islands",
            "device=cpu",
            "logger=none",
            f"stop.max_evaluations={value}",
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    shown = value if value != "abc" else repr(value)
    assert lines == [f"isles: error: stop.max_evaluations={shown}: allowed values are integers >= 1"], p.stderr


def test_a_budget_typed_as_1e4_is_an_integer():
    result, _ = run("de", "stop.max_evaluations=1e4", "generations=100000")
    assert 10000 <= result.evaluations < 10000 + 24


def test_a_budget_grows_on_resume_as_generations_do(tmp_path):
    """A run saved on a budget resumes with a larger one (as ``generations`` may grow) and ends
    where an uninterrupted run on the larger budget ends, to the evaluation."""
    path = str(tmp_path / "ck.pkl")
    full, _ = run("de", "stop.max_evaluations=900")
    run("de", "stop.max_evaluations=400", "checkpoint.every=1", f"checkpoint.path={path}")
    resumed, _ = run("de", "stop.max_evaluations=900", f"checkpoint.resume={path}")
    assert 900 <= full.evaluations < 900 + 24
    assert (resumed.evaluations, resumed.generations, resumed.best_f) == (
        full.evaluations,
        full.generations,
        full.best_f,
    )


@pytest.mark.slow
def test_mlflow_and_the_summary_report_points_and_pairs_apart(store, capsys):
    """The job (as ``run.py`` runs it) on a budget: the result line, the summary and MLflow's
    metrics give the true count of points, and CDE's pairs as payoff_evaluations."""
    from isles.app.job import run_job
    from mlflow.tracking import MlflowClient

    cfg = make_cfg(
        *FAMILIES["cde"],
        *COMMON[1:],
        "logger=mlflow",
        f"logger.tracking_uri={store}",
        "progress=true",
        "stop.max_evaluations=2000",
        "islands.n_actors=1",
    )
    result, run_id = run_job(cfg, use_ray=False)
    out = capsys.readouterr().out
    assert 2000 <= result.evaluations < 2000 + 3 * 6 * 4 and result.generations < 30
    assert f"; {result.generations} generations (stop.max_evaluations=2,000)" in out
    assert f"evaluations {result.evaluations:,}" in out
    assert f"payoff evaluations {result.payoff_evaluations:,}" in out
    metrics = MlflowClient(tracking_uri=store).get_run(run_id).data.metrics
    assert metrics["final_evaluations"] == result.evaluations
    assert metrics["final_payoff_evaluations"] == result.payoff_evaluations
    assert metrics["evaluations"] == result.evaluations and metrics["payoff_evaluations"] == result.payoff_evaluations


def test_schedules_that_read_generations_span_the_budget():
    """``run.py`` sets ``generations`` to the budget's before ``${generations}`` resolves: PSO's
    inertia schedule (``max_iterations``) spans the run the budget buys; a value set by hand stays."""
    from isles.islands.control.budget import with_budget

    over = [*FAMILIES["pso"], *COMMON, "generations=100000", "stop.max_evaluations=1000"]
    c = plain(with_budget(make_cfg(*over)))
    assert c["generations"] == c["algorithm"]["max_iterations"] == -(-(1000 - 18) // 18)  # 3 islands of 6
    c = plain(with_budget(make_cfg(*over, "algorithm.max_iterations=500")))
    assert (c["generations"], c["algorithm"]["max_iterations"]) == (55, 500)
    assert plain(with_budget(make_cfg(*FAMILIES["pso"], *COMMON)))["generations"] == 60  # no budget: as composed
