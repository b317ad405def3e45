"""A user's topology as docs/architecture.md writes it (issue 34): ``topology={_target_:
my_module.MyTopology}`` over an experiment's ``ring`` replaces the node (not merged into the ring's
``bidirectional`` and ``weight``), as does ``topology._target_=...``; a topology picked by name
keeps the experiment's settings (app/overrides.py typed_class_node)."""

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.app.job import prepare
from isles.app.overrides import typed_class_node
from isles.islands.coordinator import Coordinator

from tests.helpers import make_cfg, plain
from tests.migration_policies import Chain

CHAIN = "tests.migration_policies.Chain"
DE = [
    "+experiment=de_islands",  # its topology: the ring (bidirectional, weight 1)
    "problem=sphere",
    "problem.dim=4",
    "algorithm.pop_size=8",
    "generations=8",
    "islands.n=4",
    "islands.migration_interval=2",
    "logger=none",
    "progress=false",
    "device=cpu",
]


@pytest.mark.parametrize(
    "overrides, node",
    [
        (["topology={_target_: " + CHAIN + "}"], {"_target_": CHAIN}),
        (["topology={_target_: " + CHAIN + ", weight: 0.5}"], {"_target_": CHAIN, "weight": 0.5}),
        (["topology._target_=" + CHAIN, "topology.weight=0.5"], {"_target_": CHAIN, "weight": 0.5}),
        (["~topology", "+topology={_target_: " + CHAIN + "}"], {"_target_": CHAIN}),
    ],
)
def test_a_topology_named_by_target_replaces_the_experiments_node(overrides, node):
    cfg = make_cfg(*DE, *overrides, return_hydra_config=True)
    assert plain(make_cfg(*DE, *overrides))["topology"] == node  # as tests compose it
    topology = prepare(cfg).topology  # as the job builds it (its own hydra node's overrides)
    assert isinstance(topology, Chain) and topology.weight == node.get("weight", 1.0)


def test_a_topology_picked_by_name_or_changed_by_key_keeps_the_experiments_settings():
    ring = plain(make_cfg(*DE))["topology"]
    assert ring["bidirectional"] is True
    for overrides in (["topology.weight=0.5"], ["topology=ring_one_way"]):
        node = plain(make_cfg(*DE, *overrides))["topology"]
        assert typed_class_node(node, overrides, "topology") == node and "bidirectional" in node


def test_a_run_with_a_users_topology_migrates_along_its_edges_only():
    cfg = plain(make_cfg(*DE, "topology={_target_: " + CHAIN + "}"))
    result = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()
    edges = {(src, dst) for _, src, dst, _, _ in result.migrations}
    assert edges == {(0, 1), (1, 2), (2, 3)}  # the chain, not the experiment's two-way ring
    np.testing.assert_array_equal(Chain().weights(3), [[0, 1, 0], [0, 0, 1], [0, 0, 0]])
