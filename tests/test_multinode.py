"""A real multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``): a head node
without CPUs that runs the job server, and two worker nodes of 2 CPUs and one (logical) GPU each.

* DE islands run through ``ray.address`` (:func:`isles.app.job.run_job`, the code path of
  ``python run.py ... ray.address=HOST:PORT``) and through ``ray job submit`` against the head
  (``python run.py ... ray.address=auto``, read back from MLflow): the island groups are placed
  on both worker nodes, migrants cross between nodes, and the result equals the in-process run of
  the same config bit for bit.
* GPU bundles: one actor per GPU, one per node under ``strict_spread``, each told its GPU id.
* A worker node lost mid-run (``Cluster.remove_node``): its island group is restarted on the other
  node from the last snapshot, and the result is again the in-process one. Under
  ``strict_spread`` the lost group has nowhere to go: the run stops with its snapshot, which
  resumes to that result.

One cluster for the module; the node-loss tests come last, since they remove nodes.
"""

import csv
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.app.job import run_job
from isles.app.ray_setup import init_ray
from isles.islands.control import checkpoint, sync_loop
from isles.islands.control.callbacks import Callback
from isles.islands.control.placement import actor_options, cluster_nodes, plan_nodes, ray_location, reserve
from isles.islands.coordinator import Coordinator, RestartFailed

from tests.helpers import make_cfg, plain

# slow: a real multi-node Ray cluster and ray job submit (CI runs them; the quick run -m "not slow" does not)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]

#: 4 DE islands on a two-way ring in 2 groups (islands 0-1 and 2-3): the ring's edges 1->2 and
#: 3->0 join islands of different groups, so of different nodes once the groups are spread
DE = [
    "+experiment=de_islands",
    "problem.dim=8",
    "algorithm.pop_size=12",
    "generations=80",
    "islands.n=4",
    "islands.migration_interval=10",
    "islands.n_actors=2",
    "islands.snapshot_every=2",
    "device=cpu",
]
QUIET = ["logger=none", "progress=false"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """``(Cluster, job server URL)``: the head (no CPUs, job server on 127.0.0.1) and two worker
    nodes of 2 CPUs and one logical GPU each; this process is connected to it as a driver, as
    ``run_job`` connects."""
    ray = pytest.importorskip("ray")
    from ray._private.utils import write_ray_address
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the local Ray a module before left (conftest.ray_local): this driver joins the cluster
        ray.shutdown()

    # each node a temp dir of its own, as on separate machines: nodes that shared one would unpack
    # the job's working_dir into the same folder, each removing the copy the others run in
    temp = [tempfile.mkdtemp(prefix="isles-node") for _ in range(3)]  # short: Unix socket paths
    port = _free_port()  # ports of our own: other Ray clusters may run on this machine
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": port,
            "dashboard_agent_listen_port": _free_port(),
            "metrics_export_port": _free_port(),
            "temp_dir": temp[0],
        },
    )
    try:
        for t in temp[1:]:
            c.add_node(num_cpus=2, num_gpus=1, temp_dir=t)  # a GPU in Ray's books only (no CUDA)
        c.wait_for_nodes()
        # where `ray start --head --temp-dir` leaves the address, for ray.address=auto on the head
        write_ray_address(c.address, temp[0])
        init_ray({"address": c.address})
        yield c, f"http://127.0.0.1:{port}"
    finally:
        ray.shutdown()
        c.shutdown()
        for t in temp:
            shutil.rmtree(t, ignore_errors=True)


@pytest.fixture(scope="module")
def reference():
    """The same islands in this process, without Ray (one group per actor of the cluster run)."""
    result, _ = run_job(make_cfg(*DE, *QUIET), use_ray=False)
    return result


def _assert_same_run(history: list, best_x, reference) -> None:
    """Every epoch's island bests, and the best x, equal the reference's bit for bit."""
    assert len(history) == len(reference.history)
    for got, want in zip(history, reference.history, strict=False):
        np.testing.assert_array_equal(got, want.island_best_f)
    np.testing.assert_array_equal(best_x, reference.best_x)


def _crossing(migrations, node_of: dict) -> list:
    """Migration events ``(epoch, src, dst, accepted, ...)`` whose source and destination islands
    ran on different nodes."""
    return [m for m in migrations if node_of[int(m[1])] != node_of[int(m[2])]]


def test_islands_spread_over_nodes_give_the_in_process_result(cluster, reference):
    c, _ = cluster
    result, _ = run_job(make_cfg(*DE, *QUIET, f"ray.address={c.address}", "islands.placement=strict_spread"))
    workers = {n.node_id for n in c.worker_nodes}
    assert set(result.nodes.values()) == workers  # one group on each worker node, none on the head
    crossing = _crossing(result.migrations, result.nodes)
    assert crossing and sum(m[3] for m in crossing) > 0  # migrants moved, and were taken, across nodes
    assert result.migrations == reference.migrations
    assert result.best_f == reference.best_f
    _assert_same_run([h.island_best_f for h in result.history], result.best_x, reference)


def test_ray_job_submit_gives_the_in_process_result(cluster, reference, tmp_path):
    from mlflow.tracking import MlflowClient

    c, url = cluster
    store = f"sqlite:///{tmp_path}/mlflow.db"
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "job",
            "submit",
            "--address",
            url,
            "--working-dir",
            str(ROOT),
            "--",
            "python",
            "run.py",
            *DE,
            "progress=false",
            f"logger.tracking_uri={store}",
            "logger.wait=true",  # the MLflow record is read back right after the job
            "ray.address=auto",
            f"hydra.run.dir={tmp_path}/out",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert job.returncode == 0 and "succeeded" in job.stdout + job.stderr, (job.stdout + job.stderr)[-3000:]
    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name("de-islands").experiment_id])
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    node_of = {int(i): tags[f"group_{g}.node_id"] for g in range(2) for i in tags[f"group_{g}.islands"].split(",")}
    assert set(node_of.values()) == {n.node_id for n in c.worker_nodes}  # spread over both worker nodes
    assert json.loads(tags["ray.cluster_resources"])["GPU"] == 2  # the cluster's, sent by the run's process

    def artifact(name):
        return Path(client.download_artifacts(run.info.run_id, name, str(tmp_path))).read_text()

    migrations = list(csv.DictReader(io.StringIO(artifact("migrations.csv"))))
    crossing = _crossing([(m["epoch"], m["src"], m["dst"], int(m["accepted"])) for m in migrations], node_of)
    assert crossing and sum(m[3] for m in crossing) > 0
    history = list(csv.DictReader(io.StringIO(artifact("history.csv"))))
    islands = [[float(h[f"island_{i:02d}_best_f"]) for i in range(4)] for h in history]
    _assert_same_run(islands, json.loads(artifact("best_solution.json"))["x"], reference)


def test_ray_job_submit_without_a_tracking_store_stops_before_evolving(cluster, tmp_path):
    """With no ``logger.tracking_uri``, the job would record its run in Ray's temporary copy of
    the working directory: it stops before evolving, with one line naming the field."""
    c, url = cluster
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "job",
            "submit",
            "--address",
            url,
            "--working-dir",
            str(ROOT),
            "--",
            "python",
            "run.py",
            *DE,
            "ray.address=auto",
            f"hydra.run.dir={tmp_path}/out",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    out = job.stdout + job.stderr
    lines = {ln for ln in out.splitlines() if "isles: error:" in ln}  # Ray shows the job's log twice
    assert len(lines) == 1, out[-3000:]
    (line,) = lines
    assert "logger.tracking_uri=null" in line and "working_dir_files" in line, out[-3000:]
    assert "failed" in out and "actors ready" not in out and "Traceback" not in out, out[-3000:]


def test_gpu_bundles_spread_one_per_node(cluster):
    import ray
    from ray.util.placement_group import remove_placement_group

    class _Where:  # defined here, so that Ray ships it by value (workers cannot import this module)
        """An actor that says where Ray placed it, as an island group does."""

        def where(self):
            return ray_location()

    c, _ = cluster
    p = plan_nodes(
        4,
        "auto",
        {"placement": "strict_spread", "migration_interval": 10, "n_nodes": None, "n_actors": None},
        cluster_nodes(),
    )
    assert p.use_gpu and p.bundle == {"GPU": 1} and len(p.groups) == 2
    pg = reserve(p)
    try:
        actors = [ray.remote(_Where).options(**actor_options(p, pg, i)).remote() for i in range(2)]
        places = ray.get([a.where.remote() for a in actors])
    finally:
        remove_placement_group(pg)
    assert {w["node_id"] for w in places} == {n.node_id for n in c.worker_nodes}
    assert [w["ray_gpu_ids"] for w in places] == [["0"], ["0"]]  # each node's GPU 0


class LoseNode(Callback):
    """Coordinator callback: remove the worker node of island group ``group`` from the cluster
    when epoch ``epoch`` is published (once)."""

    def __init__(self, cluster, epoch: int, group: int = 1):
        self.cluster, self.epoch, self.group = cluster, epoch, group
        self.node_id, self.islands, self.restarted = None, [], {}

    def on_start(self, info):
        g = info["groups"][self.group]
        self.node_id, self.islands = g["node_id"], g["island_ids"]

    def on_restart(self, info):
        self.restarted.update(info["groups"])

    def on_epoch(self, rec):
        if rec.epoch == self.epoch:
            (node,) = [n for n in self.cluster.worker_nodes if n.node_id == self.node_id]
            self.cluster.remove_node(node)
            self.epoch = None


def test_a_lost_node_s_islands_restart_elsewhere_with_the_same_result(cluster, reference, caplog, monkeypatch):
    c, _ = cluster
    monkeypatch.setattr(sync_loop, "BATCH_S", 0.0)  # spans of one epoch: the node is lost with epochs left to run
    cfg = plain(make_cfg(*DE, *QUIET))
    lose = LoseNode(c, epoch=3)
    with caplog.at_level("WARNING", logger="isles.islands.coordinator"):
        result = Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=[lose], use_ray=True).run()
    assert lose.epoch is None  # the node was removed after epoch 3 of 8
    # the last snapshot before the loss: epoch 2, or 4 where the span started ahead of epoch 3's books
    # (SyncLoop.start_ahead) had ended before the node went
    assert re.search(r"restored the snapshot of epoch [24] ", caplog.text) and "restarted on" in caplog.text
    survivor = {n.node_id for n in c.worker_nodes}
    assert lose.node_id not in survivor and {result.nodes[i] for i in lose.islands} == survivor
    assert list(lose.restarted) == [1] and lose.restarted[1]["node_id"] in survivor  # told to the callbacks
    assert result.best_f == reference.best_f
    _assert_same_run([h.island_best_f for h in result.history], result.best_x, reference)


def test_a_lost_node_with_nowhere_to_go_stops_the_run_with_its_snapshot(cluster, reference, tmp_path, monkeypatch):
    """``strict_spread`` over two workers, one lost: no node has room for its bundle, so the run
    stops within ``islands.restart_timeout_s`` with its last snapshot, which resumes to the
    uninterrupted result (the CLI writes it as a checkpoint and prints the resume command)."""
    c, _ = cluster
    monkeypatch.setattr(sync_loop, "BATCH_S", 0.0)  # spans of one epoch, as above
    c.add_node(num_cpus=2, num_gpus=1, temp_dir=tempfile.mkdtemp(prefix="isles-node"))  # two workers again
    c.wait_for_nodes()
    cfg = plain(make_cfg(*DE, *QUIET, "islands.placement=strict_spread", "islands.restart_timeout_s=5"))
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=[LoseNode(c, epoch=3)], use_ray=True)
    with pytest.raises(
        RestartFailed,
        match=r"islands.restart_timeout_s=5: island group\(s\) 1 lost .* "
        r"islands.placement=strict_spread\); .* epoch [24]$",
    ):  # as above
        coordinator.run()
    path = tmp_path / "checkpoint.pkl"
    checkpoint.save(path, coordinator.last_snapshot)
    resumed, _ = run_job(make_cfg(*DE, *QUIET, f"checkpoint.resume={path}"), use_ray=False)
    assert resumed.best_f == reference.best_f
    _assert_same_run([h.island_best_f for h in resumed.history], resumed.best_x, reference)
