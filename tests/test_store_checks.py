"""``logger.tracking_uri`` values MLflow cannot open are one-line errors before Ray starts and
before MLflow opens a run (issue 25 §2): a path where nothing can be written, a scheme MLflow has
no store for, a ``file:`` store that MLflow 3 refuses unless ``MLFLOW_ALLOW_FILE_STORE=true``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from isles.app import job
from isles.app.job import run_job
from isles.app.tracking_server import check_store_uri

from tests.helpers import make_cfg

ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "+experiment=cmepso",
    "generations=2",
    "islands.n=2",
    "algorithm.n_particles=6",
    "progress=false",
    "device=cpu",
]


@pytest.fixture
def nothing_starts(monkeypatch):
    """Ray, the MLflow tracking process and the evolution must not start."""

    def must_not_run(*a, **k):
        raise AssertionError("Ray, MLflow or the evolution started")

    monkeypatch.setattr(job, "init_ray", must_not_run)
    monkeypatch.setattr(job.TrackingProcess, "start", must_not_run)
    monkeypatch.setattr(job.Coordinator, "run", must_not_run)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)


def refused(uri: str) -> str:
    with pytest.raises(ValueError) as err:
        run_job(make_cfg(*SMALL, f"logger.tracking_uri={uri}"), use_ray=True)
    message = str(err.value)
    assert message.startswith(f"logger.tracking_uri='{uri}': ") and "\n" not in message
    return message


def test_a_store_where_nothing_can_be_written(nothing_starts, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "file").write_text("not a folder")
    uri = f"sqlite:///{tmp_path}/a/file/as/dir/mlflow.db"
    message = refused(uri)
    assert f"nothing can be written there ({tmp_path}/a/file is a file, not a folder)" in message
    assert "allowed values are sqlite:///PATH/mlflow.db" in message
    folder_as_db = f"sqlite:///{tmp_path}/a"
    assert f"({tmp_path}/a is a folder, not a file)" in refused(folder_as_db)


def test_an_unknown_scheme(nothing_starts):
    message = refused("bogus://x")
    assert "MLflow has no tracking store for the scheme 'bogus'" in message
    assert "registry" not in message and "http(s)://HOST:PORT" in message


def test_a_file_store_needs_mlflow_allow_file_store(nothing_starts, tmp_path, monkeypatch):
    for uri in (f"file:{tmp_path}/mlruns", f"{tmp_path}/mlruns"):
        message = refused(uri)
        assert "unless MLFLOW_ALLOW_FILE_STORE=true is set" in message and "sqlite:///" in message
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow then takes it, and so does isles
    check_store_uri({"tracking_uri": f"file:{tmp_path}/mlruns"})
    check_store_uri({"tracking_uri": f"{tmp_path}/mlruns"})


def test_stores_mlflow_opens_pass(nothing_starts, tmp_path, monkeypatch):
    for uri in (
        f"sqlite:///{tmp_path}/new/folder/mlflow.db",
        "postgresql+psycopg2://u@db.example/mlflow",
        "databricks",
        None,
    ):
        check_store_uri({"tracking_uri": uri})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "bogus://y")  # named as the user set it
    with pytest.raises(ValueError, match=r"^logger.tracking_uri=null \(MLFLOW_TRACKING_URI='bogus://y'\): "):
        check_store_uri({"tracking_uri": None})


def test_as_users_type_it_one_line_and_exit_2(tmp_path):
    (tmp_path / "a").write_text("a file")
    uri = f"sqlite:///{tmp_path}/a/b/mlflow.db"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    p = subprocess.run(
        [sys.executable, "run.py", *SMALL, f"logger.tracking_uri={uri}", f"hydra.run.dir={tmp_path}/out"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert p.returncode == 2, p.stderr[-2000:]
    line = (
        f"isles: error: logger.tracking_uri='{uri}': nothing can be written there ({tmp_path}/a is a file, not a "
        "folder); allowed values are sqlite:///PATH/mlflow.db (a folder you can write), http(s)://HOST:PORT (a "
        "tracking server), postgresql://, mysql://, mssql://, databricks, or logger=none"
    )
    assert p.stderr.strip().splitlines() == [line]
    assert "best f=" not in p.stdout
