"""Sweeps as users run them (README, Sweeps): an Optuna search over DE's F and CR
(``hparams_search=de_optuna``, hydra-optuna-sweeper) and a sweep whose jobs run as Ray tasks on a
local Ray cluster of three nodes (``hydra/launcher=ray_cluster``, hydra-ray-launcher)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from isles.app.job import run_job  # also registers the typed schema that conf/config.yaml names
from tests.helpers import make_cfg

ROOT = Path(__file__).resolve().parents[1]

#: a de_islands run small enough for CI: 2 islands of 10 on Rastrigin D=5, 20 generations
TINY = ["+experiment=de_islands", "logger=none", "progress=false", "generations=20", "islands.n=2",
        "algorithm.pop_size=10", "problem.dim=5", "device=cpu"]
RESULT = re.compile(r"isles: best f=(\S+) ")
#: a custom resource that only the cluster's worker nodes have: a job that needs it runs on one of them
WORKER = "isles_sweep_node"


def run_sweep(*overrides: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python run.py -m OVERRIDES`` from the checkout, as a user types it."""
    return subprocess.run([sys.executable, "run.py", "-m", *overrides], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def job_config(sweep_dir: Path, job: int):
    """The config Hydra composed for job ``job`` of a sweep (``SWEEP_DIR/JOB/.hydra/config.yaml``)."""
    return OmegaConf.load(sweep_dir / str(job) / ".hydra" / "config.yaml")


@pytest.mark.slow  # an Optuna sweep of whole runs
def test_optuna_sweep_minimises_the_best_f(tmp_path):
    n_trials = 4
    p = run_sweep(*TINY, "islands.n_actors=1", "hparams_search=de_optuna", f"hydra.sweeper.n_trials={n_trials}",
                  f"hydra.sweep.dir={tmp_path}")
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
    p = run_sweep(*TINY, "hydra/launcher=ray_cluster", f"hydra.launcher.ray.init.address={ray_cluster.address}",
                  f"+hydra.launcher.ray.remote.resources={{{WORKER}:1}}", "islands.n_actors=1,2",
                  f"hydra.sweep.dir={tmp_path}")
    assert p.returncode == 0, p.stderr[-3000:]
    assert [job_config(tmp_path, i).islands.n_actors for i in (0, 1)] == [1, 2]

    workers = {n.node_id for n in ray_cluster.list_all_nodes() if n is not ray_cluster.head_node}
    logs = worker_logs(ray_cluster)
    jobs = [(node, float(RESULT.search(text).group(1))) for node, text in logs
            if ":task_name:_run_job" in text and RESULT.search(text)]
    assert len(jobs) == 2, logs  # both jobs finished, each printed its result in a Ray task
    assert all(node in workers for node, _ in jobs), (jobs, workers)  # on the cluster's worker nodes
    assert sum(":actor_name:IslandGroup" in text for _, text in logs) == 2  # job 1's actors

    # the same islands give the same result however they are grouped (counter-based random numbers)
    alone, _ = run_job(make_cfg(*TINY, "islands.n_actors=1", "quiet=true"), use_ray=False)
    assert [f for _, f in jobs] == pytest.approx([alone.best_f] * 2, rel=1e-9)
