"""The driver's memory stays bounded however many epochs a run has (issue 25): the loop keeps its
records and migrations in bounded logs (:class:`isles.islands.results.RecordLog`), and the job
writes every epoch to ``history.csv`` and ``migrations.csv`` as it is made."""

import csv
import itertools
import tracemalloc

import pytest
from hydra.utils import instantiate
from isles.islands.control.callbacks import Callback
from isles.islands.coordinator import Coordinator
from isles.islands.results import LOG_SAMPLE, LOG_TAIL, RecordLog

from tests.helpers import make_cfg, plain

# tiny epochs: 4 DE islands of 8 individuals in 2-D, an exchange on a ring every generation
TINY = [
    "algorithm=de",
    "problem=sphere",
    "problem.dim=2",
    "algorithm.pop_size=8",
    "islands.n=4",
    "islands.migration_interval=1",
    "topology=ring",
    "logger=none",
    "progress=false",
    "device=cpu",
]


class TracedMemory(Callback):
    """Callback: the driver's Python allocations (``tracemalloc``, started before the run) alive
    at the epochs of ``at``: ``{epoch: bytes}``."""

    def __init__(self, at: tuple):
        self.at, self.seen = at, {}

    def on_epoch(self, rec: dict) -> None:
        if rec.epoch in self.at:
            self.seen[rec.epoch] = tracemalloc.get_traced_memory()[0]


@pytest.mark.slow  # about 20 s on 2 shared cores (tracemalloc slows every allocation)
def test_driver_memory_is_bounded_over_thousands_of_epochs():
    """From epoch 1500 to epoch 4500 the loop's own allocations grow by less than 500 KB (the
    unbounded lists of before grew by about 1.8 KB an epoch: 5.5 MB here), and the run's counters
    still count every epoch and migration."""
    epochs = 4500
    cfg = plain(make_cfg(*TINY, f"generations={epochs}"))
    probe = TracedMemory(at=(1500, epochs))
    tracemalloc.start()
    try:
        result = Coordinator(cfg, instantiate(cfg["topology"]), callbacks=[probe], use_ray=False).run()
    finally:
        tracemalloc.stop()
    growth = probe.seen[epochs] - probe.seen[1500]
    assert growth < 500_000, f"the driver's allocations grew by {growth} bytes from epoch 1500 to {epochs}"
    assert result.epochs == epochs and result.history[-1].epoch == epochs and result.history[0].epoch == 1
    assert len(result.history) <= LOG_TAIL + LOG_SAMPLE
    assert [h.epoch for h in result.history[-LOG_TAIL:]] == list(range(epochs - LOG_TAIL + 1, epochs + 1))
    # a two-way ring of 4 islands: 8 transfers an epoch, from the second epoch on
    assert result.migration_count == 8 * (epochs - 1) and len(result.migrations) <= LOG_TAIL + LOG_SAMPLE
    assert result.migrations_accepted >= sum(m[3] for m in result.migrations)  # every one tallied, some kept


def test_record_log_keeps_everything_up_to_its_bound_then_a_sample_and_the_tail():
    """Every item up to ``tail + sample``; then the latest ``tail`` whole and an even sample of the
    ones before (the first kept), with the totals of every item."""
    log = RecordLog(tail=5, sample=4, tally=1)
    log.extend((i, i % 2) for i in range(9))
    assert [i for i, _ in log] == list(range(9))
    log.extend((i, i % 2) for i in range(9, 100))
    kept = [i for i, _ in log]
    assert kept[-5:] == [95, 96, 97, 98, 99] and kept[0] == 0 and len(kept) <= 9
    sampled = kept[:-5]
    assert len(sampled) >= 2 and {b - a for a, b in itertools.pairwise(sampled)} == {log.stride}  # evenly thinned
    assert log.total == 100 and log.tallied == 50
    copy = log.copy()
    copy.append((100, 1))
    assert log.total == 100 and copy.total == 101 and list(log)[-1] == (99, 1)
    assert list(RecordLog.of([(0, 1), (1, 1)], tally=1)) == [(0, 1), (1, 1)]


def test_job_writes_every_epoch_and_migration_as_it_goes(tmp_path, monkeypatch):
    """``run_job`` appends every epoch's record to ``history.csv`` and every migration to
    ``migrations.csv`` in the job's output directory, also beyond what the loop keeps."""
    from isles.app import job  # noqa: PLC0415

    monkeypatch.setattr(job, "_run_folder", lambda: str(tmp_path))  # as in a Hydra job's output folder
    epochs = LOG_TAIL + LOG_SAMPLE + 300
    result, _ = job.run_job(make_cfg(*TINY, f"generations={epochs}", "quiet=true"), use_ray=False)
    with open(tmp_path / "history.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["epoch"]) for r in rows] == list(range(1, epochs + 1))
    assert float(rows[-1]["best_f"]) == result.history[-1].best_f and len(result.history) < epochs
    with open(tmp_path / "migrations.csv") as fh:
        moves = list(csv.DictReader(fh))
    assert len(moves) == result.migration_count == 8 * (epochs - 1)
    assert sum(int(m["accepted"]) for m in moves) == result.migrations_accepted
    assert result.history_path == str(tmp_path / "history.csv")


def test_a_checkpoint_of_before_the_logs_resumes_into_bounded_logs():
    """A checkpoint saved with plain lists (before the logs were bounded) resumes into
    :class:`RecordLog` s that count what it held."""
    from isles.islands.control.recovery import LOOP_KEYS, loop_copy  # noqa: PLC0415

    saved = dict.fromkeys(LOOP_KEYS) | {
        "history": [{"epoch": 1}, {"epoch": 2}],
        "migrations": [(2, 0, 1, 1, 0.5), (2, 1, 0, 0, None)],
    }
    loop = loop_copy(saved)
    assert isinstance(loop.history, RecordLog) and [h["epoch"] for h in loop.history] == [1, 2]
    assert loop.migrations.total == 2 and loop.migrations.tallied == 1
    loop.history.append({"epoch": 3})
    assert len(saved["history"]) == 2  # a copy
