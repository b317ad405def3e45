"""Checkpoints refused before the run (issue 25): a resume with fewer generations than the
checkpoint has done, a ``checkpoint.path`` that cannot be written, and a ``checkpoint.resume``
that is not a whole isles checkpoint each give one line naming the field, before Ray starts and
before MLflow opens a run; a save never leaves a broken or half-written file behind."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from isles.app import errors, job
from isles.islands.control import checkpoint

from tests.helpers import interrupt_at, make_cfg, plain

ROOT = Path(__file__).resolve().parents[1]

# a small run in this process (no Ray): 100 generations of 10 epochs
SMALL = [
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "islands.n=2",
    "islands.migration_interval=10",
    "generations=100",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def nothing_starts(monkeypatch):
    """Make Ray's start and MLflow's run fail the test if the job reaches them."""

    def started(*args, **kwargs):
        raise AssertionError("Ray or MLflow started before the checkpoint was checked")

    monkeypatch.setattr(job, "init_ray", started)
    monkeypatch.setattr(job.TrackingProcess, "start", started)


def one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg and errors.is_config_error(err.value)
    return msg


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A checkpoint of ``SMALL`` at its end, generation 100 (``checkpoint.every=2``)."""
    path = tmp_path_factory.mktemp("ck") / "ck.pkl"
    result, _ = job.run_job(
        make_cfg(*SMALL, "checkpoint.every=2", f"checkpoint.path={path}", "quiet=true"), use_ray=False
    )
    assert result.generations == 100 and checkpoint.load(path)["done_gens"] == 100
    return path


def test_resume_with_fewer_generations_than_saved_is_refused(saved, monkeypatch):
    """Before: the resume with generations=30 printed the generation-100 result as its own and
    exited 0 (MLflow recording generations=30)."""
    nothing_starts(monkeypatch)
    for gens in (30, 99):
        with pytest.raises(ValueError) as err:
            job.run_job(
                make_cfg(
                    *SMALL,
                    f"checkpoint.resume={saved}",
                    f"generations={gens}",
                    "logger=mlflow",
                    f"logger.tracking_uri=sqlite:///{saved.parent}/mlflow.db",
                )
            )
        assert one_line(err) == (
            f"generations={gens}: the checkpoint (checkpoint.resume={str(saved)!r}) is at "
            "generation 100; allowed values are >= 100"
        )
    assert not (saved.parent / "mlflow.db").exists()  # no MLflow run opened
    with pytest.raises(ValueError) as err:  # a budget in evaluations: named as the user gave it
        job.run_job(make_cfg(*SMALL, f"checkpoint.resume={saved}", "stop.max_evaluations=200"))
    assert one_line(err).startswith("stop.max_evaluations=200 (a budget of ")
    assert one_line(err).endswith("is at generation 100; allowed values are budgets of >= 100 generations")
    monkeypatch.undo()
    more = job.run_job(make_cfg(*SMALL, f"checkpoint.resume={saved}", "generations=120", "quiet=true"), use_ray=False)[
        0
    ]
    assert more.generations == 120  # a larger budget goes on


def test_an_interrupted_run_resumed_with_fewer_generations_than_it_reached(tmp_path, monkeypatch):
    """The checkpoint an interrupt leaves (its last snapshot) bounds the resume's budget too."""
    interrupt_at(monkeypatch, 7)
    path = tmp_path / "ck.pkl"
    with pytest.raises(SystemExit):
        job.run_job(make_cfg(*SMALL, "islands.snapshot_every=1", f"checkpoint.path={path}"), use_ray=False)
    monkeypatch.undo()
    done = checkpoint.load(path)["done_gens"]
    assert 10 <= done <= 70  # the last snapshot before the interrupt (in this process: at a batch's end)
    nothing_starts(monkeypatch)
    with pytest.raises(ValueError) as err:
        job.run_job(make_cfg(*SMALL, f"checkpoint.resume={path}", f"generations={done - 5}"))
    assert one_line(err).startswith(f"generations={done - 5}: the checkpoint") and one_line(err).endswith(
        f"is at generation {done}; allowed values are >= {done}"
    )


def test_generations_done_of_an_async_checkpoint_is_the_most_any_group_did():
    assert checkpoint.generations_done({"mode": "async", "async": {"gens": [60, 70, 50]}}) == 70
    assert checkpoint.generations_done({"done_gens": 40}) == 40


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.mkdir(), "is a folder; allowed values are file paths in a folder you can write"),
        (lambda p: None, None),  # written by the save
    ],
)
def test_checkpoint_path_is_a_folder(tmp_path, make, says):
    path = tmp_path / "ck.pkl"
    make(path)
    if says is None:
        checkpoint.check_path(path)
        return
    with pytest.raises(ValueError) as err:
        checkpoint.check_path(path)
    assert one_line(err) == f"checkpoint.path={str(path)!r}: {says}"


def test_unwritable_checkpoint_path_is_refused_before_anything_starts(tmp_path, monkeypatch):
    """Before: the run evolved and died at its first save (``NotADirectoryError``), exit 1."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    nothing_starts(monkeypatch)
    for path, says in [
        (blocker / "sub" / "ck.pkl", f"{str(blocker)!r} is a file, not a folder"),
        (Path("/sys/isles-ck.pkl"), "cannot write in '/sys'"),
    ]:
        if path.parent == Path("/sys") and os.access("/sys", os.W_OK) and _writable("/sys"):
            continue  # a machine whose /sys takes files: nothing unwritable to try there
        for every in (2, 0):  # 0: an interrupt would write there
            with pytest.raises(ValueError) as err:
                job.run_job(make_cfg(*SMALL, f"checkpoint.every={every}", f"checkpoint.path={path}"))
            assert one_line(err).startswith(f"checkpoint.path={str(path)!r}: {says}")
            assert one_line(err).endswith("allowed values are file paths in a folder you can write")


def _writable(folder: str) -> bool:
    try:
        with open(os.path.join(folder, ".isles-probe"), "wb"):
            pass
        os.unlink(os.path.join(folder, ".isles-probe"))
        return True
    except OSError:
        return False


def _cases(saved: Path, tmp: Path) -> list:
    """(file, what the refusal says) for files that are not a whole isles checkpoint."""
    data = saved.read_bytes()
    files = {
        "truncated.pkl": (data[: len(data) // 2], "truncated (the file ends before the checkpoint does)"),
        "cut-early.pkl": (data[:40], "truncated (the file ends before the checkpoint does)"),
        "empty.pkl": (b"", "an empty file, not an isles checkpoint"),
        "notes.txt": (b"hello, this is not a pickle\n", "not an isles checkpoint (not a pickle file)"),
        "list.pkl": (pickle.dumps([1, 2, 3]), "not an isles checkpoint (a pickle of list)"),
        "dict.pkl": (pickle.dumps({"a": 1}), "not an isles checkpoint (a pickle of dict)"),
    }
    out = []
    for name, (content, says) in files.items():
        (tmp / name).write_bytes(content)
        out.append((tmp / name, says))
    out.append((tmp, "is a folder, not an isles checkpoint"))
    out.append((tmp / "missing.pkl", "no such file"))
    return out


def test_resume_from_a_broken_or_foreign_file_is_one_line_before_anything_starts(saved, tmp_path, monkeypatch):
    """Before: ``UnpicklingError``/``EOFError`` reported as a crash inside isles (exit 1)."""
    nothing_starts(monkeypatch)
    for path, says in _cases(saved, tmp_path):
        with pytest.raises(ValueError) as err:
            job.run_job(make_cfg(*SMALL, f"checkpoint.resume={path}"))
        assert one_line(err).startswith(f"checkpoint.resume={str(path)!r}: {says}"), (path, str(err.value))


def test_cli_exits_2_with_one_line_for_a_truncated_resume_and_an_unwritable_path(saved, tmp_path):
    """What the user sees: ``isles: error: ...`` alone on stderr, exit status 2."""
    cut = tmp_path / "cut.pkl"
    cut.write_bytes(saved.read_bytes()[:100])
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for override, line in [
        (f"checkpoint.resume={cut}", f"isles: error: checkpoint.resume={str(cut)!r}: truncated"),
        (f"checkpoint.path={blocker}/ck.pkl", f"isles: error: checkpoint.path='{blocker}/ck.pkl': "),
    ]:
        p = subprocess.run(
            [
                sys.executable,
                str(ROOT / "run.py"),
                *SMALL,
                "checkpoint.every=2",
                override,
                f"hydra.run.dir={tmp_path}/out",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert p.returncode == 2, p.stderr[-2000:]
        assert p.stderr.strip().startswith(line) and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_failed_save_keeps_the_previous_checkpoint_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.pkl"
    checkpoint.save(path, {"done_gens": 10, "note": "first"})

    def dump_half(obj, fh, protocol=None):  # the save is cut off half-way (a full disk, a signal)
        fh.write(pickle.dumps(obj, protocol=protocol)[:20])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.pickle, "dump", dump_half)
    with pytest.raises(OSError):
        checkpoint.save(path, {"done_gens": 20, "note": "second"})
    monkeypatch.undo()
    assert checkpoint.load(path)["note"] == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.pkl"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_checkpoint_saved_before_async_budget_existed_resumes_as_it_ran(mode):
    """A checkpoint written before ``islands.async_budget`` existed has no such key: a sync run's
    resumes whatever the field says (sync runs do not use the pool), an async one's resumes with
    ``island`` (how async runs spent their budget then) and is refused with the new default
    ``shared``, naming the field and both values."""
    from isles.islands.control.recovery import check_resumable, resumable_config  # noqa: PLC0415

    def cfg(*over):
        return plain(make_cfg("+experiment=de_islands", "device=cpu", f"islands.mode={mode}", *over))

    saved = resumable_config(cfg("islands.async_budget=island"))
    saved.pop("islands.async_budget", None)  # as an older release wrote it
    data = {"config": saved, "done_gens": 0}
    check_resumable(data, cfg("islands.async_budget=island"), "old.pkl")
    if mode == "sync":
        check_resumable(data, cfg(), "old.pkl")
    else:
        with pytest.raises(ValueError, match=r"islands\.async_budget: saved 'island', now 'shared'"):
            check_resumable(data, cfg(), "old.pkl")


# -- a run stopped inside an epoch (issue 34) ----------------------------------------------------
#: SMALL on Rastrigin (a landscape whose runs part ways), 5 generations an epoch: 2 islands of 8, so
#: a budget of 16 + 16 g evaluations buys g generations
CUT = [*(a for a in SMALL if a not in ("problem=sphere", "islands.migration_interval=10")), "problem=rastrigin"]
CUT += ["islands.migration_interval=5", "quiet=true"]


def _run(*over):
    return job.run_job(make_cfg(*CUT, *over), use_ray=False)[0]


def assert_same_run(resumed, whole):
    """The resumed run is the uninterrupted one: its result, each island's best, every migration and
    the epochs' generations."""
    assert (resumed.best_f, resumed.generations, resumed.evaluations) == (
        whole.best_f,
        whole.generations,
        whole.evaluations,
    )
    np.testing.assert_array_equal(resumed.best_x, whole.best_x)
    np.testing.assert_array_equal(resumed.history[-1].island_best_f, whole.history[-1].island_best_f)
    assert list(resumed.migrations) == list(whole.migrations)
    assert [h.generation for h in resumed.history] == [h.generation for h in whole.history]


@pytest.mark.parametrize("n_actors", [1, 2])
@pytest.mark.parametrize(
    "stop, more, whole_gens",
    [
        ("generations=37", "generations=75", 35),  # a generation budget off the epochs' grid
        ("stop.max_evaluations=600", "stop.max_evaluations=1210", 35),  # 37 and 75 generations
        ("generations=3", "generations=24", 0),  # shorter than one epoch
    ],
)
def test_a_run_stopped_inside_an_epoch_resumes_as_the_uninterrupted_run(tmp_path, n_actors, stop, more, whole_gens):
    """Before: the final checkpoint held the cut-short last epoch's state, and the resume started its
    epochs there (generation 37, 42, ...: migrations 2 generations off the uninterrupted run's, a
    migration at 37 that it never makes); the run on 1200 evaluations ended on another best. Now the
    final checkpoint is the last whole epoch's, and the resume runs the cut-short epoch again whole."""
    path = tmp_path / "ck.pkl"
    over = (f"islands.n_actors={n_actors}",)
    whole = _run(*over, more)
    stopped = _run(*over, stop, "checkpoint.every=2", f"checkpoint.path={path}")
    assert stopped.generations % 5  # stopped inside an epoch
    assert checkpoint.load(path)["done_gens"] == whole_gens
    assert_same_run(_run(*over, more, f"checkpoint.resume={path}"), whole)
    again = _run(*over, stop, f"checkpoint.resume={path}")  # resumed to where it stopped: the stopped run
    assert (again.best_f, again.generations) == (stopped.best_f, stopped.generations)


def test_an_interrupt_after_a_cut_short_epoch_resumes_as_the_uninterrupted_run(tmp_path, monkeypatch):
    """A snapshot (what an interrupt saves) is never taken after a last epoch cut short either: Ctrl-C
    as the run ends (while its actors are released, the callbacks' ``on_end``) saves the last whole
    epoch's (two groups: their summaries carry a snapshot after every epoch of a span)."""
    from isles.islands.control.callbacks import Monitors  # noqa: PLC0415

    def interrupted(self, result):
        raise KeyboardInterrupt

    path = tmp_path / "ck.pkl"
    whole = _run("generations=40", "islands.n_actors=2")
    monkeypatch.setattr(Monitors, "ended", interrupted)
    with pytest.raises(SystemExit):
        _run("generations=37", "islands.n_actors=2", "islands.snapshot_every=1", f"checkpoint.path={path}")
    monkeypatch.undo()
    assert checkpoint.load(path)["done_gens"] == 35  # before: 37
    assert_same_run(_run("generations=40", "islands.n_actors=2", f"checkpoint.resume={path}"), whole)


def test_a_checkpoint_saved_inside_an_epoch_by_an_earlier_isles_is_refused(saved, tmp_path, monkeypatch):
    """Such a checkpoint (its run's final one, of a last epoch cut short) would resume off the run's
    epochs: one line, before anything starts."""
    data = checkpoint.load(saved)
    path = tmp_path / "old.pkl"
    checkpoint.save(path, {**{k: v for k, v in data.items() if k != "version"}, "done_gens": 95})
    nothing_starts(monkeypatch)
    with pytest.raises(ValueError) as err:
        job.run_job(make_cfg(*SMALL, f"checkpoint.resume={path}", "generations=120"))
    assert one_line(err).startswith(
        f"checkpoint.resume={str(path)!r}: saved at generation 95, inside epoch 10 (islands.migration_interval=10)"
    )


@pytest.mark.parametrize("actors", [["islands.n_actors=1"], []])  # []: this machine's default grouping (1 actor)
def test_an_async_resume_on_another_grouping_is_refused_before_anything_starts(tmp_path, monkeypatch, actors):
    """Before: refused only once Ray had started and an MLflow run had opened (a FAILED run with no
    rows, 18.6 s on one H200). An async checkpoint's groups ran different generations: it resumes on
    the grouping it was saved with only."""
    from isles.islands.control.recovery import resumable_config  # noqa: PLC0415

    run = [*SMALL, "islands.mode=async"]
    path = tmp_path / "async.pkl"
    saved = job.prepare(make_cfg(*run, "islands.n_actors=2")).plain
    gens = {"gens": [20, 20], "epochs": [2, 2], "done": 20}
    data = {"mode": "async", "epoch": 4, "groups": [[0], [1]], "config": resumable_config(saved), "async": gens}
    checkpoint.save(path, data)
    nothing_starts(monkeypatch)
    store = f"logger.tracking_uri=sqlite:///{tmp_path}/mlflow.db"
    with pytest.raises(ValueError) as err:
        job.run_job(make_cfg(*run, *actors, f"checkpoint.resume={path}", "logger=mlflow", store))
    assert one_line(err) == (
        f"checkpoint.resume={str(path)!r}: an async run resumes with the grouping it was saved with: "
        "islands.n_actors=2 (now 1); allowed value here is islands.n_actors=2"
    )
    assert not (tmp_path / "mlflow.db").exists()  # no MLflow run opened
    with pytest.raises(AssertionError, match="Ray or MLflow started"):  # the saved grouping passes the check
        job.run_job(make_cfg(*run, "islands.n_actors=2", f"checkpoint.resume={path}", "logger=mlflow", store))


def test_a_changed_field_is_named_with_the_override_that_gives_it_back():
    """The refusal names each changed field with both values, and the overrides that resume the saved run."""
    from isles.islands.control.recovery import check_resumable, resumable_config  # noqa: PLC0415

    def cfg(*over):
        return plain(make_cfg("+experiment=de_islands", "device=cpu", *over))

    data = {"config": resumable_config(cfg("seed=1", "algorithm.F=0.5")), "done_gens": 0}
    with pytest.raises(ValueError) as err:
        check_resumable(data, cfg("seed=5", "algorithm.F=0.7"), "ck.pkl")
    assert one_line(err) == (
        "checkpoint.resume='ck.pkl': the config differs from the saved run (algorithm.F: saved 0.5, now 0.7; "
        "seed: saved 1, now 5); resume with the saved values (algorithm.F=0.5 seed=1), or start a new run"
    )
