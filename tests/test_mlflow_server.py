"""MLflow as teams run it (issue 10, section 3): a real ``mlflow server`` (SQLite backend, artifacts
proxied into a temporary directory, 127.0.0.1, a free port); a job logged to it and read back
through ``MlflowClient`` (parameters, metric history, artifacts, system metrics); a server that
does not answer stops the job before Ray or evolution starts, or, when asked, the run falls back
to the local store; a Hydra multirun nests its jobs under one parent run, which
``benchmarks/quality_table.py`` reads back.

The server takes 10-20 s to start on a loaded 2-core machine; it starts with the module's first
test and the tests that do not need it run first.
"""

import json
import os
import re
import runpy
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from isles.app import job
from isles.app.job import run_job
from isles.app.sweep_runs import experiment_id, find_or_create_parent
from mlflow.tracking import MlflowClient

from tests.helpers import make_cfg

# slow: a real MLflow server (CI runs them; the quick run -m "not slow" does not)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
RESULT = re.compile(r"^isles: best f=(\S+) .* mlflow_run=(\w+)$", re.M)
SMALL = [
    "+experiment=cmepso",
    "generations=20",
    "islands.n=2",
    "algorithm.n_particles=10",
    "progress=false",
    "device=cpu",
]


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env() -> dict:
    """This environment without a tracking URI of its own (the tests name theirs)."""
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


@pytest.fixture(scope="module", autouse=True)
def server_process(tmp_path_factory):
    """``mlflow server`` as a team runs it, started when the module starts (it takes seconds),
    killed with its workers (its own process group) at the end; yields ``(url, process, dir)``."""
    d = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    env = {**clean_env(), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job-runner processes
    log = open(d / "server.log", "w")  # noqa: SIM115  (closed in the finalizer)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{d}/mlflow.db",
            "--artifacts-destination",
            str(d / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}", proc, d
    finally:
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        log.close()


@pytest.fixture(scope="module")
def mlflow_server(server_process):
    """The server's URL, once ``/health`` answers (up to 180 s)."""
    url, proc, d = server_process
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited ({proc.returncode}): {(d / 'server.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return url
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"mlflow server did not answer within 180 s: {(d / 'server.log').read_text()[-2000:]}")


def run_cli(*args, cwd=ROOT, timeout=300):
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )


# -- no server needed: these run while the server starts --------------------------------------


def test_unreachable_server_fails_before_ray_and_evolution(monkeypatch, tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"

    def must_not_run(*a, **k):
        raise AssertionError("Ray or the evolution started")

    monkeypatch.setattr(job, "init_ray", must_not_run)
    monkeypatch.setattr(job.Coordinator, "run", must_not_run)
    with pytest.raises(ValueError) as err:
        run_job(make_cfg(*SMALL, f"logger.tracking_uri={uri}"), use_ray=True)
    assert str(err.value).startswith(f"logger.tracking_uri='{uri}': no MLflow tracking server answers there")
    assert "logger.fallback_local=true" in str(err.value) and "\n" not in str(err.value)
    # as users type it: one line, exit status 2
    p = run_cli(*SMALL, f"logger.tracking_uri={uri}", f"hydra.run.dir={tmp_path}")
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [f"isles: error: {err.value}"]


def test_fallback_local_logs_to_the_local_store(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    uri = f"http://127.0.0.1:{free_port()}"
    result, run_id = run_job(make_cfg(*SMALL, f"logger.tracking_uri={uri}", "logger.fallback_local=true"))
    local = f"sqlite:///{tmp_path}/mlflow.db"
    (line,) = [x for x in capfd.readouterr().err.splitlines() if "does not answer" in x]
    assert line.startswith(f"isles: the MLflow server {uri} does not answer (")
    assert line.endswith(f"this run goes to the local store {local} (logger.fallback_local=true)")
    run = MlflowClient(tracking_uri=local).get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["final_best_f"] == pytest.approx(result.best_f, rel=1e-12)
    assert run.data.params["logger.tracking_uri"] == local


def test_bad_logger_values_are_one_line_errors():
    with pytest.raises(Exception, match="logger.system_metrics"):
        make_cfg(*SMALL, "logger.system_metrics=maybe")
    with pytest.raises(ValueError, match=r"^logger.system_metrics_interval=0.0: allowed values are numbers > 0$"):
        job.validate(job.OmegaConf.to_container(make_cfg(*SMALL, "logger.system_metrics_interval=0"), resolve=True))


# -- against the server: one Hydra multirun of two jobs, as users type it -------------------------


@pytest.fixture(scope="module")
def sweep(mlflow_server, tmp_path_factory):
    """``python run.py -m ... seed=0,1`` logged to the server, with system metrics every 0.1 s;
    returns ``(client, sweep dir, {run id: printed best f})``."""
    sweep_dir = tmp_path_factory.mktemp("sweep") / "multirun"
    p = run_cli(
        "-m",
        *SMALL,
        f"logger.tracking_uri={mlflow_server}",
        "logger.experiment_name=sweep-test",
        "logger.system_metrics=true",
        "logger.system_metrics_interval=0.1",
        "logger.wait=true",  # each job waits for its MLflow record (read back below)
        "seed=0,1",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    printed = {run_id: float(f) for f, run_id in RESULT.findall(p.stdout)}
    assert len(printed) == 2, p.stdout[-3000:]
    assert "View run" not in p.stdout and "View run" in p.stderr  # MLflow's own links: stderr
    return MlflowClient(tracking_uri=mlflow_server), sweep_dir, printed


def test_run_on_the_server_reads_back(sweep, server_process):
    client, _, printed = sweep
    for run_id, printed_f in printed.items():
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        assert client.get_experiment(run.info.experiment_id).name == "sweep-test"
        p = run.data.params
        assert (p["islands.n"], p["algorithm.n_particles"], p["generations"]) == ("2", "10", "20")
        assert p["problem._target_"] == "isles.problems.engineering.WeldedBeam"
        final_f = run.data.metrics["final_best_f"]
        assert f"{final_f:.10g}" == f"{printed_f:.10g}"  # what the job printed
        history = client.get_metric_history(run_id, "best_f")
        assert [h.step for h in history] == list(range(1, 21))  # one step per generation (interval 1)
        assert history[-1].value == pytest.approx(final_f, rel=1e-9)
        assert all(
            b.value <= a.value for a, b in zip(history, history[1:], strict=False)
        )  # the run's best never worsens
        # artifacts go through the server (proxied) into its artifact directory
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")
        assert {"config.yaml", "convergence.png", "best_solution.json", "history.csv"} <= {
            a.path for a in client.list_artifacts(run_id)
        }
        best = json.loads(Path(client.download_artifacts(run_id, "best_solution.json")).read_text())
        assert best["f"] == pytest.approx(final_f, rel=1e-12) and len(best["x"]) == 4 and best["feasible"]
        rows = Path(client.download_artifacts(run_id, "history.csv")).read_text().splitlines()
        column = rows[0].split(",").index("best_f")
        assert len(rows) == 21 and float(rows[-1].split(",")[column]) == pytest.approx(final_f, rel=1e-12)
    stored = list((server_process[2] / "artifacts").rglob("convergence.png"))
    assert len(stored) == 2 and all(f.stat().st_size > 1000 for f in stored)


def test_system_metrics_are_logged(sweep):
    client, _, printed = sweep
    for run_id in printed:
        cpu = client.get_metric_history(run_id, "system/cpu_utilization_percentage")
        memory = client.get_metric_history(run_id, "system/system_memory_usage_megabytes")
        assert cpu and memory, sorted(client.get_run(run_id).data.metrics)
        assert all(0 <= m.value <= 100 for m in cpu) and all(m.value > 0 for m in memory)
        assert [m.step for m in cpu] == list(range(len(cpu)))  # one step per sample


def test_multirun_nests_its_jobs_under_one_parent(sweep, capsys):
    client, sweep_dir, printed = sweep
    url = client.tracking_uri
    exp = client.get_experiment_by_name("sweep-test")
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep_parent") == "true"]
    children = [r for r in runs if r is not parent]
    assert parent.info.status == "FINISHED" and parent.data.tags["sweep"] == str(sweep_dir)
    assert "seed=0,1" in parent.data.tags["sweep_overrides"].split()
    assert {r.info.run_id for r in children} == set(printed)
    for r in children:
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert r.data.tags["sweep"] == str(sweep_dir)
        assert r.info.run_name == f"{r.data.tags['sweep_job']}: seed={r.data.params['seed']}"
    # the quality table reads the sweep back, by its parent or by its tag
    script = str(ROOT / "benchmarks" / "quality_table.py")
    for pick in (["--parent", parent.info.run_id], ["--sweep", "latest"], ["--sweep", str(sweep_dir)]):
        sys_argv = sys.argv
        sys.argv = [script, "--experiment", "sweep-test", "--tracking-uri", url, "--by", "seed", *pick]
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            sys.argv = sys_argv
        table = [line.split("|") for line in capsys.readouterr().out.splitlines() if line.startswith("| welded_beam")]
        assert sorted(cells[2].strip() for cells in table) == ["0", "1"], table
        for cells in table:
            (child,) = [r for r in children if r.data.params["seed"] == cells[2].strip()]
            assert cells[3].strip() == "1"  # runs
            assert float(cells[4]) == pytest.approx(child.data.metrics["final_best_f"], rel=1e-6)


def test_jobs_that_open_a_parent_at_once_keep_one(mlflow_server):
    """Without the Hydra callback (or in another experiment) each job looks the parent up by its
    tag and opens it if it is missing; two jobs that do so at the same moment keep one."""
    client = MlflowClient(tracking_uri=mlflow_server)
    exp_id = experiment_id(client, "parent-race")
    first = find_or_create_parent(client, exp_id, "multirun/x")
    assert find_or_create_parent(client, exp_id, "multirun/x") == first  # found by its tag

    class LateJob:
        """A job whose first look-up ran before ``first`` existed."""

        looked = False

        def __getattr__(self, name):
            return getattr(client, name)

        def search_runs(self, *args, **kwargs):
            looked, self.looked = self.looked, True
            return client.search_runs(*args, **kwargs) if looked else []

    assert find_or_create_parent(LateJob(), exp_id, "multirun/x") == first
    assert [r.info.run_id for r in client.search_runs([exp_id])] == [first]  # the late job's parent is deleted
    assert find_or_create_parent(client, exp_id, "multirun/y") != first  # another sweep, another parent
