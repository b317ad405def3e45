"""Typed records (issue 26 item 2): the epoch record is an :class:`EpochRecord` with named fields
whose scalar metrics (:meth:`EpochRecord.metrics`) are ``history.csv``'s columns and the MLflow
metrics, unchanged; records pickle and cross Ray; algorithm states declare their island axis
(:meth:`IslandAlgorithm.island_axes`) and checkpoints regroup by it."""

from __future__ import annotations

import csv
import pickle
import time
from dataclasses import fields

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.coevolution.cde import CDE
from isles.algorithms.core.base import Context
from isles.algorithms.core.random import CounterRNG
from isles.algorithms.de.de import DE
from isles.algorithms.ep.fep import FEP
from isles.algorithms.ga.ga import GA
from isles.algorithms.pso.epso import EPSO
from isles.algorithms.pso.pso import PSO
from isles.app import job
from isles.app.run_files import HistoryFiles, history_header, history_row
from isles.islands.control import checkpoint
from isles.islands.control.callbacks import Callback
from isles.islands.coordinator import Coordinator
from isles.islands.results import CSV, MLFLOW, EpochRecord, epoch_record
from isles.problems.benchmarks import Sphere
from isles.problems.constraints import Evaluator
from isles.problems.minmax import SaddleP1

from tests.helpers import make_cfg, plain

#: history.csv's columns before the record was typed (app/run_files.py HISTORY_KEYS, then the
#: islands): the file's format, which the typed record keeps
CSV_COLUMNS = [
    "epoch",
    "generation",
    "wall_s",
    "evaluations",
    "best_f",
    "best_v",
    "best_feasible_f",
    "master_best_f",
    "nan_evaluations",
    "migrations_accepted",
    "us_per_generation",
    "island_00_best_f",
    "island_01_best_f",
    "island_02_best_f",
]
#: the MLflow metrics of a step before the record was typed (app/tracking.py on_epoch's list)
MLFLOW_METRICS = {
    "best_f",
    "best_v",
    "best_feasible_f",
    "evaluations",
    "evals_per_s",
    "wall_s",
    "nan_evaluations",
    "us_per_generation",
    "migrations_accepted",
    "islands_at_target",
    "payoff_evaluations",
    "master_best_f",
    "island_00_best_f",
    "island_01_best_f",
    "island_02_best_f",
}

CMEPSO = [
    "+experiment=cmepso",
    "problem=sphere",
    "problem.dim=4",
    "islands.n=3",
    "generations=6",
    "algorithm.n_particles=8",
    "plugins.0.n_particles=4",
    "islands.migration_interval=2",
    "device=cpu",
    "logger=none",
    "progress=false",
    "quiet=true",
]


def a_record(**over) -> EpochRecord:
    """An epoch record of 3 islands with a stop target, pair payoffs and a plug-in metric."""
    kw = dict(
        epoch=4,
        generation=40,
        t0=time.perf_counter() - 2.0,
        evaluations=1200,
        nan_evaluations=3,
        best_f=1.5,
        best_v=0.0,
        island_best_f=np.array([1.5, 2.0, np.inf]),
        island_best_v=np.array([0.0, 0.1, 0.0]),
        compute_s=0.02,
        epoch_generations=10,
        hits=np.array([12, -1, 30]),
        payoff_evaluations=77,
        migrations=[(4, 0, 1, 1, 1.5), (4, 1, 2, 0, 2.0)],
        plugin_metrics={"master_best_f": np.float64(1.25)},
    )
    return epoch_record(**{**kw, **over})


def same_records(a: EpochRecord, b: EpochRecord) -> None:
    """Every field of ``a`` equals ``b``'s (arrays element by element)."""
    assert type(a) is type(b) is EpochRecord
    for f in fields(EpochRecord):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y or (x != x and y != y), f.name


# -- the epoch record ----------------------------------------------------------------------------
def test_the_epoch_record_has_typed_fields():
    rec = a_record()
    assert (rec.epoch, rec.generation, rec.evaluations, rec.nan_evaluations) == (4, 40, 1200, 3)
    assert rec.wall_s >= 2.0 and rec.evals_per_s == pytest.approx(1200 / rec.wall_s)
    assert (rec.best_f, rec.best_feasible_f, rec.n_feasible_islands, rec.islands_at_target) == (1.5, 1.5, 2, 2)
    assert rec.migrations_accepted == 1 and rec.migrations == ((4, 0, 1, 1, 1.5), (4, 1, 2, 0, 2.0))
    assert rec.us_per_generation == pytest.approx(2000.0) and rec.compute_s_max == 0.02
    assert rec.payoff_evaluations == 77 and rec.plugin_metrics == {"master_best_f": 1.25}
    assert type(rec.plugin_metrics["master_best_f"]) is float  # no NumPy scalars in the files
    np.testing.assert_array_equal(rec.island_hit_generation, [12, -1, 30])
    with pytest.raises(AttributeError):  # frozen: records are never changed after they are made
        rec.best_f = 0.0
    infeasible = a_record(best_v=0.5, hits=None, payoff_evaluations=0, plugin_metrics=None)
    assert np.isnan(infeasible.best_feasible_f)
    assert infeasible.islands_at_target is infeasible.payoff_evaluations is infeasible.island_hit_generation is None


def test_metrics_are_the_csv_columns_and_mlflow_metrics_of_before():
    """The typed record yields the same names as the dict record did: history.csv's columns in
    their order, and the MLflow metrics of a step; absent optional metrics are left out."""
    rec = a_record()
    assert list(rec.metrics(CSV)) == CSV_COLUMNS
    assert set(rec.metrics(MLFLOW)) == MLFLOW_METRICS
    assert set(rec.metrics()) == set(CSV_COLUMNS) | MLFLOW_METRICS
    plain_de = a_record(hits=None, payoff_evaluations=0, plugin_metrics=None)
    assert list(plain_de.metrics(CSV)) == [c for c in CSV_COLUMNS if c != "master_best_f"]
    assert set(plain_de.metrics(MLFLOW)) == MLFLOW_METRICS - {
        "islands_at_target",
        "payoff_evaluations",
        "master_best_f",
    }
    m = rec.metrics()
    assert (m["evaluations"], m["master_best_f"], m["island_02_best_f"], m["payoff_evaluations"]) == (
        1200,
        1.25,
        np.inf,
        77,
    )
    assert history_header(rec) == CSV_COLUMNS
    assert history_row(rec, CSV_COLUMNS).split(",")[:4] == ["4", "40", repr(rec.wall_s), "1200"]
    with pytest.raises(ValueError, match="sink='json': allowed values are 'csv', 'mlflow' or None"):
        rec.metrics("json")


def test_an_epoch_record_round_trips_through_pickle():
    rec = a_record()
    back = pickle.loads(pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL))
    same_records(back, rec)
    assert back.metrics() == rec.metrics()


def test_a_run_hands_back_epoch_records_that_are_its_history_csv(tmp_path, monkeypatch):
    """A real run (the job, in this process): its result's history holds EpochRecords, and
    ``history.csv`` has the columns of before, one row per record with the record's values."""
    monkeypatch.setattr(job, "_run_folder", lambda: str(tmp_path))
    result, _ = job.run_job(make_cfg(*CMEPSO), use_ray=False)
    assert len(result.history) == result.epochs == 3
    assert all(type(h) is EpochRecord for h in result.history)
    with open(tmp_path / "history.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == CSV_COLUMNS
    for row, rec in zip(rows, result.history, strict=True):
        assert row == {k: repr(v) for k, v in rec.metrics(CSV).items()}
    assert result.history[-1].plugin_metrics["master_best_f"] >= result.best_f
    back = pickle.loads(pickle.dumps(result))  # the result too is plain data
    for a, b in zip(back.history, result.history, strict=True):
        same_records(a, b)
    np.testing.assert_array_equal(back.best_x, result.best_x)


class Collect(Callback):
    """Callback: keeps the records handed to ``on_epoch``."""

    def __init__(self):
        self.records = []

    def on_epoch(self, rec):
        self.records.append(rec)


def test_epoch_records_cross_ray(ray_local, tmp_path):
    """Every island in one Ray actor: the epoch loop runs there and its records and result come
    back through Ray (a span's summaries, booked by the driver) as EpochRecords equal to an in-process run's."""
    cfg = plain(make_cfg(*CMEPSO))
    seen, files = Collect(), HistoryFiles(str(tmp_path))

    def run(use_ray, callbacks=()):
        c = {**cfg, "islands": {**cfg["islands"], "n_actors": 1}}
        return Coordinator(
            c, instantiate(c["topology"]), [instantiate(q) for q in c["plugins"]], callbacks, use_ray=use_ray
        ).run()

    over_ray = run(True, [seen, files])
    here = run(False)
    assert all(over_ray.nodes.values())  # the one actor ran on a Ray node
    assert len(seen.records) == len(over_ray.history) == len(here.history) == 3
    for a, b, c in zip(seen.records, over_ray.history, here.history, strict=True):
        assert type(a) is type(b) is EpochRecord
        same_records(a, b)
        assert {k: v for k, v in a.metrics().items() if k not in ("wall_s", "evals_per_s", "us_per_generation")} == {
            k: v for k, v in c.metrics().items() if k not in ("wall_s", "evals_per_s", "us_per_generation")
        }
    with open(files.history.name) as fh:
        rows = list(csv.DictReader(fh))
    assert [{k: repr(v) for k, v in r.metrics(CSV).items()} for r in over_ray.history] == rows


# -- island axes ---------------------------------------------------------------------------------
class Toy:
    """A state layout unlike the default: ``T (D, I)`` has its islands on axis 1, ``table (K,)``
    is shared by every island."""

    ISLAND_AXES = {"T": 1, "table": None}
    island_axes = DE.island_axes


def toy_state(ids, D=3, N=2):
    """The toy state of islands ``ids``: every island's entries are a function of its id."""
    ids = np.asarray(ids, dtype=np.float64)
    return {
        "X": ids[:, None, None] + np.arange(N * D).reshape(1, N, D) / 10,
        "T": np.arange(D)[:, None] * 100 + ids[None, :],
        "table": np.arange(5.0),
        "nan_evals": np.int64(len(ids)),
        "generation": 7,
        "evals": 40,
    }


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        assert np.shape(a[k]) == np.shape(b[k]) and type(a[k]) is type(b[k]), k


def test_states_regroup_along_their_declared_island_axes():
    """1 group -> 2 groups -> 1: each field is split and joined along its declared axis (``T``:
    axis 1), a shared field (``table``) and the host ints stay whole, a 0-d total is summed."""
    one, two = [[0, 1, 2, 3]], [[0, 1], [2, 3]]
    whole = toy_state(one[0])
    axes = Toy().island_axes
    assert axes(whole) == {"X": 0, "T": 1, "table": None, "nan_evals": None, "generation": None, "evals": None}
    parts = checkpoint.regroup([whole], one, two, axes)
    for part, ids in zip(parts, two, strict=False):
        want = toy_state(ids)
        want["nan_evals"] = np.int64(4 if ids[0] == 0 else 0)  # the total, on the first group
        assert_same_state(part, want)
    assert_same_state(checkpoint.regroup(parts, two, one, axes)[0], whole)
    odd = checkpoint.regroup(parts, two, [[3, 0], [1, 2]], axes)  # any order of islands
    np.testing.assert_array_equal(odd[0]["T"], toy_state([3, 0])["T"])


def test_a_field_against_its_declared_axis_is_refused():
    """The default rule (island axis 0) on a field that has no island axis there: one line naming
    the field, not a silently mixed state."""
    state = toy_state([0, 1, 2, 3])
    with pytest.raises(
        ValueError,
        match=r"^state field 'T' of shape \(3, 4\): its island axis 0 has not one entry "
        r"per island of group 0 \(4 islands\); declare",
    ):
        checkpoint.regroup([state], [[0, 1, 2, 3]], [[0, 1], [2, 3]], DE().island_axes)


FAMILIES = [
    (DE, Sphere(dim=4), {"pop_size": 8}),
    (PSO, Sphere(dim=4), {"n_particles": 6}),
    (EPSO, Sphere(dim=4), {"n_particles": 6}),
    (GA, Sphere(dim=4), {}),
    (FEP, Sphere(dim=4), {"pop_size": 6}),
    (CDE, SaddleP1(), {}),
]


@pytest.mark.parametrize("cls, problem, params", FAMILIES, ids=[f[0].__name__ for f in FAMILIES])
def test_every_family_declares_the_island_axes_of_its_state(cls, problem, params):
    """Counter-based random numbers make an island's state the same whatever batch it runs in:
    a family's state of islands 0..3, regrouped by its declared axes as [0, 1] and [2, 3],
    equals the states of those batches run apart (the totals, summed)."""
    alg = cls(**params)

    def run(ids):
        ctx = Context(np, np.float64, Evaluator(problem), CounterRNG(np, 5, ids), target=1e-3)
        return alg.run(ctx, alg.track_target(ctx, alg.init(ctx)), 2)

    whole, apart = run([0, 1, 2, 3]), [run([0, 1]), run([2, 3])]
    parts = checkpoint.regroup([whole], [[0, 1, 2, 3]], [[0, 1], [2, 3]], alg.island_axes)
    for part, alone in zip(parts, apart, strict=False):
        assert_same_state(
            {k: v for k, v in part.items() if k != "nan_evals"}, {k: v for k, v in alone.items() if k != "nan_evals"}
        )
    assert parts[0]["nan_evals"] + parts[1]["nan_evals"] == apart[0]["nan_evals"] + apart[1]["nan_evals"]


class TrailDE(DE):
    """DE whose state carries a ``trail (D, I)`` of each island's best x (islands on axis 1) and a
    shared ``table (5,)``, for the resume test; a step refuses a trail of another shape."""

    ISLAND_AXES = {"trail": 1, "table": None}

    def init(self, ctx):
        s = super().init(ctx)
        s["trail"] = ctx.xp.zeros((ctx.dim, ctx.n_islands))
        s["table"] = ctx.xp.arange(5.0)
        return s

    def step(self, ctx, state):
        if state["trail"].shape != (ctx.dim, ctx.n_islands) or state["table"].shape != (5,):
            raise ValueError(f"trail {state['trail'].shape}, table {state['table'].shape}: a mixed-up state")
        s = super().step(ctx, state)
        best = self.best(s).genome[:, 0]  # (I, D)
        s["trail"] = 0.5 * state["trail"] + 0.5 * best.T + 0.0 * state["table"].sum()
        return s


TRAIL = [
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=3",
    "algorithm.pop_size=6",
    "algorithm._target_=tests.test_records.TrailDE",
    "islands.n=4",
    "islands.migration_interval=5",
    "topology=ring",
    "logger=none",
    "progress=false",
    "quiet=true",
    "device=cpu",
]


def test_a_state_with_islands_on_another_axis_resumes_on_another_grouping(tmp_path):
    """Saved by 1 group, resumed by 2 (in this process), saved again and resumed by 1: the end
    state equals an uninterrupted run's, field by field (before: ``trail (D, I)`` was cut along
    axis 0 and the resumed step refused it)."""

    def run(gens, actors, save, resume=None):
        over = [f"generations={gens}", f"islands.n_actors={actors}", "checkpoint.every=1", f"checkpoint.path={save}"]
        return job.run_job(
            make_cfg(*TRAIL, *over, *([f"checkpoint.resume={resume}"] if resume else [])), use_ray=False
        )[0]

    whole = run(30, 1, tmp_path / "whole.pkl")
    run(10, 1, tmp_path / "a.pkl")
    run(20, 2, tmp_path / "b.pkl", tmp_path / "a.pkl")
    assert checkpoint.load(tmp_path / "b.pkl")["groups"] == [[0, 1], [2, 3]]
    resumed = run(30, 1, tmp_path / "c.pkl", tmp_path / "b.pkl")
    assert resumed.best_f == whole.best_f
    np.testing.assert_array_equal(resumed.history[-1].island_best_f, whole.history[-1].island_best_f)
    end, want = checkpoint.load(tmp_path / "c.pkl"), checkpoint.load(tmp_path / "whole.pkl")
    assert end["groups"] == want["groups"] == [[0, 1, 2, 3]]
    assert want["states"][0]["trail"].shape == (3, 4) and np.abs(want["states"][0]["trail"]).sum() > 0
    assert_same_state(end["states"][0], want["states"][0])
