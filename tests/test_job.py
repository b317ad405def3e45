"""End to end with Ray and MLflow: a run is tracked, read back through MLflow's API; a failing
run is marked FAILED; NaN objectives are counted."""

import json
from pathlib import Path

import pytest
from isles.app.job import run_job
from mlflow.tracking import MlflowClient

from tests.helpers import make_cfg

# slow: real Ray actors and MLflow stores (CI runs them; the quick run -m "not slow" does not)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]


def test_tracked_run_reads_back(ray_local, store):
    cfg = make_cfg(
        "+experiment=cmepso",
        "generations=20",
        "islands.n=4",
        "islands.n_actors=2",
        "algorithm.n_particles=10",
        f"logger.tracking_uri={store}",
        "logger.experiment_name=test-isles",
        "progress=false",
        "device=cpu",
    )
    result, run_id = run_job(cfg)
    client = MlflowClient(tracking_uri=store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["algorithm.c1"] == "2.05"
    assert run.data.params["islands.n"] == "4"
    assert run.data.params["problem._target_"] == "isles.problems.engineering.WeldedBeam"
    history = client.get_metric_history(run_id, "best_f")
    assert len(history) == 20 and history[-1].step == 20  # one point per epoch (interval 1)
    assert abs(history[-1].value - result.best_f) < 1e-9
    for name in (
        "evaluations",
        "evals_per_s",
        "wall_s",
        "best_v",
        "island_00_best_f",
        "island_03_best_f",
        "master_best_f",
    ):
        assert client.get_metric_history(run_id, name), name
    assert "cpu" in run.data.tags["devices"] and run.data.tags["git_commit"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"config.yaml", "convergence.png", "best_solution.json"} <= artifacts
    best = json.loads(Path(client.download_artifacts(run_id, "best_solution.json")).read_text())
    assert set(best) >= {"x", "f", "g", "feasible"} and len(best["x"]) == 4 and len(best["g"]) == 7


def test_failed_run_is_marked_failed_with_metrics(ray_local, store):
    cfg = make_cfg(
        "problem._target_=tests.user_problems.FailingSphere",
        "+problem.fail_after=8",
        "islands.n_actors=1",  # no placement probe: its calls in the driver would count towards fail_after
        "algorithm.n_particles=4",
        "algorithm.n_replicas=1",
        "generations=50",
        "islands.n=2",
        "islands.migration_interval=1",
        f"logger.tracking_uri={store}",
        "progress=false",
        "device=cpu",
    )
    with pytest.raises(Exception, match="objective crashed"):
        run_job(cfg)
    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name("isles")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FAILED"
    assert client.get_metric_history(run.info.run_id, "best_f"), "metrics logged before the failure are kept"


def test_nan_objective_is_worst_and_counted(ray_local, store):
    cfg = make_cfg(
        "problem._target_=tests.user_problems.NaNSphere",
        "algorithm.n_particles=10",
        "generations=30",
        "islands.n=2",
        f"logger.tracking_uri={store}",
        "progress=false",
        "device=cpu",
    )
    result, run_id = run_job(cfg)
    assert result.nan_evals > 0
    assert result.best_x[0] <= 0.5 and result.best_f < 0.01
    hist = MlflowClient(tracking_uri=store).get_metric_history(run_id, "nan_evaluations")
    assert hist[-1].value == result.nan_evals


def test_async_de_islands_migrate_and_log(ray_local, store):
    cfg = make_cfg(
        "+experiment=de_islands",
        "islands.mode=async",
        "islands.n=4",
        "islands.n_actors=2",
        "problem.dim=10",
        "algorithm.pop_size=12",
        "generations=60",
        "islands.migration_interval=10",
        f"logger.tracking_uri={store}",
        "progress=false",
        "device=cpu",
    )
    result, run_id = run_job(cfg)
    assert result.generations == 60
    assert result.migrations and all(m[1] != m[2] for m in result.migrations)
    client = MlflowClient(tracking_uri=store)
    assert "migrations.csv" in {a.path for a in client.list_artifacts(run_id)}
    assert client.get_metric_history(run_id, "us_per_generation")


def test_restarted_groups_retag_the_run(store):
    """After a lost actor or node, the run's tags say where the restarted group runs now."""
    from isles.app.tracking import MlflowTracker

    def info(node, pid):
        return {
            "device": "cpu",
            "host": "h",
            "pid": pid,
            "node_id": node,
            "node_ip": "10.0.0.1",
            "ray_gpu_ids": [],
            "island_ids": [0, 1],
        }

    tracker = MlflowTracker({"tracking_uri": store, "experiment_name": "test-restart"}, {"seed": 0}, "seed: 0\n", None)
    run_id = tracker.start()
    tracker.on_start({"groups": [info("n1", 10), info("n2", 11)], "startup_s": 0.1})
    tracker.on_restart({"groups": {1: info("n3", 12)}})
    tracker.end()
    tags = MlflowClient(tracking_uri=store).get_run(run_id).data.tags
    assert (tags["group_0.node_id"], tags["group_1.node_id"], tags["restarts"]) == ("n1", "n3", "1")


def test_resuming_a_run_the_store_does_not_hold_logs_a_new_run(store, capfd):
    """A checkpoint's MLflow run written against another store (e.g. before logger.fallback_local
    switched to the local one): the resumed run is a new run, tagged with the old id."""
    from isles.app.tracking import MlflowTracker

    tracker = MlflowTracker({"tracking_uri": store, "experiment_name": "test-resume"}, {"seed": 0}, "seed: 0\n", None)
    run_id = tracker.start("0123456789abcdef0123456789abcdef")
    tracker.end()
    run = MlflowClient(tracking_uri=store).get_run(run_id)
    assert run_id != "0123456789abcdef0123456789abcdef" and run.info.status == "FINISHED"
    assert run.data.tags["resumed_from_run"] == "0123456789abcdef0123456789abcdef"
    assert run.data.params["seed"] == "0"
    assert "is not in" in capfd.readouterr().err
