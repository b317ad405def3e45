"""A job's callbacks are the config group ``callbacks`` (conf/callbacks/, app/callbacks.py), typed by
:class:`isles.islands.control.callbacks.Callback`: the default's built-ins in order, a user's own
through ``_target_``, one that is left out, and one-line errors before the run for a bad one."""

import json
from pathlib import Path

import pytest
from isles.app import job
from isles.app.callbacks import RunContext, build_callbacks
from isles.app.progress import ConsoleProgress
from isles.app.run_files import HistoryFiles, SolutionFile
from isles.islands.control.callbacks import Callback, Monitors

from tests.helpers import make_cfg

TINY = ("algorithm=de", "problem=sphere", "problem.dim=4", "algorithm.pop_size=8", "islands.n=2", "generations=6")
TINY += ("islands.migration_interval=2", "device=cpu", "logger=none")


class Seen(Callback):
    """A user's callback: records the calls it gets (the epochs by number) in ``seen_TAG.json`` in the
    run's output folder at the end (or in :attr:`seen` without one)."""

    def __init__(self, run, tag: str = "mine"):
        self.tag, self.folder, self.seen = tag, run.folder, []

    def on_start(self, info):
        self.seen.append("start")

    def on_epoch(self, record):
        self.seen.append(record.epoch)

    def on_end(self, result):
        self.seen.append(["end", result.solution is not None])  # the built-in SolutionFile ran first

    def on_exit(self):
        self.seen.append("exit")
        if self.folder:
            Path(self.folder, f"seen_{self.tag}.json").write_text(json.dumps(self.seen))


class OnlyEpochs:
    """Not a Callback: on_epoch alone."""

    def __init__(self, run):
        pass

    def on_epoch(self, record):
        pass


def only_epochs(run):
    """A factory of a callback that is not one."""
    return OnlyEpochs(run)


def built(*overrides, folder="/tmp/out"):
    cfg = job.prepare(make_cfg(*TINY, *overrides)).plain  # validated: a mixed run's groups as the job has them
    return build_callbacks(cfg.get("callbacks"), RunContext(None, cfg, folder))


def test_the_default_group_builds_the_built_ins_in_order_and_leaves_out_what_the_run_has_no_use_for():
    assert [type(cb) for cb in built()] == [SolutionFile, HistoryFiles, ConsoleProgress]
    assert [type(cb) for cb in built("progress=false", folder=None)] == [SolutionFile]
    assert [type(cb) for cb in built("~callbacks.history")] == [SolutionFile, ConsoleProgress]
    mixed = built("+experiment=mixed_islands", "problem.dim=4")
    assert [type(cb) for cb in mixed] == [SolutionFile, HistoryFiles, ConsoleProgress]  # group metrics: records'
    assert all(isinstance(cb, Callback) for cb in mixed)


def test_a_user_callback_named_by_target_runs_after_the_built_ins(tmp_path, monkeypatch):
    monkeypatch.setattr(job, "_run_folder", lambda: str(tmp_path))
    cfg = make_cfg(
        *TINY, "progress=false", "+callbacks.mine._target_=tests.test_callbacks.Seen", "+callbacks.mine.tag=t"
    )
    result, _ = job.run_job(cfg, use_ray=False)
    assert json.loads((tmp_path / "seen_t.json").read_text()) == ["start", 1, 2, 3, ["end", True], "exit"]
    assert result.history_path == str(tmp_path / "history.csv")  # the default's files are still written
    assert (tmp_path / "best_solution.json").is_file()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "+callbacks.mine._target_=tests.test_callbacks.OnlyEpochs",
            r"^callbacks.mine._target_='tests.test_callbacks.OnlyEpochs': tests.test_callbacks.OnlyEpochs is not "
            r"a callback: it lacks on_start, on_restart, on_end, on_exit \(subclass",
        ),
        ("+callbacks.mine._target_=tests.no_such_module.C", r"^callbacks.mine._target_='tests.no_such_module.C': "),
        ("+callbacks.mine.tag=t", r"^callbacks.mine=\{'tag': 't'\}: allowed values are nodes with _target_$"),
    ],
)
def test_a_bad_callback_is_one_line_naming_it_before_the_run(monkeypatch, override, message):
    monkeypatch.setattr(job, "choose", None)  # never reached: the placement's probe runs the problem
    monkeypatch.setattr(job, "Coordinator", None)
    with pytest.raises(ValueError, match=message):
        job.run_job(make_cfg(*TINY, override))


def test_a_factory_s_return_that_is_not_a_callback_is_one_line_when_built():
    with pytest.raises(
        ValueError, match=r"^callbacks.mine._target_='tests.test_callbacks.only_epochs': [a-z_.]*OnlyEpochs is not"
    ):
        built("+callbacks.mine._target_=tests.test_callbacks.only_epochs")


def test_the_monitors_take_callbacks_only():
    with pytest.raises(
        TypeError,
        match=r"^OnlyEpochs: [a-z_.]*OnlyEpochs is not a callback: it lacks on_start, on_restart, on_end, on_exit",
    ):
        Monitors([OnlyEpochs(None)])
    seen = Seen(RunContext(None, {}, None), tag="m")
    monitors = Monitors([seen, type("Bare", (Callback,), {})()])  # a bare subclass: a no-op for each method
    monitors.restarted({0: {}})
    monitors.exited()
    assert seen.seen == ["exit"]
