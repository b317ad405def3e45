"""The island runtime without Ray: coordinator, groups, migration, master swarm, reproducibility."""

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.islands.config.schema import validated
from isles.islands.control.placement import plan, split
from isles.islands.coordinator import Coordinator

from tests.helpers import make_cfg, plain

SMALL = [
    "problem=sphere",
    "problem.dim=4",
    "algorithm.n_particles=8",
    "algorithm.n_replicas=2",
    "generations=12",
    "islands.n=4",
    "islands.migration_interval=3",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def run_local(*overrides, n_actors=1):
    cfg = plain(make_cfg(*SMALL, *overrides, f"islands.n_actors={n_actors}"))
    plugins = [instantiate(p) for p in cfg["plugins"]]
    return Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=False).run()


def test_split_and_plan():
    assert split(5, 2) == [[0, 1, 2], [3, 4]]
    p = plan(10, "auto", None, {"CPU": 2})  # without GPUs: one actor for all islands (issue 16 §4)
    assert p.groups == [list(range(10))] and not p.use_gpu
    assert plan(10, "auto", 2, {"CPU": 2}).groups == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert len(plan(8, "auto", None, {"CPU": 16, "GPU": 2}).groups) == 2
    with pytest.raises(ValueError, match="islands.n=-1"):  # the schema's check, before any plan (issue 19)
        validated({"islands": {"n": -1}, "device": "cpu"})
    with pytest.raises(ValueError, match="device=gpu"):
        plan(4, "gpu", None, {"CPU": 2})


def test_run_is_reproducible_and_independent_of_placement():
    a = run_local("topology=ring", n_actors=1)
    b = run_local("topology=ring", n_actors=1)
    c = run_local("topology=ring", n_actors=2)
    assert a.best_f == b.best_f
    np.testing.assert_array_equal(a.best_x, b.best_x)
    # counter-based streams per island: the same islands give the same run however they are grouped
    np.testing.assert_array_equal(a.history[-1].island_best_f, c.history[-1].island_best_f)
    d = run_local("topology=ring", "seed=1")
    assert d.best_f != a.best_f


def test_counters_and_history():
    r = run_local()
    assert r.generations == 12 and len(r.history) == 4
    gens = [h.generation for h in r.history]
    assert gens == [3, 6, 9, 12]
    # EPSO evaluates N (1 + R) candidates per island per generation plus N at initialisation
    assert r.evaluations == 4 * (8 + 12 * 8 * 3)
    best = [h.best_f for h in r.history]
    assert all(b2 <= b1 for b1, b2 in zip(best, best[1:], strict=False))


def test_ring_migration_moves_bests_to_neighbours():
    r = run_local("topology=ring_one_way", "islands.migration_interval=1", "generations=4")
    assert r.migrations, "a ring must migrate"
    prev = r.history[0].island_best_f
    after = r.history[1].island_best_f
    n = len(prev)
    for dst in range(n):  # island dst received island dst-1's best at the start of epoch 2
        assert after[dst] <= prev[(dst - 1) % n] + 1e-12
    assert {(m[1], m[2]) for m in r.migrations} <= {((d - 1) % n, d) for d in range(n)}


def test_unconnected_islands_do_not_migrate():
    assert run_local("topology=unconnected").migrations == []


def test_master_swarm_counts_and_improves():
    r = run_local(
        "+experiment=cmepso",
        "islands.n=3",
        "generations=6",
        "plugins.0.n_particles=4",
        "plugins.0.n_replicas=2",
        "islands.migration_interval=1",
    )
    assert "master_best_f" in r.history[-1].plugin_metrics
    slaves = 3 * (8 + 6 * 8 * 3)
    assert r.evaluations == slaves + 6 * 4 * 3
    assert r.best_f <= min(r.history[-1].island_best_f)


def test_bad_islands_values():
    for override, field in [
        ("islands.n=0", "islands.n"),
        ("islands.migration_interval=0", "islands.migration_interval"),
        ("islands.mode=lazy", "islands.mode"),
        ("generations=0", "generations"),
    ]:
        with pytest.raises(ValueError, match=field):
            run_local(override)


def test_checkpoint_resume_continues_exactly(tmp_path):
    # a run stopped after 6 of 12 generations (its schedule still spans 12), then resumed
    path = str(tmp_path / "ck.pkl")
    full = run_local("topology=ring", "generations=12", "algorithm.max_iterations=12")
    run_local(
        "topology=ring", "generations=6", "algorithm.max_iterations=12", "checkpoint.every=1", f"checkpoint.path={path}"
    )
    resumed = run_local("topology=ring", "generations=12", "algorithm.max_iterations=12", f"checkpoint.resume={path}")
    assert resumed.best_f == full.best_f
    np.testing.assert_array_equal(resumed.history[-1].island_best_f, full.history[-1].island_best_f)
    assert [h.generation for h in resumed.history] == [3, 6, 9, 12]
    with pytest.raises(ValueError, match="checkpoint.resume"):
        run_local("topology=ring", "generations=12", f"checkpoint.resume={path}", "seed=5")
    with pytest.raises(ValueError, match="checkpoint.resume"):
        run_local(f"checkpoint.resume={tmp_path / 'missing.pkl'}")


def test_checkpoint_resume_with_master_swarm(tmp_path):
    path = str(tmp_path / "ck.pkl")
    over = [
        "+experiment=cmepso",
        "islands.n=3",
        "plugins.0.n_particles=4",
        "plugins.0.n_replicas=2",
        "islands.migration_interval=2",
        "algorithm.max_iterations=8",
        "plugins.0.max_iterations=8",
    ]
    full = run_local(*over, "generations=8")
    run_local(*over, "generations=4", "checkpoint.every=2", f"checkpoint.path={path}")
    assert run_local(*over, "generations=8", f"checkpoint.resume={path}").best_f == full.best_f


def test_master_sends_its_best_to_every_island():
    r = run_local(
        "+experiment=cmepso",
        "islands.n=3",
        "generations=4",
        "plugins.0.n_particles=4",
        "plugins.0.n_replicas=2",
        "islands.migration_interval=1",
        "plugins.0.sends_best=true",
    )
    sources = {m[1] for m in r.migrations}
    assert sources == {-1} and {m[2] for m in r.migrations} == {0, 1, 2}


DE_SMALL = [
    "+experiment=de_islands",
    "problem=sphere",
    "problem.dim=4",
    "algorithm.pop_size=12",
    "generations=40",
    "islands.n=4",
    "islands.migration_interval=2",
    "islands.snapshot_every=4",
    "logger=none",
    "progress=false",
    "device=cpu",
]


def run_de(*overrides, n_actors=1):
    cfg = plain(make_cfg(*DE_SMALL, *overrides, f"islands.n_actors={n_actors}"))
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()


@pytest.mark.parametrize(
    "extra",
    [
        [
            "+plugin=master_swarm",
            "plugins.0.sends_best=true",
            "topology=ring",
            "islands.migration_interval=1",
            "generations=30",
        ],
        ["DE"],
    ],
)
def test_batched_epochs_equal_epoch_by_epoch(monkeypatch, tmp_path, extra):
    """One in-process group runs its epochs in spans on the device (``IslandGroup.run_span``, a
    replica of the master swarm beside the slaves); the run is the same as epoch by epoch (spans of
    one) and as two in-process groups (one thread each, a replica in each): every epoch's record,
    migration and result."""
    from isles.islands.control import sync_loop

    ck = [f"checkpoint.path={tmp_path}/ck.pkl", "checkpoint.every=5"]
    from isles.islands.group import IslandGroup

    run, extra = (run_de, []) if extra == ["DE"] else (run_local, extra)
    sizes, run_span = [], IslandGroup.run_span
    monkeypatch.setattr(
        IslandGroup, "run_span", lambda self, order: sizes.append(len(order.ks)) or run_span(self, order)
    )
    batched = run(*extra, *ck)
    assert max(sizes) > 1  # batches of several epochs did run
    monkeypatch.setattr(sync_loop, "MAX_BATCH", 1)
    single = run(*extra, *ck)
    monkeypatch.undo()
    two = run(*extra, n_actors=2)
    assert len(batched.history) == len(single.history) > 5
    for other in (single, two):
        assert batched.best_f == other.best_f and batched.evaluations == other.evaluations
        np.testing.assert_array_equal(batched.best_x, other.best_x)
        assert batched.migrations == other.migrations and batched.nan_evals == other.nan_evals
        for a, b in zip(batched.history, other.history, strict=False):
            for key in ("best_f", "best_v", "evaluations", "generation", "master_best_f", "migrations_accepted"):
                assert a.metrics().get(key) == b.metrics().get(key), (a.epoch, key)
            np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
    if "+plugin=master_swarm" in extra:
        assert "master_best_f" in batched.history[-1].plugin_metrics and any(m[1] == -1 for m in batched.migrations)


def test_two_plug_ins_run_side_by_side_in_every_grouping():
    """Two master swarm plug-ins (``plugins`` is a list), each sending its best to every island:
    their migrants come from sources -1 and -3 (never the route's padding), their evaluations add
    up, and the run is the same in one group and in two in-process groups, bit for bit."""
    from isles.islands.migration.moves import PAD  # noqa: PLC0415
    from isles.islands.plugin import source_id  # noqa: PLC0415

    def go(n_actors):
        cfg = plain(
            make_cfg(
                "+experiment=cmepso",
                "islands.n=3",
                "generations=6",
                "plugins.0.n_particles=4",
                "plugins.0.n_replicas=2",
                "plugins.0.sends_best=true",
                "islands.migration_interval=1",
                *SMALL[:4],
                "logger=none",
                "progress=false",
                "device=cpu",
                f"islands.n_actors={n_actors}",
            )
        )
        cfg["plugins"] = [cfg["plugins"][0], {**cfg["plugins"][0], "n_particles": 3}]
        plugins = [instantiate(p) for p in cfg["plugins"]]
        return Coordinator(cfg, instantiate(cfg["topology"]), plugins, use_ray=False).run()

    one, two = go(1), go(2)
    assert [source_id(j) for j in range(3)] == [-1, -3, -4] and PAD not in [source_id(j) for j in range(9)]
    assert {m[1] for m in one.migrations} == {-1, -3}
    slaves = 3 * (8 + 6 * 8 * 3)
    assert one.evaluations == slaves + 6 * 4 * 3 + 6 * 3 * 3  # both plug-ins' evaluations
    assert one.best_f == two.best_f and one.migrations == two.migrations and one.evaluations == two.evaluations
    for a, b in zip(one.history, two.history, strict=True):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
        assert a.plugin_metrics["master_best_f"] == b.plugin_metrics["master_best_f"]
