"""Every run writes ``best_solution.json`` into its output folder, with or without MLflow, and
``python -m isles show PATH`` prints it (issue 25): the result line prints 6 variables to 10
digits, the file holds every variable at full precision."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from isles.app import job
from isles.app.job import run_job
from mlflow.tracking import MlflowClient
from rich.console import Console

from isles.show import main as show_main
from tests.helpers import make_cfg
from tests.test_failure_reporting import USER_MINMAX

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROOT = Path(__file__).resolve().parents[1]

#: a 20-variable answer: more than the result line's 6 variables
DIM20 = (
    "algorithm=de",
    "problem=sphere",
    "problem.dim=20",
    "algorithm.pop_size=8",
    "islands.n=2",
    "generations=5",
    "device=cpu",
    "progress=false",
    "logger=none",
)


def _in_folder(monkeypatch, folder: Path) -> None:
    """Run ``run_job`` as in a Hydra job whose output folder is ``folder``."""
    monkeypatch.setattr(job, "_run_folder", lambda: str(folder))


def test_a_run_without_mlflow_writes_the_full_best_x(tmp_path, monkeypatch, capsys):
    """``logger=none``: ``best_solution.json`` holds all 20 variables of the result, bit for bit,
    with f, g, feasible, evaluations, seed and the config; the result line names the file."""
    _in_folder(monkeypatch, tmp_path)
    result, run_id = run_job(make_cfg(*DIM20, "seed=3"), use_ray=False)
    assert run_id is None
    best = json.loads((tmp_path / "best_solution.json").read_text())
    assert best["x"] == [float(v) for v in result.best_x] and len(best["x"]) == 20  # json keeps every bit
    assert best["f"] == pytest.approx(result.best_f, rel=1e-12) and best["g"] == [] and best["feasible"] is True
    assert best["evaluations"] == result.evaluations and best["seed"] == 3
    assert best["config"]["problem"]["dim"] == 20 and best["config"]["logger"]["enabled"] is False
    assert result.solution_path == str(tmp_path / "best_solution.json")
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("isles: best f=")]
    assert f" solution={tmp_path / 'best_solution.json'}" in line and ", ...]" in line


def test_the_file_is_written_when_the_report_cannot_evaluate_x(tmp_path, monkeypatch):
    """A min-max problem whose worst case is unknown: the file keeps x and the run's f, and marks
    what was not computed (as MLflow's record does)."""
    _in_folder(monkeypatch, tmp_path)
    result, _ = run_job(make_cfg(*USER_MINMAX, "logger=none"), use_ray=False)
    best = json.loads((tmp_path / "best_solution.json").read_text())
    assert best["x"] == [float(v) for v in result.best_x] and best["run_best_f"] == result.best_f
    assert best["f"] is None and best["feasible"] is None and "NotImplementedError" in best["not_computed"]


@pytest.mark.slow  # MLflow's tracking process: about 10 s
def test_mlflow_logs_the_same_record(tmp_path, monkeypatch, store):
    """MLflow's ``best_solution.json`` artifact is the record written into the output folder, and
    its ``history.csv`` the file appended as the epochs were made."""
    _in_folder(monkeypatch, tmp_path / "out")
    _, run_id = run_job(
        make_cfg(*DIM20[:-1], "islands.migration_interval=1", f"logger.tracking_uri={store}", "logger.wait=true"),
        use_ray=False,
    )
    client = MlflowClient(store)
    logged = json.loads(Path(client.download_artifacts(run_id, "best_solution.json")).read_text())
    assert logged == json.loads((tmp_path / "out" / "best_solution.json").read_text())
    history = Path(client.download_artifacts(run_id, "history.csv")).read_text()
    assert (
        history == (tmp_path / "out" / "history.csv").read_text() and history.count("\n") == 1 + 5
    )  # header, 5 epochs


def test_show_prints_every_variable_at_full_precision(tmp_path, monkeypatch):
    """``isles show`` takes the file or its folder, prints all of x (``repr``: round-trip exact),
    f and the marks; a folder without the file is one line and exit 2."""
    _in_folder(monkeypatch, tmp_path)
    result, _ = run_job(make_cfg(*DIM20, "quiet=true"), use_ray=False)
    for path in (tmp_path, tmp_path / "best_solution.json"):
        console = Console(record=True, width=200)
        assert show_main([str(path)], console=console) == 0
        text = console.export_text()
        for i, v in enumerate(result.best_x):
            assert f"x{i + 1} " in text and repr(float(v)) in text
        assert repr(json.loads((tmp_path / "best_solution.json").read_text())["f"]) in text


def test_show_refuses_a_folder_without_the_file(tmp_path, capsys):
    assert show_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("isles: error: show ") and "holds no best_solution.json" in err and "\n" not in err


def test_the_command_line_names_the_file_and_shows_it(tmp_path):
    """The real command: ``run.py ... logger=none`` writes the file into its Hydra folder and names
    it on the result line; ``python -m isles show FOLDER`` prints the full x."""
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "run.py", *DIM20, f"hydra.run.dir={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("isles: best f=")]
    assert line.endswith(f" solution={out / 'best_solution.json'}")
    best = json.loads((out / "best_solution.json").read_text())
    assert len(best["x"]) == 20 and (out / "history.csv").is_file()
    shown = subprocess.run(
        [sys.executable, "-m", "isles", "show", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert all(repr(v) in shown.stdout for v in best["x"]) and "x20" in shown.stdout


def test_show_marks_equality_constraints(tmp_path):
    """An equality constraint's row says ``h = 0`` (its value is h), with the tolerance."""
    record = {
        "x": [0.1, 0.2],
        "f": 1.5,
        "g": [-0.5, 3e-5],
        "g_type": ["inequality", "equality"],
        "eq_tol": 1e-4,
        "feasible": True,
        "evaluations": 10,
        "seed": 0,
        "config": None,
    }
    (tmp_path / "best_solution.json").write_text(json.dumps(record))
    console = Console(record=True, width=200)
    assert show_main([str(tmp_path)], console=console) == 0
    lines = console.export_text().splitlines()
    assert any("g2 (h = 0)" in ln and "3e-05" in ln for ln in lines)
    assert any("g1 " in ln and "-0.5" in ln for ln in lines) and any("eq_tol" in ln and "0.0001" in ln for ln in lines)
