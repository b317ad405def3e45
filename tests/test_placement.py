"""Placement on a cluster's nodes without Ray (:func:`isles.islands.control.placement.plan_nodes` over
node lists as ``ray.nodes()`` gives them), the placement fields' one-line errors before Ray
starts, and how a group's place is written. The placement groups themselves run on a real
multi-node cluster in ``tests/test_multinode.py``."""

import numpy as np
import pytest
from isles.app.job import validate
from isles.islands.control.placement import STRATEGIES, needs_ray, plan_nodes, where

from tests.helpers import make_cfg, plain

HEAD = {"node_id": "h0", "ip": "10.0.0.1", "CPU": 4.0, "GPU": 0.0}
GPU_A = {"node_id": "a1", "ip": "10.0.0.2", "CPU": 8.0, "GPU": 2.0}
GPU_B = {"node_id": "b2", "ip": "10.0.0.3", "CPU": 8.0, "GPU": 4.0}
CLUSTER = [HEAD, GPU_A, GPU_B]


def isl(**fields):
    return {"placement": "spread", "n_nodes": None, "n_actors": None, "migration_interval": 10, **fields}


def test_one_actor_per_gpu_of_every_node_by_default():
    p = plan_nodes(12, "auto", isl(), CLUSTER)
    assert p.use_gpu and len(p.groups) == 6 and p.bundle == {"GPU": 1}
    assert p.strategy == "spread" and p.node_ids is None  # any node; Ray spreads the bundles
    cpu = plan_nodes(40, "cpu", isl(), CLUSTER)  # device=cpu on the same cluster: one CPU actor
    assert not cpu.use_gpu and len(cpu.groups) == 1 and cpu.bundle == {"CPU": 1}
    assert len(plan_nodes(40, "cpu", isl(n_actors=20), CLUSTER).groups) == 20  # unless the run asks for more


def test_n_nodes_keeps_the_nodes_with_the_most_gpus():
    p = plan_nodes(12, "auto", isl(n_nodes=1), CLUSTER)
    assert p.node_ids == ("b2",) and len(p.groups) == 4
    assert plan_nodes(12, "auto", isl(n_nodes=2), CLUSTER).node_ids == ("b2", "a1")
    with pytest.raises(
        ValueError, match=r"islands.n_nodes=3: the cluster has 2 nodes with a GPU; allowed values are null or 1..2"
    ):
        plan_nodes(12, "auto", isl(n_nodes=3), CLUSTER)


def test_strict_spread_is_one_actor_per_node():
    p = plan_nodes(12, "auto", isl(placement="strict_spread"), CLUSTER)
    assert len(p.groups) == 2 and p.strategy == "strict_spread"
    with pytest.raises(
        ValueError,
        match=r"islands.n_actors=3: islands.placement=strict_spread puts one actor per "
        r"node, and 2 nodes have a GPU; allowed values are 1..2",
    ):
        plan_nodes(12, "auto", isl(placement="strict_spread", n_actors=3), CLUSTER)


def test_more_cpu_actors_than_cpus_is_refused():
    with pytest.raises(
        ValueError, match=r"islands.n_actors=5: each actor takes one CPU and Ray offers 4 here; allowed values are 1..4"
    ):
        plan_nodes(8, "cpu", isl(n_actors=5), [HEAD])
    assert len(plan_nodes(8, "cpu", isl(n_actors=4), [HEAD]).groups) == 4


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["islands.placement=scatter"], "islands.placement='scatter': allowed values are " + "|".join(STRATEGIES)),
        (["islands.n_nodes=0"], "islands.n_nodes=0: allowed values are integers >= 1"),
        (["islands.n_nodes=2"], "islands.n_nodes=2: a local Ray has one node; allowed values here are null or 1"),
    ],
)
def test_placement_fields_are_checked_before_ray_starts(overrides, message):
    with pytest.raises(ValueError) as err:
        validate(plain(make_cfg("+experiment=de_islands", "logger=none", *overrides)))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_strict_spread_on_a_local_ray_is_one_group_without_ray():
    cfg = plain(make_cfg("+experiment=de_islands", "logger=none", "device=cpu", "islands.placement=strict_spread"))
    assert not needs_ray(cfg)  # one node, so one actor: the run stays in this process


def test_where_names_the_device_gpu_and_node():
    info = {
        "device": "NVIDIA H100",
        "host": "gpu-7",
        "ray_gpu_ids": ["1"],
        "node_id": "49d7afe39719a8ea",
        "node_ip": "10.0.0.7",
        "island_ids": [0, 1],
    }
    assert where(info) == "NVIDIA H100 (GPU 1), node 49d7afe3 at 10.0.0.7 (gpu-7)"
    assert where({"device": "cpu", "host": "laptop", "ray_gpu_ids": [], "node_id": None}) == "cpu (laptop)"


# -- sync mode: islands spread over the actors by measured cost, bit for bit (issue 27) ----------


def test_balanced_moves_the_costly_islands_apart_and_only_where_it_pays():
    from isles.islands.control.placement import balanced

    # islands 0 and 1 cost five times 2 and 3: one of each per actor takes 40% off the busiest
    assert balanced([[0, 1], [2, 3]], {0: 5.0, 1: 5.0, 2: 1.0, 3: 1.0}) == [[0, 2], [1, 3]]
    assert balanced([[0, 2], [1, 3]], {0: 3.0, 1: 3.0, 2: 3.0, 3: 3.0}) is None  # balanced already
    assert balanced([[0, 1], [2, 3]], {0: 1.05, 1: 1.0, 2: 1.0, 3: 1.0}) is None  # a gain under 10%
    three = balanced([[0, 1, 2], [3, 4, 5]], {0: 4.0, 1: 4.0, 2: 4.0, 3: 1.0, 4: 1.0, 5: 1.0})
    assert three is not None and sorted(i for g in three for i in g) == list(range(6)) and all(three)


@pytest.mark.parametrize(
    "cost, moves",
    [
        ({0: 5.0, 1: 5.0, 2: 1.0, 3: 1.0}, ["[[0, 2], [1, 3]]"]),
        # one costly island: the even split first moves 1 (as costly as 0 in the estimate), which
        # tells them apart; then 0 alone, and no more moves (no back and forth)
        ({0: 5.0, 1: 1.0, 2: 1.0, 3: 1.0}, ["[[0, 2], [1, 3]]", "[[0], [1, 2, 3]]"]),
    ],
)
def test_sync_islands_moved_by_cost_keep_the_run_bit_for_bit(monkeypatch, caplog, tmp_path, cost, moves):
    """Two in-process actors whose measured CPU time says some islands cost five times the others:
    the islands move between spans until the busiest actor carries what a placement by cost gives
    it, and the run is the one-actor run, record for record (only which actor runs which island
    changed)."""
    from hydra.utils import instantiate
    from isles.islands.control import placement
    from isles.islands.coordinator import Coordinator

    def measured(self):  # each actor's (pid, process CPU seconds), as psutil would give them
        spent = [
            s + sum(cost[i] for i in info["island_ids"])
            for s, info in zip(getattr(self, "spent", [0, 0]), self.ex.infos, strict=False)
        ]
        self.spent = spent
        return [(i, s) for i, s in enumerate(spent)]

    def run(n_actors):
        cfg = plain(
            make_cfg(
                "+experiment=de_islands",
                "problem=sphere",
                "problem.dim=4",
                "algorithm.pop_size=8",
                "generations=40",
                "islands.n=4",
                "islands.migration_interval=2",
                f"islands.n_actors={n_actors}",
                "checkpoint.every=4",  # spans of at most 4 epochs: a move may follow each
                f"checkpoint.path={tmp_path / 'ck.pkl'}",
                "logger=none",
                "progress=false",
                "device=cpu",
            )
        )
        return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()

    reference = run(1)
    monkeypatch.setattr(placement.Balancer, "measure", measured)
    with caplog.at_level("INFO", logger="isles.islands.coordinator"):
        moved = run(2)
    said = [r.getMessage() for r in caplog.records if "measured cost" in r.getMessage()]
    assert said == [f"islands spread over the actors by measured cost: {m}" for m in moves]
    assert moved.best_f == reference.best_f and np.array_equal(moved.best_x, reference.best_x)
    assert len(moved.history) == len(reference.history) == 20
    for a, b in zip(moved.history, reference.history, strict=False):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
    assert moved.evaluations == reference.evaluations and moved.migrations == reference.migrations
