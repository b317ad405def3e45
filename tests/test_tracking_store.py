"""The local MLflow store (issue 25): runs started at once in a folder without ``mlflow.db`` all
get their records, and the store they leave opens for the next run.

Each process does what a run's tracking process does (:meth:`isles.app.tracking.MlflowTracker.start`,
then ``end``); they wait on a barrier so that they open the store at the same moment, as the jobs
of a parallel sweep or two terminals do. Without the lock of
:func:`isles.app.tracking.prepare_sqlite_store`, MLflow's schema creation races with itself
(``duplicate column name: step``, ``table ... already exists``) and runs are lost.
"""
import multiprocessing as mp
import traceback

import pytest
from mlflow.tracking import MlflowClient

from isles.app.tracking import MlflowTracker

# slow: each repetition creates a fresh store (MLflow's migrations take seconds)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

PROCESSES = 4
REPEATS = 3


def _open_and_log(uri: str, seed: int, barrier, results) -> None:
    """One run's tracking: open the store and the run once every process is ready, log, close."""
    try:
        barrier.wait(timeout=120)
        tracker = MlflowTracker({"tracking_uri": uri, "experiment_name": "race"}, {"seed": seed},
                                f"seed: {seed}\n", None)
        run_id = tracker.start()
        tracker._client.log_metric(run_id, "seed", float(seed))
        tracker.end("FINISHED")
        results.put((seed, run_id, None))
    except BaseException:  # noqa: BLE001  (reported to the test)
        results.put((seed, None, traceback.format_exc(limit=3)[-600:]))


def test_runs_started_at_once_in_a_fresh_folder_are_all_recorded(tmp_path):
    ctx = mp.get_context("fork")  # MLflow imported once, here; the processes start at the same moment
    for repeat in range(REPEATS):
        uri = f"sqlite:///{tmp_path}/fresh{repeat}/mlflow.db"
        barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
        procs = [ctx.Process(target=_open_and_log, args=(uri, seed, barrier, results)) for seed in range(PROCESSES)]
        for p in procs:
            p.start()
        got = [results.get(timeout=240) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        errors = [err for _, _, err in got if err]
        assert not errors, f"repeat {repeat}: {len(errors)} of {PROCESSES} runs lost:\n" + "\n".join(errors)
        client = MlflowClient(tracking_uri=uri)
        runs = client.search_runs([client.get_experiment_by_name("race").experiment_id])
        assert sorted(int(r.data.metrics["seed"]) for r in runs) == list(range(PROCESSES))
        assert {r.info.run_id for r in runs} == {run_id for _, run_id, _ in got}
        assert all(r.info.status == "FINISHED" for r in runs)
        # the store is whole: a later run opens it and is recorded
        later = MlflowTracker({"tracking_uri": uri, "experiment_name": "race"}, {"seed": 99}, "seed: 99\n", None)
        later_id = later.start()
        later.end("FINISHED")
        assert client.get_run(later_id).info.status == "FINISHED"
