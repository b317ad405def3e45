"""Sweeps as users run them (docs/sweeps.md): an Optuna search over DE's F and CR
(``hparams_search=de_optuna``, hydra-optuna-sweeper) and a sweep whose jobs run as Ray tasks on a
local Ray cluster of three nodes (``hydra/launcher=ray_cluster``, hydra-ray-launcher)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from isles.app.job import run_job  # also registers the typed schema that conf/config.yaml names
from omegaconf import OmegaConf

from tests.helpers import make_cfg

ROOT = Path(__file__).resolve().parents[1]

#: a de_islands run small enough for CI: 2 islands of 10 on Rastrigin D=5, 20 generations
TINY = [
    "+experiment=de_islands",
    "logger=none",
    "progress=false",
    "generations=20",
    "islands.n=2",
    "algorithm.pop_size=10",
    "problem.dim=5",
    "device=cpu",
]
RESULT = re.compile(r"isles: best f=(\S+) ")
#: a custom resource that only the cluster's worker nodes have: a job that needs it runs on one of them
WORKER = "isles_sweep_node"


def run_sweep(*overrides: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python run.py -m OVERRIDES`` from the checkout, as a user types it."""
    return subprocess.run(
        [sys.executable, "run.py", "-m", *overrides], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def job_config(sweep_dir: Path, job: int):
    """The config Hydra composed for job ``job`` of a sweep (``SWEEP_DIR/JOB/.hydra/config.yaml``)."""
    return OmegaConf.load(sweep_dir / str(job) / ".hydra" / "config.yaml")


@pytest.mark.slow  # an Optuna sweep of whole runs
def test_optuna_sweep_minimises_the_best_f(tmp_path):
    n_trials = 4
    p = run_sweep(
        *TINY,
        "islands.n_actors=1",
        "hparams_search=de_optuna",
        f"hydra.sweeper.n_trials={n_trials}",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    printed = [float(v) for v in RESULT.findall(p.stdout)]  # one line per trial, in trial order
    assert len(printed) == n_trials, p.stdout[-3000:]
    assert sorted(d.name for d in tmp_path.iterdir() if d.is_dir()) == [str(i) for i in range(n_trials)]

    search = OmegaConf.load(ROOT / "conf" / "hparams_search" / "de_optuna.yaml").hydra.sweeper.params
    result = OmegaConf.load(tmp_path / "optimization_results.yaml")
    configs = [job_config(tmp_path, i) for i in range(n_trials)]
    tried = [{"algorithm.F": c.algorithm.F, "algorithm.CR": c.algorithm.CR} for c in configs]
    assert len({tuple(t.values()) for t in tried}) == n_trials  # a new (F, CR) for each trial
    for key in tried[0]:
        lo, hi = (float(v) for v in re.fullmatch(r"interval\((.+),(.+)\)", search[key].replace(" ", "")).groups())
        assert all(lo <= t[key] <= hi for t in tried), (key, tried)
        assert lo <= result.best_params[key] <= hi, (key, result.best_params[key])
    best = min(range(n_trials), key=printed.__getitem__)  # the trial that printed the lowest best f
    assert result.best_value == pytest.approx(printed[best], rel=1e-9)
    assert tried[best] == dict(result.best_params)


def test_ray_cluster_launcher_follows_ray_address():
    cfg = make_cfg("hydra/launcher=ray_cluster", "ray.address=10.0.0.1:6379", return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("RayLauncher")
    assert launcher.ray.init.address == "10.0.0.1:6379"
    assert launcher.ray.init.object_store_memory is None  # ray.init refuses it on a running cluster


@pytest.fixture
def ray_cluster(monkeypatch):
    """A Ray cluster of three nodes on this machine (``ray.cluster_utils.Cluster``): a head with 2
    CPUs and two worker nodes with 1 CPU and one unit of :data:`WORKER` each; shut down after."""
    from ray.cluster_utils import Cluster  # noqa: PLC0415

    # the nodes' workers import isles from this checkout (as an installed isles would be found)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, resources={WORKER: 1})
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def worker_logs(cluster) -> list[tuple[str, str]]:
    """``(node id, stdout)`` of every Ray worker process of ``cluster`` (its session's
    ``logs/worker-WORKERID-*.out``; the node comes from ``python-core-worker-WORKERID_PID.log``)."""
    logs = Path(cluster.head_node.get_session_dir_path()) / "logs"
    out = []
    for f in logs.glob("worker-*.out"):
        worker_id = f.name.split("-")[1]
        core = next(logs.glob(f"python-core-worker-{worker_id}_*.log"), None)
        node = re.search(r"node_id=([0-9a-f]+)", core.read_text()) if core else None
        out.append((node.group(1) if node else "", f.read_text()))
    return out


@pytest.mark.slow  # a multi-node Ray cluster
def test_ray_launcher_runs_a_sweep_on_a_multi_node_cluster(ray_cluster, tmp_path):
    # job 0: one island group, run in the task's own process; job 1: two groups, whose actors the
    # job starts on the cluster from inside its task (init_ray finds Ray already initialized)
    p = run_sweep(
        *TINY,
        "hydra/launcher=ray_cluster",
        f"hydra.launcher.ray.init.address={ray_cluster.address}",
        f"+hydra.launcher.ray.remote.resources={{{WORKER}:1}}",
        "islands.n_actors=1,2",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert [job_config(tmp_path, i).islands.n_actors for i in (0, 1)] == [1, 2]

    workers = {n.node_id for n in ray_cluster.list_all_nodes() if n is not ray_cluster.head_node}
    logs = worker_logs(ray_cluster)
    jobs = [
        (node, float(RESULT.search(text).group(1)))
        for node, text in logs
        if ":task_name:_run_job" in text and RESULT.search(text)
    ]
    assert len(jobs) == 2, logs  # both jobs finished, each printed its result in a Ray task
    assert all(node in workers for node, _ in jobs), (jobs, workers)  # on the cluster's worker nodes
    assert sum(":actor_name:IslandGroup" in text for _, text in logs) == 2  # job 1's actors

    # the same islands give the same result however they are grouped (counter-based random numbers)
    alone, _ = run_job(make_cfg(*TINY, "islands.n_actors=1", "quiet=true"), use_ray=False)
    assert [f for _, f in jobs] == pytest.approx([alone.best_f] * 2, rel=1e-9)


#: a user's problem that raises in its objective when ``fail`` is true (written into a test's tmp_path)
MAYBE_FAILS = '''
from isles.problems.base import Problem


class MaybeFails(Problem):
    """Sphere whose objective raises when ``fail`` is true (or a number >= ``threshold``)."""

    name = "maybe_fails"

    def __init__(self, dim=2, fail=False, threshold=0.5):
        super().__init__(dim, -1.0, 1.0)
        self.fail = float(fail) >= threshold

    def objective(self, X):
        if self.fail:
            raise RuntimeError("asked to fail")
        return (X ** 2).sum(axis=-1)
'''
#: a sweep job small enough for seconds: one island, three generations, in the driver's process
MINI = ["problem._target_=maybe_fails.MaybeFails", "generations=3", "islands.n=1", "progress=false", "device=cpu"]


def run_user_sweep(tmp_path: Path, *overrides: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python run.py -m OVERRIDES`` with :data:`MAYBE_FAILS` importable (``maybe_fails.py`` in
    ``tmp_path``, on ``PYTHONPATH``), the sweep's folders in ``tmp_path/sweep``."""
    (tmp_path / "maybe_fails.py").write_text(MAYBE_FAILS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run(
        [sys.executable, "run.py", "-m", *overrides, f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_a_failed_job_does_not_stop_the_sweep(tmp_path):
    # issue 25: job 1 raised SystemExit, which Hydra's launcher does not catch: job 2 never ran
    p = run_user_sweep(tmp_path, *MINI, "logger=none", "++problem.fail=false,true,false")
    assert p.returncode == 1, p.stderr[-3000:]
    assert len(RESULT.findall(p.stdout)) == 2, p.stdout  # jobs 0 and 2 ran to their result
    assert (tmp_path / "sweep" / "2" / ".hydra" / "config.yaml").is_file()
    assert job_config(tmp_path / "sweep", 2).problem.fail is False
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("isles:")]
    assert errors[0].startswith("isles: error: job 1: RuntimeError: asked to fail at ")  # when it failed
    assert errors[1:] == [  # at the end: one line per failed job
        "isles: error: 1 of 3 jobs of the sweep failed:",
        f"isles: job 1 (++problem.fail=True) failed: {errors[0].removeprefix('isles: error: job 1: ')}",
    ]
    assert "maybe_fails.py:" in errors[-1] and "Traceback" not in p.stderr


@pytest.mark.slow  # three MLflow runs and their parent
def test_failed_sweep_jobs_are_failed_in_mlflow(tmp_path):
    from mlflow.tracking import MlflowClient  # noqa: PLC0415

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p = run_user_sweep(
        tmp_path,
        *MINI,
        f"logger.tracking_uri={store}",
        "logger.experiment_name=fails",
        "logger.wait=true",  # each job waits for its MLflow record (read back below)
        "++problem.fail=true,false,true",
    )
    assert p.returncode == 1, p.stderr[-3000:]
    assert [ln.split(" failed:")[0] for ln in p.stderr.splitlines() if ln.startswith("isles: job ")] == [
        "isles: job 0 (++problem.fail=True)",
        "isles: job 2 (++problem.fail=True)",
    ]
    client = MlflowClient(tracking_uri=store)
    # the experiment that the sweep created keeps its artifacts beside the store, not in the checkout's mlruns
    assert client.get_experiment_by_name("fails").artifact_location == f"{(tmp_path / 'mlruns').as_uri()}/fails"
    runs = client.search_runs([client.get_experiment_by_name("fails").experiment_id])
    jobs = {r.data.tags["sweep_job"]: r.info.status for r in runs if "sweep_job" in r.data.tags}
    assert jobs == {"0": "FAILED", "1": "FINISHED", "2": "FAILED"}
    errors = {r.data.tags["sweep_job"]: r.data.tags.get("isles.error") for r in runs if "sweep_job" in r.data.tags}
    printed = dict(
        ln.removeprefix("isles: error: job ").split(": ", 1)
        for ln in p.stderr.splitlines()
        if ln.startswith("isles: error: job ")
    )
    assert errors == {"0": printed["0"], "1": None, "2": printed["2"]}  # each failed job's own line
    (parent,) = [r for r in runs if r.data.tags.get("sweep_parent") == "true"]
    assert parent.info.status == "FAILED"  # a sweep with failed jobs


def test_a_bad_value_stops_the_sweep_before_its_first_job(tmp_path):
    # issue 25: job 0 ran, then job 1 failed on algorithm.F=5
    p = run_sweep(
        "+experiment=de_islands",
        "logger=none",
        "generations=3",
        "device=cpu",
        "algorithm.F=0.5,5,0.6",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        timeout=120,
    )
    assert p.returncode == 2, p.stderr[-3000:]
    assert p.stderr.strip().splitlines() == [
        "isles: error: job 1 (algorithm.F=5): algorithm.F=5: allowed values are numbers > 0 and <= 2; "
        "no job of the sweep was started"
    ]
    assert not RESULT.search(p.stdout) and not (tmp_path / "sweep").exists()


def test_a_bad_budget_stops_the_sweep_before_its_first_job(tmp_path):
    # the sweep's check is the run's own (app/job.prepare): stop.max_evaluations included
    p = run_sweep(
        "+experiment=de_islands",
        "logger=none",
        "device=cpu",
        "stop.max_evaluations=5000,2.5",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        timeout=120,
    )
    assert p.returncode == 2, p.stderr[-3000:]
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("isles: error: job 1 (stop.max_evaluations=2.5): stop.max_evaluations=2.5"), line
    assert not RESULT.search(p.stdout) and not (tmp_path / "sweep").exists()


def test_a_bad_user_problem_value_stops_the_sweep_before_its_first_job(tmp_path):
    # build_problem's check (the class's own arguments), run on every job before the first starts
    p = run_user_sweep(tmp_path, *MINI, "logger=none", "++problem.dim=2,0")
    assert p.returncode == 2, p.stderr[-3000:]
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("isles: error: job 1 (++problem.dim=0): problem.dim=0"), line
    assert not RESULT.search(p.stdout)


@pytest.mark.slow  # an Optuna search of whole runs
def test_optuna_search_goes_on_after_a_failed_trial(tmp_path):
    # with the sampler's seed 0, the trials draw problem.fail = 0.60, 0.65, 0.96, 0.53: trial 2 fails
    p = run_user_sweep(
        tmp_path,
        *MINI,
        "logger=none",
        "hparams_search=de_optuna",
        "algorithm=de",
        "algorithm.pop_size=10",
        "++problem.threshold=0.9",
        "++problem.fail=interval(0.0,1.0)",
        "hydra.sweeper.n_trials=4",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    fails = [job_config(tmp_path / "sweep", i).problem.fail >= 0.9 for i in range(4)]
    assert fails.count(True) == 1 and len(RESULT.findall(p.stdout)) == 3, (fails, p.stdout)
    failed = fails.index(True)
    assert f"isles: error: job {failed}: RuntimeError: asked to fail" in p.stderr
    result = OmegaConf.load(tmp_path / "sweep" / "optimization_results.yaml")
    assert result.best_params["++problem.fail"] < 0.9  # the failed trial was told to Optuna as failed


def test_runs_and_sweeps_without_any_hydra_plugin_installed(tmp_path):
    """``pip install -e .`` (no extras) has no ``hydra_plugins`` package: isles' sweeper must not
    need one (the README's first command failed on a fresh clone with ModuleNotFoundError)."""
    code = (
        "import runpy, sys; sys.modules['hydra_plugins'] = None; sys.argv = ['run.py'] + sys.argv[1:]; "
        "runpy.run_path({!r}, run_name='__main__')".format(str(ROOT / "run.py"))
    )
    for args in (
        ["+experiment=cmepso", "device=cpu", "logger=none", "generations=3", "progress=false"],
        [
            "-m",
            "+experiment=cmepso",
            "device=cpu",
            "logger=none",
            "generations=3",
            "progress=false",
            "seed=1,2",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
    ):
        p = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )
        assert p.returncode == 0, p.stderr[-2000:]
        assert len(RESULT.findall(p.stdout)) == (2 if "-m" in args else 1), p.stdout
