"""Faults: an island-group actor killed with SIGKILL mid-run is restarted by Ray from the last
snapshot, and the run ends with exactly the result of an uninterrupted run (NumPy, sync mode);
a resume under a changed config is refused with the fields that differ."""
import os
import signal

import numpy as np
import pytest
from hydra.utils import instantiate

from islands import checkpoint
from islands.coordinator import Coordinator
from tests.helpers import make_cfg, plain

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DE = ["+experiment=de_islands", "problem._target_=tests.user_problems.SlowSphere", "problem.dim=6",
      "+problem.delay_s=0.004", "algorithm.pop_size=12", "generations=120", "islands.n=4",
      "islands.migration_interval=10", "islands.snapshot_every=3", "logger=none", "progress=false",
      "device=cpu"]


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="error", configure_logging=False)
    yield ray
    ray.shutdown()


class KillAt:
    """Callback: SIGKILL the actor of group ``group`` when epoch ``epoch`` is published (once)."""

    def __init__(self, epoch: int, group: int = 0):
        self.epoch, self.group, self.pids, self.killed = epoch, group, [], False

    def on_start(self, info):
        self.pids = [g["pid"] for g in info["groups"]]

    def on_epoch(self, rec):
        if rec["epoch"] == self.epoch and not self.killed:
            self.killed = True
            os.kill(self.pids[self.group], signal.SIGKILL)


def coordinator(*overrides, callbacks=(), use_ray=True):
    cfg = plain(make_cfg(*DE, *overrides))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, callbacks=callbacks, use_ray=use_ray)


@pytest.mark.parametrize("n_actors", [2, 1])  # 2: the driver's loop; 1: the loop inside the actor
def test_killed_actor_is_restarted_and_the_result_is_unchanged(ray_local, n_actors, caplog):
    reference = coordinator(f"islands.n_actors={n_actors}").run()
    kill = KillAt(epoch=5)
    with caplog.at_level("WARNING", logger="islands.coordinator"):
        result = coordinator(f"islands.n_actors={n_actors}", callbacks=[kill]).run()
    assert kill.killed
    assert "died" in caplog.text and "snapshot of epoch" in caplog.text  # it was restarted mid-run
    assert result.best_f == reference.best_f
    np.testing.assert_array_equal(result.best_x, reference.best_x)
    np.testing.assert_array_equal(result.history[-1]["island_best_f"], reference.history[-1]["island_best_f"])
    assert [h["epoch"] for h in result.history] == list(range(1, 13))


def test_without_restarts_a_killed_actor_ends_the_run(ray_local):
    from ray.exceptions import RayActorError

    with pytest.raises(RayActorError):
        coordinator("islands.n_actors=2", "islands.max_restarts=0", callbacks=[KillAt(epoch=2)]).run()


def test_resume_refuses_a_changed_config(tmp_path):
    path = tmp_path / "ck.pkl"
    coordinator("generations=40", "checkpoint.every=2", f"checkpoint.path={path}", use_ray=False).run()
    assert checkpoint.load(path)["epoch"] == 4
    with pytest.raises(ValueError, match=r"algorithm.F: saved 0.5, now 0.7"):
        coordinator(f"checkpoint.resume={path}", "algorithm.F=0.7", use_ray=False).run()
    resumed = coordinator(f"checkpoint.resume={path}", use_ray=False).run()  # same config: goes on
    assert resumed.generations == 120
