"""The algorithm's own metrics (issue 28): :meth:`IslandAlgorithm.metrics` per island, recorded every
epoch in ``history.csv`` and MLflow as the mean over the islands (``sigma``) and per island
(``island_XX_sigma``); L-SHADE's and jSO's F/CR memories and population, CMA-ES's sigma, lambda and
restarts. In process, NumPy, seconds."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from isles.algorithms.cmaes.cmaes import CMAES
from isles.algorithms.core.base import Context, IslandAlgorithm
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.lshade.jso import JSO
from isles.app import job
from isles.islands.results import CSV, MLFLOW, island_metric_columns
from isles.problems.benchmarks import Rastrigin
from isles.problems.constraints import Evaluator
from mlflow.tracking import MlflowClient

from tests.helpers import island_ctx, make_cfg
from tests.test_records import a_record


def test_the_default_hook_reports_nothing():
    assert IslandAlgorithm().metrics({}) == {}


def test_columns_are_the_mean_and_each_island():
    """The mean leaves out islands that did not report (NaN: an async run's first epochs); one
    island gives no per-island column."""
    cols = island_metric_columns({"sigma": np.array([1.0, np.nan, 3.0])})
    assert cols["sigma"] == 2.0 and cols["island_00_sigma"] == 1.0 and math.isnan(cols["island_01_sigma"])
    assert island_metric_columns({"M_F": np.array([0.25])}) == {"M_F": 0.25}
    assert math.isnan(island_metric_columns({"x": np.array([np.nan, np.nan])})["x"])


def test_an_epoch_record_carries_them_to_both_sinks():
    rec = a_record(algorithm_metrics={"sigma": np.array([0.5, 1.5, 1.0])})
    for sink in (CSV, MLFLOW):
        m = rec.metrics(sink)
        assert m["sigma"] == 1.0 and m["island_02_sigma"] == 1.0
        assert type(m["sigma"]) is float
    assert "sigma" not in a_record().metrics()  # an algorithm without metrics adds no column


def test_jso_reports_its_memories_and_population():
    """jSO's state (L-SHADE's): the means of M_F and M_CR (terminal values as 0), N_G, |A|."""
    alg = JSO(dim=5, max_generations=20)
    ctx = island_ctx(np, Rastrigin(5), islands=2)
    s = alg.run(ctx, alg.init(ctx), 6)
    m = alg.metrics(s)
    np.testing.assert_array_equal(m["M_F"], s["M_F"].mean(axis=1))
    np.testing.assert_array_equal(m["M_CR"], np.maximum(s["M_CR"], 0).mean(axis=1))
    np.testing.assert_array_equal(m["pop_size"], [s["n_active"]] * 2)
    np.testing.assert_array_equal(m["archive"], s["a_n"])
    assert (m["M_F"] != 0.3).any()  # adapted away from jSO's initial memory


GENS, EVERY = 40, 10


def cmaes_job(tmp_path, monkeypatch, store, *extra):
    """A job of two unconnected BIPOP islands (seed 5, 4 epochs): ``(result, run_id, history.csv
    rows, the islands' final state evolved through the algorithm API)``."""
    monkeypatch.setattr(job, "_run_folder", lambda: str(tmp_path))
    gens, every = GENS, EVERY
    cfg = make_cfg(
        "+experiment=cmaes",
        "problem.dim=4",
        "islands.n=2",
        "topology=unconnected",
        "stop.max_evaluations=null",
        f"generations={gens}",
        f"islands.migration_interval={every}",
        "algorithm.tol_fun=1e-3",
        f"logger.tracking_uri={store}",
        "logger.wait=true",  # the MLflow record is read back
        "progress=false",
        "device=cpu",
        "seed=5",
        *extra,
    )
    result, run_id = job.run_job(cfg, use_ray=not any(e == "islands.mode=sync" for e in extra))
    with open(tmp_path / "history.csv") as fh:
        rows = list(csv.DictReader(fh))
    alg = CMAES(dim=4, tol_fun=1e-3)
    ctx = Context(np, np.float64, Evaluator(Rastrigin(4)), CounterRNG(np, 5, [0, 1]))
    return result, run_id, rows, alg.run(ctx, alg.init(ctx), gens)


def test_a_cmaes_run_records_sigma_in_history_csv_and_mlflow(tmp_path, monkeypatch, store):
    """In process: ``history.csv`` and MLflow hold ``sigma``, ``pop_size``, ``restarts``, ``regime``,
    ``condition`` and their per-island columns, every epoch, and the last epoch's values are the
    islands' own (the same islands evolved through the algorithm API)."""
    result, run_id, rows, s = cmaes_job(tmp_path, monkeypatch, store, "islands.mode=sync")
    gens, every = GENS, EVERY
    assert len(rows) == gens // every
    for name in ("sigma", "pop_size", "restarts", "regime", "condition"):
        assert name in rows[0] and f"island_01_{name}" in rows[0], name
    last = rows[-1]
    for i in range(2):
        assert float(last[f"island_{i:02d}_sigma"]) == s["sigma"][i]
        assert float(last[f"island_{i:02d}_pop_size"]) == s["lam"][i]
    assert float(last["sigma"]) == pytest.approx(s["sigma"].mean(), rel=1e-15)
    client = MlflowClient(tracking_uri=store)
    for name in ("sigma", "island_00_sigma", "restarts", "pop_size"):
        hist = client.get_metric_history(run_id, name)
        assert [h.step for h in hist] == [every * (k + 1) for k in range(gens // every)], name
    assert client.get_metric_history(run_id, "island_01_sigma")[-1].value == s["sigma"][1]


@pytest.mark.slow
def test_an_async_run_records_them_too(ray_local, tmp_path, monkeypatch, store):
    """``islands.mode=async`` on two Ray actors: each group's completions carry its islands'
    metrics; the last record holds both islands' final values."""
    result, run_id, rows, s = cmaes_job(
        tmp_path, monkeypatch, store, "islands.mode=async", "islands.async_budget=island", "islands.n_actors=2"
    )  # island: each island runs the generations the API run does (the shared pool's shares follow timing)
    last = rows[-1]
    for i in range(2):
        assert float(last[f"island_{i:02d}_sigma"]) == s["sigma"][i]
    assert MlflowClient(tracking_uri=store).get_metric_history(run_id, "sigma")
